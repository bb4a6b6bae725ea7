// The fp8_gemm slot on CUDA: the op's tensors to the Hopper kernel's
// arguments and tensor maps, the kernel's choice (promoting by default;
// KK_FP8_FAST_ACCUM=1 takes the non-promoting one for tensor and row-wise
// scales, as cuBLASLt's fast accumulation), the launch; fp8_linear's fused
// epilogue (bias, activation, residual: kk__fp8_gemm_cuda_epilogue). K not a multiple of
// 16 (rows the tensor maps cannot take) runs on copies of a and b with rows
// zero-padded to 16 bytes. Declined with KK_ERR_UNSUPPORTED (the CPU kernel
// runs it) off sm_90a. docs/kernels/fp8_gemm.md.
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernelkit/memory.h"
#include "cuda/cuda_kernels.h"
#include "cuda/kernels/fp8_gemm_sm90.cuh"
#include "cuda/kernels/launch_util.cuh"
#include "cuda/kernels/tma_host.cuh"
#include "opdef/fp8_gemm.h"

namespace {

const char *const kOp = "fp8_gemm";

// A [rows, K] matrix of bytes (K a multiple of 16, 16-byte aligned base), in
// boxes of 128 bytes by box_rows rows with the 128-byte swizzle; false when
// the driver cannot encode it.
bool matrix_map(CUtensorMap *map, const void *base, int rows, int K, int box_rows) {
    const PFN_cuTensorMapEncodeTiled_v12000 encode = kk_cuda::tensor_map_encoder();
    if (!encode) return false;
    const cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)K};
    const cuuint32_t box[2] = {128, (cuuint32_t)box_rows};
    const cuuint32_t elem_strides[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void *>(base), dims, strides,
                  box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

kk_status launch_error(cudaError_t e) {
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, kOp, cudaGetErrorName(e), cudaGetErrorString(e),
                          "launching the Hopper fp8_gemm kernel failed");
}

// c [M, N] of TOut in boxes of 16 rows x 128 bytes with the 128-byte swizzle
// (the epilogue's TMA stores); false when its rows are not 16-byte aligned.
template <typename TOut> bool output_map(CUtensorMap *map, void *c, int M, int N) {
    const PFN_cuTensorMapEncodeTiled_v12000 encode = kk_cuda::tensor_map_encoder();
    const size_t row_bytes = (size_t)N * sizeof(TOut);
    if (!encode || (reinterpret_cast<uintptr_t>(c) & 15) || row_bytes % 16) return false;
    const cuuint64_t dims[2] = {(cuuint64_t)N, (cuuint64_t)M};
    const cuuint64_t strides[1] = {(cuuint64_t)row_bytes};
    const cuuint32_t box[2] = {(cuuint32_t)(128 / sizeof(TOut)), 16};
    const cuuint32_t elem_strides[2] = {1, 1};
    return encode(map,
                  sizeof(TOut) == 4 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                    : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                  2, c, dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int AT, int BT, typename TOut, bool kPromote, int ACT = kk_gemm::ACT_NONE>
kk_status launch(const kk_fp8::Args &a, const void *pa, const void *pb, cudaStream_t stream) {
    using L = kk_fp8::Tile<kPromote>;
    constexpr auto kernel = kk_fp8::fp8_gemm_sm90_kernel<AT, BT, TOut, kPromote, ACT>;
    if (!kk_cuda::sm90a_ready<kernel>())
        return kk__error(KK_ERR_UNSUPPORTED, kOp,
                         "the cuda kernel needs compute capability 9.0 and a build for sm_90a");
    CUtensorMap ta, tb;
    if (!matrix_map(&ta, pa, a.M, a.K, L::BM) || !matrix_map(&tb, pb, a.N, a.K, L::BN))
        return kk__error(KK_ERR_UNSUPPORTED, kOp, "the driver cannot encode the tensor maps");
    const long long tiles = (long long)((a.M + L::BM - 1) / L::BM) * ((a.N + L::BN - 1) / L::BN);
    if (tiles > INT32_MAX)
        return kk__error(KK_ERR_UNSUPPORTED, kOp, "the cuda kernel takes under 2^31 tiles");
    cudaError_t e = kk_cuda::opt_in<kernel>(L::kSmem);
    if (e != cudaSuccess) return launch_error(e);
    const int blocks = tiles < kk_cuda::sm_count() ? (int)tiles : kk_cuda::sm_count(); // persistent
    CUtensorMap tc = ta; // unused unless tma_store
    const int tma_store =
        !kk_cuda::epilogue_from_registers() && output_map<TOut>(&tc, a.c, a.M, a.N);
    kernel<<<blocks, L::kThreads, L::kSmem, stream>>>(ta, tb, tc, a, tma_store);
    e = cudaGetLastError();
    return e == cudaSuccess ? KK_OK : launch_error(e);
}

template <int AT, int BT, typename TOut>
kk_status launch_accum(const kk_fp8::Args &a, int act, const void *pa, const void *pb,
                       cudaStream_t s) {
    if (act != kk_gemm::ACT_NONE) { // fp8_linear: e4m3 x e4m3, promoted
        if constexpr (AT == kk_fp8::kE4M3 && BT == kk_fp8::kE4M3) {
            switch (act) {
            case kk_gemm::ACT_RELU:
                return launch<AT, BT, TOut, true, kk_gemm::ACT_RELU>(a, pa, pb, s);
            case kk_gemm::ACT_GELU_ERF:
                return launch<AT, BT, TOut, true, kk_gemm::ACT_GELU_ERF>(a, pa, pb, s);
            case kk_gemm::ACT_GELU_TANH:
                return launch<AT, BT, TOut, true, kk_gemm::ACT_GELU_TANH>(a, pa, pb, s);
            case kk_gemm::ACT_SILU:
                return launch<AT, BT, TOut, true, kk_gemm::ACT_SILU>(a, pa, pb, s);
            default: break;
            }
        }
        return kk__error(KK_ERR_UNSUPPORTED, kOp,
                         "the cuda kernel's epilogue does not take "
                         "activation %d with these types",
                         act);
    }
    const char *fast = getenv("KK_FP8_FAST_ACCUM");
    if (a.scaling != kk_fp8::kBlock && fast && strcmp(fast, "1") == 0)
        return launch<AT, BT, TOut, false>(a, pa, pb, s);
    return launch<AT, BT, TOut, true>(a, pa, pb, s);
}

template <typename TOut>
kk_status launch_types(kk_dtype at, kk_dtype bt, const kk_fp8::Args &a, int act, const void *pa,
                       const void *pb, cudaStream_t s) {
    using kk_fp8::kE4M3;
    using kk_fp8::kE5M2;
    if (at == KK_DTYPE_FP8_E4M3 && bt == KK_DTYPE_FP8_E4M3)
        return launch_accum<kE4M3, kE4M3, TOut>(a, act, pa, pb, s);
    if (at == KK_DTYPE_FP8_E5M2 && bt == KK_DTYPE_FP8_E4M3)
        return launch_accum<kE5M2, kE4M3, TOut>(a, act, pa, pb, s);
    if (at == KK_DTYPE_FP8_E4M3 && bt == KK_DTYPE_FP8_E5M2)
        return launch_accum<kE4M3, kE5M2, TOut>(a, act, pa, pb, s);
    return kk__error(KK_ERR_UNSUPPORTED, kOp, "the cuda kernel does not take %s x %s",
                     kk_dtype_name(at), kk_dtype_name(bt));
}

// a [rows, K] copied into `dst` [rows, K16], the pad columns zero (they add
// nothing to any product), queued on s.
cudaError_t pad_rows(uint8_t *dst, const void *src, int rows, int K, int K16, cudaStream_t s) {
    cudaError_t e = cudaMemsetAsync(dst, 0, (size_t)rows * K16, s);
    if (e == cudaSuccess)
        e = cudaMemcpy2DAsync(dst, K16, src, K, K, rows, cudaMemcpyDeviceToDevice, s);
    return e;
}

template <typename TOut>
kk_status run_padded(kk_fp8::Args a, int act, kk_dtype at, kk_dtype bt, const kk_tensor *ta,
                     const kk_tensor *tb, cudaStream_t s) {
    const int K16 = (a.K + 15) / 16 * 16; // the same ceil(K / 128) stages and groups
    const size_t a_bytes = (size_t)a.M * K16, b_bytes = (size_t)a.N * K16;
    const size_t b_off = (a_bytes + 255) / 256 * 256;
    kk_mem_options o;
    memset(&o, 0, sizeof o);
    o.stream = s;
    uint8_t *buf = nullptr;
    kk_status st = kk_mem_alloc_ex(ta->device, b_off + b_bytes, &o, (void **)&buf);
    if (st != KK_OK) return st;
    cudaError_t e = pad_rows(buf, ta->data, a.M, a.K, K16, s);
    if (e == cudaSuccess) e = pad_rows(buf + b_off, tb->data, a.N, a.K, K16, s);
    if (e == cudaSuccess) {
        a.K = K16;
        st = launch_types<TOut>(at, bt, a, act, buf, buf + b_off, s);
    } else {
        st = kk__cuda_error(KK_ERR_DEVICE_FAILURE, kOp, cudaGetErrorName(e), cudaGetErrorString(e),
                            "padding the rows of a and b failed");
    }
    (void)kk_mem_free_on_stream(buf, s); // after the kernel, in stream order
    return st;
}

template <typename TOut>
kk_status run_typed(const kk_fp8::Args &a, int act, kk_dtype at, kk_dtype bt, const kk_tensor *ta,
                    const kk_tensor *tb, cudaStream_t s) {
    const bool rows16 =
        a.K % 16 == 0 &&
        ((reinterpret_cast<uintptr_t>(ta->data) | reinterpret_cast<uintptr_t>(tb->data)) & 15) == 0;
    return rows16 ? launch_types<TOut>(at, bt, a, act, ta->data, tb->data, s)
                  : run_padded<TOut>(a, act, at, bt, ta, tb, s);
}

} // namespace

// Tensors are on this device and contiguous (kk_op_run checked them: the slot
// does not take strided views). With bias, res (of c's type, c's shape,
// contiguous; res may be c) and act: fp8_linear's epilogue fused
// (kk__fp8_gemm_cuda_epilogue).
static kk_status fp8_gemm_cuda(const kk_op_params *p, kk_tensor *const *t, const void *bias,
                               const void *res, int act, kk_stream stream) {
    const int64_t M = p->i[KK__FP8_M], N = p->i[KK__FP8_N], K = p->i[KK__FP8_K];
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX - 16)
        return kk__error(KK_ERR_UNSUPPORTED, kOp, "the cuda kernel takes sizes below 2^31");
    if (!kk_cuda::sm90a_ready<
            kk_fp8::fp8_gemm_sm90_kernel<kk_fp8::kE4M3, kk_fp8::kE4M3, float, true>>())
        return kk__error(KK_ERR_UNSUPPORTED, kOp,
                         "the cuda kernel needs compute capability 9.0 and a build for sm_90a");
    kk_fp8::Args a;
    memset(&a, 0, sizeof a);
    a.M = (int)M, a.N = (int)N, a.K = (int)K, a.G = (int)kk__fp8_groups(K);
    a.scaling = (int)p->i[KK__FP8_SCALING];
    a.sa = static_cast<const float *>(t[2]->data);
    a.sb = static_cast<const float *>(t[3]->data);
    a.c = t[4]->data;
    a.bias = bias, a.res = res;
    const kk_dtype at = (kk_dtype)p->i[KK__FP8_A_DTYPE], bt = (kk_dtype)p->i[KK__FP8_B_DTYPE];
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (p->i[KK__FP8_C_DTYPE] == KK_DTYPE_F32)
        return run_typed<float>(a, act, at, bt, t[0], t[1], s);
    return run_typed<__nv_bfloat16>(a, act, at, bt, t[0], t[1], s);
}

extern "C" kk_status kk__fp8_gemm_cuda(const kk_op_params *p, kk_tensor *const *t,
                                       kk_stream stream) {
    return fp8_gemm_cuda(p, t, nullptr, nullptr, kk_gemm::ACT_NONE, stream);
}

extern "C" kk_status kk__fp8_gemm_cuda_epilogue(const kk_op_params *p, kk_tensor *const *t,
                                                const void *bias, const void *res, int act,
                                                kk_stream stream) {
    return fp8_gemm_cuda(p, t, bias, res, act, stream);
}

extern "C" const kk__slot kk__fp8_gemm_cuda_slot = {kk__fp8_gemm_cuda, 0};

// 1 when the Hopper kernel can run on the current device (fp8_linear.cu asks
// before it queues its quantization, so that it declines with nothing queued).
extern "C" int kk__fp8_gemm_cuda_ready(void) {
    return kk_cuda::sm90a_ready<
        kk_fp8::fp8_gemm_sm90_kernel<kk_fp8::kE4M3, kk_fp8::kE4M3, float, true>>();
}
