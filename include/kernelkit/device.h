/* Backends, devices and GPU telemetry.
 *
 * A backend (CPU, CUDA) owns zero or more devices. The CPU backend is always
 * present with exactly one device ("cpu"); the CUDA backend is registered in
 * every build but is available only when the library was built with CUDA, a
 * driver is loadable and at least one GPU is visible. When it is not, it says
 * why (kk_backend_unavailable_reason) and everything runs on the CPU.
 *
 * Devices are named "cpu", "cuda" (= "cuda:0") and "cuda:N". */
#ifndef KERNELKIT_DEVICE_H
#define KERNELKIT_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kk_backend_kind {
    KK_BACKEND_CPU = 0,
    KK_BACKEND_CUDA = 1,
    KK_BACKEND_COUNT
} kk_backend_kind;

/* GPU architecture families, mapped from the compute capability. */
typedef enum kk_arch {
    KK_ARCH_UNKNOWN = 0,
    KK_ARCH_PRE_PASCAL, /* cc < 6.0: Kepler, Maxwell and older */
    KK_ARCH_PASCAL,     /* 6.x */
    KK_ARCH_VOLTA,      /* 7.0, 7.2 */
    KK_ARCH_TURING,     /* 7.5 */
    KK_ARCH_AMPERE,     /* 8.0, 8.6, 8.7 */
    KK_ARCH_ADA,        /* 8.9 */
    KK_ARCH_HOPPER,     /* 9.0 */
    KK_ARCH_BLACKWELL,  /* 10.x, 11.x, 12.x */
    KK_ARCH_COUNT
} kk_arch;

/* Family for a compute capability; KK_ARCH_UNKNOWN for impossible values
 * (major < 1, minor < 0) and for capabilities newer than this build knows. */
KK_API kk_arch kk_arch_from_compute_capability(int major, int minor);

/* Lower-case name ("hopper"); "unknown" for anything out of range. */
KK_API const char *kk_arch_name(kk_arch arch);

/* Parse a lower-case or capitalised name ("hopper", "Hopper"). Unknown names
 * give KK_ERR_INVALID_ARCHITECTURE with the accepted names in the message. */
KK_API kk_status kk_arch_parse(const char *name, kk_arch *out);

/* SIMD features of the host CPU (bit flags). */
enum {
    KK_CPU_SSE2 = 1u << 0,
    KK_CPU_SSE4_2 = 1u << 1,
    KK_CPU_AVX = 1u << 2,
    KK_CPU_AVX2 = 1u << 3,
    KK_CPU_FMA = 1u << 4,
    KK_CPU_F16C = 1u << 5,
    KK_CPU_AVX512F = 1u << 6,
    KK_CPU_AVX512BW = 1u << 7,
    KK_CPU_AVX512VL = 1u << 8,
    KK_CPU_AVX512_BF16 = 1u << 9,
    KK_CPU_AVX512_FP16 = 1u << 10,
    KK_CPU_AVX_VNNI = 1u << 11,
    KK_CPU_AMX_TILE = 1u << 12,
    KK_CPU_NEON = 1u << 13,
    KK_CPU_AMX_BF16 = 1u << 14, /* AMX bf16 tile products (tdpbf16ps) */
};

/* Everything KernelKit knows about one device. Fields that do not apply to a
 * device's backend are zero (GPU fields on the CPU device and vice versa). */
typedef struct kk_device_info {
    kk_backend_kind backend;
    int index;      /* device number within its backend */
    char spec[32];  /* "cpu", "cuda:0" */
    char name[256]; /* "NVIDIA H200", "AMD EPYC 9654 96-Core Processor" */

    /* GPU */
    int cc_major, cc_minor; /* compute capability */
    kk_arch arch;
    int sm_count;
    uint64_t mem_total_bytes;
    uint64_t mem_free_bytes;
    uint64_t l2_bytes;
    uint64_t smem_per_block_optin_bytes; /* largest dynamic shared memory per block */
    int sm_clock_max_mhz;                /* from the runtime (maximum boost) */
    int mem_clock_max_mhz;
    int mem_bus_width_bits;
    double mem_bandwidth_theoretical_gbs; /* 2 * mem clock * bus width / 8 */
    int device_count_in_backend;          /* multi-GPU: how many GPUs this backend sees */
    char pci_bus_id[32];

    /* CPU */
    int cpu_cores;         /* physical cores */
    int cpu_threads;       /* logical processors this process may run on */
    unsigned cpu_features; /* KK_CPU_* flags */
    uint64_t host_mem_total_bytes;
    uint64_t host_mem_available_bytes;
} kk_device_info;

/* Comma-separated SIMD names ("sse2,avx,avx2,fma") into buf; returns buf. */
KK_API const char *kk_cpu_features_str(unsigned features, char *buf, size_t size);

/* The instruction-set level the CPU kernels use now: "generic", "avx2"
 * (AVX2 + FMA), "avx512" (F/BW/VL), "avx512_bf16" or "amx" (AMX-TILE +
 * AMX-BF16, with the OS's permission to use the tiles): the best this CPU has,
 * capped by the environment variable KK_CPU_ISA (one of those names). */
KK_API const char *kk_cpu_isa(void);

/* Threads the CPU backend's kernels use: KK_NUM_THREADS (hardware.cpu.num_threads)
 * when set, else one per online core. n = 0 means one per core; 0..4096. */
KK_API kk_status kk_cpu_set_num_threads(int n);
KK_API int kk_cpu_num_threads(void);

/* ---- backends ---- */

/* Name ("cpu", "cuda"); NULL for an invalid kind. */
KK_API const char *kk_backend_name(kk_backend_kind kind);

/* Non-zero when the backend can run work now. Probing happens once, lazily. */
KK_API int kk_backend_available(kk_backend_kind kind);

/* Why the backend is unavailable ("built without CUDA", "no NVIDIA driver
 * found (cudaErrorInsufficientDriver: ...)"), or "" when it is available. */
KK_API const char *kk_backend_unavailable_reason(kk_backend_kind kind);

/* Number of devices of the backend (0 when unavailable). */
KK_API int kk_backend_device_count(kk_backend_kind kind);

/* ---- devices ---- */

/* Parse "cpu", "cuda", "cuda:N". Bad text gives KK_ERR_INVALID_ARGUMENT naming
 * the accepted forms; a well-formed spec for a device that is not present gives
 * KK_ERR_CUDA_UNAVAILABLE (no CUDA) or KK_ERR_INVALID_ARGUMENT (index too large). */
KK_API kk_status kk_device_parse(const char *spec, kk_backend_kind *backend, int *index);

/* Properties of one device (memory free is read at the time of the call). */
KK_API kk_status kk_device_get_info(const char *spec, kk_device_info *out);

/* The best device present: "cuda:0" when CUDA is available, else "cpu". */
KK_API const char *kk_device_best(void);

/* Prove the device runs this build's code: on a GPU, launch a small kernel and
 * check every element it wrote; on the CPU, run the same check on the host.
 * KK_ERR_KERNEL_LAUNCH (with the CUDA error name) or KK_ERR_DEVICE_FAILURE
 * when it does not. */
KK_API kk_status kk_device_selftest(const char *spec);

/* ---- GPU telemetry (NVML, loaded at run time) ---- */

typedef struct kk_gpu_telemetry {
    int available; /* 0: NVML absent or failed; see reason */
    char unavailable_reason[192];
    double temperature_c;
    int sm_clock_mhz;     /* current */
    int sm_clock_max_mhz; /* maximum */
    int mem_clock_mhz;
    double power_w;
    double power_limit_w;
    int utilization_gpu_pct;
    int utilization_mem_pct;
    uint64_t throttle_reasons; /* NVML clocks-event reason bits */
    char throttle_text[256];   /* "none" or "sw_power_cap,hw_slowdown,..." */
    char driver_version[64];
} kk_gpu_telemetry;

/* Telemetry of CUDA device `index`. Returns KK_OK with out->available == 0 and
 * a reason when NVML cannot be used; an error only for bad arguments. */
KK_API kk_status kk_gpu_telemetry_read(int index, kk_gpu_telemetry *out);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_DEVICE_H */
