/* bf16 x bf16 -> f32 matrix product with AVX512_BF16: c = a . b^T, the product
 * of the CPU GEMM driver (gemm_cpu.c) for bf16 inputs on CPUs that have
 * vdpbf16ps, so bf16 weights are never widened to f32 in memory.
 *
 * vdpbf16ps multiplies pairs of bf16 values along K and adds both products
 * to an f32 lane: 32 multiply-adds per instruction. Only b is packed, as
 * strips of 64 columns, [KC/2][64] pairs (four vectors per k pair); a is read
 * in place, one 32-bit broadcast per row and pair, as oneDNN's brgemm does.
 * The micro-kernel holds a 6 x 64 tile of c in 24 of the 32 vector registers
 * (per pair: 4 loads, 6 broadcasts, 24 vdpbf16ps); 6 rows of a are 6 streams,
 * which an 8-way L1 keeps even when the rows are 4 KiB apart (12 were not).
 * A work item is a block of NC columns (SwiGLU: NC2 of each weight) and a
 * range of rows (all of M unless that leaves too few items): per block of KC
 * k values its thread packs the block of b (256 KiB) into its own scratch,
 * where it stays in L2 while every row passes over it. So b is read from
 * memory once and never written back packed, and a is never copied (a
 * software prefetch of the next block of b into L2 made the product 1-3%
 * slower: it evicts the block in use). The epilogue runs on each group of 24
 * rows right after their last block; with no c from the caller the f32
 * products live only in the thread's tile buffer (L2), never in memory. Two
 * weights (SwiGLU's gate and up) share each pass over a. At the amx level the
 * product runs on AMX tiles instead (gemm_bf16_amx.c), with this file's
 * packing of b (strips of 32) and its scratch.
 * docs/backends/cpu.md, "Instruction sets" and "bf16 Linear: the third pass". */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/threads.h"
#include "cpu/cpu_gemm_internal.h"
#include "cpu/cpu_isa.h"

#define MR 6         /* rows of the micro-tile */
#define NR 64        /* columns of the micro-tile: four vectors, one packed strip */
#define KC 1024      /* k values per packed block of b (512 pairs) */
#define NC 128       /* columns of a work item: 2 strips */
#define NC2 64       /* the same with two weights (SwiGLU): a strip of each */
#define EPI_ROWS 24  /* rows per epilogue call: 4 micro-tiles */
#define MAX_ROWS 512 /* rows of a work item whose product stays in its thread's buffer */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

/* Rows [r0, r0 + w) of a [*, ld] bf16 matrix, k values [k0, k0 + kc), as
 * 32-bit pairs dst[p * w + i] = (k0 + 2p, k0 + 2p + 1) of row r0 + i: the
 * layout of a strip of b (w = NR here, 32 for the AMX kernel). Rows
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

/* Lanes of vector v (of four) in a row piece of n columns. */
static inline __mmask16 col_mask(int64_t n, int v) {
    const int64_t left = n - 16 * v;
    return left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
}

/* c[R][ncols <= 64] (ldc) = (accumulate ? c : 0) + rows 0..R-1 of a (lda,
 * bf16, read in place: kp pairs, then one more value if odd) times the packed
 * strip bp. R is a constant in each caller, so the rows past it vanish and
 * the named accumulators stay in registers (GCC keeps arrays of vectors in
 * memory). Columns past ncols are masked off. */
#define DECL(r) __m512 c##r##0, c##r##1, c##r##2, c##r##3;
#define INIT(r)                                                                                    \
    if (r < R) {                                                                                   \
        c##r##0 = accumulate ? _mm512_maskz_loadu_ps(m0, c + r * ldc) : _mm512_setzero_ps();       \
        c##r##1 = accumulate ? _mm512_maskz_loadu_ps(m1, c + r * ldc + 16) : _mm512_setzero_ps();  \
        c##r##2 = accumulate ? _mm512_maskz_loadu_ps(m2, c + r * ldc + 32) : _mm512_setzero_ps();  \
        c##r##3 = accumulate ? _mm512_maskz_loadu_ps(m3, c + r * ldc + 48) : _mm512_setzero_ps();  \
    }
#define STEP(r, value)                                                                             \
    if (r < R) {                                                                                   \
        const __m512bh ar = (__m512bh)_mm512_set1_epi32(value);                                    \
        c##r##0 = _mm512_dpbf16_ps(c##r##0, ar, (__m512bh)b0);                                     \
        c##r##1 = _mm512_dpbf16_ps(c##r##1, ar, (__m512bh)b1);                                     \
        c##r##2 = _mm512_dpbf16_ps(c##r##2, ar, (__m512bh)b2);                                     \
        c##r##3 = _mm512_dpbf16_ps(c##r##3, ar, (__m512bh)b3);                                     \
    }
#define PAIR(r) STEP(r, load_pair(a + r * lda + 2 * p))
#define LAST(r) STEP(r, (int)a[r * lda + 2 * kp]) /* (value, 0): no read past k */
#define STORE(r)                                                                                   \
    if (r < R) {                                                                                   \
        _mm512_mask_storeu_ps(c + r * ldc, m0, c##r##0);                                           \
        _mm512_mask_storeu_ps(c + r * ldc + 16, m1, c##r##1);                                      \
        _mm512_mask_storeu_ps(c + r * ldc + 32, m2, c##r##2);                                      \
        _mm512_mask_storeu_ps(c + r * ldc + 48, m3, c##r##3);                                      \
    }
#define LOAD_B                                                                                     \
    const __m512i b0 = _mm512_loadu_si512(bp), b1 = _mm512_loadu_si512(bp + 16);                   \
    const __m512i b2 = _mm512_loadu_si512(bp + 32), b3 = _mm512_loadu_si512(bp + 48);

static inline int load_pair(const uint16_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

__attribute__((always_inline)) TARGET static inline void
kernel_body(const int R, const uint16_t *a, int64_t lda, const uint32_t *bp, int64_t kp, int odd,
            float *c, int64_t ldc, int accumulate, int64_t ncols) {
    const __mmask16 m0 = col_mask(ncols, 0), m1 = col_mask(ncols, 1), m2 = col_mask(ncols, 2),
                    m3 = col_mask(ncols, 3);
    ROWS(DECL)
    ROWS(INIT)
    for (int64_t p = 0; p < kp; p++, bp += NR) {
        LOAD_B
        ROWS(PAIR)
    }
    if (odd) {
        LOAD_B
        ROWS(LAST)
    }
    ROWS(STORE)
}
#undef DECL
#undef INIT
#undef STEP
#undef PAIR
#undef LAST
#undef STORE
#undef LOAD_B

typedef void (*kernel_fn)(const uint16_t *a, int64_t lda, const uint32_t *bp, int64_t kp, int odd,
                          float *c, int64_t ldc, int accumulate, int64_t ncols);
#define KERNEL(R)                                                                                  \
    TARGET static void kernel_##R(const uint16_t *a, int64_t lda, const uint32_t *bp, int64_t kp,  \
                                  int odd, float *c, int64_t ldc, int accumulate, int64_t ncols) { \
        kernel_body(R, a, lda, bp, kp, odd, c, ldc, accumulate, ncols);                            \
    }
KERNEL(1)
KERNEL(2)
KERNEL(3)
KERNEL(4)
KERNEL(5)
KERNEL(6)
#undef KERNEL
static const kernel_fn kernels[MR + 1] = {NULL,     kernel_1, kernel_2, kernel_3,
                                          kernel_4, kernel_5, kernel_6};

int kk__cpu_gemm_bf16_available(void) { return kk__cpu_isa() >= KK__ISA_AVX512_BF16; }

static atomic_long amx_runs;

long kk__cpu_gemm_bf16_amx_runs(void) { return atomic_load(&amx_runs); }

static _Atomic(kk__cpu_bf16_product_fn) amx_test;

void kk__cpu_gemm_bf16_amx_test(kk__cpu_bf16_product_fn kernel) { atomic_store(&amx_test, kernel); }

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

/* kk__cpu_gemm_bf16's one-tile callback as the pair's two-tile one. */
typedef struct one_tile {
    kk__cpu_tile_fn done;
    void *ctx;
} one_tile;

static void one_tile_done(void *ctx, float *c0, float *c1, int64_t ldc, int64_t i0, int64_t rows,
                          int64_t j0, int64_t cols) {
    (void)c1;
    const one_tile *o = ctx;
    o->done(o->ctx, c0, ldc, i0, rows, j0, cols);
}

/* At the amx level the products run on tiles, one weight after the other
 * into c0 and c1, and the epilogue of a tile runs when the last product has
 * finished it. c0 NULL: into scratch of ours, blocks of rows whose products
 * take at most AMX_BLOCK_BYTES. */
#define AMX_BLOCK_BYTES (INT64_C(8) << 20)

typedef struct amx_pair {
    float *c0, *c1;
    int64_t i_off; /* the block's first row */
    kk__cpu_tile2_fn done;
    void *ctx;
} amx_pair;

static void amx_pair_done(void *ctx, float *c_tile, int64_t ldc, int64_t i0, int64_t rows,
                          int64_t j0, int64_t cols) {
    (void)c_tile;
    const amx_pair *p = ctx;
    p->done(p->ctx, p->c0 + i0 * ldc + j0, p->c1 ? p->c1 + i0 * ldc + j0 : NULL, ldc, p->i_off + i0,
            rows, j0, cols);
}

static kk_status pair_amx(kk__cpu_bf16_product_fn product, int64_t m, int64_t n, int64_t K,
                          const uint16_t *a, int64_t lda, const uint16_t *b0, const uint16_t *b1,
                          int64_t ldb, float *c0, float *c1, int64_t ldc, kk__cpu_tile2_fn done,
                          void *ctx) {
    const int nw = b1 ? 2 : 1;
    int64_t rows = m;
    float *own = NULL;
    if (!c0) {
        rows = min64(m, AMX_BLOCK_BYTES / (int64_t)sizeof(float) / (nw * n));
        rows = rows < 16 ? min64(m, 16) : rows;
        own = malloc((size_t)(rows * n * nw) * sizeof(float));
        if (!own)
            return kk__error(KK_ERR_OUT_OF_MEMORY, "gemm",
                             "no host memory for a %lldx%lld f32 product", (long long)rows,
                             (long long)n);
        ldc = n;
    }
    kk_status st = KK_OK;
    for (int64_t i = 0; i < m && st == KK_OK; i += rows) {
        const int64_t r = min64(rows, m - i);
        float *d0 = own ? own : c0 + i * ldc, *d1 = own ? own + rows * n : b1 ? c1 + i * ldc : NULL;
        amx_pair p = {d0, b1 ? d1 : NULL, i, done, ctx};
        if (b1) {
            atomic_fetch_add(&amx_runs, 1);
            st = product(r, n, K, a + i * lda, lda, b0, ldb, d0, ldc, NULL, NULL);
        }
        if (st == KK_OK) {
            atomic_fetch_add(&amx_runs, 1);
            st = product(r, n, K, a + i * lda, lda, b1 ? b1 : b0, ldb, b1 ? d1 : d0, ldc,
                         done ? amx_pair_done : NULL, &p);
        }
    }
    free(own);
    return st;
}

/* Rows [i0, i1) of the column block [j0, j0 + ncols) of every weight: per k
 * block, pack b's block (b[w] -> bb[w]) and run the micro-kernels on each
 * group of 6 rows (a read in place); the epilogue after the last block,
 * EPI_ROWS rows at a time. c[w] NULL: the products go to the thread's tile buffer cb (ldc NC),
 * rows i0.. (EPI_ROWS of them reused per group when there is one k block). */
TARGET static void work_item(int64_t n, int64_t K, const uint16_t *a, int64_t lda,
                             const uint16_t *const *b, int nw, int64_t ldb, float *const *c,
                             int64_t ldc, int64_t i0, int64_t i1, int64_t j0, uint32_t *bb,
                             float *cb, int64_t cb_rows, kk__cpu_tile2_fn done, void *ctx) {
    const int64_t CW = nw == 2 ? NC2 : NC; /* columns of the item */
    const int64_t ncols = min64(CW, n - j0), strips = (ncols + NR - 1) / NR;
    const int64_t nkb = (K + KC - 1) / KC, blk = (KC / 2) * CW;
    const int own = c[0] == NULL;
    for (int64_t kb = 0; kb < nkb; kb++) {
        const int64_t k0 = kb * KC, kc = min64(KC, K - k0), kp = kc / 2;
        const int odd = (int)(kc & 1);
        for (int w = 0; w < nw; w++)
            for (int64_t s = 0; s < strips; s++)
                kk__cpu_bf16_pack_pairs(b[w], ldb, n, j0 + s * NR, NR, k0, kc,
                                        bb + w * blk + s * (KC / 2) * NR);
        int64_t e0 = i0;
        for (int64_t i = i0; i < i1; i += MR) {
            const int64_t mr = min64(MR, i1 - i);
            /* where rows i.. of each product go */
            const int64_t at = own ? (nkb == 1 ? i - e0 : i - i0) * CW : i * ldc + j0;
            const int64_t ld = own ? CW : ldc;
            for (int w = 0; w < nw; w++)
                for (int64_t s = 0; s < strips; s++)
                    kernels[mr](a + i * lda + k0, lda, bb + w * blk + s * (KC / 2) * NR, kp, odd,
                                (own ? cb + w * cb_rows * CW : c[w]) + at + s * NR, ld, kb > 0,
                                ncols - s * NR);
            if (done && kb == nkb - 1 && (i + mr - e0 >= EPI_ROWS || i + mr == i1)) {
                const int64_t from = own ? (nkb == 1 ? 0 : e0 - i0) * CW : e0 * ldc + j0;
                done(ctx, (own ? cb : c[0]) + from,
                     nw == 2 ? (own ? cb + cb_rows * CW : c[1]) + from : NULL, ld, e0, i + mr - e0,
                     j0, ncols);
                e0 = i + mr;
            }
        }
    }
}

kk_status kk__cpu_gemm_bf16_pair(int64_t m, int64_t n, int64_t K, const uint16_t *a, int64_t lda,
                                 const uint16_t *b0, const uint16_t *b1, int64_t ldb, float *c0,
                                 float *c1, int64_t ldc, kk__cpu_tile2_fn done, void *ctx) {
    if (!kk__cpu_gemm_bf16_available())
        return kk__error(KK_ERR_UNSUPPORTED, "gemm", "the bf16 product needs AVX512_BF16");
    if (!c0 && !done)
        return kk__error(KK_ERR_INVALID_ARGUMENT, "gemm", "a product with no c needs an epilogue");
    const int nw = b1 ? 2 : 1, nt = kk__cpu_threads();
    const uint16_t *const b[2] = {b0, b1};
    float *const c[2] = {c0, c1};
    const int64_t nkb = (K + KC - 1) / KC;
    if (K <= 0 && !c0)
        return kk__error(KK_ERR_INVALID_ARGUMENT, "gemm", "K = %lld: no product", (long long)K);
    if (K <= 0) { /* no products: zeros (at every level: the tiles have no k block to run) */
        for (int w = 0; w < nw; w++)
            if (c[w])
                for (int64_t i = 0; i < m; i++)
                    memset(c[w] + i * ldc, 0, (size_t)n * sizeof(float));
        if (done) done(ctx, c0, c1, ldc, 0, m, 0, n);
        return KK_OK;
    }
    const kk__cpu_bf16_product_fn test = atomic_load(&amx_test);
    if (test || kk__cpu_isa() >= KK__ISA_AMX)
        return pair_amx(test ? test : kk__cpu_gemm_bf16_amx, m, n, K, a, lda, b0, b1, ldb, c0, c1,
                        ldc, done, ctx);
    /* work items: column blocks, and the rows split when there are fewer than
     * 8 blocks a thread (each row range packs its blocks of b again; fewer
     * items leave a thread idle at the end, on a shared machine for as long
     * as one item) or, for a product kept in the threads' buffers over
     * several k blocks, into ranges of at most MAX_ROWS */
    const int64_t CW = nw == 2 ? NC2 : NC; /* columns of an item */
    const int64_t tiles_n = (n + CW - 1) / CW;
    int64_t tiles_m = tiles_n >= 8 * nt ? 1 : (8 * nt + tiles_n - 1) / tiles_n;
    tiles_m = min64(tiles_m, (m + 4 * MR - 1) / (4 * MR));
    if (!c0 && nkb > 1 && tiles_m < (m + MAX_ROWS - 1) / MAX_ROWS)
        tiles_m = (m + MAX_ROWS - 1) / MAX_ROWS;
    const int64_t rows_per = ((m + tiles_m - 1) / tiles_m + MR - 1) / MR * MR;
    /* each thread's packed blocks of b and (c0 NULL) its tile buffer, kept
     * between calls */
    const int64_t cb_rows = !c0 ? (nkb == 1 ? EPI_ROWS : rows_per) : 0;
    const int64_t pack = nw * (KC / 2) * CW, per_thread = pack + nw * cb_rows * CW;
    int cached;
    uint32_t *scratch =
        kk__cpu_bf16_scratch_take((size_t)(nt * per_thread) * sizeof(uint32_t), &cached);
    if (!scratch)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "gemm",
                         "no host memory to pack a %lldx%lldx%lld bf16 product", (long long)m,
                         (long long)n, (long long)K);
#pragma omp parallel num_threads(nt)
    {
        uint32_t *bb = scratch + omp_get_thread_num() * per_thread;
        float *cb = (float *)(bb + pack);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < tiles_m * tiles_n; t++) {
            const int64_t i0 = t / tiles_n * rows_per, i1 = min64(m, i0 + rows_per);
            if (i0 < i1)
                work_item(n, K, a, lda, b, nw, ldb, c, ldc, i0, i1, t % tiles_n * CW, bb, cb,
                          cb_rows, done, ctx);
        }
    }
    kk__cpu_bf16_scratch_give(scratch, cached);
    return KK_OK;
}

kk_status kk__cpu_gemm_bf16(int64_t m, int64_t n, int64_t K, const uint16_t *a, int64_t lda,
                            const uint16_t *b, int64_t ldb, float *c, int64_t ldc,
                            kk__cpu_tile_fn done, void *ctx) {
    one_tile o = {done, ctx};
    return kk__cpu_gemm_bf16_pair(m, n, K, a, lda, b, NULL, ldb, c, NULL, ldc,
                                  done ? one_tile_done : NULL, &o);
}

#else

int kk__cpu_gemm_bf16_available(void) { return 0; }

long kk__cpu_gemm_bf16_amx_runs(void) { return 0; }

void kk__cpu_gemm_bf16_amx_test(kk__cpu_bf16_product_fn kernel) { (void)kernel; }

kk_status kk__cpu_gemm_bf16(int64_t m, int64_t n, int64_t K, const uint16_t *a, int64_t lda,
                            const uint16_t *b, int64_t ldb, float *c, int64_t ldc,
                            kk__cpu_tile_fn done, void *ctx) {
    (void)m, (void)n, (void)K, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
    (void)done, (void)ctx;
    return kk__error(KK_ERR_UNSUPPORTED, "gemm", "the bf16 product needs x86-64 AVX512_BF16");
}

kk_status kk__cpu_gemm_bf16_pair(int64_t m, int64_t n, int64_t K, const uint16_t *a, int64_t lda,
                                 const uint16_t *b0, const uint16_t *b1, int64_t ldb, float *c0,
                                 float *c1, int64_t ldc, kk__cpu_tile2_fn done, void *ctx) {
    (void)m, (void)n, (void)K, (void)a, (void)lda, (void)b0, (void)b1, (void)ldb, (void)c0;
    (void)c1, (void)ldc, (void)done, (void)ctx;
    return kk__error(KK_ERR_UNSUPPORTED, "gemm", "the bf16 product needs x86-64 AVX512_BF16");
}

#endif
