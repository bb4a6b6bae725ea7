/* labels: unit cpu */
/* The CPU allocator under a randomized workload (mixed sizes across pools,
 * frees in random order, pool clears, empty_cache), checked after every step
 * against a shadow model of what the test allocated; the same workload with
 * every underlying allocation failing in turn (fault-injection sweeps), with
 * its own bookkeeping failing in turn, and under a tight limit; and from many
 * threads at once. After each run everything frees and reserved returns to 0. */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/memory_internal.h"
#include "kernelkit/memory.h"

#define MiB ((size_t)1 << 20)
enum { MAX_LIVE = 256, POOLS = 5 };
static const int k_pools[POOLS] = {0, 1, 2, 3, 63};

typedef struct live {
    unsigned char *p;
    size_t bytes;
    int pool;
    unsigned char tag;
} live;

/* What the test knows it did, per pool. */
typedef struct model {
    live item[MAX_LIVE];
    int n;
    uint64_t allocated[KK_MEM_MAX_POOLS], allocs[KK_MEM_MAX_POOLS], frees[KK_MEM_MAX_POOLS],
        ooms[KK_MEM_MAX_POOLS];
    uint64_t rng;
    unsigned large; /* percent of requests above 1 MiB */
    unsigned char next_tag;
} model;

static uint64_t next(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* `large` percent of the requests are above 1 MiB (a fifth of those above
 * 10 MiB, with segments of their own). */
static size_t pick_size(uint64_t *rng, unsigned large) {
    uint64_t r = next(rng) % 100, v = next(rng);
    if (r < 100 - large - 25) return 1 + v % (64 << 10);                 /* small */
    if (r < 100 - large) return (64 << 10) + v % (MiB - (64 << 10) + 1); /* up to 1 MiB */
    if (r < 100 - large / 5) return MiB + 1 + v % (11 * MiB); /* large, shared segments */
    return 12 * MiB + v % (28 * MiB);                         /* large, own segments */
}

/* Tag the first, middle and last byte (every byte of small blocks): a block
 * handed out twice, or overlapping another, shows up at its free. */
static void stamp(const live *l) {
    if (l->bytes <= 4096) {
        memset(l->p, l->tag, l->bytes);
        return;
    }
    l->p[0] = l->p[l->bytes / 2] = l->p[l->bytes - 1] = l->tag;
}

static void verify_stamp(const live *l) {
    size_t step = l->bytes <= 4096 ? 1 : l->bytes / 2;
    for (size_t i = 0; i < l->bytes; i += step) assert_int_equal(l->p[i], l->tag);
    assert_int_equal(l->p[l->bytes - 1], l->tag);
}

static void compare(const model *m) {
    kk_mem_stats d;
    kk_assert_ok(kk_mem_stats_get("cpu", -1, &d));
    uint64_t alloc = 0, allocs = 0, frees = 0, ooms = 0;
    for (int i = 0; i < POOLS; i++) {
        int p = k_pools[i];
        kk_mem_stats s;
        kk_assert_ok(kk_mem_stats_get("cpu", p, &s));
        assert_int_equal(s.allocated_bytes, m->allocated[p]);
        assert_int_equal(s.alloc_count, m->allocs[p]);
        assert_int_equal(s.free_count, m->frees[p]);
        assert_int_equal(s.oom_count, m->ooms[p]);
        assert_int_equal(s.cached_bytes, s.reserved_bytes - s.allocated_bytes);
        alloc += m->allocated[p];
        allocs += m->allocs[p];
        frees += m->frees[p];
        ooms += m->ooms[p];
    }
    assert_int_equal(d.allocated_bytes, alloc);
    assert_int_equal(d.alloc_count, allocs);
    assert_int_equal(d.free_count, frees);
    assert_int_equal(d.oom_count, ooms);
    assert_int_equal(d.cache_hits + d.cache_misses, allocs);
    assert_int_equal(d.cache_misses, d.system_alloc_count); /* one segment per miss */
    kk__mem_census c;
    kk_assert_ok(kk__mem_check("cpu", &c));
    assert_int_equal(c.segment_bytes, d.reserved_bytes);
    assert_int_equal(c.segments, d.system_alloc_count - d.system_free_count);
    assert_int_equal(c.allocated_blocks, (uint64_t)m->n);
    assert_true(d.peak_reserved_bytes >= d.reserved_bytes);
}

static void do_alloc(model *m) {
    if (m->n == MAX_LIVE) return;
    int pool = k_pools[next(&m->rng) % POOLS];
    size_t bytes = pick_size(&m->rng, m->large);
    kk_mem_options o = {.pool_id = pool};
    void *p = NULL;
    kk_status st = kk_mem_alloc_ex("cpu", bytes, &o, &p);
    if (st == KK_ERR_OUT_OF_MEMORY) {
        m->ooms[pool]++;
        assert_null(p);
        kk_assert_contains(kk_last_error_message(), "requested");
        return;
    }
    if (st == KK_ERR_ALLOCATION) return; /* bookkeeping failed: nothing happened */
    kk_assert_ok(st);
    assert_int_equal((uintptr_t)p % KK_MEM_ALIGNMENT, 0);
    live *l = &m->item[m->n++];
    *l = (live){p, bytes, pool, ++m->next_tag};
    stamp(l);
    m->allocated[pool] += (bytes + 511) / 512 * 512;
    m->allocs[pool]++;
}

static void do_free(model *m, int on_stream) {
    if (m->n == 0) return;
    int i = (int)(next(&m->rng) % (uint64_t)m->n);
    live l = m->item[i];
    verify_stamp(&l);
    m->item[i] = m->item[--m->n];
    kk_assert_ok(on_stream ? kk_mem_free_on_stream(l.p, (kk_stream)0x10) : kk_mem_free(l.p));
    m->allocated[l.pool] -= (l.bytes + 511) / 512 * 512;
    m->frees[l.pool]++;
}

/* One randomized run of `ops` steps, compared with the model after each. */
static void workload(model *m, uint64_t seed, int ops) {
    m->rng = seed;
    for (int k = 0; k < ops; k++) {
        uint64_t r = next(&m->rng) % 100;
        if (r < 55)
            do_alloc(m);
        else if (r < 87)
            do_free(m, 0);
        else if (r < 92)
            do_free(m, 1);
        else if (r < 96)
            kk_assert_ok(kk_mem_pool_clear("cpu", k_pools[next(&m->rng) % POOLS]));
        else
            kk_assert_ok(kk_mem_empty_cache("cpu"));
        compare(m);
    }
}

static void free_everything(model *m) {
    while (m->n) do_free(m, 0);
    compare(m);
    kk_assert_ok(kk_mem_empty_cache("cpu"));
    kk_mem_stats d;
    kk_assert_ok(kk_mem_stats_get("cpu", -1, &d));
    assert_int_equal(d.reserved_bytes, 0);
    assert_int_equal(d.allocated_bytes, 0);
    assert_int_equal(d.system_alloc_count, d.system_free_count);
    compare(m);
}

static void fresh(model *m, uint64_t limit) {
    memset(m, 0, sizeof *m);
    m->large = 10; /* big segments are what makes sanitizer builds slow */
    kk_memory_config cfg = {
        .safety_margin = 1.2, .caching_enabled = true, .pool_limit_bytes = limit};
    kk_assert_ok(kk__mem_configure("cpu", &cfg));
    kk_assert_ok(kk__mem_fail_system_allocs("cpu", 0, 0));
    kk_assert_ok(kk__mem_fail_meta_allocs("cpu", 0, 0));
    kk_assert_ok(kk_mem_empty_cache("cpu"));
    kk_assert_ok(kk_mem_stats_reset("cpu"));
}

static void randomized_runs_match_the_shadow_model(void **state) {
    (void)state;
    static model m;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        fresh(&m, seed % 2 ? 0 : 96 * MiB); /* half of them under a limit */
        m.large = 20;
        workload(&m, seed * 0x9e3779b97f4a7c15ull, 600);
        free_everything(&m);
    }
}

/* Fail the n-th underlying allocation (and `count - 1` after it) for
 * n = 1, 2, ... until the workload no longer reaches the n-th. */
static int sweep(uint64_t limit, uint64_t count, int meta, uint64_t seed) {
    static model m;
    int runs = 0;
    for (uint64_t n = 1;; n++) {
        fresh(&m, limit);
        if (meta)
            kk_assert_ok(kk__mem_fail_meta_allocs("cpu", n, count));
        else
            kk_assert_ok(kk__mem_fail_system_allocs("cpu", n, count));
        uint64_t before[2], after[2];
        kk_assert_ok(kk__mem_injected("cpu", &before[0], &before[1]));
        workload(&m, seed, 200); /* the same run for every n */
        kk_assert_ok(kk__mem_injected("cpu", &after[0], &after[1]));
        kk_assert_ok(kk__mem_fail_system_allocs("cpu", 0, 0));
        kk_assert_ok(kk__mem_fail_meta_allocs("cpu", 0, 0));
        free_everything(&m);
        runs++;
        if (after[meta] == before[meta]) break; /* the n-th was never reached */
        assert_true(n < 5000);
    }
    return runs;
}

static void every_failing_system_allocation_is_survived(void **state) {
    (void)state;
    int a = sweep(0, 1, 0, 0x5eed);
    int b = sweep(0, UINT64_MAX, 0, 0x5eed); /* from the n-th on, the device is full */
    int c = sweep(64 * MiB, 1, 0, 0xfeed);   /* under a limit: OOMs, releases, retries */
    print_message("system-allocation sweeps: %d + %d + %d runs\n", a, b, c);
    assert_true(a > 10 && b > 10 && c > 10);
}

static void every_failing_bookkeeping_allocation_is_survived(void **state) {
    (void)state;
    int a = sweep(0, 1, 1, 0x5eed), b = sweep(0, UINT64_MAX, 1, 0xfeed);
    print_message("bookkeeping sweeps: %d + %d runs\n", a, b);
    assert_true(a > 5 && b > 5);
}

/* ---- threads ---- */

enum { THREADS = 8, THREAD_OPS = 3000 };

typedef struct worker {
    int id;
    uint64_t allocs[KK_MEM_MAX_POOLS], frees[KK_MEM_MAX_POOLS];
    int failed;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    live mine[64];
    int n = 0;
    uint64_t rng = 0x1234567ull * (uint64_t)(w->id + 1);
    for (int k = 0; k < THREAD_OPS && !w->failed; k++) {
        if (n < 64 && (n == 0 || next(&rng) % 100 < 55)) {
            int pool = k_pools[next(&rng) % POOLS];
            size_t bytes = pick_size(&rng, 10);
            kk_mem_options o = {.pool_id = pool};
            void *p = NULL;
            if (kk_mem_alloc_ex("cpu", bytes, &o, &p) != KK_OK) w->failed = 1;
            mine[n] = (live){p, bytes, pool, (unsigned char)(w->id * 31 + k)};
            if (p) stamp(&mine[n++]);
            w->allocs[pool] += p != NULL;
        } else {
            int i = (int)(next(&rng) % (uint64_t)n);
            live l = mine[i];
            size_t step = l.bytes <= 4096 ? 1 : l.bytes / 2;
            for (size_t j = 0; j < l.bytes; j += step) w->failed |= l.p[j] != l.tag;
            mine[i] = mine[--n];
            w->failed |= kk_mem_free(l.p) != KK_OK;
            w->frees[l.pool]++;
        }
        if (k % 500 == 0 && w->id == 0) w->failed |= kk_mem_empty_cache("cpu") != KK_OK;
        if (k % 700 == 0 && w->id == 1) w->failed |= kk__mem_check("cpu", NULL) != KK_OK;
    }
    while (n) {
        live l = mine[--n];
        w->failed |= kk_mem_free(l.p) != KK_OK;
        w->frees[l.pool]++;
    }
    return NULL;
}

static void threads_allocate_and_free_at_once(void **state) {
    (void)state;
    static model m;
    fresh(&m, 0);
    pthread_t t[THREADS];
    worker w[THREADS];
    memset(w, 0, sizeof w);
    for (int i = 0; i < THREADS; i++) {
        w[i].id = i;
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++) {
        assert_false(w[i].failed);
        for (int p = 0; p < KK_MEM_MAX_POOLS; p++) {
            m.allocs[p] += w[i].allocs[p];
            m.frees[p] += w[i].frees[p];
        }
    }
    compare(&m); /* counts add up exactly, nothing is left allocated */
    free_everything(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(randomized_runs_match_the_shadow_model),
        cmocka_unit_test(every_failing_system_allocation_is_survived),
        cmocka_unit_test(every_failing_bookkeeping_allocation_is_survived),
        cmocka_unit_test(threads_allocate_and_free_at_once),
    };
    if (getenv("KK_TEST_FILTER")) cmocka_set_test_filter(getenv("KK_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
