/* The case runner: one case from its seed to a verdict. It skips what cannot
 * run here, runs the float64 reference, runs the kernel with poisoned outputs
 * (twice, with two poisons, where poison could pass unnoticed), checks that the
 * inputs are untouched and every output is within tolerance.
 * docs/harness.md, "Running a case" and "Poison". */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/dispatch.h"
#include "harness/check/check_internal.h"

typedef struct bufs {
    int n, nin;
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    void *raw[KK_OP_MAX_TENSORS];  /* inputs; outputs of the first run */
    void *raw1[KK_OP_MAX_TENSORS]; /* outputs of the second run */
    void *back[KK_OP_MAX_TENSORS]; /* inputs as the kernel left them */
    double *f64[KK_OP_MAX_TENSORS];
    double *mag[KK_OP_MAX_TENSORS]; /* outputs' magnitudes, when the op has the hook */
} bufs;

static void bufs_free(bufs *b) {
    for (int k = 0; k < KK_OP_MAX_TENSORS; k++) {
        free(b->raw[k]);
        free(b->raw1[k]);
        free(b->back[k]);
        free(b->f64[k]);
        free(b->mag[k]);
    }
}

static size_t raw_bytes(const kk_op_tensor *t) {
    const size_t b = kk_dtype_bytes(t->dtype, (size_t)t->numel);
    return b ? b : 1;
}

static int bufs_alloc(bufs *b, const kk_op_params *p) {
    memset(b, 0, sizeof *b);
    if (kk_op_tensors(p, b->t, &b->n) != KK_OK) return 0;
    for (int k = 0; k < b->n; k++) {
        b->nin += !b->t[k].is_output;
        b->raw[k] = malloc(raw_bytes(&b->t[k]));
        b->f64[k] = malloc((size_t)(b->t[k].numel ? b->t[k].numel : 1) * sizeof(double));
        if (b->t[k].is_output)
            b->raw1[k] = malloc(raw_bytes(&b->t[k]));
        else
            b->back[k] = malloc(raw_bytes(&b->t[k]));
        if (!b->raw[k] || !b->f64[k] || !(b->raw1[k] || b->back[k])) return 0;
        if (b->t[k].is_output && kk_op_has_magnitude(p->op) &&
            !(b->mag[k] = malloc((size_t)(b->t[k].numel ? b->t[k].numel : 1) * sizeof(double))))
            return 0;
    }
    return 1;
}

static void verdict_v(kk_case_result *r, kk_case_status status, const char *fmt, va_list ap) {
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    r->status = status;
    kk_clear_error(); /* the verdict carries the message now */
}

static void verdict(kk_case_result *r, kk_case_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void verdict(kk_case_result *r, kk_case_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verdict_v(r, status, fmt, ap);
    va_end(ap);
}

/* A SKIP verdict; returns 1 (for cannot_run). */
static int skip(kk_case_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int skip(kk_case_result *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verdict_v(r, KK_CASE_SKIP, fmt, ap);
    va_end(ap);
    return 1;
}

/* Step 1: a reason to skip, written into r; 0 when the case can run. */
static int cannot_run(const kk_case *c, const kk_run_options *o, const char *device,
                      kk_backend_kind kind, kk_case_result *r) {
    const kk_op *op = c->params.op;
    char have[64];
    kk_op_backends_format(op, have, sizeof have);
    if (!kk__op_slot(op, kind).run)
        return skip(r, "no %s kernel for %s (kernels: %s)", kk_backend_name(kind), op->name, have);
    const double flops = kk_op_flops(&c->params);
    if (o->max_ref_flops > 0 && flops > o->max_ref_flops)
        return skip(r,
                    "the float64 reference needs %.1f GFLOP, over the %.1f GFLOP limit "
                    "(--max-ref-gflop)",
                    flops * 1e-9, o->max_ref_flops * 1e-9);
    kk_case_memory need;
    kk_device_info info, host; /* a GPU's info has no host fields: ask the CPU's */
    if (!o->check_memory || kk_case_memory_need(&c->params, &need) != KK_OK ||
        kk_device_get_info(device, &info) != KK_OK || kk_device_get_info("cpu", &host) != KK_OK)
        return 0;
    /* On the CPU the device copies live in host memory too. */
    const double host_need =
        (double)need.host_bytes + (kind == KK_BACKEND_CPU ? (double)need.device_bytes : 0.0);
    const int dev_short = kind != KK_BACKEND_CPU && info.mem_free_bytes &&
                          (double)need.device_bytes > 0.9 * (double)info.mem_free_bytes;
    const int host_short =
        host.host_mem_available_bytes && host_need > 0.8 * (double)host.host_mem_available_bytes;
    if (dev_short || host_short)
        return skip(
            r,
            "needs %.2f GiB on %s and %.2f GiB of host memory; free: %.2f GiB and "
            "%.2f GiB",
            (double)need.device_bytes / 0x1p30, device, host_need / 0x1p30,
            (double)(kind == KK_BACKEND_CPU ? host.host_mem_available_bytes : info.mem_free_bytes) /
                0x1p30,
            (double)host.host_mem_available_bytes / 0x1p30);
    return 0;
}

static int has_nan(kk_dtype dt) {
    return dt != KK_DTYPE_E2M1 && dt != KK_DTYPE_INT8 && dt != KK_DTYPE_UINT8 &&
           dt != KK_DTYPE_INT32;
}

static int ref_has_nan(const double *ref, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (isnan(ref[i])) return 1;
    return 0;
}

/* Step 4: does output k need the second run? */
static int needs_second_run(const kk_op *op, const bufs *b, int k) {
    kk_tolerance tol;
    if (!has_nan(b->t[k].dtype)) return 1;
    return kk_op_tolerance(op, b->t[k].dtype, &tol) == KK_OK &&
           (tol.flags & KK_CHECK_ALLOW_NONFINITE) && ref_has_nan(b->f64[k], b->t[k].numel);
}

/* Elements never written: bits that differ between the two runs; for dtypes
 * with NaN only where the reference is NaN (elsewhere the NaN rule already
 * catches surviving poison, and a nondeterministic kernel is not flagged). */
static void count_unwritten(const bufs *b, int k, kk_case_output *o) {
    const kk_op_tensor *t = &b->t[k];
    o->unwritten = 0;
    o->first_unwritten = -1;
    if (!has_nan(t->dtype)) {
        kk_poison_compare(b->raw[k], b->raw1[k], t->dtype, (size_t)t->numel, &o->unwritten,
                          &o->first_unwritten);
        return;
    }
    const size_t w = (size_t)kk_dtype_bits(t->dtype) / 8;
    for (int64_t i = 0; i < t->numel; i++)
        if (isnan(b->f64[k][i]) &&
            memcmp((uint8_t *)b->raw[k] + i * w, (uint8_t *)b->raw1[k] + i * w, w) != 0 &&
            o->unwritten++ == 0)
            o->first_unwritten = i;
}

static void append(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void append(char *buf, size_t size, const char *fmt, ...) {
    const size_t used = strlen(buf);
    if (used + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
}

/* Step 5 for output k, folded into the case's result; the tolerance is the
 * row for what the kernels of `kind` compute (kk__op_tolerance_on). */
static void check_output(const kk_op *op, kk_backend_kind kind, const bufs *b, int k, int second,
                         const double *mag, kk_case_result *r) {
    kk_case_output *o = &r->outputs[r->noutputs++];
    const kk_op_tensor *t = &b->t[k];
    kk_tolerance tol;
    o->name = t->name;
    o->dtype = t->dtype;
    o->first_unwritten = -1;
    if (kk__op_tolerance_on(op, t->dtype, kind, &tol) != KK_OK ||
        kk_check_output_scaled(b->raw[k], t->dtype, b->f64[k], mag, (size_t)t->numel, &tol,
                               &o->check) != KK_OK) {
        r->status = KK_CASE_ERROR;
        append(r->message, sizeof r->message, "%s: %s; ", t->name, kk_last_error_message());
        return;
    }
    if (second) count_unwritten(b, k, o);
    r->max_abs_err = fmax(r->max_abs_err, o->check.max_abs_err);
    r->max_rel_err = fmax(r->max_rel_err, o->check.max_rel_err);
    r->rel_l2_err = fmax(r->rel_l2_err, o->check.rel_l2_err);
    if (o->check.pass && !o->unwritten) return;
    if (r->status == KK_CASE_PASS) r->status = KK_CASE_FAIL;
    char line[384];
    kk_check_result_format(&o->check, line, sizeof line);
    if (!o->check.pass) append(r->message, sizeof r->message, "%s: %s; ", t->name, line);
    if (o->unwritten)
        append(r->message, sizeof r->message, "%s: %zu element(s) never written, first at [%lld]; ",
               t->name, o->unwritten, (long long)o->first_unwritten);
    if (!r->first_bad_tensor) {
        r->first_bad_tensor = t->name;
        r->first_bad = o->check.first_bad >= 0 ? o->check.first_bad : o->first_unwritten;
        r->first_bad_out = o->check.first_bad_out;
        r->first_bad_ref = o->check.first_bad_ref;
    }
}

/* Steps 3 and 4. */
static kk_status run_kernel(const kk_case *c, const char *device, bufs *b, kk_case_result *r,
                            int *second) {
    kk__kernel_run run = {.variant = 0, .inputs_back = b->back, .strict = 1};
    kk_status st = kk__run_kernel(&c->params, device, b->raw, &run);
    r->kernel_runs = 1;
    r->kernel_ms = run.ms;
    *second = 0;
    for (int k = b->nin; k < b->n; k++) *second |= needs_second_run(c->params.op, b, k);
    if (st == KK_OK && *second) {
        void *mixed[KK_OP_MAX_TENSORS];
        for (int k = 0; k < b->n; k++) mixed[k] = b->t[k].is_output ? b->raw1[k] : b->raw[k];
        run = (kk__kernel_run){.variant = 1, .inputs_back = NULL, .strict = 1};
        st = kk__run_kernel(&c->params, device, mixed, &run);
        r->kernel_runs = 2;
    }
    if (st == KK_OK) return KK_OK;
    /* a kernel may return a status without recording a message */
    const char *why = kk_last_error()->status == st ? kk_last_error_message() : "";
    if (run.kernel_failed && st == KK_ERR_UNSUPPORTED)
        verdict(r, KK_CASE_SKIP, "the kernel does not support this case: %s", why);
    else
        verdict(r, KK_CASE_ERROR, "%s returned %s%s%s", run.kernel_failed ? "the kernel" : "setup",
                kk_status_name(st), why[0] ? ": " : "", why);
    return st;
}

/* Does any output's row on backend `kind` apply a magnitude (acc > 0)? The
 * hook costs about a second reference, so it is skipped when none does
 * (attention's f16 and bf16 rows). */
static int wants_magnitude(const kk_op *op, kk_backend_kind kind, const bufs *b) {
    if (!kk_op_has_magnitude(op)) return 0;
    for (int k = b->nin; k < b->n; k++) {
        kk_tolerance tol;
        if (kk__op_tolerance_on(op, b->t[k].dtype, kind, &tol) != KK_OK || tol.acc > 0.0) return 1;
    }
    return 0;
}

static void run_case(const kk_case *c, const char *device, bufs *b, kk_case_result *r) {
    kk_backend_kind kind = KK_BACKEND_CPU;
    int index = 0;
    (void)kk_device_parse(device, &kind, &index); /* kk_case_run parsed it */
    kk_status st = kk_case_fill_inputs(&c->params, c->seed, c->dist, b->raw);
    for (int k = 0; st == KK_OK && k < b->nin; k++)
        st = kk_convert_host(b->raw[k], b->t[k].dtype, b->f64[k], KK_DTYPE_F64,
                             (size_t)b->t[k].numel);
    const double t0 = kk__runner_now_ms();
    if (st == KK_OK)
        st = kk_op_reference(&c->params, (const double *const *)b->f64, b->f64 + b->nin);
    /* The error scale, on the host from the same float64 inputs whatever the
     * device (docs/harness.md, "Tolerances"). */
    const int mag = wants_magnitude(c->params.op, kind, b);
    if (st == KK_OK && mag)
        st = kk_op_magnitude(&c->params, (const double *const *)b->f64, b->mag + b->nin);
    r->reference_ms = kk__runner_now_ms() - t0;
    if (st != KK_OK) {
        verdict(r, KK_CASE_ERROR, "inputs or reference: %s", kk_last_error_message());
        return;
    }
    int second = 0;
    if (run_kernel(c, device, b, r, &second) != KK_OK) return;
    r->status = KK_CASE_PASS;
    for (int k = 0; k < b->nin; k++) { /* by element: e2m1 padding nibbles are no one's */
        size_t changed = 0;
        int64_t first = -1;
        kk_poison_compare(b->raw[k], b->back[k], b->t[k].dtype, (size_t)b->t[k].numel, &changed,
                          &first);
        if (!changed) continue;
        r->status = KK_CASE_FAIL;
        append(r->message, sizeof r->message,
               "the kernel changed input %s (%zu elements, first "
               "[%lld]); ",
               b->t[k].name, changed, (long long)first);
    }
    for (int k = b->nin; k < b->n; k++)
        check_output(c->params.op, kind, b, k, second, mag ? b->mag[k] : NULL, r);
    const size_t len = strlen(r->message);
    if (len >= 2 && r->message[len - 2] == ';') r->message[len - 2] = '\0';
}

kk_status kk_case_run(const kk_case *c, const kk_run_options *opt, kk_case_result *r) {
    kk_status st = KK__CHECK_NOT_NULL(c);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(r);
    if (st == KK_OK) st = kk_op_params_validate(&c->params);
    if (st != KK_OK) return st;
    const kk_run_options defaults = {0};
    const kk_run_options *o = opt ? opt : &defaults;
    const char *device = o->device ? o->device : kk_device_best();
    kk_backend_kind kind;
    int index;
    if ((st = kk_device_parse(device, &kind, &index)) != KK_OK) return st;
    memset(r, 0, sizeof *r);
    r->first_bad = -1;
    if (cannot_run(c, o, device, kind, r)) return KK_OK;
    bufs b;
    if (!bufs_alloc(&b, &c->params))
        verdict(r, KK_CASE_ERROR, "no host memory for the case's buffers");
    else
        run_case(c, device, &b, r);
    bufs_free(&b);
    kk_clear_error();
    return KK_OK;
}
