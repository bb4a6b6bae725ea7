/* Block-size sweep of the CPU Linear epilogue fusion (docs/backends/cpu.md):
 * times f32 gemm (sgemm alone) and linear + gelu_erf with blocks of 64..1024
 * rows and with the built-in block, interleaved round by round so
 * that drift on a shared machine hits every variant alike; prints the median
 * of each and its ratio to sgemm. (The built-in block is the rows whose f32
 * product fills KK__GEMM_BLOCK_BYTES, src/cpu/cpu_gemm_internal.h.)
 * Build and run (see docs/backends/cpu.md):
 *   cc -O2 -fopenmp -Iinclude -Isrc -Ibuild-gemm/include bench/cpu/block_sweep.c \
 *      build-gemm/libkernelkit.a -lcjson -lopenblas -lm -o /tmp/block_sweep
 *   /tmp/block_sweep 512 4096 4096 [rounds] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cpu/cpu_gemm_internal.h"
#include "kernelkit/kernelkit.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static kk_tensor *make(int ndim, int64_t d0, int64_t d1) {
    kk_tensor *t = NULL;
    const int64_t shape[2] = {d0, d1};
    if (kk_tensor_create("cpu", KK_DTYPE_F32, ndim, shape, &t) != KK_OK) exit(1);
    float *p = t->data;
    for (int64_t i = 0; i < kk_tensor_numel(t); i++)
        p[i] = (float)((i * 7919 % 2001) - 1000) / 1000.0f;
    return t;
}

int main(int argc, char **argv) {
    const int64_t M = argc > 1 ? atoll(argv[1]) : 512, N = argc > 2 ? atoll(argv[2]) : 4096,
                  K = argc > 3 ? atoll(argv[3]) : 4096;
    const int rounds = argc > 4 ? atoi(argv[4]) : 7;
    /* rows per block; 0 first = sgemm alone, 0 last = the built-in choice */
    static const int64_t rows[] = {0, 64, 128, 256, 512, 1024, 0};
    enum { NV = sizeof rows / sizeof rows[0] };
    kk_tensor *x = make(2, M, K), *w = make(2, N, K), *b = make(1, N, 1), *y = make(2, M, N);
    const kk_op *gemm, *linear;
    kk_op_params pg, pl;
    char text[128];
    kk_op_find("gemm", &gemm);
    kk_op_find("linear", &linear);
    snprintf(text, sizeof text, "M=%lld N=%lld K=%lld dtype=f32", (long long)M, (long long)N,
             (long long)K);
    kk_op_params_parse(gemm, text, &pg);
    snprintf(text, sizeof text, "M=%lld N=%lld K=%lld bias=1 activation=gelu_erf dtype=f32",
             (long long)M, (long long)N, (long long)K);
    kk_op_params_parse(linear, text, &pl);
    double *t = calloc((size_t)(NV * rounds), sizeof *t);
    for (int r = -1; r < rounds; r++) /* round -1 warms up */
        for (int v = 0; v < NV; v++) {
            kk__cpu_gemm_set_blocking(rows[v], 0);
            const double t0 = now();
            kk_status st = v == 0 ? kk_op_run(&pg, (kk_tensor *const[]){x, w, y}, NULL)
                                  : kk_op_run(&pl, (kk_tensor *const[]){x, w, b, y}, NULL);
            if (st != KK_OK) return fprintf(stderr, "%s\n", kk_last_error_message()), 1;
            if (r >= 0) t[v * rounds + r] = now() - t0;
        }
    double base = 0.0;
    for (int v = 0; v < NV; v++) {
        qsort(t + v * rounds, (size_t)rounds, sizeof *t, cmp);
        const double med = t[v * rounds + rounds / 2];
        if (v == 0) base = med;
        char label[64];
        if (v == 0)
            snprintf(label, sizeof label, "gemm f32 (sgemm alone)");
        else if (v == NV - 1)
            snprintf(label, sizeof label, "linear gelu_erf, built-in block");
        else
            snprintf(label, sizeof label, "linear gelu_erf, %lld-row blocks", (long long)rows[v]);
        printf("%-34s median %8.3f ms  ratio to sgemm %.3f\n", label, 1e3 * med, med / base);
    }
    kk__cpu_gemm_set_blocking(0, 0);
    return 0;
}
