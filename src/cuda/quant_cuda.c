/* Quantization on a CUDA device: pick the kernels for the layout, queue them on
 * the default stream, wait, and bring the tensor's amax back to the host (the
 * entry point checks it and feeds delayed scaling with it). Block layouts take
 * one pass; per-tensor current scaling needs the amax first, so two kernels;
 * NVFP4 three. The caller's current device is restored. docs/formats.md. */
#include <cuda_runtime_api.h>

#include <stdio.h>

#include "core/error.h"
#include "core/quant_internal.h"
#include "core/tensor_internal.h"
#include "cuda/quant_cuda.h"
#include "kernelkit/memory.h"

typedef struct run_state {
    const char *func;
    int device, prev;
    cudaError_t err;
    const char *step;
    int kernel; /* the failing step was a kernel (launch or execution) */
} run_state;

static void check(run_state *s, cudaError_t e, const char *step, int kernel) {
    if (s->err == cudaSuccess && e != cudaSuccess) {
        s->err = e;
        s->step = step;
        s->kernel = kernel;
    }
}

static void enter(run_state *s, const char *func, int device) {
    s->func = func;
    s->device = device;
    s->err = cudaSuccess;
    s->step = "";
    s->kernel = 0;
    if (cudaGetDevice(&s->prev) != cudaSuccess) s->prev = -1;
    check(s, cudaSetDevice(device), "cudaSetDevice", 0);
}

/* Wait for the queued work, restore the device, report the first failure. */
static kk_status leave(run_state *s) {
    check(s, cudaStreamSynchronize(0), "the quantization kernels", 1);
    if (s->prev >= 0 && s->prev != s->device) (void)cudaSetDevice(s->prev);
    if (s->err == cudaSuccess) return KK_OK;
    (void)cudaGetLastError(); /* clear a sticky launch error */
    kk_status st = s->kernel                             ? KK_ERR_KERNEL_LAUNCH
                   : s->err == cudaErrorMemoryAllocation ? KK_ERR_OUT_OF_MEMORY
                                                         : KK_ERR_DEVICE_FAILURE;
    return kk__cuda_error(st, s->func, cudaGetErrorName(s->err), cudaGetErrorString(s->err),
                          "on cuda:%d: %s failed", s->device, s->step);
}

static void launch_quantize(run_state *s, kk__quant_job *job, uint32_t *amax) {
    const int64_t n = job->batch * job->rows * job->k;
    switch (job->layout) {
    case KK_SCALE_PER_TENSOR:
        if (job->given_scale) {
            check(s, kk__qk_fp8_tensor(job, NULL, amax, 0), "the fp8 quantize kernel's launch", 1);
        } else {
            check(s, kk__qk_amax(job->x, job->x_dtype, n, amax, 0), "the amax kernel's launch", 1);
            check(s, kk__qk_fp8_tensor(job, amax, NULL, 0), "the fp8 quantize kernel's launch", 1);
        }
        break;
    case KK_SCALE_1X128:
    case KK_SCALE_128X128:
        check(s, kk__qk_fp8_blocks(job, amax, 0), "the fp8 block quantize kernel's launch", 1);
        break;
    default:
        check(s, kk__qk_amax(job->x, job->x_dtype, n, amax, 0), "the amax kernel's launch", 1);
        if (job->layout == KK_SCALE_NVFP4_BLOCKED)
            check(s, cudaMemsetAsync(job->scales, 0, (size_t)job->scale_count, 0),
                  "cudaMemsetAsync", 0);
        check(s, kk__qk_nvfp4_scales(job, amax, 0), "the nvfp4 scale kernel's launch", 1);
        check(s, kk__qk_nvfp4_pack(job, 0), "the nvfp4 pack kernel's launch", 1);
        break;
    }
}

kk_status kk__quantize_cuda(kk__quant_job *job, const char *func) {
    char dev[16];
    snprintf(dev, sizeof dev, "cuda:%d", job->device);
    uint32_t *amax = NULL;
    kk_status st = kk_mem_alloc(dev, sizeof *amax, (void **)&amax);
    if (st) return kk__tensor_rethrow(func, st);
    run_state s;
    enter(&s, func, job->device);
    check(&s, cudaMemsetAsync(amax, 0, sizeof *amax, 0), "cudaMemsetAsync", 0);
    if (s.err == cudaSuccess) launch_quantize(&s, job, amax);
    if (s.err == cudaSuccess)
        check(&s, cudaMemcpy(&job->amax_bits, amax, sizeof *amax, cudaMemcpyDeviceToHost),
              "the quantization kernels", 1); /* waits for them; a fault shows here */
    st = leave(&s);
    (void)kk_mem_free(amax);
    return st;
}

kk_status kk__dequantize_cuda(const kk__quant_job *job, const char *func) {
    run_state s;
    enter(&s, func, job->device);
    if (s.err == cudaSuccess)
        check(&s, kk__qk_dequant(job, 0), "the dequantize kernel's launch", 1);
    return leave(&s);
}

kk_status kk__scale_layout_cuda(const kk__scale_layout_job *job, const char *func) {
    run_state s;
    enter(&s, func, job->device);
    if (s.err == cudaSuccess)
        check(&s, kk__qk_scale_layout(job, 0), "the scale layout kernel's launch", 1);
    return leave(&s);
}
