/* Raw host memory for the CPU device's caching allocator: aligned_alloc,
 * free, and MemAvailable/MemTotal from /proc/meminfo for out-of-memory
 * protection. The optional byte limit (kk_mem_set_limit) is applied by the
 * allocator itself, on top of what this file reports, so every backend gets
 * it the same way. The CPU has no streams: the event entries are NULL. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/error.h"
#include "kernelkit/memory.h"

static kk_status cpu_alloc(void *ctx, int index, size_t bytes, void **ptr, const char *func) {
    (void)ctx;
    (void)index;
    /* bytes is a multiple of 512, so a multiple of the alignment as C11 asks */
    void *p = aligned_alloc(KK_MEM_ALIGNMENT, bytes);
    if (!p)
        return kk__error(KK_ERR_OUT_OF_MEMORY, func, "aligned_alloc of %zu bytes failed", bytes);
    *ptr = p;
    return KK_OK;
}

static void cpu_free(void *ctx, int index, void *ptr) {
    (void)ctx;
    (void)index;
    free(ptr);
}

/* /proc/meminfo into a stack buffer: this runs on every cache miss, so no
 * heap and no stdio. */
static kk_status cpu_info(void *ctx, int index, uint64_t *free_bytes, uint64_t *total_bytes,
                          const char *func) {
    (void)ctx;
    (void)index;
    char buf[8192];
    ssize_t n = -1;
    int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
    }
    unsigned long long total = 0, avail = 0;
    if (n > 0) buf[n] = 0;
    if (n <= 0 || !kk__parse_meminfo(buf, &total, &avail))
        return kk__error(KK_ERR_DEVICE_FAILURE, func, "cannot read /proc/meminfo");
    *free_bytes = avail;
    *total_bytes = total;
    return KK_OK;
}

static kk_status cpu_copy(void *ctx, void *dst, int dst_index, const void *src, int src_index,
                          size_t bytes, const char *func) {
    (void)ctx;
    (void)dst_index;
    (void)src_index;
    (void)func;
    memmove(dst, src, bytes); /* overlapping host ranges are allowed */
    return KK_OK;
}

const kk__mem_ops kk__cpu_mem_ops = {
    .alloc = cpu_alloc, .free = cpu_free, .info = cpu_info, .copy = cpu_copy,
    /* no streams, no events; pinned memory is the CUDA backend's */
};
