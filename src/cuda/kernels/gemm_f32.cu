// The f32 launches of the gemm and linear slots (gemm.cu checks the tensors
// and fills the arguments): the TF32 kernel when the active configuration's
// hardware.nvidia.tf32_allowed is on (read at each call:
// kk__config_tf32_allowed), the exact FMA kernel otherwise.
// docs/kernels/gemm.md, "f32".
#include <cuda_runtime.h>

#include "core/config_active.h"
#include "core/error.h"
#include "cuda/kernels/gemm_f32.cuh"
#include "cuda/kernels/gemm_tf32.cuh"
#include "cuda/kernels/launch_util.cuh"

namespace kk_gemm {
namespace {

kk_status launched(cudaError_t e, const char *op, const char *what) {
    if (e == cudaSuccess) return KK_OK;
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, op, cudaGetErrorName(e), cudaGetErrorString(e),
                          "launching the %s gemm kernel failed", what);
}

template <int ACT, bool ALIGNED>
kk_status launch_simt(const Args &a, cudaStream_t stream, const char *op) {
    using L = simt::Tile<ACT == ACT_SWIGLU>;
    const dim3 grid((unsigned)((a.N + L::BN - 1) / L::BN),
                    (unsigned)((a.M + simt::BM - 1) / simt::BM));
    simt::kernel<ACT, ALIGNED><<<grid, simt::kThreads, 0, stream>>>(a);
    return launched(cudaGetLastError(), op, "f32 (FMA)");
}

template <int ACT, bool ALIGNED>
kk_status launch_tf32(const Args &a, cudaStream_t stream, const char *op) {
    using L = tf32::Tile<ACT == ACT_SWIGLU>;
    cudaError_t e = kk_cuda::opt_in<tf32::kernel<ACT, ALIGNED>>(L::kSmem);
    if (e == cudaSuccess) {
        const dim3 grid((unsigned)((a.N + L::BN - 1) / L::BN),
                        (unsigned)((a.M + L::BM - 1) / L::BM));
        tf32::kernel<ACT, ALIGNED><<<grid, tf32::kThreads, L::kSmem, stream>>>(a);
        e = cudaGetLastError();
    }
    return launched(e, op, "TF32");
}

template <int ACT>
kk_status launch_act(const Args &a, bool aligned, bool use_tf32, cudaStream_t s, const char *op) {
    if (use_tf32)
        return aligned ? launch_tf32<ACT, true>(a, s, op) : launch_tf32<ACT, false>(a, s, op);
    return aligned ? launch_simt<ACT, true>(a, s, op) : launch_simt<ACT, false>(a, s, op);
}

} // namespace

kk_status launch_f32(const Args &a, bool aligned, cudaStream_t s, const char *op) {
    const bool t = kk__config_tf32_allowed();
    switch (a.act) {
    case ACT_RELU: return launch_act<ACT_RELU>(a, aligned, t, s, op);
    case ACT_GELU_ERF: return launch_act<ACT_GELU_ERF>(a, aligned, t, s, op);
    case ACT_GELU_TANH: return launch_act<ACT_GELU_TANH>(a, aligned, t, s, op);
    case ACT_SILU: return launch_act<ACT_SILU>(a, aligned, t, s, op);
    case ACT_SWIGLU: return launch_act<ACT_SWIGLU>(a, aligned, t, s, op);
    default: return launch_act<ACT_NONE>(a, aligned, t, s, op);
    }
}

} // namespace kk_gemm
