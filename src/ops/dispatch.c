/* kk_op_run: run a registered op on tensors where they live, through the
 * kernel slot of the tensors' backend, or on the CPU with one logged warning
 * when that backend lacks the op. Every tensor is checked against what the
 * parameters describe first, so a caller's mistake is an error naming the
 * tensor, never a wild access inside a kernel. docs/architecture.md, "Kernels of an op". */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log_internal.h"
#include "core/tensor_internal.h"
#include "ops/dispatch.h"

#define FUNC "kk_op_run"

/* ---- the slot table: each backend's `slots`, by op id ---- */

kk__slot kk__op_slot(const kk_op *op, kk_backend_kind backend) {
    const kk__backend *b = kk__backend_get(backend);
    kk__slot none = {NULL, 0};
    if (!op || !b) return none;
    const kk__slot *own =
        b->slots && op->id >= 0 && op->id < KK__OP_COUNT ? b->slots[op->id] : NULL;
    if (op->swapped) {
        kk__slot swapped = {op->swapped_kernels[backend],
                            (int)(op->swapped_strided >> backend) & 1};
        return swapped;
    }
    return own ? *own : none;
}

unsigned kk_op_backends(const kk_op *op) {
    unsigned mask = 0;
    for (int b = 0; op && b < KK_BACKEND_COUNT; b++)
        if (kk__op_slot(op, (kk_backend_kind)b).run) mask |= 1u << b;
    return mask;
}

int kk_op_has_kernel(const kk_op *op, kk_backend_kind backend) {
    return (int)backend >= 0 && backend < KK_BACKEND_COUNT && kk__op_slot(op, backend).run != NULL;
}

kk_status kk_op_backends_format(const kk_op *op, char *buf, size_t size) {
    kk_status st = KK__CHECK_NOT_NULL(op);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(buf);
    if (st != KK_OK || size == 0) return st;
    buf[0] = '\0';
    for (int b = 0; b < KK_BACKEND_COUNT; b++)
        if (kk_op_has_kernel(op, (kk_backend_kind)b)) {
            const size_t used = strlen(buf);
            snprintf(buf + used, size - used, "%s%s", used ? ", " : "",
                     kk_backend_name((kk_backend_kind)b));
        }
    if (!buf[0]) snprintf(buf, size, "none");
    return KK_OK;
}

static void swap_begin(kk_op *row) {
    if (row->swapped) return;
    row->swapped_strided = 0;
    for (int b = 0; b < KK_BACKEND_COUNT; b++) {
        const kk__slot own = kk__op_slot(row, (kk_backend_kind)b);
        row->swapped_kernels[b] = own.run;
        row->swapped_strided |= own.strided ? 1u << b : 0;
    }
    row->swapped = 1;
}

void kk__op_swap(kk_op *row, kk_backend_kind backend, kk_op_kernel_fn kernel) {
    swap_begin(row);
    row->swapped_kernels[backend] = kernel;
}

void kk__op_swap_none(kk_op *row) {
    swap_begin(row);
    for (int b = 0; b < KK_BACKEND_COUNT; b++) row->swapped_kernels[b] = NULL;
}

void kk__op_swap_strided(kk_op *row, kk_backend_kind backend, int strided) {
    swap_begin(row);
    row->swapped_strided =
        (row->swapped_strided & ~(1u << backend)) | (strided ? 1u << backend : 0);
}

static void shape_text(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used +=
            (size_t)snprintf(buf + used, size - used, "%s%lld", d ? "," : "", (long long)shape[d]);
    if (used < size) snprintf(buf + used, size - used, "]");
}

static kk_status check_tensor(const kk_op_params *p, const kk_op_tensor *want, const kk_tensor *t,
                              const kk_tensor *first) {
    char expected[192], got[192];
    if (!t)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, p->op->name, want->name, "a tensor", "NULL");
    if (t->dtype != want->dtype) {
        char e[224];
        snprintf(e, sizeof e, "dtype %s", kk_dtype_name(want->dtype));
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, p->op->name, want->name, e, "dtype %s",
                             kk_dtype_name(t->dtype));
    }
    int same = t->ndim == want->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == want->shape[d];
    /* Any shape with the right count is accepted when the op's own shape has
   * one dimension (a flat [n]), as convert's. */
    if (!same && !(want->ndim == 1 && kk_tensor_numel(t) == want->numel)) {
        /* text only on the error path: this check runs on every call */
        shape_text(want->shape, want->ndim, expected, sizeof expected);
        shape_text(t->shape, t->ndim, got, sizeof got);
        char e[224];
        snprintf(e, sizeof e, "shape %s", expected);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, p->op->name, want->name, e, "shape %s", got);
    }
    const int strided = kk__op_slot(p->op, t->device_kind).strided;
    const int strided_ok = strided && (t->ndim == 0 || t->strides[t->ndim - 1] == 1);
    if (!kk_tensor_is_contiguous(t) && !strided_ok)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, p->op->name, want->name,
                             strided ? "the innermost dimension contiguous (stride 1)"
                                     : "a contiguous tensor (kk_tensor_copy into a new "
                                       "tensor makes one)",
                             "strided");
    if (t->device_kind != first->device_kind || t->device_index != first->device_index)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, p->op->name, want->name,
                             "every tensor on one device", "%s (the first is on %s)", t->device,
                             first->device);
    if (want->is_output) return kk__check_writable(p->op->name, want->name, t);
    return KK_OK;
}

static kk_status check_tensors(const kk_op_params *p, kk_tensor *const *tensors, int *n,
                               kk_op_tensor *want) {
    kk_status st = kk_op_tensors(p, want, n);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(tensors);
    for (int k = 0; st == KK_OK && k < *n; k++)
        st = check_tensor(p, &want[k], tensors[k], tensors[0]);
    return st;
}

/* ---- the CPU fallback ---- */

static atomic_uint warned[KK__OP_COUNT]; /* per op: a bit per backend that has warned */

static void warn_once(const kk_op *op, const kk_tensor *t, const char *why) {
    /* by id: a test's copy of a row shares its original's flag */
    const unsigned bit = 1u << t->device_kind;
    if (op->id >= 0 && op->id < KK__OP_COUNT && (atomic_fetch_or(&warned[op->id], bit) & bit))
        return;
    KK_LOG(KK_LOG_WARN, "kernelkit.ops",
           "the device's kernel does not run this; running it on the CPU", KK_F_STR("op", op->name),
           KK_F_STR("device", t->device), KK_F_STR("backend", kk_backend_name(t->device_kind)),
           KK_F_STR("reason", why));
}

static kk_status run_on_cpu(const kk_op_params *p, kk_tensor *const *tensors, int n,
                            const kk_op_tensor *want) {
    kk_tensor *host[KK_OP_MAX_TENSORS] = {0};
    kk_status st = KK_OK;
    for (int k = 0; st == KK_OK && k < n; k++) {
        st = kk_tensor_create("cpu", want[k].dtype, want[k].ndim, want[k].shape, &host[k]);
        if (st == KK_OK && !want[k].is_output && want[k].numel)
            st = kk_tensor_copy(host[k], tensors[k]);
    }
    if (st == KK_OK) st = kk__op_slot(p->op, KK_BACKEND_CPU).run(p, host, NULL);
    for (int k = 0; st == KK_OK && k < n; k++)
        if (want[k].is_output && want[k].numel) st = kk_tensor_copy(tensors[k], host[k]);
    for (int k = 0; k < n; k++) kk_tensor_destroy(host[k]);
    return st;
}

/* ---- dispatch ---- */

typedef struct launch_job {
    const kk_op_params *p;
    kk_tensor *const *tensors;
    kk_stream stream;
    kk_op_kernel_fn kernel;
} launch_job;

static kk_status launch(void *arg) {
    const launch_job *j = arg;
    return j->kernel(j->p, j->tensors, j->stream);
}

kk_status kk_op_run(const kk_op_params *p, kk_tensor *const *tensors, kk_stream stream) {
    return kk__op_run_with(p, tensors, stream, NULL, 0);
}

/* The CPU instead of the tensors' backend: stream order first (what the
 * caller queued before must be done), one warning per op and backend. */
static kk_status fall_back(const kk_op_params *p, kk_tensor *const *tensors, kk_stream stream,
                           int n, const kk_op_tensor *want, const char *why) {
    const kk_tensor *t0 = tensors[0];
    warn_once(p->op, t0, why);
    kk_status st = kk_op_synchronize(t0->device, stream);
    return st == KK_OK ? run_on_cpu(p, tensors, n, want) : st;
}

/* ---- the host-overhead benchmark's hook ----
 * kk_op_host_overhead times the typed entry points (kernelkit/ops.h), which
 * reach kk__op_run_with through kk_op_run with no override of their own; this
 * thread-local kernel stands in for the row's slot on the calling thread while
 * it is set. Nothing else sets it. */
static _Thread_local kk_op_kernel_fn thread_kernel_override;

void kk__op_run_set_thread_override(kk_op_kernel_fn kernel) { thread_kernel_override = kernel; }

/* ---- no CPU fallback on this thread (a CUDA graph capture) ---- */
static _Thread_local int thread_strict;

void kk__op_run_set_thread_strict(int on) { thread_strict = on; }

kk_status kk__op_run_with(const kk_op_params *p, kk_tensor *const *tensors, kk_stream stream,
                          kk_op_kernel_fn override, unsigned flags) {
    kk_op_tensor want[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_status st = check_tensors(p, tensors, &n, want);
    if (st != KK_OK) return st;
    const kk_tensor *t0 = tensors[0];
    if (!override) override = thread_kernel_override; /* the host-overhead benchmark's */
    const kk_op_kernel_fn kernel = override ? override : kk__op_slot(p->op, t0->device_kind).run;
    const int can_fall_back = !(flags & KK__RUN_STRICT) && !thread_strict &&
                              t0->device_kind != KK_BACKEND_CPU &&
                              kk__op_slot(p->op, KK_BACKEND_CPU).run;
    if (!kernel) {
        if (can_fall_back) return fall_back(p, tensors, stream, n, want, "no kernel for this op");
        char have[64];
        kk_op_backends_format(p->op, have, sizeof have);
        return kk__error(KK_ERR_UNSUPPORTED, p->op->name, "no kernel for %s on %s (kernels: %s)",
                         p->op->name, t0->device, have);
    }
    const kk__backend *backend = kk__backend_get(t0->device_kind);
    if (!backend->call_on_device) return kernel(p, tensors, backend->stream_sync ? stream : NULL);
    launch_job j = {.p = p, .tensors = tensors, .stream = stream, .kernel = kernel};
    st = backend->call_on_device(backend->context, t0->device_index, launch, &j);
    /* A slot answers KK_ERR_UNSUPPORTED, having enqueued nothing, for a
   * configuration its kernels do not cover (an f32 attention on CUDA). */
    if (st == KK_ERR_UNSUPPORTED && can_fall_back) {
        char why[256];
        snprintf(why, sizeof why, "%s", kk_last_error_message());
        return fall_back(p, tensors, stream, n, want, why);
    }
    return st;
}

kk_status kk_op_synchronize(const char *device, kk_stream stream) {
    kk_backend_kind kind;
    int index;
    kk_status st = kk_device_parse(device, &kind, &index);
    if (st != KK_OK) return st;
    const kk__backend *backend = kk__backend_get(kind);
    if (!backend->stream_sync) return KK_OK;
    return backend->stream_sync(backend->context, index, stream, "kk_op_synchronize");
}
