/* kk_softmax and kk_softmax_masked (kernelkit/ops.h): the `softmax` op. */
#include "opdef/softmax.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("softmax");

kk_status kk_softmax_masked(const kk_tensor *x, kk_tensor *y, double scale, int causal, int64_t sq,
                            kk_stream stream) {
    kk_op_params p;
    kk_status st = kk__entry_need("softmax", "x", x, 2);
    if (st == KK_OK) st = kk__entry_need("softmax", "y", y, 2);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__SMX_ROWS] = x->shape[0];
    p.i[KK__SMX_N] = x->shape[1];
    p.f[KK__SMX_SCALE] = scale;
    p.i[KK__SMX_DTYPE] = x->dtype;
    p.i[KK__SMX_CAUSAL] = causal != 0;
    p.i[KK__SMX_SQ] = sq;
    static const kk__entry_arg args[] = {{KK__SMX_DTYPE, "x"}};
    return kk__entry_run(&p, (const kk_tensor *[]){x, y}, 2, stream, args, 1);
}

kk_status kk_softmax(const kk_tensor *x, kk_tensor *y, double scale, kk_stream stream) {
    return kk_softmax_masked(x, y, scale, 0, 0, stream);
}

kk_status kk__softmax_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    return kk_softmax_masked(t[0], t[1], p->f[KK__SMX_SCALE], (int)p->i[KK__SMX_CAUSAL],
                             p->i[KK__SMX_SQ], stream);
}
