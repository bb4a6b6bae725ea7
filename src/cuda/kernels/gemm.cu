// The gemm and linear slots on CUDA: their tensors to the kernels' arguments
// (strides read off the tensors), the choice of kernel (the GEMV for M <= 8,
// the skinny tensor-core kernel for M <= 64, Hopper's where the device and the
// tensor maps allow, else the sm_80-class one; KK_GEMM_KERNEL=sm80|sm90 forces one;
// KK_GEMM_SM90=cluster|single picks the Hopper kernel's form, KK_GEMM_EPILOGUE=regs
// its register-stored epilogue), the launch. bf16 and f16 here; f32 goes to
// kk_gemm::launch_f32 (gemm_f32.cu: TF32 or exact FMA by the configuration).
// docs/kernels/gemm.md.
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <type_traits>

#include "core/error.h"
#include "cuda/cuda_kernels.h"
#include "cuda/kernels/gemm_f32.cuh"
#include "cuda/kernels/gemm_gemv.cuh"
#include "cuda/kernels/gemm_sm80.cuh"
#include "cuda/kernels/gemm_sm90.cuh"
#include "cuda/kernels/gemm_skinny.cuh"
#include "cuda/kernels/launch_util.cuh"
#include "cuda/kernels/tma_host.cuh"
#include "opdef/gemm.h"
#include "opdef/linear.h"

namespace {

using kk_gemm::Args;

// Sizes the kernel's int indices hold (the op allows up to 2^24 each; products
// are taken in 64 bits).
bool fits_int(int64_t m, int64_t n, int64_t k) {
    return m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX;
}

// Rows a 16-byte load can take: 8-element multiples of stride, 16-byte data.
bool rows_aligned(const void *data, long long ld, int K) {
    return K % 8 == 0 && ld % 8 == 0 && reinterpret_cast<uintptr_t>(data) % 16 == 0;
}

// f32 rows a 16-byte load can take: 4-element multiples, 16-byte data.
bool rows_aligned_f32(const void *data, long long ld, int K) {
    return K % 4 == 0 && ld % 4 == 0 && reinterpret_cast<uintptr_t>(data) % 16 == 0;
}

template <typename T, int ACT, bool ALIGNED>
kk_status launch_as(const Args &a, cudaStream_t stream, const char *op) {
    using L = kk_gemm::Tile<ACT == kk_gemm::ACT_SWIGLU>;
    auto kernel = kk_gemm::gemm_kernel<T, ACT, ALIGNED>;
    cudaError_t e = kk_cuda::opt_in<kk_gemm::gemm_kernel<T, ACT, ALIGNED>>(L::kSmem);
    if (e == cudaSuccess) {
        const dim3 grid((unsigned)((a.N + L::BN - 1) / L::BN),
                        (unsigned)((a.M + L::BM - 1) / L::BM));
        kernel<<<grid, kk_gemm::kThreads, L::kSmem, stream>>>(a);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) return KK_OK;
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, op, cudaGetErrorName(e), cudaGetErrorString(e),
                          "launching the gemm kernel failed");
}

// A [rows, K] matrix of 16-bit elements, row stride ld, in boxes of 64
// columns by box_rows rows with the 128-byte swizzle; false when the
// accelerator cannot take it (16-byte aligned base and row stride).
bool matrix_map(CUtensorMap *map, const void *base, bool bf16, int rows, int K, long long ld,
                int box_rows) {
    const PFN_cuTensorMapEncodeTiled_v12000 encode = kk_cuda::tensor_map_encoder();
    if (!encode || (reinterpret_cast<uintptr_t>(base) & 15) || (ld * 2) % 16 || ld < K)
        return false;
    const cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {
        (cuuint64_t)(rows > 1 ? ld * 2 : ((int64_t)K * 2 + 15) / 16 * 16)};
    const cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
    const cuuint32_t elem_strides[2] = {1, 1};
    return encode(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
                  const_cast<void *>(base), dims, strides, box, elem_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// KK_GEMM_KERNEL=sm80 or sm90 forces that kernel (where it applies) over the
// default choice.
bool forced(const char *name) {
    const char *e = getenv("KK_GEMM_KERNEL");
    return e && strcmp(e, name) == 0;
}

// The decode kernel for M <= 8: MMAX the smallest of 1, 2, 4, 8 that holds M.
template <typename T, int ACT, int MMAX>
kk_status launch_gemv(const Args &a, cudaStream_t s, const char *op) {
    const int rows_per_block = kk_gemm::kGemvWarps * kk_gemm::kGemvRows;
    const unsigned grid = (unsigned)((a.N + rows_per_block - 1) / rows_per_block);
    kk_gemm::gemv_kernel<T, ACT, MMAX><<<grid, kk_gemm::kGemvWarps * 32, 0, s>>>(a);
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return KK_OK;
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, op, cudaGetErrorName(e), cudaGetErrorString(e),
                          "launching the gemv kernel failed");
}

// The skinny kernel for 8 < M <= 64: MT m16 tiles hold M. Its pipelined form
// for MT >= 2, the plain one for MT = 1 (measured faster each where it runs);
// KK_GEMM_SKINNY=plain|pipe forces one.
template <typename T, int ACT, int MT, bool PIPE>
kk_status launch_skinny_as(const Args &a, cudaStream_t s, const char *op) {
    using S = kk_gemm::Skinny<ACT == kk_gemm::ACT_SWIGLU>;
    cudaError_t e = kk_cuda::opt_in<kk_gemm::skinny_kernel<T, ACT, MT, PIPE>>(S::smem(MT));
    if (e == cudaSuccess) {
        const unsigned grid = (unsigned)((a.N + S::ROWS - 1) / S::ROWS);
        kk_gemm::skinny_kernel<T, ACT, MT, PIPE>
            <<<grid, kk_gemm::kSkinnyWarps * 32, S::smem(MT), s>>>(a);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) return KK_OK;
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, op, cudaGetErrorName(e), cudaGetErrorString(e),
                          "launching the skinny gemm kernel failed");
}

template <typename T, int ACT, int MT>
kk_status launch_skinny(const Args &a, cudaStream_t s, const char *op) {
    const char *e = getenv("KK_GEMM_SKINNY");
    const bool pipe = e && strcmp(e, "pipe") == 0    ? true
                      : e && strcmp(e, "plain") == 0 ? false
                                                     : MT >= 2;
    return pipe ? launch_skinny_as<T, ACT, MT, true>(a, s, op)
                : launch_skinny_as<T, ACT, MT, false>(a, s, op);
}

// KK_GEMM_SM90=cluster: the Hopper kernel in 2-CTA clusters (else the
// single-CTA one, the default until measured).
bool sm90_cluster() {
    const char *e = getenv("KK_GEMM_SM90");
    return e && strcmp(e, "cluster") == 0;
}

// The launch configuration of the 2-CTA cluster kernel (attr the caller's).
cudaLaunchConfig_t cluster_config(unsigned blocks, cudaStream_t stream, cudaLaunchAttribute *attr) {
    *attr = cudaLaunchAttribute{};
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = 2, attr->val.clusterDim.y = 1, attr->val.clusterDim.z = 1;
    cudaLaunchConfig_t c = {};
    c.gridDim = dim3(blocks), c.blockDim = dim3(kk_gemm::Sm90::kThreads);
    c.dynamicSmemBytes = kk_gemm::Sm90::kSmem, c.stream = stream;
    c.attrs = attr, c.numAttrs = 1;
    return c;
}

// 2-CTA clusters of `Kernel` that fit on the current device at once (SMs
// pair up within a GPC, so possibly fewer than SMs / 2), once per device; 0
// when the query fails.
template <auto Kernel> int clusters_that_fit() {
    static std::atomic<int> cached[64]; // the count + 1; 0 unknown
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 0;
    int v = cached[dev].load(std::memory_order_relaxed);
    if (v == 0) {
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t c = cluster_config((unsigned)(kk_cuda::sm_count() & ~1), 0, &attr);
        int n = 0;
        if (cudaOccupancyMaxActiveClusters(&n, Kernel, &c) != cudaSuccess)
            n = 0, (void)cudaGetLastError();
        v = n + 1;
        cached[dev].store(v, std::memory_order_relaxed);
    }
    return v - 1;
}

// The Hopper kernel, or cudaErrorNotSupported when the tensors do not suit
// the tensor maps (the caller then launches the sm_80-class kernel).
// CLUSTER: the 2-CTA form (its b boxes are half of a tile). Its epilogue
// stores 16 x 64 boxes of c with the TMA where c's rows suit a tensor map
// (16-byte aligned base and row stride), else straight from registers.
template <typename T, int ACT, bool CLUSTER>
cudaError_t launch_sm90(const Args &a, cudaStream_t stream) {
    using S = kk_gemm::Sm90;
    constexpr bool GLU = ACT == kk_gemm::ACT_SWIGLU;
    constexpr bool bf16 = std::is_same<T, __nv_bfloat16>::value;
    constexpr int BN = S::BN<GLU>, b_box = CLUSTER ? S::kBHalf : BN;
    CUtensorMap ta, tb0, tb1, tc;
    if (!matrix_map(&ta, a.a, bf16, a.M, a.K, a.lda, S::BM) ||
        !matrix_map(&tb0, a.b0, bf16, a.N, a.K, a.ldb, b_box) ||
        (GLU && !matrix_map(&tb1, a.b1, bf16, a.N, a.K, a.ldb, b_box)))
        return cudaErrorNotSupported;
    if (!GLU) tb1 = tb0;
    const int tma_store = !kk_cuda::epilogue_from_registers() &&
                          matrix_map(&tc, a.c, bf16, a.M, a.N, a.ldc, S::kBoxRows);
    if (!tma_store) tc = ta; // unused
    auto kernel = kk_gemm::gemm_sm90_kernel<T, ACT, CLUSTER>;
    cudaError_t e = kk_cuda::opt_in<kk_gemm::gemm_sm90_kernel<T, ACT, CLUSTER>>(S::kSmem);
    if (e != cudaSuccess) return e;
    const long long tiles_m = ((long long)a.M + S::BM - 1) / S::BM,
                    tiles_n = ((long long)a.N + BN - 1) / BN;
    if (tiles_m * tiles_n > INT32_MAX) return cudaErrorNotSupported;
    if constexpr (CLUSTER) {
        // units: pairs of m tiles of one n column, one per cluster at a time
        const long long units = (tiles_m + 1) / 2 * tiles_n;
        const int fit = clusters_that_fit<kk_gemm::gemm_sm90_kernel<T, ACT, CLUSTER>>();
        if (fit <= 0) return cudaErrorNotSupported; // the caller runs the single-CTA form
        const int clusters = units < fit ? (int)units : fit;
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t c = cluster_config((unsigned)(2 * clusters), stream, &attr);
        return cudaLaunchKernelEx(&c, kernel, ta, tb0, tb1, tc, a, tma_store);
    } else {
        const long long tiles = tiles_m * tiles_n;
        const int blocks = tiles < kk_cuda::sm_count() ? (int)tiles : kk_cuda::sm_count();
        kernel<<<blocks, S::kThreads, S::kSmem, stream>>>(ta, tb0, tb1, tc, a, tma_store);
        return cudaGetLastError();
    }
}

template <typename T, int ACT>
kk_status launch_act(const Args &a, bool aligned, cudaStream_t s, const char *op) {
    if (aligned && a.M <= 8 && !forced("sm80") && !forced("sm90")) {
        if (a.M == 1) return launch_gemv<T, ACT, 1>(a, s, op);
        if (a.M == 2) return launch_gemv<T, ACT, 2>(a, s, op);
        if (a.M <= 4) return launch_gemv<T, ACT, 4>(a, s, op);
        return launch_gemv<T, ACT, 8>(a, s, op);
    }
    // 8 < M <= 64: the skinny kernel, unless the Hopper kernel's tiles alone
    // fill the GPU (SwiGLU over a wide intermediate: measured as fast as cuBLAS)
    constexpr int hopper_bn = kk_gemm::Sm90::BN<ACT == kk_gemm::ACT_SWIGLU>;
    const bool hopper_fills =
        (long long)((a.N + hopper_bn - 1) / hopper_bn) * 4 >= 3LL * kk_cuda::sm_count();
    if (aligned && a.M <= 64 && !forced("sm80") && !forced("sm90") &&
        !(hopper_fills && kk_cuda::sm90a_ready<kk_gemm::gemm_sm90_kernel<T, ACT>>())) {
        if (a.M <= 16) return launch_skinny<T, ACT, 1>(a, s, op);
        if (a.M <= 32) return launch_skinny<T, ACT, 2>(a, s, op);
        return launch_skinny<T, ACT, 4>(a, s, op);
    }
    if (aligned && !forced("sm80") && kk_cuda::sm90a_ready<kk_gemm::gemm_sm90_kernel<T, ACT>>()) {
        cudaError_t e = cudaErrorNotSupported;
        if (sm90_cluster()) e = launch_sm90<T, ACT, true>(a, s);
        if (e == cudaErrorNotSupported) e = launch_sm90<T, ACT, false>(a, s);
        if (e == cudaSuccess) return KK_OK;
        if (e != cudaErrorNotSupported)
            return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, op, cudaGetErrorName(e),
                                  cudaGetErrorString(e), "launching the Hopper gemm kernel failed");
    }
    return aligned ? launch_as<T, ACT, true>(a, s, op) : launch_as<T, ACT, false>(a, s, op);
}

template <typename T>
kk_status launch_typed(const Args &a, bool aligned, cudaStream_t s, const char *op) {
    switch (a.act) {
    case kk_gemm::ACT_RELU: return launch_act<T, kk_gemm::ACT_RELU>(a, aligned, s, op);
    case kk_gemm::ACT_GELU_ERF: return launch_act<T, kk_gemm::ACT_GELU_ERF>(a, aligned, s, op);
    case kk_gemm::ACT_GELU_TANH: return launch_act<T, kk_gemm::ACT_GELU_TANH>(a, aligned, s, op);
    case kk_gemm::ACT_SILU: return launch_act<T, kk_gemm::ACT_SILU>(a, aligned, s, op);
    case kk_gemm::ACT_SWIGLU: return launch_act<T, kk_gemm::ACT_SWIGLU>(a, aligned, s, op);
    default: return launch_act<T, kk_gemm::ACT_NONE>(a, aligned, s, op);
    }
}

// Checks what every form shares and launches; tensors are on this device
// (kk_op_run checked them), rows contiguous in their last dimension.
kk_status run(Args &a, kk_dtype dt, const kk_tensor *const *mats, int nmats, bool glu,
              cudaStream_t stream, const char *op) {
    if (dt != KK_DTYPE_BF16 && dt != KK_DTYPE_F16 && dt != KK_DTYPE_F32)
        return kk__error(KK_ERR_UNSUPPORTED, op, "the cuda kernel takes bf16, f16 and f32, not %s",
                         kk_dtype_name(dt));
    if ((a.M + 127) / 128 > 65535)
        return kk__error(KK_ERR_UNSUPPORTED, op, "the cuda kernel's grid is too small for M = %d",
                         a.M);
    for (int k = 0; k < nmats; k++) {
        const kk_tensor *t = mats[k];
        if (t->ndim == 2 && t->strides[1] != 1)
            return kk__error(KK_ERR_UNSUPPORTED, op, "the cuda kernel needs contiguous rows");
    }
    if (dt == KK_DTYPE_F32) {
        const bool aligned = rows_aligned_f32(a.a, a.lda, a.K) &&
                             rows_aligned_f32(a.b0, a.ldb, a.K) &&
                             (!glu || rows_aligned_f32(a.b1, a.ldb, a.K));
        return kk_gemm::launch_f32(a, aligned, stream, op);
    }
    const bool aligned = rows_aligned(a.a, a.lda, a.K) && rows_aligned(a.b0, a.ldb, a.K) &&
                         (!glu || rows_aligned(a.b1, a.ldb, a.K));
    return dt == KK_DTYPE_BF16 ? launch_typed<__nv_bfloat16>(a, aligned, stream, op)
                               : launch_typed<__half>(a, aligned, stream, op);
}

} // namespace

extern "C" kk_status kk__gemm_cuda(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    if (!fits_int(p->i[KK__GEMM_M], p->i[KK__GEMM_N], p->i[KK__GEMM_K]))
        return kk__error(KK_ERR_UNSUPPORTED, "gemm", "the cuda kernel takes sizes below 2^31");
    Args a;
    memset(&a, 0, sizeof a);
    a.M = (int)p->i[KK__GEMM_M], a.N = (int)p->i[KK__GEMM_N], a.K = (int)p->i[KK__GEMM_K];
    a.a = t[0]->data, a.lda = t[0]->strides[0];
    a.b0 = t[1]->data, a.ldb = t[1]->strides[0];
    a.c = t[2]->data, a.ldc = t[2]->strides[0];
    a.act = kk_gemm::ACT_NONE;
    const kk_tensor *mats[] = {t[0], t[1], t[2]};
    return run(a, (kk_dtype)p->i[KK__GEMM_DTYPE], mats, 3, false, static_cast<cudaStream_t>(stream),
               "gemm");
}

extern "C" kk_status kk__linear_cuda(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    const kk__linear_layout l = kk__linear_layout_of(p);
    const bool glu = p->i[KK__LIN_ACT] == KK__ACT_SWIGLU;
    if (!fits_int(p->i[KK__LIN_M], p->i[KK__LIN_N], p->i[KK__LIN_K]))
        return kk__error(KK_ERR_UNSUPPORTED, "linear", "the cuda kernel takes sizes below 2^31");
    Args a;
    memset(&a, 0, sizeof a);
    a.M = (int)p->i[KK__LIN_M], a.N = (int)p->i[KK__LIN_N], a.K = (int)p->i[KK__LIN_K];
    a.a = t[l.x]->data, a.lda = t[l.x]->strides[0];
    a.b0 = t[l.w]->data, a.ldb = t[l.w]->strides[0];
    if (glu) {
        a.b1 = t[l.w_up]->data;
        if (t[l.w_up]->strides[0] != a.ldb)
            return kk__error(KK_ERR_UNSUPPORTED, "linear",
                             "the cuda kernel takes w_gate and w_up with one row stride");
    }
    if (l.bias >= 0) a.bias0 = t[l.bias]->data;
    if (l.bias_up >= 0) a.bias1 = t[l.bias_up]->data;
    if (l.residual >= 0) a.res = t[l.residual]->data, a.ldr = t[l.residual]->strides[0];
    a.c = t[l.y]->data, a.ldc = t[l.y]->strides[0];
    a.act = (int)p->i[KK__LIN_ACT]; // the op's activation choices are kk_gemm::Act's order
    const kk_tensor *mats[] = {t[l.x], t[l.w], t[l.y], glu ? t[l.w_up] : t[l.w],
                               l.residual >= 0 ? t[l.residual] : t[l.y]};
    return run(a, (kk_dtype)p->i[KK__LIN_DTYPE], mats, 5, glu, static_cast<cudaStream_t>(stream),
               "linear");
}

extern "C" const kk__slot kk__gemm_cuda_slot = {kk__gemm_cuda, 1};
extern "C" const kk__slot kk__linear_cuda_slot = {kk__linear_cuda, 1};
