/* The memory manager: a caching allocator per device with named pools, OOM
 * protection, statistics and stream-ordered reuse.
 *
 * Every device ("cpu", "cuda:N") has its own allocator. Blocks are 256-byte
 * aligned. Freed blocks are kept (cached) and reused by later allocations of a
 * similar size; kk_mem_empty_cache gives cached memory back to the system.
 * On CUDA, a block freed with a stream is reused on another stream only after
 * the work queued on the first stream before the free has finished.
 *
 * Out-of-memory protection: before an allocation that needs new memory from the
 * device, free device memory is checked against the request times the safety
 * margin (config memory.safety_margin, default 1.2). When short, cached blocks
 * are released and the check repeated; if still short, KK_ERR_OUT_OF_MEMORY with
 * requested, free and total bytes in the message. After any failure the
 * allocator is consistent: statistics are exact and everything frees cleanly.
 * See docs/memory.md. */
#ifndef KERNELKIT_MEMORY_H
#define KERNELKIT_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A CUDA stream (cudaStream_t) as an opaque pointer; NULL is the default stream.
 * Ignored on the CPU. */
typedef void *kk_stream;

/* Pools: 0 is the default pool; 1..KK_MEM_MAX_POOLS-1 are for callers. A pool
 * keeps its freed blocks to itself, so a loop that allocates the same buffers
 * every iteration reuses them; kk_mem_pool_clear releases its cached blocks. */
#define KK_MEM_MAX_POOLS 64
#define KK_MEM_ALIGNMENT 256

typedef struct kk_mem_options {
    int pool_id;          /* 0 = default pool */
    kk_stream stream;     /* stream the block will be used on (CUDA) */
    double safety_margin; /* 0 = the configured one (memory.safety_margin) */
} kk_mem_options;

typedef struct kk_mem_stats {
    uint64_t allocated_bytes; /* handed out and not yet freed (sizes rounded up to 512) */
    uint64_t reserved_bytes;  /* taken from the device/system, cached included */
    uint64_t cached_bytes;    /* reserved but not allocated */
    uint64_t peak_allocated_bytes;
    uint64_t peak_reserved_bytes;
    uint64_t alloc_count; /* successful kk_mem_alloc calls */
    uint64_t free_count;
    uint64_t cache_hits;         /* allocations served from cached blocks */
    uint64_t cache_misses;       /* allocations that needed new device memory */
    uint64_t system_alloc_count; /* underlying cudaMalloc / aligned_alloc calls */
    uint64_t system_free_count;
    uint64_t oom_count; /* requests refused with KK_ERR_OUT_OF_MEMORY */
} kk_mem_stats;

/* Allocate `bytes` (> 0) on `device` from the default pool. */
KK_API kk_status kk_mem_alloc(const char *device, size_t bytes, void **ptr);

/* Allocate with options (NULL = defaults). */
KK_API kk_status kk_mem_alloc_ex(const char *device, size_t bytes, const kk_mem_options *options,
                                 void **ptr);

/* Return a block to its pool's cache. NULL is a no-op; a pointer not from
 * kk_mem_alloc gives KK_ERR_INVALID_ARGUMENT and changes nothing. On CUDA this
 * is kk_mem_free_on_stream with the stream given at allocation. */
KK_API kk_status kk_mem_free(void *ptr);

/* Free a block whose last use was queued on `stream` (CUDA): it will not be
 * handed to another stream before that work completes. */
KK_API kk_status kk_mem_free_on_stream(void *ptr, kk_stream stream);

/* Release every cached (unallocated) block of the device to the system. */
KK_API kk_status kk_mem_empty_cache(const char *device);

/* Release the cached blocks of one pool. */
KK_API kk_status kk_mem_pool_clear(const char *device, int pool_id);

/* Statistics of one pool, or of the whole device with pool_id = -1. */
KK_API kk_status kk_mem_stats_get(const char *device, int pool_id, kk_mem_stats *out);

/* Reset the peak and counter fields (not allocated/reserved) of the device. */
KK_API kk_status kk_mem_stats_reset(const char *device);

/* Cap the bytes the device's allocator may reserve (0 = no cap; the cap starts
 * at memory.pool_limit_bytes). On the CPU this is how OOM paths are tested
 * without a GPU. */
KK_API kk_status kk_mem_set_limit(const char *device, uint64_t bytes);

/* Page-locked host memory for fast transfers (plain host memory when CUDA is
 * unavailable). */
KK_API kk_status kk_mem_alloc_pinned(size_t bytes, void **ptr);
KK_API kk_status kk_mem_free_pinned(void *ptr);

/* Copy bytes between any two devices' memory (host pointers are "cpu").
 * Synchronous with respect to the host. */
KK_API kk_status kk_mem_copy(void *dst, const char *dst_device, const void *src,
                             const char *src_device, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_MEMORY_H */
