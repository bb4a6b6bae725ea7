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
// are applied in the epilogue, with fp8_linear's bias, activation (a template
// constant) and residual, stored through shared memory with the TMA where c's
// rows suit a tensor map. docs/kernels/fp8_gemm.md.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include "cuda/kernels/fp8_wgmma.cuh"
#include "cuda/kernels/gemm_sm80.cuh"
#include "cuda/kernels/tma.cuh"
#include "cuda/kernels/wgmma.cuh"

namespace kk_fp8 {

enum { kTensor = 0, kRowwise = 1, kBlock = 2 }; // the op's scaling values

struct Args {
    int M, N, K, G; // G = ceil(K / 128), the block scales' groups
    int scaling;
    const float *sa, *sb; // tensor [1], [1]; rowwise [M], [N]; block [M,G], [ceil(N/128),G]
    void *c;              // [M, N], contiguous
    const void *bias;     // [N] of c's type, or null (fp8_linear's epilogue)
    const void *res;      // [M, N] of c's type, contiguous, or null; may be c itself
};

template <bool kPromote> struct Tile {
    static constexpr int kConsumers = 2, kThreads = 128 * (kConsumers + 1);
    static constexpr int BM = 64 * kConsumers, BK = 128; // BK bytes = the swizzle row
    static constexpr int BN = kPromote ? 128 : 256;      // two register sets at 128
    static constexpr int kStages = kPromote ? 6 : 4;
    static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
    static constexpr int kGroupM = 8; // m tiles a group of blocks walks before the next n
    static constexpr size_t kStageBytes = (size_t)(BM + BN) * BK;
    // the TMA-stored epilogue: per consumer warp two boxes of 16 rows x 128
    // bytes (64 bf16 or 32 f32 columns), one filling while the other stores
    static constexpr int kBoxRows = 16;
    static constexpr size_t kBoxBytes = (size_t)kBoxRows * 128;
    static constexpr size_t kEpiBytes = (size_t)kConsumers * 4 * 2 * kBoxBytes;
    static constexpr size_t kSmem =
        kStages * kStageBytes + kEpiBytes + 1024 + 2 * kStages * sizeof(uint64_t);
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

template <typename T> __device__ __forceinline__ float as_f32(T v) { return kk_gemm::to_f32(v); }
template <> __device__ __forceinline__ float as_f32(float v) { return v; }

// Two values of base[col], base[col + 1] as floats (zeros past n): one 4- or
// 8-byte load when `pairs` (base aligned for it) and both are in range.
template <typename T>
__device__ __forceinline__ float2 load2(const T *base, int col, int n, bool pairs) {
    if (pairs && col + 1 < n) {
        if constexpr (sizeof(T) == 4) return *reinterpret_cast<const float2 *>(base + col);
        const uint32_t w = *reinterpret_cast<const uint32_t *>(base + col);
        const T *v = reinterpret_cast<const T *>(&w);
        return make_float2(as_f32(v[0]), as_f32(v[1]));
    }
    float2 r = make_float2(0.0f, 0.0f);
    if (col < n) r.x = as_f32(base[col]);
    if (col + 1 < n) r.y = as_f32(base[col + 1]);
    return r;
}

// One output pair: scale, bias, activation, residual (the fused fp8_linear
// epilogue; for fp8_gemm only the scale).
template <int ACT>
__device__ __forceinline__ float2 finish(float x0, float x1, float sc0, float sc1, float2 b,
                                         float2 r, bool bias, bool res) {
    x0 *= sc0, x1 *= sc1;
    if (bias) x0 += b.x, x1 += b.y;
    x0 = kk_gemm::activate(ACT, x0), x1 = kk_gemm::activate(ACT, x1);
    if (res) x0 += r.x, x1 += r.y;
    return make_float2(x0, x1);
}

// The epilogue of one consumer warp's 16 x BN outputs (rows row0 + g, + 8),
// as the bf16 GEMM's (gemm_sm90.cuh, store_tile_tma): per box of 16 rows x
// 128 bytes, every load first (column scales, bias, residual), then the
// arithmetic, the pairs written into the warp's box buffer in the TMA's
// 128-byte swizzle, and one lane's TMA store (rows past M, columns past N
// clipped). scale(r, col) is the row-and-column scale of row row0 + 8r.
template <typename TOut, int ACT, int BN>
__device__ __forceinline__ void store_tile_tma(const float (&acc)[BN / 2], const Args &p,
                                               const CUtensorMap *tm_c, unsigned char *boxes,
                                               int row0, int n0, int lane, const float (&rs)[2],
                                               const float *cs, bool pairs) {
    constexpr int kCols = 128 / (int)sizeof(TOut), kTiles = kCols / 8, kBoxes = BN / kCols;
    const TOut *bias = static_cast<const TOut *>(p.bias), *res = static_cast<const TOut *>(p.res);
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int c = 0; c < kBoxes; c++) {
        float2 cw[kTiles], bw[kTiles], rw[kTiles][2];
#pragma unroll
        for (int il = 0; il < kTiles; il++) {
            const int col = n0 + (c * kTiles + il) * 8 + 2 * q;
            cw[il] = cs ? load2(cs, col, p.N, pairs) : make_float2(1.0f, 1.0f);
            bw[il] = bias ? load2(bias, col, p.N, pairs) : make_float2(0.0f, 0.0f);
#pragma unroll
            for (int r = 0; r < 2; r++)
                rw[il][r] = res && row0 + 8 * r < p.M
                                ? load2(res + (long long)(row0 + 8 * r) * p.N, col, p.N, pairs)
                                : make_float2(0.0f, 0.0f);
        }
        unsigned char *box = boxes + (c & 1) * Tile<true>::kBoxBytes;
        if (lane == 0) kk_tma::bulk_wait_read<1>(); // this buffer's last store has read it
        __syncwarp();
#pragma unroll
        for (int il = 0; il < kTiles; il++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int e0 = 4 * (c * kTiles + il) + 2 * r, row = g + 8 * r; // row % 8 == g
                const float2 v = finish<ACT>(acc[e0], acc[e0 + 1], rs[r] * cw[il].x,
                                             rs[r] * cw[il].y, bw[il], rw[il][r], bias, res);
                if constexpr (sizeof(TOut) == 4) {
                    // 4 columns a 16-byte chunk: the pair is half of chunk 2 il + q / 2
                    *reinterpret_cast<float2 *>(box + row * 128 + (((2 * il + (q >> 1)) ^ g) << 4) +
                                                (q & 1) * 8) = v;
                } else {
                    TOut pair[2] = {kk_gemm::from_f32<TOut>(v.x), kk_gemm::from_f32<TOut>(v.y)};
                    *reinterpret_cast<uint32_t *>(box + row * 128 + ((il ^ g) << 4) + q * 4) =
                        *reinterpret_cast<const uint32_t *>(pair);
                }
            }
        kk_tma::fence_proxy_async_smem();
        __syncwarp();
        if (lane == 0) {
            kk_tma::tma_store_2d(tm_c, box, n0 + c * kCols, row0 - g);
            kk_tma::bulk_commit();
        }
    }
}

template <int AT, int BT, typename TOut, bool kPromote, int ACT = kk_gemm::ACT_NONE>
__global__ void __launch_bounds__(Tile<kPromote>::kThreads, 1)
    fp8_gemm_sm90_kernel(const __grid_constant__ CUtensorMap tm_a,
                         const __grid_constant__ CUtensorMap tm_b,
                         const __grid_constant__ CUtensorMap tm_c, const Args p,
                         const int tma_store) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using L = Tile<kPromote>;
    constexpr int BM = L::BM, BN = L::BN, BK = L::BK, kStages = L::kStages;
    extern __shared__ unsigned char smem_raw[];
    uint8_t *sA = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                              ~uintptr_t(1023));
    uint8_t *sB = sA + kStages * BM * BK;
    unsigned char *sEpi = sB + kStages * BN * BK;
    uint64_t *full = reinterpret_cast<uint64_t *>(sEpi + L::kEpiBytes);
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
    // pair loads of column scales, bias and residual (rows of N elements) where aligned
    const uintptr_t vals = reinterpret_cast<uintptr_t>(p.bias) | reinterpret_cast<uintptr_t>(p.res);
    const bool pairs = p.N % 2 == 0 && vals % (2 * sizeof(TOut)) == 0 &&
                       reinterpret_cast<uintptr_t>(p.sb) % 8 == 0;
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

        // Epilogue: c = act(acc * (row scale * column scale) + bias) + res, one rounding.
        float rs[2] = {1.0f, 1.0f};
        if (p.scaling == kTensor) {
            rs[0] = rs[1] = p.sa[0] * p.sb[0];
        } else if (p.scaling == kRowwise) {
            rs[0] = row0 < p.M ? p.sa[row0] : 0.0f;
            rs[1] = row1 < p.M ? p.sa[row1] : 0.0f;
        }
        const float *cs = p.scaling == kRowwise ? p.sb : nullptr;
        if (tma_store) {
            store_tile_tma<TOut, ACT, BN>(acc, p, &tm_c, sEpi + (cw * 4 + warp) * 2 * L::kBoxBytes,
                                          row0, n0, lane, rs, cs, pairs);
            continue;
        }
        const TOut *bias = static_cast<const TOut *>(p.bias);
        const TOut *res = static_cast<const TOut *>(p.res);
#pragma unroll
        for (int i = 0; i < BN / 8; i++) {
            const int col = n0 + i * 8 + q * 2;
            if (col >= p.N) continue;
            const bool two = col + 1 < p.N;
            const float2 cw = cs ? load2(cs, col, p.N, false) : make_float2(1.0f, 1.0f);
            const float2 bw = bias ? load2(bias, col, p.N, false) : make_float2(0.0f, 0.0f);
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = r ? row1 : row0;
                if (row >= p.M) continue;
                const float2 rw = res ? load2(res + (long long)row * p.N, col, p.N, false)
                                      : make_float2(0.0f, 0.0f);
                const float2 v = finish<ACT>(acc[4 * i + 2 * r], acc[4 * i + 2 * r + 1],
                                             rs[r] * cw.x, rs[r] * cw.y, bw, rw, bias, res);
                store2(c + (long long)row * p.N + col, v.x, v.y, two);
            }
        }
    }
    // the warp's last boxes stored before its shared memory goes away
    if (tma_store && lane == 0) kk_tma::bulk_wait<0>();
#endif
}

} // namespace kk_fp8
