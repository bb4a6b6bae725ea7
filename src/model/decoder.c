/* The decoder's life: kk_decoder_create (plan, weights on the device, KV
 * caches, work buffers), reset, the plan accessors, kk_decoder_free. Running
 * it is decoder_run.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/decoder_internal.h"

/* The weight on the decoder's device in its dtype: a view of the mapped
 * tensor when nothing changes (it keeps the file mapped), else a converted
 * and/or copied tensor of the decoder's own. */
static kk_status place_weight(const char *func, kk_decoder *d, const kk_tensor *w,
                              kk_tensor **out) {
    kk_status st;
    kk_tensor *host = NULL;
    if (w->dtype == d->dtype)
        st = kk_tensor_slice(w, 0, 0, w->shape[0], 1, &host);
    else if ((st = kk_tensor_create("cpu", d->dtype, w->ndim, w->shape, &host)) == KK_OK)
        st = kk_convert(w, host, NULL);
    (void)func; /* the failing call has named itself */
    if (st != KK_OK || strcmp(d->device, "cpu") == 0) {
        if (st != KK_OK) kk_tensor_destroy(host), host = NULL;
        *out = host;
        return st;
    }
    kk_tensor *dev = NULL;
    st = kk_tensor_create(d->device, d->dtype, w->ndim, w->shape, &dev);
    if (st == KK_OK) st = kk_tensor_copy(dev, host);
    kk_tensor_destroy(host);
    if (st != KK_OK) kk_tensor_destroy(dev), dev = NULL;
    *out = dev;
    return st;
}

/* Stacked on the host (plan.qkv's W_qkv here, the fp8 plan's in decoder_fp8.c). */
kk_status kk__dstack_rows(const kk_tensor *const *parts, const char *const *names, int n,
                          kk_tensor **out) {
    int64_t rows = 0;
    for (int x = 0; x < n; x++) rows += parts[x]->shape[0];
    kk_tensor *t = NULL;
    kk_status st =
        kk_tensor_create("cpu", parts[0]->dtype, 2, (int64_t[]){rows, parts[0]->shape[1]}, &t);
    int64_t r = 0; /* the first row of part x */
    for (int x = 0; st == KK_OK && x < n; r += parts[x]->shape[0], x++) {
        if (parts[x]->dtype != parts[0]->dtype) {
            char what[48];
            snprintf(what, sizeof what, "%s dtype", names[x]);
            st = kk__arg_error(KK_ERR_UNSUPPORTED, "kk_decoder_create", what,
                               kk_dtype_name(parts[0]->dtype), "%s (%s's differs)",
                               kk_dtype_name(parts[x]->dtype), names[0]);
            break;
        }
        kk_tensor *rows_x = NULL;
        st = kk_tensor_slice(t, 0, r, r + parts[x]->shape[0], 1, &rows_x);
        if (st == KK_OK) st = kk_tensor_copy(rows_x, parts[x]);
        kk_tensor_destroy(rows_x);
    }
    if (st != KK_OK) kk_tensor_destroy(t), t = NULL;
    *out = t;
    return st;
}

/* Elements of each work buffer for T tokens. */
static int64_t buf_elems(const kk_model_config *c, kk__dbuf b, int64_t T) {
    const int64_t q = c->num_attention_heads * c->head_dim;
    const int64_t kv = c->num_key_value_heads * c->head_dim;
    switch (b) {
    case KK__DB_RES:
    case KK__DB_XN:
    case KK__DB_A:
    case KK__DB_SCRATCH: return T * c->hidden_size;
    case KK__DB_QT:
    case KK__DB_Q:
    case KK__DB_QR:
    case KK__DB_OT: return T * q;
    case KK__DB_KT:
    case KK__DB_VT:
    case KK__DB_K:
    case KK__DB_V:
    case KK__DB_KR: return T * kv;
    case KK__DB_G:
    case KK__DB_U:
    case KK__DB_ACT: return T * c->intermediate_size;
    case KK__DB_GU: return 2 * T * c->intermediate_size;
    case KK__DB_QKV: return T * (q + 2 * kv);
    default: return 0;
    }
}

kk_status kk_decoder_create(const kk_model *model, const char *device, kk_opt_level level,
                            int max_batch, int max_seq, kk_decoder **out) {
    return kk__decoder_create(__func__, model, device, level, max_batch, max_seq, NULL, out);
}

kk_status kk__decoder_create(const char *func, const kk_model *model, const char *device,
                             kk_opt_level level, int max_batch, int max_seq, kk_comm *comm,
                             kk_decoder **out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    *out = NULL;
    if ((st = KK__CHECK_NOT_NULL(model)) != KK_OK) return st;
    if (!device) device = "cpu";
    if ((unsigned)level >= KK_OPT_LEVEL_COUNT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "level",
                             "conservative, balanced or aggressive", "%d", (int)level);
    if (max_batch < 1 || max_batch > 65536)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "max_batch", "1 .. 65536", "%d",
                             max_batch);
    if (max_seq < 1 || max_seq > (1 << 24))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "max_seq", "1 .. 2^24", "%d", max_seq);
    kk_decoder *d = calloc(1, sizeof *d);
    if (!d) return kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation failed");
    d->cfg = *kk_model_get_config(model);
    d->max_batch = max_batch, d->max_seq = max_seq;
    d->tp_size = 1;
    d->layers = d->cfg.num_hidden_layers;
    kk__dplan_build(level, 0, kk_comm_size(comm) > 1, &d->plan);
    kk_model_layer l0;
    if ((st = kk_model_layer_weights(model, 0, &l0)) != KK_OK) goto fail;
    d->dtype = l0.q_proj->dtype;
    if (d->dtype != KK_DTYPE_F32 && d->dtype != KK_DTYPE_F16 && d->dtype != KK_DTYPE_BF16) {
        st = kk__arg_error(KK_ERR_UNSUPPORTED, func, "q_proj dtype", "f32, f16 or bf16", "%s",
                           kk_dtype_name(d->dtype));
        goto fail;
    }
    /* the canonical device text, from a tensor made there */
    kk_tensor *probe = NULL;
    if ((st = kk_tensor_create(device, KK_DTYPE_INT32, 1, (int64_t[]){max_batch}, &probe)) != KK_OK)
        goto fail;
    memcpy(d->device, probe->device, sizeof d->device);
    kk_tensor_destroy(probe);
    if ((st = kk__dpos_create(func, d)) != KK_OK) goto fail;
    { /* the aggressive level's FP8 projections and CUDA graphs (decoder_fp8.c) */
        int fp8 = 0, graphs = 0;
        const char *fp8_why = NULL, *graphs_why = NULL;
        kk__dlevel_choose(d, level, comm != NULL, &fp8, &graphs, &fp8_why, &graphs_why);
        if (fp8) kk__dplan_build(level, 1, 0, &d->plan);
        d->plan.graphs = graphs;
        d->plan.fp8_why = fp8_why, d->plan.graphs_why = graphs_why;
    }
    if (comm && (st = kk__dtp_setup(func, d, comm)) != KK_OK) goto fail;
    d->weights = calloc((size_t)d->layers * KK__DLAYER_WEIGHTS, sizeof *d->weights);
    d->k_cache = calloc((size_t)d->layers, sizeof *d->k_cache);
    d->v_cache = calloc((size_t)d->layers, sizeof *d->v_cache);
    if (!d->weights || !d->k_cache || !d->v_cache) {
        st = kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation failed");
        goto fail;
    }
    const int64_t cache_shape[4] = {max_batch, d->cfg.num_key_value_heads, max_seq,
                                    d->cfg.head_dim};
    for (int64_t i = 0; i < d->layers; i++) {
        kk_model_layer l;
        if ((st = kk_model_layer_weights(model, i, &l)) != KK_OK) goto fail;
        const kk_tensor *w[KK__DLAYER_FILE_WEIGHTS] = {
            l.q_proj,    l.k_proj,          l.v_proj,
            l.o_proj,    l.gate_proj,       l.up_proj,
            l.down_proj, l.input_layernorm, l.post_attention_layernorm};
        if (d->plan.fp8 && (st = kk__dfp8_place(d, i, &l)) != KK_OK) goto fail;
        kk_tensor *qkv[3] = {NULL, NULL, NULL}; /* plan.qkv: q, k, v (this rank's) to stack */
        for (int k = 0; st == KK_OK && k < KK__DLAYER_FILE_WEIGHTS; k++) {
            if (kk__dweight_is_fp8(d, k)) continue; /* held as fp8 only */
            kk_tensor *part = NULL; /* this rank's shard of the weight (decoder_tp.c) */
            if (d->comm && (st = kk__dtp_weight(func, d, k, w[k], &part)) != KK_OK) break;
            if (d->plan.qkv && k <= 2) { /* placed stacked, below */
                qkv[k] = part;
                continue;
            }
            st = place_weight(func, d, part ? part : w[k], &d->weights[i * KK__DLAYER_WEIGHTS + k]);
            kk_tensor_destroy(part);
        }
        if (st == KK_OK && d->plan.qkv && !d->plan.fp8) {
            static const char *const names[] = {"q_proj", "k_proj", "v_proj"};
            const kk_tensor *parts[3] = {qkv[0] ? qkv[0] : w[0], qkv[1] ? qkv[1] : w[1],
                                         qkv[2] ? qkv[2] : w[2]};
            kk_tensor *stacked = NULL;
            st = kk__dstack_rows(parts, names, 3, &stacked);
            if (st == KK_OK)
                st =
                    place_weight(func, d, stacked,
                                 &d->weights[i * KK__DLAYER_WEIGHTS + (KK__DB_W_QKV - KK__DB_W_Q)]);
            kk_tensor_destroy(stacked);
        }
        for (int k = 0; k < 3; k++) kk_tensor_destroy(qkv[k]);
        if (st != KK_OK) goto fail;
        if ((st = kk_tensor_create(d->device, d->dtype, 4, cache_shape, &d->k_cache[i])) != KK_OK ||
            (st = kk_tensor_create(d->device, d->dtype, 4, cache_shape, &d->v_cache[i])) != KK_OK)
            goto fail;
    }
    kk_model_globals g;
    if ((st = kk_model_global_weights(model, &g)) != KK_OK ||
        (g.embed_tokens && (st = place_weight(func, d, g.embed_tokens, &d->embed)) != KK_OK) ||
        (g.norm && (st = place_weight(func, d, g.norm, &d->norm)) != KK_OK))
        goto fail;
    if (g.lm_head && g.lm_head == g.embed_tokens)
        d->lm_head = d->embed;
    else if (g.lm_head && (st = place_weight(func, d, g.lm_head, &d->lm_head)) != KK_OK)
        goto fail;
    const int64_t T = (int64_t)max_batch * max_seq;
    for (int b = 0; b < KK__DB_COUNT; b++) {
        int64_t n = buf_elems(&d->cfg, (kk__dbuf)b, T);
        /* the fp8 plan's gate and up are one [T, 2I] buffer, the others' two;
         * with plan.qkv q, k, v are one [T, (Hq+2Hkv)*D] */
        if (d->plan.fp8 ? b == KK__DB_G || b == KK__DB_U : b == KK__DB_GU) n = 0;
        if (d->plan.qkv ? b == KK__DB_QT || b == KK__DB_KT || b == KK__DB_VT : b == KK__DB_QKV)
            n = 0;
        if (n && (st = kk_tensor_create(d->device, d->dtype, 1, &n, &d->buf[b])) != KK_OK)
            goto fail;
    }
    if (d->plan.graphs && (st = kk__dgraphs_create(func, d)) != KK_OK) goto fail;
    if (d->plan.graphs && !d->graphs) d->plan.graphs = 0, d->plan.graphs_why = "no graphs here";
    d->plan_text = kk__dplan_text(&d->plan, &d->cfg, d->device, d->dtype);
    if (!d->plan_text) {
        st = kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation failed");
        goto fail;
    }
    if (d->comm && (st = kk__dtp_note(func, d)) != KK_OK) goto fail;
    *out = d;
    return KK_OK;
fail:
    kk_decoder_free(d);
    return st;
}

void kk_decoder_reset(kk_decoder *d) {
    if (d) d->length = 0, d->batch = 0;
}

kk_dtype kk_decoder_dtype(const kk_decoder *d) { return d ? d->dtype : KK_DTYPE_F32; }

int64_t kk_decoder_length(const kk_decoder *d) { return d ? d->length : 0; }

const char *kk_decoder_plan_text(const kk_decoder *d) { return d ? d->plan_text : ""; }

int kk_decoder_plan_steps(const kk_decoder *d) { return d ? d->plan.n : 0; }

kk_status kk_decoder_plan_step(const kk_decoder *d, int i, const char **name, const char **op) {
    kk_status st = KK__CHECK_NOT_NULL(d);
    if (st != KK_OK) return st;
    if (i < 0 || i >= d->plan.n)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "i", "0 .. steps - 1", "%d", i);
    if (name) *name = d->plan.steps[i].name;
    if (op) *op = kk__dstep_op_name(d->plan.steps[i].op);
    return KK_OK;
}

void kk_decoder_free(kk_decoder *d) {
    if (!d) return;
    kk__dgraphs_free(d); /* first: it waits for the work that may still use the rest */
    kk__doverlap_free(d);
    kk__dfp8_free(d);
    if (d->weights)
        for (int64_t i = 0; i < d->layers * KK__DLAYER_WEIGHTS; i++)
            kk_tensor_destroy(d->weights[i]);
    for (int64_t i = 0; i < d->layers; i++) {
        if (d->k_cache) kk_tensor_destroy(d->k_cache[i]);
        if (d->v_cache) kk_tensor_destroy(d->v_cache[i]);
    }
    for (int b = 0; b < KK__DB_COUNT; b++) kk_tensor_destroy(d->buf[b]);
    kk_tensor_destroy(d->seqlens);
    if (d->lm_head != d->embed) kk_tensor_destroy(d->lm_head);
    kk_tensor_destroy(d->embed);
    kk_tensor_destroy(d->norm);
    free(d->weights);
    free(d->k_cache);
    free(d->v_cache);
    free(d->plan_text);
    free(d);
}
