/* labels: unit cpu */
/* The caching allocator on the CPU device: alignment, reuse, splitting and
 * coalescing, pools, exact statistics, out-of-memory protection under a byte
 * limit (safety margin, release-and-retry), configuration, bad arguments,
 * copies, pinned memory without CUDA, logging. The randomized shadow-model
 * runs, the fault-injection sweeps and the threads are in
 * test_memory_stress.c. Every test leaves the allocator empty and checked. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/memory_internal.h"
#include "kernelkit/memory.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static kk_mem_stats stats(int pool) {
    kk_mem_stats s;
    kk_assert_ok(kk_mem_stats_get("cpu", pool, &s));
    return s;
}

static void checked(void) { kk_assert_ok(kk__mem_check("cpu", NULL)); }

static void configure(double margin, bool caching, uint64_t limit) {
    kk_memory_config cfg = {
        .safety_margin = margin, .caching_enabled = caching, .pool_limit_bytes = limit};
    kk_assert_ok(kk__mem_configure("cpu", &cfg));
}

static int setup(void **state) {
    (void)state;
    configure(1.2, true, 0);
    kk_assert_ok(kk__mem_fail_system_allocs("cpu", 0, 0));
    kk_assert_ok(kk__mem_fail_meta_allocs("cpu", 0, 0));
    kk_assert_ok(kk_mem_empty_cache("cpu"));
    kk_assert_ok(kk_mem_stats_reset("cpu"));
    return 0;
}

/* Every test frees what it took: nothing is left allocated or reserved. */
static int teardown(void **state) {
    (void)state;
    checked();
    assert_int_equal(stats(-1).allocated_bytes, 0);
    kk_assert_ok(kk_mem_empty_cache("cpu"));
    assert_int_equal(stats(-1).reserved_bytes, 0);
    checked();
    return 0;
}

static void *alloc_in(size_t bytes, int pool) {
    kk_mem_options o = {.pool_id = pool};
    void *p = NULL;
    kk_assert_ok(kk_mem_alloc_ex("cpu", bytes, &o, &p));
    assert_non_null(p);
    return p;
}

/* Runs first, before any setup(): the allocator reads the configuration
 * (here KK_MEMORY_SAFETY_MARGIN=1.7, set in main) once, at creation. */
static void config_comes_from_the_environment(void **state) {
    (void)state;
    kk_assert_ok(kk_mem_set_limit("cpu", 10 * MiB));
    void *p = (void *)1;
    kk_assert_status(kk_mem_alloc("cpu", 6 * MiB, &p), KK_ERR_OUT_OF_MEMORY); /* 10.2 > 10 */
    assert_null(p);
    kk_assert_contains(kk_last_error_message(), "1.70 safety margin");
    kk_assert_ok(kk_mem_alloc("cpu", 5 * MiB, &p)); /* 8.5 fits */
    kk_assert_ok(kk_mem_free(p));
    kk_assert_ok(kk_mem_set_limit("cpu", 0));
}

static void pointers_are_aligned_and_blocks_are_usable(void **state) {
    (void)state;
    static const size_t sizes[] = {1,    255,    256,     257, 511,     512,     513,
                                   4097, 100000, MiB - 1, MiB, MiB + 1, 3 * MiB, 17 * MiB + 3};
    enum { N = sizeof sizes / sizeof sizes[0] };
    void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = alloc_in(sizes[i], i % 3);
        assert_int_equal((uintptr_t)p[i] % KK_MEM_ALIGNMENT, 0);
        memset(p[i], i + 1, sizes[i]); /* the whole block is writable */
    }
    for (int i = 0; i < N; i++) { /* and no two blocks overlap */
        const unsigned char *c = p[i];
        assert_int_equal(c[0], i + 1);
        assert_int_equal(c[sizes[i] - 1], i + 1);
    }
    /* allocated_bytes counts sizes rounded up to 512 */
    uint64_t want = 0;
    for (int i = 0; i < N; i++) want += (sizes[i] + 511) / 512 * 512;
    assert_int_equal(stats(-1).allocated_bytes, want);
    checked();
    for (int i = 0; i < N; i++) kk_assert_ok(kk_mem_free(p[i]));
}

static void a_freed_block_is_reused(void **state) {
    (void)state;
    void *a = alloc_in(1000, 0);
    kk_assert_ok(kk_mem_free(a));
    void *b = alloc_in(1000, 0);
    assert_ptr_equal(a, b);
    kk_mem_stats s = stats(-1);
    assert_int_equal(s.alloc_count, 2);
    assert_int_equal(s.cache_hits, 1);
    assert_int_equal(s.cache_misses, 1);
    assert_int_equal(s.system_alloc_count, 1);
    assert_int_equal(s.reserved_bytes, KK__MEM_SMALL_SEGMENT);
    assert_int_equal(s.allocated_bytes, 1024);
    assert_int_equal(s.cached_bytes, KK__MEM_SMALL_SEGMENT - 1024);
    kk_assert_ok(kk_mem_free(b));
}

/* Three neighbours, freed middle first: only their coalesced space can hold
 * the next requests, and no new segment is taken. */
static void freed_neighbours_coalesce(void **state) {
    (void)state;
    size_t s = 600 * KiB;
    char *a = alloc_in(s, 5), *b = alloc_in(s, 5), *c = alloc_in(s, 5);
    assert_ptr_equal(b, a + s);
    assert_ptr_equal(c, b + s);
    kk_assert_ok(kk_mem_free(b));
    kk_assert_ok(kk_mem_free(a));
    kk_assert_ok(kk_mem_free(c));
    kk__mem_census census;
    kk_assert_ok(kk__mem_check("cpu", &census));
    assert_int_equal(census.free_blocks, 1); /* one block spans the segment */
    char *big = alloc_in(MiB, 5), *next = alloc_in(900 * KiB, 5);
    assert_ptr_equal(big, a);
    assert_ptr_equal(next, a + MiB);
    assert_int_equal(stats(5).system_alloc_count, 1);
    kk_assert_ok(kk_mem_free(next));
    kk_assert_ok(kk_mem_free(big));

    /* the same among large blocks of a 20 MiB segment */
    char *x = alloc_in(4 * MiB, 6), *y = alloc_in(4 * MiB, 6), *z = alloc_in(4 * MiB, 6);
    assert_ptr_equal(y, x + 4 * MiB);
    kk_assert_ok(kk_mem_free(y));
    kk_assert_ok(kk_mem_free(x));
    kk_assert_ok(kk_mem_free(z));
    char *w = alloc_in(16 * MiB, 6);
    assert_ptr_equal(w, x);
    assert_int_equal(stats(6).system_alloc_count, 1);
    assert_int_equal(stats(6).reserved_bytes, KK__MEM_MID_SEGMENT);
    kk_assert_ok(kk_mem_free(w));
}

static void best_fit_takes_the_smallest_block_that_fits(void **state) {
    (void)state;
    /* holes of 64 KiB and 8 KiB separated by live blocks */
    char *h1 = alloc_in(64 * KiB, 0), *k1 = alloc_in(512, 0);
    char *h2 = alloc_in(8 * KiB, 0), *k2 = alloc_in(512, 0);
    kk_assert_ok(kk_mem_free(h1));
    kk_assert_ok(kk_mem_free(h2));
    char *p = alloc_in(6 * KiB, 0);
    assert_ptr_equal(p, h2); /* not the 64 KiB hole, not the segment's tail */
    kk_assert_ok(kk_mem_free(p));
    kk_assert_ok(kk_mem_free(k1));
    kk_assert_ok(kk_mem_free(k2));
}

static void pools_keep_their_blocks_and_clear_alone(void **state) {
    (void)state;
    void *a = alloc_in(4096, 1);
    kk_assert_ok(kk_mem_free(a));
    void *b = alloc_in(4096, 2); /* pool 1's cached block is not pool 2's */
    assert_ptr_not_equal(a, b);
    assert_int_equal(stats(1).reserved_bytes, KK__MEM_SMALL_SEGMENT);
    assert_int_equal(stats(2).reserved_bytes, KK__MEM_SMALL_SEGMENT);
    assert_int_equal(stats(2).cache_misses, 1);
    kk_assert_ok(kk_mem_pool_clear("cpu", 1));
    assert_int_equal(stats(1).reserved_bytes, 0);
    assert_int_equal(stats(1).system_free_count, 1);
    assert_int_equal(stats(2).reserved_bytes, KK__MEM_SMALL_SEGMENT); /* in use: stays */
    kk_assert_ok(kk_mem_pool_clear("cpu", 2));
    assert_int_equal(stats(2).reserved_bytes, KK__MEM_SMALL_SEGMENT);
    kk_assert_ok(kk_mem_free(b));
    kk_assert_ok(kk_mem_pool_clear("cpu", 2));
    assert_int_equal(stats(-1).reserved_bytes, 0);
    assert_int_equal(stats(63).alloc_count, 0);
    kk_assert_status(kk_mem_pool_clear("cpu", 64), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_pool_clear("cpu", -1), KK_ERR_INVALID_ARGUMENT);
}

static void stats_follow_every_step_exactly(void **state) {
    (void)state;
    void *a = alloc_in(100, 3);     /* miss: a 2 MiB segment */
    void *b = alloc_in(3 * MiB, 3); /* miss: a 20 MiB segment */
    kk_assert_ok(kk_mem_free(a));
    void *c = alloc_in(700, 3); /* hit */
    kk_mem_stats s = stats(3);
    assert_int_equal(s.allocated_bytes, 1024 + 3 * MiB);
    assert_int_equal(s.reserved_bytes, 22 * MiB);
    assert_int_equal(s.cached_bytes, 22 * MiB - 1024 - 3 * MiB);
    assert_int_equal(s.peak_allocated_bytes, 3 * MiB + 1024); /* b and c */
    assert_int_equal(s.peak_reserved_bytes, 22 * MiB);
    assert_int_equal(s.alloc_count, 3);
    assert_int_equal(s.free_count, 1);
    assert_int_equal(s.cache_hits, 1);
    assert_int_equal(s.cache_misses, 2);
    assert_int_equal(s.system_alloc_count, 2);
    assert_int_equal(s.system_free_count, 0);
    assert_int_equal(s.oom_count, 0);
    kk_mem_stats d = stats(-1);
    assert_int_equal(d.allocated_bytes, s.allocated_bytes);
    assert_int_equal(d.alloc_count, 3);
    kk_assert_ok(kk_mem_stats_reset("cpu"));
    d = stats(-1);
    assert_int_equal(d.alloc_count, 0);
    assert_int_equal(d.cache_hits, 0);
    assert_int_equal(d.peak_allocated_bytes, d.allocated_bytes); /* peaks restart at now */
    assert_int_equal(d.reserved_bytes, 22 * MiB);
    kk_assert_ok(kk_mem_free(b));
    kk_assert_ok(kk_mem_free(c));
    assert_int_equal(stats(3).free_count, 2);
    kk_assert_ok(kk_mem_empty_cache("cpu"));
    assert_int_equal(stats(3).system_free_count, 2);
}

static void out_of_memory_under_a_limit_says_how_much(void **state) {
    (void)state;
    kk_assert_ok(kk_mem_set_limit("cpu", 8 * MiB));
    void *a = alloc_in(6 * MiB, 0); /* 20 MiB × 1.2 does not fit, an exact 6 MiB × 1.2 does */
    assert_int_equal(stats(-1).reserved_bytes, 6 * MiB);
    void *b = (void *)1;
    kk_assert_status(kk_mem_alloc("cpu", 6 * MiB, &b), KK_ERR_OUT_OF_MEMORY);
    assert_null(b);
    const kk_error_info *e = kk_last_error();
    assert_int_equal(e->status, KK_ERR_OUT_OF_MEMORY);
    assert_string_equal(e->function, "kk_mem_alloc");
    assert_string_equal(e->value, "6291456");
    kk_assert_contains(e->message, "out of memory on cpu: requested 6.00 MiB");
    kk_assert_contains(e->message, "\u00d7 1.20 safety margin = 7.20 MiB");
    kk_assert_contains(e->message, "free 2.00 MiB of 8.00 MiB total");
    assert_true(kk_status_is(KK_ERR_OUT_OF_MEMORY, KK_ERR_MEMORY));
    kk_mem_stats s = stats(-1);
    assert_int_equal(s.oom_count, 1);
    assert_int_equal(s.alloc_count, 1);
    assert_int_equal(s.allocated_bytes, 6 * MiB);
    checked();
    /* far too much, anywhere */
    kk_assert_status(kk_mem_alloc("cpu", SIZE_MAX, &b), KK_ERR_OUT_OF_MEMORY);
    kk_assert_contains(kk_last_error_message(), "more than any device holds");
    assert_int_equal(stats(-1).oom_count, 2);
    kk_assert_ok(kk_mem_free(a));
    kk_assert_ok(kk_mem_set_limit("cpu", 0));
}

static void the_safety_margin_decides_at_the_edge(void **state) {
    (void)state;
    kk_assert_ok(kk_mem_set_limit("cpu", 10 * MiB));
    void *p = NULL;
    kk_assert_status(kk_mem_alloc("cpu", 9 * MiB, &p), KK_ERR_OUT_OF_MEMORY); /* 10.8 > 10 */
    kk_mem_options o = {.safety_margin = 1.0};
    kk_assert_ok(kk_mem_alloc_ex("cpu", 9 * MiB, &o, &p)); /* 9 <= 10 */
    kk_assert_ok(kk_mem_free(p));
    kk_assert_ok(kk_mem_empty_cache("cpu"));
    configure(1.0, true, 10 * MiB); /* the configured margin works the same */
    kk_assert_ok(kk_mem_alloc("cpu", 9 * MiB, &p));
    kk_assert_ok(kk_mem_free(p));
    o.safety_margin = 0.5;
    kk_assert_status(kk_mem_alloc_ex("cpu", 1, &o, &p), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error()->argument, "safety_margin");
    o.safety_margin = 11;
    kk_assert_status(kk_mem_alloc_ex("cpu", 1, &o, &p), KK_ERR_INVALID_ARGUMENT);
    kk_assert_ok(kk_mem_set_limit("cpu", 0));
}

/* Pool 1 caches 6 MiB; pool 2's 6 MiB fits under the limit only once that
 * cache is given back, which the allocator does by itself. */
static void cached_memory_is_released_and_the_request_retried(void **state) {
    (void)state;
    kk_assert_ok(kk_mem_set_limit("cpu", 10 * MiB));
    kk_assert_ok(kk_mem_free(alloc_in(6 * MiB, 1)));
    assert_int_equal(stats(1).cached_bytes, 6 * MiB);
    void *p = alloc_in(6 * MiB, 2);
    assert_int_equal(stats(1).reserved_bytes, 0);
    assert_int_equal(stats(1).system_free_count, 1);
    assert_int_equal(stats(2).reserved_bytes, 6 * MiB);
    assert_int_equal(stats(-1).oom_count, 0);
    /* when the retry cannot help, the message says what was released */
    kk_assert_ok(kk_mem_free(alloc_in(2 * MiB, 3)));
    void *q = NULL;
    kk_assert_status(kk_mem_alloc("cpu", 6 * MiB, &q), KK_ERR_OUT_OF_MEMORY);
    kk_assert_contains(kk_last_error_message(), "released 2.00 MiB of cached memory");
    assert_int_equal(stats(3).reserved_bytes, 0);
    kk_assert_ok(kk_mem_free(p));
    kk_assert_ok(kk_mem_set_limit("cpu", 0));
}

static void a_failing_system_allocation_is_retried_after_releasing(void **state) {
    (void)state;
    kk_assert_ok(kk_mem_free(alloc_in(1000, 1))); /* something cached to release */
    /* a failure on the 2 MiB segment alone is absorbed by trying an exact one */
    kk_assert_ok(kk__mem_fail_nth_system_alloc("cpu", 1));
    void *p = alloc_in(1000, 2);
    assert_int_equal(stats(2).reserved_bytes, 1024);
    assert_int_equal(stats(1).reserved_bytes, KK__MEM_SMALL_SEGMENT);
    kk_assert_ok(kk_mem_free(p));
    /* both failing: pool 1's and 2's cache is released, and the retry works */
    kk_assert_ok(kk__mem_fail_system_allocs("cpu", 1, 2));
    p = alloc_in(1000, 3);
    assert_int_equal(stats(1).reserved_bytes, 0);
    assert_int_equal(stats(2).reserved_bytes, 0);
    assert_int_equal(stats(3).reserved_bytes, KK__MEM_SMALL_SEGMENT);
    uint64_t injected = 0;
    kk_assert_ok(kk__mem_injected("cpu", &injected, NULL));
    assert_int_equal(injected, 3);
    kk_assert_ok(kk__mem_fail_system_allocs("cpu", 1, 2)); /* nothing cached this time */
    void *q = NULL;
    kk_assert_status(kk_mem_alloc("cpu", 5 * MiB, &q), KK_ERR_OUT_OF_MEMORY);
    kk_assert_contains(kk_last_error_message(), "the system refused a new 5.00 MiB segment");
    kk_assert_contains(kk_last_error_message(), "no cached memory to release");
    assert_int_equal(stats(-1).oom_count, 1);
    kk_assert_ok(kk_mem_free(p));
    checked();
    /* the allocator's own bookkeeping failing */
    kk_assert_ok(kk__mem_fail_meta_allocs("cpu", 1, 1000));
    kk_assert_status(kk_mem_alloc("cpu", 10 * MiB, &q), KK_ERR_ALLOCATION);
    kk_assert_ok(kk__mem_fail_meta_allocs("cpu", 0, 0));
    checked();
}

static void bad_arguments_change_nothing(void **state) {
    (void)state;
    void *p = alloc_in(4096, 0), *q = NULL;
    kk_mem_stats before = stats(-1);
    kk_assert_status(kk_mem_alloc("cpu", 0, &q), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error()->argument, "bytes");
    kk_assert_status(kk_mem_alloc("cpu", 16, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_alloc("gpu", 16, &q), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_alloc(NULL, 16, &q), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_alloc("cpu:1", 16, &q), KK_ERR_INVALID_ARGUMENT);
    if (!kk_backend_available(KK_BACKEND_CUDA))
        kk_assert_status(kk_mem_alloc("cuda:0", 16, &q), KK_ERR_CUDA_UNAVAILABLE);
    kk_mem_options o = {.pool_id = 64};
    kk_assert_status(kk_mem_alloc_ex("cpu", 16, &o, &q), KK_ERR_INVALID_ARGUMENT);
    o.pool_id = -1;
    kk_assert_status(kk_mem_alloc_ex("cpu", 16, &o, &q), KK_ERR_INVALID_ARGUMENT);
    char local[64];
    kk_assert_status(kk_mem_free(local), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "not freed since");
    kk_assert_status(kk_mem_free((char *)p + 256), KK_ERR_INVALID_ARGUMENT); /* inside a block */
    kk_assert_ok(kk_mem_free(NULL));
    kk_mem_stats s;
    kk_assert_status(kk_mem_stats_get("cpu", 64, &s), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_stats_get("cpu", -2, &s), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_stats_get("cpu", 0, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_empty_cache("nope"), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_set_limit("", 1), KK_ERR_INVALID_ARGUMENT);
    kk_mem_stats after = stats(-1);
    assert_memory_equal(&before, &after, sizeof before);
    kk_assert_ok(kk_mem_free(p));
    kk_assert_status(kk_mem_free(p), KK_ERR_INVALID_ARGUMENT); /* double free */
    kk_assert_status(kk_mem_free_on_stream(p, NULL), KK_ERR_INVALID_ARGUMENT);
    assert_int_equal(stats(-1).free_count, before.free_count + 1);
    checked();
}

static void streams_are_ignored_on_the_cpu(void **state) {
    (void)state;
    kk_mem_options o = {.stream = (kk_stream)0x1234};
    void *p = NULL;
    kk_assert_ok(kk_mem_alloc_ex("cpu", 512, &o, &p));
    kk_assert_ok(kk_mem_free_on_stream(p, (kk_stream)0x5678));
    void *q = alloc_in(512, 0); /* another "stream": reused at once */
    assert_ptr_equal(p, q);
    kk_assert_ok(kk_mem_free(q));
}

static void without_caching_memory_goes_back_at_free(void **state) {
    (void)state;
    configure(1.2, false, 0);
    void *a = alloc_in(1000, 0), *b = alloc_in(3 * MiB, 0);
    kk_mem_stats s = stats(-1);
    assert_int_equal(s.reserved_bytes, 1024 + 3 * MiB); /* exact segments */
    assert_int_equal(s.cached_bytes, 0);
    kk_assert_ok(kk_mem_free(a));
    kk_assert_ok(kk_mem_free(b));
    s = stats(-1);
    assert_int_equal(s.reserved_bytes, 0);
    assert_int_equal(s.system_alloc_count, 2);
    assert_int_equal(s.system_free_count, 2);
    assert_int_equal(s.cache_hits, 0);
}

static void the_pool_cap_is_kept(void **state) {
    (void)state;
    kk_memory_config cfg = {
        .safety_margin = 1.2, .caching_enabled = true, .max_pool_bytes = 4 * MiB};
    kk_assert_ok(kk__mem_configure("cpu", &cfg));
    /* 20 MiB segments would pass the cap: exact 1.5 MiB ones are taken */
    void *a = alloc_in(3 * MiB / 2, 7), *b = alloc_in(3 * MiB / 2, 7), *c = NULL;
    assert_int_equal(stats(7).reserved_bytes, 3 * MiB);
    kk_mem_options o = {.pool_id = 7};
    kk_assert_status(kk_mem_alloc_ex("cpu", 3 * MiB / 2, &o, &c), KK_ERR_OUT_OF_MEMORY);
    kk_assert_contains(kk_last_error_message(), "memory.max_pool_bytes = 4.00 MiB");
    kk_assert_contains(kk_last_error_message(), "requested 1.50 MiB in pool 7");
    assert_int_equal(stats(7).oom_count, 1);
    void *d = alloc_in(3 * MiB / 2, 8); /* another pool has its own cap */
    kk_assert_ok(kk_mem_free(a));
    kk_assert_ok(kk_mem_free(b));
    kk_assert_ok(kk_mem_free(d));
}

static void copies_between_host_buffers(void **state) {
    (void)state;
    char *a = alloc_in(4096, 0), *b = alloc_in(4096, 0);
    for (int i = 0; i < 4096; i++) a[i] = (char)(i * 7);
    kk_assert_ok(kk_mem_copy(b, "cpu", a, "cpu", 4096));
    assert_memory_equal(a, b, 4096);
    kk_assert_ok(kk_mem_copy(a + 1, "cpu", a, "cpu", 100)); /* overlap is fine */
    assert_int_equal(a[1], b[0]);
    char local[16] = "host memory";
    kk_assert_ok(kk_mem_copy(b, "cpu", local, "cpu", sizeof local));
    assert_string_equal(b, "host memory");
    kk_assert_ok(kk_mem_copy(b, "cpu", a, "cpu", 0));
    kk_assert_status(kk_mem_copy(NULL, "cpu", a, "cpu", 1), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_copy(b, "cpu", NULL, "cpu", 1), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_copy(b, "cpu", a, "cpux", 1), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_copy(b, "cpu", a, "cpu", 4097), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "bytes = 4097 (the dst block");
    if (!kk_backend_available(KK_BACKEND_CUDA))
        kk_assert_status(kk_mem_copy(b, "cuda:0", a, "cpu", 1), KK_ERR_CUDA_UNAVAILABLE);
    kk_assert_ok(kk_mem_free(a));
    kk_assert_ok(kk_mem_free(b));
}

static void pinned_memory_falls_back_to_plain_host_memory(void **state) {
    (void)state;
    void *p = NULL, *q = NULL;
    kk_assert_ok(kk_mem_alloc_pinned(1000, &p));
    kk_assert_ok(kk_mem_alloc_pinned(3 * MiB, &q));
    assert_int_equal((uintptr_t)p % KK_MEM_ALIGNMENT, 0);
    memset(p, 1, 1000);
    memset(q, 2, 3 * MiB);
    kk_assert_ok(kk_mem_copy(q, "cpu", p, "cpu", 1000));
    kk_assert_ok(kk_mem_free_pinned(p));
    kk_assert_status(kk_mem_free_pinned(p), KK_ERR_INVALID_ARGUMENT);
    char local;
    kk_assert_status(kk_mem_free_pinned(&local), KK_ERR_INVALID_ARGUMENT);
    kk_assert_ok(kk_mem_free_pinned(q));
    kk_assert_ok(kk_mem_free_pinned(NULL));
    kk_assert_status(kk_mem_alloc_pinned(0, &p), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_alloc_pinned(16, NULL), KK_ERR_INVALID_ARGUMENT);
}

static char g_log[4096];

static void capture(const kk_log_record *rec, void *user) {
    (void)user;
    size_t used = strlen(g_log);
    snprintf(g_log + used, sizeof g_log - used, "%s\n", rec->line);
}

static void misses_releases_and_oom_are_logged_at_debug(void **state) {
    (void)state;
    g_log[0] = 0;
    kk_log_set_sink(capture, NULL);
    kk_assert_ok(kk_log_set_level("kernelkit.cpu.memory", KK_LOG_DEBUG));
    void *p = alloc_in(100, 0);
    kk_assert_ok(kk_mem_free(p));
    kk_assert_ok(kk_mem_set_limit("cpu", MiB));
    kk_mem_options o = {.pool_id = 1}; /* pool 0's cached segment is released first */
    kk_assert_status(kk_mem_alloc_ex("cpu", 3 * MiB, &o, &p), KK_ERR_OUT_OF_MEMORY);
    kk_assert_ok(kk_mem_set_limit("cpu", 0));
    kk_log_reset();
    kk_assert_contains(g_log, "kernelkit.cpu.memory: cache miss: new segment");
    kk_assert_contains(g_log, "segment=2097152");
    kk_assert_contains(g_log, "cached segments released");
    kk_assert_contains(g_log, "out of memory");
    /* cache hits write nothing */
    kk_assert_ok(kk_mem_free(alloc_in(100, 0))); /* the miss */
    g_log[0] = 0;
    kk_log_set_sink(capture, NULL);
    kk_assert_ok(kk_log_set_level("kernelkit.cpu.memory", KK_LOG_DEBUG));
    kk_assert_ok(kk_mem_free(alloc_in(100, 0)));
    kk_assert_ok(kk_mem_free(alloc_in(100, 0)));
    kk_log_reset();
    assert_null(strstr(g_log, "cache miss"));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    setenv("KK_MEMORY_SAFETY_MARGIN", "1.7", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(config_comes_from_the_environment, teardown),
        T(pointers_are_aligned_and_blocks_are_usable),
        T(a_freed_block_is_reused),
        T(freed_neighbours_coalesce),
        T(best_fit_takes_the_smallest_block_that_fits),
        T(pools_keep_their_blocks_and_clear_alone),
        T(stats_follow_every_step_exactly),
        T(out_of_memory_under_a_limit_says_how_much),
        T(the_safety_margin_decides_at_the_edge),
        T(cached_memory_is_released_and_the_request_retried),
        T(a_failing_system_allocation_is_retried_after_releasing),
        T(bad_arguments_change_nothing),
        T(streams_are_ignored_on_the_cpu),
        T(without_caching_memory_goes_back_at_free),
        T(the_pool_cap_is_kept),
        T(copies_between_host_buffers),
        T(pinned_memory_falls_back_to_plain_host_memory),
        T(misses_releases_and_oom_are_logged_at_debug),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
