// rmsnorm_fp8 on CUDA: y = rmsnorm(x) * w in f32, then per 1x128 group (or
// per row) scale = amax(|y|) / 448 and q = e4m3(y / scale). Bit for bit the
// CPU twin (src/cpu/rmsnorm_fp8_cpu.c): the sum of squares is summed in the
// CPU's order (kk__chunk_sum_squares in src/cpu/cpu_rows.h: chunks of 256,
// 16 lanes each summing every 16th square in turn, the lanes halved 8, 4, 2,
// 1, the chunk sums added in f64 in row order), 1/rms in f64 as there, y's
// two products, the amax on |y|'s bits, the scale and the ratio are
// core/quant_math.h's and the rounding convert.cuh's e4m3.
//
// A thread owns one "chain": lanes [qV, qV + V) of a chunk c, i.e. the 16
// vectors at elements c*256 + 16k + qV, k = 0..15, which it loads at once
// and keeps (raw, 64 registers) while the row's sum is reduced: x is read
// once. Its V lane sums are the CPU's lanes; the chunk's L = 16 / V chains
// are neighbouring threads, whose shuffles do the halving. A 1x128 group is
// half a chunk (k < 8 or k >= 8) over those L threads. Rows of more than 256
// chains re-read x per pass (mostly from L2). docs/kernels/memory_bound.md.
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "core/quant_math.h"
#include "cuda/kernels/rows.cuh"
#include "cuda/cuda_kernels.h"
#include "opdef/rmsnorm_fp8.h"

namespace {

using namespace kk_rows;

constexpr int kChunk = 256; // KK__ROW_CHUNK
constexpr int kSteps = 16;  // vectors of a chain
constexpr int kMaxG = 256;  // threads per row when a chain waits in registers

struct Fp8Args {
    const void *x, *w;
    uint8_t *q;
    float *scales;
    int64_t rows, n, xs, qs, ss; // row strides: x in elements, q in bytes, scales in floats
    int64_t nch;                 // chains per row: ceil(n / 256) * L
    double eps;
    int vec;     // 16-byte loads of x and w
    int qvec;    // V-byte stores of q
    int per_row; // group 0: one scale per row
};

// A chain's 16 vectors as loaded (V elements of the dtype each).
template <int DT> struct Chain { uint4 raw[kSteps]; };

// Element of vector k of chain ch.
template <int DT> __device__ __forceinline__ int64_t elem(int64_t ch, int k) {
    constexpr int V = Elem<DT>::kVec, L = 16 / V;
    return ch / L * kChunk + 16 * k + ch % L * V;
}

template <int DT>
__device__ __forceinline__ void load_chain(const Fp8Args &a, int64_t r, int64_t ch, bool has,
                                           Chain<DT> &c) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec;
    const T *row = static_cast<const T *>(a.x) + r * a.xs;
#pragma unroll
    for (int k = 0; k < kSteps; k++) {
        const int64_t i = elem<DT>(ch, k);
        uint4 u = make_uint4(0u, 0u, 0u, 0u); // +0 in every dtype
        if (has && i < a.n) {
            if (a.vec) {
                u = *reinterpret_cast<const uint4 *>(row + i);
            } else {
                T *e = reinterpret_cast<T *>(&u);
#pragma unroll
                for (int j = 0; j < V; j++)
                    if (i + j < a.n) e[j] = row[i + j];
            }
        }
        c.raw[k] = u;
    }
}

template <int DT> __device__ __forceinline__ float raw_f32(const uint4 &u, int j) {
    typedef typename Elem<DT>::T T;
    return to_f32<DT>(reinterpret_cast<const T *>(&u)[j]);
}

// The chunk's f32 sum of squares, in thread q = 0 of its L (others: junk).
template <int DT> __device__ __forceinline__ float chunk_sumsq(const Chain<DT> &c) {
    constexpr int V = Elem<DT>::kVec, L = 16 / V;
    float s[V];
#pragma unroll
    for (int j = 0; j < V; j++) s[j] = 0.0f;
#pragma unroll
    for (int k = 0; k < kSteps; k++) {
#pragma unroll
        for (int j = 0; j < V; j++) {
            const float v = raw_f32<DT>(c.raw[k], j);
            s[j] = __fadd_rn(s[j], __fmul_rn(v, v));
        }
    }
    // halving steps w = 8 .. V take lane l + w from the chain w / V threads on
#pragma unroll
    for (int w = 8; w >= V; w >>= 1) {
#pragma unroll
        for (int j = 0; j < V; j++)
            s[j] = __fadd_rn(s[j], __shfl_down_sync(0xFFFFFFFFu, s[j], w / V, L));
    }
#pragma unroll
    for (int w = V / 2; w > 0; w >>= 1)
#pragma unroll
        for (int j = 0; j < w; j++) s[j] = __fadd_rn(s[j], s[j + w]);
    return s[0];
}

// y of vector k of the chain, as the CPU computes it: (x * inv) * w.
template <int DT>
__device__ __forceinline__ void y_vec(const Fp8Args &a, const Chain<DT> &c, int64_t ch, int k,
                                      float inv, float (&y)[Elem<DT>::kVec]) {
    constexpr int V = Elem<DT>::kVec;
    const int64_t i = elem<DT>(ch, k);
    if (i < a.n) {
        load_ro<DT>(a.w, i, a.n, a.vec, y);
    } else {
#pragma unroll
        for (int j = 0; j < V; j++) y[j] = 0.0f;
    }
#pragma unroll
    for (int j = 0; j < V; j++) y[j] = __fmul_rn(__fmul_rn(raw_f32<DT>(c.raw[k], j), inv), y[j]);
}

// max |y| bits over the chain's vectors [k0, k1).
template <int DT>
__device__ __forceinline__ uint32_t chain_amax(const Fp8Args &a, const Chain<DT> &c, int64_t ch,
                                               float inv, int k0, int k1) {
    constexpr int V = Elem<DT>::kVec;
    uint32_t m = 0;
#pragma unroll
    for (int k = 0; k < kSteps; k++) {
        if (k < k0 || k >= k1) continue;
        float y[V];
        y_vec<DT>(a, c, ch, k, inv, y);
#pragma unroll
        for (int j = 0; j < V; j++) m = max(m, __float_as_uint(y[j]) & 0x7FFFFFFFu);
    }
    return m;
}

// q of the chain's vectors [k0, k1) with `scale`.
template <int DT>
__device__ __forceinline__ void chain_quant(const Fp8Args &a, const Chain<DT> &c, int64_t r,
                                            int64_t ch, float inv, int k0, int k1, float scale) {
    constexpr int V = Elem<DT>::kVec;
    uint8_t *qr = a.q + r * a.qs;
#pragma unroll
    for (int k = 0; k < kSteps; k++) {
        const int64_t i = elem<DT>(ch, k);
        if (k < k0 || k >= k1 || i >= a.n) continue;
        float y[V];
        y_vec<DT>(a, c, ch, k, inv, y);
        uint8_t b[V];
#pragma unroll
        for (int j = 0; j < V; j++)
            b[j] = kk_convert::f32bits_to_e4m3(__float_as_uint(kk__q_ratio(y[j], scale)));
        if (a.qvec) {
            if constexpr (V == 8)
                *reinterpret_cast<uint2 *>(qr + i) = *reinterpret_cast<const uint2 *>(b);
            else
                *reinterpret_cast<uint32_t *>(qr + i) = *reinterpret_cast<const uint32_t *>(b);
        } else {
#pragma unroll
            for (int j = 0; j < V; j++)
                if (i + j < a.n) qr[i + j] = b[j];
        }
    }
}

// The scale of an amax: NaN when y held inf or NaN (the CPU twin refuses the
// call; a kernel cannot, so the scale says it), else kk__fp8_scale.
__device__ __forceinline__ float scale_of(uint32_t amax) {
    return amax >= KK__F32_INF_BITS ? __uint_as_float(0x7FC00000u)
                                    : kk__fp8_scale(__uint_as_float(amax), KK__E4M3_MAX);
}

// G threads a row (blocks of max(G, 128): 128 / G rows each for G < 128).
// KEEP: at most G chains a row, each loaded once and kept; otherwise every
// pass loops over the chains G at a time and loads them again.
template <int DT, int G, bool KEEP>
__global__ void __launch_bounds__(G < 128 ? 128 : G) rmsnorm_fp8_kernel(Fp8Args a) {
    constexpr int V = Elem<DT>::kVec, L = 16 / V;
    constexpr int B = G < 128 ? 128 : G, RPB = B / G, CPB = G / L; // chunks a batch
    __shared__ float csum[RPB * CPB];
    __shared__ uint32_t wmax[B / 32];
    const int sub = threadIdx.x / G, t = threadIdx.x % G;
    const int64_t nc = a.nch / L;
    Chain<DT> c;
    for (int64_t base = (int64_t)blockIdx.x * RPB; base < a.rows;
         base += (int64_t)gridDim.x * RPB) {
        const int64_t r = base + sub;
        const bool live = r < a.rows;
        // pass 1: the sum of squares, chunk sums added in f64 in row order
        double total = 0.0;
        for (int64_t b0 = 0; b0 < a.nch; b0 += G) {
            const int64_t ch = b0 + t;
            load_chain<DT>(a, r, ch, live && ch < a.nch, c);
            const float cs = chunk_sumsq<DT>(c);
            if (t % L == 0) csum[sub * CPB + t / L] = cs;
            __syncthreads();
            const int64_t left = nc - b0 / L;
            const int m = left < CPB ? (int)left : CPB;
            for (int k = 0; k < m; k++) total += (double)csum[sub * CPB + k];
            __syncthreads();
        }
        const float inv = (float)(1.0 / sqrt(total / (double)a.n + a.eps));
        if (a.per_row) {
            uint32_t m = 0;
            for (int64_t b0 = 0; b0 < a.nch; b0 += G) {
                const int64_t ch = b0 + t;
                if (!KEEP) load_chain<DT>(a, r, ch, live && ch < a.nch, c);
                m = max(m, chain_amax<DT>(a, c, ch, inv, 0, kSteps));
            }
            m = __reduce_max_sync(0xFFFFFFFFu, m);
            if (G > 32) { // the row's warps through shared memory
                if ((threadIdx.x & 31) == 0) wmax[threadIdx.x >> 5] = m;
                __syncthreads();
                for (int k = 0; k < G / 32; k++) m = max(m, wmax[sub * (G / 32) + k]);
                __syncthreads();
            }
            const float scale = scale_of(m);
            if (live && t == 0) a.scales[r * a.ss] = scale;
            for (int64_t b0 = 0; b0 < a.nch; b0 += G) {
                const int64_t ch = b0 + t;
                if (!KEEP) load_chain<DT>(a, r, ch, live && ch < a.nch, c);
                if (live && ch < a.nch) chain_quant<DT>(a, c, r, ch, inv, 0, kSteps, scale);
            }
        } else { // 1x128: group 2c is k < 8 of chunk c, group 2c + 1 is k >= 8
            for (int64_t b0 = 0; b0 < a.nch; b0 += G) {
                const int64_t ch = b0 + t;
                if (!KEEP) load_chain<DT>(a, r, ch, live && ch < a.nch, c);
                uint32_t m0 = chain_amax<DT>(a, c, ch, inv, 0, 8);
                uint32_t m1 = chain_amax<DT>(a, c, ch, inv, 8, kSteps);
#pragma unroll
                for (int o = 1; o < L; o <<= 1) {
                    m0 = max(m0, __shfl_xor_sync(0xFFFFFFFFu, m0, o, L));
                    m1 = max(m1, __shfl_xor_sync(0xFFFFFFFFu, m1, o, L));
                }
                if (!live || ch >= a.nch) continue;
                const float s0 = scale_of(m0), s1 = scale_of(m1);
                const int64_t g = ch / L * 2;
                if (ch % L == 0) {
                    a.scales[r * a.ss + g] = s0;
                    if ((g + 1) * 128 < a.n) a.scales[r * a.ss + g + 1] = s1;
                }
                chain_quant<DT>(a, c, r, ch, inv, 0, 8, s0);
                chain_quant<DT>(a, c, r, ch, inv, 8, kSteps, s1);
            }
        }
    }
}

template <int DT, int G, bool KEEP> kk_status launch(const Fp8Args &a, cudaStream_t s) {
    constexpr auto kernel = &rmsnorm_fp8_kernel<DT, G, KEEP>;
    constexpr int B = G < 128 ? 128 : G, RPB = B / G;
    const unsigned grid = grid_for<kernel>((a.rows + RPB - 1) / RPB, B);
    kernel<<<grid, B, 0, s>>>(a);
    return launch_status("rmsnorm_fp8", grid, B);
}

template <int DT> kk_status launch_dtype(const Fp8Args &a, cudaStream_t s) {
    if (a.nch <= 32) return launch<DT, 32, true>(a, s);
    if (a.nch <= 64) return launch<DT, 64, true>(a, s);
    if (a.nch <= 128) return launch<DT, 128, true>(a, s);
    if (a.nch <= kMaxG) return launch<DT, kMaxG, true>(a, s);
    return launch<DT, kMaxG, false>(a, s);
}

} // namespace

extern "C" kk_status kk__rmsnorm_fp8_cuda(const kk_op_params *p, kk_tensor *const *t,
                                          kk_stream stream) {
    // Other group sizes (the registry allows 1..128 dividing n) are declined
    // before anything is enqueued, so kk_op_run runs them on the CPU.
    if (p->i[KK__RFP8_GROUP] != 0 && p->i[KK__RFP8_GROUP] != KK__FP8_BLOCK)
        return kk__error(KK_ERR_UNSUPPORTED, "rmsnorm_fp8",
                         "the cuda kernel takes group 0 or 128, not %lld (it runs on the CPU)",
                         (long long)p->i[KK__RFP8_GROUP]);
    const kk_status st = check_tensors(p, t);
    if (st != KK_OK) return st;
    const kk_dtype dt = (kk_dtype)p->i[KK__RFP8_DTYPE];
    const int V = dt == KK_DTYPE_F32 ? 4 : 8, L = 16 / V;
    // tensors: x, w, q, scales
    Fp8Args a;
    a.x = t[0]->data;
    a.w = t[1]->data;
    a.q = static_cast<uint8_t *>(t[2]->data);
    a.scales = static_cast<float *>(t[3]->data);
    a.rows = p->i[KK__RFP8_ROWS];
    a.n = p->i[KK__RFP8_N];
    a.xs = a.rows > 1 ? t[0]->strides[0] : a.n;
    a.qs = a.rows > 1 ? t[2]->strides[0] : a.n;
    a.ss = a.rows > 1 ? t[3]->strides[0] : t[3]->shape[1];
    a.nch = (a.n + kChunk - 1) / kChunk * L;
    a.eps = p->f[KK__RFP8_EPS];
    a.per_row = p->i[KK__RFP8_GROUP] == 0;
    a.vec = a.n % V == 0 && a.xs % V == 0 && aligned16(a.x) && aligned16(a.w);
    a.qvec = a.n % V == 0 && a.qs % V == 0 && ((uintptr_t)a.q & (uintptr_t)(V - 1)) == 0;
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (dt == KK_DTYPE_F32) return launch_dtype<kF32>(a, s);
    if (dt == KK_DTYPE_F16) return launch_dtype<kF16>(a, s);
    return launch_dtype<kBF16>(a, s);
}

extern "C" const kk__slot kk__rmsnorm_fp8_cuda_slot = {kk__rmsnorm_fp8_cuda, 1};
