/* Running a kernel on a device from host buffers, and the pieces of
 * `kernelkit run`: the kernel or the float64 reference on host data.
 *
 * The kernel always gets tensors of its own, allocated on its device by the
 * memory manager, even on the CPU: the caller's buffers (and the reference's
 * float64 copies) are never the kernel's, so a kernel that writes out of
 * bounds or into its inputs cannot corrupt what it is checked against. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "ops/dispatch.h"
#include "harness/check/check_internal.h"

double kk__runner_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

typedef struct session {
    int n;
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    kk_tensor *dev[KK_OP_MAX_TENSORS];  /* the kernel's tensors */
    kk_tensor *host[KK_OP_MAX_TENSORS]; /* wrappers of the caller's buffers */
} session;

static void session_free(session *s) {
    for (int k = 0; k < s->n; k++) {
        kk_tensor_destroy(s->dev[k]);
        kk_tensor_destroy(s->host[k]);
    }
}

static kk_status session_open(session *s, const kk_op_params *p, const char *device,
                              void *const *bufs) {
    memset(s, 0, sizeof *s);
    kk_status st = kk_op_tensors(p, s->t, &s->n);
    for (int k = 0; st == KK_OK && k < s->n; k++) {
        st = kk_tensor_create(device, s->t[k].dtype, s->t[k].ndim, s->t[k].shape, &s->dev[k]);
        if (st == KK_OK)
            st = kk_tensor_wrap("cpu", s->t[k].dtype, s->t[k].ndim, s->t[k].shape, NULL,
                                s->t[k].numel ? bufs[k] : NULL, &s->host[k]);
        if (st == KK_OK && !s->t[k].is_output) st = kk_tensor_copy(s->dev[k], s->host[k]);
    }
    return st;
}

/* Poison output k in its host buffer and copy that to the device. */
static kk_status poison_output(session *s, int k, void *buf, int variant) {
    kk_status st = kk_poison(buf, s->t[k].dtype, (size_t)s->t[k].numel, variant);
    return st == KK_OK ? kk_tensor_copy(s->dev[k], s->host[k]) : st;
}

static kk_status copy_back(session *s, void *const *inputs_back) {
    kk_status st = KK_OK;
    for (int k = 0; st == KK_OK && k < s->n; k++) {
        if (s->t[k].is_output) {
            st = kk_tensor_copy(s->host[k], s->dev[k]);
        } else if (inputs_back && s->t[k].numel) {
            kk_tensor *back;
            st = kk_tensor_wrap("cpu", s->t[k].dtype, s->t[k].ndim, s->t[k].shape, NULL,
                                inputs_back[k], &back);
            if (st == KK_OK) st = kk_tensor_copy(back, s->dev[k]);
            kk_tensor_destroy(back);
        }
    }
    return st;
}

kk_status kk__run_kernel(const kk_op_params *p, const char *device, void *const *bufs,
                         kk__kernel_run *run) {
    session s;
    run->kernel_failed = 0;
    run->ms = 0.0;
    kk_status st = session_open(&s, p, device, bufs);
    for (int k = 0; st == KK_OK && k < s.n; k++)
        if (s.t[k].is_output && s.t[k].numel) st = poison_output(&s, k, bufs[k], run->variant);
    if (st == KK_OK) {
        kk_clear_error(); /* what the kernel records is then its own */
        const double t0 = kk__runner_now_ms();
        st = kk__op_run_with(p, s.dev, NULL, NULL, run->strict ? KK__RUN_STRICT : 0);
        if (st == KK_OK) st = kk_op_synchronize(device, NULL);
        run->ms = kk__runner_now_ms() - t0;
        run->kernel_failed = st != KK_OK;
    }
    if (st == KK_OK) st = copy_back(&s, run->inputs_back);
    session_free(&s);
    return st;
}

static kk_status check_buffers(const kk_op_params *p, void *const *buffers, int *n,
                               kk_op_tensor *t) {
    kk_status st = KK__CHECK_NOT_NULL(buffers);
    if (st == KK_OK) st = kk_op_tensors(p, t, n);
    for (int k = 0; st == KK_OK && k < *n; k++)
        if (t[k].numel && !buffers[k])
            st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_run", t[k].name,
                               "a host buffer for every tensor", "NULL");
    return st;
}

kk_status kk_run_kernel_host(const kk_op_params *p, const char *device, void *const *buffers) {
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_backend_kind kind;
    int index;
    kk_status st = check_buffers(p, buffers, &n, t);
    if (st == KK_OK) st = kk_device_parse(device ? device : kk_device_best(), &kind, &index);
    if (st != KK_OK) return st;
    const kk_op_kernel_fn kernel = kk__op_slot(p->op, kind).run;
    if (!kernel) {
        char have[64];
        kk_op_backends_format(p->op, have, sizeof have);
        return kk__error(KK_ERR_UNSUPPORTED, p->op->name,
                         "no %s kernel for %s (kernels: %s); --device reference runs the "
                         "float64 reference",
                         kk_backend_name(kind), p->op->name, have);
    }
    kk__kernel_run run = {.variant = 0, .inputs_back = NULL};
    return kk__run_kernel(p, device ? device : kk_device_best(), buffers, &run);
}

kk_status kk_run_reference_host(const kk_op_params *p, void *const *buffers) {
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    double *f64[KK_OP_MAX_TENSORS] = {0};
    int n = 0, nin = 0;
    kk_status st = check_buffers(p, buffers, &n, t);
    for (int k = 0; st == KK_OK && k < n; k++) {
        f64[k] = malloc((size_t)(t[k].numel ? t[k].numel : 1) * sizeof(double));
        if (!f64[k]) {
            st = kk__error(KK_ERR_OUT_OF_MEMORY, "kk_run_reference_host",
                           "no host memory for the float64 copy of %s", t[k].name);
        } else if (!t[k].is_output) {
            nin++;
            st = kk_convert_host(buffers[k], t[k].dtype, f64[k], KK_DTYPE_F64, (size_t)t[k].numel);
        }
    }
    if (st == KK_OK) st = kk_op_reference(p, (const double *const *)f64, f64 + nin);
    for (int k = nin; st == KK_OK && k < n; k++)
        st = kk_convert_host(f64[k], KK_DTYPE_F64, buffers[k], t[k].dtype, (size_t)t[k].numel);
    for (int k = 0; k < n; k++) free(f64[k]);
    return st;
}
