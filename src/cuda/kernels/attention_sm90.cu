// Launch of the Hopper attention kernels (attention_sm90_ws.cuh, the
// warp-specialized one; attention_sm90.cuh, the cp.async one): the device
// check that picks them, the choice between them and their tiles, the tensor
// maps, the shared-memory opt-in, the grids.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <atomic>
#include <type_traits>
#include <stdlib.h>
#include <string.h>

#include "cuda/kernels/attention_sm90.cuh"
#include "cuda/kernels/attention_sm90_ws.cuh"
#include "cuda/kernels/launch_util.cuh"
#include "cuda/kernels/tma_host.cuh"

namespace kk_attn {
namespace {

template <int KD, typename T, bool kDropout, class C>
cudaError_t launch(const Params &p, cudaStream_t stream) {
    constexpr size_t smem = hopper_smem_bytes<KD, T, C>();
    if constexpr (smem > 227 * 1024)
        return cudaErrorInvalidConfiguration; // a tuning choice too big
    const cudaError_t e = kk_cuda::opt_in<attention_hopper_kernel<KD, T, kDropout, C>>(smem);
    if (e != cudaSuccess) return e;
    const dim3 grid((unsigned)((p.Sq + C::kBlockM - 1) / C::kBlockM), (unsigned)(p.B * p.Hq));
    attention_hopper_kernel<KD, T, kDropout, C><<<grid, C::kThreads, smem, stream>>>(p);
    return cudaGetLastError();
}

// A tensor map of one of Q, K, V: [B][H][S][d] 16-bit elements with the
// given strides (elements), boxes of 64 columns by box_rows rows, 128-byte
// swizzle. False when the tensor does not fit the accelerator's rules (16-byte
// aligned base and strides); the cp.async kernel takes it then.
bool make_tensor_map(CUtensorMap *map, const void *base, bool bf16, int d, int S, int H, int B,
                     int64_t s_stride, int64_t h_stride, int64_t b_stride, int box_rows) {
    const PFN_cuTensorMapEncodeTiled_v12000 encode = kk_cuda::tensor_map_encoder();
    if (!encode || (reinterpret_cast<uintptr_t>(base) & 15)) return false;
    // A dimension of size 1 is never stepped over: any legal stride does.
    int64_t ss = S > 1 ? s_stride * 2 : ((int64_t)d * 2 + 15) / 16 * 16;
    int64_t hs = H > 1 ? h_stride * 2 : ss * S;
    int64_t bs = B > 1 ? b_stride * 2 : hs * H;
    for (int64_t st : {ss, hs, bs})
        if (st <= 0 || (st & 15) || st >= (int64_t(1) << 40)) return false;
    const cuuint64_t dims[4] = {(cuuint64_t)d, (cuuint64_t)S, (cuuint64_t)H, (cuuint64_t)B};
    const cuuint64_t strides[3] = {(cuuint64_t)ss, (cuuint64_t)hs, (cuuint64_t)bs};
    const cuuint32_t box[4] = {64, (cuuint32_t)box_rows, 1, 1};
    const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
    return encode(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                  const_cast<void *>(base), dims, strides, box, elem_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The warp-specialized kernel; cudaErrorNotSupported when the tensors do not
// suit the tensor maps.
template <int KD, typename T, bool kDropout, class C>
cudaError_t launch_ws(const Params &p, cudaStream_t stream) {
    constexpr size_t smem = hopper_ws_smem_bytes<KD, T, C>();
    if constexpr (smem > 227 * 1024)
        return cudaErrorInvalidConfiguration; // a tuning choice too big
    constexpr bool bf16 = std::is_same<T, __nv_bfloat16>::value;
    CUtensorMap tq, tk, tv;
    if (!make_tensor_map(&tq, p.q, bf16, p.d, p.Sq, p.Hq, p.B, p.q_ss, p.q_hs, p.q_bs,
                         C::kBlockM) ||
        !make_tensor_map(&tk, p.k, bf16, p.d, p.Sk, p.Hkv, p.B, p.k_ss, p.k_hs, p.k_bs,
                         C::kBlockN) ||
        !make_tensor_map(&tv, p.v, bf16, p.d, p.Sk, p.Hkv, p.B, p.v_ss, p.v_hs, p.v_bs, C::kBlockN))
        return cudaErrorNotSupported;
    constexpr auto kernel = attention_hopper_ws_kernel<KD, T, kDropout, C>;
    const cudaError_t e = kk_cuda::opt_in<kernel>(smem);
    if (e != cudaSuccess) return e;
    const dim3 grid((unsigned)((p.Sq + C::kBlockM - 1) / C::kBlockM), (unsigned)(p.B * p.Hq));
    kernel<<<grid, C::kThreads, smem, stream>>>(tq, tk, tv, p);
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
    if (!strcmp(v, "2,128,3,1"))
        return launch<KD, T, kDropout, HopperTiles<2, 128, 3, true>>(p, stream);
    if (!strcmp(v, "2,64,3,1"))
        return launch<KD, T, kDropout, HopperTiles<2, 64, 3, true>>(p, stream);
    if (!strcmp(v, "3,64,3,1"))
        return launch<KD, T, kDropout, HopperTiles<3, 64, 3, true>>(p, stream);
    if (!strcmp(v, "2,64,2,0,2"))
        return launch<KD, T, kDropout, HopperTiles<2, 64, 2, false, 2>>(p, stream);
    if (!strcmp(v, "2,64,3,1,2"))
        return launch<KD, T, kDropout, HopperTiles<2, 64, 3, true, 2>>(p, stream);
    if (!strcmp(v, "1,64,3,1,3"))
        return launch<KD, T, kDropout, HopperTiles<1, 64, 3, true, 3>>(p, stream);
    if (!strcmp(v, "cp")) // the cp.async kernel's default tiles
        return KD == 64                   ? launch<KD, T, kDropout, HopperTiles64>(p, stream)
               : p.causal && p.Sq <= 1024 ? launch<KD, T, kDropout, HopperTiles128Short>(p, stream)
                                          : launch<KD, T, kDropout, HopperTiles128>(p, stream);
    // ws,CW,BN,ST: the warp-specialized kernel, CW consumer warpgroups.
    if (!strcmp(v, "ws,2,128,2"))
        return launch_ws<KD, T, kDropout, HopperWsTiles<2, 128, 2>>(p, stream);
    if (!strcmp(v, "ws,2,128,3"))
        return launch_ws<KD, T, kDropout, HopperWsTiles<2, 128, 3>>(p, stream);
    if (!strcmp(v, "ws,2,64,3"))
        return launch_ws<KD, T, kDropout, HopperWsTiles<2, 64, 3>>(p, stream);
    if (!strcmp(v, "ws,2,64,4"))
        return launch_ws<KD, T, kDropout, HopperWsTiles<2, 64, 4>>(p, stream);
    if (!strcmp(v, "ws,3,128,2"))
        return launch_ws<KD, T, kDropout, HopperWsTiles<3, 128, 2>>(p, stream);
    if (!strcmp(v, "ws,3,64,3"))
        return launch_ws<KD, T, kDropout, HopperWsTiles<3, 64, 3>>(p, stream);
    // ws,CW,BN,ST,pp: with ping-pong between the consumer warpgroups.
    if (!strcmp(v, "ws,3,64,3,pp"))
        return launch_ws<KD, T, kDropout, HopperWsTiles<3, 64, 3, true>>(p, stream);
    if (!strcmp(v, "ws,2,64,4,pp"))
        return launch_ws<KD, T, kDropout, HopperWsTiles<2, 64, 4, true>>(p, stream);
    if (!strcmp(v, "ws,2,128,3,pp"))
        return launch_ws<KD, T, kDropout, HopperWsTiles<2, 128, 3, true>>(p, stream);
    if (!strcmp(v, "ws,2,128,2,pp"))
        return launch_ws<KD, T, kDropout, HopperWsTiles<2, 128, 2, true>>(p, stream);
    return cudaErrorInvalidValue;
}
#endif

template <typename T, bool kDropout>
cudaError_t launch_dim(const Params &p, int kd, cudaStream_t stream) {
#ifdef KK_ATTN_TUNING
    if (const char *v = getenv("KK_ATTN_HOPPER_TILES")) {
        const cudaError_t e = kd == 64 ? launch_tuned<64, T, kDropout>(p, stream, v)
                                       : launch_tuned<128, T, kDropout>(p, stream, v);
        if (e != cudaErrorNotSupported) return e; // else tensors the tensor maps refuse
    }
#endif
    // Measured on an H100 (docs/kernels/attention.md, "The warp-specialized
    // Hopper kernel"): two
    // consumer warpgroups taking turns (ping-pong) on 128-key blocks, 3
    // stages; at head dim 64 with long keys three consumer warpgroups on
    // 64-key blocks, and with short causal rows the cp.async kernel (two CTAs
    // per SM overlap their short lives). The cp.async kernels also take the
    // tensors the tensor maps refuse.
    using WsPingPong = HopperWsTiles<2, 128, 3, true>;
    cudaError_t e = cudaErrorNotSupported;
    if (kd == 64) {
        if (p.causal && p.Sq <= 1024) return launch<64, T, kDropout, HopperTiles64>(p, stream);
        e = p.Sk <= 2048 ? launch_ws<64, T, kDropout, WsPingPong>(p, stream)
                         : launch_ws<64, T, kDropout, HopperWsTiles<3, 64, 3>>(p, stream);
        return e != cudaErrorNotSupported ? e : launch<64, T, kDropout, HopperTiles64>(p, stream);
    }
    e = launch_ws<128, T, kDropout, WsPingPong>(p, stream);
    if (e != cudaErrorNotSupported) return e;
    return p.causal && p.Sq <= 1024 ? launch<128, T, kDropout, HopperTiles128Short>(p, stream)
                                    : launch<128, T, kDropout, HopperTiles128>(p, stream);
}

} // namespace

bool hopper_ready() {
    static const bool forced_sm80 = [] {
        const char *env = getenv("KK_ATTN_KERNEL");
        return env && !strcmp(env, "sm80");
    }();
    return !forced_sm80 &&
           kk_cuda::sm90a_ready<
               attention_hopper_kernel<128, __nv_bfloat16, false, HopperTiles128>>();
}

cudaError_t launch_hopper(const Params &p, int kd, bool bf16, cudaStream_t stream) {
    if (bf16)
        return p.dropout ? launch_dim<__nv_bfloat16, true>(p, kd, stream)
                         : launch_dim<__nv_bfloat16, false>(p, kd, stream);
    return p.dropout ? launch_dim<__half, true>(p, kd, stream)
                     : launch_dim<__half, false>(p, kd, stream);
}

} // namespace kk_attn
