// The Hopper GEMM (sm_90a), persistent: a producer warpgroup loads 128 x 64
// tiles of a and 256 x 64 of b (SwiGLU: 128 rows of each weight) with the
// tensor memory accelerator into mbarrier-guarded stages; two consumer
// warpgroups run wgmma (64 rows each, two m64n128k16 per k16 step) and apply
// the sm_80 kernel's epilogue in registers. CLUSTER: 2-CTA clusters along M
// share each b tile, every CTA loading half of it multicast to both.
// docs/kernels/gemm.md.
#pragma once

#include <cuda.h>

#include "cuda/kernels/gemm_sm80.cuh"
#include "cuda/kernels/tma.cuh"
#include "cuda/kernels/wgmma.cuh"

namespace kk_gemm {

struct Sm90 {
    static constexpr int kConsumers = 2, kThreads = 128 * (kConsumers + 1);
    static constexpr int BM = 64 * kConsumers, BK = 64, kStages = 4;
    static constexpr int kBRows = 256;        // b rows per stage (SwiGLU: 128 of each weight)
    static constexpr int kBHalf = kBRows / 2; // b rows one CTA of a cluster loads (the box)
    static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
    static constexpr int kGroupM = 8; // m tiles a group of blocks walks before the next n
    static constexpr size_t kStageBytes = (size_t)(BM + kBRows) * BK * 2;
    static constexpr size_t kSmem = kStages * kStageBytes + 1024 + 2 * kStages * sizeof(uint64_t);
    template <bool GLU> static constexpr int BN = GLU ? kBRows / 2 : kBRows; // output columns
};

__device__ __forceinline__ uint64_t sw128(const void *p) {
    const uint64_t a = static_cast<uint64_t>(__cvta_generic_to_shared(p));
    // start address, leading offset 16 B (unused by the 128-byte swizzle), 8-row
    // groups 1024 B apart, 128-byte swizzle (PTX ISA, "Matrix Descriptor Format")
    return ((a & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

template <int N> __device__ __forceinline__ void keep_regs(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}

template <typename T, int ACT, bool CLUSTER = false>
__global__ void __launch_bounds__(Sm90::kThreads, 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap tm_a,
                     const __grid_constant__ CUtensorMap tm_b0,
                     const __grid_constant__ CUtensorMap tm_b1, const Args p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr bool GLU = ACT == ACT_SWIGLU;
    constexpr int BM = Sm90::BM, BK = Sm90::BK, kStages = Sm90::kStages, BN = Sm90::BN<GLU>;
    extern __shared__ unsigned char smem_raw[];
    T *sA =
        reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    T *sB = sA + kStages * BM * BK;
    uint64_t *full = reinterpret_cast<uint64_t *>(sB + kStages * Sm90::kBRows * BK);
    uint64_t *empty = full + kStages;

    // A cluster (CM = 2 CTAs) computes the m tiles 2u and 2u + 1 of one n
    // column: its unit u; a lone block (CM = 1) computes one tile, unit = tile.
    constexpr int CM = CLUSTER ? 2 : 1;
    const int tiles_m = (p.M + BM - 1) / BM, tiles_n = (p.N + BN - 1) / BN;
    const int units_m = (tiles_m + CM - 1) / CM, KT = (p.K + BK - 1) / BK;
    const int units = units_m * tiles_n;
    const int tid = threadIdx.x, wg = tid / 128;
    const int rank = CLUSTER ? (int)kk_tma::cluster_ctarank() : 0;
    const int first = blockIdx.x / CM, stride = gridDim.x / CM;
    // Unit t's corner: units walk kGroupM m tiles down one n column before
    // the next, so the blocks of a wave share b tiles (and a tiles) in L2.
    auto corner = [&](int t, int &m0, int &n0) {
        constexpr int G = Sm90::kGroupM / CM;
        const int per_group = G * tiles_n, first_m = t / per_group * G;
        const int group_m = min(units_m - first_m, G), in_group = t % per_group;
        m0 = ((first_m + in_group % group_m) * CM + rank) * BM;
        n0 = (in_group / group_m) * BN;
    };

    if (tid == 0) {
        for (int s = 0; s < kStages; s++) {
            kk_tma::mbar_init(&full[s], 1);
            // one arrival per consumer warp (of both CTAs: either's producer
            // overwrites the other's stage)
            kk_tma::mbar_init(&empty[s], Sm90::kConsumers * 4 * CM);
        }
        kk_tma::mbar_init_fence();
    }
    if constexpr (CLUSTER)
        kk_tma::cluster_sync(); // the peer's barriers are initialized before it is signalled
    else
        __syncthreads();

    // Persistent: the block (cluster) takes units first, + stride, ...;
    // stages and their phases run on across tiles (`it` counts k steps), so
    // the producer loads the next tile while the consumers finish this one.
    // Both CTAs of a cluster walk the same units and k steps in lockstep.
    if (wg == 0) { // producer: one thread issues every copy
        kk_tma::setmaxnreg_dec<Sm90::kProducerRegs>();
        if (tid == 0) {
            int it = 0;
            for (int t = first; t < units; t += stride) {
                int m0, n0;
                corner(t, m0, n0);
                for (int kt = 0; kt < KT; kt++, it++) {
                    const int s = it % kStages;
                    T *a_tile = sA + s * BM * BK, *b_tile = sB + s * Sm90::kBRows * BK;
                    if constexpr (CLUSTER) {
                        // both CTAs' consumers released the stage: this CTA's
                        // half of b overwrites it in both
                        if (it >= kStages)
                            kk_tma::mbar_wait_cluster(&empty[s], (it / kStages - 1) & 1);
                        // a tile, plus both b halves (this one's and the peer's)
                        kk_tma::mbar_arrive_expect_tx(&full[s], (uint32_t)Sm90::kStageBytes);
                        // The idle half of a last pair (tiles_m odd) loads its
                        // peer's rows, and stores nothing.
                        kk_tma::tma_load_2d(a_tile, &tm_a, &full[s], kt * BK,
                                            m0 < p.M ? m0 : m0 - BM);
                        // SwiGLU: rank 0 the gate rows, rank 1 the up rows;
                        // else rows n0 + 128 rank (past N: n0's again, the
                        // columns are never stored), keeping the box in range
                        int nb = n0 + (GLU ? 0 : rank * Sm90::kBHalf);
                        if (nb >= p.N) nb = n0;
                        kk_tma::tma_load_2d_multicast(b_tile + rank * Sm90::kBHalf * BK,
                                                      GLU && rank ? &tm_b1 : &tm_b0, &full[s],
                                                      kt * BK, nb, (uint16_t)0x3);
                    } else {
                        if (it >= kStages) kk_tma::mbar_wait(&empty[s], (it / kStages - 1) & 1);
                        kk_tma::mbar_arrive_expect_tx(&full[s], (uint32_t)Sm90::kStageBytes);
                        kk_tma::tma_load_2d(a_tile, &tm_a, &full[s], kt * BK, m0);
                        kk_tma::tma_load_2d(b_tile, &tm_b0, &full[s], kt * BK, n0);
                        if (GLU)
                            kk_tma::tma_load_2d(b_tile + BN * BK, &tm_b1, &full[s], kt * BK, n0);
                    }
                }
            }
        }
        if constexpr (CLUSTER) kk_tma::cluster_sync(); // the consumers' one at exit
        return;
    }

    kk_tma::setmaxnreg_inc<Sm90::kConsumerRegs>();
    const int cw = wg - 1, warp = (tid % 128) / 32, lane = tid % 32;
    // one m64n256k16 per k16 step (SwiGLU: m64n128 of each weight, the two
    // halves of the stage's b rows)
    using W = kk_wgmma::Wgmma<T, GLU ? 128 : 256>;
    const T *bias0 = static_cast<const T *>(p.bias0), *bias1 = static_cast<const T *>(p.bias1);
    const T *res = static_cast<const T *>(p.res);
    T *c = static_cast<T *>(p.c);
    const int g = lane >> 2, q = lane & 3;
    auto release = [&](int step) { // this warp is done with the stage of k step `step`
        __syncwarp();
        if constexpr (CLUSTER) {
            // both CTAs' producers write this stage (a half of b each)
            if (lane < 2) kk_tma::mbar_arrive_cluster(kk_tma::mapa(&empty[step % kStages], lane));
        } else {
            if (lane == 0) kk_tma::mbar_arrive(&empty[step % kStages]);
        }
    };
    int it = 0;
    for (int t = first; t < units; t += stride) {
        int m0, n0;
        corner(t, m0, n0);
        float acc[2][64]; // non-SwiGLU: one m64n256 accumulator, acc[0] then acc[1]
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int i = 0; i < 64; i++) acc[h][i] = 0.0f;
        for (int kt = 0; kt < KT; kt++, it++) {
            const int s = it % kStages;
            kk_tma::mbar_wait(&full[s], (it / kStages) & 1);
            const T *a_tile = sA + s * BM * BK + cw * 64 * BK;
            const T *b_tile = sB + s * Sm90::kBRows * BK;
            kk_wgmma::wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < BK / 16; ks++) {
                const uint64_t da = sw128(a_tile + ks * 16);
                if constexpr (GLU) {
#pragma unroll
                    for (int h = 0; h < 2; h++)
                        kk_wgmma::Wgmma<T, 128>::template ss<0>(
                            acc[h], da, sw128(b_tile + h * 128 * BK + ks * 16), 1);
                } else {
                    W::template ss<0>(reinterpret_cast<float(&)[128]>(acc), da,
                                      sw128(b_tile + ks * 16), 1);
                }
            }
            kk_wgmma::wgmma_commit();
            // one group in flight: the previous step's stage is free once this returns
            kk_wgmma::wgmma_wait<1>();
            if (kt > 0) release(it - 1);
        }
        kk_wgmma::wgmma_wait<0>();
        keep_regs(acc[0]);
        keep_regs(acc[1]);
        if (KT > 0) release(it - 1);

            // The accumulator of warp w: rows 16w + g and + 8, n8 tile i in
            // acc[.][4i .. 4i + 3] as mma.sync's m16n8 (columns 2q, 2q + 1).
#pragma unroll
        for (int h = 0; h < (GLU ? 1 : 2); h++)
#pragma unroll
            for (int i = 0; i < 16; i++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int row = m0 + cw * 64 + warp * 16 + g + r * 8;
                    const int col = n0 + h * 128 + i * 8 + q * 2;
                    if (row >= p.M || col >= p.N) continue; // the idle half of a pair too
                    float v[2];
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int cc = col + e < p.N ? col + e : col;
                        float x = acc[h][4 * i + 2 * r + e];
                        if (bias0) x += to_f32(bias0[cc]);
                        if (GLU) {
                            float u = acc[1][4 * i + 2 * r + e];
                            if (bias1) u += to_f32(bias1[cc]);
                            x = activate(ACT_SILU, x) * u;
                        } else {
                            x = activate(ACT, x);
                        }
                        if (res) x += to_f32(res[(long long)row * p.ldr + cc]);
                        v[e] = x;
                    }
                    T *dst = c + (long long)row * p.ldc + col;
                    if (col + 1 < p.N && (reinterpret_cast<uintptr_t>(dst) & 3) == 0) {
                        T pair[2] = {from_f32<T>(v[0]), from_f32<T>(v[1])};
                        *reinterpret_cast<uint32_t *>(dst) =
                            *reinterpret_cast<const uint32_t *>(pair);
                    } else {
                        dst[0] = from_f32<T>(v[0]);
                        if (col + 1 < p.N) dst[1] = from_f32<T>(v[1]);
                    }
                }
    }
    // No CTA exits while its peer may still arrive on its barriers.
    if constexpr (CLUSTER) kk_tma::cluster_sync();
#endif
}

} // namespace kk_gemm
