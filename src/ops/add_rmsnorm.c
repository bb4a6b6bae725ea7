/* kk_add_rmsnorm (kernelkit/ops.h): the `add_rmsnorm` op. */
#include "opdef/add_rmsnorm.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("add_rmsnorm");

kk_status kk_add_rmsnorm(const kk_tensor *x, const kk_tensor *residual, const kk_tensor *w,
                         kk_tensor *h, kk_tensor *y, double eps, kk_stream stream) {
    kk_op_params p;
    kk_status st = kk__entry_need("add_rmsnorm", "x", x, 2);
    if (st == KK_OK) st = kk__entry_need("add_rmsnorm", "residual", residual, 2);
    if (st == KK_OK) st = kk__entry_need("add_rmsnorm", "w", w, 1);
    if (st == KK_OK) st = kk__entry_need("add_rmsnorm", "h", h, 2);
    if (st == KK_OK) st = kk__entry_need("add_rmsnorm", "y", y, 2);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__ARN_ROWS] = x->shape[0];
    p.i[KK__ARN_N] = x->shape[1];
    p.f[KK__ARN_EPS] = eps;
    p.i[KK__ARN_DTYPE] = x->dtype;
    static const kk__entry_arg args[] = {{KK__ARN_DTYPE, "x"}};
    return kk__entry_run(&p, (const kk_tensor *[]){x, residual, w, h, y}, 5, stream, args, 1);
}

/* Tensors as the op describes them: x, residual, w, h, y. */
kk_status kk__add_rmsnorm_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    return kk_add_rmsnorm(t[0], t[1], t[2], t[3], t[4], p->f[KK__ARN_EPS], stream);
}
