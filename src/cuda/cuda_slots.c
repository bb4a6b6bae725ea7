/* The CUDA backend's slot table, from KK_CUDA_OPS (cuda_kernels.h). */
#include "cuda/cuda_kernels.h"

const kk__slot *const kk__cuda_slots[KK__OP_COUNT] = {
#define KK__CUDA_SLOT_ENTRY(name) [KK__OP_ID_##name] = &kk__##name##_cuda_slot,
    KK_CUDA_OPS(KK__CUDA_SLOT_ENTRY)
#undef KK__CUDA_SLOT_ENTRY
};
