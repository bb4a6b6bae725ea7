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
    if (st == KK_OK && opt->positions)
        st = kk__entry_need("rope", "opt->positions", opt->positions, 2);
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
    p.i[KK__ROPE_POSITIONS] = opt->positions != NULL;
    p.i[KK__ROPE_SCALING] = (int64_t)opt->scaling; /* so are kk_rope_scaling's */
    /* read with llama3 only: options filled before these fields existed leave them 0 */
    if (opt->scaling == KK_ROPE_SCALING_LLAMA3) {
        p.f[KK__ROPE_FACTOR] = opt->factor;
        p.f[KK__ROPE_LOW] = opt->low_freq_factor;
        p.f[KK__ROPE_HIGH] = opt->high_freq_factor;
        p.i[KK__ROPE_OLD_LEN] = opt->original_max_position;
    }
    static const kk__entry_arg args[] = {
        {KK__ROPE_DTYPE, "x"},
        {KK__ROPE_ROTARY, "opt->rotary_dim"},
        {KK__ROPE_OFFSET, "opt->offset"},
        {KK__ROPE_THETA, "opt->theta"},
        {KK__ROPE_STYLE, "opt->style"},
        {KK__ROPE_SCALING, "opt->scaling"},
        {KK__ROPE_FACTOR, "opt->factor"},
        {KK__ROPE_LOW, "opt->low_freq_factor"},
        {KK__ROPE_HIGH, "opt->high_freq_factor"},
        {KK__ROPE_OLD_LEN, "opt->original_max_position"},
    };
    const int nargs = (int)(sizeof args / sizeof args[0]);
    if (opt->positions)
        return kk__entry_run(&p, (const kk_tensor *[]){x, opt->positions, y}, 3, stream, args,
                             nargs);
    return kk__entry_run(&p, (const kk_tensor *[]){x, y}, 2, stream, args, nargs);
}

kk_status kk__rope_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    const int given = p->i[KK__ROPE_POSITIONS] != 0;
    const kk_rope_options opt = {
        .rotary_dim = p->i[KK__ROPE_ROTARY],
        .offset = p->i[KK__ROPE_OFFSET],
        .theta = p->f[KK__ROPE_THETA],
        .style = (kk_rope_style)p->i[KK__ROPE_STYLE],
        .positions = given ? t[1] : NULL,
        .scaling = (kk_rope_scaling)p->i[KK__ROPE_SCALING],
        .factor = p->f[KK__ROPE_FACTOR],
        .low_freq_factor = p->f[KK__ROPE_LOW],
        .high_freq_factor = p->f[KK__ROPE_HIGH],
        .original_max_position = p->i[KK__ROPE_OLD_LEN],
    };
    return kk_rope(t[0], t[given ? 2 : 1], &opt, stream);
}
