/* kk_attention_varlen (kernelkit/ops.h): the `attention_varlen` op on a
 * packed batch given by cu_seqlens tensors (its LIST parameters stay empty:
 * the lengths are the caller's data). */
#include <inttypes.h>

#include "core/error.h"
#include "opdef/attention_varlen.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("attention_varlen");

/* A [total,H,D] tensor (FlashAttention's varlen layout) as the [1,H,total,D]
 * view the op takes; a 4-dimensional one as it is. The view is a copy of the
 * descriptor on the caller's stack, valid while t is: nothing is allocated. */
static const kk_tensor *packed_view(const kk_tensor *t, kk_tensor *view) {
    if (t->ndim == 4) return t;
    *view = *t;
    view->ndim = 4;
    view->shape[0] = 1;
    view->shape[1] = t->shape[1];
    view->shape[2] = t->shape[0];
    view->shape[3] = t->shape[2];
    view->strides[0] = t->shape[0] * t->strides[0]; /* a dimension of 1: any stride */
    view->strides[1] = t->strides[1];
    view->strides[2] = t->strides[0];
    view->strides[3] = t->strides[2];
    return view;
}

/* lse [Hq,total_q] as [1,Hq,total_q]; a 3-dimensional one as it is. */
static const kk_tensor *lse_view(const kk_tensor *t, kk_tensor *view) {
    if (!t || t->ndim == 3) return t;
    *view = *t;
    view->ndim = 3;
    view->shape[0] = 1;
    view->shape[1] = t->shape[0];
    view->shape[2] = t->shape[1];
    view->strides[0] = t->shape[0] * t->strides[0];
    view->strides[1] = t->strides[0];
    view->strides[2] = t->strides[1];
    return view;
}

static kk_status seqlen_arg(const char *name, int64_t v) {
    if (v >= 1 && v <= (INT64_C(1) << 20)) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "attention_varlen", name,
                         "1..1048576, at least the longest sequence's length", "%" PRId64, v);
}

kk_status kk_attention_varlen(const kk_tensor *q, const kk_tensor *k, const kk_tensor *v,
                              const kk_tensor *cu_seqlens_q, const kk_tensor *cu_seqlens_k,
                              int64_t max_seqlen_q, int64_t max_seqlen_k, kk_tensor *o,
                              kk_tensor *lse, const kk_attention_options *opt, kk_stream stream) {
    static const char *const op = "attention_varlen";
    const kk_attention_options defaults = KK_ATTENTION_OPTIONS_INIT;
    if (!opt) opt = &defaults;
    kk_status st = q ? KK_OK : kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "q", "a tensor", "NULL");
    if (st == KK_OK && q->ndim != 3 && q->ndim != 4)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "q",
                           "3 dimensions [total_q,Hq,D] or 4 [1,Hq,total_q,D]", "%d", q->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "k", k, q->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "v", v, q->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "o", o, q->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "cu_seqlens_q", cu_seqlens_q, 1);
    if (st == KK_OK) st = kk__entry_need(op, "cu_seqlens_k", cu_seqlens_k, 1);
    if (st == KK_OK && cu_seqlens_q->shape[0] < 2)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "cu_seqlens_q",
                           "nseq + 1 >= 2 offsets (one sequence at least)", "%" PRId64 " offsets",
                           cu_seqlens_q->shape[0]);
    if (st == KK_OK && lse && lse->ndim != 2 && lse->ndim != 3)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "lse",
                           "2 dimensions [Hq,total_q] or 3 [1,Hq,total_q]", "%d", lse->ndim);
    if (st == KK_OK) st = seqlen_arg("max_seqlen_q", max_seqlen_q);
    if (st == KK_OK) st = seqlen_arg("max_seqlen_k", max_seqlen_k);
    if (st == KK_OK && opt->seed > INT64_MAX)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "opt->seed", "at most 2^63-1", "%" PRIu64,
                           opt->seed);
    if (st == KK_OK && opt->offset > INT64_MAX)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "opt->offset", "at most 2^63-1", "%" PRIu64,
                           opt->offset);
    kk_op_params p;
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    kk_tensor views[5];
    const kk_tensor *qv = packed_view(q, &views[0]), *kv = packed_view(k, &views[1]),
                    *vv = packed_view(v, &views[2]), *ov = packed_view(o, &views[3]),
                    *lv = lse_view(lse, &views[4]);
    p.i[KK__AVL_NSEQ] = cu_seqlens_q->shape[0] - 1;
    p.i[KK__AVL_HQ] = qv->shape[1];
    p.i[KK__AVL_HKV] = kv->shape[1];
    p.i[KK__AVL_TQ] = qv->shape[2];
    p.i[KK__AVL_TK] = kv->shape[2];
    p.i[KK__AVL_MAXQ] = max_seqlen_q;
    p.i[KK__AVL_MAXK] = max_seqlen_k;
    p.i[KK__AVL_D] = qv->shape[3];
    p.i[KK__AVL_CAUSAL] = opt->causal != 0;
    p.i[KK__AVL_WL] = opt->window_left;
    p.i[KK__AVL_WR] = opt->window_right;
    p.f[KK__AVL_SCALE] = opt->scale;
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
