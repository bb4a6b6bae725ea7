/* DLPack: tensors shared with other array libraries (PyTorch, NumPy, CuPy,
 * JAX, ...) without a copy, in both directions.
 *
 *   kk_tensor *t;   // a view of a producer's DLManagedTensorVersioned *m
 *   if (kk_tensor_from_dlpack_versioned(m, 1, &t) == KK_OK) {
 *       ...             // t (and its views) read and write the producer's memory
 *       kk_tensor_destroy(t);   // the last view gone: m's deleter runs, once
 *   }
 *
 * The arguments are `void *` so that this header needs no dlpack.h: pass a
 * DLManagedTensor * (DLPack before 1.0, or the "legacy" struct every 1.x still
 * has) or a DLManagedTensorVersioned * (DLPack 1.x ABI), as named.
 *
 * Import (kk_tensor_from_dlpack*): a borrowed view, no copy. data is
 * dl_tensor.data + byte_offset; shape and strides (in elements; NULL means
 * compact row-major) are copied into the kk_tensor, so the DLTensor's arrays
 * need not outlive the call. With take_ownership != 0 the kk_tensor takes the
 * managed tensor over: when it and every view made from it are destroyed, the
 * producer's deleter (if not NULL) is called exactly once, from the thread
 * that destroys the last one. With take_ownership == 0 the caller keeps
 * ownership, must keep the memory alive while any view exists, and the
 * deleter is never called. On an error nothing is taken over and the deleter
 * is not called: the caller still owns the managed tensor (a versioned tensor
 * refused for its major version may still be deleted through its deleter, as
 * DLPack says).
 *
 * dtypes (lanes must be 1):
 *   kDLFloat 64/32/16     -> f64, f32, f16       kDLBfloat 16 -> bf16
 *   kDLFloat8_e4m3fn (10) -> fp8_e4m3            kDLFloat8_e5m2 (12) -> fp8_e5m2
 *   kDLFloat4_e2m1fn (17) -> e2m1 (packed, low nibble first; refused when a
 *                            versioned tensor has the sub-byte-padded flag)
 *   kDLInt 8/32 -> int8, int32                   kDLUInt 8 -> uint8
 * Anything else DLPack can describe (complex, bool, int16/int64, uint16+,
 * other fp8 and fp6/fp4 variants, vector lanes) is KK_ERR_UNSUPPORTED.
 *
 * Devices: kDLCPU and kDLCUDAHost (pinned host memory) -> "cpu"; kDLCUDA
 * device_id n -> "cuda:n", only in a build with the CUDA backend (otherwise
 * KK_ERR_UNSUPPORTED naming the device) and only when that device is present
 * (KK_ERR_CUDA_UNAVAILABLE / KK_ERR_INVALID_ARGUMENT otherwise). Other device
 * types (ROCm, managed memory, OpenCL, ...) are KK_ERR_UNSUPPORTED.
 *
 * Layout errors, KK_ERR_INVALID_ARGUMENT naming the field, its value and what
 * was expected: ndim < 0, a negative dimension, an element count or memory
 * span that overflows, NULL data for a non-empty tensor, data + byte_offset not
 * aligned to the element size. ndim > KK_TENSOR_MAX_DIMS and negative strides
 * on a dimension of size > 1 (KernelKit views have none: copy first) are
 * KK_ERR_UNSUPPORTED. A negative stride on a dimension of size 1 (or of an
 * empty tensor) is never used and becomes the compact stride.
 *
 * Read-only: a versioned tensor flagged DLPACK_FLAG_BITMASK_READ_ONLY imports
 * as a read-only kk_tensor (kk_tensor_is_read_only, shared by its views): it
 * may be an op's input, and writing it (an op's output, kk_tensor_copy's dst,
 * kk_dequantize's y, ...) is refused with KK_ERR_INVALID_ARGUMENT.
 *
 * Export (kk_tensor_to_dlpack*): a new managed tensor viewing t's memory
 * (data = t->data, byte_offset 0, shape and strides always filled in); t's
 * storage is retained until the consumer calls the deleter, so t itself may be
 * destroyed first. A tensor made by kk_tensor_wrap has no storage: its memory
 * stays the caller's to keep alive. The versioned form says version 1.0 (1.1
 * for fp8 and e2m1, whose codes 1.1 added) and sets the read-only flag for a
 * read-only t. The consumer calls the deleter exactly once (it frees
 * everything the export allocated; it may be called from any thread). Errors:
 * KK_ERR_INVALID_ARGUMENT for a NULL or malformed t or out pointer,
 * KK_ERR_OUT_OF_MEMORY. docs/dlpack.md has the details. */
#ifndef KERNELKIT_DLPACK_H
#define KERNELKIT_DLPACK_H

#include "kernelkit/status.h"
#include "kernelkit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dl_managed_tensor: a DLManagedTensor * (DLPack < 1.0 layout). */
KK_API kk_status kk_tensor_from_dlpack(void *dl_managed_tensor, int take_ownership,
                                       kk_tensor **out);

/* dl_managed_tensor_versioned: a DLManagedTensorVersioned * (DLPack >= 1.0);
 * a major version other than 1 is KK_ERR_UNSUPPORTED. */
KK_API kk_status kk_tensor_from_dlpack_versioned(void *dl_managed_tensor_versioned,
                                                 int take_ownership, kk_tensor **out);

/* *dl_managed_tensor_out: a new DLManagedTensor *. */
KK_API kk_status kk_tensor_to_dlpack(kk_tensor *t, void **dl_managed_tensor_out);

/* *dl_managed_tensor_versioned_out: a new DLManagedTensorVersioned *. */
KK_API kk_status kk_tensor_to_dlpack_versioned(kk_tensor *t,
                                               void **dl_managed_tensor_versioned_out);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_DLPACK_H */
