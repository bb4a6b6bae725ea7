/* Shared helpers for the cmocka tests. Include after <cmocka.h>'s prerequisites. */
#ifndef KK_TESTUTIL_H
#define KK_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernelkit/harness.h"
#include "ops/dispatch.h"

/* Exit code that CTest reports as SKIPPED. */
#define KK_TEST_SKIP 77

/* Assert a call returned `expected`, printing the last error when it did not. */
#define kk_assert_status(call, expected)                                                           \
    do {                                                                                           \
        kk_status kk__got = (call);                                                                \
        if (kk__got != (expected))                                                                 \
            fail_msg("%s returned %s, expected %s; last error: %s", #call,                         \
                     kk_status_name(kk__got), kk_status_name(expected), kk_last_error_message());  \
    } while (0)

#define kk_assert_ok(call) kk_assert_status((call), KK_OK)

/* Assert `haystack` contains `needle`. */
#define kk_assert_contains(haystack, needle)                                                       \
    do {                                                                                           \
        const char *kk__h = (haystack), *kk__n = (needle);                                         \
        if (!kk__h || !strstr(kk__h, kk__n))                                                       \
            fail_msg("expected \"%s\" to contain \"%s\"", kk__h ? kk__h : "(null)", kk__n);        \
    } while (0)

/* For tests labelled gpu: returns non-zero (and prints why) when no usable
 * CUDA device is present, so main() can return KK_TEST_SKIP. */
int kk_test_no_gpu(void);

/* For tests of sm_90a kernels: non-zero (and prints why) when cuda:0 is not
 * compute capability 9.0; `what` names the kernel in the message. */
int kk_test_no_hopper(const char *what);

/* One case of op `op_name` with parameters `text` on the CPU, drawn from
 * `seed`, checked against the float64 reference; `kernel` replaces the CPU
 * slot (a wrong kernel, to prove a check fails), NULL keeps the registry's.
 * Prints one line per case. */
kk_case_result kk_test_run_cpu_case(const char *op_name, const char *text, kk_op_kernel_fn kernel,
                                    uint64_t seed);

/* The registry's row of op `name` (the test fails if there is none). */
const kk_op *kk_test_op(const char *name);

/* One case of `row` with parameters `text` on `device` (e.g. "cuda:0"), its
 * inputs drawn from `seed`, checked against the float64 reference with the
 * tolerance of that device's kernels. Prints one line per case (status, op,
 * parameters, max abs, max rel, rel L2, message). */
kk_case_result kk_test_run_case_on(const char *device, const kk_op *row, const char *text,
                                   uint64_t seed);

/* Case `text` of op `op` PASSes on `device` with the registry's kernel and
 * FAILs with `wrong` in its place (the check shown able to fail). */
void kk_test_wrong_kernel_fails(const char *device, const char *op, const char *text,
                                kk_op_kernel_fn wrong, uint64_t seed);

/* Case c run with `o`: PASS when `in_kernel` (the device's kernel takes it;
 * *passed counts them), else SKIP saying the kernel "does not support" it. */
void kk_test_expect_verdict(const kk_case *c, const kk_run_options *o, int in_kernel, int *passed);

/* Largest |g - the central finite difference of loss(ctx)| over x[0..n)
 * (step 1e-6), relative to the largest |g| (at least 1e-3): a reference
 * gradient g of loss against x, checked. x is restored. */
double kk_test_fd_error(double (*loss)(void *ctx), void *ctx, double *x, const double *g,
                        int64_t n);

/* `count` fuzz cases (seed 42) of the varlen op `op` pass on the CPU, and the
 * draw covers empty sequences and unequal query and key lengths. */
void kk_test_varlen_fuzz_passes(const char *op, int count);

/* One case's tensors twice, on the CPU and on `device`, the inputs drawn on
 * the host from `seed` and copied to the device (outputs left as made): a
 * kernel's result compared with its CPU twin's on the same inputs. */
typedef struct kk_test_pair {
    kk_op_params p;
    int n;
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    kk_tensor *host[KK_OP_MAX_TENSORS], *dev[KK_OP_MAX_TENSORS];
} kk_test_pair;

void kk_test_pair_open(kk_test_pair *s, const char *device, const char *op, const char *text,
                       uint64_t seed);
void kk_test_pair_close(kk_test_pair *s);

/* Write `text` to a new temporary file; returns its path (static buffer). */
const char *kk_test_write_temp(const char *text, size_t len);

/* Run a shell command, capture stdout+stderr into buf; returns the exit code. */
int kk_test_run(const char *cmd, char *buf, size_t size);

#endif
