// nvfp4_gemv variants 0 "bits" and 1 "cvt" (included only by nvfp4_gemv.cu):
// e2m1 decoded to half2 in registers, a block's 16 products summed exactly
// in half2 (chunk_dots, lane_sums); the kernel nvfp4_gemv_kernel<V, R>.
#pragma once

#include "cuda/kernels/nvfp4_gemv_common.cuh"

namespace {

// CTAs per SM (launch bounds). Hopper: R = 4 fits 80 registers (3 CTAs, 24
// warps); R = 8 needs 128 (2 CTAs, 16 warps). sm_80 has no hardware e4m3
// conversion and needs more registers: 2 CTAs for R = 4, 1 for R = 8.
template <int R> constexpr int min_blocks() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
    return R == 4 ? 2 : 1;
#else
    return R == 4 ? 3 : 2;
#endif
}

// ---- decoding: one 32-bit word = 8 e2m1 elements -> 4 half2 ----

template <> struct decoder<0> {
    // pair k = (element k, element k + 4), times 2^-14
    static HD void run(uint32_t x, uint32_t h[4]) {
        h[0] = ((x << 9) & 0x0E000E00u) | ((x << 12) & 0x80008000u);
        h[1] = ((x << 5) & 0x0E000E00u) | ((x << 8) & 0x80008000u);
        h[2] = ((x << 1) & 0x0E000E00u) | ((x << 4) & 0x80008000u);
        h[3] = ((x >> 3) & 0x0E000E00u) | (x & 0x80008000u);
    }
    static constexpr float inv_scale = 16384.0f; // 2^14: a's decoded values are a * 2^-14
    static constexpr bool b_true = true;         // b is multiplied back to its value
};

template <> struct decoder<1> {
    // nibble s.eem -> e4m3 byte s.0eem.00 (value times 2^-6), then pairs to half2
    static HD uint32_t pair(uint32_t bytes2) {
        const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)bytes2, __NV_E4M3);
        return (uint32_t)r.x | (uint32_t)r.y << 16;
    }
    static HD void run(uint32_t x, uint32_t h[4]) {
        const uint32_t even = ((x << 2) & 0x1C1C1C1Cu) | ((x << 4) & 0x80808080u);
        const uint32_t odd = ((x >> 2) & 0x1C1C1C1Cu) | (x & 0x80808080u);
        h[0] = pair(even & 0xFFFFu);
        h[1] = pair(even >> 16);
        h[2] = pair(odd & 0xFFFFu);
        h[3] = pair(odd >> 16);
    }
    static constexpr float inv_scale = 4096.0f; // a and b both times 2^-6
    static constexpr bool b_true = false;
};

// The bits of a half2. On the device a reinterpretation (a register, no code;
// going through __half2_raw's two shorts costs a PRMT each).
HD __half2 as_h2(uint32_t u) {
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const __half2 *>(&u);
#else
    __half2_raw r;
    r.x = (unsigned short)(u & 0xFFFFu);
    r.y = (unsigned short)(u >> 16);
    return __half2(r);
#endif
}

// a*b + c. Every product and sum here is exact, so the host's mul-then-add
// gives the device's fma bits.
HD __half2 hfma2(__half2 a, __half2 b, __half2 c) {
#ifdef __CUDA_ARCH__
    return __hfma2(a, b, c);
#else
    return __hadd2(__hmul2(a, b), c);
#endif
}

// b's 32 elements of one chunk, decoded: 4 words x 4 half2.
template <int V> HD void decode_b(uint4 v, __half2 bd[16]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    UNROLL
    for (int i = 0; i < 4; i++) {
        uint32_t h[4];
        decoder<V>::run(w[i], h);
        UNROLL
        for (int k = 0; k < 4; k++) {
            bd[4 * i + k] = as_h2(h[k]);
            if (decoder<V>::b_true)
                bd[4 * i + k] = __hmul2(bd[4 * i + k], __float2half2_rn(16384.0f));
        }
    }
}

// Two blocks' exact dot products (times the decoder's scale) of one chunk of a.
template <int V> HD float2 chunk_dots(uint4 v, const __half2 bd[16]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    float dots[2];
    UNROLL
    for (int blk = 0; blk < 2; blk++) {
        __half2 acc = __float2half2_rn(0.0f);
        UNROLL
        for (int i = 0; i < 2; i++) {
            uint32_t h[4];
            decoder<V>::run(w[2 * blk + i], h);
            UNROLL
            for (int k = 0; k < 4; k++) acc = hfma2(as_h2(h[k]), bd[4 * (2 * blk + i) + k], acc);
        }
        dots[blk] = __low2float(acc) + __high2float(acc); // exact
    }
    return make_float2(dots[0], dots[1]);
}

// One lane's sums over its chunks (slice s of K) for the unit's rows.
template <int V, int R>
HD void lane_sums(const gemv_args &g, const unit_rows<R> &q, uint32_t s, uint32_t lane,
                  float acc[R]) {
    constexpr int kRows = R, kUnroll = unit_shape<R>::unroll, kPairs = unit_shape<R>::pairs;
    const int64_t row_bytes = g.K / 2;
    const uint32_t chunks = (uint32_t)(g.K / 32); // K <= 2^24
    // One base each for a and its scales; row i's offsets are constants times
    // two strides (blocked: a row 1 apart is 16 bytes on, a band 4 bytes on).
    const uint8_t *a0 = g.a + (q.l * g.M + q.m0) * row_bytes;
    const uint8_t *sa0 = g.sa + scale_row(g, g.M, q.l, q.m0);
    const int64_t sa_row = g.blocked ? 16 : g.K / 16, sa_band = g.blocked ? 4 : 32 * (g.K / 16);
    UNROLL
    for (int i = 0; i < kRows; i++) acc[i] = 0.0f;
    const uint8_t *brow = g.b + q.l * row_bytes, *sbrow = g.sb + scale_row(g, 1, q.l, 0);
    const uint32_t stride = 32u * (uint32_t)g.split;
    for (uint32_t c0 = s * 32u + lane; c0 < chunks; c0 += stride * kUnroll) {
        uint4 av[kUnroll][kRows], bv[kUnroll];
        uint32_t sav[kUnroll][kRows], sbv[kUnroll];
        // every load of this step first, then the arithmetic
        UNROLL
        for (int u = 0; u < kUnroll; u++) {
            const uint32_t chunk = c0 + u * stride;
            const bool in = chunk < chunks;
            const uint32_t so = scale_step(g.blocked, chunk);
            bv[u] = in ? load_cached(brow + 16 * (size_t)chunk) : make_uint4(0, 0, 0, 0);
            sbv[u] = in ? load_u16(sbrow + so) : 0u;
            UNROLL
            for (int i = 0; i < kRows; i++) {
                const bool live = in && q.valid[i];
                av[u][i] = live ? load_stream(a0 + row_of<R>(i) * row_bytes + 16 * (size_t)chunk)
                                : make_uint4(0, 0, 0, 0);
                const uint8_t *sa_i = sa0 + (i % kPairs) * sa_row + (i / kPairs) * sa_band;
                sav[u][i] = live ? load_u16(sa_i + so) : 0u;
            }
        }
        UNROLL
        for (int u = 0; u < kUnroll; u++) {
            __half2 bd[16];
            decode_b<V>(bv[u], bd);
            const float2 sbf = scale_pair(sbv[u]);
            UNROLL
            for (int i = 0; i < kRows; i++) {
                const float2 d = chunk_dots<V>(av[u][i], bd);
                const float2 saf = scale_pair(sav[u][i]);
                acc[i] = fmaf(d.x, saf.x * sbf.x, acc[i]); // exact product, one rounding
                acc[i] = fmaf(d.y, saf.y * sbf.y, acc[i]);
            }
        }
    }
}

template <int V, int R>
__global__ void __launch_bounds__(kWarps * 32, min_blocks<R>()) nvfp4_gemv_kernel(gemv_args g) {
    constexpr int kRows = R;
    __shared__ float partial[kWarps][kRows];
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t s = warp % g.split; // this warp's slice of K
    const unit_rows<R> q = locate<R>(g, (int64_t)blockIdx.x * (kWarps / g.split) + warp / g.split);
    float acc[kRows];
    lane_sums<V, R>(g, q, s, lane, acc);
    if (reduce_rows<R>(g, acc, partial, warp, s, lane)) store_rows<V, R>(g, q, acc, lane);
}

} // namespace
