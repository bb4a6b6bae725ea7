/* The `linear` op's CPU kernel: y = act(x . W^T + bias), and SwiGLU
 * y = silu(x . Wg^T + bg) * (x . Wu^T + bu), for f32, f16 and bf16: the
 * epilogue that gemm_cpu.c's driver runs on each block of rows while it is in
 * cache (bias, activation, SwiGLU, one rounding). docs/backends/cpu.md,
 * "GEMM and Linear". */
#include <stdlib.h>

/* Fused multiply-adds in the activations' polynomials (GELU's erfc and exp):
 * in ISO C mode GCC contracts nothing (-ffp-contract=off), and the AVX2 and
 * AVX-512 clones then spend a multiply and an add per step; with FMAs GELU
 * (erf) takes about a fifth less time. The results move in the last bits
 * (an FMA rounds once where a multiply and an add round twice), far inside
 * every tolerance; clang contracts within an expression by default already. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include "core/error.h"
#include "cpu/cpu_gemm_internal.h"
#include "cpu/cpu_isa.h"
#include "cpu/cpu_kernels.h"
#include "opdef/linear.h"

typedef struct linear_ctx {
    int act;
    const float *bias, *bias_up; /* f32, [N]; NULL without bias */
    const void *residual;        /* [M,N] of dtype; NULL without */
    void *y;
    kk_dtype dtype;
} linear_ctx;

static inline float identity(float x) { return x; }
static inline float relu(float x) { return kk__select(x > 0.0f, x, 0.0f); }

/* h = f(h + bias) over one row piece; two loops so neither has a branch. */
#define APPLY(f)                                                                                   \
    do {                                                                                           \
        if (b) {                                                                                   \
            _Pragma("omp simd") for (int64_t j = 0; j < cols; j++) h[j] = f(h[j] + b[j]);          \
        } else {                                                                                   \
            _Pragma("omp simd") for (int64_t j = 0; j < cols; j++) h[j] = f(h[j]);                 \
        }                                                                                          \
    } while (0)

KK__ISA_INLINE void swiglu(float *restrict h, float *restrict u, const float *b, const float *bu,
                           int64_t cols) {
    if (b) {
#pragma omp simd
        for (int64_t j = 0; j < cols; j++) h[j] = kk__silu(h[j] + b[j]) * (u[j] + bu[j]);
    } else {
#pragma omp simd
        for (int64_t j = 0; j < cols; j++) h[j] = kk__silu(h[j]) * u[j];
    }
}

/* h[0, cols) += r[at, at + cols), decoded a chunk at a time. */
static void add_residual(float *restrict h, const void *r, kk_dtype dt, int64_t at, int64_t cols) {
    float tmp[KK__ROW_CHUNK];
    for (int64_t j = 0; j < cols; j += KK__ROW_CHUNK) {
        const int m = kk__row_chunk(cols, j);
        kk__row_load(r, dt, at + j, tmp, m);
        for (int i = 0; i < m; i++) h[j + i] += tmp[i];
    }
}

KK__ISA_INLINE void linear_row(const kk__gemm_job *job, float *const *c, int64_t m, int64_t n0,
                               int64_t cols) {
    const linear_ctx *x = job->ctx;
    float *restrict h = c[0];
    const float *restrict b = x->bias ? x->bias + n0 : NULL;
    switch (x->act) {
    case KK__ACT_RELU: APPLY(relu); break;
    case KK__ACT_GELU_ERF: APPLY(kk__gelu_erf); break;
    case KK__ACT_GELU_TANH: APPLY(kk__gelu_tanh); break;
    case KK__ACT_SILU: APPLY(kk__silu); break;
    case KK__ACT_SWIGLU: swiglu(h, c[1], b, x->bias_up ? x->bias_up + n0 : NULL, cols); break;
    default:
        if (b) APPLY(identity); /* no bias: nothing to do but round */
        break;
    }
    if (x->residual) add_residual(h, x->residual, x->dtype, m * job->N + n0, cols);
    if (x->dtype == KK_DTYPE_BF16) /* rounded here, in this clone's vectors */
        kk__row_store(x->y, x->dtype, m * job->N + n0, h, (int)cols);
    else
        kk__cpu_store_row(h, x->y, x->dtype, m * job->N + n0, cols);
}
KK__ISA_CLONES(linear_row,
               (const kk__gemm_job *job, float *const *c, int64_t m, int64_t n0, int64_t cols),
               (job, c, m, n0, cols))

/* A bias as f32: the tensor itself when it is f32, else a decoded copy. */
static const float *bias_f32(const kk_tensor *t, int64_t N, float **owned) {
    if (t->dtype == KK_DTYPE_F32) return t->data;
    *owned = malloc((size_t)N * sizeof(float));
    if (*owned) kk_convert_host(t->data, t->dtype, *owned, KK_DTYPE_F32, (size_t)N);
    return *owned;
}

kk_status kk__linear_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t N = p->i[KK__LIN_N];
    const kk_dtype dt = (kk_dtype)p->i[KK__LIN_DTYPE];
    const int act = (int)p->i[KK__LIN_ACT], glu = act == KK__ACT_SWIGLU;
    const kk__linear_layout l = kk__linear_layout_of(p);
    const int nw = glu ? 2 : 1;
    float *owned[2] = {NULL, NULL};
    linear_ctx ctx = {.act = act,
                      .y = t[l.y]->data,
                      .residual = l.residual >= 0 ? t[l.residual]->data : NULL,
                      .dtype = dt};
    if (l.bias >= 0) {
        ctx.bias = bias_f32(t[l.bias], N, &owned[0]);
        if (glu) ctx.bias_up = bias_f32(t[l.bias_up], N, &owned[1]);
        if (!ctx.bias || (glu && !ctx.bias_up)) {
            free(owned[0]);
            free(owned[1]);
            return kk__error(KK_ERR_OUT_OF_MEMORY, "linear", "no host memory for the bias");
        }
    }
    const kk__gemm_job job = {.M = p->i[KK__LIN_M],
                              .N = N,
                              .K = p->i[KK__LIN_K],
                              .a = t[0]->data,
                              .a_dtype = dt,
                              .b = {t[1]->data, glu ? t[2]->data : NULL},
                              .b_dtype = dt,
                              .nweights = nw,
                              /* with a residual the products go to scratch, so that
                               * r may be y itself (y += ...) */
                              .c_direct =
                                  dt == KK_DTYPE_F32 && !ctx.residual ? (float *)ctx.y : NULL,
                              .row = KK__ISA_PICK(linear_row),
                              .ctx = &ctx};
    st = kk__cpu_gemm_run(&job, "linear");
    free(owned[0]);
    free(owned[1]);
    return st;
}
