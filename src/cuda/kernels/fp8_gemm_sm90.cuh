// The Hopper FP8 GEMM (sm_90a), persistent and warp-specialized: a producer
// warpgroup loads 128 x 128-byte tiles of a and BN x 128-byte tiles of b with
// the tensor memory accelerator into mbarrier-guarded stages (one stage = 128
// of K = one block-scaling group); two consumer warpgroups (64 rows each) run
// wgmma m64nNk32 on e4m3/e5m2. Promoting kernels (kPromote, BN = 128) sum each
// stage into a register set of its own and add it, times the block scales
// (1 for tensor and row-wise), into the f32 accumulator: wgmma's FP8
// accumulation is not full f32. Two sets alternate, so one is added while the
// next stage's wgmmas run. The fast kernel (BN = 256, tensor and
// row-wise only) accumulates across K in wgmma. Scales per tensor and per row
// are applied in the epilogue. docs/kernels/fp8_gemm.md.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include "cuda/kernels/fp8_wgmma.cuh"
#include "cuda/kernels/tma.cuh"
#include "cuda/kernels/wgmma.cuh"

namespace kk_fp8 {

enum { kTensor = 0, kRowwise = 1, kBlock = 2 }; // the op's scaling values

struct Args {
    int M, N, K, G; // G = ceil(K / 128), the block scales' groups
    int scaling;
    const float *sa, *sb; // tensor [1], [1]; rowwise [M], [N]; block [M,G], [ceil(N/128),G]
    void *c;              // [M, N], contiguous
};

template <bool kPromote> struct Tile {
    static constexpr int kConsumers = 2, kThreads = 128 * (kConsumers + 1);
    static constexpr int BM = 64 * kConsumers, BK = 128; // BK bytes = the swizzle row
    static constexpr int BN = kPromote ? 128 : 256;      // two register sets at 128
    static constexpr int kStages = kPromote ? 6 : 4;
    static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
    static constexpr int kGroupM = 8; // m tiles a group of blocks walks before the next n
    static constexpr size_t kStageBytes = (size_t)(BM + BN) * BK;
    static constexpr size_t kSmem = kStages * kStageBytes + 1024 + 2 * kStages * sizeof(uint64_t);
};

// A K-major operand tile in shared memory, rows of 128 bytes with the 128-byte
// swizzle: start address, leading offset 16 B (unused by this swizzle), 8-row
// groups 1024 B apart, swizzle mode 1 (PTX ISA, "Matrix Descriptor Format").
__device__ __forceinline__ uint64_t desc_sw128(const void *p) {
    const uint64_t a = static_cast<uint64_t>(__cvta_generic_to_shared(p));
    return ((a & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

// Registers redefined after a wgmma wait, so no read of them moves above it.
template <int N> __device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}

__device__ __forceinline__ void store2(float *dst, float v0, float v1, bool two) {
    if (two && (reinterpret_cast<uintptr_t>(dst) & 7) == 0) {
        *reinterpret_cast<float2 *>(dst) = make_float2(v0, v1);
    } else {
        dst[0] = v0;
        if (two) dst[1] = v1;
    }
}
__device__ __forceinline__ void store2(__nv_bfloat16 *dst, float v0, float v1, bool two) {
    if (two && (reinterpret_cast<uintptr_t>(dst) & 3) == 0) {
        *reinterpret_cast<__nv_bfloat162 *>(dst) = __floats2bfloat162_rn(v0, v1);
    } else {
        dst[0] = __float2bfloat16_rn(v0);
        if (two) dst[1] = __float2bfloat16_rn(v1);
    }
}

template <int AT, int BT, typename TOut, bool kPromote>
__global__ void __launch_bounds__(Tile<kPromote>::kThreads, 1)
    fp8_gemm_sm90_kernel(const __grid_constant__ CUtensorMap tm_a,
                         const __grid_constant__ CUtensorMap tm_b, const Args p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using L = Tile<kPromote>;
    constexpr int BM = L::BM, BN = L::BN, BK = L::BK, kStages = L::kStages;
    extern __shared__ unsigned char smem_raw[];
    uint8_t *sA = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                              ~uintptr_t(1023));
    uint8_t *sB = sA + kStages * BM * BK;
    uint64_t *full = reinterpret_cast<uint64_t *>(sB + kStages * BN * BK);
    uint64_t *empty = full + kStages;

    const int tiles_m = (p.M + BM - 1) / BM, tiles_n = (p.N + BN - 1) / BN;
    const int tiles = tiles_m * tiles_n, KT = (p.K + BK - 1) / BK;
    const int tid = threadIdx.x, wg = tid / 128;
    // Tile t's corner: kGroupM m tiles down one n column before the next, so
    // the blocks of a wave share a and b tiles in L2.
    auto corner = [&](int t, int &m0, int &n0) {
        const int per_group = L::kGroupM * tiles_n, first_m = t / per_group * L::kGroupM;
        const int group_m = min(tiles_m - first_m, L::kGroupM), in_group = t % per_group;
        m0 = (first_m + in_group % group_m) * BM;
        n0 = (in_group / group_m) * BN;
    };

    if (tid == 0) {
        for (int s = 0; s < kStages; s++) {
            kk_tma::mbar_init(&full[s], 1);
            kk_tma::mbar_init(&empty[s], L::kConsumers * 4); // one arrival per consumer warp
        }
        kk_tma::mbar_init_fence();
    }
    __syncthreads();

    // Persistent: tiles blockIdx.x, + gridDim.x, ...; the stages' phases run
    // on across tiles (`it` counts k steps), so the next tile's loads overlap
    // this one's epilogue.
    if (wg == 0) {
        kk_tma::setmaxnreg_dec<L::kProducerRegs>();
        if (tid == 0) {
            int it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int m0, n0;
                corner(t, m0, n0);
                for (int kt = 0; kt < KT; kt++, it++) {
                    const int s = it % kStages;
                    if (it >= kStages) kk_tma::mbar_wait(&empty[s], (it / kStages - 1) & 1);
                    // the whole boxes count, zero-filled parts past M, N, K too
                    kk_tma::mbar_arrive_expect_tx(&full[s], (uint32_t)L::kStageBytes);
                    kk_tma::tma_load_2d(sA + s * BM * BK, &tm_a, &full[s], kt * BK, m0);
                    kk_tma::tma_load_2d(sB + s * BN * BK, &tm_b, &full[s], kt * BK, n0);
                }
            }
        }
        return;
    }

    kk_tma::setmaxnreg_inc<L::kConsumerRegs>();
    using W = Fp8Wgmma<AT, BT, BN>;
    const int cw = wg - 1, warp = (tid % 128) / 32, lane = tid % 32;
    const int g = lane >> 2, q = lane & 3;
    const bool block = p.scaling == kBlock;
    TOut *c = static_cast<TOut *>(p.c);
    auto release = [&](int step) { // this warp is done with the stage of k step `step`
        __syncwarp();
        if (lane == 0) kk_tma::mbar_arrive(&empty[step % kStages]);
    };
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0, n0;
        corner(t, m0, n0);
        // this thread's rows (the m16n8 layout: g and g + 8 of its warp's 16)
        const int row0 = m0 + cw * 64 + warp * 16 + g, row1 = row0 + 8;
        float acc[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; i++) acc[i] = 0.0f;
        if constexpr (kPromote) {
            // Ping-pong: two partial sets, one promoted (f32 FMAs) while the
            // other's wgmmas run. `issue` starts stage kt into `part` (scale_d
            // 0 on its first k32: no zeroing) and reads its block weights,
            // after `ready` saw the stage's bytes land; `done` follows the
            // wait that completed the set's group: the stage goes back to the
            // producer. Stages go in pairs (part0, part1); part1's group
            // crosses the loop's back edge and is waited for with wait_group
            // 0 at the top of the body, since ptxas serializes every wgmma
            // (C7514) when registers of a group from an earlier iteration are
            // read after wait_group 1, and would sink part0's FMAs below a
            // wait_group 0 in the same block. docs/kernels/fp8_gemm.md,
            // "Version 2".
            float part0[BN / 2], part1[BN / 2], w0[2], w1[2];
            auto ready = [&](int kt) { // stage kt's bytes have landed
                const int step = it + kt;
                kk_tma::mbar_wait(&full[step % kStages], (step / kStages) & 1);
            };
            auto issue = [&](float(&part)[BN / 2], float(&w)[2], int kt) {
                const int s = (it + kt) % kStages;
                const uint8_t *a_tile = sA + s * BM * BK + cw * 64 * BK, *b_tile = sB + s * BN * BK;
                kk_wgmma::wgmma_fence(); // after the FMAs' reads of `part`
#pragma unroll
                for (int ks = 0; ks < BK / 32; ks++)
                    W::ss(part, desc_sw128(a_tile + ks * 32), desc_sw128(b_tile + ks * 32), ks > 0);
                kk_wgmma::wgmma_commit();
                w[0] = w[1] = 1.0f; // tensor and row-wise: scaled in the epilogue
                if (block) {
                    const float wb = p.sb[(long long)(n0 / 128) * p.G + kt];
                    w[0] = row0 < p.M ? p.sa[(long long)row0 * p.G + kt] * wb : 0.0f;
                    w[1] = row1 < p.M ? p.sa[(long long)row1 * p.G + kt] * wb : 0.0f;
                }
            };
            auto done = [&](float(&part)[BN / 2], int kt) {
                fence_regs(part);
                release(it + kt);
            };
            auto promote = [&](const float(&part)[BN / 2], const float(&w)[2]) {
#pragma unroll
                for (int i = 0; i < BN / 8; i++) {
                    acc[4 * i + 0] = fmaf(w[0], part[4 * i + 0], acc[4 * i + 0]);
                    acc[4 * i + 1] = fmaf(w[0], part[4 * i + 1], acc[4 * i + 1]);
                    acc[4 * i + 2] = fmaf(w[1], part[4 * i + 2], acc[4 * i + 2]);
                    acc[4 * i + 3] = fmaf(w[1], part[4 * i + 3], acc[4 * i + 3]);
                }
            };
            ready(0);
            issue(part0, w0, 0);
            if (KT == 1) {
                kk_wgmma::wgmma_wait<0>();
                done(part0, 0);
                promote(part0, w0);
            } else {
                ready(1);
                issue(part1, w1, 1);
                kk_wgmma::wgmma_wait<1>(); // stage 0 done, stage 1 runs on
                done(part0, 0);
                promote(part0, w0);
                int kt = 2;
                for (; kt + 1 < KT; kt += 2) { // part1 holds stage kt - 1, in flight
                    ready(kt);
                    kk_wgmma::wgmma_wait<0>();
                    done(part1, kt - 1);
                    issue(part0, w0, kt);
                    promote(part1, w1);
                    ready(kt + 1);
                    issue(part1, w1, kt + 1);
                    kk_wgmma::wgmma_wait<1>();
                    done(part0, kt);
                    promote(part0, w0);
                }
                if (kt < KT) ready(kt);
                kk_wgmma::wgmma_wait<0>();
                done(part1, kt - 1);
                if (kt < KT) { // an odd number of stages: the last one alone
                    issue(part0, w0, kt);
                    promote(part1, w1);
                    kk_wgmma::wgmma_wait<0>();
                    done(part0, kt);
                    promote(part0, w0);
                } else {
                    promote(part1, w1);
                }
            }
            it += KT;
        } else {
            for (int kt = 0; kt < KT; kt++, it++) {
                const int s = it % kStages;
                kk_tma::mbar_wait(&full[s], (it / kStages) & 1);
                const uint8_t *a_tile = sA + s * BM * BK + cw * 64 * BK, *b_tile = sB + s * BN * BK;
                kk_wgmma::wgmma_fence();
#pragma unroll
                for (int ks = 0; ks < BK / 32; ks++)
                    W::ss(acc, desc_sw128(a_tile + ks * 32), desc_sw128(b_tile + ks * 32), 1);
                kk_wgmma::wgmma_commit();
                // one group in flight: the previous step's stage is free once this returns
                kk_wgmma::wgmma_wait<1>();
                if (kt > 0) release(it - 1);
            }
            kk_wgmma::wgmma_wait<0>();
            fence_regs(acc);
            release(it - 1); // K >= 1, so KT >= 1
        }

        // Epilogue: c = acc * (row scale * column scale), one rounding.
        float rs0 = 1.0f, rs1 = 1.0f;
        if (p.scaling == kTensor) {
            rs0 = rs1 = p.sa[0] * p.sb[0];
        } else if (p.scaling == kRowwise) {
            rs0 = row0 < p.M ? p.sa[row0] : 0.0f;
            rs1 = row1 < p.M ? p.sa[row1] : 0.0f;
        }
        const float *cs = p.scaling == kRowwise ? p.sb : nullptr;
#pragma unroll
        for (int i = 0; i < BN / 8; i++) {
            const int col = n0 + i * 8 + q * 2;
            if (col >= p.N) continue;
            const bool two = col + 1 < p.N;
            const float c0 = cs ? cs[col] : 1.0f, c1 = cs && two ? cs[col + 1] : 1.0f;
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = r ? row1 : row0;
                if (row >= p.M) continue;
                const float rsc = r ? rs1 : rs0;
                store2(c + (long long)row * p.N + col, acc[4 * i + 2 * r] * (rsc * c0),
                       acc[4 * i + 2 * r + 1] * (rsc * c1), two);
            }
        }
    }
#endif
}

} // namespace kk_fp8
