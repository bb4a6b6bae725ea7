/* Blocks: best-fit lookup, splitting, coalescing, freeing and giving whole
 * segments back. Everything here runs under the allocator's lock and cannot
 * fail once kk__mem_alloc_locked has reserved its block records, so no path
 * leaves a segment half split or a block half merged. */
#include <stdlib.h>

#include "backend/memory_internal.h"
#include "core/error.h"

static int size_class(size_t size) {
    return size <= KK__MEM_SMALL_MAX ? KK__MEM_SMALL : KK__MEM_LARGE;
}

/* A block can go to `stream` when it is ready, when it was freed on that
 * same stream (the stream's own order protects it), or when the event
 * recorded at its free has completed. */
static int usable_on(kk__mem_allocator *a, kk__mem_block *b, kk_stream stream) {
    if (!b->event || b->stream == stream) return 1;
    return kk__mem_event_done(a, b);
}

/* Best fit: the smallest free block of the class that is large enough and
 * usable on the stream. Pending blocks of other streams are skipped. */
static kk__mem_block *find_cached(kk__mem_allocator *a, kk__mem_pool *p, int cls,
                                  const kk__mem_request *rq) {
    kk__mem_block *root = p->tree[cls];
    for (kk__mem_block *b = kk__mem_tree_lower_bound(root, rq->size); b;
         b = kk__mem_tree_next(root, b))
        if (usable_on(a, b, rq->stream)) return b;
    return NULL;
}

/* Two adjacent free blocks can become one unless each waits for work on a
 * different stream: one event cannot stand for two streams. */
static int mergeable(kk__mem_allocator *a, kk__mem_block *x, kk__mem_block *n) {
    if (!n || !n->is_free) return 0;
    if (!x->event || !n->event || x->stream == n->stream) return 1;
    return kk__mem_event_done(a, n); /* finished work no longer counts */
}

/* Absorb free neighbour `n` (in its tree) into `x` (in no tree). When both
 * wait for the same stream, the later event covers the earlier one (a
 * stream runs in order), so the merged block keeps the later. A ready block
 * merged with a pending one becomes pending: safe, and it only delays other
 * streams. */
static void absorb(kk__mem_allocator *a, kk__mem_block *x, kk__mem_block *n) {
    kk__mem_tree_remove(&a->pools[x->seg->pool].tree[x->seg->cls], n);
    if (n->event && (!x->event || n->event_seq > x->event_seq)) {
        kk__mem_event_retire(a, x->event);
        x->event = n->event;
        x->event_seq = n->event_seq;
        x->stream = n->stream;
    } else {
        kk__mem_event_retire(a, n->event);
    }
    if (n == x->next) {
        x->next = n->next;
        if (n->next) n->next->prev = x;
    } else { /* n == x->prev */
        x->addr = n->addr;
        x->prev = n->prev;
        if (n->prev)
            n->prev->next = x;
        else
            x->seg->first = x;
    }
    x->size += n->size;
    kk__mem_spare_put(a, n);
}

/* Hand out the first rq->size bytes of free block `b` (in no tree); the
 * rest, if any, stays free with b's pending state, since it is the same
 * freed memory. */
static void take(kk__mem_allocator *a, kk__mem_block *b, const kk__mem_request *rq) {
    kk__mem_segment *seg = b->seg;
    if (b->size > rq->size) {
        kk__mem_block *r = kk__mem_spare_take(a);
        r->addr = b->addr + rq->size;
        r->size = b->size - rq->size;
        r->seg = seg;
        r->prev = b;
        r->next = b->next;
        if (b->next) b->next->prev = r;
        b->next = r;
        r->is_free = 1;
        r->stream = b->stream;
        r->event = b->event;
        r->event_seq = b->event_seq;
        b->event = NULL;
        b->size = rq->size;
        /* b may have become ready on the way here (its event completed);
         * then r can join a neighbour that b could not */
        while (mergeable(a, r, r->next)) absorb(a, r, r->next);
        kk__mem_tree_insert(&a->pools[seg->pool].tree[seg->cls], r);
    } else {
        kk__mem_event_retire(a, b->event);
        b->event = NULL;
    }
    b->is_free = 0;
    b->stream = rq->stream;
    seg->used++;
    kk__mem_map_insert(a, b);
}

kk_status kk__mem_alloc_locked(kk__mem_allocator *a, const kk__mem_request *rq, void **ptr,
                               kk__mem_note *note) {
    /* one record for a split, one for a new segment's block */
    kk_status st = kk__mem_reserve_spares(a, 2, rq->func);
    if (st) return st;
    kk__mem_pool *p = &a->pools[rq->pool];
    int cls = size_class(rq->size);
    kk__mem_block *b = a->cfg.caching_enabled || p->graph_owned ? find_cached(a, p, cls, rq) : NULL;
    int hit = b != NULL;
    if (b) {
        kk__mem_tree_remove(&p->tree[cls], b);
    } else {
        st = kk__mem_grow_locked(a, rq, cls, &b, note);
        if (st) return st;
    }
    take(a, b, rq);
    kk__mem_stats_alloc(a, rq->pool, b->size, hit);
    *ptr = (void *)b->addr;
    return KK_OK;
}

/* ---- freeing and coalescing ---- */

static void release_segment(kk__mem_allocator *a, kk__mem_segment *seg, kk__mem_note *note);

void kk__mem_free_locked(kk__mem_allocator *a, kk__mem_block *b, kk_stream stream,
                         kk__mem_note *note) {
    kk__mem_segment *seg = b->seg;
    kk__mem_map_remove(a, b);
    kk__mem_stats_free(a, seg->pool, b->size);
    seg->used--;
    b->is_free = 1;
    kk__mem_event_mark(a, b, stream, note);
    /* each merge can make the next neighbour compatible (an event found
     * done on the way), hence the loops */
    while (mergeable(a, b, b->next)) absorb(a, b, b->next);
    while (mergeable(a, b, b->prev)) absorb(a, b, b->prev);
    kk__mem_tree_insert(&a->pools[seg->pool].tree[seg->cls], b);
    /* Without caching every allocation has a segment of its own (see
     * memory_grow.c), which goes back to the system with its block. */
    if (!a->cfg.caching_enabled && seg->used == 0 && !a->pools[seg->pool].graph_owned)
        release_segment(a, seg, note);
}

/* ---- giving segments back ---- */

static void release_segment(kk__mem_allocator *a, kk__mem_segment *seg, kk__mem_note *note) {
    kk__mem_pool *p = &a->pools[seg->pool];
    for (kk__mem_block *b = seg->first, *next; b; b = next) {
        next = b->next;
        kk__mem_tree_remove(&p->tree[seg->cls], b);
        if (b->event) {
            /* work queued before the free may still use the memory */
            a->ops->event_wait(a->backend->context, b->event);
            kk__mem_event_retire(a, b->event);
        }
        kk__mem_spare_put(a, b);
    }
    if (seg->prev)
        seg->prev->next = seg->next;
    else
        p->segments = seg->next;
    if (seg->next) seg->next->prev = seg->prev;
    a->ops->free(a->backend->context, a->index, (void *)seg->base);
    kk__mem_stats_release(a, seg->pool, seg->size);
    note->released_bytes += seg->size;
    note->released_count++;
    free(seg);
}

static uint64_t release_pool(kk__mem_allocator *a, int pool, kk__mem_note *note) {
    uint64_t bytes = 0;
    if (a->pools[pool].graph_owned) return 0; /* CUDA graphs replay into its blocks */
    for (kk__mem_segment *seg = a->pools[pool].segments, *next; seg; seg = next) {
        next = seg->next;
        if (seg->used) continue;
        bytes += seg->size;
        release_segment(a, seg, note);
    }
    return bytes;
}

uint64_t kk__mem_release_locked(kk__mem_allocator *a, int pool, kk__mem_note *note) {
    if (pool >= 0) return release_pool(a, pool, note);
    uint64_t bytes = 0;
    for (int i = 0; i < KK_MEM_MAX_POOLS; i++) bytes += release_pool(a, i, note);
    return bytes;
}
