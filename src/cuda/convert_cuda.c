/* convert on a GPU: kk__cuda_convert, the same rounding as the CPU's. */
#include <cuda_runtime_api.h>

#include "cuda/cuda_internal.h"
#include "cuda/cuda_kernels.h"
#include "cuda/dtype_cuda.h"
#include "opdef/convert.h"

/* The device is current (kk_op_run made it so); the conversion is queued on
 * `stream` and not waited for (the slot's contract). */
static kk_status convert_cuda(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    kk_status st = kk__convert_check_tensors(p, t, KK_BACKEND_CUDA);
    if (st != KK_OK) return st;
    return kk__cuda_convert(t[0]->data, t[0]->dtype, t[1]->data, t[1]->dtype,
                            (size_t)p->i[KK__CVT_N], stream);
}

const kk__slot kk__convert_cuda_slot = {convert_cuda, 0};
