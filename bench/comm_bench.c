/* All-reduce bandwidth of kk_comm, nccl-tests style: for each message size,
 * warm-up calls, then `iters` back-to-back all-reduces timed on the host
 * between two synchronizations, per rank; time = the slowest rank's mean;
 * algbw = bytes / time, busbw = algbw * 2 (n - 1) / n (what nccl-tests'
 * all_reduce_perf prints). One process: ncclCommInitAll over the first n GPUs
 * with a thread per rank, or the loopback with --loopback (a CPU check of the
 * program itself, not a measurement). Prints one JSON document.
 *   kk_comm_bench --ranks 4 [--dtype bf16] [--min 1M] [--max 1G] [--iters 20]
 *                 [--warmup 5] [--loopback] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernelkit/kernelkit.h"

enum { MAXR = 64, MAXSIZES = 64 };

static struct {
    int n, iters, warmup, loopback, nsizes;
    kk_dtype dtype;
    size_t sizes[MAXSIZES];
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

static void *rank_main(void *arg) {
    const int r = (int)(intptr_t)arg;
    kk_comm *c = g.comms[r];
    kk_status st = KK_OK;
    for (int s = 0; s < g.nsizes; s++) {
        const int64_t count = (int64_t)(g.sizes[s] / kk_dtype_bytes(g.dtype, 1));
        kk_tensor *t = NULL;
        st = kk_tensor_create(kk_comm_device(c), g.dtype, 1, &count, &t);
        for (int i = 0; st == KK_OK && i < g.warmup; i++) st = kk_comm_all_reduce(c, t, t, NULL);
        if (st == KK_OK) st = kk_comm_synchronize(c, NULL);
        pthread_barrier_wait(&g.barrier); /* every rank starts together */
        const double t0 = now_s();
        for (int i = 0; st == KK_OK && i < g.iters; i++) st = kk_comm_all_reduce(c, t, t, NULL);
        if (st == KK_OK) st = kk_comm_synchronize(c, NULL);
        g.seconds[r][s] = (now_s() - t0) / g.iters;
        kk_tensor_destroy(t);
        pthread_barrier_wait(&g.barrier);
        if (st != KK_OK) break;
    }
    if (st != KK_OK) snprintf(g.message[r], sizeof g.message[r], "%s", kk_last_error_message());
    g.st[r] = st;
    return NULL;
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
    size_t lo = 1 << 20, hi = (size_t)1 << 30;
    g.n = 2, g.iters = 20, g.warmup = 5, g.dtype = KK_DTYPE_BF16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--loopback"))
            g.loopback = 1;
        else if (v && !strcmp(a, "--ranks"))
            g.n = atoi(v), i++;
        else if (v && !strcmp(a, "--iters"))
            g.iters = atoi(v), i++;
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
    if (g.n < 1 || g.n > MAXR || g.iters < 1 || g.warmup < 0 || lo < 1024 || hi < lo) {
        fprintf(stderr, "kk_comm_bench: bad --ranks, --iters, --warmup, --min or --max\n");
        return 2;
    }
    for (size_t s = lo; s <= hi && g.nsizes < MAXSIZES; s *= 2) g.sizes[g.nsizes++] = s;
    kk_status st;
    if (g.loopback)
        st = kk_comm_loopback_create(g.n, g.comms);
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
    pthread_barrier_init(&g.barrier, NULL, (unsigned)g.n);
    pthread_t th[MAXR];
    for (int r = 0; r < g.n; r++) pthread_create(&th[r], NULL, rank_main, (void *)(intptr_t)r);
    for (int r = 0; r < g.n; r++) pthread_join(th[r], NULL);
    int rc = 0;
    for (int r = 0; r < g.n; r++)
        if (g.st[r] != KK_OK)
            fprintf(stderr, "kk_comm_bench: rank %d: %s\n", r, g.message[r]), rc = 1;
    int version = 0;
    if (!g.loopback) kk_comm_nccl_available(NULL, &version);
    printf("{\"schema\": \"kernelkit.comm_bench/1\", \"backend\": \"%s\", \"nccl_version\": %d, "
           "\"ranks\": %d, \"dtype\": \"%s\", \"iters\": %d, \"warmup\": %d,\n \"results\": [",
           kk_comm_backend(g.comms[0]), version, g.n, kk_dtype_name(g.dtype), g.iters, g.warmup);
    for (int s = 0; rc == 0 && s < g.nsizes; s++) {
        double t = 0;
        for (int r = 0; r < g.n; r++) t = g.seconds[r][s] > t ? g.seconds[r][s] : t;
        const double algbw = g.sizes[s] / t / 1e9, busbw = algbw * 2 * (g.n - 1) / g.n;
        printf("%s\n  {\"bytes\": %zu, \"time_us\": %.3f, \"algbw_GBps\": %.3f, "
               "\"busbw_GBps\": %.3f}",
               s ? "," : "", g.sizes[s], t * 1e6, algbw, busbw);
    }
    printf("]}\n");
    for (int r = 0; r < g.n; r++) kk_comm_destroy(g.comms[r]);
    pthread_barrier_destroy(&g.barrier);
    return rc;
}
