// nvfp4_gemv variants 2 "int" and 4 (included only by nvfp4_gemv.cu): a's
// e2m1 looked up as int8 by prmt, dot products by dp4a against b decoded
// once per CTA into shared memory (smem_b_prologue); the kernels
// nvfp4_gemv_kernel2<R> and, with persistent CTAs, nvfp4_gemv_kernel4<R>.
#pragma once

#include "cuda/kernels/nvfp4_gemv_common.cuh"

namespace {

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

// variant 2 "int" (lane_sums2 below): no f16 decode; a's bytes are looked
// up as int8 (2x the e2m1 value) by prmt and multiplied by int8 b with dp4a,
// so a block's dot is an exact integer, 4x the true one.
template <> struct decoder<2> { static constexpr float inv_scale = 0.25f; };

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
HD lane_addr<R> lane_start(const gemv_args &g, const unit_rows<R> &q, uint32_t c0,
                           uint32_t stride) {
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
            const uint4 bp = planes[2 * blk * nch + chunk],
                        bn = planes[(2 * blk + 1) * nch + chunk];
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
    if (reduce_rows<R>(g, acc, partial, warp, s, lane)) store_rows<2, R>(g, q, acc, lane);
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
            const smem_b_prologue pro = {g.b + (int64_t)l * (g.K / 2), g.sb + scale_row(g, 1, l, 0),
                                         g.blocked, nch, bsm};
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
        if (reduce_rows<R>(g, acc, partial[left & 1], warp, s, lane))
            store_rows<2, R>(g, q, acc, lane);
    }
}

} // namespace
