/* kk_attention (kernelkit/ops.h): the `attention` op, and the options shared
 * with kk_attention_varlen. */
#include "core/error.h"
#include "opdef/attention.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("attention");

void kk_attention_options_init(kk_attention_options *opt) {
    if (opt) *opt = (kk_attention_options)KK_ATTENTION_OPTIONS_INIT;
}

kk_status kk_attention(const kk_tensor *q, const kk_tensor *k, const kk_tensor *v, kk_tensor *o,
                       kk_tensor *lse, const kk_attention_options *opt, kk_stream stream) {
    const kk_attention_options defaults = KK_ATTENTION_OPTIONS_INIT;
    if (!opt) opt = &defaults;
    kk_op_params p;
    kk_status st = kk__entry_need("attention", "q", q, 4);
    if (st == KK_OK) st = kk__entry_need("attention", "k", k, 4);
    if (st == KK_OK) st = kk__entry_need("attention", "v", v, 4);
    if (st == KK_OK) st = kk__entry_need("attention", "o", o, 4);
    if (st == KK_OK && lse) st = kk__entry_need("attention", "lse", lse, 3);
    if (st == KK_OK) st = kk__entry_attention_options("attention", opt);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__ATT_B] = q->shape[0];
    p.i[KK__ATT_HQ] = q->shape[1];
    p.i[KK__ATT_HKV] = k->shape[1];
    p.i[KK__ATT_SQ] = q->shape[2];
    p.i[KK__ATT_SK] = k->shape[2];
    p.i[KK__ATT_D] = q->shape[3];
    p.i[KK__ATT_CAUSAL] = opt->causal != 0;
    p.i[KK__ATT_WL] = opt->window_left;
    p.i[KK__ATT_WR] = opt->window_right;
    p.f[KK__ATT_SCALE] = opt->scale;
    p.i[KK__ATT_LSE] = lse != NULL;
    p.i[KK__ATT_DTYPE] = q->dtype;
    p.f[KK__ATT_DROPOUT] = opt->dropout;
    p.i[KK__ATT_SEED] = (int64_t)opt->seed;
    p.i[KK__ATT_OFFSET] = (int64_t)opt->offset;
    static const kk__entry_arg args[] = {
        {KK__ATT_DTYPE, "q"},
        {KK__ATT_WL, "opt->window_left"},
        {KK__ATT_WR, "opt->window_right"},
        {KK__ATT_SCALE, "opt->scale"},
        {KK__ATT_DROPOUT, "opt->dropout"},
    };
    const int nargs = (int)(sizeof args / sizeof args[0]);
    return kk__entry_run(&p, (const kk_tensor *[]){q, k, v, o, lse}, lse ? 5 : 4, stream, args,
                         nargs);
}

kk_status kk__attention_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    const kk_attention_options opt = {
        .causal = (int)p->i[KK__ATT_CAUSAL],
        .window_left = p->i[KK__ATT_WL],
        .window_right = p->i[KK__ATT_WR],
        .scale = p->f[KK__ATT_SCALE],
        .dropout = p->f[KK__ATT_DROPOUT],
        .seed = (uint64_t)p->i[KK__ATT_SEED],
        .offset = (uint64_t)p->i[KK__ATT_OFFSET],
    };
    return kk_attention(t[0], t[1], t[2], t[3], p->i[KK__ATT_LSE] ? t[4] : NULL, &opt, stream);
}
