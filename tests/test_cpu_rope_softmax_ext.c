/* labels: unit cpu */
/* Issue 16's extensions of the CPU row ops: softmax's causal mask, rope's
 * per-token positions and Llama-3 frequency scaling, and rope_kv_append (a
 * decode step: q and k rotated at cache_seqlens[b] + s, k and v appended to
 * the caches). Each runs through the harness's checker against its float64
 * reference, in every dtype at every instruction-set level the CPU has; the
 * typed entry points are compared bit for bit with what they must equal (a
 * packed batch is its sequences, a decode step is rope at an offset, in place
 * is out of place); the Llama-3 frequencies are checked against numbers
 * worked out from HF's formula; and the checker must fail a kernel with each
 * typical mistake, written so that without the mistake it passes. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_kernels.h"
#include "opdef/all_ops.h"
#include "kernelkit/cases.h"

/* |a - b| <= tol in double (cmocka's assert_float_equal rounds to float). */
#define assert_near(a, b, tol)                                                                     \
    do {                                                                                           \
        const double kk__a = (a), kk__b = (b);                                                     \
        if (!(fabs(kk__a - kk__b) <= (tol)))                                                       \
            fail_msg("%s = %.17g, expected %.17g (tolerance %g)", #a, kk__a, kk__b,                \
                     (double)(tol));                                                               \
    } while (0)

static const char *const dtypes[] = {"f32", "f16", "bf16"};
static const kk_dtype dtype_ids[] = {KK_DTYPE_F32, KK_DTYPE_F16, KK_DTYPE_BF16};

static void expect(const char *op, const char *text, kk_op_kernel_fn kernel, kk_case_status want,
                   uint64_t seed) {
    const kk_case_result r = kk_test_run_cpu_case(op, text, kernel, seed);
    if (r.status != want)
        fail_msg("%s %s%s: %s, expected %s: %s", op, text, kernel ? " (test kernel)" : "",
                 kk_case_status_name(r.status), kk_case_status_name(want), r.message);
}

/* `text` passes in every dtype at every instruction-set level. */
static void passes_everywhere(const char *op, const char *text) {
    for (int isa = 0; isa <= (int)kk__cpu_isa_supported(); isa++) {
        kk__cpu_isa_cap(isa);
        for (int d = 0; d < 3; d++) {
            char full[256];
            snprintf(full, sizeof full, "%s dtype=%s", text, dtypes[d]);
            expect(op, full, NULL, KK_CASE_PASS, 1 + (uint64_t)(d + 3 * isa));
        }
    }
    kk__cpu_isa_cap(-1);
}

/* A test kernel reads bug_flag: with 0 it must pass `text`, with 1 fail it. */
static int bug_flag;

static void bug_is_caught(const char *op, const char *text, kk_op_kernel_fn kernel) {
    for (bug_flag = 0; bug_flag <= 1; bug_flag++)
        expect(op, text, kernel, bug_flag ? KK_CASE_FAIL : KK_CASE_PASS, 42);
    bug_flag = 0;
}

/* ---- tensors ---- */

static kk_tensor *tensor(kk_dtype dt, int ndim, const int64_t *shape) {
    kk_tensor *t = NULL;
    kk_assert_ok(kk_tensor_create("cpu", dt, ndim, shape, &t));
    return t;
}

/* Values in [-2, 2) from `seed`, rounded to the tensor's dtype. */
static kk_tensor *random_tensor(kk_dtype dt, int ndim, const int64_t *shape, uint64_t seed) {
    kk_tensor *t = tensor(dt, ndim, shape);
    const size_t n = (size_t)kk_tensor_numel(t);
    float *f = malloc(n * sizeof *f);
    assert_non_null(f);
    uint64_t h = seed * 0x9E3779B97F4A7C15u + 1;
    for (size_t i = 0; i < n; i++) {
        h = h * 6364136223846793005u + 1442695040888963407u;
        f[i] = (float)((double)(h >> 40) / (double)(1u << 24) * 4.0 - 2.0);
    }
    kk_assert_ok(kk_convert_host(f, KK_DTYPE_F32, t->data, dt, n));
    free(f);
    return t;
}

static kk_tensor *int32_tensor(int ndim, const int64_t *shape, const int32_t *values) {
    kk_tensor *t = tensor(KK_DTYPE_INT32, ndim, shape);
    memcpy(t->data, values, (size_t)kk_tensor_numel(t) * sizeof(int32_t));
    return t;
}

static kk_tensor *copy_of(const kk_tensor *src) {
    kk_tensor *t = tensor(src->dtype, src->ndim, src->shape);
    kk_assert_ok(kk_tensor_copy(t, src));
    return t;
}

static size_t bytes_of(const kk_tensor *t) {
    return kk_dtype_bytes(t->dtype, (size_t)kk_tensor_numel(t));
}

/* Row `row` of `d` elements of a and b are the same bits. */
static void same_row(const kk_tensor *a, int64_t ra, const kk_tensor *b, int64_t rb, int64_t d,
                     const char *what) {
    const size_t w = kk_dtype_bytes(a->dtype, (size_t)d);
    if (memcmp((const char *)a->data + (size_t)ra * w, (const char *)b->data + (size_t)rb * w, w))
        fail_msg("%s: row %lld differs from row %lld", what, (long long)ra, (long long)rb);
}

/* ---- softmax: the causal mask ---- */

static void softmax_causal_passes(void **state) {
    (void)state;
    passes_everywhere("softmax", "rows=12 n=37 causal=1 sq=4");      /* 3 matrices, odd n */
    passes_everywhere("softmax", "rows=10 n=3 causal=1 sq=5");       /* queries 0, 1 see no key */
    passes_everywhere("softmax", "rows=6 n=300 causal=1 scale=0.3"); /* sq = rows; 2 chunks */
    passes_everywhere("softmax", "rows=2 n=70000 causal=1");         /* not kept: recomputed */
    passes_everywhere("softmax", "rows=4 n=33 causal=0 sq=2");       /* sq alone: no mask */
}

static void softmax_causal_by_hand(void **state) {
    (void)state;
    kk_tensor *x = tensor(KK_DTYPE_F32, 2, (int64_t[]){4, 3}), *y = copy_of(x);
    memset(x->data, 0, bytes_of(x));
    /* two matrices of sq = 2 queries by n = 3 keys: query 0 sees keys j <= 0 + 3 - 2 */
    kk_assert_ok(kk_softmax_masked(x, y, 1.0, 1, 2, NULL));
    const double two[12] = {.5, .5, 0, 1. / 3, 1. / 3, 1. / 3, .5, .5, 0, 1. / 3, 1. / 3, 1. / 3};
    for (int i = 0; i < 12; i++) assert_near(((float *)y->data)[i], two[i], 1e-7);
    /* sq = 4 > n = 3: query 0 sees no key and is all zeros, query 1 sees key 0 */
    kk_assert_ok(kk_softmax_masked(x, y, 1.0, 1, 4, NULL));
    const double four[12] = {0, 0, 0, 1, 0, 0, .5, .5, 0, 1. / 3, 1. / 3, 1. / 3};
    for (int i = 0; i < 12; i++) assert_near(((float *)y->data)[i], four[i], 1e-7);
    /* the reference agrees */
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(kk_op_at(KK__OP_ID_softmax), "rows=4 n=3 causal=1 sq=4", &p));
    double zeros[12] = {0}, ref[12];
    kk_assert_ok(kk_op_reference(&p, (const double *const[]){zeros}, (double *const[]){ref}));
    for (int i = 0; i < 12; i++) assert_near(ref[i], four[i], 1e-15);
    kk_tensor_destroy(x);
    kk_tensor_destroy(y);
    /* without the mask, kk_softmax_masked is kk_softmax bit for bit */
    kk_tensor *xb = random_tensor(KK_DTYPE_BF16, 2, (int64_t[]){5, 301}, 3);
    kk_tensor *y1 = copy_of(xb), *y2 = copy_of(xb);
    kk_assert_ok(kk_softmax(xb, y1, 0.7, NULL));
    kk_assert_ok(kk_softmax_masked(xb, y2, 0.7, 0, 5, NULL));
    assert_memory_equal(y1->data, y2->data, bytes_of(y1));
    kk_tensor_destroy(xb), kk_tensor_destroy(y1), kk_tensor_destroy(y2);
}

static void softmax_sq_must_divide_rows(void **state) {
    (void)state;
    kk_op_params p;
    kk_assert_status(kk_op_params_parse(kk_op_at(KK__OP_ID_softmax), "rows=10 causal=1 sq=3", &p),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "sq");
    assert_string_equal(kk_last_error()->value, "3");
    kk_assert_contains(kk_last_error_message(), "divisor of rows = 10");
    kk_tensor *x = random_tensor(KK_DTYPE_F32, 2, (int64_t[]){10, 4}, 1), *y = copy_of(x);
    kk_assert_status(kk_softmax_masked(x, y, 1.0, 1, 3, NULL), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "sq");
    kk_tensor_destroy(x), kk_tensor_destroy(y);
}

/* f32 only; bug: each row sees one key too many (j <= i + n - sq + 1). */
static kk_status softmax_naive(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    const int64_t rows = kk_op_params_int(p, "rows"), n = kk_op_params_int(p, "n");
    const int64_t sq = kk_op_params_int(p, "sq") ? kk_op_params_int(p, "sq") : rows;
    const double scale = kk_op_params_float(p, "scale");
    const float *x = t[0]->data;
    float *y = t[1]->data;
    for (int64_t r = 0; r < rows; r++) {
        int64_t v = r % sq + n - sq + 1 + bug_flag;
        v = v < 0 ? 0 : v > n ? n : v;
        double m = -INFINITY, sum = 0.0;
        for (int64_t i = 0; i < v; i++) m = fmax(m, x[r * n + i] * scale);
        for (int64_t i = 0; i < v; i++) sum += exp(x[r * n + i] * scale - m);
        for (int64_t i = 0; i < n; i++)
            y[r * n + i] = i < v ? (float)(exp(x[r * n + i] * scale - m) / sum) : 0.0f;
    }
    return KK_OK;
}

static void softmax_mask_off_by_one_fails(void **state) {
    (void)state;
    bug_is_caught("softmax", "rows=12 n=37 causal=1 sq=4 dtype=f32", softmax_naive);
    bug_is_caught("softmax", "rows=10 n=3 causal=1 sq=5 dtype=f32", softmax_naive);
}

/* ---- softmax: rows that make the AVX-512 path rescale ---- */

/* Element i of a row of kind k: rising by 0.5 (each chunk of 256 passes the
 * running max by about 128, so its exponentials overflow against it and it
 * must be redone with its own max, and the earlier chunks' sums rescaled);
 * rising by 0.05 and by 0.1 (13 and 26 above: past the f32 and the bf16
 * bounds on a kept exponential, 256 and 2^24, without overflow); a first
 * chunk 40 below the rest (at scale 3.5 the rest's exponentials overflow
 * against it); a first chunk of -inf, then values (the leading chunks'
 * factors 0); falling by 0.5 (no chunk redone). */
static float edge_value(int kind, int64_t i) {
    const float wave = (float)((i * 37) % 11) * 0.125f;
    switch (kind) {
    case 0: return 0.5f * (float)i;
    case 1: return 0.05f * (float)i;
    case 2: return 0.1f * (float)i;
    case 3: return i < 256 ? -40.0f + wave : wave;
    case 4: return i < 300 ? -INFINITY : wave;
    default: return -0.5f * (float)i;
    }
}

/* Those rows (n = 1100: four full chunks and a tail) in every dtype at every
 * level, at scales 1 and 3.5, against the float64 reference with the op's
 * tolerance. A kernel that keeps a chunk's exponentials against a reference
 * they overflow from (no redo) fails here. */
static void softmax_rescaled_rows_pass(void **state) {
    (void)state;
    enum { KINDS = 6, N = 1100 };
    float *f = malloc(sizeof(float) * KINDS * N);
    double *x64 = malloc(sizeof(double) * KINDS * N), *ref = malloc(sizeof(double) * KINDS * N);
    assert_non_null(f), assert_non_null(x64), assert_non_null(ref);
    for (int k = 0; k < KINDS; k++)
        for (int64_t i = 0; i < N; i++) f[k * N + i] = edge_value(k, i);
    for (int isa = 0; isa <= (int)kk__cpu_isa_supported(); isa++) {
        kk__cpu_isa_cap(isa);
        for (int d = 0; d < 3; d++)
            for (int sc = 0; sc < 2; sc++) {
                const double scale = sc ? 3.5 : 1.0;
                kk_tensor *x = tensor(dtype_ids[d], 2, (int64_t[]){KINDS, N}), *y = copy_of(x);
                kk_assert_ok(kk_convert_host(f, KK_DTYPE_F32, x->data, dtype_ids[d], KINDS * N));
                kk_assert_ok(kk_convert_host(x->data, dtype_ids[d], x64, KK_DTYPE_F64, KINDS * N));
                kk_assert_ok(kk_poison(y->data, dtype_ids[d], KINDS * N, 0));
                kk_assert_ok(kk_softmax(x, y, scale, NULL));
                char text[96];
                snprintf(text, sizeof text, "rows=%d n=%d scale=%g dtype=%s", KINDS, N, scale,
                         dtypes[d]);
                kk_op_params p;
                kk_assert_ok(kk_op_params_parse(kk_op_at(KK__OP_ID_softmax), text, &p));
                kk_assert_ok(
                    kk_op_reference(&p, (const double *const[]){x64}, (double *const[]){ref}));
                kk_tolerance tol;
                kk_check_result r;
                kk_assert_ok(kk_op_tolerance(p.op, dtype_ids[d], &tol));
                kk_assert_ok(kk_check_output(y->data, dtype_ids[d], ref, KINDS * N, &tol, &r));
                if (!r.pass)
                    fail_msg("softmax %s at level %d: max abs %g, rel L2 %g", text, isa,
                             r.max_abs_err, r.rel_l2_err);
                kk_tensor_destroy(x), kk_tensor_destroy(y);
            }
    }
    kk__cpu_isa_cap(-1);
    free(f), free(x64), free(ref);
}

/* ---- rope: positions and Llama-3 scaling ---- */

static void rope_extensions_pass(void **state) {
    (void)state;
    passes_everywhere("rope", "B=3 H=2 S=17 D=64 positions=1");
    passes_everywhere("rope", "B=4 H=3 S=1 D=37 rotary_dim=20 style=gptj positions=1 offset=4000");
    passes_everywhere("rope", "B=2 H=2 S=33 D=128 theta=500000 scaling=llama3 offset=5000");
    passes_everywhere("rope", "B=2 H=4 S=40 D=64 positions=1 scaling=llama3 factor=32 "
                              "original_max_position=64 style=gptj");
    passes_everywhere("rope", "B=1 H=1 S=300 D=2 scaling=llama3 low_freq_factor=0.5 "
                              "high_freq_factor=2 original_max_position=256");
}

/* HF's _compute_llama3_parameters for theta 500000, head dim 128 (Llama 3.1 8B:
 * factor 8, low 1, high 4, old context 8192), worked out here pair by pair.
 * Pair i has f = 500000^(-i/64) and wavelength 2 pi / f. */
static void llama3_frequencies_by_hand(void **state) {
    (void)state;
    kk_op_params p;
    kk_assert_ok(
        kk_op_params_parse(kk_op_at(KK__OP_ID_rope), "D=128 theta=500000 scaling=llama3", &p));
    double inv[64];
    kk__rope_inv_freq(&p, inv);
    /* i = 0, 20: wavelengths 6.28 and 379.4, under 8192 / 4 = 2048: kept */
    assert_near(inv[0], 1.0, 0);
    assert_near(inv[20], 0.016560440080994446, 1e-17);
    /* i = 30: f = 2.1311195e-3, wavelength 2948.3, between 2048 and 8192:
     * smooth = (8192 / 2948.3 - 1) / (4 - 1) = 0.59285, f (1 - smooth) / 8 + f smooth */
    assert_near(inv[30], 0.0013718935677611381, 1e-18);
    /* i = 40, 63: wavelengths 22911 and 2.56e6, over 8192 / 1: f / 8 */
    assert_near(inv[40], 3.428102195952591e-05, 1e-19);
    assert_near(inv[63], 3.068925988914511e-07, 1e-21);
    /* the same formula, term by term, on every pair */
    for (int i = 0; i < 64; i++) {
        const double f = pow(500000.0, -i / 64.0), wl = 2 * M_PI / f;
        double want = f;
        if (wl > 8192.0)
            want = f / 8;
        else if (wl >= 2048.0)
            want = (1 - (8192 / wl - 1) / 3) * f / 8 + (8192 / wl - 1) / 3 * f;
        assert_near(inv[i], want, 1e-15 * want);
    }
    /* no scaling: theta^(-2i/R) */
    kk_assert_ok(kk_op_params_parse(kk_op_at(KK__OP_ID_rope), "D=128 theta=500000", &p));
    kk__rope_inv_freq(&p, inv);
    assert_near(inv[40], pow(500000.0, -40 / 64.0), 1e-19);
    /* high_freq_factor must exceed low_freq_factor: the band between divides by their gap */
    kk_assert_status(kk_op_params_parse(kk_op_at(KK__OP_ID_rope),
                                        "scaling=llama3 low_freq_factor=4 high_freq_factor=4", &p),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "high_freq_factor");
}

/* rope of the tokens (b, h, s) of x with the options, into a new tensor. */
static kk_tensor *rope_of(const kk_tensor *x, const kk_rope_options *o) {
    kk_tensor *y = tensor(x->dtype, 4, x->shape);
    kk_assert_ok(kk_rope(x, y, o, NULL));
    return y;
}

/* x[b, :, s0 .. s0 + n) as a new contiguous tensor. */
static kk_tensor *tokens(const kk_tensor *x, int64_t b, int64_t s0, int64_t n) {
    const int64_t H = x->shape[1], S = x->shape[2], D = x->shape[3];
    kk_tensor *t = tensor(x->dtype, 4, (int64_t[]){1, H, n, D});
    const size_t w = kk_dtype_bytes(x->dtype, (size_t)D);
    for (int64_t h = 0; h < H; h++)
        memcpy((char *)t->data + (size_t)(h * n) * w,
               (const char *)x->data + (size_t)((b * H + h) * S + s0) * w, (size_t)n * w);
    return t;
}

/* A packed batch (sequences of 3, 2 and 4 tokens in one row) is its
 * sequences from position 0, and a decode step of 3 sequences at lengths 5,
 * 100 and 4095 is rope at those offsets: bit for bit, with and without
 * Llama-3 scaling, every dtype and level. */
static void rope_positions_are_packed_batches_and_decode_steps(void **state) {
    (void)state;
    for (int isa = 0; isa <= (int)kk__cpu_isa_supported(); isa++)
        for (int d = 0; d < 3; d++)
            for (int llama = 0; llama < 2; llama++) {
                kk__cpu_isa_cap(isa);
                kk_rope_options o = KK_ROPE_OPTIONS_INIT;
                o.theta = 500000;
                o.scaling = llama ? KK_ROPE_SCALING_LLAMA3 : KK_ROPE_SCALING_NONE;
                o.original_max_position = 64; /* positions cross every band */
                kk_tensor *x = random_tensor(dtype_ids[d], 4, (int64_t[]){1, 3, 9, 64}, 7);
                const int32_t packed[9] = {0, 1, 2, 0, 1, 0, 1, 2, 3};
                kk_tensor *pos = int32_tensor(2, (int64_t[]){1, 9}, packed);
                o.positions = pos;
                kk_tensor *y = rope_of(x, &o);
                o.positions = NULL;
                const int64_t starts[3] = {0, 3, 5}, lens[3] = {3, 2, 4};
                for (int q = 0; q < 3; q++) {
                    kk_tensor *xs = tokens(x, 0, starts[q], lens[q]), *ys = rope_of(xs, &o);
                    for (int64_t h = 0; h < 3; h++)
                        for (int64_t s = 0; s < lens[q]; s++)
                            same_row(y, h * 9 + starts[q] + s, ys, h * lens[q] + s, 64, "packed");
                    kk_tensor_destroy(xs), kk_tensor_destroy(ys);
                }
                kk_tensor_destroy(x), kk_tensor_destroy(pos), kk_tensor_destroy(y);
                /* decode: one token per sequence */
                x = random_tensor(dtype_ids[d], 4, (int64_t[]){3, 2, 1, 40}, 8);
                const int32_t at[3] = {5, 100, 4095};
                pos = int32_tensor(2, (int64_t[]){3, 1}, at);
                o.positions = pos;
                y = rope_of(x, &o);
                o.positions = NULL;
                for (int64_t b = 0; b < 3; b++) {
                    o.offset = at[b];
                    kk_tensor *xs = tokens(x, b, 0, 1), *ys = rope_of(xs, &o);
                    for (int64_t h = 0; h < 2; h++) same_row(y, b * 2 + h, ys, h, 40, "decode");
                    kk_tensor_destroy(xs), kk_tensor_destroy(ys);
                }
                kk_tensor_destroy(x), kk_tensor_destroy(pos), kk_tensor_destroy(y);
            }
    kk__cpu_isa_cap(-1);
}

/* The real kernel told positions=0 when bug_flag (offset + s instead of pos). */
static kk_status rope_positions_ignored(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    if (!bug_flag) return kk__rope_cpu(p, t, s);
    kk_op_params q = *p;
    q.i[KK__ROPE_POSITIONS] = 0;
    return kk__rope_cpu(&q, (kk_tensor *[]){t[0], t[2]}, s);
}

/* The real kernel told scaling=none when bug_flag. */
static kk_status rope_llama3_ignored(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    kk_op_params q = *p;
    if (bug_flag) q.i[KK__ROPE_SCALING] = KK__ROPE_SCALING_NONE;
    return kk__rope_cpu(&q, t, s);
}

static void rope_wrong_kernels_fail(void **state) {
    (void)state;
    bug_is_caught("rope", "B=2 H=2 S=9 D=32 positions=1 dtype=f32", rope_positions_ignored);
    bug_is_caught("rope", "B=5 H=2 S=1 D=64 positions=1 offset=300 dtype=bf16",
                  rope_positions_ignored);
    bug_is_caught("rope", "B=1 H=2 S=16 D=64 scaling=llama3 offset=5000 dtype=f32",
                  rope_llama3_ignored);
    bug_is_caught("rope", "B=2 H=2 S=8 D=128 theta=500000 positions=1 scaling=llama3 dtype=bf16",
                  rope_llama3_ignored);
}

/* ---- rope_kv_append ---- */

static void kv_append_passes(void **state) {
    (void)state;
    passes_everywhere("rope_kv_append", "B=3 Hq=4 Hkv=2 S=1 S_max=17 D=64");
    passes_everywhere("rope_kv_append", "B=2 Hq=2 Hkv=1 S=5 S_max=9 D=37 rotary_dim=20 style=gptj");
    passes_everywhere("rope_kv_append", "B=4 Hq=8 Hkv=2 S=3 S_max=40 D=128 theta=500000 "
                                        "scaling=llama3 original_max_position=32");
    passes_everywhere("rope_kv_append", "B=1 Hq=1 Hkv=1 S=2 S_max=2 D=2"); /* the cache is full */
}

/* Out of place through kk_op_run: every cache row outside the appended
 * ones is the input's, the appended ones are rope's (positions
 * cache_seqlens[b] + s) of k and plain v, q_out is rope's of q; then in place
 * through kk_rope_kv_append: the same bits. */
static void kv_append_by_hand(void **state) {
    (void)state;
    enum { B = 3, HQ = 4, HKV = 2, S = 2, SMAX = 9, D = 32 };
    const int32_t lens[B] = {0, 4, SMAX - S}; /* empty, middle, filled to the end */
    const int32_t pos[B * S] = {0, 1, 4, 5, SMAX - S, SMAX - S + 1};
    for (int isa = 0; isa <= (int)kk__cpu_isa_supported(); isa++)
        for (int d = 0; d < 3; d++) {
            kk__cpu_isa_cap(isa);
            const kk_dtype dt = dtype_ids[d];
            kk_tensor *q = random_tensor(dt, 4, (int64_t[]){B, HQ, S, D}, 1);
            kk_tensor *k = random_tensor(dt, 4, (int64_t[]){B, HKV, S, D}, 2);
            kk_tensor *v = random_tensor(dt, 4, (int64_t[]){B, HKV, S, D}, 3);
            kk_tensor *kin = random_tensor(dt, 4, (int64_t[]){B, HKV, SMAX, D}, 4);
            kk_tensor *vin = random_tensor(dt, 4, (int64_t[]){B, HKV, SMAX, D}, 5);
            kk_tensor *ln = int32_tensor(1, (int64_t[]){B}, lens);
            kk_tensor *qo = copy_of(q), *kc = copy_of(kin), *vc = copy_of(vin);
            kk_assert_ok(kk_poison(kc->data, dt, (size_t)kk_tensor_numel(kc), 0));
            kk_assert_ok(kk_poison(vc->data, dt, (size_t)kk_tensor_numel(vc), 1));
            kk_op_params p;
            char text[160];
            snprintf(text, sizeof text, "B=%d Hq=%d Hkv=%d S=%d S_max=%d D=%d style=gptj dtype=%s",
                     B, HQ, HKV, S, SMAX, D, dtypes[d]);
            kk_assert_ok(kk_op_params_parse(kk_op_at(KK__OP_ID_rope_kv_append), text, &p));
            kk_assert_ok(kk_op_run(&p, (kk_tensor *[]){q, k, v, ln, kin, vin, qo, kc, vc}, NULL));
            kk_rope_options o = KK_ROPE_OPTIONS_INIT;
            o.style = KK_ROPE_GPTJ;
            kk_tensor *pt = int32_tensor(2, (int64_t[]){B, S}, pos);
            o.positions = pt;
            kk_tensor *qr = rope_of(q, &o), *kr = rope_of(k, &o);
            assert_memory_equal(qo->data, qr->data, bytes_of(qo));
            for (int64_t c = 0; c < B * HKV; c++)
                for (int64_t r = 0; r < SMAX; r++) {
                    const int64_t s = r - lens[c / HKV], at = c * SMAX + r;
                    if (s >= 0 && s < S) {
                        same_row(kc, at, kr, c * S + s, D, "k_cache, appended");
                        same_row(vc, at, v, c * S + s, D, "v_cache, appended");
                    } else {
                        same_row(kc, at, kin, at, D, "k_cache, kept");
                        same_row(vc, at, vin, at, D, "v_cache, kept");
                    }
                }
            /* in place: the caches passed once, as both */
            kk_tensor *kc2 = copy_of(kin), *vc2 = copy_of(vin), *qo2 = copy_of(q);
            o.positions = NULL;
            kk_assert_ok(kk_rope_kv_append(q, k, v, ln, kc2, vc2, qo2, &o, NULL));
            assert_memory_equal(kc2->data, kc->data, bytes_of(kc));
            assert_memory_equal(vc2->data, vc->data, bytes_of(vc));
            assert_memory_equal(qo2->data, qo->data, bytes_of(qo));
            kk_tensor *all[] = {q, k, v, kin, vin, ln, qo, kc, vc, pt, qr, kr, kc2, vc2, qo2};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kk_tensor_destroy(all[i]);
        }
    kk__cpu_isa_cap(-1);
}

/* cache_seqlens[b] + S > S_max (or a negative length) is an error naming the
 * element, and nothing is written: not q_out, not the caches. */
static void kv_append_refuses_a_full_cache(void **state) {
    (void)state;
    const kk_dtype dt = KK_DTYPE_BF16;
    kk_tensor *q = random_tensor(dt, 4, (int64_t[]){2, 2, 2, 8}, 1);
    kk_tensor *k = random_tensor(dt, 4, (int64_t[]){2, 1, 2, 8}, 2), *v = copy_of(k);
    kk_tensor *kc = random_tensor(dt, 4, (int64_t[]){2, 1, 9, 8}, 3), *vc = copy_of(kc);
    kk_tensor *qo = random_tensor(dt, 4, (int64_t[]){2, 2, 2, 8}, 4);
    kk_tensor *kc0 = copy_of(kc), *qo0 = copy_of(qo);
    const int32_t bad[2][2] = {{3, 8}, {-1, 0}};
    const char *const named[2] = {"cache_seqlens[1]", "cache_seqlens[0]"};
    const char *const values[2] = {"8", "-1"};
    for (int i = 0; i < 2; i++) {
        kk_tensor *ln = int32_tensor(1, (int64_t[]){2}, bad[i]);
        kk_assert_status(kk_rope_kv_append(q, k, v, ln, kc, vc, qo, NULL, NULL),
                         KK_ERR_INVALID_ARGUMENT);
        assert_string_equal(kk_last_error()->argument, named[i]);
        assert_string_equal(kk_last_error()->value, values[i]);
        kk_assert_contains(kk_last_error_message(), "0..7");
        assert_memory_equal(kc->data, kc0->data, bytes_of(kc));
        assert_memory_equal(vc->data, kc0->data, bytes_of(vc));
        assert_memory_equal(qo->data, qo0->data, bytes_of(qo));
        kk_tensor_destroy(ln);
    }
    /* the options a decode step has no use for, and S past S_max */
    const int32_t ok[2] = {0, 7};
    kk_tensor *ln = int32_tensor(1, (int64_t[]){2}, ok);
    kk_rope_options o = KK_ROPE_OPTIONS_INIT;
    o.offset = 3;
    kk_assert_status(kk_rope_kv_append(q, k, v, ln, kc, vc, qo, &o, NULL), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "opt->offset");
    o = (kk_rope_options)KK_ROPE_OPTIONS_INIT;
    o.positions = ln;
    kk_assert_status(kk_rope_kv_append(q, k, v, ln, kc, vc, qo, &o, NULL), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "opt->positions");
    kk_tensor *small = tensor(dt, 4, (int64_t[]){2, 1, 1, 8});
    kk_assert_status(kk_rope_kv_append(q, k, v, ln, small, small, qo, NULL, NULL),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "S");
    kk_assert_ok(kk_rope_kv_append(q, k, v, ln, kc, vc, qo, NULL, NULL));
    kk_tensor *all[] = {q, k, v, kc, vc, qo, kc0, qo0, ln, small};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kk_tensor_destroy(all[i]);
}

/* q, k, v and q_out as strided views ([B,S,H,D] buffers seen as [B,H,S,D],
 * what a decoder's projections give): the contiguous call's bits, every level;
 * a strided cache is refused, naming it. */
static void kv_append_strided_views(void **state) {
    (void)state;
    enum { B = 2, HQ = 4, HKV = 2, S = 3, SMAX = 8, D = 32 };
    const int32_t lens[B] = {1, 5};
    for (int isa = 0; isa <= (int)kk__cpu_isa_supported(); isa++)
        for (int d = 0; d < 3; d++) {
            kk__cpu_isa_cap(isa);
            const kk_dtype dt = dtype_ids[d];
            kk_tensor *qt = random_tensor(dt, 4, (int64_t[]){B, S, HQ, D}, 11);
            kk_tensor *kt = random_tensor(dt, 4, (int64_t[]){B, S, HKV, D}, 12);
            kk_tensor *vt = random_tensor(dt, 4, (int64_t[]){B, S, HKV, D}, 13);
            kk_tensor *qot = tensor(dt, 4, (int64_t[]){B, S, HQ, D});
            kk_tensor *q, *k, *v, *qo;
            kk_assert_ok(kk_tensor_transpose(qt, 1, 2, &q));
            kk_assert_ok(kk_tensor_transpose(kt, 1, 2, &k));
            kk_assert_ok(kk_tensor_transpose(vt, 1, 2, &v));
            kk_assert_ok(kk_tensor_transpose(qot, 1, 2, &qo));
            assert_false(kk_tensor_is_contiguous(q));
            kk_tensor *qc = copy_of(q), *kc_ = copy_of(k), *vc_ = copy_of(v);
            kk_tensor *qoc = tensor(dt, 4, (int64_t[]){B, HQ, S, D});
            kk_tensor *ln = int32_tensor(1, (int64_t[]){B}, lens);
            kk_tensor *kc = random_tensor(dt, 4, (int64_t[]){B, HKV, SMAX, D}, 14);
            kk_tensor *vc = random_tensor(dt, 4, (int64_t[]){B, HKV, SMAX, D}, 15);
            kk_tensor *kc2 = copy_of(kc), *vc2 = copy_of(vc);
            kk_assert_ok(kk_rope_kv_append(q, k, v, ln, kc, vc, qo, NULL, NULL));
            kk_assert_ok(kk_rope_kv_append(qc, kc_, vc_, ln, kc2, vc2, qoc, NULL, NULL));
            kk_tensor *qo_back = copy_of(qo); /* the view read back contiguously */
            assert_memory_equal(qo_back->data, qoc->data, bytes_of(qoc));
            assert_memory_equal(kc->data, kc2->data, bytes_of(kc));
            assert_memory_equal(vc->data, vc2->data, bytes_of(vc));
            kk_tensor *all[] = {qt,  kt,  vt,  qot, q,  k,  v,   qo,  qc,
                                kc_, vc_, qoc, ln,  kc, vc, kc2, vc2, qo_back};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kk_tensor_destroy(all[i]);
        }
    kk__cpu_isa_cap(-1);
    /* a cache seen through strides: refused, naming it */
    const kk_dtype dt = KK_DTYPE_F32;
    kk_tensor *q = random_tensor(dt, 4, (int64_t[]){1, 2, 1, 8}, 1);
    kk_tensor *k = random_tensor(dt, 4, (int64_t[]){1, 1, 1, 8}, 2), *v = copy_of(k);
    kk_tensor *big = random_tensor(dt, 4, (int64_t[]){1, 1, 4, 16}, 3), *kc = NULL;
    kk_assert_ok(kk_tensor_slice(big, 3, 0, 8, 1, &kc)); /* rows of 8 in a row of 16 */
    kk_tensor *vc = random_tensor(dt, 4, (int64_t[]){1, 1, 4, 8}, 4), *qo = copy_of(q);
    kk_tensor *ln = int32_tensor(1, (int64_t[]){1}, (const int32_t[]){0});
    kk_assert_status(kk_rope_kv_append(q, k, v, ln, kc, vc, qo, NULL, NULL),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "k_cache");
    kk_tensor *all[] = {q, k, v, big, kc, vc, qo, ln};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kk_tensor_destroy(all[i]);
}

/* The real kernel, then with bug_flag each sequence's appended rows moved one
 * row later (one earlier where the cache is full) in both caches, the row
 * they uncover given back its old content: right values, wrong offset. */
static kk_status kv_appended_one_off(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    const kk_status st = kk__rope_kv_append_cpu(p, t, s);
    if (st != KK_OK || !bug_flag) return st;
    const int64_t B = p->i[KK__RKV_B], H = p->i[KK__RKV_HKV], S = p->i[KK__RKV_S];
    const int64_t smax = p->i[KK__RKV_SMAX];
    const size_t w = kk_dtype_bytes(t[0]->dtype, (size_t)p->i[KK__RKV_D]);
    const int32_t *lens = t[KK__RKV_T_LENS]->data;
    for (int c = 0; c < 2; c++) {
        const char *in = t[KK__RKV_T_KC_IN + c]->data;
        char *out = t[KK__RKV_T_KC + c]->data;
        for (int64_t slab = 0; slab < B * H; slab++) {
            const int64_t first = slab * smax + lens[slab / H], later = lens[slab / H] + S < smax;
            const int64_t to = later ? first + 1 : first - 1, freed = later ? first : first + S - 1;
            if (!later && first == slab * smax) continue; /* S = S_max: nowhere to move */
            memmove(out + (size_t)to * w, out + (size_t)first * w, (size_t)S * w);
            memcpy(out + (size_t)freed * w, in + (size_t)freed * w, w);
        }
    }
    return KK_OK;
}

static void kv_append_wrong_offset_fails(void **state) {
    (void)state;
    bug_is_caught("rope_kv_append", "B=3 Hq=4 Hkv=2 S=1 S_max=17 D=32 dtype=f32",
                  kv_appended_one_off);
    bug_is_caught("rope_kv_append", "B=2 Hq=2 Hkv=2 S=3 S_max=8 D=64 dtype=bf16",
                  kv_appended_one_off);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(softmax_causal_passes),
        cmocka_unit_test(softmax_causal_by_hand),
        cmocka_unit_test(softmax_sq_must_divide_rows),
        cmocka_unit_test(softmax_mask_off_by_one_fails),
        cmocka_unit_test(softmax_rescaled_rows_pass),
        cmocka_unit_test(rope_extensions_pass),
        cmocka_unit_test(llama3_frequencies_by_hand),
        cmocka_unit_test(rope_positions_are_packed_batches_and_decode_steps),
        cmocka_unit_test(rope_wrong_kernels_fail),
        cmocka_unit_test(kv_append_passes),
        cmocka_unit_test(kv_append_by_hand),
        cmocka_unit_test(kv_append_refuses_a_full_cache),
        cmocka_unit_test(kv_append_strided_views),
        cmocka_unit_test(kv_append_wrong_offset_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
