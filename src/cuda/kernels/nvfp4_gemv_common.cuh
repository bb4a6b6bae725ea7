// nvfp4_gemv's shared pieces, for every variant (included only by
// nvfp4_gemv.cu; the design is in its header comment): the kernel arguments,
// the loads (plain reads on the host), scale offsets, the unit/row
// bookkeeping of a warp and finish(), the f16 result of a row.
#pragma once

#include <cuda_runtime.h>

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <stdint.h>
#include <string.h>

#include "core/quant_math.h"
#include "cuda/kernels/convert.cuh"

// File-local to nvfp4_gemv.cu, the one translation unit that includes this.
namespace {

#define HD __host__ __device__ __forceinline__
#ifdef __CUDA_ARCH__
#define UNROLL _Pragma("unroll")
#else
#define UNROLL
#endif

constexpr int kWarps = 8;       // warps per CTA
constexpr int kGroupRows = 128; // a 128-row group (the 128x4 atom) holds 128 / R units

// A warp owns R rows (a "unit"), R = 4 or 8 (KK_NVFP4_GEMV_ROWS); each lane
// keeps 8 loads of 16 bytes of a in flight either way.
template <int R> struct unit_shape {
    static constexpr int unroll = 8 / R; // chunks per row per step
    static constexpr int pairs = R / 4;  // rows of a unit in each 32-row band
};

struct gemv_args {
    const uint8_t *a, *b, *sa, *sb;
    const float *ga, *gb; // NULL without global scales
    uint16_t *c;          // f16 bits
    int64_t M, K, L;
    int64_t col_blocks; // blocked layout: atoms per row block
    int blocked;
    int split; // S: warps sharing a unit of rows, each a slice of K
};

// ---- loads (plain reads when emulated on the host) ----

HD uint4 load_stream(const uint8_t *p) {
    uint4 r;
#ifdef __CUDA_ARCH__
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
#else
    memcpy(&r, p, sizeof r);
#endif
    return r;
}

HD uint4 load_cached(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    return __ldg(reinterpret_cast<const uint4 *>(p));
#else
    uint4 r;
    memcpy(&r, p, sizeof r);
    return r;
#endif
}

HD uint32_t load_u16(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    return __ldg(reinterpret_cast<const unsigned short *>(p));
#else
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
#endif
}

// Offset of the scale pair (j, j+1), j = 2*chunk, from the start of a row's
// scales: plain rows are contiguous; a blocked row has 4 columns side by side
// in each 512-byte atom.
HD uint32_t scale_step(int blocked, uint32_t chunk) {
    return blocked ? (chunk >> 1) * 512u + (chunk & 1u) * 2u : 2u * chunk;
}

// Where the scales of row m of batch l of a matrix of `rows` rows start.
HD int64_t scale_row(const gemv_args &g, int64_t rows, int64_t l, int64_t m) {
    if (g.blocked) return kk__nvfp4_blocked_index((rows + 127) / 128, g.col_blocks, l, m, 0);
    return (l * rows + m) * (g.K / 16);
}

// The decoders: variants 0 and 1 in nvfp4_gemv_half.cuh, 2 (also 4's) in
// nvfp4_gemv_int.cuh; finish() reads their inv_scale.
template <int V> struct decoder;

HD float2 scale_pair(uint32_t two_e4m3) {
    const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)two_e4m3, __NV_E4M3);
    return __half22float2(__half2(r)); // e4m3 values (NaN included) are exact in f16
}

// ---- one warp's work ----

// Row i of a unit is row m0 + row_of(i): kPairs neighbours in each of the 4
// 32-row bands of a 128-row group. In the blocked layout those rows' scales
// of a column lie in one 32-byte sector (bytes (m%32)*16 + band*4), so the
// unit's scale loads share sectors. Rows past M are not read and not written.
template <int R> HD int64_t row_of(int i) {
    return i % unit_shape<R>::pairs + 32 * (i / unit_shape<R>::pairs);
}

template <int R> struct unit_rows {
    int64_t l, m0;
    bool valid[R];
};

// Unit uu of batch l.
template <int R> HD unit_rows<R> unit_at(const gemv_args &g, int64_t l, int64_t uu) {
    constexpr int64_t per_group = kGroupRows / R;
    unit_rows<R> q;
    q.l = l;
    q.m0 = uu / per_group * kGroupRows + uu % per_group * unit_shape<R>::pairs;
    for (int i = 0; i < R; i++) q.valid[i] = q.m0 + row_of<R>(i) < g.M;
    return q;
}

template <int R> HD unit_rows<R> locate(const gemv_args &g, int64_t unit) {
    const int64_t units_per_batch = (g.M + kGroupRows - 1) / kGroupRows * (kGroupRows / R);
    return unit_at<R>(g, unit / units_per_batch, unit % units_per_batch);
}

// The row's f16: undo the decoder's power of two (exact), global scales, round.
template <int V> HD uint16_t finish(const gemv_args &g, float sum, float gscale) {
    const float v = sum * decoder<V>::inv_scale * gscale;
#ifdef __CUDA_ARCH__
    return kk_convert::f32bits_to_f16(__float_as_uint(v));
#else
    return kk_f32_to_f16(v);
#endif
}

// The tail every kernel shares. reduce_rows: the warp's row sums across its
// lanes (butterfly), then, with K split over g.split warps, the slices added
// through shared memory `part` in slice order (one __syncthreads, reached by
// every thread); false for the warps of slices 1.. (slice 0 stores).
template <int R>
__device__ __forceinline__ bool reduce_rows(const gemv_args &g, float (&acc)[R], float (*part)[R],
                                            uint32_t warp, uint32_t s, uint32_t lane) {
    UNROLL
    for (int i = 0; i < R; i++) UNROLL
    for (int off = 16; off > 0; off >>= 1) acc[i] += __shfl_xor_sync(0xFFFFFFFFu, acc[i], off);
    if (g.split > 1) {
        if (lane == 0) UNROLL
        for (int i = 0; i < R; i++) part[warp][i] = acc[i];
        __syncthreads();
        if (s != 0) return false;
        UNROLL
        for (int i = 0; i < R; i++) {
            float sum = 0.0f;
            for (int w = 0; w < g.split; w++) sum += part[warp + w][i];
            acc[i] = sum;
        }
    }
    return true;
}

// Lane i stores row i of the unit (rows past M are not stored).
template <int V, int R>
__device__ __forceinline__ void store_rows(const gemv_args &g, const unit_rows<R> &q,
                                           const float (&acc)[R], uint32_t lane) {
    const float gscale = g.ga ? __ldg(g.ga) * __ldg(g.gb) : 1.0f;
    UNROLL
    for (int i = 0; i < R; i++)
        if (lane == (uint32_t)i && q.valid[i])
            g.c[q.l * g.M + q.m0 + row_of<R>(i)] = finish<V>(g, acc[i], gscale);
}

} // namespace
