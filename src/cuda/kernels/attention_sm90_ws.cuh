// Attention forward, the warp-specialized Hopper kernel (sm_90a),
// FlashAttention-3's division of labour: a producer warpgroup loads Q, K and V
// with the tensor memory accelerator into stages guarded by full/empty
// mbarriers, so the consumer warpgroups run HopperRows (softmax of block j + 1
// under P V of block j; with ping-pong, GEMMs in turn) with no __syncthreads.
// docs/kernels/attention.md, "The warp-specialized Hopper kernel".
#pragma once

#include <cuda.h>

#include "cuda/kernels/attention_sm90.cuh"
#include "cuda/kernels/tma.cuh"

namespace kk_attn {

template <int CW, int BN, int ST, bool PP = false> struct HopperWsTiles {
    static constexpr int kConsumers = CW; // consumer warpgroups
    // Ping-pong: the consumer warpgroups issue their GEMMs in turn (named
    // barriers), so that one's softmax runs under the others' GEMMs.
    static constexpr bool kPingPong = PP;
    static constexpr int kBlockM = 64 * CW;
    static constexpr int kBlockN = BN;
    static constexpr int kStages = ST;
    static constexpr int kThreads = 128 * (CW + 1);
    // Registers per thread after setmaxnreg: the producer's few, the rest
    // shared by the consumers (64K per SM, multiples of 8).
    static constexpr int kProducerRegs = 24;
    static constexpr int kConsumerRegs = ((65536 / 128 - kProducerRegs) / CW) / 8 * 8 > 240
                                             ? 240
                                             : ((65536 / 128 - kProducerRegs) / CW) / 8 * 8;
};

template <int KD, typename T, class C> constexpr size_t hopper_ws_smem_bytes() {
    return (size_t)(C::kBlockM + 2 * C::kStages * C::kBlockN) * KD * sizeof(T) + 1024 +
           (2 * C::kStages + 1) * sizeof(uint64_t);
}

template <int KD, typename T, bool kDropout, class C>
__global__ void __launch_bounds__(C::kThreads, 1)
    attention_hopper_ws_kernel(const __grid_constant__ CUtensorMap tm_q,
                               const __grid_constant__ CUtensorMap tm_k,
                               const __grid_constant__ CUtensorMap tm_v, const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int kBlockM = C::kBlockM, kBlockN = C::kBlockN, kStages = C::kStages;
    constexpr int kNT = kBlockN / 8, kDT = KD / 8;
    static_assert(KD == 64 || KD == 128, "the Hopper kernel takes head dims 64 and 128");
    using R = HopperRows<KD, T, kBlockM, kBlockN, kDropout>;

    extern __shared__ unsigned char smem_raw[];
    T *sQ =
        reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    T *sK = sQ + kBlockM * KD; // kStages tiles of kBlockN x KD
    T *sV = sK + kStages * kBlockN * KD;
    uint64_t *full = reinterpret_cast<uint64_t *>(sV + kStages * kBlockN * KD);
    uint64_t *empty = full + kStages;
    uint64_t *q_full = empty + kStages;

    const int m_block = gridDim.x - 1 - blockIdx.x; // heavy (causal) blocks first
    const int bh = blockIdx.y;
    const int b = bh / p.Hq, h = bh % p.Hq;
    const int hk = h / (p.Hq / p.Hkv);
    const int q0 = m_block * kBlockM;
    const int tid = threadIdx.x, wg = tid / 128;

    const HopperKeyBlocks<kBlockM, kBlockN> keys(p, q0);
    const int n_begin = keys.n_begin, n_blocks = keys.n_blocks;

    if (tid == 0) {
        for (int s = 0; s < kStages; s++) {
            kk_tma::mbar_init(&full[s], 1);
            kk_tma::mbar_init(&empty[s], C::kConsumers * 4); // one arrival per consumer warp
        }
        kk_tma::mbar_init(q_full, 1);
        kk_tma::mbar_init_fence();
    }
    __syncthreads(); // the last CTA-wide barrier: the warpgroups part here

    if (wg == 0) {
        // Producer: Q once, then the key blocks, a stage at a time once every
        // consumer warp has handed it back.
        kk_tma::setmaxnreg_dec<C::kProducerRegs>();
        if (tid == 0 && n_blocks > 0) {
            kk_tma::mbar_arrive_expect_tx(q_full, kBlockM * KD * sizeof(T));
#pragma unroll
            for (int c = 0; c < KD / 64; c++)
                kk_tma::tma_load_4d(sQ + c * kBlockM * 64, &tm_q, q_full, c * 64, q0, h, b);
            for (int blk = 0; blk < n_blocks; blk++) {
                const int st = blk % kStages;
                if (blk >= kStages) kk_tma::mbar_wait(&empty[st], (blk / kStages - 1) & 1);
                kk_tma::mbar_arrive_expect_tx(&full[st], 2 * kBlockN * KD * sizeof(T));
                const int n0 = n_begin + blk * kBlockN;
#pragma unroll
                for (int c = 0; c < KD / 64; c++) {
                    kk_tma::tma_load_4d(sK + st * kBlockN * KD + c * kBlockN * 64, &tm_k, &full[st],
                                        c * 64, n0, hk, b);
                    kk_tma::tma_load_4d(sV + st * kBlockN * KD + c * kBlockN * 64, &tm_v, &full[st],
                                        c * 64, n0, hk, b);
                }
            }
        }
        return;
    }

    // Consumers.
    kk_tma::setmaxnreg_inc<C::kConsumerRegs>();
    const int cw = wg - 1;
    const int warp = (tid % 128) / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int row0 = q0 + cw * 64 + warp * 16 + g; // and row0 + 8
    float o[kDT][4];
#pragma unroll
    for (int i = 0; i < kDT; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

    auto softmax = [&](int blk, float(&s)[kNT][4], float(&alpha)[2]) {
        const int n0 = n_begin + blk * kBlockN;
        R::softmax(p, bh, row0, t, n0, keys.full(p, n0), s, m_run, l_run, alpha);
    };
    auto wait_full = [&](int blk) { kk_tma::mbar_wait(&full[blk % kStages], (blk / kStages) & 1); };
    // Ping-pong turns: warpgroup cw waits on barrier 1 + cw before issuing,
    // then hands the turn to the next (bar.arrive, 256 = its 128 threads and
    // the waiter's). The last warpgroup's final hand-over would have no
    // taker: it is left out, so every barrier's arrivals match its waits.
    auto turn_wait = [&]() {
        if constexpr (C::kPingPong) kk_tma::named_bar_sync<256>(1 + cw);
    };
    auto turn_pass = [&](bool last) {
        if constexpr (C::kPingPong)
            if (!(last && cw == C::kConsumers - 1))
                kk_tma::named_bar_arrive<256>(1 + (cw + 1) % C::kConsumers);
    };
    auto release = [&](int blk) { // this warp is done with the block's stage
        __syncwarp();
        if (lane == 0) kk_tma::mbar_arrive(&empty[blk % kStages]);
    };

    if (n_blocks > 0) {
        // S of block 0; then per step: S of it + 1 and P V of it issued
        // together, S waited for, its softmax, P V waited for (the stage of
        // block it handed back), O rescaled, P repacked; P V of the last.
        uint32_t pf[kBlockN / 16][4];
        if constexpr (C::kPingPong)
            if (cw == C::kConsumers - 1) kk_tma::named_bar_arrive<256>(1); // warpgroup 0 first
        kk_tma::mbar_wait(q_full, 0);
        {
            wait_full(0);
            float s[kNT][4], alpha[2];
            turn_wait();
            kk_wgmma::wgmma_fence();
            R::issue_qk(sQ, sK, cw, s);
            kk_wgmma::wgmma_commit();
            turn_pass(false);
            kk_wgmma::wgmma_wait<0>();
            fence_regs(reinterpret_cast<float(&)[kNT * 4]>(s));
            softmax(0, s, alpha); // O is zero: no rescale
            R::pack_p(s, pf);
        }
        for (int it = 0; it < n_blocks - 1; it++) {
            wait_full(it + 1);
            float s[kNT][4], alpha[2];
            turn_wait();
            kk_wgmma::wgmma_fence();
            R::issue_qk(sQ, sK + ((it + 1) % kStages) * kBlockN * KD, cw, s);
            kk_wgmma::wgmma_commit();
            R::issue_pv(sV + (it % kStages) * kBlockN * KD, pf, o);
            kk_wgmma::wgmma_commit();
            turn_pass(false);
            kk_wgmma::wgmma_wait<1>(); // S (the older group)
            fence_regs(reinterpret_cast<float(&)[kNT * 4]>(s));
            softmax(it + 1, s, alpha);
            kk_wgmma::wgmma_wait<0>(); // P V
            fence_regs(reinterpret_cast<float(&)[kDT * 4]>(o));
            release(it);
            R::rescale_o(o, alpha);
            R::pack_p(s, pf);
        }
        turn_wait();
        kk_wgmma::wgmma_fence();
        R::issue_pv(sV + ((n_blocks - 1) % kStages) * kBlockN * KD, pf, o);
        kk_wgmma::wgmma_commit();
        turn_pass(true);
        kk_wgmma::wgmma_wait<0>();
        fence_regs(reinterpret_cast<float(&)[kDT * 4]>(o));
    }
    R::store(p, bh, row0, t, static_cast<T *>(p.o) + b * p.o_bs + h * p.o_hs, o, m_run, l_run);
#endif
}

} // namespace kk_attn
