// rope on CUDA: rotary embedding of x [B, H, S, D] (strided rows), neox or
// gptj pairs, dimensions past rotary_dim copied. A block takes a tile of
// positions: it computes their cos and sin in f64, rounded to f32 once (the
// CPU twin's table, the same bits up to the f64 libraries' last ulp), into
// shared memory, then every head and batch row of those positions reads it:
// 16-byte vectors where the row allows, one element at a time otherwise.
// With per-token positions (pos [B, S]) the tiles run over (batch, position)
// tokens instead of positions; Llama-3 scaling changes only inv_freq.
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda/kernels/rope_freq.cuh"
#include "cuda/kernels/rows.cuh"
#include "cuda/cuda_kernels.h"
extern "C" {
#include "opdef/rope.h" // no C++ guards of its own
}

namespace {

using namespace kk_rows;

constexpr int kThreads = 256;

struct RopeArgs {
    const void *x;
    void *y;
    const int32_t *pos; // per-token positions [B, S] (row stride ps), or NULL
    int64_t B, H, S, R, half;
    int64_t xs0, xs1, xs2, ys0, ys1, ys2, ps;
    int64_t offset;
    int64_t T, Bj;      // tokens tiled (S, or B S with pos) and batches walked per token (B, or 1)
    kk_rope::Freq freq; // theta, rotary dim, Llama-3 scaling
    int P;              // tokens per tile
    int jrot, jrow;     // jobs per row: rotations, and rotations + copies
};

// n elements at p into f: one 16-byte access when VEC (n == 16 bytes).
template <int DT, int N, bool VEC>
__device__ __forceinline__ void ld(const typename Elem<DT>::T *p, float (&f)[N]) {
    typedef typename Elem<DT>::T T;
    if (VEC) {
        const uint4 u = *reinterpret_cast<const uint4 *>(p);
        const T *e = reinterpret_cast<const T *>(&u);
#pragma unroll
        for (int j = 0; j < N; j++) f[j] = to_f32<DT>(e[j]);
    } else {
#pragma unroll
        for (int j = 0; j < N; j++) f[j] = to_f32<DT>(p[j]);
    }
}

template <int DT, int N, bool VEC>
__device__ __forceinline__ void st(typename Elem<DT>::T *p, const float (&f)[N]) {
    typedef typename Elem<DT>::T T;
    if (VEC) {
        uint4 u;
        T *e = reinterpret_cast<T *>(&u);
#pragma unroll
        for (int j = 0; j < N; j++) e[j] = from_f32<DT>(f[j]);
        *reinterpret_cast<uint4 *>(p) = u;
    } else {
#pragma unroll
        for (int j = 0; j < N; j++) p[j] = from_f32<DT>(f[j]);
    }
}

// (a, b) -> (a c - b s, b c + a s), each operation rounded as the CPU does.
__device__ __forceinline__ void rot(float &a, float &b, float c, float s) {
    const float ya = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    b = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
    a = ya;
}

// Job q of a row: q < jrot rotates U elements (neox: U pairs (i, i + R/2);
// gptj: U/2 adjacent pairs), else copies C elements past R.
template <int DT, bool GPTJ, bool VEC>
__device__ __forceinline__ void job(const RopeArgs &a, const typename Elem<DT>::T *xr,
                                    typename Elem<DT>::T *yr, int q, const float *c,
                                    const float *s) {
    constexpr int V = Elem<DT>::kVec;
    constexpr int U = VEC ? V : (GPTJ ? 2 : 1);
    constexpr int C = VEC ? V : 1;
    if (q < a.jrot) {
        const int64_t e0 = (int64_t)q * U;
        if (GPTJ) {
            float f[U];
            ld<DT, U, VEC>(xr + e0, f);
#pragma unroll
            for (int j = 0; j < U / 2; j++)
                rot(f[2 * j], f[2 * j + 1], c[e0 / 2 + j], s[e0 / 2 + j]);
            st<DT, U, VEC>(yr + e0, f);
        } else {
            float f[U], g[U];
            ld<DT, U, VEC>(xr + e0, f);
            ld<DT, U, VEC>(xr + e0 + a.half, g);
#pragma unroll
            for (int j = 0; j < U; j++) rot(f[j], g[j], c[e0 + j], s[e0 + j]);
            st<DT, U, VEC>(yr + e0, f);
            st<DT, U, VEC>(yr + e0 + a.half, g);
        }
    } else {
        const int64_t e0 = a.R + (int64_t)(q - a.jrot) * C;
        float f[C];
        ld<DT, C, VEC>(xr + e0, f);
        st<DT, C, VEC>(yr + e0, f);
    }
}

template <int DT, bool GPTJ, bool VEC>
__global__ void __launch_bounds__(kThreads) rope_kernel(RopeArgs a) {
    typedef typename Elem<DT>::T T;
    extern __shared__ double smem[];
    const int half = (int)a.half, tid = threadIdx.x;
    double *inv_freq = smem;                                  // [half]
    int64_t *xoff = reinterpret_cast<int64_t *>(smem + half); // [P]: token p's row base in x
    int64_t *yoff = xoff + a.P;                               // [P]: and in y
    float *cs = reinterpret_cast<float *>(yoff + a.P);        // [P][half]
    float *sn = cs + a.P * half;                              // [P][half]
    for (int i = tid; i < half; i += kThreads) inv_freq[i] = kk_rope::inv_freq(a.freq, i);
    // A tile's jobs are (p, b, h, q), q fastest: every thread of the block
    // (and of the gridDim.y blocks sharing the tile) takes jobs, whatever the
    // jobs of one token (16 heads: 128, half a block). This thread's first
    // job and the step between its jobs, as digits of that mixed radix.
    const int64_t j0 = (int64_t)blockIdx.y * kThreads + tid, step = (int64_t)gridDim.y * kThreads;
    const int H = (int)a.H, Bj = (int)a.Bj, jrow = a.jrow;
    const int q0 = (int)(j0 % jrow), h0 = (int)(j0 / jrow % H), b0 = (int)(j0 / jrow / H % Bj);
    const int64_t p0 = j0 / jrow / H / Bj;
    const int sq = (int)(step % jrow), sh = (int)(step / jrow % H),
              sb = (int)(step / jrow / H % Bj);
    const int64_t sp = step / jrow / H / Bj;
    const int64_t tiles = (a.T + a.P - 1) / a.P;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int64_t s0 = tile * a.P;
        const int ph = (int)(a.T - s0 < a.P ? a.T - s0 : a.P);
        __syncthreads(); // inv_freq written; the last tile's table read
        for (int k = tid; k < ph * half; k += kThreads) {
            const int p = k / half, i = k - p * half;
            double sd, cd;
            const int64_t tok = s0 + p;
            const double at =
                a.pos ? (double)a.pos[tok / a.S * a.ps + tok % a.S] : (double)(a.offset + tok);
            sincos(at * inv_freq[i], &sd, &cd);
            cs[k] = (float)cd;
            sn[k] = (float)sd;
        }
        for (int p = tid; p < ph; p += kThreads) {
            // token s0 + p: position s (plain), or (batch, s) with pos
            const int64_t tok = s0 + p, s = a.pos ? tok % a.S : tok, bt = a.pos ? tok / a.S : 0;
            xoff[p] = s * a.xs2 + bt * a.xs0;
            yoff[p] = s * a.ys2 + bt * a.ys0;
        }
        __syncthreads();
        int64_t p = p0;
        int q = q0, h = h0, b = b0;
        while (p < ph) {
            const T *xr = static_cast<const T *>(a.x) + xoff[p] + b * a.xs0 + h * a.xs1;
            T *yr = static_cast<T *>(a.y) + yoff[p] + b * a.ys0 + h * a.ys1;
            job<DT, GPTJ, VEC>(a, xr, yr, q, cs + p * half, sn + p * half);
            q += sq; // add the step digit by digit, carrying
            int c = q >= jrow;
            q -= c ? jrow : 0;
            h += sh + c;
            c = h >= H;
            h -= c ? H : 0;
            b += sb + c;
            c = b >= Bj;
            b -= c ? Bj : 0;
            p += sp + c;
        }
    }
}

template <int DT, bool GPTJ, bool VEC>
kk_status go(const RopeArgs &a, size_t smem, cudaStream_t s) {
    const int64_t tiles = (a.T + a.P - 1) / a.P;
    const int64_t resident = (int64_t)kk_cuda::sm_count() * (2048 / kThreads);
    const unsigned grid = (unsigned)(tiles < resident ? tiles : resident);
    // A tile's jobs split over blocks when the tiles alone leave SMs idle
    // (decode: one token a sequence): down to a job a thread, at most what
    // the device holds at once.
    const int64_t jobs = (int64_t)a.P * a.Bj * a.H * a.jrow;
    int64_t split = (jobs + kThreads - 1) / kThreads, room = resident / (int64_t)grid;
    split = split > room ? room : split;
    split = split < 1 ? 1 : split > 65535 ? 65535 : split;
    rope_kernel<DT, GPTJ, VEC><<<dim3(grid, (unsigned)split), kThreads, smem, s>>>(a);
    return launch_status("rope", grid * (unsigned)split, kThreads);
}

template <int DT>
kk_status go_dtype(const RopeArgs &a, bool gptj, bool vec, size_t smem, cudaStream_t s) {
    if (gptj) return vec ? go<DT, true, true>(a, smem, s) : go<DT, true, false>(a, smem, s);
    return vec ? go<DT, false, true>(a, smem, s) : go<DT, false, false>(a, smem, s);
}

} // namespace

extern "C" kk_status kk__rope_cuda(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    const kk_status st = check_tensors(p, t);
    if (st != KK_OK) return st;
    const kk_dtype dt = (kk_dtype)p->i[KK__ROPE_DTYPE];
    const bool gptj = p->i[KK__ROPE_STYLE] == KK__ROPE_GPTJ;
    const int64_t V = dt == KK_DTYPE_F32 ? 4 : 8, D = p->i[KK__ROPE_D];
    // tensors: x, pos (positions=1), y
    const int has_pos = p->i[KK__ROPE_POSITIONS] != 0;
    kk_tensor *const yt = t[has_pos ? 2 : 1];
    RopeArgs a;
    a.x = t[0]->data;
    a.y = yt->data;
    a.pos = has_pos ? static_cast<const int32_t *>(t[1]->data) : nullptr;
    a.ps = has_pos && t[1]->shape[0] > 1 ? t[1]->strides[0] : p->i[KK__ROPE_S];
    a.freq.llama3 = p->i[KK__ROPE_SCALING] == KK__ROPE_SCALING_LLAMA3;
    a.freq.factor = p->f[KK__ROPE_FACTOR];
    a.freq.low = p->f[KK__ROPE_LOW];
    a.freq.high = p->f[KK__ROPE_HIGH];
    a.freq.old = (double)p->i[KK__ROPE_OLD_LEN];
    a.B = p->i[KK__ROPE_B];
    a.H = p->i[KK__ROPE_H];
    a.S = p->i[KK__ROPE_S];
    a.R = kk__rope_rotary_dim(p);
    a.half = a.R / 2;
    if (D > 1024 || a.R > D || a.R < 2 || a.R % 2)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "rope", "rotary_dim",
                             "an even number in 2..D, D <= 1024", "%lld", (long long)a.R);
    // a stride matters only along a dimension longer than 1
    const int64_t *xs = t[0]->strides, *ys = yt->strides;
    a.xs0 = xs[0], a.xs1 = xs[1], a.xs2 = xs[2];
    a.ys0 = ys[0], a.ys1 = ys[1], a.ys2 = ys[2];
    bool vec =
        D % V == 0 && (gptj ? a.R % V == 0 : a.half % V == 0) && aligned16(a.x) && aligned16(a.y);
    const int64_t sizes[3] = {a.B, a.H, a.S};
    for (int k = 0; k < 3; k++)
        if (sizes[k] > 1 && (xs[k] % V || ys[k] % V)) vec = false;
    const int64_t U = vec ? V : (gptj ? 2 : 1), C = vec ? V : 1;
    a.jrot = (int)((gptj ? a.R : a.half) / U);
    a.jrow = a.jrot + (int)((D - a.R) / C);
    a.offset = p->i[KK__ROPE_OFFSET];
    a.freq.theta = p->f[KK__ROPE_THETA];
    a.freq.R = a.R;
    // Tokens: positions s, each for every batch; with pos, (b, s) pairs.
    a.T = has_pos ? a.B * a.S : a.S;
    a.Bj = has_pos ? 1 : a.B;
    // Tokens per tile: about 1024 jobs a tile (4 a thread), the table at
    // most 32 KiB (P R floats).
    const int64_t per_pos = a.Bj * a.H * a.jrow;
    int64_t P = (1024 + per_pos - 1) / per_pos;
    const int64_t pmax = 8192 / a.R < 32 ? 8192 / a.R : 32;
    P = P > pmax ? pmax : P;
    P = P > a.T ? a.T : P;
    a.P = (int)(P < 1 ? 1 : P);
    const size_t smem = (size_t)a.half * sizeof(double) + 2 * (size_t)a.P * sizeof(int64_t) +
                        (size_t)a.P * (size_t)a.R * sizeof(float);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (dt == KK_DTYPE_F32) return go_dtype<kF32>(a, gptj, vec, smem, s);
    if (dt == KK_DTYPE_F16) return go_dtype<kF16>(a, gptj, vec, smem, s);
    return go_dtype<kBF16>(a, gptj, vec, smem, s);
}

extern "C" const kk__slot kk__rope_cuda_slot = {kk__rope_cuda, 1};
