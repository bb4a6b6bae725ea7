/* New segments, with out-of-memory protection and fault injection: a new
 * segment is taken only when the device's free memory covers it with the
 * safety margin and the pool stays within its limit; otherwise, or when the
 * allocation itself fails, the device's fully free cached segments are given
 * back and it is tried once more. docs/memory.md, "Out-of-memory protection". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/memory_internal.h"
#include "core/error.h"

typedef enum why { WHY_NONE, WHY_SHORT, WHY_SYSTEM, WHY_POOL_CAP } why;

/* What the last attempt ran into, for the message. */
typedef struct oom_info {
    why why;
    size_t segment; /* the segment size of the last attempt */
    double need;    /* segment * margin */
    int have_free;  /* free_b and total_b are known */
    uint64_t free_b, total_b;
    uint64_t released;  /* cached bytes given back before the retry */
    char api_error[64]; /* cudaErrorMemoryAllocation, when the system said no */
} oom_info;

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

/* The segment sizes to try, preferred first. Small requests share 2 MiB
 * segments and large ones below 10 MiB share 20 MiB ones, so that a stream of
 * such requests costs few system calls; larger requests get their size
 * rounded to 2 MiB. Under memory pressure a segment of exactly the request
 * is tried next. Without caching every request gets its own exact segment,
 * returned to the system at its free. */
static int candidates(const kk__mem_allocator *a, const kk__mem_request *rq, int cls,
                      size_t out[2]) {
    out[0] = rq->size;
    if (!a->cfg.caching_enabled) return 1;
    if (cls == KK__MEM_SMALL)
        out[0] = KK__MEM_SMALL_SEGMENT;
    else if (rq->size < KK__MEM_MID_MAX)
        out[0] = KK__MEM_MID_SEGMENT;
    else
        out[0] = round_up(rq->size, KK__MEM_LARGE_GRANULE);
    if (out[0] == rq->size) return 1;
    out[1] = rq->size;
    return 2;
}

/* Free and total bytes as the allocator sees them: the device's, capped by
 * the allocator's limit. 0 when neither is known (then nothing is checked). */
static int device_free(kk__mem_allocator *a, oom_info *info, const char *func) {
    uint64_t f = 0, t = 0;
    int have = a->ops->info && a->ops->info(a->backend->context, a->index, &f, &t, func) == KK_OK;
    if (a->limit) {
        uint64_t used = a->total.reserved_bytes;
        uint64_t left = a->limit > used ? a->limit - used : 0;
        if (!have || left < f) f = left;
        if (!have || a->limit < t) t = a->limit;
        have = 1;
    }
    info->free_b = f;
    info->total_b = t;
    return have;
}

/* The underlying allocation, unless fault injection says this one fails. */
static kk_status system_alloc(kk__mem_allocator *a, size_t size, void **base, const char *func) {
    if (kk__mem_inject(&a->sys_fail_in, &a->sys_fail_len, &a->sys_injected))
        return kk__error(KK_ERR_OUT_OF_MEMORY, func, "injected failure of a %zu-byte allocation",
                         size);
    return a->ops->alloc(a->backend->context, a->index, size, base, func);
}

static void add_segment(kk__mem_allocator *a, kk__mem_segment *seg, int cls, uintptr_t base,
                        size_t size, int pool, kk__mem_block **out) {
    kk__mem_pool *p = &a->pools[pool];
    kk__mem_block *b = kk__mem_spare_take(a);
    seg->base = base;
    seg->size = size;
    seg->pool = pool;
    seg->cls = cls;
    seg->first = b;
    seg->next = p->segments;
    if (p->segments) p->segments->prev = seg;
    p->segments = seg;
    b->addr = base;
    b->size = size;
    b->seg = seg;
    b->is_free = 1;
    kk__mem_stats_reserve(a, pool, size);
    *out = b;
}

static kk_status try_segment(kk__mem_allocator *a, const kk__mem_request *rq, int cls, size_t size,
                             kk__mem_block **out, oom_info *info) {
    info->segment = size;
    info->need = (double)size * rq->margin;
    uint64_t cap = a->cfg.max_pool_bytes;
    info->have_free = device_free(a, info, rq->func);
    if (cap && a->pools[rq->pool].stats.reserved_bytes + size > cap) {
        info->why = WHY_POOL_CAP;
        return KK_ERR_OUT_OF_MEMORY;
    }
    if (info->have_free && info->need > (double)info->free_b) {
        info->why = WHY_SHORT;
        return KK_ERR_OUT_OF_MEMORY;
    }
    kk__mem_segment *seg = kk__mem_meta_calloc(a, sizeof *seg);
    if (!seg)
        return kk__error(KK_ERR_ALLOCATION, rq->func,
                         "cannot allocate the allocator's bookkeeping on %s (host out of memory)",
                         a->name);
    void *base = NULL;
    kk_status st = system_alloc(a, size, &base, rq->func);
    if (st) {
        free(seg);
        if (st == KK_ERR_OUT_OF_MEMORY) {
            info->why = WHY_SYSTEM;
            snprintf(info->api_error, sizeof info->api_error, "%s", kk_last_error()->cuda_error);
        }
        return st;
    }
    add_segment(a, seg, cls, (uintptr_t)base, size, rq->pool, out);
    return KK_OK;
}

/* "free 1.10 GiB of 79.10 GiB total (limit ...)" */
static void free_text(const kk__mem_allocator *a, const oom_info *info, char *buf, size_t size) {
    char f[32], t[32], l[32];
    if (!info->have_free) {
        snprintf(buf, size, "free and total memory unknown");
        return;
    }
    kk__mem_bytes_text(info->free_b, f, sizeof f);
    kk__mem_bytes_text(info->total_b, t, sizeof t);
    if (a->limit)
        snprintf(buf, size, "free %s of %s total (the allocator's limit on %s is %s)", f, t,
                 a->name, kk__mem_bytes_text(a->limit, l, sizeof l));
    else
        snprintf(buf, size, "free %s of %s total", f, t);
}

static kk_status oom_error(kk__mem_allocator *a, const kk__mem_request *rq, const oom_info *info) {
    char req[32], seg[32], need[32], rel[32], cap[32], have[32], fr[160], what[512], value[32];
    kk__mem_bytes_text(rq->bytes, req, sizeof req);
    kk__mem_bytes_text(info->segment, seg, sizeof seg);
    kk__mem_bytes_text((uint64_t)info->need, need, sizeof need);
    free_text(a, info, fr, sizeof fr);
    switch (info->why) {
    case WHY_POOL_CAP:
        snprintf(what, sizeof what,
                 "requested %s in pool %d, which has %s reserved: a new %s segment would pass "
                 "memory.max_pool_bytes = %s; %s",
                 req, rq->pool,
                 kk__mem_bytes_text(a->pools[rq->pool].stats.reserved_bytes, have, sizeof have),
                 seg, kk__mem_bytes_text(a->cfg.max_pool_bytes, cap, sizeof cap), fr);
        break;
    case WHY_SYSTEM:
        snprintf(what, sizeof what, "requested %s: the system refused a new %s segment%s%s%s; %s",
                 req, seg, info->api_error[0] ? " (" : "", info->api_error,
                 info->api_error[0] ? ")" : "", fr);
        break;
    default:
        snprintf(what, sizeof what, "requested %s (%s segment \u00d7 %.2f safety margin = %s), %s",
                 req, seg, rq->margin, need, fr);
        break;
    }
    snprintf(value, sizeof value, "%zu", rq->bytes);
    if (info->released)
        return kk__set_error(KK_ERR_OUT_OF_MEMORY, rq->func, "bytes", value, NULL,
                             info->api_error[0] ? info->api_error : NULL,
                             "out of memory on %s: %s; released %s of cached memory and tried "
                             "again",
                             a->name, what, kk__mem_bytes_text(info->released, rel, sizeof rel));
    return kk__set_error(KK_ERR_OUT_OF_MEMORY, rq->func, "bytes", value, NULL,
                         info->api_error[0] ? info->api_error : NULL,
                         "out of memory on %s: %s; no cached memory to release", a->name, what);
}

kk_status kk__mem_grow_locked(kk__mem_allocator *a, const kk__mem_request *rq, int cls,
                              kk__mem_block **out, kk__mem_note *note) {
    size_t sizes[2];
    int n = candidates(a, rq, cls, sizes);
    oom_info info;
    memset(&info, 0, sizeof info);
    for (int attempt = 0; attempt < 2; attempt++) {
        for (int i = 0; i < n; i++) {
            kk_status st = try_segment(a, rq, cls, sizes[i], out, &info);
            if (st == KK_OK) note->segment_bytes = sizes[i];
            if (st != KK_ERR_OUT_OF_MEMORY) return st; /* done, or a failure OOM can't fix */
        }
        if (attempt > 0) break;
        uint64_t released = kk__mem_release_locked(a, -1, note);
        if (!released) break; /* the same state again would give the same answer */
        info.released = released;
    }
    kk__mem_stats_oom(a, rq->pool);
    note->oom = 1;
    return oom_error(a, rq, &info);
}
