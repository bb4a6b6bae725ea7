// The `attention_backward` op's CUDA slot: three kernels on the op's stream,
// with f32 scratch from the caching allocator (freed in stream order):
// D_i = rowsum(dO * O) (preprocess, which also zeroes the dQ accumulator), the
// main kernel of attention_backward.cuh (dK, dV; dQ by atomicAdd), and dQ
// scaled and converted to the output dtype. Declined with KK_ERR_UNSUPPORTED
// before anything is queued (kk_op_run then runs the CPU kernel): f32, head
// dims that are not multiples of 8 or exceed 128, rows not 16-byte aligned.
// docs/kernels/attention.md, "Backward on CUDA".
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "cuda/kernels/attention_backward.cuh"
#include "cuda/kernels/attention_backward_sm90.cuh"
#include "cuda/kernels/launch_util.cuh"

extern "C" {
#include "core/error.h"
#include "cuda/cuda_kernels.h"
#include "kernelkit/memory.h"
#include "opdef/attention_backward.h"
}

namespace {

const char *const kOp = "attention_backward";
using kk_attn_bwd::Params;

__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ __nv_bfloat16 from_f32(float x) {
    return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half from_f32(float x) { return __float2half_rn(x); }

// D_i = sum_d dO_id O_id in f32: 16 lanes per row, 8 elements (16 bytes) per
// lane and step; dQ's accumulator row zeroed on the way.
constexpr int kPreThreads = 256, kRowsPerBlock = kPreThreads / 16;
template <typename T>
__global__ void __launch_bounds__(kPreThreads)
    preprocess_kernel(const T *__restrict__ o, const T *__restrict__ dout, float *__restrict__ di,
                      float *__restrict__ dq_acc, int64_t rows, int d) {
    const int64_t row = (int64_t)blockIdx.x * kRowsPerBlock + threadIdx.x / 16;
    const int lane = threadIdx.x % 16;
    float sum = 0.f;
    if (row < rows) {
        for (int c = lane * 8; c < d; c += 128) {
            const uint4 ov = *reinterpret_cast<const uint4 *>(o + row * d + c);
            const uint4 gv = *reinterpret_cast<const uint4 *>(dout + row * d + c);
            const T *oe = reinterpret_cast<const T *>(&ov), *ge = reinterpret_cast<const T *>(&gv);
#pragma unroll
            for (int e = 0; e < 8; e++) sum = fmaf(to_f32(oe[e]), to_f32(ge[e]), sum);
            *reinterpret_cast<float4 *>(dq_acc + row * d + c) = make_float4(0.f, 0.f, 0.f, 0.f);
            *reinterpret_cast<float4 *>(dq_acc + row * d + c + 4) = make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }
#pragma unroll
    for (int m = 8; m >= 1; m /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, m);
    if (row < rows && lane == 0) di[row] = sum;
}

// dq = scale * dq_acc in the output dtype; grid-stride.
template <typename T>
__global__ void convert_dq_kernel(const float *__restrict__ acc, T *__restrict__ dq, int64_t n,
                                  float scale) {
    for (int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n;
         x += (int64_t)gridDim.x * blockDim.x)
        dq[x] = from_f32<T>(acc[x] * scale);
}

template <int KD, typename T, bool kDropout>
cudaError_t launch_main(const Params &p, cudaStream_t s) {
    constexpr int kBM = kk_attn_bwd::Config<KD>::kBlockM, kBN = kk_attn_bwd::kBlockN;
    const size_t smem = (size_t)(2 * kBN + 2 * kBM) * (KD + 8) * sizeof(T) +
                        (size_t)kBN * (kBM + 8) * sizeof(T) + 2 * kBM * sizeof(float);
    const cudaError_t e = kk_cuda::opt_in<kk_attn_bwd::attention_bwd_kernel<KD, T, kDropout>>(smem);
    if (e != cudaSuccess) return e;
    const dim3 grid((unsigned)((int64_t)p.a.B * p.a.Hkv * ((p.a.Sk + kBN - 1) / kBN)));
    kk_attn_bwd::attention_bwd_kernel<KD, T, kDropout><<<grid, kk_attn_bwd::kThreads, smem, s>>>(p);
    return cudaGetLastError();
}

template <typename T> cudaError_t launch_all(const Params &p, int kd, cudaStream_t s) {
    const int64_t rows = (int64_t)p.a.B * p.a.Hq * p.a.Sq;
    preprocess_kernel<T>
        <<<(unsigned)((rows + kRowsPerBlock - 1) / kRowsPerBlock), kPreThreads, 0, s>>>(
            static_cast<const T *>(p.a.o), static_cast<const T *>(p.dout), p.di, p.dq_acc, rows,
            p.a.d);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    if (kk_attn_bwd::hopper_ready())
        e = kk_attn_bwd::launch_hopper(p, kd, std::is_same<T, __nv_bfloat16>::value, s);
    else if (kd == 64)
        e = p.a.dropout ? launch_main<64, T, true>(p, s) : launch_main<64, T, false>(p, s);
    else
        e = p.a.dropout ? launch_main<128, T, true>(p, s) : launch_main<128, T, false>(p, s);
    if (e != cudaSuccess) return e;
    const int64_t n = rows * p.a.d, want = (n + 255) / 256;
    convert_dq_kernel<T><<<(unsigned)(want < 1       ? 1
                                      : want < 16384 ? want
                                                     : 16384),
                           256, 0, s>>>(p.dq_acc, static_cast<T *>(p.dq), n, p.scale);
    return cudaGetLastError();
}

const char *const names[] = {"q", "k", "v", "o", "dout", "lse", "dq", "dk", "dv"};

} // namespace

// Tensors are contiguous and on this device (kk_op_run checked them: the slot
// is not `strided`).
extern "C" kk_status kk__attention_backward_cuda(const kk_op_params *op, kk_tensor *const *t,
                                                 kk_stream stream) {
    const int64_t *i = op->i;
    const kk_dtype dt = (kk_dtype)i[KK__ATB_DTYPE];
    const int64_t B = i[KK__ATB_B], Hq = i[KK__ATB_HQ], Hkv = i[KK__ATB_HKV];
    const int64_t Sq = i[KK__ATB_SQ], Sk = i[KK__ATB_SK], D = i[KK__ATB_D];
    if (dt != KK_DTYPE_BF16 && dt != KK_DTYPE_F16)
        return kk__error(KK_ERR_UNSUPPORTED, kOp, "the cuda kernel takes bf16 and f16, not %s",
                         kk_dtype_name(dt));
    if (D % 8 != 0 || D > 128)
        return kk__error(KK_ERR_UNSUPPORTED, kOp,
                         "the cuda kernel takes head dims that are multiples of 8 up to 128, not "
                         "D = %lld",
                         (long long)D);
    if (Sq > INT32_MAX / 2 || Sk > INT32_MAX / 2 || B * Hkv > INT32_MAX ||
        B * Hq * Sq / kRowsPerBlock >= INT32_MAX ||
        B * Hkv * ((Sk + kk_attn_bwd::kBlockN - 1) / kk_attn_bwd::kBlockN) > INT32_MAX)
        return kk__error(KK_ERR_UNSUPPORTED, kOp, "the cuda kernel's grid is too small");
    for (int k = 0; k < 9; k++)
        if (!t[k] || t[k]->device_kind != KK_BACKEND_CUDA || (uintptr_t)t[k]->data % 16)
            return kk__error(KK_ERR_UNSUPPORTED, kOp,
                             "the cuda kernel needs %s on the device, 16-byte aligned", names[k]);

    // scratch: dQ's f32 accumulator [B,Hq,Sq,D], then D_i [B,Hq,Sq]
    const size_t acc_bytes = (size_t)(B * Hq * Sq * D) * sizeof(float);
    const size_t bytes = acc_bytes + (size_t)(B * Hq * Sq) * sizeof(float);
    kk_mem_options mo;
    memset(&mo, 0, sizeof mo);
    mo.stream = stream;
    char *buf = nullptr;
    kk_status st = kk_mem_alloc_ex(t[0]->device, bytes, &mo, (void **)&buf);
    if (st != KK_OK) return st;

    Params p;
    memset(&p, 0, sizeof p);
    p.a.q = t[KK__ATB_T_Q]->data;
    p.a.k = t[KK__ATB_T_K]->data;
    p.a.v = t[KK__ATB_T_V]->data;
    p.a.o = t[KK__ATB_T_O]->data;
    p.dout = t[KK__ATB_T_DO]->data;
    p.lse = static_cast<const float *>(t[KK__ATB_T_LSE]->data);
    p.dq = t[KK__ATB_T_DQ]->data;
    p.dk = t[KK__ATB_T_DK]->data;
    p.dv = t[KK__ATB_T_DV]->data;
    p.dq_acc = reinterpret_cast<float *>(buf);
    p.di = reinterpret_cast<float *>(buf + acc_bytes);
    p.a.B = (int)B;
    p.a.Hq = (int)Hq;
    p.a.Hkv = (int)Hkv;
    p.a.Sq = (int)Sq;
    p.a.Sk = (int)Sk;
    p.a.d = (int)D;
    const double scale = op->f[KK__ATB_SCALE] > 0 ? op->f[KK__ATB_SCALE] : 1.0 / sqrt((double)D);
    p.scale = (float)scale;
    p.a.scale_log2 = (float)(scale * 1.4426950408889634);
    p.a.causal = (int)i[KK__ATB_CAUSAL];
    p.a.window_left = (int)(i[KK__ATB_WL] > INT32_MAX / 4 ? INT32_MAX / 4 : i[KK__ATB_WL]);
    p.a.window_right = (int)(i[KK__ATB_WR] > INT32_MAX / 4 ? INT32_MAX / 4 : i[KK__ATB_WR]);
    const double drop = op->f[KK__ATB_DROPOUT];
    p.a.dropout = drop > 0.0;
    p.a.drop_threshold = kk__dropout_threshold(drop);
    p.a.drop_rescale = (float)(1.0 / (1.0 - drop));
    p.a.seed = (uint64_t)i[KK__ATB_SEED];
    p.a.offset = (uint64_t)i[KK__ATB_OFFSET];

    const int kd = D <= 64 ? 64 : 128;
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    const cudaError_t e =
        dt == KK_DTYPE_BF16 ? launch_all<__nv_bfloat16>(p, kd, s) : launch_all<__half>(p, kd, s);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        st = kk__cuda_error(KK_ERR_KERNEL_LAUNCH, kOp, cudaGetErrorName(e), cudaGetErrorString(e),
                            "the attention backward kernels failed to launch");
    }
    (void)kk_mem_free_on_stream(buf, stream); // after the kernels, in stream order
    return st;
}

extern "C" const kk__slot kk__attention_backward_cuda_slot = {kk__attention_backward_cuda, 0};
