/* The shared part of the typed entry points (src/ops/entry.h): the argument
 * checks, the cached registry row, and the run through kk_op_run. */
#include "ops/entry.h"

#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "opdef/attention_varlen.h"

kk_status kk__entry_need(const char *op, const char *argument, const kk_tensor *t, int ndim) {
    if (!t) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, argument, "a tensor", "NULL");
    if (ndim < 0 || t->ndim == ndim) return KK_OK;
    char want[32];
    snprintf(want, sizeof want, "%d dimensions", ndim);
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, argument, want, "%d", t->ndim);
}

kk_status kk__entry_attention_options(const char *op, const kk_attention_options *opt) {
    if (opt->seed > INT64_MAX)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "opt->seed", "at most 2^63-1", "%" PRIu64,
                             opt->seed);
    if (opt->offset > INT64_MAX)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "opt->offset", "at most 2^63-1",
                             "%" PRIu64, opt->offset);
    return KK_OK;
}

static kk_status max_seqlen(const char *op, const char *name, int64_t v) {
    if (v >= 1 && v <= (INT64_C(1) << 20)) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, name,
                         "1..1048576, at least the longest sequence's length", "%" PRId64, v);
}

kk_status kk__entry_varlen_args(const char *op, const kk_tensor *q, const kk_tensor *cu_seqlens_q,
                                const kk_tensor *cu_seqlens_k, int64_t max_seqlen_q,
                                int64_t max_seqlen_k, const kk_attention_options *opt) {
    kk_status st = q ? KK_OK : kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "q", "a tensor", "NULL");
    if (st == KK_OK && q->ndim != 3 && q->ndim != 4)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "q",
                           "3 dimensions [total_q,Hq,D] or 4 [1,Hq,total_q,D]", "%d", q->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "cu_seqlens_q", cu_seqlens_q, 1);
    if (st == KK_OK) st = kk__entry_need(op, "cu_seqlens_k", cu_seqlens_k, 1);
    if (st == KK_OK && cu_seqlens_q->shape[0] < 2)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "cu_seqlens_q",
                           "nseq + 1 >= 2 offsets (one sequence at least)", "%" PRId64 " offsets",
                           cu_seqlens_q->shape[0]);
    if (st == KK_OK) st = max_seqlen(op, "max_seqlen_q", max_seqlen_q);
    if (st == KK_OK) st = max_seqlen(op, "max_seqlen_k", max_seqlen_k);
    if (st == KK_OK) st = kk__entry_attention_options(op, opt);
    return st;
}

const kk_tensor *kk__entry_packed_view(const kk_tensor *t, kk_tensor *view) {
    if (t->ndim == 4) return t;
    *view = *t;
    view->ndim = 4;
    view->shape[0] = 1;
    view->shape[1] = t->shape[1];
    view->shape[2] = t->shape[0];
    view->shape[3] = t->shape[2];
    view->strides[0] = t->shape[0] * t->strides[0]; /* a dimension of 1: any stride */
    view->strides[1] = t->strides[1];
    view->strides[2] = t->strides[0];
    view->strides[3] = t->strides[2];
    return view;
}

const kk_tensor *kk__entry_lse_view(const kk_tensor *t, kk_tensor *view) {
    if (!t || t->ndim == 3) return t;
    *view = *t;
    view->ndim = 3;
    view->shape[0] = 1;
    view->shape[1] = t->shape[0];
    view->shape[2] = t->shape[1];
    view->strides[0] = t->shape[0] * t->strides[0];
    view->strides[1] = t->strides[0];
    view->strides[2] = t->strides[1];
    return view;
}

void kk__entry_varlen_shape(kk_op_params *p, const kk_tensor *cu_seqlens_q, const kk_tensor *qv,
                            const kk_tensor *kv, int64_t max_seqlen_q, int64_t max_seqlen_k,
                            const kk_attention_options *opt) {
    p->i[KK__AVL_NSEQ] = cu_seqlens_q->shape[0] - 1;
    p->i[KK__AVL_HQ] = qv->shape[1];
    p->i[KK__AVL_HKV] = kv->shape[1];
    p->i[KK__AVL_TQ] = qv->shape[2];
    p->i[KK__AVL_TK] = kv->shape[2];
    p->i[KK__AVL_MAXQ] = max_seqlen_q;
    p->i[KK__AVL_MAXK] = max_seqlen_k;
    p->i[KK__AVL_D] = qv->shape[3];
    p->i[KK__AVL_CAUSAL] = opt->causal != 0;
    p->i[KK__AVL_WL] = opt->window_left;
    p->i[KK__AVL_WR] = opt->window_right;
    p->f[KK__AVL_SCALE] = opt->scale;
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
