// Launch of the Hopper attention kernel (attention_hopper.cuh): the device
// check that picks it, the shared-memory opt-in, the grid.
#include <cuda_runtime.h>

#include <atomic>
#include <stdlib.h>
#include <string.h>

#include "cuda/kernels/attention_hopper.cuh"
#include "cuda/kernels/launch_util.cuh"

namespace kk_attn {
namespace {

template <int KD, typename T, bool kDropout, class C>
cudaError_t launch(const Params &p, cudaStream_t stream) {
    constexpr size_t smem = hopper_smem_bytes<KD, T, C>();
    if constexpr (smem > 227 * 1024) return cudaErrorInvalidConfiguration; // a tuning choice too big
    const cudaError_t e = kk_cuda::opt_in<attention_hopper_kernel<KD, T, kDropout, C>>(smem);
    if (e != cudaSuccess) return e;
    const dim3 grid((unsigned)((p.Sq + C::kBlockM - 1) / C::kBlockM), (unsigned)(p.B * p.Hq));
    attention_hopper_kernel<KD, T, kDropout, C><<<grid, C::kThreads, smem, stream>>>(p);
    return cudaGetLastError();
}

#ifdef KK_ATTN_TUNING
// KK_ATTN_HOPPER_TILES=WG,BN,ST picks another tiling in a -DKK_ATTN_TUNING build.
template <int KD, typename T, bool kDropout>
cudaError_t launch_tuned(const Params &p, cudaStream_t stream, const char *v) {
    if (!strcmp(v, "2,128,2")) return launch<KD, T, kDropout, HopperTiles<2, 128, 2>>(p, stream);
    if (!strcmp(v, "3,128,2")) return launch<KD, T, kDropout, HopperTiles<3, 128, 2>>(p, stream);
    if (!strcmp(v, "3,128,2,0,1,1"))
        return launch<KD, T, kDropout, HopperTiles<3, 128, 2, false, 1, true>>(p, stream);
    if (!strcmp(v, "3,128,3,0,1,1"))
        return launch<KD, T, kDropout, HopperTiles<3, 128, 3, false, 1, true>>(p, stream);
    if (!strcmp(v, "2,64,2,0,2,1"))
        return launch<KD, T, kDropout, HopperTiles<2, 64, 2, false, 2, true>>(p, stream);
    if (!strcmp(v, "2,128,3,1")) return launch<KD, T, kDropout, HopperTiles<2, 128, 3, true>>(p, stream);
    if (!strcmp(v, "2,64,3,1")) return launch<KD, T, kDropout, HopperTiles<2, 64, 3, true>>(p, stream);
    if (!strcmp(v, "3,64,3,1")) return launch<KD, T, kDropout, HopperTiles<3, 64, 3, true>>(p, stream);
    if (!strcmp(v, "2,64,2,0,2")) return launch<KD, T, kDropout, HopperTiles<2, 64, 2, false, 2>>(p, stream);
    if (!strcmp(v, "2,64,3,1,2")) return launch<KD, T, kDropout, HopperTiles<2, 64, 3, true, 2>>(p, stream);
    if (!strcmp(v, "1,64,3,1,3")) return launch<KD, T, kDropout, HopperTiles<1, 64, 3, true, 3>>(p, stream);
    return cudaErrorInvalidValue;
}
#endif

template <typename T, bool kDropout>
cudaError_t launch_dim(const Params &p, int kd, cudaStream_t stream) {
#ifdef KK_ATTN_TUNING
    if (const char *v = getenv("KK_ATTN_HOPPER_TILES"))
        return kd == 64 ? launch_tuned<64, T, kDropout>(p, stream, v)
                        : launch_tuned<128, T, kDropout>(p, stream, v);
#endif
    if (kd == 64) return launch<64, T, kDropout, HopperTiles64>(p, stream);
    if (p.causal && p.Sq <= 1024) return launch<128, T, kDropout, HopperTiles128Short>(p, stream);
    return launch<128, T, kDropout, HopperTiles128>(p, stream);
}

} // namespace

bool hopper_ready() {
    static std::atomic<int> cached[64]; // 0 unknown, 1 yes, 2 no
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
    int v = cached[dev].load(std::memory_order_relaxed);
    if (v == 0) {
        const char *env = getenv("KK_ATTN_KERNEL");
        int major = 0, minor = 0;
        cudaFuncAttributes attr;
        const bool ok =
            !(env && !strcmp(env, "sm80")) &&
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
            major == 9 && minor == 0 &&
            cudaFuncGetAttributes(&attr, attention_hopper_kernel<128, __nv_bfloat16, false, HopperTiles128>) ==
                cudaSuccess &&
            attr.binaryVersion == 90;
        if (!ok) (void)cudaGetLastError(); // a failed query leaves no sticky error
        v = ok ? 1 : 2;
        cached[dev].store(v, std::memory_order_relaxed);
    }
    return v == 1;
}

cudaError_t launch_hopper(const Params &p, int kd, bool bf16, cudaStream_t stream) {
    if (bf16)
        return p.dropout ? launch_dim<__nv_bfloat16, true>(p, kd, stream)
                         : launch_dim<__nv_bfloat16, false>(p, kd, stream);
    return p.dropout ? launch_dim<__half, true>(p, kd, stream)
                     : launch_dim<__half, false>(p, kd, stream);
}

} // namespace kk_attn
