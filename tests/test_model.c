/* labels: unit cpu */
/* Model loading (docs/model.md, "Loading"): a tiny Llama-shaped model written
 * here as safetensors, one file and sharded, read back value by value; every
 * rule of the safetensors reader, the index and config.json broken by a
 * crafted file, with the error's status and message checked. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_testutil.h"

static char g_dir[64];

static int make_dir(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/kk_model_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *in_dir(const char *name) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    return path;
}

/* Every byte and, for the float types, every value as written. */
static void assert_tensor(const kk_tensor *t, const mt_tensor *w) {
    assert_non_null(t);
    assert_int_equal(t->dtype, w->dtype);
    assert_int_equal(t->ndim, w->ndim);
    for (int d = 0; d < w->ndim; d++) assert_int_equal(t->shape[d], w->shape[d]);
    assert_true(kk_tensor_is_contiguous(t));
    assert_true(kk_tensor_is_read_only(t));
    assert_string_equal(t->device, "cpu");
    size_t es = (size_t)kk_dtype_bits(w->dtype) / 8;
    if (mt_numel(w) == 0) {
        assert_null(t->data);
        return;
    }
    assert_int_equal((uintptr_t)t->data % es, 0);
    for (int64_t k = 0; k < mt_numel(w); k++) {
        unsigned char want[8];
        const unsigned char *got = (const unsigned char *)t->data + k * es;
        mt_encode(w, k, want);
        if (memcmp(got, want, es) != 0) fail_msg("%s: element %lld differs", w->name, (long long)k);
        float v = mt_value(w->seed, k), f = 0;
        uint16_t h;
        switch (w->dtype) {
        case KK_DTYPE_F32: memcpy(&f, got, 4); break;
        case KK_DTYPE_BF16: memcpy(&h, got, 2), f = kk_bf16_to_f32(h); break;
        case KK_DTYPE_F16: memcpy(&h, got, 2), f = kk_f16_to_f32(h); break;
        default: f = v;
        }
        if (f != v) fail_msg("%s[%lld] = %g: expected %g", w->name, (long long)k, f, v);
    }
}

static void assert_model_matches(const kk_model *m, const mt_tensor *t, int n) {
    assert_int_equal(kk_model_tensor_count(m), n);
    for (int i = 0; i < n; i++) {
        const kk_tensor *got = NULL;
        kk_assert_ok(kk_model_tensor(m, t[i].name, &got));
        assert_tensor(got, &t[i]);
    }
}

/* kk_model_open on g_dir fails with `st` and a message holding each needle. */
static void assert_open_fails(kk_status st, const char *n1, const char *n2) {
    kk_model *m = (kk_model *)&m;
    kk_assert_status(kk_model_open(g_dir, &m), st);
    assert_null(m);
    kk_assert_contains(kk_last_error_message(), "kk_model_open: ");
    if (n1) kk_assert_contains(kk_last_error_message(), n1);
    if (n2) kk_assert_contains(kk_last_error_message(), n2);
}

/* ---- one file ---- */

static void one_file_model_reads_back(void **state) {
    (void)state;
    mt_tensor t[48];
    int n = mt_tiny_tensors(t, 1);
    /* Every dtype the reader takes, a scalar and an empty tensor. */
    static const kk_dtype extra[] = {KK_DTYPE_F64,  KK_DTYPE_FP8_E4M3, KK_DTYPE_FP8_E5M2,
                                     KK_DTYPE_INT8, KK_DTYPE_UINT8,    KK_DTYPE_INT32};
    for (int i = 0; i < 6; i++) {
        char name[32];
        snprintf(name, sizeof name, "extra.%s", kk_dtype_name(extra[i]));
        mt_add(t, &n, name, extra[i], 3, 5);
    }
    mt_add(t, &n, "extra.scalar", KK_DTYPE_F32, 1, -1);
    t[n - 1].ndim = 0;
    mt_add(t, &n, "extra.empty", KK_DTYPE_BF16, 0, 4);
    mt_write_config(g_dir, 0);
    mt_write_model(g_dir, t, n);

    kk_model *m = NULL;
    kk_assert_ok(kk_model_open(g_dir, &m));
    assert_model_matches(m, t, n);

    const kk_model_config *c = kk_model_get_config(m);
    assert_int_equal(c->hidden_size, 8);
    assert_int_equal(c->intermediate_size, 12);
    assert_int_equal(c->num_hidden_layers, 2);
    assert_int_equal(c->num_attention_heads, 2);
    assert_int_equal(c->num_key_value_heads, 1);
    assert_int_equal(c->head_dim, 4);
    assert_int_equal(c->vocab_size, 16);
    assert_int_equal(c->max_position_embeddings, 131072);
    assert_true(c->rms_norm_eps == 1e-5);
    assert_int_equal(c->tie_word_embeddings, 0);
    assert_int_equal(c->torch_dtype, KK_DTYPE_BF16);
    assert_int_equal(c->torch_dtype_given, 1);
    assert_true(c->rope.theta == 500000.0);
    assert_int_equal(c->rope.rotary_dim, 4);
    assert_int_equal(c->rope.style, KK_ROPE_NEOX);
    assert_int_equal(c->rope.scaling, KK_ROPE_SCALING_LLAMA3);
    assert_true(c->rope.factor == 8.0 && c->rope.low_freq_factor == 1.0);
    assert_true(c->rope.high_freq_factor == 4.0);
    assert_int_equal(c->rope.original_max_position, 8192);

    /* The per-layer accessor finds the standard names. */
    kk_model_layer l;
    kk_assert_ok(kk_model_layer_weights(m, 1, &l));
    const kk_tensor *x = NULL;
    kk_assert_ok(kk_model_tensor(m, "model.layers.1.self_attn.k_proj.weight", &x));
    assert_ptr_equal(l.k_proj, x);
    assert_int_equal(l.down_proj->shape[0], 8);
    assert_int_equal(l.down_proj->shape[1], 12);
    kk_assert_ok(kk_model_tensor(m, "model.layers.1.post_attention_layernorm.weight", &x));
    assert_ptr_equal(l.post_attention_layernorm, x);
    /* A padded file's tensors all view its one mapping: no copies. */
    assert_ptr_equal(l.q_proj->storage, l.down_proj->storage);
    kk_model_globals g;
    kk_assert_ok(kk_model_global_weights(m, &g));
    assert_non_null(g.embed_tokens);
    assert_non_null(g.norm);
    assert_non_null(g.lm_head);
    assert_ptr_not_equal(g.lm_head, g.embed_tokens);

    /* Iteration is sorted by name. */
    const char *prev = "", *name = NULL;
    for (int64_t i = 0; i < kk_model_tensor_count(m); i++) {
        kk_assert_ok(kk_model_tensor_at(m, i, &name, NULL));
        assert_true(strcmp(prev, name) < 0);
        prev = name;
    }
    kk_assert_status(kk_model_tensor_at(m, n, &name, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_model_tensor(m, "model.layers.9.mlp.up_proj.weight", &x),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "no tensor 'model.layers.9.mlp.up_proj.weight'");
    kk_assert_status(kk_model_layer_weights(m, 2, &l), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "layer = 2: expected 0 to 1");

    /* Weights are read-only: a write into one is refused, not a crash. */
    kk_tensor *src = NULL;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 1, (int64_t[]){8}, &src));
    kk_assert_status(kk_tensor_copy((kk_tensor *)g.norm, src), KK_ERR_INVALID_ARGUMENT);
    kk_tensor_destroy(src);

    /* A view keeps the mapping alive after the model is closed. */
    kk_tensor *row = NULL;
    kk_assert_ok(kk_tensor_slice(l.q_proj, 0, 3, 4, 1, &row));
    kk_model_close(m);
    const mt_tensor *q1 = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, "model.layers.1.self_attn.q_proj.weight") == 0) q1 = &t[i];
    for (int k = 0; k < 8; k++) {
        uint16_t h;
        memcpy(&h, (const uint16_t *)row->data + k, 2);
        assert_true(kk_bf16_to_f32(h) == mt_value(q1->seed, 3 * 8 + k));
    }
    kk_tensor_destroy(row);
    kk_model_close(NULL);
}

/* A header not padded to 8 bytes and a 1-byte tensor first: every tensor after
 * it is unaligned, copied once, and still read back exactly. */
static void unaligned_tensors_are_copied(void **state) {
    (void)state;
    mt_tensor t[48];
    int n = 0;
    mt_add(t, &n, "a.byte", KK_DTYPE_UINT8, 1, -1);
    n += mt_tiny_tensors(t + n, 0);
    size_t len = 0;
    unsigned char *buf = mt_build(t, n, 0, &len);
    if ((buf[0] + 8 + 1) % 2 == 0) { /* the second tensor must start at an odd byte */
        free(buf);
        snprintf(t[0].name, sizeof t[0].name, "a.bytes");
        buf = mt_build(t, n, 0, &len);
    }
    mt_write(in_dir("model.safetensors"), buf, len);
    free(buf);
    mt_write_config(g_dir, 1);
    kk_model *m = NULL;
    kk_assert_ok(kk_model_open(g_dir, &m));
    assert_model_matches(m, t, n);
    kk_model_layer l;
    kk_assert_ok(kk_model_layer_weights(m, 0, &l));
    assert_ptr_not_equal(l.q_proj->storage, l.k_proj->storage);
    kk_model_globals g;
    kk_assert_ok(kk_model_global_weights(m, &g));
    assert_ptr_equal(g.lm_head, g.embed_tokens); /* tied, no lm_head.weight */
    kk_model_close(m);
}

/* ---- sharded ---- */

static void write_shards(const mt_tensor *t, int n, int files) {
    char index[8192];
    mt_write_shards(g_dir, t, n, files, index, sizeof index);
}

static void sharded_model_reads_back(void **state) {
    (void)state;
    mt_tensor t[32];
    int n = mt_tiny_tensors(t, 0);
    mt_write_config(g_dir, 1);
    write_shards(t, n, 3);
    /* A model.safetensors beside the index is ignored: the index wins. */
    mt_write_raw(in_dir("model.safetensors"), "not a header", 0);
    kk_model *m = NULL;
    kk_assert_ok(kk_model_open(g_dir, &m));
    assert_model_matches(m, t, n);
    kk_model_layer l0, l1;
    kk_assert_ok(kk_model_layer_weights(m, 0, &l0));
    kk_assert_ok(kk_model_layer_weights(m, 1, &l1));
    assert_ptr_not_equal(l0.q_proj->storage, l1.down_proj->storage); /* other files */
    kk_model_globals g;
    kk_assert_ok(kk_model_global_weights(m, &g));
    assert_ptr_equal(g.lm_head, g.embed_tokens);
    kk_model_close(m);
    /* "" is the current folder, for the index's files too. */
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(g_dir), 0);
    kk_assert_ok(kk_model_open("", &m));
    assert_int_equal(kk_model_tensor_count(m), n);
    kk_model_close(m);
    assert_int_equal(chdir(cwd), 0);
}

static void bad_index_is_named(void **state) {
    (void)state;
    mt_tensor t[32];
    int n = mt_tiny_tensors(t, 0);
    mt_write_config(g_dir, 1);
    write_shards(t, n, 2);
    const char *shard1 = "model-00001-of-00002.safetensors";
    static const struct {
        const char *index;
        kk_status st;
        const char *n1, *n2;
    } bad[] = {
        {"[1]", KK_ERR_IO, "index.json", "not a JSON object"},
        {"{\"metadata\": {}}", KK_ERR_IO, "index.json", "no \"weight_map\""},
        {"{\"weight_map\": {\"model.norm.weight\": \"../evil.safetensors\"}}", KK_ERR_IO,
         "'model.norm.weight'", "not a file name"},
        {"{\"weight_map\": {\"model.norm.weight\": 7}}", KK_ERR_IO, "'model.norm.weight'",
         "not a file name"},
        {"{\"weight_map\": {\"model.norm.weight\": \"gone.safetensors\"}}", KK_ERR_IO,
         "gone.safetensors", "cannot open"},
        {"{\"weight_map\": {\"model.norm.weight\": \"model-00001-of-00002.safetensors\"}}",
         KK_ERR_IO, "model-00001-of-00002.safetensors", "does not hold it"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mt_write_text(in_dir("model.safetensors.index.json"), bad[i].index);
        assert_open_fails(bad[i].st, bad[i].n1, bad[i].n2);
    }
    /* The map and the files must agree: a tensor left out, one listed twice,
     * one in the wrong file. */
    char index[8192], *p;
    int k = snprintf(index, sizeof index, "{\"weight_map\": {");
    for (int i = 0; i < n; i++)
        k += snprintf(index + k, sizeof index - k, "%s\"%s\": \"model-%05d-of-00002.safetensors\"",
                      i ? ", " : "", t[i].name, i < n / 2 ? 1 : 2);
    snprintf(index + k, sizeof index - k, "}}");
    char full[8192];
    snprintf(full, sizeof full, "%s", index);
    mt_write_text(in_dir("model.safetensors.index.json"), full);
    kk_model *m = NULL;
    kk_assert_ok(kk_model_open(g_dir, &m)); /* the well-formed index */
    kk_model_close(m);

    p = strstr(full, "\"model.norm.weight\"");
    memcpy(p, "\"model.norm.weighX\"", 19);
    mt_write_text(in_dir("model.safetensors.index.json"), full);
    assert_open_fails(KK_ERR_IO, "'model.norm.weighX'", "does not hold it");

    snprintf(full, sizeof full, "%.*s, \"model.norm.weight\": \"%s\"}}", k, index,
             "model-00002-of-00002.safetensors");
    mt_write_text(in_dir("model.safetensors.index.json"), full);
    assert_open_fails(KK_ERR_IO, "'model.norm.weight' twice", NULL);

    snprintf(full, sizeof full, "%s", index);
    p = strstr(full, "\"model.embed_tokens.weight\": \"model-00001");
    p[strlen("\"model.embed_tokens.weight\": \"model-0000")] = '2';
    mt_write_text(in_dir("model.safetensors.index.json"), full);
    assert_open_fails(KK_ERR_IO, "puts tensor 'model.embed_tokens.weight' in", shard1);

    snprintf(full, sizeof full, "%s", index);
    p = strstr(full, "\"model.embed_tokens.weight\"");
    memmove(p, p + strlen("\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\", "),
            strlen(p) + 1 -
                strlen("\"model.embed_tokens.weight\": \"model-00001-of-00002"
                       ".safetensors\", "));
    mt_write_text(in_dir("model.safetensors.index.json"), full);
    assert_open_fails(KK_ERR_IO, "holds tensor 'model.embed_tokens.weight', which weight_map",
                      NULL);

    /* The same tensor in two shards. */
    size_t len = 0;
    unsigned char *buf = mt_build(t, 2, 1, &len); /* embed + layer 0 q, also in shard 1 */
    mt_write(in_dir("model-00002-of-00002.safetensors"), buf, len);
    free(buf);
    snprintf(full, sizeof full,
             "{\"weight_map\": {\"model.embed_tokens.weight\": \"%s\", \"model.norm.weight\": "
             "\"model-00002-of-00002.safetensors\"}}",
             shard1);
    mt_write_text(in_dir("model.safetensors.index.json"), full);
    assert_open_fails(KK_ERR_IO, "tensor 'model.embed_tokens.weight' is in both", shard1);
}

/* ---- the safetensors reader's rules, one crafted file each ---- */

typedef struct bad_file {
    const char *header; /* NULL: raw bytes below */
    size_t data;
    kk_status st;
    const char *n1, *n2;
} bad_file;

static void bad_safetensors_are_named(void **state) {
    (void)state;
    mt_write_config(g_dir, 0);
    static const bad_file bad[] = {
        {"[1, 2]", 0, KK_ERR_IO, "does not start with '{'", NULL},
        {"{\"w\": {\"dtype\": ", 0, KK_ERR_IO, "not valid JSON", NULL},
        {"{}  x", 0, KK_ERR_IO, "bytes after its JSON object", NULL},
        {"{\"w\": 3}", 0, KK_ERR_IO, "tensor 'w'", "expected an object"},
        {"{\"\": {}}", 0, KK_ERR_IO, "empty name", NULL},
        {"{\"w\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, KK_ERR_IO, "tensor 'w'",
         "\"dtype\" missing"},
        {"{\"w\": {\"dtype\": \"F17\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, KK_ERR_IO,
         "tensor 'w'", "unknown dtype \"F17\""},
        {"{\"mask\": {\"dtype\": \"BOOL\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 4,
         KK_ERR_UNSUPPORTED, "tensor 'mask'", "dtype BOOL is not supported"},
        {"{\"ids\": {\"dtype\": \"I64\", \"shape\": [1], \"data_offsets\": [0, 8]}}", 8,
         KK_ERR_UNSUPPORTED, "tensor 'ids'", "dtype I64 is not supported"},
        {"{\"w\": {\"dtype\": \"U16\", \"shape\": [1], \"data_offsets\": [0, 2]}}", 2,
         KK_ERR_UNSUPPORTED, "tensor 'w'", "dtype U16"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": 3, \"data_offsets\": [0, 4]}}", 4, KK_ERR_IO,
         "tensor 'w'", "\"shape\" missing or not an array"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2, -1], \"data_offsets\": [0, 4]}}", 4,
         KK_ERR_IO, "tensor 'w'", "shape[1] is not an integer in [0, 2^53)"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4, KK_ERR_IO,
         "tensor 'w'", "shape[0] is not an integer"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}",
         4, KK_ERR_UNSUPPORTED, "tensor 'w'", "9 dimensions: expected at most 8"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4, KK_ERR_IO,
         "tensor 'w'", "not [begin, end]"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [\"0\", \"4\"]}}", 4,
         KK_ERR_IO, "tensor 'w'", "not [begin, end]"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 8, KK_ERR_IO,
         "tensor 'w'", "data_offsets [8, 4]: expected begin <= end"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4, KK_ERR_IO,
         "tensor 'w'", "end past the data region: expected end <= 4"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4, KK_ERR_IO,
         "tensor 'w'", "hold 4 bytes: expected 2 elements x 4 bytes of f32 (shape [2])"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 4294967296], "
         "\"data_offsets\": [0, 4]}}",
         4, KK_ERR_IO, "tensor 'w'", "element count overflows int64"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2147483648, 2147483648], "
         "\"data_offsets\": [0, 4]}}",
         4, KK_ERR_IO, "tensor 'w'", "expected 4611686018427387904 elements x 4 bytes"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
         " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
         12, KK_ERR_IO, "tensor 'b'", "overlap tensor 'a' [0, 8]"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
         " \"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
         8, KK_ERR_IO, "tensor 'w'", "appears twice"},
        {"{\"__metadata__\": 3}", 0, KK_ERR_IO, "\"__metadata__\" is not an object", NULL},
        {"{\"__metadata__\": {\"format\": 1}}", 0, KK_ERR_IO, "member \"format\" is not a string",
         NULL},
        {"{\"__metadata__\": {}, \"__metadata__\": {}}", 0, KK_ERR_IO, "appears twice", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mt_write_raw(in_dir("model.safetensors"), bad[i].header, bad[i].data);
        assert_open_fails(bad[i].st, "model.safetensors", bad[i].n1);
        if (bad[i].n2) kk_assert_contains(kk_last_error_message(), bad[i].n2);
        assert_true(kk_status_is(bad[i].st, KK_ERR_BACKEND));
    }
    /* The 8-byte length itself: short files, a length past the end, a huge one. */
    mt_write(in_dir("model.safetensors"), "\x02\0\0\0", 4);
    assert_open_fails(KK_ERR_IO, "model.safetensors", "4 bytes is too short");
    mt_write(in_dir("model.safetensors"), "", 0);
    assert_open_fails(KK_ERR_IO, "model.safetensors", "0 bytes is too short");
    mt_write(in_dir("model.safetensors"), "\xe8\x03\0\0\0\0\0\0{}", 10);
    assert_open_fails(KK_ERR_IO, "header length 1000: expected 2 to 100000000 bytes",
                      "at most the 2 bytes");
    mt_write(in_dir("model.safetensors"), "\0\0\0\0\0\0\0\x80{}", 10);
    assert_open_fails(KK_ERR_IO, "header length 9223372036854775808", NULL);
    mt_write(in_dir("model.safetensors"), "\x01\0\0\0\0\0\0\0{", 9);
    assert_open_fails(KK_ERR_IO, "header length 1", NULL);
    /* A folder for a file. */
    unlink(in_dir("model.safetensors"));
    assert_int_equal(mkdir(in_dir("model.safetensors"), 0700), 0);
    assert_open_fails(KK_ERR_IO, "model.safetensors", "not a regular file");
    rmdir(in_dir("model.safetensors"));
    assert_open_fails(KK_ERR_IO, "no weights: expected model.safetensors.index.json", NULL);
    unlink(in_dir("config.json"));
    assert_open_fails(KK_ERR_IO, "config.json", "cannot open");
}

/* ---- weights against the configuration ---- */

static void weights_must_match_the_config(void **state) {
    (void)state;
    mt_write_config(g_dir, 0);
    mt_tensor t[32];
    int n = mt_tiny_tensors(t, 1);
    static const struct {
        const char *name;
        kk_dtype dtype;
        int ndim;
        int64_t d0, d1;
        const char *n1, *n2;
    } bad[] = {
        {"model.layers.0.self_attn.k_proj.weight", KK_DTYPE_BF16, 2, 8, 8,
         "tensor 'model.layers.0.self_attn.k_proj.weight' has shape [8, 8]: expected [4, 8]",
         "(num_key_value_heads * head_dim, hidden_size)"},
        {"model.layers.1.mlp.down_proj.weight", KK_DTYPE_BF16, 2, 12, 8, "has shape [12, 8]",
         "expected [8, 12] (hidden_size, intermediate_size)"},
        {"model.layers.1.input_layernorm.weight", KK_DTYPE_F32, 2, 8, 1, "has shape [8, 1]",
         "expected [8] (hidden_size)"},
        {"model.layers.0.mlp.up_proj.weight", KK_DTYPE_INT32, 2, 12, 8, "has dtype int32",
         "expected a float dtype"},
        {"lm_head.weight", KK_DTYPE_BF16, 2, 15, 8, "tensor 'lm_head.weight' has shape [15, 8]",
         "expected [16, 8] (vocab_size, hidden_size)"},
        {"model.embed_tokens.weight", KK_DTYPE_F16, 1, 128, 0, "has shape [128]", "[16, 8]"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        mt_tensor u[32];
        memcpy(u, t, sizeof u);
        for (int i = 0; i < n; i++)
            if (strcmp(u[i].name, bad[b].name) == 0) {
                u[i].dtype = bad[b].dtype;
                u[i].ndim = bad[b].ndim;
                u[i].shape[0] = bad[b].d0;
                u[i].shape[1] = bad[b].d1;
            }
        mt_write_model(g_dir, u, n);
        assert_open_fails(KK_ERR_CONFIG, bad[b].n1, bad[b].n2);
    }
    /* A layer tensor missing; the optional globals may be. */
    mt_write_model(g_dir, t, n - 1);
    kk_model *m = NULL;
    kk_assert_ok(kk_model_open(g_dir, &m));
    kk_model_globals g;
    kk_assert_ok(kk_model_global_weights(m, &g));
    assert_null(g.lm_head); /* not tied */
    kk_model_close(m);
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, "model.layers.1.mlp.gate_proj.weight") == 0) t[i] = t[--n];
    mt_write_model(g_dir, t, n);
    assert_open_fails(KK_ERR_CONFIG, "tensor 'model.layers.1.mlp.gate_proj.weight' is missing",
                      "num_hidden_layers = 2");
}

/* ---- config.json ---- */

#define BASE "\"hidden_size\": 8, \"intermediate_size\": 12, \"num_hidden_layers\": 2, "
#define HEADS "\"num_attention_heads\": 2, \"vocab_size\": 16"

static kk_status load_config(const char *text, kk_model_config *c) {
    mt_write_text(in_dir("config.json"), text);
    return kk_model_config_load(in_dir("config.json"), c);
}

static void config_defaults_and_rope(void **state) {
    (void)state;
    kk_model_config c;
    kk_assert_ok(load_config("{" BASE HEADS "}", &c));
    assert_int_equal(c.num_key_value_heads, 2);
    assert_int_equal(c.head_dim, 4);
    assert_true(c.rms_norm_eps == 1e-6);
    assert_true(c.rope.theta == 10000.0);
    assert_int_equal(c.rope.scaling, KK_ROPE_SCALING_NONE);
    assert_int_equal(c.tie_word_embeddings, 0);
    assert_int_equal(c.torch_dtype_given, 0);
    assert_int_equal(c.max_position_embeddings, 2048);
    kk_assert_ok(load_config("{" BASE HEADS ", \"head_dim\": 16, \"num_key_value_heads\": null, "
                             "\"rope_scaling\": null, \"dtype\": \"float16\"}",
                             &c));
    assert_int_equal(c.head_dim, 16);
    assert_int_equal(c.rope.rotary_dim, 16);
    assert_int_equal(c.num_key_value_heads, 2);
    assert_int_equal(c.torch_dtype, KK_DTYPE_F16);
    kk_assert_ok(
        load_config("{" BASE HEADS ", \"rope_scaling\": {\"rope_type\": \"default\"}}", &c));
    assert_int_equal(c.rope.scaling, KK_ROPE_SCALING_NONE);
    kk_assert_ok(load_config("{" BASE HEADS ", \"rope_scaling\": {\"type\": \"llama3\", "
                             "\"factor\": 32, \"low_freq_factor\": 1, \"high_freq_factor\": 4, "
                             "\"original_max_position_embeddings\": 8192}}",
                             &c));
    assert_int_equal(c.rope.scaling, KK_ROPE_SCALING_LLAMA3);
    assert_true(c.rope.factor == 32.0);
    assert_int_equal(c.rope.original_max_position, 8192);
    /* transformers 5 writes rope_parameters (theta and scaling in one object);
     * it wins over the top-level fields (issue 19: missed, the rope ran at the
     * default theta 10000 against transformers' 500000) */
    kk_assert_ok(load_config("{" BASE HEADS ", \"rope_theta\": 1000, \"rope_parameters\": "
                             "{\"rope_theta\": 500000.0, \"rope_type\": \"default\"}}",
                             &c));
    assert_true(c.rope.theta == 500000.0);
    assert_int_equal(c.rope.scaling, KK_ROPE_SCALING_NONE);
    kk_assert_ok(load_config("{" BASE HEADS ", \"rope_parameters\": {\"rope_type\": \"llama3\", "
                             "\"rope_theta\": 500000.0, \"factor\": 8, \"low_freq_factor\": 1, "
                             "\"high_freq_factor\": 4, \"original_max_position_embeddings\": "
                             "8192}}",
                             &c));
    assert_true(c.rope.theta == 500000.0);
    assert_int_equal(c.rope.scaling, KK_ROPE_SCALING_LLAMA3);
    assert_true(c.rope.factor == 8.0);
    assert_int_equal(c.rope.original_max_position, 8192);
    kk_assert_ok(load_config("{" BASE HEADS ", \"rope_parameters\": {\"rope_theta\": 20000}}", &c));
    assert_true(c.rope.theta == 20000.0);
    assert_int_equal(c.rope.scaling, KK_ROPE_SCALING_NONE);
}

static void bad_configs_are_named(void **state) {
    (void)state;
    static const struct {
        const char *text;
        kk_status st;
        const char *n1, *n2;
    } bad[] = {
        {"{\"intermediate_size\": 12, \"num_hidden_layers\": 2, " HEADS "}", KK_ERR_CONFIG,
         "hidden_size = (missing): expected an integer from 1 to 16777216 (required)", NULL},
        {"{\"hidden_size\": 0, \"intermediate_size\": 12, \"num_hidden_layers\": 2, " HEADS "}",
         KK_ERR_CONFIG, "hidden_size = 0: expected an integer from 1", NULL},
        {"{\"hidden_size\": 8, \"intermediate_size\": -12, \"num_hidden_layers\": 2, " HEADS "}",
         KK_ERR_CONFIG, "intermediate_size = -12", NULL},
        {"{" BASE "\"num_attention_heads\": 2.5, \"vocab_size\": 16}", KK_ERR_CONFIG,
         "num_attention_heads = 2.5", NULL},
        {"{" BASE "\"num_attention_heads\": \"2\", \"vocab_size\": 16}", KK_ERR_CONFIG,
         "num_attention_heads = \"2\"", NULL},
        {"{" BASE "\"num_attention_heads\": 4, \"num_key_value_heads\": 3, \"vocab_size\": 16}",
         KK_ERR_CONFIG, "num_key_value_heads = 3: expected a divisor of num_attention_heads = 4",
         NULL},
        {"{" BASE HEADS ", \"num_key_value_heads\": 4}", KK_ERR_CONFIG,
         "num_key_value_heads = 4: expected an integer from 1 to 2", NULL},
        {"{\"hidden_size\": 9, \"intermediate_size\": 12, \"num_hidden_layers\": 2, " HEADS "}",
         KK_ERR_CONFIG, "hidden_size = 9: expected a multiple of num_attention_heads = 2", NULL},
        {"{" BASE HEADS ", \"head_dim\": 3}", KK_ERR_CONFIG, "head_dim = 3: expected an even",
         NULL},
        {"{" BASE HEADS ", \"rms_norm_eps\": 0}", KK_ERR_CONFIG, "rms_norm_eps = 0: expected",
         NULL},
        {"{" BASE HEADS ", \"rope_theta\": 0.5}", KK_ERR_CONFIG, "rope_theta = 0.5", NULL},
        {"{" BASE HEADS ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}",
         KK_ERR_UNSUPPORTED, "rope_scaling.rope_type = \"yarn\"", "\"llama3\""},
        {"{" BASE HEADS ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2}}",
         KK_ERR_UNSUPPORTED, "rope_scaling.type = \"linear\"", NULL},
        {"{" BASE HEADS ", \"rope_scaling\": {\"factor\": 2}}", KK_ERR_CONFIG,
         "rope_scaling.rope_type = (missing)", NULL},
        {"{" BASE HEADS ", \"rope_scaling\": 5}", KK_ERR_CONFIG, "rope_scaling = 5", NULL},
        {"{" BASE HEADS ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"low_freq_factor\": 1, "
         "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}}",
         KK_ERR_CONFIG, "rope_scaling.factor = (missing)", NULL},
        {"{" BASE HEADS ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, "
         "\"low_freq_factor\": 4, \"high_freq_factor\": 4, "
         "\"original_max_position_embeddings\": 8192}}",
         KK_ERR_CONFIG, "rope_scaling.high_freq_factor = 4: expected more than low_freq_factor",
         NULL},
        {"{" BASE HEADS ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, "
         "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
         "\"original_max_position_embeddings\": 8192.5}}",
         KK_ERR_CONFIG, "rope_scaling.original_max_position_embeddings = 8192.5", NULL},
        {"{" BASE HEADS ", \"rope_parameters\": {\"rope_theta\": 0.5}}", KK_ERR_CONFIG,
         "rope_parameters.rope_theta = 0.5", NULL},
        {"{" BASE HEADS ", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4}}",
         KK_ERR_UNSUPPORTED, "rope_parameters.rope_type = \"yarn\"", NULL},
        {"{" BASE HEADS ", \"rope_parameters\": {\"rope_type\": \"llama3\", \"factor\": 8}}",
         KK_ERR_CONFIG, "rope_parameters.low_freq_factor = (missing)", NULL},
        {"{" BASE HEADS ", \"rope_parameters\": 5}", KK_ERR_CONFIG, "rope_parameters = 5", NULL},
        {"{" BASE HEADS ", \"model_type\": \"qwen2\"}", KK_ERR_UNSUPPORTED,
         "model_type = \"qwen2\": expected \"llama\"", NULL},
        {"{" BASE HEADS ", \"attention_bias\": true}", KK_ERR_UNSUPPORTED, "attention_bias = true",
         NULL},
        {"{" BASE HEADS ", \"hidden_act\": \"gelu\"}", KK_ERR_UNSUPPORTED, "hidden_act = \"gelu\"",
         NULL},
        {"{" BASE HEADS ", \"torch_dtype\": \"int8\"}", KK_ERR_UNSUPPORTED,
         "torch_dtype = \"int8\"", NULL},
        {"{" BASE HEADS ", \"tie_word_embeddings\": \"yes\"}", KK_ERR_CONFIG,
         "tie_word_embeddings = \"yes\": expected true or false", NULL},
        {"{" BASE HEADS, KK_ERR_CONFIG, "not valid JSON", NULL},
        {"[1]", KK_ERR_CONFIG, "not a JSON object", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kk_model_config c;
        memset(&c, 0x5A, sizeof c);
        kk_assert_status(load_config(bad[i].text, &c), bad[i].st);
        kk_assert_contains(kk_last_error_message(), "kk_model_config_load: ");
        kk_assert_contains(kk_last_error_message(), "config.json: ");
        kk_assert_contains(kk_last_error_message(), bad[i].n1);
        if (bad[i].n2) kk_assert_contains(kk_last_error_message(), bad[i].n2);
        assert_int_equal(c.hidden_size, 0x5A5A5A5A5A5A5A5A); /* untouched */
    }
    /* Through kk_model_open the function is the public one. */
    mt_write_text(in_dir("config.json"), "{" BASE HEADS ", \"rope_theta\": -1}");
    assert_open_fails(KK_ERR_CONFIG, "config.json: rope_theta = -1", NULL);
    kk_model_config c;
    kk_assert_status(kk_model_config_load(in_dir("none.json"), &c), KK_ERR_IO);
    kk_assert_status(kk_model_config_load(NULL, &c), KK_ERR_INVALID_ARGUMENT);
    kk_model *m = NULL;
    kk_assert_status(kk_model_open(NULL, &m), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_model_open(g_dir, NULL), KK_ERR_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(one_file_model_reads_back, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(unaligned_tensors_are_copied, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(sharded_model_reads_back, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(bad_index_is_named, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(bad_safetensors_are_named, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(weights_must_match_the_config, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(config_defaults_and_rope, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(bad_configs_are_named, make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
