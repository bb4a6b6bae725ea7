// Attention for decode (flash-decoding): few query rows against a long key
// sequence. The forward kernel would give each (batch, head) one mostly empty
// CTA and leave most SMs idle; this one splits the keys across CTAs, reads each
// kv head's K and V once for all the query heads that share it (GQA), and
// attention_combine weighs the splits by exp(lse_split - lse). Memory-bound:
// what matters is bytes in flight. docs/kernels/attention.md, "Decode".
#pragma once

#include "cuda/kernels/attention_sm80.cuh"
#include "kernelkit/status.h"

namespace kk_attn {

constexpr int kDecodeRows = 16; // one m16 tile: group * Sq <= 16
constexpr int kDecodeKeys = 64; // a split has at least this many keys per warp

struct DecodeParams {
    Params p;           // the op's parameters and tensors
    int group;          // Hq / Hkv
    int splits;         // CTAs along the keys
    int keys_per_split; // a multiple of the kernel's stage keys (and of 4)
    float *part_o;      // [B*Hq*Sq, splits, d]: O of each split, normalized
    float *part_lse;    // [B*Hq*Sq, splits]
};

// Programmatic dependent launch (Hopper): the decode kernel lets the combine
// kernel start early (its CTAs wait in griddepcontrol.wait until the decode
// grid has finished and its writes are visible), which hides the second
// launch's latency. No-ops before sm_90 and when the launch did not ask for it.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

template <int N> __device__ __forceinline__ void cp_async_wait_group() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The decode kernel: each warp streams its blocks of kSK keys through kStages
// buffers of its own, so kStages - 1 loads stay in flight while it computes
// one (warps that wait for a whole block before computing, started in step,
// leave the SM with no load in flight while they compute:
// docs/kernels/attention.md, "Decode"). K and V of a
// stage are separate cp.async groups (the scores run while V lands); Q's load
// overlaps the first stages. kSK = 16 or 32
// (a multiple of 16: one k step of the P.V mma); blocks of a warp are
// kWarps * kSK keys apart, so n0 stays a multiple of 4 (dropout's Philox
// words) when keys_per_split is a multiple of kSK.
template <int KD, int kStages, int kSK> constexpr size_t decode_pipe_smem_elems() {
    return (size_t)(kDecodeRows + kWarps * kStages * 2 * kSK) * (KD + 8);
}

template <int KD, typename T, bool kDropout, int kStages, int kSK, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    attention_decode_pipe_kernel(const DecodeParams dp) {
    static_assert(kSK % 16 == 0 && kStages >= 2, "stage shape");
    using M = MmaType<T>;
    const Params &p = dp.p;
    constexpr int kPitch = KD + 8;
    constexpr int kDTiles = KD / 8, kKSteps = KD / 16, kNTiles = kSK / 8;
    constexpr int kStageElems = 2 * kSK * kPitch; // K then V of one stage
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *sQ = reinterpret_cast<T *>(smem_raw);
    T *sKV0 = sQ + kDecodeRows * kPitch; // all warps' stages
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    T *sW = sKV0 + warp * kStages * kStageElems; // this warp's stages

    const int split = blockIdx.x, bhk = blockIdx.y;
    const int b = bhk / p.Hkv, hk = bhk % p.Hkv;
    const int rows = dp.group * p.Sq;
    const T *gK = static_cast<const T *>(p.k) + b * p.k_bs + hk * p.k_hs;
    const T *gV = static_cast<const T *>(p.v) + b * p.v_bs + hk * p.v_hs;
    const int k_begin = split * dp.keys_per_split;
    const int k_end = min(k_begin + dp.keys_per_split, p.Sk); // exclusive
    constexpr int kStep = kWarps * kSK;

    // The combine kernel may be scheduled now; it waits for this grid's end.
    pdl_launch_dependents();

    // Q: row r = hg * Sq + i of query head hk * group + hg (one group, the oldest).
    for (int c = threadIdx.x; c < kDecodeRows * (KD / 8); c += kThreads) {
        const int r = c / (KD / 8), col = (c % (KD / 8)) * 8;
        const bool ok = r < rows && col < p.d;
        const int hq = hk * dp.group + (ok ? r / p.Sq : 0), i = ok ? r % p.Sq : 0;
        const T *src =
            static_cast<const T *>(p.q) + b * p.q_bs + hq * p.q_hs + (int64_t)i * p.q_ss + col;
        cp_async16(sQ + r * kPitch + col, ok ? src : static_cast<const T *>(p.q), ok ? 16 : 0);
    }
    cp_async_commit();

    // Prologue: the first kStages - 1 blocks of this warp (a group each, empty
    // past the split's end, so the group count stays uniform).
    int n_load = k_begin + warp * kSK;
#pragma unroll
    for (int s = 0; s < kStages - 1; s++) {
        T *sK = sW + s * kStageElems;
        if (n_load < k_end)
            load_tile<KD, T, 32>(sK, gK + (int64_t)n_load * p.k_ss, p.k_ss, kSK, k_end - n_load,
                                 p.d, lane);
        cp_async_commit();
        if (n_load < k_end)
            load_tile<KD, T, 32>(sK + kSK * kPitch, gV + (int64_t)n_load * p.v_ss, p.v_ss, kSK,
                                 k_end - n_load, p.d, lane);
        cp_async_commit();
        n_load += kStep;
    }
    cp_async_wait_group<2 * (kStages - 1)>(); // Q's group (the oldest) has landed
    __syncthreads();
    uint32_t q_frag[kKSteps][4];
#pragma unroll
    for (int ks = 0; ks < kKSteps; ks++)
        ldmatrix_x4(q_frag[ks], sQ + (lane % 16) * kPitch + ks * 16 + (lane / 16) * 8);

    // This thread's rows g and g + 8: query index and key range.
    int lo_r[2], hi_r[2], qi[2], hq_r[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = g + 8 * r;
        qi[r] = row < rows ? row % p.Sq : 0;
        hq_r[r] = hk * dp.group + (row < rows ? row / p.Sq : 0);
        key_range(p, qi[r], lo_r[r], hi_r[r]);
        if (row >= rows) hi_r[r] = -1; // padding rows see nothing
    }

    float o_acc[kDTiles][4];
#pragma unroll
    for (int i = 0; i < kDTiles; i++) o_acc[i][0] = o_acc[i][1] = o_acc[i][2] = o_acc[i][3] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

    int stage = 0;
    for (int n0 = k_begin + warp * kSK; n0 < k_end; n0 += kStep) {
        // Refill the buffer computed in the previous step (the warp is past it).
        {
            int ls = stage + kStages - 1;
            ls = ls >= kStages ? ls - kStages : ls;
            T *sK = sW + ls * kStageElems;
            if (n_load < k_end)
                load_tile<KD, T, 32>(sK, gK + (int64_t)n_load * p.k_ss, p.k_ss, kSK, k_end - n_load,
                                     p.d, lane);
            cp_async_commit();
            if (n_load < k_end)
                load_tile<KD, T, 32>(sK + kSK * kPitch, gV + (int64_t)n_load * p.v_ss, p.v_ss, kSK,
                                     k_end - n_load, p.d, lane);
            cp_async_commit();
            n_load += kStep;
        }
        // Two groups per block, K then V: the scores and the softmax of this
        // block run while its V still lands.
        cp_async_wait_group<2 * kStages - 1>(); // this block's K has landed
        __syncwarp();
        const T *sK = sW + stage * kStageElems;
        const T *sV = sK + kSK * kPitch;

        float s[kNTiles][4];
#pragma unroll
        for (int i = 0; i < kNTiles; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < kKSteps; ks++)
#pragma unroll
            for (int np = 0; np < kNTiles / 2; np++) {
                const int mi = lane / 8;
                uint32_t bk[4];
                ldmatrix_x4(bk, sK + (np * 16 + (lane % 8) + 8 * (mi / 2)) * kPitch + ks * 16 +
                                    8 * (mi % 2));
                M::mma(s[2 * np], q_frag[ks], bk[0], bk[1]);
                M::mma(s[2 * np + 1], q_frag[ks], bk[2], bk[3]);
            }
#pragma unroll
        for (int r = 0; r < 2; r++) {
#pragma unroll
            for (int nt = 0; nt < kNTiles; nt++)
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    const int j = n0 + nt * 8 + 2 * t + c;
                    if (j < lo_r[r] || j > hi_r[r] || j >= k_end) s[nt][2 * r + c] = -INFINITY;
                }
            softmax_row(s, o_acc, r, m_run[r], l_run[r], p.scale_log2);
        }
        if constexpr (kDropout)
            dropout_rows(s, p, (uint32_t)(b * p.Hq + hq_r[0]), (uint32_t)(b * p.Hq + hq_r[1]),
                         qi[0], qi[1], n0, t);
        cp_async_wait_group<2 * kStages - 2>(); // and its V
        __syncwarp();
#pragma unroll
        for (int c = 0; c < kNTiles / 2; c++) {
            uint32_t pf[4] = {M::pack(s[2 * c][0], s[2 * c][1]), M::pack(s[2 * c][2], s[2 * c][3]),
                              M::pack(s[2 * c + 1][0], s[2 * c + 1][1]),
                              M::pack(s[2 * c + 1][2], s[2 * c + 1][3])};
#pragma unroll
            for (int dpi = 0; dpi < kDTiles / 2; dpi++) {
                const int mi = lane / 8;
                uint32_t bv[4];
                ldmatrix_x4_trans(bv, sV + (c * 16 + (lane % 8) + 8 * (mi % 2)) * kPitch +
                                          dpi * 16 + 8 * (mi / 2));
                M::mma(o_acc[2 * dpi], pf, bv[0], bv[1]);
                M::mma(o_acc[2 * dpi + 1], pf, bv[2], bv[3]);
            }
        }
        __syncwarp(); // every lane done with this stage before it is refilled
        stage = stage + 1 == kStages ? 0 : stage + 1;
    }
    cp_async_wait_all(); // empty groups only by now; nothing may land after the merge

    // Merge the four warps through shared memory (the stage area,
    // at least 4 * 16 * (KD + 2) floats, holds the maxima, sums and O).
    static_assert(kWarps * kStages * kStageElems * sizeof(T) >=
                      (size_t)kWarps * kDecodeRows * (KD + 2) * sizeof(float),
                  "merge area");
    __syncthreads();
    float *sm_m = reinterpret_cast<float *>(sKV0);
    float *sm_l = sm_m + kWarps * kDecodeRows;
    float *sm_o = sm_l + kWarps * kDecodeRows; // [warp][row][KD]
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float l = l_run[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int row = g + 8 * r;
        if (t == 0) {
            sm_m[warp * kDecodeRows + row] = m_run[r];
            sm_l[warp * kDecodeRows + row] = l;
        }
#pragma unroll
        for (int dt = 0; dt < kDTiles; dt++) {
            sm_o[(warp * kDecodeRows + row) * KD + dt * 8 + 2 * t] = o_acc[dt][2 * r];
            sm_o[(warp * kDecodeRows + row) * KD + dt * 8 + 2 * t + 1] = o_acc[dt][2 * r + 1];
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < rows * KD; e += kThreads) {
        const int row = e / KD, col = e % KD;
        if (col >= p.d) continue;
        float m = -INFINITY;
        for (int w = 0; w < kWarps; w++) m = fmaxf(m, sm_m[w * kDecodeRows + row]);
        float l = 0.f, o = 0.f;
        if (m != -INFINITY) {
            for (int w = 0; w < kWarps; w++) {
                const float f = exp2_approx((sm_m[w * kDecodeRows + row] - m) * p.scale_log2);
                l += sm_l[w * kDecodeRows + row] * f;
                o += sm_o[(w * kDecodeRows + row) * KD + col] * f;
            }
        }
        const int hq = hk * dp.group + row / p.Sq, i = row % p.Sq;
        const int64_t out_row = ((int64_t)b * p.Hq + hq) * p.Sq + i;
        dp.part_o[(out_row * dp.splits + split) * p.d + col] =
            l > 0.f ? o * (kDropout ? p.drop_rescale : 1.f) / l : 0.f;
        if (col == 0)
            dp.part_lse[out_row * dp.splits + split] =
                l > 0.f ? (m * p.scale_log2 + log2f(l)) / kLog2e : -INFINITY;
    }
}

// o (and lse) of each row from its splits: lse = log sum_s exp(lse_s), o =
// sum_s exp(lse_s - lse) o_s. One warp per row. kPdl: launched as a
// programmatic dependent of the decode kernel, it waits for that grid first.
template <typename T, bool kPdl = false>
__global__ void attention_combine_kernel(const DecodeParams dp) {
    using M = MmaType<T>;
    const Params &p = dp.p;
    if constexpr (kPdl) pdl_wait();
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= (int64_t)p.B * p.Hq * p.Sq) return;
    const float *lse = dp.part_lse + row * dp.splits;
    float mx = -INFINITY;
    for (int s = 0; s < dp.splits; s++) mx = fmaxf(mx, lse[s]);
    float total = 0.f;
    if (mx != -INFINITY)
        for (int s = 0; s < dp.splits; s++) total += expf(lse[s] - mx);
    const float lse_all = mx == -INFINITY ? -INFINITY : mx + logf(total);
    const int64_t bh = row / p.Sq, i = row % p.Sq, b = bh / p.Hq, h = bh % p.Hq;
    T *orow = static_cast<T *>(p.o) + b * p.o_bs + h * p.o_hs + i * p.o_ss;
    for (int col = 2 * lane; col < p.d; col += 64) {
        float o0 = 0.f, o1 = 0.f;
        if (mx != -INFINITY)
            for (int s = 0; s < dp.splits; s++) {
                const float w = expf(lse[s] - lse_all);
                const float *po = dp.part_o + (row * dp.splits + s) * p.d + col;
                o0 += w * po[0];
                o1 += w * po[1];
            }
        *reinterpret_cast<uint32_t *>(orow + col) = M::pack(o0, o1);
    }
    if (p.lse && lane == 0) p.lse[row] = lse_all;
}

// attention_decode.cu: whether the slot takes the decode path (one m16 tile
// holds every query row of a kv head, long keys, the shared memory there),
// and its launch (splits, workspace, decode and combine kernels).
bool use_decode(const Params &p, int kd);
// The decode path (when use_decode): its workspace from the caching allocator
// of `device` (the tensors' device name), in stream order.
kk_status launch_decode(const Params &p, int kd, bool bf16, const char *device,
                        cudaStream_t stream);

} // namespace kk_attn
