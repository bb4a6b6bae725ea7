// Kernels of the GPU benchmark sampler (src/cuda/bench_cuda.c) and its tests.
#include <cuda_runtime.h>

static __device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Holds the stream until the host has enqueued the timed work behind it (as
// nvbench's blocking kernel does): the start event then fires only when the
// work is already queued, so host launch overhead is not timed. The flag lives
// in mapped host memory; if the host never sets it (the callback synchronized
// the stream, or enqueued more than the launch queue holds) the kernel gives
// up after timeout_ns and says so, instead of hanging the process.
__global__ void kk_bench_block_kernel(const volatile int *release, volatile int *timed_out,
                                      unsigned long long timeout_ns) {
    const unsigned long long start = global_ns();
    while (*release == 0) {
        if (global_ns() - start > timeout_ns) {
            *timed_out = 1;
            __threadfence_system();
            return;
        }
    }
}

// Spins for `ns` nanoseconds of the GPU's global timer. The timer counts wall
// time, so the duration is known whatever the SM clock does (a clock64 loop
// would last cycles / clock, and the clock is what throttling changes).
__global__ void kk_bench_spin_kernel(unsigned long long ns) {
    const unsigned long long start = global_ns();
    while (global_ns() - start < ns) {
    }
}

// Next to nothing: one thread, one add. Its time is the launch itself.
__global__ void kk_bench_tiny_kernel(unsigned *counter) {
    if (counter) atomicAdd(counter, 1u);
}

extern "C" cudaError_t kk__bench_block_launch(const volatile int *release, volatile int *timed_out,
                                              unsigned long long timeout_ns,
                                              cudaStream_t stream) {
    kk_bench_block_kernel<<<1, 1, 0, stream>>>(release, timed_out, timeout_ns);
    return cudaGetLastError();
}

extern "C" cudaError_t kk__bench_spin_launch(unsigned long long ns, cudaStream_t stream) {
    kk_bench_spin_kernel<<<1, 1, 0, stream>>>(ns);
    return cudaGetLastError();
}

extern "C" cudaError_t kk__bench_tiny_launch(unsigned *counter, cudaStream_t stream) {
    kk_bench_tiny_kernel<<<1, 1, 0, stream>>>(counter);
    return cudaGetLastError();
}

// A launch that fails (1 block of 4096 threads is over every GPU's limit) and
// whose error is left pending, as a careless callback would leave it: the
// sampler must find it with cudaGetLastError after the run.
extern "C" cudaError_t kk__bench_bad_launch(cudaStream_t stream) {
    kk_bench_tiny_kernel<<<1, 4096, 0, stream>>>(nullptr);
    return cudaSuccess;
}
