// The nvfp4_gemm slot on CUDA: y = x . (w*sw*gw)^T, NVFP4 weights times bf16
// activations, M <= 64 (decode). One tensor-core kernel (nvfp4_gemm.cuh) with
// M held in 1, 2 or 4 m16 tiles; M <= 8 takes the one-tile form too (a GEMV
// would add M f32 multiply-adds and a widening per weight to the same
// dequantization; docs/kernels/nvfp4_gemv.md, "nvfp4_gemm", says why).
// Declined with KK_ERR_UNSUPPORTED before anything is queued (kk_op_run then
// runs the CPU kernel): M > 64, K not a multiple of 64, sizes past 2^31,
// x not 16-byte aligned or w not 8-byte aligned (views at odd offsets).
// kk__nvfp4_gemm_emulate: the kernel's fragments on the host, for tests.
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "kernelkit/dtype.h"
#include "cuda/cuda_kernels.h"
#include "cuda/kernels/launch_util.cuh"
#include "cuda/kernels/nvfp4_gemm.cuh"
#include "opdef/nvfp4_gemm.h"

namespace {

const char *const kOp = "nvfp4_gemm";

template <int MT, int U> kk_status launch(const kk_nvg::Args &a, cudaStream_t s) {
    const size_t smem = kk_nvg::smem_bytes(MT);
    cudaError_t e = cudaSuccess;
    if (smem > 48 * 1024) e = kk_cuda::opt_in<kk_nvg::nvfp4_gemm_kernel<MT, U>>(smem);
    if (e == cudaSuccess) {
        const unsigned blocks = (unsigned)((a.N + kk_nvg::kRows - 1) / kk_nvg::kRows);
        kk_nvg::nvfp4_gemm_kernel<MT, U><<<blocks, kk_nvg::kWarps * 32, smem, s>>>(a);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) return KK_OK;
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, kOp, cudaGetErrorName(e), cudaGetErrorString(e),
                          "launching the M <= %d kernel (%zu bytes of shared memory) failed",
                          MT * 16, smem);
}

bool aligned(const void *p, uintptr_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; }

} // namespace

// Tensors are on this device and contiguous (kk_op_run checked them).
extern "C" kk_status kk__nvfp4_gemm_cuda(const kk_op_params *p, kk_tensor *const *t,
                                         kk_stream stream) {
    const int64_t M = p->i[KK__NVG_M], N = p->i[KK__NVG_N], K = p->i[KK__NVG_K];
    const int global = (int)p->i[KK__NVG_GLOBAL];
    if (M < 1 || M > 64 || K % kk_nvg::kUnitK != 0)
        return kk__error(KK_ERR_UNSUPPORTED, kOp,
                         "the cuda kernel takes M <= 64 and K a multiple of 64 (M=%lld K=%lld)",
                         (long long)M, (long long)K);
    if (N > INT32_MAX - kk_nvg::kRows || K > INT32_MAX)
        return kk__error(KK_ERR_UNSUPPORTED, kOp, "the cuda kernel takes sizes below 2^31");
    if (!aligned(t[0]->data, 16) || !aligned(t[1]->data, 8))
        return kk__error(KK_ERR_UNSUPPORTED, kOp,
                         "the cuda kernel needs x 16-byte aligned and w 8-byte aligned "
                         "(vector loads): x at %p, w at %p",
                         t[0]->data, t[1]->data);
    kk_nvg::Args a;
    a.x = static_cast<const uint16_t *>(t[0]->data);
    a.w = static_cast<const uint8_t *>(t[1]->data);
    a.sw = static_cast<const uint8_t *>(t[2]->data);
    a.gw = global ? static_cast<const float *>(t[3]->data) : nullptr;
    a.y = static_cast<uint16_t *>(t[global ? 4 : 3]->data);
    a.M = (int)M, a.N = (int)N, a.K = (int)K;
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    // units in flight per warp: as many as the registers hold (x takes 16 per tile and unit)
    if (M <= 16) return launch<1, 4>(a, s);
    if (M <= 32) return launch<2, 2>(a, s);
    return launch<4, 1>(a, s);
}

// The kernel's fragments on the host, for tests without a GPU: every lane's
// registers of every unit, step and tile through w_frag / x_frag (the same
// dequantization, k permutation and bounds), placed by the m16n8k16 fragment
// layout and multiplied in float64, then the epilogue's 2^8 * gw and bf16
// rounding. Not the GPU's bits: the tensor core's f32 sums are not modelled.
extern "C" kk_status kk__nvfp4_gemm_emulate(const kk_op_params *p, kk_tensor *const *t) {
    const int M = (int)p->i[KK__NVG_M], N = (int)p->i[KK__NVG_N], K = (int)p->i[KK__NVG_K];
    const int global = (int)p->i[KK__NVG_GLOBAL];
    if (M < 1 || M > 64 || K % kk_nvg::kUnitK != 0)
        return kk__error(KK_ERR_UNSUPPORTED, "kk__nvfp4_gemm_emulate",
                         "M <= 64, K a multiple of 64");
    const uint16_t *x = static_cast<const uint16_t *>(t[0]->data);
    const uint8_t *w = static_cast<const uint8_t *>(t[1]->data);
    const uint8_t *sw = static_cast<const uint8_t *>(t[2]->data);
    const float post =
        kk_nvg::kPostScale * (global ? *static_cast<const float *>(t[3]->data) : 1.0f);
    uint16_t *y = static_cast<uint16_t *>(t[global ? 4 : 3]->data);
    const int MT = M <= 16 ? 1 : M <= 32 ? 2 : 4, units = K / kk_nvg::kUnitK;
    double *acc = static_cast<double *>(malloc(sizeof(double) * 64 * kk_nvg::kRows));
    if (!acc) return kk__error(KK_ERR_OUT_OF_MEMORY, "kk__nvfp4_gemm_emulate", "no memory");
    for (int n0 = 0; n0 < N; n0 += kk_nvg::kRows) {
        for (int i = 0; i < 64 * kk_nvg::kRows; i++) acc[i] = 0.0;
        for (int c = 0; c < units; c++) // every warp's units; the order does not matter in f64
            for (int s = 0; s < 4; s++)
                for (int mt = 0; mt < MT; mt++)
                    for (int tt = 0; tt < kk_nvg::kNT; tt++) {
                        double A[16][16], B[16][8];
                        for (int lane = 0; lane < 32; lane++) {
                            const int g = lane >> 2, q = lane & 3;
                            const int n = n0 + tt * 8 + g < N ? n0 + tt * 8 + g : N - 1;
                            const uint8_t *wp = w + (int64_t)n * (K / 2) + 32 * c + 8 * q;
                            const uint32_t w0 =
                                wp[0] | wp[1] << 8 | wp[2] << 16 | (uint32_t)wp[3] << 24;
                            const uint32_t w1 =
                                wp[4] | wp[5] << 8 | wp[6] << 16 | (uint32_t)wp[7] << 24;
                            const uint32_t s2 =
                                kk_nvg::scale_pair(sw[(int64_t)n * (K / 16) + 4 * c + q]);
                            uint32_t b[2], a[4];
                            kk_nvg::w_frag(w0, w1, s2, s, b[0], b[1]);
                            for (int h = 0; h < 2; h++) {
                                const int m = mt * 16 + g + 8 * h;
                                uint32_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                                for (int j = 0; m < M && j < 8; j++) {
                                    const uint16_t *xp =
                                        x + (int64_t)m * K + 64 * c + 16 * q + 2 * j;
                                    v[j] = xp[0] | (uint32_t)xp[1] << 16;
                                }
                                kk_nvg::x_frag(make_uint4(v[0], v[1], v[2], v[3]),
                                               make_uint4(v[4], v[5], v[6], v[7]), s, a[h],
                                               a[2 + h]);
                            }
                            for (int r = 0; r < 4;
                                 r++) // a0: row g, k 2q..; a1: row g+8; a2, a3: k 2q+8..
                                for (int e = 0; e < 2; e++)
                                    A[g + 8 * (r & 1)][2 * q + 8 * (r >> 1) + e] =
                                        kk_bf16_to_f32((uint16_t)(a[r] >> (16 * e)));
                            for (int r = 0; r < 2; r++) // b0: k 2q..; b1: k 2q+8..; column g
                                for (int e = 0; e < 2; e++)
                                    B[2 * q + 8 * r + e][g] =
                                        kk_bf16_to_f32((uint16_t)(b[r] >> (16 * e)));
                        }
                        for (int r = 0; r < 16; r++)
                            for (int col = 0; col < 8; col++) {
                                double d = 0.0;
                                for (int k = 0; k < 16; k++) d += A[r][k] * B[k][col];
                                acc[(mt * 16 + r) * kk_nvg::kRows + tt * 8 + col] += d;
                            }
                    }
        for (int m = 0; m < M; m++)
            for (int j = 0; j < kk_nvg::kRows && n0 + j < N; j++)
                y[(int64_t)m * N + n0 + j] =
                    kk_f32_to_bf16((float)acc[m * kk_nvg::kRows + j] * post);
    }
    free(acc);
    return KK_OK;
}

extern "C" const kk__slot kk__nvfp4_gemm_cuda_slot = {kk__nvfp4_gemm_cuda, 0};
