/* GPU ceilings of kernelkit calibrate on CUDA device N: copy and read
 * bandwidth, fp32 FMA throughput, and bf16 and fp8 GEMM throughput through
 * cuBLASLt (loaded at run time; without it those two are marked unavailable
 * and the rest is still measured). What each one measures: docs/harness.md,
 * "kernelkit calibrate". The caller's current device is set back on return. */
#include <cuda_runtime_api.h>

#include <stdio.h>
#include <string.h>

#include "cuda/cublaslt_dl.h"
#include "cuda/cuda_internal.h"
#include "cuda/bench_cuda.h"

#define FUNC KK__CALIBRATE_FUNC
#define WORKSPACE_BYTES ((size_t)32 << 20)

cudaError_t kk__cal_copy_launch(const void *src, void *dst, size_t bytes, int sms,
                                cudaStream_t stream);
cudaError_t kk__cal_read_launch(const void *src, size_t bytes, unsigned *out, int sms,
                                cudaStream_t stream);
cudaError_t kk__cal_fma_launch(int blocks, int threads, int iters, float *out, cudaStream_t stream);
int kk__cal_fma_chains(void);
cudaError_t kk__cal_fill_launch(void *dst, size_t n, int elem, uint64_t seed, cudaStream_t stream);

static kk_status cuda_fail(cudaError_t e, const char *what) {
    (void)cudaGetLastError();
    kk_status st = e == cudaErrorMemoryAllocation ? KK_ERR_OUT_OF_MEMORY : KK_ERR_DEVICE_FAILURE;
    return kk__cuda_error(st, FUNC, cudaGetErrorName(e), cudaGetErrorString(e), "%s", what);
}

typedef struct gpu_job {
    void *src, *dst;
    size_t bytes;
    unsigned *out;
    int sms;
    int blocks, threads, iters;
} gpu_job;

static kk_status run_memcpy(void *ctx, kk_stream stream) {
    gpu_job *j = ctx;
    cudaError_t e =
        cudaMemcpyAsync(j->dst, j->src, j->bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
    return e ? cuda_fail(e, "cudaMemcpyAsync failed") : KK_OK;
}

static kk_status run_copy_kernel(void *ctx, kk_stream stream) {
    gpu_job *j = ctx;
    cudaError_t e = kk__cal_copy_launch(j->src, j->dst, j->bytes, j->sms, (cudaStream_t)stream);
    return e ? kk__cuda_error(KK_ERR_KERNEL_LAUNCH, FUNC, cudaGetErrorName(e),
                              cudaGetErrorString(e), "the copy kernel failed to launch")
             : KK_OK;
}

static kk_status run_read_kernel(void *ctx, kk_stream stream) {
    gpu_job *j = ctx;
    cudaError_t e = kk__cal_read_launch(j->src, j->bytes, j->out, j->sms, (cudaStream_t)stream);
    return e ? kk__cuda_error(KK_ERR_KERNEL_LAUNCH, FUNC, cudaGetErrorName(e),
                              cudaGetErrorString(e), "the read kernel failed to launch")
             : KK_OK;
}

static kk_status run_fma_kernel(void *ctx, kk_stream stream) {
    gpu_job *j = ctx;
    cudaError_t e =
        kk__cal_fma_launch(j->blocks, j->threads, j->iters, (float *)j->out, (cudaStream_t)stream);
    return e ? kk__cuda_error(KK_ERR_KERNEL_LAUNCH, FUNC, cudaGetErrorName(e),
                              cudaGetErrorString(e), "the FMA kernel failed to launch")
             : KK_OK;
}

/* Make `device` current, remembering the previous one. */
static kk_status enter(int device, int *prev) {
    if (!kk__cuda_device_usable(device))
        return kk__error(KK_ERR_CUDA_UNAVAILABLE, FUNC, "CUDA device %d cannot be used", device);
    cudaError_t e = cudaGetDevice(prev);
    if (e == cudaSuccess) e = cudaSetDevice(device);
    if (e) {
        (void)cudaGetLastError();
        return kk__cuda_error(KK_ERR_CUDA_UNAVAILABLE, FUNC, cudaGetErrorName(e),
                              cudaGetErrorString(e), "cannot use CUDA device %d", device);
    }
    return KK_OK;
}

/* ---- cuBLASLt GEMMs ---- */

typedef struct gemm_job {
    const kk__cublaslt *lt;
    void *handle, *desc, *la, *lb, *lc, *ld, *pref;
    void *a, *b, *c, *d, *workspace;
    float *scales; /* device: [0] A scale, [4] B scale (16 bytes apart:
                    * cublasLtMatmul answers NOT_SUPPORTED for 4) */
    kk__cublaslt_heuristic algo;
    float alpha, beta;
} gemm_job;

static kk_status run_gemm(void *ctx, kk_stream stream) {
    gemm_job *g = ctx;
    int s = g->lt->matmul(g->handle, g->desc, &g->alpha, g->a, g->la, g->b, g->lb, &g->beta, g->c,
                          g->lc, g->d, g->ld, &g->algo.algo, g->workspace, WORKSPACE_BYTES, stream);
    if (s != KK__CUBLAS_STATUS_SUCCESS)
        return kk__error(KK_ERR_KERNEL_LAUNCH, FUNC, "cublasLtMatmul failed: %s",
                         kk__cublaslt_status_name(s));
    return KK_OK;
}

static void gemm_release(gemm_job *g) {
    const kk__cublaslt *lt = g->lt;
    if (lt) {
        if (g->pref) lt->pref_destroy(g->pref);
        if (g->la) lt->layout_destroy(g->la);
        if (g->lb) lt->layout_destroy(g->lb);
        if (g->lc) lt->layout_destroy(g->lc);
        if (g->ld) lt->layout_destroy(g->ld);
        if (g->desc) lt->desc_destroy(g->desc);
        if (g->handle) lt->destroy(g->handle);
    }
    cudaFree(g->a);
    cudaFree(g->b);
    cudaFree(g->c);
    cudaFree(g->d);
    cudaFree(g->workspace);
    cudaFree(g->scales);
    (void)cudaGetLastError();
}

/* Set up descriptors; returns 0 with a reason when cuBLASLt refuses. */
static int gemm_setup(gemm_job *g, int fp8, uint64_t n, char *why, size_t size) {
    const kk__cublaslt *lt = g->lt;
    int s;
    int ab = fp8 ? KK__CUDA_R_8F_E4M3 : KK__CUDA_R_16BF;
    int32_t ta = KK__CUBLAS_OP_T, tb = KK__CUBLAS_OP_N;
    uint64_t ws = WORKSPACE_BYTES;
#define LT(call, what)                                                                             \
    if ((s = (call)) != KK__CUBLAS_STATUS_SUCCESS) {                                               \
        snprintf(why, size, "%s failed: %s", what, kk__cublaslt_status_name(s));                   \
        return 0;                                                                                  \
    }
    LT(lt->create(&g->handle), "cublasLtCreate");
    LT(lt->desc_create(&g->desc, KK__CUBLAS_COMPUTE_32F, KK__CUDA_R_32F),
       "cublasLtMatmulDescCreate");
    LT(lt->desc_set(g->desc, KK__CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
    LT(lt->desc_set(g->desc, KK__CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
    if (fp8) {
        const void *sa = g->scales, *sb = g->scales + 4;
        LT(lt->desc_set(g->desc, KK__CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa),
           "A_SCALE_POINTER");
        LT(lt->desc_set(g->desc, KK__CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb),
           "B_SCALE_POINTER");
    }
    /* column-major: A stored K x M (op T), B stored K x N, C/D M x N */
    LT(lt->layout_create(&g->la, ab, n, n, (int64_t)n), "cublasLtMatrixLayoutCreate (A)");
    LT(lt->layout_create(&g->lb, ab, n, n, (int64_t)n), "cublasLtMatrixLayoutCreate (B)");
    LT(lt->layout_create(&g->lc, KK__CUDA_R_16BF, n, n, (int64_t)n),
       "cublasLtMatrixLayoutCreate (C)");
    LT(lt->layout_create(&g->ld, KK__CUDA_R_16BF, n, n, (int64_t)n),
       "cublasLtMatrixLayoutCreate (D)");
    LT(lt->pref_create(&g->pref), "cublasLtMatmulPreferenceCreate");
    LT(lt->pref_set(g->pref, KK__CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
       "MAX_WORKSPACE_BYTES");
    int got = 0;
    LT(lt->heuristic(g->handle, g->desc, g->la, g->lb, g->lc, g->ld, g->pref, 1, &g->algo, &got),
       "cublasLtMatmulAlgoGetHeuristic");
#undef LT
    if (got < 1 || g->algo.state != KK__CUBLAS_STATUS_SUCCESS) {
        snprintf(why, size, "cuBLASLt has no %s algorithm for %llu^3 on this GPU",
                 fp8 ? "fp8 e4m3" : "bf16", (unsigned long long)n);
        return 0;
    }
    return 1;
}

kk_status kk__calibrate_cuda_gemm(int device, int fp8, const kk_calibrate_options *o,
                                  kk__calibrate_measure_fn measure, kk_ceiling *out) {
    kk__ceiling_unavailable(out, "not measured");
    int prev = 0;
    kk_status st = enter(device, &prev);
    if (st) return st;
    char why[256];
    gemm_job g;
    memset(&g, 0, sizeof g);
    g.alpha = 1.0f;
    g.beta = 0.0f;
    g.lt = kk__cublaslt_load(why, sizeof why);
    if (!g.lt) {
        kk__ceiling_unavailable(out, "%s", why);
        cudaSetDevice(prev);
        return KK_OK;
    }
    const uint64_t n = KK__CALIBRATE_GEMM_N;
    const size_t elem = fp8 ? 1 : 2, count = (size_t)(n * n);
    const float ones[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    cudaError_t e;
    if ((e = cudaMalloc(&g.a, count * elem)) || (e = cudaMalloc(&g.b, count * elem)) ||
        (e = cudaMalloc(&g.c, count * 2)) || (e = cudaMalloc(&g.d, count * 2)) ||
        (e = cudaMalloc(&g.workspace, WORKSPACE_BYTES)) ||
        (e = cudaMalloc((void **)&g.scales, sizeof ones)) ||
        (e = cudaMemcpy(g.scales, ones, sizeof ones, cudaMemcpyHostToDevice)) ||
        (e = cudaMemset(g.c, 0, count * 2)) ||
        (e = kk__cal_fill_launch(g.a, count, (int)elem, 1, 0)) ||
        (e = kk__cal_fill_launch(g.b, count, (int)elem, 2, 0)) || (e = cudaDeviceSynchronize())) {
        st = cuda_fail(e, "cannot prepare the GEMM operands");
        goto done;
    }
    if (!gemm_setup(&g, fp8, n, why, sizeof why)) {
        kk__ceiling_unavailable(out, "%s", why);
        goto done;
    }
    char method[64];
    snprintf(method, sizeof method, "cuBLASLt %llu^3 %s", (unsigned long long)n,
             fp8 ? "e4m3 TN, bf16 D" : "bf16 TN");
    char dev[32];
    snprintf(dev, sizeof dev, "cuda:%d", device);
    st = measure(dev, run_gemm, &g, 2.0 * (double)n * (double)n * (double)n, 1e12, o, method, out);
    if (st) {
        /* cuBLASLt refusing to run is a missing ceiling, not a failed calibration;
         * a failing device still fails it */
        kk__ceiling_unavailable(out, "the GEMM failed: %s", kk_last_error_message());
        if (st != KK_ERR_DEVICE_FAILURE && st != KK_ERR_OUT_OF_MEMORY) st = KK_OK;
    }
done:
    gemm_release(&g);
    cudaSetDevice(prev);
    return st;
}

kk_status kk__calibrate_cuda(int device, const kk_calibrate_options *o,
                             kk__calibrate_measure_fn measure, kk_calibration *cal) {
    int prev = 0;
    kk_status st = enter(device, &prev);
    if (st) return st;
    char dev[32];
    snprintf(dev, sizeof dev, "cuda:%d", device);
    gpu_job j;
    memset(&j, 0, sizeof j);
    j.bytes = (size_t)(o->quick ? 256 : 1024) << 20;
    cudaDeviceGetAttribute(&j.sms, cudaDevAttrMultiProcessorCount, device);
    cudaError_t e;
    if ((e = cudaMalloc(&j.src, j.bytes)) || (e = cudaMalloc(&j.dst, j.bytes)) ||
        (e = cudaMalloc((void **)&j.out, 64)) || (e = cudaMemset(j.src, 0x5a, j.bytes)) ||
        (e = cudaMemset(j.dst, 0, j.bytes)) || (e = cudaDeviceSynchronize())) {
        st = cuda_fail(e, "cannot allocate the calibration buffers");
        goto done;
    }
    kk_ceiling a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    st = measure(dev, run_memcpy, &j, 2.0 * (double)j.bytes, 1e9, o, "cudaMemcpyAsync", &a);
    if (!st)
        st = measure(dev, run_copy_kernel, &j, 2.0 * (double)j.bytes, 1e9, o,
                     "copy kernel (16-byte loads)", &b);
    if (st) goto done;
    cal->ceilings[KK_CEILING_COPY] = a;
    kk__ceiling_keep_best(&cal->ceilings[KK_CEILING_COPY], &b);
    st = measure(dev, run_read_kernel, &j, (double)j.bytes, 1e9, o, "read kernel (16-byte loads)",
                 &cal->ceilings[KK_CEILING_READ]);
    if (st) goto done;
    j.threads = 256;
    j.blocks = (j.sms > 0 ? j.sms : 132) * 8;
    j.iters = o->quick ? 1 << 12 : 1 << 14;
    st = measure(dev, run_fma_kernel, &j,
                 2.0 * j.blocks * j.threads * (double)kk__cal_fma_chains() * j.iters, 1e12, o,
                 "FMA kernel (8 chains/thread)", &cal->ceilings[KK_CEILING_FP32]);
    if (st) goto done;
    cudaFree(j.src);
    cudaFree(j.dst);
    j.src = j.dst = NULL;
    for (int fp8 = 0; fp8 < 2 && !st; fp8++)
        st = kk__calibrate_cuda_gemm(device, fp8, o, measure,
                                     &cal->ceilings[fp8 ? KK_CEILING_FP8 : KK_CEILING_BF16]);
done:
    cudaFree(j.src);
    cudaFree(j.dst);
    cudaFree(j.out);
    (void)cudaGetLastError();
    cudaSetDevice(prev);
    return st;
}
