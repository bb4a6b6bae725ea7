/* Internal: the `rmsnorm_fp8` op's registry row (src/opdef/rmsnorm_fp8.c) and
 * its CPU kernel (src/cpu/rmsnorm_fp8_cpu.c).
 *
 *   y = x / sqrt(mean(x^2) + eps) * w                      per row, in f32
 *   scale = amax(|y| over a group) / 448   (1 when 0)      f32 [rows, n/group]
 *   q = e4m3(y / scale)                                    [rows, n]
 *
 * RMSNorm fused with the fp8 quantization of its output, as a decoder layer
 * feeds an FP8 GEMM: group 128 gives DeepSeek's 1x128 activation scales,
 * group 0 one scale per row (per token). The scaling is kk_quantize's
 * (src/core/quant_math.h), bit for bit. */
#ifndef KK_OPDEF_RMSNORM_FP8_H
#define KK_OPDEF_RMSNORM_FP8_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { KK__RFP8_ROWS, KK__RFP8_N, KK__RFP8_EPS, KK__RFP8_GROUP, KK__RFP8_DTYPE, KK__RFP8_NPARAMS };

/* Elements per scale: the group, or the whole row for group 0. */
static inline int64_t kk__rmsnorm_fp8_group(const kk_op_params *p) {
    return p->i[KK__RFP8_GROUP] ? p->i[KK__RFP8_GROUP] : p->i[KK__RFP8_N];
}

extern const kk_op kk__op_rmsnorm_fp8;

#ifdef __cplusplus
}
#endif
#endif
