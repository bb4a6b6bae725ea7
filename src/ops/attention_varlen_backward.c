/* kk_attention_varlen_backward (kernelkit/ops.h): the
 * `attention_varlen_backward` op on a packed batch given by cu_seqlens tensors
 * (its LIST parameters stay empty: the lengths are the caller's data), the
 * tensors taken in kk_attention_varlen's layouts. */
#include "core/error.h"
#include "opdef/attention_varlen_backward.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("attention_varlen_backward");

kk_status kk_attention_varlen_backward(const kk_tensor *q, const kk_tensor *k, const kk_tensor *v,
                                       const kk_tensor *o, const kk_tensor *dout,
                                       const kk_tensor *lse, const kk_tensor *cu_seqlens_q,
                                       const kk_tensor *cu_seqlens_k, int64_t max_seqlen_q,
                                       int64_t max_seqlen_k, kk_tensor *dq, kk_tensor *dk,
                                       kk_tensor *dv, const kk_attention_options *opt,
                                       kk_stream stream) {
    static const char *const op = "attention_varlen_backward";
    const kk_attention_options defaults = KK_ATTENTION_OPTIONS_INIT;
    if (!opt) opt = &defaults;
    kk_status st =
        kk__entry_varlen_args(op, q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, opt);
    if (st == KK_OK) st = kk__entry_need(op, "k", k, q->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "v", v, q->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "o", o, q->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "dout", dout, q->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "lse", lse, -1);
    if (st == KK_OK && lse->ndim != 2 && lse->ndim != 3)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "lse",
                           "2 dimensions [Hq,total_q] or 3 [1,Hq,total_q]", "%d", lse->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "dq", dq, q->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "dk", dk, q->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "dv", dv, q->ndim);
    kk_op_params p;
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    kk_tensor views[9];
    const kk_tensor *t[KK__AVB_T_COUNT] = {
        [KK__AVB_T_Q] = kk__entry_packed_view(q, &views[0]),
        [KK__AVB_T_K] = kk__entry_packed_view(k, &views[1]),
        [KK__AVB_T_V] = kk__entry_packed_view(v, &views[2]),
        [KK__AVB_T_O] = kk__entry_packed_view(o, &views[3]),
        [KK__AVB_T_DO] = kk__entry_packed_view(dout, &views[4]),
        [KK__AVB_T_LSE] = kk__entry_lse_view(lse, &views[5]),
        [KK__AVB_T_CUQ] = cu_seqlens_q,
        [KK__AVB_T_CUK] = cu_seqlens_k,
        [KK__AVB_T_DQ] = kk__entry_packed_view(dq, &views[6]),
        [KK__AVB_T_DK] = kk__entry_packed_view(dk, &views[7]),
        [KK__AVB_T_DV] = kk__entry_packed_view(dv, &views[8]),
    };
    kk__entry_varlen_shape(&p, cu_seqlens_q, t[KK__AVB_T_Q], t[KK__AVB_T_K], max_seqlen_q,
                           max_seqlen_k, opt); /* the forward's indices, these too */
    p.i[KK__AVB_DTYPE] = q->dtype;
    p.f[KK__AVB_DROPOUT] = opt->dropout;
    p.i[KK__AVB_SEED] = (int64_t)opt->seed;
    p.i[KK__AVB_OFFSET] = (int64_t)opt->offset;
    p.i[KK__AVB_LENS_Q] = 0; /* the lengths are in the cu_seqlens tensors */
    p.i[KK__AVB_LENS_K] = 0;
    static const kk__entry_arg args[] = {
        {KK__AVB_DTYPE, "q"},
        {KK__AVB_WL, "opt->window_left"},
        {KK__AVB_WR, "opt->window_right"},
        {KK__AVB_SCALE, "opt->scale"},
        {KK__AVB_DROPOUT, "opt->dropout"},
    };
    const int nargs = (int)(sizeof args / sizeof args[0]);
    return kk__entry_run(&p, t, KK__AVB_T_COUNT, stream, args, nargs);
}

/* A case's cu_seqlens tensors hold its lists (or the even split); its
 * maximum lengths are what the parameters resolve to. */
kk_status kk__attention_varlen_backward_entry(const kk_op_params *p, kk_tensor *const *t,
                                              kk_stream stream) {
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    const kk_attention_options opt = {
        .causal = (int)p->i[KK__AVB_CAUSAL],
        .window_left = p->i[KK__AVB_WL],
        .window_right = p->i[KK__AVB_WR],
        .scale = p->f[KK__AVB_SCALE],
        .dropout = p->f[KK__AVB_DROPOUT],
        .seed = (uint64_t)p->i[KK__AVB_SEED],
        .offset = (uint64_t)p->i[KK__AVB_OFFSET],
    };
    return kk_attention_varlen_backward(
        t[KK__AVB_T_Q], t[KK__AVB_T_K], t[KK__AVB_T_V], t[KK__AVB_T_O], t[KK__AVB_T_DO],
        t[KK__AVB_T_LSE], t[KK__AVB_T_CUQ], t[KK__AVB_T_CUK], d.max_q, d.max_k, t[KK__AVB_T_DQ],
        t[KK__AVB_T_DK], t[KK__AVB_T_DV], &opt, stream);
}
