/* Fuzzing: random valid parameters for any op, sizes drawn from a mixture
 * that kernels get wrong (1, small odd sizes, sizes at and next to tile
 * multiples) and kept small enough that the float64 reference takes
 * milliseconds (--big grows one to fill the memory budget). An op whose generic
 * draw is poor fixes it up in its row's fuzz hook. docs/harness.md, "Fuzzing". */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "opdef/opdef.h"
#include "kernelkit/cases.h"

#define SMALL_CAP 256
#define BIG_OTHER_CAP 32
#define SMALL_NUMEL (INT64_C(1) << 18)
#define SMALL_FLOPS 0x1p25
#define BIG_FLOPS 0x1p35
#define PARAM_STREAM UINT64_C(0x46555a5a50415241) /* "FUZZPARA" */

static int count_choices(const char *const *c) {
    int n = 0;
    while (c && c[n]) n++;
    return n;
}

static void sample_generic(kk__rng *r, kk_op_params *p, int64_t cap) {
    for (int i = 0; i < p->op->nparams; i++) {
        const kk_op_param *d = &p->op->params[i];
        const int nc = count_choices(d->choices);
        kk_dtype dt;
        switch (d->kind) {
        case KK_PARAM_INT: /* parameters that may be < 1 (windows) keep their default */
            if (d->min >= 1)
                p->i[i] = kk__fuzz_fit_int(d, d->multiple > 1 ? d->multiple * kk__fuzz_size(r, 32)
                                                              : kk__fuzz_size(r, cap));
            break;
        case KK_PARAM_BOOL: p->i[i] = kk__rng_below(r, 2); break;
        case KK_PARAM_ENUM: p->i[i] = nc > 0 ? kk__rng_below(r, (uint32_t)nc) : p->i[i]; break;
        case KK_PARAM_DTYPE:
            if (nc > 0 && kk_dtype_parse(d->choices[kk__rng_below(r, (uint32_t)nc)], &dt) == KK_OK)
                p->i[i] = dt;
            break;
        case KK_PARAM_FLOAT: break; /* defaults: ops pick their own below */
        case KK_PARAM_LIST: break;  /* data: the op's fix-up draws it */
        }
    }
}

/* The op's own draw, where it has one (its row's fuzz hook). */
static void fix_op(kk__rng *r, kk_op_params *p, int big) {
    if (p->op->fuzz) p->op->fuzz(r, p, big);
}

/* ---- keeping small cases small ---- */

static int64_t max_numel(const kk_op_params *p) {
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    int n = 0;
    int64_t most = 0;
    if (kk_op_tensors(p, t, &n) != KK_OK) return INT64_MAX;
    for (int k = 0; k < n; k++) most = t[k].numel > most ? t[k].numel : most;
    return most;
}

static int too_big(const kk_op_params *p) {
    return max_numel(p) > SMALL_NUMEL || !(kk_op_flops(p) <= SMALL_FLOPS);
}

/* Halve the largest size parameter whose halving keeps the params valid
 * (ceil, so odd stays odd); 0 when none can shrink. */
static int shrink_once(kk_op_params *p) {
    unsigned tried = 0;
    for (;;) {
        int best = -1;
        for (int i = 0; i < p->op->nparams; i++) {
            const kk_op_param *d = &p->op->params[i];
            if (d->kind != KK_PARAM_INT || d->min < 1 || (tried >> i & 1u) || p->i[i] <= d->min)
                continue;
            if (best < 0 || p->i[i] > p->i[best]) best = i;
        }
        if (best < 0) return 0;
        kk_op_params q = *p;
        const int64_t m = p->op->params[best].multiple > 1 ? p->op->params[best].multiple : 1;
        q.i[best] = kk__fuzz_fit_int(&p->op->params[best], (p->i[best] / m + 1) / 2 * m);
        if (q.i[best] < p->i[best] && kk_op_params_validate(&q) == KK_OK) {
            *p = q;
            return 1;
        }
        tried |= 1u << best;
    }
}

/* ---- --big: one size grows to fill the budget ---- */

/* The size --big grows: the row's choice, else its first integer >= 1. */
static const char *grow_param(const kk_op *op) {
    if (op->grow_param) return op->grow_param;
    for (int i = 0; i < op->nparams; i++)
        if (op->params[i].kind == KK_PARAM_INT && op->params[i].min >= 1) return op->params[i].name;
    return NULL;
}

static int fits(const kk_op_params *p, const kk_case_memory *big) {
    kk_case_memory m;
    if (kk_case_memory_need(p, &m) != KK_OK) return 0;
    return (!big->device_bytes || m.device_bytes <= big->device_bytes) &&
           (!big->host_bytes || m.host_bytes <= big->host_bytes) && kk_op_flops(p) <= BIG_FLOPS;
}

/* How many steps of the grown size fit: the largest x with
 * at1 + (x - 1) * (at2 - at1) <= limit, for a cost linear in the size (memory
 * and FLOPs are); infinite when the cost does not grow or there is no limit. */
static double linear_room(double at1, double at2, double limit) {
    const double slope = at2 - at1;
    if (limit <= 0 || slope <= 0) return INFINITY;
    return 1.0 + (limit - at1) / slope;
}

static void grow(kk_op_params *p, int i, const kk_case_memory *big) {
    const kk_op_param *d = &p->op->params[i];
    kk_op_params q1 = *p, q2 = *p;
    kk_case_memory m1, m2;
    q1.i[i] = kk__fuzz_fit_int(d, d->min);
    q2.i[i] = kk__fuzz_fit_int(d, q1.i[i] + (d->multiple > 1 ? d->multiple : 1));
    if (kk_case_memory_need(&q1, &m1) != KK_OK || kk_case_memory_need(&q2, &m2) != KK_OK) return;
    const double step = (double)(q2.i[i] - q1.i[i]);
    double room = fmin(
        linear_room((double)m1.device_bytes, (double)m2.device_bytes, (double)big->device_bytes),
        linear_room((double)m1.host_bytes, (double)m2.host_bytes, (double)big->host_bytes));
    room = fmin(room, linear_room(kk_op_flops(&q1), kk_op_flops(&q2), BIG_FLOPS));
    const double v = (double)q1.i[i] + (room - 1.0) * step;
    p->i[i] = kk__fuzz_fit_int(d, v >= (double)d->max ? d->max : v < 1.0 ? 1 : (int64_t)v);
    while (p->i[i] > q1.i[i] && !fits(p, big)) /* step functions (padding) and rounding */
        p->i[i] = kk__fuzz_fit_int(d, p->i[i] - p->i[i] / 16 - 1);
}

kk_status kk_case_fuzz(const kk_op *op, uint64_t run_seed, int index, kk_input_dist dist,
                       const kk_case_memory *big, kk_case *out) {
    kk_status st = KK__CHECK_NOT_NULL(op);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(out);
    if (st == KK_OK && index < 0)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "index", ">= 0", "%d", index);
    if (st != KK_OK) return st;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "fuzz/%s/%d", op->name, index);
    out->seed = kk_case_seed(run_seed, out->name);
    out->dist = dist;
    kk__rng r;
    kk__rng_seed(&r, out->seed ^ PARAM_STREAM);
    for (int attempt = 0; attempt < 16; attempt++) {
        kk_op_params p;
        kk_op_params_init(op, &p);
        sample_generic(&r, &p, big ? BIG_OTHER_CAP : SMALL_CAP);
        fix_op(&r, &p, big != NULL);
        if (kk_op_params_validate(&p) != KK_OK) continue;
        if (big) {
            const int g = kk_op_param_index(op, grow_param(op));
            if (g >= 0) grow(&p, g, big);
        } else {
            while (too_big(&p) && shrink_once(&p)) {}
        }
        if (kk_op_params_validate(&p) != KK_OK) continue;
        out->params = p;
        kk_clear_error();
        return KK_OK;
    }
    kk_clear_error();
    return kk_op_params_init(op, &out->params); /* not reached for the built-in ops */
}
