/* kk_linear and kk_swiglu (kernelkit/ops.h): the `linear` op, whose
 * activation parameter covers both. */
#include "core/error.h"
#include "opdef/linear.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("linear");

static const kk__entry_arg dtype_from_x[] = {{KK__LIN_DTYPE, "x"}};

/* Every form of the op: the checks the entry points share, the parameters by
 * index and the tensors in kk__linear_layout_of's order. */
static kk_status linear_run(const kk_tensor *x, const kk_tensor *w, const kk_tensor *w_up,
                            const kk_tensor *bias, const kk_tensor *bias_up,
                            const kk_tensor *residual, kk_tensor *y, int act, kk_stream stream) {
    const int glu = act == KK__ACT_SWIGLU;
    kk_op_params p;
    kk_status st = kk__entry_need("linear", "x", x, 2);
    if (st == KK_OK) st = kk__entry_need("linear", glu ? "w_gate" : "w", w, 2);
    if (st == KK_OK && glu) st = kk__entry_need("linear", "w_up", w_up, 2);
    if (st == KK_OK && bias) st = kk__entry_need("linear", glu ? "bias_gate" : "bias", bias, 1);
    if (st == KK_OK && residual) st = kk__entry_need("linear", "residual", residual, 2);
    if (st == KK_OK) st = kk__entry_need("linear", "y", y, 2);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__LIN_M] = x->shape[0];
    p.i[KK__LIN_N] = w->shape[0];
    p.i[KK__LIN_K] = x->shape[1];
    p.i[KK__LIN_BIAS] = bias != NULL;
    p.i[KK__LIN_ACT] = act;
    p.i[KK__LIN_DTYPE] = x->dtype;
    p.i[KK__LIN_RESIDUAL] = residual != NULL;
    const kk__linear_layout l = kk__linear_layout_of(&p);
    const kk_tensor *t[KK_OP_MAX_TENSORS] = {0};
    t[l.x] = x;
    t[l.w] = w;
    if (l.w_up >= 0) t[l.w_up] = w_up;
    if (l.bias >= 0) t[l.bias] = bias;
    if (l.bias_up >= 0) t[l.bias_up] = bias_up;
    if (l.residual >= 0) t[l.residual] = residual;
    t[l.y] = y;
    return kk__entry_run(&p, t, l.count, stream, dtype_from_x, 1);
}

static kk_status check_act(kk_activation act) {
    if ((int)act >= 0 && act < KK_ACT_COUNT) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "linear", "act",
                         "a kk_activation (KK_ACT_NONE .. KK_ACT_SILU; SwiGLU is kk_swiglu)", "%d",
                         (int)act);
}

kk_status kk_linear(const kk_tensor *x, const kk_tensor *w, const kk_tensor *bias, kk_tensor *y,
                    kk_activation act, kk_stream stream) {
    kk_status st = check_act(act);
    /* kk_activation's values are the op's first choices */
    return st ? st : linear_run(x, w, NULL, bias, NULL, NULL, y, (int)act, stream);
}

kk_status kk_linear_residual(const kk_tensor *x, const kk_tensor *w, const kk_tensor *bias,
                             const kk_tensor *residual, kk_tensor *y, kk_activation act,
                             kk_stream stream) {
    kk_status st = check_act(act);
    if (st == KK_OK && !residual)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, "linear", "residual", "a tensor (or kk_linear)",
                           "NULL");
    return st ? st : linear_run(x, w, NULL, bias, NULL, residual, y, (int)act, stream);
}

kk_status kk_swiglu(const kk_tensor *x, const kk_tensor *w_gate, const kk_tensor *w_up,
                    const kk_tensor *bias_gate, const kk_tensor *bias_up, kk_tensor *y,
                    kk_stream stream) {
    if (!bias_gate != !bias_up)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "linear", "bias_gate, bias_up",
                             "both or neither", "%s",
                             bias_gate ? "bias_up NULL" : "bias_gate NULL");
    return linear_run(x, w_gate, w_up, bias_gate, bias_up, NULL, y, KK__ACT_SWIGLU, stream);
}

/* Tensors as the op describes them (kk__linear_layout_of). */
kk_status kk__linear_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    const kk__linear_layout l = kk__linear_layout_of(p);
    const int act = (int)p->i[KK__LIN_ACT];
    const kk_tensor *bias = l.bias >= 0 ? t[l.bias] : NULL;
    if (act == KK__ACT_SWIGLU && l.residual < 0)
        return kk_swiglu(t[l.x], t[l.w], t[l.w_up], bias, l.bias_up >= 0 ? t[l.bias_up] : NULL,
                         t[l.y], stream);
    if (l.residual >= 0 && act != KK__ACT_SWIGLU)
        return kk_linear_residual(t[l.x], t[l.w], bias, t[l.residual], t[l.y], (kk_activation)act,
                                  stream);
    if (l.residual < 0) return kk_linear(t[l.x], t[l.w], bias, t[l.y], (kk_activation)act, stream);
    /* swiglu with a residual has no typed entry point of its own */
    return linear_run(t[l.x], t[l.w], t[l.w_up], bias, l.bias_up >= 0 ? t[l.bias_up] : NULL,
                      t[l.residual], t[l.y], act, stream);
}
