// A kernel that keeps a stream busy for a given time, for the tests of
// stream-ordered reuse (tests/test_cuda_memory.c): work queued before a free
// must still be running when another stream asks for memory.
#include <cuda_runtime.h>

__global__ void kk_mem_spin_kernel(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

extern "C" cudaError_t kk__mem_spin_launch(cudaStream_t stream, unsigned long long ns) {
    kk_mem_spin_kernel<<<1, 1, 0, stream>>>(ns);
    return cudaGetLastError();
}
