/* The standard weights of a Llama-family decoder (transformers' names), found
 * by name and checked against the shapes the configuration implies, so the
 * decoder never meets a weight of the wrong size. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "model/model_internal.h"

static void shape_text(int ndim, const int64_t *shape, char *buf, size_t size) {
    int k = snprintf(buf, size, "[");
    for (int d = 0; d < ndim && k > 0 && (size_t)k < size; d++)
        k += snprintf(buf + k, size - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k > 0 && (size_t)k < size) snprintf(buf + k, size - k, "]");
}

/* The tensor `name` with shape [d0] or [d0, d1] (d1 < 0: one dimension) and a
 * floating-point dtype; `why` says where the expected sizes come from. Absent:
 * an error, or NULL when optional. */
static kk_status want(const char *func, const kk_model *m, const char *name, int64_t d0, int64_t d1,
                      const char *why, int optional, const kk_tensor **out) {
    const kk__model_tensor *mt = kk__model_find(m, name);
    *out = NULL;
    if (!mt) {
        if (optional) return KK_OK;
        return kk__set_error(KK_ERR_CONFIG, func, name, "missing", NULL, NULL,
                             "%.300s: tensor '%s' is missing: expected it for num_hidden_layers "
                             "= %lld",
                             m->dir, name, (long long)m->config.num_hidden_layers);
    }
    const kk_tensor *t = &mt->t;
    int64_t shape[2] = {d0, d1};
    int ndim = d1 < 0 ? 1 : 2;
    char got[160], exp[64];
    shape_text(t->ndim, t->shape, got, sizeof got);
    shape_text(ndim, shape, exp, sizeof exp);
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1))
        return kk__set_error(KK_ERR_CONFIG, func, name, got, exp, NULL,
                             "%.300s: tensor '%s' has shape %s: expected %s (%s)", mt->file, name,
                             got, exp, why);
    if (!kk_dtype_is_float(t->dtype))
        return kk__set_error(KK_ERR_CONFIG, func, name, kk_dtype_name(t->dtype), "a float dtype",
                             NULL, "%.300s: tensor '%s' has dtype %s: expected a float dtype",
                             mt->file, name, kk_dtype_name(t->dtype));
    *out = t;
    return KK_OK;
}

kk_status kk__model_layer(const char *func, const kk_model *m, int64_t layer, kk_model_layer *out) {
    const kk_model_config *c = &m->config;
    const int64_t h = c->hidden_size, q = c->num_attention_heads * c->head_dim,
                  kv = c->num_key_value_heads * c->head_dim, ff = c->intermediate_size;
#define F(field) offsetof(kk_model_layer, field)
    const struct {
        const char *suffix;
        int64_t d0, d1;
        const char *why;
        size_t off; /* of the field in kk_model_layer */
    } w[] = {
        {"self_attn.q_proj", q, h, "num_attention_heads * head_dim, hidden_size", F(q_proj)},
        {"self_attn.k_proj", kv, h, "num_key_value_heads * head_dim, hidden_size", F(k_proj)},
        {"self_attn.v_proj", kv, h, "num_key_value_heads * head_dim, hidden_size", F(v_proj)},
        {"self_attn.o_proj", h, q, "hidden_size, num_attention_heads * head_dim", F(o_proj)},
        {"mlp.gate_proj", ff, h, "intermediate_size, hidden_size", F(gate_proj)},
        {"mlp.up_proj", ff, h, "intermediate_size, hidden_size", F(up_proj)},
        {"mlp.down_proj", h, ff, "hidden_size, intermediate_size", F(down_proj)},
        {"input_layernorm", h, -1, "hidden_size", F(input_layernorm)},
        {"post_attention_layernorm", h, -1, "hidden_size", F(post_attention_layernorm)},
    };
#undef F
    kk_model_layer l; /* filled here: *out changes only on success */
    memset(&l, 0, sizeof l);
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        char name[128];
        snprintf(name, sizeof name, "model.layers.%lld.%s.weight", (long long)layer, w[i].suffix);
        const kk_tensor **dst = (const kk_tensor **)((char *)&l + w[i].off);
        kk_status st = want(func, m, name, w[i].d0, w[i].d1, w[i].why, 0, dst);
        if (st) return st;
    }
    *out = l;
    return KK_OK;
}

kk_status kk__model_globals(const char *func, const kk_model *m, kk_model_globals *out) {
    const kk_model_config *c = &m->config;
    kk_model_globals g;
    kk_status st;
    if ((st = want(func, m, "model.embed_tokens.weight", c->vocab_size, c->hidden_size,
                   "vocab_size, hidden_size", 1, &g.embed_tokens)) ||
        (st = want(func, m, "model.norm.weight", c->hidden_size, -1, "hidden_size", 1, &g.norm)) ||
        (st = want(func, m, "lm_head.weight", c->vocab_size, c->hidden_size,
                   "vocab_size, hidden_size", 1, &g.lm_head)))
        return st;
    if (!g.lm_head && c->tie_word_embeddings) g.lm_head = g.embed_tokens;
    *out = g;
    return KK_OK;
}
