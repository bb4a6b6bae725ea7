/* kk_fp8_linear (kernelkit/ops.h): the `fp8_linear` op; the dtype is read off
 * x, the scaling mode and the activation are arguments. */
#include "core/error.h"
#include "opdef/fp8_linear.h"
#include "opdef/linear.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("fp8_linear");

kk_status kk_fp8_linear(const kk_tensor *x, const kk_tensor *w, const kk_tensor *w_scales,
                        const kk_tensor *bias, const kk_tensor *residual, kk_tensor *y,
                        kk_activation act, kk_fp8_scaling scaling, kk_stream stream) {
    static const char *const op = "fp8_linear";
    if (scaling != KK_FP8_SCALING_ROWWISE && scaling != KK_FP8_SCALING_BLOCK)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "scaling",
                             "KK_FP8_SCALING_ROWWISE or KK_FP8_SCALING_BLOCK (1, 2)", "%d",
                             (int)scaling);
    if ((int)act < 0 || act >= KK_ACT_COUNT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "act",
                             "a kk_activation (KK_ACT_NONE .. KK_ACT_SILU)", "%d", (int)act);
    kk_op_params p;
    kk_status st = kk__entry_need(op, "x", x, 2);
    if (st == KK_OK) st = kk__entry_need(op, "w", w, 2);
    if (st == KK_OK) st = kk__entry_need(op, "w_scales", w_scales, -1); /* kk_op_run checks */
    if (st == KK_OK && bias) st = kk__entry_need(op, "bias", bias, 1);
    if (st == KK_OK && residual) st = kk__entry_need(op, "residual", residual, 2);
    if (st == KK_OK) st = kk__entry_need(op, "y", y, 2);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__FL_M] = x->shape[0];
    p.i[KK__FL_N] = w->shape[0];
    p.i[KK__FL_K] = x->shape[1];
    p.i[KK__FL_BIAS] = bias != NULL;
    p.i[KK__FL_ACT] = act; /* kk_activation's values are the op's choices */
    p.i[KK__FL_DTYPE] = x->dtype;
    p.i[KK__FL_RESIDUAL] = residual != NULL;
    p.i[KK__FL_SCALING] = scaling == KK_FP8_SCALING_BLOCK;
    const kk__fp8_linear_layout l = kk__fp8_linear_layout_of(&p);
    const kk_tensor *t[KK_OP_MAX_TENSORS] = {0};
    t[l.x] = x;
    t[l.w] = w;
    t[l.w_scales] = w_scales;
    if (l.bias >= 0) t[l.bias] = bias;
    if (l.residual >= 0) t[l.residual] = residual;
    t[l.y] = y;
    static const kk__entry_arg args[] = {{KK__FL_DTYPE, "x"}};
    return kk__entry_run(&p, t, l.count, stream, args, 1);
}

/* Tensors as the op describes them (kk__fp8_linear_layout_of). */
kk_status kk__fp8_linear_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    const kk__fp8_linear_layout l = kk__fp8_linear_layout_of(p);
    return kk_fp8_linear(
        t[l.x], t[l.w], t[l.w_scales], l.bias >= 0 ? t[l.bias] : NULL,
        l.residual >= 0 ? t[l.residual] : NULL, t[l.y], (kk_activation)p->i[KK__FL_ACT],
        kk__fp8_linear_scaling(p) == KK__FP8_BLOCK ? KK_FP8_SCALING_BLOCK : KK_FP8_SCALING_ROWWISE,
        stream);
}
