/* The single-thread proxy of docs/backends/cpu.md ("Row ops at AVX-512"): the
 * minimum over `reps` runs of one op's thread CPU time (CLOCK_THREAD_CPUTIME_ID,
 * so time the thread spent descheduled by other work does not count), or of a
 * memcpy ("copy" BYTES: GB/s counted as kernelkit calibrate does, 2x bytes).
 * Inputs: uniform in [-2, 2). Run with KK_NUM_THREADS=1; RB_WALL=1 for wall time;
 * RB_DUMP=FILE writes every tensor's bytes after the runs (cmp of two builds' files:
 * the same bits).
 *   cc -O2 -Iinclude -I<build>/include rowtime.c -L<build> -lkernelkit -o rowtime
 *   KK_NUM_THREADS=1 ./rowtime rmsnorm "rows=8192 n=4096 dtype=bf16" 8
 *   KK_NUM_THREADS=1 ./rowtime copy 268435456 8 */
#include <kernelkit/kernelkit.h>
#include <kernelkit/op.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) {
    struct timespec t;
    clock_gettime(getenv("RB_WALL") ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
int main(int argc, char **argv) {
    if (!strcmp(argv[1], "copy")) { /* memcpy of argv[2] bytes, GB/s as calibrate counts (2x) */
        size_t nb = (size_t)atoll(argv[2]);
        int reps = argc > 3 ? atoi(argv[3]) : 20;
        char *a = malloc(nb), *b = malloc(nb);
        memset(a, 1, nb);
        memset(b, 2, nb);
        double best = 1e9;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            memcpy(b, a, nb);
            double t = now() - t0;
            if (t < best) best = t;
        }
        printf("copy %zu bytes: min %.3f ms  %.2f GB/s\n", nb, best * 1e3, 2.0 * nb / best / 1e9);
        return 0;
    }
    const kk_op *op;
    kk_op_params p;
    if (kk_op_find(argv[1], &op) || kk_op_params_parse(op, argv[2], &p)) {
        fprintf(stderr, "bad\n");
        return 1;
    }
    int reps = argc > 3 ? atoi(argv[3]) : 20;
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    int n;
    kk_op_tensors(&p, d, &n);
    kk_tensor *t[KK_OP_MAX_TENSORS];
    unsigned s = 12345;
    for (int k = 0; k < n; k++) {
        if (kk_tensor_create("cpu", d[k].dtype, d[k].ndim, d[k].shape, &t[k])) {
            fprintf(stderr, "alloc\n");
            return 1;
        }
        void *data = t[k]->data;
        for (int64_t i = 0; i < d[k].numel; i++) {
            s = s * 1664525u + 1013904223u;
            float f = ((s >> 8) / 16777216.0f) * 4.0f - 2.0f;
            unsigned u;
            memcpy(&u, &f, 4);
            if (d[k].dtype == KK_DTYPE_F32)
                ((float *)data)[i] = f;
            else if (d[k].dtype == KK_DTYPE_BF16)
                ((unsigned short *)data)[i] = (unsigned short)(u >> 16);
            else if (d[k].dtype == KK_DTYPE_INT32)
                ((int *)data)[i] = (int)(i % 4096);
            else
                memset(data, 0, 1);
        }
    }
    double *ts = malloc(sizeof(double) * reps);
    for (int r = -2; r < reps; r++) {
        double t0 = now();
        if (kk_op_run(&p, t, NULL)) {
            fprintf(stderr, "run: %s\n", kk_last_error_message());
            return 1;
        }
        if (r >= 0) ts[r] = now() - t0;
    }
    if (getenv("RB_DUMP")) { /* every tensor's bytes, for cmp between builds */
        FILE *f = fopen(getenv("RB_DUMP"), "wb");
        for (int k = 0; k < n; k++) fwrite(t[k]->data, 1, kk_tensor_nbytes(t[k]), f);
        fclose(f);
    }
    qsort(ts, reps, sizeof *ts, cmp);
    if (getenv("RB_ALL"))
        for (int r = 0; r < reps; r++) fprintf(stderr, "%.2f ", ts[r] * 1e3);
    printf("%-14s %-40s min %8.3f ms  med %8.3f ms\n", argv[1], argv[2], ts[0] * 1e3,
           ts[reps / 2] * 1e3);
    return 0;
}
