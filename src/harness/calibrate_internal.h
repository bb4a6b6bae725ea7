/* Internal: the pieces of kernelkit calibrate shared by src/harness/calibrate*.c,
 * src/cpu/calibrate_cpu.c, src/cuda/calibrate_cuda.c (src/cuda_off/calibrate_off.c
 * in a build without CUDA) and the tests. */
#ifndef KK_HARNESS_CALIBRATE_INTERNAL_H
#define KK_HARNESS_CALIBRATE_INTERNAL_H

#include "core/error.h"
#include "kernelkit/calibrate.h"

#define KK__CALIBRATE_FUNC "kk_calibrate"
#define KK__CALIBRATE_GEMM_N 8192 /* M = N = K of the cuBLASLt GEMMs */

/* Time fn with kk_bench_measure on `device` (warm samples, budgets from `o`)
 * and fill `out`: value = work / median / unit_scale (1e9 for GB/s, 1e12 for
 * TFLOP/s), with the CI and the sample count. Returns the sampler's status. */
kk_status kk__calibrate_measure(const char *device, kk_bench_fn fn, void *ctx, double work,
                                double unit_scale, const kk_calibrate_options *o,
                                const char *method, kk_ceiling *out);

/* Mark `c` unavailable with a reason. */
void kk__ceiling_unavailable(kk_ceiling *c, const char *fmt, ...) KK__PRINTF(2, 3);

/* Keep the better (higher) of two measured ceilings in `best`. */
void kk__ceiling_keep_best(kk_ceiling *best, const kk_ceiling *candidate);

/* The CPU's copy, read and fp32 ceilings (bf16 and fp8 marked unavailable). */
kk_status kk__calibrate_cpu(const kk_calibrate_options *o, kk_calibration *cal);

/* The GPU's ceilings on CUDA device `device` (src/cuda/calibrate_cuda.c). */
kk_status kk__calibrate_cuda(int device, const kk_calibrate_options *o, kk_calibration *cal);

/* One cuBLASLt GEMM ceiling (fp8 = 0: bf16, 1: fp8 e4m3). KK_OK with
 * out->available = 0 and a reason when cuBLASLt cannot be loaded or has no
 * algorithm; KK_ERR_CUDA_UNAVAILABLE when the device cannot be used. */
kk_status kk__calibrate_cuda_gemm(int device, int fp8, const kk_calibrate_options *o,
                                  kk_ceiling *out);

#endif
