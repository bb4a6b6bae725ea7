/* All-reduce bandwidth and latency of kk_comm, nccl-tests style: for each
 * message size, warm-up calls, every rank started together, then `iters`
 * back-to-back in-place all-reduces timed on the host between the start and
 * one synchronization at the end (what nccl-tests' all_reduce_perf does
 * without -G); time = the slowest rank's mean per call; algbw = bytes / time,
 * busbw = algbw * 2 (n - 1) / n. Small messages get more calls (iters x
 * 32 MiB / bytes, at most --max-iters) so that the host clock's resolution
 * and the final synchronization do not count.
 * Two ways to run the ranks:
 *   threads    one process, ncclCommInitAll over the first n GPUs, a thread
 *              per rank (none of them makes its GPU current: the collectives
 *              must not need it), or the loopback with --loopback (a CPU check
 *              of the program, not a measurement);
 *   processes  one per GPU, torchrun-style (KK_WORLD_SIZE, KK_RANK,
 *              KK_COMM_ID_FILE; KK_TP_DEVICE or cuda:KK_LOCAL_RANK), as the
 *              tensor-parallel decoder runs: each rank times itself and rank 0
 *              gathers the times (kk_comm_all_gather) and prints.
 * Prints one JSON document.
 *   kk_comm_bench --ranks 4 [--dtype bf16] [--min 8K] [--max 256M] [--iters 20]
 *                 [--max-iters 1000] [--warmup 5] [--loopback] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernelkit/kernelkit.h"

enum { MAXR = 64, MAXSIZES = 64 };

static struct {
    int n, iters, max_iters, warmup, loopback, nsizes, processes, rank;
    kk_dtype dtype;
    size_t sizes[MAXSIZES];
    int calls[MAXSIZES];
    kk_comm *comms[MAXR];
    pthread_barrier_t barrier;
    double seconds[MAXR][MAXSIZES];
    kk_status st[MAXR];
    char message[MAXR][256];
} g;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Calls timed for a message of `bytes`. */
static int calls_for(size_t bytes) {
    const double want = (double)g.iters * (32.0 * 1024 * 1024) / (double)bytes;
    int n = want > g.max_iters ? g.max_iters : (int)want;
    return n < g.iters ? g.iters : n;
}

/* Every rank here before any goes on: the threads' barrier, or (processes) a
 * one-element all-reduce waited for. */
static kk_status rendezvous(kk_comm *c, kk_tensor *one) {
    if (!g.processes) {
        pthread_barrier_wait(&g.barrier);
        return KK_OK;
    }
    kk_status st = kk_comm_all_reduce(c, one, one, NULL);
    return st == KK_OK ? kk_comm_synchronize(c, NULL) : st;
}

static void *rank_main(void *arg) {
    const int r = (int)(intptr_t)arg, slot = g.processes ? 0 : r;
    kk_comm *c = g.comms[slot];
    kk_tensor *one = NULL;
    const int64_t n1 = 1;
    kk_status st = kk_tensor_create(kk_comm_device(c), KK_DTYPE_F32, 1, &n1, &one);
    for (int s = 0; s < g.nsizes; s++) {
        const int64_t count = (int64_t)(g.sizes[s] / kk_dtype_bytes(g.dtype, 1));
        const int calls = g.calls[s], warm = g.warmup > calls / 20 ? g.warmup : calls / 20;
        kk_tensor *t = NULL;
        if (st == KK_OK) st = kk_tensor_create(kk_comm_device(c), g.dtype, 1, &count, &t);
        for (int i = 0; st == KK_OK && i < warm; i++) st = kk_comm_all_reduce(c, t, t, NULL);
        if (st == KK_OK) st = kk_comm_synchronize(c, NULL);
        /* every rank starts together (the threads' barrier even after a
         * failure, so that the others do not wait for ever) */
        if (!g.processes || st == KK_OK) {
            const kk_status b = rendezvous(c, one);
            if (st == KK_OK) st = b;
        }
        const double t0 = now_s();
        for (int i = 0; st == KK_OK && i < calls; i++) st = kk_comm_all_reduce(c, t, t, NULL);
        if (st == KK_OK) st = kk_comm_synchronize(c, NULL);
        g.seconds[slot][s] = (now_s() - t0) / calls;
        kk_tensor_destroy(t);
        if (!g.processes) pthread_barrier_wait(&g.barrier);
        if (st != KK_OK && g.processes) break;
    }
    kk_tensor_destroy(one);
    if (st != KK_OK)
        snprintf(g.message[slot], sizeof g.message[slot], "%s", kk_last_error_message());
    g.st[slot] = st;
    return NULL;
}

/* Processes: every rank's times into g.seconds[0 .. n - 1] of rank 0 (an
 * all-gather of f64 through the device). */
static kk_status gather_times(void) {
    kk_comm *c = g.comms[0];
    const int64_t k = g.nsizes, all = k * g.n;
    kk_tensor *mine = NULL, *every = NULL, *hm = NULL, *he = NULL;
    kk_status st = kk_tensor_create("cpu", KK_DTYPE_F64, 1, &k, &hm);
    if (st == KK_OK) st = kk_tensor_create("cpu", KK_DTYPE_F64, 1, &all, &he);
    if (st == KK_OK) st = kk_tensor_create(kk_comm_device(c), KK_DTYPE_F64, 1, &k, &mine);
    if (st == KK_OK) st = kk_tensor_create(kk_comm_device(c), KK_DTYPE_F64, 1, &all, &every);
    if (st == KK_OK) {
        memcpy(hm->data, g.seconds[0], (size_t)k * sizeof(double));
        st = kk_tensor_copy(mine, hm);
    }
    if (st == KK_OK) st = kk_comm_all_gather(c, mine, every, NULL);
    if (st == KK_OK) st = kk_comm_synchronize(c, NULL);
    if (st == KK_OK) st = kk_tensor_copy(he, every);
    for (int r = 0; st == KK_OK && r < g.n; r++)
        memcpy(g.seconds[r], (const double *)he->data + r * k, (size_t)k * sizeof(double));
    kk_tensor_destroy(mine), kk_tensor_destroy(every), kk_tensor_destroy(hm), kk_tensor_destroy(he);
    return st;
}

static size_t parse_size(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k') v *= 1024;
    if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
    if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

int main(int argc, char **argv) {
    size_t lo = 8 << 10, hi = (size_t)256 << 20;
    g.n = 2, g.iters = 20, g.max_iters = 1000, g.warmup = 5, g.dtype = KK_DTYPE_BF16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--loopback"))
            g.loopback = 1;
        else if (v && !strcmp(a, "--ranks"))
            g.n = atoi(v), i++;
        else if (v && !strcmp(a, "--iters"))
            g.iters = atoi(v), i++;
        else if (v && !strcmp(a, "--max-iters"))
            g.max_iters = atoi(v), i++;
        else if (v && !strcmp(a, "--warmup"))
            g.warmup = atoi(v), i++;
        else if (v && !strcmp(a, "--min"))
            lo = parse_size(v), i++;
        else if (v && !strcmp(a, "--max"))
            hi = parse_size(v), i++;
        else if (v && !strcmp(a, "--dtype")) {
            if (kk_dtype_parse(v, &g.dtype) != KK_OK) {
                fprintf(stderr, "kk_comm_bench: bad --dtype '%s'\n", v);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "kk_comm_bench: unknown argument '%s' (see the file's head)\n", a);
            return 2;
        }
    }
    g.processes = !g.loopback && getenv("KK_WORLD_SIZE") != NULL;
    if (g.processes) {
        g.n = atoi(getenv("KK_WORLD_SIZE"));
        g.rank = getenv("KK_RANK") ? atoi(getenv("KK_RANK")) : 0;
    }
    if (g.n < 1 || g.n > MAXR || g.iters < 1 || g.max_iters < g.iters || g.warmup < 0 ||
        lo < 1024 || hi < lo) {
        fprintf(stderr, "kk_comm_bench: bad --ranks, --iters, --max-iters, --warmup, --min or "
                        "--max\n");
        return 2;
    }
    for (size_t s = lo; s <= hi && g.nsizes < MAXSIZES; s *= 2)
        g.calls[g.nsizes] = calls_for(s), g.sizes[g.nsizes++] = s;
    kk_status st;
    if (g.loopback)
        st = kk_comm_loopback_create(g.n, g.comms);
    else if (g.processes)
        st = kk_comm_init_env(getenv("KK_TP_DEVICE"), &g.comms[0]);
    else {
        char names[MAXR][16];
        const char *devs[MAXR];
        for (int r = 0; r < g.n; r++) snprintf(names[r], 16, "cuda:%d", r), devs[r] = names[r];
        st = kk_comm_init_all(g.n, devs, g.comms);
    }
    if (st != KK_OK) {
        fprintf(stderr, "kk_comm_bench: %s\n", kk_last_error_message());
        return 1;
    }
    int rc = 0;
    if (g.processes) {
        rank_main((void *)(intptr_t)g.rank);
        if (g.st[0] != KK_OK)
            fprintf(stderr, "kk_comm_bench: rank %d: %s\n", g.rank, g.message[0]), rc = 1;
        else if (gather_times() != KK_OK)
            fprintf(stderr, "kk_comm_bench: rank %d: gathering the times: %s\n", g.rank,
                    kk_last_error_message()),
                rc = 1;
    } else {
        pthread_barrier_init(&g.barrier, NULL, (unsigned)g.n);
        pthread_t th[MAXR];
        for (int r = 0; r < g.n; r++) pthread_create(&th[r], NULL, rank_main, (void *)(intptr_t)r);
        for (int r = 0; r < g.n; r++) pthread_join(th[r], NULL);
        pthread_barrier_destroy(&g.barrier);
        for (int r = 0; r < g.n; r++)
            if (g.st[r] != KK_OK)
                fprintf(stderr, "kk_comm_bench: rank %d: %s\n", r, g.message[r]), rc = 1;
    }
    int version = 0;
    if (!g.loopback) kk_comm_nccl_available(NULL, &version);
    if (g.rank == 0) {
        printf("{\"schema\": \"kernelkit.comm_bench/2\", \"backend\": \"%s\", \"ranks_as\": "
               "\"%s\", \"nccl_version\": %d, \"ranks\": %d, \"dtype\": \"%s\", \"iters\": %d, "
               "\"max_iters\": %d, \"warmup\": %d, \"timing\": \"host clock around the calls and "
               "one synchronization, slowest rank's mean\",\n \"results\": [",
               kk_comm_backend(g.comms[0]), g.processes ? "processes" : "threads", version, g.n,
               kk_dtype_name(g.dtype), g.iters, g.max_iters, g.warmup);
        for (int s = 0; rc == 0 && s < g.nsizes; s++) {
            double t = 0;
            for (int r = 0; r < g.n; r++) t = g.seconds[r][s] > t ? g.seconds[r][s] : t;
            const double algbw = g.sizes[s] / t / 1e9, busbw = algbw * 2 * (g.n - 1) / g.n;
            printf("%s\n  {\"bytes\": %zu, \"calls\": %d, \"time_us\": %.3f, \"algbw_GBps\": "
                   "%.3f, \"busbw_GBps\": %.3f}",
                   s ? "," : "", g.sizes[s], g.calls[s], t * 1e6, algbw, busbw);
        }
        printf("]}\n");
    }
    for (int r = 0; r < (g.processes ? 1 : g.n); r++) kk_comm_destroy(g.comms[r]);
    return rc;
}
