/* kk_attention_varlen (kernelkit/ops.h): the `attention_varlen` op on a
 * packed batch given by cu_seqlens tensors (its LIST parameters stay empty:
 * the lengths are the caller's data). */
#include <inttypes.h>

#include "core/error.h"
#include "opdef/attention_varlen.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("attention_varlen");

kk_status kk_attention_varlen(const kk_tensor *q, const kk_tensor *k, const kk_tensor *v,
                              const kk_tensor *cu_seqlens_q, const kk_tensor *cu_seqlens_k,
                              int64_t max_seqlen_q, int64_t max_seqlen_k, kk_tensor *o,
                              kk_tensor *lse, const kk_attention_options *opt, kk_stream stream) {
    static const char *const op = "attention_varlen";
    const kk_attention_options defaults = KK_ATTENTION_OPTIONS_INIT;
    if (!opt) opt = &defaults;
    kk_status st =
        kk__entry_varlen_args(op, q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, opt);
    if (st == KK_OK) st = kk__entry_need(op, "k", k, q->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "v", v, q->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "o", o, q->ndim);
    if (st == KK_OK && lse && lse->ndim != 2 && lse->ndim != 3)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "lse",
                           "2 dimensions [Hq,total_q] or 3 [1,Hq,total_q]", "%d", lse->ndim);
    kk_op_params p;
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    kk_tensor views[5];
    const kk_tensor *qv = kk__entry_packed_view(q, &views[0]),
                    *kv = kk__entry_packed_view(k, &views[1]),
                    *vv = kk__entry_packed_view(v, &views[2]),
                    *ov = kk__entry_packed_view(o, &views[3]),
                    *lv = kk__entry_lse_view(lse, &views[4]);
    kk__entry_varlen_shape(&p, cu_seqlens_q, qv, kv, max_seqlen_q, max_seqlen_k, opt);
    p.i[KK__AVL_LSE] = lse != NULL;
    p.i[KK__AVL_DTYPE] = q->dtype;
    p.f[KK__AVL_DROPOUT] = opt->dropout;
    p.i[KK__AVL_SEED] = (int64_t)opt->seed;
    p.i[KK__AVL_OFFSET] = (int64_t)opt->offset;
    p.i[KK__AVL_LENS_Q] = 0; /* the lengths are in the cu_seqlens tensors */
    p.i[KK__AVL_LENS_K] = 0;
    static const kk__entry_arg args[] = {
        {KK__AVL_DTYPE, "q"},
        {KK__AVL_WL, "opt->window_left"},
        {KK__AVL_WR, "opt->window_right"},
        {KK__AVL_SCALE, "opt->scale"},
        {KK__AVL_DROPOUT, "opt->dropout"},
    };
    const int nargs = (int)(sizeof args / sizeof args[0]);
    return kk__entry_run(&p, (const kk_tensor *[]){qv, kv, vv, cu_seqlens_q, cu_seqlens_k, ov, lv},
                         lse ? 7 : 6, stream, args, nargs);
}

/* A case's cu_seqlens tensors hold its lists (or the even split); its
 * maximum lengths are what the parameters resolve to. */
kk_status kk__attention_varlen_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    const kk_attention_options opt = {
        .causal = (int)p->i[KK__AVL_CAUSAL],
        .window_left = p->i[KK__AVL_WL],
        .window_right = p->i[KK__AVL_WR],
        .scale = p->f[KK__AVL_SCALE],
        .dropout = p->f[KK__AVL_DROPOUT],
        .seed = (uint64_t)p->i[KK__AVL_SEED],
        .offset = (uint64_t)p->i[KK__AVL_OFFSET],
    };
    return kk_attention_varlen(t[KK__AVL_T_Q], t[KK__AVL_T_K], t[KK__AVL_T_V], t[KK__AVL_T_CUQ],
                               t[KK__AVL_T_CUK], d.max_q, d.max_k, t[KK__AVL_T_O],
                               p->i[KK__AVL_LSE] ? t[KK__AVL_T_LSE] : NULL, &opt, stream);
}
