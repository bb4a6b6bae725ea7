/* The `fp8_gemm` op's CPU kernel: c = (sa * sb) * a . b^T with fp8 a and b,
 * decoded to f32 panels through a 256-entry table and multiplied by the
 * driver's sgemm (gemm_cpu.c). A product of two fp8 values is exact in f32, so
 * only the accumulation rounds, then the epilogue scales and rounds once.
 * docs/backends/cpu.md, "FP8 GEMM". */
#include "core/error.h"
#include "cpu/cpu_gemm_internal.h"
#include "cpu/cpu_kernels.h"
#include "opdef/fp8_gemm.h"

typedef struct fp8_ctx {
    float scale; /* sa * sb */
    void *c;
    kk_dtype dtype;
} fp8_ctx;

static void fill_table(kk_dtype dt, float *table) {
    for (int code = 0; code < 256; code++)
        table[code] =
            dt == KK_DTYPE_FP8_E4M3 ? kk_e4m3_to_f32((uint8_t)code) : kk_e5m2_to_f32((uint8_t)code);
}

static void scale_row(const kk__gemm_job *job, float *const *c, int64_t m, int64_t n0,
                      int64_t cols) {
    const fp8_ctx *x = job->ctx;
    float *restrict h = c[0];
    const float s = x->scale;
    for (int64_t j = 0; j < cols; j++) h[j] *= s;
    kk__cpu_store_row(h, x->c, x->dtype, m * job->N + n0, cols);
}

kk_status kk__fp8_gemm_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const kk_dtype a_dt = (kk_dtype)p->i[KK__FP8_A_DTYPE], b_dt = (kk_dtype)p->i[KK__FP8_B_DTYPE];
    const kk_dtype c_dt = (kk_dtype)p->i[KK__FP8_C_DTYPE];
    float a_table[256], b_table[256];
    fill_table(a_dt, a_table);
    fill_table(b_dt, b_table);
    const fp8_ctx ctx = {.scale = *(const float *)t[2]->data * *(const float *)t[3]->data,
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
                              .row = scale_row,
                              .ctx = &ctx};
    return kk__cpu_gemm_run(&job, "fp8_gemm");
}
