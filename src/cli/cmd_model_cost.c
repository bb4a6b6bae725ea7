/* kernelkit model's cost model and profile (docs/model.md, "Cost model"):
 * before the timed calls, a profiled prefill and decode step of the decoder
 * (and of a conservative twin), each step's predicted and measured time and
 * share printed, the level's speedup over conservative, and on request the
 * results JSON (kernelkit.bench/1 plus a "model" member) and a markdown report. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

#define CMD "model"

void cli_model_cost_default(cli_model_cost *o) {
    memset(o, 0, sizeof *o);
    o->profile = 1;
    o->compare = 1;
    o->floor_us = -1;
}

static int number(const char *opt, const char *text, double lo, double hi, double *out) {
    char *end;
    const double v = strtod(text, &end);
    if (*text == '\0' || *end != '\0' || !(v >= lo && v <= hi))
        return cli_usage_error(CMD, "bad %s '%s': expected a number %g .. %g", opt, text, lo, hi);
    *out = v;
    return CLI_OK;
}

int cli_model_cost_option(cli_model_cost *o, int code, const char *arg, int *rc) {
    *rc = CLI_OK;
    switch (code) {
    case CLI_MODEL_NO_PROFILE: o->profile = 0; return 1;
    case CLI_MODEL_NO_COMPARE: o->compare = 0; return 1;
    case CLI_MODEL_CEILINGS: o->ceilings = arg; return 1;
    case CLI_MODEL_FLOOR: *rc = number("--launch-floor-us", arg, 0, 1e5, &o->floor_us); return 1;
    case CLI_MODEL_BUDGET: *rc = number("--profile-time", arg, 0.001, 600, &o->budget_s); return 1;
    case CLI_MODEL_OUTPUT: o->output = arg; return 1;
    case CLI_MODEL_REPORT: o->report = arg; return 1;
    default: return 0;
    }
}

/* Random hidden states [B,S,hidden] (uniform in [-1, 1)) on the decoder's device. */
static kk_status hidden_states(const kk_decoder *d, const char *device, int64_t B, int64_t S,
                               int64_t hidden, uint64_t *rng, kk_tensor **out) {
    const int64_t shape[3] = {B, S, hidden};
    kk_tensor *f = NULL, *h = NULL, *g = NULL;
    *out = NULL;
    kk_status st = kk_tensor_create("cpu", KK_DTYPE_F32, 3, shape, &f);
    for (int64_t i = 0; st == KK_OK && i < B * S * hidden; i++) {
        *rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
        ((float *)f->data)[i] = (float)((double)(*rng >> 11) / 9007199254740992.0 * 2 - 1);
    }
    if (st == KK_OK) st = kk_tensor_create("cpu", kk_decoder_dtype(d), 3, shape, &h);
    if (st == KK_OK) st = kk_convert(f, h, NULL);
    if (st == KK_OK) st = kk_tensor_create(device, kk_decoder_dtype(d), 3, shape, &g);
    if (st == KK_OK) st = kk_tensor_copy(g, h);
    kk_tensor_destroy(f), kk_tensor_destroy(h);
    if (st != KK_OK) kk_tensor_destroy(g), g = NULL;
    *out = g;
    return st;
}

/* Profile a prefill of S tokens, then (decode) one decode step after it; the
 * decoder is reset afterwards. c[0], c[1] filled; *n how many. */
static kk_status profile(kk_decoder *d, const char *device, long B, long S, long decode,
                         int64_t hidden, uint64_t *rng, const kk_bench_ceilings *ceil,
                         double floor_s, const kk_bench_options *o, kk_decoder_cost *c, int *n) {
    kk_tensor *x = NULL, *y = NULL, *x1 = NULL;
    *n = 0;
    kk_decoder_reset(d);
    kk_status st = hidden_states(d, device, B, S, hidden, rng, &x);
    if (st == KK_OK) st = kk_decoder_profile(d, x, ceil, floor_s, o, &c[0]);
    if (st == KK_OK) *n = 1;
    if (st == KK_OK && decode > 0) { /* the cache of the prefill, then one step profiled */
        st = kk_tensor_create(device, kk_decoder_dtype(d), 3, x->shape, &y);
        if (st == KK_OK) st = kk_decoder_prefill(d, x, y);
        if (st == KK_OK) st = hidden_states(d, device, B, 1, hidden, rng, &x1);
        if (st == KK_OK) st = kk_decoder_profile(d, x1, ceil, floor_s, o, &c[1]);
        if (st == KK_OK) *n = 2;
    }
    kk_decoder_reset(d);
    kk_tensor_destroy(x), kk_tensor_destroy(y), kk_tensor_destroy(x1);
    return st;
}

static const char *us(double s, char *t, size_t size) {
    if (s < 0)
        snprintf(t, size, "-");
    else
        snprintf(t, size, "%.1f", s * 1e6);
    return t;
}

static void print_cost(const kk_decoder_cost *c, const char *phase) {
    const double L = (double)c->layers, total = c->measured_s > 0 ? c->measured_s : c->predicted_s;
    printf("\n%s profile, level %s: B=%lld S=%lld after %lld cached, %lld layer(s) (layer 0's "
           "steps x %lld)\n",
           phase, c->level, (long long)c->batch, (long long)c->seq, (long long)c->cached,
           (long long)c->layers, (long long)c->layers);
    printf("  %2s  %-22s %-19s %5s %9s %9s  %-8s %12s %12s %6s %9s\n", "#", "step", "op", "calls",
           "MFLOP", "MB", "bound", "predicted us", "measured us", "share", "meas/pred");
    char t1[32], t2[32];
    for (int i = 0; i < c->nsteps; i++) {
        const kk_step_cost *s = &c->steps[i];
        const double p = s->predicted_s >= 0 ? s->predicted_s * L : -1;
        const double m = s->measured_s >= 0 ? s->measured_s * L : -1;
        const double mine = c->measured_s > 0 ? m : p;
        char share[16] = "-", ratio[16] = "-";
        if (total > 0 && mine >= 0) snprintf(share, sizeof share, "%.1f%%", 100 * mine / total);
        if (p > 0 && m > 0) snprintf(ratio, sizeof ratio, "%.2f", m / p);
        printf("  %2d  %-22s %-19s %5d %9.4g %9.4g  %-8s %12s %12s %6s %9s\n", i + 1, s->name,
               s->op, s->calls, s->flops * L / 1e6, (s->bytes_read + s->bytes_written) * L / 1e6,
               s->bound[0] ? s->bound : "-", us(p, t1, sizeof t1), us(m, t2, sizeof t2), share,
               ratio);
    }
    char ratio[16] = "-";
    if (c->predicted_s > 0 && c->measured_s > 0)
        snprintf(ratio, sizeof ratio, "%.2f", c->measured_s / c->predicted_s);
    printf("      %-22s %-19s %5s %9s %9s  %-8s %12s %12s %6s %9s\n", "total", "", "", "", "", "",
           us(c->predicted_s, t1, sizeof t1), us(c->measured_s, t2, sizeof t2), "100%", ratio);
}

/* Results JSON and markdown report, as asked. */
static int write_outputs(const cli_model_cost *o, const char *device,
                         const kk_decoder_cost *const *costs, const char *const *phases, int n,
                         const kk_bench_ceilings *ceil, int argc, char **argv) {
    if (!o->output && !o->report) return CLI_OK;
    kk_bench_environment env;
    if (kk_bench_environment_capture(device, argc, (const char *const *)argv, NULL, 0, &env) !=
        KK_OK)
        return cli_fail(CMD, "capturing the environment");
    int rc = CLI_OK;
    if (o->output) {
        kk_bench_results *r = NULL;
        char *text = NULL;
        kk_status st = kk_bench_results_create(&env, &r);
        if (st == KK_OK && ceil) st = kk_bench_results_set_ceilings(r, ceil);
        for (int i = 0; st == KK_OK && i < n; i++)
            st = kk_decoder_cost_add_results(costs[i], phases[i], r);
        if (st == KK_OK) st = kk_decoder_results_json(r, costs, phases, n, &text);
        if (st != KK_OK) rc = cli_fail(CMD, "building the results");
        if (rc == CLI_OK && cli_write_text(CMD, o->output, text) != 0) rc = CLI_FAILED;
        if (rc == CLI_OK)
            fprintf(stderr, "kernelkit " CMD ": wrote %zu step benchmark(s) to %s\n", r->count,
                    o->output);
        free(text);
        kk_bench_results_free(r);
    }
    if (rc == CLI_OK && o->report) {
        char *md = NULL;
        if (kk_decoder_cost_markdown(costs, phases, n, &env, &md) != KK_OK)
            rc = cli_fail(CMD, "building the report");
        else if (cli_write_text(CMD, o->report, md) != 0)
            rc = CLI_FAILED;
        else
            fprintf(stderr, "kernelkit " CMD ": wrote the report to %s\n", o->report);
        free(md);
    }
    kk_bench_environment_free(&env);
    return rc;
}

int cli_model_cost_run(kk_decoder *d, const char *dir, const char *device, kk_opt_level level,
                       long batch, long prefill, long decode, long seed, int64_t hidden,
                       const cli_model_cost *o, int argc, char **argv) {
    if (!o->profile) return CLI_OK;
    kk_bench_ceilings ceil;
    const kk_bench_ceilings *cp = NULL;
    if (kk_ceilings_load(device, o->ceilings, &ceil) == KK_OK)
        cp = &ceil;
    else if (o->ceilings) /* asked for and unusable: an error */
        return cli_fail(CMD, "loading --ceilings");
    else
        printf("\nNo ceilings stored for %s: run `kernelkit calibrate --device %s` for the "
               "prediction (%s)\n",
               device, device, kk_last_error_message());
    if (cp)
        printf("\nceilings: copy %.4g GB/s, read %.4g GB/s, bf16 %.4g, fp8 %.4g, fp32 %.4g "
               "TFLOP/s (0: unknown)\n",
               ceil.copy_gbs, ceil.read_gbs, ceil.bf16_tflops, ceil.fp8_tflops, ceil.fp32_tflops);
    kk_bench_options bo;
    kk_decoder_profile_options(&bo, o->budget_s);
    double floor_s = o->floor_us >= 0 ? o->floor_us * 1e-6 : 0;
    if (o->floor_us < 0 && kk_decoder_launch_floor(d, &bo, &floor_s) != KK_OK)
        return cli_fail(CMD, "measuring the launch floor");
    printf("launch floor: %.2f us per op call (%s)\n", floor_s * 1e6,
           o->floor_us >= 0 ? "--launch-floor-us" : "measured: one kk_rmsnorm of a row of 32");
    kk_decoder_cost *c = calloc(4, sizeof *c);
    if (!c) return cli_fail(CMD, "out of memory");
    uint64_t rng = (uint64_t)seed * 0x9e3779b97f4a7c15ULL + 7;
    int n = 0, n0 = 0, rc = CLI_OK;
    kk_decoder *d0 = NULL;
    const int64_t h = hidden;
    const int tty = isatty(fileno(stderr));
    if (tty) fprintf(stderr, "profiling the steps ...");
    if (profile(d, device, batch, prefill, decode, h, &rng, cp, floor_s, &bo, c, &n) != KK_OK)
        rc = cli_fail(CMD, "profiling the steps");
    if (rc == CLI_OK && o->compare && level != KK_OPT_CONSERVATIVE) {
        kk_model *m = NULL;
        if (kk_model_open(dir, &m) != KK_OK ||
            kk_decoder_create(m, device, KK_OPT_CONSERVATIVE, (int)batch, (int)(prefill + decode),
                              &d0) != KK_OK)
            rc = cli_fail(CMD, "building the conservative decoder to compare with");
        kk_model_close(m);
        if (rc == CLI_OK && profile(d0, device, batch, prefill, decode, h, &rng, cp, floor_s, &bo,
                                    c + 2, &n0) != KK_OK)
            rc = cli_fail(CMD, "profiling the conservative decoder");
        kk_decoder_free(d0);
    }
    if (tty) fprintf(stderr, "\r\033[K");
    static const char *const names[2] = {"prefill", "decode"};
    const kk_decoder_cost *costs[4];
    const char *phases[4];
    int k = 0;
    for (int i = 0; rc == CLI_OK && i < n; i++) costs[k] = &c[i], phases[k++] = names[i];
    for (int i = 0; rc == CLI_OK && i < n0; i++) costs[k] = &c[2 + i], phases[k++] = names[i];
    for (int i = 0; i < k; i++) print_cost(costs[i], phases[i]);
    for (int i = 0; i < n0 && i < n; i++) {
        double ms, ps;
        kk_decoder_cost_speedup(&c[2 + i], &c[i], &ms, &ps);
        char t1[32] = "-", t2[32] = "-";
        if (ms > 0) snprintf(t1, sizeof t1, "%.2fx", ms);
        if (ps > 0) snprintf(t2, sizeof t2, "%.2fx", ps);
        printf("%s speedup of %s over conservative: measured %s, predicted %s\n", names[i],
               c[i].level, t1, t2);
    }
    if (k) printf("\n");
    fflush(stdout); /* before the notes on stderr */
    if (rc == CLI_OK) rc = write_outputs(o, device, costs, phases, k, cp, argc, argv);
    for (int i = 0; i < 4; i++) kk_decoder_cost_free(&c[i]);
    free(c);
    return rc;
}
