/* Bookkeeping of the caching allocator: its own host records (fault-
 * injectable), the pointer map, the event cache and the statistics. All
 * functions expect the allocator's lock held. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/memory_internal.h"
#include "core/error.h"

/* ---- host records ---- */

int kk__mem_inject(uint64_t *fail_in, uint64_t *fail_len, uint64_t *count) {
    if (*fail_in == 0) return 0;
    if (--*fail_in > 0) return 0;
    ++*count;
    if (--*fail_len > 0) *fail_in = 1; /* the next call fails too */
    return 1;
}

void *kk__mem_meta_calloc(kk__mem_allocator *a, size_t size) {
    if (kk__mem_inject(&a->meta_fail_in, &a->meta_fail_len, &a->meta_injected)) return NULL;
    return calloc(1, size);
}

/* Block records are taken before anything changes, so that splitting a block
 * or adding a segment never fails halfway. */
kk_status kk__mem_reserve_spares(kk__mem_allocator *a, int n, const char *func) {
    while (a->nspare < n) {
        kk__mem_block *b = kk__mem_meta_calloc(a, sizeof *b);
        if (!b)
            return kk__error(KK_ERR_ALLOCATION, func,
                             "cannot allocate the allocator's bookkeeping on %s (host out of "
                             "memory)",
                             a->name);
        b->next = a->spare;
        a->spare = b;
        a->nspare++;
    }
    return KK_OK;
}

kk__mem_block *kk__mem_spare_take(kk__mem_allocator *a) {
    kk__mem_block *b = a->spare;
    a->spare = b->next;
    a->nspare--;
    *b = (kk__mem_block){0};
    return b;
}

void kk__mem_spare_put(kk__mem_allocator *a, kk__mem_block *b) {
    if (a->nspare >= KK__MEM_SPARE_MAX) {
        free(b);
        return;
    }
    b->next = a->spare;
    a->spare = b;
    a->nspare++;
}

/* ---- pointer map: chained hash of allocated blocks by address ---- */

static size_t bucket(uintptr_t addr, size_t nbuckets) {
    uint64_t h = (uint64_t)(addr >> 8) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (nbuckets - 1);
}

/* Doubling is best effort: when it cannot allocate, chains just get longer,
 * so inserting never fails. */
static void grow_map(kk__mem_allocator *a) {
    size_t n = a->nbuckets * 2;
    kk__mem_block **nb = kk__mem_meta_calloc(a, n * sizeof *nb);
    if (!nb) return;
    for (size_t i = 0; i < a->nbuckets; i++) {
        for (kk__mem_block *b = a->buckets[i], *next; b; b = next) {
            next = b->hnext;
            size_t j = bucket(b->addr, n);
            b->hnext = nb[j];
            nb[j] = b;
        }
    }
    free(a->buckets);
    a->buckets = nb;
    a->nbuckets = n;
}

void kk__mem_map_insert(kk__mem_allocator *a, kk__mem_block *b) {
    if (a->nallocated >= 2 * a->nbuckets) grow_map(a);
    size_t i = bucket(b->addr, a->nbuckets);
    b->hnext = a->buckets[i];
    a->buckets[i] = b;
    a->nallocated++;
}

kk__mem_block *kk__mem_map_find(const kk__mem_allocator *a, const void *ptr) {
    uintptr_t addr = (uintptr_t)ptr;
    for (kk__mem_block *b = a->buckets[bucket(addr, a->nbuckets)]; b; b = b->hnext)
        if (b->addr == addr) return b;
    return NULL;
}

void kk__mem_map_remove(kk__mem_allocator *a, kk__mem_block *b) {
    kk__mem_block **at = &a->buckets[bucket(b->addr, a->nbuckets)];
    while (*at && *at != b) at = &(*at)->hnext;
    if (!*at) return;
    *at = b->hnext;
    b->hnext = NULL;
    a->nallocated--;
}

/* ---- events ---- */

void kk__mem_event_retire(kk__mem_allocator *a, void *event) {
    if (!event) return;
    if (a->nevents < KK__MEM_EVENT_CACHE) {
        a->events[a->nevents++] = event;
        return;
    }
    a->ops->event_destroy(a->backend->context, event);
}

void kk__mem_event_mark(kk__mem_allocator *a, kk__mem_block *b, kk_stream stream,
                        kk__mem_note *note) {
    b->stream = stream;
    b->event = NULL;
    if (!a->ops->event_record) return; /* no streams: ready everywhere */
    void *ctx = a->backend->context, *ev = NULL;
    if (a->nevents > 0)
        ev = a->events[--a->nevents];
    else if (a->ops->event_create(ctx, a->index, &ev) != KK_OK)
        ev = NULL;
    if (ev && a->ops->event_record(ctx, a->index, ev, stream) == KK_OK) {
        b->event = ev;
        b->event_seq = ++a->event_seq;
        return;
    }
    /* A bad stream, or a broken device: waiting for everything is always
     * safe, and the block is then ready on every stream. */
    kk__mem_event_retire(a, ev);
    a->ops->synchronize(ctx, a->index);
    note->sync_fallbacks++;
}

int kk__mem_event_done(kk__mem_allocator *a, kk__mem_block *b) {
    if (!b->event) return 1;
    if (!a->ops->event_done(a->backend->context, b->event)) return 0;
    kk__mem_event_retire(a, b->event);
    b->event = NULL;
    return 1;
}

/* ---- statistics: every change goes to the pool and to the device total ---- */

static void peak(uint64_t *peak_v, uint64_t v) {
    if (v > *peak_v) *peak_v = v;
}

void kk__mem_stats_alloc(kk__mem_allocator *a, int pool, size_t size, int hit) {
    kk_mem_stats *s[2] = {&a->pools[pool].stats, &a->total};
    for (int i = 0; i < 2; i++) {
        s[i]->allocated_bytes += size;
        peak(&s[i]->peak_allocated_bytes, s[i]->allocated_bytes);
        s[i]->alloc_count++;
        if (hit)
            s[i]->cache_hits++;
        else
            s[i]->cache_misses++;
    }
}

void kk__mem_stats_free(kk__mem_allocator *a, int pool, size_t size) {
    kk_mem_stats *s[2] = {&a->pools[pool].stats, &a->total};
    for (int i = 0; i < 2; i++) {
        s[i]->allocated_bytes -= size;
        s[i]->free_count++;
    }
}

void kk__mem_stats_reserve(kk__mem_allocator *a, int pool, size_t size) {
    kk_mem_stats *s[2] = {&a->pools[pool].stats, &a->total};
    for (int i = 0; i < 2; i++) {
        s[i]->reserved_bytes += size;
        peak(&s[i]->peak_reserved_bytes, s[i]->reserved_bytes);
        s[i]->system_alloc_count++;
    }
}

void kk__mem_stats_release(kk__mem_allocator *a, int pool, size_t size) {
    kk_mem_stats *s[2] = {&a->pools[pool].stats, &a->total};
    for (int i = 0; i < 2; i++) {
        s[i]->reserved_bytes -= size;
        s[i]->system_free_count++;
    }
}

void kk__mem_stats_oom(kk__mem_allocator *a, int pool) {
    a->pools[pool].stats.oom_count++;
    a->total.oom_count++;
}

const char *kk__mem_bytes_text(uint64_t bytes, char *buf, size_t size) {
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, size, "%.2f %s", v, unit[u]);
    return buf;
}
