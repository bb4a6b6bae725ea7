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
    while (global_ns() - start < ns) {}
}

// Next to nothing: one thread, one add. Its time is the launch itself.
__global__ void kk_bench_tiny_kernel(unsigned *counter) {
    if (counter) atomicAdd(counter, 1u);
}

// The read flush of a cold sample (options.flush_mode = KK_BENCH_FLUSH_READ):
// every 16-byte word of a buffer of 2x the L2 is loaded, so the L2 ends full
// of clean lines of the buffer, and the dirty lines it held (the previous
// sample's outputs) are written back now, before the start event, instead of
// inside the timed work. Plain ld.global (default caching), four loads in
// flight per thread. The sum is stored only when it equals `never`, which
// the buffer's contents (zeros, written once at allocation) cannot sum to,
// but the compiler cannot know that, so the loads are kept.
__global__ void __launch_bounds__(512)
    kk_bench_read_flush_kernel(const uint4 *p, size_t n, unsigned never, unsigned *sink) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned acc = 0;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const uint4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
        acc += (a.x + a.y + a.z + a.w) + (b.x + b.y + b.z + b.w) + (c.x + c.y + c.z + c.w) +
               (d.x + d.y + d.z + d.w);
    }
    for (; i < n; i += stride) {
        const uint4 a = p[i];
        acc += a.x + a.y + a.z + a.w;
    }
    if (acc == never) *sink = acc;
}

// `bytes` is a multiple of 16 (the 16-byte words of `buf` are read);
// `sms` sets the grid: 4 blocks of 512 threads per SM keep enough loads in
// flight to run at full HBM bandwidth.
extern "C" cudaError_t kk__bench_read_flush_launch(const void *buf, size_t bytes, int sms,
                                                   cudaStream_t stream) {
    const size_t n = bytes / 16;
    if (n == 0) return cudaSuccess;
    const unsigned threads = 512;
    size_t blocks = (size_t)(sms > 0 ? sms : 132) * 4;
    const size_t need = (n + threads - 1) / threads;
    if (blocks > need) blocks = need;
    kk_bench_read_flush_kernel<<<(unsigned)blocks, threads, 0, stream>>>(
        static_cast<const uint4 *>(buf), n, 0xffffffffu,
        const_cast<unsigned *>(static_cast<const unsigned *>(buf)));
    return cudaGetLastError();
}

extern "C" cudaError_t kk__bench_block_launch(const volatile int *release, volatile int *timed_out,
                                              unsigned long long timeout_ns, cudaStream_t stream) {
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
