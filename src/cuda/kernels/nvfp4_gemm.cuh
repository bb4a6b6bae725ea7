// nvfp4_gemm's kernel (included only by nvfp4_gemm.cu): y = x . (w*sw*gw)^T for
// M <= 64 on mma.sync m16n8k16 bf16 tensor cores, weights streamed once.
// A block owns 32 rows of w for all of K; its 8 warps split K in units of 64
// (warp v takes units v, v + 8, ...). In a unit, lane (g, q) holds 16
// consecutive k (16q .. 16q + 15) of each of its rows: 8 bytes of w, one
// e4m3 scale, two 16-byte vectors of each x row, straight into registers.
// The weights are dequantized in registers to bf16 w*sw*2^-8 (exact: at most
// 6 significant bits, never subnormal); gw * 2^8 is applied in the epilogue.
// The partial tiles of the 8 warps are summed in shared memory in warp order
// (the same bits every run). docs/kernels/nvfp4_gemv.md, "nvfp4_gemm".
// The fragment helpers are __host__ __device__ so that a host emulation can
// check the k permutation without a GPU.
#pragma once

#include <cuda_runtime.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

namespace kk_nvg {

#define KK_NVG_HD __host__ __device__ __forceinline__

constexpr int kWarps = 8;            // warps per block, splitting K
constexpr int kNT = 4;               // n8 tiles per block
constexpr int kRows = 8 * kNT;       // rows of w (columns of y) per block
constexpr int kLD = kRows + 8;       // row stride (floats) of a partial tile: fewer bank conflicts
constexpr int kUnitK = 64;           // k per unit: 4 lanes x 16
constexpr float kPostScale = 256.0f; // undoes the 2^-8 folded into the dequantized weights

struct Args {
    const uint16_t *x; // [M, K] bf16
    const uint8_t *w;  // [N, K / 2] e2m1 pairs, element 2i in the low nibble of byte i
    const uint8_t *sw; // [N, K / 16] e4m3
    const float *gw;   // [1] or NULL
    uint16_t *y;       // [M, N] bf16
    int M, N, K;
};

// Partial tiles: kWarps x (MT * 16 rows) x kLD floats.
constexpr size_t smem_bytes(int mt) { return (size_t)kWarps * mt * 16 * kLD * sizeof(float); }

// prmt.b32 (CUDA's __byte_perm): byte i of the result is byte sel[4i+2:4i] of {b, a}.
KK_NVG_HD uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t sel) {
#ifdef __CUDA_ARCH__
    return __byte_perm(a, b, sel);
#else
    const uint64_t src = (uint64_t)b << 32 | a;
    uint32_t d = 0;
    for (int i = 0; i < 4; i++)
        d |= (uint32_t)(src >> (8 * ((sel >> (4 * i)) & 7u)) & 0xFFu) << (8 * i);
    return d;
#endif
}

// Elements k and k + 4 (nibbles k, k + 4 of word v, k in 0..3) as bf16x2 of
// value e2m1 * 2^-126: the 3 bits eem land on the exponent's two low bits and
// the mantissa's top bit, the sign on bit 15 (31). Code 1 (0.5) is a bf16
// subnormal, which the bf16 fma below takes as it is (no flush for bf16).
KK_NVG_HD uint32_t e2m1_pair(uint32_t v, int k) {
    const uint32_t mag = k <= 1 ? v << (6 - 4 * k) : v >> (4 * k - 6);
    return (mag & 0x01C001C0u) | ((v << (12 - 4 * k)) & 0x80008000u);
}

// One e4m3 scale byte as bf16x2 (s, s) of value scale * 2^118, exact (4
// significant bits; 448 * 2^118 < 2^127); NaN codes stay NaN.
KK_NVG_HD uint32_t scale_pair(uint32_t byte) {
#ifdef __CUDA_ARCH__
    const __half h(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)byte, __NV_E4M3));
    const float f = __half2float(h) * 0x1p118f;
    const __nv_bfloat162 r = __floats2bfloat162_rn(f, f);
    return *reinterpret_cast<const uint32_t *>(&r);
#else
    // host: e4m3 decoded by hand (only the emulation uses this)
    const uint32_t e = (byte >> 3) & 15u, m = byte & 7u;
    float f = e ? ldexpf(1.0f + (float)m / 8.0f, (int)e - 7) : ldexpf((float)m, -9);
    if ((byte & 0x7Fu) == 0x7Fu) f = __builtin_nanf("");
    if (byte & 0x80u) f = -f;
    f = ldexpf(f, 118);
    uint32_t bits;
    memcpy(&bits, &f, 4);
    const uint32_t b16 = bits >> 16; // exact: at most 4 significant bits
    return b16 | b16 << 16;
#endif
}

// a * b + (-0) in bf16x2: the dequantized weight pair (exact; -0 keeps +0 * s = +0).
KK_NVG_HD uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
    return d;
#else
    uint32_t d = 0;
    for (int h = 0; h < 2; h++) {
        const uint32_t ab = (a >> (16 * h) & 0xFFFFu) << 16, bb = (b >> (16 * h) & 0xFFFFu) << 16;
        float fa, fb;
        memcpy(&fa, &ab, 4);
        memcpy(&fb, &bb, 4);
        const float p = fa * fb; // exact (see the header comment)
        uint32_t pb;
        memcpy(&pb, &p, 4);
        d |= (pb >> 16) << (16 * h);
    }
    return d;
#endif
}

// The k permutation of a unit. A lane's 16 k (local e = 0..15) are 4 mma
// steps; step s = 2i + t takes the k slots (2q, 2q+1) from local elements
// (8i + 2t, 8i + 2t + 4) and the slots (2q+8, 2q+9) from (8i + 2t + 1,
// 8i + 2t + 5). The same for x and w, so the dot products are unchanged.

// w: the B fragment {b0, b1} of step s from the lane's 8 bytes (words w0, w1)
// and its scale pair.
KK_NVG_HD void w_frag(uint32_t w0, uint32_t w1, uint32_t scale2, int s, uint32_t &b0,
                      uint32_t &b1) {
    const uint32_t v = s < 2 ? w0 : w1;
    const int t = s & 1;
    b0 = bf16x2_mul(e2m1_pair(v, 2 * t), scale2);
    b1 = bf16x2_mul(e2m1_pair(v, 2 * t + 1), scale2);
}

// x: one row's A halves of step s from its 16 bf16 (lo: elements 0..7, hi:
// 8..15): lo16 pairs (slots 2q, 2q+1) and hi16 pairs (slots 2q+8, 2q+9).
KK_NVG_HD void x_frag(uint4 lo, uint4 hi, int s, uint32_t &a_lo, uint32_t &a_hi) {
    const uint4 v = s < 2 ? lo : hi;
    const uint32_t p = (s & 1) ? v.y : v.x, r = (s & 1) ? v.w : v.z; // words 4i+t, 4i+t+2
    a_lo = byte_perm(p, r, 0x5410u); // low halves: elements 8i+2t, 8i+2t+4
    a_hi = byte_perm(p, r, 0x7632u); // high halves: elements 8i+2t+1, 8i+2t+5
}

#ifdef __CUDACC__

__device__ __forceinline__ uint2 load_w(const uint8_t *p) { // streamed once: no L1 allocation
    uint2 r;
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    return r;
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// MT m16 tiles of x (M <= 16 MT); U units loaded at once per warp.
template <int MT, int U>
__global__ void __launch_bounds__(kWarps * 32, 1) nvfp4_gemm_kernel(const Args p) {
    extern __shared__ float part[]; // [warp][MT * 16][kLD]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int n0 = blockIdx.x * kRows;
    const int units = p.K / kUnitK;

    const uint8_t *w[kNT], *sw[kNT];
#pragma unroll
    for (int t = 0; t < kNT; t++) {
        const long long n = min(n0 + t * 8 + g, p.N - 1); // rows past N read row N - 1, unused
        w[t] = p.w + n * (p.K / 2) + 8 * q;
        sw[t] = p.sw + n * (p.K / 16) + q;
    }
    const uint16_t *x[MT][2];
    bool x_in[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int m = mt * 16 + g + 8 * h;
            x_in[mt][h] = m < p.M;
            x[mt][h] = p.x + (long long)(x_in[mt][h] ? m : 0) * p.K + 16 * q;
        }

    float acc[MT][kNT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int t = 0; t < kNT; t++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[mt][t][i] = 0.0f;

    const uint4 zero4 = make_uint4(0, 0, 0, 0);
    for (int c0 = warp; c0 < units; c0 += U * kWarps) {
        uint2 wv[U][kNT];
        uint32_t sv[U][kNT];
        uint4 xv[U][MT][2][2];
#pragma unroll
        for (int u = 0; u < U; u++) { // every load of the group first
            const int c = c0 + u * kWarps;
            const bool in = c < units; // the same for the whole warp
#pragma unroll
            for (int t = 0; t < kNT; t++) {
                wv[u][t] = in ? load_w(w[t] + 32 * c) : make_uint2(0, 0);
                sv[u][t] = in ? __ldg(sw[t] + 4 * c) : 0u;
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++)
#pragma unroll
                    for (int j = 0; j < 2; j++)
                        xv[u][mt][h][j] =
                            in && x_in[mt][h]
                                ? __ldg(reinterpret_cast<const uint4 *>(x[mt][h] + 64 * c + 8 * j))
                                : zero4;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            uint32_t s2[kNT];
#pragma unroll
            for (int t = 0; t < kNT; t++) s2[t] = scale_pair(sv[u][t]);
#pragma unroll
            for (int s = 0; s < 4; s++) {
                uint32_t a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    // a0, a2: row g (slots 2q.., 2q+8..); a1, a3: row g + 8
                    x_frag(xv[u][mt][0][0], xv[u][mt][0][1], s, a[mt][0], a[mt][2]);
                    x_frag(xv[u][mt][1][0], xv[u][mt][1][1], s, a[mt][1], a[mt][3]);
                }
#pragma unroll
                for (int t = 0; t < kNT; t++) {
                    uint32_t b0, b1;
                    w_frag(wv[u][t].x, wv[u][t].y, s2[t], s, b0, b1);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) mma_bf16(acc[mt][t], a[mt], b0, b1);
                }
            }
        }
    }

    // acc[mt][t]: rows mt*16 + g (+8), columns t*8 + 2q (+1). Rows past M are
    // neither stored nor read.
    float *mine = part + warp * MT * 16 * kLD;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            if (x_in[mt][h])
#pragma unroll
                for (int t = 0; t < kNT; t++)
                    *reinterpret_cast<float2 *>(mine + (mt * 16 + g + 8 * h) * kLD + t * 8 +
                                                2 * q) =
                        make_float2(acc[mt][t][2 * h], acc[mt][t][2 * h + 1]);
    __syncthreads();

    const float post = p.gw ? kPostScale * __ldg(p.gw) : kPostScale;
    const int rows = min(p.M, MT * 16);
    for (int i = threadIdx.x; i < rows * kRows; i += kWarps * 32) {
        const int m = i / kRows, j = i % kRows, n = n0 + j;
        if (n >= p.N) continue;
        float v = 0.0f;
        for (int wi = 0; wi < kWarps; wi++) v += part[(wi * MT * 16 + m) * kLD + j]; // warp order
        const __nv_bfloat16 b = __float2bfloat16_rn(v * post);
        p.y[(long long)m * p.N + n] = *reinterpret_cast<const uint16_t *>(&b);
    }
}

#endif // __CUDACC__

} // namespace kk_nvg
