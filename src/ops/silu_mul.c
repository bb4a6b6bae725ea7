/* kk_silu_mul (kernelkit/ops.h): the `silu_mul` op. */
#include "core/error.h"
#include "opdef/silu_mul.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("silu_mul");

kk_status kk_silu_mul(const kk_tensor *g, const kk_tensor *u, kk_tensor *y, kk_stream stream) {
    kk_op_params p;
    kk_status st = kk__entry_need("silu_mul", "g", g, 2);
    if (st == KK_OK && u) st = kk__entry_need("silu_mul", "u", u, 2);
    if (st == KK_OK) st = kk__entry_need("silu_mul", "y", y, 2);
    if (st == KK_OK && !u && g->shape[1] % 2)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, "silu_mul", "g",
                           "[M, 2N] when u is NULL (gate then up in each row): an even number "
                           "of columns",
                           "%lld columns", (long long)g->shape[1]);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__SILU_M] = g->shape[0];
    p.i[KK__SILU_N] = u ? g->shape[1] : g->shape[1] / 2;
    p.i[KK__SILU_PACKED] = !u;
    p.i[KK__SILU_DTYPE] = g->dtype;
    static const kk__entry_arg args[] = {{KK__SILU_DTYPE, "g"}};
    if (!u) return kk__entry_run(&p, (const kk_tensor *[]){g, y}, 2, stream, args, 1);
    return kk__entry_run(&p, (const kk_tensor *[]){g, u, y}, 3, stream, args, 1);
}

/* Tensors as the op describes them: gu, y, or g, u, y. */
kk_status kk__silu_mul_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    if (p->i[KK__SILU_PACKED]) return kk_silu_mul(t[0], NULL, t[1], stream);
    return kk_silu_mul(t[0], t[1], t[2], stream);
}
