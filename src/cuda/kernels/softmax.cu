// softmax on CUDA: y = softmax(x * scale) along each row, f32 math: the
// row's maximum (a NaN makes the row NaN), e^((x - max) * scale) by the CPU
// twin's polynomial for f32 outputs and by the hardware's ex2.approx for bf16
// and f16 ones (far below their rounding, a fifth of the instructions), one
// division per row. One read of x and one write of y up to 16384 elements
// (the exponentials wait in registers); longer rows re-read x (three passes).
// The sum runs per thread, then as a butterfly: another order than the CPU's.
// causal=1 (kk_softmax_masked): keys past a row's visible count are left out
// of the max and the sum and written as 0 (bytes unchanged).
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda/kernels/rows.cuh"
#include "cuda/cuda_kernels.h"
#include "opdef/softmax.h"

namespace {

using namespace kk_rows;

// src/cpu/softmax_cpu.c's exp_nonpositive, every operation rounded as there:
// e^t for t <= 0 within 1 ulp, NaN in NaN out, below e^-87 about 1.6e-38.
__device__ __forceinline__ float exp_nonpositive(float t) {
    const uint32_t u = __float_as_uint(t);
    uint32_t cu = u > 0xC2AE0000u ? 0xC2AE0000u : u;
    cu = cu < 0x80000000u ? 0u : cu;
    const float c = __uint_as_float(cu);
    const float k =
        __fsub_rn(__fadd_rn(__fmul_rn(c, 1.44269504088896341f), 12582912.0f), 12582912.0f);
    const float r =
        __fsub_rn(__fsub_rn(c, __fmul_rn(k, 0.693359375f)), __fmul_rn(k, -2.12194440e-4f));
    float poly = 1.9875691500e-4f;
    poly = __fadd_rn(__fmul_rn(poly, r), 1.3981999507e-3f);
    poly = __fadd_rn(__fmul_rn(poly, r), 8.3334519073e-3f);
    poly = __fadd_rn(__fmul_rn(poly, r), 4.1665795894e-2f);
    poly = __fadd_rn(__fmul_rn(poly, r), 1.6666665459e-1f);
    poly = __fadd_rn(__fmul_rn(poly, r), 5.0000001201e-1f);
    const float er = __fadd_rn(__fadd_rn(__fmul_rn(__fmul_rn(poly, r), r), r), 1.0f);
    const float two_k = __uint_as_float((uint32_t)((int32_t)k + 127) << 23);
    const uint32_t nan = 0u - (uint32_t)((u & 0x7FFFFFFFu) > 0x7F800000u);
    return __uint_as_float((nan & u) | (~nan & __float_as_uint(__fmul_rn(er, two_k))));
}

// Keys row r sees (kk__softmax_visible): all n, or with the causal mask
// r % sq + n - sq + 1 clamped to [0, n]; the others are written as 0.
__device__ __forceinline__ int64_t visible(const RowArgs &a, int64_t r) {
    if (!a.causal) return a.n;
    const int64_t v = r % a.sq + a.n - a.sq + 1;
    return v < 0 ? 0 : v > a.n ? a.n : v;
}

// 1 / sum, or 0 for a row that sees no key (all zeros, as the CPU's).
__device__ __forceinline__ float inv_sum(float s, int64_t vis) {
    return vis > 0 ? (float)(1.0 / (double)s) : 0.0f;
}

__device__ __forceinline__ float e_of(float x, float m, float scale) {
    return exp_nonpositive(__fmul_rn(__fsub_rn(x, m), scale));
}

// For bf16 and f16 outputs: 2^(x c - m c) with c = scale log2(e), one fused
// multiply-add and the hardware's ex2.approx (2 ulp, subnormal results
// flushed): about 1e-5 relative, against the 2^-9 and 2^-12 of the output's
// rounding, and a fifth of the CPU polynomial's instructions. A NaN stays NaN.
__device__ __forceinline__ float e_fast(float x, float c, float mc) {
    float e;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(__fmaf_rn(x, c, mc)));
    return e;
}

// max that propagates NaN (max.NaN.f32): the row's maximum is NaN when any
// element is, as the order-preserving keys make it for +NaN (a -NaN instead
// reaches the sum as NaN: the row is NaN either way).
__device__ __forceinline__ float max_nan(float a, float b) {
    float m;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(m) : "f"(a), "f"(b));
    return m;
}

template <int DT, int G, int VPT, bool VEC>
__global__ void __launch_bounds__(Group<G>::kThreads) softmax_kernel(RowArgs a) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec;
    __shared__ uint32_t redk[32];
    __shared__ float red[32];
    const int t = Group<G>::thread();
    const int n = (int)a.n; // at most 16384 here
    for (int64_t r = Group<G>::first_row(); r < a.rows; r += Group<G>::row_step()) {
        const T *xr = static_cast<const T *>(a.x) + r * a.xs;
        T *yr = static_cast<T *>(a.y) + r * a.ys;
        float v[VPT][V];
        // past n: -inf, whose key is below every other but 0's (-NaN's)
#pragma unroll
        for (int k = 0; k < VPT; k++)
            load<DT>(xr, (int64_t)(k * G + t) * V, a.n, VEC, v[k], -INFINITY);
        const int vis = (int)visible(a, r);
        if (vis < n) // masked keys: -inf as past n
#pragma unroll
            for (int k = 0; k < VPT; k++)
#pragma unroll
                for (int j = 0; j < V; j++)
                    if ((k * G + t) * V + j >= vis) v[k][j] = -INFINITY;
        float mt = -INFINITY;
#pragma unroll
        for (int k = 0; k < VPT; k++)
#pragma unroll
            for (int j = 0; j < V; j++) mt = max_nan(mt, v[k][j]);
        const float m = key_float(group_max<G>(float_key(mt), redk));
        float s = 0.0f;
        if (DT != kF32) {
            const float c = (float)((double)a.scale * 1.4426950408889634), mc = -m * c;
            if (VEC && vis == n) { // whole vectors in or out
#pragma unroll
                for (int k = 0; k < VPT; k++) {
                    const bool in = (k * G + t) * V < n;
#pragma unroll
                    for (int j = 0; j < V; j++) {
                        v[k][j] = in ? e_fast(v[k][j], c, mc) : 0.0f;
                        s += v[k][j];
                    }
                }
            } else {
#pragma unroll
                for (int k = 0; k < VPT; k++)
#pragma unroll
                    for (int j = 0; j < V; j++) {
                        v[k][j] = (k * G + t) * V + j < vis ? e_fast(v[k][j], c, mc) : 0.0f;
                        s += v[k][j];
                    }
            }
        } else {
#pragma unroll
            for (int k = 0; k < VPT; k++)
#pragma unroll
                for (int j = 0; j < V; j++) {
                    const bool in = (k * G + t) * V + j < vis;
                    v[k][j] = in ? e_of(v[k][j], m, a.scale) : 0.0f;
                    s = __fadd_rn(s, v[k][j]);
                }
        }
        const float inv = inv_sum(group_sum<G>(s, red), vis);
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            const int64_t i = (int64_t)(k * G + t) * V;
            if (i < a.n) {
#pragma unroll
                for (int j = 0; j < V; j++) v[k][j] = __fmul_rn(v[k][j], inv);
                store<DT>(yr, i, a.n, VEC, v[k]);
            }
        }
    }
}

// Rows longer than registers hold: a block of 1024 threads per row reads it
// three times (max, sum, y; mostly from L2 after the first); per-thread sums
// in f64.
template <int DT> __global__ void __launch_bounds__(1024) softmax_long(RowArgs a) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec, G = 1024;
    __shared__ uint32_t redk[32];
    __shared__ float red[32];
    for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        const T *xr = static_cast<const T *>(a.x) + r * a.xs;
        T *yr = static_cast<T *>(a.y) + r * a.ys;
        const int64_t vis = visible(a, r);
        uint32_t km = 0;
        for (int64_t i = (int64_t)threadIdx.x * V; i < a.n; i += (int64_t)G * V) {
            float v[V];
            load<DT>(xr, i, a.n, a.vec, v, -INFINITY);
#pragma unroll
            for (int j = 0; j < V; j++)
                if (i + j < vis) km = max(km, float_key(v[j]));
        }
        const float m = key_float(group_max<G>(km, redk));
        double acc = 0.0;
        for (int64_t i = (int64_t)threadIdx.x * V; i < a.n; i += (int64_t)G * V) {
            float v[V];
            load<DT>(xr, i, a.n, a.vec, v, 0.0f);
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < V; j++)
                if (i + j < vis) s = __fadd_rn(s, e_of(v[j], m, a.scale));
            acc += s;
        }
        const float inv = inv_sum(group_sum<G>((float)acc, red), vis);
        for (int64_t i = (int64_t)threadIdx.x * V; i < a.n; i += (int64_t)G * V) {
            float v[V];
            load<DT>(xr, i, a.n, a.vec, v, 0.0f);
#pragma unroll
            for (int j = 0; j < V; j++)
                v[j] = i + j < vis ? __fmul_rn(e_of(v[j], m, a.scale), inv) : 0.0f;
            store<DT>(yr, i, a.n, a.vec, v);
        }
    }
}

struct Kernels {
    static constexpr const char *kName = "softmax";
    template <int DT, int G, int VPT, bool VEC>
    static constexpr auto Rows = &softmax_kernel<DT, G, VPT, VEC>;
    template <int DT> static constexpr auto Long = &softmax_long<DT>;
};

} // namespace

extern "C" kk_status kk__softmax_cuda(const kk_op_params *p, kk_tensor *const *t,
                                      kk_stream stream) {
    const kk_status st = check_tensors(p, t);
    if (st != KK_OK) return st;
    const kk_dtype dt = (kk_dtype)p->i[KK__SMX_DTYPE];
    RowArgs a = row_args(p, t, 2, 0, dt == KK_DTYPE_F32 ? 4 : 8);
    a.scale = (float)p->f[KK__SMX_SCALE];
    a.causal = p->i[KK__SMX_CAUSAL] != 0;
    a.sq = p->i[KK__SMX_SQ] ? p->i[KK__SMX_SQ] : a.rows;
    return launch_rows<Kernels>(a, dt, static_cast<cudaStream_t>(stream));
}

extern "C" const kk__slot kk__softmax_cuda_slot = {kk__softmax_cuda, 1};
