// The probe kernel: a tiny known-answer workload that proves KernelKit's own
// device code was built for, loaded on and run by the GPU. It also reports
// which compiled variant ran (sm_80 SASS, sm_90a SASS, or PTX JIT-compiled
// for a newer GPU), which `cuobjdump --list-elf` alone cannot tell.
#include <cuda_runtime.h>

#include "cuda/cuda_internal.h"

__global__ void kk_probe_kernel(unsigned *out, int n, unsigned seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = kk__probe_value((unsigned)i, seed);
    if (i == 0) {
#ifdef __CUDA_ARCH__
        out[n] = __CUDA_ARCH__;
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_SPECIFIC__) ||                       \
    defined(__CUDA_ARCH_FAMILY_SPECIFIC__)
        out[n + 1] = 1;
#else
        out[n + 1] = 0;
#endif
    }
}

extern "C" cudaError_t kk__probe_launch(unsigned *d_out, int n, unsigned seed,
                                        cudaStream_t stream) {
    if (n < 1) return cudaErrorInvalidValue;
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;
    kk_probe_kernel<<<blocks, threads, 0, stream>>>(d_out, n, seed);
    return cudaGetLastError();
}
