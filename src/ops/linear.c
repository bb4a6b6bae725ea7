/* kk_linear and kk_swiglu (kernelkit/ops.h): the `linear` op, whose
 * activation parameter covers both. */
#include "core/error.h"
#include "opdef/linear.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("linear");

static const kk__entry_arg dtype_from_x[] = {{KK__LIN_DTYPE, "x"}};

kk_status kk_linear(const kk_tensor *x, const kk_tensor *w, const kk_tensor *bias, kk_tensor *y,
                    kk_activation act, kk_stream stream) {
    if ((int)act < 0 || act >= KK_ACT_COUNT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "linear", "act",
                             "a kk_activation (KK_ACT_NONE .. KK_ACT_SILU; SwiGLU is kk_swiglu)",
                             "%d", (int)act);
    kk_op_params p;
    kk_status st = kk__entry_need("linear", "x", x, 2);
    if (st == KK_OK) st = kk__entry_need("linear", "w", w, 2);
    if (st == KK_OK && bias) st = kk__entry_need("linear", "bias", bias, 1);
    if (st == KK_OK) st = kk__entry_need("linear", "y", y, 2);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__LIN_M] = x->shape[0];
    p.i[KK__LIN_N] = w->shape[0];
    p.i[KK__LIN_K] = x->shape[1];
    p.i[KK__LIN_BIAS] = bias != NULL;
    p.i[KK__LIN_ACT] = act; /* kk_activation's values are the op's first choices */
    p.i[KK__LIN_DTYPE] = x->dtype;
    if (bias)
        return kk__entry_run(&p, (const kk_tensor *[]){x, w, bias, y}, 4, stream, dtype_from_x, 1);
    return kk__entry_run(&p, (const kk_tensor *[]){x, w, y}, 3, stream, dtype_from_x, 1);
}

kk_status kk_swiglu(const kk_tensor *x, const kk_tensor *w_gate, const kk_tensor *w_up,
                    const kk_tensor *bias_gate, const kk_tensor *bias_up, kk_tensor *y,
                    kk_stream stream) {
    if (!bias_gate != !bias_up)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "linear", "bias_gate, bias_up",
                             "both or neither", "%s",
                             bias_gate ? "bias_up NULL" : "bias_gate NULL");
    kk_op_params p;
    kk_status st = kk__entry_need("linear", "x", x, 2);
    if (st == KK_OK) st = kk__entry_need("linear", "w_gate", w_gate, 2);
    if (st == KK_OK) st = kk__entry_need("linear", "w_up", w_up, 2);
    if (st == KK_OK) st = kk__entry_need("linear", "y", y, 2);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__LIN_M] = x->shape[0];
    p.i[KK__LIN_N] = w_gate->shape[0];
    p.i[KK__LIN_K] = x->shape[1];
    p.i[KK__LIN_BIAS] = bias_gate != NULL;
    p.i[KK__LIN_ACT] = KK__ACT_SWIGLU;
    p.i[KK__LIN_DTYPE] = x->dtype;
    if (bias_gate)
        return kk__entry_run(&p, (const kk_tensor *[]){x, w_gate, w_up, bias_gate, bias_up, y}, 6,
                             stream, dtype_from_x, 1);
    return kk__entry_run(&p, (const kk_tensor *[]){x, w_gate, w_up, y}, 4, stream, dtype_from_x, 1);
}

/* Tensors as the op describes them: x, w, [bias], y; swiglu x, w_gate, w_up,
 * [bias_gate, bias_up], y. */
kk_status kk__linear_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    const int bias = (int)p->i[KK__LIN_BIAS];
    if (p->i[KK__LIN_ACT] == KK__ACT_SWIGLU)
        return bias ? kk_swiglu(t[0], t[1], t[2], t[3], t[4], t[5], stream)
                    : kk_swiglu(t[0], t[1], t[2], NULL, NULL, t[3], stream);
    const kk_activation act = (kk_activation)p->i[KK__LIN_ACT];
    return bias ? kk_linear(t[0], t[1], t[2], t[3], act, stream)
                : kk_linear(t[0], t[1], NULL, t[2], act, stream);
}
