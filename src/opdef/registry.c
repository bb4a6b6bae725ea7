/* The op registry: the rows of op_list.h, found by name or index, and what an
 * op does for given parameters (tensors, FLOPs, bytes, reference). The
 * parameters themselves (defaults, "k=v" parsing, validation) are params.c. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "opdef/opdef.h"

#define KK_OP(name) extern const kk_op kk__op_##name;
#include "opdef/op_list.h"
#undef KK_OP

const char *const kk__float_dtypes[] = {"f32", "f16", "bf16", NULL};

static const kk_op *const ops[] = {
#define KK_OP(name) &kk__op_##name,
#include "opdef/op_list.h"
#undef KK_OP
};

#define OP_COUNT ((int)(sizeof ops / sizeof ops[0]))

/* ---- lookup ---- */

int kk_op_count(void) { return OP_COUNT; }

const kk_op *kk_op_at(int i) { return i >= 0 && i < OP_COUNT ? ops[i] : NULL; }

const kk_op *kk__op_by_id(int id) { return kk_op_at(id); }

const char *kk_op_name(const kk_op *op) { return op ? op->name : ""; }

const char *kk_op_summary(const kk_op *op) { return op ? op->summary : ""; }

int kk_op_param_count(const kk_op *op) { return op ? op->nparams : 0; }

const kk_op_param *kk_op_param_at(const kk_op *op, int i) {
    return op && i >= 0 && i < op->nparams ? &op->params[i] : NULL;
}

kk_status kk_op_find(const char *name, const kk_op **out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    for (int i = 0; name && i < OP_COUNT; i++)
        if (strcmp(ops[i]->name, name) == 0) {
            *out = ops[i];
            return KK_OK;
        }
    char known[512] = "one of"; /* every op name: 241 characters with 26 ops */
    for (int i = 0; i < OP_COUNT; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s %s", i ? "," : "",
                 ops[i]->name);
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "name", known, "%s",
                         name ? name : "NULL");
}

int kk_op_param_index(const kk_op *op, const char *name) {
    for (int i = 0; op && name && i < op->nparams; i++)
        if (strcmp(op->params[i].name, name) == 0) return i;
    return -1;
}

kk_status kk_op_tolerance(const kk_op *op, kk_dtype dtype, kk_tolerance *out) {
    kk_status st = KK__CHECK_NOT_NULL(op);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    for (int i = 0; i < op->ntolerances; i++)
        if (op->tolerances[i].dtype == dtype) {
            *out = op->tolerances[i];
            return KK_OK;
        }
    return kk__arg_error(KK_ERR_UNSUPPORTED, op->name, "dtype", "a dtype this op writes", "%s",
                         kk_dtype_name(dtype));
}

kk_status kk__op_tolerance_on(const kk_op *op, kk_dtype dtype, kk_backend_kind backend,
                              kk_tolerance *out) {
    const kk_status st = kk_op_tolerance(op, dtype, out);
    if (st == KK_OK && op->tolerance_on) op->tolerance_on(backend, out);
    return st;
}

/* ---- what an op does ---- */

int kk__tensor(kk_op_tensor *t, const char *name, kk_dtype dtype, int is_output, int ndim,
               const int64_t *shape) {
    memset(t, 0, sizeof *t);
    t->name = name;
    t->dtype = dtype;
    t->is_output = is_output;
    t->ndim = ndim;
    t->numel = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->numel *= shape[d];
    }
    return 1;
}

double kk__op_bytes_io(const kk_op_params *p) {
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    const int n = p->op->describe(p, t);
    double bytes = 0.0;
    for (int i = 0; i < n; i++) bytes += (double)t[i].numel * kk_dtype_bits(t[i].dtype) / 8.0;
    return bytes;
}

kk_status kk_op_tensors(const kk_op_params *p, kk_op_tensor *out, int *count) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(count);
    if (st == KK_OK) st = kk_op_params_validate(p);
    if (st != KK_OK) return st;
    *count = p->op->describe(p, out);
    return KK_OK;
}

double kk_op_flops(const kk_op_params *p) {
    return kk_op_params_validate(p) == KK_OK ? p->op->flops(p) : (double)NAN;
}

double kk_op_bytes(const kk_op_params *p) {
    return kk_op_params_validate(p) == KK_OK ? p->op->bytes(p) : (double)NAN;
}

kk_status kk_op_reference(const kk_op_params *p, const double *const *inputs,
                          double *const *outputs) {
    kk_status st = kk_op_params_validate(p);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(inputs);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(outputs);
    return st == KK_OK ? p->op->reference(p, inputs, outputs) : st;
}

int kk_op_has_magnitude(const kk_op *op) { return op && op->magnitude != NULL; }

kk_status kk_op_magnitude(const kk_op_params *p, const double *const *inputs,
                          double *const *outputs) {
    kk_status st = kk_op_params_validate(p);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(inputs);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(outputs);
    if (st != KK_OK) return st;
    if (!p->op->magnitude)
        return kk__error(KK_ERR_UNSUPPORTED, __func__, "%s has no magnitude hook", p->op->name);
    return p->op->magnitude(p, inputs, outputs);
}
