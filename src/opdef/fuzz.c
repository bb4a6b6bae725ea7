/* Helpers for the ops' fuzz hooks: sizes kernels get wrong, parameters set
 * by name and fitted to their range. */
#include <string.h>

#include "opdef/opdef.h"

int64_t kk__fuzz_size(kk__rng *r, int64_t hi) {
    static const int64_t tiles[3] = {16, 64, 128};
    const uint32_t pick = kk__rng_below(r, 8);
    int64_t v;
    if (pick == 0) {
        v = 1;
    } else if (pick <= 2) {
        v = 2 + kk__rng_below(r, 15); /* 2..16 */
    } else if (pick <= 4) {           /* a tile multiple, or one off it */
        const int64_t t = tiles[kk__rng_below(r, 3)];
        const int64_t k = 1 + kk__rng_below(r, (uint32_t)(hi / t > 1 ? hi / t : 1));
        v = k * t + (int64_t)kk__rng_below(r, 3) - 1;
    } else {
        v = 1 + (int64_t)kk__rng_below(r, (uint32_t)hi);
    }
    return v < 1 ? 1 : v > hi ? hi : v;
}

int64_t kk__fuzz_fit_int(const kk_op_param *d, int64_t v) {
    const int64_t m = d->multiple > 1 ? d->multiple : 1;
    v = v / m * m;
    if (v < d->min) v = (d->min + m - 1) / m * m;
    if (v > d->max) v = d->max / m * m;
    return v;
}

void kk__fuzz_set_int(kk_op_params *p, const char *name, int64_t v) {
    const int i = kk_op_param_index(p->op, name);
    if (i >= 0) p->i[i] = kk__fuzz_fit_int(&p->op->params[i], v);
}

void kk__fuzz_set_float(kk_op_params *p, const char *name, double v) {
    const int i = kk_op_param_index(p->op, name);
    if (i >= 0) p->f[i] = v;
}
