// rmsnorm_fp8 on CUDA: y = rmsnorm(x) * w in f32, then per 1x128 group (or
// per row) scale = amax(|y|) / 448 and q = e4m3(y / scale). Bit for bit the
// CPU twin (src/cpu/rmsnorm_fp8_cpu.c): the sum of squares is summed in the
// CPU's order (kk__chunk_sum_squares in src/cpu/cpu_rows.h: chunks of 256,
// 16 lanes each summing every 16th square in turn, the lanes halved 8, 4, 2,
// 1, the chunk sums added in f64 in row order), 1/rms in f64 as there, y's
// two products, the amax on |y|'s bits, the scale core/quant_math.h's, and
// q = e4m3(y / scale) as the CPU rounds it through fp8_quotient.cuh (a
// product and the hardware's e4m3 where that decides the code, else the
// division and convert.cuh's encoder).
//
// One compact kernel a dtype, rolled loops (43-46 registers, about 2,100 SASS
// instructions). A block of 256 threads takes rpb = 8, 4, 2 or 1 rows (G =
// 256 / rpb threads each, G >= 32). A row's tile (the whole row when rpb
// rows fit kSmemBytes; else tiles of kSmemBytes, staged again from global
// memory for every pass) is copied raw into shared memory, 16-byte cp.async
// copies (element copies for unaligned, strided-odd or odd rows), then
// zeros to the next chunk (the CPU's short last chunk stops at n; +0 leaves
// a lane sum alone). Thread (chunk c, lane l) sums its 16 squares in order
// from shared memory, shuffles within the chunk's 16 threads halve the
// lanes, and the row's thread 0 adds the chunk sums in f64 in row order.
// A thread takes 8 consecutive elements (a unit) at a time for y (x from
// shared memory, w through the read-only cache); a 1x128 group is 16
// neighbouring threads (a shuffle max), group 0 a max over the row's
// threads first. q goes out 8 bytes a store. y holding inf or NaN: that
// scale is NaN (q 0x7F), where the CPU twin refuses the call.
// docs/kernels/memory_bound.md.
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "core/quant_math.h"
#include "cuda/kernels/fp8_quotient.cuh"
#include "cuda/kernels/rows.cuh"
#include "cuda/cuda_kernels.h"
#include "opdef/rmsnorm_fp8.h"

namespace {

using namespace kk_rows;

constexpr int kChunk = 256;                           // KK__ROW_CHUNK
constexpr int kThreads = 256;                         // a block
constexpr int kSmemBytes = 32768;                     // staged x of a block
constexpr int kUnit = 8;                              // elements of y a thread takes at once
constexpr int kMaxChunks = kSmemBytes / (2 * kChunk); // chunks staged at once (f16/bf16)

struct Fp8Args {
    const void *x, *w;
    uint8_t *q;
    float *scales;
    int64_t rows, n, xs, qs, ss; // row strides: x in elements, q in bytes, scales in floats
    double eps;
    int gshift;  // log2(G): threads a row
    int rpb;     // rows a block (kThreads / G)
    int tile;    // elements of a row staged at once (a multiple of 256; >= n: the whole row)
    int vec;     // 16-byte loads of x (cp.async) and w
    int qvec;    // 8-byte stores of q
    int per_row; // group 0: one scale per row
};

__device__ __forceinline__ void cp_async16(void *s, const void *g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(g) : "memory");
#else
    *static_cast<uint4 *>(s) = *static_cast<const uint4 *>(g);
#endif
}

__device__ __forceinline__ void prefetch_l2(const void *g) {
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(g));
}

__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// Elements [t0, t0 + len) of row xr into buf, zeros to the next chunk; the
// barriers before (the tile's last readers) and after (its first).
template <int DT>
__device__ __forceinline__ void stage(const Fp8Args &a, typename Elem<DT>::T *buf,
                                      const typename Elem<DT>::T *xr, bool live, int64_t t0,
                                      int len, int t) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec;
    const int G = 1 << a.gshift;
    __syncthreads();
    if (live && a.vec) {
#pragma unroll 4
        for (int i = t * V; i < len; i += G * V) cp_async16(buf + i, xr + t0 + i);
    } else { // element copies; a row past the tensor's end zeros (nothing reads garbage)
#pragma unroll 4
        for (int i = t; i < len; i += G) buf[i] = live ? xr[t0 + i] : T(0);
    }
    const int pad = (len + kChunk - 1) / kChunk * kChunk;
    for (int i = len + t; i < pad; i += G) buf[i] = T(0); // +0 in every dtype
    cp_async_wait();
    __syncthreads();
}

// y of unit u of a staged tile, as the CPU computes it: (x * inv) * w; lim:
// elements of the row from the unit on (those past n: x = w = 0, so y = 0).
template <int DT>
__device__ __forceinline__ void unit_y(const Fp8Args &a, const typename Elem<DT>::T *buf, int64_t e,
                                       int u, int lim, float inv, float (&y)[kUnit]) {
    typedef typename Elem<DT>::T T;
    const uint4 *xv = reinterpret_cast<const uint4 *>(buf + u * kUnit);
    T xe[kUnit], we[kUnit];
    *reinterpret_cast<uint4 *>(xe) = xv[0];
    if (sizeof(T) == 4) *reinterpret_cast<uint4 *>(xe + 4) = xv[1];
    const T *w = static_cast<const T *>(a.w) + e;
    if (a.vec && lim >= kUnit) {
        *reinterpret_cast<uint4 *>(we) = __ldg(reinterpret_cast<const uint4 *>(w));
        if (sizeof(T) == 4)
            *reinterpret_cast<uint4 *>(we + 4) = __ldg(reinterpret_cast<const uint4 *>(w) + 1);
    } else {
#pragma unroll
        for (int j = 0; j < kUnit; j++) we[j] = j < lim ? __ldg(w + j) : T(0);
    }
#pragma unroll
    for (int j = 0; j < kUnit; j++)
        y[j] = __fmul_rn(__fmul_rn(to_f32<DT>(xe[j]), inv), to_f32<DT>(we[j]));
}

// The scale of an amax: NaN when y held inf or NaN (the CPU twin refuses the
// call; a kernel cannot, so the scale says it), else kk__fp8_scale.
__device__ __forceinline__ float scale_of(uint32_t amax) {
    return amax >= KK__F32_INF_BITS ? __uint_as_float(0x7FC00000u)
                                    : kk__fp8_scale(__uint_as_float(amax), KK__E4M3_MAX);
}

__device__ __forceinline__ uint32_t unit_amax(const float (&y)[kUnit]) {
    uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < kUnit; j++) m = max(m, __float_as_uint(y[j]) & 0x7FFFFFFFu);
    return m;
}

template <int DT> __global__ void __launch_bounds__(kThreads, 5) rmsnorm_fp8_kernel(Fp8Args a) {
    typedef typename Elem<DT>::T T;
    __shared__ __align__(16) unsigned char sx[kSmemBytes];
    __shared__ float csum[kMaxChunks];
    __shared__ float sinv[kThreads / 32];
    __shared__ uint32_t wmax[kThreads / 32];
    const int G = 1 << a.gshift, sub = threadIdx.x >> a.gshift, t = threadIdx.x & (G - 1);
    T *buf = reinterpret_cast<T *>(sx) + sub * a.tile;
    float *cs = csum + sub * (a.tile / kChunk);
    const bool one = a.n <= a.tile; // the row stays staged through every pass
    const unsigned full = 0xFFFFFFFFu;
    { // w's first tile on its way to L2 while the first rows are summed (decode)
        constexpr int kLine = 128 / (int)sizeof(T);
        const int64_t m = a.n < a.tile ? a.n : a.tile;
        for (int i = threadIdx.x * kLine; i < m; i += kThreads * kLine)
            prefetch_l2(static_cast<const T *>(a.w) + i);
    }
    for (int64_t base = (int64_t)blockIdx.x * a.rpb; base < a.rows;
         base += (int64_t)gridDim.x * a.rpb) {
        const int64_t r = base + sub;
        const bool live = r < a.rows;
        const T *xr = static_cast<const T *>(a.x) + r * a.xs;
        uint8_t *qr = a.q + r * a.qs;
        // pass 1: the sum of squares
        double total = 0.0;
        for (int64_t t0 = 0; t0 < a.n; t0 += a.tile) {
            const int len = (int)(a.n - t0 < a.tile ? a.n - t0 : a.tile);
            stage<DT>(a, buf, xr, live, t0, len, t);
            const int tasks = (len + kChunk - 1) / kChunk * 16; // (chunk, lane) pairs
#pragma unroll 1
            for (int k0 = 0; k0 < tasks; k0 += G) {
                const int k = k0 + t;
                float s = 0.0f;
                if (k < tasks) {
                    const T *p = buf + (k >> 4) * kChunk + (k & 15);
#pragma unroll
                    for (int i = 0; i < 16; i++) {
                        const float v = to_f32<DT>(p[16 * i]);
                        s = __fadd_rn(s, __fmul_rn(v, v));
                    }
                }
#pragma unroll
                for (int h = 8; h > 0; h >>= 1) s = __fadd_rn(s, __shfl_down_sync(full, s, h, 16));
                if ((k & 15) == 0 && k < tasks) cs[k >> 4] = s;
            }
            __syncthreads();
            if (t == 0)
#pragma unroll 1
                for (int c = 0; c < tasks / 16; c++) total += (double)cs[c];
        }
        if (t == 0) sinv[sub] = (float)(1.0 / sqrt(total / (double)a.n + a.eps));
        __syncthreads();
        const float inv = sinv[sub];
        float scale = 0.0f;
        if (a.per_row) { // pass 2: the row's amax
            uint32_t m = 0;
            for (int64_t t0 = 0; t0 < a.n; t0 += a.tile) {
                const int len = (int)(a.n - t0 < a.tile ? a.n - t0 : a.tile);
                if (!one) stage<DT>(a, buf, xr, live, t0, len, t);
#pragma unroll 1
                for (int u = t; u * kUnit < len; u += G) {
                    float y[kUnit];
                    unit_y<DT>(a, buf, t0 + u * kUnit, u, len - u * kUnit, inv, y);
                    m = max(m, unit_amax(y));
                }
            }
            m = __reduce_max_sync(full, m);
            if (G > 32) { // the row's warps through shared memory
                if ((threadIdx.x & 31) == 0) wmax[threadIdx.x >> 5] = m;
                __syncthreads();
                for (int k = 0; k < G / 32; k++) m = max(m, wmax[(sub << (a.gshift - 5)) + k]);
            }
            scale = scale_of(m);
            if (live && t == 0) a.scales[r * a.ss] = scale;
        }
        // pass 3 (1x128: the groups' amax too): q
        for (int64_t t0 = 0; t0 < a.n; t0 += a.tile) {
            const int len = (int)(a.n - t0 < a.tile ? a.n - t0 : a.tile);
            if (!one) stage<DT>(a, buf, xr, live, t0, len, t);
#pragma unroll 1
            for (int u0 = 0; u0 * kUnit < len; u0 += G) { // the row's warps alike (shuffles)
                const int u = u0 + t, lim = len - u * kUnit;
                const int64_t e = t0 + u * kUnit;
                float y[kUnit];
                if (lim > 0) unit_y<DT>(a, buf, e, u, lim, inv, y);
                if (!a.per_row) { // group e / 128: 16 threads, aligned
                    uint32_t m = lim > 0 ? unit_amax(y) : 0u;
#pragma unroll
                    for (int h = 8; h > 0; h >>= 1) m = max(m, __shfl_xor_sync(full, m, h));
                    scale = scale_of(m);
                    if (live && lim > 0 && (t & 15) == 0) a.scales[r * a.ss + (e >> 7)] = scale;
                }
                if (!live || lim <= 0) continue;
                const float rcp = __frcp_rn(scale);
                uint32_t b[2] = {0u, 0u};
#pragma unroll
                for (int j = 0; j < kUnit; j++)
                    b[j >> 2] |= kk_fp8q::e4m3_of_quotient<kk_fp8q::kGuard>(y[j], scale, rcp)
                                 << (8 * (j & 3));
                if (a.qvec) {
                    *reinterpret_cast<uint2 *>(qr + e) = make_uint2(b[0], b[1]);
                } else {
#pragma unroll
                    for (int j = 0; j < kUnit; j++)
                        if (j < lim) qr[e + j] = (uint8_t)(b[j >> 2] >> (8 * (j & 3)));
                }
            }
        }
    }
}

template <int DT> kk_status launch(const Fp8Args &a, cudaStream_t s) {
    constexpr auto kernel = &rmsnorm_fp8_kernel<DT>;
    const unsigned grid = grid_for<kernel>((a.rows + a.rpb - 1) / a.rpb, kThreads);
    kernel<<<grid, kThreads, 0, s>>>(a);
    return launch_status("rmsnorm_fp8", grid, kThreads);
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
    const int V = dt == KK_DTYPE_F32 ? 4 : 8, es = dt == KK_DTYPE_F32 ? 4 : 2;
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
    a.eps = p->f[KK__RFP8_EPS];
    a.per_row = p->i[KK__RFP8_GROUP] == 0;
    a.vec = a.n % V == 0 && a.xs % V == 0 && aligned16(a.x) && aligned16(a.w);
    a.qvec = a.n % kUnit == 0 && a.qs % kUnit == 0 && ((uintptr_t)a.q & (kUnit - 1)) == 0;
    // Threads a row: about 4 units each (2 for few rows), 32 to 256; then
    // rows a block while their tiles fit (rows past the tensor's wasted).
    const int64_t pad = (a.n + kChunk - 1) / kChunk * kChunk, cap = kSmemBytes / es;
    const int64_t units = (a.n + kUnit - 1) / kUnit, per = a.rows < 256 ? 2 : 4;
    int gs = 5;
    while (gs < 8 && ((int64_t)1 << gs) * per < units) gs++;
    while (gs < 8 && (pad << (8 - gs) > cap || ((int64_t)1 << (8 - gs)) / 2 >= a.rows)) gs++;
    a.gshift = gs;
    a.rpb = kThreads >> gs;
    a.tile = (int)(pad <= cap / a.rpb ? pad : cap); // rpb == 1 when the row is tiled
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (dt == KK_DTYPE_F32) return launch<kF32>(a, s);
    if (dt == KK_DTYPE_F16) return launch<kF16>(a, s);
    return launch<kBF16>(a, s);
}

extern "C" const kk__slot kk__rmsnorm_fp8_cuda_slot = {kk__rmsnorm_fp8_cuda, 1};
