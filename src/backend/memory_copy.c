/* kk_mem_copy between any two devices, and pinned host memory. Copies go to
 * the backend that owns the non-host side; before that, every pointer is
 * checked against the device named for it (a block from kk_mem_alloc against
 * its length too; a host pointer is shown to every backend, which says whether
 * it is its device memory). docs/memory.md, "Copies and pinned memory". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/memory_internal.h"
#include "core/error.h"
#include "core/log_internal.h"

/* ---- copies ---- */

typedef struct owner_job {
    const void *ptr;
    const kk__mem_allocator *owner;
    size_t size;
} owner_job;

static int find_owner(kk__mem_allocator *a, void *arg) {
    owner_job *j = arg;
    pthread_mutex_lock(&a->lock);
    const kk__mem_block *b = kk__mem_map_find(a, j->ptr);
    if (b) {
        j->owner = a;
        j->size = b->size;
    }
    pthread_mutex_unlock(&a->lock);
    return b != NULL;
}

static kk_status check_side(const char *func, const char *arg, const void *ptr,
                            const kk__backend *b, int index, const char *device, size_t bytes) {
    owner_job j = {ptr, NULL, 0};
    if (!kk__mem_allocator_each(find_owner, &j)) return KK_OK;
    if (j.owner->backend != b || j.owner->index != index)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, arg,
                             "memory of the device named for it",
                             "%p (a block of %s, not of %.40s)", ptr, j.owner->name, device);
    if (bytes > j.size)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "bytes",
                             "at most the size of the block it copies",
                             "%zu (the %s block %p has %zu)", bytes, arg, ptr, j.size);
    return KK_OK;
}

/* A pointer named as host memory that some available backend says is its
 * device memory: refused (a host copy into it would crash). */
static kk_status check_host_side(const char *func, const char *arg, const void *ptr) {
    for (int k = 0; k < KK_BACKEND_COUNT; k++) {
        const kk__backend *b = kk__backend_get((kk_backend_kind)k);
        if (!b || !b->available(b->context) || !b->mem || !b->mem->pointer_device) continue;
        int device = b->mem->pointer_device(b->context, ptr);
        if (device >= 0)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, arg, "host memory",
                                 "%p (memory of %s:%d)", ptr, b->name, device);
    }
    return KK_OK;
}

kk_status kk_mem_copy(void *dst, const char *dst_device, const void *src, const char *src_device,
                      size_t bytes) {
    kk_status st = KK__CHECK_NOT_NULL(dst);
    if (!st) st = KK__CHECK_NOT_NULL(src);
    const kk__backend *db = NULL, *sb = NULL;
    int di = 0, si = 0;
    if (!st) st = kk__device_resolve(__func__, dst_device, &db, &di);
    if (!st) st = kk__device_resolve(__func__, src_device, &sb, &si);
    if (!st) st = check_side(__func__, "dst", dst, db, di, dst_device, bytes);
    if (!st) st = check_side(__func__, "src", src, sb, si, src_device, bytes);
    if (st || bytes == 0) return st;

    int dst_host = db->kind == KK_BACKEND_CPU, src_host = sb->kind == KK_BACKEND_CPU;
    if (dst_host) st = check_host_side(__func__, "dst", dst);
    if (!st && src_host) st = check_host_side(__func__, "src", src);
    if (st) return st;
    const kk__backend *b = dst_host ? sb : db;
    if (!dst_host && !src_host && db != sb)
        return kk__error(KK_ERR_UNSUPPORTED, __func__, "no copy path from %.40s to %.40s",
                         src_device, dst_device);
    if (!b->mem || !b->mem->copy)
        return kk__error(KK_ERR_UNSUPPORTED, __func__, "the %s backend cannot copy memory",
                         b->name);
    return b->mem->copy(b->context, dst, dst_host ? -1 : di, src, src_host ? -1 : si, bytes,
                        __func__);
}

/* ---- pinned host memory ----
 *
 * Page-locked through the CUDA backend when it is available, plain aligned
 * host memory otherwise. Each pointer is remembered with how it was made, so
 * that it is released the same way and a foreign pointer is refused instead
 * of crashing. A linear list: pinned buffers are few and large. */

typedef struct pinned {
    void *ptr;
    const kk__backend *by; /* NULL: aligned_alloc */
} pinned;

static pthread_mutex_t g_pin_lock = PTHREAD_MUTEX_INITIALIZER;
static pinned *g_pins;
static size_t g_npins, g_pin_cap;

static const kk__backend *pinning_backend(void) {
    const kk__backend *b = kk__backend_get(KK_BACKEND_CUDA);
    if (b && b->available(b->context) && b->mem && b->mem->host_alloc) return b;
    return NULL;
}

static int room_for_one(void) {
    if (g_npins < g_pin_cap) return 1;
    size_t cap = g_pin_cap ? g_pin_cap * 2 : 16;
    pinned *p = realloc(g_pins, cap * sizeof *p);
    if (!p) return 0;
    g_pins = p;
    g_pin_cap = cap;
    return 1;
}

static kk_status pinned_alloc_locked(const kk__backend *b, size_t bytes, void **ptr) {
    static const char *const func = "kk_mem_alloc_pinned";
    if (!room_for_one())
        return kk__error(KK_ERR_ALLOCATION, func,
                         "cannot record a pinned buffer (host out of memory)");
    void *p = NULL;
    if (b) {
        kk_status st = b->mem->host_alloc(b->context, bytes, &p, func);
        if (st) return st;
    } else {
        size_t rounded = (bytes + KK_MEM_ALIGNMENT - 1) / KK_MEM_ALIGNMENT * KK_MEM_ALIGNMENT;
        p = rounded >= bytes ? aligned_alloc(KK_MEM_ALIGNMENT, rounded) : NULL;
        if (!p) {
            char t[32];
            return kk__error(KK_ERR_OUT_OF_MEMORY, func,
                             "out of memory: requested %s of host memory",
                             kk__mem_bytes_text(bytes, t, sizeof t));
        }
    }
    g_pins[g_npins++] = (pinned){p, b};
    *ptr = p;
    return KK_OK;
}

kk_status kk_mem_alloc_pinned(size_t bytes, void **ptr) {
    kk_status st = KK__CHECK_NOT_NULL(ptr);
    if (st) return st;
    *ptr = NULL;
    if (bytes == 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "bytes", "at least 1", "0");
    const kk__backend *b = pinning_backend();
    pthread_mutex_lock(&g_pin_lock);
    st = pinned_alloc_locked(b, bytes, ptr);
    pthread_mutex_unlock(&g_pin_lock);
    if (!st)
        KK_LOG(KK_LOG_DEBUG, "kernelkit.memory", "pinned host memory", KK_F_UINT("bytes", bytes),
               KK_F_BOOL("page_locked", b != NULL));
    return st;
}

kk_status kk_mem_free_pinned(void *ptr) {
    if (!ptr) return KK_OK;
    pinned found = {NULL, NULL};
    pthread_mutex_lock(&g_pin_lock);
    for (size_t i = 0; i < g_npins; i++) {
        if (g_pins[i].ptr != ptr) continue;
        found = g_pins[i];
        g_pins[i] = g_pins[--g_npins];
        break;
    }
    pthread_mutex_unlock(&g_pin_lock);
    if (!found.ptr)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "ptr",
                             "a pointer returned by kk_mem_alloc_pinned and not freed since", "%p",
                             ptr);
    if (found.by)
        found.by->mem->host_free(found.by->context, ptr);
    else
        free(ptr);
    return KK_OK;
}
