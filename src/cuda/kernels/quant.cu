// Quantization kernels: fp8 (per-tensor, 1x128, 128x128) and NVFP4, their
// dequantization, and the NVFP4 scale layout conversion. The scaling
// arithmetic is src/core/quant_math.h and the rounding src/cuda/kernels/convert.cuh,
// both shared with the CPU, so the bits agree with src/cpu/quant_cpu*.c.
// Correct first, reasonably parallel; not tuned (grid-stride loops, scalar
// loads).
#include <cuda_runtime.h>

#include <stdint.h>

#include "core/quant_math.h"
#include "cuda/kernels/convert.cuh"
#include "cuda/quant_cuda.h"

using namespace kk_convert;

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 16384;

unsigned grid_for(int64_t work, int per_block) {
    const int64_t want = (work + per_block - 1) / per_block;
    return (unsigned)(want < 1 ? 1 : want < kMaxBlocks ? want : kMaxBlocks);
}

__device__ __forceinline__ float load_x(const void *x, int t, int64_t i) {
    switch (t) {
    case KK_DTYPE_BF16:
        return __uint_as_float(bf16_to_f32bits(static_cast<const uint16_t *>(x)[i]));
    case KK_DTYPE_F16: return __uint_as_float(f16_to_f32bits(static_cast<const uint16_t *>(x)[i]));
    default: return static_cast<const float *>(x)[i];
    }
}

__device__ __forceinline__ void store_y(void *y, int t, int64_t i, float v) {
    const uint32_t u = __float_as_uint(v);
    switch (t) {
    case KK_DTYPE_BF16: static_cast<uint16_t *>(y)[i] = f32bits_to_bf16(u); break;
    case KK_DTYPE_F16: static_cast<uint16_t *>(y)[i] = f32bits_to_f16(u); break;
    default: static_cast<float *>(y)[i] = v; break;
    }
}

__device__ __forceinline__ uint32_t abs_bits(float v) { return __float_as_uint(v) & 0x7FFFFFFFu; }

__device__ __forceinline__ float fp8_max(int qt) {
    return qt == KK_DTYPE_FP8_E4M3 ? KK__E4M3_MAX : KK__E5M2_MAX;
}

__device__ __forceinline__ uint8_t encode_fp8(int qt, float v) {
    return qt == KK_DTYPE_FP8_E4M3 ? f32bits_to_e4m3(__float_as_uint(v))
                                   : f32bits_to_e5m2(__float_as_uint(v));
}

__device__ __forceinline__ float decode_e4m3(uint8_t c) {
    return __uint_as_float(e4m3_to_f32bits(c));
}

__device__ __forceinline__ uint32_t warp_max(uint32_t m) {
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    return m;
}

// Max over the thread block; every thread gets the result. blockDim.x is a
// multiple of 32 and at most 1024.
__device__ uint32_t block_max(uint32_t m) {
    __shared__ uint32_t part[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    m = warp_max(m);
    __syncthreads(); // part[] may still be read by a previous call
    if (lane == 0) part[warp] = m;
    __syncthreads();
    m = lane < (int)(blockDim.x / 32) ? part[lane] : 0u;
    return warp_max(m);
}

// ---- amax and per-tensor fp8 ----

__global__ void amax_kernel(const void *x, int xt, int64_t n, uint32_t *amax) {
    uint32_t m = 0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        m = max(m, abs_bits(load_x(x, xt, i)));
    m = block_max(m);
    if (threadIdx.x == 0 && m) atomicMax(amax, m);
}

__global__ void fp8_tensor_kernel(kk__quant_job j, const uint32_t *amax_in, uint32_t *amax_out) {
    const float s =
        j.given_scale ? j.scale : kk__fp8_scale(__uint_as_float(*amax_in), fp8_max(j.q_dtype));
    if (blockIdx.x == 0 && threadIdx.x == 0) static_cast<float *>(j.scales)[0] = s;
    const int64_t n = j.batch * j.rows * j.k;
    uint8_t *q = static_cast<uint8_t *>(j.q);
    uint32_t m = 0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float v = load_x(j.x, j.x_dtype, i);
        m = max(m, abs_bits(v));
        q[i] = encode_fp8(j.q_dtype, kk__q_ratio(v, s));
    }
    if (!amax_out) return;
    m = block_max(m);
    if (threadIdx.x == 0 && m) atomicMax(amax_out, m);
}

// ---- fp8 1x128: a warp per block of 128 elements (4 per lane) ----

// Four consecutive elements of x from i on, one 8-byte (16-bit types) or
// 16-byte (f32) load; the caller checked the alignment.
__device__ __forceinline__ void load_x4(const void *x, int t, int64_t i, float (&v)[4]) {
    if (t == KK_DTYPE_F32) {
        const float4 f = *reinterpret_cast<const float4 *>(static_cast<const float *>(x) + i);
        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
        return;
    }
    const uint2 w = *reinterpret_cast<const uint2 *>(static_cast<const uint16_t *>(x) + i);
    const uint16_t h[4] = {(uint16_t)(w.x & 0xFFFF), (uint16_t)(w.x >> 16),
                           (uint16_t)(w.y & 0xFFFF), (uint16_t)(w.y >> 16)};
    for (int u = 0; u < 4; u++)
        v[u] = __uint_as_float(t == KK_DTYPE_BF16 ? bf16_to_f32bits(h[u]) : f16_to_f32bits(h[u]));
}

// Full blocks of rows whose elements are 4-aligned take the vector form (lane
// l holds elements 4l .. 4l + 3: one load, one 4-byte store); the rest the
// scalar one (lane l holds l, l + 32, ...). The same values either way, so the
// same bits as the CPU. The tensor amax goes out once per warp, not once per
// block: the atomics on one word were most of the kernel's time.
__global__ void fp8_1x128_kernel(kk__quant_job j, uint32_t *amax_all) {
    const int lane = threadIdx.x % 32;
    const int64_t warps = (int64_t)gridDim.x * blockDim.x / 32;
    const int64_t tasks = j.batch * j.rows * j.scale_cols;
    uint8_t *q = static_cast<uint8_t *>(j.q);
    const int esize = j.x_dtype == KK_DTYPE_F32 ? 4 : 2;
    const bool vec_rows = j.k % 4 == 0 && reinterpret_cast<uintptr_t>(j.x) % (4 * esize) == 0 &&
                          reinterpret_cast<uintptr_t>(q) % 4 == 0;
    uint32_t warp_amax = 0;
    for (int64_t t = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; t < tasks; t += warps) {
        const int64_t r = t / j.scale_cols, c = t % j.scale_cols;
        const int64_t c0 = c * KK__FP8_BLOCK, len = min((int64_t)KK__FP8_BLOCK, j.k - c0);
        const int64_t base = r * j.k + c0;
        const bool vec = vec_rows && len == KK__FP8_BLOCK;
        float v[4];
        uint32_t m = 0;
        if (vec) {
            load_x4(j.x, j.x_dtype, base + 4 * lane, v);
        } else {
            for (int u = 0; u < 4; u++) {
                const int64_t o = lane + 32 * u;
                v[u] = o < len ? load_x(j.x, j.x_dtype, base + o) : 0.0f;
            }
        }
        for (int u = 0; u < 4; u++) m = max(m, abs_bits(v[u]));
        m = warp_max(m);
        warp_amax = max(warp_amax, m);
        const float s = kk__fp8_scale(__uint_as_float(m), fp8_max(j.q_dtype));
        if (lane == 0) static_cast<float *>(j.scales)[t] = s;
        if (vec) {
            uint32_t w = 0;
            for (int u = 0; u < 4; u++)
                w |= (uint32_t)encode_fp8(j.q_dtype, kk__q_ratio(v[u], s)) << (8 * u);
            *reinterpret_cast<uint32_t *>(q + base + 4 * lane) = w;
        } else {
            for (int u = 0; u < 4; u++) {
                const int64_t o = lane + 32 * u;
                if (o < len) q[base + o] = encode_fp8(j.q_dtype, kk__q_ratio(v[u], s));
            }
        }
    }
    if (lane == 0 && warp_amax && amax_all) atomicMax(amax_all, warp_amax);
}

// ---- fp8 128x128: a thread block per tile; the tile is read twice (the
// second time mostly from L2) ----

__global__ void fp8_128x128_kernel(kk__quant_job j, uint32_t *amax_all) {
    const int64_t tiles = j.batch * j.row_blocks * j.scale_cols;
    uint8_t *q = static_cast<uint8_t *>(j.q);
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int64_t c = t % j.scale_cols, rb = (t / j.scale_cols) % j.row_blocks;
        const int64_t b = t / (j.scale_cols * j.row_blocks);
        const int64_t i0 = rb * 128, nrows = min((int64_t)128, j.rows - i0);
        const int64_t c0 = c * KK__FP8_BLOCK, len = min((int64_t)KK__FP8_BLOCK, j.k - c0);
        const int64_t base = (b * j.rows + i0) * j.k + c0;
        uint32_t m = 0;
        for (int64_t e = threadIdx.x; e < nrows * KK__FP8_BLOCK; e += blockDim.x)
            if (e % KK__FP8_BLOCK < len)
                m = max(m, abs_bits(load_x(j.x, j.x_dtype,
                                           base + (e / KK__FP8_BLOCK) * j.k + e % KK__FP8_BLOCK)));
        m = block_max(m);
        const float s = kk__fp8_scale(__uint_as_float(m), fp8_max(j.q_dtype));
        if (threadIdx.x == 0) {
            static_cast<float *>(j.scales)[t] = s;
            if (m) atomicMax(amax_all, m);
        }
        for (int64_t e = threadIdx.x; e < nrows * KK__FP8_BLOCK; e += blockDim.x)
            if (e % KK__FP8_BLOCK < len) {
                const int64_t i = base + (e / KK__FP8_BLOCK) * j.k + e % KK__FP8_BLOCK;
                q[i] = encode_fp8(j.q_dtype, kk__q_ratio(load_x(j.x, j.x_dtype, i), s));
            }
    }
}

// ---- NVFP4 ----

__device__ __forceinline__ int64_t nvfp4_scale_index(const kk__quant_job &j, int64_t r, int64_t c) {
    if (j.layout == KK_SCALE_NVFP4) return r * j.scale_cols + c;
    return kk__nvfp4_blocked_index(j.row_blocks, j.col_blocks, r / j.rows, r % j.rows, c);
}

__global__ void nvfp4_scales_kernel(kk__quant_job j, const uint32_t *amax_bits) {
    const float g = kk__nvfp4_global(__uint_as_float(*amax_bits));
    if (blockIdx.x == 0 && threadIdx.x == 0) *j.global = g;
    const int64_t tasks = j.batch * j.rows * j.scale_cols;
    uint8_t *scales = static_cast<uint8_t *>(j.scales);
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < tasks;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = t / j.scale_cols, c = t % j.scale_cols;
        const int64_t c0 = c * KK__NVFP4_BLOCK, len = min((int64_t)KK__NVFP4_BLOCK, j.k - c0);
        uint32_t m = 0;
        for (int64_t o = 0; o < len; o++)
            m = max(m, abs_bits(load_x(j.x, j.x_dtype, r * j.k + c0 + o)));
        const float bm = __uint_as_float(m);
        const uint8_t code = kk__nvfp4_fix_scale(
            f32bits_to_e4m3(__float_as_uint(kk__nvfp4_scale_target(bm, g))), bm);
        scales[nvfp4_scale_index(j, r, c)] = code;
    }
}

// The multiplier of flat row r, block column c, for every layout (NVFP4:
// decoded block scale * global).
__device__ __forceinline__ float scale_at(const kk__quant_job &j, int64_t r, int64_t c) {
    const float *fs = static_cast<const float *>(j.scales);
    const uint8_t *bs = static_cast<const uint8_t *>(j.scales);
    const int64_t b = r / j.rows, i = r % j.rows;
    switch (j.layout) {
    case KK_SCALE_PER_TENSOR: return fs[0];
    case KK_SCALE_1X128: return fs[r * j.scale_cols + c];
    case KK_SCALE_128X128: return fs[(b * j.row_blocks + i / 128) * j.scale_cols + c];
    default: return kk__nvfp4_denom(decode_e4m3(bs[nvfp4_scale_index(j, r, c)]), *j.global);
    }
}

__device__ __forceinline__ uint32_t nvfp4_element(const kk__quant_job &j, int64_t e) {
    const int64_t r = e / j.k, c = (e % j.k) / KK__NVFP4_BLOCK;
    const float d = scale_at(j, r, c);
    return f32bits_to_e2m1(__float_as_uint(kk__q_ratio(load_x(j.x, j.x_dtype, e), d))) & 0xFu;
}

__global__ void nvfp4_pack_kernel(kk__quant_job j) {
    const int64_t n = j.batch * j.rows * j.k, bytes = n / 2 + n % 2;
    uint8_t *q = static_cast<uint8_t *>(j.q);
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < bytes;
         p += (int64_t)gridDim.x * blockDim.x) {
        const uint32_t lo = nvfp4_element(j, 2 * p);
        const uint32_t hi = 2 * p + 1 < n ? nvfp4_element(j, 2 * p + 1) : 0u;
        q[p] = (uint8_t)(lo | hi << 4);
    }
}

// ---- dequantize ----

__global__ void dequant_kernel(kk__quant_job j, int64_t width) {
    const int64_t n = j.batch * j.rows * j.k;
    const uint8_t *q = static_cast<const uint8_t *>(j.q);
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const float s = scale_at(j, e / j.k, (e % j.k) / width);
        uint32_t bits;
        switch (j.q_dtype) {
        case KK_DTYPE_FP8_E4M3: bits = e4m3_to_f32bits(q[e]); break;
        case KK_DTYPE_FP8_E5M2: bits = e5m2_to_f32bits(q[e]); break;
        default: bits = e2m1_to_f32bits((q[e >> 1] >> ((e & 1) * 4)) & 0xFu); break;
        }
        store_y(j.x, j.x_dtype, e, kk__dq(__uint_as_float(bits), s));
    }
}

// ---- NVFP4 scale layouts ----

__global__ void to_blocked_kernel(kk__scale_layout_job j) {
    const int64_t total = j.batch * j.row_blocks * j.col_blocks * 512;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < total;
         p += (int64_t)gridDim.x * blockDim.x) {
        const int64_t atom = p / 512, w = p % 512;
        const int64_t kb = atom % j.col_blocks, rest = atom / j.col_blocks;
        const int64_t rb = rest % j.row_blocks, l = rest / j.row_blocks;
        const int64_t i = rb * 128 + ((w % 16) / 4) * 32 + w / 16, c = kb * 4 + w % 4;
        j.dst[p] = i < j.rows && c < j.cols ? j.src[(l * j.rows + i) * j.cols + c] : 0;
    }
}

__global__ void to_plain_kernel(kk__scale_layout_job j) {
    const int64_t total = j.batch * j.rows * j.cols;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < total;
         p += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = p % j.cols, i = (p / j.cols) % j.rows, l = p / (j.cols * j.rows);
        j.dst[p] = j.src[kk__nvfp4_blocked_index(j.row_blocks, j.col_blocks, l, i, c)];
    }
}

} // namespace

// ---- launch wrappers ----

extern "C" cudaError_t kk__qk_amax(const void *x, kk_dtype x_dtype, int64_t n, uint32_t *amax_bits,
                                   cudaStream_t stream) {
    amax_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, x_dtype, n, amax_bits);
    return cudaGetLastError();
}

extern "C" cudaError_t kk__qk_fp8_tensor(const kk__quant_job *job, const uint32_t *amax_in,
                                         uint32_t *amax_out, cudaStream_t stream) {
    const int64_t n = job->batch * job->rows * job->k;
    fp8_tensor_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(*job, amax_in, amax_out);
    return cudaGetLastError();
}

extern "C" cudaError_t kk__qk_fp8_blocks(const kk__quant_job *job, uint32_t *amax_all,
                                         cudaStream_t stream) {
    if (job->layout == KK_SCALE_1X128) {
        const int64_t tasks = job->batch * job->rows * job->scale_cols;
        fp8_1x128_kernel<<<grid_for(tasks, kThreads / 32), kThreads, 0, stream>>>(*job, amax_all);
    } else {
        const int64_t tiles = job->batch * job->row_blocks * job->scale_cols;
        fp8_128x128_kernel<<<grid_for(tiles, 1), kThreads, 0, stream>>>(*job, amax_all);
    }
    return cudaGetLastError();
}

extern "C" cudaError_t kk__qk_nvfp4_scales(const kk__quant_job *job, const uint32_t *amax_bits,
                                           cudaStream_t stream) {
    const int64_t tasks = job->batch * job->rows * job->scale_cols;
    nvfp4_scales_kernel<<<grid_for(tasks, kThreads), kThreads, 0, stream>>>(*job, amax_bits);
    return cudaGetLastError();
}

extern "C" cudaError_t kk__qk_nvfp4_pack(const kk__quant_job *job, cudaStream_t stream) {
    const int64_t n = job->batch * job->rows * job->k;
    nvfp4_pack_kernel<<<grid_for(n / 2 + n % 2, kThreads), kThreads, 0, stream>>>(*job);
    return cudaGetLastError();
}

extern "C" cudaError_t kk__qk_dequant(const kk__quant_job *job, cudaStream_t stream) {
    const int64_t n = job->batch * job->rows * job->k;
    int64_t width = KK__FP8_BLOCK;
    if (job->layout == KK_SCALE_PER_TENSOR) width = job->k > 0 ? job->k : 1;
    if (job->layout == KK_SCALE_NVFP4 || job->layout == KK_SCALE_NVFP4_BLOCKED)
        width = KK__NVFP4_BLOCK;
    dequant_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(*job, width);
    return cudaGetLastError();
}

extern "C" cudaError_t kk__qk_scale_layout(const kk__scale_layout_job *job, cudaStream_t stream) {
    if (job->to_blocked)
        to_blocked_kernel<<<grid_for(job->batch * job->row_blocks * job->col_blocks * 512,
                                     kThreads),
                            kThreads, 0, stream>>>(*job);
    else
        to_plain_kernel<<<grid_for(job->batch * job->rows * job->cols, kThreads), kThreads, 0,
                          stream>>>(*job);
    return cudaGetLastError();
}
