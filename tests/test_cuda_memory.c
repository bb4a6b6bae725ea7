/* labels: gpu */
/* The caching allocator on cuda:0: alignment, reuse, coalescing, exact
 * statistics, stream-ordered reuse (a block freed on a busy stream A is
 * reused at once on A but not on B until A's work is done), out-of-memory
 * with the numbers (more than the GPU has; a limit), copies in every
 * direction with pointer checks, pinned memory, caching off, threads, and a
 * fault-injection sweep after which the device's free memory is back where
 * it started. Skips (77) without a GPU. */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/memory_internal.h"
#include "kernelkit/memory.h"

#define MiB ((size_t)1 << 20)
#define DEV "cuda:0"

static kk_mem_stats stats(int pool) {
    kk_mem_stats s;
    kk_assert_ok(kk_mem_stats_get(DEV, pool, &s));
    return s;
}

static uint64_t device_free(void) {
    kk_device_info d;
    kk_assert_ok(kk_device_get_info(DEV, &d));
    return d.mem_free_bytes;
}

static int setup(void **state) {
    (void)state;
    kk_memory_config cfg = {.safety_margin = 1.2, .caching_enabled = true};
    kk_assert_ok(kk__mem_configure(DEV, &cfg));
    kk_assert_ok(kk__mem_fail_system_allocs(DEV, 0, 0));
    kk_assert_ok(kk_mem_empty_cache(DEV));
    kk_assert_ok(kk_mem_stats_reset(DEV));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kk_assert_ok(kk__mem_check(DEV, NULL));
    assert_int_equal(stats(-1).allocated_bytes, 0);
    kk_assert_ok(kk_mem_empty_cache(DEV));
    assert_int_equal(stats(-1).reserved_bytes, 0);
    return 0;
}

static void *alloc_on(size_t bytes, int pool, kk_stream stream) {
    kk_mem_options o = {.pool_id = pool, .stream = stream};
    void *p = NULL;
    kk_assert_ok(kk_mem_alloc_ex(DEV, bytes, &o, &p));
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % KK_MEM_ALIGNMENT, 0);
    return p;
}

static void blocks_are_aligned_reused_and_coalesced(void **state) {
    (void)state;
    static const size_t sizes[] = {1, 300, 4096, MiB, MiB + 1, 7 * MiB, 33 * MiB};
    void *p[7];
    for (int i = 0; i < 7; i++) p[i] = alloc_on(sizes[i], i % 2, NULL);
    for (int i = 0; i < 7; i++) kk_assert_ok(kk_mem_free(p[i]));
    void *again = alloc_on(300, 1, NULL); /* same stream: reused at once */
    assert_ptr_equal(again, p[1]);
    kk_assert_ok(kk_mem_free(again));
    char *a = alloc_on(600 << 10, 2, NULL), *b = alloc_on(600 << 10, 2, NULL);
    char *c = alloc_on(600 << 10, 2, NULL);
    kk_assert_ok(kk_mem_free(b));
    kk_assert_ok(kk_mem_free(a));
    kk_assert_ok(kk_mem_free(c));
    char *big = alloc_on(MiB, 2, NULL);
    assert_ptr_equal(big, a);
    assert_int_equal(stats(2).system_alloc_count, 1);
    kk_assert_ok(kk_mem_free(big));
    kk_mem_stats s = stats(-1);
    assert_int_equal(s.alloc_count, 12);
    assert_int_equal(s.free_count, 12);
    assert_int_equal(s.cache_hits + s.cache_misses, 12);
    assert_int_equal(s.cache_misses, s.system_alloc_count);
    print_message("cuda:0: %llu hits, %llu misses, %.1f MiB reserved\n",
                  (unsigned long long)s.cache_hits, (unsigned long long)s.cache_misses,
                  s.reserved_bytes / 1048576.0);
}

/* The heart of stream ordering: A is busy for 400 ms when its block is
 * freed; B must not get that block until A is done, A may at once. */
static void freed_blocks_wait_for_their_stream(void **state) {
    (void)state;
    kk_stream A, B;
    kk_assert_ok(kk__mem_test_stream_create(0, &A));
    kk_assert_ok(kk__mem_test_stream_create(0, &B));
    void *p = alloc_on(MiB, 4, A); /* the first half of a new 2 MiB segment */
    kk_assert_ok(kk__mem_test_spin(A, 400.0));
    kk_assert_ok(kk_mem_free_on_stream(p, A));
    kk__mem_census c;
    kk_assert_ok(kk__mem_check(DEV, &c));
    assert_true(c.pending_blocks >= 1);
    void *r = alloc_on(MiB, 4, A);
    assert_ptr_equal(r, p);       /* A: its own order protects it */
    kk_assert_ok(kk_mem_free(r)); /* kk_mem_free: on the allocation stream, A */
    void *q = alloc_on(MiB, 4, B);
    assert_ptr_not_equal(q, p);    /* B: not while A's work may still use it */
    void *f = alloc_on(MiB, 4, B); /* fills q's segment: p's is all that is left */
    assert_ptr_not_equal(f, p);
    kk_assert_ok(kk__mem_test_stream_sync(A));
    uint64_t misses = stats(4).cache_misses;
    void *s = alloc_on(MiB, 4, B); /* A is done: B may have it now */
    assert_ptr_equal(s, p);
    assert_int_equal(stats(4).cache_misses, misses);
    kk_assert_ok(kk_mem_free_on_stream(s, B));
    kk_assert_ok(kk_mem_free(q));
    kk_assert_ok(kk_mem_free(f));
    kk_assert_ok(kk__mem_test_stream_sync(B));
    kk_assert_ok(kk__mem_test_stream_destroy(A));
    kk_assert_ok(kk__mem_test_stream_destroy(B));
}

static void more_than_the_gpu_has_is_refused_with_the_numbers(void **state) {
    (void)state;
    kk_device_info d;
    kk_assert_ok(kk_device_get_info(DEV, &d));
    void *keep = alloc_on(MiB, 0, NULL), *p = (void *)1;
    kk_mem_stats before = stats(-1);
    kk_assert_status(kk_mem_alloc(DEV, d.mem_total_bytes + MiB, &p), KK_ERR_OUT_OF_MEMORY);
    assert_null(p);
    const char *msg = kk_last_error_message();
    print_message("%s\n", msg);
    kk_assert_contains(msg, "out of memory on cuda:0: requested");
    kk_assert_contains(msg, "safety margin");
    kk_assert_contains(msg, " total");
    kk_assert_contains(msg, "free ");
    kk_mem_stats after = stats(-1);
    assert_int_equal(after.oom_count, before.oom_count + 1);
    assert_int_equal(after.allocated_bytes, before.allocated_bytes);
    assert_int_equal(after.alloc_count, before.alloc_count);
    kk_assert_ok(kk__mem_check(DEV, NULL));
    /* a limit on the GPU works as on the CPU */
    kk_assert_ok(kk_mem_set_limit(DEV, 64 * MiB));
    kk_assert_status(kk_mem_alloc(DEV, 100 * MiB, &p), KK_ERR_OUT_OF_MEMORY);
    kk_assert_contains(kk_last_error_message(), "the allocator's limit on cuda:0 is 64.00 MiB");
    kk_assert_ok(kk_mem_set_limit(DEV, 0));
    /* the system itself refusing (injected): released, retried, refused */
    kk_assert_ok(kk__mem_fail_system_allocs(DEV, 1, 100));
    kk_assert_status(kk_mem_alloc(DEV, 3 * MiB, &p), KK_ERR_OUT_OF_MEMORY);
    kk_assert_contains(kk_last_error_message(), "the system refused");
    kk_assert_ok(kk__mem_fail_system_allocs(DEV, 0, 0));
    kk_assert_ok(kk_mem_free(keep));
}

static void copies_in_every_direction(void **state) {
    (void)state;
    const size_t n = 3 * MiB + 100;
    unsigned char *h = NULL, *back = malloc(n);
    assert_non_null(back);
    kk_assert_ok(kk_mem_alloc_pinned(n, (void **)&h));
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i * 13 + 7);
    void *d1 = alloc_on(n, 0, NULL), *d2 = alloc_on(n, 1, NULL);
    kk_assert_ok(kk_mem_copy(d1, DEV, h, "cpu", n));
    kk_assert_ok(kk_mem_copy(d2, DEV, d1, DEV, n));
    memset(back, 0, n);
    kk_assert_ok(kk_mem_copy(back, "cpu", d2, DEV, n));
    assert_memory_equal(back, h, n);
    /* pageable host memory, an offset into a block */
    kk_assert_ok(kk_mem_copy((char *)d1 + 512, DEV, back, "cpu", 1000));
    kk_assert_ok(kk_mem_copy(back + 5000, "cpu", (char *)d1 + 512, DEV, 1000));
    assert_memory_equal(back + 5000, h, 1000);
    /* pointers named for the wrong side */
    kk_assert_status(kk_mem_copy(d1, "cpu", h, "cpu", 16), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_copy((char *)d1 + 256, "cpu", h, "cpu", 16), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_mem_copy(d1, DEV, back, DEV, 16), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "host memory");
    kk_assert_status(kk_mem_copy(d1, DEV, h, "cpu", n + 512), KK_ERR_INVALID_ARGUMENT);
    kk_assert_ok(kk_mem_free(d1));
    kk_assert_ok(kk_mem_free(d2));
    kk_assert_ok(kk_mem_free_pinned(h));
    free(back);
}

static void without_caching_the_gpu_gets_its_memory_back(void **state) {
    (void)state;
    kk_memory_config cfg = {.safety_margin = 1.2, .caching_enabled = false};
    kk_assert_ok(kk__mem_configure(DEV, &cfg));
    void *p = alloc_on(5 * MiB, 0, NULL);
    assert_int_equal(stats(-1).reserved_bytes, 5 * MiB);
    kk_assert_ok(kk_mem_free(p));
    assert_int_equal(stats(-1).reserved_bytes, 0);
    assert_int_equal(stats(-1).system_free_count, 1);
}

/* A mixed workload over pools with frees in random order and empty_cache,
 * run once per underlying allocation with that allocation failing. */
static int workload(uint64_t seed, uint64_t *ooms) {
    void *live[48] = {0};
    int n = 0, allocs = 0;
    for (int k = 0; k < 120; k++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        unsigned r = (unsigned)(seed >> 33);
        if (r % 10 < 6 && n < 48) {
            size_t bytes = r % 7 == 0 ? (size_t)(r % 24 + 1) * MiB : 1 + r % 300000;
            kk_mem_options o = {.pool_id = (int)(r % 3)};
            void *p = NULL;
            kk_status st = kk_mem_alloc_ex(DEV, bytes, &o, &p);
            if (st == KK_ERR_OUT_OF_MEMORY) {
                (*ooms)++;
                continue;
            }
            kk_assert_ok(st);
            live[n++] = p;
            allocs++;
        } else if (r % 10 < 9 && n > 0) {
            int i = (int)(r % (unsigned)n);
            kk_assert_ok(kk_mem_free(live[i]));
            live[i] = live[--n];
        } else {
            kk_assert_ok(kk_mem_empty_cache(DEV));
        }
        kk_assert_ok(kk__mem_check(DEV, NULL));
    }
    while (n) kk_assert_ok(kk_mem_free(live[--n]));
    return allocs;
}

static void every_failing_cudamalloc_is_survived(void **state) {
    (void)state;
    uint64_t baseline = device_free();
    int runs = 0;
    for (uint64_t count = 1; count <= 2; count++) {
        for (uint64_t nth = 1;; nth++, runs++) {
            setup(NULL);
            uint64_t before = 0, after = 0, ooms = 0;
            kk_assert_ok(kk__mem_injected(DEV, &before, NULL));
            kk_assert_ok(kk__mem_fail_system_allocs(DEV, nth, count == 1 ? 1 : UINT64_MAX));
            int allocs = workload(0xc0ffee, &ooms);
            kk_assert_ok(kk__mem_injected(DEV, &after, NULL));
            kk_assert_ok(kk__mem_fail_system_allocs(DEV, 0, 0));
            kk_mem_stats s = stats(-1);
            assert_int_equal(s.alloc_count, (uint64_t)allocs);
            assert_int_equal(s.oom_count, ooms);
            assert_int_equal(s.free_count, (uint64_t)allocs);
            teardown(NULL);
            if (after == before) break;
            assert_true(nth < 1000);
        }
    }
    uint64_t now = device_free();
    print_message("fault sweep: %d runs; device free memory %.1f MiB before, %.1f MiB after\n",
                  runs, baseline / 1048576.0, now / 1048576.0);
    assert_true(now + 4 * MiB >= baseline); /* nothing kept: every segment was cudaFree'd */
}

static void *thread_work(void *arg) {
    int *failed = arg;
    void *mine[16];
    for (int k = 0; k < 2000; k++) {
        int n = k % 16;
        if (k >= 16) *failed |= kk_mem_free(mine[n]) != KK_OK;
        kk_mem_options o = {.pool_id = k % 3};
        *failed |= kk_mem_alloc_ex(DEV, 512 + (size_t)(k % 97) * 1024, &o, &mine[n]) != KK_OK;
    }
    for (int n = 0; n < 16; n++) *failed |= kk_mem_free(mine[n]) != KK_OK;
    return NULL;
}

static void threads_share_the_gpu_allocator(void **state) {
    (void)state;
    pthread_t t[6];
    int failed[6] = {0};
    for (int i = 0; i < 6; i++)
        assert_int_equal(pthread_create(&t[i], NULL, thread_work, &failed[i]), 0);
    for (int i = 0; i < 6; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 6; i++) assert_false(failed[i]);
    kk_mem_stats s = stats(-1);
    assert_int_equal(s.alloc_count, 6 * 2000);
    assert_int_equal(s.free_count, 6 * 2000);
}

/* ---- more than one GPU ---- */

static void *use_cuda1(void *arg) {
    int *cur = arg;
    void *p = NULL;
    if (kk_mem_alloc("cuda:1", MiB, &p) != KK_OK || kk_mem_free(p) != KK_OK ||
        kk_mem_empty_cache("cuda:1") != KK_OK || kk__mem_test_current_device(cur) != KK_OK)
        *cur = -2;
    return NULL;
}

static void another_gpu_leaves_the_current_device_alone(void **state) {
    (void)state;
    if (kk_backend_device_count(KK_BACKEND_CUDA) < 2) {
        print_message("one GPU: the device-switching paths are not exercised\n");
        skip();
    }
    int cur = -1;
    kk_assert_ok(kk__mem_test_current_device(&cur));
    assert_int_equal(cur, 0);
    const size_t n = 3 * MiB;
    unsigned char *h = malloc(n), *back = calloc(1, n);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i * 29 + 1);
    void *d0 = alloc_on(n, 0, NULL), *d1 = NULL;
    kk_assert_ok(kk_mem_alloc("cuda:1", n, &d1)); /* switches to 1 and back to 0 */
    kk_assert_ok(kk__mem_test_current_device(&cur));
    assert_int_equal(cur, 0);
    kk_assert_ok(kk_mem_copy(d0, DEV, h, "cpu", n));
    kk_assert_ok(kk_mem_copy(d1, "cuda:1", d0, DEV, n)); /* peer */
    kk_assert_ok(kk_mem_copy(back, "cpu", d1, "cuda:1", n));
    assert_memory_equal(back, h, n);
    kk_assert_status(kk_mem_copy((char *)d1 + 512, DEV, h, "cpu", 16), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "memory of cuda:1, not of cuda:0");
    kk_mem_stats s1;
    kk_assert_ok(kk_mem_stats_get("cuda:1", -1, &s1));
    assert_int_equal(s1.allocated_bytes, n);
    assert_int_equal(stats(-1).allocated_bytes, n);
    kk_assert_ok(kk_mem_free(d1));
    kk_assert_ok(kk_mem_free(d0));
    kk_assert_ok(kk__mem_check("cuda:1", NULL));
    kk_assert_ok(kk_mem_empty_cache("cuda:1"));
    kk_assert_ok(kk__mem_test_current_device(&cur));
    assert_int_equal(cur, 0);
    /* a thread that never chose a device still has device 0 afterwards */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, use_cuda1, &cur), 0);
    pthread_join(t, NULL);
    assert_int_equal(cur, 0);
    free(h);
    free(back);
}

/* In a process that never touched GPU 0, working on cuda:1 must not create
 * GPU 0's context (the helper-thread path). Forked before CUDA starts. */
static int fresh_process_check(void) {
    if (kk_backend_device_count(KK_BACKEND_CUDA) < 2) return 0;
    if (kk__mem_test_context_exists(0)) return 10; /* the probe already made one */
    void *p = NULL;
    if (kk_mem_alloc("cuda:1", MiB, &p) != KK_OK) return 11;
    if (kk_mem_free(p) != KK_OK || kk_mem_empty_cache("cuda:1") != KK_OK) return 12;
    if (!kk__mem_test_context_exists(1)) return 13;
    return kk__mem_test_context_exists(0) ? 14 : 0;
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    pid_t child = fork(); /* before any CUDA call: CUDA does not survive a fork */
    if (child == 0) _exit(fresh_process_check());
    int status = 0;
    if (child > 0) waitpid(child, &status, 0);
    if (kk_test_no_gpu()) return KK_TEST_SKIP;
    if (child < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("fresh-process check failed: status %d\n",
               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        T(blocks_are_aligned_reused_and_coalesced),
        T(freed_blocks_wait_for_their_stream),
        T(more_than_the_gpu_has_is_refused_with_the_numbers),
        T(copies_in_every_direction),
        T(without_caching_the_gpu_gets_its_memory_back),
        T(every_failing_cudamalloc_is_survived),
        T(threads_share_the_gpu_allocator),
        T(another_gpu_leaves_the_current_device_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
