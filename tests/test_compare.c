/* labels: unit cpu */
/* kernelkit compare's library part (include/kernelkit/compare.h).
 *
 * Deterministic: the fixture results files in tests/data/results (made by
 * this program: `test_compare --write-fixtures DIR`, see fixtures below) give
 * identical -> SAME, +10% -> SLOWER, -10% -> FASTER, noisy -> AMBIGUOUS, a
 * per-benchmark threshold that overrides the default, benchmarks in one file
 * only, warnings for another device and its clocks, markdown and JSON.
 *
 * Measured (the proof that the gate works on real timings): the CPU sampler
 * times a fixed amount of arithmetic for a base and a new document,
 * interleaved chunk by chunk (ABBA...) so that the drift of a shared machine
 * hits both alike. The same work twice (A/A) must never be SLOWER or FASTER;
 * work made 10% larger must be SLOWER, also through the CLI (exit 1). */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernelkit/bench.h"
#include "kernelkit/compare.h"

#define FIXTURE(name) KK_TEST_DATA_DIR "/results/" name

#define KK_FIXTURES_GENERATOR
#include "data/results/fixtures.h"

static kk_bench_results *read_doc(const char *path) {
    kk_bench_results *r = NULL;
    kk_assert_ok(kk_bench_results_read_file(path, &r));
    return r;
}

static kk_bench_comparison *compare_files(const char *base, const char *cand,
                                          const kk_bench_compare_options *o) {
    kk_bench_results *b = read_doc(base), *n = read_doc(cand);
    kk_bench_comparison *c = NULL;
    kk_assert_ok(kk_bench_compare(b, n, o, &c));
    kk_bench_results_free(b);
    kk_bench_results_free(n);
    return c;
}

static const kk_bench_compare_row *row(const kk_bench_comparison *c, const char *name) {
    for (size_t i = 0; i < c->nrows; i++)
        if (strcmp(c->rows[i].name, name) == 0) return &c->rows[i];
    fail_msg("no row %s", name);
    return NULL;
}

static void assert_verdict(const kk_bench_comparison *c, const char *name, kk_verdict v) {
    const kk_bench_compare_row *r = row(c, name);
    if (r->r.verdict != v)
        fail_msg("%s: %s (ratio %.4f [%.4f, %.4f], p %.3g), expected %s", name,
                 kk_verdict_name(r->r.verdict), r->r.ratio, r->r.ratio_ci_low, r->r.ratio_ci_high,
                 r->r.mwu.p_value, kk_verdict_name(v));
}

static void fixture_verdicts(void **state) {
    (void)state;
    kk_bench_comparison *c = compare_files(FIXTURE("base.json"), FIXTURE("new.json"), NULL);
    assert_verdict(c, FX_SAME, KK_VERDICT_SAME);
    assert_verdict(c, FX_SLOWER, KK_VERDICT_SLOWER);
    assert_verdict(c, FX_FASTER, KK_VERDICT_FASTER);
    assert_verdict(c, FX_NOISY, KK_VERDICT_AMBIGUOUS);
    /* +5% under the entry's own 10% threshold: SAME, where 3% would say SLOWER */
    assert_verdict(c, FX_OVERRIDE, KK_VERDICT_SAME);
    const kk_bench_compare_row *r = row(c, FX_OVERRIDE);
    assert_true(r->threshold == 0.10);
    assert_int_equal(r->threshold_source, KK_BENCH_THRESHOLD_NEW);
    assert_true(r->r.ratio_ci_low > 1.03);
    assert_int_equal(row(c, FX_SLOWER)->threshold_source, KK_BENCH_THRESHOLD_DEFAULT);
    /* the identical pair: ratio exactly 1 */
    assert_true(row(c, FX_SAME)->r.ratio == 1.0);
    assert_true(row(c, FX_SLOWER)->r.cliffs_delta > 0.474);
    assert_int_equal(row(c, FX_SLOWER)->r.effect, KK_EFFECT_LARGE);
    assert_int_equal(c->n_only_base, 1);
    assert_string_equal(c->only_base[0], FX_ONLY_BASE);
    assert_int_equal(c->n_only_new, 1);
    assert_string_equal(c->only_new[0], FX_ONLY_NEW);
    assert_int_equal(kk_bench_comparison_slower(c), 1);
    assert_int_equal(c->count[KK_VERDICT_FASTER], 1);
    assert_int_equal(c->nwarnings, 0);
    assert_int_equal(c->nrows, c->count[0] + c->count[1] + c->count[2] + c->count[3]);
    kk_bench_comparison_free(c);
}

static void swapped_files_swap_verdicts(void **state) {
    (void)state;
    kk_bench_comparison *c = compare_files(FIXTURE("new.json"), FIXTURE("base.json"), NULL);
    assert_verdict(c, FX_SLOWER, KK_VERDICT_FASTER);
    assert_verdict(c, FX_FASTER, KK_VERDICT_SLOWER);
    assert_verdict(c, FX_SAME, KK_VERDICT_SAME);
    assert_int_equal(c->n_only_base, 1);
    assert_string_equal(c->only_base[0], FX_ONLY_NEW);
    kk_bench_comparison_free(c);

    c = compare_files(FIXTURE("base.json"), FIXTURE("base.json"), NULL);
    assert_int_equal(c->count[KK_VERDICT_SAME], c->nrows);
    assert_int_equal(c->n_only_base + c->n_only_new, 0);
    kk_bench_comparison_free(c);
}

static void options_threshold_and_entry_override(void **state) {
    (void)state;
    kk_bench_compare_options o;
    kk_bench_compare_options_default(&o);
    o.threshold = 0.20; /* a 10% change is now within the band */
    kk_bench_comparison *c = compare_files(FIXTURE("base.json"), FIXTURE("new.json"), &o);
    assert_verdict(c, FX_SLOWER, KK_VERDICT_SAME);
    assert_verdict(c, FX_FASTER, KK_VERDICT_SAME);
    assert_true(row(c, FX_OVERRIDE)->threshold == 0.10); /* the entry still wins */
    assert_true(row(c, FX_SLOWER)->threshold == 0.20);
    assert_int_equal(kk_bench_comparison_slower(c), 0);
    kk_bench_comparison_free(c);

    o.threshold = 0.01;
    o.seed = 99;
    o.resamples = 2000;
    o.alpha = 0.01;
    c = compare_files(FIXTURE("base.json"), FIXTURE("new.json"), &o);
    assert_verdict(c, FX_SLOWER, KK_VERDICT_SLOWER);
    assert_int_equal(row(c, FX_SLOWER)->r.options.resamples, 2000);
    assert_true(row(c, FX_SLOWER)->r.options.seed == 99);
    kk_bench_comparison_free(c);
}

static void other_device_warns(void **state) {
    (void)state;
    kk_bench_comparison *c = compare_files(FIXTURE("base.json"), FIXTURE("base_h100.json"), NULL);
    assert_true(c->nwarnings >= 3);
    char all[4096] = "";
    for (int i = 0; i < c->nwarnings; i++) {
        strcat(all, c->warnings[i]);
        strcat(all, "\n");
    }
    kk_assert_contains(all, "devices differ");
    kk_assert_contains(all, "NVIDIA H100");
    kk_assert_contains(all, "maximum SM clocks differ: base 1980 MHz, new 1755 MHz");
    kk_assert_contains(all, "driver versions differ");
    assert_int_equal(kk_bench_comparison_slower(c), 0); /* a warning, not a failure */
    /* per-row: the measured mean SM clocks differ too */
    kk_assert_contains(row(c, FX_SAME)->note, "mean SM clock 1980 vs 1755 MHz");
    char *md = NULL;
    kk_assert_ok(kk_bench_comparison_markdown(c, &md));
    kk_assert_contains(md, "> **Warning:** devices differ");
    free(md);
    kk_bench_comparison_free(c);
}

/* The fixtures predate "flush_mode" (so they read as write-flushed); the
 * same samples said to be read-flushed are not compared silently. */
static void other_flush_mode_warns(void **state) {
    (void)state;
    kk_bench_results *b = read_doc(FIXTURE("base.json")), *n = read_doc(FIXTURE("base.json"));
    for (size_t i = 0; i < n->count; i++) {
        assert_int_equal(b->entries[i].m.flush_mode, KK_BENCH_FLUSH_WRITE);
        assert_int_equal(b->entries[i].m.cold, 1);
        n->entries[i].m.flush_mode = KK_BENCH_FLUSH_READ;
    }
    kk_bench_comparison *c = NULL;
    kk_assert_ok(kk_bench_compare(b, n, NULL, &c));
    assert_int_equal(c->nwarnings, 1);
    kk_assert_contains(c->warnings[0], "L2 flush modes differ for");
    kk_assert_contains(c->warnings[0], "base write, new read");
    assert_string_equal(row(c, FX_SAME)->note, "L2 flush write vs read");
    assert_verdict(c, FX_SAME, KK_VERDICT_SAME); /* a note, not a verdict */
    char *md = NULL;
    kk_assert_ok(kk_bench_comparison_markdown(c, &md));
    kk_assert_contains(md, "L2 flush modes differ");
    free(md);
    kk_bench_comparison_free(c);

    /* hot on one side: the flush mode does not apply, cold vs hot is the note */
    n->entries[0].m.cold = 0;
    kk_assert_ok(kk_bench_compare(b, n, NULL, &c));
    assert_string_equal(c->rows[0].note, "cold vs hot samples");
    kk_bench_comparison_free(c);

    /* the same mode on both sides: nothing to say */
    for (size_t i = 0; i < b->count; i++) b->entries[i].m.flush_mode = KK_BENCH_FLUSH_READ;
    n->entries[0].m.cold = 1;
    kk_assert_ok(kk_bench_compare(b, n, NULL, &c));
    assert_int_equal(c->nwarnings, 0);
    assert_string_equal(row(c, FX_SAME)->note, "");
    kk_bench_comparison_free(c);
    kk_bench_results_free(b);
    kk_bench_results_free(n);
}

static void markdown_and_json(void **state) {
    (void)state;
    kk_bench_comparison *c = compare_files(FIXTURE("base.json"), FIXTURE("new.json"), NULL);
    char *md = NULL, *json = NULL, line[256];
    kk_assert_ok(kk_bench_comparison_markdown(c, &md));
    kk_assert_contains(md, "| benchmark | base median | new median | ratio [95% CI] | p | "
                           "delta (magnitude) | threshold | verdict |");
    kk_assert_contains(md, "| `" FX_SLOWER "` | ");
    kk_assert_contains(md, "| 3% | **SLOWER** |");
    kk_assert_contains(md, "| 10%* | SAME |");
    kk_assert_contains(md, "(large) |");
    kk_assert_contains(md, "Only in base (1, not compared): `" FX_ONLY_BASE "`");
    kk_assert_contains(md, "Only in new (1, not compared): `" FX_ONLY_NEW "`");
    kk_assert_ok(kk_bench_comparison_summary(c, line, sizeof line));
    kk_assert_contains(line, "1 SLOWER, 1 FASTER");
    kk_assert_contains(line, "FAIL");
    kk_assert_contains(md, line);
    kk_assert_ok(kk_bench_comparison_json(c, &json));
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    assert_string_equal(cJSON_GetObjectItem(root, "schema")->valuestring, KK_BENCH_COMPARE_SCHEMA);
    cJSON *rows = cJSON_GetObjectItem(root, "benchmarks");
    assert_int_equal(cJSON_GetArraySize(rows), (int)c->nrows);
    cJSON *summary = cJSON_GetObjectItem(root, "summary");
    assert_int_equal(cJSON_GetObjectItem(summary, "slower")->valueint, 1);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(summary, "pass")));
    int found = 0;
    cJSON *x;
    cJSON_ArrayForEach(x, rows) {
        if (strcmp(cJSON_GetObjectItem(x, "name")->valuestring, FX_SLOWER) != 0) continue;
        found = 1;
        assert_string_equal(cJSON_GetObjectItem(x, "verdict")->valuestring, "SLOWER");
        assert_true(cJSON_GetObjectItem(x, "ratio_ci_low")->valuedouble > 1.03);
    }
    assert_true(found);
    cJSON_Delete(root);
    free(md);
    free(json);
    kk_bench_comparison_free(c);
}

static void bad_input(void **state) {
    (void)state;
    kk_bench_results *b = read_doc(FIXTURE("base.json"));
    kk_bench_comparison *c = NULL;
    kk_bench_compare_options o;
    kk_bench_compare_options_default(&o);
    kk_assert_status(kk_bench_compare(NULL, b, &o, &c), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_bench_compare(b, b, &o, NULL), KK_ERR_INVALID_ARGUMENT);
    o.threshold = -0.1;
    kk_assert_status(kk_bench_compare(b, b, &o, &c), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "options.threshold");
    kk_bench_compare_options_default(&o);
    o.alpha = 1;
    kk_assert_status(kk_bench_compare(b, b, &o, &c), KK_ERR_INVALID_ARGUMENT);
    kk_bench_compare_options_default(&o);
    o.resamples = 10;
    kk_assert_status(kk_bench_compare(b, b, &o, &c), KK_ERR_INVALID_ARGUMENT);
    assert_null(c);
    /* a time of 0 cannot be divided: that row is not compared, the rest is */
    kk_bench_results *z = read_doc(FIXTURE("base.json"));
    z->entries[0].m.samples[3] = 0;
    kk_assert_ok(kk_bench_compare(b, z, NULL, &c));
    assert_int_equal(c->rows[0].compared, 0);
    assert_int_equal(c->rows[0].r.verdict, KK_VERDICT_AMBIGUOUS);
    kk_assert_contains(c->rows[0].note, "not compared");
    assert_int_equal(c->rows[1].compared, 1);
    char *json = NULL;
    kk_assert_ok(kk_bench_comparison_json(c, &json));
    cJSON *root = cJSON_Parse(json); /* NaN must come out as null, not break the JSON */
    assert_non_null(root);
    cJSON_Delete(root);
    free(json);
    kk_bench_comparison_free(c);
    kk_bench_results_free(z);
    kk_bench_results_free(b);
}

/* ---- measured ---- */

/* A fixed amount of work: a dependent chain of multiply-adds (latency-bound,
 * so its time is proportional to its length and insensitive to memory), then
 * a sweep over an array of a fixed size (a dependent sum: no vectorizing). */
typedef struct work {
    long chain;
    size_t sweep;
    const double *data;
} work;

static volatile double g_sink;

static kk_status run_work(void *ctx, kk_stream stream) {
    (void)stream;
    const work *w = ctx;
    double x = 1.0;
    for (long i = 0; i < w->chain; i++) x = x * 0.9999999 + 1e-7;
    for (size_t i = 0; i < w->sweep; i++) x += w->data[i];
    g_sink = x;
    return KK_OK;
}

static double seconds_of(const work *w) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    run_work((void *)w, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
}

/* Work of about 0.4 ms on this machine: long enough for the clock, short
 * enough for hundreds of samples in a second. */
static work calibrated(const double *data, size_t n) {
    work w = {100000, n / 2, data};
    double best = INFINITY;
    for (int i = 0; i < 5; i++) best = fmin(best, seconds_of(&w));
    double scale = 0.4e-3 / best;
    w.chain = (long)(w.chain * scale);
    w.sweep = (size_t)fmin((double)n / 1.1, (double)w.sweep * scale);
    if (w.chain < 1000) w.chain = 1000;
    return w;
}

typedef struct acc {
    kk_bench_measurement m; /* the first chunk's metadata, with all samples */
    size_t cap;
} acc;

static void take_chunk(const work *w, size_t chunk, acc *a) {
    kk_bench_options o;
    kk_bench_options_default(&o);
    o.rse_target = 0; /* a fixed chunk: min = max samples */
    o.min_samples = o.max_samples = chunk;
    o.min_time_s = 0;
    o.warmup_runs = 1;
    o.warmup_time_s = 0;
    o.batch = 1;
    o.cold = 0;
    kk_bench_measurement m;
    kk_assert_ok(kk_bench_measure("cpu", run_work, (void *)w, &o, &m));
    assert_int_equal(m.n, chunk);
    if (!a->m.samples) {
        double *keep = malloc(a->cap * sizeof *keep);
        assert_non_null(keep);
        a->m = m;
        a->m.samples = keep;
        a->m.n = 0;
    }
    assert_true(a->m.n + m.n <= a->cap);
    memcpy(a->m.samples + a->m.n, m.samples, m.n * sizeof *m.samples);
    a->m.n += m.n;
    kk_bench_measurement_free(&m);
}

/* Base and new, ABBA chunk by chunk; written to files and read back, as the
 * CLI would see them. Returns the comparison; *paths receives the two files. */
static kk_bench_comparison *measure_pair(double factor, char paths[2][64]) {
    enum { ROUNDS = 40, CHUNK = 10, N = 1 << 16 };
    double *data = malloc(N * sizeof *data);
    assert_non_null(data);
    for (size_t i = 0; i < N; i++) data[i] = 1e-9 * (double)(i % 97);
    work base = calibrated(data, N), cand = base;
    cand.chain = (long)lround((double)base.chain * factor);
    cand.sweep = (size_t)lround((double)base.sweep * factor);
    acc a[2] = {{.cap = ROUNDS * CHUNK}, {.cap = ROUNDS * CHUNK}};
    for (int r = 0; r < ROUNDS; r++) {
        int first = r & 1; /* ABBA: neither side always goes first */
        take_chunk(first ? &cand : &base, CHUNK, &a[first]);
        take_chunk(first ? &base : &cand, CHUNK, &a[!first]);
    }
    kk_bench_environment env;
    kk_assert_ok(kk_bench_environment_capture("cpu", 0, NULL, NULL, 0, &env));
    for (int k = 0; k < 2; k++) {
        kk_bench_results *r;
        kk_assert_ok(kk_bench_results_create(&env, &r));
        kk_bench_spec s = {.name = "cpu/fma_chain+sweep", .op = "work", .dtype = "f64"};
        kk_assert_ok(kk_bench_results_add(r, &s, &a[k].m));
        snprintf(paths[k], 64, "/tmp/kk_test_compare_%d_%d.json", (int)getpid(), k);
        kk_assert_ok(kk_bench_results_write_file(r, paths[k]));
        kk_bench_results_free(r);
        free(a[k].m.samples);
    }
    kk_bench_environment_free(&env);
    free(data);
    kk_bench_comparison *c = compare_files(paths[0], paths[1], NULL);
    const kk_compare_result *x = &c->rows[0].r;
    printf("  factor %.2f: %s, ratio %.4f [%.4f, %.4f], p %.3g, delta %+.2f, n %zu + %zu\n", factor,
           kk_verdict_name(x->verdict), x->ratio, x->ratio_ci_low, x->ratio_ci_high, x->mwu.p_value,
           x->cliffs_delta, x->n_base, x->n_cand);
    return c;
}

/* The CLI's exit status on two files. */
static int cli_compare(char paths[2][64]) {
    char cmd[512], out[16384];
    snprintf(cmd, sizeof cmd, "%s compare %s %s", KK_CLI_PATH, paths[0], paths[1]);
    return kk_test_run(cmd, out, sizeof out);
}

/* A loaded machine (a second CI run beside this one) can disturb one
 * measured pair, so each measured test takes up to three pairs; a comparison
 * that is wrong every time still fails. */
enum { MEASURED_TRIES = 3 };

static void measured_a_a_is_never_slower(void **state) {
    (void)state;
    char paths[2][64];
    int ok = 0;
    for (int t = 0; t < MEASURED_TRIES && !ok; t++) {
        kk_bench_comparison *c = measure_pair(1.0, paths);
        assert_int_equal(c->nrows, 1);
        assert_int_equal(c->rows[0].compared, 1);
        kk_verdict v = c->rows[0].r.verdict;
        /* never a change, and the CLI agrees */
        ok = (v == KK_VERDICT_SAME || v == KK_VERDICT_AMBIGUOUS) && cli_compare(paths) == 0;
        kk_bench_comparison_free(c);
        unlink(paths[0]);
        unlink(paths[1]);
    }
    assert_true(ok);
}

static void measured_planted_slowdown_is_slower(void **state) {
    (void)state;
    char paths[2][64];
    int ok = 0;
    for (int t = 0; t < MEASURED_TRIES && !ok; t++) {
        kk_bench_comparison *c = measure_pair(1.10, paths);
        ok = c->rows[0].r.verdict == KK_VERDICT_SLOWER && c->rows[0].r.ratio > 1.04 &&
             c->rows[0].r.ratio < 1.20 && cli_compare(paths) == 1;
        kk_bench_comparison_free(c);
        unlink(paths[0]);
        unlink(paths[1]);
    }
    assert_true(ok);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-fixtures") == 0)
        return kk_test_write_fixtures(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fixture_verdicts),
        cmocka_unit_test(swapped_files_swap_verdicts),
        cmocka_unit_test(options_threshold_and_entry_override),
        cmocka_unit_test(other_device_warns),
        cmocka_unit_test(other_flush_mode_warns),
        cmocka_unit_test(markdown_and_json),
        cmocka_unit_test(bad_input),
        cmocka_unit_test(measured_a_a_is_never_slower),
        cmocka_unit_test(measured_planted_slowdown_is_slower),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
