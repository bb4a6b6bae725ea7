/* Internal: the `fp8_linear` op (src/opdef/fp8_linear.c): linear with FP8
 * compute, y = act(dequant(quant(x)) . dequant(Wq)^T + bias) [+ r].
 *
 * Why an op of its own rather than a `compute=fp8` parameter of `linear`: the
 * weights are different tensors (fp8 e4m3 codes and their f32 scales, made
 * once ahead by kk_quantize), so every tensor list, reference and kernel of
 * linear would have to branch on the parameter; as its own row the op says
 * exactly what it takes, and linear's rows (and its bf16 weights) stay as
 * they are. The activation is quantized inside the op, exactly as kk_quantize
 * would (bit-identical codes and scales): per token (scaling=rowwise: one
 * scale per row of x, kk_quantize's per-tensor rule on each row; W with one
 * scale per output channel) or per 1x128 group (scaling=block: KK_SCALE_1X128
 * of x; W in 128x128 blocks, KK_SCALE_128X128), DeepSeek-V3's. */
#ifndef KK_OPDEF_FP8_LINEAR_H
#define KK_OPDEF_FP8_LINEAR_H

#include "opdef/fp8_gemm.h"
#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    KK__FL_M,
    KK__FL_N,
    KK__FL_K,
    KK__FL_BIAS,
    KK__FL_ACT, /* linear's KK__ACT_* (none .. silu; no swiglu) */
    KK__FL_DTYPE,
    KK__FL_RESIDUAL,
    KK__FL_SCALING, /* index into "rowwise", "block" */
    KK__FL_NPARAMS
};

/* The fp8_gemm scaling (KK__FP8_ROWWISE or KK__FP8_BLOCK) of the op's `scaling`. */
static inline int kk__fp8_linear_scaling(const kk_op_params *p) {
    return p->i[KK__FL_SCALING] ? KK__FP8_BLOCK : KK__FP8_ROWWISE;
}

/* 1 for block scaling, 0 for rowwise. */
static inline int kk__fp8_linear_block(const kk_op_params *p) { return p->i[KK__FL_SCALING] != 0; }

/* Scales per row of x: 1 (rowwise) or ceil(K/128) (block). */
static inline int64_t kk__fp8_linear_x_groups(const kk_op_params *p) {
    return p->i[KK__FL_SCALING] ? kk__fp8_groups(p->i[KK__FL_K]) : 1;
}

/* Where each tensor is in kk_op_tensors order (-1: absent). */
typedef struct kk__fp8_linear_layout {
    int x, w, w_scales, bias, residual, y, count;
} kk__fp8_linear_layout;
kk__fp8_linear_layout kk__fp8_linear_layout_of(const kk_op_params *p);

extern const kk_op kk__op_fp8_linear;

#ifdef __cplusplus
}
#endif
#endif
