/* Shared by the tensor-parallel tests (test_decoder_tp.c, test_cuda_comm.c):
 * a tiny Llama model with random weights written as safetensors (2 layers,
 * hidden 64, 8 heads, 4 KV heads of 16, intermediate as asked, vocab 32,
 * globals included), hidden states from a seed, relative L2. */
#ifndef KK_TP_TESTUTIL_H
#define KK_TP_TESTUTIL_H

#include <math.h>

#include "model_testutil.h"

enum { HID = 64, NH = 8, NKV = 4, HD = 16, NLAYERS = 2, VOCAB = 32, B = 2 };

/* [-1, 1) from the generator *rng (a state per caller: ranks run on threads). */
static inline double uniform(uint64_t *rng) {
    *rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*rng >> 11) / 9007199254740992.0 * 2 - 1;
}

/* The model in a new folder (returned; static storage for two). */
static inline const char *write_model(kk_dtype dt, int inter, uint64_t seed) {
    static char dirs[2][64];
    static int which;
    char *d = dirs[which++ & 1];
    snprintf(d, 64, "/tmp/kk_decoder_tp_XXXXXX");
    if (!mkdtemp(d)) abort();
    char path[128], text[1024];
    snprintf(text, sizeof text,
             "{\"model_type\": \"llama\", \"hidden_size\": %d, \"intermediate_size\": %d,\n"
             " \"num_hidden_layers\": %d, \"num_attention_heads\": %d,\n"
             " \"num_key_value_heads\": %d, \"head_dim\": %d, \"vocab_size\": %d,\n"
             " \"rms_norm_eps\": 1e-5, \"rope_theta\": 10000.0, \"torch_dtype\": \"%s\"}\n",
             HID, inter, NLAYERS, NH, NKV, HD, VOCAB, dt == KK_DTYPE_BF16 ? "bfloat16" : "float32");
    snprintf(path, sizeof path, "%s/config.json", d);
    mt_write_text(path, text);
    static const char *const names[9] = {
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
        "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
        "mlp.down_proj",    "input_layernorm",  "post_attention_layernorm"};
    const int64_t shape[9][2] = {{NH * HD, HID}, {NKV * HD, HID}, {NKV * HD, HID},
                                 {HID, NH * HD}, {inter, HID},    {inter, HID},
                                 {HID, inter},   {HID, -1},       {HID, -1}};
    mt_tensor t[NLAYERS * 9 + 3];
    int n = 0;
    for (int l = 0; l < NLAYERS; l++)
        for (int k = 0; k < 9; k++) {
            char name[96];
            snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, names[k]);
            mt_add(t, &n, name, dt, shape[k][0], shape[k][1]);
        }
    mt_add(t, &n, "model.embed_tokens.weight", dt, VOCAB, HID);
    mt_add(t, &n, "model.norm.weight", dt, HID, -1);
    mt_add(t, &n, "lm_head.weight", dt, VOCAB, HID);
    size_t len = 0;
    unsigned char *buf = mt_build(t, n, 1, &len);
    uint64_t hl = 0;
    for (int b = 0; b < 8; b++) hl |= (uint64_t)buf[b] << (8 * b);
    unsigned char *p = buf + 8 + hl;
    uint64_t rng = seed;
    for (int i = 0; i < n; i++) { /* norms near 1, matrices ~ 1/sqrt(fan-in) */
        const int norm = t[i].ndim == 1;
        const double scale = norm ? 0.2 : 1.0 / sqrt((double)t[i].shape[1]);
        for (int64_t e = 0; e < mt_numel(&t[i]); e++) {
            const float v = (float)((norm ? 1.0 : 0.0) + scale * uniform(&rng));
            if (dt == KK_DTYPE_BF16) {
                uint16_t h = kk_f32_to_bf16(v);
                memcpy(p, &h, 2), p += 2;
            } else
                memcpy(p, &v, 4), p += 4;
        }
    }
    snprintf(path, sizeof path, "%s/model.safetensors", d);
    mt_write(path, buf, len);
    free(buf);
    return d;
}

static inline void remove_model(const char *dir) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fail_msg("cannot remove %s", dir);
}

/* Hidden states [B, n, HID] in dt, from seed. */
static inline kk_tensor *hidden(kk_dtype dt, int n, uint64_t seed) {
    kk_tensor *f, *t;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 3, (int64_t[]){B, n, HID}, &f));
    uint64_t rng = seed;
    for (int64_t i = 0; i < kk_tensor_numel(f); i++) ((float *)f->data)[i] = (float)uniform(&rng);
    kk_assert_ok(kk_tensor_create("cpu", dt, 3, f->shape, &t));
    kk_assert_ok(kk_convert(f, t, NULL));
    kk_tensor_destroy(f);
    return t;
}

static inline double elem(const kk_tensor *t, int64_t e) {
    return t->dtype == KK_DTYPE_BF16 ? kk_bf16_to_f32(((const uint16_t *)t->data)[e])
                                     : ((const float *)t->data)[e];
}

/* Relative L2 of a against the reference r (NaN: infinite). */
static inline double rel_l2(const kk_tensor *a, const kk_tensor *r) {
    double num = 0, den = 0;
    for (int64_t e = 0; e < kk_tensor_numel(r); e++) {
        const double x = elem(a, e), y = elem(r, e);
        if (isnan(x)) return INFINITY;
        num += (x - y) * (x - y), den += y * y;
    }
    return sqrt(num / den);
}

#endif
