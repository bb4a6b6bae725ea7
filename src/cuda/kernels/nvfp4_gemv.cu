// nvfp4_gemv on CUDA (sm_80 and newer; tuned for Hopper, sm_90a):
//   c[l,m] = f16( ga*gb * sum_j (sa[l,m,j]*sb[l,j]) * sum_{k in block j} a[l,m,k]*b[l,k] )
// Memory-bound: a is streamed once with 16-byte non-allocating loads and
// decoded in registers exactly, so the result differs from the CPU twin
// (src/cpu/nvfp4_gemv_cpu.c) only in the order of the f32 sum over blocks.
// The decoder variants, KK_NVFP4_GEMV_* and measurements: docs/kernels/nvfp4_gemv.md.
#include <cuda_runtime.h>

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <atomic>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant_math.h"
#include "cuda/kernels/convert.cuh"
#include "cuda/cuda_kernels.h"
#include "opdef/nvfp4_gemv.h"
#include "cuda/cuda_kernels.h"

extern "C" {
#include "core/error.h"
// src/cpu/nvfp4_gemv_cpu.c: the tensors are those the parameters describe.
kk_status kk__nvfp4_gemv_check(const kk_op_params *p, kk_tensor *const *t, kk_backend_kind kind);
}

// The kernels: nvfp4_gemv_common.cuh (arguments, loads, units of rows),
// nvfp4_gemv_half.cuh (variants 0 and 1), nvfp4_gemv_int.cuh (variants 2 and 4).
#include "cuda/kernels/nvfp4_gemv_common.cuh"
#include "cuda/kernels/nvfp4_gemv_half.cuh"
#include "cuda/kernels/nvfp4_gemv_int.cuh"

namespace {

// Variant 4's grid: CTAs resident per SM for R rows, read once per device
// (the kernel's registers limit it; shared memory at most 100 KiB a CTA
// allows 2 on sm_80 and newer, which the launch re-checks by K).
constexpr int kMaxDevices = 64;

// CTAs of nvfp4_gemv_kernel4<R> resident per SM with `smem` bytes of dynamic
// shared memory; cached per device as (smem << 8 | count), recomputed only
// when K changes the shared memory. 0 on error.
template <int R> int persistent_per_sm(int device, size_t smem) {
    static std::atomic<uint64_t> cache[kMaxDevices];
    const bool cached = device >= 0 && device < kMaxDevices;
    if (cached) {
        const uint64_t c = cache[device].load(std::memory_order_relaxed);
        if (c != 0 && c >> 8 == smem) return (int)(c & 0xFFu);
    }
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, nvfp4_gemv_kernel4<R>, kWarps * 32,
                                                      smem) != cudaSuccess ||
        n < 1)
        return 0;
    n = n > 255 ? 255 : n;
    if (cached) cache[device].store((uint64_t)smem << 8 | (uint64_t)n, std::memory_order_relaxed);
    return n;
}

int env_choice(const char *name, int lo, int hi, int def, int step = 1);

// Warps per unit: split K until there are enough CTAs to fill the GPU (16 per
// SM: two rounds of 8 resident), keeping >= 1 KiB of a row per warp.
int choose_split(int64_t units, int64_t chunks, int sms) {
    int s = 1;
    while (s < kWarps && chunks >= 64 * s && units * s / kWarps < 16 * (int64_t)sms) s *= 2;
    return s;
}

// Variants 2 and 4: split K only until there is one CTA per SM. Fewer,
// longer warps measured faster than the 16 CTAs per SM above on an H100 (all
// three GPU MODE shapes; docs/kernels/nvfp4_gemv.md).
int choose_split2(int64_t units, int64_t chunks, int sms) {
    int s = 1;
    while (s < kWarps && chunks >= 64 * s && units * s / kWarps < (int64_t)sms) s *= 2;
    return s;
}

int effective_variant(int variant, int64_t K);

// The kernel's arguments from checked tensors on `kind`; the grid in *blocks.
kk_status make_args(const kk_op_params *p, kk_tensor *const *t, kk_backend_kind kind, int sms,
                    int rows, int variant, gemv_args *g, int64_t *blocks) {
    kk_status st = kk__nvfp4_gemv_check(p, t, kind);
    if (st != KK_OK) return st;
    const int global = (int)p->i[KK__GEMV_GLOBAL];
    g->M = p->i[KK__GEMV_M];
    g->K = p->i[KK__GEMV_K];
    g->L = p->i[KK__GEMV_L];
    g->blocked = p->i[KK__GEMV_LAYOUT] == KK__GEMV_BLOCKED;
    g->col_blocks = (g->K / 16 + 3) / 4;
    g->a = static_cast<const uint8_t *>(t[0]->data);
    g->b = static_cast<const uint8_t *>(t[1]->data);
    g->sa = static_cast<const uint8_t *>(t[2]->data);
    g->sb = static_cast<const uint8_t *>(t[3]->data);
    g->ga = global ? static_cast<const float *>(t[4]->data) : NULL;
    g->gb = global ? static_cast<const float *>(t[5]->data) : NULL;
    g->c = static_cast<uint16_t *>(t[global ? 6 : 4]->data);
    // 16-byte loads of a and b, 2-byte loads of the scales
    static const char *const names[4] = {"a", "b", "sa", "sb"};
    static const uintptr_t align[4] = {16, 16, 2, 2};
    for (int k = 0; k < 4; k++)
        if ((uintptr_t)t[k]->data % align[k] != 0)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "nvfp4_gemv", names[k],
                                 k < 2 ? "data aligned to 16 bytes" : "data aligned to 2 bytes",
                                 "%p", t[k]->data);
    const int64_t units = g->L * ((g->M + kGroupRows - 1) / kGroupRows) * (kGroupRows / rows);
    g->split = effective_variant(variant, g->K) >= 2 ? choose_split2(units, g->K / 32, sms)
                                                     : choose_split(units, g->K / 32, sms);
    // KK_NVFP4_GEMV_SPLIT=1|2|4|8 forces S (tuning; the emulation reads it too)
    const int forced = env_choice("KK_NVFP4_GEMV_SPLIT", 1, 8, 0);
    if (forced == 1 || forced == 2 || forced == 4 || forced == 8) g->split = forced;
    *blocks = units * g->split / kWarps; // units is a multiple of 16
    if (*blocks > 0x7FFFFFFF)
        return kk__error(KK_ERR_UNSUPPORTED, "nvfp4_gemv", "%lld CTAs exceed the grid limit",
                         (long long)*blocks);
    return KK_OK;
}

// Everything a lane computes is __host__ __device__, so this runs the kernel's
// exact arithmetic and indexing on the CPU and gives the GPU's bits
// (tests/test_nvfp4_gemv.c runs it without a GPU).
// The grid on the host: every lane of every warp, the butterfly of
// __shfl_xor_sync (a + b is commutative, so every lane ends with the same
// bits), then the slices in order, as the kernel does.
// Variant 2 first decodes each batch's b as the CTAs do (into a host buffer
// instead of shared memory). Variant 4 is the same computation: its CTAs take
// contiguous ranges of variant 2's CTAs (work items) in order, so running
// the items in turn is the same sums (kk__nvfp4_gemv_emulate maps 4 to 2).
template <int V, int R> kk_status emulate(const gemv_args &g, int64_t blocks) {
    constexpr int kRows = R;
    const float gscale = g.ga ? *g.ga * *g.gb : 1.0f;
    const uint32_t nch = (uint32_t)(g.K / 32);
    uint4 *planes = NULL;
    int64_t decoded = -1; // the batch in planes
    if (V >= 2) {
        planes = static_cast<uint4 *>(malloc(bdec_bytes(g.K)));
        if (!planes)
            return kk__error(KK_ERR_OUT_OF_MEMORY, "kk__nvfp4_gemv_emulate",
                             "%zu bytes for the decoded b", bdec_bytes(g.K));
    }
    for (int64_t blk = 0; blk < blocks; blk++) {
        float partial[kWarps][kRows];
        unit_rows<R> qs[kWarps];
        for (int warp = 0; warp < kWarps; warp++) {
            qs[warp] = locate<R>(g, blk * (kWarps / g.split) + warp / g.split);
            float v[32][kRows];
            if (V >= 2 && qs[warp].l != decoded) {
                decoded = qs[warp].l;
                for (uint32_t c = 0; c < nch; c++)
                    decode_b_chunk(g.blocked, g.b + decoded * (g.K / 2),
                                   g.sb + scale_row(g, 1, decoded, 0), c, nch, planes);
            }
            for (uint32_t lane = 0; lane < 32; lane++) {
                const uint32_t s = (uint32_t)(warp % g.split);
                if (V >= 2)
                    lane_sums2<R>(g, qs[warp], s, lane, v[lane], planes, no_prologue());
                else
                    lane_sums < V<2 ? V : 0, R>(g, qs[warp], s, lane, v[lane]);
            }
            for (int off = 16; off > 0; off >>= 1) {
                float nv[32][kRows];
                for (int lane = 0; lane < 32; lane++)
                    for (int i = 0; i < kRows; i++) nv[lane][i] = v[lane][i] + v[lane ^ off][i];
                memcpy(v, nv, sizeof v);
            }
            for (int i = 0; i < kRows; i++) partial[warp][i] = v[0][i];
        }
        for (int warp = 0; warp < kWarps; warp += g.split)
            for (int i = 0; i < kRows; i++) {
                float sum = partial[warp][i];
                if (g.split > 1) {
                    sum = 0.0f;
                    for (int w = 0; w < g.split; w++) sum += partial[warp + w][i];
                }
                if (qs[warp].valid[i])
                    g.c[qs[warp].l * g.M + qs[warp].m0 + row_of<R>(i)] =
                        finish < V < 2 ? V : 2 > (g, sum, gscale);
            }
    }
    free(planes);
    return KK_OK;
}

// KK_NVFP4_GEMV_VARIANT=0|1|2|4 (decoder; 4: 2 with persistent CTAs),
// KK_NVFP4_GEMV_ROWS=4|8 (rows per warp): tuning switches, read at each
// launch; anything else is the default (2, 8): variant 2 measured fastest on
// an H100 (docs/kernels/nvfp4_gemv.md).
int env_choice(const char *name, int lo, int hi, int def, int step) {
    const char *v = getenv(name);
    if (!v) return def;
    const int x = atoi(v);
    return x >= lo && x <= hi && (x - lo) % step == 0 ? x : def;
}

// 3 means 2 (docs/kernels/nvfp4_gemv.md says why there is no variant 3).
// Outside 0..4: `def`.
int known_variant(int v, int def) { return v == 3 ? 2 : v >= 0 && v <= 4 ? v : def; }

// Variants 2 and 4 keep the decoded b of a batch (2.25 bytes per element of
// K) in shared memory; beyond this (K > 45056) they fall back to variant 0.
constexpr size_t kMaxBdec = 100 * 1024;
int effective_variant(int variant, int64_t K) {
    return variant >= 2 && bdec_bytes(K) > kMaxBdec ? 0 : variant;
}

// One of the six instantiations, as a launch. Variant 4: min(work items,
// resident CTAs) persistent CTAs; variant 2's grid when that is all items.
template <int V, int R>
kk_status launch(const gemv_args &g, int64_t blocks, int device, int sms, cudaStream_t s) {
    int64_t grid = blocks;
    if (V < 2) {
        nvfp4_gemv_kernel < V<2 ? V : 0, R><<<(unsigned)blocks, kWarps * 32, 0, s>>>(g);
    } else {
        const size_t smem = bdec_bytes(g.K);
        void (*kernel2)(gemv_args) = nvfp4_gemv_kernel2<R>;
        void (*kernel4)(gemv_args, int64_t) = nvfp4_gemv_kernel4<R>;
        cudaError_t e = cudaSuccess;
        if (smem > 48 * 1024) { // variant 4 may run as 2 (below)
            e = cudaFuncSetAttribute(kernel2, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)smem);
            if (V == 4 && e == cudaSuccess)
                e = cudaFuncSetAttribute(kernel4, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem);
        }
        if (e != cudaSuccess)
            return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, "nvfp4_gemv", cudaGetErrorName(e),
                                  cudaGetErrorString(e), "%zu bytes of shared memory refused",
                                  smem);
        if (V == 4) {
            const int per_sm = persistent_per_sm<R>(device, smem);
            if (per_sm < 1)
                return kk__error(KK_ERR_KERNEL_LAUNCH, "nvfp4_gemv",
                                 "no CTA of variant 4 fits an SM (%zu bytes of shared memory)",
                                 smem);
            if ((int64_t)per_sm * sms < grid) grid = (int64_t)per_sm * sms;
        }
        // With no more items than resident CTAs, every CTA would run one
        // item: that is variant 2 (the same work and bits; its main loop is
        // 3 instructions a step shorter at R = 8, 7 at R = 4).
        // Variant 4 counts a batch's units in 32 bits (< 2^31: always, in
        // practice: that is M < 2^35 rows).
        const int64_t upb = (g.M + kGroupRows - 1) / kGroupRows * (kGroupRows / R);
        if (grid < blocks && upb < ((int64_t)1 << 31)) {
            kernel4<<<(unsigned)grid, kWarps * 32, smem, s>>>(g, blocks);
        } else {
            kernel2<<<(unsigned)blocks, kWarps * 32, smem, s>>>(g);
        }
    }
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return KK_OK;
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, "nvfp4_gemv", cudaGetErrorName(e),
                          cudaGetErrorString(e), "kernel launch failed (%lld CTAs)",
                          (long long)grid);
}

} // namespace

extern "C" kk_status kk__nvfp4_gemv_cuda(const kk_op_params *p, kk_tensor *const *t,
                                         kk_stream stream) {
    int device = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e != cudaSuccess)
        return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, "nvfp4_gemv", cudaGetErrorName(e),
                              cudaGetErrorString(e), "reading the SM count failed");
    int variant = known_variant(env_choice("KK_NVFP4_GEMV_VARIANT", 0, 4, 2), 2);
    const int rows = env_choice("KK_NVFP4_GEMV_ROWS", 4, 8, 8, 4);
    gemv_args g;
    int64_t blocks = 0;
    kk_status st = make_args(p, t, KK_BACKEND_CUDA, sms, rows, variant, &g, &blocks);
    if (st != KK_OK) return st;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    variant = effective_variant(variant, g.K);
    switch (variant * 8 + rows) {
    case 1 * 8 + 4: return launch<1, 4>(g, blocks, device, sms, s);
    case 2 * 8 + 4: return launch<2, 4>(g, blocks, device, sms, s);
    case 4 * 8 + 4: return launch<4, 4>(g, blocks, device, sms, s);
    case 0 * 8 + 4: return launch<0, 4>(g, blocks, device, sms, s);
    case 1 * 8 + 8: return launch<1, 8>(g, blocks, device, sms, s);
    case 2 * 8 + 8: return launch<2, 8>(g, blocks, device, sms, s);
    case 4 * 8 + 8: return launch<4, 8>(g, blocks, device, sms, s);
    default: return launch<0, 8>(g, blocks, device, sms, s);
    }
}

// The CUDA kernel's arithmetic on CPU tensors, as a grid for a GPU of `sms`
// SMs would compute it (same split, same order of every sum): the GPU's bits.
// For tests without a GPU; slow (every lane in turn). Variant 4 runs as 2
// (the same items, in the same order: see emulate), 3 as 2, others as 0.
extern "C" kk_status kk__nvfp4_gemv_emulate(const kk_op_params *p, kk_tensor *const *t, int sms,
                                            int variant, int rows) {
    if (rows != 4 && rows != 8)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk__nvfp4_gemv_emulate", "rows", "4 or 8",
                             "%d", rows);
    gemv_args g;
    int64_t blocks = 0;
    variant = known_variant(variant, 0);
    kk_status st = make_args(p, t, KK_BACKEND_CPU, sms < 1 ? 1 : sms, rows, variant, &g, &blocks);
    if (st != KK_OK) return st;
    switch (effective_variant(variant == 4 ? 2 : variant, g.K) * 8 + rows) {
    case 1 * 8 + 4: return emulate<1, 4>(g, blocks);
    case 2 * 8 + 4: return emulate<2, 4>(g, blocks);
    case 0 * 8 + 4: return emulate<0, 4>(g, blocks);
    case 1 * 8 + 8: return emulate<1, 8>(g, blocks);
    case 2 * 8 + 8: return emulate<2, 8>(g, blocks);
    default: return emulate<0, 8>(g, blocks);
    }
}

extern "C" const kk__slot kk__nvfp4_gemv_cuda_slot = {kk__nvfp4_gemv_cuda, 0};
