/* Internal: the caching allocator behind include/kernelkit/memory.h, shared by
 * every backend and parametrized by its raw memory entry points (kk__mem_ops
 * in backend.h), so caching, stream-ordered reuse and out-of-memory protection
 * are written once. docs/memory.md describes the design and the files. */
#ifndef KK_BACKEND_MEMORY_INTERNAL_H
#define KK_BACKEND_MEMORY_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "kernelkit/config.h"
#include "kernelkit/memory.h"

/* ---- size policy (docs/memory.md, "Size classes") ---- */

#define KK__MEM_ROUND ((size_t)512)             /* every block is a multiple */
#define KK__MEM_SMALL_MAX ((size_t)1 << 20)     /* requests up to 1 MiB are small */
#define KK__MEM_SMALL_SEGMENT ((size_t)2 << 20) /* ...and carved from 2 MiB segments */
#define KK__MEM_MID_MAX ((size_t)10 << 20)      /* large requests below 10 MiB... */
#define KK__MEM_MID_SEGMENT ((size_t)20 << 20)  /* ...share 20 MiB segments */
#define KK__MEM_LARGE_GRANULE ((size_t)2 << 20) /* larger ones: rounded up to 2 MiB */
#define KK__MEM_MAX_REQUEST ((uint64_t)1 << 60) /* above: out of memory at once */

enum { KK__MEM_SMALL = 0, KK__MEM_LARGE = 1, KK__MEM_CLASSES = 2 };
enum { KK__MEM_MAX_DEVICES = 64 }; /* per backend */
enum { KK__MEM_EVENT_CACHE = 64 }; /* idle events kept for reuse */
enum { KK__MEM_SPARE_MAX = 64 };   /* idle block records kept for reuse */

/* ---- blocks and segments ---- */

typedef struct kk__mem_segment kk__mem_segment;
typedef struct kk__mem_block kk__mem_block;

/* A range of a segment, either handed out or free. */
struct kk__mem_block {
    uintptr_t addr;
    size_t size; /* multiple of KK__MEM_ROUND */
    kk__mem_segment *seg;
    kk__mem_block *prev, *next;  /* neighbours in the segment, by address */
    kk__mem_block *left, *right; /* free-block tree links (free blocks only) */
    kk__mem_block *hnext;        /* pointer-map chain (allocated blocks only) */
    uint64_t prio;               /* tree priority */
    int is_free;
    /* Allocated: the stream given at allocation (kk_mem_free frees on it).
     * Free: the stream of the free; with `event` non-NULL the block is
     * "pending": reusable at once on `stream`, elsewhere once `event` is done. */
    kk_stream stream;
    void *event;
    uint64_t event_seq; /* order of the event's recording, to keep the later */
};

/* One underlying allocation (cudaMalloc, aligned_alloc). It belongs to one
 * pool and one size class, and its blocks tile it exactly. */
struct kk__mem_segment {
    uintptr_t base;
    size_t size;
    int pool, cls;
    int used;                     /* allocated blocks in it */
    kk__mem_segment *prev, *next; /* the pool's segment list */
    kk__mem_block *first;
};

typedef struct kk__mem_pool {
    kk__mem_block *tree[KK__MEM_CLASSES]; /* free blocks by (size, address) */
    kk__mem_segment *segments;
    kk_mem_stats stats; /* cached_bytes is filled in on read */
    /* Held by CUDA graphs (memory_graph.h): its segments are never given
     * back (graphs replay into them), and only redirected allocations use it. */
    int graph_owned;
} kk__mem_pool;

/* The allocator of one device. Its mutex guards everything in it; functions
 * named *_locked expect it held. Nothing logs or calls back into user code
 * with the lock held: what happened is collected in a kk__mem_note and logged
 * after unlocking. */
typedef struct kk__mem_allocator {
    pthread_mutex_t lock;
    const kk__backend *backend;
    const kk__mem_ops *ops;
    int index;
    char name[32];   /* "cpu", "cuda:0" */
    char logger[40]; /* "kernelkit.cuda.memory" */

    kk_memory_config cfg; /* safety_margin, caching_enabled, max_pool_bytes */
    uint64_t limit;       /* reserve cap; starts at cfg.pool_limit_bytes; 0 = none */

    kk__mem_pool pools[KK_MEM_MAX_POOLS];
    kk_mem_stats total;

    kk__mem_block **buckets; /* pointer map: address -> allocated block */
    size_t nbuckets, nallocated;
    kk__mem_block *spare; /* idle block records */
    int nspare;
    void *events[KK__MEM_EVENT_CACHE];
    int nevents;
    uint64_t event_seq; /* events recorded so far */

    /* fault injection: fail `fail_len` system (or metadata) allocations,
     * starting `fail_in` calls from now (0 = off) */
    uint64_t sys_fail_in, sys_fail_len, sys_injected;
    uint64_t meta_fail_in, meta_fail_len, meta_injected;
} kk__mem_allocator;

/* One allocation request, already validated. */
typedef struct kk__mem_request {
    size_t bytes; /* as asked */
    size_t size;  /* rounded up to KK__MEM_ROUND */
    int pool;
    kk_stream stream;
    double margin; /* safety margin in force */
    const char *func;
} kk__mem_request;

/* What an operation did, for the debug log written after unlocking. */
typedef struct kk__mem_note {
    size_t segment_bytes;    /* a new segment was taken (cache miss) */
    uint64_t released_bytes; /* cached segments given back */
    uint64_t released_count;
    int oom;            /* refused with KK_ERR_OUT_OF_MEMORY */
    int sync_fallbacks; /* events that could not be recorded */
} kk__mem_note;

/* ---- memory_tree.c ---- */

void kk__mem_tree_insert(kk__mem_block **root, kk__mem_block *b);
void kk__mem_tree_remove(kk__mem_block **root, kk__mem_block *b);
/* The smallest block (by size, then address) of at least `size`; NULL if none. */
kk__mem_block *kk__mem_tree_lower_bound(kk__mem_block *root, size_t size);
/* The block after `b` in (size, address) order; NULL at the end. */
kk__mem_block *kk__mem_tree_next(kk__mem_block *root, const kk__mem_block *b);
/* Nodes in the tree, or -1 when its order or links are broken (for checks). */
long kk__mem_tree_check(const kk__mem_block *root);

/* ---- memory_util.c ---- */

/* One step of a fault-injection countdown: 1 when this call must fail. */
int kk__mem_inject(uint64_t *fail_in, uint64_t *fail_len, uint64_t *count);
void *kk__mem_meta_calloc(kk__mem_allocator *a, size_t size); /* fault-injectable */
kk_status kk__mem_reserve_spares(kk__mem_allocator *a, int n, const char *func);
kk__mem_block *kk__mem_spare_take(kk__mem_allocator *a); /* after reserve: never NULL */
void kk__mem_spare_put(kk__mem_allocator *a, kk__mem_block *b);

void kk__mem_map_insert(kk__mem_allocator *a, kk__mem_block *b);
kk__mem_block *kk__mem_map_find(const kk__mem_allocator *a, const void *ptr);
void kk__mem_map_remove(kk__mem_allocator *a, kk__mem_block *b);

/* Record an event on `stream` for the block being freed; on failure wait
 * for the device instead and leave the block ready. */
void kk__mem_event_mark(kk__mem_allocator *a, kk__mem_block *b, kk_stream stream,
                        kk__mem_note *note);
int kk__mem_event_done(kk__mem_allocator *a, kk__mem_block *b); /* clears b->event when done */
void kk__mem_event_retire(kk__mem_allocator *a, void *event);

void kk__mem_stats_alloc(kk__mem_allocator *a, int pool, size_t size, int hit);
void kk__mem_stats_free(kk__mem_allocator *a, int pool, size_t size);
void kk__mem_stats_reserve(kk__mem_allocator *a, int pool, size_t size);
void kk__mem_stats_release(kk__mem_allocator *a, int pool, size_t size);
void kk__mem_stats_oom(kk__mem_allocator *a, int pool);

/* "1.50 GiB", "512 B" into buf; returns buf. */
const char *kk__mem_bytes_text(uint64_t bytes, char *buf, size_t size);

/* ---- memory_block.c ---- */

/* Serve `rq` from the cache or a new segment; *ptr on success. */
kk_status kk__mem_alloc_locked(kk__mem_allocator *a, const kk__mem_request *rq, void **ptr,
                               kk__mem_note *note);
/* Return an allocated block (already found in the map) to its pool. */
void kk__mem_free_locked(kk__mem_allocator *a, kk__mem_block *b, kk_stream stream,
                         kk__mem_note *note);
/* Give every fully free segment of `pool` (-1: of every pool) back to the
 * system; returns the bytes released. */
uint64_t kk__mem_release_locked(kk__mem_allocator *a, int pool, kk__mem_note *note);

/* ---- memory_grow.c ---- */

/* A new segment for `rq` of class `cls`, with out-of-memory protection: its
 * single free block (not in any tree) in *out. */
kk_status kk__mem_grow_locked(kk__mem_allocator *a, const kk__mem_request *rq, int cls,
                              kk__mem_block **out, kk__mem_note *note);

/* ---- memory_api.c ---- */

/* The allocator of `device` (created on first use when `create`); NULL in
 * *out, with KK_OK, when it does not exist and `create` is 0. */
kk_status kk__mem_allocator_get(const char *func, const char *device, int create,
                                kk__mem_allocator **out);
/* Calls fn on every allocator created so far, under no lock; stops when fn
 * returns non-zero and returns that. */
int kk__mem_allocator_each(int (*fn)(kk__mem_allocator *a, void *arg), void *arg);
void kk__mem_log_note(const kk__mem_allocator *a, const kk__mem_note *note,
                      const kk__mem_request *rq);

/* ---- test hooks (memory_check.c) ---- */

/* From now, the n-th underlying allocation (cudaMalloc, aligned_alloc) of
 * `device` fails as if the device were out of memory, and so do the
 * count - 1 after it. n = 0 switches injection off. */
kk_status kk__mem_fail_system_allocs(const char *device, uint64_t n, uint64_t count);
/* The common case: only the n-th fails. */
kk_status kk__mem_fail_nth_system_alloc(const char *device, uint64_t n);
/* Same for the allocator's own host bookkeeping (block records, segments). */
kk_status kk__mem_fail_meta_allocs(const char *device, uint64_t n, uint64_t count);
/* Failures injected so far (system, metadata). */
kk_status kk__mem_injected(const char *device, uint64_t *system, uint64_t *meta);

/* What kk__mem_check found. */
typedef struct kk__mem_census {
    uint64_t segments, segment_bytes;
    uint64_t allocated_blocks, free_blocks, pending_blocks;
} kk__mem_census;

/* Walk every structure of the device's allocator and check that segments,
 * blocks, trees, the pointer map and the statistics agree. KK_ERR_INTERNAL
 * naming the first disagreement. `out` may be NULL. */
kk_status kk__mem_check(const char *device, kk__mem_census *out);

/* Override the configuration the allocator read at creation (safety margin,
 * caching, pool_limit_bytes -> limit, max_pool_bytes). Turning caching off
 * releases the cache. */
kk_status kk__mem_configure(const char *device, const kk_memory_config *cfg);

/* CUDA test helpers (src/cuda/memory_test.c; KK_ERR_CUDA_UNAVAILABLE without
 * CUDA): a non-blocking stream on device `index`, a kernel that keeps a
 * stream busy for `ms`, and a wait for a stream. */
kk_status kk__mem_test_stream_create(int index, kk_stream *out);
kk_status kk__mem_test_stream_destroy(kk_stream stream);
kk_status kk__mem_test_spin(kk_stream stream, double ms);
kk_status kk__mem_test_stream_sync(kk_stream stream);
/* The calling thread's current CUDA device, and whether device `index`'s
 * primary context exists (for the tests of "never change the caller's
 * current device"; src/cuda/memory.c). */
kk_status kk__mem_test_current_device(int *out);
int kk__mem_test_context_exists(int index);

#endif
