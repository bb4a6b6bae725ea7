/* labels: unit cpu */
/* The CPU kernels of the fused row ops add_rmsnorm, rmsnorm_fp8 and silu_mul
 * (src/cpu/<op>_cpu.c): run by the harness's runner on odd shapes in every
 * dtype at every instruction-set level the CPU has, against the float64
 * reference with the op's tolerance; then what a tolerance cannot see, bit for
 * bit: add_rmsnorm's y is kk_rmsnorm of the stored h (not of the unrounded
 * sum), in place too; rmsnorm_fp8's q and scales are kk_quantize of
 * kk_rmsnorm's f32 output (all-zero groups included), and q * scale is within
 * e4m3's precision of the f32 norm; the streaming-store paths equal the plain
 * ones. Then the checker fails deliberately wrong kernels (kk__op_swap), and
 * the entry points name their bad arguments. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_isa.h"
#include "kernelkit/cases.h"
#include "kernelkit/quant.h"

static const char *const dtypes[] = {"f32", "f16", "bf16"};
static const kk_dtype dtype_ids[] = {KK_DTYPE_F32, KK_DTYPE_F16, KK_DTYPE_BF16};

/* ---- the harness's runner ---- */

static kk_case_result run_case(const kk_op *row, const char *params, uint64_t seed) {
    kk_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "test/%s", kk_op_name(row));
    kk_assert_ok(kk_op_params_parse(row, params, &c.params));
    c.seed = seed;
    c.dist = KK_DIST_FULL;
    const kk_run_options o = {.device = "cpu"};
    kk_case_result r;
    kk_assert_ok(kk_case_run(&c, &o, &r));
    return r;
}

static const kk_op *find(const char *name) {
    const kk_op *op = NULL;
    kk_assert_ok(kk_op_find(name, &op));
    return op;
}

static const char *const shapes[][2] = {
    {"add_rmsnorm", "rows=1 n=1"},
    {"add_rmsnorm", "rows=5 n=37"},
    {"add_rmsnorm", "rows=3 n=1000 eps=0.3"},
    {"add_rmsnorm", "rows=2 n=513"},
    {"add_rmsnorm", "rows=2 n=65537"}, /* past KK__ROW_KEEP_MAX: h read back */
    {"rmsnorm_fp8", "rows=1 n=1 group=0"},
    {"rmsnorm_fp8", "rows=5 n=37 group=0"},
    {"rmsnorm_fp8", "rows=3 n=1000 group=0 eps=0.3"},
    {"rmsnorm_fp8", "rows=2 n=513 group=0"},
    {"rmsnorm_fp8", "rows=7 n=384 group=128"},
    {"rmsnorm_fp8", "rows=1 n=128 group=128"},
    {"rmsnorm_fp8", "rows=2 n=65537 group=0"},
    {"silu_mul", "M=1 N=1 packed=1"},
    {"silu_mul", "M=1 N=1 packed=0"},
    {"silu_mul", "M=5 N=37 packed=1"},
    {"silu_mul", "M=3 N=1000 packed=0"},
    {"silu_mul", "M=2 N=513 packed=1"},
};

static void every_level_every_dtype(void **state) {
    (void)state;
    for (int isa = 0; isa <= (int)kk__cpu_isa_supported(); isa++) {
        kk__cpu_isa_cap(isa);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int d = 0; d < 3; d++) {
                char text[160];
                snprintf(text, sizeof text, "%s dtype=%s", shapes[s][1], dtypes[d]);
                const kk_case_result r = run_case(find(shapes[s][0]), text, 10 + s + 100 * d);
                if (r.status != KK_CASE_PASS)
                    fail_msg("%s %s at %s: %s %s", shapes[s][0], text,
                             kk__cpu_isa_name((kk__isa)isa), kk_case_status_name(r.status),
                             r.message);
            }
    }
    kk__cpu_isa_cap(-1);
}

/* ---- tensors for the bit-for-bit checks ---- */

static kk_tensor *make(kk_dtype dt, int64_t rows, int64_t n) {
    kk_tensor *t = NULL;
    kk_assert_ok(kk_tensor_create("cpu", dt, rows ? 2 : 1,
                                  rows ? (int64_t[]){rows, n} : (int64_t[]){n}, &t));
    return t;
}

/* Values in [-2, 2) from `seed` (spread: times 2^-(0..23), so that e4m3
 * meets its subnormals and zero), rounded to t's dtype. */
static void fill_values(kk_tensor *t, uint64_t seed, int spread) {
    const int64_t n = kk_tensor_numel(t);
    double *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        v[i] = (double)(seed >> 11) * 0x1p-51 - 2.0;
        if (spread) v[i] = ldexp(v[i], -(int)((seed >> 40) % 24));
    }
    kk_assert_ok(kk_convert_host(v, KK_DTYPE_F64, t->data, t->dtype, (size_t)n));
    free(v);
}

static void fill(kk_tensor *t, uint64_t seed) { fill_values(t, seed, 0); }

static kk_tensor *copy_as(const kk_tensor *src, kk_dtype dt) {
    kk_tensor *t = make(dt, src->ndim == 2 ? src->shape[0] : 0, src->shape[src->ndim - 1]);
    kk_assert_ok(kk_convert_host(src->data, src->dtype, t->data, dt, (size_t)kk_tensor_numel(t)));
    return t;
}

static void same_bytes(const kk_tensor *a, const kk_tensor *b, const char *what) {
    const size_t bytes = kk_dtype_bytes(a->dtype, (size_t)kk_tensor_numel(a));
    assert_int_equal(bytes, kk_dtype_bytes(b->dtype, (size_t)kk_tensor_numel(b)));
    for (size_t i = 0; i < bytes; i++)
        if (((const uint8_t *)a->data)[i] != ((const uint8_t *)b->data)[i])
            fail_msg("%s: byte %zu differs", what, i);
}

/* ---- add_rmsnorm: h rounded once, y = kk_rmsnorm(h) bit for bit ---- */

static void add_rmsnorm_is_rmsnorm_of_h(kk_dtype dt, int64_t rows, int64_t n) {
    kk_tensor *x = make(dt, rows, n), *res = make(dt, rows, n), *w = make(dt, 0, n);
    kk_tensor *h = make(dt, rows, n), *y = make(dt, rows, n), *want = make(dt, rows, n);
    fill(x, 1), fill(res, 2), fill(w, 3);
    kk_assert_ok(kk_add_rmsnorm(x, res, w, h, y, 1e-5, NULL));
    for (int64_t i = 0; i < rows * n; i++) {
        float a, b, got;
        kk_convert_host((const char *)x->data + kk_dtype_bytes(dt, (size_t)i), dt, &a, KK_DTYPE_F32,
                        1);
        kk_convert_host((const char *)res->data + kk_dtype_bytes(dt, (size_t)i), dt, &b,
                        KK_DTYPE_F32, 1);
        kk_convert_host((const char *)h->data + kk_dtype_bytes(dt, (size_t)i), dt, &got,
                        KK_DTYPE_F32, 1);
        float sum = a + b, rounded = sum; /* the sum in f32, rounded once more */
        uint16_t narrow;
        if (dt != KK_DTYPE_F32) {
            kk_convert_host(&sum, KK_DTYPE_F32, &narrow, dt, 1);
            kk_convert_host(&narrow, dt, &rounded, KK_DTYPE_F32, 1);
        }
        if (memcmp(&got, &rounded, sizeof got) != 0)
            fail_msg("%s h[%lld] = %g, want %g", kk_dtype_name(dt), (long long)i, got, rounded);
    }
    kk_assert_ok(kk_rmsnorm(h, w, want, 1e-5, NULL));
    same_bytes(y, want, "add_rmsnorm y against kk_rmsnorm(h)");
    /* in place: h is residual, then x; the same bits */
    kk_tensor *h2 = copy_as(res, dt), *y2 = make(dt, rows, n), *x2 = copy_as(x, dt);
    kk_assert_ok(kk_add_rmsnorm(x, h2, w, h2, y2, 1e-5, NULL));
    same_bytes(h2, h, "h = residual in place");
    same_bytes(y2, y, "y with h = residual");
    kk_assert_ok(kk_add_rmsnorm(x2, res, w, x2, y2, 1e-5, NULL));
    same_bytes(x2, h, "h = x in place");
    same_bytes(y2, y, "y with h = x");
    kk_tensor *all[] = {x, res, w, h, y, want, h2, y2, x2};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) kk_tensor_destroy(all[k]);
}

static void add_rmsnorm_bits(void **state) {
    (void)state;
    for (int isa = 0; isa <= (int)kk__cpu_isa_supported(); isa++) {
        kk__cpu_isa_cap(isa);
        for (int d = 0; d < 3; d++) {
            add_rmsnorm_is_rmsnorm_of_h(dtype_ids[d], 5, 37);
            add_rmsnorm_is_rmsnorm_of_h(dtype_ids[d], 3, 1000);
            add_rmsnorm_is_rmsnorm_of_h(dtype_ids[d], 1, 65537);
        }
    }
    kk__cpu_isa_cap(-1);
}

/* ---- rmsnorm_fp8: kk_quantize of kk_rmsnorm's f32 y, bit for bit ---- */

static void rmsnorm_fp8_is_quantize(kk_dtype dt, int64_t rows, int64_t n, int group) {
    kk_tensor *x = make(dt, rows, n), *w = make(dt, 0, n);
    fill_values(x, 4, 1), fill(w, 5);
    /* all-zero groups: the second group of every row (w = 0 there), and a row */
    if (n >= 256 && group)
        kk_assert_ok(kk_convert_host((double[128]){0}, KK_DTYPE_F64,
                                     (char *)w->data + kk_dtype_bytes(dt, 128), dt, 128));
    if (rows > 2)
        memset((char *)x->data + kk_dtype_bytes(dt, (size_t)n), 0, kk_dtype_bytes(dt, (size_t)n));
    const int64_t ngroups = group ? n / group : 1;
    kk_tensor *q = make(KK_DTYPE_FP8_E4M3, rows, n), *scales = make(KK_DTYPE_F32, rows, ngroups);
    kk_assert_ok(kk_rmsnorm_fp8(x, w, q, scales, 1e-5, group, NULL));
    /* y in f32 by kk_rmsnorm on the same values widened (exactly) to f32 */
    kk_tensor *xf = copy_as(x, KK_DTYPE_F32), *wf = copy_as(w, KK_DTYPE_F32);
    kk_tensor *y = make(KK_DTYPE_F32, rows, n);
    kk_assert_ok(kk_rmsnorm(xf, wf, y, 1e-5, NULL));
    const float *yv = y->data, *sv = scales->data;
    const uint8_t *qv = q->data;
    int64_t tiny = 0; /* codes of exponent field 0: subnormals and zeros */
    for (int64_t i = 0; i < rows * n; i++) tiny += (qv[i] & 0x78) == 0;
    if (rows * n >= 1000) assert_true(tiny > 0);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t len = group ? group : n;
        for (int64_t g = 0; g < ngroups; g++) {
            /* that group alone, quantized per tensor: the same rule as 1x128 */
            kk_tensor *part = make(KK_DTYPE_F32, 1, len);
            memcpy(part->data, yv + r * n + g * len, (size_t)len * sizeof(float));
            kk_qtensor want;
            kk_assert_ok(kk_qtensor_create("cpu", KK_DTYPE_FP8_E4M3, KK_SCALE_PER_TENSOR, 2,
                                           (int64_t[]){1, len}, &want));
            kk_assert_ok(kk_quantize(part, &want, NULL));
            const float ws = ((const float *)want.scales->data)[0];
            if (memcmp(&ws, &sv[r * ngroups + g], sizeof ws) != 0)
                fail_msg("%s group %d: scale[%lld][%lld] = %g, kk_quantize %g", kk_dtype_name(dt),
                         group, (long long)r, (long long)g, sv[r * ngroups + g], ws);
            if (memcmp(want.data->data, qv + r * n + g * len, (size_t)len) != 0)
                fail_msg("%s group %d: q of row %lld group %lld differs from kk_quantize",
                         kk_dtype_name(dt), group, (long long)r, (long long)g);
            /* dequantized: within one e4m3 rounding of y (docs/formats.md) */
            for (int64_t i = 0; i < len; i++) {
                const double yi = yv[r * n + g * len + i], s = sv[r * ngroups + g];
                const double deq = (double)kk_e4m3_to_f32(qv[r * n + g * len + i]) * s;
                if (!(fabs(deq - yi) <= 0x1p-4 * fabs(yi) + 0x1p-10 * s))
                    fail_msg("q * scale = %g, y = %g", deq, yi);
            }
            kk_qtensor_destroy(&want);
            kk_tensor_destroy(part);
        }
    }
    if (rows > 2) /* the zero row: scale 1, q 0, as kk_quantize */
        for (int64_t g = 0; g < ngroups; g++) assert_true(sv[ngroups + g] == 1.0f);
    if (n >= 256 && group) /* (w = 0 gives -0 where x < 0: code 0x80, as kk_quantize) */
        assert_true(sv[1] == 1.0f && kk_e4m3_to_f32(qv[128]) == 0 && kk_e4m3_to_f32(qv[255]) == 0);
    kk_tensor *all[] = {x, w, q, scales, xf, wf, y};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) kk_tensor_destroy(all[k]);
}

static void rmsnorm_fp8_bits(void **state) {
    (void)state;
    for (int isa = 0; isa <= (int)kk__cpu_isa_supported(); isa++) {
        kk__cpu_isa_cap(isa);
        for (int d = 0; d < 3; d++) {
            rmsnorm_fp8_is_quantize(dtype_ids[d], 4, 384, 128);
            rmsnorm_fp8_is_quantize(dtype_ids[d], 3, 1000, 0);
            rmsnorm_fp8_is_quantize(dtype_ids[d], 5, 37, 0);
            rmsnorm_fp8_is_quantize(dtype_ids[d], 1, 65537, 0);
        }
    }
    kk__cpu_isa_cap(-1);
}

/* Non-finite y cannot be scaled: KK_ERR_QUANTIZATION, as kk_quantize. */
static void rmsnorm_fp8_refuses_nan(void **state) {
    (void)state;
    kk_tensor *x = make(KK_DTYPE_F32, 2, 128), *w = make(KK_DTYPE_F32, 0, 128);
    kk_tensor *q = make(KK_DTYPE_FP8_E4M3, 2, 128), *s = make(KK_DTYPE_F32, 2, 1);
    fill(x, 6), fill(w, 7);
    ((float *)x->data)[200] = NAN;
    kk_assert_status(kk_rmsnorm_fp8(x, w, q, s, 1e-6, 128, NULL), KK_ERR_QUANTIZATION);
    ((float *)x->data)[200] = INFINITY;
    kk_assert_status(kk_rmsnorm_fp8(x, w, q, s, 1e-6, 128, NULL), KK_ERR_QUANTIZATION);
    kk_assert_contains(kk_last_error_message(), "rmsnorm_fp8");
    kk_tensor *all[] = {x, w, q, s};
    for (size_t k = 0; k < 4; k++) kk_tensor_destroy(all[k]);
}

/* ---- streaming stores (outputs of 32 MiB or more) give the plain bits ---- */

/* Rows [r0, r0 + k) of a [rows, n] tensor as a tensor of their own. */
static kk_tensor *rows_of(const kk_tensor *t, int64_t r0, int64_t k) {
    const int64_t n = t->shape[1];
    kk_tensor *s = make(t->dtype, k, n);
    memcpy(s->data, (const char *)t->data + kk_dtype_bytes(t->dtype, (size_t)(r0 * n)),
           kk_dtype_bytes(t->dtype, (size_t)(k * n)));
    return s;
}

static void streaming_equals_plain(void **state) {
    (void)state;
    const int64_t rows = 4099, n = 4096, k = 3; /* bf16 h, y: 32 MiB and a bit */
    kk_tensor *x = make(KK_DTYPE_BF16, rows, n), *res = make(KK_DTYPE_BF16, rows, n);
    kk_tensor *w = make(KK_DTYPE_BF16, 0, n), *y = make(KK_DTYPE_BF16, rows, n);
    fill(x, 8), fill(res, 9), fill(w, 10);
    kk_tensor *xs = rows_of(x, rows - k, k), *rs = rows_of(res, rows - k, k);
    kk_tensor *hs = make(KK_DTYPE_BF16, k, n), *ys = make(KK_DTYPE_BF16, k, n);
    kk_assert_ok(kk_add_rmsnorm(xs, rs, w, hs, ys, 1e-6, NULL));
    kk_assert_ok(kk_add_rmsnorm(x, res, w, res, y, 1e-6, NULL)); /* in place, streamed */
    kk_tensor *h_tail = rows_of(res, rows - k, k), *y_tail = rows_of(y, rows - k, k);
    same_bytes(h_tail, hs, "streamed h");
    same_bytes(y_tail, ys, "streamed y");
    /* rmsnorm_fp8: q is 1 byte an element: 8193 rows of 4096 */
    kk_tensor *x8 = make(KK_DTYPE_BF16, 8193, n), *q = make(KK_DTYPE_FP8_E4M3, 8193, n);
    kk_tensor *s = make(KK_DTYPE_F32, 8193, n / 128), *qs = make(KK_DTYPE_FP8_E4M3, k, n);
    kk_tensor *ss = make(KK_DTYPE_F32, k, n / 128);
    fill(x8, 11);
    kk_tensor *x8s = rows_of(x8, 8193 - k, k);
    kk_assert_ok(kk_rmsnorm_fp8(x8, w, q, s, 1e-6, 128, NULL));
    kk_assert_ok(kk_rmsnorm_fp8(x8s, w, qs, ss, 1e-6, 128, NULL));
    kk_tensor *q_tail = rows_of(q, 8193 - k, k), *s_tail = rows_of(s, 8193 - k, k);
    same_bytes(q_tail, qs, "streamed q");
    same_bytes(s_tail, ss, "scales beside streamed q");
    /* silu_mul, packed: gu [rows, 2n] */
    kk_tensor *gu = make(KK_DTYPE_BF16, rows, 2 * n), *gus = NULL, *ys2 = make(KK_DTYPE_BF16, k, n);
    fill(gu, 12);
    gus = rows_of(gu, rows - k, k);
    kk_assert_ok(kk_silu_mul(gu, NULL, y, NULL));
    kk_assert_ok(kk_silu_mul(gus, NULL, ys2, NULL));
    kk_tensor *y2_tail = rows_of(y, rows - k, k);
    same_bytes(y2_tail, ys2, "streamed silu_mul y");
    kk_tensor *all[] = {x, res, w,  y,  xs,  rs,     hs,     ys, h_tail, y_tail, x8,
                        q, s,   qs, ss, x8s, q_tail, s_tail, gu, gus,    ys2,    y2_tail};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kk_tensor_destroy(all[i]);
}

/* The thread count does not change a bit: rows are independent. */
static void any_thread_count(void **state) {
    (void)state;
    const int before = kk_cpu_num_threads();
    kk_tensor *x = make(KK_DTYPE_BF16, 33, 1000), *w = make(KK_DTYPE_BF16, 0, 1000);
    kk_tensor *q[2], *s[2], *y[2];
    fill(x, 13), fill(w, 14);
    for (int k = 0; k < 2; k++) {
        kk_assert_ok(kk_cpu_set_num_threads(1 + 2 * k));
        q[k] = make(KK_DTYPE_FP8_E4M3, 33, 1000), s[k] = make(KK_DTYPE_F32, 33, 1);
        y[k] = make(KK_DTYPE_BF16, 33, 500);
        kk_assert_ok(kk_rmsnorm_fp8(x, w, q[k], s[k], 1e-6, 0, NULL));
        kk_assert_ok(kk_silu_mul(x, NULL, y[k], NULL));
    }
    same_bytes(q[0], q[1], "q on 1 and 3 threads");
    same_bytes(s[0], s[1], "scales on 1 and 3 threads");
    same_bytes(y[0], y[1], "silu_mul on 1 and 3 threads");
    kk_assert_ok(kk_cpu_set_num_threads(before));
    kk_tensor *all[] = {x, w, q[0], q[1], s[0], s[1], y[0], y[1]};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) kk_tensor_destroy(all[k]);
}

/* ---- the references on cases computed by hand ---- */

static void reference_of(const char *op, const char *text, const double *const *in,
                         double *const *out) {
    kk_op_params p;
    kk_assert_ok(kk_op_params_parse(find(op), text, &p));
    kk_assert_ok(kk_op_reference(&p, in, out));
}

static void references_by_hand(void **state) {
    (void)state;
    double h[2], y[4], s[2];
    /* bf16: 1 + 2^-9 is a tie between 1 and 1 + 2^-7: h rounds to 1 (even),
     * and y is normalized from that h: mean(h^2) = (1 + 16) / 2 */
    reference_of("add_rmsnorm", "rows=1 n=2 eps=1e-12 dtype=bf16",
                 (const double *const[]){(double[]){1, 3}, (double[]){0x1p-9, 1}, (double[]){1, 2}},
                 (double *const[]){h, y});
    assert_true(h[0] == 1.0 && h[1] == 4.0);
    assert_float_equal(y[0], 1 / sqrt(8.5), 1e-12);
    assert_float_equal(y[1], 8 / sqrt(8.5), 1e-12);
    reference_of("add_rmsnorm", "rows=1 n=2 eps=1e-12 dtype=f32",
                 (const double *const[]){(double[]){1, 3}, (double[]){0x1p-9, 1}, (double[]){1, 2}},
                 (double *const[]){h, y});
    assert_true(h[0] == 1 + 0x1p-9);
    /* rmsnorm_fp8, one scale per row: y = (3, 8) / sqrt(12.5); amax 8 maps to
     * 448 and 3 to 168; a zero row: scale 1, q 0 */
    reference_of("rmsnorm_fp8", "rows=2 n=2 group=0 eps=1e-12 dtype=f32",
                 (const double *const[]){(double[]){3, 4, 0, 0}, (double[]){1, 2}},
                 (double *const[]){y, s});
    assert_float_equal(y[0], 168, 1e-9);
    assert_float_equal(y[1], 448, 1e-9);
    assert_float_equal(s[0], 8 / sqrt(12.5) / 448, 1e-15);
    assert_true(y[2] == 0 && y[3] == 0 && s[1] == 1);
    /* silu_mul, packed: silu(0) = 0; silu(ln 3) = ln 3 * 3/4 */
    reference_of("silu_mul", "M=1 N=2 packed=1",
                 (const double *const[]){(double[]){0, log(3.0), 5, 2}}, (double *const[]){y});
    assert_true(y[0] == 0);
    assert_float_equal(y[1], 1.5 * log(3.0), 1e-12);
    reference_of("silu_mul", "M=1 N=2 packed=0",
                 (const double *const[]){(double[]){0, log(3.0)}, (double[]){5, 2}},
                 (double *const[]){y});
    assert_float_equal(y[1], 1.5 * log(3.0), 1e-12);
}

/* ---- wrong kernels: naive f32 kernels that pass with bug = 0 ---- */

static int bug;

static int64_t pint(const kk_op_params *p, const char *name) { return kk_op_params_int(p, name); }

/* bug 1: y normalized from x, not h; bug 2: h never written. */
static kk_status add_rmsnorm_naive(const kk_op_params *p, kk_tensor *const *t, kk_stream st) {
    (void)st;
    const int64_t rows = pint(p, "rows"), n = pint(p, "n");
    const double eps = kk_op_params_float(p, "eps");
    const float *x = t[0]->data, *res = t[1]->data, *w = t[2]->data;
    float *h = t[3]->data, *y = t[4]->data;
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const float v = bug == 1 ? x[r * n + i] : x[r * n + i] + res[r * n + i];
            ss += (double)v * v;
            if (bug != 2) h[r * n + i] = x[r * n + i] + res[r * n + i];
        }
        const double inv = 1.0 / sqrt(ss / (double)n + eps);
        for (int64_t i = 0; i < n; i++) {
            const float v = bug == 1 ? x[r * n + i] : x[r * n + i] + res[r * n + i];
            y[r * n + i] = (float)(v * inv * w[i]);
        }
    }
    return KK_OK;
}

/* bug 1: one scale per row where 1x128 groups are asked; bug 2: eps ignored;
 * bug 3: q = y * scale instead of y / scale. */
static kk_status rmsnorm_fp8_naive(const kk_op_params *p, kk_tensor *const *t, kk_stream st) {
    (void)st;
    const int64_t rows = pint(p, "rows"), n = pint(p, "n"), group = pint(p, "group");
    const int64_t len = group && bug != 1 ? group : n, per_row = group ? n / group : 1;
    const double eps = bug == 2 ? 0.0 : kk_op_params_float(p, "eps");
    const float *x = t[0]->data, *w = t[1]->data;
    uint8_t *q = t[2]->data;
    float *scales = t[3]->data;
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0.0;
        for (int64_t i = 0; i < n; i++) ss += (double)x[r * n + i] * x[r * n + i];
        const float inv = (float)(1.0 / sqrt(ss / (double)n + eps));
        for (int64_t g0 = 0; g0 < n; g0 += len) {
            float amax = 0.0f;
            for (int64_t i = g0; i < g0 + len; i++)
                amax = fmaxf(amax, fabsf(x[r * n + i] * inv * w[i]));
            const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
            for (int64_t i = g0; i < g0 + len; i++) {
                const float v = x[r * n + i] * inv * w[i];
                q[r * n + i] = kk_f32_to_e4m3(bug == 3 ? v * s : v / s);
                scales[r * per_row + i * per_row / n] = s;
            }
        }
    }
    return KK_OK;
}

/* bug 1: gate and up swapped; bug 2: packed halves read interleaved (g, u
 * pairs); bug 3: sigmoid(g) * u. */
static kk_status silu_mul_naive(const kk_op_params *p, kk_tensor *const *t, kk_stream st) {
    (void)st;
    const int64_t M = pint(p, "M"), N = pint(p, "N");
    const int packed = (int)pint(p, "packed");
    float *y = t[packed ? 1 : 2]->data;
    for (int64_t m = 0; m < M; m++)
        for (int64_t j = 0; j < N; j++) {
            const float *row = (const float *)t[0]->data + m * (packed ? 2 * N : N);
            float g = row[j], u = packed ? row[N + j] : ((const float *)t[1]->data)[m * N + j];
            if (bug == 2 && packed) g = row[2 * j], u = row[2 * j + 1];
            if (bug == 1) {
                const float tmp = g;
                g = u, u = tmp;
            }
            const float sig = 1.0f / (1.0f + expf(-g));
            y[m * N + j] = (bug == 3 ? sig : g * sig) * u;
        }
    return KK_OK;
}

static void bugs_are_caught(const char *op, const char *text, kk_op_kernel_fn kernel, int nbugs) {
    kk_op row = *find(op);
    kk__op_swap_none(&row);
    kk__op_swap(&row, KK_BACKEND_CPU, kernel);
    for (bug = 0; bug <= nbugs; bug++) {
        const kk_case_result r = run_case(&row, text, 42);
        print_message("    %s %s, bug %d: %s, rel L2 %.3g\n", op, text, bug,
                      kk_case_status_name(r.status), r.rel_l2_err);
        if (r.status != (bug ? KK_CASE_FAIL : KK_CASE_PASS))
            fail_msg("%s %s: the naive kernel with bug %d should %s: %s", op, text, bug,
                     bug ? "fail" : "pass", r.message);
    }
    bug = 0;
}

static void wrong_kernels_fail(void **state) {
    (void)state;
    bugs_are_caught("add_rmsnorm", "rows=6 n=129 eps=0.1 dtype=f32", add_rmsnorm_naive, 2);
    bugs_are_caught("rmsnorm_fp8", "rows=5 n=384 group=128 eps=0.1 dtype=f32", rmsnorm_fp8_naive,
                    3);
    bugs_are_caught("rmsnorm_fp8", "rows=5 n=77 group=0 eps=0.1 dtype=f32", rmsnorm_fp8_naive, 0);
    bugs_are_caught("silu_mul", "M=7 N=129 packed=1 dtype=f32", silu_mul_naive, 3);
    bugs_are_caught("silu_mul", "M=7 N=129 packed=0 dtype=f32", silu_mul_naive, 1);
}

/* ---- the entry points: kk_op_run's bits, and bad arguments named ---- */

static void expect_bad(kk_status st, const char *argument) {
    assert_int_equal(st, KK_ERR_INVALID_ARGUMENT);
    if (!kk_last_error()->argument || strcmp(kk_last_error()->argument, argument) != 0)
        fail_msg("expected the error to name %s: %s", argument, kk_last_error_message());
}

static void entry_points(void **state) {
    (void)state;
    kk_tensor *x = make(KK_DTYPE_BF16, 3, 256), *r = make(KK_DTYPE_BF16, 3, 256);
    kk_tensor *w = make(KK_DTYPE_BF16, 0, 256), *h = make(KK_DTYPE_BF16, 3, 256);
    kk_tensor *y = make(KK_DTYPE_BF16, 3, 256), *q = make(KK_DTYPE_FP8_E4M3, 3, 256);
    kk_tensor *s2 = make(KK_DTYPE_F32, 3, 2), *s1 = make(KK_DTYPE_F32, 3, 1);
    kk_tensor *half = make(KK_DTYPE_BF16, 3, 128), *odd = make(KK_DTYPE_BF16, 3, 255);
    kk_tensor *q5 = make(KK_DTYPE_FP8_E5M2, 3, 256);
    fill(x, 15), fill(r, 16), fill(w, 17);
    /* each entry point against kk_op_run on the same tensors */
    kk_op_params p;
    kk_tensor *y2 = make(KK_DTYPE_BF16, 3, 256), *h2 = make(KK_DTYPE_BF16, 3, 256);
    kk_assert_ok(kk_add_rmsnorm(x, r, w, h, y, 1e-3, NULL));
    kk_assert_ok(kk_op_params_parse(find("add_rmsnorm"), "rows=3 n=256 eps=1e-3 dtype=bf16", &p));
    kk_assert_ok(kk_op_run(&p, (kk_tensor *[]){x, r, w, h2, y2}, NULL));
    same_bytes(h, h2, "kk_add_rmsnorm h");
    same_bytes(y, y2, "kk_add_rmsnorm y");
    kk_tensor *q2 = make(KK_DTYPE_FP8_E4M3, 3, 256), *s22 = make(KK_DTYPE_F32, 3, 2);
    kk_assert_ok(kk_rmsnorm_fp8(x, w, q, s2, 1e-3, 128, NULL));
    kk_assert_ok(kk_op_params_parse(find("rmsnorm_fp8"), "rows=3 n=256 eps=1e-3 group=128", &p));
    kk_assert_ok(kk_op_run(&p, (kk_tensor *[]){x, w, q2, s22}, NULL));
    same_bytes(q, q2, "kk_rmsnorm_fp8 q");
    same_bytes(s2, s22, "kk_rmsnorm_fp8 scales");
    kk_tensor *yh = make(KK_DTYPE_BF16, 3, 128);
    kk_assert_ok(kk_silu_mul(x, NULL, half, NULL));
    kk_assert_ok(kk_op_params_parse(find("silu_mul"), "M=3 N=128 packed=1", &p));
    kk_assert_ok(kk_op_run(&p, (kk_tensor *[]){x, yh}, NULL));
    same_bytes(half, yh, "kk_silu_mul packed");
    kk_assert_ok(kk_silu_mul(x, r, y, NULL));
    kk_assert_ok(kk_op_params_parse(find("silu_mul"), "M=3 N=256 packed=0", &p));
    kk_assert_ok(kk_op_run(&p, (kk_tensor *[]){x, r, y2}, NULL));
    same_bytes(y, y2, "kk_silu_mul unpacked");
    /* bad arguments */
    expect_bad(kk_add_rmsnorm(NULL, r, w, h, y, 1e-6, NULL), "x");
    expect_bad(kk_add_rmsnorm(x, NULL, w, h, y, 1e-6, NULL), "residual");
    expect_bad(kk_add_rmsnorm(x, r, w, NULL, y, 1e-6, NULL), "h");
    expect_bad(kk_add_rmsnorm(x, half, w, h, y, 1e-6, NULL), "residual");
    expect_bad(kk_add_rmsnorm(x, r, w, h, y, 0.0, NULL), "eps");
    expect_bad(kk_add_rmsnorm(q, q, q, q, q, 1e-6, NULL), "w"); /* 2 dimensions */
    expect_bad(kk_rmsnorm_fp8(x, w, q, s2, 1e-6, 64, NULL), "group");
    expect_bad(kk_rmsnorm_fp8(x, w, q, s1, 1e-6, 128, NULL), "scales");
    expect_bad(kk_rmsnorm_fp8(x, w, q5, s2, 1e-6, 128, NULL), "q");
    expect_bad(kk_rmsnorm_fp8(q, w, q, s2, 1e-6, 128, NULL), "x"); /* no fp8 input */
    kk_tensor *wo = make(KK_DTYPE_BF16, 0, 255), *qo = make(KK_DTYPE_FP8_E4M3, 3, 255);
    expect_bad(kk_rmsnorm_fp8(odd, wo, qo, s2, 1e-6, 128, NULL), "n");
    kk_assert_contains(kk_last_error_message(), "multiple of group = 128");
    expect_bad(kk_silu_mul(odd, NULL, half, NULL), "g");
    expect_bad(kk_silu_mul(x, NULL, y, NULL), "y"); /* packed: y [3, 128] */
    expect_bad(kk_silu_mul(x, half, y, NULL), "u");
    expect_bad(kk_silu_mul(x, r, NULL, NULL), "y");
    kk_tensor *all[] = {x, r, w, h, y, q, s2, s1, half, odd, q5, y2, h2, q2, s22, yh, wo, qo};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) kk_tensor_destroy(all[k]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(references_by_hand),
        cmocka_unit_test(every_level_every_dtype),
        cmocka_unit_test(add_rmsnorm_bits),
        cmocka_unit_test(rmsnorm_fp8_bits),
        cmocka_unit_test(rmsnorm_fp8_refuses_nan),
        cmocka_unit_test(streaming_equals_plain),
        cmocka_unit_test(any_thread_count),
        cmocka_unit_test(wrong_kernels_fail),
        cmocka_unit_test(entry_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
