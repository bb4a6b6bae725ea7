/* Internal: the CUDA backend's kernels (one kk__slot per op that has one,
 * defined in its src/cuda/kernels/<op>.cu or src/cuda/<op>_cuda.c) and its
 * slot table (cuda_slots.c). */
#ifndef KK_CUDA_KERNELS_H
#define KK_CUDA_KERNELS_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ops with a CUDA kernel; adding a kernel to an op adds its line here. */
/* clang-format off */
#define KK_CUDA_OPS(X) \
    X(attention) X(attention_varlen) X(nvfp4_gemv) X(convert) X(gemm) X(linear) \
    X(rmsnorm) X(layernorm) X(softmax) X(rope) \
    X(add_rmsnorm) X(rmsnorm_fp8) X(silu_mul) X(rope_kv_append) X(fp8_gemm) \
    X(attention_backward) X(fp8_linear) X(nvfp4_gemm)
/* clang-format on */

#define KK__CUDA_SLOT_DECL(name) extern const kk__slot kk__##name##_cuda_slot;
KK_CUDA_OPS(KK__CUDA_SLOT_DECL)
#undef KK__CUDA_SLOT_DECL

/* By op id (KK__OP_COUNT entries). */
extern const kk__slot *const kk__cuda_slots[];

#ifdef __cplusplus
}
#endif
#endif
