/* softmax on the CPU: one row per OpenMP iteration, three passes over the row
 * in f32 chunks on the stack (cpu_rows.h): the maximum, the sum of
 * exponentials (kept in a per-thread buffer of one row), then y from them,
 * rounded once; outputs past the last-level cache are streamed. The
 * exponent is (x - max x) * scale, in that order, to keep the error relative.
 * A causal mask leaves the first `v` keys of a row visible: the passes run
 * over those, and the rest of the row is written as 0.
 * docs/backends/cpu.md, "Norms, softmax, rotary embeddings". */
#include <math.h>
#include <stdlib.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_rows.h"
#include "cpu/cpu_rows_avx512.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "opdef/softmax.h"

/* e^t for t <= 0 (NaN in, NaN out), within 1 ulp where the result is a
 * normal float; below e^-87 (about 1.6e-38) it returns a value of that
 * size instead of a subnormal. Cody-Waite reduction t = k ln2 + r, |r| <=
 * ln2/2, Cephes' minimax polynomial for e^r, then 2^k from the exponent bits.
 * The clamps and the NaN select work on the bits: float comparisons may trap,
 * and under GCC's default -ftrapping-math they keep the loop from
 * vectorizing. */
KK__ISA_INLINE float exp_nonpositive(float t) {
    const uint32_t u = kk__f32_bits(t);
    uint32_t cu = u > 0xC2AE0000u ? 0xC2AE0000u : u; /* below -87 (and -NaN): -87 */
    cu = cu < 0x80000000u ? 0u : cu;                 /* +0, positive, +NaN: 0 */
    const float c = kk__bits_f32(cu);
    const float k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(c/ln2) */
    const float r = (c - k * 0.693359375f) - k * -2.12194440e-4f;
    float poly = 1.9875691500e-4f;
    poly = poly * r + 1.3981999507e-3f;
    poly = poly * r + 8.3334519073e-3f;
    poly = poly * r + 4.1665795894e-2f;
    poly = poly * r + 1.6666665459e-1f;
    poly = poly * r + 5.0000001201e-1f;
    const float er = poly * r * r + r + 1.0f;
    const float two_k = kk__bits_f32((uint32_t)((int32_t)k + 127) << 23);
    const uint32_t nan = 0u - (uint32_t)((u & 0x7FFFFFFFu) > 0x7F800000u); /* all ones or 0 */
    return kk__bits_f32((nan & u) | (~nan & kk__f32_bits(er * two_k)));
}

/* The maximum of elements [base, base + n) of x, taken on order-preserving
 * integer keys of the floats: a float max (x > m ? x : m) is no reduction
 * clang will vectorize without -ffast-math. key = ~bits for negatives,
 * bits | 2^31 otherwise; a +NaN sorts above +inf, so a NaN in the row makes
 * the whole row NaN. */
KK__ISA_INLINE float row_max(const void *x, kk_dtype dt, int64_t base, int64_t n) {
    float buf[KK__ROW_CHUNK];
    uint32_t km = 0; /* below the key of -inf */
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int len = kk__row_chunk(n, at);
        const float *v = kk__row_view(x, dt, base + at, buf, len);
#pragma omp simd reduction(max : km)
        for (int i = 0; i < len; i++) {
            const uint32_t u = kk__f32_bits(v[i]);
            const uint32_t key = u ^ ((0u - (u >> 31)) | 0x80000000u);
            km = key > km ? key : km;
        }
    }
    return kk__bits_f32(km ^ ((0u - ((km >> 31) ^ 1u)) | 0x80000000u));
}

/* The sum of e^((x - m) scale) over elements [base, base + n) of x; with
 * keep, each value is also kept in keep[0..n) for write_row. */
KK__ISA_INLINE double row_sum_exp(const void *x, kk_dtype dt, int64_t base, int64_t n, float m,
                                  float scale, float *keep) {
    float buf[KK__ROW_CHUNK];
    double total = 0.0;
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int len = kk__row_chunk(n, at);
        const float *v = kk__row_view(x, dt, base + at, buf, len);
        float s = 0.0f;
        if (keep) {
            float *restrict e = keep + at;
#pragma omp simd reduction(+ : s)
            for (int i = 0; i < len; i++) {
                e[i] = exp_nonpositive((v[i] - m) * scale);
                s += e[i];
            }
        } else {
#pragma omp simd reduction(+ : s)
            for (int i = 0; i < len; i++) s += exp_nonpositive((v[i] - m) * scale);
        }
        total += s;
    }
    return total;
}

/* y = e^((x - m) scale) inv for the first vis elements, from the kept
 * values when there are (one exponential per element) or recomputed from x;
 * 0 for the masked rest of the row. */
KK__ISA_INLINE void write_row(const void *x, void *y, kk_dtype dt, int64_t row, int64_t n,
                              int64_t vis, float m, float scale, float inv, const float *kept,
                              int stream) {
    float buf[KK__ROW_CHUNK];
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int len = kk__row_chunk(n, at);
        const int in = vis - at >= len ? len : vis > at ? (int)(vis - at) : 0;
        if (kept) {
#pragma omp simd
            for (int i = 0; i < in; i++) buf[i] = kept[at + i] * inv;
        } else if (in > 0) {
            const float *v = kk__row_view(x, dt, row * n + at, buf, in);
#pragma omp simd
            for (int i = 0; i < in; i++) buf[i] = exp_nonpositive((v[i] - m) * scale) * inv;
        }
        for (int i = in; i < len; i++) buf[i] = 0.0f;
        kk__row_put(y, dt, row * n + at, buf, len, stream);
    }
}

/* One row of n elements whose first vis are visible (1..n; 0 writes zeros):
 * scale >= 0, so the max of x * scale is scale * (max x). keep: 2n floats of
 * the thread's (the exponentials, then the decoded row when x is not f32),
 * or NULL. */
KK__ISA_INLINE void softmax_row(const void *x, void *y, kk_dtype dt, int64_t n, int64_t vis,
                                float scale, float *keep, int stream, int64_t r) {
    if (vis == 0) {
        write_row(x, y, dt, r, n, 0, 0.0f, scale, 0.0f, NULL, stream);
        return;
    }
    const int decoded = keep && dt != KK_DTYPE_F32;
    if (decoded)
        for (int64_t at = 0; at < vis; at += KK__ROW_CHUNK)
            kk__row_load(x, dt, r * n + at, keep + n + at, kk__row_chunk(vis, at));
    const void *xs = decoded ? (const void *)(keep + n) : x;
    const kk_dtype xdt = decoded ? KK_DTYPE_F32 : dt;
    const int64_t base = decoded ? 0 : r * n;
    const float m = row_max(xs, xdt, base, vis);
    const float inv = (float)(1.0 / row_sum_exp(xs, xdt, base, vis, m, scale, keep));
    write_row(x, y, dt, r, n, vis, m, scale, inv, keep, stream);
}
KK__ISA_CLONES(softmax_row,
               (const void *x, void *y, kk_dtype dt, int64_t n, int64_t vis, float scale,
                float *keep, int stream, int64_t r),
               (x, y, dt, n, vis, scale, keep, stream, r))

/* Where the AVX-512 path keeps its two rows of exponentials: each thread's
 * pair at x's address modulo 4 KiB, the second row 2 KiB on from the first
 * (modulo 4 KiB). Loads that follow stores to an address equal in its low
 * 12 bits wait for them (4K aliasing): at n floats apart, row r - 1's
 * chunk c was read right after row r's chunk c was stored at the same low
 * bits, and a malloc'd buffer's place against x changed per call, so a
 * call ran 0.75x or 1.2x. skew: the floats added to n (n + skew is 2 KiB
 * modulo 4 KiB); per: a thread's floats (a multiple of 4 KiB). */
static int64_t smx_skew(int64_t n) { return ((512 - n) % 1024 + 1024) % 1024; }
static int64_t smx_per(int64_t n) { return (2 * n + smx_skew(n) + 1023) / 1024 * 1024; }

#ifdef KK__ROWS512
/* 2^u for 16 lanes, f = u - floor(u) in [0, 1) by vreduceps (rounding
 * down), 2^f by a minimax fit on [0, 1), and 2^floor(u) by vscalefps, which
 * floors its exponent operand itself: no vroundscaleps. The relative error
 * of a fit of 2^f is the same on [0, 1) as on [-1/2, 1/2] (2^(f + 1/2) is
 * 2^f times a constant). f32 rows: degree 5, 7.5e-8 (1.5e-7 with the FMAs'
 * rounding, against the f32 tolerance 1e-5); bf16 rows: degree 4, 2.6e-6,
 * 1/750 of the bf16 rounding's 2^-9 that follows. vreduceps gives 0 for an
 * infinite u, so u = -inf scales to 0 and +inf to +inf; a NaN stays NaN. f32
 * 8 operations, bf16 6 (they were 9 and 7). */
KK__R512 __m512 smx_exp2(__m512 u, const int bf16) {
    const __m512 f = _mm512_reduce_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 q;
    if (bf16) {
        q = _mm512_set1_ps(7.8024521470e-02f);
        q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(2.2606715560e-01f));
        q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(6.9583356380e-01f));
        q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(9.9992519617e-01f));
    } else {
        q = _mm512_set1_ps(1.8775766948e-3f);
        q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(8.9893396944e-3f));
        q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(5.5826317519e-2f));
        q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(2.4015361071e-1f));
        q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(6.9315308332e-1f));
        q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(9.9999994040e-1f));
    }
    return _mm512_scalef_ps(q, u);
}

/* The exponent of a chunk: u = (v - M_c) sc2, sc2 = scale log2(e). Where
 * |M_c sc2| is small (fused) one FMA, v sc2 - M_c sc2, whose error is the
 * rounding of M_c sc2: at most 2^-21 (f32 rows, |M_c sc2| <= 16) or 2^-17
 * (bf16 rows, <= 256) absolute in u, 3.3e-7 or 5.3e-6 relative in e, under
 * the tolerances (1e-5, 1.6e-2). Past that the subtraction first, whose
 * error stays relative to t. */
typedef struct smx_u {
    __m512 mx, msc, sc2;
    int fused;
} smx_u;

KK__R512 smx_u smx_u_of(float mc, float scale2, const int bf16) {
    const float msc = mc * scale2;
    smx_u e = {_mm512_set1_ps(mc), _mm512_set1_ps(msc), _mm512_set1_ps(scale2),
               __builtin_fabsf(msc) <= (bf16 ? 256.0f : 16.0f)};
    return e;
}

/* e^((v - M_c) scale) for 16 lanes. */
KK__R512 __m512 exp_t(__m512 v, const smx_u *e, const int bf16) {
    const __m512 u = e->fused ? _mm512_fmsub_ps(v, e->sc2, e->msc)
                              : _mm512_mul_ps(_mm512_sub_ps(v, e->mx), e->sc2);
    return smx_exp2(u, bf16);
}

/* The max of elements [0, len) at p (len <= KK__ROW_CHUNK), as vmaxps takes
 * it: a NaN may be dropped here, but its own e is NaN, so the row is NaN as
 * in softmax_row. */
KK__R512 float chunk_max512(const void *p, const int bf16, int len) {
    __m512 m0 = _mm512_set1_ps(-__builtin_inff()), m1 = m0;
    int i = 0;
    for (; i + 32 <= len; i += 32) {
        m0 = _mm512_max_ps(m0, kk__ld16(kk__at(p, bf16, i), bf16, 0xFFFF));
        m1 = _mm512_max_ps(m1, kk__ld16(kk__at(p, bf16, i + 16), bf16, 0xFFFF));
    }
    for (; i < len; i += 16) {
        const __mmask16 m = kk__m16(len - i);
        m0 = _mm512_mask_max_ps(m0, m, m0, kk__ld16(kk__at(p, bf16, i), bf16, m));
    }
    return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

/* softmax_row at AVX-512 (f32, bf16, with per-thread rows of
 * exponentials), reading x once: chunk by chunk the running max M_c (max
 * of the chunks so far), e = e^((x - M_c) scale) kept, and the chunk's sum;
 * then with the row's max M, f_c = e^((M_c - M) scale), sum = sum_c s_c
 * f_c (f64), and y = e (f_c / sum). A max pass before the exponentials
 * was a second read of x that nothing overlapped; t = (x - M_c) + (M_c - M)
 * keeps the error relative to t (both parts <= 0) at one more rounding.
 * While the running max is -inf (only -inf so far) M_c = 0, so those e are
 * 0 rather than NaN, and their f_c 0 (e^(-M) could overflow). A row of only
 * -inf is NaN, as in softmax_row. The masked rest of the row is 0.
 *
 * A full chunk first takes the running max as it stands for its reference
 * M_c, with no max of its own: its e may then exceed 1, and the chunk is
 * redone with its max (as above) only where one of its 16 lane sums passes
 * 256 (f32 rows: every e <= 256, so the exponent's rounding adds at most
 * 2^-21, 3.3e-7 relative) or 2^24 (bf16), or is not finite (inf, NaN). The
 * reference is any value the e do not overflow from; the row's M is the
 * largest reference. Most chunks past the first then need no max and no
 * wait for one (0.8x the time). The lane sums are tested by one compare and
 * kept; their total is taken in smx_factors: a horizontal sum before the
 * branch put its latency on every chunk's path.
 *
 * A thread takes its rows two at a time in flight: the exponentials of row
 * r chunk by chunk (a full chunk read from L1 32 values at a time, and once
 * more for its max where it is redone), each chunk followed by 256 outputs
 * of row r - 1 (whose factors are known) and a prefetch of row r + 1's chunk
 * into L2. The writes of one row then overlap the arithmetic of the next; one
 * row after the other, the exponentials ran with memory idle and the
 * writes with the arithmetic idle. */
typedef struct smx_row {
    const void *x; /* the row's x and y */
    void *y;
    float *keep; /* its exponentials */
    int64_t vis;
    float M;
    int lead, nt;
    float g[KK__ROW_KEEP_MAX / KK__ROW_CHUNK];        /* M_c, then f_c / sum */
    float sums[KK__ROW_KEEP_MAX / KK__ROW_CHUNK][16]; /* per chunk, by lane */
} smx_row;

/* The exponentials of a full chunk at p into keep, and their sum (fused:
 * see smx_u), 32 values at a time: a bf16 chunk decoded as even and odd
 * halves (a shift and an and, no vpmovzxwd) and its exponentials kept in
 * that order, per 32 the 16 even elements, then the 16 odd ones
 * (smx_write_unit puts them back). The sum in four registers, returned as
 * 16 lane sums. Streamed from L1 rather than held: 16 registers of x and the
 * exponentials' constants did not fit the 32 zmm, and the spills cost a
 * tenth of the pass; one sum register made a chain of 16 dependent adds. */
KK__R512 __m512 smx_exp_full(const void *p, const smx_u *e, float *keep, const int fused,
                             const int bf16) {
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
#pragma GCC unroll 8
    for (int k = 0; k < KK__ROW_CHUNK / 32; k++) {
        __m512 v[2];
        if (bf16) {
            kk__ld32_bf16_eo((const char *)p + 64 * k, &v[0], &v[1]);
        } else {
            v[0] = _mm512_loadu_ps((const float *)p + 32 * k);
            v[1] = _mm512_loadu_ps((const float *)p + 32 * k + 16);
        }
        for (int h = 0; h < 2; h++) {
            const __m512 u = fused ? _mm512_fmsub_ps(v[h], e->sc2, e->msc)
                                   : _mm512_mul_ps(_mm512_sub_ps(v[h], e->mx), e->sc2);
            const __m512 x = smx_exp2(u, bf16);
            _mm512_storeu_ps(keep + 32 * k + 16 * h, x);
            a[(2 * k + h) & 3] = _mm512_add_ps(a[(2 * k + h) & 3], x);
        }
    }
    return _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
}

/* The exponentials and sum of chunk c of row s. A full bf16 chunk is
 * decoded 32 values at a time as even and odd halves (a shift and an and,
 * no vpmovzxwd), and its exponentials are kept in that order: per 32, the
 * 16 even elements, then the 16 odd ones (smx_write_unit puts them back). */
KK__R512 void smx_exp_chunk(smx_row *s, int c, float scale2, const int bf16) {
    const int64_t at = (int64_t)c * KK__ROW_CHUNK;
    const int len = kk__row_chunk(s->vis, at);
    const void *p = kk__at(s->x, bf16, at);
    float *keep = s->keep + at;
    __m512 a = _mm512_setzero_ps();
    if (len == KK__ROW_CHUNK && s->M != -__builtin_inff()) {
        /* the running max as the reference, unchanged */
        s->g[c] = s->M;
        const smx_u e = smx_u_of(s->M, scale2, bf16);
        a = e.fused ? smx_exp_full(p, &e, keep, 1, bf16) : smx_exp_full(p, &e, keep, 0, bf16);
        if (!_mm512_cmp_ps_mask(a, _mm512_set1_ps(bf16 ? 0x1p24f : 256.0f), _CMP_NLE_UQ)) {
            _mm512_storeu_ps(s->sums[c], a);
            return;
        }
        a = _mm512_setzero_ps();
    }
    const float cm = chunk_max512(p, bf16, len);
    s->M = cm > s->M ? cm : s->M;
    s->g[c] = s->M == -__builtin_inff() ? 0.0f : s->M;
    s->lead = s->M == -__builtin_inff() ? c + 1 : s->lead;
    const smx_u e = smx_u_of(s->g[c], scale2, bf16);
    if (len == KK__ROW_CHUNK) {
        a = e.fused ? smx_exp_full(p, &e, keep, 1, bf16) : smx_exp_full(p, &e, keep, 0, bf16);
        _mm512_storeu_ps(s->sums[c], a);
        return;
    }
    int j = 0;
    for (; j + 16 <= len; j += 16) {
        const __m512 x = exp_t(kk__ld16(kk__at(p, bf16, j), bf16, 0xFFFF), &e, bf16);
        _mm512_storeu_ps(keep + j, x);
        a = _mm512_add_ps(a, x);
    }
    if (j < len) {
        const __mmask16 m = kk__m16(len - j);
        const __m512 x =
            _mm512_maskz_mov_ps(m, exp_t(kk__ld16(kk__at(p, bf16, j), bf16, m), &e, bf16));
        _mm512_mask_storeu_ps(keep + j, m, x);
        a = _mm512_add_ps(a, x);
    }
    _mm512_storeu_ps(s->sums[c], a);
}

/* After every chunk of row s: g[c] = f_c / sum. */
KK__R512 void smx_factors(smx_row *s, float scale) {
    const int chunks = (int)((s->vis + KK__ROW_CHUNK - 1) / KK__ROW_CHUNK);
    const __m512 mx = _mm512_set1_ps(s->M), sc = _mm512_set1_ps(scale);
    for (int c = 0; c < chunks; c += 16) {
        const __mmask16 m = kk__m16(chunks - c < 16 ? chunks - c : 16);
        const __m512 d = _mm512_maskz_loadu_ps(m, s->g + c);
        _mm512_mask_storeu_ps(s->g + c, m, kk__exp512(_mm512_mul_ps(_mm512_sub_ps(d, mx), sc)));
    }
    for (int c = 0; c < s->lead && s->lead < chunks; c++) s->g[c] = 0.0f; /* e^(-M) may overflow */
    double total = 0.0;
    for (int c = 0; c < chunks; c++)
        total += (double)_mm512_reduce_add_ps(_mm512_loadu_ps(s->sums[c])) * (double)s->g[c];
    const float inv = (float)(1.0 / total);
    for (int c = 0; c < chunks; c++) s->g[c] *= inv;
}

/* Outputs [256 u, 256 u + 256) of row s (of n): e g, 0 past vis. */
KK__R512 void smx_write_unit(const smx_row *s, int64_t n, int64_t u, int hw, const int bf16) {
    const int64_t at = u * KK__ROW_CHUNK, end = n - at < KK__ROW_CHUNK ? n : at + KK__ROW_CHUNK;
    int64_t i = at;
    void *const y = s->y;
    const float *const keep = s->keep;
    const int nt = s->nt;
    if (at < s->vis) {
        const __m512 f = _mm512_set1_ps(s->g[u]);
        if (bf16 && end - at == KK__ROW_CHUNK && end <= s->vis) { /* even/odd (smx_exp_chunk) */
            const __m512i idx = kk__eo_index();
            for (; i < end; i += 32)
                kk__st32_bf16_eo_ftz(kk__at_mut(y, 1, i),
                                     _mm512_mul_ps(_mm512_loadu_ps(keep + i), f),
                                     _mm512_mul_ps(_mm512_loadu_ps(keep + i + 16), f), idx, hw, nt);
            return;
        }
        if (bf16 && hw) /* 32 at a time: one 64-byte store */
            for (; i + 32 <= end && i + 32 <= s->vis; i += 32)
                kk__st32_bf16(kk__at_mut(y, 1, i), _mm512_mul_ps(_mm512_loadu_ps(keep + i), f),
                              _mm512_mul_ps(_mm512_loadu_ps(keep + i + 16), f), nt);
        for (; i + 16 <= end && i + 16 <= s->vis; i += 16)
            kk__st16(kk__at_mut(y, bf16, i), _mm512_mul_ps(_mm512_loadu_ps(keep + i), f), bf16, hw,
                     0xFFFF, nt);
    }
    for (; i < end; i += 16) { /* the last visible elements, then zeros */
        const __mmask16 m = kk__m16(end - i < 16 ? (int)(end - i) : 16);
        const __mmask16 in = kk__m16(s->vis > i ? (int)(s->vis - i < 16 ? s->vis - i : 16) : 0);
        const __m512 f = _mm512_set1_ps(in ? s->g[u] : 0.0f);
        const __m512 v = _mm512_maskz_mul_ps(in, _mm512_maskz_loadu_ps(in, s->keep + i), f);
        kk__st16(kk__at_mut(s->y, bf16, i), v, bf16, hw, m, s->nt);
    }
}

/* Rows [r0, r1) of the thread's, keep: smx_per(n) floats of its own. */
KK__R512 void softmax_rows(const kk_op_params *p, const void *x, void *y, int64_t n, float scale,
                           float *keep, int stream, int hw, int64_t r0, int64_t r1,
                           const int bf16) {
    smx_row rows[2];
    const float scale2 = scale * 1.44269504088896341f;
    const int64_t units = (n + KK__ROW_CHUNK - 1) / KK__ROW_CHUNK;
    const int ub = KK__ROW_CHUNK * (bf16 ? 2 : 4); /* a chunk's bytes */
    const int64_t skew = smx_skew(n);
    /* row r - 1's outputs k units ahead of row r's chunk, as in
     * layernorm_cpu.c's ln_rows: its stores and the next loads of x apart
     * in their low 12 bits */
    int64_t k = 0;
    while (k < 3 &&
           ((((uintptr_t)y - (uintptr_t)x) + (uintptr_t)((k - 1) * ub)) & 4095) - 1024 > 2048)
        k++;
    smx_row *prev = NULL;
    for (int64_t r = r0; r < r1; r++) {
        smx_row *s = &rows[r & 1];
        s->x = kk__at(x, bf16, r * n);
        s->y = kk__at_mut(y, bf16, r * n);
        s->keep = keep + (r & 1) * (n + skew);
        s->vis = kk__softmax_visible(p, r);
        s->M = -__builtin_inff();
        s->lead = 0;
        s->nt = stream && kk__st16_aligned(s->y, bf16);
        const int64_t chunks = (s->vis + KK__ROW_CHUNK - 1) / KK__ROW_CHUNK;
        const char *next = (const char *)kk__at(x, bf16, (r + 1) * n);
        int64_t u = 0;
        for (int64_t c = 0; c < chunks; c++) {
            if (r + 1 < r1) /* the next row's chunk c into L2 */
                for (int l = 0; l < ub; l += 64) _mm_prefetch(next + c * ub + l, _MM_HINT_T1);
            smx_exp_chunk(s, (int)c, scale2, bf16);
            if (prev && u < units) smx_write_unit(prev, n, (u++ + k) % units, hw, bf16);
        }
        for (; prev && u < units; u++) smx_write_unit(prev, n, (u + k) % units, hw, bf16);
        smx_factors(s, scale);
        prev = s;
    }
    for (int64_t u = 0; prev && u < units; u++) smx_write_unit(prev, n, u, hw, bf16);
}

static KK__ROWS512_TARGET void softmax_rows512(const kk_op_params *p, const void *x, void *y,
                                               int bf16, int64_t n, float scale, float *keep,
                                               int stream, int hw, int64_t r0, int64_t r1) {
    if (bf16)
        softmax_rows(p, x, y, n, scale, keep, stream, hw, r0, r1, 1);
    else
        softmax_rows(p, x, y, n, scale, keep, stream, hw, r0, r1, 0);
}
#endif

kk_status kk__softmax_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t rows = p->i[KK__SMX_ROWS], n = p->i[KK__SMX_N];
    const float scale = (float)p->f[KK__SMX_SCALE];
    const kk_dtype dt = (kk_dtype)p->i[KK__SMX_DTYPE];
    const void *x = t[0]->data;
    void *y = t[1]->data;
    void (*const row)(const void *, void *, kk_dtype, int64_t, int64_t, float, float *, int,
                      int64_t) = KK__ISA_PICK(softmax_row);
    const int threads = kk__cpu_threads();
    const int stream_out = kk__row_streams(dt, rows * n);
    /* no buffer (too long a row, or no memory): the exponentials are recomputed */
    const int64_t per = smx_per(n); /* floats per thread, 4 KiB aligned, + x's offset */
    float *buf =
        n <= KK__ROW_KEEP_MAX ? aligned_alloc(4096, (size_t)(threads * per + 1024) * 4) : NULL;
    float *keep = buf ? buf + ((uintptr_t)x & 4095) / 4 : NULL;
#ifdef KK__ROWS512
    if (keep && kk__rows512(dt)) {
        const int bf16 = dt == KK_DTYPE_BF16, hw = kk__rows512_hw();
#pragma omp parallel num_threads(threads)
        {
            const int me = kk__omp_thread(), team = kk__omp_threads();
            float *mine = keep + (int64_t)me * per;
            softmax_rows512(p, x, y, bf16, n, scale, mine, stream_out, hw, rows * me / team,
                            rows * (me + 1) / team);
            if (stream_out) kk__row_stream_fence();
        }
        free(buf);
        return KK_OK;
    }
#endif
#pragma omp parallel num_threads(threads)
    {
        float *mine = keep ? keep + (int64_t)kk__omp_thread() * per : NULL;
#pragma omp for schedule(static) nowait
        for (int64_t r = 0; r < rows; r++)
            row(x, y, dt, n, kk__softmax_visible(p, r), scale, mine, stream_out, r);
        if (stream_out) kk__row_stream_fence(); /* each thread's own streaming stores */
    }
    free(buf);
    return KK_OK;
}
