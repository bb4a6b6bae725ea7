// rmsnorm on CUDA: y = x / sqrt(mean(x^2) + eps) * w per row, f32 math.
// One read of x and one write of y: the row waits in registers (a warp per
// row up to 1024 elements, a block per row up to 16384) while its sum of
// squares is reduced; longer rows take a two-pass kernel. Each thread sums
// its elements in f32, then a butterfly across the row: another order than
// the CPU twin's 256-element chunks, within the op's tolerance.
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda/kernels/rows.cuh"
#include "cuda/cuda_kernels.h"
#include "opdef/rmsnorm.h"

namespace {

using namespace kk_rows;

// y[i] = (x[i] * inv) * w[i], each product rounded as the CPU rounds it.
// vec: the vector path (a compile-time constant in the register kernel).
template <int DT>
__device__ __forceinline__ void write_vec(const RowArgs &a, void *yr, int64_t i, float inv,
                                          float (&v)[Elem<DT>::kVec], bool vec) {
    constexpr int V = Elem<DT>::kVec;
    float w[V];
    load_ro<DT>(a.w, i, a.n, vec, w);
#pragma unroll
    for (int j = 0; j < V; j++) v[j] = __fmul_rn(__fmul_rn(v[j], inv), w[j]);
    store<DT>(yr, i, a.n, vec, v);
}

__device__ __forceinline__ float inv_rms(float ss, const RowArgs &a) {
    return (float)(1.0 / sqrt((double)ss / (double)a.n + a.eps));
}

template <int DT, int G, int VPT, bool VEC>
__global__ void __launch_bounds__(Group<G>::kThreads) rmsnorm_kernel(RowArgs a) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec;
    __shared__ float red[32];
    const int t = Group<G>::thread();
    for (int64_t r = Group<G>::first_row(); r < a.rows; r += Group<G>::row_step()) {
        const T *xr = static_cast<const T *>(a.x) + r * a.xs;
        T *yr = static_cast<T *>(a.y) + r * a.ys;
        float v[VPT][V];
#pragma unroll
        for (int k = 0; k < VPT; k++) load<DT>(xr, (int64_t)(k * G + t) * V, a.n, VEC, v[k], 0.0f);
        float ss = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; k++)
#pragma unroll
            for (int j = 0; j < V; j++) ss = __fadd_rn(ss, __fmul_rn(v[k][j], v[k][j]));
        const float inv = inv_rms(group_sum<G>(ss, red), a);
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            const int64_t i = (int64_t)(k * G + t) * V;
            if (i < a.n) write_vec<DT>(a, yr, i, inv, v[k], VEC);
        }
    }
}

// Rows longer than registers hold: a block of 1024 threads per row reads it
// twice (the second time mostly from L2); per-thread sums in f64.
template <int DT> __global__ void __launch_bounds__(1024) rmsnorm_long(RowArgs a) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec, G = 1024;
    __shared__ float red[32];
    for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        const T *xr = static_cast<const T *>(a.x) + r * a.xs;
        T *yr = static_cast<T *>(a.y) + r * a.ys;
        double acc = 0.0;
        for (int64_t i = (int64_t)threadIdx.x * V; i < a.n; i += (int64_t)G * V) {
            float v[V];
            load<DT>(xr, i, a.n, a.vec, v, 0.0f);
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < V; j++) s = __fadd_rn(s, __fmul_rn(v[j], v[j]));
            acc += s;
        }
        const float inv = inv_rms(group_sum<G>((float)acc, red), a);
        for (int64_t i = (int64_t)threadIdx.x * V; i < a.n; i += (int64_t)G * V) {
            float v[V];
            load<DT>(xr, i, a.n, a.vec, v, 0.0f);
            write_vec<DT>(a, yr, i, inv, v, a.vec);
        }
    }
}

struct Kernels {
    static constexpr const char *kName = "rmsnorm";
    template <int DT, int G, int VPT, bool VEC>
    static constexpr auto Rows = &rmsnorm_kernel<DT, G, VPT, VEC>;
    template <int DT> static constexpr auto Long = &rmsnorm_long<DT>;
};

} // namespace

extern "C" kk_status kk__rmsnorm_cuda(const kk_op_params *p, kk_tensor *const *t,
                                      kk_stream stream) {
    const kk_status st = check_tensors(p, t);
    if (st != KK_OK) return st;
    const kk_dtype dt = (kk_dtype)p->i[KK__RMS_DTYPE];
    RowArgs a = row_args(p, t, 3, 1, dt == KK_DTYPE_F32 ? 4 : 8);
    a.eps = p->f[KK__RMS_EPS];
    return launch_rows<Kernels>(a, dt, static_cast<cudaStream_t>(stream));
}

extern "C" const kk__slot kk__rmsnorm_cuda_slot = {kk__rmsnorm_cuda, 1};
