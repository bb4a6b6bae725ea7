/* The decoder's executor: the plan's steps (decoder_plan.c) for each layer,
 * each one call of the public ops (kernelkit/ops.h) or a kk_tensor_copy, on
 * views of the work buffers shaped for this call's B and S; with overlap
 * (tensor parallel), a prefill as two micro-batches whose all-reduces run on a
 * communication stream while the other micro-batch computes
 * (docs/distributed.md, "Overlap"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/strided_copy.h"
#include "core/error.h"
#include "kernelkit/op.h"
#include "model/decoder_internal.h"

/* The views made for one call, destroyed together. */
typedef struct views {
    kk_tensor *t[128];
    int n;
} views;

static kk_tensor *keep(views *v, kk_tensor *t) {
    if (t && v->n < (int)(sizeof v->t / sizeof v->t[0])) v->t[v->n++] = t;
    return t;
}

static void drop(views *v, int from) {
    while (v->n > from) kk_tensor_destroy(v->t[--v->n]);
}

/* Elements [off, off + n) of buffer b (flat), or a view of n elements
 * (off 0), as a contiguous tensor of `shape` (n elements). */
static kk_status shaped_at(views *v, kk_tensor *b, int64_t off, int ndim, const int64_t *shape,
                           kk_tensor **out) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    kk_tensor *s = NULL, *r = NULL;
    /* a flat work buffer is cut to n; a view already n long is reshaped */
    kk_status st = kk_tensor_slice(b, 0, off, b->ndim == 1 ? off + n : b->shape[0], 1, &s);
    if (st == KK_OK) st = kk_tensor_reshape(s, ndim, shape, &r);
    kk_tensor_destroy(s);
    *out = keep(v, r);
    return st;
}

static kk_status shaped(views *v, kk_tensor *b, int ndim, const int64_t *shape, kk_tensor **out) {
    return shaped_at(v, b, 0, ndim, shape, out);
}

/* A [T, H*D] buffer seen as [B,H,S,D] (strided: its memory is [B,S,H,D]). */
static kk_status heads_view(views *v, kk_tensor *tok, int64_t B, int64_t S, int64_t H, int64_t D,
                            kk_tensor **out) {
    kk_tensor *bshd = NULL, *t = NULL;
    kk_status st = shaped(v, tok, 4, (int64_t[]){B, S, H, D}, &bshd);
    if (st == KK_OK) st = kk_tensor_transpose(bshd, 1, 2, &t);
    *out = keep(v, t);
    return st;
}

/* A [T, (Hq+2Hkv)*D] buffer (q, k, v side by side per token) seen as q
 * [B,Hq,S,D], k and v [B,Hkv,S,D] (strided: its memory is [B,S,Hq+2Hkv,D]). */
static kk_status qkv_heads_views(views *v, kk_tensor *tok, int64_t B, int64_t S, int64_t hq,
                                 int64_t hkv, int64_t D, kk_tensor **q, kk_tensor **k,
                                 kk_tensor **val) {
    kk_tensor *bshd = NULL;
    kk_status st = shaped(v, tok, 4, (int64_t[]){B, S, hq + 2 * hkv, D}, &bshd);
    const int64_t from[3] = {0, hq, hq + hkv}, to[3] = {hq, hq + hkv, hq + 2 * hkv};
    kk_tensor **out[3] = {q, k, val};
    for (int x = 0; x < 3; x++) {
        kk_tensor *part = NULL, *t = NULL;
        if (st == KK_OK) st = kk_tensor_slice(bshd, 2, from[x], to[x], 1, &part);
        keep(v, part);
        if (st == KK_OK) st = kk_tensor_transpose(part, 1, 2, &t);
        *out[x] = keep(v, t);
    }
    return st;
}

/* Cache rows [from, to) of sequences b0 .. b0 + B - 1: [B,Hkv,to-from,D]. */
static kk_status cache_rows(views *v, kk_tensor *cache, int64_t b0, int64_t B, int64_t from,
                            int64_t to, kk_tensor **out) {
    kk_tensor *b = NULL, *r = NULL;
    kk_status st = kk_tensor_slice(cache, 0, b0, b0 + B, 1, &b);
    if (st == KK_OK && (from != 0 || to != cache->shape[2]))
        st = kk_tensor_slice(b, 2, from, to, 1, &r);
    else
        r = b, b = NULL;
    kk_tensor_destroy(b);
    *out = keep(v, r);
    return st;
}

/* One call of the layers, or one micro-batch of it: sequences b0 .. b0 + B - 1,
 * S new tokens each after L cached ones; its rows of the work buffers start at
 * token t0 (of the whole call's B x S), its positions at element pos of
 * d->seqlens. */
typedef struct call {
    kk_decoder *d;
    int64_t B, S, L; /* batch, new tokens, cached tokens */
    int64_t b0, t0, pos;
    kk_tensor *act[KK__DB_COUNT];
    views *v;
    kk_stream stream;      /* the ops' stream: NULL, or the profiler's (decoder_profile.c) */
    kk_stream comm_stream; /* the all-reduces' (overlap), else `stream` */
    kk_tensor *lens;       /* rope_kv_append's lengths: NULL = d->seqlens at pos (graphs: theirs) */
} call;

static kk_tensor *weight(const call *c, int64_t layer, kk__dbuf id) {
    return c->d->weights[layer * KK__DLAYER_WEIGHTS + (id - KK__DB_W_Q)];
}

/* A step's tensor: a weight of the layer or an activation view (NULL for a
 * weight the decoder holds as fp8 instead: fp8_weight). */
static kk_tensor *arg(const call *c, int64_t layer, kk__dbuf id) {
    if (id < KK__DB_W_Q) return c->act[id];
    return id < KK__DB_W_Q + KK__DLAYER_WEIGHTS ? weight(c, layer, id) : NULL;
}

/* The fp8 plan's weight id of the layer (e4m3 codes and 128x128 scales). */
static const kk_qtensor *fp8_weight(const call *c, int64_t layer, kk__dbuf id) {
    const int k = kk__dfp8_slot(id);
    return c->d->fp8w && k >= 0 ? &c->d->fp8w[layer * KK__DFP8_WEIGHTS + k] : NULL;
}

static kk_status run_step(call *c, int64_t layer, const kk__dstep *s) {
    kk_decoder *d = c->d;
    const kk_model_config *cfg = &d->cfg;
    const double eps = cfg->rms_norm_eps;
    kk_tensor *i0 = arg(c, layer, s->in[0]), *i1 = arg(c, layer, s->in[1]);
    kk_tensor *i2 = arg(c, layer, s->in[2]), *o0 = arg(c, layer, s->out[0]);
    kk_tensor *o1 = arg(c, layer, s->out[1]);
    kk_tensor *kc = d->k_cache[layer], *vc = d->v_cache[layer];
    const int64_t B = c->B, S = c->S, L = c->L, D = cfg->head_dim;
    const int mark = c->v->n;
    kk_status st = KK_OK;
    kk_rope_options rope = cfg->rope;
    switch (s->op) {
    case KK__DS_RMSNORM: st = kk_rmsnorm(i0, i1, o0, eps, c->stream); break;
    case KK__DS_LINEAR: st = kk_linear(i0, i1, NULL, o0, KK_ACT_NONE, c->stream); break;
    case KK__DS_LINEAR_RES:
        st = kk_linear_residual(i0, i1, NULL, i2, o0, KK_ACT_NONE, c->stream);
        break;
    case KK__DS_LAYOUT: {
        if (S == 1) break; /* [B,1,H,D] is [B,H,1,D]: the buffers alias */
        kk_tensor *src = NULL;
        st = heads_view(c->v, i0, B, S, o0->shape[1], D, &src);
        if (st == KK_OK) st = kk__tensor_copy_on(o0, src, c->stream);
        break;
    }
    case KK__DS_ROPE:
        rope.offset = L;
        st = kk_rope(i0, o0, &rope, c->stream);
        break;
    case KK__DS_KV_WRITE: {
        kk_tensor *krows = NULL, *vrows = NULL, *vsrc = NULL;
        st = cache_rows(c->v, kc, c->b0, B, L, L + S, &krows);
        if (st == KK_OK) st = cache_rows(c->v, vc, c->b0, B, L, L + S, &vrows);
        if (st == KK_OK) st = heads_view(c->v, i1, B, S, cfg->num_key_value_heads, D, &vsrc);
        if (st == KK_OK) st = kk__tensor_copy_on(krows, i0, c->stream);
        if (st == KK_OK) st = kk__tensor_copy_on(vrows, vsrc, c->stream);
        break;
    }
    case KK__DS_ROPE_KV: { /* q, k, v: the projections' rows, [B,S,H,D] seen as [B,H,S,D] */
        kk_tensor *kb = NULL, *vb = NULL, *lens = NULL, *qh = NULL, *kh = NULL, *vh = NULL;
        const int64_t hq = cfg->num_attention_heads, hkv = cfg->num_key_value_heads;
        if (s->in[0] == KK__DB_QKV) {
            st = qkv_heads_views(c->v, i0, B, S, hq, hkv, D, &qh, &kh, &vh);
        } else {
            st = heads_view(c->v, i0, B, S, hq, D, &qh);
            if (st == KK_OK) st = heads_view(c->v, i1, B, S, hkv, D, &kh);
            if (st == KK_OK) st = heads_view(c->v, i2, B, S, hkv, D, &vh);
        }
        if (st == KK_OK) st = cache_rows(c->v, kc, c->b0, B, 0, kc->shape[2], &kb);
        if (st == KK_OK) st = cache_rows(c->v, vc, c->b0, B, 0, vc->shape[2], &vb);
        if (st == KK_OK)
            st = c->lens ? kk_tensor_slice(c->lens, 0, 0, B, 1, &lens)
                         : kk_tensor_slice(d->seqlens, 0, c->pos, c->pos + B, 1, &lens);
        keep(c->v, lens);
        if (st == KK_OK) st = kk_rope_kv_append(qh, kh, vh, lens, kb, vb, o0, &rope, c->stream);
        break;
    }
    case KK__DS_ATTENTION: {
        kk_tensor *k = NULL, *v = NULL, *o = NULL;
        kk_attention_options opt = KK_ATTENTION_OPTIONS_INIT;
        opt.causal = 1; /* bottom-right aligned: new token s sees cached rows <= L + s */
        st = cache_rows(c->v, kc, c->b0, B, 0, L + S, &k);
        if (st == KK_OK) st = cache_rows(c->v, vc, c->b0, B, 0, L + S, &v);
        if (st == KK_OK) st = heads_view(c->v, o0, B, S, cfg->num_attention_heads, D, &o);
        if (st == KK_OK) st = kk_attention(i0, k, v, o, NULL, &opt, c->stream);
        break;
    }
    case KK__DS_ADD: st = kk_add_rmsnorm(i0, i1, i2, o0, o1, eps, c->stream); break;
    case KK__DS_ADD_RMSNORM: st = kk_add_rmsnorm(i0, i1, i2, o0, o1, eps, c->stream); break;
    case KK__DS_SILU_MUL: st = kk_silu_mul(i0, i1, o0, c->stream); break;
    case KK__DS_SWIGLU: st = kk_swiglu(i0, i1, i2, NULL, NULL, o0, c->stream); break;
    case KK__DS_FP8_LINEAR: {
        const kk_qtensor *w = fp8_weight(c, layer, s->in[1]);
        if (!w || !w->data)
            st = kk__error(KK_ERR_INTERNAL, "kk_decoder", "step '%s': no fp8 weight", s->name);
        else /* i2: the residual (down_proj), added in the epilogue; may be o0 */
            st = kk_fp8_linear(i0, w->data, w->scales, NULL, i2, o0, KK_ACT_NONE,
                               KK_FP8_SCALING_BLOCK, c->stream);
        break;
    }
    case KK__DS_ALL_REDUCE: st = kk__dtp_all_reduce(d, o0, c->comm_stream); break;
    default: st = kk__error(KK_ERR_INTERNAL, "kk_decoder", "unknown step op %d", (int)s->op);
    }
    drop(c->v, mark);
    return st;
}

/* kk_bench_fn: step `i` of layer 0 on the sampler's stream, as often as the
 * profiler times it (decoder_profile.c). */
typedef struct profiled {
    call *c;
    int i;
} profiled;

static kk_status run_profiled(void *ctx, kk_stream stream) {
    profiled *p = ctx;
    p->c->stream = p->c->comm_stream = stream;
    kk_status st = run_step(p->c, 0, &p->c->d->plan.steps[p->i]);
    p->c->stream = p->c->comm_stream = NULL;
    return st;
}

static kk_status profile_step(call *c, int i) {
    profiled p = {c, i};
    return kk__dprofile_step(c->d->profile, c->d, i, c->B, c->S, c->L, run_profiled, &p);
}

/* The activation views for the call's B x S tokens, at its rows (t0). */
static kk_status make_views(call *c) {
    const kk_model_config *cfg = &c->d->cfg;
    const int64_t T = c->B * c->S, D = cfg->head_dim;
    const int64_t hq = cfg->num_attention_heads, hkv = cfg->num_key_value_heads;
    kk_tensor *const *buf = c->d->buf;
    kk_status st = KK_OK;
    for (int b = 1; st == KK_OK && b < KK__DB_KC; b++) {
        int64_t shape[4] = {0};
        int ndim = 2;
        kk_tensor *base = buf[b];
        switch ((kk__dbuf)b) {
        case KK__DB_RES:
        case KK__DB_XN:
        case KK__DB_A:
        case KK__DB_SCRATCH: shape[0] = T, shape[1] = cfg->hidden_size; break;
        case KK__DB_QT: shape[0] = T, shape[1] = hq * D; break;
        case KK__DB_KT:
        case KK__DB_VT: shape[0] = T, shape[1] = hkv * D; break;
        case KK__DB_Q:
        case KK__DB_QR:
        case KK__DB_K:
        case KK__DB_V:
        case KK__DB_KR: {
            const int q = b == KK__DB_Q || b == KK__DB_QR;
            ndim = 4;
            shape[0] = c->B, shape[1] = q ? hq : hkv, shape[2] = c->S, shape[3] = D;
            if (c->S == 1 && b == KK__DB_Q) base = buf[KK__DB_QT];
            if (c->S == 1 && b == KK__DB_K) base = buf[KK__DB_KT];
            if (c->S == 1 && b == KK__DB_V) base = buf[KK__DB_VT];
            break;
        }
        default: continue;
        }
        if (!base) continue; /* not used by this plan */
        /* per token: as many elements of the buffer as of the view */
        const int64_t width = (ndim == 2 ? shape[1] : shape[1] * shape[3]);
        st = shaped_at(c->v, base, c->t0 * width, ndim, shape, &c->act[b]);
    }
    /* buffers the loop skipped (its default); a plan's unused ones are NULL */
    for (int b = KK__DB_OT; st == KK_OK && b <= KK__DB_QKV; b++) {
        if (c->act[b] || !buf[b]) continue;
        int64_t n = b == KK__DB_OT                           ? hq * D
                    : (b == KK__DB_A || b == KK__DB_SCRATCH) ? cfg->hidden_size
                    : b == KK__DB_GU                         ? 2 * cfg->intermediate_size
                    : b == KK__DB_QKV                        ? (hq + 2 * hkv) * D
                                                             : cfg->intermediate_size;
        st = shaped_at(c->v, buf[b], c->t0 * n, 2, (int64_t[]){T, n}, &c->act[b]);
    }
    return st;
}

static kk_status check_hidden(const char *func, const kk_decoder *d, const char *name,
                              const kk_tensor *t, const kk_tensor *like) {
    if (!t) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name, "a tensor", "NULL");
    const int64_t h = d->cfg.hidden_size;
    if (like) {
        if (t->ndim != 3 || t->shape[0] != like->shape[0] || t->shape[1] != like->shape[1] ||
            t->shape[2] != h)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name, "hidden_in's shape",
                                 "a tensor of %d dims [%lld,%lld,%lld,..]", t->ndim,
                                 (long long)t->shape[0], (long long)t->shape[1],
                                 (long long)t->shape[2]);
    } else if (t->ndim != 3 || t->shape[2] != h || t->shape[0] < 1 || t->shape[1] < 1) {
        char e[96];
        snprintf(e, sizeof e, "shape [B,S,%lld] (B, S >= 1)", (long long)h);
        return kk__arg_error(
            KK_ERR_INVALID_ARGUMENT, func, name, e, "a tensor of %d dims [%lld,%lld,%lld,..]",
            t->ndim, (long long)t->shape[0], (long long)t->shape[1], (long long)t->shape[2]);
    }
    if (t->dtype != d->dtype)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name, kk_dtype_name(d->dtype),
                             "dtype %s", kk_dtype_name(t->dtype));
    return KK_OK;
}

/* ---- positions (rope_kv_append's per-sequence cached lengths) ---- */

#define POS_TABLE_MAX_BYTES (16 << 20)

kk_status kk__dpos_create(const char *func, kk_decoder *d) {
    (void)func; /* the failing call names itself */
    const int64_t mb = d->max_batch, table = (int64_t)d->max_seq * mb;
    d->pos_rows = d->max_seq > 2 && table * 4 <= POS_TABLE_MAX_BYTES ? d->max_seq : 2;
    const int64_t n = d->pos_rows * mb;
    kk_status st = kk_tensor_create(d->device, KK_DTYPE_INT32, 1, &n, &d->seqlens);
    if (st != KK_OK || d->pos_rows == 2) return st;
    /* the table: row p is max_batch copies of p, written once; a call then
     * slices its row and copies nothing from the host */
    kk_tensor *host = NULL;
    if ((st = kk_tensor_create("cpu", KK_DTYPE_INT32, 1, &n, &host)) != KK_OK) return st;
    int32_t *p = host->data;
    for (int64_t i = 0; i < n; i++) p[i] = (int32_t)(i / mb);
    st = kk_tensor_copy(d->seqlens, host);
    kk_tensor_destroy(host);
    return st;
}

/* Point each micro-batch at its positions: its row of the table, or (no
 * table) row m, written here with L for its B sequences. */
static kk_status positions(kk_decoder *d, call *mb, int n) {
    kk_status st = KK_OK;
    for (int m = 0; st == KK_OK && m < n; m++) {
        call *c = &mb[m];
        if (d->pos_rows > 2) {
            c->pos = c->L * d->max_batch + c->b0;
            continue;
        }
        c->pos = (int64_t)m * d->max_batch + c->b0;
        int32_t lens[64];
        for (int64_t b = 0; st == KK_OK && b < c->B; b += 64) {
            const int64_t k = c->B - b < 64 ? c->B - b : 64;
            kk_tensor *host = NULL, *dev = NULL;
            for (int64_t i = 0; i < k; i++) lens[i] = (int32_t)c->L;
            st = kk_tensor_wrap("cpu", KK_DTYPE_INT32, 1, &k, NULL, lens, &host);
            if (st == KK_OK)
                st = kk_tensor_slice(d->seqlens, 0, c->pos + b, c->pos + b + k, 1, &dev);
            if (st == KK_OK) st = kk_tensor_copy(dev, host);
            kk_tensor_destroy(host), kk_tensor_destroy(dev);
        }
    }
    return st;
}

/* ---- overlap (docs/distributed.md, "Overlap") ---- */

/* auto: where the 4x H100 run measured a gain (bench/results/h100x4/tp-v2/:
 * +3% at TP 4 with B = 8; 4-6% slower for one sequence split in two, no
 * change at TP 2): batches of two or more sequences at TP >= 4. */
#define OVERLAP_AUTO_MIN_TOKENS 1024
#define OVERLAP_AUTO_MIN_TP 4

/* The backend's stream operations for d's device, NULL when it has none. */
static const kk__stream_ops *stream_ops(const kk_decoder *d, const kk__backend **b, int *index) {
    kk_backend_kind kind;
    if (kk_device_parse(d->device, &kind, index) != KK_OK) return NULL;
    *b = kk__backend_get(kind);
    return *b ? (*b)->streams : NULL;
}

/* How many micro-batches this call runs as (1 or 2), and their extents. */
static int split(const kk_decoder *d, int64_t B, int64_t S, int64_t L, call *mb) {
    int on = 0;
    if (d->comm && !d->profile && S >= 2) {
        const kk__backend *b;
        int index;
        if (d->overlap == KK_TP_OVERLAP_ON)
            on = 1;
        else if (d->overlap == KK_TP_OVERLAP_AUTO)
            on = d->tp_size >= OVERLAP_AUTO_MIN_TP && B >= 2 && B * S >= OVERLAP_AUTO_MIN_TOKENS &&
                 stream_ops(d, &b, &index) != NULL;
    }
    mb[0].B = B, mb[0].S = S, mb[0].L = L, mb[0].b0 = 0, mb[0].t0 = 0;
    if (!on) return 1;
    mb[1] = mb[0];
    if (B >= 2) { /* halves of the batch: their own sequences, cache rows and positions */
        mb[0].B = B / 2;
        mb[1].B = B - B / 2, mb[1].b0 = B / 2, mb[1].t0 = (B / 2) * S;
    } else { /* halves of one sequence: the second follows the first in the cache */
        mb[0].S = S / 2;
        mb[1].S = S - S / 2, mb[1].L = L + S / 2, mb[1].t0 = S / 2;
    }
    return 2;
}

/* The communication stream and the events (ready[m] on the compute stream
 * before micro-batch m's all-reduce, done[m] on the communication stream
 * after it), made once. KK_OK with *ops NULL on a device without streams. */
static kk_status overlap_setup(kk_decoder *d, const kk__stream_ops **ops, int *index) {
    const kk__backend *b = NULL;
    *ops = stream_ops(d, &b, index);
    if (!*ops || d->comm_stream) return KK_OK;
    static const char func[] = "kk_decoder_prefill";
    kk_status st = (*ops)->create(b->context, *index, 1, &d->comm_stream, func);
    for (int i = 0; st == KK_OK && i < 4; i++)
        st = (*ops)->event_create(b->context, *index, &d->events[i], func);
    if (st != KK_OK) kk__doverlap_free(d);
    return st;
}

void kk__doverlap_free(kk_decoder *d) {
    const kk__backend *b = NULL;
    int index = 0;
    const kk__stream_ops *ops = d->device[0] ? stream_ops(d, &b, &index) : NULL;
    for (int i = 0; i < 4; i++) {
        if (ops && d->events[i]) ops->event_destroy(b->context, index, d->events[i]);
        d->events[i] = NULL;
    }
    if (ops && d->comm_stream) ops->destroy(b->context, index, d->comm_stream);
    d->comm_stream = NULL;
}

/* The layers over two micro-batches. Per layer, the plan's steps up to and
 * including each all-reduce are a segment; a segment runs for micro-batch 0,
 * then for 1, on the compute stream (the ops' default stream), and each
 * all-reduce goes on the communication stream after an event of the compute
 * stream; the next segment of that micro-batch waits for its all-reduce. So
 * micro-batch 0's all-reduce runs while micro-batch 1 computes, and 1's while
 * 0 computes its next segment. The two touch disjoint rows of the work
 * buffers and of the cache, except that with halves of one sequence the
 * second attends to the first's cache rows, written earlier on the same
 * stream. Every rank issues the all-reduces in the same order on one stream
 * of one comm, as NCCL requires. Without streams (the CPU) the same order runs
 * synchronously. */
static kk_status run_overlapped(kk_decoder *d, call *mb) {
    const kk__stream_ops *ops = NULL;
    int index = 0;
    kk_status st = overlap_setup(d, &ops, &index);
    const kk__backend *b = NULL;
    if (ops) stream_ops(d, &b, &index);
    void *const ctx = b ? b->context : NULL;
    static const char func[] = "kk_decoder_prefill";
    int pending[2] = {0, 0};
    for (int m = 0; m < 2; m++) mb[m].comm_stream = ops ? d->comm_stream : mb[m].stream;
    for (int64_t l = 0; st == KK_OK && l < d->layers; l++)
        for (int first = 0, last; st == KK_OK && first < d->plan.n; first = last + 1) {
            for (last = first; last < d->plan.n - 1 && d->plan.steps[last].op != KK__DS_ALL_REDUCE;)
                last++;
            for (int m = 0; st == KK_OK && m < 2; m++) {
                if (pending[m]) /* its last all-reduce, before this segment reads the sum */
                    st = ops->wait(ctx, index, mb[m].stream, d->events[2 + m], func);
                if (st == KK_OK) pending[m] = 0;
                for (int i = first; st == KK_OK && i <= last; i++) {
                    const kk__dstep *s = &d->plan.steps[i];
                    const int ar = s->op == KK__DS_ALL_REDUCE && ops;
                    if (ar) st = ops->record(ctx, index, d->events[m], mb[m].stream, func);
                    if (ar && st == KK_OK)
                        st = ops->wait(ctx, index, d->comm_stream, d->events[m], func);
                    if (st == KK_OK) st = run_step(&mb[m], l, s);
                    if (ar && st == KK_OK)
                        st = ops->record(ctx, index, d->events[2 + m], d->comm_stream, func);
                    if (ar && st == KK_OK) pending[m] = 1;
                }
            }
        }
    /* the compute stream waits for the last all-reduces (also after a failure:
     * nothing of this call may still run when it returns) */
    for (int m = 0; m < 2; m++)
        if (pending[m]) {
            const kk_status w = ops->wait(ctx, index, mb[m].stream, d->events[2 + m], func);
            if (st == KK_OK) st = w;
        }
    return st;
}

kk_status kk__decoder_run(const char *func, kk_decoder *d, const kk_tensor *in, kk_tensor *out) {
    kk_status st = KK_OK;
    if (!d) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "d", "a decoder", "NULL");
    if ((st = check_hidden(func, d, "hidden_in", in, NULL)) != KK_OK ||
        (st = check_hidden(func, d, "hidden_out", out, in)) != KK_OK)
        return st;
    const int64_t B = in->shape[0], S = in->shape[1], L = d->length;
    if (B > d->max_batch)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "batch",
                             d->max_batch == 1 ? "1 (max_batch)" : "at most max_batch", "%lld",
                             (long long)B);
    if (L > 0 && B != d->batch)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "batch",
                             "the cached batch (kk_decoder_reset starts another)",
                             "%lld (cached: %lld)", (long long)B, (long long)d->batch);
    if (L + S > d->max_seq) {
        char e[96];
        snprintf(e, sizeof e, "at most max_seq = %d with %lld tokens cached", d->max_seq,
                 (long long)L);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "sequence length", e, "%lld + %lld",
                             (long long)L, (long long)S);
    }
    views v = {.n = 0};
    call mb[2];
    memset(mb, 0, sizeof mb);
    mb[0].d = mb[1].d = d, mb[0].v = mb[1].v = &v;
    const int n = split(d, B, S, L, mb);
    st = positions(d, mb, n);
    for (int m = 0; st == KK_OK && m < n; m++) st = make_views(&mb[m]);
    kk_tensor *res3 = NULL;
    if (st == KK_OK) st = shaped(&v, d->buf[KK__DB_RES], 3, in->shape, &res3);
    /* ordered on the default stream with the ops, no wait: on a GPU the host
     * waits once, at the end */
    if (st == KK_OK) /* the profiler's steps run on a stream of their own: its copy waits */
        st = d->profile ? kk_tensor_copy(res3, in) : kk__tensor_copy_on(res3, in, NULL);
    if (n == 2 && st == KK_OK)
        st = run_overlapped(d, mb);
    else if (st == KK_OK && S == 1 && !d->profile && kk__dgraphs_on(d))
        st = kk__dgraphs_run(d, (kk__dcall *)&mb[0], B); /* CUDA graphs (decoder_graph.c) */
    else
        for (int64_t l = 0; st == KK_OK && l < d->layers; l++)
            for (int i = 0; st == KK_OK && i < d->plan.n; i++) {
                if (d->profile && l == 0) st = profile_step(&mb[0], i); /* the profiling pass */
                if (st == KK_OK) st = run_step(&mb[0], l, &d->plan.steps[i]);
            }
    if (st == KK_OK) st = kk__tensor_copy_on(out, res3, NULL);
    if (st == KK_OK) st = kk_op_synchronize(d->device, NULL);
    drop(&v, 0);
    if (st != KK_OK) return st; /* rows past d->length are never read: the cache is as it was */
    d->length = L + S;
    d->batch = B;
    return KK_OK;
}

/* ---- for the graphs (decoder_graph.c): a kk__dcall is a call ---- */

kk_status kk__dcall_step(kk__dcall *c, int64_t layer, int i) {
    call *x = (call *)c;
    return run_step(x, layer, &x->d->plan.steps[i]);
}

void kk__dcall_set_stream(kk__dcall *c, kk_stream stream, kk_tensor *lens) {
    call *x = (call *)c;
    x->stream = x->comm_stream = stream;
    x->lens = lens;
}

kk_status kk_decoder_prefill(kk_decoder *d, const kk_tensor *hidden_in, kk_tensor *hidden_out) {
    return kk__decoder_run(__func__, d, hidden_in, hidden_out);
}

kk_status kk_decoder_step(kk_decoder *d, const kk_tensor *hidden_in, kk_tensor *hidden_out) {
    if (hidden_in && hidden_in->ndim == 3 && hidden_in->shape[1] != 1)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "hidden_in",
                             "one token per sequence ([B,1,hidden])", "S = %lld",
                             (long long)hidden_in->shape[1]);
    return kk__decoder_run(__func__, d, hidden_in, hidden_out);
}
