/* config.json of a Llama-family model: the fields the decoder needs, their
 * transformers defaults, and validation that names the field, its value and
 * what is accepted. rope_theta and rope_scaling become kk_rope_options, with
 * kk_rope's own ranges, so a model that loads has rope options kk_rope takes. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/model_internal.h"

#define MAX_CONFIG_BYTES ((size_t)1 << 20)
#define MAX_SIZE (INT64_C(1) << 24) /* hidden, intermediate, heads, head_dim, vocab */
#define MAX_LAYERS 100000

typedef struct cf_ctx {
    const char *func;
    const char *path;
} cf_ctx;

/* "path: field = value: expected ..." with the value as JSON text. */
static kk_status bad(const cf_ctx *c, kk_status st, const char *field, const cJSON *v,
                     const char *expected) {
    char value[80] = "(missing)";
    char *text = v ? cJSON_PrintUnformatted(v) : NULL;
    if (text) snprintf(value, sizeof value, "%.76s", text);
    free(text);
    return kk__set_error(st, c->func, field, value, expected, NULL, "%.300s: %s = %s: expected %s",
                         c->path, field, value, expected);
}

static const cJSON *get(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNull(v) ? NULL : v; /* null means "use the default", as transformers reads it */
}

/* An integer field in [lo, hi]; absent: dflt, or an error when dflt < lo. */
static kk_status get_int(const cf_ctx *c, const cJSON *obj, const char *field, const char *key,
                         int64_t dflt, int64_t lo, int64_t hi, int64_t *out) {
    const cJSON *v = get(obj, key);
    char expected[96];
    snprintf(expected, sizeof expected, "an integer from %lld to %lld%s", (long long)lo,
             (long long)hi, dflt < lo ? " (required)" : "");
    if (!v) {
        if (dflt < lo) return bad(c, KK_ERR_CONFIG, field, NULL, expected);
        *out = dflt;
        return KK_OK;
    }
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d))
        return bad(c, KK_ERR_CONFIG, field, v, expected);
    *out = (int64_t)d;
    return KK_OK;
}

/* A number in [lo, hi] (open below when lo_open); absent: dflt, or an error when required. */
static kk_status get_num(const cf_ctx *c, const cJSON *obj, const char *field, const char *key,
                         int required, double dflt, double lo, int lo_open, double hi,
                         double *out) {
    const cJSON *v = get(obj, key);
    char expected[96];
    snprintf(expected, sizeof expected, "a number %s %g and <= %g%s", lo_open ? ">" : ">=", lo, hi,
             required ? " (required)" : "");
    if (!v) {
        if (required) return bad(c, KK_ERR_CONFIG, field, NULL, expected);
        *out = dflt;
        return KK_OK;
    }
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d >= lo && d <= hi) || (lo_open && d == lo))
        return bad(c, KK_ERR_CONFIG, field, v, expected);
    *out = d;
    return KK_OK;
}

static kk_status get_bool(const cf_ctx *c, const cJSON *obj, const char *key, int *out) {
    const cJSON *v = get(obj, key);
    if (!v) return KK_OK; /* *out keeps its default */
    if (!cJSON_IsBool(v)) return bad(c, KK_ERR_CONFIG, key, v, "true or false");
    *out = cJSON_IsTrue(v);
    return KK_OK;
}

/* Fields that, set otherwise, describe a model this loader would get wrong. */
static kk_status check_family(const cf_ctx *c, const cJSON *root) {
    const cJSON *v = get(root, "model_type");
    if (v && !(cJSON_IsString(v) && strcmp(v->valuestring, "llama") == 0))
        return bad(c, KK_ERR_UNSUPPORTED, "model_type", v, "\"llama\" (a Llama-family decoder)");
    v = get(root, "hidden_act");
    if (v && !(cJSON_IsString(v) && strcmp(v->valuestring, "silu") == 0))
        return bad(c, KK_ERR_UNSUPPORTED, "hidden_act", v, "\"silu\" (the SwiGLU MLP)");
    static const char *const biases[] = {"attention_bias", "mlp_bias"};
    for (int i = 0; i < 2; i++) {
        int on = 0;
        kk_status st = get_bool(c, root, biases[i], &on);
        if (st) return st;
        if (on) return bad(c, KK_ERR_UNSUPPORTED, biases[i], get(root, biases[i]), "false");
    }
    return KK_OK;
}

static kk_status parse_dtype(const cf_ctx *c, const cJSON *root, kk_model_config *cfg) {
    const char *key = get(root, "torch_dtype") ? "torch_dtype" : "dtype"; /* newer name */
    const cJSON *v = get(root, key);
    cfg->torch_dtype = KK_DTYPE_F32;
    if (!v) return KK_OK;
    static const struct {
        const char *name;
        kk_dtype dtype;
    } k[] = {{"float32", KK_DTYPE_F32}, {"float16", KK_DTYPE_F16}, {"bfloat16", KK_DTYPE_BF16}};
    for (int i = 0; i < 3 && cJSON_IsString(v); i++)
        if (strcmp(v->valuestring, k[i].name) == 0) {
            cfg->torch_dtype = k[i].dtype;
            cfg->torch_dtype_given = 1;
            return KK_OK;
        }
    return bad(c, KK_ERR_UNSUPPORTED, key, v, "\"float32\", \"float16\" or \"bfloat16\"");
}

/* rope_scaling (or transformers 5's rope_parameters, named `name`): null,
 * {"rope_type": "default"} or Llama 3's, with kk_rope's ranges. */
static kk_status parse_rope_scaling(const cf_ctx *c, const cJSON *rs, const char *name,
                                    kk_rope_options *r) {
    char field[96], f2[96], f3[96], f4[96];
    if (!rs) return KK_OK;
    if (!cJSON_IsObject(rs))
        return bad(c, KK_ERR_CONFIG, name, rs, "null or an object with \"rope_type\"");
    const cJSON *type = get(rs, "rope_type");
    snprintf(field, sizeof field, "%s.rope_type", name);
    if (!type && (type = get(rs, "type")))
        snprintf(field, sizeof field, "%s.type", name);              /* the older name */
    if (!type && strcmp(name, "rope_parameters") == 0) return KK_OK; /* rope_theta alone */
    if (!cJSON_IsString(type))
        return bad(c, KK_ERR_CONFIG, field, type, "\"default\" or \"llama3\"");
    if (strcmp(type->valuestring, "default") == 0) return KK_OK;
    if (strcmp(type->valuestring, "llama3") != 0)
        return bad(c, KK_ERR_UNSUPPORTED, field, type,
                   "\"default\" or \"llama3\" (the scalings kk_rope implements)");
    double old = 0;
    kk_status st;
    snprintf(field, sizeof field, "%s.factor", name);
    snprintf(f2, sizeof f2, "%s.low_freq_factor", name);
    snprintf(f3, sizeof f3, "%s.high_freq_factor", name);
    snprintf(f4, sizeof f4, "%s.original_max_position_embeddings", name);
    if ((st = get_num(c, rs, field, "factor", 1, 0, 1e-3, 0, 1e4, &r->factor)) ||
        (st = get_num(c, rs, f2, "low_freq_factor", 1, 0, 1e-3, 0, 1e4, &r->low_freq_factor)) ||
        (st = get_num(c, rs, f3, "high_freq_factor", 1, 0, 1e-3, 0, 1e4, &r->high_freq_factor)) ||
        (st = get_num(c, rs, f4, "original_max_position_embeddings", 1, 0, 1, 0, 16777216.0, &old)))
        return st;
    if (old != floor(old))
        return bad(c, KK_ERR_CONFIG, f4, get(rs, "original_max_position_embeddings"),
                   "an integer from 1 to 16777216");
    if (!(r->high_freq_factor > r->low_freq_factor)) {
        char expected[64];
        snprintf(expected, sizeof expected, "more than low_freq_factor = %g", r->low_freq_factor);
        return bad(c, KK_ERR_CONFIG, f3, get(rs, "high_freq_factor"), expected);
    }
    r->original_max_position = (int64_t)old;
    r->scaling = KK_ROPE_SCALING_LLAMA3;
    return KK_OK;
}

static kk_status parse_sizes(const cf_ctx *c, const cJSON *root, kk_model_config *g) {
    kk_status st;
#define INT_FIELD(name, dflt, lo, hi) get_int(c, root, #name, #name, dflt, lo, hi, &g->name)
    if ((st = INT_FIELD(hidden_size, 0, 1, MAX_SIZE)) ||
        (st = INT_FIELD(intermediate_size, 0, 1, MAX_SIZE)) ||
        (st = INT_FIELD(num_hidden_layers, 0, 1, MAX_LAYERS)) ||
        (st = INT_FIELD(num_attention_heads, 0, 1, MAX_SIZE)) ||
        (st = INT_FIELD(num_key_value_heads, g->num_attention_heads, 1, g->num_attention_heads)) ||
        (st = INT_FIELD(vocab_size, 0, 1, MAX_SIZE)) ||
        (st = INT_FIELD(max_position_embeddings, 2048, 1, INT64_C(1) << 30)))
        return st;
#undef INT_FIELD
    char expected[128];
    if (g->num_attention_heads % g->num_key_value_heads != 0) {
        snprintf(expected, sizeof expected, "a divisor of num_attention_heads = %lld (GQA groups)",
                 (long long)g->num_attention_heads);
        return bad(c, KK_ERR_CONFIG, "num_key_value_heads", get(root, "num_key_value_heads"),
                   expected);
    }
    if (!get(root, "head_dim") && g->hidden_size % g->num_attention_heads != 0) {
        snprintf(expected, sizeof expected,
                 "a multiple of num_attention_heads = %lld, or an explicit head_dim",
                 (long long)g->num_attention_heads);
        return bad(c, KK_ERR_CONFIG, "hidden_size", get(root, "hidden_size"), expected);
    }
    if ((st = get_int(c, root, "head_dim", "head_dim", g->hidden_size / g->num_attention_heads, 1,
                      MAX_SIZE, &g->head_dim)))
        return st;
    if (g->head_dim % 2 != 0) {
        const cJSON *v = get(root, "head_dim");
        return bad(c, KK_ERR_CONFIG, v ? "head_dim" : "hidden_size / num_attention_heads",
                   v ? v : get(root, "hidden_size"), "an even head_dim (RoPE rotates pairs)");
    }
    return KK_OK;
}

static kk_status parse(const cf_ctx *c, const cJSON *root, kk_model_config *g) {
    if (!cJSON_IsObject(root))
        return kk__set_error(KK_ERR_CONFIG, c->func, "path", c->path, NULL, NULL,
                             "%.300s: not a JSON object: expected a transformers config.json",
                             c->path);
    kk_status st;
    if ((st = check_family(c, root)) || (st = parse_sizes(c, root, g)) ||
        (st = get_num(c, root, "rms_norm_eps", "rms_norm_eps", 0, 1e-6, 0, 1, 1,
                      &g->rms_norm_eps)) ||
        (st = get_bool(c, root, "tie_word_embeddings", &g->tie_word_embeddings)) ||
        (st = parse_dtype(c, root, g)))
        return st;
    kk_rope_options_init(&g->rope);
    g->rope.rotary_dim = g->head_dim;
    if ((st = get_num(c, root, "rope_theta", "rope_theta", 0, 10000.0, 1, 0, 1e9, &g->rope.theta)))
        return st;
    /* transformers 5 writes rope_theta and the scaling as one object,
     * rope_parameters (which then wins over the top-level fields) */
    const cJSON *rp = get(root, "rope_parameters");
    if (rp) {
        if (!cJSON_IsObject(rp)) return bad(c, KK_ERR_CONFIG, "rope_parameters", rp, "an object");
        if ((st = get_num(c, rp, "rope_parameters.rope_theta", "rope_theta", 0, g->rope.theta, 1, 0,
                          1e9, &g->rope.theta)))
            return st;
        return parse_rope_scaling(c, rp, "rope_parameters", &g->rope);
    }
    return parse_rope_scaling(c, get(root, "rope_scaling"), "rope_scaling", &g->rope);
}

kk_status kk__model_config_load(const char *func, const char *path, kk_model_config *out) {
    const cf_ctx c = {func, path};
    char *text = NULL;
    kk_status st = kk__model_read_text(func, path, MAX_CONFIG_BYTES, &text);
    if (st) return st;
    cJSON *root = cJSON_Parse(text);
    free(text);
    kk_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (!root)
        st = kk__set_error(KK_ERR_CONFIG, func, "path", path, NULL, NULL, "%.300s: not valid JSON",
                           path);
    else
        st = parse(&c, root, &cfg);
    cJSON_Delete(root);
    if (!st) *out = cfg;
    return st;
}

kk_status kk_model_config_load(const char *path, kk_model_config *out) {
    kk_status st = KK__CHECK_NOT_NULL(path);
    if (st || (st = KK__CHECK_NOT_NULL(out))) return st;
    return kk__model_config_load(__func__, path, out);
}
