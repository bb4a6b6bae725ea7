/* silu_mul on the CPU: y = silu(g) * u with the Linear epilogue's kk__silu
 * (cpu_gemm_internal.h), in f32 chunks of 256 (cpu_rows.h). The work is cut
 * into (row, chunk) items rather than rows, so that a single long row (one
 * token at decode) still spreads over every thread. */
#include "core/threads.h"
#include "cpu/cpu_gemm_internal.h"
#include "cpu/cpu_isa.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"
#include "cpu/cpu_rows_avx512.h"
#include "opdef/silu_mul.h"

/* Item `item` of `chunks` per row. g and u rows are ld elements apart, u's
 * elements start uo into its row (packed: u is gu, uo = N). */
KK__ISA_INLINE void silu_item(const void *g, const void *u, void *y, kk_dtype dt, int64_t N,
                              int64_t ld, int64_t uo, int stream, int64_t chunks, int64_t item) {
    const int64_t r = item / chunks, at = item % chunks * KK__ROW_CHUNK;
    const int m = kk__row_chunk(N, at);
    float gb[KK__ROW_CHUNK], ub[KK__ROW_CHUNK], yb[KK__ROW_CHUNK];
    const float *gv = kk__row_view(g, dt, r * ld + at, gb, m);
    const float *uv = kk__row_view(u, dt, r * ld + uo + at, ub, m);
#pragma omp simd
    for (int i = 0; i < m; i++) yb[i] = kk__silu(gv[i]) * uv[i];
    kk__row_put(y, dt, r * N + at, yb, m, stream);
}
KK__ISA_CLONES(silu_item,
               (const void *g, const void *u, void *y, kk_dtype dt, int64_t N, int64_t ld,
                int64_t uo, int stream, int64_t chunks, int64_t item),
               (g, u, y, dt, N, ld, uo, stream, chunks, item))

#ifdef KK__ROWS512
/* silu(g) u = g / (1 + e^-g) u for 16 lanes: e^-g by kk__exp512 (f32) or
 * kk__exp2_bf16 (bf16 outputs), one division. */
KK__R512 void silu16(const void *g, const void *u, void *y, int hw, int nt, __mmask16 m,
                     const int bf16) {
    const __m512 gv = kk__ld16(g, bf16, m), uv = kk__ld16(u, bf16, m);
    const __m512 e = bf16 ? kk__exp2_bf16(_mm512_mul_ps(gv, _mm512_set1_ps(-1.44269504088896341f)))
                          : kk__exp512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
    const __m512 v = _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(e, _mm512_set1_ps(1.0f))), uv);
    kk__st16(y, v, bf16, hw, m, nt);
}

/* silu_item at AVX-512 (f32, bf16). */
KK__R512 void silu_body(const void *g, const void *u, void *y, int64_t N, int64_t ld, int64_t uo,
                        int stream, int hw, int64_t chunks, int64_t item, const int bf16) {
    const int64_t r = item / chunks, at = item % chunks * KK__ROW_CHUNK;
    const int len = kk__row_chunk(N, at);
    const void *gr = kk__at(g, bf16, r * ld + at), *ur = kk__at(u, bf16, r * ld + uo + at);
    void *yr = kk__at_mut(y, bf16, r * N + at);
    const int nt = stream && kk__st16_aligned(yr, bf16);
    int i = 0;
    for (; i + 16 <= len; i += 16)
        silu16(kk__at(gr, bf16, i), kk__at(ur, bf16, i), kk__at_mut(yr, bf16, i), hw, nt, 0xFFFF,
               bf16);
    if (i < len)
        silu16(kk__at(gr, bf16, i), kk__at(ur, bf16, i), kk__at_mut(yr, bf16, i), hw, 0,
               kk__m16(len - i), bf16);
}

static KK__ROWS512_TARGET void silu_item512(const void *g, const void *u, void *y, int bf16,
                                            int64_t N, int64_t ld, int64_t uo, int stream, int hw,
                                            int64_t chunks, int64_t item) {
    if (bf16)
        silu_body(g, u, y, N, ld, uo, stream, hw, chunks, item, 1);
    else
        silu_body(g, u, y, N, ld, uo, stream, hw, chunks, item, 0);
}
#endif

kk_status kk__silu_mul_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t M = p->i[KK__SILU_M], N = p->i[KK__SILU_N];
    const int packed = (int)p->i[KK__SILU_PACKED];
    const kk_dtype dt = (kk_dtype)p->i[KK__SILU_DTYPE];
    const void *g = t[0]->data, *u = packed ? t[0]->data : t[1]->data;
    void *y = t[packed ? 1 : 2]->data;
    const int64_t ld = packed ? 2 * N : N, uo = packed ? N : 0;
    const int64_t chunks = (N + KK__ROW_CHUNK - 1) / KK__ROW_CHUNK;
    void (*const item)(const void *, const void *, void *, kk_dtype, int64_t, int64_t, int64_t, int,
                       int64_t, int64_t) = KK__ISA_PICK(silu_item);
    const int stream_out = kk__row_streams(dt, M * N);
#ifdef KK__ROWS512
    if (kk__rows512(dt)) {
        const int bf16 = dt == KK_DTYPE_BF16, hw = kk__rows512_hw();
#pragma omp parallel num_threads(kk__cpu_threads())
        {
#pragma omp for schedule(static) nowait
            for (int64_t k = 0; k < M * chunks; k++)
                silu_item512(g, u, y, bf16, N, ld, uo, stream_out, hw, chunks, k);
            if (stream_out) kk__row_stream_fence();
        }
        return KK_OK;
    }
#endif
#pragma omp parallel num_threads(kk__cpu_threads())
    {
#pragma omp for schedule(static) nowait
        for (int64_t k = 0; k < M * chunks; k++)
            item(g, u, y, dt, N, ld, uo, stream_out, chunks, k);
        if (stream_out) kk__row_stream_fence();
    }
    return KK_OK;
}
