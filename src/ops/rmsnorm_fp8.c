/* kk_rmsnorm_fp8 (kernelkit/ops.h): the `rmsnorm_fp8` op. */
#include "opdef/rmsnorm_fp8.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("rmsnorm_fp8");

kk_status kk_rmsnorm_fp8(const kk_tensor *x, const kk_tensor *w, kk_tensor *q, kk_tensor *scales,
                         double eps, int group, kk_stream stream) {
    kk_op_params p;
    kk_status st = kk__entry_need("rmsnorm_fp8", "x", x, 2);
    if (st == KK_OK) st = kk__entry_need("rmsnorm_fp8", "w", w, 1);
    if (st == KK_OK) st = kk__entry_need("rmsnorm_fp8", "q", q, 2);
    if (st == KK_OK) st = kk__entry_need("rmsnorm_fp8", "scales", scales, 2);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__RFP8_ROWS] = x->shape[0];
    p.i[KK__RFP8_N] = x->shape[1];
    p.f[KK__RFP8_EPS] = eps;
    p.i[KK__RFP8_GROUP] = group;
    p.i[KK__RFP8_DTYPE] = x->dtype;
    static const kk__entry_arg args[] = {{KK__RFP8_DTYPE, "x"}};
    return kk__entry_run(&p, (const kk_tensor *[]){x, w, q, scales}, 4, stream, args, 1);
}

/* Tensors as the op describes them: x, w, q, scales. */
kk_status kk__rmsnorm_fp8_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    return kk_rmsnorm_fp8(t[0], t[1], t[2], t[3], p->f[KK__RFP8_EPS], (int)p->i[KK__RFP8_GROUP],
                          stream);
}
