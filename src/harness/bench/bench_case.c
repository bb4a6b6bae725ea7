/* kk_case_bench: time one case's kernel on a device with the sampler. The
 * tensors are allocated and filled once; every timed run calls the kernel on
 * them (a kernel overwrites its outputs, so repeated runs do the same work). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernelkit/bench.h"
#include "harness/check/check_internal.h"
#include "ops/dispatch.h"
#include "kernelkit/cases.h"

typedef struct bench_job {
    const kk_op_params *p;
    kk_op_kernel_fn kernel;
    kk_tensor *dev[KK_OP_MAX_TENSORS];
} bench_job;

/* The sampler has made the tensors' device current and passes its stream:
 * the kernel slot is called as kk_op_run would call it, without the checks,
 * which setup() made true once (they are host overhead, measured apart). */
static kk_status run_once(void *ctx, kk_stream stream) {
    bench_job *j = ctx;
    return j->kernel(j->p, j->dev, stream);
}

/* Allocate the tensors on `device` and copy inputs drawn from the seed in. */
kk_status kk__case_tensors(const kk_case *c, const char *device, kk_tensor **tensors, int *n) {
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    void *host[KK_OP_MAX_TENSORS] = {0};
    kk_status st = kk_op_tensors(&c->params, t, n);
    for (int k = 0; st == KK_OK && k < *n; k++) {
        st = kk_tensor_create(device, t[k].dtype, t[k].ndim, t[k].shape, &tensors[k]);
        if (st == KK_OK && !t[k].is_output) {
            const size_t bytes = kk_dtype_bytes(t[k].dtype, (size_t)t[k].numel);
            host[k] = malloc(bytes ? bytes : 1);
            if (!host[k])
                st = kk__error(KK_ERR_OUT_OF_MEMORY, "kk_case_bench", "no host memory for input %s",
                               t[k].name);
        }
    }
    if (st == KK_OK) st = kk_case_fill_inputs(&c->params, c->seed, c->dist, host);
    for (int k = 0; st == KK_OK && k < *n; k++) {
        if (t[k].is_output || !t[k].numel) continue;
        kk_tensor *h = NULL;
        st = kk_tensor_wrap("cpu", t[k].dtype, t[k].ndim, t[k].shape, NULL, host[k], &h);
        if (st == KK_OK) st = kk_tensor_copy(tensors[k], h);
        kk_tensor_destroy(h);
    }
    for (int k = 0; k < *n; k++) free(host[k]);
    return st;
}

kk_status kk_case_bench(const kk_case *c, const char *device, const kk_bench_options *opt,
                        kk_bench_measurement *out) {
    kk_status st = KK__CHECK_NOT_NULL(c);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    memset(out, 0, sizeof *out);
    if (!device) device = kk_device_best();
    kk_backend_kind kind;
    int index;
    if ((st = kk_device_parse(device, &kind, &index)) != KK_OK) return st;
    const kk_op_kernel_fn kernel = kk__op_slot(c->params.op, kind).run;
    if (!kernel) {
        char have[64];
        kk_op_backends_format(c->params.op, have, sizeof have);
        return kk__error(KK_ERR_UNSUPPORTED, c->params.op->name,
                         "no %s kernel for %s (kernels: %s)", kk_backend_name(kind),
                         c->params.op->name, have);
    }
    kk_bench_options o;
    if (opt)
        o = *opt;
    else
        kk_bench_options_default(&o);
    bench_job j = {.p = &c->params, .kernel = kernel};
    int n = 0;
    st = kk__case_tensors(c, device, j.dev, &n);
    if (st == KK_OK) st = kk_bench_measure(device, run_once, &j, &o, out);
    for (int k = 0; k < n; k++) kk_tensor_destroy(j.dev[k]);
    return st;
}
