/* bf16 x bf16 -> f32 matrix product with AVX512_BF16: c = a . b^T, the product
 * of the CPU GEMM driver (gemm_cpu.c) for bf16 inputs on CPUs that have
 * vdpbf16ps, so bf16 weights are never widened to f32 in memory.
 *
 * vdpbf16ps multiplies pairs of bf16 values along K and adds both products
 * to an f32 lane: 32 multiply-adds per instruction. The classic blocked
 * layout (Goto's): a block of KC k values of b is packed as strips of 32
 * columns, [KC/2][32] pairs (two vectors per k pair), and of a as
 * micro-panels of 12 rows, [KC/2][12] pairs (one broadcast per row and pair).
 * The micro-kernel holds a 12 x 32 tile of c in 24 of the 32 vector
 * registers. Both operands are packed once per call; then a work item is a
 * 192 x 256 tile of c (192 KiB, in L2 across all of K) and its k blocks in
 * turn: their a (192 KiB) and b (256 KiB) blocks stay in L2 (1 MiB on Zen 4),
 * one micro-panel of a (12 KiB) in L1 while the eight strips of b (32 KiB
 * each) pass over it. 192 rows rather than 96: each tile row of c reads all
 * of the packed b from memory, so half the rows of work items read it twice
 * as often (measured 3-5% slower at 512 x 4096 x 4096 on 2 threads). At the amx
 * level the product runs on AMX tiles instead (gemm_bf16_amx.c), with this
 * file's packing of b and its scratch. docs/backends/cpu.md, "Instruction sets". */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/threads.h"
#include "cpu/cpu_gemm_internal.h"
#include "cpu/cpu_isa.h"

#define MR 12  /* rows of the micro-tile */
#define NR 32  /* columns of the micro-tile: two vectors */
#define KC 512 /* k values per packed block (256 pairs) */
#define MC 192 /* rows of a work item: 16 micro-panels */
#define NC 256 /* columns of a work item: 8 strips */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

/* Rows [r0, r0 + w) of a [*, ld] bf16 matrix, k values [k0, k0 + kc), as
 * 32-bit pairs dst[p * w + i] = (k0 + 2p, k0 + 2p + 1) of row r0 + i: the
 * layout of a micro-panel of a (w = MR) and of a strip of b (w = NR). Rows
 * at or past `rows` and the k past an odd kc are zeros. 16 rows at a time:
 * each row's next 16 pairs (one 64-byte load, masked at the end of kc), then
 * a 16 x 16 transpose of 32-bit lanes in registers (64 shuffles), so a
 * vector of pairs is 4 shuffles instead of a gather of 16 rows. */
TARGET void kk__cpu_bf16_pack_pairs(const uint16_t *src, int64_t ld, int64_t rows, int64_t r0,
                                    int w, int64_t k0, int64_t kc, uint32_t *dst) {
    const int64_t full = kc / 2, kp = (kc + 1) / 2;
    for (int h = 0; h < w; h += 16) {
        const int64_t left = rows - (r0 + h);
        const int lanes = w - h < 16 ? w - h : 16;
        const int live = left <= 0 ? 0 : left >= lanes ? lanes : (int)left;
        const __mmask16 store = (__mmask16)((1u << lanes) - 1);
        const uint16_t *base = src + (r0 + h) * ld + k0;
        for (int64_t p0 = 0; p0 < full; p0 += 16) {
            const int cnt = full - p0 < 16 ? (int)(full - p0) : 16;
            const __mmask16 load = (__mmask16)((1u << cnt) - 1);
            __m512i r[16], t[16];
            for (int i = 0; i < 16; i++)
                r[i] = i < live ? _mm512_maskz_loadu_epi32(load, base + i * ld + 2 * p0)
                                : _mm512_setzero_si512();
            /* 32-bit lanes of row pairs, then 64-bit of row quads */
            for (int i = 0; i < 16; i += 2) {
                t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
                t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
            }
            for (int i = 0; i < 16; i += 4) {
                r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
                r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
                r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
                r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
            }
            /* r[4q + j] holds, in its 128-bit lane l, pair 4l + j of rows
             * 4q..4q+3; two rounds of 128-bit lane shuffles gather the quads. */
            for (int j = 0; j < 4; j++) {
                t[j] = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x88);     /* lanes 0, 2 */
                t[4 + j] = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xdd); /* lanes 1, 3 */
                t[8 + j] = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x88);
                t[12 + j] = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xdd);
            }
            for (int j = 0; j < 4; j++) {
                /* pair 4l + j for l = 0..3: rows 0..15 */
                const __m512i l0 = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
                const __m512i l2 = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xdd);
                const __m512i l1 = _mm512_shuffle_i32x4(t[4 + j], t[12 + j], 0x88);
                const __m512i l3 = _mm512_shuffle_i32x4(t[4 + j], t[12 + j], 0xdd);
                const __m512i out[4] = {l0, l1, l2, l3};
                for (int l = 0; l < 4; l++)
                    if (4 * l + j < cnt)
                        _mm512_mask_storeu_epi32(dst + (p0 + 4 * l + j) * w + h, store, out[l]);
            }
        }
        if (kp > full) /* odd kc: the last pair's second value is zero */
            for (int i = 0; i < lanes; i++)
                dst[full * w + h + i] = i < left ? base[i * ld + 2 * full] : 0;
    }
}

/* c[12][32] (ldc) = (accumulate ? c : 0) + the kp pairs of the packed panel
 * ap and strip bp. Named accumulators: GCC keeps arrays of vectors in memory. */
TARGET static void kernel_12x32(const uint32_t *ap, const uint32_t *bp, int64_t kp, float *c,
                                int64_t ldc, int accumulate) {
#define DECL(r) __m512 lo##r, hi##r;
#define INIT(r)                                                                                    \
    lo##r = accumulate ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps();                       \
    hi##r = accumulate ? _mm512_loadu_ps(c + r * ldc + 16) : _mm512_setzero_ps();
#define STEP(r)                                                                                    \
    {                                                                                              \
        const __m512i ar = _mm512_set1_epi32((int)ap[r]);                                          \
        lo##r = _mm512_dpbf16_ps(lo##r, (__m512bh)ar, (__m512bh)b0);                               \
        hi##r = _mm512_dpbf16_ps(hi##r, (__m512bh)ar, (__m512bh)b1);                               \
    }
#define STORE(r)                                                                                   \
    _mm512_storeu_ps(c + r * ldc, lo##r);                                                          \
    _mm512_storeu_ps(c + r * ldc + 16, hi##r);
    ROWS(DECL)
    ROWS(INIT)
    for (int64_t p = 0; p < kp; p++, ap += MR, bp += NR) {
        const __m512i b0 = _mm512_loadu_si512(bp), b1 = _mm512_loadu_si512(bp + 16);
        _mm_prefetch((const char *)(bp + 8 * NR), _MM_HINT_T0);
        _mm_prefetch((const char *)(bp + 8 * NR + 16), _MM_HINT_T0);
        ROWS(STEP)
    }
    ROWS(STORE)
#undef DECL
#undef INIT
#undef STEP
#undef STORE
}

/* A tile at the edge of c: the full tile into a buffer, then its rows < m,
 * columns < n added to (or stored in) c. */
TARGET static void kernel_edge(const uint32_t *ap, const uint32_t *bp, int64_t kp, float *c,
                               int64_t ldc, int accumulate, int64_t m, int64_t n) {
    float tile[MR * NR];
    kernel_12x32(ap, bp, kp, tile, NR, 0);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + tile[i * NR + j] : tile[i * NR + j];
}

int kk__cpu_gemm_bf16_available(void) { return kk__cpu_isa() >= KK__ISA_AVX512_BF16; }

static atomic_long amx_runs;

long kk__cpu_gemm_bf16_amx_runs(void) { return atomic_load(&amx_runs); }

/* The scratch of the packed operands, kept between calls: pages of a fresh
 * allocation of tens of MiB would be faulted in on every call. One call at a
 * time uses it; a concurrent call allocates its own. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static void *cache;
static size_t cache_bytes;

void *kk__cpu_bf16_scratch_take(size_t bytes, int *cached) {
    *cached = 0;
    if (pthread_mutex_trylock(&cache_lock) == 0) {
        if (cache_bytes < bytes) {
            free(cache);
            cache = aligned_alloc(64, bytes);
            cache_bytes = cache ? bytes : 0;
        }
        if (cache) {
            *cached = 1;
            return cache;
        }
        pthread_mutex_unlock(&cache_lock);
    }
    return aligned_alloc(64, bytes);
}

void kk__cpu_bf16_scratch_give(void *p, int cached) {
    if (cached)
        pthread_mutex_unlock(&cache_lock);
    else
        free(p);
}

kk_status kk__cpu_gemm_bf16(int64_t m, int64_t n, int64_t K, const uint16_t *a, int64_t lda,
                            const uint16_t *b, int64_t ldb, float *c, int64_t ldc,
                            kk__cpu_tile_fn done, void *ctx) {
    if (!kk__cpu_gemm_bf16_available())
        return kk__error(KK_ERR_UNSUPPORTED, "gemm", "the bf16 product needs AVX512_BF16");
    if (kk__cpu_isa() >= KK__ISA_AMX) {
        atomic_fetch_add(&amx_runs, 1);
        return kk__cpu_gemm_bf16_amx(m, n, K, a, lda, b, ldb, c, ldc, done, ctx);
    }
    /* Every k block of every strip of b and panel of a, packed once: block kb
     * of strip s at (s * nkb + kb) * KC/2 * NR pairs (panels alike, MR). */
    const int64_t nkb = (K + KC - 1) / KC;
    const int64_t strips = (n + NR - 1) / NR, panels = (m + MR - 1) / MR;
    const int64_t bsize = strips * nkb * (KC / 2) * NR, asize = panels * nkb * (KC / 2) * MR;
    int cached;
    uint32_t *bpack =
        kk__cpu_bf16_scratch_take((size_t)(bsize + asize) * sizeof(uint32_t), &cached);
    if (!bpack)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "gemm",
                         "no host memory to pack a %lldx%lldx%lld bf16 product", (long long)m,
                         (long long)n, (long long)K);
    uint32_t *apack = bpack + bsize;
    const int64_t tiles_m = (m + MC - 1) / MC, tiles_n = (n + NC - 1) / NC;
#pragma omp parallel num_threads(kk__cpu_threads())
    {
#pragma omp for schedule(dynamic, 4)
        for (int64_t job = 0; job < (strips + panels) * nkb; job++) {
            const int64_t s = job / nkb, kb = job % nkb, k0 = kb * KC;
            const int64_t kc = min64(KC, K - k0);
            if (s < strips)
                kk__cpu_bf16_pack_pairs(b, ldb, n, s * NR, NR, k0, kc, bpack + job * (KC / 2) * NR);
            else
                kk__cpu_bf16_pack_pairs(a, lda, m, (s - strips) * MR, MR, k0, kc,
                                        apack + (job - strips * nkb) * (KC / 2) * MR);
        }
        /* (the implicit barrier: everything is packed) A work item is a tile
         * of c: its k blocks in turn, so the tile stays in L2 between them. */
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < tiles_m * tiles_n; t++) {
            const int64_t i0 = t / tiles_n * MC, j0 = t % tiles_n * NC;
            for (int64_t kb = 0; kb < nkb; kb++) {
                const int64_t kp = (min64(KC, K - kb * KC) + 1) / 2;
                for (int64_t i = i0; i < min64(i0 + MC, m); i += MR) {
                    const uint32_t *ap = apack + ((i / MR) * nkb + kb) * (KC / 2) * MR;
                    for (int64_t j = j0; j < min64(j0 + NC, n); j += NR) {
                        const uint32_t *bp = bpack + ((j / NR) * nkb + kb) * (KC / 2) * NR;
                        float *ct = c + i * ldc + j;
                        if (i + MR <= m && j + NR <= n)
                            kernel_12x32(ap, bp, kp, ct, ldc, kb > 0);
                        else
                            kernel_edge(ap, bp, kp, ct, ldc, kb > 0, min64(MR, m - i),
                                        min64(NR, n - j));
                    }
                }
            }
            if (done)
                done(ctx, c + i0 * ldc + j0, ldc, i0, min64(MC, m - i0), j0, min64(NC, n - j0));
        }
    }
    kk__cpu_bf16_scratch_give(bpack, cached);
    return KK_OK;
}

#else

int kk__cpu_gemm_bf16_available(void) { return 0; }

long kk__cpu_gemm_bf16_amx_runs(void) { return 0; }

kk_status kk__cpu_gemm_bf16(int64_t m, int64_t n, int64_t K, const uint16_t *a, int64_t lda,
                            const uint16_t *b, int64_t ldb, float *c, int64_t ldc,
                            kk__cpu_tile_fn done, void *ctx) {
    (void)m, (void)n, (void)K, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
    (void)done, (void)ctx;
    return kk__error(KK_ERR_UNSUPPORTED, "gemm", "the bf16 product needs x86-64 AVX512_BF16");
}

#endif
