/* kk_gemm (kernelkit/ops.h): c = a . b^T through the `gemm` op. */
#include "opdef/gemm.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("gemm");

kk_status kk_gemm(const kk_tensor *a, const kk_tensor *b, kk_tensor *c, kk_stream stream) {
    kk_op_params p;
    kk_status st = kk__entry_need("gemm", "a", a, 2);
    if (st == KK_OK) st = kk__entry_need("gemm", "b", b, 2);
    if (st == KK_OK) st = kk__entry_need("gemm", "c", c, 2);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__GEMM_M] = a->shape[0];
    p.i[KK__GEMM_N] = b->shape[0];
    p.i[KK__GEMM_K] = a->shape[1];
    p.i[KK__GEMM_DTYPE] = a->dtype;
    static const kk__entry_arg args[] = {{KK__GEMM_DTYPE, "a"}};
    return kk__entry_run(&p, (const kk_tensor *[]){a, b, c}, 3, stream, args, 1);
}

kk_status kk__gemm_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)p;
    return kk_gemm(t[0], t[1], t[2], stream);
}
