/* Shared by the model tests: a safetensors writer (header + bytes, our own, so
 * the tests need no Python) and the tiny Llama-shaped model they load. */
#ifndef KK_MODEL_TESTUTIL_H
#define KK_MODEL_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelkit/kernelkit.h"

typedef struct mt_tensor {
    char name[96];
    kk_dtype dtype;
    int ndim;
    int64_t shape[KK_TENSOR_MAX_DIMS];
    int seed; /* element k holds mt_value(seed, k) */
} mt_tensor;

/* Multiples of 1/8 in [-11/8, 11/8]: exact in f32, f16 and bf16. */
static inline float mt_value(int seed, int64_t k) {
    return (float)((seed * 7 + k) % 23 - 11) / 8.0f;
}

static inline const char *mt_st_dtype(kk_dtype d) {
    switch (d) {
    case KK_DTYPE_F64: return "F64";
    case KK_DTYPE_F32: return "F32";
    case KK_DTYPE_F16: return "F16";
    case KK_DTYPE_BF16: return "BF16";
    case KK_DTYPE_FP8_E4M3: return "F8_E4M3";
    case KK_DTYPE_FP8_E5M2: return "F8_E5M2";
    case KK_DTYPE_INT8: return "I8";
    case KK_DTYPE_UINT8: return "U8";
    case KK_DTYPE_INT32: return "I32";
    default: return "?";
    }
}

static inline int64_t mt_numel(const mt_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

/* Element k of t, encoded as the file holds it (little-endian host). */
static inline void mt_encode(const mt_tensor *t, int64_t k, unsigned char *p) {
    float v = mt_value(t->seed, k);
    uint16_t h;
    double d = v;
    int32_t i = (int32_t)(v * 8);
    switch (t->dtype) {
    case KK_DTYPE_F64: memcpy(p, &d, 8); break;
    case KK_DTYPE_F32: memcpy(p, &v, 4); break;
    case KK_DTYPE_F16: h = kk_f32_to_f16(v), memcpy(p, &h, 2); break;
    case KK_DTYPE_BF16: h = kk_f32_to_bf16(v), memcpy(p, &h, 2); break;
    case KK_DTYPE_FP8_E4M3: *p = kk_f32_to_e4m3(v); break;
    case KK_DTYPE_FP8_E5M2: *p = kk_f32_to_e5m2(v); break;
    case KK_DTYPE_INT8: *p = (unsigned char)(int8_t)i; break;
    case KK_DTYPE_UINT8: *p = (unsigned char)(i + 11); break;
    case KK_DTYPE_INT32: memcpy(p, &i, 4); break;
    default: break;
    }
}

static inline size_t mt_bytes(const mt_tensor *t) {
    return (size_t)mt_numel(t) * (size_t)kk_dtype_bits(t->dtype) / 8;
}

/* A whole safetensors file in memory (malloc'd, *len bytes): tensors in
 * order; the header padded with spaces to a multiple of 8 when pad (as
 * writers do), else left as is. */
static inline unsigned char *mt_build(const mt_tensor *t, int n, int pad, size_t *len) {
    size_t cap = 256 + (size_t)n * 256, hl = 0, data = 0;
    char *h = malloc(cap);
    hl += (size_t)snprintf(h + hl, cap - hl, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        hl += (size_t)snprintf(h + hl, cap - hl, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name,
                               mt_st_dtype(t[i].dtype));
        for (int d = 0; d < t[i].ndim; d++)
            hl += (size_t)snprintf(h + hl, cap - hl, "%s%lld", d ? "," : "",
                                   (long long)t[i].shape[d]);
        hl += (size_t)snprintf(h + hl, cap - hl, "],\"data_offsets\":[%zu,%zu]}", data,
                               data + mt_bytes(&t[i]));
        data += mt_bytes(&t[i]);
    }
    hl += (size_t)snprintf(h + hl, cap - hl, "}");
    while (pad && hl % 8) h[hl++] = ' ';
    *len = 8 + hl + data;
    unsigned char *buf = malloc(*len);
    for (int b = 0; b < 8; b++) buf[b] = (unsigned char)((uint64_t)hl >> (8 * b));
    memcpy(buf + 8, h, hl);
    unsigned char *p = buf + 8 + hl;
    for (int i = 0; i < n; i++) {
        size_t es = (size_t)kk_dtype_bits(t[i].dtype) / 8;
        for (int64_t k = 0; k < mt_numel(&t[i]); k++, p += es) mt_encode(&t[i], k, p);
    }
    free(h);
    return buf;
}

static inline void mt_write(const char *path, const void *buf, size_t len) {
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(buf, 1, len, fp) != len) {
        fprintf(stderr, "cannot write %s\n", path);
        abort();
    }
    fclose(fp);
}

static inline void mt_write_text(const char *path, const char *text) {
    mt_write(path, text, strlen(text));
}

/* A safetensors file of a header given as text (no padding) and data_len
 * bytes of data (0x3C each). */
static inline void mt_write_raw(const char *path, const char *header, size_t data_len) {
    size_t hl = strlen(header), len = 8 + hl + data_len;
    unsigned char *buf = malloc(len);
    for (int b = 0; b < 8; b++) buf[b] = (unsigned char)((uint64_t)hl >> (8 * b));
    memcpy(buf + 8, header, hl);
    memset(buf + 8 + hl, 0x3C, data_len);
    mt_write(path, buf, len);
    free(buf);
}

/* The tiny model: hidden 8, 2 heads of 4, 1 KV head, intermediate 12, 2
 * layers, vocab 16; bf16 projections, f32 norms, f16 embedding, bf16 lm_head
 * unless tied. */
#define MT_TINY_CONFIG                                                                             \
    "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"],\n"                     \
    " \"hidden_size\": 8, \"intermediate_size\": 12, \"num_hidden_layers\": 2,\n"                  \
    " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"vocab_size\": 16,\n"               \
    " \"rms_norm_eps\": 1e-05, \"rope_theta\": 500000.0, \"hidden_act\": \"silu\",\n"              \
    " \"max_position_embeddings\": 131072, \"torch_dtype\": \"bfloat16\",\n"                       \
    " \"tie_word_embeddings\": %s,\n"                                                              \
    " \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0,\n"  \
    "   \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}\n"

static inline void mt_add(mt_tensor *t, int *n, const char *name, kk_dtype dtype, int64_t d0,
                          int64_t d1) {
    mt_tensor *x = &t[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->dtype = dtype;
    x->ndim = d1 < 0 ? 1 : 2;
    x->shape[0] = d0;
    x->shape[1] = d1 < 0 ? 0 : d1;
    x->seed = *n;
}

/* The tiny model's tensors into t (room for 32); returns how many. */
static inline int mt_tiny_tensors(mt_tensor *t, int with_lm_head) {
    int n = 0;
    mt_add(t, &n, "model.embed_tokens.weight", KK_DTYPE_F16, 16, 8);
    for (int l = 0; l < 2; l++) {
        static const struct {
            const char *suffix;
            int64_t d0, d1;
        } w[] = {{"self_attn.q_proj", 8, 8}, {"self_attn.k_proj", 4, 8}, {"self_attn.v_proj", 4, 8},
                 {"self_attn.o_proj", 8, 8}, {"mlp.gate_proj", 12, 8},   {"mlp.up_proj", 12, 8},
                 {"mlp.down_proj", 8, 12}};
        char name[96];
        for (int i = 0; i < 7; i++) {
            snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, w[i].suffix);
            mt_add(t, &n, name, KK_DTYPE_BF16, w[i].d0, w[i].d1);
        }
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        mt_add(t, &n, name, KK_DTYPE_F32, 8, -1);
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
        mt_add(t, &n, name, KK_DTYPE_F32, 8, -1);
    }
    mt_add(t, &n, "model.norm.weight", KK_DTYPE_F32, 8, -1);
    if (with_lm_head) mt_add(t, &n, "lm_head.weight", KK_DTYPE_BF16, 16, 8);
    return n;
}

/* Write config.json (tie_word_embeddings as given) into dir. */
static inline void mt_write_config(const char *dir, int tie) {
    char path[512], text[1024];
    snprintf(path, sizeof path, "%s/config.json", dir);
    snprintf(text, sizeof text, MT_TINY_CONFIG, tie ? "true" : "false");
    mt_write_text(path, text);
}

/* One model.safetensors holding tensors t. */
static inline void mt_write_model(const char *dir, const mt_tensor *t, int n) {
    char path[512];
    size_t len = 0;
    unsigned char *buf = mt_build(t, n, 1, &len);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    mt_write(path, buf, len);
    free(buf);
}

/* The tensors split over `files` shards model-0000K-of-0000N.safetensors in
 * dir, and model.safetensors.index.json listing them (its text also in index). */
static inline void mt_write_shards(const char *dir, const mt_tensor *t, int n, int files,
                                   char *index, size_t size) {
    char path[512];
    int k = snprintf(index, size, "{\"metadata\": {\"total_size\": 0},\n \"weight_map\": {");
    for (int f = 0; f < files; f++) {
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", f + 1, files);
        int lo = n * f / files, hi = n * (f + 1) / files;
        size_t len = 0;
        unsigned char *buf = mt_build(t + lo, hi - lo, 1, &len);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        mt_write(path, buf, len);
        free(buf);
        for (int i = lo; i < hi; i++)
            k += snprintf(index + k, size - k, "%s\n  \"%s\": \"%s\"", i ? "," : "", t[i].name,
                          name);
    }
    snprintf(index + k, size - k, "}}\n");
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    mt_write_text(path, index);
}

#endif
