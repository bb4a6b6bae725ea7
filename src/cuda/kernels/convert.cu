// Element-type conversion kernels and their launch wrappers (declared in
// src/cuda/dtype_cuda.h). The device arithmetic is in convert.cuh and gives
// the same bits as src/core/dtype_convert.c; this file mirrors that file's
// kk_convert_host: destination f64 or integer goes through f64, destination
// f32 through f32 (f64/int32 rounded to nearest even), every narrower float
// through f32 rounded to odd. Not tuned: grid-stride loops, one thread per
// pair of elements (so that packed e2m1 bytes have one writer).
#include <cuda_runtime.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "cuda/cuda_internal.h"
#include "cuda/dtype_cuda.h"
#include "cuda/kernels/convert.cuh"
#include "cuda/kernels/fp8_quotient.cuh"
#include "kernelkit/device.h"

extern "C" {
#include "core/error.h"
}

using namespace kk_convert;

// ---- per-element loads and stores (dtype is uniform across the grid) ----

static __device__ __forceinline__ uint32_t load_f32bits(const void *src, int t, size_t i,
                                                        bool odd) {
    switch (t) {
    case KK_DTYPE_F64: {
        const double d = static_cast<const double *>(src)[i];
        return odd ? f64_to_f32bits_odd(d) : f64_to_f32bits(d);
    }
    case KK_DTYPE_F32: return static_cast<const uint32_t *>(src)[i];
    case KK_DTYPE_F16: return f16_to_f32bits(static_cast<const uint16_t *>(src)[i]);
    case KK_DTYPE_BF16: return bf16_to_f32bits(static_cast<const uint16_t *>(src)[i]);
    case KK_DTYPE_FP8_E4M3: return e4m3_to_f32bits(static_cast<const uint8_t *>(src)[i]);
    case KK_DTYPE_FP8_E5M2: return e5m2_to_f32bits(static_cast<const uint8_t *>(src)[i]);
    case KK_DTYPE_E2M1:
        return e2m1_to_f32bits((static_cast<const uint8_t *>(src)[i / 2] >> (4 * (i & 1))) & 0xFu);
    case KK_DTYPE_INT8: return __float_as_uint((float)static_cast<const int8_t *>(src)[i]);
    case KK_DTYPE_UINT8: return __float_as_uint((float)static_cast<const uint8_t *>(src)[i]);
    case KK_DTYPE_INT32: {
        const int32_t v = static_cast<const int32_t *>(src)[i];
        return odd ? f64_to_f32bits_odd((double)v) : __float_as_uint(__int2float_rn(v));
    }
    default: return 0u;
    }
}

static __device__ __forceinline__ void store_f32bits(void *dst, int t, size_t i, uint32_t u) {
    switch (t) {
    case KK_DTYPE_F32: static_cast<uint32_t *>(dst)[i] = u; break;
    case KK_DTYPE_F16: static_cast<uint16_t *>(dst)[i] = f32bits_to_f16(u); break;
    case KK_DTYPE_BF16: static_cast<uint16_t *>(dst)[i] = f32bits_to_bf16(u); break;
    case KK_DTYPE_FP8_E4M3: static_cast<uint8_t *>(dst)[i] = f32bits_to_e4m3(u); break;
    case KK_DTYPE_FP8_E5M2: static_cast<uint8_t *>(dst)[i] = f32bits_to_e5m2(u); break;
    default: break; // e2m1 is stored by pairs in the kernel
    }
}

static __device__ __forceinline__ double load_f64(const void *src, int t, size_t i) {
    switch (t) {
    case KK_DTYPE_F64: return static_cast<const double *>(src)[i];
    case KK_DTYPE_INT8: return (double)static_cast<const int8_t *>(src)[i];
    case KK_DTYPE_UINT8: return (double)static_cast<const uint8_t *>(src)[i];
    case KK_DTYPE_INT32: return (double)static_cast<const int32_t *>(src)[i];
    default: return f32bits_to_f64(load_f32bits(src, t, i, false));
    }
}

static __device__ __forceinline__ void store_f64(void *dst, int t, size_t i, double d) {
    switch (t) {
    case KK_DTYPE_F64: static_cast<double *>(dst)[i] = d; break;
    case KK_DTYPE_INT8:
        static_cast<int8_t *>(dst)[i] = (int8_t)round_saturate(d, -128.0, 127.0);
        break;
    case KK_DTYPE_UINT8:
        static_cast<uint8_t *>(dst)[i] = (uint8_t)round_saturate(d, 0.0, 255.0);
        break;
    case KK_DTYPE_INT32:
        static_cast<int32_t *>(dst)[i] = (int32_t)round_saturate(d, -2147483648.0, 2147483647.0);
        break;
    default: break;
    }
}

template <bool ThroughF64>
__global__ void kk_convert_kernel(const void *src, int src_t, void *dst, int dst_t, size_t n,
                                  bool odd) {
    const size_t pairs = (n + 1) / 2;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += stride) {
        const size_t i = 2 * p;
        const bool two = i + 1 < n;
        if (ThroughF64) {
            store_f64(dst, dst_t, i, load_f64(src, src_t, i));
            if (two) store_f64(dst, dst_t, i + 1, load_f64(src, src_t, i + 1));
        } else if (dst_t == KK_DTYPE_E2M1) {
            const uint32_t lo = f32bits_to_e2m1(load_f32bits(src, src_t, i, odd));
            const uint32_t hi = two ? f32bits_to_e2m1(load_f32bits(src, src_t, i + 1, odd)) : 0u;
            static_cast<uint8_t *>(dst)[p] = (uint8_t)(lo | hi << 4);
        } else {
            store_f32bits(dst, dst_t, i, load_f32bits(src, src_t, i, odd));
            if (two) store_f32bits(dst, dst_t, i + 1, load_f32bits(src, src_t, i + 1, odd));
        }
    }
}

// ---- argument checks shared by the entry points ----

static bool valid_dtype(kk_dtype t) { return (int)t >= 0 && t < KK_DTYPE_COUNT; }

static kk_status check_args(const char *func, const void *src, kk_dtype src_dtype, const void *dst,
                            kk_dtype dst_dtype, size_t count, const char *src_name,
                            const char *dst_name) {
    static const char *const expected = "a kk_dtype from KK_DTYPE_F64 to KK_DTYPE_INT32";
    if (!valid_dtype(src_dtype))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "src_dtype", expected, "%d",
                             (int)src_dtype);
    if (!valid_dtype(dst_dtype))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dst_dtype", expected, "%d",
                             (int)dst_dtype);
    if (count == 0) return KK_OK;
    if (!src)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, src_name, "a non-NULL pointer", "NULL");
    if (!dst)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, dst_name, "a non-NULL pointer", "NULL");
    if (kk_dtype_bytes(src_dtype, count) == 0 || kk_dtype_bytes(dst_dtype, count) == 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "count",
                             "a count whose buffers fit in size_t", "%zu", count);
    return KK_OK;
}

static kk_status launch_error(const char *func, cudaError_t e, const char *what) {
    return kk__cuda_error(KK_ERR_KERNEL_LAUNCH, func, cudaGetErrorName(e), cudaGetErrorString(e),
                          "%s", what);
}

static cudaError_t launch_convert(const void *src, kk_dtype src_dtype, void *dst,
                                  kk_dtype dst_dtype, size_t count, cudaStream_t stream) {
    if (src_dtype == dst_dtype && dst_dtype != KK_DTYPE_E2M1) // a copy; e2m1 clears its padding
        return cudaMemcpyAsync(dst, src, kk_dtype_bytes(src_dtype, count), cudaMemcpyDeviceToDevice,
                               stream);
    const int threads = 256;
    const size_t pairs = (count + 1) / 2;
    const size_t want = (pairs + threads - 1) / threads;
    const unsigned blocks = (unsigned)(want < 16384 ? want : 16384);
    const bool f64 = dst_dtype == KK_DTYPE_F64 || dst_dtype == KK_DTYPE_INT8 ||
                     dst_dtype == KK_DTYPE_UINT8 || dst_dtype == KK_DTYPE_INT32;
    const bool odd = dst_dtype != KK_DTYPE_F32;
    if (f64)
        kk_convert_kernel<true>
            <<<blocks, threads, 0, stream>>>(src, src_dtype, dst, dst_dtype, count, odd);
    else
        kk_convert_kernel<false>
            <<<blocks, threads, 0, stream>>>(src, src_dtype, dst, dst_dtype, count, odd);
    return cudaGetLastError();
}

extern "C" kk_status kk__cuda_convert(const void *src_dev, kk_dtype src_dtype, void *dst_dev,
                                      kk_dtype dst_dtype, size_t count, cudaStream_t stream) {
    static const char *const func = "kk__cuda_convert";
    kk_status st =
        check_args(func, src_dev, src_dtype, dst_dev, dst_dtype, count, "src_dev", "dst_dev");
    if (st != KK_OK || count == 0) return st;
    cudaError_t e = launch_convert(src_dev, src_dtype, dst_dev, dst_dtype, count, stream);
    if (e != cudaSuccess) return launch_error(func, e, "conversion kernel failed to launch");
    return KK_OK;
}

static kk_status check_device(const char *func, int device) {
    if (!kk_backend_available(KK_BACKEND_CUDA))
        return kk__error(KK_ERR_CUDA_UNAVAILABLE, func, "the cuda backend is unavailable: %.700s",
                         kk_backend_unavailable_reason(KK_BACKEND_CUDA));
    const int n = kk_backend_device_count(KK_BACKEND_CUDA);
    if (device < 0 || device >= n) {
        char expected[64];
        snprintf(expected, sizeof expected, "0 to %d", n - 1);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "device", expected, "%d", device);
    }
    if (!kk__cuda_device_usable(device))
        return kk__set_error(KK_ERR_INVALID_COMPUTE_CAPABILITY, func, "device", NULL,
                             "compute capability 8.0 or newer", NULL,
                             "cuda:%d is older than compute capability 8.0", device);
    return KK_OK;
}

// Failure of a step of a job: which call, and whether it was the kernel.
struct job_state {
    cudaError_t err = cudaSuccess;
    const char *step = "";
    bool kernel = false;

    bool ok() const { return err == cudaSuccess; }
    void check(cudaError_t e, const char *what, bool is_kernel = false) {
        if (err == cudaSuccess && e != cudaSuccess) {
            err = e;
            step = what;
            kernel = is_kernel;
        }
    }
    kk_status report(const char *func, int device) const {
        if (ok()) return KK_OK;
        kk_status st = kernel                             ? KK_ERR_KERNEL_LAUNCH
                       : err == cudaErrorMemoryAllocation ? KK_ERR_OUT_OF_MEMORY
                                                          : KK_ERR_DEVICE_FAILURE;
        return kk__cuda_error(st, func, cudaGetErrorName(err), cudaGetErrorString(err),
                              "on cuda:%d: %s failed", device, step);
    }
};

struct convert_job {
    int device;
    const void *src;
    kk_dtype src_dtype;
    void *dst;
    kk_dtype dst_dtype;
    size_t count;
    job_state s;
};

static void *convert_thread(void *arg) {
    convert_job *j = static_cast<convert_job *>(arg);
    const size_t src_bytes = kk_dtype_bytes(j->src_dtype, j->count);
    const size_t dst_bytes = kk_dtype_bytes(j->dst_dtype, j->count);
    void *d_src = NULL, *d_dst = NULL;
    j->s.check(cudaSetDevice(j->device), "cudaSetDevice");
    if (j->s.ok()) j->s.check(cudaMalloc(&d_src, src_bytes), "cudaMalloc");
    if (j->s.ok()) j->s.check(cudaMalloc(&d_dst, dst_bytes), "cudaMalloc");
    if (j->s.ok())
        j->s.check(cudaMemcpy(d_src, j->src, src_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    if (j->s.ok()) j->s.check(cudaMemset(d_dst, 0xA5, dst_bytes), "cudaMemset"); // poison
    if (j->s.ok())
        j->s.check(launch_convert(d_src, j->src_dtype, d_dst, j->dst_dtype, j->count, 0),
                   "the conversion kernel's launch", true);
    if (j->s.ok()) j->s.check(cudaDeviceSynchronize(), "the conversion kernel", true);
    if (j->s.ok())
        j->s.check(cudaMemcpy(j->dst, d_dst, dst_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (d_src) cudaFree(d_src);
    if (d_dst) cudaFree(d_dst);
    (void)cudaGetLastError();
    return NULL;
}

extern "C" kk_status kk__cuda_convert_host_buffers(int device, const void *src_host,
                                                   kk_dtype src_dtype, void *dst_host,
                                                   kk_dtype dst_dtype, size_t count) {
    static const char *const func = "kk__cuda_convert_host_buffers";
    kk_status st =
        check_args(func, src_host, src_dtype, dst_host, dst_dtype, count, "src_host", "dst_host");
    if (st != KK_OK) return st;
    if ((st = check_device(func, device)) != KK_OK || count == 0) return st;
    convert_job j;
    j.device = device;
    j.src = src_host;
    j.src_dtype = src_dtype;
    j.dst = dst_host;
    j.dst_dtype = dst_dtype;
    j.count = count;
    kk__cuda_run_on_device_thread(convert_thread, &j, device);
    return j.s.report(func, device);
}

// ---- comparison with NVIDIA's conversions ----

static __device__ __forceinline__ uint32_t ours_encode(int t, uint32_t u) {
    switch (t) {
    case KK_DTYPE_F16: return f32bits_to_f16(u);
    case KK_DTYPE_BF16: return f32bits_to_bf16(u);
    case KK_DTYPE_FP8_E4M3: return f32bits_to_e4m3(u);
    case KK_DTYPE_FP8_E5M2: return f32bits_to_e5m2(u);
    default: return f32bits_to_e2m1(u);
    }
}

static __device__ __forceinline__ uint32_t nvidia_encode(int t, uint32_t u) {
    const float x = __uint_as_float(u);
    switch (t) {
    case KK_DTYPE_F16: return __half_as_ushort(__float2half_rn(x));
    case KK_DTYPE_BF16: return __bfloat16_as_ushort(__float2bfloat16_rn(x));
    case KK_DTYPE_FP8_E4M3: return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    case KK_DTYPE_FP8_E5M2: return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
    default: return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest) & 0xFu;
    }
}

static __device__ __forceinline__ uint32_t ours_decode(int t, uint32_t c) {
    switch (t) {
    case KK_DTYPE_F16: return f16_to_f32bits(c);
    case KK_DTYPE_BF16: return bf16_to_f32bits(c);
    case KK_DTYPE_FP8_E4M3: return e4m3_to_f32bits(c);
    case KK_DTYPE_FP8_E5M2: return e5m2_to_f32bits(c);
    default: return e2m1_to_f32bits(c);
    }
}

static __device__ __forceinline__ uint32_t nvidia_decode(int t, uint32_t c) {
    switch (t) {
    case KK_DTYPE_F16: return __float_as_uint(__half2float(__ushort_as_half((unsigned short)c)));
    case KK_DTYPE_BF16:
        return __float_as_uint(__bfloat162float(__ushort_as_bfloat16((unsigned short)c)));
    case KK_DTYPE_FP8_E4M3:
        return __float_as_uint(
            __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3))));
    case KK_DTYPE_FP8_E5M2:
        return __float_as_uint(
            __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E5M2))));
    default:
        return __float_as_uint(
            __half2float(__half(__nv_cvt_fp4_to_halfraw((__nv_fp4_storage_t)c, __NV_E2M1))));
    }
}

static __device__ __forceinline__ bool f32_nan(uint32_t u) {
    return (u & 0x7FFFFFFFu) > 0x7F800000u;
}

// counters: [0] non-NaN mismatches, [1] NaN mismatches, [2] decode mismatches;
// firsts: [0] smallest mismatching non-NaN input, [1] smallest mismatching code
__global__ void kk_compare_nvidia_kernel(int t, unsigned long long *counters, unsigned *firsts,
                                         unsigned codes) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    unsigned long long bad = 0, bad_nan = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32);
         i += stride) {
        const uint32_t u = (uint32_t)i;
        if (ours_encode(t, u) != nvidia_encode(t, u)) {
            if (f32_nan(u)) {
                bad_nan++;
            } else {
                bad++;
                atomicMin(&firsts[0], u);
            }
        }
        if (i < codes) {
            const uint32_t a = ours_decode(t, u), b = nvidia_decode(t, u);
            if (a != b && !(f32_nan(a) && f32_nan(b))) {
                atomicAdd(&counters[2], 1ull);
                atomicMin(&firsts[1], u);
            }
        }
    }
    if (bad) atomicAdd(&counters[0], bad);
    if (bad_nan) atomicAdd(&counters[1], bad_nan);
}

__global__ void kk_compare_one_kernel(int t, const unsigned *firsts, unsigned *out) {
    out[0] = ours_encode(t, firsts[0]);
    out[1] = nvidia_encode(t, firsts[0]);
}

struct compare_job {
    int device;
    kk_dtype dtype;
    kk__nvidia_compare *out;
    job_state s;
};

static void *compare_thread(void *arg) {
    compare_job *j = static_cast<compare_job *>(arg);
    unsigned long long *d_counters = NULL;
    unsigned *d_firsts = NULL, *d_one = NULL;
    unsigned long long counters[3] = {0, 0, 0};
    unsigned firsts[2] = {0xFFFFFFFFu, 0xFFFFFFFFu}, one[2] = {0, 0};
    const unsigned codes = 1u << kk_dtype_bits(j->dtype);
    j->s.check(cudaSetDevice(j->device), "cudaSetDevice");
    if (j->s.ok()) j->s.check(cudaMalloc((void **)&d_counters, sizeof counters), "cudaMalloc");
    if (j->s.ok()) j->s.check(cudaMalloc((void **)&d_firsts, sizeof firsts), "cudaMalloc");
    if (j->s.ok()) j->s.check(cudaMalloc((void **)&d_one, sizeof one), "cudaMalloc");
    if (j->s.ok())
        j->s.check(cudaMemcpy(d_counters, counters, sizeof counters, cudaMemcpyHostToDevice),
                   "cudaMemcpy");
    if (j->s.ok())
        j->s.check(cudaMemcpy(d_firsts, firsts, sizeof firsts, cudaMemcpyHostToDevice),
                   "cudaMemcpy");
    if (j->s.ok()) {
        kk_compare_nvidia_kernel<<<4096, 256>>>((int)j->dtype, d_counters, d_firsts, codes);
        j->s.check(cudaGetLastError(), "the comparison kernel's launch", true);
    }
    if (j->s.ok()) {
        kk_compare_one_kernel<<<1, 1>>>((int)j->dtype, d_firsts, d_one);
        j->s.check(cudaGetLastError(), "the comparison kernel's launch", true);
    }
    if (j->s.ok()) j->s.check(cudaDeviceSynchronize(), "the comparison kernel", true);
    if (j->s.ok())
        j->s.check(cudaMemcpy(counters, d_counters, sizeof counters, cudaMemcpyDeviceToHost),
                   "cudaMemcpy");
    if (j->s.ok())
        j->s.check(cudaMemcpy(firsts, d_firsts, sizeof firsts, cudaMemcpyDeviceToHost),
                   "cudaMemcpy");
    if (j->s.ok())
        j->s.check(cudaMemcpy(one, d_one, sizeof one, cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (d_counters) cudaFree(d_counters);
    if (d_firsts) cudaFree(d_firsts);
    if (d_one) cudaFree(d_one);
    (void)cudaGetLastError();
    if (j->s.ok()) {
        kk__nvidia_compare *o = j->out;
        o->encode_checked = 1ull << 32;
        o->encode_mismatches = counters[0];
        o->encode_nan_mismatches = counters[1];
        o->first_input = counters[0] ? firsts[0] : 0;
        o->first_ours = counters[0] ? one[0] : 0;
        o->first_theirs = counters[0] ? one[1] : 0;
        o->decode_checked = codes;
        o->decode_mismatches = counters[2];
        o->first_code = counters[2] ? firsts[1] : 0;
    }
    return NULL;
}

extern "C" kk_status kk__cuda_convert_compare_nvidia(int device, kk_dtype dtype,
                                                     kk__nvidia_compare *out) {
    static const char *const func = "kk__cuda_convert_compare_nvidia";
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    memset(out, 0, sizeof *out);
    if (dtype != KK_DTYPE_F16 && dtype != KK_DTYPE_BF16 && dtype != KK_DTYPE_FP8_E4M3 &&
        dtype != KK_DTYPE_FP8_E5M2 && dtype != KK_DTYPE_E2M1)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "dtype",
                             "f16, bf16, fp8_e4m3, fp8_e5m2 or e2m1", "%d", (int)dtype);
    if ((st = check_device(func, device)) != KK_OK) return st;
    compare_job j;
    j.device = device;
    j.dtype = dtype;
    j.out = out;
    kk__cuda_run_on_device_thread(compare_thread, &j, device);
    return j.s.report(func, device);
}

// ---- e4m3 of a quotient without the division (fp8_quotient.cuh) against
// the division, on quotients placed within 12 ulps of e4m3 rounding
// boundaries (the cases the guard exists for) and on plain random ones ----

static __device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

template <uint32_t G>
__global__ void kk_quotient_check_kernel(uint64_t cases, uint64_t seed,
                                         unsigned long long *counters, unsigned *first) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    unsigned long long bad = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < cases; i += stride) {
        const uint64_t r = mix64(seed + 0x9E3779B97F4A7C15ull * (i + 1));
        const uint64_t r2 = mix64(r);
        // scale: 2^-30 .. 2^30, any mantissa
        const float scale =
            __uint_as_float((uint32_t)((97u + (r >> 58)) << 23) | (uint32_t)(r & 0x7FFFFFu));
        float y;
        if (i & 1) { // near the midpoint of codes c and c + 1 (both positive, finite)
            const uint32_t c = (uint32_t)((r >> 23) % 0x7Eu);
            const float mid = 0.5f * (__uint_as_float(kk_convert::e4m3_to_f32bits(c)) +
                                      __uint_as_float(kk_convert::e4m3_to_f32bits(c + 1)));
            const int32_t d = (int32_t)((r2 >> 8) % 25u) - 12;
            y = __uint_as_float((uint32_t)((int32_t)__float_as_uint(__fmul_rn(mid, scale)) + d));
        } else { // anywhere in (-448 scale, 448 scale)
            y = __fmul_rn(__fmul_rn((float)(r2 >> 40) * 0x1p-24f, 448.0f), scale);
        }
        if (r2 & 1) y = -y;
        const float rcp = __frcp_rn(scale);
        if (kk_fp8q::e4m3_of_quotient<G>(y, scale, rcp) !=
            kk_fp8q::e4m3_of_quotient_div(y, scale)) {
            bad++;
            if (atomicCAS(&first[0], 0xFFFFFFFFu, __float_as_uint(y)) == 0xFFFFFFFFu)
                first[1] = __float_as_uint(scale);
        }
    }
    if (bad) atomicAdd(&counters[0], bad);
}

struct quotient_job {
    int device;
    uint32_t guard;
    uint64_t cases, seed;
    kk__quotient_check *out;
    job_state s;
};

static void *quotient_thread(void *arg) {
    quotient_job *j = static_cast<quotient_job *>(arg);
    unsigned long long *d_counters = NULL, counters[1] = {0};
    unsigned *d_first = NULL, first[2] = {0xFFFFFFFFu, 0u};
    j->s.check(cudaSetDevice(j->device), "cudaSetDevice");
    if (j->s.ok()) j->s.check(cudaMalloc((void **)&d_counters, sizeof counters), "cudaMalloc");
    if (j->s.ok()) j->s.check(cudaMalloc((void **)&d_first, sizeof first), "cudaMalloc");
    if (j->s.ok())
        j->s.check(cudaMemcpy(d_counters, counters, sizeof counters, cudaMemcpyHostToDevice),
                   "cudaMemcpy");
    if (j->s.ok())
        j->s.check(cudaMemcpy(d_first, first, sizeof first, cudaMemcpyHostToDevice), "cudaMemcpy");
    if (j->s.ok()) {
        if (j->guard == 0)
            kk_quotient_check_kernel<0><<<2048, 256>>>(j->cases, j->seed, d_counters, d_first);
        else
            kk_quotient_check_kernel<kk_fp8q::kGuard>
                <<<2048, 256>>>(j->cases, j->seed, d_counters, d_first);
        j->s.check(cudaGetLastError(), "the quotient check's launch", true);
    }
    if (j->s.ok()) j->s.check(cudaDeviceSynchronize(), "the quotient check", true);
    if (j->s.ok())
        j->s.check(cudaMemcpy(counters, d_counters, sizeof counters, cudaMemcpyDeviceToHost),
                   "cudaMemcpy");
    if (j->s.ok())
        j->s.check(cudaMemcpy(first, d_first, sizeof first, cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (d_counters) cudaFree(d_counters);
    if (d_first) cudaFree(d_first);
    (void)cudaGetLastError();
    if (j->s.ok()) {
        j->out->checked = j->cases;
        j->out->mismatches = counters[0];
        j->out->first_y = counters[0] ? first[0] : 0u;
        j->out->first_scale = counters[0] ? first[1] : 0u;
    }
    return NULL;
}

extern "C" kk_status kk__cuda_e4m3_quotient_check(int device, uint32_t guard, uint64_t cases,
                                                  uint64_t seed, kk__quotient_check *out) {
    static const char *const func = "kk__cuda_e4m3_quotient_check";
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    memset(out, 0, sizeof *out);
    if (guard != 0 && guard != kk_fp8q::kGuard)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "guard", "0 or 8", "%u", guard);
    if ((st = check_device(func, device)) != KK_OK) return st;
    quotient_job j;
    j.device = device;
    j.guard = guard;
    j.cases = cases;
    j.seed = seed;
    j.out = out;
    kk__cuda_run_on_device_thread(quotient_thread, &j, device);
    return j.s.report(func, device);
}
