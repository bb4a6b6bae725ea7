/* Suites: names, and the expansion of the table in suites.c into cases.
 *
 * A row names its op, a label and a parameter text. Each DTYPE parameter the
 * text does not set is expanded over every dtype the parameter accepts, and
 * the dtypes join the name: row {smoke, convert, "n37", "n=37"} gives
 * smoke/convert/n37-f64-f64, smoke/convert/n37-f64-f32, ... (49 cases). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "opdef/opdef.h"
#include "kernelkit/harness_run.h"

static const char *const suite_names[KK_SUITE_COUNT] = {"smoke", "correctness", "performance",
                                                        "attention-fuzz27"};

const char *kk_suite_name(kk_suite suite) {
    return (int)suite >= 0 && suite < KK_SUITE_COUNT ? suite_names[suite] : "?";
}

static kk_status suite_error(const char *text, size_t len) {
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_suite_parse", "suite",
                         "smoke, correctness, performance, attention-fuzz27 or all (comma list)",
                         "%.*s", (int)len, text);
}

kk_status kk_suite_parse(const char *text, unsigned *mask) {
    kk_status st = KK__CHECK_NOT_NULL(text);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(mask);
    if (st != KK_OK) return st;
    unsigned m = 0;
    for (const char *s = text;;) {
        const size_t len = strcspn(s, ",");
        int found = len == 3 && strncasecmp(s, "all", 3) == 0;
        m |= found ? KK_SUITE_ALL : 0u;
        for (int i = 0; i < KK_SUITE_COUNT && !found; i++)
            if (strlen(suite_names[i]) == len && strncasecmp(s, suite_names[i], len) == 0) {
                m |= 1u << i;
                found = 1;
            }
        if (!found) return suite_error(s, len);
        if (!s[len]) break;
        s += len + 1;
    }
    *mask = m;
    return KK_OK;
}

/* Non-zero when the "k=v ..." text sets parameter `name`. */
static int text_sets(const char *text, const char *name) {
    const size_t n = strlen(name);
    for (const char *s = text; *s;) {
        s += strspn(s, ", \t");
        if (strncmp(s, name, n) == 0 && s[n] == '=') return 1;
        s += strcspn(s, ", \t");
    }
    return 0;
}

/* One row's cases: the DTYPE parameters left free, and how many choices each. */
typedef struct expansion {
    int nfree;
    int param[KK_OP_MAX_PARAMS];
    int nchoices[KK_OP_MAX_PARAMS];
} expansion;

static void find_free(const kk_op *op, const char *text, expansion *e) {
    e->nfree = 0;
    for (int i = 0; i < op->nparams; i++) {
        if (op->params[i].kind != KK_PARAM_DTYPE || text_sets(text, op->params[i].name)) continue;
        int n = 0;
        while (op->params[i].choices && op->params[i].choices[n]) n++;
        e->param[e->nfree] = i;
        e->nchoices[e->nfree++] = n;
    }
}

typedef int (*case_fn)(const kk_case *c, void *ctx); /* non-zero: stop */

/* Case number `combo` of a row (mixed radix over the free dtypes). */
static kk_status make_case(const kk_suite_entry *e, const kk_op *op, const expansion *x, int combo,
                           uint64_t run_seed, kk_input_dist dist, kk_case *c) {
    memset(c, 0, sizeof *c);
    kk_status st = kk_op_params_parse(op, e->params, &c->params);
    int used =
        snprintf(c->name, sizeof c->name, "%s/%s/%s", kk_suite_name(e->suite), op->name, e->label);
    for (int f = 0; st == KK_OK && f < x->nfree; f++) {
        const kk_op_param *d = &op->params[x->param[f]];
        const char *choice = d->choices[combo % x->nchoices[f]];
        combo /= x->nchoices[f];
        st = kk_op_params_set(&c->params, d->name, choice);
        used += snprintf(c->name + used, sizeof c->name - (size_t)used, "-%s", choice);
        if (used >= (int)sizeof c->name) used = (int)sizeof c->name - 1;
    }
    if (st == KK_OK) st = kk_op_params_validate(&c->params);
    if (st != KK_OK)
        return kk__error(KK_ERR_INTERNAL, "kk_suite_cases", "suite row %s/%s/%s is invalid: %s",
                         kk_suite_name(e->suite), e->op, e->label, kk_last_error_message());
    c->seed = kk_case_seed(run_seed, c->name);
    c->dist = dist;
    return KK_OK;
}

static kk_status each_case(unsigned mask, const kk_op *only, uint64_t run_seed, kk_input_dist dist,
                           case_fn fn, void *ctx) {
    for (int i = 0; i < kk_suite_entry_count(); i++) {
        const kk_suite_entry *e = kk_suite_entry_at(i);
        const kk_op *op;
        if (!(mask & (1u << e->suite)) || (only && strcmp(only->name, e->op) != 0)) continue;
        if (kk_op_find(e->op, &op) != KK_OK)
            return kk__error(KK_ERR_INTERNAL, "kk_suite_cases", "suite row names no op: %s", e->op);
        expansion x;
        find_free(op, e->params, &x);
        int combos = 1;
        for (int f = 0; f < x.nfree; f++) combos *= x.nchoices[f];
        for (int k = 0; k < combos; k++) {
            kk_case c;
            kk_status st = make_case(e, op, &x, k, run_seed, dist, &c);
            if (st != KK_OK) return st;
            if (fn(&c, ctx)) return KK_OK;
        }
    }
    return KK_OK;
}

typedef struct collect {
    kk_case *out;
    int cap, count;
} collect;

static int collect_one(const kk_case *c, void *ctx) {
    collect *k = ctx;
    if (k->count < k->cap) k->out[k->count] = *c;
    k->count++;
    return 0;
}

kk_status kk_suite_cases(unsigned mask, const kk_op *op, uint64_t run_seed, kk_input_dist dist,
                         kk_case *out, int cap, int *count) {
    kk_status st = KK__CHECK_NOT_NULL(count);
    if (st == KK_OK && cap > 0) st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    collect k = {.out = out, .cap = cap, .count = 0};
    st = each_case(mask, op, run_seed, dist, collect_one, &k);
    if (st == KK_OK) *count = k.count;
    return st;
}

typedef struct finder {
    const char *name;
    kk_case *out;
    int found;
} finder;

static int find_one(const kk_case *c, void *ctx) {
    finder *f = ctx;
    if (strcmp(c->name, f->name) != 0) return 0;
    *f->out = *c;
    f->found = 1;
    return 1;
}

kk_status kk_suite_case_find(const char *name, uint64_t run_seed, kk_input_dist dist,
                             kk_case *out) {
    kk_status st = KK__CHECK_NOT_NULL(name);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    finder f = {.name = name, .out = out, .found = 0};
    st = each_case(KK_SUITE_ALL, NULL, run_seed, dist, find_one, &f);
    if (st == KK_OK && !f.found)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "name",
                           "a suite case, e.g. smoke/convert/n37-f32-bf16 (kernelkit check --list)",
                           "%s", name);
    return st;
}
