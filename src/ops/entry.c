/* The shared part of the typed entry points (src/ops/entry.h): the argument
 * checks, the cached registry row, and the run through kk_op_run. */
#include "ops/entry.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

kk_status kk__entry_need(const char *op, const char *argument, const kk_tensor *t, int ndim) {
    if (!t) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, argument, "a tensor", "NULL");
    if (ndim < 0 || t->ndim == ndim) return KK_OK;
    char want[32];
    snprintf(want, sizeof want, "%d dimensions", ndim);
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, argument, want, "%d", t->ndim);
}

enum { ROW_EMPTY, ROW_FILLING, ROW_READY };

/* The slow path of kk__entry_params: the first calls of an op. One thread
 * fills the row; the others wait for it (a lookup takes microseconds). */
static kk_status fill_row(kk__op_row *row) {
    for (;;) {
        int expected = ROW_EMPTY;
        if (atomic_compare_exchange_strong_explicit(&row->state, &expected, ROW_FILLING,
                                                    memory_order_acquire, memory_order_acquire)) {
            const kk_op *op = NULL;
            kk_status st = kk_op_find(row->name, &op);
            if (st == KK_OK) st = kk_op_params_init(op, &row->defaults);
            atomic_store_explicit(&row->state, st == KK_OK ? ROW_READY : ROW_EMPTY,
                                  memory_order_release);
            return st;
        }
        if (expected == ROW_READY) return KK_OK;
        while (atomic_load_explicit(&row->state, memory_order_acquire) == ROW_FILLING)
            sched_yield();
    }
}

kk_status kk__entry_params(kk__op_row *row, kk_op_params *p) {
    if (atomic_load_explicit(&row->state, memory_order_acquire) != ROW_READY) {
        const kk_status st = fill_row(row);
        if (st != KK_OK) return st;
    }
    *p = row->defaults;
    return KK_OK;
}

/* The last error, which was about a parameter, recorded again naming the
 * argument it came from (only on the error path). */
static kk_status rename_error(const kk_op_params *p, const kk__entry_arg *args, int nargs,
                              kk_status st) {
    const kk_error_info *e = kk_last_error();
    if (!e->argument) return st;
    for (int k = 0; k < nargs; k++) {
        const kk_op_param *d = &p->op->params[args[k].param];
        if (strcmp(d->name, e->argument) != 0) continue;
        /* the last error's strings are overwritten by the next: copy them */
        const char *prefix = d->kind == KK_PARAM_DTYPE ? "dtype " : "";
        char value[256], expected[512];
        snprintf(value, sizeof value, "%s%s", prefix, e->value ? e->value : "?");
        snprintf(expected, sizeof expected, "%s%s", prefix, e->expected ? e->expected : "?");
        return kk__arg_error(st, p->op->name, args[k].argument, expected, "%s", value);
    }
    return st;
}

/* kk_op_run validates the parameters before it looks at a tensor, so a
 * second kk_op_params_validate here would only double that cost (for
 * attention_varlen, half a microsecond). It runs again on the failure path
 * alone, to tell a parameter's error (renamed) from any other (kept). */
kk_status kk__entry_run(const kk_op_params *p, const kk_tensor *const *tensors, int n,
                        kk_stream stream, const kk__entry_arg *args, int nargs) {
    kk_tensor *t[KK_OP_MAX_TENSORS];
    for (int k = 0; k < n; k++) t[k] = (kk_tensor *)tensors[k]; /* inputs are only read */
    const kk_status st = kk_op_run(p, t, stream);
    if (st == KK_OK || nargs == 0) return st;
    const kk_status invalid = kk_op_params_validate(p);
    return invalid == KK_OK ? st : rename_error(p, args, nargs, invalid);
}

kk_op_kernel_fn kk__entry_adapter(const kk_op *op) {
    /* every op has a typed entry point, so every op of the op table an adapter */
    static const kk_op_kernel_fn adapters[KK__OP_COUNT] = {
#define KK_OP(name) [KK__OP_ID_##name] = kk__##name##_entry,
#include "opdef/op_list.h"
#undef KK_OP
    };
    return op && op->id >= 0 && op->id < KK__OP_COUNT ? adapters[op->id] : NULL;
}
