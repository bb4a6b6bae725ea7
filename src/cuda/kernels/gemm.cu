// The gemm and linear slots on CUDA: their tensors to the kernel's arguments
// (strides read off the tensors), the choice of kernel, the launch. bf16 and
// f16; f32 is answered KK_ERR_UNSUPPORTED (the CPU runs it). docs/kernels/gemm.md.
#include <cuda_runtime.h>

#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda_kernels.h"
#include "cuda/kernels/gemm_sm80.cuh"
#include "cuda/kernels/launch_util.cuh"
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

template <typename T, bool GLU, bool ALIGNED>
kk_status launch_as(const Args &a, cudaStream_t stream, const char *op) {
    using L = kk_gemm::Tile<GLU>;
    auto kernel = kk_gemm::gemm_kernel<T, GLU, ALIGNED>;
    cudaError_t e = kk_cuda::opt_in<kk_gemm::gemm_kernel<T, GLU, ALIGNED>>(L::kSmem);
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

template <typename T>
kk_status launch_typed(const Args &a, bool glu, bool aligned, cudaStream_t s, const char *op) {
    if (glu)
        return aligned ? launch_as<T, true, true>(a, s, op) : launch_as<T, true, false>(a, s, op);
    return aligned ? launch_as<T, false, true>(a, s, op) : launch_as<T, false, false>(a, s, op);
}

// Checks what every form shares and launches; tensors are on this device
// (kk_op_run checked them), rows contiguous in their last dimension.
kk_status run(Args &a, kk_dtype dt, const kk_tensor *const *mats, int nmats, bool glu,
              cudaStream_t stream, const char *op) {
    if (dt != KK_DTYPE_BF16 && dt != KK_DTYPE_F16)
        return kk__error(KK_ERR_UNSUPPORTED, op, "the cuda kernel takes bf16 and f16, not %s",
                         kk_dtype_name(dt));
    if ((a.M + 127) / 128 > 65535)
        return kk__error(KK_ERR_UNSUPPORTED, op, "the cuda kernel's grid is too small for M = %d",
                         a.M);
    for (int k = 0; k < nmats; k++) {
        const kk_tensor *t = mats[k];
        if (t->ndim == 2 && t->strides[1] != 1)
            return kk__error(KK_ERR_UNSUPPORTED, op, "the cuda kernel needs contiguous rows");
    }
    const bool aligned = rows_aligned(a.a, a.lda, a.K) && rows_aligned(a.b0, a.ldb, a.K) &&
                         (!glu || rows_aligned(a.b1, a.ldb, a.K));
    return dt == KK_DTYPE_BF16 ? launch_typed<__nv_bfloat16>(a, glu, aligned, stream, op)
                               : launch_typed<__half>(a, glu, aligned, stream, op);
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
