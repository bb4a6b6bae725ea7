/* Internal: what the CUDA backend gives the sampler and the calibration
 * through its table (bench_cuda.c, calibrate_cuda.c), and hooks for the tests.
 * Plain C with no CUDA headers: a build without CUDA stubs it (src/cuda_off). */
#ifndef KK_CUDA_BENCH_CUDA_H
#define KK_CUDA_BENCH_CUDA_H

#include "backend/timer.h"

/* The GPU's ceilings on CUDA device `device`. */
kk_status kk__calibrate_cuda(int device, const kk_calibrate_options *o,
                             kk__calibrate_measure_fn measure, kk_calibration *cal);

/* One cuBLASLt GEMM ceiling (fp8 = 0: bf16, 1: fp8 e4m3). KK_OK with
 * out->available = 0 and a reason when cuBLASLt cannot be loaded or has no
 * algorithm; KK_ERR_CUDA_UNAVAILABLE when the device cannot be used. */
kk_status kk__calibrate_cuda_gemm(int device, int fp8, const kk_calibrate_options *o,
                                  kk__calibrate_measure_fn measure, kk_ceiling *out);

/* The sampler's CUDA timer, runtime versions and the host-overhead stream
 * (bench_cuda.c). */
kk_status kk__bench_cuda_timer(int device, kk_bench_fn fn, void *ctx, const kk_bench_options *o,
                               kk__bench_timer *t);
void kk__bench_cuda_versions(int *runtime, int *driver);
kk_status kk__bench_stream_create(int device, int *prev, kk_stream *out);
void kk__bench_stream_destroy(kk_stream stream, int prev);

/* ---- for tests/test_cuda_measure.c (no CUDA headers there) ---- */

/* Enqueue a kernel that spins for `seconds` by the GPU's nanosecond timer. */
kk_status kk__bench_test_spin(kk_stream stream, double seconds);
/* Enqueue a kernel of one thread that increments a counter (a ~2 us launch). */
kk_status kk__bench_test_tiny(kk_stream stream);
/* Enqueue a launch that fails, leave its error pending and return KK_OK. */
kk_status kk__bench_test_bad_launch(kk_stream stream);
/* A device buffer of `bytes` (zeroed) on the current device, and its release. */
kk_status kk__bench_test_alloc(size_t bytes, void **out);
void kk__bench_test_free(void *buf);
/* Enqueue the read-flush kernel over `buf` (bytes a multiple of 16) as work:
 * a memory-bound kernel that reads every byte once. */
kk_status kk__bench_test_read(kk_stream stream, const void *buf, size_t bytes);

#endif
