/* Internal: running an op's kernel on a device from host buffers, shared by
 * the case runner (check_case.c) and kk_run_kernel_host (run_kernel.c). */
#ifndef KK_HARNESS_RUNNER_INTERNAL_H
#define KK_HARNESS_RUNNER_INTERNAL_H

#include "kernelkit/cases.h"

typedef struct kk__kernel_run {
    int variant;              /* in: poison variant written to every output first */
    void *const *inputs_back; /* in: NULL, or host buffers (kk_op_tensors order) that
                                 receive the device's inputs after the run */
    int strict;               /* in: no CPU fallback (the checker: a case reported on a
                                 device ran there) */
    double ms;                /* out: the kernel call, host clock */
    int kernel_failed;        /* out: the error came from the kernel itself */
} kk__kernel_run;

/* Allocate every tensor on `device`, copy the inputs of `bufs` in, poison the
 * outputs, run the op's kernel for that device (kk_op_run, or with
 * run->strict its kernel alone, on the legacy default stream, then
 * kk_op_synchronize), copy the outputs back into `bufs` (and the inputs
 * into run->inputs_back), free. The kernel's own error is returned as is with
 * run->kernel_failed set; any other error is a setup or copy failure. */
kk_status kk__run_kernel(const kk_op_params *p, const char *device, void *const *bufs,
                         kk__kernel_run *run);

/* The tensors of case c on `device`, inputs filled from its seed (bench_case.c).
 * *n is set to the count even on failure; destroy tensors[0..*n) either way. */
kk_status kk__case_tensors(const kk_case *c, const char *device, kk_tensor **tensors, int *n);

/* Milliseconds of a monotonic clock. */
double kk__runner_now_ms(void);

#endif
