/* kk_layernorm (kernelkit/ops.h): the `layernorm` op; w and b present is its
 * affine parameter. */
#include "core/error.h"
#include "opdef/layernorm.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("layernorm");

kk_status kk_layernorm(const kk_tensor *x, const kk_tensor *w, const kk_tensor *b, kk_tensor *y,
                       double eps, kk_stream stream) {
    if (!w != !b)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "layernorm", "w, b", "both or neither", "%s",
                             w ? "b NULL" : "w NULL");
    kk_op_params p;
    kk_status st = kk__entry_need("layernorm", "x", x, 2);
    if (st == KK_OK && w) st = kk__entry_need("layernorm", "w", w, 1);
    if (st == KK_OK && b) st = kk__entry_need("layernorm", "b", b, 1);
    if (st == KK_OK) st = kk__entry_need("layernorm", "y", y, 2);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__LN_ROWS] = x->shape[0];
    p.i[KK__LN_N] = x->shape[1];
    p.f[KK__LN_EPS] = eps;
    p.i[KK__LN_AFFINE] = w != NULL;
    p.i[KK__LN_DTYPE] = x->dtype;
    static const kk__entry_arg args[] = {{KK__LN_DTYPE, "x"}};
    if (w) return kk__entry_run(&p, (const kk_tensor *[]){x, w, b, y}, 4, stream, args, 1);
    return kk__entry_run(&p, (const kk_tensor *[]){x, y}, 2, stream, args, 1);
}

/* Tensors as the op describes them: x, [w, b], y. */
kk_status kk__layernorm_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    const double eps = p->f[KK__LN_EPS];
    if (p->i[KK__LN_AFFINE]) return kk_layernorm(t[0], t[1], t[2], t[3], eps, stream);
    return kk_layernorm(t[0], NULL, NULL, t[1], eps, stream);
}
