/* Internal: the `silu_mul` op's registry row (src/opdef/silu_mul.c) and its
 * CPU kernel (src/cpu/silu_mul_cpu.c).
 *
 *   y[m,j] = silu(g[m,j]) * u[m,j],  silu(v) = v / (1 + exp(-v))
 *
 * The SwiGLU of an MLP after its gate and up projections (kk_swiglu is the
 * fused Linear that includes them). g and u are either one packed tensor
 * gu [M, 2N] (packed=1: each row's first N columns are g, the last N u: the
 * output of a fused gate_up projection) or two tensors [M, N]. */
#ifndef KK_OPDEF_SILU_MUL_H
#define KK_OPDEF_SILU_MUL_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { KK__SILU_M, KK__SILU_N, KK__SILU_PACKED, KK__SILU_DTYPE, KK__SILU_NPARAMS };

extern const kk_op kk__op_silu_mul;

#ifdef __cplusplus
}
#endif
#endif
