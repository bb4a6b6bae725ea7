/* The public memory API (include/kernelkit/memory.h): argument checks, one
 * allocator per device created on first use, and the statistics calls.
 * The allocation work itself is in memory_block.c and memory_grow.c. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/memory_graph.h"
#include "backend/memory_internal.h"
#include "core/error.h"
#include "core/log_internal.h"

/* ---- configuration: read once, from the environment ---- */

static pthread_once_t g_cfg_once = PTHREAD_ONCE_INIT;
static kk_memory_config g_cfg;

static void read_config(void) {
    kk_config c;
    kk_config_init_defaults(&c);
    if (kk_config_from_environment(&c) != KK_OK) {
        /* a bad variable must not make every allocation fail */
        KK_LOG(KK_LOG_WARN, "kernelkit.memory",
               "configuration from the environment rejected; memory uses the defaults",
               KK_F_STR("error", kk_last_error_message()));
        kk_config_init_defaults(&c);
    }
    g_cfg = c.memory;
}

/* ---- allocators, one per device, never destroyed ---- */

enum { MAX_ALLOCATORS = KK_BACKEND_COUNT * KK__MEM_MAX_DEVICES };

static pthread_mutex_t g_create_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(kk__mem_allocator *) g_slot[KK_BACKEND_COUNT][KK__MEM_MAX_DEVICES];
static _Atomic(kk__mem_allocator *) g_list[MAX_ALLOCATORS];
static atomic_int g_count;

static kk__mem_allocator *create(const kk__backend *b, int index) {
    kk__mem_allocator *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->nbuckets = 256;
    a->buckets = calloc(a->nbuckets, sizeof *a->buckets);
    if (!a->buckets || pthread_mutex_init(&a->lock, NULL) != 0) {
        free(a->buckets);
        free(a);
        return NULL;
    }
    a->backend = b;
    a->ops = b->mem;
    a->index = index;
    if (b->kind == KK_BACKEND_CPU)
        snprintf(a->name, sizeof a->name, "%s", b->name);
    else
        snprintf(a->name, sizeof a->name, "%s:%d", b->name, index);
    snprintf(a->logger, sizeof a->logger, "kernelkit.%s.memory", b->name);
    pthread_once(&g_cfg_once, read_config);
    a->cfg = g_cfg;
    a->limit = g_cfg.pool_limit_bytes;
    return a;
}

kk_status kk__mem_allocator_get(const char *func, const char *device, int create_it,
                                kk__mem_allocator **out) {
    *out = NULL;
    const kk__backend *b = NULL;
    int index = 0;
    kk_status st = kk__device_resolve(func, device, &b, &index);
    if (st) return st;
    if (!b->mem)
        return kk__error(KK_ERR_UNSUPPORTED, func, "the %s backend has no memory manager", b->name);
    if (index >= KK__MEM_MAX_DEVICES)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "device", "a device below 64",
                             "\"%.40s\"", device);
    kk__mem_allocator *a = atomic_load(&g_slot[b->kind][index]);
    if (a || !create_it) {
        *out = a;
        return KK_OK;
    }
    pthread_mutex_lock(&g_create_lock);
    a = atomic_load(&g_slot[b->kind][index]);
    if (!a) {
        a = create(b, index);
        if (a) {
            atomic_store(&g_list[atomic_load(&g_count)], a);
            atomic_fetch_add(&g_count, 1); /* published after the slot is filled */
            atomic_store(&g_slot[b->kind][index], a);
        }
    }
    pthread_mutex_unlock(&g_create_lock);
    if (!a)
        return kk__error(KK_ERR_ALLOCATION, func,
                         "cannot create the allocator of %.40s (host out of memory)", device);
    *out = a;
    return KK_OK;
}

int kk__mem_allocator_each(int (*fn)(kk__mem_allocator *a, void *arg), void *arg) {
    int n = atomic_load(&g_count);
    for (int i = 0; i < n; i++) {
        int r = fn(atomic_load(&g_list[i]), arg);
        if (r) return r;
    }
    return 0;
}

/* ---- logging, after the lock is released ---- */

void kk__mem_log_note(const kk__mem_allocator *a, const kk__mem_note *note,
                      const kk__mem_request *rq) {
    if (note->sync_fallbacks)
        KK_LOG(KK_LOG_WARN, a->logger,
               "no event could be recorded at a free; waited for the device",
               KK_F_STR("device", a->name), KK_F_INT("count", note->sync_fallbacks));
    if (!kk_log_enabled(a->logger, KK_LOG_DEBUG)) return; /* the hot path stops here */
    if (note->released_count)
        KK_LOG(KK_LOG_DEBUG, a->logger, "cached segments released", KK_F_STR("device", a->name),
               KK_F_UINT("segments", note->released_count),
               KK_F_UINT("bytes", note->released_bytes));
    if (rq && note->segment_bytes)
        KK_LOG(KK_LOG_DEBUG, a->logger, "cache miss: new segment", KK_F_STR("device", a->name),
               KK_F_INT("pool", rq->pool), KK_F_UINT("requested", rq->bytes),
               KK_F_UINT("segment", note->segment_bytes));
    if (rq && note->oom)
        KK_LOG(KK_LOG_DEBUG, a->logger, "out of memory", KK_F_STR("device", a->name),
               KK_F_INT("pool", rq->pool), KK_F_UINT("requested", rq->bytes),
               KK_F_STR("error", kk_last_error_message()));
}

/* ---- allocation ---- */

static kk_status check_pool(const char *func, int pool, int allow_device) {
    if (pool >= (allow_device ? -1 : 0) && pool < KK_MEM_MAX_POOLS) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "pool_id",
                         allow_device ? "-1 (the whole device) or 0 to 63" : "0 to 63", "%d", pool);
}

/* ---- pools held by CUDA graphs (memory_graph.h) ---- */

static _Thread_local struct {
    const kk__mem_allocator *a; /* NULL: no redirection */
    int pool;
} t_redirect;

kk_status kk__mem_graph_pool_acquire(const char *device, int *pool) {
    kk__mem_allocator *a = NULL;
    *pool = 0;
    kk_status st = kk__mem_allocator_get(__func__, device, 1, &a);
    if (st) return st;
    pthread_mutex_lock(&a->lock);
    for (int p = KK_MEM_MAX_POOLS - 1; p > 0 && !*pool; p--)
        if (!a->pools[p].graph_owned && !a->pools[p].segments) {
            a->pools[p].graph_owned = 1;
            *pool = p;
        }
    pthread_mutex_unlock(&a->lock);
    if (!*pool)
        return kk__error(KK_ERR_UNSUPPORTED, __func__,
                         "no empty memory pool on %.40s to hold CUDA graphs' memory", device);
    return KK_OK;
}

void kk__mem_graph_pool_release(const char *device, int pool) {
    kk__mem_allocator *a = NULL;
    if (pool <= 0 || pool >= KK_MEM_MAX_POOLS ||
        kk__mem_allocator_get(__func__, device, 0, &a) != KK_OK || !a)
        return;
    kk__mem_note note = {0};
    pthread_mutex_lock(&a->lock);
    a->pools[pool].graph_owned = 0;
    kk__mem_release_locked(a, pool, &note);
    pthread_mutex_unlock(&a->lock);
    kk__mem_log_note(a, &note, NULL);
}

kk_status kk__mem_graph_redirect(const char *device, int pool) {
    if (pool == 0) {
        t_redirect.a = NULL, t_redirect.pool = 0;
        return KK_OK;
    }
    kk_status st = check_pool(__func__, pool, 0);
    kk__mem_allocator *a = NULL;
    if (!st) st = kk__mem_allocator_get(__func__, device, 1, &a);
    if (st) return st;
    t_redirect.a = a, t_redirect.pool = pool;
    return KK_OK;
}

static kk_status alloc_impl(const char *func, const char *device, size_t bytes,
                            const kk_mem_options *o, void **ptr) {
    if (!ptr)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "ptr", "a non-NULL pointer", "NULL");
    *ptr = NULL;
    if (bytes == 0) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "bytes", "at least 1", "0");
    kk__mem_request rq = {
        .bytes = bytes, .pool = o ? o->pool_id : 0, .stream = o ? o->stream : NULL, .func = func};
    kk_status st = check_pool(func, rq.pool, 0);
    if (st) return st;
    double margin = o ? o->safety_margin : 0.0;
    if (margin != 0.0 && !(margin >= KK_CONFIG_SAFETY_MARGIN_MIN &&
                           margin <= KK_CONFIG_SAFETY_MARGIN_MAX)) /* NaN fails too */
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "options->safety_margin",
                             "0 (the configured margin) or 1.0 to 10.0", "%g", margin);
    kk__mem_allocator *a = NULL;
    st = kk__mem_allocator_get(func, device, 1, &a);
    if (st) return st;
    if (rq.pool == 0 && t_redirect.a == a) rq.pool = t_redirect.pool; /* memory_graph.h */

    kk__mem_note note = {0};
    pthread_mutex_lock(&a->lock);
    if (a->pools[rq.pool].graph_owned && !(t_redirect.a == a && t_redirect.pool == rq.pool)) {
        pthread_mutex_unlock(&a->lock);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "pool_id",
                             "a pool not held by CUDA graphs", "%d", rq.pool);
    }
    rq.margin = margin != 0.0 ? margin : a->cfg.safety_margin;
    if ((uint64_t)bytes > KK__MEM_MAX_REQUEST) {
        kk__mem_stats_oom(a, rq.pool);
        note.oom = 1;
        char b[32];
        st = kk__error(KK_ERR_OUT_OF_MEMORY, func,
                       "out of memory on %s: requested %s, more than any device holds", a->name,
                       kk__mem_bytes_text(bytes, b, sizeof b));
    } else {
        rq.size = (bytes + KK__MEM_ROUND - 1) / KK__MEM_ROUND * KK__MEM_ROUND;
        st = kk__mem_alloc_locked(a, &rq, ptr, &note);
    }
    pthread_mutex_unlock(&a->lock);
    kk__mem_log_note(a, &note, &rq);
    return st;
}

kk_status kk_mem_alloc(const char *device, size_t bytes, void **ptr) {
    return alloc_impl(__func__, device, bytes, NULL, ptr);
}

kk_status kk_mem_alloc_ex(const char *device, size_t bytes, const kk_mem_options *options,
                          void **ptr) {
    return alloc_impl(__func__, device, bytes, options, ptr);
}

/* ---- freeing ---- */

typedef struct free_job {
    void *ptr;
    kk_stream stream;
    int on_alloc_stream; /* kk_mem_free: the stream given at allocation */
} free_job;

static int free_in(kk__mem_allocator *a, void *arg) {
    free_job *j = arg;
    kk__mem_note note = {0};
    pthread_mutex_lock(&a->lock);
    kk__mem_block *b = kk__mem_map_find(a, j->ptr);
    if (b) kk__mem_free_locked(a, b, j->on_alloc_stream ? b->stream : j->stream, &note);
    pthread_mutex_unlock(&a->lock);
    if (b) kk__mem_log_note(a, &note, NULL);
    return b != NULL;
}

static kk_status free_impl(const char *func, void *ptr, kk_stream stream, int on_alloc_stream) {
    if (!ptr) return KK_OK;
    free_job j = {ptr, stream, on_alloc_stream};
    if (kk__mem_allocator_each(free_in, &j)) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "ptr",
                         "a pointer returned by kk_mem_alloc and not freed since", "%p", ptr);
}

kk_status kk_mem_free(void *ptr) { return free_impl(__func__, ptr, NULL, 1); }

kk_status kk_mem_free_on_stream(void *ptr, kk_stream stream) {
    return free_impl(__func__, ptr, stream, 0);
}

/* ---- cache, pools, statistics, limit ---- */

static kk_status release(const char *func, const char *device, int pool) {
    kk__mem_allocator *a = NULL;
    kk_status st = kk__mem_allocator_get(func, device, 0, &a);
    if (st || !a) return st;
    kk__mem_note note = {0};
    pthread_mutex_lock(&a->lock);
    kk__mem_release_locked(a, pool, &note);
    pthread_mutex_unlock(&a->lock);
    kk__mem_log_note(a, &note, NULL);
    return KK_OK;
}

kk_status kk_mem_empty_cache(const char *device) { return release(__func__, device, -1); }

kk_status kk_mem_pool_clear(const char *device, int pool_id) {
    kk_status st = check_pool(__func__, pool_id, 0);
    return st ? st : release(__func__, device, pool_id);
}

kk_status kk_mem_stats_get(const char *device, int pool_id, kk_mem_stats *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    memset(out, 0, sizeof *out);
    st = check_pool(__func__, pool_id, 1);
    kk__mem_allocator *a = NULL;
    if (!st) st = kk__mem_allocator_get(__func__, device, 0, &a);
    if (st || !a) return st; /* no allocator yet: all zero */
    pthread_mutex_lock(&a->lock);
    *out = pool_id < 0 ? a->total : a->pools[pool_id].stats;
    pthread_mutex_unlock(&a->lock);
    out->cached_bytes = out->reserved_bytes - out->allocated_bytes;
    return KK_OK;
}

static void reset(kk_mem_stats *s) {
    *s = (kk_mem_stats){.allocated_bytes = s->allocated_bytes,
                        .reserved_bytes = s->reserved_bytes,
                        .peak_allocated_bytes = s->allocated_bytes,
                        .peak_reserved_bytes = s->reserved_bytes};
}

kk_status kk_mem_stats_reset(const char *device) {
    kk__mem_allocator *a = NULL;
    kk_status st = kk__mem_allocator_get(__func__, device, 0, &a);
    if (st || !a) return st;
    pthread_mutex_lock(&a->lock);
    reset(&a->total);
    for (int i = 0; i < KK_MEM_MAX_POOLS; i++) reset(&a->pools[i].stats);
    pthread_mutex_unlock(&a->lock);
    return KK_OK;
}

kk_status kk_mem_set_limit(const char *device, uint64_t bytes) {
    kk__mem_allocator *a = NULL;
    kk_status st = kk__mem_allocator_get(__func__, device, 1, &a);
    if (st) return st;
    pthread_mutex_lock(&a->lock);
    a->limit = bytes;
    pthread_mutex_unlock(&a->lock);
    KK_LOG(KK_LOG_DEBUG, a->logger, "limit set", KK_F_STR("device", a->name),
           KK_F_UINT("bytes", bytes));
    return KK_OK;
}
