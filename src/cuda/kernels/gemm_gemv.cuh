// The decode GEMM (M <= 8): a GEMV that streams each weight row once at the
// speed of memory. A warp owns two rows of W (SwiGLU: two of each weight); its
// lanes take 16-byte pieces of K, x sits in shared memory a chunk of K at a
// time, the f32 dot products of every row of x are reduced by shuffles, and
// lane j applies the epilogue to output j. docs/kernels/gemm.md.
#pragma once

#include "cuda/kernels/gemm_sm80.cuh"

namespace kk_gemm {

constexpr int kGemvWarps = 8, kGemvRows = 2; // W rows per warp (per weight)
constexpr int kGemvSmemBytes = 32 << 10;     // x's chunk: 16384 / MMAX columns

template <typename T> __device__ __forceinline__ void widen8(const uint4 &v, float (&f)[8]) {
    const T *h = reinterpret_cast<const T *>(&v);
#pragma unroll
    for (int i = 0; i < 8; i++) f[i] = to_f32(h[i]);
}

template <typename T, int ACT, int MMAX>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(const Args p) {
    constexpr bool GLU = ACT == ACT_SWIGLU;
    constexpr int NB = GLU ? 2 : 1, KC = kGemvSmemBytes / (2 * MMAX);
    __shared__ __align__(16) T xs[MMAX * KC];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n0 = (blockIdx.x * kGemvWarps + warp) * kGemvRows;
    const T *w[NB][kGemvRows];
#pragma unroll
    for (int b = 0; b < NB; b++)
#pragma unroll
        for (int r = 0; r < kGemvRows; r++) {
            const int n = n0 + r < p.N ? n0 + r : p.N - 1; // rows past N read row N - 1, unused
            w[b][r] = static_cast<const T *>(b ? p.b1 : p.b0) + (long long)n * p.ldb;
        }
    float acc[NB][kGemvRows][MMAX];
#pragma unroll
    for (int b = 0; b < NB; b++)
#pragma unroll
        for (int r = 0; r < kGemvRows; r++)
#pragma unroll
            for (int m = 0; m < MMAX; m++) acc[b][r][m] = 0.0f;

    const T *a = static_cast<const T *>(p.a);
    for (int k0 = 0; k0 < p.K; k0 += KC) {
        const int kc = p.K - k0 < KC ? p.K - k0 : KC; // a multiple of 8
        __syncthreads();                              // the last chunk's readers are done
        for (int i = threadIdx.x; i < MMAX * (kc / 8); i += kGemvWarps * 32) {
            const int m = i / (kc / 8), c = i % (kc / 8);
            uint4 v = make_uint4(0, 0, 0, 0);
            if (m < p.M)
                v = *reinterpret_cast<const uint4 *>(a + (long long)m * p.lda + k0 + c * 8);
            *reinterpret_cast<uint4 *>(xs + m * KC + c * 8) = v;
        }
        __syncthreads();
#pragma unroll 2
        for (int k = lane * 8; k < kc; k += 256) {
            uint4 wv[NB][kGemvRows];
#pragma unroll
            for (int b = 0; b < NB; b++)
#pragma unroll
                for (int r = 0; r < kGemvRows; r++)
                    wv[b][r] = __ldg(reinterpret_cast<const uint4 *>(w[b][r] + k0 + k));
#pragma unroll
            for (int m = 0; m < MMAX; m++) {
                float xf[8];
                widen8<T>(*reinterpret_cast<const uint4 *>(xs + m * KC + k), xf);
#pragma unroll
                for (int b = 0; b < NB; b++)
#pragma unroll
                    for (int r = 0; r < kGemvRows; r++) {
                        float wf[8];
                        widen8<T>(wv[b][r], wf);
#pragma unroll
                        for (int e = 0; e < 8; e++) acc[b][r][m] = fmaf(xf[e], wf[e], acc[b][r][m]);
                    }
            }
        }
    }

    // Every lane ends with every sum; lane j = (m * kGemvRows + r) applies the
    // epilogue to output (m, n0 + r).
#pragma unroll
    for (int b = 0; b < NB; b++)
#pragma unroll
        for (int r = 0; r < kGemvRows; r++)
#pragma unroll
            for (int m = 0; m < MMAX; m++)
#pragma unroll
                for (int o = 16; o > 0; o >>= 1)
                    acc[b][r][m] += __shfl_xor_sync(0xffffffffu, acc[b][r][m], o);
    const T *bias0 = static_cast<const T *>(p.bias0), *bias1 = static_cast<const T *>(p.bias1);
    const T *res = static_cast<const T *>(p.res);
    T *c = static_cast<T *>(p.c);
#pragma unroll
    for (int r = 0; r < kGemvRows; r++)
#pragma unroll
        for (int m = 0; m < MMAX; m++) {
            const int n = n0 + r;
            if (lane != m * kGemvRows + r || m >= p.M || n >= p.N) continue;
            float x = acc[0][r][m];
            if (bias0) x += to_f32(bias0[n]);
            if (GLU) {
                float u = acc[NB - 1][r][m];
                if (bias1) u += to_f32(bias1[n]);
                x = activate(ACT_SILU, x) * u;
            } else {
                x = activate(ACT, x);
            }
            if (res) x += to_f32(res[(long long)m * p.ldr + n]);
            c[(long long)m * p.ldc + n] = from_f32<T>(x);
        }
}

} // namespace kk_gemm
