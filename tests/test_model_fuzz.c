/* labels: unit cpu */
/* Fuzzing the safetensors reader: a valid file of the tiny model, mutated
 * (bit flips, truncation, header-length changes, JSON edits, numbers and
 * dtypes swapped, bytes appended) a few thousand times from a fixed seed.
 * Each mutant is parsed from an exact-size heap copy (so ASan sees any read
 * past it) and, one in eight, opened as a model from a file: the result is
 * either success, with every tensor's bytes inside the buffer and read, or a
 * clean KK_ERR_IO / KK_ERR_UNSUPPORTED / KK_ERR_CONFIG naming the file.
 * KK_FUZZ_ITERS and KK_FUZZ_SEED change the run. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "model_testutil.h"

static uint64_t g_rng;

static uint64_t next(void) { /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * UINT64_C(2685821657736338717);
}

static size_t below(size_t n) { return n ? (size_t)(next() % n) : 0; }

typedef struct buf {
    unsigned char *p;
    size_t len;
} buf;

static uint64_t header_len(const buf *b) {
    uint64_t n = 0;
    for (int i = 7; i >= 0 && b->len >= 8; i--) n = n << 8 | b->p[i];
    return n;
}

static void set_header_len(buf *b, uint64_t n) {
    for (int i = 0; i < 8 && i < (int)b->len; i++) b->p[i] = (unsigned char)(n >> (8 * i));
}

/* Replace b[at, at + del) by ins (n bytes); the header length follows when
 * the edit is inside the header. */
static void splice(buf *b, size_t at, size_t del, const char *ins, size_t n, int fix_len) {
    if (at > b->len) at = b->len;
    if (del > b->len - at) del = b->len - at;
    unsigned char *p = malloc(b->len - del + n + 1);
    memcpy(p, b->p, at);
    memcpy(p + at, ins, n);
    memcpy(p + at + n, b->p + at + del, b->len - at - del);
    uint64_t hl = header_len(b);
    free(b->p);
    b->p = p;
    b->len = b->len - del + n;
    if (fix_len && b->len >= 8) set_header_len(b, hl - del + n);
}

/* A byte range of the header text [8, 8 + hl) clipped to the buffer. */
static size_t header_end(const buf *b) {
    uint64_t hl = header_len(b);
    return 8 + hl < b->len ? (size_t)(8 + hl) : b->len;
}

static void mutate(buf *b) {
    static const char *const tokens[] = {"{",    "}",    "[",  "]",  "\"",      ":",
                                         ",",    "-",    "0",  "9",  "e9",      ".5",
                                         "null", "true", "[]", "{}", "\\u0000", " "};
    static const char *const numbers[] = {
        "0",     "-1",  "1",     "4294967296",           "9007199254740993",
        "1e308", "1.5", "65536", "18446744073709551616", "8"};
    static const char *const dtypes[] = {"\"F32\"",     "\"BF16\"", "\"BOOL\"", "\"I64\"",
                                         "\"F8_E4M3\"", "\"X\"",    "3",        "\"U8\""};
    size_t he = header_end(b);
    switch (below(7)) {
    case 0: /* bit flips, mostly in the header */
        for (size_t k = 1 + below(8); k-- > 0 && b->len;) {
            size_t at = below(4) ? below(he) : below(b->len);
            b->p[at] ^= (unsigned char)(1u << below(8));
        }
        break;
    case 1: b->len = below(b->len + 1); break; /* truncation */
    case 2: {                                  /* the header length */
        uint64_t hl = header_len(b),
                 v[] = {0,     1, 2, hl - 1, hl + 1, hl + 64, b->len - 8, b->len, UINT64_C(1) << 63,
                        next()};
        set_header_len(b, v[below(10)]);
        break;
    }
    case 3: { /* a JSON token inserted, or a range deleted */
        size_t at = 8 + below(he > 8 ? he - 8 : 1);
        const char *t = tokens[below(sizeof tokens / sizeof tokens[0])];
        if (below(2))
            splice(b, at, 0, t, strlen(t), below(4) != 0);
        else
            splice(b, at, 1 + below(12), "", 0, below(4) != 0);
        break;
    }
    case 4: { /* a number replaced */
        size_t at = 8 + below(he > 8 ? he - 8 : 1), end;
        while (at < he && !(b->p[at] >= '0' && b->p[at] <= '9')) at++;
        for (end = at; end < he && b->p[end] >= '0' && b->p[end] <= '9';) end++;
        const char *n = numbers[below(sizeof numbers / sizeof numbers[0])];
        splice(b, at, end - at, n, strlen(n), 1);
        break;
    }
    case 5: { /* a dtype swapped */
        size_t at = 8 + below(he > 8 ? he - 8 : 1);
        unsigned char *d = memmem(b->p + at, he > at ? he - at : 0, "\"dtype\":", 8);
        if (!d) break;
        size_t s = (size_t)(d - b->p) + 8, e = s;
        while (e < he && b->p[e] != ',') e++;
        const char *t = dtypes[below(sizeof dtypes / sizeof dtypes[0])];
        splice(b, s, e - s, t, strlen(t), 1);
        break;
    }
    default: { /* bytes appended */
        char junk[64];
        size_t n = 1 + below(sizeof junk);
        for (size_t i = 0; i < n; i++) junk[i] = (char)next();
        splice(b, b->len, 0, junk, n, 0);
    }
    }
}

/* A parsed header's promises, checked against the buffer and its bytes read. */
static unsigned check_header(const kk__st_header *h, const unsigned char *p, size_t len) {
    unsigned sum = 0;
    assert_true(h->data_offset + h->data_bytes == len);
    for (size_t i = 0; i < h->count; i++) {
        const kk__st_entry *e = &h->entries[i];
        assert_true(e->begin <= e->end && e->end <= h->data_bytes);
        assert_true((uint64_t)e->numel * kk__st_elem_bytes(e->dtype) == e->end - e->begin);
        assert_true(e->ndim >= 0 && e->ndim <= KK_TENSOR_MAX_DIMS);
        for (uint64_t k = e->begin; k < e->end; k++) sum += p[h->data_offset + k];
    }
    return sum;
}

static void assert_clean_error(kk_status st, const char *needle) {
    if (st != KK_ERR_IO && st != KK_ERR_UNSUPPORTED && st != KK_ERR_CONFIG)
        fail_msg("unexpected %s: %s", kk_status_name(st), kk_last_error_message());
    kk_assert_contains(kk_last_error_message(), needle);
}

static void mutants_parse_or_fail_cleanly(void **state) {
    (void)state;
    const char *env = getenv("KK_FUZZ_ITERS");
    long iters = env ? atol(env) : 4000;
    env = getenv("KK_FUZZ_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : 20261127;
    g_rng = seed * UINT64_C(0x9E3779B97F4A7C15) + UINT64_C(0x632BE59BD9B4E019);
    g_rng = g_rng ? g_rng : 1;
    printf("seed %llu, %ld iterations\n", (unsigned long long)seed, iters);

    mt_tensor t[40];
    int n = mt_tiny_tensors(t, 1);
    mt_add(t, &n, "extra.empty", KK_DTYPE_F32, 0, 3);
    mt_add(t, &n, "extra.i8", KK_DTYPE_INT8, 3, 3);
    size_t base_len = 0;
    unsigned char *base = mt_build(t, n, 1, &base_len);

    char dir[64] = "/tmp/kk_model_fuzz_XXXXXX", path[128];
    assert_non_null(mkdtemp(dir));
    mt_write_config(dir, 0);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);

    long ok = 0, io = 0, unsupported = 0, opened = 0;
    unsigned sink = 0;
    for (long it = 0; it < iters; it++) {
        buf b = {malloc(base_len), base_len};
        memcpy(b.p, base, base_len);
        for (size_t k = 1 + below(3); k-- > 0;) mutate(&b);
        unsigned char *exact = malloc(b.len ? b.len : 1); /* exact size: ASan sees overreads */
        memcpy(exact, b.p, b.len);
        kk__st_header h;
        kk_status st = kk__st_parse("fuzz", "fuzz.safetensors", exact, b.len, &h);
        if (st == KK_OK) {
            sink += check_header(&h, exact, b.len);
            kk__st_free(&h);
            ok++;
        } else {
            assert_clean_error(st, "fuzz: fuzz.safetensors: ");
            assert_null(h.entries);
            io += st == KK_ERR_IO;
            unsupported += st == KK_ERR_UNSUPPORTED;
        }
        if (it % 8 == 0) { /* the whole path: a file, mapped, checked against the config */
            mt_write(path, b.p, b.len);
            kk_model *m = NULL;
            st = kk_model_open(dir, &m);
            if (st == KK_OK) {
                for (int64_t i = 0; i < kk_model_tensor_count(m); i++) {
                    const kk_tensor *x = NULL;
                    kk_assert_ok(kk_model_tensor_at(m, i, NULL, &x));
                    for (size_t k = 0; k < kk_tensor_nbytes(x); k++)
                        sink += ((const unsigned char *)x->data)[k];
                }
                kk_model_close(m);
                opened++;
            } else {
                assert_clean_error(st, "kk_model_open: ");
                assert_null(m);
            }
        }
        free(exact);
        free(b.p);
    }
    printf("parsed %ld, KK_ERR_IO %ld, KK_ERR_UNSUPPORTED %ld; models opened %ld (sum %u)\n", ok,
           io, unsupported, opened, sink);
    /* Not vacuous: mutants of every kind of outcome were seen. */
    if (iters >= 1000) {
        assert_true(ok > iters / 50);
        assert_true(io > iters / 4);
        assert_true(unsupported > 0);
        assert_true(opened > 0);
    }
    free(base);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Text edits anywhere in a JSON file: a token in, a range out, a number
 * swapped, a bit flipped. */
static void mutate_json(buf *b) {
    static const char *const tokens[] = {"{", "}", "[",     "]",    "\"", ":",     ",",
                                         "-", "0", "1e999", "null", "[]", "\"x\"", "true"};
    static const char *const numbers[] = {
        "0", "-1", "3", "2.5", "1e9", "65536", "9007199254740993"};
    size_t at = below(b->len + 1);
    switch (below(4)) {
    case 0: {
        const char *t = tokens[below(sizeof tokens / sizeof tokens[0])];
        splice(b, at, 0, t, strlen(t), 0);
        break;
    }
    case 1: splice(b, at, 1 + below(16), "", 0, 0); break;
    case 2: {
        size_t end;
        while (at < b->len && !(b->p[at] >= '0' && b->p[at] <= '9')) at++;
        for (end = at; end < b->len && b->p[end] >= '0' && b->p[end] <= '9';) end++;
        const char *n = numbers[below(sizeof numbers / sizeof numbers[0])];
        splice(b, at, end - at, n, strlen(n), 0);
        break;
    }
    default:
        if (b->len) b->p[below(b->len)] ^= (unsigned char)(1u << below(8));
    }
}

/* config.json and the shards' index, mutated: the model opens, with a
 * configuration that keeps its invariants, or fails cleanly. */
static void json_mutants_fail_cleanly(void **state) {
    (void)state;
    const char *env = getenv("KK_FUZZ_ITERS");
    long iters = (env ? atol(env) : 4000) / 4;
    g_rng = UINT64_C(0x5DEECE66D);
    char dir[64] = "/tmp/kk_model_fuzz_XXXXXX", config[1024], index[8192], path[2][128];
    assert_non_null(mkdtemp(dir));
    mt_tensor t[32];
    int n = mt_tiny_tensors(t, 1);
    mt_write_shards(dir, t, n, 2, index, sizeof index);
    snprintf(config, sizeof config, MT_TINY_CONFIG, "false");
    snprintf(path[0], sizeof path[0], "%s/config.json", dir);
    snprintf(path[1], sizeof path[1], "%s/model.safetensors.index.json", dir);
    const char *base[2] = {config, index};
    long ok = 0;
    for (long it = 0; it < iters; it++) {
        int which = (int)(it % 2);
        buf b = {malloc(strlen(base[which])), strlen(base[which])};
        memcpy(b.p, base[which], b.len);
        for (size_t k = 1 + below(3); k-- > 0;) mutate_json(&b);
        mt_write(path[which], b.p, b.len);
        mt_write_text(path[!which], base[!which]);
        kk_model *m = NULL;
        kk_status st = kk_model_open(dir, &m);
        if (st == KK_OK) {
            const kk_model_config *c = kk_model_get_config(m);
            assert_true(c->num_attention_heads % c->num_key_value_heads == 0);
            assert_true(c->head_dim > 0 && c->head_dim % 2 == 0);
            assert_true(c->rms_norm_eps > 0 && c->rope.theta >= 1);
            kk_model_close(m);
            ok++;
        } else {
            assert_clean_error(st, "kk_model_open: ");
            assert_null(m);
        }
        free(b.p);
    }
    printf("JSON mutants: %ld of %ld opened\n", ok, iters);
    if (iters >= 250) assert_true(ok > 0 && ok < iters);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(mutants_parse_or_fail_cleanly),
                                       cmocka_unit_test(json_mutants_fail_cleanly)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
