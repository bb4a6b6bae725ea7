// The floor of a cold memory-bound kernel: how long a pure read of N bytes
// takes on this GPU right after the L2 flush that `kernelkit bench --cold`
// uses (write: a memset of an L2-sized buffer, GPU MODE's rule; read: a read
// sweep of twice the L2, which leaves it clean). No kernel that must read
// those bytes can beat it, so it bounds the share of read_gbs a kernel such
// as nvfp4_gemv can reach (docs/kernels/nvfp4_gemv.md). A probe, not library
// code (CMake target kk_probe_read_floor, CUDA builds); on a GPU machine:
//   build/bench/kk_probe_read_floor write 66083840 132218368 33092096
//   build/bench/kk_probe_read_floor read 66083840 132218368 33092096
// Each size: the median of 300 samples timed with CUDA events around the read
// kernel alone (16-byte non-caching loads, 4 in flight per thread, 8 CTAs of
// 256 threads per SM, grid-stride).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                               \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

__device__ __forceinline__ uint4 load_nc(const uint4 *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// Reads n 16-byte words; the XOR of all of them reaches memory only if it
// equals a value it never has, so nothing is optimized away.
__global__ void read_kernel(const uint4 *p, size_t n, unsigned *sink) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned acc = 0;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const uint4 a = load_nc(p + i), b = load_nc(p + i + stride),
                    c = load_nc(p + i + 2 * stride), d = load_nc(p + i + 3 * stride);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^
               d.z ^ d.w;
    }
    for (; i < n; i += stride) {
        const uint4 a = load_nc(p + i);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9e3779b9u) *sink = acc;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "write") && strcmp(argv[1], "read"))) {
        fprintf(stderr, "usage: %s write|read BYTES...\n", argv[0]);
        return 2;
    }
    const bool write_flush = !strcmp(argv[1], "write");
    size_t max_bytes = 0;
    for (int a = 2; a < argc; a++) {
        char *end = nullptr;
        const unsigned long long b = strtoull(argv[a], &end, 10);
        if (end == argv[a] || *end || b < 16) {
            fprintf(stderr, "%s: BYTES = '%s': expected a whole number of bytes, at least 16\n",
                    argv[0], argv[a]);
            return 2;
        }
        max_bytes = std::max(max_bytes, (size_t)b);
    }
    int dev = 0, sms = 0, l2 = 0;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    const size_t flush_bytes = write_flush ? (size_t)l2 : 2 * (size_t)l2;
    void *buf = nullptr, *flush = nullptr;
    unsigned *sink = nullptr;
    CHECK(cudaMalloc(&buf, max_bytes + 16));
    CHECK(cudaMalloc(&flush, flush_bytes));
    CHECK(cudaMalloc(&sink, sizeof(unsigned)));
    CHECK(cudaMemset(buf, 1, max_bytes + 16));
    CHECK(cudaMemset(flush, 0, flush_bytes));
    cudaEvent_t t0, t1;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));
    const int grid = sms * 8, block = 256;
    printf("flush=%s l2=%d B, grid %d x %d\n", argv[1], l2, grid, block);
    for (int a = 2; a < argc; a++) {
        const size_t bytes = strtoull(argv[a], 0, 10) / 16 * 16;
        std::vector<float> ms;
        for (int s = 0; s < 310; s++) {
            if (write_flush)
                CHECK(cudaMemsetAsync(flush, s & 0xff, flush_bytes));
            else
                read_kernel<<<grid, block>>>((const uint4 *)flush, flush_bytes / 16, sink);
            CHECK(cudaEventRecord(t0));
            read_kernel<<<grid, block>>>((const uint4 *)buf, bytes / 16, sink);
            CHECK(cudaEventRecord(t1));
            CHECK(cudaEventSynchronize(t1));
            float m = 0;
            CHECK(cudaEventElapsedTime(&m, t0, t1));
            if (s >= 10) ms.push_back(m); // the first samples warm up
        }
        std::sort(ms.begin(), ms.end());
        const double us = ms[ms.size() / 2] * 1e3;
        printf("%zu bytes: median %.2f us, %.0f GB/s\n", bytes, us, bytes / us / 1e3);
    }
    return 0;
}
