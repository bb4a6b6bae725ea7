// Launch of the decode (flash-decoding) kernels of attention_decode.cuh: when
// the slot (attention.cu) takes the decode path, the split count, the
// workspace of partial results, the decode and combine kernels.
#include <cuda_runtime.h>

#include <atomic>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/kernels/attention_decode.cuh"
#include "cuda/kernels/launch_util.cuh"

extern "C" {
#include "core/error.h"
#include "kernelkit/memory.h"
}

namespace kk_attn {
namespace {

kk_status launch_error(cudaError_t e) {
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, "attention", cudaGetErrorName(e),
                          cudaGetErrorString(e), "the decode attention kernels failed to launch");
}

using kk_cuda::opt_in;
using kk_cuda::sm_count;
using kk_cuda::smem_optin;

} // namespace

// Decode when one m16 tile holds every query row of a kv head, the keys are
// long enough to split (the forward kernel would leave most SMs idle) and the
// device has the default kernel's shared memory (head dim 128: 140 KiB, not on
// Ada).
bool use_decode(const Params &p, int kd) {
    const size_t smem =
        2 * (kd == 64 ? decode_pipe_smem_elems<64, 2, 32>() : decode_pipe_smem_elems<128, 2, 32>());
    return (kd == 64 || kd == 128) && (p.Hq / p.Hkv) * p.Sq <= kDecodeRows && p.Sk >= 512 &&
           smem <= (size_t)smem_optin();
}

namespace {

// ---- decode variants (KK_ATTN_DECODE_VARIANT, read once; anything else: 1) ----
// Stage shapes of attention_decode_pipe_kernel, measured on an H100
// (docs/kernels/attention.md, "Decode"):
//   1: 2 stages of 32 keys per warp (140 KiB at D = 128, one CTA per SM, as
//      many splits as fill one wave): the default.
//   2: 2 stages of 16 keys per warp (74 KiB at D = 128: 3 CTAs per SM), the
//      splits filling one wave at the kernel's occupancy (12 per head at H = 32).
//   3: 3 stages of 32 keys per warp (213 KiB at D = 128; variant 1 where the
//      device lacks the shared memory).
//   4: 3 stages of 16 keys per warp (108 KiB at D = 128: 2 CTAs per SM, 8
//      splits per head at H = 32).
// The combine kernel is launched as a programmatic dependent of the decode
// kernel on sm_90+ (KK_ATTN_DECODE_PDL=0: a plain launch). Tuning:
// KK_ATTN_DECODE_CTAS_PER_SM=n sizes the splits for n CTAs per SM instead of
// the kernel's occupancy (n above it: more than one wave).
int env_int_once(const char *name, int lo, int hi, int def) {
    const char *v = getenv(name);
    if (!v || !*v) return def;
    const int x = atoi(v);
    return x >= lo && x <= hi ? x : def;
}
int decode_variant() {
    static const int v = env_int_once("KK_ATTN_DECODE_VARIANT", 1, 4, 1);
    return v;
}
int decode_ctas_per_sm() {
    static const int v = env_int_once("KK_ATTN_DECODE_CTAS_PER_SM", 1, 64, 0);
    return v;
}
bool decode_pdl() {
    static const bool v = env_int_once("KK_ATTN_DECODE_PDL", 0, 1, 1) != 0;
    if (!v) return false;
    static std::atomic<int> cached[64]; // compute capability major + 1, per device
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
    int n = cached[dev].load(std::memory_order_relaxed);
    if (n == 0) {
        int major = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
            major = 0;
        n = major + 1;
        cached[dev].store(n, std::memory_order_relaxed);
    }
    return n - 1 >= 9;
}

// CTAs of Kernel per SM at `smem` bytes (after opt_in), read once per device.
template <auto Kernel> int ctas_per_sm(size_t smem) {
    static std::atomic<int> cached[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 1;
    int n = cached[dev].load(std::memory_order_relaxed);
    if (n == 0) {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, kThreads, smem) !=
                cudaSuccess ||
            n < 1)
            n = 1;
        cached[dev].store(n, std::memory_order_relaxed);
    }
    return n;
}

// Splits of the keys for `slots` CTAs per SM: as many as fill one wave (a
// small batch leaves no SM idle and no wave half empty: a partial last wave
// leaves SMs idle for its whole length), at least 256
// keys each, keys_per_split a multiple of `align` (a multiple of 4: dropout's
// Philox words). The partial results live in a stream-ordered allocation,
// freed on the stream after the combine.
void decode_splits(DecodeParams &dp, const Params &p, int64_t slots, int64_t align) {
    const int64_t kv_heads = (int64_t)p.B * p.Hkv;
    const int64_t min_keys = kWarps * kDecodeKeys;
    int64_t splits = slots * sm_count() / kv_heads;
    const int64_t most = (p.Sk + min_keys - 1) / min_keys;
    splits = splits < 1 ? 1 : splits > most ? most : splits;
    int64_t per = (p.Sk + splits - 1) / splits;
    per = (per + align - 1) / align * align;
    dp.splits = (int)((p.Sk + per - 1) / per);
    dp.keys_per_split = (int)per;
}

// A variant's decode kernel, its combine and their workspace. The workspace
// comes from the caching allocator, freed in stream order after the combine:
// cudaMallocAsync's default pool gives its memory back at every
// synchronization (release threshold 0), so a decoder that waits for each
// step paid a new mapping per call (an 8 MB decode at 11 us alone took 74 us
// in a Llama decode step); the allocator's cache also serves CUDA graphs.
template <int KD, typename T, bool kDropout, int kStages, int kSK>
kk_status launch_decode_pipe(const Params &p, const char *device, cudaStream_t stream) {
    // Registers for the CTAs per SM that 16-key stages' shared memory allows
    // (3 with two stages, 2 with three, at D = 128), not with dropout, whose
    // Philox needs the registers and is not the hot case.
    constexpr int kMinBlocks = (!kDropout && kSK == 16) ? (kStages == 2 ? 3 : 2) : 1;
    constexpr auto kernel = attention_decode_pipe_kernel<KD, T, kDropout, kStages, kSK, kMinBlocks>;
    const size_t smem = decode_pipe_smem_elems<KD, kStages, kSK>() * sizeof(T);
    cudaError_t e = opt_in<kernel>(smem);
    if (e != cudaSuccess) return launch_error(e);
    DecodeParams dp;
    dp.p = p;
    dp.group = p.Hq / p.Hkv;
    const int over = decode_ctas_per_sm();
    decode_splits(dp, p, over > 0 ? over : ctas_per_sm<kernel>(smem), kSK);
    const int64_t rows = (int64_t)p.B * p.Hq * p.Sq;
    kk_mem_options mo;
    memset(&mo, 0, sizeof mo);
    mo.stream = stream;
    void *ws = nullptr;
    const kk_status st =
        kk_mem_alloc_ex(device, (size_t)rows * dp.splits * (p.d + 1) * sizeof(float), &mo, &ws);
    if (st != KK_OK) return st;
    dp.part_o = static_cast<float *>(ws);
    dp.part_lse = dp.part_o + rows * dp.splits * p.d;
    kernel<<<dim3((unsigned)dp.splits, (unsigned)(p.B * p.Hkv)), kThreads, smem, stream>>>(dp);
    e = cudaGetLastError();
    if (e == cudaSuccess) {
        const unsigned blocks = (unsigned)((rows + 7) / 8);
        if (decode_pdl()) {
            cudaLaunchAttribute attr[1];
            attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attr[0].val.programmaticStreamSerializationAllowed = 1;
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3(blocks);
            cfg.blockDim = dim3(256);
            cfg.dynamicSmemBytes = 0;
            cfg.stream = stream;
            cfg.attrs = attr;
            cfg.numAttrs = 1;
            e = cudaLaunchKernelEx(&cfg, attention_combine_kernel<T, true>, dp);
        } else {
            attention_combine_kernel<T><<<blocks, 256, 0, stream>>>(dp);
            e = cudaGetLastError();
        }
    }
    (void)kk_mem_free_on_stream(ws, stream); // after the kernels, in stream order
    return e == cudaSuccess ? KK_OK : launch_error(e);
}

template <int KD, typename T, bool kDropout>
kk_status launch_decode_variant(const Params &p, int variant, const char *dev, cudaStream_t s) {
    if (variant == 2) return launch_decode_pipe<KD, T, kDropout, 2, 16>(p, dev, s);
    if (variant == 4) return launch_decode_pipe<KD, T, kDropout, 3, 16>(p, dev, s);
    if (variant == 3 && decode_pipe_smem_elems<KD, 3, 32>() * sizeof(T) <= (size_t)smem_optin())
        return launch_decode_pipe<KD, T, kDropout, 3, 32>(p, dev, s);
    return launch_decode_pipe<KD, T, kDropout, 2, 32>(p, dev, s);
}

template <typename T>
kk_status launch_decode_dtype(const Params &p, int kd, const char *dev, cudaStream_t s) {
    const int v = decode_variant();
    if (kd == 64)
        return p.dropout ? launch_decode_variant<64, T, true>(p, v, dev, s)
                         : launch_decode_variant<64, T, false>(p, v, dev, s);
    return p.dropout ? launch_decode_variant<128, T, true>(p, v, dev, s)
                     : launch_decode_variant<128, T, false>(p, v, dev, s);
}

} // namespace

kk_status launch_decode(const Params &p, int kd, bool bf16, const char *device,
                        cudaStream_t stream) {
    return bf16 ? launch_decode_dtype<__nv_bfloat16>(p, kd, device, stream)
                : launch_decode_dtype<__half>(p, kd, device, stream);
}

} // namespace kk_attn
