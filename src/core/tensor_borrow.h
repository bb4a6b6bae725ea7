/* Internal: a contiguous descriptor of borrowed memory, filled in place (no
 * allocation, no storage, never destroyed): the scratch views one kernel hands
 * to another op's kernel (fp8_linear's quantized x and f32 product, on the CPU
 * and on CUDA). C and C++. */
#ifndef KK_CORE_TENSOR_BORROW_H
#define KK_CORE_TENSOR_BORROW_H

#include <stdint.h>

#include "kernelkit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* *t over `data` with `dtype` and row-major `shape`, on `like`'s device; returns t. */
kk_tensor *kk__tensor_borrow(kk_tensor *t, const kk_tensor *like, kk_dtype dtype, int ndim,
                             const int64_t *shape, void *data);

#ifdef __cplusplus
}
#endif
#endif
