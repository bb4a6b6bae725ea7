/* Internal: f32 views of f32/f16/bf16 rows for the row-wise CPU kernels
 * (rmsnorm, layernorm, softmax, rope). A row is walked in chunks loaded into a
 * small f32 array on the stack, so nothing is allocated, the chunk stays in L1
 * and every inner loop vectorizes whatever the dtype (bf16 and f16 decoded
 * inline). docs/backends/cpu.md, "Norms, softmax, rotary embeddings". */
#ifndef KK_CPU_ROWS_H
#define KK_CPU_ROWS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

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

/* Sum of squares of a chunk in f32 (vectorized). rmsnorm and the fused norms
 * all sum a row with it, chunk by chunk, so they agree bit for bit. The order
 * is spelled out rather than left to `omp simd reduction` (whose lanes and
 * final shuffle differ per instruction set): 16 lanes, lane l summing
 * v[l], v[l + 16], ... in turn from 0, then halved 8, 4, 2, 1 (lane[l] +=
 * lane[l + w]). Any vector width computes the same bits, and the CUDA
 * rmsnorm_fp8 kernel repeats them (its codes and scales are the CPU's). */
#define KK__SUMSQ_LANES 16
static inline __attribute__((always_inline)) float kk__chunk_sum_squares(const float *v, int m) {
    float lane[KK__SUMSQ_LANES] = {0};
    int i = 0;
    for (; i + KK__SUMSQ_LANES <= m; i += KK__SUMSQ_LANES)
#pragma omp simd
        for (int l = 0; l < KK__SUMSQ_LANES; l++) lane[l] += v[i + l] * v[i + l];
    for (int l = 0; i + l < m; l++) lane[l] += v[i + l] * v[i + l];
    for (int w = KK__SUMSQ_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) lane[l] += lane[l + w];
    return lane[0];
}

/* Chunk length at `at` of a row of n elements. */
static inline int kk__row_chunk(int64_t n, int64_t at) {
    return n - at < KK__ROW_CHUNK ? (int)(n - at) : KK__ROW_CHUNK;
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

/* Elements [at, at + m) of a row as f32 to read: the row itself for f32 (no
 * copy), else decoded into buf. */
static inline const float *kk__row_view(const void *src, kk_dtype dt, int64_t at, float *buf,
                                        int m) {
    if (dt == KK_DTYPE_F32) return (const float *)src + at;
    kk__row_load(src, dt, at, buf, m);
    return buf;
}

/* The calling thread's number in its OpenMP team (0 outside one). */
static inline int kk__omp_thread(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* The number of threads in the calling thread's OpenMP team (1 outside one). */
static inline int kk__omp_threads(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* Rows up to this long are decoded once into a per-thread f32 buffer when
 * they are not f32, so that every later pass over the row reads f32. */
#define KK__ROW_KEEP_MAX (INT64_C(1) << 16)

/* Row `row` of n elements as f32: the tensor's own for f32, else decoded
 * into buf (n floats). */
static inline const float *kk__row_f32(const void *src, kk_dtype dt, int64_t row, int64_t n,
                                       float *buf) {
    if (dt == KK_DTYPE_F32) return (const float *)src + row * n;
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK)
        kk__row_load(src, dt, row * n + at, buf + at, kk__row_chunk(n, at));
    return buf;
}

/* Per-thread row buffers of `per` floats for `threads` threads, or NULL when
 * there is nothing to keep (f32 rows, rows past KK__ROW_KEEP_MAX, no
 * memory): the kernels then decode each chunk where they read it. */
static inline float *kk__row_buffers(kk_dtype dt, int64_t n, int64_t per, int threads) {
    if (dt == KK_DTYPE_F32 || n > KK__ROW_KEEP_MAX) return NULL;
    return (float *)malloc((size_t)(per * threads) * sizeof(float));
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

/* Outputs of at least this many bytes are written with streaming
 * (non-temporal) stores: far past the last-level cache nothing will read
 * them back soon, and an ordinary store first reads the line it writes, so
 * memory would move three bytes for every two the op needs. */
#define KK__ROW_STREAM_MIN_BYTES (INT64_C(32) << 20)

/* kk__row_store with streaming stores for f32 and bf16 (16-byte pieces,
 * SSE2: every x86-64 has it), ordinary ones for the unaligned ends and f16.
 * Call kk__row_stream_fence() before the row's writer is done with it. */
static inline void kk__row_store_stream(void *dst, kk_dtype dt, int64_t at, const float *f, int m) {
#if defined(__x86_64__)
    if (dt == KK_DTYPE_F32 || dt == KK_DTYPE_BF16) {
        const int esz = dt == KK_DTYPE_F32 ? 4 : 2, per = 16 / esz;
        char *d = (char *)dst + (size_t)at * (size_t)esz;
        int head = (int)((16 - ((uintptr_t)d & 15)) & 15) / esz;
        if (((uintptr_t)d & (uintptr_t)(esz - 1)) || head > m) head = m;
        kk__row_store(dst, dt, at, f, head);
        int i = head;
        if (dt == KK_DTYPE_F32) {
            for (; i + per <= m; i += per)
                _mm_stream_ps((float *)(d + (size_t)i * 4), _mm_loadu_ps(f + i));
        } else {
            uint16_t h[KK__ROW_CHUNK];
            while (i + per <= m) { /* a chunk at a time: rounded in a vector loop, then streamed */
                const int n = (m - i < KK__ROW_CHUNK ? m - i : KK__ROW_CHUNK) / per * per;
                for (int k = 0; k < n; k++) h[k] = kk__f32_bf16(f[i + k]);
                for (int k = 0; k < n; k += per)
                    _mm_stream_si128((__m128i *)(void *)(d + (size_t)(i + k) * 2),
                                     _mm_loadu_si128((const __m128i *)(const void *)(h + k)));
                i += n;
            }
        }
        kk__row_store(dst, dt, at + i, f + i, m - i);
        return;
    }
#endif
    kk__row_store(dst, dt, at, f, m);
}

/* Whether an output of numel elements of dt is written with streaming stores. */
static inline int kk__row_streams(kk_dtype dt, int64_t numel) {
    return (int64_t)kk_dtype_bytes(dt, (size_t)numel) >= KK__ROW_STREAM_MIN_BYTES;
}

/* kk__row_store, or kk__row_store_stream when `stream`. */
static inline void kk__row_put(void *dst, kk_dtype dt, int64_t at, const float *f, int m,
                               int stream) {
    if (stream)
        kk__row_store_stream(dst, dt, at, f, m);
    else
        kk__row_store(dst, dt, at, f, m);
}

/* Orders this thread's streaming stores before whatever follows. */
static inline void kk__row_stream_fence(void) {
#if defined(__x86_64__)
    _mm_sfence();
#endif
}

/* What a kernel slot checks before it touches memory: the tensors are what
 * the parameters describe, on the CPU. kk_op_run has checked all of this; a
 * harness bug must still not turn into a wild write. Tensor k may be a strided
 * view (the slot row's `strided`: its described rank, the last dimension
 * contiguous) where bit k of `strided` is set; the others are contiguous. */
static inline kk_status kk__cpu_check_tensors_strided(const kk_op_params *p, kk_tensor *const *t,
                                                      unsigned strided) {
    if (!p || !p->op)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk__cpu_check_tensors", "p",
                             "parameters of a registered op", "%s", p ? "no op" : "NULL");
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    const int n = p->op->describe(p, d);
    for (int k = 0; k < n; k++) {
        const kk_tensor *x = t ? t[k] : NULL;
        const int rows = (strided >> k) & 1;
        const int layout_ok = x && (kk_tensor_is_contiguous(x) ||
                                    (rows && x->ndim == d[k].ndim && x->strides[x->ndim - 1] == 1));
        if (!layout_ok || x->dtype != d[k].dtype || kk_tensor_numel(x) != d[k].numel ||
            x->device_kind != KK_BACKEND_CPU)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, p->op->name, d[k].name,
                                 rows ? "a CPU tensor of the described dtype and size, its last "
                                        "dimension contiguous"
                                      : "a contiguous CPU tensor of the described dtype and size",
                                 "%s", x ? kk_dtype_name(x->dtype) : "NULL");
    }
    return KK_OK;
}

static inline kk_status kk__cpu_check_tensors(const kk_op_params *p, kk_tensor *const *t) {
    return kk__cpu_check_tensors_strided(p, t, 0);
}

#endif
