/* The checker: an output buffer (any dtype) against its float64 reference,
 * and the poison that makes an element a kernel never wrote fail the check.
 * Every element is decoded exactly to f64, so one comparison serves every
 * dtype; non-finite values are handled before any arithmetic, so "NaN never
 * passes" holds whatever the criteria. docs/harness.md, "Checking". */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kernelkit/harness.h"

static double load(const void *buf, kk_dtype dt, size_t i) {
    const uint8_t *u8 = buf;
    switch (dt) {
    case KK_DTYPE_F64: return ((const double *)buf)[i];
    case KK_DTYPE_F32: return ((const float *)buf)[i];
    case KK_DTYPE_F16: return kk_f16_to_f32(((const uint16_t *)buf)[i]);
    case KK_DTYPE_BF16: return kk_bf16_to_f32(((const uint16_t *)buf)[i]);
    case KK_DTYPE_FP8_E4M3: return kk_e4m3_to_f32(u8[i]);
    case KK_DTYPE_FP8_E5M2: return kk_e5m2_to_f32(u8[i]);
    case KK_DTYPE_E2M1: return kk_e2m1_to_f32((uint8_t)(u8[i / 2] >> (4 * (i % 2))));
    case KK_DTYPE_INT8: return ((const int8_t *)buf)[i];
    case KK_DTYPE_UINT8: return u8[i];
    case KK_DTYPE_INT32: return ((const int32_t *)buf)[i];
    default: return NAN;
    }
}

static kk_status check_args(const void *out, kk_dtype dtype, const double *ref, size_t count,
                            const kk_tolerance *tol, const kk_check_result *result) {
    kk_status st = KK__CHECK_NOT_NULL(tol);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(result);
    if (st == KK_OK && count > 0) st = KK__CHECK_NOT_NULL(out);
    if (st == KK_OK && count > 0) st = KK__CHECK_NOT_NULL(ref);
    if (st != KK_OK) return st;
    if ((int)dtype < 0 || dtype >= KK_DTYPE_COUNT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_check_output", "dtype",
                             "a kk_dtype value", "%d", (int)dtype);
    if (!(tol->atol >= 0.0 && tol->rtol >= 0.0 && tol->l2 >= 0.0 && tol->acc >= 0.0))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_check_output", "tol",
                             "atol, rtol, l2 and acc >= 0", "atol %g rtol %g l2 %g acc %g",
                             tol->atol, tol->rtol, tol->l2, tol->acc);
    if (!(tol->criteria & (KK_CHECK_ELEMENTWISE | KK_CHECK_L2)))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_check_output", "tol->criteria",
                             "KK_CHECK_ELEMENTWISE and/or KK_CHECK_L2", "%u", tol->criteria);
    return KK_OK;
}

/* The NaN rule for a pair where ref or out is not finite: 1 when it passes. */
static int nonfinite_ok(double out, double ref, unsigned flags) {
    if (isfinite(ref)) return 0; /* out is NaN or inf where a number was due */
    if (!(flags & KK_CHECK_ALLOW_NONFINITE)) return 0;
    if (isnan(ref)) return isnan(out);
    return out == ref; /* the same infinity */
}

static void mark_bad(kk_check_result *r, size_t i, double out, double ref) {
    if (r->bad_count++ == 0) {
        r->first_bad = (int64_t)i;
        r->first_bad_out = out;
        r->first_bad_ref = ref;
    }
}

/* A 2-norm accumulated as scale * sqrt(ssq), as LAPACK's dnrm2 does, so that
 * neither tiny values (1e-300 squared is 0) nor huge ones overflow. */
typedef struct norm2 {
    double scale, ssq;
} norm2;

static void norm2_add(norm2 *n, double x) {
    x = fabs(x);
    if (x == 0.0) return;
    if (x > n->scale) {
        const double r = n->scale / x;
        n->ssq = 1.0 + n->ssq * r * r;
        n->scale = x;
    } else {
        const double r = x / n->scale;
        n->ssq += r * r;
    }
}

static double norm2_value(const norm2 *n) { return n->scale * sqrt(n->ssq); }

/* The spacing of the dtype's subnormals (its smallest positive value). */
/* f32 and bf16 share f32's exponent range, below whose smallest normal
 * (2^-126) kernels keep no relative accuracy: they flush subnormal
 * intermediates (CUDA's fast division and exponential) or keep them out of
 * that range on purpose (the CPU's clamped e^x: a SiLU or tanh-GELU of
 * x < -10 is x / e^88, about 1e-37, where the true value is 1e-43). Their
 * floor is 16 smallest normals; 0 for the others. */
static double normal_floor(kk_dtype dt) {
    return dt == KK_DTYPE_F32 || dt == KK_DTYPE_BF16 ? ldexp(1.0, -122) : 0.0;
}

static double subnormal_step(kk_dtype dt) {
    switch (dt) {
    case KK_DTYPE_F16: return ldexp(1.0, -24);
    case KK_DTYPE_BF16: return ldexp(1.0, -133);
    case KK_DTYPE_F32: return ldexp(1.0, -149);
    case KK_DTYPE_FP8_E4M3: return ldexp(1.0, -9);
    case KK_DTYPE_FP8_E5M2: return ldexp(1.0, -16);
    case KK_DTYPE_E2M1: return 0.5;
    default: return 0.0; /* f64 (its subnormals are far below any reference) and integers */
    }
}

/* Norms of out - ref and of ref, for the relative L2 error. */
typedef struct l2_sums {
    norm2 diff, ref;
} l2_sums;

/* mag: the element's magnitude, or NULL when none (the rule is then exactly
 * atol + rtol*|ref|, with no term added). */
static void compare_one(kk_check_result *r, l2_sums *s, size_t i, double out, double ref,
                        const double *mag) {
    const kk_tolerance *t = &r->tol;
    if (!isfinite(out) || !isfinite(ref)) {
        if (nonfinite_ok(out, ref, t->flags)) return;
        r->nonfinite_count++;
        mark_bad(r, i, out, ref);
        return;
    }
    const double err = fabs(out - ref);
    const double rel = err / fmax(fabs(ref), KK_CHECK_REL_TINY);
    if (err > r->max_abs_err) {
        r->max_abs_err = err;
        r->max_abs_index = i;
    }
    r->max_rel_err = rel > r->max_rel_err ? rel : r->max_rel_err;
    norm2_add(&s->diff, err);
    norm2_add(&s->ref, ref);
    double bound = t->atol + t->rtol * fabs(ref);
    if (mag) bound += t->acc * *mag; /* a NaN magnitude fails the element */
    if (!(err <= bound)) mark_bad(r, i, out, ref);
}

kk_status kk_check_output(const void *out, kk_dtype dtype, const double *ref, size_t count,
                          const kk_tolerance *tol, kk_check_result *result) {
    return kk_check_output_scaled(out, dtype, ref, NULL, count, tol, result);
}

kk_status kk_check_output_scaled(const void *out, kk_dtype dtype, const double *ref,
                                 const double *mag, size_t count, const kk_tolerance *tol,
                                 kk_check_result *result) {
    kk_status st = check_args(out, dtype, ref, count, tol, result);
    if (st != KK_OK) return st;
    kk_check_result *r = result;
    memset(r, 0, sizeof *r);
    r->tol = *tol;
    if (tol->acc == 0.0) mag = NULL;
    if (!mag) r->tol.acc = 0.0; /* what was applied */
    r->count = count;
    r->first_bad = -1;
    l2_sums s = {{0.0, 0.0}, {0.0, 0.0}};
    norm2 mag_norm = {0.0, 0.0};
    for (size_t i = 0; i < count; i++) {
        compare_one(r, &s, i, load(out, dtype, i), ref[i], mag ? &mag[i] : NULL);
        if (mag) norm2_add(&mag_norm, mag[i]);
    }
    const double diff = norm2_value(&s.diff), norm = norm2_value(&s.ref);
    if (norm > 0.0)
        r->rel_l2_err = diff / norm;
    else /* a zero reference: only an exact zero output has no relative error */
        r->rel_l2_err = diff == 0.0 ? 0.0 : INFINITY;
    if (r->nonfinite_count > 0) { /* no metric may look good when NaN got through */
        r->max_abs_err = r->max_rel_err = r->rel_l2_err = INFINITY;
        r->max_abs_index = (size_t)r->first_bad;
    }
    const int elem_ok = !(tol->criteria & KK_CHECK_ELEMENTWISE) || r->bad_count == 0;
    /* No dtype rounds finer than half its subnormal spacing: outputs whose
     * norm lies among the subnormals (a lone f16 of 3e-6) are held to that
     * floor, not to a relative error their dtype cannot reach. */
    /* With a magnitude, the accumulation bound in norm form, acc * ||m||, is
     * allowed too: outputs that cancel (|ref| << m) have an error of the
     * accumulation's size, which no relative measure of ||ref|| can hold (a
     * lone f32 GEMM output of 4e-3 from terms summing to 35 in absolute
     * value). Where nothing cancels, ||m|| is ||ref|| times far less than
     * 1 / acc and the relative limit decides. */
    const double floor_l2 =
        sqrt((double)count) * fmax(0.5 * subnormal_step(dtype), normal_floor(dtype)) +
        (mag ? tol->acc * norm2_value(&mag_norm) : 0.0);
    const int l2_ok = !(tol->criteria & KK_CHECK_L2) || r->rel_l2_err <= tol->l2 ||
                      (r->nonfinite_count == 0 && diff <= tol->l2 * norm + floor_l2);
    r->pass = r->nonfinite_count == 0 && elem_ok && l2_ok;
    return KK_OK;
}

kk_status kk_check_result_format(const kk_check_result *r, char *buf, size_t size) {
    kk_status st = KK__CHECK_NOT_NULL(r);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(buf);
    if (st != KK_OK) return st;
    if (size == 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "size", "at least 1", "0");
    char acc[40] = ""; /* only when a magnitude was applied: other ops' lines are unchanged */
    if (r->tol.acc > 0.0) snprintf(acc, sizeof acc, " acc %g*mag", r->tol.acc);
    int n = snprintf(buf, size, "%s", r->pass ? "PASS" : "FAIL");
    if (r->bad_count > 0 && n >= 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n,
                      ": %zu of %zu bad (%zu non-finite), first at [%lld]: out %.9g ref %.9g",
                      r->bad_count, r->count, r->nonfinite_count, (long long)r->first_bad,
                      r->first_bad_out, r->first_bad_ref);
    if (n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n,
                 "; max abs %.3g at [%zu], max rel %.3g, rel L2 %.3g (atol %g rtol %g%s l2 %g%s%s)",
                 r->max_abs_err, r->max_abs_index, r->max_rel_err, r->rel_l2_err, r->tol.atol,
                 r->tol.rtol, acc, r->tol.l2,
                 r->tol.criteria & KK_CHECK_ELEMENTWISE ? ", elementwise" : "",
                 r->tol.criteria & KK_CHECK_L2 ? ", L2" : "");
    return KK_OK;
}

/* ---- poison ---- */

static void put_nibble(uint8_t *b, size_t i, unsigned v) {
    const unsigned shift = 4u * (unsigned)(i % 2);
    b[i / 2] = (uint8_t)((b[i / 2] & ~(0xFu << shift)) | ((v & 0xFu) << shift));
}

/* The poison of each dtype, variant 0 / 1: NaN where the dtype has one. */
static uint64_t poison_bits(kk_dtype dt, int v) {
    switch (dt) {
    case KK_DTYPE_F64: return v ? 0xFFF8DEADBEEF0002ull : 0x7FF8DEADBEEF0001ull;
    case KK_DTYPE_F32: return v ? 0xFFC0BEEFu : 0x7FC0DEADu;
    case KK_DTYPE_F16: return v ? 0xFE02u : 0x7E01u;
    case KK_DTYPE_BF16: return v ? 0xFFC2u : 0x7FC1u;
    case KK_DTYPE_FP8_E4M3: return v ? 0xFFu : 0x7Fu;
    case KK_DTYPE_FP8_E5M2: return v ? 0xFEu : 0x7Fu;
    case KK_DTYPE_E2M1: return v ? 0xFu : 0x7u; /* -6 / +6: no NaN */
    case KK_DTYPE_INT8: return v ? 0x7Fu : 0x80u;
    case KK_DTYPE_UINT8: return v ? 0x5Au : 0xA5u;
    default: return v ? 0x7FFFFFFFu : 0x80000000u; /* int32 */
    }
}

/* Stores go through memcpy: the caller's buffer may be declared as any type. */
static void poison_fill(void *buf, kk_dtype dt, size_t count, int v) {
    uint8_t *b = buf;
    const uint64_t bits = poison_bits(dt, v);
    const uint32_t b32 = (uint32_t)bits;
    const uint16_t b16 = (uint16_t)bits;
    switch (kk_dtype_bits(dt)) {
    case 64:
        for (size_t i = 0; i < count; i++) memcpy(b + 8 * i, &bits, 8);
        break;
    case 32:
        for (size_t i = 0; i < count; i++) memcpy(b + 4 * i, &b32, 4);
        break;
    case 16:
        for (size_t i = 0; i < count; i++) memcpy(b + 2 * i, &b16, 2);
        break;
    case 8: memset(b, (int)bits, count); break;
    default:
        for (size_t i = 0; i < count; i++) put_nibble(b, i, (unsigned)bits);
        break;
    }
}

static kk_status poison_args(const char *func, const char *name, const void *buf, kk_dtype dtype,
                             size_t count) {
    if (count > 0 && !buf)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name, "a non-NULL pointer", "NULL");
    if ((int)dtype < 0 || dtype >= KK_DTYPE_COUNT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dtype", "a kk_dtype value", "%d",
                             (int)dtype);
    return KK_OK;
}

kk_status kk_poison(void *buf, kk_dtype dtype, size_t count, int variant) {
    kk_status st = poison_args(__func__, "buf", buf, dtype, count);
    if (st != KK_OK) return st;
    if (variant != 0 && variant != 1)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "variant", "0 or 1", "%d", variant);
    poison_fill(buf, dtype, count, variant);
    return KK_OK;
}

/* Element i's bits (e2m1: its nibble) as an integer. */
static uint64_t element_bits(const void *buf, kk_dtype dt, size_t i) {
    const uint8_t *b = buf;
    if (dt == KK_DTYPE_E2M1) return (b[i / 2] >> (4 * (i % 2))) & 0xFu;
    const size_t size = (size_t)kk_dtype_bits(dt) / 8;
    uint64_t v = 0;
    memcpy(&v, b + i * size, size);
    return v;
}

kk_status kk_poison_compare(const void *run0, const void *run1, kk_dtype dtype, size_t count,
                            size_t *differ, int64_t *first) {
    kk_status st = poison_args(__func__, "run0", run0, dtype, count);
    if (st == KK_OK) st = poison_args(__func__, "run1", run1, dtype, count);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(differ);
    if (st != KK_OK) return st;
    *differ = 0;
    if (first) *first = -1;
    for (size_t i = 0; i < count; i++)
        if (element_bits(run0, dtype, i) != element_bits(run1, dtype, i)) {
            if (*differ == 0 && first) *first = (int64_t)i;
            (*differ)++;
        }
    return KK_OK;
}
