// rope_kv_append on CUDA: a decode step's bookkeeping. Token s of sequence b
// sits at position cache_seqlens[b] + s; q is rotated into q_out, k rotated
// and v as is are written to row cache_seqlens[b] + s of the caches
// [B, Hkv, S_max, D]. Caches given as two buffers are copied in to out first
// (cudaMemcpyAsync on the stream); one buffer is appended to in place.
// A block takes one token: it computes that position's cos/sin (f64, rounded
// to f32 once, rope.cu's table) into shared memory, then its threads walk
// the token's q heads, k heads and v heads one element pair at a time.
// The lengths live on the device, so they are checked there: a token whose
// row would fall outside the cache writes no cache row (q_out is still
// written; the CPU twin refuses the whole call instead, which a kernel cannot
// do without synchronizing).
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda/kernels/rope_freq.cuh"
#include "cuda/kernels/rows.cuh"
#include "cuda/cuda_kernels.h"
extern "C" {
#include "opdef/rope.h" // no C++ guards of its own
#include "opdef/rope_kv_append.h"
}

namespace {

using namespace kk_rows;

constexpr int kThreads = 256;

// Strides in elements of a [B, H, S, D] tensor (D contiguous).
struct Str {
    int64_t b, h, s;
};

struct KvArgs {
    const void *q, *k, *v;
    const int32_t *lens;
    void *qo, *kc, *vc;
    Str qs, ks, vs, qos, kcs, vcs;
    int64_t B, Hq, Hkv, S, smax, D, R, half;
    int gptj;
    kk_rope::Freq freq;
};

// VEC elements of T moved as one access (VEC = 4: 8 bytes of bf16/f16, 16
// of f32), the host having checked the alignment.
template <typename T, int VEC> struct alignas(sizeof(T) * VEC) Pack { T v[VEC]; };
template <typename T, int VEC> __device__ __forceinline__ Pack<T, VEC> load(const T *p) {
    return *reinterpret_cast<const Pack<T, VEC> *>(p);
}
template <typename T, int VEC> __device__ __forceinline__ void store(T *p, const Pack<T, VEC> &x) {
    *reinterpret_cast<Pack<T, VEC> *>(p) = x;
}

// Job j of a row (VEC pairs or VEC elements): row x rotated (the pairs j ..
// j + VEC - 1 of [0, R)) and copied ([R, D)) into row y; jobs j < half
// rotate, the others copy elements R + j - half onwards. Each operation
// rounded as the CPU's rotation.
template <int DT, int VEC>
__device__ __forceinline__ void rope_job(const KvArgs &a, const typename Elem<DT>::T *x,
                                         typename Elem<DT>::T *y, int j, const float *c,
                                         const float *s) {
    typedef typename Elem<DT>::T T;
    typedef Pack<T, VEC> P;
    auto rot = [&](float xa, float xb, int i, T &ya, T &yb) {
        ya = from_f32<DT>(__fsub_rn(__fmul_rn(xa, c[i]), __fmul_rn(xb, s[i])));
        yb = from_f32<DT>(__fadd_rn(__fmul_rn(xb, c[i]), __fmul_rn(xa, s[i])));
    };
    if (j >= a.half) { // the unrotated tail
        const int e = a.R + j - a.half;
        store<T, VEC>(y + e, load<T, VEC>(x + e));
    } else if (a.gptj) { // pairs (2i, 2i + 1): 2 VEC elements from 2j
        const P lo = load<T, VEC>(x + 2 * j), hi = load<T, VEC>(x + 2 * j + VEC);
        T xs[2 * VEC], ys[2 * VEC];
        P ylo, yhi;
#pragma unroll
        for (int e = 0; e < VEC; e++) xs[e] = lo.v[e], xs[VEC + e] = hi.v[e];
#pragma unroll
        for (int i = 0; i < VEC; i++)
            rot(to_f32<DT>(xs[2 * i]), to_f32<DT>(xs[2 * i + 1]), j + i, ys[2 * i], ys[2 * i + 1]);
#pragma unroll
        for (int e = 0; e < VEC; e++) ylo.v[e] = ys[e], yhi.v[e] = ys[VEC + e];
        store<T, VEC>(y + 2 * j, ylo);
        store<T, VEC>(y + 2 * j + VEC, yhi);
    } else { // pairs (i, i + half)
        P xa = load<T, VEC>(x + j), xb = load<T, VEC>(x + j + a.half), ya, yb;
#pragma unroll
        for (int i = 0; i < VEC; i++)
            rot(to_f32<DT>(xa.v[i]), to_f32<DT>(xb.v[i]), j + i, ya.v[i], yb.v[i]);
        store<T, VEC>(y + j, ya);
        store<T, VEC>(y + j + a.half, yb);
    }
}

// A block per token (grid-stride): its position's cos/sin into shared
// memory, then the token's q heads, k heads and v heads in jobs of VEC pairs
// or elements (VEC = 4 when every row and stride allows, else 1). Indices are
// 32-bit: a token has at most (Hq + 2 Hkv) D elements.
template <int DT, int VEC>
__global__ void __launch_bounds__(kThreads) rope_kv_append_kernel(KvArgs a) {
    typedef typename Elem<DT>::T T;
    extern __shared__ float table[]; // cos [half], sin [half]
    float *cs = table, *sn = table + a.half;
    const int jobs = (int)(a.half + (a.D - a.R)) / VEC, vjobs = (int)a.D / VEC; // per row
    for (int64_t tok = blockIdx.x; tok < a.B * a.S; tok += gridDim.x) {
        const int64_t b = tok / a.S, s = tok % a.S;
        const int64_t len = a.lens[b];
        const int64_t pos = len + s;
        __syncthreads(); // the last token's table read
        for (int i = threadIdx.x; i < a.half; i += kThreads) {
            double sd, cd;
            sincos((double)pos * kk_rope::inv_freq(a.freq, i), &sd, &cd);
            cs[i] = (float)cd;
            sn[i] = (float)sd;
        }
        __syncthreads();
        const bool fits = len >= 0 && len <= a.smax - a.S;
        // q: Hq rows; k: Hkv rows into the cache; v: Hkv rows of D copied
        const int nq = (int)a.Hq * jobs, nk = fits ? (int)a.Hkv * jobs : 0;
        const int nv = fits ? (int)a.Hkv * vjobs : 0;
        const T *q = static_cast<const T *>(a.q) + b * a.qs.b + s * a.qs.s;
        T *qo = static_cast<T *>(a.qo) + b * a.qos.b + s * a.qos.s;
        const T *k = static_cast<const T *>(a.k) + b * a.ks.b + s * a.ks.s;
        T *kc = static_cast<T *>(a.kc) + b * a.kcs.b + pos * a.kcs.s;
        const T *v = static_cast<const T *>(a.v) + b * a.vs.b + s * a.vs.s;
        T *vc = static_cast<T *>(a.vc) + b * a.vcs.b + pos * a.vcs.s;
        for (int w = threadIdx.x; w < nq + nk + nv; w += kThreads) {
            if (w < nq) {
                const int h = w / jobs, j = (w - h * jobs) * VEC;
                rope_job<DT, VEC>(a, q + h * a.qs.h, qo + h * a.qos.h, j, cs, sn);
            } else if (w < nq + nk) {
                const int h = (w - nq) / jobs, j = (w - nq - h * jobs) * VEC;
                rope_job<DT, VEC>(a, k + h * a.ks.h, kc + h * a.kcs.h, j, cs, sn);
            } else {
                const int h = (w - nq - nk) / vjobs, e = (w - nq - nk - h * vjobs) * VEC;
                store<T, VEC>(vc + h * a.vcs.h + e, load<T, VEC>(v + h * a.vs.h + e));
            }
        }
    }
}

Str str_of(const kk_tensor *t) { return {t->strides[0], t->strides[1], t->strides[2]}; }

// The output cache: in place (the input's buffer) or apart from it, with
// the input copied in; overlapping otherwise is an error, as on the CPU.
kk_status cache_out(const kk_tensor *in, const kk_tensor *out, const char *name, size_t bytes,
                    cudaStream_t s) {
    const char *a = static_cast<const char *>(in->data), *b = static_cast<const char *>(out->data);
    if (a == b) return KK_OK;
    if (!(a + bytes <= b || b + bytes <= a))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "rope_kv_append", name,
                             "the input cache's buffer itself, or memory apart from it",
                             "a buffer overlapping it at %+lld bytes", (long long)(b - a));
    // both contiguous (the copy is of whole caches)
    const cudaError_t e = cudaMemcpyAsync(out->data, in->data, bytes, cudaMemcpyDeviceToDevice, s);
    if (e == cudaSuccess) return KK_OK;
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, "rope_kv_append", cudaGetErrorName(e),
                          cudaGetErrorString(e), "copying %s in to out (%zu bytes)", name, bytes);
}

// Jobs of 4 pairs / 4 elements: every row's pieces (half, D - R, D) in fours,
// every stride a multiple of 4 elements and every buffer aligned to 4 of them.
bool vec4_ok(const KvArgs &a, size_t elem) {
    const Str *st[] = {&a.qs, &a.ks, &a.vs, &a.qos, &a.kcs, &a.vcs};
    const void *ptr[] = {a.q, a.k, a.v, a.qo, a.kc, a.vc};
    bool ok = a.half % 4 == 0 && (a.D - a.R) % 4 == 0 && a.D % 4 == 0;
    for (int i = 0; i < 6; i++)
        ok = ok && st[i]->b % 4 == 0 && st[i]->h % 4 == 0 && st[i]->s % 4 == 0 &&
             reinterpret_cast<uintptr_t>(ptr[i]) % (4 * elem) == 0;
    return ok;
}

bool contiguous4(const kk_tensor *t) {
    return t->strides[3] == 1 && t->strides[2] == t->shape[3] &&
           t->strides[1] == t->shape[2] * t->shape[3] &&
           t->strides[0] == t->shape[1] * t->shape[2] * t->shape[3];
}

} // namespace

extern "C" kk_status kk__rope_kv_append_cuda(const kk_op_params *p, kk_tensor *const *t,
                                             kk_stream stream) {
    kk_status st = check_tensors(p, t);
    if (st != KK_OK) return st;
    const kk_dtype dt = (kk_dtype)p->i[KK__RKV_DTYPE];
    kk_op_params rope;
    kk__rope_kv_append_rope_params(p, &rope);
    KvArgs a;
    a.B = p->i[KK__RKV_B];
    a.Hq = p->i[KK__RKV_HQ];
    a.Hkv = p->i[KK__RKV_HKV];
    a.S = p->i[KK__RKV_S];
    a.smax = p->i[KK__RKV_SMAX];
    a.D = p->i[KK__RKV_D];
    a.R = kk__rope_rotary_dim(&rope);
    a.half = a.R / 2;
    if (a.D > 1024 || a.R > a.D || a.R < 2 || a.R % 2)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "rope_kv_append", "rotary_dim",
                             "an even number in 2..D, D <= 1024", "%lld", (long long)a.R);
    a.gptj = p->i[KK__RKV_STYLE] == KK__ROPE_GPTJ;
    a.freq.theta = p->f[KK__RKV_THETA];
    a.freq.R = a.R;
    a.freq.llama3 = p->i[KK__RKV_SCALING] == KK__ROPE_SCALING_LLAMA3;
    a.freq.factor = p->f[KK__RKV_FACTOR];
    a.freq.low = p->f[KK__RKV_LOW];
    a.freq.high = p->f[KK__RKV_HIGH];
    a.freq.old = (double)p->i[KK__RKV_OLD_LEN];
    const kk_tensor *kin = t[KK__RKV_T_KC_IN], *vin = t[KK__RKV_T_VC_IN];
    const kk_tensor *kc = t[KK__RKV_T_KC], *vc = t[KK__RKV_T_VC];
    const bool apart = kin->data != kc->data || vin->data != vc->data;
    if (apart && !(contiguous4(kin) && contiguous4(vin) && contiguous4(kc) && contiguous4(vc)))
        return kk__error(KK_ERR_UNSUPPORTED, "rope_kv_append",
                         "the cuda kernel copies only contiguous caches (strided ones apart from "
                         "their inputs run on the CPU)");
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    const size_t bytes = kk_dtype_bytes(dt, (size_t)(a.B * a.Hkv * a.smax * a.D));
    if ((st = cache_out(kin, kc, "k_cache", bytes, s)) != KK_OK) return st;
    if ((st = cache_out(vin, vc, "v_cache", bytes, s)) != KK_OK) return st;
    a.q = t[KK__RKV_T_Q]->data;
    a.k = t[KK__RKV_T_K]->data;
    a.v = t[KK__RKV_T_V]->data;
    a.lens = static_cast<const int32_t *>(t[KK__RKV_T_LENS]->data);
    a.qo = t[KK__RKV_T_Q_OUT]->data;
    a.kc = kc->data;
    a.vc = vc->data;
    a.qs = str_of(t[KK__RKV_T_Q]);
    a.ks = str_of(t[KK__RKV_T_K]);
    a.vs = str_of(t[KK__RKV_T_V]);
    a.qos = str_of(t[KK__RKV_T_Q_OUT]);
    a.kcs = str_of(kc);
    a.vcs = str_of(vc);
    const size_t smem = 2 * (size_t)a.half * sizeof(float);
    const int64_t tokens = a.B * a.S, most = (int64_t)kk_cuda::sm_count() * 8;
    const unsigned grid = (unsigned)(tokens < most ? tokens : most);
    const bool vec = vec4_ok(a, kk_dtype_bytes(dt, 1));
    if (dt == KK_DTYPE_F32)
        vec ? rope_kv_append_kernel<kF32, 4><<<grid, kThreads, smem, s>>>(a)
            : rope_kv_append_kernel<kF32, 1><<<grid, kThreads, smem, s>>>(a);
    else if (dt == KK_DTYPE_F16)
        vec ? rope_kv_append_kernel<kF16, 4><<<grid, kThreads, smem, s>>>(a)
            : rope_kv_append_kernel<kF16, 1><<<grid, kThreads, smem, s>>>(a);
    else
        vec ? rope_kv_append_kernel<kBF16, 4><<<grid, kThreads, smem, s>>>(a)
            : rope_kv_append_kernel<kBF16, 1><<<grid, kThreads, smem, s>>>(a);
    return launch_status("rope_kv_append", grid, kThreads);
}

extern "C" const kk__slot kk__rope_kv_append_cuda_slot = {kk__rope_kv_append_cuda, 1};
