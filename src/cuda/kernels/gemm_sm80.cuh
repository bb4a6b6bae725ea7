// The sm_80-class GEMM: c = epilogue(a . b^T) with mma.sync m16n8k16 (bf16/f16 in,
// f32 accumulation), cp.async stages and ldmatrix from swizzled shared memory;
// SwiGLU reads a second weight from the same a tiles. Any M, N, K: 16-byte
// loads when rows allow, element loads otherwise. docs/kernels/gemm.md.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace kk_gemm {

enum Act { ACT_NONE, ACT_RELU, ACT_GELU_ERF, ACT_GELU_TANH, ACT_SILU, ACT_SWIGLU };

struct Args {
    const void *a;             // [M,K], row stride lda
    const void *b0, *b1;       // [N,K], row stride ldb; b1: SwiGLU's up weight
    const void *bias0, *bias1; // [N] or null
    const void *res;           // [M,N], row stride ldr, or null
    void *c;                   // [M,N], row stride ldc
    long long lda, ldb, ldr, ldc;
    int M, N, K, act;
};

constexpr int kThreads = 256; // 8 warps: 2 along M, 4 along N
constexpr int kBK = 32;       // k per stage: a row of a tile is 64 bytes, 4 chunks of 16
constexpr int kStages = 4;

template <bool GLU> struct Tile {
    static constexpr int BM = 128, BN = GLU ? 64 : 128;
    static constexpr int WM = BM / 2, WN = BN / 4;  // a warp's share
    static constexpr int MT = WM / 16, NT = WN / 8; // mma tiles per warp
    static constexpr int NB = GLU ? 2 : 1;          // weights
    static constexpr int kStageElems = BM * kBK + NB * BN * kBK;
    static constexpr size_t kSmem = (size_t)kStages * kStageElems * 2;
};

template <typename T> __device__ __forceinline__ float to_f32(T v);
template <> __device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_f32(float v) {
    return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half from_f32(float v) { return __float2half_rn(v); }

// The activations in forms that keep their tails (as the CPU's): GELU with
// erfc (1 + erf(z) cancels for z << 0), the tanh GELU as x * sigmoid(2u).
// The sigmoids use the fast exponential and division (2 ulp, far inside bf16
// and f16 output rounding); measured: expf and '/' cost the epilogue half the
// kernel's time at K = 1024.
__device__ __forceinline__ float sigmoid_times(float x, float z) {
    return __fdividef(x, 1.0f + __expf(-z)); // 0 once e^-z overflows: x * sigmoid(z) -> 0
}

__device__ __forceinline__ float activate(int act, float x) {
    switch (act) {
    case ACT_RELU: return fmaxf(x, 0.0f);
    case ACT_GELU_ERF: return 0.5f * x * erfcf(-x * 0.70710678118654752f);
    case ACT_GELU_TANH: return sigmoid_times(x, 1.5957691216057308f * (x + 0.044715f * x * x * x));
    case ACT_SILU:
    case ACT_SWIGLU: return sigmoid_times(x, x);
    default: return x;
    }
}

// Element (row, chunk of 8) of a 32-wide tile row: the chunk index xor'ed with
// bits 1-2 of the row, so the 8 rows an ldmatrix reads hit 8 different banks.
__device__ __forceinline__ int swz(int row, int chunk) {
    return row * kBK + ((chunk ^ ((row >> 1) & 3)) << 3);
}

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1);
template <>
__device__ __forceinline__ void mma<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4],
                                                   uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// rows [r0, r0 + ROWS) x k [k0, k0 + 32) of a row-major [rows, K] matrix into a
// swizzled tile; out-of-range elements are zeros. ALIGNED: rows start on 16
// bytes (K and the row stride multiples of 8), so chunks are all in or all out.
template <typename T, int ROWS, bool ALIGNED>
__device__ __forceinline__ void load_tile(T *tile, const T *g, long long ld, int rows, int K,
                                          int r0, int k0) {
    constexpr int kChunks = ROWS * (kBK / 8);
#pragma unroll
    for (int i = threadIdx.x; i < kChunks; i += kThreads) {
        const int row = i >> 2, chunk = i & 3;
        const int gr = r0 + row, gk = k0 + chunk * 8;
        T *dst = tile + swz(row, chunk);
        if (ALIGNED) {
            const bool valid = gr < rows && gk < K;
            cp_async16(dst, valid ? g + (long long)gr * ld + gk : g, valid);
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++)
                dst[e] =
                    gr < rows && gk + e < K ? g[(long long)gr * ld + gk + e] : from_f32<T>(0.0f);
        }
    }
}

// ACT a compile-time constant: one activation's code per kernel keeps the
// fully unrolled epilogue small (measured: the epilogue of every activation
// inlined stalled the Hopper kernel on instruction fetch).
template <typename T, int ACT, bool ALIGNED>
__global__ void __launch_bounds__(kThreads) gemm_kernel(const Args p) {
    constexpr bool GLU = ACT == ACT_SWIGLU;
    using L = Tile<GLU>;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T *smem = reinterpret_cast<T *>(smem_raw);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wm0 = (warp >> 2) * L::WM, wn0 = (warp & 3) * L::WN;
    const int m0 = blockIdx.y * L::BM, n0 = blockIdx.x * L::BN;
    const T *a = static_cast<const T *>(p.a);
    const T *b[2] = {static_cast<const T *>(p.b0), static_cast<const T *>(p.b1)};
    const int KT = (p.K + kBK - 1) / kBK;

    auto load_stage = [&](int stage, int kt) {
        T *s = smem + stage * L::kStageElems;
        load_tile<T, L::BM, ALIGNED>(s, a, p.lda, p.M, p.K, m0, kt * kBK);
#pragma unroll
        for (int w = 0; w < L::NB; w++)
            load_tile<T, L::BN, ALIGNED>(s + L::BM * kBK + w * L::BN * kBK, b[w], p.ldb, p.N, p.K,
                                         n0, kt * kBK);
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
        const T *as = smem + (kt % kStages) * L::kStageElems;
#pragma unroll
        for (int kk = 0; kk < kBK / 16; kk++) {
            uint32_t af[L::MT][4];
#pragma unroll
            for (int i = 0; i < L::MT; i++) {
                const int row = wm0 + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
                ldmatrix_x4(af[i], as + swz(row, kk * 2 + (lane >> 4)));
            }
#pragma unroll
            for (int w = 0; w < L::NB; w++) {
                const T *bs = as + L::BM * kBK + w * L::BN * kBK;
#pragma unroll
                for (int j = 0; j < L::NT; j += 2) {
                    uint32_t bf[4];
                    const int row = wn0 + j * 8 + (lane >> 4) * 8 + (lane & 7);
                    ldmatrix_x4(bf, bs + swz(row, kk * 2 + ((lane >> 3) & 1)));
#pragma unroll
                    for (int i = 0; i < L::MT; i++) {
                        mma<T>(acc[w][i][j], af[i], bf[0], bf[1]);
                        mma<T>(acc[w][i][j + 1], af[i], bf[2], bf[3]);
                    }
                }
            }
        }
    }
    cp_async_wait<0>();

    // Epilogue in registers: bias, activation (SwiGLU: silu(g + bg) * (u + bu)),
    // residual, one rounding. Each thread holds pairs of adjacent columns.
    const T *bias0 = static_cast<const T *>(p.bias0), *bias1 = static_cast<const T *>(p.bias1);
    const T *res = static_cast<const T *>(p.res);
    T *c = static_cast<T *>(p.c);
#pragma unroll
    for (int i = 0; i < L::MT; i++)
#pragma unroll
        for (int j = 0; j < L::NT; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = m0 + wm0 + i * 16 + (lane >> 2) + h * 8;
                const int col = n0 + wn0 + j * 8 + (lane & 3) * 2;
                if (row >= p.M || col >= p.N) continue;
                float v[2];
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int cc = col + e < p.N ? col + e : col;
                    float x = acc[0][i][j][h * 2 + e];
                    if (bias0) x += to_f32(bias0[cc]);
                    if (GLU) {
                        float u = acc[L::NB - 1][i][j][h * 2 + e];
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
                    *reinterpret_cast<uint32_t *>(dst) = *reinterpret_cast<const uint32_t *>(pair);
                } else {
                    dst[0] = from_f32<T>(v[0]);
                    if (col + 1 < p.N) dst[1] = from_f32<T>(v[1]);
                }
            }
}

} // namespace kk_gemm
