/* Internal: the pieces of the CPU attention forward kernel (attention_cpu.c:
 * the slot; attention_cpu_block.c: one block of query rows; the micro-kernels
 * in attention_cpu_generic.c and, with AVX2 + FMA, attention_cpu_avx2.c;
 * AVX-512 and AMX tiles: attention_cpu_avx512.c, attention_cpu_amx.c).
 * Scores are kept in log2 units so the softmax needs only exp2, one polynomial.
 * docs/backends/cpu.md, "Attention". */
#ifndef KK_CPU_ATTENTION_CPU_H
#define KK_CPU_ATTENTION_CPU_H

#include <stdint.h>

#include "cpu/cpu_isa.h"
#include "opdef/opdef.h"

/* Query rows per block: N of the score product (a multiple of KK__ATT_NT) and
 * M of the P.V product (a multiple of the 6-row micro-tile). */
#define KK__ATT_BQ 48
#define KK__ATT_BK 60 /* keys per block: M of the score product, 10 micro-tiles */
/* Keys per block of the pair path on AMX tiles: 4 tiles of 16 keys in the
 * score product, 2 tiles of 16 pairs of keys in P.V: no edge in a full block. */
#define KK__ATT_BK_AMX 64
#define KK__ATT_NT 16 /* columns of a micro-tile: N of every product is a multiple */
/* Key blocks summed in o before they are folded into o2: no f32 sum runs over
 * more than about 1000 keys, so a long Sk loses no more than a short one. */
#define KK__ATT_FOLD 16

/* Scores are kept transposed, s[key][query]: the score product then reads K
 * rows as they lie in memory (no transpose of K per block), and the softmax
 * of 8 queries at a time is one vector operation per key. */
typedef struct kk__att_kernels {
    const char *name;
    /* C[m,n] = diag(alpha) C + A B, or A B when alpha is NULL. A(i,k) is
   * a[i * ars + k * aks]; B and C are row-major (ldb, ldc); n % KK__ATT_NT == 0. */
    void (*gemm)(float *c, int64_t ldc, const float *a, int64_t ars, int64_t aks, const float *b,
                 int64_t ldb, int m, int n, int k, const float *alpha);
    /* One key block of the online softmax for queries [0, n), n % 8 == 0:
   * s[nk][lds] holds scores (log2 units, -inf where masked) and gets the
   * weights 2^(s - m_new); per query, m becomes m_new, alpha 2^(m_old - m_new)
   * and sum the block's weights' sum. A query with no visible key so far keeps
   * m = -inf and gets weights 0. */
    void (*softmax)(float *s, int64_t lds, int nk, int n, float *m, float *sum, float *alpha);
    /* x[j] = 2^(x[j] - m) for j < n (0 for -inf); returns their sum. The same
   * exp2 as softmax's, exposed for its accuracy test. */
    float (*exp2_sum)(float *x, int n, float m);
    /* With AVX512_BF16 (else NULL): gemm on pairs of bf16 values along k, each
   * pair one 32-bit word: C[m,n] (= diag(alpha) C) + sum over kp pairs of
   * A(i,p) . B(p, j), A(i,p) = a[i * ars + p * aps], B's pair row p at
   * b + p * ldb (words); n % KK__ATT_NT == 0. The bf16 attention's two
   * products (docs/backends/cpu.md, "Attention"). */
    void (*gemm_pairs)(float *c, int64_t ldc, const uint32_t *a, int64_t ars, int64_t aps,
                       const uint32_t *b, int64_t ldb, int m, int n, int kp, const float *alpha);
    /* At the amx level (else NULL; attention_cpu_amx.c): the pair path's two
     * products on AMX tiles, O kept transposed so that the weights, which the
     * softmax leaves as s[key][query], are tdpbf16ps's B operand in the
     * layout gemm_pairs takes, with no transpose per key block.
     * tile_scores: s[j][c] = scale sum_p K(j,p) . qp[p][c] for j < nk and
     * c < ncols, K(j,p) = k[j * ldk + p] (rows of pairs), qp rows ldq apart.
     * tile_values: the weights s[j][c] (j < nk) rounded to bf16 pairs of keys
     * into pp[p][c] (rows lds apart; an odd last key's partner 0), then
     * ot = ot diag(alpha) + V^T P^T for rows d < dp, columns c < ncols,
     * V^T(d,p) = vt[d * ldv + p]. ncols % KK__ATT_NT == 0. tiles(1)
     * configures the calling thread's tiles, tiles(0) releases them, around
     * one kk__att_block's key blocks. */
    void (*tile_scores)(float *s, int64_t lds, const uint32_t *k, int64_t ldk, const uint32_t *qp,
                        int64_t ldq, int nk, int ncols, int kp, float scale);
    void (*tile_values)(float *ot, int64_t ldo, const uint32_t *vt, int64_t ldv, const float *s,
                        int64_t lds, uint32_t *pp, int nk, int ncols, int dp, const float *alpha);
    void (*tiles)(int on);
} kk__att_kernels;

/* exp2 on [-1/2, 1/2]: 1 + r (C1 + r (C2 + ...)), a degree-5 fit of minimal
 * relative error (9e-8; 1.8e-7 evaluated in f32). x + MAGIC (1.5 * 2^23 + 127)
 * rounds x to an integer n and leaves n + 127 in the low mantissa bits. */
#define KK__ATT_EXP2_MAGIC 12583039.0f
#define KK__ATT_EXP2_C1 6.931469776200669e-01f
#define KK__ATT_EXP2_C2 2.402224214463169e-01f
#define KK__ATT_EXP2_C3 5.550733761046373e-02f
#define KK__ATT_EXP2_C4 9.671508850282829e-03f
#define KK__ATT_EXP2_C5 1.326470391856504e-03f

const kk__att_kernels *kk__att_kernels_generic(void);
/* NULL when this is not x86 or the CPU lacks AVX2 or FMA. */
const kk__att_kernels *kk__att_kernels_avx2_fma(void);
/* NULL when this is not x86-64 or the CPU lacks AVX-512 F/BW/VL. */
const kk__att_kernels *kk__att_kernels_avx512(void);
/* The AVX-512 kernels and gemm_pairs; NULL without AVX512_BF16. */
const kk__att_kernels *kk__att_kernels_avx512_bf16(void);
/* The AVX-512 kernels and the tile products; NULL below the amx level. */
const kk__att_kernels *kk__att_kernels_amx(void);
/* attention_cpu_amx.c: the amx kernels' tile_scores, tile_values and tiles;
 * with KK_AMX_EMULATE (tests) the _emu twins, on tiles emulated in C. */
void kk__att_tile_scores_amx(float *s, int64_t lds, const uint32_t *k, int64_t ldk,
                             const uint32_t *qp, int64_t ldq, int nk, int ncols, int kp,
                             float scale);
void kk__att_tile_values_amx(float *ot, int64_t ldo, const uint32_t *vt, int64_t ldv,
                             const float *s, int64_t lds, uint32_t *pp, int nk, int ncols, int dp,
                             const float *alpha);
void kk__att_tiles_amx(int on);
/* Tests only: set (NULL: off), kk__att_kernels_for returns `kernels` at the
 * avx512_bf16 level and above, so CPUs without AMX run the amx branch of the
 * pair path on emulated tiles. */
void kk__att_amx_test(const kk__att_kernels *kernels);
/* The best kernels at instruction-set level `isa` or below. */
const kk__att_kernels *kk__att_kernels_for(kk__isa isa);
/* What kk__attention_cpu uses: kk__att_kernels_for(kk__cpu_isa()). */
const kk__att_kernels *kk__att_kernels_best(void);

/* What every block of one call shares (of one sequence, for attention_varlen:
 * src/cpu/attention_varlen_cpu.c). Rows are read through element strides
 * (batch, head, sequence; each row of D elements contiguous), so a block
 * reads contiguous tensors and views of packed ones alike. */
typedef struct kk__att_geom {
    const kk_op_params *p;             /* the `attention` op's: the mask (Sq, Sk), dropout */
    int64_t B, Hq, Hkv, Sq, Sk, D, Dp; /* Dp: D rounded up to KK__ATT_NT */
    int64_t q_bs, q_hs, q_ss, k_bs, k_hs, k_ss, v_bs, v_hs, v_ss, o_bs, o_hs, o_ss;
    int64_t lse_bs, lse_hs, lse_ss;
    kk_dtype dt;
    int kv_f32; /* k and v point at f32 copies (rows of Dp, v's padding zero) */
    /* The bf16 pair path (kern->gemm_pairs): v as pairs of rows, word
     * [b][h][p][d] = v[2p][d] | v[2p+1][d] << 16 (zero past Sk and D), at
     * vp + b * vp_bs + h * vp_hs + p * Dp; on AMX tiles (kern->tile_values)
     * V^T's rows instead, word [b][h][d][p] at vp + b * vp_bs + h * vp_hs +
     * d * vp_ld + p (d < Dp; zero past Sk and D); NULL: not this path. q and
     * k are read in place as pairs along D (D and their strides even). */
    const uint32_t *vp;
    int64_t vp_bs, vp_hs, vp_ld;
    float qscale; /* softmax scale * log2(e) */
    int dropout;  /* p > 0: drop where the Philox word < drop_threshold */
    uint32_t drop_threshold;
    uint64_t seed, offset;
    double keep_scale; /* 1 / (1 - p), 1 without dropout */
    const void *q, *k, *v;
    void *o;
    float *lse; /* NULL when not asked */
    const kk__att_kernels *kern;
} kk__att_geom;

/* The bf16 pair path's V (kk__att_geom.vp; attention_cpu.c), shared with
 * attention_varlen, which repacks each sequence's keys on their own so that
 * its pairs start at its first key, as a B = 1 call's do. f32 copies of K
 * and V, or V's pairs, are made up to KK__ATT_COPY_MAX_BYTES per call. */
#define KK__ATT_COPY_MAX_BYTES (INT64_C(256) << 20)
/* Whether g takes the pair path: bf16, kernels with pair products, q and k
 * readable in place as 32-bit pairs along D (D and their strides even). */
int kk__att_pairs_ok(const kk__att_geom *g);
/* Sets g's vp_ld, vp_hs and vp_bs for its B, Hkv, Sk and kernels; returns the
 * words V's pairs take. */
int64_t kk__att_pairs_layout(kk__att_geom *g);
/* The repack in items of 16 pairs of keys of one head (any order, any
 * thread): their count, and item i of g's V into vp laid out as g says. */
int64_t kk__att_pairs_items(const kk__att_geom *g);
void kk__att_pairs_pack(const kk__att_geom *g, uint32_t *vp, int64_t i);

/* One thread's buffers, allocated once per call (sizes in kk__att_scratch_floats). */
typedef struct kk__att_scratch {
    float *qt;              /* [Dp][BQ]   the query block, transposed and scaled */
    float *k;               /* [BK][Dp]   the key block, when it needs converting to f32 */
    float *v;               /* [BK][Dp]   the value block, when it needs converting or padding */
    float *s;               /* [BK][BQ]   scores, then weights, transposed (BK_AMX rows) */
    float *o;               /* [BQ][Dp]   the output accumulator of the last few key blocks */
    float *o2;              /* [BQ][Dp]   ... and of the blocks before, folded in now and then
                             * (both [Dp][BQ] on AMX tiles) */
    float *carry;           /* [BQ]       the rescale o2 owes since the last fold */
    float *row;             /* [Dp]       one converted row */
    float *m, *sum, *alpha; /* [BQ] running max (log2 units), block sum, rescale */
    double *l;              /* [BQ] running sum: f64, as it adds up to Sk / BK terms */
    int64_t *lo, *hi;       /* [BQ] the keys each row may see */
    uint32_t *qp;           /* [Dp/2][BQ] the pair path: the query block as bf16 pairs */
    uint32_t *pp;           /* [BK/2][BQ] ... the weights as bf16 pairs of keys (BK_AMX) */
} kk__att_scratch;

/* Floats of one thread's scratch, each part rounded up to 64 bytes. */
int64_t kk__att_scratch_floats(int64_t Dp);
void kk__att_scratch_carve(float *base, int64_t Dp, kk__att_scratch *w);

/* Rows [i0, i0 + BQ) of query head h of batch b, all of their keys. */
kk_status kk__att_block(const kk__att_geom *g, kk__att_scratch *w, int64_t b, int64_t h,
                        int64_t i0);

#endif
