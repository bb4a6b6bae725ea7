// silu_mul on CUDA: y = silu(g) * u, silu(v) = v / (1 + e^-v), from one
// packed gu [M, 2N] (g then u in each row) or two [M, N] inputs; f32 math.
// Elementwise: each thread takes 16-byte vectors (row, column) over a
// grid-stride loop, one read of g and u and one write of y. f32: e^-v is the
// CPU twin's polynomial (cpu_gemm_internal.h's kk__expf), every step rounded
// as there, so y is the CPU's bits. bf16 and f16: the hardware's exponential
// and reciprocal (a few ulp of f32, far below the output's rounding, and an
// eighth of the instructions: at full rows the kernel was bound by them).
#include <cuda_runtime.h>

#include <stdint.h>

#include "cuda/kernels/rows.cuh"
#include "cuda/cuda_kernels.h"
#include "opdef/silu_mul.h"

namespace {

using namespace kk_rows;

struct SiluArgs {
    const void *g, *u;
    void *y;
    int64_t M, N, gs, us, ys; // row strides in elements
    int64_t nv;               // vectors per row
    int vec;
};

// kk__expf: clamp to [-87.3, 88], e^x = 2^k e^r with a degree-6 polynomial.
__device__ __forceinline__ float cpu_expf(float x) {
    x = x >= -87.3f ? x : -87.3f; // NaN too, as kk__select does
    x = x > 88.0f ? 88.0f : x;
    const float k =
        __fsub_rn(__fadd_rn(__fmul_rn(x, 1.44269504088896341f), 12582912.0f), 12582912.0f);
    float r = __fsub_rn(x, __fmul_rn(k, 0.693359375f));
    r = __fsub_rn(r, __fmul_rn(k, -2.12194440e-4f));
    float p = 1.9875691500e-4f;
    p = __fadd_rn(__fmul_rn(p, r), 1.3981999507e-3f);
    p = __fadd_rn(__fmul_rn(p, r), 8.3334519073e-3f);
    p = __fadd_rn(__fmul_rn(p, r), 4.1665795894e-2f);
    p = __fadd_rn(__fmul_rn(p, r), 1.6666665459e-1f);
    p = __fadd_rn(__fmul_rn(p, r), 5.0000001201e-1f);
    p = __fadd_rn(__fadd_rn(__fmul_rn(__fmul_rn(p, r), r), r), 1.0f);
    const float two_k = __uint_as_float((uint32_t)((int32_t)k + 127) << 23);
    return __fmul_rn(p, two_k);
}

__device__ __forceinline__ float silu(float v) {
    return __fdiv_rn(v, __fadd_rn(1.0f, cpu_expf(-v)));
}

// v / (1 + e^-v) by ex2.approx and rcp.approx: 0 (signed) once e^-v
// overflows, v once it underflows, NaN for NaN.
__device__ __forceinline__ float silu_fast(float v) { return __fdividef(v, 1.0f + __expf(-v)); }

template <int DT, bool VEC> __global__ void __launch_bounds__(256) silu_mul_kernel(SiluArgs a) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec;
    // item = r * nv + c; the grid stride is split once into rows and vectors,
    // so the loop carries (r, c) without a 64-bit division per item
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t dr = stride / a.nv, dc = stride % a.nv;
    for (int64_t r = first / a.nv, c = first % a.nv; r < a.M;) {
        const int64_t i = c * V;
        float g[V], u[V];
        load<DT>(static_cast<const T *>(a.g) + r * a.gs, i, a.N, VEC, g, 0.0f);
        load<DT>(static_cast<const T *>(a.u) + r * a.us, i, a.N, VEC, u, 0.0f);
#pragma unroll
        for (int j = 0; j < V; j++)
            g[j] = DT == kF32 ? __fmul_rn(silu(g[j]), u[j]) : silu_fast(g[j]) * u[j];
        store<DT>(static_cast<T *>(a.y) + r * a.ys, i, a.N, VEC, g);
        r += dr, c += dc;
        if (c >= a.nv) c -= a.nv, r++;
    }
}

template <int DT, bool VEC> kk_status launch_vec(const SiluArgs &a, cudaStream_t s) {
    constexpr auto kernel = &silu_mul_kernel<DT, VEC>;
    const int64_t blocks = (a.M * a.nv + 255) / 256;
    const unsigned grid = grid_for<kernel>(blocks, 256);
    kernel<<<grid, 256, 0, s>>>(a);
    return launch_status("silu_mul", grid, 256);
}

template <int DT> kk_status launch(const SiluArgs &a, cudaStream_t s) {
    return a.vec ? launch_vec<DT, true>(a, s) : launch_vec<DT, false>(a, s);
}

} // namespace

extern "C" kk_status kk__silu_mul_cuda(const kk_op_params *p, kk_tensor *const *t,
                                       kk_stream stream) {
    const kk_status st = check_tensors(p, t);
    if (st != KK_OK) return st;
    const kk_dtype dt = (kk_dtype)p->i[KK__SILU_DTYPE];
    const int packed = (int)p->i[KK__SILU_PACKED];
    const int V = dt == KK_DTYPE_F32 ? 4 : 8;
    const kk_tensor *g = t[0], *u = packed ? t[0] : t[1], *y = t[packed ? 1 : 2];
    SiluArgs a;
    a.M = p->i[KK__SILU_M];
    a.N = p->i[KK__SILU_N];
    const int64_t es = (int64_t)kk_dtype_bytes(dt, 1);
    a.g = g->data;
    // packed: u is the second half of each gu row
    a.u = packed ? static_cast<const char *>(u->data) + a.N * es : u->data;
    a.y = y->data;
    a.gs = a.M > 1 ? g->strides[0] : g->shape[1];
    a.us = a.M > 1 ? u->strides[0] : u->shape[1];
    a.ys = a.M > 1 ? y->strides[0] : a.N;
    a.nv = (a.N + V - 1) / V;
    a.vec = a.N % V == 0 && a.gs % V == 0 && a.us % V == 0 && a.ys % V == 0 && aligned16(a.g) &&
            aligned16(a.u) && aligned16(a.y);
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (dt == KK_DTYPE_F32) return launch<kF32>(a, s);
    if (dt == KK_DTYPE_F16) return launch<kF16>(a, s);
    return launch<kBF16>(a, s);
}

extern "C" const kk__slot kk__silu_mul_cuda_slot = {kk__silu_mul_cuda, 1};
