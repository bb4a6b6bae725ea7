/* The decoder's executor: the plan's steps (decoder_plan.c) for each layer,
 * each one call of the public ops (kernelkit/ops.h) or a kk_tensor_copy, on
 * views of the work buffers shaped for this call's B and S. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/strided_copy.h"
#include "core/error.h"
#include "kernelkit/op.h"
#include "model/decoder_internal.h"

/* The views made for one call, destroyed together. */
typedef struct views {
    kk_tensor *t[64];
    int n;
} views;

static kk_tensor *keep(views *v, kk_tensor *t) {
    if (t && v->n < (int)(sizeof v->t / sizeof v->t[0])) v->t[v->n++] = t;
    return t;
}

static void drop(views *v, int from) {
    while (v->n > from) kk_tensor_destroy(v->t[--v->n]);
}

/* The first elements of buffer b (flat, or a view of as many elements) as a
 * contiguous tensor of `shape`. */
static kk_status shaped(views *v, kk_tensor *b, int ndim, const int64_t *shape, kk_tensor **out) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    kk_tensor *s = NULL, *r = NULL;
    /* a flat work buffer is cut to n; a view already n long is reshaped */
    kk_status st = kk_tensor_slice(b, 0, 0, b->ndim == 1 ? n : b->shape[0], 1, &s);
    if (st == KK_OK) st = kk_tensor_reshape(s, ndim, shape, &r);
    kk_tensor_destroy(s);
    *out = keep(v, r);
    return st;
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

/* Cache rows [from, to) of the first B sequences: [B,Hkv,to-from,D]. */
static kk_status cache_rows(views *v, kk_tensor *cache, int64_t B, int64_t from, int64_t to,
                            kk_tensor **out) {
    kk_tensor *b = NULL, *r = NULL;
    kk_status st = kk_tensor_slice(cache, 0, 0, B, 1, &b);
    if (st == KK_OK && (from != 0 || to != cache->shape[2]))
        st = kk_tensor_slice(b, 2, from, to, 1, &r);
    else
        r = b, b = NULL;
    kk_tensor_destroy(b);
    *out = keep(v, r);
    return st;
}

typedef struct call {
    kk_decoder *d;
    int64_t B, S, L; /* batch, new tokens, cached tokens */
    kk_tensor *act[KK__DB_COUNT];
    views *v;
    kk_stream stream; /* the ops' stream: NULL, or the profiler's (decoder_profile.c) */
} call;

static kk_tensor *weight(const call *c, int64_t layer, kk__dbuf id) {
    return c->d->weights[layer * KK__DLAYER_WEIGHTS + (id - KK__DB_W_Q)];
}

/* A step's tensor: a weight of the layer or an activation view. */
static kk_tensor *arg(const call *c, int64_t layer, kk__dbuf id) {
    return id >= KK__DB_W_Q ? weight(c, layer, id) : c->act[id];
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
        st = cache_rows(c->v, kc, B, L, L + S, &krows);
        if (st == KK_OK) st = cache_rows(c->v, vc, B, L, L + S, &vrows);
        if (st == KK_OK) st = heads_view(c->v, i1, B, S, cfg->num_key_value_heads, D, &vsrc);
        if (st == KK_OK) st = kk__tensor_copy_on(krows, i0, c->stream);
        if (st == KK_OK) st = kk__tensor_copy_on(vrows, vsrc, c->stream);
        break;
    }
    case KK__DS_ROPE_KV: {
        kk_tensor *kb = NULL, *vb = NULL, *lens = NULL;
        st = cache_rows(c->v, kc, B, 0, kc->shape[2], &kb);
        if (st == KK_OK) st = cache_rows(c->v, vc, B, 0, vc->shape[2], &vb);
        if (st == KK_OK) st = kk_tensor_slice(d->seqlens, 0, 0, B, 1, &lens);
        keep(c->v, lens);
        if (st == KK_OK) st = kk_rope_kv_append(i0, i1, i2, lens, kb, vb, o0, &rope, c->stream);
        break;
    }
    case KK__DS_ATTENTION: {
        kk_tensor *k = NULL, *v = NULL, *o = NULL;
        kk_attention_options opt = KK_ATTENTION_OPTIONS_INIT;
        opt.causal = 1; /* bottom-right aligned: new token s sees cached rows <= L + s */
        st = cache_rows(c->v, kc, B, 0, L + S, &k);
        if (st == KK_OK) st = cache_rows(c->v, vc, B, 0, L + S, &v);
        if (st == KK_OK) st = heads_view(c->v, o0, B, S, cfg->num_attention_heads, D, &o);
        if (st == KK_OK) st = kk_attention(i0, k, v, o, NULL, &opt, c->stream);
        break;
    }
    case KK__DS_ADD: st = kk_add_rmsnorm(i0, i1, i2, o0, o1, eps, c->stream); break;
    case KK__DS_ADD_RMSNORM: st = kk_add_rmsnorm(i0, i1, i2, o0, o1, eps, c->stream); break;
    case KK__DS_SILU_MUL: st = kk_silu_mul(i0, i1, o0, c->stream); break;
    case KK__DS_SWIGLU: st = kk_swiglu(i0, i1, i2, NULL, NULL, o0, c->stream); break;
    case KK__DS_ALL_REDUCE: st = kk__dtp_all_reduce(d, o0, c->stream); break;
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
    p->c->stream = stream;
    kk_status st = run_step(p->c, 0, &p->c->d->plan.steps[p->i]);
    p->c->stream = NULL;
    return st;
}

static kk_status profile_step(call *c, int i) {
    profiled p = {c, i};
    return kk__dprofile_step(c->d->profile, c->d, i, c->B, c->S, c->L, run_profiled, &p);
}

/* The activation views for B x S tokens. */
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
        st = shaped(c->v, base, ndim, shape, &c->act[b]);
    }
    /* buffers the loop skipped (its default) */
    for (int b = KK__DB_OT; st == KK_OK && b <= KK__DB_SCRATCH; b++) {
        if (c->act[b]) continue;
        int64_t n = b == KK__DB_OT                           ? hq * D
                    : (b == KK__DB_A || b == KK__DB_SCRATCH) ? cfg->hidden_size
                                                             : cfg->intermediate_size;
        st = shaped(c->v, buf[b], 2, (int64_t[]){T, n}, &c->act[b]);
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
    call c = {.d = d, .B = B, .S = S, .L = L, .v = &v};
    st = make_views(&c);
    /* every sequence's cached length, for rope_kv_append */
    int32_t lens[64];
    kk_tensor *host = NULL, *dev = NULL;
    for (int64_t b = 0; st == KK_OK && b < B; b += 64) {
        const int64_t n = B - b < 64 ? B - b : 64;
        for (int64_t i = 0; i < n; i++) lens[i] = (int32_t)L;
        st = kk_tensor_wrap("cpu", KK_DTYPE_INT32, 1, &n, NULL, lens, &host);
        if (st == KK_OK) st = kk_tensor_slice(d->seqlens, 0, b, b + n, 1, &dev);
        if (st == KK_OK) st = kk_tensor_copy(dev, host);
        kk_tensor_destroy(host), kk_tensor_destroy(dev), host = dev = NULL;
    }
    kk_tensor *res3 = NULL;
    if (st == KK_OK) st = shaped(&v, d->buf[KK__DB_RES], 3, in->shape, &res3);
    if (st == KK_OK) st = kk_tensor_copy(res3, in);
    for (int64_t l = 0; st == KK_OK && l < d->layers; l++)
        for (int i = 0; st == KK_OK && i < d->plan.n; i++) {
            if (d->profile && l == 0) st = profile_step(&c, i); /* the profiling pass */
            if (st == KK_OK) st = run_step(&c, l, &d->plan.steps[i]);
        }
    if (st == KK_OK) st = kk_op_synchronize(d->device, NULL);
    if (st == KK_OK) st = kk_tensor_copy(out, res3);
    drop(&v, 0);
    if (st != KK_OK) return st; /* rows past d->length are never read: the cache is as it was */
    d->length = L + S;
    d->batch = B;
    return KK_OK;
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
