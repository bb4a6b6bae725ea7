/* The results document in memory: create, add a benchmark, ceilings, free.
 * Writing and reading are results_write.c and results_read*.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "harness/results/results_internal.h"

kk_bench_results *kk__results_new(void) { return calloc(1, sizeof(kk_bench_results)); }

kk_status kk__results_reserve(kk_bench_results *r, const char *func) {
    if (r->count < r->capacity) return KK_OK;
    size_t cap = r->capacity ? r->capacity * 2 : 8;
    kk_bench_entry *p = realloc(r->entries, cap * sizeof *p);
    if (!p) return kk__error(KK_ERR_OUT_OF_MEMORY, func, "cannot grow to %zu benchmarks", cap);
    r->entries = p;
    r->capacity = cap;
    return KK_OK;
}

kk_status kk_bench_results_create(const kk_bench_environment *env, kk_bench_results **out) {
    kk_status st = KK__CHECK_NOT_NULL(env);
    if (!st) st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    kk_bench_results *r = kk__results_new();
    if (!r) return kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a document");
    if ((st = kk_bench_environment_copy(&r->env, env))) {
        free(r);
        return st;
    }
    *out = r;
    return KK_OK;
}

void kk_bench_results_free(kk_bench_results *r) {
    if (!r) return;
    kk_bench_environment_free(&r->env);
    for (size_t i = 0; i < r->count; i++) free(r->entries[i].m.samples);
    free(r->entries);
    free(r);
}

/* The TFLOP/s ceiling that applies to a dtype: tensor-core rates for the
 * formats that have them, f16 at the bf16 rate (the same on every NVIDIA GPU
 * KernelKit supports). 0 and "" when none applies. */
static double tflops_ceiling(const kk_bench_ceilings *c, const char *dtype, const char **which) {
    *which = "";
    if (strcmp(dtype, "bf16") == 0 || strcmp(dtype, "f16") == 0) {
        *which = "bf16_tflops";
        return c->bf16_tflops;
    }
    if (strcmp(dtype, "fp8_e4m3") == 0 || strcmp(dtype, "fp8_e5m2") == 0) {
        *which = "fp8_tflops";
        return c->fp8_tflops;
    }
    if (strcmp(dtype, "f32") == 0) {
        *which = "fp32_tflops";
        return c->fp32_tflops;
    }
    return 0;
}

void kk__results_derive(const kk_bench_results *r, kk_bench_entry *e) {
    double med = e->summary.median;
    e->tflops = e->flops > 0 && med > 0 ? e->flops / med / 1e12 : 0;
    e->gbs = e->bytes > 0 && med > 0 ? e->bytes / med / 1e9 : 0;
    e->share_tflops = e->share_copy_gbs = e->share_read_gbs = -1;
    e->tflops_ceiling[0] = 0;
    if (!r->has_ceilings) return;
    const char *which;
    double peak = tflops_ceiling(&r->ceilings, e->dtype, &which);
    if (e->tflops > 0 && peak > 0) {
        e->share_tflops = e->tflops / peak;
        snprintf(e->tflops_ceiling, sizeof e->tflops_ceiling, "%s", which);
    }
    if (e->gbs > 0 && r->ceilings.copy_gbs > 0) e->share_copy_gbs = e->gbs / r->ceilings.copy_gbs;
    if (e->gbs > 0 && r->ceilings.read_gbs > 0) e->share_read_gbs = e->gbs / r->ceilings.read_gbs;
}

static kk_status check_ceiling(const char *field, double v) {
    if (isfinite(v) && v >= 0) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_bench_results_set_ceilings", field,
                         "a finite value >= 0 (0 = unknown)", "%.17g", v);
}

kk_status kk_bench_results_set_ceilings(kk_bench_results *r, const kk_bench_ceilings *c) {
    kk_status st = KK__CHECK_NOT_NULL(r);
    if (!st && c) {
        if (!st) st = check_ceiling("ceilings.copy_gbs", c->copy_gbs);
        if (!st) st = check_ceiling("ceilings.read_gbs", c->read_gbs);
        if (!st) st = check_ceiling("ceilings.bf16_tflops", c->bf16_tflops);
        if (!st) st = check_ceiling("ceilings.fp8_tflops", c->fp8_tflops);
        if (!st) st = check_ceiling("ceilings.fp32_tflops", c->fp32_tflops);
    }
    if (st) return st;
    r->has_ceilings = c != NULL;
    memset(&r->ceilings, 0, sizeof r->ceilings);
    if (c) r->ceilings = *c;
    for (size_t i = 0; i < r->count; i++) kk__results_derive(r, &r->entries[i]);
    return KK_OK;
}

const kk_bench_entry *kk_bench_results_find(const kk_bench_results *r, const char *name) {
    if (!r || !name) return NULL;
    for (size_t i = 0; i < r->count; i++)
        if (strcmp(r->entries[i].name, name) == 0) return &r->entries[i];
    return NULL;
}

/* ---- add ---- */

#define ADD "kk_bench_results_add"

static kk_status copy_text(const char *field, const char *src, char *dst, size_t size,
                           int nonempty) {
    if (!src) src = "";
    if (strlen(src) >= size || (nonempty && !src[0])) {
        char expected[64];
        snprintf(expected, sizeof expected, "%sat most %zu bytes", nonempty ? "non-empty, " : "",
                 size - 1);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, ADD, field, expected, "\"%.60s...\"", src);
    }
    memcpy(dst, src, strlen(src) + 1);
    return KK_OK;
}

static kk_status check_param(const kk_bench_param *p, const kk_bench_param *all, int i) {
    if (!memchr(p->name, 0, sizeof p->name) || !p->name[0] ||
        !memchr(p->string, 0, sizeof p->string))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, ADD, "spec->params",
                             "a non-empty NUL-terminated name and string", "params[%d]", i);
    for (int j = 0; j < i; j++)
        if (strcmp(all[j].name, p->name) == 0)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, ADD, "spec->params", "unique names",
                                 "\"%s\" twice", p->name);
    int ok = (p->kind == KK_BENCH_PARAM_NUMBER && isfinite(p->number)) ||
             (p->kind == KK_BENCH_PARAM_BOOL && (p->boolean == 0 || p->boolean == 1)) ||
             p->kind == KK_BENCH_PARAM_STRING;
    if (ok) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, ADD, "spec->params",
                         "a finite number, a 0/1 bool or a string", "params[%d] (\"%s\")", i,
                         p->name);
}

static kk_status check_real(const char *field, double v, double hi) {
    if (isfinite(v) && v >= 0 && v <= hi) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, ADD, field, hi > 1 ? "finite, >= 0" : "0 to 1",
                         "%.17g", v);
}

static kk_status check_spec(const kk_bench_results *r, const kk_bench_spec *s) {
    kk_status st = KK__CHECK_NOT_NULL(s->name);
    if (!st && kk_bench_results_find(r, s->name))
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, ADD, "spec->name",
                           "a name not yet in the document", "\"%.200s\"", s->name);
    if (!st && (s->nparams < 0 || s->nparams > KK_BENCH_MAX_PARAMS || (s->nparams && !s->params)))
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, ADD, "spec->nparams",
                           "0 to 32 (KK_BENCH_MAX_PARAMS), with a params array", "%d", s->nparams);
    for (int i = 0; !st && i < s->nparams; i++) st = check_param(&s->params[i], s->params, i);
    if (!st) st = check_real("spec->flops", s->flops, INFINITY);
    if (!st) st = check_real("spec->bytes", s->bytes, INFINITY);
    if (!st) st = check_real("spec->threshold", s->threshold, 1.0);
    return st;
}

static kk_status check_measurement(const kk_bench_measurement *m) {
    if (m->n == 0 || !m->samples || m->n > KK_BENCH_MAX_SAMPLES_LIMIT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, ADD, "m->n",
                             "1 to 10000000 samples, with a samples array", "%zu", m->n);
    for (size_t i = 0; i < m->n; i++)
        if (!isfinite(m->samples[i]) || m->samples[i] < 0)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, ADD, "m->samples", "finite seconds >= 0",
                                 "samples[%zu] = %g", i, m->samples[i]);
    if (!memchr(m->device, 0, sizeof m->device) || !m->device[0] || m->batch < 1 ||
        (int)m->stop < 0 || m->stop >= KK_BENCH_STOP_COUNT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, ADD, "m",
                             "a measurement from kk_bench_measure (device, batch >= 1, stop)",
                             "device \"%.31s\", batch %zu", m->device, m->batch);
    return KK_OK;
}

kk_status kk_bench_results_add(kk_bench_results *r, const kk_bench_spec *spec,
                               const kk_bench_measurement *m) {
    kk_status st = KK__CHECK_NOT_NULL(r);
    if (!st) st = KK__CHECK_NOT_NULL(spec);
    if (!st) st = KK__CHECK_NOT_NULL(m);
    if (!st) st = check_spec(r, spec);
    if (!st) st = check_measurement(m);
    if (!st) st = kk__results_reserve(r, ADD);
    if (st) return st;
    kk_bench_entry e;
    memset(&e, 0, sizeof e);
    if ((st = copy_text("spec->name", spec->name, e.name, sizeof e.name, 1)) ||
        (st = copy_text("spec->op", spec->op, e.op, sizeof e.op, 0)) ||
        (st = copy_text("spec->dtype", spec->dtype, e.dtype, sizeof e.dtype, 0)))
        return st;
    snprintf(e.device, sizeof e.device, "%s", m->device);
    e.nparams = spec->nparams;
    if (spec->nparams) memcpy(e.params, spec->params, (size_t)spec->nparams * sizeof *e.params);
    e.flops = spec->flops;
    e.bytes = spec->bytes;
    e.threshold = spec->threshold;
    uint64_t seed = spec->seed ? spec->seed : KK_STATS_DEFAULT_SEED;
    if ((st = kk_stats_summarize(m->samples, m->n, seed, spec->resamples, &e.summary))) return st;
    e.m = *m;
    if (!(e.m.samples = malloc(m->n * sizeof *m->samples)))
        return kk__error(KK_ERR_OUT_OF_MEMORY, ADD, "cannot copy %zu samples", m->n);
    memcpy(e.m.samples, m->samples, m->n * sizeof *m->samples);
    kk__results_derive(r, &e);
    r->entries[r->count++] = e;
    return KK_OK;
}
