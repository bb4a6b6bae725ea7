/* KernelKit: fast, proven-correct transformer kernels for NVIDIA GPUs with a
 * complete CPU fallback. This umbrella header is the library a user calls: ops,
 * tensors (DLPack included), memory, devices, configuration, status, logging,
 * .npy, quantization, communicators (tensor parallelism), models (config.json +
 * safetensors).
 * The harness (checker, benchmarks, statistics, reports) is kernelkit/harness.h. */
#ifndef KERNELKIT_H
#define KERNELKIT_H

#include "kernelkit/version.h"
#include "kernelkit/status.h"
#include "kernelkit/log.h"
#include "kernelkit/config.h"
#include "kernelkit/device.h"
#include "kernelkit/dtype.h"
#include "kernelkit/npy.h"
#include "kernelkit/memory.h"
#include "kernelkit/tensor.h"
#include "kernelkit/dlpack.h"
#include "kernelkit/quant.h"
#include "kernelkit/op.h"
#include "kernelkit/ops.h"
#include "kernelkit/comm.h"
#include "kernelkit/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Library version ("0.1.0") and the git commit it was built from. */
KK_API const char *kk_version(void);
KK_API const char *kk_git_commit(void);

/* Whether this build contains the CUDA backend (1) or not (0). */
KK_API int kk_built_with_cuda(void);

#ifdef __cplusplus
}
#endif
#endif
