/* CUDA graphs for the backend table (backend.h, "CUDA graphs"): capture the
 * work enqueued on a stream, instantiate it, replay it. The decoder captures
 * its decode step with these (src/model/decoder_graph.c, docs/model.md,
 * "CUDA graphs"). Relaxed capture mode: the caching allocator may query the
 * events of blocks freed on other streams while a capture is under way, which
 * the global and thread-local modes forbid. */
#include <cuda_runtime_api.h>

#include "core/error.h"
#include "cuda/cuda_internal.h"

static kk_status not_captured(cudaError_t e, const char *func, const char *what) {
    (void)cudaGetLastError();
    return kk__cuda_error(KK_ERR_UNSUPPORTED, func, cudaGetErrorName(e), cudaGetErrorString(e),
                          "%s", what);
}

kk_status kk__cuda_graph_begin(void *ctx, kk_stream stream, const char *func) {
    (void)ctx;
    const cudaError_t e =
        cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeRelaxed);
    return e == cudaSuccess ? KK_OK : not_captured(e, func, "cudaStreamBeginCapture failed");
}

kk_status kk__cuda_graph_end(void *ctx, kk_stream stream, void **exec, const char *func) {
    (void)ctx;
    *exec = NULL;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture((cudaStream_t)stream, &g); /* always: ends the capture */
    if (e != cudaSuccess || !g) {
        if (g) cudaGraphDestroy(g);
        return not_captured(e, func,
                            "cudaStreamEndCapture failed (the capture was invalidated: a "
                            "synchronizing call while capturing)");
    }
    cudaGraphExec_t x = NULL;
    e = cudaGraphInstantiate(&x, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) return not_captured(e, func, "cudaGraphInstantiate failed");
    e = cudaGraphUpload(x, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        cudaGraphExecDestroy(x);
        return not_captured(e, func, "cudaGraphUpload failed");
    }
    *exec = x;
    return KK_OK;
}

kk_status kk__cuda_graph_launch(void *ctx, void *exec, kk_stream stream, const char *func) {
    (void)ctx;
    const cudaError_t e = cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)stream);
    if (e == cudaSuccess) return KK_OK;
    (void)cudaGetLastError();
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, func, cudaGetErrorName(e), cudaGetErrorString(e),
                          "cudaGraphLaunch failed");
}

void kk__cuda_graph_destroy(void *ctx, void *exec) {
    (void)ctx;
    if (exec && cudaGraphExecDestroy((cudaGraphExec_t)exec) != cudaSuccess)
        (void)cudaGetLastError();
}
