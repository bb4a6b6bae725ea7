/* The `fp8_linear` op's CPU kernel, composed of the CPU's own pieces: x
 * quantized by kk_quantize's CPU code (quant_cpu.c: its per-tensor rule on
 * each row for rowwise, KK_SCALE_1X128 on each row for block), the product
 * by fp8_gemm's CPU kernel (fp8_gemm_cpu.c) into f32 scratch, then the
 * epilogue (bias, activation with the GEMM epilogue's vectorizable math,
 * residual, one rounding) a row at a time. docs/kernels/fp8_gemm.md,
 * "FP8 Linear". */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/quant_internal.h"
#include "core/threads.h"
#include "core/tensor_borrow.h"
#include "cpu/cpu_gemm_internal.h"
#include "cpu/cpu_kernels.h"
#include "opdef/fp8_linear.h"
#include "opdef/linear.h"

static size_t dtype_size(kk_dtype dt) { return dt == KK_DTYPE_F32 ? 4 : 2; }

kk_status kk__fp8_linear_quantize_x_cpu(const void *x, kk_dtype dt, int64_t M, int64_t K, int block,
                                        uint8_t *q, float *scales) {
    const int64_t G = block ? kk__fp8_groups(K) : 1;
    int bad = 0;
#pragma omp parallel for schedule(static) num_threads(kk__cpu_threads()) reduction(| : bad)
    for (int64_t m = 0; m < M; m++) {
        kk__quant_job job;
        memset(&job, 0, sizeof job);
        kk__quant_job_shape(&job, block ? KK_SCALE_1X128 : KK_SCALE_PER_TENSOR, KK_DTYPE_FP8_E4M3,
                            1, &K);
        job.x_dtype = dt;
        job.x = (char *)x + (size_t)(m * K) * dtype_size(dt);
        job.q = q + m * K;
        job.scales = scales + m * G;
        kk__quantize_cpu(&job);
        bad |= job.amax_bits >= 0x7F800000u; /* inf/NaN: quant_math.h's KK__F32_INF_BITS */
    }
    return bad ? kk__set_error(KK_ERR_QUANTIZATION, "fp8_linear", "x", "inf or NaN",
                               "finite values", NULL,
                               "x holds NaN or an infinity: it cannot be scaled into fp8_e4m3, "
                               "as kk_quantize refuses it")
               : KK_OK;
}

static inline float relu(float v) { return kk__select(v > 0.0f, v, 0.0f); }
static inline float identity(float v) { return v; }

#define APPLY(f)                                                                                   \
    do {                                                                                           \
        _Pragma("omp simd") for (int64_t j = 0; j < N; j++) h[j] = f(h[j] + (b ? b[j] : 0.0f));    \
    } while (0)

/* y[m,:] = act(h + bias) + r[m,:], rounded once; h is row m of the f32 product. */
static void epilogue_row(float *restrict h, const float *b, int act, const void *r, void *y,
                         kk_dtype dt, int64_t m, int64_t N) {
    switch (act) {
    case KK__ACT_RELU: APPLY(relu); break;
    case KK__ACT_GELU_ERF: APPLY(kk__gelu_erf); break;
    case KK__ACT_GELU_TANH: APPLY(kk__gelu_tanh); break;
    case KK__ACT_SILU: APPLY(kk__silu); break;
    default: APPLY(identity); break;
    }
    if (r) {
        float tmp[KK__ROW_CHUNK];
        for (int64_t j = 0; j < N; j += KK__ROW_CHUNK) {
            const int c = kk__row_chunk(N, j);
            kk__row_load(r, dt, m * N + j, tmp, c);
            for (int i = 0; i < c; i++) h[j + i] += tmp[i];
        }
    }
    kk__cpu_store_row(h, y, dt, m * N, N);
}

kk_status kk__fp8_linear_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t M = p->i[KK__FL_M], N = p->i[KK__FL_N], K = p->i[KK__FL_K];
    const kk_dtype dt = (kk_dtype)p->i[KK__FL_DTYPE];
    const int act = (int)p->i[KK__FL_ACT], scaling = kk__fp8_linear_scaling(p);
    const int64_t G = kk__fp8_linear_x_groups(p);
    const kk__fp8_linear_layout l = kk__fp8_linear_layout_of(p);
    uint8_t *xq = malloc((size_t)(M * K));
    float *sx = malloc((size_t)(M * G) * sizeof(float));
    float *h = malloc((size_t)(M * N) * sizeof(float));
    float *bias = l.bias >= 0 ? malloc((size_t)N * sizeof(float)) : NULL;
    if (!xq || !sx || !h || (l.bias >= 0 && !bias)) {
        st = kk__error(KK_ERR_OUT_OF_MEMORY, "fp8_linear",
                       "no host memory for x's codes and "
                       "the f32 product (%lld x %lld)",
                       (long long)M, (long long)N);
        goto done;
    }
    if (bias) kk_convert_host(t[l.bias]->data, dt, bias, KK_DTYPE_F32, (size_t)N);
    st = kk__fp8_linear_quantize_x_cpu(t[l.x]->data, dt, M, K, scaling == KK__FP8_BLOCK, xq, sx);
    if (st != KK_OK) goto done;
    kk_op_params gp;
    if ((st = kk_op_params_init(&kk__op_fp8_gemm, &gp)) != KK_OK) goto done;
    gp.i[KK__FP8_M] = M;
    gp.i[KK__FP8_N] = N;
    gp.i[KK__FP8_K] = K;
    gp.i[KK__FP8_A_DTYPE] = KK_DTYPE_FP8_E4M3;
    gp.i[KK__FP8_B_DTYPE] = KK_DTYPE_FP8_E4M3;
    gp.i[KK__FP8_C_DTYPE] = KK_DTYPE_F32;
    gp.i[KK__FP8_SCALING] = scaling;
    kk_tensor va, vsa, vc;
    kk_tensor *gt[5] = {
        kk__tensor_borrow(&va, t[l.x], KK_DTYPE_FP8_E4M3, 2, (int64_t[]){M, K}, xq), t[l.w],
        kk__tensor_borrow(&vsa, t[l.x], KK_DTYPE_F32, G == 1 ? 1 : 2, (int64_t[]){M, G}, sx),
        t[l.w_scales], kk__tensor_borrow(&vc, t[l.x], KK_DTYPE_F32, 2, (int64_t[]){M, N}, h)};
    if ((st = kk__fp8_gemm_cpu(&gp, gt, s)) != KK_OK) goto done;
    const void *r = l.residual >= 0 ? t[l.residual]->data : NULL;
    void *y = t[l.y]->data;
#pragma omp parallel for schedule(static) num_threads(kk__cpu_threads())
    for (int64_t m = 0; m < M; m++) epilogue_row(h + m * N, bias, act, r, y, dt, m, N);
done:
    free(xq);
    free(sx);
    free(h);
    free(bias);
    return st;
}
