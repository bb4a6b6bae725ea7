/* Internal: the CUDA backend's own API, shared by its host code in src/cuda/,
 * its kernels in src/cuda/kernels/ and tests.
 *
 * Plain C with no CUDA headers, so that tests and the CUDA-less build
 * (src/cuda_off/, which implements the same functions as stubs returning
 * KK_ERR_CUDA_UNAVAILABLE) can include it. Declarations that need CUDA types
 * appear only when the includer has included the CUDA runtime headers first. */
#ifndef KK_CUDA_CUDA_INTERNAL_H
#define KK_CUDA_CUDA_INTERNAL_H

#include "backend/backend.h" /* kk__probe_value */
#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Result of kk__cuda_selftest. */
typedef struct kk__cuda_selftest_result {
    int elements;      /* values written by the kernel and checked on the host */
    int arch_ran;      /* __CUDA_ARCH__ of the code that ran: 800, 900, ... */
    int arch_specific; /* 1 when an arch-specific build ran (sm_90a) */
    double ms;         /* launch to synchronize, host clock */
} kk__cuda_selftest_result;

/* Prove that KernelKit's own device code runs on CUDA device `device`: launch
 * the probe kernel, synchronize, copy back and check every value. Errors:
 * KK_ERR_CUDA_UNAVAILABLE (no usable CUDA), KK_ERR_INVALID_ARGUMENT (bad
 * index), KK_ERR_INVALID_COMPUTE_CAPABILITY (GPU older than 8.0),
 * KK_ERR_KERNEL_LAUNCH (launch/run failed or wrong values; the CUDA error name
 * is in kk_last_error()->cuda_error), KK_ERR_OUT_OF_MEMORY, KK_ERR_DEVICE_FAILURE.
 * `result` may be NULL. */
kk_status kk__cuda_selftest(int device, kk__cuda_selftest_result *result);

/* Run fn(job) with `device` current on a short-lived thread of its own, so the
 * caller's current device is never changed (see cuda_backend.c for why). */
void kk__cuda_run_on_device_thread(void *(*fn)(void *), void *job, int device);

/* Call fn(ctx) with `device` current: on the calling thread when the device
 * already is current there (the one-GPU case, and what a benchmark times),
 * otherwise on a short-lived thread, carrying the last-error detail back. The
 * caller's current device never changes. */
kk_status kk__cuda_call_on_device(int device, kk_status (*fn)(void *ctx), void *ctx);

/* Streams and events for overlapped work (streams.c; backend.h's kk__stream_ops). */
struct kk__stream_ops;
extern const struct kk__stream_ops kk__cuda_stream_ops;

/* Synchronize `stream` (NULL = legacy default) of `device`; a failure of the
 * work that ran is KK_ERR_KERNEL_LAUNCH naming `what` and the CUDA error. */
kk_status kk__cuda_stream_sync(int device, void *stream, const char *what);

/* Non-zero when device `device` exists and KernelKit's kernels can run on it. */
int kk__cuda_device_usable(int device);

/* kk__mem_ops.strided_copy of the CUDA backend (kernels/strided_copy.cu): run
 * `job` on device `index` on `stream` (NULL: the legacy default stream), and
 * wait for it when `wait`. */
struct kk__strided_job;
kk_status kk__cuda_strided_copy(void *ctx, int index, const struct kk__strided_job *job,
                                void *stream, int wait, const char *func);

/* The backend table's CUDA graph entries (graph_cuda.c; backend.h). */
kk_status kk__cuda_graph_begin(void *ctx, kk_stream stream, const char *func);
kk_status kk__cuda_graph_end(void *ctx, kk_stream stream, void **exec, const char *func);
kk_status kk__cuda_graph_launch(void *ctx, void *exec, kk_stream stream, const char *func);
void kk__cuda_graph_destroy(void *ctx, void *exec);

#ifdef CUDART_VERSION /* the includer has the CUDA runtime API */
/* Launch the probe kernel: d_out[0..n) = kk__probe_value(i, seed), d_out[n] =
 * __CUDA_ARCH__, d_out[n + 1] = 1 for an arch-specific build. d_out must hold
 * n + 2 values. Returns the launch status (not the completion status). */
cudaError_t kk__probe_launch(unsigned *d_out, int n, unsigned seed, cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
