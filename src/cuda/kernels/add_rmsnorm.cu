// add_rmsnorm on CUDA: h = x + residual rounded to the dtype, y = rmsnorm(h)
// * w from that rounded h, f32 math. rmsnorm.cu's kernels with a second input
// and output: x and residual are read once, the rounded h waits in registers
// while its sum of squares is reduced, h and y are written once (rows up to
// 16384; longer ones re-read h from memory, mostly L2). Each thread loads its
// x and residual before it stores h, so h may alias x or residual (the
// in-place residual update). The sum's order differs from the CPU twin's, as
// rmsnorm.cu's does; h is bit for bit the CPU's.
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda/kernels/rows.cuh"
#include "cuda/cuda_kernels.h"
#include "opdef/add_rmsnorm.h"

namespace {

using namespace kk_rows;

// RowArgs (x, w, y; rows, n, strides, eps) plus the residual input and h.
struct AddArgs {
    RowArgs a;
    const void *res;
    void *h;
    int64_t rs, hs;
    int64_t rows, n; // a.rows, a.n: what launch_rows reads
};

// f rounded to the dtype and back: the value h holds once stored.
template <int DT> __device__ __forceinline__ float rounded(float f) {
    return to_f32<DT>(from_f32<DT>(f));
}

// h = round(x + residual) for elements [i, i + V): loads both, then stores h.
// vec: the vector path (a compile-time constant in the register kernel).
template <int DT>
__device__ __forceinline__ void add_vec(const AddArgs &p, int64_t r, int64_t i,
                                        float (&v)[Elem<DT>::kVec], bool vec) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec;
    float res[V];
    load<DT>(static_cast<const T *>(p.a.x) + r * p.a.xs, i, p.a.n, vec, v, 0.0f);
    load<DT>(static_cast<const T *>(p.res) + r * p.rs, i, p.a.n, vec, res, 0.0f);
#pragma unroll
    for (int j = 0; j < V; j++) v[j] = rounded<DT>(__fadd_rn(v[j], res[j]));
    store<DT>(static_cast<T *>(p.h) + r * p.hs, i, p.a.n, vec, v);
}

// y[i] = (h[i] * inv) * w[i], each product rounded as the CPU rounds it.
template <int DT>
__device__ __forceinline__ void write_y(const AddArgs &p, int64_t r, int64_t i, float inv,
                                        float (&v)[Elem<DT>::kVec], bool vec) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec;
    float w[V];
    load_ro<DT>(p.a.w, i, p.a.n, vec, w);
#pragma unroll
    for (int j = 0; j < V; j++) v[j] = __fmul_rn(__fmul_rn(v[j], inv), w[j]);
    store<DT>(static_cast<T *>(p.a.y) + r * p.a.ys, i, p.a.n, vec, v);
}

__device__ __forceinline__ float inv_rms(float ss, const RowArgs &a) {
    return (float)(1.0 / sqrt((double)ss / (double)a.n + a.eps));
}

template <int DT, int G, int VPT, bool VEC>
__global__ void __launch_bounds__(Group<G>::kThreads) add_rmsnorm_kernel(AddArgs p) {
    constexpr int V = Elem<DT>::kVec;
    __shared__ float red[32];
    const int t = Group<G>::thread();
    for (int64_t r = Group<G>::first_row(); r < p.a.rows; r += Group<G>::row_step()) {
        float v[VPT][V];
#pragma unroll
        for (int k = 0; k < VPT; k++) add_vec<DT>(p, r, (int64_t)(k * G + t) * V, v[k], VEC);
        float ss = 0.0f; // elements past n are 0
#pragma unroll
        for (int k = 0; k < VPT; k++)
#pragma unroll
            for (int j = 0; j < V; j++) ss = __fadd_rn(ss, __fmul_rn(v[k][j], v[k][j]));
        const float inv = inv_rms(group_sum<G>(ss, red), p.a);
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            const int64_t i = (int64_t)(k * G + t) * V;
            if (i < p.a.n) write_y<DT>(p, r, i, inv, v[k], VEC);
        }
    }
}

// Rows longer than registers hold: h is written in the first pass and read
// back (by the thread that wrote it) in the second; per-thread sums in f64.
template <int DT> __global__ void __launch_bounds__(1024) add_rmsnorm_long(AddArgs p) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec, G = 1024;
    __shared__ float red[32];
    for (int64_t r = blockIdx.x; r < p.a.rows; r += gridDim.x) {
        double acc = 0.0;
        for (int64_t i = (int64_t)threadIdx.x * V; i < p.a.n; i += (int64_t)G * V) {
            float v[V];
            add_vec<DT>(p, r, i, v, p.a.vec);
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < V; j++) s = __fadd_rn(s, __fmul_rn(v[j], v[j]));
            acc += s;
        }
        const float inv = inv_rms(group_sum<G>((float)acc, red), p.a);
        const T *hr = static_cast<const T *>(p.h) + r * p.hs;
        for (int64_t i = (int64_t)threadIdx.x * V; i < p.a.n; i += (int64_t)G * V) {
            float v[V];
            load<DT>(hr, i, p.a.n, p.a.vec, v, 0.0f);
            write_y<DT>(p, r, i, inv, v, p.a.vec);
        }
    }
}

struct Kernels {
    static constexpr const char *kName = "add_rmsnorm";
    template <int DT, int G, int VPT, bool VEC>
    static constexpr auto Rows = &add_rmsnorm_kernel<DT, G, VPT, VEC>;
    template <int DT> static constexpr auto Long = &add_rmsnorm_long<DT>;
};

} // namespace

extern "C" kk_status kk__add_rmsnorm_cuda(const kk_op_params *p, kk_tensor *const *t,
                                          kk_stream stream) {
    const kk_status st = check_tensors(p, t);
    if (st != KK_OK) return st;
    const kk_dtype dt = (kk_dtype)p->i[KK__ARN_DTYPE];
    const int V = dt == KK_DTYPE_F32 ? 4 : 8;
    // tensors: x, residual, w, h, y
    kk_tensor *const xwy[3] = {t[0], t[2], t[4]};
    AddArgs a;
    a.a = row_args(p, xwy, 3, 1, V);
    a.a.eps = p->f[KK__ARN_EPS];
    a.res = t[1]->data;
    a.h = t[3]->data;
    a.rows = a.a.rows;
    a.n = a.a.n;
    a.rs = a.rows > 1 ? t[1]->strides[0] : a.n;
    a.hs = a.rows > 1 ? t[3]->strides[0] : a.n;
    a.a.vec = a.a.vec && a.rs % V == 0 && a.hs % V == 0 && aligned16(a.res) && aligned16(a.h);
    return launch_rows<Kernels>(a, dt, static_cast<cudaStream_t>(stream));
}

extern "C" const kk__slot kk__add_rmsnorm_cuda_slot = {kk__add_rmsnorm_cuda, 1};
