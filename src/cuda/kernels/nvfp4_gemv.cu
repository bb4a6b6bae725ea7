// nvfp4_gemv on CUDA (sm_80 and newer; tuned for Hopper, sm_90a):
//   c[l,m] = f16( ga*gb * sum_j (sa[l,m,j]*sb[l,j]) * sum_{k in block j} a[l,m,k]*b[l,k] )
// Design and measurements: docs/kernels/nvfp4_gemv.md. The CPU twin is
// src/cpu/nvfp4_gemv_cpu.c; both give the same f32 terms and differ only in
// the order of the f32 sum over blocks.
//
// Memory-bound: a (K/2 bytes a row) is streamed once with 16-byte
// ld.global.nc.L1::no_allocate loads, coalesced across the lanes of a warp.
// A warp owns a unit of R rows (R = 8, or 4; every decoded piece of b serves
// all of them) and a slice of K; the S warps of a unit split K between them
// and add their sums through shared memory. Each 16-byte load is 32 elements
// = two scale blocks, whose two e4m3 scales are one 2-byte load (plain and
// blocked alike: the 128x4 atom keeps a row's 4 consecutive scales together).
//
// Decoding happens in registers, to f16, exactly: a block's 16 products a*b
// are summed in half2 (8 per lane, each a multiple of 2^-16 below 2^-5, so
// every partial sum is exact), then in f32 times the exact scale product.
// Four decoders (docs: "versions"):
//   variant 0 "bits": the e2m1 bits land in f16 bits [11:9] and 15, which is
//     the value times 2^-14 (f16's subnormals line up with e2m1's); b is
//     brought back to its true value by one multiply by 2^14.
//   variant 1 "cvt":  each nibble becomes an e4m3 byte (value times 2^-6) and
//     cvt.rn.f16x2.e4m3x2 (sm_89+; emulated on sm_80) turns pairs into half2.
//   variant 2 "int":  no f16 at all: prmt looks a's nibbles up as int8 (2x the
//     value), dp4a multiplies them by int8 b, decoded once per CTA into
//     shared memory; a block's dot is an exact integer (lane_sums2).
//   variant 4: variant 2 with persistent CTAs (resident CTAs x SMs, each
//     looping over variant 2's CTAs' work; b re-decoded only when the batch
//     changes). (Variant 3, 2 with two register buffers, spilled and was
//     removed: 3 now means 2.)
// KK_NVFP4_GEMV_VARIANT=0|1|2|4 and KK_NVFP4_GEMV_ROWS=4|8 pick one of the six
// instantiations at launch (default 2 and 8), KK_NVFP4_GEMV_SPLIT=1|2|4|8
// forces the split of K; for tuning on the GPU. All give the same bits for
// the same split.
//
// Everything a lane computes is __host__ __device__, so kk__nvfp4_gemv_emulate
// can run the kernel's exact arithmetic and indexing on the CPU, lane by lane,
// and give the GPU's bits (tests/test_nvfp4_gemv.c runs it without a GPU).
#include <cuda_runtime.h>

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <atomic>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant_math.h"
#include "cuda/kernels/convert.cuh"
#include "harness/harness_internal.h"
#include "harness/op_kernels.h"

extern "C" {
#include "core/error.h"
// src/cpu/nvfp4_gemv_cpu.c: the tensors are those the parameters describe.
kk_status kk__nvfp4_gemv_check(const kk_op_params *p, kk_tensor *const *t, kk_backend_kind kind);
}

namespace {

#define HD __host__ __device__ __forceinline__
#ifdef __CUDA_ARCH__
#define UNROLL _Pragma("unroll")
#else
#define UNROLL
#endif

constexpr int kWarps = 8;      // warps per CTA
constexpr int kGroupRows = 128; // a 128-row group (the 128x4 atom) holds 128 / R units

// A warp owns R rows (a "unit"), R = 4 or 8 (KK_NVFP4_GEMV_ROWS); each lane
// keeps 8 loads of 16 bytes of a in flight either way.
template <int R> struct unit_shape {
    static constexpr int unroll = 8 / R; // chunks per row per step
    static constexpr int pairs = R / 4;  // rows of a unit in each 32-row band
};
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

// ---- decoding: one 32-bit word = 8 e2m1 elements -> 4 half2 ----

template <int V> struct decoder;

template <> struct decoder<0> {
    // pair k = (element k, element k + 4), times 2^-14
    static HD void run(uint32_t x, uint32_t h[4]) {
        h[0] = ((x << 9) & 0x0E000E00u) | ((x << 12) & 0x80008000u);
        h[1] = ((x << 5) & 0x0E000E00u) | ((x << 8) & 0x80008000u);
        h[2] = ((x << 1) & 0x0E000E00u) | ((x << 4) & 0x80008000u);
        h[3] = ((x >> 3) & 0x0E000E00u) | (x & 0x80008000u);
    }
    static constexpr float inv_scale = 16384.0f; // 2^14: a's decoded values are a * 2^-14
    static constexpr bool b_true = true;          // b is multiplied back to its value
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

// variant 2 "int" (lane_sums2 below): no f16 decode; a's bytes are looked
// up as int8 (2x the e2m1 value) by prmt and multiplied by int8 b with dp4a,
// so a block's dot is an exact integer, 4x the true one.
template <> struct decoder<2> {
    static constexpr float inv_scale = 0.25f;
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

// The row's f16: undo the decoder's power of two (exact), global scales, round.
template <int V> HD uint16_t finish(const gemv_args &g, float sum, float gscale) {
    const float v = sum * decoder<V>::inv_scale * gscale;
#ifdef __CUDA_ARCH__
    return kk_convert::f32bits_to_f16(__float_as_uint(v));
#else
    return kk_f32_to_f16(v);
#endif
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
UNROLL
    for (int i = 0; i < kRows; i++)
UNROLL
        for (int off = 16; off > 0; off >>= 1) acc[i] += __shfl_xor_sync(0xFFFFFFFFu, acc[i], off);

    if (g.split > 1) { // add the slices of K through shared memory, in slice order
        if (lane == 0)
UNROLL
            for (int i = 0; i < kRows; i++) partial[warp][i] = acc[i];
        __syncthreads();
        if (s != 0) return;
UNROLL
        for (int i = 0; i < kRows; i++) {
            float sum = 0.0f;
            for (int w = 0; w < g.split; w++) sum += partial[warp + w][i];
            acc[i] = sum;
        }
    }
    const float gscale = g.ga ? __ldg(g.ga) * __ldg(g.gb) : 1.0f;
UNROLL
    for (int i = 0; i < kRows; i++)
        if (lane == (uint32_t)i && q.valid[i])
            g.c[q.l * g.M + q.m0 + row_of<R>(i)] = finish<V>(g, acc[i], gscale);
}

// ---- variant 2 "int": prmt lookup + dp4a, b decoded once per CTA in shared memory ----
//
// Same units, slices, lanes and chunk order as variants 0 and 1 (so the same
// f32 sums in the same order, and the same bits); only a block's exact dot is
// computed differently. Per 32-bit word x of a (8 elements):
//   p = prmt(LUT, x):  2|a| where a > 0, else 0 (a negative nibble has the
//       selector's msb set: prmt replicates the msb of LUT[m], which is 0),
//   q = prmt(LUT, x ^ 0x88888888): 2|a| where a < 0, else 0,
//   dot += dp4a(p, b) + dp4a(q, -b)   (int8 lanes, int32 sum: exact),
// with prmt reading 4 nibbles (x[15:0], then x >> 16). That is 11 instructions
// for 8 elements (4 PRMT, 4 IDP4A, 1 LOP3, 2 SHF) instead of ~20 (variant 0).
// b (as int8 2b and -2b, per 4 elements in natural order) and sb (f32) are
// decoded by the whole CTA into shared memory before the first compute (the
// first step's loads of a are issued before, so the decode hides under them).
// Term of block j: fma(float(idot) * sa_j, sb_j, acc) with idot = 4 * dot:
// idot * sa is exact (12 + 4 bits), so it is the same single rounding of the
// same exact product as variant 0's fma(dot * 2^-14, sa * sb, acc), scaled by
// 2^16 (and finish() multiplies by 1/4 instead of 2^14).

constexpr uint32_t kLut0 = 0x03020100u, kLut1 = 0x0C080604u; // 2 * e2m1 magnitude, code 0..7

// prmt.b32 in its default mode: selector nibble i (of sel[15:0]) picks byte
// (nibble & 7) of {hi, lo}; a set nibble msb replicates that byte's msb.
HD uint32_t prmt(uint32_t lo, uint32_t hi, uint32_t sel) {
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(lo), "r"(hi), "r"(sel));
    return d;
#else
    const uint64_t src = (uint64_t)hi << 32 | lo;
    uint32_t d = 0;
    for (int i = 0; i < 4; i++) {
        const uint32_t n = sel >> (4 * i) & 15u;
        uint32_t byte = (uint32_t)(src >> (8 * (n & 7u))) & 0xFFu;
        if (n & 8u) byte = byte & 0x80u ? 0xFFu : 0u;
        d |= byte << (8 * i);
    }
    return d;
#endif
}

// sum of the 4 int8 x int8 products, plus c
HD int dp4a(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a((int)a, (int)b, c);
#else
    for (int i = 0; i < 4; i++) c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
#endif
}

// 8 elements of a (word x) times b (bp: 2b of elements 0-3 and 4-7; bn: -2b).
// lut0, lut1 = kLut0, kLut1 held in registers (see lane_sums2).
HD int dot8(uint32_t x, uint32_t bp0, uint32_t bp1, uint32_t bn0, uint32_t bn1, int acc,
            uint32_t lut0, uint32_t lut1) {
    const uint32_t y = x ^ 0x88888888u;
    acc = dp4a(prmt(lut0, lut1, x), bp0, acc);
    acc = dp4a(prmt(lut0, lut1, y), bn0, acc);
    acc = dp4a(prmt(lut0, lut1, x >> 16), bp1, acc);
    acc = dp4a(prmt(lut0, lut1, y >> 16), bn1, acc);
    return acc;
}

// Decoded b of `nch` chunks: 4 planes of nch uint4 (plane 2*blk: 2b of the
// block's 16 elements, plane 2*blk + 1: -2b; lanes read consecutive chunks,
// so conflict-free), then nch float2 (the chunk's two sb).
HD size_t bdec_bytes(int64_t K) { return (size_t)(K / 32) * (4 * 16 + 8); }

HD void decode_b_chunk(int blocked, const uint8_t *brow, const uint8_t *sbrow, uint32_t c,
                       uint32_t nch, uint4 *planes) {
    const uint4 v = load_cached(brow + 16 * (size_t)c);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t pos[8], neg[8];
UNROLL
    for (int i = 0; i < 8; i++) {
        const uint32_t x = w[i / 2] >> (16 * (i % 2)), y = x ^ 0x8888u;
        const uint32_t p = prmt(kLut0, kLut1, x), q = prmt(kLut0, kLut1, y);
        pos[i] = ((p | 0x80808080u) - q) ^ 0x80808080u; // bytewise p - q (each < 128)
        neg[i] = ((q | 0x80808080u) - p) ^ 0x80808080u;
    }
    planes[c] = make_uint4(pos[0], pos[1], pos[2], pos[3]);
    planes[nch + c] = make_uint4(neg[0], neg[1], neg[2], neg[3]);
    planes[2 * nch + c] = make_uint4(pos[4], pos[5], pos[6], pos[7]);
    planes[3 * nch + c] = make_uint4(neg[4], neg[5], neg[6], neg[7]);
    reinterpret_cast<float2 *>(planes + 4 * nch)[c] =
        scale_pair(load_u16(sbrow + scale_step(blocked, c)));
}

// The CTA's b, before the first compute: the whole CTA decodes batch l's b
// into shared memory, then synchronizes. Nothing on the host (the emulation
// decodes each batch's b beforehand).
struct smem_b_prologue {
    const uint8_t *brow, *sbrow; // batch l's b and sb
    int blocked;
    uint32_t nch;
    uint4 *planes;
    HD void operator()() const {
#ifdef __CUDA_ARCH__
        for (uint32_t c = threadIdx.x; c < nch; c += blockDim.x)
            decode_b_chunk(blocked, brow, sbrow, c, nch, planes);
        __syncthreads();
#endif
    }
};
struct no_prologue {
    HD void operator()() const {}
};

// Where a lane's loads of one step are: a per-lane base for a and for sa (at
// the lane's current chunk) plus per-row offsets that are the same for the
// whole warp. Rows past M read row m0's bytes (never written), so no load is
// predicated on the row; both bases advance by a constant per step (blocked
// scales too: a step is an even number of chunks).
template <int R> struct lane_addr {
    const uint8_t *a, *sa;
    uint32_t a_row[R], sa_row[R]; // row i's offsets
    uint32_t a_u, sa_u;           // from chunk c to chunk c + stride
};

template <int R>
HD lane_addr<R> lane_start(const gemv_args &g, const unit_rows<R> &q, uint32_t c0, uint32_t stride) {
    constexpr int kPairs = unit_shape<R>::pairs;
    const int64_t row_bytes = g.K / 2;
    const int64_t sa_row = g.blocked ? 16 : g.K / 16, sa_band = g.blocked ? 4 : 32 * (g.K / 16);
    lane_addr<R> p;
    p.a = g.a + (q.l * g.M + q.m0) * row_bytes + 16 * (size_t)c0;
    p.sa = g.sa + scale_row(g, g.M, q.l, q.m0) + scale_step(g.blocked, c0);
    for (int i = 0; i < R; i++) {
        const int r = q.valid[i] ? i : 0;
        p.a_row[i] = (uint32_t)(row_of<R>(r) * row_bytes); // < 97 * 2^23
        p.sa_row[i] = (uint32_t)((r % kPairs) * sa_row + (r / kPairs) * sa_band);
    }
    p.a_u = 16u * stride;
    p.sa_u = g.blocked ? 256u * stride : 2u * stride;
    return p;
}

// One step's loads: chunk c0 + u * stride for u < kUnroll; u >= 1 only where
// in K (zeros elsewhere; u = 0 is always in K).
template <int R>
HD void load_step2(const lane_addr<R> &p, uint32_t c0, uint32_t stride, uint32_t chunks,
                   uint4 av[][R], uint32_t sav[][R]) {
    constexpr int kUnroll = unit_shape<R>::unroll;
UNROLL
    for (int u = 0; u < kUnroll; u++) {
        const bool in = u == 0 || c0 + u * stride < chunks;
UNROLL
        for (int i = 0; i < R; i++) {
            av[u][i] = in ? load_stream(p.a + (p.a_row[i] + u * p.a_u)) : make_uint4(0, 0, 0, 0);
            sav[u][i] = in ? load_u16(p.sa + (p.sa_row[i] + u * p.sa_u)) : 0u;
        }
    }
}

// One step's arithmetic into acc (chunks past K skipped).
template <int R>
HD void compute_step2(const uint4 av[][R], const uint32_t sav[][R], uint32_t c0, uint32_t stride,
                      uint32_t chunks, const uint4 *planes, uint32_t nch, uint32_t lut0,
                      uint32_t lut1, float acc[R]) {
    constexpr int kUnroll = unit_shape<R>::unroll;
    const float2 *sbs = reinterpret_cast<const float2 *>(planes + 4 * nch);
UNROLL
    for (int u = 0; u < kUnroll; u++) {
        const uint32_t chunk = c0 + u * stride;
        if (u > 0 && chunk >= chunks) break; // (only the last u of the last step)
        const float2 sbf = sbs[chunk];
UNROLL
        for (int blk = 0; blk < 2; blk++) { // b of one block at a time (8 registers)
            const uint4 bp = planes[2 * blk * nch + chunk], bn = planes[(2 * blk + 1) * nch + chunk];
UNROLL
            for (int i = 0; i < R; i++) {
                const uint4 x = av[u][i];
                const float2 saf = scale_pair(sav[u][i]);
                int d = dot8(blk ? x.z : x.x, bp.x, bp.y, bn.x, bn.y, 0, lut0, lut1);
                d = dot8(blk ? x.w : x.y, bp.z, bp.w, bn.z, bn.w, d, lut0, lut1);
                acc[i] = fmaf((float)d * (blk ? saf.y : saf.x), blk ? sbf.y : sbf.x, acc[i]);
            }
        }
    }
}

// lane_sums with the integer decode.
template <int R, class Prologue>
HD void lane_sums2(const gemv_args &g, const unit_rows<R> &q, uint32_t s, uint32_t lane,
                   float acc[R], const uint4 *planes, const Prologue &prologue) {
    constexpr int kRows = R, kUnroll = unit_shape<R>::unroll;
    const uint32_t chunks = (uint32_t)(g.K / 32), nch = chunks;
    // The tables as values the compiler cannot see are constants (g.split <
    // 256): with immediates, ptxas re-materializes them before every PRMT
    // (one IMAD.U32 each, ~1 per 4 elements).
    const uint32_t opaque = (uint32_t)g.split >> 8, lut0 = kLut0 | opaque, lut1 = kLut1 | opaque;
UNROLL
    for (int i = 0; i < kRows; i++) acc[i] = 0.0f;
    const uint32_t stride = 32u * (uint32_t)g.split, step = stride * kUnroll;
    uint32_t c0 = s * 32u + lane;
    lane_addr<R> p = lane_start<R>(g, q, c0 < chunks ? c0 : 0, stride);
    const size_t a_step = (size_t)p.a_u * kUnroll, sa_step = (size_t)p.sa_u * kUnroll;
    uint4 av[kUnroll][kRows];
    uint32_t sav[kUnroll][kRows];
    if (c0 < chunks) load_step2<R>(p, c0, stride, chunks, av, sav);
    prologue(); // b into shared memory while the first loads are in flight
    while (c0 < chunks) {
        compute_step2<R>(av, sav, c0, stride, chunks, planes, nch, lut0, lut1, acc);
        c0 += step;
        p.a += a_step;
        p.sa += sa_step;
        if (c0 < chunks) load_step2<R>(p, c0, stride, chunks, av, sav);
    }
}

// Variants 2 and 4: CTAs per SM, 2 (128 registers) for both R on sm_90a; 80
// registers (3 CTAs) spill in the main loop (docs/kernels/nvfp4_gemv.md).
template <int R> constexpr int min_blocks2() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
    return 1;
#else
    return 2;
#endif
}

template <int R>
__global__ void __launch_bounds__(kWarps * 32, min_blocks2<R>()) nvfp4_gemv_kernel2(gemv_args g) {
    constexpr int kRows = R;
    extern __shared__ uint4 bsm[];
    __shared__ float partial[kWarps][kRows];
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t s = warp % g.split;
    // every unit of a CTA is in the same batch (a batch has a multiple of 16 units)
    const unit_rows<R> q = locate<R>(g, (int64_t)blockIdx.x * (kWarps / g.split) + warp / g.split);
    const uint32_t nch = (uint32_t)(g.K / 32);
    const smem_b_prologue pro = {g.b + q.l * (g.K / 2), g.sb + scale_row(g, 1, q.l, 0), g.blocked,
                                 nch, bsm};
    float acc[kRows];
    lane_sums2<R>(g, q, s, lane, acc, bsm, pro);
UNROLL
    for (int i = 0; i < kRows; i++)
UNROLL
        for (int off = 16; off > 0; off >>= 1) acc[i] += __shfl_xor_sync(0xFFFFFFFFu, acc[i], off);

    if (g.split > 1) {
        if (lane == 0)
UNROLL
            for (int i = 0; i < kRows; i++) partial[warp][i] = acc[i];
        __syncthreads();
        if (s != 0) return;
UNROLL
        for (int i = 0; i < kRows; i++) {
            float sum = 0.0f;
            for (int w = 0; w < g.split; w++) sum += partial[warp + w][i];
            acc[i] = sum;
        }
    }
    const float gscale = g.ga ? __ldg(g.ga) * __ldg(g.gb) : 1.0f;
UNROLL
    for (int i = 0; i < kRows; i++)
        if (lane == (uint32_t)i && q.valid[i])
            g.c[q.l * g.M + q.m0 + row_of<R>(i)] = finish<2>(g, acc[i], gscale);
}

// ---- variant 4: variant 2 with persistent CTAs ----
//
// A work item is what one CTA of variant 2 does (8/S units x S slices, all in
// one batch); items are numbered as variant 2's CTAs (batch-major). The grid
// is (CTAs resident per SM) x SMs, and CTA p takes the contiguous items
// [p*n/P, (p+1)*n/P): its items stay in one batch (at most one change of
// batch for the GPU MODE shapes), so b is decoded into shared memory once and
// again only when the batch changes. Each lane runs variant 2's loop on
// every item (same chunks, same sums: the same bits as variant 2 for the same
// split) and issues the next item's first loads of a and sa before this
// item's butterfly, slice reduction and store.
template <int R>
__global__ void __launch_bounds__(kWarps * 32, min_blocks2<R>())
    nvfp4_gemv_kernel4(gemv_args g, int64_t items) {
    constexpr int kRows = R, kUnroll = unit_shape<R>::unroll;
    extern __shared__ uint4 bsm[];
    __shared__ float partial[2][kWarps][kRows]; // by item parity: one barrier per item
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t s = warp % g.split;
    // items < 2^31 (the launch checks): 32 bits hold an item's number
    const uint32_t first = (uint32_t)(items * blockIdx.x / gridDim.x),
                   last = (uint32_t)(items * (blockIdx.x + 1) / gridDim.x);
    const uint32_t per_item = kWarps / g.split;
    // this warp's unit: u of batch l (units per batch: a multiple of 16 < 2^32),
    // advanced by per_item units an item, without division
    const uint32_t upb = (uint32_t)((g.M + kGroupRows - 1) / kGroupRows * (kGroupRows / R));
    uint32_t l = first / (upb / per_item);
    uint32_t u = first % (upb / per_item) * per_item + warp / g.split;
    const uint32_t chunks = (uint32_t)(g.K / 32), nch = chunks;
    const uint32_t stride = 32u * (uint32_t)g.split, step = stride * kUnroll;
    const uint32_t cstart = s * 32u + lane;
    // opaque tables as in lane_sums2, but from cstart (< 256): from g.split,
    // ptxas re-materializes them (and the shared memory base) every step
    const uint32_t opaque = cstart >> 8, lut0 = kLut0 | opaque, lut1 = kLut1 | opaque;
    uint4 av[kUnroll][kRows];
    uint32_t sav[kUnroll][kRows];
    lane_addr<R> p = lane_start<R>(g, unit_at<R>(g, l, u), cstart < chunks ? cstart : 0, stride);
    const size_t a_step = (size_t)p.a_u * kUnroll, sa_step = (size_t)p.sa_u * kUnroll;
    if (first < last && cstart < chunks) load_step2<R>(p, cstart, stride, chunks, av, sav);
    bool fresh = true; // b of batch l is to be decoded
    for (uint32_t left = last - first; left > 0; left--) {
        if (fresh) { // b of a new batch, while the item's first loads fly
            if (left != last - first) __syncthreads(); // every warp is done with the old b
            const smem_b_prologue pro = {g.b + (int64_t)l * (g.K / 2),
                                         g.sb + scale_row(g, 1, l, 0), g.blocked, nch, bsm};
            pro(); // ends with __syncthreads
            fresh = false;
        }
        float acc[kRows];
UNROLL
        for (int i = 0; i < kRows; i++) acc[i] = 0.0f;
        for (uint32_t c0 = cstart; c0 < chunks;) {
            compute_step2<R>(av, sav, c0, stride, chunks, bsm, nch, lut0, lut1, acc);
            c0 += step;
            p.a += a_step;
            p.sa += sa_step;
            if (c0 < chunks) load_step2<R>(p, c0, stride, chunks, av, sav);
        }
        const unit_rows<R> q = unit_at<R>(g, l, u);
        u += per_item;
        if (u >= upb) { // the same in every warp: upb is a multiple of per_item
            u -= upb;
            l++;
            fresh = true;
        }
        // the next item's first loads, then this item's reduction and store
        if (left > 1) {
            p = lane_start<R>(g, unit_at<R>(g, l, u), cstart < chunks ? cstart : 0, stride);
            if (cstart < chunks) load_step2<R>(p, cstart, stride, chunks, av, sav);
        }
UNROLL
        for (int i = 0; i < kRows; i++)
UNROLL
            for (int off = 16; off > 0; off >>= 1)
                acc[i] += __shfl_xor_sync(0xFFFFFFFFu, acc[i], off);
        if (g.split > 1) {
            float(*part)[kRows] = partial[left & 1];
            if (lane == 0)
UNROLL
                for (int i = 0; i < kRows; i++) part[warp][i] = acc[i];
            __syncthreads();
            if (s != 0) continue;
UNROLL
            for (int i = 0; i < kRows; i++) {
                float sum = 0.0f;
                for (int w = 0; w < g.split; w++) sum += part[warp + w][i];
                acc[i] = sum;
            }
        }
        const float gscale = g.ga ? __ldg(g.ga) * __ldg(g.gb) : 1.0f;
UNROLL
        for (int i = 0; i < kRows; i++)
            if (lane == (uint32_t)i && q.valid[i])
                g.c[q.l * g.M + q.m0 + row_of<R>(i)] = finish<2>(g, acc[i], gscale);
    }
}

// Variant 4's grid: CTAs resident per SM for R rows, read once per device
// (the kernel's registers limit it; shared memory at most 100 KiB a CTA
// allows 2 on sm_80 and newer, which the launch re-checks by K).
constexpr int kMaxDevices = 64;

// CTAs of nvfp4_gemv_kernel4<R> resident per SM with `smem` bytes of dynamic
// shared memory; cached per device as (smem << 8 | count), recomputed only
// when K changes the shared memory. 0 on error.
template <int R> int persistent_per_sm(int device, size_t smem) {
    static std::atomic<uint64_t> cache[kMaxDevices];
    const bool cached = device >= 0 && device < kMaxDevices;
    if (cached) {
        const uint64_t c = cache[device].load(std::memory_order_relaxed);
        if (c != 0 && c >> 8 == smem) return (int)(c & 0xFFu);
    }
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, nvfp4_gemv_kernel4<R>, kWarps * 32,
                                                      smem) != cudaSuccess ||
        n < 1)
        return 0;
    n = n > 255 ? 255 : n;
    if (cached) cache[device].store((uint64_t)smem << 8 | (uint64_t)n, std::memory_order_relaxed);
    return n;
}

int env_choice(const char *name, int lo, int hi, int def, int step = 1);

// Warps per unit: split K until there are enough CTAs to fill the GPU (16 per
// SM: two rounds of 8 resident), keeping >= 1 KiB of a row per warp.
int choose_split(int64_t units, int64_t chunks, int sms) {
    int s = 1;
    while (s < kWarps && chunks >= 64 * s && units * s / kWarps < 16 * (int64_t)sms) s *= 2;
    return s;
}

// Variants 2 and 4: split K only until there is one CTA per SM. Fewer,
// longer warps measured faster than the 16 CTAs per SM above on an H100 (all
// three GPU MODE shapes; docs/kernels/nvfp4_gemv.md).
int choose_split2(int64_t units, int64_t chunks, int sms) {
    int s = 1;
    while (s < kWarps && chunks >= 64 * s && units * s / kWarps < (int64_t)sms) s *= 2;
    return s;
}

int effective_variant(int variant, int64_t K);

// The kernel's arguments from checked tensors on `kind`; the grid in *blocks.
kk_status make_args(const kk_op_params *p, kk_tensor *const *t, kk_backend_kind kind, int sms,
                    int rows, int variant, gemv_args *g, int64_t *blocks) {
    kk_status st = kk__nvfp4_gemv_check(p, t, kind);
    if (st != KK_OK) return st;
    const int global = (int)p->i[KK__GEMV_GLOBAL];
    g->M = p->i[KK__GEMV_M];
    g->K = p->i[KK__GEMV_K];
    g->L = p->i[KK__GEMV_L];
    g->blocked = p->i[KK__GEMV_LAYOUT] == KK__GEMV_BLOCKED;
    g->col_blocks = (g->K / 16 + 3) / 4;
    g->a = static_cast<const uint8_t *>(t[0]->data);
    g->b = static_cast<const uint8_t *>(t[1]->data);
    g->sa = static_cast<const uint8_t *>(t[2]->data);
    g->sb = static_cast<const uint8_t *>(t[3]->data);
    g->ga = global ? static_cast<const float *>(t[4]->data) : NULL;
    g->gb = global ? static_cast<const float *>(t[5]->data) : NULL;
    g->c = static_cast<uint16_t *>(t[global ? 6 : 4]->data);
    // 16-byte loads of a and b, 2-byte loads of the scales
    static const char *const names[4] = {"a", "b", "sa", "sb"};
    static const uintptr_t align[4] = {16, 16, 2, 2};
    for (int k = 0; k < 4; k++)
        if ((uintptr_t)t[k]->data % align[k] != 0)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "nvfp4_gemv", names[k],
                                 k < 2 ? "data aligned to 16 bytes" : "data aligned to 2 bytes",
                                 "%p", t[k]->data);
    const int64_t units = g->L * ((g->M + kGroupRows - 1) / kGroupRows) * (kGroupRows / rows);
    g->split = effective_variant(variant, g->K) >= 2 ? choose_split2(units, g->K / 32, sms)
                                                     : choose_split(units, g->K / 32, sms);
    // KK_NVFP4_GEMV_SPLIT=1|2|4|8 forces S (tuning; the emulation reads it too)
    const int forced = env_choice("KK_NVFP4_GEMV_SPLIT", 1, 8, 0);
    if (forced == 1 || forced == 2 || forced == 4 || forced == 8) g->split = forced;
    *blocks = units * g->split / kWarps; // units is a multiple of 16
    if (*blocks > 0x7FFFFFFF)
        return kk__error(KK_ERR_UNSUPPORTED, "nvfp4_gemv", "%lld CTAs exceed the grid limit",
                         (long long)*blocks);
    return KK_OK;
}

// The grid on the host: every lane of every warp, the butterfly of
// __shfl_xor_sync (a + b is commutative, so every lane ends with the same
// bits), then the slices in order, as the kernel does.
// Variant 2 first decodes each batch's b as the CTAs do (into a host buffer
// instead of shared memory). Variant 4 is the same computation: its CTAs take
// contiguous ranges of variant 2's CTAs (work items) in order, so running
// the items in turn is the same sums (kk__nvfp4_gemv_emulate maps 4 to 2).
template <int V, int R> kk_status emulate(const gemv_args &g, int64_t blocks) {
    constexpr int kRows = R;
    const float gscale = g.ga ? *g.ga * *g.gb : 1.0f;
    const uint32_t nch = (uint32_t)(g.K / 32);
    uint4 *planes = NULL;
    int64_t decoded = -1; // the batch in planes
    if (V >= 2) {
        planes = static_cast<uint4 *>(malloc(bdec_bytes(g.K)));
        if (!planes)
            return kk__error(KK_ERR_OUT_OF_MEMORY, "kk__nvfp4_gemv_emulate",
                             "%zu bytes for the decoded b", bdec_bytes(g.K));
    }
    for (int64_t blk = 0; blk < blocks; blk++) {
        float partial[kWarps][kRows];
        unit_rows<R> qs[kWarps];
        for (int warp = 0; warp < kWarps; warp++) {
            qs[warp] = locate<R>(g, blk * (kWarps / g.split) + warp / g.split);
            float v[32][kRows];
            if (V >= 2 && qs[warp].l != decoded) {
                decoded = qs[warp].l;
                for (uint32_t c = 0; c < nch; c++)
                    decode_b_chunk(g.blocked, g.b + decoded * (g.K / 2),
                                   g.sb + scale_row(g, 1, decoded, 0), c, nch, planes);
            }
            for (uint32_t lane = 0; lane < 32; lane++) {
                const uint32_t s = (uint32_t)(warp % g.split);
                if (V >= 2) lane_sums2<R>(g, qs[warp], s, lane, v[lane], planes, no_prologue());
                else lane_sums<V < 2 ? V : 0, R>(g, qs[warp], s, lane, v[lane]);
            }
            for (int off = 16; off > 0; off >>= 1) {
                float nv[32][kRows];
                for (int lane = 0; lane < 32; lane++)
                    for (int i = 0; i < kRows; i++) nv[lane][i] = v[lane][i] + v[lane ^ off][i];
                memcpy(v, nv, sizeof v);
            }
            for (int i = 0; i < kRows; i++) partial[warp][i] = v[0][i];
        }
        for (int warp = 0; warp < kWarps; warp += g.split)
            for (int i = 0; i < kRows; i++) {
                float sum = partial[warp][i];
                if (g.split > 1) {
                    sum = 0.0f;
                    for (int w = 0; w < g.split; w++) sum += partial[warp + w][i];
                }
                if (qs[warp].valid[i])
                    g.c[qs[warp].l * g.M + qs[warp].m0 + row_of<R>(i)] =
                        finish<V < 2 ? V : 2>(g, sum, gscale);
            }
    }
    free(planes);
    return KK_OK;
}

// KK_NVFP4_GEMV_VARIANT=0|1|2|4 (decoder; 4: 2 with persistent CTAs),
// KK_NVFP4_GEMV_ROWS=4|8 (rows per warp): tuning switches, read at each
// launch; anything else is the default (2, 8): variant 2 measured fastest on
// an H100 (docs/kernels/nvfp4_gemv.md).
int env_choice(const char *name, int lo, int hi, int def, int step) {
    const char *v = getenv(name);
    if (!v) return def;
    const int x = atoi(v);
    return x >= lo && x <= hi && (x - lo) % step == 0 ? x : def;
}

// Variant 3 (variant 2 with two register buffers) is gone: it spilled at
// R = 8 and measured no faster than 2; 3 now means 2. Outside 0..4: `def`.
int known_variant(int v, int def) { return v == 3 ? 2 : v >= 0 && v <= 4 ? v : def; }

// Variants 2 and 4 keep the decoded b of a batch (2.25 bytes per element of
// K) in shared memory; beyond this (K > 45056) they fall back to variant 0.
constexpr size_t kMaxBdec = 100 * 1024;
int effective_variant(int variant, int64_t K) {
    return variant >= 2 && bdec_bytes(K) > kMaxBdec ? 0 : variant;
}

// One of the six instantiations, as a launch. Variant 4: min(work items,
// resident CTAs) persistent CTAs; variant 2's grid when that is all items.
template <int V, int R>
kk_status launch(const gemv_args &g, int64_t blocks, int device, int sms, cudaStream_t s) {
    int64_t grid = blocks;
    if (V < 2) {
        nvfp4_gemv_kernel<V < 2 ? V : 0, R><<<(unsigned)blocks, kWarps * 32, 0, s>>>(g);
    } else {
        const size_t smem = bdec_bytes(g.K);
        void (*kernel2)(gemv_args) = nvfp4_gemv_kernel2<R>;
        void (*kernel4)(gemv_args, int64_t) = nvfp4_gemv_kernel4<R>;
        cudaError_t e = cudaSuccess;
        if (smem > 48 * 1024) { // variant 4 may run as 2 (below)
            e = cudaFuncSetAttribute(kernel2, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
            if (V == 4 && e == cudaSuccess)
                e = cudaFuncSetAttribute(kernel4, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem);
        }
        if (e != cudaSuccess)
            return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, "nvfp4_gemv", cudaGetErrorName(e),
                                  cudaGetErrorString(e), "%zu bytes of shared memory refused",
                                  smem);
        if (V == 4) {
            const int per_sm = persistent_per_sm<R>(device, smem);
            if (per_sm < 1)
                return kk__error(KK_ERR_KERNEL_LAUNCH, "nvfp4_gemv",
                                 "no CTA of variant 4 fits an SM (%zu bytes of shared memory)",
                                 smem);
            if ((int64_t)per_sm * sms < grid) grid = (int64_t)per_sm * sms;
        }
        // With no more items than resident CTAs, every CTA would run one
        // item: that is variant 2 (the same work and bits; its main loop is
        // 3 instructions a step shorter at R = 8, 7 at R = 4).
        // Variant 4 counts a batch's units in 32 bits (< 2^31: always, in
        // practice: that is M < 2^35 rows).
        const int64_t upb = (g.M + kGroupRows - 1) / kGroupRows * (kGroupRows / R);
        if (grid < blocks && upb < ((int64_t)1 << 31)) {
            kernel4<<<(unsigned)grid, kWarps * 32, smem, s>>>(g, blocks);
        } else {
            kernel2<<<(unsigned)blocks, kWarps * 32, smem, s>>>(g);
        }
    }
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return KK_OK;
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, "nvfp4_gemv", cudaGetErrorName(e),
                          cudaGetErrorString(e), "kernel launch failed (%lld CTAs)",
                          (long long)grid);
}

} // namespace

extern "C" kk_status kk__nvfp4_gemv_cuda(const kk_op_params *p, kk_tensor *const *t,
                                         kk_stream stream) {
    int device = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e != cudaSuccess)
        return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, "nvfp4_gemv", cudaGetErrorName(e),
                              cudaGetErrorString(e), "reading the SM count failed");
    int variant = known_variant(env_choice("KK_NVFP4_GEMV_VARIANT", 0, 4, 2), 2);
    const int rows = env_choice("KK_NVFP4_GEMV_ROWS", 4, 8, 8, 4);
    gemv_args g;
    int64_t blocks = 0;
    kk_status st = make_args(p, t, KK_BACKEND_CUDA, sms, rows, variant, &g, &blocks);
    if (st != KK_OK) return st;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    variant = effective_variant(variant, g.K);
    switch (variant * 8 + rows) {
    case 1 * 8 + 4: return launch<1, 4>(g, blocks, device, sms, s);
    case 2 * 8 + 4: return launch<2, 4>(g, blocks, device, sms, s);
    case 4 * 8 + 4: return launch<4, 4>(g, blocks, device, sms, s);
    case 0 * 8 + 4: return launch<0, 4>(g, blocks, device, sms, s);
    case 1 * 8 + 8: return launch<1, 8>(g, blocks, device, sms, s);
    case 2 * 8 + 8: return launch<2, 8>(g, blocks, device, sms, s);
    case 4 * 8 + 8: return launch<4, 8>(g, blocks, device, sms, s);
    default: return launch<0, 8>(g, blocks, device, sms, s);
    }
}

// The CUDA kernel's arithmetic on CPU tensors, as a grid for a GPU of `sms`
// SMs would compute it (same split, same order of every sum): the GPU's bits.
// For tests without a GPU; slow (every lane in turn). Variant 4 runs as 2
// (the same items, in the same order: see emulate), 3 as 2, others as 0.
extern "C" kk_status kk__nvfp4_gemv_emulate(const kk_op_params *p, kk_tensor *const *t, int sms,
                                            int variant, int rows) {
    if (rows != 4 && rows != 8)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk__nvfp4_gemv_emulate", "rows", "4 or 8",
                             "%d", rows);
    gemv_args g;
    int64_t blocks = 0;
    variant = known_variant(variant, 0);
    kk_status st = make_args(p, t, KK_BACKEND_CPU, sms < 1 ? 1 : sms, rows, variant, &g, &blocks);
    if (st != KK_OK) return st;
    switch (effective_variant(variant == 4 ? 2 : variant, g.K) * 8 + rows) {
    case 1 * 8 + 4: return emulate<1, 4>(g, blocks);
    case 2 * 8 + 4: return emulate<2, 4>(g, blocks);
    case 0 * 8 + 4: return emulate<0, 4>(g, blocks);
    case 1 * 8 + 8: return emulate<1, 8>(g, blocks);
    case 2 * 8 + 8: return emulate<2, 8>(g, blocks);
    default: return emulate<0, 8>(g, blocks);
    }
}
