/* kk_fp8_gemm, kk_fp8_gemm_scaled (kernelkit/ops.h): the `fp8_gemm` op; the
 * three dtypes are read off a, b and c, the scaling mode is an argument. */
#include "core/error.h"
#include "opdef/fp8_gemm.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("fp8_gemm");

kk_status kk_fp8_gemm_scaled(const kk_tensor *a, const kk_tensor *b, const kk_tensor *scale_a,
                             const kk_tensor *scale_b, kk_tensor *c, kk_fp8_scaling scaling,
                             kk_stream stream) {
    static const char *const op = "fp8_gemm";
    if ((int)scaling < KK_FP8_SCALING_TENSOR || (int)scaling > KK_FP8_SCALING_BLOCK)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "scaling",
                             "KK_FP8_SCALING_TENSOR, _ROWWISE or _BLOCK (0, 1, 2)", "%d",
                             (int)scaling);
    kk_op_params p;
    kk_status st = kk__entry_need(op, "a", a, 2);
    if (st == KK_OK) st = kk__entry_need(op, "b", b, 2);
    if (st == KK_OK) st = kk__entry_need(op, "scale_a", scale_a, -1); /* kk_op_run checks */
    if (st == KK_OK) st = kk__entry_need(op, "scale_b", scale_b, -1);
    if (st == KK_OK) st = kk__entry_need(op, "c", c, 2);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__FP8_M] = a->shape[0];
    p.i[KK__FP8_N] = b->shape[0];
    p.i[KK__FP8_K] = a->shape[1];
    p.i[KK__FP8_A_DTYPE] = a->dtype;
    p.i[KK__FP8_B_DTYPE] = b->dtype;
    p.i[KK__FP8_C_DTYPE] = c->dtype;
    p.i[KK__FP8_SCALING] = (int64_t)scaling;
    static const kk__entry_arg args[] = {
        {KK__FP8_A_DTYPE, "a"}, {KK__FP8_B_DTYPE, "b"}, {KK__FP8_C_DTYPE, "c"}};
    return kk__entry_run(&p, (const kk_tensor *[]){a, b, scale_a, scale_b, c}, 5, stream, args, 3);
}

kk_status kk_fp8_gemm(const kk_tensor *a, const kk_tensor *b, const kk_tensor *scale_a,
                      const kk_tensor *scale_b, kk_tensor *c, kk_stream stream) {
    return kk_fp8_gemm_scaled(a, b, scale_a, scale_b, c, KK_FP8_SCALING_TENSOR, stream);
}

kk_status kk__fp8_gemm_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    return kk_fp8_gemm_scaled(t[0], t[1], t[2], t[3], t[4], (kk_fp8_scaling)p->i[KK__FP8_SCALING],
                              stream);
}
