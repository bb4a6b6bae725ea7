/* kk_rope (kernelkit/ops.h): the `rope` op. */
#include "opdef/rope.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("rope");

void kk_rope_options_init(kk_rope_options *opt) {
    if (opt) *opt = (kk_rope_options)KK_ROPE_OPTIONS_INIT;
}

kk_status kk_rope(const kk_tensor *x, kk_tensor *y, const kk_rope_options *opt, kk_stream stream) {
    const kk_rope_options defaults = KK_ROPE_OPTIONS_INIT;
    if (!opt) opt = &defaults;
    kk_op_params p;
    kk_status st = kk__entry_need("rope", "x", x, 4);
    if (st == KK_OK) st = kk__entry_need("rope", "y", y, 4);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__ROPE_B] = x->shape[0];
    p.i[KK__ROPE_H] = x->shape[1];
    p.i[KK__ROPE_S] = x->shape[2];
    p.i[KK__ROPE_D] = x->shape[3];
    p.i[KK__ROPE_ROTARY] = opt->rotary_dim;
    p.i[KK__ROPE_OFFSET] = opt->offset;
    p.f[KK__ROPE_THETA] = opt->theta;
    p.i[KK__ROPE_STYLE] = (int64_t)opt->style; /* kk_rope_style's values are the op's choices */
    p.i[KK__ROPE_DTYPE] = x->dtype;
    static const kk__entry_arg args[] = {
        {KK__ROPE_DTYPE, "x"},
        {KK__ROPE_ROTARY, "opt->rotary_dim"},
        {KK__ROPE_OFFSET, "opt->offset"},
        {KK__ROPE_THETA, "opt->theta"},
        {KK__ROPE_STYLE, "opt->style"},
    };
    const int nargs = (int)(sizeof args / sizeof args[0]);
    return kk__entry_run(&p, (const kk_tensor *[]){x, y}, 2, stream, args, nargs);
}

kk_status kk__rope_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    const kk_rope_options opt = {
        .rotary_dim = p->i[KK__ROPE_ROTARY],
        .offset = p->i[KK__ROPE_OFFSET],
        .theta = p->f[KK__ROPE_THETA],
        .style = (kk_rope_style)p->i[KK__ROPE_STYLE],
    };
    return kk_rope(t[0], t[1], &opt, stream);
}
