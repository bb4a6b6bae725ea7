/* Internal: the `rope` op's registry row (src/opdef/rope.c) and its CPU kernel
 * (src/cpu/rope_cpu.c): rotary position embedding of x [B, H, S, D] as HF
 * transformers applies it, neox (rotate_half) or gptj (interleaved) pairs,
 * dimensions past rotary_dim copied; positions offset + s, or per token from
 * an int32 pos [B, S] (positions=1); frequencies plain or Llama-3 scaled.
 * The formula: docs/harness.md, "References". */
#ifndef KK_OPDEF_ROPE_H
#define KK_OPDEF_ROPE_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    KK__ROPE_B,
    KK__ROPE_H,
    KK__ROPE_S,
    KK__ROPE_D,
    KK__ROPE_ROTARY,
    KK__ROPE_OFFSET,
    KK__ROPE_THETA,
    KK__ROPE_STYLE,
    KK__ROPE_DTYPE,
    KK__ROPE_POSITIONS,
    KK__ROPE_SCALING,
    KK__ROPE_FACTOR,
    KK__ROPE_LOW,
    KK__ROPE_HIGH,
    KK__ROPE_OLD_LEN,
    KK__ROPE_NPARAMS
};
enum { KK__ROPE_NEOX, KK__ROPE_GPTJ };
enum { KK__ROPE_SCALING_NONE, KK__ROPE_SCALING_LLAMA3 };

extern const kk_op_param kk__rope_params[KK__ROPE_NPARAMS];
kk_status kk__rope_validate(const kk_op_params *p);
/* kk__rope_validate with errors naming op `op` (ops built on rope's params). */
kk_status kk__rope_check(const kk_op_params *p, const char *op);
/* inv_freq[i], i < R/2, in f64: theta^(-2i/R), Llama-3 scaled when
 * scaling=llama3 exactly as HF transformers' _compute_llama3_parameters. */
void kk__rope_inv_freq(const kk_op_params *p, double *inv_freq);
/* The fuzz hook (by parameter name, so rope_kv_append's too). */
void kk__rope_fuzz(kk__rng *r, kk_op_params *p, int big);
/* One row of D in f64: x rotated at position pos into y (the reference). */
void kk__rope_ref_row(const kk_op_params *p, const double *inv_freq, double pos, const double *x,
                      double *y);
int kk__rope_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__rope_flops(const kk_op_params *p);
kk_status kk__rope_reference(const kk_op_params *p, const double *const *in, double *const *out);
/* R: rotary_dim, or D when it is 0. */
int64_t kk__rope_rotary_dim(const kk_op_params *p);

/* Tolerances. Each output is a cos - b sin (or a copy). The angles are exact
 * in the kernel (computed in f64: p * f reaches 1.7e7 rad, and an f32
 * angle is off by up to 1/32 rad at 10^6 rad), cos and sin are rounded to
 * f32 once, and the two products and the sum add about 3u (|a| + |b|):
 * 2e-6 for |x| <= 5 in f32
 * (u = 2^-24), so f32 allows atol 1e-5 (the sum may cancel to near zero) and
 * rtol 1e-5. f16 and bf16 are dominated by the rounding of y and take the
 * float ops' rows (rtol about 4u). Pairs of the other style, or a wrong
 * frequency, move outputs by O(|x|) and fail all three. */
#define KK__ROPE_TOLERANCES KK__ROW_OP_TOLERANCES

extern const kk_op kk__op_rope;

#ifdef __cplusplus
}
#endif
#endif
