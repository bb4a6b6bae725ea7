/* KernelKit status codes and the thread-local last-error detail.
 *
 * Every library function that can fail returns a kk_status. KK_OK is 0; every
 * error is positive. Errors form a tree (see docs/architecture.md) mirroring
 * the exception hierarchy of the original Python framework, so a caller can
 * ask a broad question with kk_status_is(code, KK_ERR_DEVICE) or a narrow one
 * with code == KK_ERR_OUT_OF_MEMORY.
 *
 * The detail of the most recent failure on the calling thread (function,
 * argument, offending value, what was expected, CUDA error name) is kept in
 * kk_last_error(); it stays until the next failure or kk_clear_error(). */
#ifndef KERNELKIT_STATUS_H
#define KERNELKIT_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the public API: exported from the shared library, everything else is hidden. */
#if defined(KK_BUILDING_LIBRARY) && defined(__GNUC__)
#define KK_API __attribute__((visibility("default")))
#else
#define KK_API
#endif

typedef enum kk_status {
    KK_OK = 0,

    /* Root of the tree: every error below is also a KK_ERR_BACKEND. */
    KK_ERR_BACKEND = 1,

    /* Device errors. */
    KK_ERR_DEVICE = 100,
    KK_ERR_CUDA_UNAVAILABLE = 101,           /* no driver, no GPU, built without CUDA */
    KK_ERR_DEVICE_FAILURE = 102,             /* a CUDA call on a present device failed */
    KK_ERR_KERNEL_LAUNCH = 103,              /* a kernel failed to launch or to run */
    KK_ERR_INVALID_COMPUTE_CAPABILITY = 104, /* device too old for what was asked */
    KK_ERR_INVALID_ARCHITECTURE = 105,       /* unknown or mismatched architecture */

    /* Memory errors: KK_ERR_OUT_OF_MEMORY is also a KK_ERR_ALLOCATION. */
    KK_ERR_MEMORY = 200,
    KK_ERR_ALLOCATION = 201,
    KK_ERR_OUT_OF_MEMORY = 202,

    KK_ERR_CONFIG = 300, /* bad configuration value or file */
    KK_ERR_INVALID_ARGUMENT = 400,
    KK_ERR_UNSUPPORTED = 500,  /* valid request this build/device cannot do */
    KK_ERR_QUANTIZATION = 600, /* FP8/NVFP4 scaling or conversion failure */
    KK_ERR_ATTENTION = 700,    /* attention-specific failure */
    KK_ERR_MODEL_OPTIMIZATION = 800,
    KK_ERR_IO = 900,       /* file could not be opened, read or written */
    KK_ERR_INTERNAL = 1000 /* a bug in KernelKit: please report it */
} kk_status;

/* Short lower-case description, e.g. "out of memory". Never NULL. */
KK_API const char *kk_status_str(kk_status status);

/* Symbolic name, e.g. "KK_ERR_OUT_OF_MEMORY". Never NULL. */
KK_API const char *kk_status_name(kk_status status);

/* Parent in the error tree (KK_ERR_BACKEND's parent is KK_OK; KK_OK's and an
 * unknown code's parent is KK_OK). */
KK_API kk_status kk_status_parent(kk_status status);

/* Non-zero when `status` is `ancestor` or descends from it. kk_status_is(x,
 * KK_OK) is true only for KK_OK. */
KK_API int kk_status_is(kk_status status, kk_status ancestor);

/* Detail of the last failure on this thread. All strings are owned by the
 * library, valid until the next failure or kk_clear_error() on this thread,
 * and never NULL (empty when not applicable). */
typedef struct kk_error_info {
    kk_status status;       /* KK_OK when there is no recorded error */
    const char *function;   /* public entry point that failed, e.g. "kk_config_load" */
    const char *argument;   /* argument or field path, e.g. "memory.safety_margin" */
    const char *value;      /* offending value as text, e.g. "0.5" */
    const char *expected;   /* what would have been accepted, e.g. "at least 1.0" */
    const char *cuda_error; /* CUDA error name, e.g. "cudaErrorNoDevice" */
    const char *message;    /* everything above in one human-readable line */
} kk_error_info;

KK_API const kk_error_info *kk_last_error(void);

/* Same as kk_last_error()->message. */
KK_API const char *kk_last_error_message(void);

KK_API void kk_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_STATUS_H */
