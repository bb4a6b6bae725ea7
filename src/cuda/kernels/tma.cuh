// Hopper's tensor memory accelerator and transaction barriers (sm_90): the
// few PTX instructions a warp-specialized kernel needs. A producer thread
// announces the bytes a stage will receive (arrive_expect_tx) and starts
// tensor copies that complete on the stage's barrier; consumers wait on the
// barrier's phase parity, and hand the stage back through a second barrier.
// PTX ISA: "mbarrier", "cp.async.bulk.tensor", "setmaxnreg".
#pragma once

#include <stdint.h>

namespace kk_tma {

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A barrier expecting `count` arrivals per phase.
__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count)
                 : "memory");
}

// Barrier initializations visible to the other threads and the async proxy
// (the tensor copies' completions); a __syncthreads follows.
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also expects `bytes` more of transactions this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

// Until the phase with this parity (0, 1, 0, ... for phases 0, 1, 2, ...) has
// completed.
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
    const uint32_t a = smem_u32(bar);
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(a), "r"(parity)
                     : "memory");
    } while (!done);
}

// A box of a 4-D tensor (coordinates innermost first, in elements) into
// shared memory, completing on bar. The tensor map is a __grid_constant__
// kernel parameter (its generic address is what the instruction takes).
__device__ __forceinline__ void tma_load_4d(void *dst, const void *tensor_map, uint64_t *bar,
                                            int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(smem_u32(dst)),
                 "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
                 "r"(smem_u32(bar))
                 : "memory");
}

// The same for a box of a 2-D tensor (a matrix: column, then row).
__device__ __forceinline__ void tma_load_2d(void *dst, const void *tensor_map, uint64_t *bar,
                                            int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_u32(dst)),
                 "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c0), "r"(c1), "r"(smem_u32(bar))
                 : "memory");
}

// Named barrier `id` (1-15; 0 is __syncthreads) of `count` threads: sync
// waits for the count, arrive adds to it without waiting.
template <int kCount> __device__ __forceinline__ void named_bar_sync(int id) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(kCount) : "memory");
}
template <int kCount> __device__ __forceinline__ void named_bar_arrive(int id) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(kCount) : "memory");
}

// Registers per thread of the executing warpgroup: fewer for a producer, more
// for the consumers (every warp of the warpgroup executes it).
template <int N> __device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

} // namespace kk_tma
