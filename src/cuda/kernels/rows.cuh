// Shared by the row kernels (rmsnorm.cu, layernorm.cu, softmax.cu, rope.cu):
// f32/f16/bf16 elements as f32 (the CPU's conversions, bit for bit), 16-byte
// vector loads and stores with a scalar twin, warp and block reductions, the
// choice of threads per row and the grid. Design: docs/kernels/memory_bound.md.
#ifndef KK_CUDA_KERNELS_ROWS_CUH
#define KK_CUDA_KERNELS_ROWS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>

#include <stdint.h>

#include "core/error.h"
#include "cuda/kernels/convert.cuh"
#include "cuda/kernels/launch_util.cuh"
#include "opdef/opdef.h"

namespace kk_rows {

enum { kF32 = 0, kF16 = 1, kBF16 = 2 };

// Storage of one element and elements per 16-byte vector.
template <int DT> struct Elem {
    typedef uint16_t T;
    static constexpr int kVec = 8;
};
template <> struct Elem<kF32> {
    typedef float T;
    static constexpr int kVec = 4;
};

template <int DT> __device__ __forceinline__ float to_f32(typename Elem<DT>::T v);
template <> __device__ __forceinline__ float to_f32<kF32>(float v) { return v; }
template <> __device__ __forceinline__ float to_f32<kF16>(uint16_t v) {
    return __half2float(__ushort_as_half(v));
}
template <> __device__ __forceinline__ float to_f32<kBF16>(uint16_t v) {
    return __uint_as_float((uint32_t)v << 16);
}

// Round to nearest even, NaN kept quiet: kk_f32_to_f16 / kk_f32_to_bf16's bits.
template <int DT> __device__ __forceinline__ typename Elem<DT>::T from_f32(float f);
template <> __device__ __forceinline__ float from_f32<kF32>(float f) { return f; }
template <> __device__ __forceinline__ uint16_t from_f32<kF16>(float f) {
    const uint32_t u = __float_as_uint(f);
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? kk_convert::f32bits_to_f16(u)
                                           : __half_as_ushort(__float2half_rn(f));
}
template <> __device__ __forceinline__ uint16_t from_f32<kBF16>(float f) {
    return kk_convert::f32bits_to_bf16(__float_as_uint(f));
}

// a and b rounded to 16 bits each, a in the low half (the lower address).
template <int DT> __device__ __forceinline__ uint32_t pack2(float a, float b);
template <> __device__ __forceinline__ uint32_t pack2<kBF16>(float a, float b) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<kF16>(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t *>(&h);
}

// Element j of the vector at `base` is in a row of n: with VEC (n a multiple
// of the vector) the vector's test decides for all its elements, at compile
// time per element.
template <bool VEC> __device__ __forceinline__ bool elem_in(int64_t base, int j, int64_t n) {
    return VEC ? base < n : base + j < n;
}

// Elements [i, i + kVec) of row p into f (elements at or past n: `fill`).
// vec: one 16-byte load (the caller guarantees i % kVec == 0, n % kVec == 0
// and p 16-byte aligned); else one load per element.
template <int DT>
__device__ __forceinline__ void load(const void *p, int64_t i, int64_t n, bool vec,
                                     float (&f)[Elem<DT>::kVec], float fill) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec;
    const T *row = static_cast<const T *>(p);
    if (vec) {
        if (i < n) {
            const uint4 u = *reinterpret_cast<const uint4 *>(row + i);
            const T *e = reinterpret_cast<const T *>(&u);
#pragma unroll
            for (int j = 0; j < V; j++) f[j] = to_f32<DT>(e[j]);
        } else {
#pragma unroll
            for (int j = 0; j < V; j++) f[j] = fill;
        }
    } else {
#pragma unroll
        for (int j = 0; j < V; j++) f[j] = i + j < n ? to_f32<DT>(row[i + j]) : fill;
    }
}

// The same through the read-only cache (w and b, read by every row).
template <int DT>
__device__ __forceinline__ void load_ro(const void *p, int64_t i, int64_t n, bool vec,
                                        float (&f)[Elem<DT>::kVec]) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec;
    const T *row = static_cast<const T *>(p);
    if (vec) {
        const uint4 u = __ldg(reinterpret_cast<const uint4 *>(row + i));
        const T *e = reinterpret_cast<const T *>(&u);
#pragma unroll
        for (int j = 0; j < V; j++) f[j] = to_f32<DT>(e[j]);
    } else {
#pragma unroll
        for (int j = 0; j < V; j++) f[j] = i + j < n ? to_f32<DT>(__ldg(row + i + j)) : 0.0f;
    }
}

// f rounded into elements [i, i + kVec) of row p, those below n.
template <int DT>
__device__ __forceinline__ void store(void *p, int64_t i, int64_t n, bool vec,
                                      const float (&f)[Elem<DT>::kVec]) {
    typedef typename Elem<DT>::T T;
    constexpr int V = Elem<DT>::kVec;
    T *row = static_cast<T *>(p);
    if (vec) {
        if (i < n) {
            uint4 u;
            if constexpr (DT == kF32) {
                u = make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                               __float_as_uint(f[3]));
            } else {
                // two elements a conversion (cvt.rn.{bf16,f16}x2.f32): round to
                // nearest even as from_f32, except that a NaN comes out as the
                // canonical NaN rather than keeping its sign and payload
                uint32_t *w = reinterpret_cast<uint32_t *>(&u);
#pragma unroll
                for (int j = 0; j < V / 2; j++) w[j] = pack2<DT>(f[2 * j], f[2 * j + 1]);
            }
            *reinterpret_cast<uint4 *>(row + i) = u;
        }
    } else {
#pragma unroll
        for (int j = 0; j < V; j++)
            if (i + j < n) row[i + j] = from_f32<DT>(f[j]);
    }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
    return v;
}

// Sum over the G threads of a row: a warp (G = 32: shuffles only) or the whole
// block (G = blockDim.x: warps through `red`, then one warp's butterfly, which
// every warp repeats, so every thread gets the same bits). Ends with a
// barrier, so `red` may be reused at once.
template <int G> __device__ __forceinline__ float group_sum(float v, float *red) {
    v = warp_sum(v);
    if (G == 32) return v;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < G / 32 ? red[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}

// Order-preserving keys of floats (as the CPU softmax's row_max): ~bits for
// negatives, bits | 2^31 otherwise; +NaN sorts above +inf. 0 is below -inf.
__device__ __forceinline__ uint32_t float_key(float f) {
    const uint32_t u = __float_as_uint(f);
    return u ^ ((0u - (u >> 31)) | 0x80000000u);
}
__device__ __forceinline__ float key_float(uint32_t k) {
    return __uint_as_float(k ^ ((0u - ((k >> 31) ^ 1u)) | 0x80000000u));
}

template <int G> __device__ __forceinline__ uint32_t group_max(uint32_t k, uint32_t *red) {
    k = __reduce_max_sync(0xFFFFFFFFu, k);
    if (G == 32) return k;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) red[warp] = k;
    __syncthreads();
    k = lane < G / 32 ? red[lane] : 0u;
    k = __reduce_max_sync(0xFFFFFFFFu, k);
    __syncthreads();
    return k;
}

// A row's threads: G = 32 is a warp per row, four rows per block of 128;
// G >= 128 is a block per row. Each thread holds VPT vectors of the row in
// registers: vector k of thread t is elements [(k G + t) V, (k G + t) V + V),
// so a warp's loads are consecutive 16-byte vectors.
template <int G> struct Group {
    static constexpr int kThreads = G < 128 ? 128 : G;
    static constexpr int kRowsPerBlock = kThreads / G;
    __device__ static int thread() { return G == 32 ? threadIdx.x & 31 : threadIdx.x; }
    __device__ static int64_t first_row() {
        return (int64_t)blockIdx.x * kRowsPerBlock + (G == 32 ? threadIdx.x >> 5 : 0);
    }
    __device__ static int64_t row_step() { return (int64_t)gridDim.x * kRowsPerBlock; }
};

// Threads per row and vectors per thread for a row of nv vectors (the table
// in docs/kernels/memory_bound.md); 0: longer than registers hold (the
// two-pass kernels). At most 32 floats a thread, 16 at 1024 threads.
struct Shape {
    int g, vpt;
};
inline Shape choose_shape(int64_t nv, int vec) {
    if (nv <= 32) return {32, 1};
    if (nv <= 64) return {32, 2};
    if (nv <= 128) return {32, 4};
    if (nv <= 256) return {128, 2};
    if (nv <= 512) return {128, 4};
    if (nv <= 1024) return {256, 4};
    if (nv <= 2048) return {512, 4};
    if (nv <= 4096 && vec == 4) return {1024, 4};
    return {0, 0};
}

// Resident blocks of `Kernel` per SM (at `threads`), read once per device.
template <auto Kernel> int blocks_per_sm(int threads) {
    static std::atomic<int> cached[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) dev = 0;
    int n = cached[dev].load(std::memory_order_relaxed);
    if (n == 0) {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, threads, 0) != cudaSuccess ||
            n < 1)
            n = 1;
        cached[dev].store(n, std::memory_order_relaxed);
    }
    return n;
}

// The grid of a grid-stride kernel over `units` (rows or row groups): every
// unit its own block while they fit resident on the GPU at once, else as many
// blocks as are resident.
template <auto Kernel> unsigned grid_for(int64_t units, int threads) {
    const int64_t resident = (int64_t)kk_cuda::sm_count() * blocks_per_sm<Kernel>(threads);
    const int64_t g = units < resident ? units : resident;
    return (unsigned)(g < 1 ? 1 : g);
}

// What the norm and softmax kernels take: rows of n elements, x and y each
// with its own row stride (elements); w and b [n] contiguous (NULL: none).
struct RowArgs {
    const void *x, *w, *b;
    void *y;
    int64_t rows, n, xs, ys;
    double eps;
    float scale;
    int vec;    // 16-byte vectors: n, xs, ys multiples of V, pointers aligned
    int causal; // softmax: row r sees keys [0, visible(r)) (kk__softmax_visible)
    int64_t sq; // softmax with causal: queries per matrix
};

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

// Whether a launch takes the vector path: RowArgs' vec, or that of the RowArgs
// inside an op's own arguments (add_rmsnorm's `a`).
inline bool vec_of(const RowArgs &a) { return a.vec != 0; }
template <class A> inline bool vec_of(const A &args) { return args.a.vec != 0; }

// The tensors are those the parameters describe (kk_op_run has checked; a
// harness bug must still not become a wild write): dtype, shape, on CUDA, the
// innermost dimension contiguous (the slots take strided rows).
inline kk_status check_tensors(const kk_op_params *p, kk_tensor *const *t) {
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    const int n = p->op->describe(p, d);
    for (int k = 0; k < n; k++) {
        bool ok = t && t[k] && t[k]->dtype == d[k].dtype && t[k]->ndim == d[k].ndim &&
                  t[k]->device_kind == KK_BACKEND_CUDA && t[k]->data;
        for (int j = 0; ok && j < d[k].ndim; j++) ok = t[k]->shape[j] == d[k].shape[j];
        if (ok && d[k].ndim > 0) ok = t[k]->strides[d[k].ndim - 1] == 1;
        if (!ok)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, p->op->name, d[k].name,
                                 "a cuda tensor of the described dtype and shape, innermost "
                                 "dimension contiguous",
                                 "%s", t && t[k] ? t[k]->device : "NULL");
    }
    return KK_OK;
}

// The row arguments of a norm or softmax from checked tensors: x first, y
// last, w and b (if `weights`) between.
inline RowArgs row_args(const kk_op_params *p, kk_tensor *const *t, int ntensors, int weights,
                        int V) {
    RowArgs a;
    const kk_tensor *x = t[0], *y = t[ntensors - 1];
    a.x = x->data;
    a.y = y->data;
    a.w = weights ? t[1]->data : nullptr;
    a.b = weights == 2 ? t[2]->data : nullptr;
    a.rows = x->shape[0];
    a.n = x->shape[1];
    a.xs = a.rows > 1 ? x->strides[0] : a.n;
    a.ys = a.rows > 1 ? y->strides[0] : a.n;
    a.eps = 0.0;
    a.scale = 1.0f;
    a.causal = 0;
    a.sq = 1;
    a.vec = a.n % V == 0 && a.xs % V == 0 && a.ys % V == 0 && aligned16(a.x) && aligned16(a.y) &&
            (!a.w || aligned16(a.w)) && (!a.b || aligned16(a.b));
    (void)p;
    return a;
}

inline kk_status launch_status(const char *op, int64_t grid, int threads) {
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return KK_OK;
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, op, cudaGetErrorName(e), cudaGetErrorString(e),
                          "kernel launch failed (%lld blocks of %d threads)", (long long)grid,
                          threads);
}

// The launch the norms and softmax share: the shape the row length asks for
// (choose_shape) and the op's kernel for it, or its two-pass kernel for rows
// longer than registers hold. Op names its kernels:
//   struct Op {
//       static constexpr const char *kName = "rmsnorm";
//       template <int DT, int G, int VPT, bool VEC>
//       static constexpr auto Rows = &rmsnorm_kernel<DT, G, VPT, VEC>;
//       template <int DT> static constexpr auto Long = &rmsnorm_long<DT>;
//   };
// VEC: the 16-byte vector path (a.vec), a template constant so that the
// vector kernels carry no scalar twin and no per-element bounds tests.
// A: RowArgs, or an op's own arguments with rows and n (add_rmsnorm's).
template <class Op, int DT, int G, int VPT, bool VEC, class A>
kk_status launch_vec(const A &a, cudaStream_t s) {
    constexpr auto kernel = Op::template Rows<DT, G, VPT, VEC>;
    constexpr int threads = Group<G>::kThreads, rpb = Group<G>::kRowsPerBlock;
    const unsigned grid = grid_for<kernel>((a.rows + rpb - 1) / rpb, threads);
    kernel<<<grid, threads, 0, s>>>(a);
    return launch_status(Op::kName, grid, threads);
}

template <class Op, int DT, int G, int VPT, class A>
kk_status launch_shape(const A &a, cudaStream_t s) {
    return vec_of(a) ? launch_vec<Op, DT, G, VPT, true>(a, s)
                     : launch_vec<Op, DT, G, VPT, false>(a, s);
}

template <class Op, int DT, class A> kk_status launch_long(const A &a, cudaStream_t s) {
    constexpr auto kernel = Op::template Long<DT>;
    const unsigned grid = grid_for<kernel>(a.rows, 1024);
    kernel<<<grid, 1024, 0, s>>>(a);
    return launch_status(Op::kName, grid, 1024);
}

template <class Op, int DT, class A> kk_status launch_dtype(const A &a, cudaStream_t s) {
    constexpr int V = Elem<DT>::kVec;
    const Shape sh = choose_shape((a.n + V - 1) / V, V);
    switch (sh.g * 8 + sh.vpt) {
    case 32 * 8 + 1: return launch_shape<Op, DT, 32, 1>(a, s);
    case 32 * 8 + 2: return launch_shape<Op, DT, 32, 2>(a, s);
    case 32 * 8 + 4: return launch_shape<Op, DT, 32, 4>(a, s);
    case 128 * 8 + 2: return launch_shape<Op, DT, 128, 2>(a, s);
    case 128 * 8 + 4: return launch_shape<Op, DT, 128, 4>(a, s);
    case 256 * 8 + 4: return launch_shape<Op, DT, 256, 4>(a, s);
    case 512 * 8 + 4: return launch_shape<Op, DT, 512, 4>(a, s);
    case 1024 * 8 + 4:
        if constexpr (V == 4) return launch_shape<Op, DT, 1024, 4>(a, s);
        return launch_long<Op, DT>(a, s);
    default: return launch_long<Op, DT>(a, s);
    }
}

template <class Op, class A> kk_status launch_rows(const A &a, kk_dtype dt, cudaStream_t s) {
    if (dt == KK_DTYPE_F32) return launch_dtype<Op, kF32>(a, s);
    if (dt == KK_DTYPE_F16) return launch_dtype<Op, kF16>(a, s);
    return launch_dtype<Op, kBF16>(a, s);
}

} // namespace kk_rows

#endif
