// Host side of the tensor memory accelerator: the driver's tensor-map encoder,
// reached through the runtime so that nothing links against libcuda.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <atomic>

namespace kk_cuda {

// The driver's cuTensorMapEncodeTiled, through the runtime (no link against
// libcuda); NULL when the driver lacks it.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
    static std::atomic<void *> fn{nullptr};
    static std::atomic<bool> looked{false};
    if (!looked.load(std::memory_order_acquire)) {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                             &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            f = nullptr, (void)cudaGetLastError();
        fn.store(f, std::memory_order_relaxed);
        looked.store(true, std::memory_order_release);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn.load(std::memory_order_relaxed));
}

} // namespace kk_cuda
