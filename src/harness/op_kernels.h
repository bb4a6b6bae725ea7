/* Internal: the kernel slots the registry table (registry.c) points at, one
 * block per op. Each function lives in its backend's folder: src/cpu/<op>_cpu.c,
 * src/cuda/kernels/<op>.cu (an extern "C" slot). A CUDA slot is only defined in
 * a build with CUDA; the table takes it through CUDA_SLOT() so that a build
 * without CUDA leaves that slot empty (and kk_op_run falls back to the CPU). */
#ifndef KK_HARNESS_OP_KERNELS_H
#define KK_HARNESS_OP_KERNELS_H

#include "kernelkit/harness.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef KK_HAVE_CUDA
#define KK__CUDA_SLOT(fn) fn
#else
#define KK__CUDA_SLOT(fn) NULL
#endif

/* gemm, linear: src/cpu/gemm_cpu.c, src/cpu/linear_cpu.c */
kk_status kk__gemm_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream s);
kk_status kk__linear_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream s);

/* fp8_gemm: src/cpu/fp8_gemm_cpu.c (its row: src/harness/op_fp8_gemm.h) */
kk_status kk__fp8_gemm_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream s);

/* attention: src/cpu/attention_cpu.c, src/cuda/kernels/attention.cu */
kk_status kk__attention_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream s);
kk_status kk__attention_cuda(const kk_op_params *p, kk_tensor *const *t, kk_stream s);

/* attention_varlen: src/cpu/attention_varlen_cpu.c (declared with its row in
 * src/harness/op_attention_varlen.h), src/cuda/kernels/attention_varlen.cu */
kk_status kk__attention_varlen_cuda(const kk_op_params *p, kk_tensor *const *t, kk_stream s);

/* nvfp4_gemv: src/cpu/nvfp4_gemv_cpu.c, src/cuda/kernels/nvfp4_gemv.cu */
kk_status kk__nvfp4_gemv_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream s);
kk_status kk__nvfp4_gemv_cuda(const kk_op_params *p, kk_tensor *const *t, kk_stream s);

#ifdef __cplusplus
}
#endif

#endif
