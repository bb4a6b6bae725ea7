// Attention backward, the Hopper path (sm_90a): attention_backward.cuh's
// algorithm with warpgroup MMA. A CTA owns 128 keys of one (batch, kv head),
// two warpgroups of 64 keys each, dK and dV in f32 registers for the CTA's
// life; it walks the query blocks of every query head of its group that may
// see its keys, with the next block's Q, dO, lse and D_i in flight (cp.async,
// two stages, the 128-byte swizzle wgmma reads). Per block and warpgroup:
//   S^T = K Q^T, dP^T = V dO^T        (wgmma, both operands in shared memory)
//   P, dS = P (dP f - D_i)             (registers, as the sm_80 kernel)
//   dV += (P f)^T dO, dK += dS^T Q     (wgmma, A from the accumulators)
//   dS -> shared memory (stmatrix.trans: query-major, keys contiguous)
//   dQ part = dS K                     (wgmma; at head dim 64 each warpgroup
//                                       has 64 of the 128 rows, at 128 half
//                                       the columns) added to the f32
//                                       accumulator with vector atomics.
// docs/kernels/attention.md, "Backward on CUDA, version 2 (Hopper)".
#pragma once

#include "cuda/kernels/attention_backward.cuh"
#include "cuda/kernels/attention_sm90.cuh"
#include "cuda/kernels/wgmma.cuh"

namespace kk_attn_bwd {

template <int KD> struct HopperConfig {
    static constexpr int kBlockN = 128;                 // keys per CTA, 64 per warpgroup
    static constexpr int kBlockM = KD <= 64 ? 128 : 64; // query rows per step
    static constexpr int kThreads = 256;
    static constexpr int kStages = 2; // Q, dO, lse, D_i buffers
};

template <int KD, typename T> constexpr size_t hopper_smem_bytes() {
    using C = HopperConfig<KD>;
    return (size_t)(2 * C::kBlockN * KD + 2 * C::kStages * C::kBlockM * KD +
                    C::kBlockM * C::kBlockN) *
               sizeof(T) +
           2 * C::kStages * C::kBlockM * sizeof(float) + 1024; // + alignment to 1024
}

// One f32 through cp.async (zero-filled when !ok).
__device__ __forceinline__ void cp_async4(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(kk_attn::smem_addr(dst)),
                 "l"(src), "r"(ok ? 4 : 0)
                 : "memory");
}

// Four 8x8 16-bit matrices from the m16n8 fragment layout, stored transposed.
__device__ __forceinline__ void stmatrix_x4_trans(void *row_addr, const uint32_t (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                     kk_attn::smem_addr(row_addr)),
                 "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}

template <int KD, typename T, bool kDropout>
__global__ void __launch_bounds__(256, 1) attention_bwd_hopper_kernel(const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = HopperConfig<KD>;
    constexpr int kBM = C::kBlockM, kBN = C::kBlockN, kThreads = C::kThreads;
    constexpr int kMT = kBM / 8; // n8 tiles of query rows in S^T
    constexpr int kDT = KD / 8;
    static_assert(KD == 64 || KD == 128, "the Hopper backward takes head dims 64 and 128");
    using WS = kk_wgmma::Wgmma<T, kBM>; // S^T, dP^T: 64 keys x kBM rows
    using WD = kk_wgmma::Wgmma<T, KD>;  // dV, dK: 64 keys x KD
    using WQ = kk_wgmma::Wgmma<T, 64>;  // dQ: 64 rows x 64 columns
    using kk_attn::sw128_desc;

    extern __shared__ unsigned char smem_raw[];
    T *sK =
        reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    T *sV = sK + kBN * KD;
    T *sQ = sV + kBN * KD;                                    // kStages tiles of kBM x KD
    T *sdO = sQ + C::kStages * kBM * KD;                      // kStages tiles of kBM x KD
    T *sdS = sdO + C::kStages * kBM * KD;                     // kBM x kBN, keys contiguous
    float *sLse = reinterpret_cast<float *>(sdS + kBM * kBN); // kStages x kBM
    float *sDi = sLse + C::kStages * kBM;

    const kk_attn::Params &a = p.a;
    int bhk, n0; // b * Hkv + kv head, the first key
    cta_keys<kBN>(a, bhk, n0);
    const int b = bhk / a.Hkv, hk = bhk % a.Hkv, G = a.Hq / a.Hkv;
    const int n_last = min(n0 + kBN, a.Sk) - 1;
    const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int64_t d = a.d;

    const T *gK = static_cast<const T *>(a.k) + (int64_t)bhk * a.Sk * d;
    const T *gV = static_cast<const T *>(a.v) + (int64_t)bhk * a.Sk * d;
    kk_attn::load_tile_sw128<KD, T, kThreads>(sK, gK + n0 * d, d, kBN, a.Sk - n0, a.d, tid);
    kk_attn::load_tile_sw128<KD, T, kThreads>(sV, gV + n0 * d, d, kBN, a.Sk - n0, a.d, tid);
    kk_attn::cp_async_commit();

    // The query blocks [m_first, m_last] that see some of these keys: the
    // mask's range grows with the row, so they are consecutive, and the same
    // for every head of the group.
    const int m_blocks = (a.Sq + kBM - 1) / kBM;
    int m_first = m_blocks, m_last = -1;
    for (int m = 0; m < m_blocks; m++) {
        int lo_f, hi_f, lo_l, hi_l;
        kk_attn::key_range(a, m * kBM, lo_f, hi_f);
        kk_attn::key_range(a, min(m * kBM + kBM, a.Sq) - 1, lo_l, hi_l);
        if (hi_l < n0 || lo_f > n_last) continue;
        m_first = min(m_first, m);
        m_last = m;
    }
    const int per_head = m_last - m_first + 1;
    const int steps = per_head > 0 ? G * per_head : 0;

    // Step s: query head hk*G + s / per_head, block m_first + s % per_head.
    auto load_step = [&](int s) {
        const int h = hk * G + s / per_head, m0 = (m_first + s % per_head) * kBM;
        const int64_t bh = (int64_t)b * a.Hq + h, st = s % C::kStages;
        const T *gQ = static_cast<const T *>(a.q) + (bh * a.Sq + m0) * d;
        const T *gdO = static_cast<const T *>(p.dout) + (bh * a.Sq + m0) * d;
        kk_attn::load_tile_sw128<KD, T, kThreads>(sQ + st * kBM * KD, gQ, d, kBM, a.Sq - m0, a.d,
                                                  tid);
        kk_attn::load_tile_sw128<KD, T, kThreads>(sdO + st * kBM * KD, gdO, d, kBM, a.Sq - m0, a.d,
                                                  tid);
        for (int r = tid; r < kBM; r += kThreads) {
            const bool in = m0 + r < a.Sq;
            const int64_t x = in ? bh * a.Sq + m0 + r : 0;
            cp_async4(sLse + st * kBM + r, p.lse + x, in);
            cp_async4(sDi + st * kBM + r, p.di + x, in);
        }
    };
    if (steps > 0) load_step(0);
    kk_attn::cp_async_commit();

    float dk[kDT][4], dv[kDT][4];
#pragma unroll
    for (int x = 0; x < kDT; x++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[x][e] = dv[x][e] = 0.f;
    float(&dk_flat)[kDT * 4] = reinterpret_cast<float(&)[kDT * 4]>(dk);
    float(&dv_flat)[kDT * 4] = reinterpret_cast<float(&)[kDT * 4]>(dv);

    // This thread's keys in the S^T tiles: kr and kr + 8.
    const int kr = n0 + wg * 64 + warp * 16 + g;
    // dQ's part of this warpgroup: rows qr*64.. (head dim 64: two row halves)
    // or columns qc*64.. (head dim 128: two column halves).
    const int qr = kBM == 128 ? wg : 0, qc = kBM == 128 ? 0 : wg;

    for (int s = 0; s < steps; s++) {
        kk_attn::cp_async_wait<0>(); // this step's Q, dO, lse, D_i (and K, V)
        kk_attn::fence_proxy_async();
        __syncthreads(); // ...for all; every thread done with step s - 1
        if (s + 1 < steps) load_step(s + 1);
        kk_attn::cp_async_commit();

        const int h = hk * G + s / per_head, m0 = (m_first + s % per_head) * kBM;
        const int bh = b * a.Hq + h, st = s % C::kStages;
        const T *sQs = sQ + st * kBM * KD, *sdOs = sdO + st * kBM * KD;
        const float *lse = sLse + st * kBM, *di_s = sDi + st * kBM;

        // S^T = K Q^T and dP^T = V dO^T: this warpgroup's 64 keys x kBM rows.
        float s_acc[kMT][4], dp[kMT][4];
        float(&s_flat)[kMT * 4] = reinterpret_cast<float(&)[kMT * 4]>(s_acc);
        float(&dp_flat)[kMT * 4] = reinterpret_cast<float(&)[kMT * 4]>(dp);
        kk_wgmma::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < KD / 16; ks++) {
            const int ka = (ks / 4) * kBN * 64 + wg * 64 * 64 + (ks % 4) * 16;
            const int kb = (ks / 4) * kBM * 64 + (ks % 4) * 16;
            WS::template ss<0>(s_flat, sw128_desc(sK + ka, 16, 1024),
                               sw128_desc(sQs + kb, 16, 1024), ks > 0);
            WS::template ss<0>(dp_flat, sw128_desc(sV + ka, 16, 1024),
                               sw128_desc(sdOs + kb, 16, 1024), ks > 0);
        }
        kk_wgmma::wgmma_commit();
        kk_wgmma::wgmma_wait<0>();
        kk_attn::fence_regs(s_flat);
        kk_attn::fence_regs(dp_flat);

        // P f into s_acc, dS into dp (version 1's arithmetic, the same
        // accumulator layout), then both as A fragments.
        int lo_f, hi_f, lo_l, hi_l;
        kk_attn::key_range(a, m0, lo_f, hi_f);
        kk_attn::key_range(a, min(m0 + kBM, a.Sq) - 1, lo_l, hi_l);
        const bool full =
            m0 + kBM <= a.Sq && n0 + kBN <= a.Sk && lo_l <= n0 && hi_f >= n0 + kBN - 1;
        probs_and_ds<kMT, kDropout>(a, (uint32_t)bh, m0, kr, t, full, lse, di_s, s_acc, dp);
        uint32_t pa[kMT / 2][4], sa[kMT / 2][4];
        pack_a<T>(s_acc, pa);
        pack_a<T>(dp, sa);

        // dV += (P f)^T dO and dK += dS^T Q: B = dO, Q (rows x head dim,
        // N-major), k16 chunk c 16 rows (2048 bytes) further.
        kk_wgmma::wgmma_fence();
#pragma unroll
        for (int c = 0; c < kMT / 2; c++)
            WD::template rs<1>(dv_flat, pa[c], sw128_desc(sdOs + c * 16 * 64, kBM * 128, 1024), 1);
#pragma unroll
        for (int c = 0; c < kMT / 2; c++)
            WD::template rs<1>(dk_flat, sa[c], sw128_desc(sQs + c * 16 * 64, kBM * 128, 1024), 1);
        kk_wgmma::wgmma_commit();

        // dS (rows x keys) into sdS while those run: matrix m of chunk c is
        // keys kb + 8 (m % 2), rows 16c + 8 (m / 2); lane 8m + r addresses
        // its row r, 8 keys = one 16-byte chunk of the swizzled layout.
        {
            const int m = lane / 8, rr = lane % 8;
            const int key0 = wg * 64 + warp * 16 + 8 * (m % 2); // within the CTA's keys
            unsigned char *base = reinterpret_cast<unsigned char *>(sdS) + (key0 / 64) * kBM * 128;
#pragma unroll
            for (int c = 0; c < kMT / 2; c++) {
                const int row = 16 * c + 8 * (m / 2) + rr;
                stmatrix_x4_trans(base + row * 128 + ((((key0 % 64) / 8) ^ (row & 7)) * 16), sa[c]);
            }
        }
        kk_attn::fence_proxy_async(); // dS's writes visible to wgmma
        __syncthreads();              // ...of every warp

        // dQ part = dS K: A = sdS (rows x keys, K-major), B = K (keys x head
        // dim, N-major).
        float dq[8][4];
        float(&dq_flat)[32] = reinterpret_cast<float(&)[32]>(dq);
        kk_wgmma::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < kBN / 16; ks++)
            WQ::template ss<1>(
                dq_flat,
                sw128_desc(sdS + (ks / 4) * kBM * 64 + qr * 64 * 64 + (ks % 4) * 16, 16, 1024),
                sw128_desc(sK + qc * kBN * 64 + ks * 16 * 64, kBN * 128, 1024), ks > 0);
        kk_wgmma::wgmma_commit();
        kk_wgmma::wgmma_wait<0>();
        kk_attn::fence_regs(dq_flat);
        kk_attn::fence_regs(dk_flat);
        kk_attn::fence_regs(dv_flat);

        float *gdQ = p.dq_acc + (int64_t)bh * a.Sq * d;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int i = m0 + qr * 64 + warp * 16 + g + 8 * r;
            if (i >= a.Sq) continue;
            float *row = gdQ + (int64_t)i * d;
#pragma unroll
            for (int x = 0; x < 8; x++) {
                const int col = qc * 64 + x * 8 + 2 * t;
                if (col < a.d)
                    atomicAdd(reinterpret_cast<float2 *>(row + col),
                              make_float2(dq[x][2 * r], dq[x][2 * r + 1]));
            }
        }
    }

    kk_attn::cp_async_wait<0>(); // K and V's copies, when no query block sees these keys

    store_dk_dv<T>(p, bhk, kr, t, dk, dv); // keys no row sees get zeros
#endif
}

} // namespace kk_attn_bwd

namespace kk_attn_bwd {
// attention_backward_sm90.cu: whether the current device runs the sm_90a
// kernel (an sm_90 device, a binary built for sm_90a, KK_ATTN_BWD_KERNEL not
// "sm80"), and its launch for head dims 64 and 128.
bool hopper_ready();
cudaError_t launch_hopper(const Params &p, int kd, bool bf16, cudaStream_t stream);
} // namespace kk_attn_bwd
