/* labels: unit cpu */
/* Communicators (docs/distributed.md): the loopback's all-reduce, all-gather
 * and reduce-scatter against a serial reference for 1 to 4 ranks (threads) and
 * every dtype, out of place and in place; the comparison shown to fail on a
 * wrong reduction and a wrong gather; argument errors, ranks that disagree or
 * never arrive; NCCL absent (a clear KK_ERR_UNSUPPORTED from every NCCL entry
 * point); NCCL's error codes mapped to statuses; the comm id as hex, in a
 * file, and kk_comm_init_env's variables. */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/comm_internal.h"

enum { COUNT = 1000, MAXR = 4 };

/* Element i of rank r's send: multiples of 1/8 in [-2, 2], so that sums of up
 * to 4 of them are exact in every dtype and any order. */
static double value(int r, int64_t i) { return (double)((r * 37 + i * 11) % 33 - 16) / 8.0; }

static void put(kk_tensor *t, int64_t i, double v) {
    switch (t->dtype) {
    case KK_DTYPE_F64: ((double *)t->data)[i] = v; break;
    case KK_DTYPE_F32: ((float *)t->data)[i] = (float)v; break;
    case KK_DTYPE_F16: ((uint16_t *)t->data)[i] = kk_f32_to_f16((float)v); break;
    case KK_DTYPE_BF16: ((uint16_t *)t->data)[i] = kk_f32_to_bf16((float)v); break;
    default: /* int32: the eighths; NaN (poison) as INT32_MIN */
        ((int32_t *)t->data)[i] = isnan(v) ? INT32_MIN : (int32_t)(v * 8);
        break;
    }
}

static double get(const kk_tensor *t, int64_t i) {
    switch (t->dtype) {
    case KK_DTYPE_F64: return ((const double *)t->data)[i];
    case KK_DTYPE_F32: return ((const float *)t->data)[i];
    case KK_DTYPE_F16: return kk_f16_to_f32(((const uint16_t *)t->data)[i]);
    case KK_DTYPE_BF16: return kk_bf16_to_f32(((const uint16_t *)t->data)[i]);
    default: return ((const int32_t *)t->data)[i] / 8.0;
    }
}

typedef struct job {
    kk_comm *comm;
    kk__coll op;
    kk_tensor *send, *recv;
    kk_status st;
    char message[512];
} job;

static void *run(void *arg) {
    job *j = arg;
    j->st = j->op == KK__COLL_ALL_REDUCE ? kk_comm_all_reduce(j->comm, j->send, j->recv, NULL)
            : j->op == KK__COLL_ALL_GATHER
                ? kk_comm_all_gather(j->comm, j->send, j->recv, NULL)
                : kk_comm_reduce_scatter(j->comm, j->send, j->recv, NULL);
    if (j->st != KK_OK) snprintf(j->message, sizeof j->message, "%s", kk_last_error_message());
    return NULL;
}

/* Run jobs[0..n) on n threads. */
static void run_all(job *jobs, int n) {
    pthread_t t[64];
    for (int r = 0; r < n; r++) assert_int_equal(pthread_create(&t[r], NULL, run, &jobs[r]), 0);
    for (int r = 0; r < n; r++) pthread_join(t[r], NULL);
}

/* The serial reference of rank r's element i of op's result (count: recv's
 * elements per rank). */
static double reference(kk__coll op, int n, int r, int64_t count, int64_t i) {
    if (op == KK__COLL_ALL_GATHER) return value((int)(i / (count / n)), i % (count / n));
    const int64_t at = op == KK__COLL_REDUCE_SCATTER ? r * count + i : i;
    double s = 0;
    for (int k = 0; k < n; k++) s += value(k, at);
    return s;
}

/* Elements of the ranks' results unlike the reference (NaN counts). */
static int64_t mismatches(job *jobs, int n) {
    int64_t bad = 0;
    for (int r = 0; r < n; r++) {
        const int64_t count = kk_tensor_numel(jobs[r].recv);
        for (int64_t i = 0; i < count; i++)
            if (!(get(jobs[r].recv, i) == reference(jobs[r].op, n, r, count, i))) bad++;
    }
    return bad;
}

/* Set up op on n ranks of dtype; in place: recv is send (all-reduce) or
 * contains it (this rank's part). */
static void setup(job *jobs, kk_comm **comms, int n, kk__coll op, kk_dtype dt, int in_place) {
    const int64_t ns = op == KK__COLL_REDUCE_SCATTER ? COUNT * n : COUNT;
    const int64_t nr = op == KK__COLL_ALL_GATHER ? COUNT * n : COUNT;
    for (int r = 0; r < n; r++) {
        job *j = &jobs[r];
        memset(j, 0, sizeof *j);
        j->comm = comms[r], j->op = op;
        const int64_t big = ns > nr ? ns : nr;
        kk_tensor *whole;
        kk_assert_ok(kk_tensor_create("cpu", dt, 1, &big, &whole));
        for (int64_t i = 0; i < big; i++) put(whole, i, 1e3); /* poison */
        if (!in_place) {
            kk_assert_ok(kk_tensor_slice(whole, 0, 0, ns, 1, &j->send));
            kk_assert_ok(kk_tensor_create("cpu", dt, 1, &nr, &j->recv));
            for (int64_t i = 0; i < nr; i++) put(j->recv, i, NAN);
        } else if (op == KK__COLL_ALL_REDUCE) {
            kk_assert_ok(kk_tensor_slice(whole, 0, 0, ns, 1, &j->send));
            kk_assert_ok(kk_tensor_slice(whole, 0, 0, nr, 1, &j->recv));
        } else if (op == KK__COLL_ALL_GATHER) { /* send is recv's part r */
            kk_assert_ok(kk_tensor_slice(whole, 0, 0, nr, 1, &j->recv));
            kk_assert_ok(kk_tensor_slice(whole, 0, r * ns, (r + 1) * ns, 1, &j->send));
        } else { /* recv is send's part r */
            kk_assert_ok(kk_tensor_slice(whole, 0, 0, ns, 1, &j->send));
            kk_assert_ok(kk_tensor_slice(whole, 0, r * nr, (r + 1) * nr, 1, &j->recv));
        }
        kk_tensor_destroy(whole);
        for (int64_t i = 0; i < ns; i++) put(j->send, i, value(r, i));
    }
}

static void teardown(job *jobs, int n) {
    for (int r = 0; r < n; r++) kk_tensor_destroy(jobs[r].send), kk_tensor_destroy(jobs[r].recv);
}

static const kk_dtype g_dtypes[] = {KK_DTYPE_F32, KK_DTYPE_BF16, KK_DTYPE_F16, KK_DTYPE_F64,
                                    KK_DTYPE_INT32};
static const kk__coll g_ops[] = {KK__COLL_ALL_REDUCE, KK__COLL_ALL_GATHER, KK__COLL_REDUCE_SCATTER};
static const char *const g_op_names[] = {"all_reduce", "all_gather", "reduce_scatter"};

static void test_loopback_collectives(void **state) {
    (void)state;
    int cases = 0;
    for (int n = 1; n <= MAXR; n++) {
        kk_comm *comms[MAXR];
        kk_assert_ok(kk_comm_loopback_create(n, comms));
        assert_int_equal(kk_comm_size(comms[n - 1]), n);
        assert_int_equal(kk_comm_rank(comms[n - 1]), n - 1);
        assert_string_equal(kk_comm_backend(comms[0]), "loopback");
        assert_string_equal(kk_comm_device(comms[0]), "cpu");
        for (size_t o = 0; o < 3; o++)
            for (size_t d = 0; d < sizeof g_dtypes / sizeof g_dtypes[0]; d++)
                for (int in_place = 0; in_place < 2; in_place++) {
                    job jobs[MAXR];
                    setup(jobs, comms, n, g_ops[o], g_dtypes[d], in_place);
                    run_all(jobs, n);
                    for (int r = 0; r < n; r++)
                        if (jobs[r].st != KK_OK) fail_msg("rank %d: %s", r, jobs[r].message);
                    const int64_t bad = mismatches(jobs, n);
                    if (bad)
                        fail_msg("%s %s n=%d%s: %lld elements differ from the reference",
                                 g_op_names[o], kk_dtype_name(g_dtypes[d]), n,
                                 in_place ? " in place" : "", (long long)bad);
                    kk_assert_ok(kk_comm_synchronize(comms[0], NULL));
                    teardown(jobs, n);
                    cases++;
                }
        for (int r = 0; r < n; r++) kk_comm_destroy(comms[r]);
    }
    printf("%d collectives equal the serial reference\n", cases);
}

/* Wrong reductions: the last rank left out, rank 0 counted twice. */
static void drop_last(kk_dtype dt, const void *const *src, int n, void *dst, size_t count) {
    kk__loopback_reduce(dt, src, n > 1 ? n - 1 : n, dst, count);
}
static void rank0_twice(kk_dtype dt, const void *const *src, int n, void *dst, size_t count) {
    const void *s[64];
    for (int r = 0; r < n; r++) s[r] = src[r > 0 ? r : 0];
    s[n - 1] = src[0];
    kk__loopback_reduce(dt, s, n, dst, count);
}

/* A check that cannot fail proves nothing: each wrong reduction, and a gather
 * with two ranks' parts swapped, must differ from the reference. */
static void test_wrong_reduction_caught(void **state) {
    (void)state;
    kk_comm *comms[3];
    kk_assert_ok(kk_comm_loopback_create(3, comms));
    kk__loopback_reduce_fn wrong[] = {drop_last, rank0_twice};
    for (size_t w = 0; w < 2; w++) {
        kk__loopback_reduce_fn prev = kk__loopback_set_reduce(wrong[w]);
        assert_ptr_equal(prev, kk__loopback_reduce);
        for (size_t o = 0; o < 3; o += 2) { /* the reducing ones */
            job jobs[3];
            setup(jobs, comms, 3, g_ops[o], KK_DTYPE_F32, 0);
            run_all(jobs, 3);
            const int64_t bad = mismatches(jobs, 3);
            printf("%s with wrong reduction %zu: %lld elements differ\n", g_op_names[o], w,
                   (long long)bad);
            assert_true(bad > 0);
            teardown(jobs, 3);
        }
        kk__loopback_set_reduce(NULL);
    }
    job jobs[3];
    setup(jobs, comms, 3, KK__COLL_ALL_GATHER, KK_DTYPE_F32, 0);
    run_all(jobs, 3);
    assert_int_equal(mismatches(jobs, 3), 0);
    float *g = jobs[1].recv->data; /* rank 1's parts 0 and 1 swapped */
    for (int i = 0; i < COUNT; i++) {
        float t = g[i];
        g[i] = g[COUNT + i], g[COUNT + i] = t;
    }
    assert_true(mismatches(jobs, 3) > 0);
    teardown(jobs, 3);
    for (int r = 0; r < 3; r++) kk_comm_destroy(comms[r]);
}

static void test_argument_errors(void **state) {
    (void)state;
    kk_comm *comms[2];
    kk_tensor *a, *b, *c8, *big, *tr;
    kk_assert_ok(kk_comm_loopback_create(2, comms));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 1, (int64_t[]){8}, &a));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 1, (int64_t[]){8}, &b));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_FP8_E4M3, 1, (int64_t[]){8}, &c8));
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 1, (int64_t[]){9}, &big));
    kk_tensor *m;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 2, (int64_t[]){2, 4}, &m));
    kk_assert_ok(kk_tensor_transpose(m, 0, 1, &tr));
    kk_assert_status(kk_comm_all_reduce(NULL, a, b, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "c = NULL");
    kk_assert_status(kk_comm_all_reduce(comms[0], NULL, b, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "send = NULL");
    kk_assert_status(kk_comm_all_reduce(comms[0], c8, c8, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "dtype fp8_e4m3");
    kk_assert_status(kk_comm_all_reduce(comms[0], a, big, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "recv = 9 elements: expected 8 elements");
    kk_assert_status(kk_comm_all_gather(comms[0], a, b, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "expected 16 elements");
    kk_assert_status(kk_comm_reduce_scatter(comms[0], big, a, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "divisible by the comm size 2");
    kk_assert_status(kk_comm_all_reduce(comms[0], tr, tr, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "contiguous");
    kk_tensor *p8, *q8;
    kk_assert_ok(kk_tensor_slice(big, 0, 0, 8, 1, &p8));
    kk_assert_ok(kk_tensor_slice(big, 0, 1, 9, 1, &q8));
    kk_assert_status(kk_comm_all_reduce(comms[0], p8, q8, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "overlapping memory");
    kk_assert_status(kk_comm_loopback_create(0, comms), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_comm_loopback_create(65, comms), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_comm_synchronize(NULL, NULL), KK_ERR_INVALID_ARGUMENT);
    assert_int_equal(kk_comm_size(NULL), 1);
    assert_int_equal(kk_comm_rank(NULL), 0);
    kk_tensor_destroy(p8), kk_tensor_destroy(q8);
    kk_tensor_destroy(a), kk_tensor_destroy(b), kk_tensor_destroy(c8), kk_tensor_destroy(big);
    kk_tensor_destroy(m), kk_tensor_destroy(tr);
    kk_comm_destroy(comms[0]), kk_comm_destroy(comms[1]);
}

/* Ranks that call different collectives all get the same clear error. */
static void test_ranks_disagree(void **state) {
    (void)state;
    kk_comm *comms[2];
    kk_assert_ok(kk_comm_loopback_create(2, comms));
    job jobs[2];
    setup(jobs, comms, 2, KK__COLL_ALL_REDUCE, KK_DTYPE_F32, 0);
    kk_tensor_destroy(jobs[1].send);
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 1, (int64_t[]){COUNT * 2}, &jobs[1].send));
    jobs[1].op = KK__COLL_ALL_GATHER;
    kk_tensor_destroy(jobs[1].recv);
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 1, (int64_t[]){COUNT * 4}, &jobs[1].recv));
    run_all(jobs, 2);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(jobs[r].st, KK_ERR_INVALID_ARGUMENT);
        kk_assert_contains(jobs[r].message, "rank 1 called all_gather with 2000 f32 elements, "
                                            "rank 0 all_reduce with 1000 f32");
    }
    /* the group still works afterwards */
    teardown(jobs, 2);
    setup(jobs, comms, 2, KK__COLL_ALL_REDUCE, KK_DTYPE_F32, 1);
    run_all(jobs, 2);
    assert_int_equal(jobs[0].st, KK_OK);
    assert_int_equal(mismatches(jobs, 2), 0);
    teardown(jobs, 2);
    kk_comm_destroy(comms[0]), kk_comm_destroy(comms[1]);
}

/* A rank that never arrives: the others fail after KK_COMM_TIMEOUT, and the
 * group is broken from then on. */
static void test_timeout(void **state) {
    (void)state;
    setenv("KK_COMM_TIMEOUT", "0.2", 1);
    kk_comm *comms[2];
    kk_assert_ok(kk_comm_loopback_create(2, comms));
    unsetenv("KK_COMM_TIMEOUT");
    job jobs[2];
    setup(jobs, comms, 2, KK__COLL_ALL_REDUCE, KK_DTYPE_F32, 0);
    run_all(jobs, 1); /* rank 0 alone */
    assert_int_equal(jobs[0].st, KK_ERR_INTERNAL);
    kk_assert_contains(jobs[0].message, "rank 0 waited 0.2 s (KK_COMM_TIMEOUT)");
    run_all(jobs + 1, 1);
    assert_int_equal(jobs[1].st, KK_ERR_INTERNAL);
    kk_assert_contains(jobs[1].message, "broken");
    teardown(jobs, 2);
    kk_comm_destroy(comms[0]), kk_comm_destroy(comms[1]);
    setenv("KK_COMM_TIMEOUT", "soon", 1);
    kk_assert_status(kk_comm_loopback_create(2, comms), KK_ERR_CONFIG);
    kk_assert_contains(kk_last_error_message(), "KK_COMM_TIMEOUT");
    unsetenv("KK_COMM_TIMEOUT");
}

/* NCCL absent: each NCCL entry point says so and how to fix it. */
static void test_nccl_absent(void **state) {
    (void)state;
    setenv("KK_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    const char *why = NULL;
    int version = -1;
    assert_int_equal(kk_comm_nccl_available(&why, &version), 0);
    assert_int_equal(version, 0);
    kk_assert_contains(why, "/nonexistent/libnccl.so.2");
    kk_assert_contains(why, "KK_NCCL_LIBRARY");
    kk_comm_id id;
    kk_assert_status(kk_comm_id_create(&id), KK_ERR_UNSUPPORTED);
    kk_assert_contains(kk_last_error_message(), "kk_comm_id_create: NCCL not available");
    memset(&id, 7, sizeof id);
    kk_comm *c = (kk_comm *)1;
    kk_assert_status(kk_comm_init_rank(&id, 2, 0, "cuda:0", &c), KK_ERR_UNSUPPORTED);
    assert_null(c);
    kk_assert_status(kk_comm_init_rank(&id, 2, 2, "cuda:0", &c), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "rank = 2");
    const char *devs[2] = {"cuda:0", "cuda:1"};
    kk_comm *cs[2];
    kk_assert_status(kk_comm_init_all(2, devs, cs), KK_ERR_UNSUPPORTED);
    kk_assert_contains(kk_last_error_message(), "KK_NCCL_LIBRARY");
    kk_assert_ok(kk_comm_group_start()); /* no-ops without NCCL */
    kk_assert_ok(kk_comm_group_end());
    /* kk_comm_init_env reads the variables first, then needs NCCL */
    setenv("KK_WORLD_SIZE", "2", 1), setenv("KK_RANK", "1", 1);
    char hex[2 * KK_COMM_ID_BYTES + 1];
    kk_comm_id_to_hex(&id, hex);
    setenv("KK_COMM_ID", hex, 1);
    kk_assert_status(kk_comm_init_env(NULL, &c), KK_ERR_UNSUPPORTED);
    unsetenv("KK_COMM_ID"), unsetenv("KK_WORLD_SIZE"), unsetenv("KK_RANK");
    unsetenv("KK_NCCL_LIBRARY");
}

/* A real NCCL where one is found (KK_TEST_NCCL_LIBRARY, or CUDA's own copy):
 * it loads without a GPU, its symbols resolve, it makes ids, and NVLink
 * multicast is off unless the user set NCCL_NVLS_ENABLE. */
static void test_nccl_present(void **state) {
    (void)state;
    const char *lib = getenv("KK_TEST_NCCL_LIBRARY");
    if (!lib && access("/usr/local/cuda/lib/libnccl.so.2", R_OK) == 0)
        lib = "/usr/local/cuda/lib/libnccl.so.2";
    if (!lib) {
        printf("no NCCL library on this machine (KK_TEST_NCCL_LIBRARY): nothing to load\n");
        skip();
    }
    setenv("KK_NCCL_LIBRARY", lib, 1);
    unsetenv("NCCL_NVLS_ENABLE");
    const char *why = NULL;
    int version = 0;
    assert_int_equal(kk_comm_nccl_available(&why, &version), 1);
    assert_string_equal(why, "");
    printf("%s: NCCL version %d\n", lib, version);
    assert_true(version >= 20000);
    assert_non_null(getenv("NCCL_NVLS_ENABLE"));
    assert_string_equal(getenv("NCCL_NVLS_ENABLE"), "0");
    kk_comm_id a, b;
    kk_assert_ok(kk_comm_id_create(&a));
    kk_assert_ok(kk_comm_id_create(&b));
    assert_memory_not_equal(&a, &b, sizeof a);
    kk_comm *c = NULL;
    if (!kk_backend_available(KK_BACKEND_CUDA)) { /* the device is checked before NCCL runs */
        kk_assert_status(kk_comm_init_rank(&a, 2, 0, "cuda:0", &c), KK_ERR_CUDA_UNAVAILABLE);
        assert_null(c);
    }
    kk_assert_status(kk_comm_init_rank(&a, 2, 0, "cpu", &c), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "a CUDA device");
    /* kk_comm_init_env's rank 0 makes the id file when it is missing (only
     * without a GPU: with one, ncclCommInitRank would wait for rank 1) */
    if (!kk_backend_available(KK_BACKEND_CUDA)) {
        char dir[] = "/tmp/kk_comm_env_XXXXXX", path[64];
        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/id", dir);
        setenv("KK_WORLD_SIZE", "2", 1), setenv("KK_RANK", "0", 1);
        setenv("KK_COMM_ID_FILE", path, 1);
        kk_assert_status(kk_comm_init_env("cuda:0", &c), KK_ERR_CUDA_UNAVAILABLE);
        kk_comm_id saved;
        kk_assert_ok(kk_comm_id_load(path, 0, &saved));
        unsetenv("KK_WORLD_SIZE"), unsetenv("KK_RANK"), unsetenv("KK_COMM_ID_FILE");
        unlink(path), rmdir(dir);
    }
    /* (no empty ncclGroupStart/End here: NCCL 2.28 leaks its group job then) */
    unsetenv("KK_NCCL_LIBRARY");
}

static void test_nccl_errors(void **state) {
    (void)state;
    static const struct {
        int code;
        kk_status st;
        const char *name;
    } rows[] = {{1, KK_ERR_DEVICE_FAILURE, "ncclUnhandledCudaError"},
                {2, KK_ERR_DEVICE_FAILURE, "ncclSystemError"},
                {3, KK_ERR_INTERNAL, "ncclInternalError"},
                {4, KK_ERR_INVALID_ARGUMENT, "ncclInvalidArgument"},
                {5, KK_ERR_INVALID_ARGUMENT, "ncclInvalidUsage"},
                {6, KK_ERR_DEVICE_FAILURE, "ncclRemoteError"},
                {42, KK_ERR_INTERNAL, "ncclResult 42"}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        assert_int_equal(kk__nccl_error("kk_comm_all_reduce", "ncclAllReduce", rows[i].code, NULL),
                         rows[i].st);
        kk_assert_contains(kk_last_error_message(), "kk_comm_all_reduce: ncclAllReduce failed: ");
        kk_assert_contains(kk_last_error_message(), rows[i].name);
        assert_string_equal(kk_last_error()->cuda_error, rows[i].name);
        assert_string_equal(kk__nccl_result_name(rows[i].code), rows[i].name);
    }
}

static void test_comm_id(void **state) {
    (void)state;
    kk_comm_id id, back;
    for (int i = 0; i < KK_COMM_ID_BYTES; i++) id.bytes[i] = (unsigned char)(i * 37 + 5);
    char hex[2 * KK_COMM_ID_BYTES + 1];
    kk_comm_id_to_hex(&id, hex);
    assert_int_equal(strlen(hex), 256);
    assert_memory_equal(hex, "052a4f74", 8);
    kk_assert_ok(kk_comm_id_from_hex(hex, &back));
    assert_memory_equal(&id, &back, sizeof id);
    hex[10] = 'g';
    kk_assert_status(kk_comm_id_from_hex(hex, &back), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_comm_id_from_hex("abcd", &back), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "256 hex digits");
    char dir[] = "/tmp/kk_comm_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/id", dir);
    kk_assert_status(kk_comm_id_load(path, 0.05, &back), KK_ERR_IO);
    kk_assert_contains(kk_last_error_message(), "waited for it");
    kk_assert_ok(kk_comm_id_save(&id, path));
    memset(&back, 0, sizeof back);
    kk_assert_ok(kk_comm_id_load(path, 0, &back));
    assert_memory_equal(&id, &back, sizeof id);
    FILE *fp = fopen(path, "w");
    fputs("not an id\n", fp);
    fclose(fp);
    kk_assert_status(kk_comm_id_load(path, 0, &back), KK_ERR_IO);
    kk_assert_contains(kk_last_error_message(), "not a comm id");
    snprintf(path, sizeof path, "%s/no/such/dir/id", dir);
    kk_assert_status(kk_comm_id_save(&id, path), KK_ERR_IO);
    snprintf(path, sizeof path, "rm -rf %s", dir);
    assert_int_equal(system(path), 0);
}

static void test_init_env_errors(void **state) {
    (void)state;
    kk_comm *c;
    unsetenv("KK_WORLD_SIZE"), unsetenv("KK_RANK"), unsetenv("KK_COMM_ID"),
        unsetenv("KK_COMM_ID_FILE");
    kk_assert_status(kk_comm_init_env(NULL, &c), KK_ERR_CONFIG);
    kk_assert_contains(kk_last_error_message(), "KK_WORLD_SIZE = (unset)");
    setenv("KK_WORLD_SIZE", "2", 1);
    setenv("KK_RANK", "2", 1);
    kk_assert_status(kk_comm_init_env(NULL, &c), KK_ERR_CONFIG);
    kk_assert_contains(kk_last_error_message(), "KK_RANK = 2: expected an integer 0 .. 1");
    setenv("KK_RANK", "1", 1);
    kk_assert_status(kk_comm_init_env(NULL, &c), KK_ERR_CONFIG);
    kk_assert_contains(kk_last_error_message(), "KK_COMM_ID_FILE");
    setenv("KK_COMM_ID", "zz", 1);
    kk_assert_status(kk_comm_init_env(NULL, &c), KK_ERR_CONFIG);
    kk_assert_contains(kk_last_error_message(), "KK_COMM_ID");
    unsetenv("KK_COMM_ID");
    setenv("KK_COMM_ID_FILE", "/nonexistent/kk-id", 1);
    setenv("KK_COMM_TIMEOUT", "0.05", 1);
    kk_assert_status(kk_comm_init_env(NULL, &c), KK_ERR_IO); /* rank 1 waits for the file */
    kk_assert_contains(kk_last_error_message(), "/nonexistent/kk-id");
    setenv("KK_LOCAL_RANK", "x", 1);
    kk_assert_status(kk_comm_init_env(NULL, &c), KK_ERR_CONFIG);
    kk_assert_contains(kk_last_error_message(), "KK_LOCAL_RANK");
    unsetenv("KK_LOCAL_RANK"), unsetenv("KK_COMM_TIMEOUT"), unsetenv("KK_COMM_ID_FILE");
    unsetenv("KK_WORLD_SIZE"), unsetenv("KK_RANK");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loopback_collectives),
        cmocka_unit_test(test_wrong_reduction_caught),
        cmocka_unit_test(test_argument_errors),
        cmocka_unit_test(test_ranks_disagree),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_nccl_absent), /* before test_nccl_present: a load is kept */
        cmocka_unit_test(test_nccl_present),
        cmocka_unit_test(test_nccl_errors),
        cmocka_unit_test(test_comm_id),
        cmocka_unit_test(test_init_env_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
