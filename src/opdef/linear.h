/* Internal: the `linear` op (src/opdef/linear.c): y = act(x . W^T + bias). */
#ifndef KK_OPDEF_LINEAR_H
#define KK_OPDEF_LINEAR_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    KK__LIN_M,
    KK__LIN_N,
    KK__LIN_K,
    KK__LIN_BIAS,
    KK__LIN_ACT,
    KK__LIN_DTYPE,
    KK__LIN_RESIDUAL,
    KK__LIN_NPARAMS
};
/* Indices into the activation enum's choices. */
enum {
    KK__ACT_NONE,
    KK__ACT_RELU,
    KK__ACT_GELU_ERF,
    KK__ACT_GELU_TANH,
    KK__ACT_SILU,
    KK__ACT_SWIGLU,
    KK__ACT_COUNT
};
int kk__linear_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__linear_flops(const kk_op_params *p);
kk_status kk__linear_reference(const kk_op_params *p, const double *const *in, double *const *out);
kk_status kk__linear_magnitude(const kk_op_params *p, const double *const *in, double *const *out);
/* Where each tensor of a linear case is in kk_op_tensors order (-1: absent). */
typedef struct kk__linear_layout {
    int x, w, w_up, bias, bias_up, residual, y, count;
} kk__linear_layout;
kk__linear_layout kk__linear_layout_of(const kk_op_params *p);
/* The scalar activation (not SwiGLU, which takes two values). */
double kk__activation_f64(int act, double x);
/* Its derivative, exact in double (relu: 0 or 1, 1 at 0), for magnitude hooks. */
double kk__activation_slope_f64(int act, double x);

extern const kk_op kk__op_linear;

#ifdef __cplusplus
}
#endif
#endif
