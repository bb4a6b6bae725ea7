// Host-side helpers the kernel launchers share.
#pragma once

#include <cuda_runtime.h>

#include <stdlib.h>
#include <string.h>

#include <atomic>

namespace kk_cuda {

// Above 48 KiB of dynamic shared memory a kernel must opt in, once per device
// and kernel; a flag per device (one set per Kernel, the template argument)
// keeps the call off the launch path (a race only sets it twice).
template <auto Kernel> cudaError_t opt_in(size_t smem) {
    static std::atomic<unsigned long long> opted_in{0};
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    const unsigned long long bit = 1ull << (dev & 63);
    if (!(opted_in.load(std::memory_order_relaxed) & bit)) {
        e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
        opted_in.fetch_or(bit);
    }
    return cudaSuccess;
}

// SMs of the current device, read once per device.
inline int sm_count() {
    static std::atomic<int> cached[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 132;
    int n = cached[dev].load(std::memory_order_relaxed);
    if (n == 0) {
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) n = 132;
        cached[dev].store(n, std::memory_order_relaxed);
    }
    return n;
}

// Shared memory a block may opt in to on the current device, read once per
// device (227 KiB on Hopper, 163 KiB on A100, 99 KiB on Ada and GA10x).
inline int smem_optin() {
    static std::atomic<int> cached[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 48 << 10;
    int n = cached[dev].load(std::memory_order_relaxed);
    if (n == 0) {
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
            n = 48 << 10;
        cached[dev].store(n, std::memory_order_relaxed);
    }
    return n;
}

// True when the current device is compute capability 9.0 and `Kernel` was
// compiled for sm_90a in this build, read once per device. A build for sm_80
// only holds compute_80 PTX, which the driver JIT-compiles for the device
// (binaryVersion 90 all the same) into the sm_90a kernel's empty body: its
// ptxVersion (80) is what tells them apart.
template <auto Kernel> bool sm90a_ready() {
    static std::atomic<int> cached[64]; // 0 unknown, 1 yes, 2 no
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
    int v = cached[dev].load(std::memory_order_relaxed);
    if (v == 0) {
        int major = 0, minor = 0;
        cudaFuncAttributes attr;
        const bool ok =
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
            major == 9 && minor == 0 && cudaFuncGetAttributes(&attr, Kernel) == cudaSuccess &&
            attr.binaryVersion == 90 && attr.ptxVersion == 90;
        if (!ok) (void)cudaGetLastError(); // a failed query leaves no sticky error
        v = ok ? 1 : 2;
        cached[dev].store(v, std::memory_order_relaxed);
    }
    return v == 1;
}

// KK_GEMM_EPILOGUE=regs: the Hopper GEMMs (bf16/f16 and FP8) store their
// tiles straight from registers instead of through shared memory with the
// TMA, for comparison (read at every launch).
inline bool epilogue_from_registers() {
    const char *e = getenv("KK_GEMM_EPILOGUE");
    return e && strcmp(e, "regs") == 0;
}

} // namespace kk_cuda
