// layernorm on CUDA: y = (x - mean) / sqrt(var + eps) * w + b per row, f32
// math, the CPU twin's arithmetic: the mean of x - x[0] (shifted data), kept
// as two floats hi + lo, then the variance around it (two passes over the row
// in registers, not E[x^2] - mean^2). One read of x and one write of y up to
// 16384 elements; longer rows re-read x (three passes). Sums run per thread,
// then as a butterfly: another order than the CPU's 256-element chunks.
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda/kernels/rows.cuh"
#include "cuda/cuda_kernels.h"
#include "opdef/layernorm.h"

namespace {

using namespace kk_rows;

struct Mean2 {
    float hi, lo;
};

__device__ __forceinline__ Mean2 mean2(float x0, float s1, int64_t n) {
    const double mean = (double)x0 + (double)s1 / (double)n;
    const float hi = (float)mean;
    return {hi, (float)(mean - (double)hi)};
}

__device__ __forceinline__ float dev(float x, Mean2 mu) {
    return __fsub_rn(__fsub_rn(x, mu.hi), mu.lo);
}

// y[i] = ((x - hi) - lo) * inv * w + b (or without w, b), rounded as the CPU.
// vec: the vector path (a compile-time constant in the register kernel).
template <int DT>
__device__ __forceinline__ void write_vec(const RowArgs &a, void *yr, int64_t i, Mean2 mu,
                                          float inv, float (&v)[Elem<DT>::kVec], bool vec) {
    constexpr int V = Elem<DT>::kVec;
    if (a.w) {
        float w[V], b[V];
        load_ro<DT>(a.w, i, a.n, vec, w);
        load_ro<DT>(a.b, i, a.n, vec, b);
#pragma unroll
        for (int j = 0; j < V; j++)
            v[j] = __fadd_rn(__fmul_rn(__fmul_rn(dev(v[j], mu), inv), w[j]), b[j]);
    } else {
#pragma unroll
        for (int j = 0; j < V; j++) v[j] = __fmul_rn(dev(v[j], mu), inv);
    }
    store<DT>(yr, i, a.n, vec, v);
}

__device__ __forceinline__ float inv_std(float s2, const RowArgs &a) {
    return (float)(1.0 / sqrt((double)s2 / (double)a.n + a.eps));
}

template <int DT, int G, int VPT, bool VEC>
__global__ void __launch_bounds__(Group<G>::kThreads) layernorm_kernel(RowArgs a) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec;
    __shared__ float red[32];
    const int t = Group<G>::thread();
    const int n = (int)a.n; // at most 16384 here
    for (int64_t r = Group<G>::first_row(); r < a.rows; r += Group<G>::row_step()) {
        const T *xr = static_cast<const T *>(a.x) + r * a.xs;
        T *yr = static_cast<T *>(a.y) + r * a.ys;
        float v[VPT][V];
#pragma unroll
        for (int k = 0; k < VPT; k++) load<DT>(xr, (int64_t)(k * G + t) * V, a.n, VEC, v[k], 0.0f);
        const float x0 = to_f32<DT>(xr[0]);
        float s1 = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; k++)
#pragma unroll
            for (int j = 0; j < V; j++)
                if (elem_in<VEC>((k * G + t) * V, j, n)) s1 = __fadd_rn(s1, __fsub_rn(v[k][j], x0));
        const Mean2 mu = mean2(x0, group_sum<G>(s1, red), a.n);
        float s2 = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; k++)
#pragma unroll
            for (int j = 0; j < V; j++)
                if (elem_in<VEC>((k * G + t) * V, j, n)) {
                    const float d = dev(v[k][j], mu);
                    s2 = __fadd_rn(s2, __fmul_rn(d, d));
                }
        const float inv = inv_std(group_sum<G>(s2, red), a);
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            const int64_t i = (int64_t)(k * G + t) * V;
            if (i < a.n) write_vec<DT>(a, yr, i, mu, inv, v[k], VEC);
        }
    }
}

// Rows longer than registers hold: a block of 1024 threads per row reads it
// three times (mean, variance, y; mostly from L2 after the first); per-thread
// sums in f64.
template <int DT> __global__ void __launch_bounds__(1024) layernorm_long(RowArgs a) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec, G = 1024;
    __shared__ float red[32];
    for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        const T *xr = static_cast<const T *>(a.x) + r * a.xs;
        T *yr = static_cast<T *>(a.y) + r * a.ys;
        const float x0 = to_f32<DT>(xr[0]);
        double acc = 0.0;
        for (int64_t i = (int64_t)threadIdx.x * V; i < a.n; i += (int64_t)G * V) {
            float v[V];
            load<DT>(xr, i, a.n, a.vec, v, x0); // past n: x0, adding 0
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < V; j++) s = __fadd_rn(s, __fsub_rn(v[j], x0));
            acc += s;
        }
        const Mean2 mu = mean2(x0, group_sum<G>((float)acc, red), a.n);
        acc = 0.0;
        for (int64_t i = (int64_t)threadIdx.x * V; i < a.n; i += (int64_t)G * V) {
            float v[V];
            load<DT>(xr, i, a.n, a.vec, v, 0.0f);
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < V; j++)
                if (i + j < a.n) {
                    const float d = dev(v[j], mu);
                    s = __fadd_rn(s, __fmul_rn(d, d));
                }
            acc += s;
        }
        const float inv = inv_std(group_sum<G>((float)acc, red), a);
        for (int64_t i = (int64_t)threadIdx.x * V; i < a.n; i += (int64_t)G * V) {
            float v[V];
            load<DT>(xr, i, a.n, a.vec, v, 0.0f);
            write_vec<DT>(a, yr, i, mu, inv, v, a.vec);
        }
    }
}

struct Kernels {
    static constexpr const char *kName = "layernorm";
    template <int DT, int G, int VPT, bool VEC>
    static constexpr auto Rows = &layernorm_kernel<DT, G, VPT, VEC>;
    template <int DT> static constexpr auto Long = &layernorm_long<DT>;
};

} // namespace

extern "C" kk_status kk__layernorm_cuda(const kk_op_params *p, kk_tensor *const *t,
                                        kk_stream stream) {
    const kk_status st = check_tensors(p, t);
    if (st != KK_OK) return st;
    const kk_dtype dt = (kk_dtype)p->i[KK__LN_DTYPE];
    const int affine = (int)p->i[KK__LN_AFFINE];
    RowArgs a = row_args(p, t, affine ? 4 : 2, affine ? 2 : 0, dt == KK_DTYPE_F32 ? 4 : 8);
    a.eps = p->f[KK__LN_EPS];
    return launch_rows<Kernels>(a, dt, static_cast<cudaStream_t>(stream));
}

extern "C" const kk__slot kk__layernorm_cuda_slot = {kk__layernorm_cuda, 1};
