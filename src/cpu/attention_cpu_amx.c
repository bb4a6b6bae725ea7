/* The bf16 attention's two products on AMX tiles (the amx level's
 * tile_scores and tile_values, attention_cpu.h) for attention_cpu_block.c's
 * pair path. S = scale K.Q^T: A = K's rows read in place as pairs along D,
 * B = the query block's pairs. O^T = O^T diag(alpha) + V^T.P^T: A = V^T's
 * rows of pairs of keys (repacked once per call), B = the weights rounded to
 * pairs of keys as the vdpbf16ps path rounds them. O is transposed so that
 * the weights, which the softmax leaves as [key][query], are B in
 * tdpbf16ps's pair layout with no transpose per block. C is covered in blocks
 * of 2 x 2 tiles of 16 x 16 f32 (4 accumulators, 2 A and 2 B tiles, as
 * gemm_bf16_amx.c). A tile reaching past m rows or kp pairs is first copied
 * with zeros into a buffer (a K row past the block may lie past the tensor,
 * and 0 times a non-finite value read there is NaN); so are C's rows past m.
 * The scaling and the rounding of the weights are here too, compiled for
 * AVX-512: with the products on tiles they are most of what is left.
 *
 * KK_AMX_EMULATE (tests/test_cpu_attention_amx_emu.c only) compiles the same
 * code on tiles emulated in C (cpu_amx.h). docs/backends/cpu.md, "Attention". */
#include <stdint.h>

#include "cpu/attention_cpu.h"
#include "cpu/cpu_amx.h"
#include "cpu/cpu_isa.h"
#include "cpu/cpu_rows.h"

#if KK__AMX_CODE

#ifdef KK_AMX_EMULATE
#define SCORES kk__att_tile_scores_amx_emu
#define VALUES kk__att_tile_values_amx_emu
#define TILES kk__att_tiles_amx_emu
#else
#define SCORES kk__att_tile_scores_amx
#define VALUES kk__att_tile_values_amx
#define TILES kk__att_tiles_amx
#endif

#define T 16 /* rows, f32 columns and pairs of a tile */

/* A's tile at rows r0.., pairs p0.. (row stride ars words): in place when
 * whole, else copied into buf with zeros past m rows and kp pairs. */
static const uint32_t *a_tile(const uint32_t *a, int64_t ars, int m, int kp, int r0, int p0,
                              uint32_t *buf, int64_t *stride) {
    if (r0 + T <= m && p0 + T <= kp) {
        *stride = ars * 4;
        return a + r0 * ars + p0;
    }
    for (int r = 0; r < T; r++)
        for (int p = 0; p < T; p++)
            buf[r * T + p] = r0 + r < m && p0 + p < kp ? a[(r0 + r) * ars + p0 + p] : 0;
    *stride = T * 4;
    return buf;
}

/* B's tile at pair rows p0.., columns j.. (row stride ldb words): in place
 * when whole, else copied into buf with zero rows past kp. */
static const uint32_t *b_tile(const uint32_t *b, int64_t ldb, int kp, int p0, int j, uint32_t *buf,
                              int64_t *stride) {
    if (p0 + T <= kp) {
        *stride = ldb * 4;
        return b + p0 * ldb + j;
    }
    for (int p = 0; p < T; p++)
        for (int x = 0; x < T; x++) buf[p * T + x] = p0 + p < kp ? b[(p0 + p) * ldb + j + x] : 0;
    *stride = T * 4;
    return buf;
}

/* C's rows [i0, i0 + 16 mu) below m, columns [j0, j0 + 16 nv), mu and nv 1 or
 * 2, (acc ? C : 0) + A B over kp pairs. Tiles 0..3: C (row tile u, column
 * tile v at 2u + v), 4, 5: A, 6, 7: B. Tile numbers are immediates, hence the
 * spelled-out tiles under their conditions. */
TARGET_AMX static void block(float *c, int64_t ldc, const uint32_t *a, int64_t ars,
                             const uint32_t *b, int64_t ldb, int m, int kp, int i0, int j0, int mu,
                             int nv, int acc) {
    float edge[4][T * T] __attribute__((aligned(64)));
    uint32_t abuf[2][T * T] __attribute__((aligned(64)));
    uint32_t bbuf[2][T * T] __attribute__((aligned(64)));
    float *cp[4] = {0};
    int64_t cs[4] = {0};
    for (int q = 0; q < 4; q++) {
        const int u = q / 2, v = q % 2, r0 = i0 + T * u, rows = m - r0 < T ? m - r0 : T;
        if (u >= mu || v >= nv) continue;
        float *at = c + r0 * ldc + j0 + T * v;
        if (rows == T) {
            cp[q] = at, cs[q] = ldc * 4;
            continue;
        }
        cp[q] = edge[q], cs[q] = T * 4;
        for (int r = 0; r < T && acc; r++)
            for (int x = 0; x < T; x++) edge[q][r * T + x] = r < rows ? at[r * ldc + x] : 0.0f;
    }
    if (acc) {
        TILE_LOAD(0, cp[0], cs[0]);
        if (nv > 1) TILE_LOAD(1, cp[1], cs[1]);
        if (mu > 1) TILE_LOAD(2, cp[2], cs[2]);
        if (mu > 1 && nv > 1) TILE_LOAD(3, cp[3], cs[3]);
    } else {
        TILE_ZERO(0);
        TILE_ZERO(1);
        TILE_ZERO(2);
        TILE_ZERO(3);
    }
    for (int p0 = 0; p0 < kp; p0 += T) {
        int64_t sa0, sa1 = 0, sb0, sb1 = 0;
        const uint32_t *a0 = a_tile(a, ars, m, kp, i0, p0, abuf[0], &sa0);
        const uint32_t *a1 = mu > 1 ? a_tile(a, ars, m, kp, i0 + T, p0, abuf[1], &sa1) : NULL;
        const uint32_t *b0 = b_tile(b, ldb, kp, p0, j0, bbuf[0], &sb0);
        const uint32_t *b1 = nv > 1 ? b_tile(b, ldb, kp, p0, j0 + T, bbuf[1], &sb1) : NULL;
        TILE_LOAD(4, a0, sa0);
        if (mu > 1) TILE_LOAD(5, a1, sa1);
        TILE_LOAD(6, b0, sb0);
        if (nv > 1) TILE_LOAD(7, b1, sb1);
        TILE_DP(0, 4, 6);
        if (nv > 1) TILE_DP(1, 4, 7);
        if (mu > 1) TILE_DP(2, 5, 6);
        if (mu > 1 && nv > 1) TILE_DP(3, 5, 7);
    }
    TILE_STORE(0, cp[0], cs[0]);
    if (nv > 1) TILE_STORE(1, cp[1], cs[1]);
    if (mu > 1) TILE_STORE(2, cp[2], cs[2]);
    if (mu > 1 && nv > 1) TILE_STORE(3, cp[3], cs[3]);
    for (int q = 0; q < 4; q++) { /* the edge tiles' rows below m back into C */
        const int u = q / 2, v = q % 2, r0 = i0 + T * u;
        if (u >= mu || v >= nv || cp[q] != edge[q]) continue;
        for (int r = 0; r < m - r0; r++)
            for (int x = 0; x < T; x++) c[(r0 + r) * ldc + j0 + T * v + x] = edge[q][r * T + x];
    }
}

/* C[m,n] (= C diag(alpha)) + A B, A(i,p) = a[i * ars + p], B's pair row p
 * at b + p * ldb, n % 16 == 0; the caller has configured the tiles. */
TARGET_AMX static void tile_pairs(float *c, int64_t ldc, const uint32_t *a, int64_t ars,
                                  const uint32_t *b, int64_t ldb, int m, int n, int kp,
                                  const float *alpha) {
    if (alpha) /* the rescale before the tiles add to C */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) c[i * ldc + j] *= alpha[j];
    for (int i0 = 0; i0 < m; i0 += 2 * T)
        for (int j0 = 0; j0 < n; j0 += 2 * T)
            block(c, ldc, a, ars, b, ldb, m, kp, i0, j0, m - i0 > T ? 2 : 1, n - j0 > T ? 2 : 1,
                  alpha != NULL);
}

/* kk__att_kernels.tile_scores */
TARGET_AMX void SCORES(float *s, int64_t lds, const uint32_t *k, int64_t ldk, const uint32_t *qp,
                       int64_t ldq, int nk, int ncols, int kp, float scale) {
    tile_pairs(s, lds, k, ldk, qp, ldq, nk, ncols, kp, NULL);
    for (int j = 0; j < nk; j++)
        for (int c = 0; c < ncols; c++) s[j * lds + c] *= scale;
}

/* kk__att_kernels.tile_values: the rounding is kk__f32_bf16's (the
 * vdpbf16ps path's), in loops the compiler vectorizes. */
TARGET_AMX void VALUES(float *ot, int64_t ldo, const uint32_t *vt, int64_t ldv, const float *s,
                       int64_t lds, uint32_t *pp, int nk, int ncols, int dp, const float *alpha) {
    const int kp = (nk + 1) / 2;
    for (int p = 0; p < nk / 2; p++) {
        const float *lo = s + 2 * p * lds, *hi = lo + lds;
        uint32_t *out = pp + p * lds;
        for (int c = 0; c < ncols; c++)
            out[c] = kk__f32_bf16(lo[c]) | (uint32_t)kk__f32_bf16(hi[c]) << 16;
    }
    if (nk % 2) /* the last key's partner: 0 */
        for (int c = 0; c < ncols; c++) pp[nk / 2 * lds + c] = kk__f32_bf16(s[(nk - 1) * lds + c]);
    tile_pairs(ot, ldo, vt, ldv, pp, lds, dp, ncols, kp, alpha);
}

TARGET_AMX void TILES(int on) {
    if (on)
        tiles_begin();
    else
        tiles_end();
}

#endif
