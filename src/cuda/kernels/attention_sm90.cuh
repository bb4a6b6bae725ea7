// Attention forward, the Hopper path (sm_90a): attention_sm80.cuh's op and
// arithmetic with warpgroup MMA (wgmma) in place of mma.sync, K and V through
// cp.async stages stored with the 128-byte swizzle wgmma reads; HopperRows is
// the arithmetic both Hopper kernels share. Compiled only for sm_90a; elsewhere
// the kernel is empty and the launcher never picks it.
// docs/kernels/attention.md, "The Hopper kernel".
#pragma once

#include "cuda/kernels/attention_sm80.cuh"
#include "cuda/kernels/wgmma.cuh"

namespace kk_attn {

template <int WG, int BN, int ST, bool OV = false, int MINB = 1, bool SKV = false>
struct HopperTiles {
    static constexpr int kWarpgroups = WG;
    static constexpr bool kSplitKV = SKV && !OV; // K and V as separate cp.async groups
    static constexpr bool kOverlap = OV;         // softmax of block j + 1 during P V of block j
    static constexpr int kBlockM = 64 * WG;
    static constexpr int kBlockN = BN;
    static constexpr int kStages = ST;
    static constexpr int kThreads = 128 * WG;
    static constexpr int kMinBlocks = MINB; // CTAs per SM the registers must allow
};
// Tiles measured on an H100 (docs/kernels/attention.md, "Hopper tile sweep"):
// head dim 64 takes 64-key blocks with the overlap; head dim 128 three
// warpgroups (192 query rows) without it, except short causal rows, where
// 192-row blocks waste more of the diagonal than the overlap's two
// warpgroups of 128 rows.
using HopperTiles64 = HopperTiles<2, 64, 3, true>;
using HopperTiles128 = HopperTiles<3, 128, 2>;
using HopperTiles128Short = HopperTiles<2, 128, 3, true>;

template <int KD, typename T, class C> constexpr size_t hopper_smem_bytes() {
    return (size_t)(C::kBlockM + 2 * C::kStages * C::kBlockN) * KD * sizeof(T) + 1024;
}

// A rows x KD tile into the swizzled layout, rows >= valid_rows and columns >=
// d as zeros, by kBy threads.
template <int KD, typename T, int kBy>
__device__ __forceinline__ void load_tile_sw128(T *smem, const T *g, int64_t row_stride, int rows,
                                                int valid_rows, int d, int tid) {
    constexpr int kChunks = KD / 8;
    unsigned char *base = reinterpret_cast<unsigned char *>(smem);
    for (int c = tid; c < rows * kChunks; c += kBy) {
        const int r = c / kChunks, col = c % kChunks;
        const bool ok = r < valid_rows && col * 8 < d;
        const T *src = ok ? g + r * row_stride + col * 8 : g;
        cp_async16(base + (col / 8) * (rows * 128) + r * 128 + (((col % 8) ^ (r & 7)) * 16), src,
                   ok ? 16 : 0);
    }
}

// A shared-memory matrix descriptor with the 128-byte swizzle: start address,
// leading and stride byte offsets (PTX ISA, "Matrix Descriptor Format").
__device__ __forceinline__ uint64_t sw128_desc(const void *p, uint32_t lbo, uint32_t sbo) {
    const uint64_t a = smem_addr(p);
    return ((a & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) |
           (1ull << 62);
}

// Keeps the compiler from moving reads of wgmma accumulators above the wait.
template <int N> __device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}

__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The key blocks the query rows [q0, q0 + kBlockM) may see: n_blocks blocks of
// kBlockN keys from n_begin (the mask's range of the first and last row).
template <int kBlockM, int kBlockN> struct HopperKeyBlocks {
    int n_begin, n_blocks;
    int lo_last, hi_first; // the last row's first key, the first row's last key
    __device__ __forceinline__ HopperKeyBlocks(const Params &p, int q0) {
        int lo_first, hi_last;
        key_range(p, q0, lo_first, hi_first);
        key_range(p, min(q0 + kBlockM, p.Sq) - 1, lo_last, hi_last);
        n_begin = max(lo_first, 0) / kBlockN * kBlockN;
        const int n_end = min(hi_last, p.Sk - 1);
        n_blocks = n_begin <= n_end ? (n_end - n_begin) / kBlockN + 1 : 0;
    }
    // Every row sees every key of the block from n0: no mask needed.
    __device__ __forceinline__ bool full(const Params &p, int n0) const {
        return lo_last <= n0 && hi_first >= n0 + kBlockN - 1 && n0 + kBlockN <= p.Sk;
    }
};

// The arithmetic of one warpgroup's 64 query rows over a key block, shared
// by the Hopper kernels (this one and the warp-specialized one of
// attention_sm90_ws.cuh). Q is a tile of kBlockM rows, K and V blocks of
// kBlockN rows, all in the swizzled layout of load_tile_sw128.
template <int KD, typename T, int kBlockM, int kBlockN, bool kDropout> struct HopperRows {
    static constexpr int kNT = kBlockN / 8, kDT = KD / 8;
    using M = MmaType<T>;
    using W = kk_wgmma::Wgmma<T, kBlockN>;
    using WO = kk_wgmma::Wgmma<T, KD>;

    // S = Q K^T of warpgroup wg's rows, issued (not waited): KD / 16 steps, a
    // step is 32 bytes into a 128-byte row; the first overwrites S.
    static __device__ __forceinline__ void issue_qk(const T *sQ, const T *sK, int wg,
                                                    float (&s)[kNT][4]) {
        float(&s_flat)[kNT * 4] = reinterpret_cast<float(&)[kNT * 4]>(s);
#pragma unroll
        for (int ks = 0; ks < KD / 16; ks++) {
            const uint64_t da =
                sw128_desc(sQ + (ks / 4) * kBlockM * 64 + wg * 64 * 64 + (ks % 4) * 16, 16, 1024);
            const uint64_t db = sw128_desc(sK + (ks / 4) * kBlockN * 64 + (ks % 4) * 16, 16, 1024);
            W::template ss<0>(s_flat, da, db, ks > 0);
        }
    }
    // O += P V, issued: k16 chunk c of P is n8 tiles 2c, 2c + 1 of S; V's
    // chunk c starts 16 rows (2048 bytes) further; N-major, 64-column blocks
    // kBlockN * 128 bytes apart (the leading offset), 8-row groups 1024.
    static __device__ __forceinline__ void
    issue_pv(const T *sV, const uint32_t (&pf)[kBlockN / 16][4], float (&o)[kDT][4]) {
        float(&o_flat)[kDT * 4] = reinterpret_cast<float(&)[kDT * 4]>(o);
#pragma unroll
        for (int c = 0; c < kBlockN / 16; c++)
            WO::template rs<1>(o_flat, pf[c], sw128_desc(sV + c * 16 * 64, kBlockN * 128, 1024), 1);
    }
    // Mask (only when the block is not full: it crosses some row's range or
    // the end of the keys), online softmax, dropout of the block of keys from
    // n0 for rows row0 and row0 + 8 (lane t of the quad); O's rescale factors
    // in alpha.
    static __device__ __forceinline__ void softmax(const Params &p, int bh, int row0, int t, int n0,
                                                   bool full, float (&s)[kNT][4], float (&m_run)[2],
                                                   float (&l_run)[2], float (&alpha)[2]) {
        if (!full) {
#pragma unroll
            for (int r = 0; r < 2; r++) {
                int lo, hi;
                key_range(p, row0 + 8 * r, lo, hi);
#pragma unroll
                for (int nt = 0; nt < kNT; nt++)
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        const int j = n0 + nt * 8 + 2 * t + c;
                        if (j < lo || j > hi) s[nt][2 * r + c] = -INFINITY;
                    }
            }
        }
#pragma unroll
        for (int r = 0; r < 2; r++)
            alpha[r] = softmax_row_alpha(s, r, m_run[r], l_run[r], p.scale_log2);
        if constexpr (kDropout)
            dropout_rows(s, p, (uint32_t)bh, (uint32_t)bh, row0, row0 + 8, n0, t);
    }
    static __device__ __forceinline__ void rescale_o(float (&o)[kDT][4], const float (&alpha)[2]) {
#pragma unroll
        for (int dt = 0; dt < kDT; dt++) {
            o[dt][0] *= alpha[0], o[dt][1] *= alpha[0];
            o[dt][2] *= alpha[1], o[dt][3] *= alpha[1];
        }
    }
    // The weights as 16-bit A fragments of P V.
    static __device__ __forceinline__ void pack_p(const float (&s)[kNT][4],
                                                  uint32_t (&pf)[kBlockN / 16][4]) {
#pragma unroll
        for (int c = 0; c < kBlockN / 16; c++) {
            pf[c][0] = M::pack(s[2 * c][0], s[2 * c][1]);
            pf[c][1] = M::pack(s[2 * c][2], s[2 * c][3]);
            pf[c][2] = M::pack(s[2 * c + 1][0], s[2 * c + 1][1]);
            pf[c][3] = M::pack(s[2 * c + 1][2], s[2 * c + 1][3]);
        }
    }
    // Finish as the sm_80 kernel does: row sums across the quad, O / l into
    // gO (the (batch, head)'s rows), lse.
    static __device__ __forceinline__ void store(const Params &p, int bh, int row0, int t, T *gO,
                                                 const float (&o)[kDT][4], const float (&m_run)[2],
                                                 const float (&l_run)[2]) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float l = l_run[r];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            const int i = row0 + 8 * r;
            const float inv = l > 0.f ? (kDropout ? p.drop_rescale : 1.f) / l : 0.f;
            if (i < p.Sq) {
                T *orow = gO + (int64_t)i * p.o_ss;
#pragma unroll
                for (int dt = 0; dt < kDT; dt++) {
                    const int col = dt * 8 + 2 * t;
                    if (col < p.d)
                        *reinterpret_cast<uint32_t *>(orow + col) =
                            M::pack(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
                }
                if (p.lse && t == 0)
                    p.lse[(int64_t)bh * p.Sq + i] =
                        l > 0.f ? (m_run[r] * p.scale_log2 + log2f(l)) / kLog2e : -INFINITY;
            }
        }
    }
};

template <int KD, typename T, bool kDropout, class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    attention_hopper_kernel(const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int kBlockM = C::kBlockM, kBlockN = C::kBlockN, kStages = C::kStages;
    constexpr int kNT = kBlockN / 8, kDT = KD / 8;
    static_assert(KD == 64 || KD == 128, "the Hopper kernel takes head dims 64 and 128");
    static_assert(kStages >= (C::kOverlap ? 3 : 2), "too few stages");

    extern __shared__ unsigned char smem_raw[];
    T *sQ =
        reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    T *sK = sQ + kBlockM * KD; // kStages tiles of kBlockN x KD
    T *sV = sK + kStages * kBlockN * KD;

    const int m_block = gridDim.x - 1 - blockIdx.x; // heavy (causal) blocks first
    const int bh = blockIdx.y;
    const int b = bh / p.Hq, h = bh % p.Hq;
    const int hk = h / (p.Hq / p.Hkv);
    const int q0 = m_block * kBlockM;
    const int tid = threadIdx.x, wg = tid / 128;
    const int warp = (tid % 128) / 32, lane = tid % 32, g = lane / 4, t = lane % 4;

    const T *gQ = static_cast<const T *>(p.q) + b * p.q_bs + h * p.q_hs + (int64_t)q0 * p.q_ss;
    const T *gK = static_cast<const T *>(p.k) + b * p.k_bs + hk * p.k_hs;
    const T *gV = static_cast<const T *>(p.v) + b * p.v_bs + hk * p.v_hs;
    T *gO = static_cast<T *>(p.o) + b * p.o_bs + h * p.o_hs;

    const HopperKeyBlocks<kBlockM, kBlockN> keys(p, q0);
    const int n_begin = keys.n_begin, n_blocks = keys.n_blocks;

    const int row0 = q0 + wg * 64 + warp * 16 + g; // and row0 + 8
    float o[kDT][4];
#pragma unroll
    for (int i = 0; i < kDT; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float(&o_flat)[kDT * 4] = reinterpret_cast<float(&)[kDT * 4]>(o);
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

    // K and V of block blk into its stage: one cp.async group, or (kSplitKV)
    // two, so S = Q K^T can start before V has landed.
    auto load_kv = [&](int blk) {
        const int n0 = n_begin + blk * kBlockN, st = blk % kStages;
        load_tile_sw128<KD, T, C::kThreads>(sK + st * kBlockN * KD, gK + (int64_t)n0 * p.k_ss,
                                            p.k_ss, kBlockN, p.Sk - n0, p.d, tid);
        if constexpr (C::kSplitKV) cp_async_commit();
        load_tile_sw128<KD, T, C::kThreads>(sV + st * kBlockN * KD, gV + (int64_t)n0 * p.v_ss,
                                            p.v_ss, kBlockN, p.Sk - n0, p.d, tid);
    };
    constexpr int kGroups = C::kSplitKV ? 2 : 1; // cp.async groups per block
    using R = HopperRows<KD, T, kBlockM, kBlockN, kDropout>;
    auto issue_qk = [&](int blk, float(&s)[kNT][4]) {
        R::issue_qk(sQ, sK + (blk % kStages) * kBlockN * KD, wg, s);
    };
    auto issue_pv = [&](int blk, const uint32_t(&pf)[kBlockN / 16][4]) {
        R::issue_pv(sV + (blk % kStages) * kBlockN * KD, pf, o);
    };
    auto softmax = [&](int blk, float(&s)[kNT][4], float(&alpha)[2]) {
        const int n0 = n_begin + blk * kBlockN;
        R::softmax(p, bh, row0, t, n0, keys.full(p, n0), s, m_run, l_run, alpha);
    };
    auto rescale_o = [&](const float(&alpha)[2]) { R::rescale_o(o, alpha); };
    auto pack_p = [&](const float(&s)[kNT][4], uint32_t(&pf)[kBlockN / 16][4]) {
        R::pack_p(s, pf);
    };

    if (n_blocks > 0) {
        load_tile_sw128<KD, T, C::kThreads>(sQ, gQ, p.q_ss, kBlockM, p.Sq - q0, p.d, tid);
#pragma unroll
        for (int s = 0; s < kStages - 1; s++) { // kGroups groups per stage, empty ones too
            if (s < n_blocks)
                load_kv(s);
            else if (C::kSplitKV)
                cp_async_commit();
            cp_async_commit();
        }
    }

    if constexpr (!C::kOverlap) {
        // Block it + kStages - 1 loads while block it is computed: S, wait,
        // softmax, P V, wait.
        for (int it = 0; it < n_blocks; it++) {
            // Into the stage of block it - 1: every warpgroup finished it at
            // the barrier that ended the last step.
            if (it + kStages - 1 < n_blocks)
                load_kv(it + kStages - 1);
            else if (C::kSplitKV)
                cp_async_commit();
            cp_async_commit();
            // Block it (and Q) landed, for this thread (with kSplitKV: its K;
            // its V and the kStages - 1 blocks after it may be in flight).
            cp_async_wait<kGroups * kStages - 1>();
            fence_proxy_async(); // ...visible to wgmma's async proxy
            __syncthreads();     // ...for every thread's chunks
            float s[kNT][4], alpha[2];
            kk_wgmma::wgmma_fence();
            issue_qk(it, s);
            kk_wgmma::wgmma_commit();
            kk_wgmma::wgmma_wait<0>();
            fence_regs(reinterpret_cast<float(&)[kNT * 4]>(s));
            softmax(it, s, alpha);
            rescale_o(alpha);
            uint32_t pf[kBlockN / 16][4];
            pack_p(s, pf);
            if constexpr (C::kSplitKV) { // V of block it
                cp_async_wait<kGroups *(kStages - 1)>();
                fence_proxy_async();
                __syncthreads();
            }
            kk_wgmma::wgmma_fence();
            issue_pv(it, pf);
            kk_wgmma::wgmma_commit();
            kk_wgmma::wgmma_wait<0>();
            fence_regs(o_flat);
            __syncthreads(); // every warpgroup done with this stage before it is refilled
        }
    } else if (n_blocks > 0) {
        // FlashAttention-3's overlap inside a warpgroup: the softmax of block
        // it + 1 runs while the tensor cores do P V of block it. S of block 0
        // first; then per step: S of it + 1 and P V of it issued together, S
        // waited for, its softmax, P V waited for, O rescaled, P repacked.
        // Block it + 2 loads meanwhile (three stages).
        uint32_t pf[kBlockN / 16][4];
        {
            cp_async_wait<kStages - 2>(); // Q and block 0
            fence_proxy_async();
            __syncthreads();
            float s[kNT][4], alpha[2];
            kk_wgmma::wgmma_fence();
            issue_qk(0, s);
            kk_wgmma::wgmma_commit();
            kk_wgmma::wgmma_wait<0>();
            fence_regs(reinterpret_cast<float(&)[kNT * 4]>(s));
            softmax(0, s, alpha); // O is zero: no rescale
            pack_p(s, pf);
        }
        // Every step but the last has a next block (no wgmma under a branch:
        // ptxas then keeps the two groups in flight together).
        for (int it = 0; it < n_blocks - 1; it++) {
            cp_async_wait<kStages - 3>(); // block it + 1 landed
            fence_proxy_async();
            __syncthreads(); // ...for all; block it - 1's stage free
            if (it + kStages - 1 < n_blocks) load_kv(it + kStages - 1);
            cp_async_commit();
            float s[kNT][4], alpha[2];
            kk_wgmma::wgmma_fence();
            issue_qk(it + 1, s);
            kk_wgmma::wgmma_commit();
            issue_pv(it, pf);
            kk_wgmma::wgmma_commit();
            kk_wgmma::wgmma_wait<1>(); // S (the older group)
            fence_regs(reinterpret_cast<float(&)[kNT * 4]>(s));
            softmax(it + 1, s, alpha);
            kk_wgmma::wgmma_wait<0>(); // P V
            fence_regs(o_flat);
            rescale_o(alpha);
            pack_p(s, pf);
        }
        kk_wgmma::wgmma_fence();
        issue_pv(n_blocks - 1, pf);
        kk_wgmma::wgmma_commit();
        kk_wgmma::wgmma_wait<0>();
        fence_regs(o_flat);
    }

    R::store(p, bh, row0, t, gO, o, m_run, l_run);
#endif
}

} // namespace kk_attn

namespace kk_attn {
// attention_sm90.cu: whether the current device runs the sm_90a kernel (an
// sm_90 device, a binary built for sm_90a, KK_ATTN_KERNEL not "sm80"), and
// its launch for head dims 64 and 128.
bool hopper_ready();
cudaError_t launch_hopper(const Params &p, int kd, bool bf16, cudaStream_t stream);
} // namespace kk_attn
