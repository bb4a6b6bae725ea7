// The `attention` op's CUDA kernel slot: picks the compiled head dim, fills
// the kernel's parameters from the op's and the tensors' strides, launches on
// the caller's stream. Configurations the kernel does not cover (f32, a head
// dim that is not a multiple of 8) are KK_ERR_UNSUPPORTED before anything is
// enqueued, which kk_op_run answers with the CPU kernel.
#include <cuda_runtime.h>

#include <atomic>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/kernels/attention_decode.cuh"
#include "cuda/kernels/attention_sm90.cuh"
#include "cuda/kernels/launch_util.cuh"
#include "cuda/cuda_kernels.h"
#include "opdef/attention.h"
#include "cuda/cuda_kernels.h"

extern "C" {
#include "core/error.h"
}

namespace {

using kk_attn::Params;

using kk_cuda::opt_in;

template <int KD, typename T, bool kDropout, class C = kk_attn::Config<KD>>
cudaError_t launch(const Params &p, cudaStream_t stream) {
    const size_t smem = (size_t)(C::kBlockM + 2 * C::kBlockN) * (KD + 8) * sizeof(T);
    auto kernel = kk_attn::attention_fwd_kernel<KD, T, kDropout, C>;
    const cudaError_t e = opt_in<kk_attn::attention_fwd_kernel<KD, T, kDropout, C>>(smem);
    if (e != cudaSuccess) return e;
    const dim3 grid((unsigned)((p.Sq + C::kBlockM - 1) / C::kBlockM), (unsigned)(p.B * p.Hq));
    kernel<<<grid, kk_attn::kThreads, smem, stream>>>(p);
    return cudaGetLastError();
}

#ifdef KK_ATTN_TUNING
// Tile experiments (docs/kernels/attention.md): KK_ATTN_TILES=MT,BN,QR picks
// another tiling for head dims 64 and 128 in a build with -DKK_ATTN_TUNING.
template <int KD, typename T, bool kDropout>
cudaError_t launch_tuned(const Params &p, cudaStream_t stream, const char *v) {
    using namespace kk_attn;
    if (!strcmp(v, "2,64,1")) return launch<KD, T, kDropout, Tiles<2, 64, true>>(p, stream);
    if (!strcmp(v, "2,64,0")) return launch<KD, T, kDropout, Tiles<2, 64, false>>(p, stream);
    if (!strcmp(v, "2,128,0")) return launch<KD, T, kDropout, Tiles<2, 128, false>>(p, stream);
    if (!strcmp(v, "2,32,0")) return launch<KD, T, kDropout, Tiles<2, 32, false>>(p, stream);
    if (!strcmp(v, "1,128,1")) return launch<KD, T, kDropout, Tiles<1, 128, true>>(p, stream);
    if (!strcmp(v, "1,64,1")) return launch<KD, T, kDropout, Tiles<1, 64, true>>(p, stream);
    if (!strcmp(v, "1,64,0")) return launch<KD, T, kDropout, Tiles<1, 64, false>>(p, stream);
    return launch<KD, T, kDropout>(p, stream);
}
#endif

template <typename T, bool kDropout>
cudaError_t launch_dim(const Params &p, int kd, cudaStream_t stream) {
#ifdef KK_ATTN_TUNING
    const char *v = getenv("KK_ATTN_TILES");
    if (v && !kDropout && kd == 64) return launch_tuned<64, T, kDropout>(p, stream, v);
    if (v && !kDropout && kd == 128) return launch_tuned<128, T, kDropout>(p, stream, v);
#endif
    switch (kd) {
    case 32: return launch<32, T, kDropout>(p, stream);
    case 64: return launch<64, T, kDropout>(p, stream);
    case 96: return launch<96, T, kDropout>(p, stream);
    case 128: return launch<128, T, kDropout>(p, stream);
    default: return launch<256, T, kDropout>(p, stream);
    }
}

template <typename T> cudaError_t launch_dtype(const Params &p, int kd, cudaStream_t stream) {
    return p.dropout ? launch_dim<T, true>(p, kd, stream) : launch_dim<T, false>(p, kd, stream);
}

// The smallest compiled head dim that holds d.
int padded_head_dim(int64_t d) {
    static const int dims[] = {32, 64, 96, 128, 256};
    for (int kd : dims)
        if (d <= kd) return kd;
    return 0;
}

} // namespace

extern "C" kk_status kk__attention_cuda(const kk_op_params *op, kk_tensor *const *t,
                                        kk_stream stream) {
    const int64_t *i = op->i;
    const kk_dtype dt = (kk_dtype)i[KK__ATT_DTYPE];
    const int64_t D = i[KK__ATT_D];
    if (dt != KK_DTYPE_BF16 && dt != KK_DTYPE_F16)
        return kk__error(KK_ERR_UNSUPPORTED, "attention",
                         "the cuda kernel takes bf16 and f16, not %s", kk_dtype_name(dt));
    if (D % 8 != 0)
        return kk__error(KK_ERR_UNSUPPORTED, "attention",
                         "the cuda kernel takes head dims that are multiples of 8, not D = %lld",
                         (long long)D);
    if (i[KK__ATT_SQ] > INT32_MAX / 2 || i[KK__ATT_SK] > INT32_MAX / 2 ||
        i[KK__ATT_B] * i[KK__ATT_HQ] > 65535L * 65535L)
        return kk__error(KK_ERR_UNSUPPORTED, "attention", "the cuda kernel's grid is too small");
    for (int k = 0; k < 4; k++)
        if (!t[k] || t[k]->device_kind != KK_BACKEND_CUDA || t[k]->dtype != dt)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "attention", k < 3 ? "q/k/v" : "o",
                                 "a cuda tensor of the op's dtype", "%s",
                                 t[k] ? t[k]->device : "NULL");
    // Strided q, k, v, o (kk_op_run lets them through: the row's `strided`)
    // need 16-byte rows: the head dim contiguous, the other strides multiples
    // of 8 elements, the data 16-byte aligned; lse is written contiguously.
    for (int k = 0; k < 4; k++) {
        const kk_tensor *x = t[k];
        if (x->strides[3] != 1 || x->strides[0] % 8 || x->strides[1] % 8 || x->strides[2] % 8 ||
            (uintptr_t)x->data % 16)
            return kk__error(KK_ERR_UNSUPPORTED, "attention",
                             "the cuda kernel needs 16-byte aligned rows of %s (strides %lld, "
                             "%lld, %lld, %lld)",
                             k == 0   ? "q"
                             : k == 1 ? "k"
                             : k == 2 ? "v"
                                      : "o",
                             (long long)x->strides[0], (long long)x->strides[1],
                             (long long)x->strides[2], (long long)x->strides[3]);
    }
    if (i[KK__ATT_LSE] && !kk_tensor_is_contiguous(t[4]))
        return kk__error(KK_ERR_UNSUPPORTED, "attention",
                         "the cuda kernel writes lse contiguously");
    Params p;
    memset(&p, 0, sizeof p);
    p.q = t[0]->data;
    p.k = t[1]->data;
    p.v = t[2]->data;
    p.o = t[3]->data;
    p.lse = i[KK__ATT_LSE] ? static_cast<float *>(t[4]->data) : nullptr;
    const kk_tensor *q = t[0], *k = t[1], *v = t[2], *o = t[3];
    p.q_bs = q->strides[0], p.q_hs = q->strides[1], p.q_ss = q->strides[2];
    p.k_bs = k->strides[0], p.k_hs = k->strides[1], p.k_ss = k->strides[2];
    p.v_bs = v->strides[0], p.v_hs = v->strides[1], p.v_ss = v->strides[2];
    p.o_bs = o->strides[0], p.o_hs = o->strides[1], p.o_ss = o->strides[2];
    p.B = (int)i[KK__ATT_B];
    p.Hq = (int)i[KK__ATT_HQ];
    p.Hkv = (int)i[KK__ATT_HKV];
    p.Sq = (int)i[KK__ATT_SQ];
    p.Sk = (int)i[KK__ATT_SK];
    p.d = (int)D;
    const double scale = op->f[KK__ATT_SCALE] > 0 ? op->f[KK__ATT_SCALE] : 1.0 / sqrt((double)D);
    p.scale_log2 = (float)(scale * 1.4426950408889634);
    p.causal = (int)i[KK__ATT_CAUSAL];
    p.window_left = (int)(i[KK__ATT_WL] > INT32_MAX / 4 ? INT32_MAX / 4 : i[KK__ATT_WL]);
    p.window_right = (int)(i[KK__ATT_WR] > INT32_MAX / 4 ? INT32_MAX / 4 : i[KK__ATT_WR]);
    const double drop = op->f[KK__ATT_DROPOUT];
    p.dropout = drop > 0.0;
    p.drop_threshold = kk__dropout_threshold(drop);
    p.drop_rescale = (float)(1.0 / (1.0 - drop));
    p.seed = (uint64_t)i[KK__ATT_SEED];
    p.offset = (uint64_t)i[KK__ATT_OFFSET];

    const int kd = padded_head_dim(D);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    cudaError_t e;
    if (kk_attn::use_decode(p, kd))
        return kk_attn::launch_decode(p, kd, dt == KK_DTYPE_BF16, t[0]->device, s);
    if ((kd == 64 || kd == 128) && kk_attn::hopper_ready())
        e = kk_attn::launch_hopper(p, kd, dt == KK_DTYPE_BF16, s);
    else
        e = dt == KK_DTYPE_BF16 ? launch_dtype<__nv_bfloat16>(p, kd, s)
                                : launch_dtype<__half>(p, kd, s);
    if (e != cudaSuccess)
        return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, "attention", cudaGetErrorName(e),
                              cudaGetErrorString(e), "the attention kernel failed to launch");
    return KK_OK;
}

extern "C" const kk__slot kk__attention_cuda_slot = {kk__attention_cuda, 1};
