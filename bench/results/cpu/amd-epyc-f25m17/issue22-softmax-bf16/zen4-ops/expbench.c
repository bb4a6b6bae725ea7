// clang-format off
/* Scratch microbenchmark of the fifth softmax pass (README.md): zmm op throughput on this
 * Zen 4, 8 independent chains, cycles at an assumed 3.6 GHz (thread CPU time).
 *   gcc -O2 -march=native -o expbench expbench.c && ./expbench */
#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#define T __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define TI static inline __attribute__((always_inline)) T
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
static uint16_t xb[256 * 16];
static float keep[256 * 16];
static uint16_t yb[256 * 16];
TI __m512 poly3(__m512 f) {
    __m512 q = _mm512_set1_ps(7.8024521470e-02f);
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(2.2606715560e-01f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(6.9583356380e-01f));
    return _mm512_fmadd_ps(q, f, _mm512_set1_ps(9.9992519617e-01f));
}
/* E0: current */
TI __m512 e0(__m512 u) {
    __m512 f = _mm512_reduce_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    return _mm512_scalef_ps(poly3(f), u);
}
/* E1: roundscale + fnmadd, clamp by max */
TI __m512 e1(__m512 u) {
    u = _mm512_max_ps(_mm512_set1_ps(-200.f), u);
    __m512 n = _mm512_roundscale_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.f), u);
    return _mm512_scalef_ps(poly3(f), n);
}
/* E2: magic on fma pipe, pow by shift, mul; clamp by vrange to |u|<=127 */
TI __m512 e2(__m512 u) {
    u = _mm512_range_ps(u, _mm512_set1_ps(127.f), 0x0A); /* min abs, sign from src1 */
    const __m512 one = _mm512_set1_ps(1.f), mg = _mm512_set1_ps(12582912.0f + 127.f);
    __m512 t = _mm512_fmadd_ps(u, one, mg);
    __m512 n = _mm512_fmsub_ps(t, one, mg);
    __m512 f = _mm512_fnmadd_ps(n, one, u);
    /* f in [-.5,.5]: use poly3 on [0,1) anyway for timing */
    __m512 pw = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23));
    return _mm512_mul_ps(poly3(f), pw);
}
/* E3: magic, pow by scalef (no clamp needed? -inf: t=-inf n=-inf f=nan) timing only */
TI __m512 e3(__m512 u) {
    const __m512 one = _mm512_set1_ps(1.f), mg = _mm512_set1_ps(12582912.0f);
    __m512 t = _mm512_fmadd_ps(u, one, mg);
    __m512 n = _mm512_fmsub_ps(t, one, mg);
    __m512 f = _mm512_fnmadd_ps(n, one, u);
    return _mm512_scalef_ps(poly3(f), n);
}
/* E4: roundscale + sub on add pipe */
TI __m512 e4(__m512 u) {
    u = _mm512_max_ps(_mm512_set1_ps(-200.f), u);
    __m512 n = _mm512_roundscale_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(u, n);
    return _mm512_scalef_ps(poly3(f), n);
}
/* E5: reduce, pow by getexp? no: reduce + (u - f) -> n; cvt + shift + paddd */
TI __m512 e5(__m512 u) {
    __m512 f = _mm512_reduce_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 n = _mm512_sub_ps(u, f);
    __m512i k = _mm512_slli_epi32(_mm512_cvtps_epi32(n), 23);
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(poly3(f)), k));
}
TI __m512 n1(__m512 u) { return _mm512_scalef_ps(poly3(u), u); } /* no reduce */
TI __m512 n2(__m512 u) {
    __m512 f = _mm512_reduce_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    return poly3(f);
} /* no scalef */
TI __m512 n3(__m512 u) { return poly3(u); } /* neither */
TI __m512 n4(__m512 u) { return u; }        /* nothing */
TI __m512 n5(__m512 u) {
    __m512 f = _mm512_reduce_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 q = _mm512_fmadd_ps(f, _mm512_set1_ps(0.3f), _mm512_set1_ps(0.7f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.f));
    return _mm512_scalef_ps(q, u);
} /* deg 2 */
TI __m512 n6(__m512 u) {
    __m512 f = _mm512_reduce_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 q = poly3(f);
    __m512 n = _mm512_sub_ps(u, f);
    return _mm512_castsi512_ps(
        _mm512_add_epi32(_mm512_castps_si512(q), _mm512_slli_epi32(_mm512_cvttps_epi32(n), 23)));
}
TI __m512 g1(__m512 u) {
    __m512 n = _mm512_roundscale_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.f), u);
    return _mm512_scalef_ps(poly3(f), n);
}
TI __m512 g2(__m512 u) {
    const __m512 mg = _mm512_set1_ps(12582912.0f);
    __m512 t = _mm512_add_ps(u, mg);
    __m512 n = _mm512_sub_ps(t, mg);
    __m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.f), u);
    return _mm512_scalef_ps(poly3(f), n);
}
TI __m512 g3(__m512 u) {
    const __m512 mg = _mm512_set1_ps(12582912.0f);
    __m512 t = _mm512_add_ps(u, mg);
    __m512 n = _mm512_sub_ps(t, mg);
    __m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.f), u);
    __m512i kb = _mm512_min_epi32(
        _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x4B400000 - 127)),
        _mm512_set1_epi32(255));
    __mmask16 ok = _mm512_cmp_ps_mask(u, _mm512_set1_ps(-127.f), _CMP_NLT_UQ);
    return _mm512_maskz_mul_ps(ok, poly3(f), _mm512_castsi512_ps(_mm512_slli_epi32(kb, 23)));
}
TI __m512 g4(__m512 u) {
    const __m512 mg = _mm512_set1_ps(12582912.0f);
    __m512 t = _mm512_add_ps(u, mg);
    __m512 n = _mm512_sub_ps(t, mg);
    __m512 f = _mm512_sub_ps(u, n);
    return _mm512_scalef_ps(poly3(f), n);
}
/* e6: v = x*(sc2*2^23) - (msc-127)*2^23 folded by caller; here u given: v = fma(u, 2^23, 127*2^23) */
TI __m512 e6v(__m512 v) {
    __m512i i = _mm512_max_epi32(_mm512_cvtps_epi32(v), _mm512_setzero_si512());
    __m512 m = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(i, _mm512_set1_epi32(0x7FFFFF),
                                                             _mm512_set1_epi32(0x3F800000), 0xEA));
    __m512 q = _mm512_set1_ps(-0.02f);
    q = _mm512_fmadd_ps(q, m, _mm512_set1_ps(0.1f));
    q = _mm512_fmadd_ps(q, m, _mm512_set1_ps(0.3f));
    q = _mm512_fmadd_ps(q, m, _mm512_set1_ps(0.6f));
    return _mm512_mul_ps(_mm512_castsi512_ps(i), q);
}
#define PASS1V(NAME, KEYMAX)                                                                       \
    T __attribute__((noinline)) float NAME(const uint16_t *x, float *kp, float sc2, float msc) {   \
        __m512 a = _mm512_setzero_ps();                                                            \
        const __m512 s = _mm512_set1_ps(sc2 * 8388608.f),                                          \
                     m = _mm512_set1_ps((msc - 127.f) * 8388608.f);                                \
        __m512i km = _mm512_setzero_si512();                                                       \
        for (int i = 0; i < 256; i += 32) {                                                        \
            __m512i w = _mm512_loadu_si512(x + i);                                                 \
            if (KEYMAX)                                                                            \
                km = _mm512_max_epu16(km, _mm512_and_si512(w, _mm512_set1_epi32(0x7FFF7FFF)));     \
            __m512 ev = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));                             \
            __m512 od =                                                                            \
                _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xFFFF0000u)));     \
            __m512 e1_ = e6v(_mm512_fmsub_ps(ev, s, m));                                           \
            _mm512_storeu_ps(kp + i, e1_);                                                         \
            a = _mm512_add_ps(a, e1_);                                                             \
            __m512 e2_ = e6v(_mm512_fmsub_ps(od, s, m));                                           \
            _mm512_storeu_ps(kp + i + 16, e2_);                                                    \
            a = _mm512_add_ps(a, e2_);                                                             \
        }                                                                                          \
        return _mm512_reduce_add_ps(a) + (float)_mm512_reduce_max_epu32(km);                       \
    }
PASS1V(p_e6, 0)
PASS1V(p_e6k, 1)
#define PASS1(NAME, EXP, SUMFMA)                                                                   \
    T __attribute__((noinline)) float NAME(const uint16_t *x, float *kp, float sc2, float msc) {   \
        __m512 a = _mm512_setzero_ps();                                                            \
        const __m512 s = _mm512_set1_ps(sc2), m = _mm512_set1_ps(msc);                             \
        for (int i = 0; i < 256; i += 32) {                                                        \
            __m512i w = _mm512_loadu_si512(x + i);                                                 \
            __m512 ev = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));                             \
            __m512 od =                                                                            \
                _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xFFFF0000u)));     \
            __m512 e1_ = EXP(_mm512_fmsub_ps(ev, s, m));                                           \
            _mm512_storeu_ps(kp + i, e1_);                                                         \
            a = SUMFMA ? _mm512_fmadd_ps(e1_, _mm512_set1_ps(1.f), a) : _mm512_add_ps(a, e1_);     \
            __m512 e2_ = EXP(_mm512_fmsub_ps(od, s, m));                                           \
            _mm512_storeu_ps(kp + i + 16, e2_);                                                    \
            a = SUMFMA ? _mm512_fmadd_ps(e2_, _mm512_set1_ps(1.f), a) : _mm512_add_ps(a, e2_);     \
        }                                                                                          \
        return _mm512_reduce_add_ps(a);                                                            \
    }
    PASS1(p_g1, g1, 0) PASS1(p_g2, g2, 0) PASS1(p_g3, g3, 0) PASS1(p_g4, g4, 0) PASS1(p_n1, n1, 0)
        PASS1(p_n2, n2, 0) PASS1(p_n3, n3, 0) PASS1(p_n4, n4, 0) PASS1(p_n5, n5, 0)
            PASS1(p_n6, n6, 0) PASS1(p_e0, e0, 0) PASS1(p_e0f, e0, 1) PASS1(p_e1, e1, 0)
                PASS1(p_e1f, e1, 1) PASS1(p_e2, e2, 0) PASS1(p_e2f, e2, 1) PASS1(p_e3, e3, 0)
                    PASS1(p_e3f, e3, 1) PASS1(p_e4, e4, 0) PASS1(p_e4f, e4, 1)
                        PASS1(p_e5, e5, 0) static const uint16_t eoidx[32] = {
                            0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                            8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
/* pass 2 variants */
T __attribute__((noinline)) void w0(const float *kp, uint16_t *y, float g) {
    const __m512 f = _mm512_set1_ps(g);
    const __m512i idx = _mm512_loadu_si512(eoidx);
    for (int i = 0; i < 256; i += 32) {
        __m512 ev = _mm512_mul_ps(_mm512_loadu_ps(kp + i), f),
               od = _mm512_mul_ps(_mm512_loadu_ps(kp + i + 16), f);
        __m512i r;
        if (!(_mm512_fpclass_ps_mask(ev, 0x20) | _mm512_fpclass_ps_mask(od, 0x20)))
            r = (__m512i)_mm512_cvtne2ps_pbh(od, ev);
        else
            r = _mm512_setzero_si512();
        r = _mm512_permutexvar_epi16(idx, r);
        _mm512_storeu_si512(y + i, r);
    }
}
T __attribute__((noinline)) void w1(const float *kp, uint16_t *y, float g) {
    const __m512 f = _mm512_set1_ps(g);
    const __m512i idx = _mm512_loadu_si512(eoidx);
    for (int i = 0; i < 256; i += 32) {
        __m512 ev = _mm512_mul_ps(_mm512_loadu_ps(kp + i), f),
               od = _mm512_mul_ps(_mm512_loadu_ps(kp + i + 16), f);
        __m512i r = (__m512i)_mm512_cvtne2ps_pbh(od, ev);
        r = _mm512_permutexvar_epi16(idx, r);
        _mm512_storeu_si512(y + i, r);
    }
}
/* integer RNE rounding + interleave by ternlog: no permute, no cvt */
T __attribute__((noinline)) void w2(const float *kp, uint16_t *y, float g) {
    const __m512 f = _mm512_set1_ps(g);
    const __m512i one = _mm512_set1_epi32(1), b = _mm512_set1_epi32(0x7FFF),
                  hm = _mm512_set1_epi32((int)0xFFFF0000u);
    for (int i = 0; i < 256; i += 32) {
        __m512i ev = _mm512_castps_si512(_mm512_mul_ps(_mm512_loadu_ps(kp + i), f)),
                od = _mm512_castps_si512(_mm512_mul_ps(_mm512_loadu_ps(kp + i + 16), f));
        ev = _mm512_add_epi32(_mm512_add_epi32(ev, b),
                              _mm512_and_si512(_mm512_srli_epi32(ev, 16), one));
        od = _mm512_add_epi32(_mm512_add_epi32(od, b),
                              _mm512_and_si512(_mm512_srli_epi32(od, 16), one));
        __m512i r =
            _mm512_ternarylogic_epi32(hm, od, _mm512_srli_epi32(ev, 16), 0xEA); /* (hm&od)|ev' */
        _mm512_storeu_si512(y + i, r);
    }
}
/* round half away: add 0x8000 */
T __attribute__((noinline)) void w3(const float *kp, uint16_t *y, float g) {
    const __m512 f = _mm512_set1_ps(g);
    const __m512i b = _mm512_set1_epi32(0x8000), hm = _mm512_set1_epi32((int)0xFFFF0000u);
    for (int i = 0; i < 256; i += 32) {
        __m512i ev = _mm512_castps_si512(_mm512_mul_ps(_mm512_loadu_ps(kp + i), f)),
                od = _mm512_castps_si512(_mm512_mul_ps(_mm512_loadu_ps(kp + i + 16), f));
        ev = _mm512_add_epi32(ev, b);
        od = _mm512_add_epi32(od, b);
        __m512i r = _mm512_ternarylogic_epi32(hm, od, _mm512_srli_epi32(ev, 16), 0xEA);
        _mm512_storeu_si512(y + i, r);
    }
}
/* cvt2 + fpclass on min */
T __attribute__((noinline)) void w4(const float *kp, uint16_t *y, float g) {
    const __m512 f = _mm512_set1_ps(g);
    const __m512i idx = _mm512_loadu_si512(eoidx);
    for (int i = 0; i < 256; i += 32) {
        __m512 ev = _mm512_mul_ps(_mm512_loadu_ps(kp + i), f),
               od = _mm512_mul_ps(_mm512_loadu_ps(kp + i + 16), f);
        __m512i r;
        if (!_mm512_cmp_ps_mask(_mm512_min_ps(ev, od), _mm512_set1_ps(0x1p-126f), _CMP_LT_OQ))
            r = (__m512i)_mm512_cvtne2ps_pbh(od, ev);
        else
            r = _mm512_setzero_si512();
        r = _mm512_permutexvar_epi16(idx, r);
        _mm512_storeu_si512(y + i, r);
    }
}
#define PASS1B(NAME, EXP)                                                                          \
    T __attribute__((noinline)) float NAME(const uint16_t *x, float *kp, float sc2, float msc) {   \
        __m512 a = _mm512_setzero_ps(), b = a;                                                     \
        const __m512 s = _mm512_set1_ps(sc2), m = _mm512_set1_ps(msc);                             \
        for (int i = 0; i < 256; i += 32) {                                                        \
            __m512i w = _mm512_loadu_si512(x + i);                                                 \
            __m512 ev = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));                             \
            __m512 od =                                                                            \
                _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xFFFF0000u)));     \
            __m512 e1_ = EXP(_mm512_fmsub_ps(ev, s, m));                                           \
            _mm512_storeu_ps(kp + i, e1_);                                                         \
            a = _mm512_add_ps(a, e1_);                                                             \
            __m512 e2_ = EXP(_mm512_fmsub_ps(od, s, m));                                           \
            _mm512_storeu_ps(kp + i + 16, e2_);                                                    \
            b = _mm512_add_ps(b, e2_);                                                             \
        }                                                                                          \
        return _mm512_reduce_add_ps(_mm512_add_ps(a, b));                                          \
    }
#define PASS1C(NAME, EXP)                                                                          \
    T __attribute__((noinline)) float NAME(const uint16_t *x, float *kp, float sc2, float msc) {   \
        __m512 a = _mm512_setzero_ps(), b = a;                                                     \
        const __m512 s = _mm512_set1_ps(sc2), m = _mm512_set1_ps(msc);                             \
        for (int i = 0; i < 256; i += 32) {                                                        \
            __m512i w = _mm512_loadu_si512(x + i);                                                 \
            __m512 ev = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));                             \
            __m512 od =                                                                            \
                _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xFFFF0000u)));     \
            __m512 e1_ = EXP(_mm512_fmsub_ps(ev, s, m));                                           \
            a = _mm512_add_ps(a, e1_);                                                             \
            __m512 e2_ = EXP(_mm512_fmsub_ps(od, s, m));                                           \
            b = _mm512_add_ps(b, e2_);                                                             \
        }                                                                                          \
        return _mm512_reduce_add_ps(_mm512_add_ps(a, b));                                          \
    }
PASS1B(q_n4, n4)
PASS1B(q_n3, n3) PASS1B(q_e0, e0) PASS1C(r_n4, n4) PASS1C(r_e0, e0) int main(void) {
    for (int i = 0; i < 256 * 16; i++) {
        float v = ((i * 2654435761u) >> 8) / 16777216.0f * 4 - 2;
        uint32_t u;
        __builtin_memcpy(&u, &v, 4);
        xb[i] = u >> 16;
    }
    const long R = 100000;
    volatile float sink = 0;
    double best[64];
    for (int i = 0; i < 64; i++) best[i] = 1e9;
    int id;
#define B1(fn)                                                                                     \
    {                                                                                              \
        double t0 = now();                                                                         \
        for (long r = 0; r < R; r++) {                                                             \
            sink += fn(xb + (r & 15) * 256, keep + (r & 15) * 256, 2.885f, 5.77f);                 \
        }                                                                                          \
        double t = now() - t0;                                                                     \
        if (t < best[id]) best[id] = t;                                                            \
        id++;                                                                                      \
    }
#define B2(fn)                                                                                     \
    {                                                                                              \
        double t0 = now();                                                                         \
        for (long r = 0; r < R; r++) {                                                             \
            fn(keep + (r & 15) * 256, yb + (r & 15) * 256, 0.001f);                                \
        }                                                                                          \
        double t = now() - t0;                                                                     \
        if (t < best[id]) best[id] = t;                                                            \
        id++;                                                                                      \
    }
    const char *names[] = {"p_e6", "p_e6k", "p_e0", "p_g1", "p_g2", "p_g3", "p_g4", "p_n5", "p_e1",
                           "p_n4", "r_e0",  "q_e0", "w0",   "w1",   "w2",   "w3",   "w4"};
    for (int rep = 0; rep < 7; rep++) {
        id = 0;
        B1(p_e6)
        B1(p_e6k) B1(p_e0) B1(p_g1) B1(p_g2) B1(p_g3) B1(p_g4) B1(p_n5) B1(p_e1) B1(p_n4) B1(r_e0)
            B1(q_e0) B2(w0) B2(w1) B2(w2) B2(w3) B2(w4)
    }
    for (int i = 0; i < 17; i++)
        printf("%-8s %.2f cycles/16\n", names[i], best[i] * 3.6e9 / (R * 16.0));
    return 0;
}
// clang-format on
