// The Hopper GEMM (sm_90a), persistent: a producer warpgroup loads 128 x 64
// tiles of a and 256 x 64 of b (SwiGLU: 128 rows of each weight) with the
// tensor memory accelerator into mbarrier-guarded stages; two consumer
// warpgroups run wgmma (64 rows each, one m64n256k16 per k16 step), apply the
// epilogue in registers and store through shared memory with the TMA (or
// straight from registers where c's rows do not suit a tensor map). CLUSTER:
// 2-CTA clusters along M share each b tile, every CTA loading half of it
// multicast to both.
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
    // The TMA-stored epilogue: per consumer warp two 16 x 64 output boxes
    // (2 KiB each, 128-byte rows, swizzled), one filling while the other stores.
    static constexpr int kBoxRows = 16, kBoxCols = 64;
    static constexpr size_t kBoxBytes = (size_t)kBoxRows * kBoxCols * 2;
    static constexpr size_t kEpiBytes = (size_t)kConsumers * 4 * 2 * kBoxBytes;
    static constexpr size_t kSmem =
        kStages * kStageBytes + kEpiBytes + 1024 + 2 * kStages * sizeof(uint64_t);
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

// Two T at base[col], base[col + 1] as one word (zeros past n), one 4-byte
// load when `pairs` (base 4-byte aligned) and both are in range.
template <typename T>
__device__ __forceinline__ uint32_t load_pair(const T *base, int col, int n, bool pairs) {
    if (pairs && col + 1 < n) return *reinterpret_cast<const uint32_t *>(base + col);
    T v[2] = {col < n ? base[col] : from_f32<T>(0.0f),
              col + 1 < n ? base[col + 1] : from_f32<T>(0.0f)};
    return *reinterpret_cast<const uint32_t *>(v);
}
template <typename T> __device__ __forceinline__ float2 unpack_pair(uint32_t w) {
    const T *v = reinterpret_cast<const T *>(&w);
    return make_float2(to_f32(v[0]), to_f32(v[1]));
}

// The epilogue of one consumer warp's 16 x BN outputs (rows row0 + g, + 8)
// through shared memory: per 64-column box, first every load it needs (bias,
// residual: issued together, so their latencies overlap), then bias,
// activation (or SwiGLU), residual and the rounding in registers, the pairs
// written into the warp's box buffer in the TMA's 128-byte swizzle (16-byte
// chunk j of row r at j ^ (r % 8): the 32 lanes hit 32 banks), and one lane
// stores the box with the TMA, which clips rows past M and columns past N.
// The consumers go back to the main loop while the stores drain.
template <typename T, int ACT>
__device__ __forceinline__ void
store_tile_tma(const float (&acc)[2][64], const Args &p, const CUtensorMap *tm_c,
               unsigned char *boxes, int row0, int n0, int lane, bool bias_pairs, bool res_pairs) {
    constexpr bool GLU = ACT == ACT_SWIGLU;
    constexpr int kBoxes = (GLU ? 128 : 256) / Sm90::kBoxCols;
    const T *bias0 = static_cast<const T *>(p.bias0), *bias1 = static_cast<const T *>(p.bias1);
    const T *res = static_cast<const T *>(p.res);
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int c = 0; c < kBoxes; c++) {
        const int h = GLU ? 0 : c >> 1, i0 = GLU ? c * 8 : (c & 1) * 8;
        const int col0 = n0 + c * Sm90::kBoxCols + 2 * q;
        uint32_t bw[8], bu[8], rw[8][2];
#pragma unroll
        for (int il = 0; il < 8; il++) {
            const int col = col0 + il * 8;
            bw[il] = bias0 ? load_pair(bias0, col, p.N, bias_pairs) : 0u;
            bu[il] = GLU && bias1 ? load_pair(bias1, col, p.N, bias_pairs) : 0u;
#pragma unroll
            for (int r = 0; r < 2; r++)
                rw[il][r] =
                    res && row0 + 8 * r < p.M
                        ? load_pair(res + (long long)(row0 + 8 * r) * p.ldr, col, p.N, res_pairs)
                        : 0u;
        }
        unsigned char *box = boxes + (c & 1) * Sm90::kBoxBytes;
        if (lane == 0) kk_tma::bulk_wait_read<1>(); // this buffer's last store has read it
        __syncwarp();
#pragma unroll
        for (int il = 0; il < 8; il++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int e0 = 4 * (i0 + il) + 2 * r;
                float x[2] = {acc[h][e0], acc[h][e0 + 1]};
                if (bias0) {
                    const float2 b = unpack_pair<T>(bw[il]);
                    x[0] += b.x, x[1] += b.y;
                }
                if constexpr (GLU) {
                    float u[2] = {acc[1][e0], acc[1][e0 + 1]};
                    if (bias1) {
                        const float2 b = unpack_pair<T>(bu[il]);
                        u[0] += b.x, u[1] += b.y;
                    }
                    x[0] = activate(ACT_SILU, x[0]) * u[0];
                    x[1] = activate(ACT_SILU, x[1]) * u[1];
                } else {
                    x[0] = activate(ACT, x[0]), x[1] = activate(ACT, x[1]);
                }
                if (res) {
                    const float2 v = unpack_pair<T>(rw[il][r]);
                    x[0] += v.x, x[1] += v.y;
                }
                T pair[2] = {from_f32<T>(x[0]), from_f32<T>(x[1])};
                const int row = g + 8 * r; // row % 8 == g
                *reinterpret_cast<uint32_t *>(box + row * 128 + ((il ^ g) << 4) + q * 4) =
                    *reinterpret_cast<const uint32_t *>(pair);
            }
        kk_tma::fence_proxy_async_smem();
        __syncwarp();
        if (lane == 0) {
            kk_tma::tma_store_2d(tm_c, box, n0 + c * Sm90::kBoxCols, row0 - g);
            kk_tma::bulk_commit();
        }
    }
}

template <typename T, int ACT, bool CLUSTER = false>
__global__ void __launch_bounds__(Sm90::kThreads, 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap tm_a,
                     const __grid_constant__ CUtensorMap tm_b0,
                     const __grid_constant__ CUtensorMap tm_b1,
                     const __grid_constant__ CUtensorMap tm_c, const Args p, const int tma_store) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr bool GLU = ACT == ACT_SWIGLU;
    constexpr int BM = Sm90::BM, BK = Sm90::BK, kStages = Sm90::kStages, BN = Sm90::BN<GLU>;
    extern __shared__ unsigned char smem_raw[];
    T *sA =
        reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    T *sB = sA + kStages * BM * BK;
    unsigned char *sEpi = reinterpret_cast<unsigned char *>(sB + kStages * Sm90::kBRows * BK);
    uint64_t *full = reinterpret_cast<uint64_t *>(sEpi + Sm90::kEpiBytes);
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
    // 4-byte pair loads of bias and residual where aligned (the TMA epilogue)
    const bool bias_pairs = (reinterpret_cast<uintptr_t>(bias0) & 3) == 0 &&
                            (reinterpret_cast<uintptr_t>(bias1) & 3) == 0;
    const bool res_pairs = (reinterpret_cast<uintptr_t>(res) & 3) == 0 && (p.ldr & 1) == 0;
    int it = 0;
    for (int t = first; t < units; t += stride) {
        int m0, n0;
        corner(t, m0, n0);
        if (res) {
            // the tile's residual into L2 while the main loop runs: this
            // warp's 16 rows, up to 4 lines of 128 bytes each (BN columns)
            const int row = m0 + cw * 64 + warp * 16 + (lane >> 2);
            const int col = n0 + (lane & 3) * 64;
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const int r = row + 8 * j;
                if (r < p.M && col < p.N && col < n0 + BN)
                    kk_tma::prefetch_l2(res + (long long)r * p.ldr + col);
            }
        }
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
        if (tma_store) {
            store_tile_tma<T, ACT>(acc, p, &tm_c, sEpi + (cw * 4 + warp) * 2 * Sm90::kBoxBytes,
                                   m0 + cw * 64 + warp * 16 + g, n0, lane, bias_pairs, res_pairs);
            continue;
        }
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
    // the warp's last boxes stored before its shared memory goes away
    if (tma_store && lane == 0) kk_tma::bulk_wait<0>();
    // No CTA exits while its peer may still arrive on its barriers.
    if constexpr (CLUSTER) kk_tma::cluster_sync();
#endif
}

} // namespace kk_gemm
