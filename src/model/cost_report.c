/* The cost model's outputs beyond the CLI's table: benchmarks in the results
 * schema (one per measured step), the "model" member added to a results file,
 * the speedup over conservative, and a markdown report. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernelkit/model_cost.h"

void kk_decoder_cost_speedup(const kk_decoder_cost *base, const kk_decoder_cost *c,
                             double *measured, double *predicted) {
    if (measured) *measured = -1;
    if (predicted) *predicted = -1;
    if (!base || !c) return;
    if (measured && base->measured_s > 0 && c->measured_s > 0)
        *measured = base->measured_s / c->measured_s;
    if (predicted && base->predicted_s > 0 && c->predicted_s > 0)
        *predicted = base->predicted_s / c->predicted_s;
}

static void param_num(kk_bench_param *p, const char *name, double v) {
    snprintf(p->name, sizeof p->name, "%s", name);
    p->kind = KK_BENCH_PARAM_NUMBER;
    p->number = v;
}

static void param_str(kk_bench_param *p, const char *name, const char *v) {
    snprintf(p->name, sizeof p->name, "%s", name);
    p->kind = KK_BENCH_PARAM_STRING;
    snprintf(p->string, sizeof p->string, "%s", v);
}

kk_status kk_decoder_cost_add_results(const kk_decoder_cost *c, const char *phase,
                                      kk_bench_results *r) {
    kk_status st = KK__CHECK_NOT_NULL(c);
    if (!st) st = KK__CHECK_NOT_NULL(phase);
    if (!st) st = KK__CHECK_NOT_NULL(r);
    for (int i = 0; !st && i < c->nsteps; i++) {
        const kk_step_cost *s = &c->steps[i];
        if (s->m.n == 0) continue; /* skipped or not measured */
        char name[256];
        snprintf(name, sizeof name, "model/%s/%s/%02d %s", c->level, phase, i + 1, s->name);
        kk_bench_param p[12];
        memset(p, 0, sizeof p);
        param_str(&p[0], "level", c->level);
        param_str(&p[1], "phase", phase);
        param_str(&p[2], "step", s->name);
        param_num(&p[3], "B", (double)c->batch);
        param_num(&p[4], "S", (double)c->seq);
        param_num(&p[5], "L", (double)c->cached);
        param_num(&p[6], "layers", (double)c->layers);
        param_num(&p[7], "calls", s->calls);
        param_num(&p[8], "bytes_read", s->bytes_read);
        param_num(&p[9], "bytes_written", s->bytes_written);
        param_num(&p[10], "predicted_s", s->predicted_s);
        param_str(&p[11], "bound", s->bound[0] ? s->bound : "unknown");
        /* "kk_linear" -> "linear": the registry's name where there is one */
        const char *op = strncmp(s->op, "kk_", 3) == 0 ? s->op + 3 : s->op;
        kk_bench_spec spec = {.name = name,
                              .op = op,
                              .dtype = c->dtype,
                              .params = p,
                              .nparams = 12,
                              .flops = s->flops,
                              .bytes = s->bytes_read + s->bytes_written};
        st = kk_bench_results_add(r, &spec, &s->m);
    }
    return st;
}

/* cJSON helpers that remember an allocation failure. */
static void add_num(int *ok, cJSON *o, const char *k, double v) {
    if (!cJSON_AddNumberToObject(o, k, v)) *ok = 0;
}
static void add_str(int *ok, cJSON *o, const char *k, const char *v) {
    if (!cJSON_AddStringToObject(o, k, v)) *ok = 0;
}

static cJSON *phase_json(int *ok, const kk_decoder_cost *c, const char *phase) {
    cJSON *o = cJSON_CreateObject(), *steps = cJSON_CreateArray();
    if (!o || !steps) {
        cJSON_Delete(o), cJSON_Delete(steps), *ok = 0;
        return NULL;
    }
    const double L = (double)c->layers;
    add_str(ok, o, "phase", phase);
    add_str(ok, o, "level", c->level);
    add_str(ok, o, "device", c->device);
    add_str(ok, o, "dtype", c->dtype);
    add_num(ok, o, "batch", (double)c->batch);
    add_num(ok, o, "seq", (double)c->seq);
    add_num(ok, o, "cached", (double)c->cached);
    add_num(ok, o, "layers", L);
    add_num(ok, o, "launch_floor_s", c->launch_floor_s);
    add_num(ok, o, "predicted_s", c->predicted_s);
    add_num(ok, o, "measured_s", c->measured_s);
    for (int i = 0; i < c->nsteps; i++) {
        const kk_step_cost *s = &c->steps[i];
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(steps, j)) {
            cJSON_Delete(j), *ok = 0;
            break;
        }
        add_str(ok, j, "name", s->name);
        add_str(ok, j, "op", s->op);
        add_num(ok, j, "calls", s->calls);
        add_num(ok, j, "flops", s->flops * L);
        add_num(ok, j, "bytes_read", s->bytes_read * L);
        add_num(ok, j, "bytes_written", s->bytes_written * L);
        add_str(ok, j, "rate", kk_ceiling_name(s->rate));
        add_str(ok, j, "bandwidth", kk_ceiling_name(s->bandwidth));
        add_str(ok, j, "bound", s->bound);
        add_num(ok, j, "predicted_s", s->predicted_s >= 0 ? s->predicted_s * L : -1);
        add_num(ok, j, "measured_s", s->measured_s >= 0 ? s->measured_s * L : -1);
    }
    if (!cJSON_AddItemToObject(o, "steps", steps)) cJSON_Delete(steps), *ok = 0;
    return o;
}

/* The conservative twin of costs[i]: the same phase, level conservative. */
static const kk_decoder_cost *twin(const kk_decoder_cost *const *costs, const char *const *phases,
                                   int n, int i) {
    if (strcmp(costs[i]->level, "conservative") == 0) return NULL;
    for (int k = 0; k < n; k++)
        if (strcmp(costs[k]->level, "conservative") == 0 && strcmp(phases[k], phases[i]) == 0)
            return costs[k];
    return NULL;
}

kk_status kk_decoder_results_json(const kk_bench_results *r, const kk_decoder_cost *const *costs,
                                  const char *const *phases, int n, char **text) {
    kk_status st = KK__CHECK_NOT_NULL(r);
    if (!st) st = KK__CHECK_NOT_NULL(text);
    if (!st && n < 0)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "n", "0 or more", "%d", n);
    if (!st && n > 0) st = KK__CHECK_NOT_NULL(costs);
    if (!st && n > 0) st = KK__CHECK_NOT_NULL(phases);
    if (st) return st;
    *text = NULL;
    char *base = NULL;
    if ((st = kk_bench_results_to_json(r, &base))) return st;
    cJSON *doc = cJSON_Parse(base);
    free(base);
    cJSON *model = cJSON_CreateObject(), *arr = cJSON_CreateArray(), *sp = cJSON_CreateArray();
    int ok = doc && model && arr && sp;
    for (int i = 0; ok && i < n; i++) {
        cJSON *p = phase_json(&ok, costs[i], phases[i]);
        if (p && !cJSON_AddItemToArray(arr, p)) cJSON_Delete(p), ok = 0;
        const kk_decoder_cost *b = twin(costs, phases, n, i);
        if (!b) continue;
        double m, pr;
        kk_decoder_cost_speedup(b, costs[i], &m, &pr);
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(sp, j)) {
            cJSON_Delete(j), ok = 0;
            break;
        }
        add_str(&ok, j, "phase", phases[i]);
        add_str(&ok, j, "level", costs[i]->level);
        add_num(&ok, j, "measured", m);
        add_num(&ok, j, "predicted", pr);
    }
    if (ok && cJSON_AddItemToObject(model, "phases", arr)) arr = NULL;
    if (ok && cJSON_AddItemToObject(model, "speedups", sp)) sp = NULL;
    if (ok && !arr && !sp && cJSON_AddItemToObject(doc, "model", model)) model = NULL;
    ok = ok && !model;
    cJSON_Delete(arr), cJSON_Delete(sp), cJSON_Delete(model);
    char *out = ok ? cJSON_Print(doc) : NULL;
    cJSON_Delete(doc);
    if (!out) return kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "building the JSON failed");
    *text = out;
    return KK_OK;
}

/* ---- markdown ---- */

typedef struct buf {
    char *s;
    size_t len, cap;
    int ok;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
    if (!b->ok) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->ok = 0;
            return;
        }
        b->s = p, b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Microseconds, or "-" when unknown. */
static const char *us(double s, char *t, size_t size) {
    if (s < 0)
        snprintf(t, size, "-");
    else
        snprintf(t, size, "%.1f", s * 1e6);
    return t;
}

static void phase_md(buf *b, const kk_decoder_cost *c, const char *phase) {
    const double L = (double)c->layers;
    const double total = c->measured_s > 0 ? c->measured_s : c->predicted_s;
    put(b, "\n## %s: %s, B=%lld S=%lld after %lld cached, %lld layers, %s on %s\n\n", phase,
        c->level, (long long)c->batch, (long long)c->seq, (long long)c->cached,
        (long long)c->layers, c->dtype, c->device);
    put(b, "Times are for all layers (layer 0's step x %lld); share of the %s total.\n\n",
        (long long)c->layers, c->measured_s > 0 ? "measured" : "predicted");
    put(b, "| # | step | op | calls | MFLOP | MB | bound | predicted µs | measured µs | share | "
           "measured / predicted |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    char t1[32], t2[32];
    for (int i = 0; i < c->nsteps; i++) {
        const kk_step_cost *s = &c->steps[i];
        const double p = s->predicted_s >= 0 ? s->predicted_s * L : -1;
        const double m = s->measured_s >= 0 ? s->measured_s * L : -1;
        const double mine = c->measured_s > 0 ? m : p;
        put(b, "| %d | %s | `%s` | %d | %.4g | %.4g | %s | %s | %s | ", i + 1, s->name, s->op,
            s->calls, s->flops * L / 1e6, (s->bytes_read + s->bytes_written) * L / 1e6,
            s->bound[0] ? s->bound : "-", us(p, t1, sizeof t1), us(m, t2, sizeof t2));
        if (total > 0 && mine >= 0)
            put(b, "%.1f%% | ", 100 * mine / total);
        else
            put(b, "- | ");
        if (p > 0 && m > 0)
            put(b, "%.2f |\n", m / p);
        else
            put(b, "- |\n");
    }
    put(b, "| | **total** | | | | | | %s | %s | | ", us(c->predicted_s, t1, sizeof t1),
        us(c->measured_s, t2, sizeof t2));
    if (c->predicted_s > 0 && c->measured_s > 0)
        put(b, "%.2f |\n", c->measured_s / c->predicted_s);
    else
        put(b, "- |\n");
}

kk_status kk_decoder_cost_markdown(const kk_decoder_cost *const *costs, const char *const *phases,
                                   int n, const kk_bench_environment *env, char **text) {
    kk_status st = KK__CHECK_NOT_NULL(text);
    if (!st && n < 0)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "n", "0 or more", "%d", n);
    if (!st && n > 0) st = KK__CHECK_NOT_NULL(costs);
    if (!st && n > 0) st = KK__CHECK_NOT_NULL(phases);
    if (st) return st;
    *text = NULL;
    buf b = {NULL, 0, 0, 1};
    put(&b, "# kernelkit model: predicted and measured time per step\n\n");
    if (env) {
        put(&b, "- device: %s (%s)", env->device_name, env->device);
        if (env->cc_major)
            put(&b,
                ", compute capability %d.%d, %d SMs, SM clock max %d MHz, memory clock "
                "max %d MHz, driver %s",
                env->cc_major, env->cc_minor, env->sm_count, env->sm_clock_max_mhz,
                env->mem_clock_max_mhz, env->driver_version);
        put(&b, "\n- host: %s; KernelKit %s (%s), %s\n", env->cpu_model, env->kk_version,
            env->git_commit, env->timestamp_utc);
    }
    if (n > 0 && costs[0]->has_ceilings) {
        const kk_bench_ceilings *c = &costs[0]->ceilings;
        put(&b,
            "- ceilings (kernelkit calibrate): copy %.4g GB/s, read %.4g GB/s, bf16 %.4g "
            "TFLOP/s, fp8 %.4g TFLOP/s, fp32 %.4g TFLOP/s (0: unknown)\n",
            c->copy_gbs, c->read_gbs, c->bf16_tflops, c->fp8_tflops, c->fp32_tflops);
    } else {
        put(&b, "- ceilings: none stored (run `kernelkit calibrate`): no prediction\n");
    }
    if (n > 0) put(&b, "- launch floor: %.2f µs per op call\n", costs[0]->launch_floor_s * 1e6);
    put(&b, "- prediction per step: max(bytes / bandwidth, FLOPs / rate) + calls x launch floor "
            "(docs/model.md, \"Cost model\")\n");
    for (int i = 0; i < n; i++) phase_md(&b, costs[i], phases[i]);
    int header = 0;
    for (int i = 0; i < n; i++) {
        const kk_decoder_cost *base = twin(costs, phases, n, i);
        if (!base) continue;
        if (!header++)
            put(&b, "\n## Speedup over conservative\n\n| phase | level | measured | predicted "
                    "|\n|---|---|---|---|\n");
        double m, p;
        kk_decoder_cost_speedup(base, costs[i], &m, &p);
        char t1[32] = "-", t2[32] = "-";
        if (m > 0) snprintf(t1, sizeof t1, "%.2fx", m);
        if (p > 0) snprintf(t2, sizeof t2, "%.2fx", p);
        put(&b, "| %s | %s | %s | %s |\n", phases[i], costs[i]->level, t1, t2);
    }
    if (!b.ok) {
        free(b.s);
        return kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "building the report failed");
    }
    *text = b.s;
    return KK_OK;
}
