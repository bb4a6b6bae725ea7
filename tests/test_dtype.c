/* labels: unit cpu */
/* Number formats: names and sizes; every encoding of every narrow format
 * decoded and checked against a float64 formula, and re-encoded; every rounding
 * boundary (midpoints and their neighbours) and the saturation boundaries; 10M
 * random f32 inputs against a slow reference encoder that picks the nearest
 * representable value by search; kk_convert_host between every pair of dtypes,
 * packed e2m1 with odd counts, integer saturation and bad arguments.
 *
 * The reference here is written from the formats' definitions (docs/formats.md)
 * and shares no code with src/core/dtype_convert.c. */
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernelkit/dtype.h"

#if defined(__SANITIZE_ADDRESS__)
#define KK_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define KK_TEST_SANITIZED 1
#endif
#endif
#ifndef KK_TEST_SANITIZED
#define KK_TEST_SANITIZED 0
#endif

/* ---- the formats, from their definitions ---- */

enum special { IEEE, FN, NONE }; /* all-ones exponent: inf/NaN; only S.1111.111 is NaN; finite */

typedef struct fmt {
    const char *name;
    kk_dtype dtype;
    int ebits, mbits, bias;
    enum special special;
    int saturate;      /* overflow gives max (1) or infinity (0) */
    uint32_t max_code; /* largest finite magnitude */
    double *values;    /* values[c] for magnitude codes 0..max_code, then the next would-be value */
} fmt;

static fmt g_fmts[] = {
    {"f16", KK_DTYPE_F16, 5, 10, 15, IEEE, 0, 0x7BFF, NULL},
    {"bf16", KK_DTYPE_BF16, 8, 7, 127, IEEE, 0, 0x7F7F, NULL},
    {"fp8_e4m3", KK_DTYPE_FP8_E4M3, 4, 3, 7, FN, 1, 0x7E, NULL},
    {"fp8_e5m2", KK_DTYPE_FP8_E5M2, 5, 2, 15, IEEE, 1, 0x7B, NULL},
    {"e2m1", KK_DTYPE_E2M1, 2, 1, 1, NONE, 1, 0x7, NULL},
};
#define N_FMTS (sizeof g_fmts / sizeof g_fmts[0])

static uint32_t sign_bit(const fmt *f) { return 1u << (f->ebits + f->mbits); }
static uint32_t n_codes(const fmt *f) { return 1u << (1 + f->ebits + f->mbits); }
static uint32_t exp_field(const fmt *f, uint32_t c) {
    return (c >> f->mbits) & ((1u << f->ebits) - 1);
}
static uint32_t man_field(const fmt *f, uint32_t c) { return c & ((1u << f->mbits) - 1); }

/* value of a magnitude code: subnormal m * 2^(1-bias-mbits), normal (1 + m/2^mbits) * 2^(e-bias) */
static double formula(const fmt *f, uint32_t mag) {
    uint32_t e = exp_field(f, mag), m = man_field(f, mag);
    if (e == 0) return ldexp((double)m, 1 - f->bias - f->mbits);
    return ldexp(1.0 + ldexp((double)m, -f->mbits), (int)e - f->bias);
}

static int code_is_nan(const fmt *f, uint32_t c) {
    uint32_t emax = (1u << f->ebits) - 1, mmax = (1u << f->mbits) - 1;
    if (f->special == IEEE) return exp_field(f, c) == emax && man_field(f, c) != 0;
    if (f->special == FN) return exp_field(f, c) == emax && man_field(f, c) == mmax;
    return 0;
}

static int code_is_inf(const fmt *f, uint32_t c) {
    return f->special == IEEE && exp_field(f, c) == (1u << f->ebits) - 1 && man_field(f, c) == 0;
}

static uint32_t inf_code(const fmt *f) { return ((1u << f->ebits) - 1) << f->mbits; }

static uint32_t lib_encode(const fmt *f, float x) {
    switch (f->dtype) {
    case KK_DTYPE_F16: return kk_f32_to_f16(x);
    case KK_DTYPE_BF16: return kk_f32_to_bf16(x);
    case KK_DTYPE_FP8_E4M3: return kk_f32_to_e4m3(x);
    case KK_DTYPE_FP8_E5M2: return kk_f32_to_e5m2(x);
    default: return kk_f32_to_e2m1(x);
    }
}

static float lib_decode(const fmt *f, uint32_t c) {
    switch (f->dtype) {
    case KK_DTYPE_F16: return kk_f16_to_f32((uint16_t)c);
    case KK_DTYPE_BF16: return kk_bf16_to_f32((uint16_t)c);
    case KK_DTYPE_FP8_E4M3: return kk_e4m3_to_f32((uint8_t)c);
    case KK_DTYPE_FP8_E5M2: return kk_e5m2_to_f32((uint8_t)c);
    default: return kk_e2m1_to_f32((uint8_t)c);
    }
}

static uint32_t fbits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float bitsf(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The documented NaN results of f32 -> format. */
static uint32_t nan_result(const fmt *f, uint32_t x) {
    switch (f->dtype) {
    case KK_DTYPE_F16: return (x >> 16 & 0x8000u) | 0x7E00u | (x >> 13 & 0x3FFu);
    case KK_DTYPE_BF16: return (x >> 16) | 0x40u;
    case KK_DTYPE_FP8_E4M3: return 0x7Fu;
    case KK_DTYPE_FP8_E5M2: return 0x7Fu;
    default: return 0x7u;
    }
}

static void build_values(void) {
    for (size_t k = 0; k < N_FMTS; k++) {
        fmt *f = &g_fmts[k];
        if (f->values) continue;
        f->values = malloc((f->max_code + 2) * sizeof *f->values);
        for (uint32_t c = 0; c <= f->max_code; c++) f->values[c] = formula(f, c);
        int emax = (int)exp_field(f, f->max_code) - f->bias;
        f->values[f->max_code + 1] = f->values[f->max_code] + ldexp(1.0, emax - f->mbits);
    }
}

/* The reference encoder: the nearest representable value, found by binary
 * search over the format's (ordered) magnitude codes; ties to the even code;
 * beyond the largest finite value as if the exponent went on, then overflow to
 * max (saturating formats) or infinity. Not for NaN. */
static uint32_t ref_encode(const fmt *f, double x) {
    const uint32_t sign = signbit(x) ? sign_bit(f) : 0;
    const double a = fabs(x);
    const double *v = f->values;
    const uint32_t over = f->saturate ? f->max_code : inf_code(f);
    if (a >= v[f->max_code + 1]) return sign | over;
    uint32_t lo = 0, hi = f->max_code;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (v[mid] <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (v[lo] == a) return sign | lo;
    const double mid = (v[lo] + v[lo + 1]) / 2; /* exact: few significant bits */
    uint32_t c = a < mid ? lo : a > mid ? lo + 1 : (lo & 1) ? lo + 1 : lo;
    if (c > f->max_code) c = over;
    return sign | c;
}

/* ---- names, sizes ---- */

static void names_parse_bits_bytes(void **state) {
    (void)state;
    static const struct {
        kk_dtype t;
        const char *name, *alias;
        int bits, is_float;
        double max;
    } rows[] = {
        {KK_DTYPE_F64, "f64", "float64", 64, 1, DBL_MAX},
        {KK_DTYPE_F32, "f32", "float32", 32, 1, FLT_MAX},
        {KK_DTYPE_F16, "f16", "float16", 16, 1, 65504.0},
        {KK_DTYPE_BF16, "bf16", "bfloat16", 16, 1, 0x1.FEp127},
        {KK_DTYPE_FP8_E4M3, "fp8_e4m3", "float8_e4m3fn", 8, 1, 448.0},
        {KK_DTYPE_FP8_E5M2, "fp8_e5m2", "float8_e5m2", 8, 1, 57344.0},
        {KK_DTYPE_E2M1, "e2m1", "float4_e2m1fn", 4, 1, 6.0},
        {KK_DTYPE_INT8, "int8", NULL, 8, 0, 127.0},
        {KK_DTYPE_UINT8, "uint8", NULL, 8, 0, 255.0},
        {KK_DTYPE_INT32, "int32", NULL, 32, 0, 2147483647.0},
    };
    assert_int_equal(sizeof rows / sizeof rows[0], KK_DTYPE_COUNT);
    for (size_t i = 0; i < KK_DTYPE_COUNT; i++) {
        kk_dtype got = KK_DTYPE_COUNT;
        assert_string_equal(kk_dtype_name(rows[i].t), rows[i].name);
        kk_assert_ok(kk_dtype_parse(rows[i].name, &got));
        assert_int_equal(got, rows[i].t);
        if (rows[i].alias) {
            got = KK_DTYPE_COUNT;
            kk_assert_ok(kk_dtype_parse(rows[i].alias, &got));
            assert_int_equal(got, rows[i].t);
        }
        assert_int_equal(kk_dtype_bits(rows[i].t), rows[i].bits);
        assert_int_equal(kk_dtype_is_float(rows[i].t), rows[i].is_float);
        assert_true(kk_dtype_max_finite(rows[i].t) == rows[i].max);
        if (rows[i].bits >= 8) {
            assert_int_equal(kk_dtype_bytes(rows[i].t, 3), 3 * (size_t)rows[i].bits / 8);
            size_t per = (size_t)rows[i].bits / 8;
            assert_int_equal(kk_dtype_bytes(rows[i].t, SIZE_MAX / per), (SIZE_MAX / per) * per);
            if (per > 1) assert_int_equal(kk_dtype_bytes(rows[i].t, SIZE_MAX / per + 1), 0);
        }
        assert_int_equal(kk_dtype_bytes(rows[i].t, 0), 0);
    }
    /* the documented max of each narrow format is its largest code's value */
    assert_true(kk_dtype_max_finite(KK_DTYPE_BF16) == (double)kk_bf16_to_f32(0x7F7F));
    assert_true(kk_dtype_max_finite(KK_DTYPE_F16) == (double)kk_f16_to_f32(0x7BFF));
    /* packed e2m1 rounds up */
    assert_int_equal(kk_dtype_bytes(KK_DTYPE_E2M1, 1), 1);
    assert_int_equal(kk_dtype_bytes(KK_DTYPE_E2M1, 2), 1);
    assert_int_equal(kk_dtype_bytes(KK_DTYPE_E2M1, 7), 4);
    assert_int_equal(kk_dtype_bytes(KK_DTYPE_E2M1, SIZE_MAX), SIZE_MAX / 2 + 1);
    /* invalid dtypes */
    kk_dtype bad[] = {(kk_dtype)-1, KK_DTYPE_COUNT, (kk_dtype)1000};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_string_equal(kk_dtype_name(bad[i]), "?");
        assert_int_equal(kk_dtype_bits(bad[i]), 0);
        assert_int_equal(kk_dtype_bytes(bad[i], 4), 0);
        assert_int_equal(kk_dtype_is_float(bad[i]), 0);
        assert_true(kk_dtype_max_finite(bad[i]) == 0.0);
    }
    /* parse: case-insensitive; unknown names and NULLs name the argument */
    kk_dtype got = KK_DTYPE_COUNT;
    kk_assert_ok(kk_dtype_parse("BFloat16", &got));
    assert_int_equal(got, KK_DTYPE_BF16);
    kk_assert_status(kk_dtype_parse("float8", &got), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "name");
    assert_string_equal(kk_last_error()->value, "\"float8\"");
    kk_assert_contains(kk_last_error()->expected, "fp8_e4m3");
    assert_string_equal(kk_last_error()->function, "kk_dtype_parse");
    kk_assert_status(kk_dtype_parse("", &got), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_dtype_parse(NULL, &got), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "name");
    kk_assert_status(kk_dtype_parse("f32", NULL), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "out");
}

/* ---- every encoding ---- */

static void every_encoding_decodes_to_the_formula(void **state) {
    (void)state;
    for (size_t k = 0; k < N_FMTS; k++) {
        const fmt *f = &g_fmts[k];
        for (uint32_t c = 0; c < n_codes(f); c++) {
            const float got = lib_decode(f, c);
            const int neg = (c & sign_bit(f)) != 0;
            const uint32_t mag = c & (sign_bit(f) - 1);
            if (code_is_nan(f, c)) {
                /* a quiet NaN with the code's sign and mantissa on top */
                uint32_t want =
                    (neg ? 0x80000000u : 0) | 0x7FC00000u | man_field(f, c) << (23 - f->mbits);
                if (fbits(got) != want)
                    fail_msg("%s 0x%x: got 0x%08x, want NaN 0x%08x", f->name, c, fbits(got), want);
            } else if (code_is_inf(f, c)) {
                assert_true(isinf(got));
                assert_int_equal(!!signbit(got), neg);
            } else {
                double want = neg ? -formula(f, mag) : formula(f, mag);
                if ((double)got != want || !!signbit(got) != neg)
                    fail_msg("%s 0x%x: got %a, want %a", f->name, c, (double)got, want);
            }
        }
    }
    /* spot checks */
    assert_true(kk_e4m3_to_f32(0x7E) == 448.0f);
    assert_true(kk_e4m3_to_f32(0x01) == 0x1p-9f);
    assert_true(kk_e4m3_to_f32(0x08) == 0x1p-6f);
    assert_true(kk_e5m2_to_f32(0x7B) == 57344.0f);
    assert_true(kk_e5m2_to_f32(0x01) == 0x1p-16f);
    assert_true(isinf(kk_e5m2_to_f32(0x7C)) && kk_e5m2_to_f32(0xFC) < 0);
    assert_true(kk_f16_to_f32(0x0001) == 0x1p-24f);
    assert_true(kk_bf16_to_f32(0x0001) == 0x1p-133f);
    static const float e2m1[16] = {0,     0.5f,  1,  1.5f,  2,  3,  4,  6,
                                   -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (uint32_t c = 0; c < 16; c++) {
        assert_true(kk_e2m1_to_f32((uint8_t)c) == e2m1[c]);
        assert_int_equal(!!signbit(kk_e2m1_to_f32((uint8_t)c)), c >= 8);
        assert_true(kk_e2m1_to_f32((uint8_t)(c | 0xF0)) == e2m1[c]); /* high bits ignored */
    }
}

static void every_encoding_round_trips(void **state) {
    (void)state;
    for (size_t k = 0; k < N_FMTS; k++) {
        const fmt *f = &g_fmts[k];
        for (uint32_t c = 0; c < n_codes(f); c++) {
            const float x = lib_decode(f, c);
            const uint32_t back = lib_encode(f, x);
            uint32_t want = c;
            if (code_is_nan(f, c))
                want = nan_result(f, fbits(x)); /* f16/bf16: c, quieted */
            else if (code_is_inf(f, c) && f->saturate)
                want = (c & sign_bit(f)) | f->max_code;
            if (back != want)
                fail_msg("%s 0x%x -> %a -> 0x%x, want 0x%x", f->name, c, (double)x, back, want);
        }
    }
    /* the documented exceptions, exactly */
    assert_int_equal(kk_f32_to_e4m3(kk_e4m3_to_f32(0xFF)), 0x7F); /* NaN loses its sign */
    assert_int_equal(kk_f32_to_e5m2(kk_e5m2_to_f32(0x7C)), 0x7B); /* inf saturates */
    assert_int_equal(kk_f32_to_e5m2(kk_e5m2_to_f32(0xFC)), 0xFB);
    assert_int_equal(kk_f32_to_e5m2(kk_e5m2_to_f32(0xFD)), 0x7F);
    assert_int_equal(kk_f32_to_f16(kk_f16_to_f32(0x7C01)), 0x7E01); /* sNaN is quieted */
    assert_int_equal(kk_f32_to_f16(kk_f16_to_f32(0xFE00)), 0xFE00);
    assert_int_equal(kk_f32_to_bf16(kk_bf16_to_f32(0xFF81)), 0xFFC1);
    assert_int_equal(kk_f32_to_e2m1(-0.0f), 0x8);
}

/* ---- rounding and saturation boundaries ---- */

static void check_encode(const fmt *f, float x, uint32_t want, const char *what) {
    uint32_t got = lib_encode(f, x);
    if (got != want)
        fail_msg("%s: %s(%a) = 0x%x, want 0x%x (%s)", f->name, "encode", (double)x, got, want,
                 what);
}

static void every_rounding_boundary(void **state) {
    (void)state;
    for (size_t k = 0; k < N_FMTS; k++) {
        const fmt *f = &g_fmts[k];
        const double *v = f->values;
        const uint32_t over = f->saturate ? f->max_code : inf_code(f);
        for (uint32_t c = 0; c <= f->max_code; c++) {
            /* c and the next value up (past the top: the would-be value 2^(emax+1) or
             * e4m3's 480, whose code is the overflow result) */
            const uint32_t up = c == f->max_code ? over : c + 1;
            const double a = v[c], b = v[c + 1], mid = (a + b) / 2;
            const float fa = (float)a, fmid = (float)mid;
            assert_true((double)fmid == mid); /* midpoints are f32 numbers */
            const uint32_t even = (c & 1) ? up : c;
            for (int neg = 0; neg < 2; neg++) {
                const uint32_t s = neg ? sign_bit(f) : 0;
                const float sg = neg ? -1.0f : 1.0f;
                check_encode(f, sg * fa, s | c, "exact");
                check_encode(f, sg * fmid, s | even, "midpoint to even");
                check_encode(f, sg * nextafterf(fmid, 0.0f), s | c, "below the midpoint");
                check_encode(f, sg * nextafterf(fmid, INFINITY), s | up, "above the midpoint");
            }
        }
    }
}

static void saturation_and_overflow(void **state) {
    (void)state;
    /* everything above the largest finite value: max for fp8/e2m1, inf for f16/bf16 */
    for (size_t k = 0; k < N_FMTS; k++) {
        const fmt *f = &g_fmts[k];
        const double max = f->values[f->max_code];
        const uint32_t over = f->saturate ? f->max_code : inf_code(f);
        const double overflow_at = (max + f->values[f->max_code + 1]) / 2;
        for (uint32_t u = fbits((float)max) + 1; u <= 0x7F800000u; u += 4099) {
            float x = bitsf(u);
            uint32_t want = (f->saturate || (double)x >= overflow_at) ? over : f->max_code;
            check_encode(f, x, want, "above max");
            check_encode(f, -x, sign_bit(f) | want, "below -max");
        }
        check_encode(f, INFINITY, over, "inf");
        check_encode(f, -INFINITY, sign_bit(f) | over, "-inf");
        check_encode(f, FLT_MAX, over, "FLT_MAX");
        check_encode(f, bitsf(0x7FC00000u), nan_result(f, 0x7FC00000u), "NaN");
        check_encode(f, bitsf(0xFFC00000u), nan_result(f, 0xFFC00000u), "-NaN");
        check_encode(f, bitsf(0x7F800001u), nan_result(f, 0x7F800001u), "sNaN");
        check_encode(f, bitsf(0xFFFFFFFFu), nan_result(f, 0xFFFFFFFFu), "-NaN all ones");
        /* underflow keeps the sign */
        check_encode(f, FLT_TRUE_MIN, 0, "tiny");
        check_encode(f, -FLT_TRUE_MIN, sign_bit(f), "-tiny");
        check_encode(f, -0.0f, sign_bit(f), "-0");
        check_encode(f, 0.0f, 0, "0");
    }
    /* the numbers of the brief */
    assert_int_equal(kk_f32_to_e4m3(448.0f), 0x7E);
    assert_int_equal(kk_f32_to_e4m3(463.99f), 0x7E);
    assert_int_equal(kk_f32_to_e4m3(464.0f), 0x7E);
    assert_int_equal(kk_f32_to_e4m3(465.0f), 0x7E);
    assert_int_equal(kk_f32_to_e4m3(480.0f), 0x7E);
    assert_int_equal(kk_f32_to_e4m3(1e30f), 0x7E);
    assert_int_equal(kk_f32_to_e4m3(-INFINITY), 0xFE);
    assert_int_equal(kk_f32_to_e4m3(NAN), 0x7F);
    assert_int_equal(kk_f32_to_e4m3(-NAN), 0x7F);
    assert_int_equal(kk_f32_to_e4m3(0x1p-10f), 0x00); /* half the smallest subnormal: tie to 0 */
    assert_int_equal(kk_f32_to_e4m3(-0x1p-10f), 0x80);
    assert_int_equal(kk_f32_to_e4m3(nextafterf(0x1p-10f, 1)), 0x01);
    assert_int_equal(kk_f32_to_e4m3(0x1.8p-9f), 0x02); /* 1.5 subnormal units: tie to 2 */
    assert_int_equal(kk_f32_to_e5m2(61440.0f), 0x7B);
    assert_int_equal(kk_f32_to_e5m2(INFINITY), 0x7B);
    assert_int_equal(kk_f32_to_e5m2(-1e9f), 0xFB);
    assert_int_equal(kk_f32_to_e5m2(NAN), 0x7F);
    assert_int_equal(kk_f32_to_e5m2(0x1p-17f), 0x00);
    assert_int_equal(kk_f32_to_e5m2(0x1.8p-16f), 0x02);
    assert_int_equal(kk_f32_to_f16(65504.0f), 0x7BFF);
    assert_int_equal(kk_f32_to_f16(65519.996f), 0x7BFF);
    assert_int_equal(kk_f32_to_f16(65520.0f), 0x7C00);
    assert_int_equal(kk_f32_to_f16(-65520.0f), 0xFC00);
    assert_int_equal(kk_f32_to_f16(0x1p-25f), 0x0000); /* tie to 0 */
    assert_int_equal(kk_f32_to_f16(nextafterf(0x1p-25f, 1)), 0x0001);
    assert_int_equal(kk_f32_to_f16(0x1.8p-24f), 0x0002);
    assert_int_equal(kk_f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400); /* rounds up into normals */
    assert_int_equal(kk_f32_to_bf16(bitsf(0x7F7F8000u)), 0x7F80); /* tie at the top -> inf */
    assert_int_equal(kk_f32_to_bf16(bitsf(0x7F7F7FFFu)), 0x7F7F);
    assert_int_equal(kk_f32_to_bf16(bitsf(0x00008000u)), 0x0000); /* subnormal tie to even */
    assert_int_equal(kk_f32_to_bf16(bitsf(0x00018000u)), 0x0002);
    assert_int_equal(kk_f32_to_bf16(bitsf(0x7FA00000u)), 0x7FE0); /* sNaN quieted, not inf */
    assert_int_equal(kk_f32_to_bf16(bitsf(0xFF800001u)), 0xFFC0);
    /* e2m1 */
    static const struct {
        float x;
        uint8_t c;
    } e2m1[] = {
        {0.25f, 0x0},  {0.2500001f, 0x1}, {0.75f, 0x2}, {1.25f, 0x2}, {1.75f, 0x4},
        {2.5f, 0x4},   {3.5f, 0x6},       {5.0f, 0x6},  {5.01f, 0x7}, {7.0f, 0x7},
        {100.0f, 0x7}, {-0.25f, 0x8},     {-2.5f, 0xC}, {-5.0f, 0xE}, {-INFINITY, 0xF},
        {NAN, 0x7},    {-NAN, 0x7},       {0.1f, 0x0},  {-0.1f, 0x8}, {6.0f, 0x7},
    };
    for (size_t i = 0; i < sizeof e2m1 / sizeof e2m1[0]; i++)
        if (kk_f32_to_e2m1(e2m1[i].x) != e2m1[i].c)
            fail_msg("e2m1(%g) = 0x%x, want 0x%x", (double)e2m1[i].x, kk_f32_to_e2m1(e2m1[i].x),
                     e2m1[i].c);
}

/* ---- random sweep against the reference ---- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) { /* splitmix64 */
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* f32 bit patterns: a quarter uniform, the rest with an exponent where the
 * narrow formats live (2^-40 .. 2^20), some with short mantissas (many ties). */
static uint32_t random_f32_bits(void) {
    uint64_t r = next_u64();
    uint32_t u = (uint32_t)r;
    switch ((r >> 32) & 7) {
    case 0:
    case 1: return u;
    case 2: u &= 0xFFFFF000u; /* fall through */
    default: {
        uint32_t e = 87 + (uint32_t)((r >> 40) % 61); /* 2^-40 .. 2^20 */
        return (u & 0x807FFFFFu) | e << 23;
    }
    }
}

static size_t sweep_size(void) { return KK_TEST_SANITIZED ? 1000000 : 10000000; }

static void random_sweep_against_reference(void **state) {
    (void)state;
    const size_t total = sweep_size(), batch = 1 << 16;
    uint32_t *in = malloc(batch * sizeof *in);
    uint16_t *out16 = malloc(batch * sizeof *out16);
    uint8_t *out8 = malloc(batch * sizeof *out8);
    assert_non_null(in);
    assert_non_null(out16);
    assert_non_null(out8);
    size_t checked = 0;
    for (size_t done = 0; done < total; done += batch) {
        for (size_t i = 0; i < batch; i++) in[i] = random_f32_bits();
        for (size_t k = 0; k < N_FMTS; k++) {
            const fmt *f = &g_fmts[k];
            /* the bulk path, compared with the scalar one below */
            void *out = f->dtype == KK_DTYPE_F16 || f->dtype == KK_DTYPE_BF16 ? (void *)out16
                                                                              : (void *)out8;
            size_t n = f->dtype == KK_DTYPE_E2M1 ? batch - 1 : batch; /* odd count, packed */
            kk_assert_ok(kk_convert_host(in, KK_DTYPE_F32, out, f->dtype, n));
            for (size_t i = 0; i < n; i++) {
                const float x = bitsf(in[i]);
                const uint32_t got = lib_encode(f, x);
                const uint32_t want = isnan(x) ? nan_result(f, in[i]) : ref_encode(f, (double)x);
                if (got != want)
                    fail_msg("%s(%a = 0x%08x) = 0x%x, reference 0x%x", f->name, (double)x, in[i],
                             got, want);
                uint32_t bulk = f->dtype == KK_DTYPE_F16 || f->dtype == KK_DTYPE_BF16 ? out16[i]
                                : f->dtype == KK_DTYPE_E2M1
                                    ? (uint32_t)(out8[i / 2] >> (4 * (i & 1))) & 0xFu
                                    : out8[i];
                if (bulk != got)
                    fail_msg("%s: kk_convert_host gave 0x%x for 0x%08x, scalar 0x%x", f->name, bulk,
                             in[i], got);
            }
            if (f->dtype == KK_DTYPE_E2M1) assert_int_equal(out8[n / 2] >> 4, 0); /* padding */
            checked += n;
        }
    }
    print_message("%zu f32 inputs checked against the reference (%zu per format)\n", checked,
                  checked / N_FMTS);
    free(in);
    free(out16);
    free(out8);
}

/* ---- one rounding from f64 and int32 (round to odd through f32) ---- */

static void f64_and_int32_round_once(void **state) {
    (void)state;
    for (size_t k = 0; k < N_FMTS; k++) {
        const fmt *f = &g_fmts[k];
        const double *v = f->values;
        /* just off each midpoint, by less than an f32 ulp: rounding to f32 first
         * would land on the midpoint and then go to even - the wrong way half the time */
        for (uint32_t c = 0; c < f->max_code; c++) {
            const double mid = (v[c] + v[c + 1]) / 2;
            const double d[2] = {mid + mid * 0x1p-36, mid - mid * 0x1p-36};
            const uint32_t want[2] = {c + 1, c};
            for (int j = 0; j < 2; j++) {
                uint32_t got = 0;
                kk_assert_ok(kk_convert_host(&d[j], KK_DTYPE_F64, &got, f->dtype, 1));
                if (got != want[j])
                    fail_msg("%s: f64 %a -> 0x%x, want 0x%x", f->name, d[j], got, want[j]);
                assert_int_equal(ref_encode(f, d[j]), want[j]);
            }
        }
        /* random doubles, f64 and int32 */
        enum { N = 100000 };
        double *d = malloc(N * sizeof *d);
        int32_t *iv = malloc(N * sizeof *iv);
        uint16_t *out = malloc(N * sizeof *out);
        assert_non_null(d);
        assert_non_null(iv);
        assert_non_null(out);
        for (size_t i = 0; i < N; i++) {
            uint64_t r = next_u64();
            double m = ldexp((double)(r >> 11), -53); /* [0, 1) with 53 bits */
            int e = (int)((r & 0x7FF) % 80) - 50;
            d[i] = ldexp(1.0 + m, e) * ((r >> 10 & 1) ? -1 : 1);
            iv[i] = (int32_t)(uint32_t)next_u64() >> (int)(next_u64() % 31);
        }
        d[0] = 1e300;
        d[1] = -1e-300;
        d[2] = (double)FLT_MAX * 1.5;
        iv[0] = INT32_MIN;
        iv[1] = INT32_MAX;
        iv[2] = (1 << 24) + (1 << 16) + 1; /* bf16: f32 would round to the midpoint */
        const int bits = f->ebits + f->mbits + 1;
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 0)
                kk_assert_ok(kk_convert_host(d, KK_DTYPE_F64, out, f->dtype, N));
            else
                kk_assert_ok(kk_convert_host(iv, KK_DTYPE_INT32, out, f->dtype, N));
            for (size_t i = 0; i < N; i++) {
                const double x = pass == 0 ? d[i] : (double)iv[i];
                uint32_t got = bits == 16 ? ((uint16_t *)out)[i]
                               : bits == 8
                                   ? ((uint8_t *)out)[i]
                                   : (uint32_t)(((uint8_t *)out)[i / 2] >> (4 * (i & 1))) & 0xFu;
                uint32_t want = ref_encode(f, x);
                if (got != want)
                    fail_msg("%s: %s %.17g -> 0x%x, reference 0x%x", f->name,
                             pass ? "int32" : "f64", x, got, want);
            }
        }
        free(d);
        free(iv);
        free(out);
    }
    uint16_t b = 0;
    int32_t i32 = (1 << 24) + (1 << 16) + 1;
    kk_assert_ok(kk_convert_host(&i32, KK_DTYPE_INT32, &b, KK_DTYPE_BF16, 1));
    assert_int_equal(b, 0x4B81); /* 2^24 + 2^17 */
}

/* ---- kk_convert_host between every pair ---- */

static const double k_values[] = {
    0.0,   -0.0,   1.0,     -1.5,      2.5,          3.5,           0.3,      -0.75,
    100.0, -300.7, 448.0,   1000.0,    70000.0,      1e10,          -1e10,    1e-8,
    127.5, 128.5,  -128.5,  255.5,     2147483647.0, -2147483648.0, 3e9,      0.5,
    -0.5,  6.0,    5.0,     -4.0,      1e300,        -1e-300,       INFINITY, -INFINITY,
    NAN,   -NAN,   65519.0, 1.0 / 3.0, 2147483646.5, -2.5,          33.0,     1e-40,
};
#define N_VALUES (sizeof k_values / sizeof k_values[0])

static int is_int_dtype(kk_dtype t) {
    return t == KK_DTYPE_INT8 || t == KK_DTYPE_UINT8 || t == KK_DTYPE_INT32;
}

static const fmt *find_fmt(kk_dtype t) {
    for (size_t k = 0; k < N_FMTS; k++)
        if (g_fmts[k].dtype == t) return &g_fmts[k];
    return NULL;
}

/* Element i of a buffer as its code (narrow), or its exact value as a double. */
static uint32_t get_code(const void *buf, kk_dtype t, size_t i) {
    switch (kk_dtype_bits(t)) {
    case 4: return (uint32_t)(((const uint8_t *)buf)[i / 2] >> (4 * (i & 1))) & 0xFu;
    case 8: return ((const uint8_t *)buf)[i];
    case 16: return ((const uint16_t *)buf)[i];
    default: return ((const uint32_t *)buf)[i];
    }
}

static double exact_value(const void *buf, kk_dtype t, size_t i) {
    switch (t) {
    case KK_DTYPE_F64: return ((const double *)buf)[i];
    case KK_DTYPE_F32: return (double)((const float *)buf)[i];
    case KK_DTYPE_INT8: return ((const int8_t *)buf)[i];
    case KK_DTYPE_UINT8: return ((const uint8_t *)buf)[i];
    case KK_DTYPE_INT32: return ((const int32_t *)buf)[i];
    default: {
        const fmt *f = find_fmt(t);
        uint32_t c = get_code(buf, t, i);
        uint32_t mag = c & (sign_bit(f) - 1);
        double s = (c & sign_bit(f)) ? -1.0 : 1.0;
        if (code_is_nan(f, c)) return copysign(NAN, s);
        if (code_is_inf(f, c)) return s * INFINITY;
        return s * formula(f, mag);
    }
    }
}

/* Round to nearest even and saturate; NaN -> 0 (written independently). */
static double ref_to_int(double x, double lo, double hi) {
    if (isnan(x)) return 0;
    double r = nearbyint(x); /* default environment: ties to even */
    return r < lo ? lo : r > hi ? hi : r;
}

static void every_pair_of_dtypes(void **state) {
    (void)state;
    const size_t n = N_VALUES; /* odd? make it odd below */
    const size_t count = (n & 1) ? n : n - 1;
    for (int s = 0; s < KK_DTYPE_COUNT; s++) {
        /* the source: the values converted to s (that conversion is checked too, below) */
        double srcbuf_space[N_VALUES + 1];
        void *src = srcbuf_space;
        memset(srcbuf_space, 0, sizeof srcbuf_space);
        kk_assert_ok(kk_convert_host(k_values, KK_DTYPE_F64, src, (kk_dtype)s, count));
        for (int d = 0; d < KK_DTYPE_COUNT; d++) {
            uint8_t dst[sizeof(double) * (N_VALUES + 1) + 16];
            memset(dst, 0xA5, sizeof dst);
            kk_assert_ok(kk_convert_host(src, (kk_dtype)s, dst, (kk_dtype)d, count));
            const size_t bytes = kk_dtype_bytes((kk_dtype)d, count);
            for (size_t b = bytes; b < sizeof dst; b++)
                if (dst[b] != 0xA5)
                    fail_msg("%s -> %s wrote past the end", kk_dtype_name(s), kk_dtype_name(d));
            if (d == KK_DTYPE_E2M1) assert_int_equal(dst[count / 2] >> 4, 0);
            for (size_t i = 0; i < count; i++) {
                const double x = exact_value(src, (kk_dtype)s, i);
                const char *sn = kk_dtype_name((kk_dtype)s), *dn = kk_dtype_name((kk_dtype)d);
                if (s == d) { /* an exact copy */
                    assert_int_equal(get_code(dst, (kk_dtype)d, i), get_code(src, (kk_dtype)s, i));
                    if (kk_dtype_bits((kk_dtype)d) == 64)
                        assert_memory_equal((double *)(void *)dst + i, (double *)src + i, 8);
                    continue;
                }
                if (is_int_dtype((kk_dtype)d)) {
                    double lo = d == KK_DTYPE_INT8 ? -128 : d == KK_DTYPE_UINT8 ? 0 : -2147483648.0;
                    double hi = d == KK_DTYPE_INT8 ? 127 : d == KK_DTYPE_UINT8 ? 255 : 2147483647.0;
                    double got = exact_value(dst, (kk_dtype)d, i), want = ref_to_int(x, lo, hi);
                    if (got != want)
                        fail_msg("%s %.17g -> %s: %.17g, want %.17g", sn, x, dn, got, want);
                } else if (d == KK_DTYPE_F64 || d == KK_DTYPE_F32) {
                    double got = exact_value(dst, (kk_dtype)d, i);
                    double want = d == KK_DTYPE_F64 ? x : (double)(float)x;
                    if (isnan(x)) {
                        if (!isnan(got) || !!signbit(got) != !!signbit(x))
                            fail_msg("%s NaN -> %s: %.17g", sn, dn, got);
                    } else if (got != want || !!signbit(got) != !!signbit(want)) {
                        fail_msg("%s %.17g -> %s: %.17g, want %.17g", sn, x, dn, got, want);
                    }
                } else {
                    const fmt *f = find_fmt((kk_dtype)d);
                    uint32_t got = get_code(dst, (kk_dtype)d, i);
                    if (isnan(x) && !f->saturate) { /* f16, bf16: a NaN of the same sign */
                        if (!code_is_nan(f, got) || !!(got & sign_bit(f)) != !!signbit(x))
                            fail_msg("%s NaN -> %s: 0x%x", sn, dn, got);
                        continue;
                    }
                    const uint32_t want = isnan(x) ? nan_result(f, 0) : ref_encode(f, x);
                    if (got != want)
                        fail_msg("%s %.17g -> %s: 0x%x, want 0x%x", sn, x, dn, got, want);
                }
            }
        }
    }
}

static void integers_saturate(void **state) {
    (void)state;
    const int32_t i32[] = {300, -300, -1, 256, 127, -128, 255, INT32_MAX, INT32_MIN, 0};
    int8_t i8[10];
    uint8_t u8[10];
    kk_assert_ok(kk_convert_host(i32, KK_DTYPE_INT32, i8, KK_DTYPE_INT8, 10));
    kk_assert_ok(kk_convert_host(i32, KK_DTYPE_INT32, u8, KK_DTYPE_UINT8, 10));
    const int8_t want8[] = {127, -128, -1, 127, 127, -128, 127, 127, -128, 0};
    const uint8_t wantu[] = {255, 0, 0, 255, 127, 0, 255, 255, 0, 0};
    assert_memory_equal(i8, want8, sizeof want8);
    assert_memory_equal(u8, wantu, sizeof wantu);
    const uint8_t big[] = {200, 127, 128, 0};
    kk_assert_ok(kk_convert_host(big, KK_DTYPE_UINT8, i8, KK_DTYPE_INT8, 4));
    assert_int_equal(i8[0], 127);
    assert_int_equal(i8[2], 127);
    const int8_t neg[] = {-5, 5};
    kk_assert_ok(kk_convert_host(neg, KK_DTYPE_INT8, u8, KK_DTYPE_UINT8, 2));
    assert_int_equal(u8[0], 0);
    assert_int_equal(u8[1], 5);
    /* floats: round to nearest even, saturate, NaN -> 0 */
    const float fx[] = {0.5f,    1.5f,    2.5f,  -0.5f,     -1.5f,    127.4f, 127.5f, 128.0f,
                        -128.5f, -129.0f, 1e10f, -INFINITY, INFINITY, NAN,    254.5f, -3.0f};
    const int8_t fi8[] = {0, 2, 2, 0, -2, 127, 127, 127, -128, -128, 127, -128, 127, 0, 127, -3};
    const uint8_t fu8[] = {0, 2, 2, 0, 0, 127, 128, 128, 0, 0, 255, 0, 255, 0, 254, 0};
    int8_t gi8[16];
    uint8_t gu8[16];
    kk_assert_ok(kk_convert_host(fx, KK_DTYPE_F32, gi8, KK_DTYPE_INT8, 16));
    kk_assert_ok(kk_convert_host(fx, KK_DTYPE_F32, gu8, KK_DTYPE_UINT8, 16));
    assert_memory_equal(gi8, fi8, 16);
    assert_memory_equal(gu8, fu8, 16);
    const double dx[] = {2147483646.5,  2147483645.5,  2147483647.0, 2147483648.0,
                         -2147483648.0, -2147483649.0, 1e300,        -0.0};
    const int32_t di32[] = {2147483646, 2147483646, INT32_MAX, INT32_MAX,
                            INT32_MIN,  INT32_MIN,  INT32_MAX, 0};
    int32_t g32[8];
    kk_assert_ok(kk_convert_host(dx, KK_DTYPE_F64, g32, KK_DTYPE_INT32, 8));
    assert_memory_equal(g32, di32, sizeof di32);
    const float f32big = 2147483648.0f;
    kk_assert_ok(kk_convert_host(&f32big, KK_DTYPE_F32, g32, KK_DTYPE_INT32, 1));
    assert_int_equal(g32[0], INT32_MAX);
}

static void packed_e2m1(void **state) {
    (void)state;
    const float x[7] = {0.5f, -1.0f, 6.0f, 2.5f, -0.0f, 100.0f, 3.0f};
    uint8_t p[5];
    memset(p, 0xFF, sizeof p);
    kk_assert_ok(kk_convert_host(x, KK_DTYPE_F32, p, KK_DTYPE_E2M1, 7));
    /* element i in byte i/2, low nibble first; the last byte's high nibble is 0 */
    assert_int_equal(p[0], 0x1 | 0xA << 4);
    assert_int_equal(p[1], 0x7 | 0x4 << 4);
    assert_int_equal(p[2], 0x8 | 0x7 << 4);
    assert_int_equal(p[3], 0x5);
    assert_int_equal(p[4], 0xFF); /* untouched */
    float back[7];
    kk_assert_ok(kk_convert_host(p, KK_DTYPE_E2M1, back, KK_DTYPE_F32, 7));
    const float want[7] = {0.5f, -1.0f, 6.0f, 2.0f, -0.0f, 6.0f, 3.0f};
    for (int i = 0; i < 7; i++) {
        assert_true(back[i] == want[i]);
        assert_int_equal(!!signbit(back[i]), !!signbit(want[i]));
    }
    /* e2m1 -> e2m1 copies and clears the padding nibble */
    uint8_t q[4] = {0x21, 0x43, 0x65, 0xF7};
    uint8_t r[4];
    kk_assert_ok(kk_convert_host(q, KK_DTYPE_E2M1, r, KK_DTYPE_E2M1, 7));
    assert_int_equal(r[0], 0x21);
    assert_int_equal(r[3], 0x07);
    /* one element */
    uint8_t one = 0xEE;
    const float six = -6.0f;
    kk_assert_ok(kk_convert_host(&six, KK_DTYPE_F32, &one, KK_DTYPE_E2M1, 1));
    assert_int_equal(one, 0x0F);
    /* across the internal chunk boundary, odd total */
    enum { N = 1201 };
    float *big = malloc(N * sizeof *big);
    uint8_t *packed = malloc((N + 1) / 2);
    float *round = malloc(N * sizeof *round);
    assert_non_null(big);
    assert_non_null(packed);
    assert_non_null(round);
    for (int i = 0; i < N; i++) big[i] = kk_e2m1_to_f32((uint8_t)(i * 7 % 16));
    kk_assert_ok(kk_convert_host(big, KK_DTYPE_F32, packed, KK_DTYPE_E2M1, N));
    for (int i = 0; i < N; i++)
        assert_int_equal((packed[i / 2] >> (4 * (i & 1))) & 0xF, i * 7 % 16);
    kk_assert_ok(kk_convert_host(packed, KK_DTYPE_E2M1, round, KK_DTYPE_F32, N));
    assert_memory_equal(round, big, N * sizeof *big);
    free(big);
    free(packed);
    free(round);
}

static void bad_arguments(void **state) {
    (void)state;
    float f = 1.0f;
    uint16_t h = 0;
    kk_assert_status(kk_convert_host(NULL, KK_DTYPE_F32, &h, KK_DTYPE_F16, 1),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "src");
    assert_string_equal(kk_last_error()->function, "kk_convert_host");
    kk_assert_status(kk_convert_host(&f, KK_DTYPE_F32, NULL, KK_DTYPE_F16, 1),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "dst");
    kk_assert_ok(kk_convert_host(NULL, KK_DTYPE_F32, NULL, KK_DTYPE_F16, 0)); /* nothing to do */
    kk_assert_status(kk_convert_host(&f, (kk_dtype)-1, &h, KK_DTYPE_F16, 1),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "src_dtype");
    assert_string_equal(kk_last_error()->value, "-1");
    kk_assert_status(kk_convert_host(&f, KK_DTYPE_F32, &h, KK_DTYPE_COUNT, 1),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "dst_dtype");
    kk_assert_status(kk_convert_host(&f, KK_DTYPE_F32, &h, KK_DTYPE_COUNT, 0),
                     KK_ERR_INVALID_ARGUMENT); /* a bad dtype is bad even with nothing to do */
    kk_assert_status(kk_convert_host(&f, KK_DTYPE_F32, &h, KK_DTYPE_F16, SIZE_MAX),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "count");
    assert_int_equal(h, 0); /* nothing written on failure */
}

static int setup(void **state) {
    (void)state;
    build_values();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (size_t k = 0; k < N_FMTS; k++) {
        free(g_fmts[k].values);
        g_fmts[k].values = NULL;
    }
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_parse_bits_bytes),
        cmocka_unit_test(every_encoding_decodes_to_the_formula),
        cmocka_unit_test(every_encoding_round_trips),
        cmocka_unit_test(every_rounding_boundary),
        cmocka_unit_test(saturation_and_overflow),
        cmocka_unit_test(random_sweep_against_reference),
        cmocka_unit_test(f64_and_int32_round_once),
        cmocka_unit_test(every_pair_of_dtypes),
        cmocka_unit_test(integers_saturate),
        cmocka_unit_test(packed_e2m1),
        cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
