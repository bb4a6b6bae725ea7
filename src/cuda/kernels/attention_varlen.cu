// The `attention_varlen` op's CUDA kernel slot: the forward kernel
// (attention_sm80.cuh) with kVarlen, one CTA per (sequence x query head, query
// block), the grid sized by max_seqlen_q as in FlashAttention. cu_seqlens are
// read only by the kernel, which skips a sequence whose offsets do not fit the
// tensors; unsupported cases are KK_ERR_UNSUPPORTED before anything is enqueued.
// docs/kernels/attention.md, "Variable-length batches".
#include <cuda_runtime.h>

#include <atomic>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda/kernels/attention_sm80.cuh"
#include "cuda/kernels/launch_util.cuh"

extern "C" {
#include "core/error.h"
#include "cuda/cuda_kernels.h"
#include "opdef/attention_varlen.h"
}

namespace {

using kk_attn::Params;

using kk_cuda::opt_in;

// Grid (sequences x heads, query blocks of the longest sequence).
template <int KD, typename T, bool kDropout, class C = kk_attn::Config<KD>>
cudaError_t launch(const Params &p, int64_t max_q, cudaStream_t stream) {
    const size_t smem = (size_t)(C::kBlockM + 2 * C::kBlockN) * (KD + 8) * sizeof(T);
    auto kernel = kk_attn::attention_fwd_kernel<KD, T, kDropout, C, true>;
    const cudaError_t e = opt_in<kk_attn::attention_fwd_kernel<KD, T, kDropout, C, true>>(smem);
    if (e != cudaSuccess) return e;
    const dim3 grid((unsigned)((int64_t)p.B * p.Hq),
                    (unsigned)((max_q + C::kBlockM - 1) / C::kBlockM));
    kernel<<<grid, kk_attn::kThreads, smem, stream>>>(p);
    return cudaGetLastError();
}

template <typename T, bool kDropout>
cudaError_t launch_dim(const Params &p, int kd, int64_t max_q, cudaStream_t stream) {
    switch (kd) {
    case 32: return launch<32, T, kDropout>(p, max_q, stream);
    case 64: return launch<64, T, kDropout>(p, max_q, stream);
    case 96: return launch<96, T, kDropout>(p, max_q, stream);
    case 128: return launch<128, T, kDropout>(p, max_q, stream);
    default: return launch<256, T, kDropout>(p, max_q, stream);
    }
}

template <typename T>
cudaError_t launch_dtype(const Params &p, int kd, int64_t max_q, cudaStream_t s) {
    return p.dropout ? launch_dim<T, true>(p, kd, max_q, s) : launch_dim<T, false>(p, kd, max_q, s);
}

// The smallest compiled head dim that holds d.
int padded_head_dim(int64_t d) {
    static const int dims[] = {32, 64, 96, 128, 256};
    for (int kd : dims)
        if (d <= kd) return kd;
    return 0;
}

const char *const names[] = {"q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "o", "lse"};

} // namespace

extern "C" kk_status kk__attention_varlen_cuda(const kk_op_params *op, kk_tensor *const *t,
                                               kk_stream stream) {
    const int64_t *i = op->i;
    const kk_dtype dt = (kk_dtype)i[KK__AVL_DTYPE];
    const int64_t D = i[KK__AVL_D];
    if (dt != KK_DTYPE_BF16 && dt != KK_DTYPE_F16)
        return kk__error(KK_ERR_UNSUPPORTED, "attention_varlen",
                         "the cuda kernel takes bf16 and f16, not %s", kk_dtype_name(dt));
    if (D % 8 != 0)
        return kk__error(KK_ERR_UNSUPPORTED, "attention_varlen",
                         "the cuda kernel takes head dims that are multiples of 8, not D = %lld",
                         (long long)D);
    kk__varlen_dims d;
    kk__attention_varlen_dims(op, &d);
    if (d.total_q > INT32_MAX / 2 || d.total_k > INT32_MAX / 2)
        return kk__error(KK_ERR_UNSUPPORTED, "attention_varlen",
                         "the cuda kernel takes at most 2^30 rows");
    for (int k = 0; k <= KK__AVL_T_O; k++) {
        const kk_dtype want = k == KK__AVL_T_CUQ || k == KK__AVL_T_CUK ? KK_DTYPE_INT32 : dt;
        if (!t[k] || t[k]->device_kind != KK_BACKEND_CUDA || t[k]->dtype != want)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "attention_varlen", names[k],
                                 "a cuda tensor of the op's dtype", "%s",
                                 t[k] ? t[k]->device : "NULL");
    }
    if (!kk_tensor_is_contiguous(t[KK__AVL_T_CUQ]) || !kk_tensor_is_contiguous(t[KK__AVL_T_CUK]))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "attention_varlen", "cu_seqlens_q/k",
                             "contiguous int32 offsets", "strided");
    // q, k, v, o may be strided (a [total,H,D] buffer's view): 16-byte rows,
    // the head dim contiguous, the other strides multiples of 8 elements, the
    // data 16-byte aligned; lse is written contiguously.
    const int rows[4] = {KK__AVL_T_Q, KK__AVL_T_K, KK__AVL_T_V, KK__AVL_T_O};
    for (int k : rows) {
        const kk_tensor *x = t[k];
        if (x->strides[3] != 1 || x->strides[1] % 8 || x->strides[2] % 8 || (uintptr_t)x->data % 16)
            return kk__error(KK_ERR_UNSUPPORTED, "attention_varlen",
                             "the cuda kernel needs 16-byte aligned rows of %s (strides %lld, "
                             "%lld, %lld, %lld)",
                             names[k], (long long)x->strides[0], (long long)x->strides[1],
                             (long long)x->strides[2], (long long)x->strides[3]);
    }
    if (i[KK__AVL_LSE] && !kk_tensor_is_contiguous(t[KK__AVL_T_LSE]))
        return kk__error(KK_ERR_UNSUPPORTED, "attention_varlen",
                         "the cuda kernel writes lse contiguously");
    Params p;
    memset(&p, 0, sizeof p);
    const kk_tensor *q = t[KK__AVL_T_Q], *k = t[KK__AVL_T_K], *v = t[KK__AVL_T_V],
                    *o = t[KK__AVL_T_O];
    p.q = q->data;
    p.k = k->data;
    p.v = v->data;
    p.o = o->data;
    p.lse = i[KK__AVL_LSE] ? static_cast<float *>(t[KK__AVL_T_LSE]->data) : nullptr;
    p.cu_q = static_cast<const int *>(t[KK__AVL_T_CUQ]->data);
    p.cu_k = static_cast<const int *>(t[KK__AVL_T_CUK]->data);
    // batch strides unused: the sequence's offset moves the rows
    p.q_hs = q->strides[1], p.q_ss = q->strides[2];
    p.k_hs = k->strides[1], p.k_ss = k->strides[2];
    p.v_hs = v->strides[1], p.v_ss = v->strides[2];
    p.o_hs = o->strides[1], p.o_ss = o->strides[2];
    p.B = (int)d.nseq;
    p.Hq = (int)i[KK__AVL_HQ];
    p.Hkv = (int)i[KK__AVL_HKV];
    p.Sq = (int)d.total_q;
    p.Sk = (int)d.total_k;
    p.d = (int)D;
    const double scale = op->f[KK__AVL_SCALE] > 0 ? op->f[KK__AVL_SCALE] : 1.0 / sqrt((double)D);
    p.scale_log2 = (float)(scale * 1.4426950408889634);
    p.causal = (int)i[KK__AVL_CAUSAL];
    p.window_left = (int)(i[KK__AVL_WL] > INT32_MAX / 4 ? INT32_MAX / 4 : i[KK__AVL_WL]);
    p.window_right = (int)(i[KK__AVL_WR] > INT32_MAX / 4 ? INT32_MAX / 4 : i[KK__AVL_WR]);
    const double drop = op->f[KK__AVL_DROPOUT];
    p.dropout = drop > 0.0;
    p.drop_threshold = kk__dropout_threshold(drop);
    p.drop_rescale = (float)(1.0 / (1.0 - drop));
    p.seed = (uint64_t)i[KK__AVL_SEED];
    p.offset = (uint64_t)i[KK__AVL_OFFSET];

    const int kd = padded_head_dim(D);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const cudaError_t e = dt == KK_DTYPE_BF16 ? launch_dtype<__nv_bfloat16>(p, kd, d.max_q, s)
                                              : launch_dtype<__half>(p, kd, d.max_q, s);
    if (e != cudaSuccess)
        return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, "attention_varlen", cudaGetErrorName(e),
                              cudaGetErrorString(e), "the attention kernel failed to launch");
    return KK_OK;
}

extern "C" const kk__slot kk__attention_varlen_cuda_slot = {kk__attention_varlen_cuda, 1};
