/* bf16 x bf16 -> f32 matrix product on AMX tiles: c = a . b^T, the product
 * of the CPU GEMM driver at the amx level (gemm_bf16_cpu.c calls it in place
 * of its vdpbf16ps kernel; same arguments, same epilogue callback).
 *
 * Tiles (palette 1, each 16 rows of 64 bytes): 4 accumulators of 16 x 16 f32
 * hold a 32 x 32 block of c; per 32 k values two tiles of a (16 rows x 32
 * bf16) and two of b in the pair layout (16 k pairs x 16 columns, a pair per
 * 32-bit lane) feed 4 tdpbf16ps (16 x 16 x 32 multiply-adds each). b is packed
 * as the vdpbf16ps kernel packs it (strips of 32 columns, [k/2][32] pairs:
 * its two halves are the two b tiles, row stride 128 bytes); a as panels of
 * 32 rows, [k/32][32 rows][32] bf16 (a tile is 1 KiB, row stride 64). Each
 * k block (512 values) is padded with zero pairs to whole tiles. A work item
 * is a 128 x 256 tile of c and its k blocks in turn, so the tile stays in L2;
 * the epilogue runs on it right after its last block.
 *
 * KK_AMX_EMULATE (tests/test_cpu_gemm_amx_emu.c only) compiles the same code
 * with the tile instructions emulated in C (cpu_amx.h), to check the layout
 * and the edges on CPUs without AMX. docs/backends/cpu.md, "Instruction sets". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/threads.h"
#include "cpu/cpu_gemm_internal.h"
#include "cpu/cpu_amx.h"
#include "cpu/cpu_isa.h"

#if KK__AMX_CODE

#define KT 32          /* k values per tile */
#define MR 32          /* rows of a block of c: two a tiles */
#define NR 32          /* columns of a block of c: two b tiles (the strip of the pair packing) */
#define KC 512         /* k values per packed block */
#define MC 128         /* rows of a work item */
#define NC 256         /* columns of a work item */
#define ABLK (MR * KC) /* bf16 values per packed block of a panel */
#define BBLK (KC / 2 * NR) /* pairs per packed block of a strip */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* the tile operations (cpu_amx.h), real or emulated (KK_AMX_EMULATE) */
#ifdef KK_AMX_EMULATE
#define ENTRY kk__cpu_gemm_bf16_amx_emu
#else
#define ENTRY kk__cpu_gemm_bf16_amx
#endif

/* Rows [r0, r0 + MR) of a [*, lda], k values [k0, k0 + kc), as tiles of 32
 * k values: dst[t][r][0..31]; rows at or past m and the k past kc zero. */
static void pack_a(const uint16_t *a, int64_t lda, int64_t m, int64_t r0, int64_t k0, int64_t kc,
                   uint16_t *dst) {
    const int64_t kt = (kc + KT - 1) / KT;
    for (int64_t r = 0; r < MR; r++) {
        const int64_t row = r0 + r;
        for (int64_t t = 0; t < kt; t++) {
            uint16_t *d = dst + t * MR * KT + r * KT;
            const int64_t len = row < m ? min64(KT, kc - t * KT) : 0;
            if (len > 0) memcpy(d, a + row * lda + k0 + t * KT, (size_t)len * sizeof *d);
            if (len < KT) memset(d + len, 0, (size_t)(KT - len) * sizeof *d);
        }
    }
}

/* c[32][32] (ldc floats) = (accumulate ? c : 0) + the kt tiles of k of the
 * packed panel block ap and strip block bp. Tiles 0..3: c (rows 0-15 and
 * 16-31 times columns 0-15 and 16-31), 4, 5: a, 6, 7: b. */
TARGET_AMX static void block_32x32(const uint16_t *ap, const uint32_t *bp, int64_t kt, float *c,
                                   int64_t ldc, int accumulate) {
    const int64_t sc = ldc * (int64_t)sizeof(float);
    if (accumulate) {
        TILE_LOAD(0, c, sc);
        TILE_LOAD(1, c + 16, sc);
        TILE_LOAD(2, c + 16 * ldc, sc);
        TILE_LOAD(3, c + 16 * ldc + 16, sc);
    } else {
        TILE_ZERO(0);
        TILE_ZERO(1);
        TILE_ZERO(2);
        TILE_ZERO(3);
    }
    for (int64_t t = 0; t < kt; t++, ap += MR * KT, bp += KT / 2 * NR) {
        TILE_LOAD(4, ap, KT * 2);
        TILE_LOAD(5, ap + 16 * KT, KT * 2);
        TILE_LOAD(6, bp, NR * 4);
        TILE_LOAD(7, bp + 16, NR * 4);
        TILE_DP(0, 4, 6);
        TILE_DP(1, 4, 7);
        TILE_DP(2, 5, 6);
        TILE_DP(3, 5, 7);
    }
    TILE_STORE(0, c, sc);
    TILE_STORE(1, c + 16, sc);
    TILE_STORE(2, c + 16 * ldc, sc);
    TILE_STORE(3, c + 16 * ldc + 16, sc);
}

/* A block at the edge of c: the whole block into a buffer, then its rows < m,
 * columns < n added to (or stored in) c. */
static void block_edge(const uint16_t *ap, const uint32_t *bp, int64_t kt, float *c, int64_t ldc,
                       int accumulate, int64_t m, int64_t n) {
    float tile[MR * NR] __attribute__((aligned(64)));
    block_32x32(ap, bp, kt, tile, NR, 0);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + tile[i * NR + j] : tile[i * NR + j];
}

kk_status ENTRY(int64_t m, int64_t n, int64_t K, const uint16_t *a, int64_t lda, const uint16_t *b,
                int64_t ldb, float *c, int64_t ldc, kk__cpu_tile_fn done, void *ctx) {
    /* block kb of strip s at (s * nkb + kb) * BBLK pairs, of panel q at
     * (q * nkb + kb) * ABLK bf16 values */
    const int64_t nkb = (K + KC - 1) / KC;
    const int64_t strips = (n + NR - 1) / NR, panels = (m + MR - 1) / MR;
    const int64_t bsize = strips * nkb * BBLK, asize = panels * nkb * ABLK;
    int cached;
    uint32_t *bpack = kk__cpu_bf16_scratch_take(
        (size_t)bsize * sizeof(uint32_t) + (size_t)asize * sizeof(uint16_t), &cached);
    if (!bpack)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "gemm",
                         "no host memory to pack a %lldx%lldx%lld bf16 product", (long long)m,
                         (long long)n, (long long)K);
    uint16_t *apack = (uint16_t *)(bpack + bsize);
    const int64_t tiles_m = (m + MC - 1) / MC, tiles_n = (n + NC - 1) / NC;
#pragma omp parallel num_threads(kk__cpu_threads())
    {
#pragma omp for schedule(dynamic, 4)
        for (int64_t job = 0; job < (strips + panels) * nkb; job++) {
            const int64_t s = job / nkb, kb = job % nkb, k0 = kb * KC;
            const int64_t kc = min64(KC, K - k0);
            if (s < strips) {
                uint32_t *dst = bpack + job * BBLK;
                kk__cpu_bf16_pack_pairs(b, ldb, n, s * NR, NR, k0, kc, dst);
                /* zero pairs up to a whole tile of k */
                const int64_t kp = (kc + 1) / 2, kp_tiles = (kc + KT - 1) / KT * (KT / 2);
                if (kp_tiles > kp) memset(dst + kp * NR, 0, (size_t)((kp_tiles - kp) * NR) * 4);
            } else {
                pack_a(a, lda, m, (s - strips) * MR, k0, kc, apack + (job - strips * nkb) * ABLK);
            }
        }
        /* (the implicit barrier: everything is packed) */
        tiles_begin();
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < tiles_m * tiles_n; t++) {
            const int64_t i0 = t / tiles_n * MC, j0 = t % tiles_n * NC;
            for (int64_t kb = 0; kb < nkb; kb++) {
                const int64_t kt = (min64(KC, K - kb * KC) + KT - 1) / KT;
                for (int64_t i = i0; i < min64(i0 + MC, m); i += MR) {
                    const uint16_t *ap = apack + ((i / MR) * nkb + kb) * ABLK;
                    for (int64_t j = j0; j < min64(j0 + NC, n); j += NR) {
                        const uint32_t *bp = bpack + ((j / NR) * nkb + kb) * BBLK;
                        float *ct = c + i * ldc + j;
                        if (i + MR <= m && j + NR <= n)
                            block_32x32(ap, bp, kt, ct, ldc, kb > 0);
                        else
                            block_edge(ap, bp, kt, ct, ldc, kb > 0, min64(MR, m - i),
                                       min64(NR, n - j));
                    }
                }
            }
            if (done)
                done(ctx, c + i0 * ldc + j0, ldc, i0, min64(MC, m - i0), j0, min64(NC, n - j0));
        }
        tiles_end();
    }
    kk__cpu_bf16_scratch_give(bpack, cached);
    return KK_OK;
}

#elif !defined(KK_AMX_EMULATE)

kk_status kk__cpu_gemm_bf16_amx(int64_t m, int64_t n, int64_t K, const uint16_t *a, int64_t lda,
                                const uint16_t *b, int64_t ldb, float *c, int64_t ldc,
                                kk__cpu_tile_fn done, void *ctx) {
    (void)m, (void)n, (void)K, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
    (void)done, (void)ctx;
    return kk__error(KK_ERR_UNSUPPORTED, "gemm", "this build has no AMX code (gcc 11, clang 12)");
}

#endif
