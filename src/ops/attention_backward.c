/* kk_attention_backward (kernelkit/ops.h): the `attention_backward` op. */
#include "core/error.h"
#include "opdef/attention_backward.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("attention_backward");

kk_status kk_attention_backward(const kk_tensor *q, const kk_tensor *k, const kk_tensor *v,
                                const kk_tensor *o, const kk_tensor *dout, const kk_tensor *lse,
                                kk_tensor *dq, kk_tensor *dk, kk_tensor *dv,
                                const kk_attention_options *opt, kk_stream stream) {
    static const char op[] = "attention_backward";
    const kk_attention_options defaults = KK_ATTENTION_OPTIONS_INIT;
    if (!opt) opt = &defaults;
    kk_op_params p;
    kk_status st = kk__entry_need(op, "q", q, 4);
    if (st == KK_OK) st = kk__entry_need(op, "k", k, 4);
    if (st == KK_OK) st = kk__entry_need(op, "v", v, 4);
    if (st == KK_OK) st = kk__entry_need(op, "o", o, 4);
    if (st == KK_OK) st = kk__entry_need(op, "dout", dout, 4);
    if (st == KK_OK) st = kk__entry_need(op, "lse", lse, 3);
    if (st == KK_OK) st = kk__entry_need(op, "dq", dq, 4);
    if (st == KK_OK) st = kk__entry_need(op, "dk", dk, 4);
    if (st == KK_OK) st = kk__entry_need(op, "dv", dv, 4);
    if (st == KK_OK) st = kk__entry_attention_options(op, opt);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__ATB_B] = q->shape[0];
    p.i[KK__ATB_HQ] = q->shape[1];
    p.i[KK__ATB_HKV] = k->shape[1];
    p.i[KK__ATB_SQ] = q->shape[2];
    p.i[KK__ATB_SK] = k->shape[2];
    p.i[KK__ATB_D] = q->shape[3];
    p.i[KK__ATB_CAUSAL] = opt->causal != 0;
    p.i[KK__ATB_WL] = opt->window_left;
    p.i[KK__ATB_WR] = opt->window_right;
    p.f[KK__ATB_SCALE] = opt->scale;
    p.i[KK__ATB_DTYPE] = q->dtype;
    p.f[KK__ATB_DROPOUT] = opt->dropout;
    p.i[KK__ATB_SEED] = (int64_t)opt->seed;
    p.i[KK__ATB_OFFSET] = (int64_t)opt->offset;
    static const kk__entry_arg args[] = {
        {KK__ATB_DTYPE, "q"},
        {KK__ATB_WL, "opt->window_left"},
        {KK__ATB_WR, "opt->window_right"},
        {KK__ATB_SCALE, "opt->scale"},
        {KK__ATB_DROPOUT, "opt->dropout"},
    };
    const int nargs = (int)(sizeof args / sizeof args[0]);
    return kk__entry_run(&p, (const kk_tensor *[]){q, k, v, o, dout, lse, dq, dk, dv}, 9, stream,
                         args, nargs);
}

kk_status kk__attention_backward_entry(const kk_op_params *p, kk_tensor *const *t,
                                       kk_stream stream) {
    const kk_attention_options opt = {
        .causal = (int)p->i[KK__ATB_CAUSAL],
        .window_left = p->i[KK__ATB_WL],
        .window_right = p->i[KK__ATB_WR],
        .scale = p->f[KK__ATB_SCALE],
        .dropout = p->f[KK__ATB_DROPOUT],
        .seed = (uint64_t)p->i[KK__ATB_SEED],
        .offset = (uint64_t)p->i[KK__ATB_OFFSET],
    };
    return kk_attention_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], &opt,
                                 stream);
}
