/* kk_rope_kv_append (kernelkit/ops.h): the `rope_kv_append` op, in place: the
 * caches are passed as both the op's input and output caches, so the kernel
 * only writes the appended rows. */
#include "core/error.h"
#include "opdef/rope_kv_append.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("rope_kv_append");

kk_status kk_rope_kv_append(const kk_tensor *q, const kk_tensor *k, const kk_tensor *v,
                            const kk_tensor *cache_seqlens, kk_tensor *k_cache, kk_tensor *v_cache,
                            kk_tensor *q_out, const kk_rope_options *opt, kk_stream stream) {
    static const char op[] = "rope_kv_append";
    const kk_rope_options defaults = KK_ROPE_OPTIONS_INIT;
    if (!opt) opt = &defaults;
    kk_op_params p;
    kk_status st = kk__entry_need(op, "q", q, 4);
    if (st == KK_OK) st = kk__entry_need(op, "k", k, 4);
    if (st == KK_OK) st = kk__entry_need(op, "v", v, 4);
    if (st == KK_OK) st = kk__entry_need(op, "cache_seqlens", cache_seqlens, 1);
    if (st == KK_OK) st = kk__entry_need(op, "k_cache", k_cache, 4);
    if (st == KK_OK) st = kk__entry_need(op, "v_cache", v_cache, 4);
    if (st == KK_OK) st = kk__entry_need(op, "q_out", q_out, 4);
    if (st == KK_OK && opt->offset != 0)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "opt->offset",
                           "0 (the positions are cache_seqlens[b] + s)", "%lld",
                           (long long)opt->offset);
    if (st == KK_OK && opt->positions)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "opt->positions",
                           "NULL (the positions are cache_seqlens[b] + s)", "a tensor");
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__RKV_B] = q->shape[0];
    p.i[KK__RKV_HQ] = q->shape[1];
    p.i[KK__RKV_S] = q->shape[2];
    p.i[KK__RKV_D] = q->shape[3];
    p.i[KK__RKV_HKV] = k->shape[1];
    p.i[KK__RKV_SMAX] = k_cache->shape[2];
    p.i[KK__RKV_ROTARY] = opt->rotary_dim;
    p.f[KK__RKV_THETA] = opt->theta;
    p.i[KK__RKV_STYLE] = (int64_t)opt->style;
    p.i[KK__RKV_DTYPE] = q->dtype;
    p.i[KK__RKV_SCALING] = (int64_t)opt->scaling;
    if (opt->scaling == KK_ROPE_SCALING_LLAMA3) { /* as kk_rope: read with llama3 only */
        p.f[KK__RKV_FACTOR] = opt->factor;
        p.f[KK__RKV_LOW] = opt->low_freq_factor;
        p.f[KK__RKV_HIGH] = opt->high_freq_factor;
        p.i[KK__RKV_OLD_LEN] = opt->original_max_position;
    }
    static const kk__entry_arg args[] = {
        {KK__RKV_DTYPE, "q"},
        {KK__RKV_ROTARY, "opt->rotary_dim"},
        {KK__RKV_THETA, "opt->theta"},
        {KK__RKV_STYLE, "opt->style"},
        {KK__RKV_SCALING, "opt->scaling"},
        {KK__RKV_FACTOR, "opt->factor"},
        {KK__RKV_LOW, "opt->low_freq_factor"},
        {KK__RKV_HIGH, "opt->high_freq_factor"},
        {KK__RKV_OLD_LEN, "opt->original_max_position"},
    };
    const int nargs = (int)(sizeof args / sizeof args[0]);
    const kk_tensor *t[KK__RKV_NTENSORS] = {q,       k,     v,       cache_seqlens, k_cache,
                                            v_cache, q_out, k_cache, v_cache};
    return kk__entry_run(&p, t, KK__RKV_NTENSORS, stream, args, nargs);
}

/* In place on the case's output caches, as a user calls it. */
kk_status kk__rope_kv_append_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    const kk_rope_options opt = {
        .rotary_dim = p->i[KK__RKV_ROTARY],
        .theta = p->f[KK__RKV_THETA],
        .style = (kk_rope_style)p->i[KK__RKV_STYLE],
        .scaling = (kk_rope_scaling)p->i[KK__RKV_SCALING],
        .factor = p->f[KK__RKV_FACTOR],
        .low_freq_factor = p->f[KK__RKV_LOW],
        .high_freq_factor = p->f[KK__RKV_HIGH],
        .original_max_position = p->i[KK__RKV_OLD_LEN],
    };
    return kk_rope_kv_append(t[KK__RKV_T_Q], t[KK__RKV_T_K], t[KK__RKV_T_V], t[KK__RKV_T_LENS],
                             t[KK__RKV_T_KC], t[KK__RKV_T_VC], t[KK__RKV_T_Q_OUT], &opt, stream);
}
