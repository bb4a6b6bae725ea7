/* Internal: f32 views of f32/f16/bf16 rows for the row-wise CPU kernels
 * (rmsnorm, layernorm, softmax, rope). A row is walked in chunks loaded into a
 * small f32 array on the stack, so nothing is allocated, the chunk stays in L1
 * and every inner loop vectorizes whatever the dtype (bf16 and f16 decoded
 * inline). docs/backends/cpu.md, "Norms, softmax, rotary embeddings". */
#ifndef KK_CPU_ROWS_H
#define KK_CPU_ROWS_H

#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "kernelkit/dtype.h"
#include "opdef/opdef.h"
#include "kernelkit/tensor.h"

#define KK__ROW_CHUNK 256

static inline float kk__bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t kk__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Exact: bf16 is the top half of an f32. */
static inline float kk__bf16_f32(uint16_t h) { return kk__bits_f32((uint32_t)h << 16); }

/* Round to nearest even; NaN stays a (quiet) NaN. The same bits as
 * kk_f32_to_bf16. */
static inline uint16_t kk__f32_bf16(float f) {
    const uint32_t u = kk__f32_bits(f);
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const int nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    return (uint16_t)(nan ? (u >> 16) | 0x40u : rounded);
}

/* Exact, branch-free (so it vectorizes): the exponent is re-biased by a
 * multiplication, which also normalizes subnormals; inf/NaN are fixed up. */
static inline float kk__f16_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t mag = (uint32_t)(h & 0x7FFFu) << 13;
    const float scaled = kk__bits_f32(mag) * 0x1p112f;                  /* 2^(127-15) */
    const uint32_t special = 0u - (uint32_t)((h & 0x7C00u) == 0x7C00u); /* all ones or 0 */
    const uint32_t bits = (special & (mag | 0x7F800000u)) | (~special & kk__f32_bits(scaled));
    return kk__bits_f32(bits | sign);
}

/* Elements [at, at + m) of a row of dtype dt into f[0..m). */
static inline void kk__row_load(const void *src, kk_dtype dt, int64_t at, float *f, int m) {
    if (dt == KK_DTYPE_F32) {
        memcpy(f, (const float *)src + at, (size_t)m * sizeof(float));
    } else if (dt == KK_DTYPE_BF16) {
        const uint16_t *s = (const uint16_t *)src + at;
        for (int i = 0; i < m; i++) f[i] = kk__bf16_f32(s[i]);
    } else {
        const uint16_t *s = (const uint16_t *)src + at;
        for (int i = 0; i < m; i++) f[i] = kk__f16_f32(s[i]);
    }
}

/* f[0..m) rounded to dt into elements [at, at + m) of dst. */
static inline void kk__row_store(void *dst, kk_dtype dt, int64_t at, const float *f, int m) {
    if (dt == KK_DTYPE_F32) {
        memcpy((float *)dst + at, f, (size_t)m * sizeof(float));
    } else if (dt == KK_DTYPE_BF16) {
        uint16_t *d = (uint16_t *)dst + at;
        for (int i = 0; i < m; i++) d[i] = kk__f32_bf16(f[i]);
    } else {
        uint16_t *d = (uint16_t *)dst + at;
        for (int i = 0; i < m; i++) d[i] = kk_f32_to_f16(f[i]);
    }
}

/* Chunk length at `at` of a row of n elements. */
static inline int kk__row_chunk(int64_t n, int64_t at) {
    return n - at < KK__ROW_CHUNK ? (int)(n - at) : KK__ROW_CHUNK;
}

/* What a kernel slot checks before it touches memory: the tensors are what
 * the parameters describe, on the CPU. kk_op_run has checked all of this; a
 * harness bug must still not turn into a wild write. */
static inline kk_status kk__cpu_check_tensors(const kk_op_params *p, kk_tensor *const *t) {
    if (!p || !p->op)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk__cpu_check_tensors", "p",
                             "parameters of a registered op", "%s", p ? "no op" : "NULL");
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    const int n = p->op->describe(p, d);
    for (int k = 0; k < n; k++)
        if (!t || !t[k] || t[k]->dtype != d[k].dtype || kk_tensor_numel(t[k]) != d[k].numel ||
            !kk_tensor_is_contiguous(t[k]) || t[k]->device_kind != KK_BACKEND_CPU)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, p->op->name, d[k].name,
                                 "a contiguous CPU tensor of the described dtype and size", "%s",
                                 t && t[k] ? kk_dtype_name(t[k]->dtype) : "NULL");
    return KK_OK;
}

#endif
