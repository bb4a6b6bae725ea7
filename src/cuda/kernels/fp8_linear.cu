// The fp8_linear slot on CUDA, composed of kernels already checked on the GPU,
// queued on the op's stream: x quantized by kk_quantize's 1x128 kernel
// (quant.cu, the same bits as the CPU) into scratch from the caching allocator
// (freed in stream order), then the product by the Hopper fp8_gemm kernel
// (fp8_gemm.cu, wgmma with promotion) with the epilogue fused (bias,
// gemm_sm80.cuh's `activate`, residual, one rounding to y's bf16 or f32). f16
// y: the product into f32 scratch, then one epilogue kernel. Declined with
// KK_ERR_UNSUPPORTED before anything is queued (the CPU kernel runs it):
// rowwise scaling (kk_quantize has no per-row kernel on CUDA), a GPU or build
// without the sm_90a fp8_gemm kernel, sizes beyond its 2^31 limits. Unlike the
// CPU kernel it does not look for inf/NaN in x (that needs a synchronization):
// they reach y as NaN. docs/kernels/fp8_gemm.md, "FP8 Linear".
#include <cuda_runtime.h>

#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor_borrow.h"
#include "core/quant_internal.h"
#include "kernelkit/memory.h"
#include "cuda/cuda_kernels.h"
#include "cuda/kernels/gemm_sm80.cuh"
#include "cuda/quant_cuda.h"
#include "opdef/fp8_linear.h"

// fp8_gemm.cu: its slot's kernel, and whether it can run on the current device.
extern "C" kk_status kk__fp8_gemm_cuda(const kk_op_params *p, kk_tensor *const *t,
                                       kk_stream stream);
extern "C" int kk__fp8_gemm_cuda_ready(void);
extern "C" kk_status kk__fp8_gemm_cuda_epilogue(const kk_op_params *p, kk_tensor *const *t,
                                                const void *bias, const void *res, int act,
                                                kk_stream stream);

namespace {

const char *const kOp = "fp8_linear";
constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 16384;

template <typename T> __device__ __forceinline__ float load(const T *p, int64_t i) {
    return kk_gemm::to_f32(p[i]);
}
template <typename T> __device__ __forceinline__ void store(T *p, int64_t i, float v) {
    p[i] = kk_gemm::from_f32<T>(v);
}

// y[m,n] = act(h[m,n] + bias[n]) + r[m,n], rounded once; grid-stride over M*N.
template <typename T>
__global__ void epilogue_kernel(const float *__restrict__ h, const T *bias, const T *res, T *y,
                                int64_t M, int64_t N, int act) {
    const int64_t total = M * N;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = h[i];
        if (bias) v += load(bias, i % N);
        v = kk_gemm::activate(act, v);
        if (res) v += load(res, i); // read before the write: res may be y itself
        store(y, i, v);
    }
}

template <typename T>
cudaError_t epilogue(const float *h, const void *bias, const void *res, void *y, int64_t M,
                     int64_t N, int act, cudaStream_t s) {
    const int64_t want = (M * N + kThreads - 1) / kThreads;
    const unsigned blocks = (unsigned)(want < 1 ? 1 : want < kMaxBlocks ? want : kMaxBlocks);
    epilogue_kernel<T><<<blocks, kThreads, 0, s>>>(h, static_cast<const T *>(bias),
                                                   static_cast<const T *>(res), static_cast<T *>(y),
                                                   M, N, act);
    return cudaGetLastError();
}

size_t round256(size_t n) { return (n + 255) / 256 * 256; }

kk_status launch_error(cudaError_t e, const char *what) {
    (void)cudaGetLastError();
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, kOp, cudaGetErrorName(e), cudaGetErrorString(e),
                          "%s failed", what);
}

} // namespace

// Tensors are on this device and contiguous (kk_op_run checked them).
extern "C" kk_status kk__fp8_linear_cuda(const kk_op_params *p, kk_tensor *const *t,
                                         kk_stream stream) {
    const int64_t M = p->i[KK__FL_M], N = p->i[KK__FL_N], K = p->i[KK__FL_K];
    if (!kk__fp8_linear_block(p))
        return kk__error(KK_ERR_UNSUPPORTED, kOp,
                         "scaling=rowwise is not on CUDA (kk_quantize has no per-row kernel "
                         "there): the CPU kernel runs it");
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX - 16)
        return kk__error(KK_ERR_UNSUPPORTED, kOp, "the cuda kernel takes sizes below 2^31");
    if (!kk__fp8_gemm_cuda_ready())
        return kk__error(KK_ERR_UNSUPPORTED, kOp,
                         "the cuda fp8_gemm needs compute capability 9.0 and a build for sm_90a");
    const kk__fp8_linear_layout l = kk__fp8_linear_layout_of(p);
    const kk_dtype dt = (kk_dtype)p->i[KK__FL_DTYPE];
    const int64_t G = kk__fp8_groups(K);
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    // bf16 and f32 y: the epilogue in the GEMM; f16 y: the f32 product into
    // scratch and an epilogue kernel
    const bool fused = dt != KK_DTYPE_F16;
    const void *bias = l.bias >= 0 ? t[l.bias]->data : nullptr;
    const void *res = l.residual >= 0 ? t[l.residual]->data : nullptr;
    const int act = (int)p->i[KK__FL_ACT]; // linear's KK__ACT_* = kk_gemm::Act
    // scratch: x's codes [M,K], its scales [M,G], the amax word, the f32 product [M,N] (f16)
    const size_t q_off = 0, s_off = round256((size_t)(M * K));
    const size_t a_off = s_off + round256((size_t)(M * G) * sizeof(float));
    const size_t h_off = a_off + 256, bytes = h_off + (fused ? 0 : (size_t)(M * N) * sizeof(float));
    kk_mem_options o;
    memset(&o, 0, sizeof o);
    o.stream = stream;
    char *buf = nullptr;
    kk_status st = kk_mem_alloc_ex(t[l.x]->device, bytes, &o, (void **)&buf);
    if (st != KK_OK) return st;
    uint8_t *xq = reinterpret_cast<uint8_t *>(buf + q_off);
    float *sx = reinterpret_cast<float *>(buf + s_off);
    uint32_t *amax = reinterpret_cast<uint32_t *>(buf + a_off);
    float *h = reinterpret_cast<float *>(buf + h_off);

    kk__quant_job job;
    memset(&job, 0, sizeof job);
    const int64_t xshape[2] = {M, K};
    kk__quant_job_shape(&job, KK_SCALE_1X128, KK_DTYPE_FP8_E4M3, 2, xshape);
    job.x_dtype = dt;
    job.x = t[l.x]->data;
    job.q = xq;
    job.scales = sx;
    job.device = t[l.x]->device_index;
    cudaError_t e = cudaMemsetAsync(amax, 0, sizeof *amax, s);
    if (e == cudaSuccess) e = kk__qk_fp8_blocks(&job, amax, s);
    if (e != cudaSuccess) st = launch_error(e, "quantizing x (the 1x128 kernel)");

    if (st == KK_OK) {
        kk_op_params gp;
        st = kk_op_params_init(&kk__op_fp8_gemm, &gp);
        if (st == KK_OK) {
            gp.i[KK__FP8_M] = M;
            gp.i[KK__FP8_N] = N;
            gp.i[KK__FP8_K] = K;
            gp.i[KK__FP8_A_DTYPE] = KK_DTYPE_FP8_E4M3;
            gp.i[KK__FP8_B_DTYPE] = KK_DTYPE_FP8_E4M3;
            gp.i[KK__FP8_C_DTYPE] = fused ? dt : KK_DTYPE_F32;
            gp.i[KK__FP8_SCALING] = KK__FP8_BLOCK;
            kk_tensor va, vsa, vc;
            const int64_t sshape[2] = {M, G}, cshape[2] = {M, N};
            kk_tensor *gt[5] = {
                kk__tensor_borrow(&va, t[l.x], KK_DTYPE_FP8_E4M3, 2, xshape, xq), t[l.w],
                kk__tensor_borrow(&vsa, t[l.x], KK_DTYPE_F32, 2, sshape, sx), t[l.w_scales],
                fused ? t[l.y] : kk__tensor_borrow(&vc, t[l.x], KK_DTYPE_F32, 2, cshape, h)};
            st = fused ? kk__fp8_gemm_cuda_epilogue(&gp, gt, bias, res, act, stream)
                       : kk__fp8_gemm_cuda(&gp, gt, stream);
        }
    }
    if (st == KK_OK && !fused) {
        e = epilogue<__half>(h, bias, res, t[l.y]->data, M, N, act, s);
        if (e != cudaSuccess) st = launch_error(e, "the epilogue kernel's launch");
    }
    (void)kk_mem_free_on_stream(buf, stream); // after the kernels, in stream order
    return st;
}

extern "C" const kk__slot kk__fp8_linear_cuda_slot = {kk__fp8_linear_cuda, 0};
