// Launch of the Hopper attention backward (attention_backward_sm90.cuh): the
// device check that picks it, the shared-memory opt-in, the grid.
#include <cuda_runtime.h>

#include <stdlib.h>
#include <string.h>

#include "cuda/kernels/attention_backward_sm90.cuh"
#include "cuda/kernels/launch_util.cuh"

namespace kk_attn_bwd {
namespace {

template <int KD, typename T, bool kDropout> cudaError_t launch(const Params &p, cudaStream_t s) {
    constexpr size_t smem = hopper_smem_bytes<KD, T>();
    static_assert(smem <= 227 * 1024, "the Hopper backward's tiles exceed shared memory");
    constexpr auto kernel = attention_bwd_hopper_kernel<KD, T, kDropout>;
    const cudaError_t e = kk_cuda::opt_in<kernel>(smem);
    if (e != cudaSuccess) return e;
    constexpr int kBN = HopperConfig<KD>::kBlockN;
    // One dimension: cta_keys (attention_backward.cuh) orders it by the mask.
    const dim3 grid((unsigned)((int64_t)p.a.B * p.a.Hkv * ((p.a.Sk + kBN - 1) / kBN)));
    kernel<<<grid, HopperConfig<KD>::kThreads, smem, s>>>(p);
    return cudaGetLastError();
}

template <typename T> cudaError_t launch_dim(const Params &p, int kd, cudaStream_t s) {
    if (kd == 64) return p.a.dropout ? launch<64, T, true>(p, s) : launch<64, T, false>(p, s);
    return p.a.dropout ? launch<128, T, true>(p, s) : launch<128, T, false>(p, s);
}

} // namespace

bool hopper_ready() {
    static const bool forced_sm80 = [] {
        const char *env = getenv("KK_ATTN_BWD_KERNEL");
        return env && !strcmp(env, "sm80");
    }();
    return !forced_sm80 &&
           kk_cuda::sm90a_ready<attention_bwd_hopper_kernel<128, __nv_bfloat16, false>>();
}

cudaError_t launch_hopper(const Params &p, int kd, bool bf16, cudaStream_t stream) {
    return bf16 ? launch_dim<__nv_bfloat16>(p, kd, stream) : launch_dim<__half>(p, kd, stream);
}

} // namespace kk_attn_bwd
