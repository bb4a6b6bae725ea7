// The f32 GEMMs' shared parts and the exact one: c = epilogue(a . b^T) with
// f32 inputs, FMA on the CUDA cores (no TF32), each output summed in the
// natural k order. 128 x 128 block tiles (SwiGLU 128 x 64 of each weight), k 8
// per stage, two shared-memory buffers filled from registers (the next tile's
// global loads are in flight while this one is multiplied), 256 threads of
// 8 x 8 outputs each. Any M, N, K and row strides: float4 loads when rows
// allow, element loads otherwise. The TF32 kernel is in gemm_tf32.cuh.
// docs/kernels/gemm.md, "f32".
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/kernels/gemm_sm80.cuh"
#include "kernelkit/status.h"

namespace kk_gemm {

// The launcher (gemm_f32.cu): TF32 or FMA by the configuration's
// hardware.nvidia.tf32_allowed, read at each call. ALIGNED rows: K and the
// row strides multiples of 4, data on 16 bytes.
kk_status launch_f32(const Args &a, bool aligned, cudaStream_t stream, const char *op);

// The epilogue of one f32 output (row, col in range): bias, the activation
// (SwiGLU: silu(g + bg) * (u + bu)), the residual. The same arithmetic as the
// bf16/f16 kernels', without the final rounding.
template <int ACT>
__device__ __forceinline__ float epilogue_f32(const Args &p, int row, int col, float g, float u) {
    const float *bias0 = static_cast<const float *>(p.bias0);
    const float *bias1 = static_cast<const float *>(p.bias1);
    const float *res = static_cast<const float *>(p.res);
    if (bias0) g += bias0[col];
    float x;
    if (ACT == ACT_SWIGLU) {
        if (bias1) u += bias1[col];
        x = activate(ACT_SILU, g) * u;
    } else {
        x = activate(ACT, g);
    }
    if (res) x += res[(long long)row * p.ldr + col];
    return x;
}

namespace simt {

constexpr int kThreads = 256; // 16 x 16 threads, each 8 rows x 8 columns
constexpr int BM = 128, BK = 8;
constexpr int kPad = 4; // a k row of a tile is BM + 4 floats: the transposed stores miss conflicts

template <bool GLU> struct Tile {
    static constexpr int BN = GLU ? 64 : 128; // per weight
    static constexpr int NB = GLU ? 2 : 1;
    static constexpr int TN = BN / 16; // columns per thread per weight: 8, or 4 for SwiGLU
};

// One operand's k-slice [r0, r0 + ROWS) x [k0, k0 + 8) of a row-major [rows, K]
// matrix, staged in registers, then stored transposed (k-major) into shared
// memory. Out-of-range elements are zeros. ALIGNED: a float4 per (row, half of
// the 8 k) (K a multiple of 4, so a float4 is all in or all out).
template <int ROWS, bool ALIGNED> struct Stage {
    static constexpr int kUnits = ALIGNED ? ROWS * 2 : ROWS * BK; // float4s or floats
    static constexpr int kPer = (kUnits + kThreads - 1) / kThreads;
    static constexpr int kW = ALIGNED ? 4 : 1;
    float v[kPer][kW];

    __device__ __forceinline__ void load(const float *g, long long ld, int rows, int K, int r0,
                                         int k0) {
#pragma unroll
        for (int i = 0; i < kPer; i++) {
            const int u = threadIdx.x + i * kThreads;
            if (ALIGNED) {
                const int row = u >> 1, k = k0 + (u & 1) * 4, gr = r0 + row;
                float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
                if (u < kUnits && gr < rows && k < K)
                    f = __ldg(reinterpret_cast<const float4 *>(g + (long long)gr * ld + k));
                v[i][0] = f.x, v[i][1] = f.y, v[i][2] = f.z, v[i][3] = f.w;
            } else {
                const int row = u >> 3, k = k0 + (u & 7), gr = r0 + row;
                v[i][0] =
                    u < kUnits && gr < rows && k < K ? __ldg(g + (long long)gr * ld + k) : 0.f;
            }
        }
    }

    // s: [BK][ROWS + kPad]
    __device__ __forceinline__ void store(float *s) const {
#pragma unroll
        for (int i = 0; i < kPer; i++) {
            const int u = threadIdx.x + i * kThreads;
            if (u >= kUnits) continue;
            if (ALIGNED) {
                const int row = u >> 1, k = (u & 1) * 4;
#pragma unroll
                for (int e = 0; e < 4; e++) s[(k + e) * (ROWS + kPad) + row] = v[i][e];
            } else {
                s[(u & 7) * (ROWS + kPad) + (u >> 3)] = v[i][0];
            }
        }
    }
};

// Thread (ty, tx) of the 16 x 16 owns rows ty*4 + {0..3} and 64 + ty*4 +
// {0..3}, columns tx*4 + {0..3} (+ 64 for the second group of a 128-wide
// tile) of each weight: float4 reads of shared memory, no bank conflicts.
template <int ACT, bool ALIGNED>
__global__ void __launch_bounds__(kThreads, 2) kernel(const Args p) {
    constexpr bool GLU = ACT == ACT_SWIGLU;
    using L = Tile<GLU>;
    constexpr int SA = BK * (BM + kPad), SB = BK * (L::BN + kPad);
    constexpr int kStage = SA + L::NB * SB;
    __shared__ __align__(16) float smem[2 * kStage];
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * L::BN;
    const float *a = static_cast<const float *>(p.a);
    const float *b[2] = {static_cast<const float *>(p.b0), static_cast<const float *>(p.b1)};
    const int KT = (p.K + BK - 1) / BK;

    Stage<BM, ALIGNED> sa;
    Stage<L::BN, ALIGNED> sb[L::NB];
    auto load = [&](int kt) {
        sa.load(a, p.lda, p.M, p.K, m0, kt * BK);
#pragma unroll
        for (int w = 0; w < L::NB; w++) sb[w].load(b[w], p.ldb, p.N, p.K, n0, kt * BK);
    };
    auto store = [&](int buf) {
        float *s = smem + buf * kStage;
        sa.store(s);
#pragma unroll
        for (int w = 0; w < L::NB; w++) sb[w].store(s + SA + w * SB);
    };

    float acc[L::NB][8][L::TN];
#pragma unroll
    for (int w = 0; w < L::NB; w++)
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < L::TN; j++) acc[w][i][j] = 0.0f;

    load(0);
    store(0);
    __syncthreads();
    for (int kt = 0; kt < KT; kt++) {
        const int buf = kt & 1;
        if (kt + 1 < KT) load(kt + 1); // in flight while this tile is multiplied
        const float *s = smem + buf * kStage;
#pragma unroll
        for (int k = 0; k < BK; k++) {
            float av[8];
            const float4 a0 = *reinterpret_cast<const float4 *>(s + k * (BM + kPad) + ty * 4);
            const float4 a1 = *reinterpret_cast<const float4 *>(s + k * (BM + kPad) + 64 + ty * 4);
            av[0] = a0.x, av[1] = a0.y, av[2] = a0.z, av[3] = a0.w;
            av[4] = a1.x, av[5] = a1.y, av[6] = a1.z, av[7] = a1.w;
#pragma unroll
            for (int w = 0; w < L::NB; w++) {
                const float *sbw = s + SA + w * SB + k * (L::BN + kPad);
                float bv[L::TN];
#pragma unroll
                for (int g = 0; g < L::TN / 4; g++) {
                    const float4 f = *reinterpret_cast<const float4 *>(sbw + g * 64 + tx * 4);
                    bv[g * 4 + 0] = f.x, bv[g * 4 + 1] = f.y;
                    bv[g * 4 + 2] = f.z, bv[g * 4 + 3] = f.w;
                }
#pragma unroll
                for (int i = 0; i < 8; i++)
#pragma unroll
                    for (int j = 0; j < L::TN; j++) acc[w][i][j] = fmaf(av[i], bv[j], acc[w][i][j]);
            }
        }
        if (kt + 1 < KT) {
            store(buf ^ 1); // that buffer's readers finished before the last barrier
            __syncthreads();
        }
    }

    float *c = static_cast<float *>(p.c);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
        if (row >= p.M) continue;
#pragma unroll
        for (int g = 0; g < L::TN / 4; g++) {
            const int col = n0 + g * 64 + tx * 4;
            if (col >= p.N) continue;
            float v[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int cc = col + e < p.N ? col + e : col;
                v[e] = epilogue_f32<ACT>(p, row, cc, acc[0][i][g * 4 + e],
                                         acc[L::NB - 1][i][g * 4 + e]);
            }
            float *dst = c + (long long)row * p.ldc + col;
            if (col + 3 < p.N && (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
                *reinterpret_cast<float4 *>(dst) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (col + e < p.N) dst[e] = v[e];
            }
        }
    }
}

} // namespace simt
} // namespace kk_gemm
