// Attention backward, FlashAttention-2's algorithm with mma.sync (sm_80-class:
// Ampere, Ada, Hopper): one CTA per block of 64 keys of one (batch, kv head)
// keeps dK and dV in f32 registers and walks every query block of every query
// head of its GQA group that may see its keys, so dK and dV come out summed
// without atomics; dQ goes to an f32 scratch by atomicAdd. Scores are
// recomputed transposed (S^T = K Q^T, keys as the m16 rows), so P^T and dS^T
// are A fragments of dV += (P f)^T dO and dK += dS^T Q straight from the
// accumulators; dS^T goes through shared memory for dQ += dS K.
// docs/kernels/attention.md, "Backward on CUDA".
#pragma once

#include "cuda/kernels/attention_sm80.cuh"

namespace kk_attn_bwd {

using kk_attn::cp_async_commit;
using kk_attn::cp_async_wait_all;
using kk_attn::exp2_approx;
using kk_attn::ldmatrix_x4;
using kk_attn::ldmatrix_x4_trans;
using kk_attn::MmaType;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockN = 16 * kWarps; // keys per CTA: one m16 tile per warp

// Query rows per step: 64 at head dim 64, 32 at 128 (dK and dV already hold
// 128 f32 registers per thread there; 64 rows would spill).
template <int KD> struct Config { static constexpr int kBlockM = KD <= 64 ? 64 : 32; };

struct Params {
    kk_attn::Params a; // q, k, v, o, shapes, mask, dropout: the forward's fields
    const void *dout;
    const float *lse; // [B, Hq, Sq], natural log
    void *dq, *dk, *dv;
    float *dq_acc; // [B, Hq, Sq, d] f32, zeroed before the main kernel
    float *di;     // [B, Hq, Sq]: rowsum(dO * O)
    float scale;   // softmax scale
};

// The keep factor of element (bh, i, j): 0 or 1/(1-p), the forward's Philox
// word (kk__dropout_bits, as kk_attn::dropout_rows reads it). j & 3 is picked
// without a variable index (which would put the words in local memory).
__device__ __forceinline__ float keep_factor(const kk_attn::Params &p, uint32_t bh, int i, int j) {
    const kk__philox4 w = kk__dropout_bits(p.seed, p.offset, bh, (uint32_t)i, (uint32_t)(j >> 2));
    const int c = j & 3;
    const uint32_t x = c == 0 ? w.v[0] : c == 1 ? w.v[1] : c == 2 ? w.v[2] : w.v[3];
    return x >= p.drop_threshold ? p.drop_rescale : 0.f;
}

// The CTA's (batch, kv head) bhk and first key n0 from its one-dimensional
// index. Without a causal mask the key blocks of a head are adjacent: the
// CTAs running together add to the same rows of dQ's accumulator, which stay
// in L2 (heads outermost, 132 CTAs of as many heads sent their atomics to
// DRAM). With it the heads are innermost, so the first key blocks of every
// head, which every later row sees and which carry most of the work, start
// first (measured faster for causal: docs, "Backward on CUDA, version 2").
template <int kBN>
__device__ __forceinline__ void cta_keys(const kk_attn::Params &a, int &bhk, int &n0) {
    const int key_blocks = (a.Sk + kBN - 1) / kBN, heads = a.B * a.Hkv;
    const int x = blockIdx.x;
    bhk = a.causal ? x % heads : x / key_blocks;
    n0 = (a.causal ? x / heads : x % key_blocks) * kBN;
}

// P and dS of a block from the accumulators of S^T and dP^T (keys x rows),
// in place: element (key kr + 8r, row m0 + x*8 + 2t + c) is s[x][2r + c] and
// dp[x][2r + c]; lse (natural log) and di hold the block's rows. s becomes
// P f, with P = exp(s scale - lse) (0 where the mask hides the element or the
// row is past Sq; the mask only when !full), and dp dS = P (dP f - D_i).
template <int kTiles, bool kDropout>
__device__ __forceinline__ void probs_and_ds(const kk_attn::Params &a, uint32_t bh, int m0, int kr,
                                             int t, bool full, const float *lse, const float *di,
                                             float (&s)[kTiles][4], float (&dp)[kTiles][4]) {
#pragma unroll
    for (int x = 0; x < kTiles; x++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            const int ir = x * 8 + 2 * t + c, i = m0 + ir;
            int lo = 0, hi = 0;
            if (!full) kk_attn::key_range(a, i, lo, hi);
            const float lse2 = lse[ir] * kk_attn::kLog2e, d_i = di[ir];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int j = kr + 8 * r;
                float P = kk_attn::exp2_approx(fmaf(s[x][2 * r + c], a.scale_log2, -lse2));
                if (!full && (i >= a.Sq || j < lo || j > hi)) P = 0.f;
                float f = 1.f;
                if constexpr (kDropout) f = keep_factor(a, bh, i, j);
                s[x][2 * r + c] = P * f;
                dp[x][2 * r + c] = P * (dp[x][2 * r + c] * f - d_i);
            }
        }
}

// 16-bit A fragments (keys x rows) of an accumulator: n8 tiles 2c, 2c + 1 are
// the k16 chunk c of rows, as the forward's P.
template <typename T, int kTiles>
__device__ __forceinline__ void pack_a(const float (&x)[kTiles][4], uint32_t (&a)[kTiles / 2][4]) {
    using M = MmaType<T>;
#pragma unroll
    for (int c = 0; c < kTiles / 2; c++) {
        a[c][0] = M::pack(x[2 * c][0], x[2 * c][1]);
        a[c][1] = M::pack(x[2 * c][2], x[2 * c][3]);
        a[c][2] = M::pack(x[2 * c + 1][0], x[2 * c + 1][1]);
        a[c][3] = M::pack(x[2 * c + 1][2], x[2 * c + 1][3]);
    }
}

// dK = scale dS^T Q and dV of keys kr, kr + 8 (this thread's rows of the
// keys x head-dim accumulators) of the (batch, kv head) bhk.
template <typename T, int kDT>
__device__ __forceinline__ void store_dk_dv(const Params &p, int bhk, int kr, int t,
                                            const float (&dk)[kDT][4], const float (&dv)[kDT][4]) {
    using M = MmaType<T>;
    const int64_t d = p.a.d;
    T *gdK = static_cast<T *>(p.dk) + (int64_t)bhk * p.a.Sk * d;
    T *gdV = static_cast<T *>(p.dv) + (int64_t)bhk * p.a.Sk * d;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int j = kr + 8 * r;
        if (j >= p.a.Sk) continue;
#pragma unroll
        for (int x = 0; x < kDT; x++) {
            const int col = x * 8 + 2 * t;
            if (col < p.a.d) {
                *reinterpret_cast<uint32_t *>(gdK + j * d + col) =
                    M::pack(dk[x][2 * r] * p.scale, dk[x][2 * r + 1] * p.scale);
                *reinterpret_cast<uint32_t *>(gdV + j * d + col) =
                    M::pack(dv[x][2 * r], dv[x][2 * r + 1]);
            }
        }
    }
}

template <int KD, typename T, bool kDropout>
__global__ void __launch_bounds__(kThreads) attention_bwd_kernel(const Params p) {
    using M = MmaType<T>;
    constexpr int kBM = Config<KD>::kBlockM;
    constexpr int kBN = kBlockN;
    constexpr int kP = KD + 8;       // row pitch of sK, sV, sQ, sdO (16 bytes of padding)
    constexpr int kSP = kBM + 8;     // row pitch of sdS: [key][query row]
    constexpr int kKSteps = KD / 16; // k16 steps over the head dim
    constexpr int kRowTiles = kBM / 8;
    constexpr int kDTiles = KD / 8;
    // dQ = dS K: warps split the rows in m16 tiles and the head dim in kDqSplit.
    constexpr int kDqSplit = kWarps / (kBM / 16);
    constexpr int kDqTiles = kDTiles / kDqSplit;
    static_assert(kBM % 16 == 0 && kWarps % (kBM / 16) == 0 && kDqTiles % 2 == 0, "tiles");

    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *sK = reinterpret_cast<T *>(smem_raw);
    T *sV = sK + kBN * kP;
    T *sQ = sV + kBN * kP;
    T *sdO = sQ + kBM * kP;
    T *sdS = sdO + kBM * kP;
    float *sLse = reinterpret_cast<float *>(sdS + kBN * kSP);
    float *sDi = sLse + kBM;

    const kk_attn::Params &a = p.a;
    int bhk, n0; // b * Hkv + kv head, the first key
    cta_keys<kBN>(a, bhk, n0);
    const int b = bhk / a.Hkv, hk = bhk % a.Hkv, G = a.Hq / a.Hkv;
    const int n_last = min(n0 + kBN, a.Sk) - 1;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int mi = lane / 8; // the ldmatrix matrix this lane addresses
    const int64_t d = a.d;

    const T *gK = static_cast<const T *>(a.k) + (int64_t)bhk * a.Sk * d;
    const T *gV = static_cast<const T *>(a.v) + (int64_t)bhk * a.Sk * d;
    kk_attn::load_tile<KD, T, kThreads>(sK, gK + n0 * d, d, kBN, a.Sk - n0, a.d);
    kk_attn::load_tile<KD, T, kThreads>(sV, gV + n0 * d, d, kBN, a.Sk - n0, a.d);
    cp_async_commit();

    float dk[kDTiles][4], dv[kDTiles][4];
#pragma unroll
    for (int x = 0; x < kDTiles; x++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[x][e] = dv[x][e] = 0.f;

    // This thread's keys in the S^T tiles: kr and kr + 8.
    const int kr = n0 + warp * 16 + g;

    for (int h = hk * G; h < (hk + 1) * G; h++) {
        const int bh = b * a.Hq + h;
        const T *gQ = static_cast<const T *>(a.q) + (int64_t)bh * a.Sq * d;
        const T *gdO = static_cast<const T *>(p.dout) + (int64_t)bh * a.Sq * d;
        float *gdQ = p.dq_acc + (int64_t)bh * a.Sq * d;
        for (int m0 = 0; m0 < a.Sq; m0 += kBM) {
            // lo and hi grow with the row: skip blocks none of whose rows see
            // these keys; mask only blocks some (row, key) of which is hidden.
            int lo_f, hi_f, lo_l, hi_l;
            kk_attn::key_range(a, m0, lo_f, hi_f);
            kk_attn::key_range(a, min(m0 + kBM, a.Sq) - 1, lo_l, hi_l);
            if (hi_l < n0 || lo_f > n_last) continue; // uniform over the CTA
            const bool full =
                m0 + kBM <= a.Sq && n0 + kBN <= a.Sk && lo_l <= n0 && hi_f >= n0 + kBN - 1;

            // No barrier before these writes: every read of the last block's
            // sQ, sdO, sLse, sDi came before its second barrier, and sdS is
            // written only after the next barrier, which every warp reaches
            // after its dQ step of the last block.
            kk_attn::load_tile<KD, T, kThreads>(sQ, gQ + m0 * d, d, kBM, a.Sq - m0, a.d);
            kk_attn::load_tile<KD, T, kThreads>(sdO, gdO + m0 * d, d, kBM, a.Sq - m0, a.d);
            cp_async_commit();
            if (tid < kBM) {
                const int i = m0 + tid;
                const bool in = i < a.Sq;
                sLse[tid] = in ? p.lse[(int64_t)bh * a.Sq + i] : 0.f;
                sDi[tid] = in ? p.di[(int64_t)bh * a.Sq + i] : 0.f;
            }
            cp_async_wait_all();
            __syncthreads(); // Q, dO (and K, V the first time), lse, D_i in

            // S^T = K Q^T and dP^T = V dO^T: keys (the warp's 16) x query rows.
            float s[kRowTiles][4], dp[kRowTiles][4];
#pragma unroll
            for (int x = 0; x < kRowTiles; x++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[x][e] = dp[x][e] = 0.f;
#pragma unroll
            for (int ks = 0; ks < kKSteps; ks++) {
                // A: keys warp*16 + lane%16, columns ks*16 + 8*(lane/16)
                uint32_t ak[4], av[4];
                const int aoff = (warp * 16 + lane % 16) * kP + ks * 16 + (lane / 16) * 8;
                ldmatrix_x4(ak, sK + aoff);
                ldmatrix_x4(av, sV + aoff);
#pragma unroll
                for (int np = 0; np < kRowTiles / 2; np++) {
                    // B: rows np*16 + lane%8 + 8*(mi/2), columns ks*16 + 8*(mi%2)
                    const int boff =
                        (np * 16 + lane % 8 + 8 * (mi / 2)) * kP + ks * 16 + 8 * (mi % 2);
                    uint32_t bq[4], bo[4];
                    ldmatrix_x4(bq, sQ + boff);
                    ldmatrix_x4(bo, sdO + boff);
                    M::mma(s[2 * np], ak, bq[0], bq[1]);
                    M::mma(s[2 * np + 1], ak, bq[2], bq[3]);
                    M::mma(dp[2 * np], av, bo[0], bo[1]);
                    M::mma(dp[2 * np + 1], av, bo[2], bo[3]);
                }
            }

            probs_and_ds<kRowTiles, kDropout>(a, (uint32_t)bh, m0, kr, t, full, sLse, sDi, s, dp);

            // A fragments of P f and dS; dS^T also to shared memory (key-major) for dQ.
            uint32_t pa[kRowTiles / 2][4], sa[kRowTiles / 2][4];
            pack_a<T>(s, pa);
            pack_a<T>(dp, sa);
#pragma unroll
            for (int c = 0; c < kRowTiles / 2; c++) {
                // rows 16c + 2t (+1) and 16c + 8 + 2t (+1), keys g and g + 8
                T *row0 = sdS + (warp * 16 + g) * kSP + c * 16 + 2 * t;
                T *row1 = row0 + 8 * kSP;
                *reinterpret_cast<uint32_t *>(row0) = sa[c][0];
                *reinterpret_cast<uint32_t *>(row1) = sa[c][1];
                *reinterpret_cast<uint32_t *>(row0 + 8) = sa[c][2];
                *reinterpret_cast<uint32_t *>(row1 + 8) = sa[c][3];
            }

            // dV += (P f)^T dO and dK += dS^T Q: B fragments of dO and Q
            // (rows x head dim, row-major = k x n) through ldmatrix.trans.
#pragma unroll
            for (int c = 0; c < kRowTiles / 2; c++)
#pragma unroll
                for (int dq = 0; dq < kDTiles / 2; dq++) {
                    // rows c*16 + lane%8 + 8*(mi%2), columns dq*16 + 8*(mi/2)
                    const int off =
                        (c * 16 + lane % 8 + 8 * (mi % 2)) * kP + dq * 16 + 8 * (mi / 2);
                    uint32_t bo[4], bq[4];
                    ldmatrix_x4_trans(bo, sdO + off);
                    ldmatrix_x4_trans(bq, sQ + off);
                    M::mma(dv[2 * dq], pa[c], bo[0], bo[1]);
                    M::mma(dv[2 * dq + 1], pa[c], bo[2], bo[3]);
                    M::mma(dk[2 * dq], sa[c], bq[0], bq[1]);
                    M::mma(dk[2 * dq + 1], sa[c], bq[2], bq[3]);
                }

            __syncthreads(); // dS^T of every warp in sdS

            // dQ (rows m0 + wr*16 .., head-dim part wd) = dS K over the block's
            // keys. A = dS from the key-major sdS, B = K (keys x head dim):
            // both through ldmatrix.trans.
            const int wr = warp % (kBM / 16), wd = warp / (kBM / 16);
            float acc[kDqTiles][4];
#pragma unroll
            for (int x = 0; x < kDqTiles; x++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[x][e] = 0.f;
#pragma unroll
            for (int kc = 0; kc < kBN / 16; kc++) {
                // keys kc*16 + lane%8 + 8*(mi/2), rows wr*16 + 8*(mi%2)
                uint32_t as[4];
                ldmatrix_x4_trans(as, sdS + (kc * 16 + lane % 8 + 8 * (mi / 2)) * kSP + wr * 16 +
                                          8 * (mi % 2));
#pragma unroll
                for (int dq = 0; dq < kDqTiles / 2; dq++) {
                    // keys kc*16 + lane%8 + 8*(mi%2), columns col0 + dq*16 + 8*(mi/2)
                    uint32_t bk[4];
                    ldmatrix_x4_trans(bk, sK + (kc * 16 + lane % 8 + 8 * (mi % 2)) * kP +
                                              wd * (KD / kDqSplit) + dq * 16 + 8 * (mi / 2));
                    M::mma(acc[2 * dq], as, bk[0], bk[1]);
                    M::mma(acc[2 * dq + 1], as, bk[2], bk[3]);
                }
            }
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int i = m0 + wr * 16 + g + 8 * r;
                if (i >= a.Sq) continue;
                float *row = gdQ + i * d;
#pragma unroll
                for (int x = 0; x < kDqTiles; x++) {
                    const int col = wd * (KD / kDqSplit) + x * 8 + 2 * t;
                    if (col < a.d) {
                        atomicAdd(row + col, acc[x][2 * r]);
                        atomicAdd(row + col + 1, acc[x][2 * r + 1]);
                    }
                }
            }
        }
    }

    cp_async_wait_all(); // K and V's copies, when every query block was skipped

    store_dk_dv<T>(p, bhk, kr, t, dk, dv); // keys no row sees get zeros
}

} // namespace kk_attn_bwd
