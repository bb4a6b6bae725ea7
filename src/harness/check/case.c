/* Cases: seeds, the names of the input distributions (the inputs themselves
 * are drawn in case_inputs.c), the dtype a case is reported by, and the memory
 * a case needs. */
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "opdef/opdef.h"
#include "kernelkit/cases.h"
#include "kernelkit/memory.h"

#define GOLDEN UINT64_C(0x9e3779b97f4a7c15)

static const char *const dist_names[KK_DIST_COUNT] = {"full", "gpumode"};

const char *kk_input_dist_name(kk_input_dist dist) {
    return (int)dist >= 0 && dist < KK_DIST_COUNT ? dist_names[dist] : "?";
}

kk_status kk_input_dist_parse(const char *name, kk_input_dist *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    for (int d = 0; name && d < KK_DIST_COUNT; d++)
        if (strcasecmp(name, dist_names[d]) == 0) {
            *out = (kk_input_dist)d;
            return KK_OK;
        }
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "dist", "one of full, gpumode", "%s",
                         name ? name : "NULL");
}

static uint64_t mix64(uint64_t z) { /* splitmix64's finalizer */
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

uint64_t kk_case_seed(uint64_t run_seed, const char *name) {
    uint64_t h = UINT64_C(0xcbf29ce484222325); /* FNV-1a */
    for (const char *s = name ? name : ""; *s; s++) h = (h ^ (uint8_t)*s) * UINT64_C(0x100000001b3);
    return mix64(run_seed * GOLDEN + mix64(h));
}

/* ---- the dtype of a case ---- */

static kk_dtype first_output_dtype(const kk_op_params *p) {
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    int n = 0;
    if (kk_op_tensors(p, t, &n) != KK_OK) return KK_DTYPE_COUNT;
    for (int k = 0; k < n; k++)
        if (t[k].is_output) return t[k].dtype;
    return KK_DTYPE_COUNT;
}

kk_dtype kk_case_dtype(const kk_op_params *p) { return first_output_dtype(p); }

kk_status kk_case_force_dtype(kk_op_params *p, kk_dtype dtype) {
    kk_status st = kk_op_params_validate(p);
    if (st != KK_OK) return st;
    if (first_output_dtype(p) == dtype) return KK_OK;
    for (int i = 0; i < p->op->nparams; i++) {
        if (p->op->params[i].kind != KK_PARAM_DTYPE) continue;
        kk_op_params q = *p;
        if (kk_op_params_set(&q, p->op->params[i].name, kk_dtype_name(dtype)) != KK_OK) continue;
        if (kk_op_params_validate(&q) == KK_OK && first_output_dtype(&q) == dtype) {
            *p = q;
            return KK_OK;
        }
    }
    kk_clear_error();
    return kk__arg_error(KK_ERR_UNSUPPORTED, p->op->name, "dtype",
                         "a dtype this op's parameters can give its output", "%s",
                         kk_dtype_name(dtype));
}

/* ---- memory ---- */

kk_status kk_case_memory_need(const kk_op_params *p, kk_case_memory *out) {
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st == KK_OK) st = kk_op_tensors(p, t, &n);
    if (st != KK_OK) return st;
    double dev = 0.0, host = 0.0;
    for (int k = 0; k < n; k++) {
        const double raw = (double)kk_dtype_bytes(t[k].dtype, (size_t)t[k].numel);
        dev += raw + KK_MEM_ALIGNMENT;
        /* inputs: staging + a copy read back to prove the kernel left them
         * alone; outputs: one copy per poison run; plus f64 for every tensor */
        host += 2.0 * raw + 8.0 * (double)t[k].numel;
    }
    out->device_bytes = dev >= 0x1p64 ? UINT64_MAX : (uint64_t)dev;
    out->host_bytes = host >= 0x1p64 ? UINT64_MAX : (uint64_t)host;
    return KK_OK;
}
