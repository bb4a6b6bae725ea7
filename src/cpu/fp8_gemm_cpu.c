/* The `fp8_gemm` op's CPU kernel: c = a . b^T with fp8 a and b, decoded to f32
 * panels through a 256-entry table and multiplied by the driver's sgemm
 * (gemm_cpu.c). Per-tensor and row-wise scales are applied by the epilogue,
 * which then rounds once. Block scales: one sgemm per 128 of K, each group's
 * f32 product scaled by sa[m,g] * sb[n/128,g] and added (DeepGEMM's
 * promotion; the order of the reference). docs/backends/cpu.md, "FP8 GEMM". */
#include "core/error.h"
#include "cpu/cpu_gemm_internal.h"
#include "cpu/cpu_kernels.h"
#include "opdef/fp8_gemm.h"

typedef struct fp8_ctx {
    int scaling;
    float scale;          /* tensor: sa * sb */
    const float *sa, *sb; /* rowwise [M], [N]; block [M,G], [ceil(N/128),G] */
    int64_t groups;       /* block: G = ceil(K/128) */
    void *c;
    kk_dtype dtype;
} fp8_ctx;

static void fill_table(kk_dtype dt, float *table) {
    for (int code = 0; code < 256; code++)
        table[code] =
            dt == KK_DTYPE_FP8_E4M3 ? kk_e4m3_to_f32((uint8_t)code) : kk_e5m2_to_f32((uint8_t)code);
}

/* Tensor and block scaling: c = acc * (sa * sb) (block: acc as is, the scales
 * are in the panels and s is 1), rounded once. */
static void scale_row(const kk__gemm_job *job, float *const *c, int64_t m, int64_t n0,
                      int64_t cols) {
    const fp8_ctx *x = job->ctx;
    float *restrict h = c[0];
    const float s = x->scale;
    if (s != 1.0f)
        for (int64_t j = 0; j < cols; j++) h[j] *= s;
    kk__cpu_store_row(h, x->c, x->dtype, m * job->N + n0, cols);
}

/* Row-wise scaling: c[m,n] = acc * (sa[m] * sb[n]), rounded once. */
static void scale_row_rowwise(const kk__gemm_job *job, float *const *c, int64_t m, int64_t n0,
                              int64_t cols) {
    const fp8_ctx *x = job->ctx;
    float *restrict h = c[0];
    const float sm = x->sa[m], *restrict sb = x->sb + n0;
    for (int64_t j = 0; j < cols; j++) h[j] *= sm * sb[j];
    kk__cpu_store_row(h, x->c, x->dtype, m * job->N + n0, cols);
}

/* Block scaling, one group g of K on one tile: c = w * P_0 (p NULL, P_0 in
 * c) or c += w * P_g, w = sa[m,g] * sb[n/128,g] rounded once, constant over
 * each 128 columns of a row. Called by each of the driver's threads on a tile
 * of its own, so it runs on one thread. */
static void combine_block(const kk__gemm_job *job, int64_t g, float *c, int64_t ldc, const float *p,
                          int64_t ldp, int64_t m0, int64_t rows, int64_t n0, int64_t cols) {
    const fp8_ctx *x = job->ctx;
    const int64_t G = x->groups;
    for (int64_t i = 0; i < rows; i++) {
        const float sa = x->sa[(m0 + i) * G + g];
        float *restrict cr = c + i * ldc;
        const float *restrict pr = p ? p + i * ldp : NULL;
        for (int64_t j0 = 0; j0 < cols;) {
            const int64_t blk = (n0 + j0) / KK__FP8_GROUP;
            const int64_t j1 =
                (blk + 1) * KK__FP8_GROUP - n0 < cols ? (blk + 1) * KK__FP8_GROUP - n0 : cols;
            const float w = sa * x->sb[blk * G + g];
            if (pr) {
                for (int64_t j = j0; j < j1; j++) cr[j] += w * pr[j];
            } else {
                for (int64_t j = j0; j < j1; j++) cr[j] *= w;
            }
            j0 = j1;
        }
    }
}

kk_status kk__fp8_gemm_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const kk_dtype a_dt = (kk_dtype)p->i[KK__FP8_A_DTYPE], b_dt = (kk_dtype)p->i[KK__FP8_B_DTYPE];
    const kk_dtype c_dt = (kk_dtype)p->i[KK__FP8_C_DTYPE];
    const int scaling = (int)p->i[KK__FP8_SCALING];
    float a_table[256], b_table[256];
    fill_table(a_dt, a_table);
    fill_table(b_dt, b_table);
    const float *sa = t[2]->data, *sb = t[3]->data;
    const fp8_ctx ctx = {.scaling = scaling,
                         .scale = scaling == KK__FP8_TENSOR ? sa[0] * sb[0] : 1.0f,
                         .sa = sa,
                         .sb = sb,
                         .groups = kk__fp8_groups(p->i[KK__FP8_K]),
                         .c = t[4]->data,
                         .dtype = c_dt};
    const kk__gemm_job job = {.M = p->i[KK__FP8_M],
                              .N = p->i[KK__FP8_N],
                              .K = p->i[KK__FP8_K],
                              .a = t[0]->data,
                              .a_dtype = a_dt,
                              .b = {t[1]->data, NULL},
                              .b_dtype = b_dt,
                              .tables = {a_table, b_table},
                              .nweights = 1,
                              .c_direct = c_dt == KK_DTYPE_F32 ? (float *)t[4]->data : NULL,
                              .row = scaling == KK__FP8_ROWWISE ? scale_row_rowwise : scale_row,
                              .ctx = &ctx,
                              .k_group = KK__FP8_GROUP,
                              .group = scaling == KK__FP8_BLOCK ? combine_block : NULL};
    return kk__cpu_gemm_run(&job, "fp8_gemm");
}
