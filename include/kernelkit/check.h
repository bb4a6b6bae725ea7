/* The correctness checker: compare a kernel's output with the float64
 * reference of its op (kernelkit/op.h) under the op's tolerances, and poison
 * outputs before a kernel runs so that an unwritten element cannot pass.
 *
 *   kk_poison(o, dtype, count, 0);      // before the kernel runs
 *   ... run the kernel, kk_op_reference(&p, in, ref) ...
 *   kk_tolerance tol;
 *   kk_op_tolerance(op, dtype, &tol);
 *   kk_check_result r;
 *   kk_check_output(o, dtype, ref[0], count, &tol, &r);   // r.pass
 *
 * A check that ran reports pass/fail in its result, not in the status. */
#ifndef KERNELKIT_CHECK_H
#define KERNELKIT_CHECK_H

#include "kernelkit/op.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kk_check_result {
    int pass;
    size_t count;           /* elements compared */
    double max_abs_err;     /* max |out - ref| (+inf when a non-finite mismatch) */
    size_t max_abs_index;   /* where max_abs_err is */
    double max_rel_err;     /* max |out - ref| / max(|ref|, KK_CHECK_REL_TINY) */
    double rel_l2_err;      /* ||out - ref|| / ||ref||; 0 or +inf when ||ref|| = 0 */
    size_t bad_count;       /* elements breaking the elementwise rule or the NaN rule */
    size_t nonfinite_count; /* of those: NaN/inf mismatches (poison that survived...) */
    int64_t first_bad;      /* flat index of the first bad element; -1 when none */
    double first_bad_out, first_bad_ref;
    kk_tolerance tol; /* what was applied */
} kk_check_result;

/* The floor of the denominator of the relative error: it only avoids a
 * division by zero, so an output that should be 0 and is not shows a huge
 * relative error, as it should. */
#define KK_CHECK_REL_TINY 1e-30

/* ---- checking ---- */

/* Compare `count` elements of `out` (any dtype, decoded exactly to f64; packed
 * e2m1 two per byte, low nibble first) with the reference: elementwise
 * |out - ref| <= atol + rtol*|ref| (tol->acc is not applied: no magnitude). The NaN rule: an
 * out that is NaN or infinite where ref is finite never passes; a non-finite
 * ref passes only with KK_CHECK_ALLOW_NONFINITE and a matching out.
 * pass = no NaN-rule failure, and every criterion of tol->criteria holds.
 * Errors (KK_ERR_INVALID_ARGUMENT): NULL pointers, a bad dtype, a negative or
 * NaN tolerance, criteria with neither bit. */
KK_API kk_status kk_check_output(const void *out, kk_dtype dtype, const double *ref, size_t count,
                                 const kk_tolerance *tol, kk_check_result *result);

/* kk_check_output with the op's per-element error scale (kk_op_magnitude):
 * the elementwise rule becomes |out - ref| <= atol + rtol*|ref| + acc*mag[i].
 * mag NULL (or tol->acc 0) is kk_check_output exactly; result->tol.acc is then
 * 0, what was applied. Errors as kk_check_output, and a negative or NaN acc. */
KK_API kk_status kk_check_output_scaled(const void *out, kk_dtype dtype, const double *ref,
                                        const double *mag, size_t count, const kk_tolerance *tol,
                                        kk_check_result *result);

/* One line: "PASS ..." or "FAIL: 3 of 1024 bad, first at [17]: out 1.5 ref 1.25; ...". */
KK_API kk_status kk_check_result_format(const kk_check_result *r, char *buf, size_t size);

/* Fill `count` elements with poison (variant 0 or 1, two different patterns):
 * NaN for f64/f32/f16/bf16 (0x7F / 0xFF for e4m3, 0x7F / 0xFE for e5m2), so an
 * unwritten element fails the check at once. e2m1 and the integer types have
 * no NaN: they get +6 / -6 (e2m1), 0x80 / 0x7F (int8), 0xA5 / 0x5A (uint8),
 * INT32_MIN / INT32_MAX (int32); an unwritten element is then found by running
 * twice with the two variants and comparing (kk_poison_compare). For e2m1 the
 * other nibble of a shared last byte is kept. */
KK_API kk_status kk_poison(void *buf, kk_dtype dtype, size_t count, int variant);

/* Elements whose bits differ between two runs (poisoned with variants 0 and 1):
 * their count, and the first one's index (-1 when none). */
KK_API kk_status kk_poison_compare(const void *run0, const void *run1, kk_dtype dtype, size_t count,
                                   size_t *differ, int64_t *first);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_CHECK_H */
