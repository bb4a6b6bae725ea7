/* Internal: the `rope_kv_append` op's registry row (src/opdef/rope_kv_append.c)
 * and its CPU kernel (src/cpu/rope_kv_append_cpu.c): a decode step's
 * bookkeeping. Token s of sequence b sits at position cache_seqlens[b] + s;
 * q is rotated into q_out, and k (rotated, as rope) and v (as is) are written
 * to rows cache_seqlens[b] + s of the caches [B, Hkv, S_max, D]. The registry
 * has no in-out tensor, so the caches are inputs (k_cache_in, v_cache_in) and
 * outputs (k_cache, v_cache) equal to them but for the appended rows; the
 * kernel copies in to out when they are two buffers and only appends when
 * they are one (kk_rope_kv_append passes one). */
#ifndef KK_OPDEF_ROPE_KV_APPEND_H
#define KK_OPDEF_ROPE_KV_APPEND_H

#include "opdef/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    KK__RKV_B,
    KK__RKV_HQ,
    KK__RKV_HKV,
    KK__RKV_S,
    KK__RKV_SMAX,
    KK__RKV_D,
    KK__RKV_ROTARY,
    KK__RKV_THETA,
    KK__RKV_STYLE,
    KK__RKV_DTYPE,
    KK__RKV_SCALING,
    KK__RKV_FACTOR,
    KK__RKV_LOW,
    KK__RKV_HIGH,
    KK__RKV_OLD_LEN,
    KK__RKV_NPARAMS
};
/* The tensors, in kk_op_tensors order. */
enum {
    KK__RKV_T_Q,
    KK__RKV_T_K,
    KK__RKV_T_V,
    KK__RKV_T_LENS,
    KK__RKV_T_KC_IN,
    KK__RKV_T_VC_IN,
    KK__RKV_T_Q_OUT,
    KK__RKV_T_KC,
    KK__RKV_T_VC,
    KK__RKV_NTENSORS
};

extern const kk_op_param kk__rope_kv_append_params[KK__RKV_NPARAMS];
/* The `rope` op's parameters of this rotation (H = Hq, positions = 1), for
 * rope's reference row, frequencies and CPU table. */
void kk__rope_kv_append_rope_params(const kk_op_params *p, kk_op_params *rope);
/* KK_OK when sequence b's length len leaves room for S rows; otherwise the
 * error naming cache_seqlens[b]. */
kk_status kk__rope_kv_append_check_len(const kk_op_params *p, int64_t b, int64_t len);

/* Tolerances: rope's (each appended or q_out element is one rotation; the
 * copied rows are exact). */
#define KK__ROPE_KV_APPEND_TOLERANCES KK__ROW_OP_TOLERANCES

extern const kk_op kk__op_rope_kv_append;

#ifdef __cplusplus
}
#endif
#endif
