// The TF32 GEMM (hardware.nvidia.tf32_allowed on): f32 inputs rounded to TF32
// (cvt.rna: 10-bit mantissa, relative error <= 2^-11) as they are read from
// shared memory, mma.sync m16n8k8 with f32 accumulation. The structure of the
// sm_80-class kernel (gemm_sm80.cuh): 128 x 128 tiles (SwiGLU 128 x 64 of each
// weight), k 32 per stage, 3 cp.async stages, 8 warps of 64 x 32; fragments are
// read element by element from shared memory whose 16-byte chunks are
// xor-swizzled by row, so a fragment's 8 rows hit 8 bank groups. sm_80 and
// sm_90. docs/kernels/gemm.md, "f32".
#pragma once

#include "cuda/kernels/gemm_f32.cuh"

namespace kk_gemm {
namespace tf32 {

constexpr int kThreads = 256; // 8 warps: 2 along M, 4 along N
constexpr int kBK = 32;       // floats of k per stage: 8 chunks of 16 bytes a row
constexpr int kStages = 3;

template <bool GLU> struct Tile {
    static constexpr int BM = 128, BN = GLU ? 64 : 128;
    static constexpr int WM = BM / 2, WN = BN / 4;  // a warp's share
    static constexpr int MT = WM / 16, NT = WN / 8; // mma tiles per warp
    static constexpr int NB = GLU ? 2 : 1;
    static constexpr int kStageElems = BM * kBK + NB * BN * kBK;
    static constexpr size_t kSmem = (size_t)kStages * kStageElems * sizeof(float);
};

// Element (row, k) of a 32-wide tile row: the 16-byte chunk k / 4 xor'ed with
// row % 8.
__device__ __forceinline__ int swz(int row, int k) {
    return row * kBK + ((((k >> 2) ^ row) & 7) << 2) + (k & 3);
}

__device__ __forceinline__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// rows [r0, r0 + ROWS) x k [k0, k0 + 32) of a row-major [rows, K] f32 matrix
// into a swizzled tile; out-of-range elements are zeros. ALIGNED: K and the row
// stride multiples of 4 and 16-byte data, so a 16-byte chunk is all in or out.
template <int ROWS, bool ALIGNED>
__device__ __forceinline__ void load_tile(float *tile, const float *g, long long ld, int rows,
                                          int K, int r0, int k0) {
    constexpr int kChunks = ROWS * (kBK / 4);
#pragma unroll
    for (int i = threadIdx.x; i < kChunks; i += kThreads) {
        const int row = i >> 3, chunk = i & 7;
        const int gr = r0 + row, gk = k0 + chunk * 4;
        float *dst = tile + swz(row, chunk * 4);
        if (ALIGNED) {
            const bool valid = gr < rows && gk < K;
            cp_async16(dst, valid ? g + (long long)gr * ld + gk : g, valid);
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++)
                dst[e] = gr < rows && gk + e < K ? g[(long long)gr * ld + gk + e] : 0.0f;
        }
    }
}

template <int ACT, bool ALIGNED> __global__ void __launch_bounds__(kThreads) kernel(const Args p) {
    constexpr bool GLU = ACT == ACT_SWIGLU;
    using L = Tile<GLU>;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    float *smem = reinterpret_cast<float *>(smem_raw);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t4 = lane & 3; // the fragments' groupID and thread in group
    const int wm0 = (warp >> 2) * L::WM, wn0 = (warp & 3) * L::WN;
    const int m0 = blockIdx.y * L::BM, n0 = blockIdx.x * L::BN;
    const float *a = static_cast<const float *>(p.a);
    const float *b[2] = {static_cast<const float *>(p.b0), static_cast<const float *>(p.b1)};
    const int KT = (p.K + kBK - 1) / kBK;

    auto load_stage = [&](int stage, int kt) {
        float *s = smem + stage * L::kStageElems;
        load_tile<L::BM, ALIGNED>(s, a, p.lda, p.M, p.K, m0, kt * kBK);
#pragma unroll
        for (int w = 0; w < L::NB; w++)
            load_tile<L::BN, ALIGNED>(s + L::BM * kBK + w * L::BN * kBK, b[w], p.ldb, p.N, p.K, n0,
                                      kt * kBK);
    };

    float acc[L::NB][L::MT][L::NT][4];
#pragma unroll
    for (int w = 0; w < L::NB; w++)
#pragma unroll
        for (int i = 0; i < L::MT; i++)
#pragma unroll
            for (int j = 0; j < L::NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[w][i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < kStages - 1; s++) {
        if (s < KT) load_stage(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_async_wait<kStages - 2>();
        __syncthreads(); // stage kt is in; every warp is done with stage kt - 1
        const int next = kt + kStages - 1;
        if (next < KT) load_stage(next % kStages, next);
        cp_async_commit();
        const float *as = smem + (kt % kStages) * L::kStageElems;
#pragma unroll
        for (int kk = 0; kk < kBK; kk += 8) {
            // A (16 x 8, row): a0 (g, t4), a1 (g + 8, t4), a2 (g, t4 + 4), a3 (g + 8, t4 + 4)
            uint32_t af[L::MT][4];
#pragma unroll
            for (int i = 0; i < L::MT; i++) {
                const int r = wm0 + i * 16 + g;
                af[i][0] = to_tf32(as[swz(r, kk + t4)]);
                af[i][1] = to_tf32(as[swz(r + 8, kk + t4)]);
                af[i][2] = to_tf32(as[swz(r, kk + t4 + 4)]);
                af[i][3] = to_tf32(as[swz(r + 8, kk + t4 + 4)]);
            }
#pragma unroll
            for (int w = 0; w < L::NB; w++) {
                const float *bs = as + L::BM * kBK + w * L::BN * kBK;
#pragma unroll
                for (int j = 0; j < L::NT; j++) {
                    // B (8 x 8, col): b0 (k t4, n g), b1 (k t4 + 4, n g)
                    const int n = wn0 + j * 8 + g;
                    const uint32_t b0 = to_tf32(bs[swz(n, kk + t4)]);
                    const uint32_t b1 = to_tf32(bs[swz(n, kk + t4 + 4)]);
#pragma unroll
                    for (int i = 0; i < L::MT; i++) mma(acc[w][i][j], af[i], b0, b1);
                }
            }
        }
    }
    cp_async_wait<0>();

    // C (16 x 8): c0, c1 at (g, 2 t4 + {0, 1}), c2, c3 at (g + 8, ...).
    float *c = static_cast<float *>(p.c);
#pragma unroll
    for (int i = 0; i < L::MT; i++)
#pragma unroll
        for (int j = 0; j < L::NT; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = m0 + wm0 + i * 16 + g + h * 8;
                const int col = n0 + wn0 + j * 8 + t4 * 2;
                if (row >= p.M || col >= p.N) continue;
                float v[2];
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int cc = col + e < p.N ? col + e : col;
                    v[e] = epilogue_f32<ACT>(p, row, cc, acc[0][i][j][h * 2 + e],
                                             acc[L::NB - 1][i][j][h * 2 + e]);
                }
                float *dst = c + (long long)row * p.ldc + col;
                if (col + 1 < p.N && (reinterpret_cast<uintptr_t>(dst) & 7) == 0) {
                    *reinterpret_cast<float2 *>(dst) = make_float2(v[0], v[1]);
                } else {
                    dst[0] = v[0];
                    if (col + 1 < p.N) dst[1] = v[1];
                }
            }
}

} // namespace tf32
} // namespace kk_gemm
