/* kk_rmsnorm (kernelkit/ops.h): the `rmsnorm` op. */
#include "opdef/rmsnorm.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("rmsnorm");

kk_status kk_rmsnorm(const kk_tensor *x, const kk_tensor *w, kk_tensor *y, double eps,
                     kk_stream stream) {
    kk_op_params p;
    kk_status st = kk__entry_need("rmsnorm", "x", x, 2);
    if (st == KK_OK) st = kk__entry_need("rmsnorm", "w", w, 1);
    if (st == KK_OK) st = kk__entry_need("rmsnorm", "y", y, 2);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__RMS_ROWS] = x->shape[0];
    p.i[KK__RMS_N] = x->shape[1];
    p.f[KK__RMS_EPS] = eps;
    p.i[KK__RMS_DTYPE] = x->dtype;
    static const kk__entry_arg args[] = {{KK__RMS_DTYPE, "x"}};
    return kk__entry_run(&p, (const kk_tensor *[]){x, w, y}, 3, stream, args, 1);
}

/* Tensors as the op describes them: x, w, y. */
kk_status kk__rmsnorm_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    return kk_rmsnorm(t[0], t[1], t[2], p->f[KK__RMS_EPS], stream);
}
