/* Test hooks: fault injection, configuration overrides, and a checker that
 * walks every structure of an allocator and proves they agree. The tests run
 * the checker after every step of their fault-injection sweeps. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backend/memory_internal.h"
#include "core/error.h"

static kk_status get(const char *func, const char *device, kk__mem_allocator **a) {
    return kk__mem_allocator_get(func, device, 1, a);
}

/* ---- fault injection and configuration ---- */

kk_status kk__mem_fail_system_allocs(const char *device, uint64_t n, uint64_t count) {
    kk__mem_allocator *a;
    kk_status st = get(__func__, device, &a);
    if (st) return st;
    pthread_mutex_lock(&a->lock);
    a->sys_fail_in = n;
    a->sys_fail_len = n ? (count ? count : 1) : 0;
    pthread_mutex_unlock(&a->lock);
    return KK_OK;
}

kk_status kk__mem_fail_nth_system_alloc(const char *device, uint64_t n) {
    return kk__mem_fail_system_allocs(device, n, 1);
}

kk_status kk__mem_fail_meta_allocs(const char *device, uint64_t n, uint64_t count) {
    kk__mem_allocator *a;
    kk_status st = get(__func__, device, &a);
    if (st) return st;
    pthread_mutex_lock(&a->lock);
    a->meta_fail_in = n;
    a->meta_fail_len = n ? (count ? count : 1) : 0;
    pthread_mutex_unlock(&a->lock);
    return KK_OK;
}

kk_status kk__mem_injected(const char *device, uint64_t *system, uint64_t *meta) {
    kk__mem_allocator *a;
    kk_status st = get(__func__, device, &a);
    if (st) return st;
    pthread_mutex_lock(&a->lock);
    if (system) *system = a->sys_injected;
    if (meta) *meta = a->meta_injected;
    pthread_mutex_unlock(&a->lock);
    return KK_OK;
}

kk_status kk__mem_configure(const char *device, const kk_memory_config *cfg) {
    kk_status st = KK__CHECK_NOT_NULL(cfg);
    kk__mem_allocator *a;
    if (!st && !(cfg->safety_margin >= KK_CONFIG_SAFETY_MARGIN_MIN &&
                 cfg->safety_margin <= KK_CONFIG_SAFETY_MARGIN_MAX))
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "cfg->safety_margin", "1.0 to 10.0",
                           "%g", cfg->safety_margin);
    if (!st) st = get(__func__, device, &a);
    if (st) return st;
    kk__mem_note note = {0};
    pthread_mutex_lock(&a->lock);
    a->cfg = *cfg;
    a->limit = cfg->pool_limit_bytes;
    if (!cfg->caching_enabled) kk__mem_release_locked(a, -1, &note);
    pthread_mutex_unlock(&a->lock);
    kk__mem_log_note(a, &note, NULL);
    return KK_OK;
}

/* ---- the checker ---- */

typedef struct checker {
    kk__mem_allocator *a;
    kk__mem_census census;
    uint64_t reserved, allocated; /* of the pool being walked */
    long free_blocks[KK__MEM_CLASSES];
    char why[256];
} checker;

#define BAD(ck, ...) (snprintf((ck)->why, sizeof(ck)->why, __VA_ARGS__), 0)

/* Two neighbours that kk__mem_free_locked would have merged. */
static int unmerged(const kk__mem_block *x, const kk__mem_block *n) {
    return x->is_free && n->is_free && (!x->event || !n->event || x->stream == n->stream);
}

static int check_block(checker *ck, const kk__mem_segment *seg, const kk__mem_block *b,
                       uintptr_t expect) {
    if (b->seg != seg || b->addr != expect)
        return BAD(ck, "block %#" PRIxPTR " is out of place in segment %#" PRIxPTR, b->addr,
                   seg->base);
    if (b->size == 0 || b->size % KK__MEM_ROUND || b->addr % KK_MEM_ALIGNMENT)
        return BAD(ck, "block %#" PRIxPTR " has size %zu", b->addr, b->size);
    if (b->next && b->next->prev != b) return BAD(ck, "broken links at %#" PRIxPTR, b->addr);
    if (b->next && unmerged(b, b->next))
        return BAD(ck, "free blocks %#" PRIxPTR " and its neighbour were not merged", b->addr);
    if (b->is_free) {
        ck->census.free_blocks++;
        ck->census.pending_blocks += b->event != NULL;
        ck->free_blocks[seg->cls]++;
        return 1;
    }
    ck->census.allocated_blocks++;
    ck->allocated += b->size;
    if (kk__mem_map_find(ck->a, (void *)b->addr) != b)
        return BAD(ck, "allocated block %#" PRIxPTR " is not in the pointer map", b->addr);
    return 1;
}

static int check_segment(checker *ck, int pool, const kk__mem_segment *seg) {
    if (seg->pool != pool || seg->cls < 0 || seg->cls >= KK__MEM_CLASSES)
        return BAD(ck, "segment %#" PRIxPTR " is filed under the wrong pool", seg->base);
    if (!seg->first || seg->first->prev)
        return BAD(ck, "segment %#" PRIxPTR " has no head", seg->base);
    uintptr_t at = seg->base;
    int used = 0;
    for (const kk__mem_block *b = seg->first; b; b = b->next) {
        if (!check_block(ck, seg, b, at)) return 0;
        at += b->size;
        used += !b->is_free;
    }
    if (at != seg->base + seg->size)
        return BAD(ck, "blocks of segment %#" PRIxPTR " do not cover it", seg->base);
    if (used != seg->used)
        return BAD(ck, "segment %#" PRIxPTR " counts %d used blocks, has %d", seg->base, seg->used,
                   used);
    ck->census.segments++;
    ck->census.segment_bytes += seg->size;
    ck->reserved += seg->size;
    return 1;
}

/* Every tree node is a free block of this pool and class. */
static int tree_members(const kk__mem_block *t, int pool, int cls) {
    if (!t) return 1;
    if (!t->is_free || t->seg->pool != pool || t->seg->cls != cls) return 0;
    return tree_members(t->left, pool, cls) && tree_members(t->right, pool, cls);
}

static int check_pool(checker *ck, int i) {
    const kk__mem_pool *p = &ck->a->pools[i];
    ck->reserved = ck->allocated = 0;
    ck->free_blocks[0] = ck->free_blocks[1] = 0;
    for (const kk__mem_segment *seg = p->segments; seg; seg = seg->next) {
        if (seg->next && seg->next->prev != seg) return BAD(ck, "pool %d: broken segment list", i);
        if (!check_segment(ck, i, seg)) return 0;
    }
    for (int c = 0; c < KK__MEM_CLASSES; c++) {
        if (kk__mem_tree_check(p->tree[c]) != ck->free_blocks[c] || !tree_members(p->tree[c], i, c))
            return BAD(ck, "pool %d: the free-block tree of class %d disagrees with the segments",
                       i, c);
    }
    if (p->stats.reserved_bytes != ck->reserved || p->stats.allocated_bytes != ck->allocated)
        return BAD(ck,
                   "pool %d: stats say %" PRIu64 " reserved, %" PRIu64 " allocated; segments "
                   "hold %" PRIu64 ", %" PRIu64,
                   i, p->stats.reserved_bytes, p->stats.allocated_bytes, ck->reserved,
                   ck->allocated);
    return 1;
}

/* The device total is the sum of its pools, field by field (peaks aside). */
static int check_totals(checker *ck) {
    const kk__mem_allocator *a = ck->a;
    kk_mem_stats s = {0};
    for (int i = 0; i < KK_MEM_MAX_POOLS; i++) {
        const kk_mem_stats *p = &a->pools[i].stats;
        s.allocated_bytes += p->allocated_bytes;
        s.reserved_bytes += p->reserved_bytes;
        s.alloc_count += p->alloc_count;
        s.free_count += p->free_count;
        s.cache_hits += p->cache_hits;
        s.cache_misses += p->cache_misses;
        s.system_alloc_count += p->system_alloc_count;
        s.system_free_count += p->system_free_count;
        s.oom_count += p->oom_count;
        if (p->peak_allocated_bytes < p->allocated_bytes ||
            p->peak_reserved_bytes < p->reserved_bytes)
            return BAD(ck, "pool %d: a peak is below the current value", i);
    }
    const kk_mem_stats *t = &a->total;
    if (s.allocated_bytes != t->allocated_bytes || s.reserved_bytes != t->reserved_bytes ||
        s.alloc_count != t->alloc_count || s.free_count != t->free_count ||
        s.cache_hits != t->cache_hits || s.cache_misses != t->cache_misses ||
        s.system_alloc_count != t->system_alloc_count ||
        s.system_free_count != t->system_free_count || s.oom_count != t->oom_count)
        return BAD(ck, "the device totals are not the sum of the pools");
    if (t->alloc_count != t->cache_hits + t->cache_misses)
        return BAD(ck, "alloc_count is not cache_hits + cache_misses");
    if (a->nallocated != ck->census.allocated_blocks)
        return BAD(ck, "the pointer map holds %zu blocks, segments %" PRIu64, a->nallocated,
                   ck->census.allocated_blocks);
    return 1;
}

kk_status kk__mem_check(const char *device, kk__mem_census *out) {
    kk__mem_allocator *a;
    kk_status st = get(__func__, device, &a);
    if (st) return st;
    checker ck;
    memset(&ck, 0, sizeof ck);
    ck.a = a;
    pthread_mutex_lock(&a->lock);
    int ok = 1;
    for (int i = 0; ok && i < KK_MEM_MAX_POOLS; i++) ok = check_pool(&ck, i);
    if (ok) ok = check_totals(&ck);
    pthread_mutex_unlock(&a->lock);
    if (out) *out = ck.census;
    if (!ok) return kk__error(KK_ERR_INTERNAL, __func__, "%s: %s", a->name, ck.why);
    return KK_OK;
}
