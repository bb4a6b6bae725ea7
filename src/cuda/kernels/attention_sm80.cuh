// Attention forward, the sm_80-class path (mma.sync, ldmatrix, cp.async; runs
// on Ampere, Ada and Hopper), and the helpers every attention kernel shares
// (masks, online softmax, dropout). FlashAttention-2's schedule: one CTA per
// block of query rows of one (batch, head) walks the key blocks its rows may
// see with an online softmax in registers, so memory stays O(S.D).
// docs/kernels/attention.md, "The kernel".
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "core/philox.h"

namespace kk_attn {

constexpr int kWarps = 4; // each owns kMTiles m16 tiles of query rows

// Tiles per head dim, chosen by measurement on an H100 (docs/kernels/
// attention.md, "Tile sweep"). Two m16 tiles per warp (128 query rows per CTA)
// let each K and V fragment read from shared memory feed two mma, halving
// shared-memory traffic per FLOP (+25-40% over one tile); 128 keys per step
// for head dim 64 (+5-7% over 64, despite a small spill); the O accumulator of
// 256-wide heads leaves room for one tile and 32 keys only. Q stays in
// registers only for head dim 32: elsewhere the registers are worth more.
template <int MT, int BN, bool QR> struct Tiles {
    static constexpr int kMTiles = MT;
    static constexpr int kBlockM = 16 * kWarps * MT;
    static constexpr int kBlockN = BN;
    static constexpr bool kQInRegs = QR;
};
template <int KD>
using Config =
    Tiles<(KD > 128 ? 1 : 2), (KD > 128 ? 32 : (KD == 96 || KD == 128 ? 64 : 128)), (KD <= 32)>;
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

struct Params {
    const void *q, *k, *v;
    void *o;
    float *lse;               // NULL: not written
    int64_t q_bs, q_hs, q_ss; // strides in elements: batch, head, sequence
    int64_t k_bs, k_hs, k_ss;
    int64_t v_bs, v_hs, v_ss;
    int64_t o_bs, o_hs, o_ss;
    int B, Hq, Hkv, Sq, Sk, d;             // d: the real head dim (<= KD, a multiple of 8)
    float scale_log2;                      // softmax scale * log2(e)
    int causal, window_left, window_right; // -1 = unlimited
    int dropout;                           // 0: none
    uint32_t drop_threshold;
    float drop_rescale; // 1 / (1 - p)
    uint64_t seed, offset;
    // attention_varlen (the kVarlen kernel): int32 offsets [B + 1] of each
    // sequence's query rows and keys in the packed q/o and k/v; B is then the
    // number of sequences, Sq and Sk the totals (the rows of the tensors).
    const int *cu_q, *cu_k;
};

template <typename T> struct MmaType;
template <> struct MmaType<__nv_bfloat16> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&v);
    }
    static __device__ __forceinline__ void mma(float *c, const uint32_t *a, uint32_t b0,
                                               uint32_t b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
template <> struct MmaType<__half> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        __half2 v = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&v);
    }
    static __device__ __forceinline__ void mma(float *c, const uint32_t *a, uint32_t b0,
                                               uint32_t b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

// 2^x on the SFU (ex2.approx: 2 ulp, -inf -> +0), as FlashAttention does.
__device__ __forceinline__ float exp2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t *r, const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t *r, const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

// 16 bytes global -> shared; bytes = 0 writes zeros (rows past the end).
__device__ __forceinline__ void cp_async16(void *dst, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// A tile of `rows` rows x KD columns into shared memory (row pitch KD + 8),
// rows >= valid_rows and columns >= d as zeros, by kBy threads (tid of them).
template <int KD, typename T, int kBy = kThreads>
__device__ __forceinline__ void load_tile(T *smem, const T *g, int64_t row_stride, int rows,
                                          int valid_rows, int d, int tid = threadIdx.x) {
    constexpr int kChunks = KD / 8; // 16-byte chunks per row
    for (int c = tid; c < rows * kChunks; c += kBy) {
        const int r = c / kChunks, col = (c % kChunks) * 8;
        const bool ok = r < valid_rows && col < d;
        const T *src = ok ? g + r * row_stride + col : g;
        cp_async16(smem + r * (KD + 8) + col, src, ok ? 16 : 0);
    }
}

// The keys row i may see: [lo, hi] (empty when hi < lo). The one definition of
// the mask is kk__attention_key_range (src/opdef/attention.c); this is
// the same arithmetic.
__device__ __forceinline__ void key_range(const Params &p, int i, int &lo, int &hi) {
    const int c = i + p.Sk - p.Sq;
    lo = 0;
    hi = p.Sk - 1;
    if (p.causal && c < hi) hi = c;
    if (p.window_right >= 0 && c + p.window_right < hi) hi = c + p.window_right;
    if (p.window_left >= 0 && c - p.window_left > lo) lo = c - p.window_left;
}
// The same for one sequence of a packed batch (attention_varlen): Sq and Sk
// are the sequence's lengths.
__device__ __forceinline__ void key_range(const Params &p, int i, int Sq, int Sk, int &lo,
                                          int &hi) {
    const int c = i + Sk - Sq;
    lo = 0;
    hi = Sk - 1;
    if (p.causal && c < hi) hi = c;
    if (p.window_right >= 0 && c + p.window_right < hi) hi = c + p.window_right;
    if (p.window_left >= 0 && c - p.window_left > lo) lo = c - p.window_left;
}

// One row r (0: g, 1: g + 8) of an m16 tile, after its scores s (raw, masked
// to -inf) for one key block: the online softmax. New maximum m (raw units),
// s replaced by the weights 2^(s scale_log2 - m scale_log2), their sum added
// to l (rescaled first), and O's rescale factor 2^((m_old - m) scale_log2)
// returned: the Hopper kernel applies it later (its O may be an operand of a
// wgmma in flight). A row that has seen no key keeps m = -inf and subtracts 0
// instead, so exp2 gives 0, never NaN.
template <int kNTiles>
__device__ __forceinline__ float softmax_row_alpha(float (&s)[kNTiles][4], int r, float &m_run,
                                                   float &l_run, float scale_log2) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kNTiles; nt++) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m_run, mx);
    const float m_scaled = m_new == -INFINITY ? 0.f : m_new * scale_log2;
    const float alpha = exp2_approx(m_run * scale_log2 - m_scaled);
    m_run = m_new;
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < kNTiles; nt++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            const float e = exp2_approx(fmaf(s[nt][2 * r + c], scale_log2, -m_scaled));
            s[nt][2 * r + c] = e;
            sum += e;
        }
    l_run = l_run * alpha + sum;
    return alpha;
}

// softmax_row_alpha with O's row r rescaled at once.
template <int kNTiles, int kDTiles>
__device__ __forceinline__ void softmax_row(float (&s)[kNTiles][4], float (&o)[kDTiles][4], int r,
                                            float &m_run, float &l_run, float scale_log2) {
    const float alpha = softmax_row_alpha(s, r, m_run, l_run, scale_log2);
#pragma unroll
    for (int dt = 0; dt < kDTiles; dt++) {
        o[dt][2 * r] *= alpha;
        o[dt][2 * r + 1] *= alpha;
    }
}

// Dropout of the weights of the thread's two rows (g and g + 8: query rows
// row0 and row1 of (batch x query head) bh0 and bh1) in the key block starting at n0 (the reference's order:
// after they entered l; the 1/(1-p) comes at the end). Keys j, j + 1 (j even)
// are words 2 (t % 2) and + 1 of one Philox call, picked without a variable
// index (which would put the words in local memory).
template <int kNTiles>
__device__ __forceinline__ void dropout_rows(float (&s)[kNTiles][4], const Params &p, uint32_t bh0,
                                             uint32_t bh1, int row0, int row1, int n0, int t) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; nt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int j = n0 + nt * 8 + 2 * t;
            const kk__philox4 bits = kk__dropout_bits(
                p.seed, p.offset, r ? bh1 : bh0, (uint32_t)(r ? row1 : row0), (uint32_t)(j >> 2));
            if (((t & 1) ? bits.v[2] : bits.v[0]) < p.drop_threshold) s[nt][2 * r] = 0.f;
            if (((t & 1) ? bits.v[3] : bits.v[1]) < p.drop_threshold) s[nt][2 * r + 1] = 0.f;
        }
}

// kVarlen: attention_varlen's packed batch. blockIdx.x is then sequence x Hq
// + head and blockIdx.y the query block; the CTA reads its sequence's offsets
// from p.cu_q / p.cu_k, leaves at once when its query block starts past the
// sequence's end (the grid is sized by the longest sequence), and masks with
// the sequence's own lengths. b is the sequence, as the dropout mask's batch
// (src/core/philox.h). Without kVarlen the code is the fixed-length kernel's,
// unchanged.
template <int KD, typename T, bool kDropout, class C = Config<KD>, bool kVarlen = false>
__global__ void __launch_bounds__(kThreads) attention_fwd_kernel(const Params p) {
    using M = MmaType<T>;
    constexpr int kPitch = KD + 8;
    constexpr int kMT = C::kMTiles;     // m16 tiles per warp
    constexpr int kBlockM = C::kBlockM; // 64 * kMT query rows per CTA
    constexpr int kBlockN = C::kBlockN;
    constexpr bool kQInRegs = C::kQInRegs;
    constexpr int kDTiles = KD / 8;  // n8 tiles of O
    constexpr int kKSteps = KD / 16; // k16 steps of Q K^T
    constexpr int kNTiles = kBlockN / 8;

    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *sQ = reinterpret_cast<T *>(smem_raw);
    T *sK = sQ + kBlockM * kPitch;
    T *sV = sK + kBlockN * kPitch;

    // Heavy query blocks (the bottom rows, under a causal mask) first. kVarlen
    // swaps the grid's axes: sequences x heads may pass grid.y's 65535.
    const int m_block = kVarlen ? gridDim.y - 1 - blockIdx.y : gridDim.x - 1 - blockIdx.x;
    const int bh = kVarlen ? blockIdx.x : blockIdx.y;
    const int b = bh / p.Hq, h = bh % p.Hq;
    const int hk = h / (p.Hq / p.Hkv);
    const int q0 = m_block * kBlockM;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;

    // This batch's (sequence's) lengths, and where its rows start: the batch
    // stride, or for kVarlen the sequence's first row (the batch dim is 1).
    // The fixed-length kernel reads p.Sq and p.Sk where it always did (the
    // `kVarlen ? vSq : p.Sq` below), so its PTX, registers and spills do not
    // change (docs/kernels/attention.md, "Variable-length batches").
    int vSq = 0, vSk = 0;
    int64_t q_base = 0, k_base = 0, v_base = 0, o_base = 0;
    if constexpr (kVarlen) {
        const int sq0 = p.cu_q[b], sk0 = p.cu_k[b];
        vSq = p.cu_q[b + 1] - sq0;
        vSk = p.cu_k[b + 1] - sk0;
        // offsets that do not fit the tensors (not checked on the host: they
        // are device data) leave the sequence unwritten, never read outside
        if (q0 >= vSq || sq0 < 0 || sk0 < 0 || vSk < 0 || sq0 + vSq > p.Sq || sk0 + vSk > p.Sk)
            return;
        q_base = (int64_t)sq0 * p.q_ss, o_base = (int64_t)sq0 * p.o_ss;
        k_base = (int64_t)sk0 * p.k_ss, v_base = (int64_t)sk0 * p.v_ss;
    }
    const auto range = [&](int i, int &lo, int &hi) {
        if constexpr (kVarlen)
            key_range(p, i, vSq, vSk, lo, hi);
        else
            key_range(p, i, lo, hi);
    };
    const T *gQ =
        kVarlen ? static_cast<const T *>(p.q) + q_base + h * p.q_hs + (int64_t)q0 * p.q_ss
                : static_cast<const T *>(p.q) + b * p.q_bs + h * p.q_hs + (int64_t)q0 * p.q_ss;
    const T *gK = kVarlen ? static_cast<const T *>(p.k) + k_base + hk * p.k_hs
                          : static_cast<const T *>(p.k) + b * p.k_bs + hk * p.k_hs;
    const T *gV = kVarlen ? static_cast<const T *>(p.v) + v_base + hk * p.v_hs
                          : static_cast<const T *>(p.v) + b * p.v_bs + hk * p.v_hs;
    T *gO = kVarlen ? static_cast<T *>(p.o) + o_base + h * p.o_hs
                    : static_cast<T *>(p.o) + b * p.o_bs + h * p.o_hs;

    // The keys any row of this block may see; lo and hi grow with the row.
    const int q_last = min(q0 + kBlockM, (kVarlen ? vSq : p.Sq)) - 1;
    int lo_first, hi_first, lo_last, hi_last;
    range(q0, lo_first, hi_first);
    range(q_last, lo_last, hi_last);
    const int n_begin = max(lo_first, 0) / kBlockN * kBlockN;
    const int n_end = min(hi_last, (kVarlen ? vSk : p.Sk) - 1); // inclusive

    // This thread's rows: g and g + 8 of each of its warp's m16 tiles; tile mt
    // of warp w covers rows (mt * kWarps + w) * 16 .. +15 of the block, so row
    // (mt, r) is row_base + mt * 16 * kWarps + 8 * r.
    const int row_base = q0 + warp * 16 + g;
    float o_acc[kMT][kDTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMT; mt++)
#pragma unroll
        for (int i = 0; i < kDTiles; i++)
            o_acc[mt][i][0] = o_acc[mt][i][1] = o_acc[mt][i][2] = o_acc[mt][i][3] = 0.f;
    float m_run[kMT][2], l_run[kMT][2];
#pragma unroll
    for (int mt = 0; mt < kMT; mt++)
        m_run[mt][0] = m_run[mt][1] = -INFINITY, l_run[mt][0] = l_run[mt][1] = 0.f;

    if (n_begin <= n_end) {
        load_tile<KD>(sQ, gQ, p.q_ss, kBlockM, (kVarlen ? vSq : p.Sq) - q0, p.d);
        load_tile<KD>(sK, gK + (int64_t)n_begin * p.k_ss, p.k_ss, kBlockN,
                      (kVarlen ? vSk : p.Sk) - n_begin, p.d);
        cp_async_commit();
    }
    uint32_t q_frag[kQInRegs ? kMT : 1][kQInRegs ? kKSteps : 1][4];

    for (int n0 = n_begin; n0 <= n_end; n0 += kBlockN) {
        cp_async_wait_all();
        __syncthreads(); // K (and Q) in; every warp done with the last V
        load_tile<KD>(sV, gV + (int64_t)n0 * p.v_ss, p.v_ss, kBlockN, (kVarlen ? vSk : p.Sk) - n0,
                      p.d);
        cp_async_commit();

        // A fragments of Q: rows lane%16 of the tile, columns 8*(lane/16) of the step.
        auto q_addr = [&](int mt, int ks) {
            return sQ + ((mt * kWarps + warp) * 16 + lane % 16) * kPitch + ks * 16 +
                   (lane / 16) * 8;
        };
        if (kQInRegs && n0 == n_begin) {
#pragma unroll
            for (int mt = 0; mt < (kQInRegs ? kMT : 0); mt++)
#pragma unroll
                for (int ks = 0; ks < kKSteps; ks++) ldmatrix_x4(q_frag[mt][ks], q_addr(mt, ks));
        }

        // S = Q K^T: each K fragment serves all kMT tiles of the warp.
        float s[kMT][kNTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMT; mt++)
#pragma unroll
            for (int i = 0; i < kNTiles; i++)
                s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < kKSteps; ks++) {
            uint32_t a_tmp[kMT][4];
            if constexpr (!kQInRegs) {
#pragma unroll
                for (int mt = 0; mt < kMT; mt++) ldmatrix_x4(a_tmp[mt], q_addr(mt, ks));
            }
#pragma unroll
            for (int np = 0; np < kNTiles / 2; np++) {
                // keys np*16 + (lane%8) + 8*(matrix/2), columns ks*16 + 8*(matrix%2)
                const int mi = lane / 8;
                uint32_t bk[4];
                ldmatrix_x4(bk, sK + (np * 16 + (lane % 8) + 8 * (mi / 2)) * kPitch + ks * 16 +
                                    8 * (mi % 2));
#pragma unroll
                for (int mt = 0; mt < kMT; mt++) {
                    const uint32_t *a =
                        kQInRegs ? q_frag[kQInRegs ? mt : 0][kQInRegs ? ks : 0] : a_tmp[mt];
                    M::mma(s[mt][2 * np], a, bk[0], bk[1]);
                    M::mma(s[mt][2 * np + 1], a, bk[2], bk[3]);
                }
            }
        }

        // Mask (raw scores to -inf) only when some (row, key) of this block
        // falls outside its range.
        const bool full =
            lo_last <= n0 && hi_first >= n0 + kBlockN - 1 && n0 + kBlockN <= (kVarlen ? vSk : p.Sk);
        if (!full) {
#pragma unroll
            for (int mt = 0; mt < kMT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    int lo, hi;
                    range(row_base + mt * 16 * kWarps + 8 * r, lo, hi);
#pragma unroll
                    for (int nt = 0; nt < kNTiles; nt++)
#pragma unroll
                        for (int c = 0; c < 2; c++) {
                            const int j = n0 + nt * 8 + 2 * t + c;
                            if (j < lo || j > hi) s[mt][nt][2 * r + c] = -INFINITY;
                        }
                }
        }

        // Online softmax of every row, then dropout (apart: fewer registers live).
#pragma unroll
        for (int mt = 0; mt < kMT; mt++)
#pragma unroll
            for (int r = 0; r < 2; r++)
                softmax_row(s[mt], o_acc[mt], r, m_run[mt][r], l_run[mt][r], p.scale_log2);
        if constexpr (kDropout) {
#pragma unroll
            for (int mt = 0; mt < kMT; mt++)
                dropout_rows(s[mt], p, (uint32_t)(b * p.Hq + h), (uint32_t)(b * p.Hq + h),
                             row_base + mt * 16 * kWarps, row_base + mt * 16 * kWarps + 8, n0, t);
        }

        cp_async_wait_all();
        __syncthreads(); // V in; every warp done with K
        if (n0 + kBlockN <= n_end) {
            load_tile<KD>(sK, gK + (int64_t)(n0 + kBlockN) * p.k_ss, p.k_ss, kBlockN,
                          (kVarlen ? vSk : p.Sk) - n0 - kBlockN, p.d);
            cp_async_commit();
        }

        // O += P V. P in 16 bits straight from the accumulators: tiles 2c and
        // 2c+1 form the A fragment of keys 16c..16c+15.
#pragma unroll
        for (int c = 0; c < kNTiles / 2; c++) {
            uint32_t pf[kMT][4];
#pragma unroll
            for (int mt = 0; mt < kMT; mt++) {
                pf[mt][0] = M::pack(s[mt][2 * c][0], s[mt][2 * c][1]);
                pf[mt][1] = M::pack(s[mt][2 * c][2], s[mt][2 * c][3]);
                pf[mt][2] = M::pack(s[mt][2 * c + 1][0], s[mt][2 * c + 1][1]);
                pf[mt][3] = M::pack(s[mt][2 * c + 1][2], s[mt][2 * c + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < kDTiles / 2; dp++) {
                // keys c*16 + (lane%8) + 8*(matrix%2), columns dp*16 + 8*(matrix/2)
                const int mi = lane / 8;
                uint32_t bv[4];
                ldmatrix_x4_trans(bv, sV + (c * 16 + (lane % 8) + 8 * (mi % 2)) * kPitch + dp * 16 +
                                          8 * (mi / 2));
#pragma unroll
                for (int mt = 0; mt < kMT; mt++) {
                    M::mma(o_acc[mt][2 * dp], pf[mt], bv[0], bv[1]);
                    M::mma(o_acc[mt][2 * dp + 1], pf[mt], bv[2], bv[3]);
                }
            }
        }
    }

    // Finish: the row sums across the quad, O / l, the log-sum-exp.
#pragma unroll
    for (int mt = 0; mt < kMT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float l = l_run[mt][r];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            const int i = row_base + mt * 16 * kWarps + 8 * r;
            // A row that saw no key has l = 0: o = 0 and lse = -inf.
            const float inv = l > 0.f ? (kDropout ? p.drop_rescale : 1.f) / l : 0.f;
            if (i < (kVarlen ? vSq : p.Sq)) {
                T *orow = gO + (int64_t)i * p.o_ss;
#pragma unroll
                for (int dt = 0; dt < kDTiles; dt++) {
                    const int col = dt * 8 + 2 * t;
                    if (col < p.d)
                        *reinterpret_cast<uint32_t *>(orow + col) =
                            M::pack(o_acc[mt][dt][2 * r] * inv, o_acc[mt][dt][2 * r + 1] * inv);
                }
                if (p.lse && t == 0)
                    p.lse[kVarlen ? (int64_t)h * p.Sq + p.cu_q[b] + i // [1,Hq,total_q]
                                  : (int64_t)bh * p.Sq + i] =
                        l > 0.f ? (m_run[mt][r] * p.scale_log2 + log2f(l)) / kLog2e : -INFINITY;
            }
        }
}

} // namespace kk_attn
