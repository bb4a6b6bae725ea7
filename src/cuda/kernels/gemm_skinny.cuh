// The skinny GEMM (8 < M <= 64: decode batches): streams each weight row once
// at the speed of memory on mma.sync tensor cores. A block owns 32 rows of W
// (SwiGLU: 16 of each weight) for the whole K; its 8 warps split K in chunks
// of 32 (warp w takes chunks w, w + 8, ...), each lane loading 16 bytes of a W
// row and of x rows per chunk straight into registers (no shared memory on
// the way in). The warps' partial tiles meet in shared memory, are summed in
// warp order (deterministic) and the epilogue is applied there.
// docs/kernels/gemm.md, "The skinny kernel".
#pragma once

#include "cuda/kernels/gemm_sm80.cuh"

namespace kk_gemm {

constexpr int kSkinnyWarps = 8;

template <bool GLU> struct Skinny {
    static constexpr int NB = GLU ? 2 : 1; // weights
    static constexpr int NT = GLU ? 2 : 4; // n8 tiles per weight
    static constexpr int ROWS = NT * 8;    // output columns per block
    static constexpr int TW = NB * ROWS;   // the partial tile's columns
    static constexpr int LD = TW + 8;      // its row stride (floats): fewer bank conflicts
    static constexpr size_t smem(int mt) { return (size_t)kSkinnyWarps * mt * 16 * LD * 4; }
};

// Chunk k0 of 32: lane (g, q) holds elements k0 + 8q .. k0 + 8q + 7 of a row.
// mma step s in {0, 1} takes the lane's words 2s and 2s + 1 as its k pairs
// (2q, 2q + 1) and (2q + 8, 2q + 9): a permutation of k within the chunk,
// the same for x and W, so the dot products are unchanged and every load is
// one 16-byte vector.
// Plain: two blocks an SM (at most 128 registers), each warp loading U chunks
// then multiplying them. PIPE: one block an SM, the loads of the next group of
// chunks issued before this group's products (two register buffers).
template <typename T, int ACT, int MT, bool PIPE>
__global__ void __launch_bounds__(kSkinnyWarps * 32, PIPE ? 1 : 2) skinny_kernel(const Args p) {
    constexpr bool GLU = ACT == ACT_SWIGLU;
    using S = Skinny<GLU>;
    // chunks a warp loads at once: more bytes in flight where registers allow
    constexpr int NB = S::NB, NT = S::NT,
                  U = PIPE ? (MT >= 4 ? 1 : 2)
                           : (MT >= 4   ? 2
                              : MT == 2 ? 3
                                        : 4);
    extern __shared__ float part[]; // [warp][MT * 16][LD]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int n0 = blockIdx.x * S::ROWS;

    const T *w[NB][NT];
#pragma unroll
    for (int b = 0; b < NB; b++)
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const int n = min(n0 + t * 8 + g, p.N - 1); // rows past N read row N - 1, unused
            w[b][t] = static_cast<const T *>(b ? p.b1 : p.b0) + (long long)n * p.ldb + 8 * q;
        }
    const T *x[MT][2];
    bool x_in[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int m = mt * 16 + g + 8 * h;
            x_in[mt][h] = m < p.M;
            x[mt][h] =
                static_cast<const T *>(p.a) + (long long)(x_in[mt][h] ? m : 0) * p.lda + 8 * q;
        }

    float acc[NB][MT][NT][4];
#pragma unroll
    for (int b = 0; b < NB; b++)
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int t = 0; t < NT; t++)
#pragma unroll
                for (int i = 0; i < 4; i++) acc[b][mt][t][i] = 0.0f;

    const uint4 zero = make_uint4(0, 0, 0, 0);
    // Loads of U chunks from c0, so they are in flight together.
    auto load = [&](int c0, uint4(&wv)[U][NB][NT], uint4(&xv)[U][MT][2]) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int k = (c0 + u * kSkinnyWarps) * 32 + 8 * q; // K % 8 == 0: all or nothing
            const bool in = k < p.K;
#pragma unroll
            for (int b = 0; b < NB; b++)
#pragma unroll
                for (int t = 0; t < NT; t++)
                    wv[u][b][t] =
                        in ? __ldcs(reinterpret_cast<const uint4 *>(w[b][t] + k - 8 * q)) : zero;
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    xv[u][mt][h] =
                        in && x_in[mt][h]
                            ? __ldg(reinterpret_cast<const uint4 *>(x[mt][h] + k - 8 * q))
                            : zero;
        }
    };
    auto compute = [&](const uint4(&wv)[U][NB][NT], const uint4(&xv)[U][MT][2]) {
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int s = 0; s < 2; s++)
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const uint32_t *lo = reinterpret_cast<const uint32_t *>(&xv[u][mt][0]);
                    const uint32_t *hi = reinterpret_cast<const uint32_t *>(&xv[u][mt][1]);
                    const uint32_t af[4] = {lo[2 * s], hi[2 * s], lo[2 * s + 1], hi[2 * s + 1]};
#pragma unroll
                    for (int b = 0; b < NB; b++)
#pragma unroll
                        for (int t = 0; t < NT; t++) {
                            const uint32_t *bw = reinterpret_cast<const uint32_t *>(&wv[u][b][t]);
                            mma<T>(acc[b][mt][t], af, bw[2 * s], bw[2 * s + 1]);
                        }
                }
    };
    constexpr int step = U * kSkinnyWarps;
    if constexpr (PIPE) {
        // two register buffers: the next group's loads fly while this one computes
        uint4 wa[U][NB][NT], xa[U][MT][2], wb[U][NB][NT], xb[U][MT][2];
        int c0 = warp;
        if (c0 * 32 < p.K) load(c0, wa, xa);
        while (c0 * 32 < p.K) {
            const int c1 = c0 + step;
            if (c1 * 32 < p.K) load(c1, wb, xb);
            compute(wa, xa);
            if (c1 * 32 >= p.K) break;
            c0 = c1 + step;
            if (c0 * 32 < p.K) load(c0, wa, xa);
            compute(wb, xb);
        }
    } else {
        for (int c0 = warp; c0 * 32 < p.K; c0 += step) {
            uint4 wv[U][NB][NT], xv[U][MT][2];
            load(c0, wv, xv);
            compute(wv, xv);
        }
    }

    // acc[b][mt][t]: rows mt*16 + g (+8), columns b*ROWS + t*8 + 2q (+1).
    float *mine = part + warp * MT * 16 * S::LD;
#pragma unroll
    for (int b = 0; b < NB; b++)
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int t = 0; t < NT; t++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    *reinterpret_cast<float2 *>(mine + (mt * 16 + g + 8 * h) * S::LD + b * S::ROWS +
                                                t * 8 + 2 * q) =
                        make_float2(acc[b][mt][t][2 * h], acc[b][mt][t][2 * h + 1]);
    __syncthreads();

    const T *bias0 = static_cast<const T *>(p.bias0), *bias1 = static_cast<const T *>(p.bias1);
    const T *res = static_cast<const T *>(p.res);
    T *c = static_cast<T *>(p.c);
    const int rows = min(p.M, MT * 16);
    for (int i = threadIdx.x; i < rows * S::ROWS; i += kSkinnyWarps * 32) {
        const int m = i / S::ROWS, j = i % S::ROWS, n = n0 + j;
        if (n >= p.N) continue;
        float v = 0.0f, u = 0.0f;
        for (int wi = 0; wi < kSkinnyWarps; wi++) { // warp order: the same bits every run
            const float *r = part + (wi * MT * 16 + m) * S::LD;
            v += r[j];
            if (GLU) u += r[S::ROWS + j];
        }
        if (bias0) v += to_f32(bias0[n]);
        if (GLU) {
            if (bias1) u += to_f32(bias1[n]);
            v = activate(ACT_SILU, v) * u;
        } else {
            v = activate(ACT, v);
        }
        if (res) v += to_f32(res[(long long)m * p.ldr + n]);
        c[(long long)m * p.ldc + n] = from_f32<T>(v);
    }
}

} // namespace kk_gemm
