/* labels: unit cpu */
/* Benchmark results (include/kernelkit/bench.h): the environment has every
 * field, a document written, read and written again is byte-identical (and
 * its numbers bit-identical), derived numbers and shares are right, bad
 * additions are refused, and hostile files are refused with KK_ERR_IO (or
 * KK_ERR_UNSUPPORTED for another schema version) naming the field, never a
 * crash: missing members, wrong types, out-of-range values, inconsistent
 * counts, truncations at every length and random corruption. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernelkit/bench.h"

static const char *const k_argv[] = {"kernelkit", "bench", "--op", "gemm", "--name=\"x y\""};

static void capture(kk_bench_environment *env) {
    kk_bench_switch sw[2] = {{"tf32", "off"}, {"seed", "42"}};
    kk_assert_ok(kk_bench_environment_capture("cpu", 5, k_argv, sw, 2, env));
}

static void environment_has_every_field(void **state) {
    (void)state;
    kk_bench_environment e;
    capture(&e);
    assert_string_equal(e.device, "cpu");
    assert_int_equal(e.device_index, 0);
    assert_true(e.device_name[0] && e.cpu_model[0] && e.cpu_governor[0]);
    assert_true(e.hostname[0] && e.os[0]);
    assert_string_equal(e.kk_version, kk_version());
    assert_string_equal(e.git_commit, kk_git_commit());
    /* 2025-06-01T12:34:56Z */
    assert_int_equal(strlen(e.timestamp_utc), 20);
    assert_int_equal(e.timestamp_utc[10], 'T');
    assert_int_equal(e.timestamp_utc[19], 'Z');
    assert_int_equal(e.argc, 5);
    for (int i = 0; i < 5; i++) assert_string_equal(e.argv[i], k_argv[i]);
    assert_int_equal(e.nswitches, 2);
    assert_string_equal(e.switches[0].name, "tf32");
    assert_string_equal(e.switches[1].value, "42");
    if (!kk_built_with_cuda()) {
        assert_int_equal(e.cuda_runtime_version, 0);
        assert_string_equal(e.build_cuda, "");
    } else {
        assert_true(e.cuda_runtime_version >= 12000);
    }
    kk_bench_environment copy;
    kk_assert_ok(kk_bench_environment_copy(&copy, &e));
    assert_ptr_not_equal(copy.argv, e.argv);
    assert_string_equal(copy.argv[4], k_argv[4]);
    kk_bench_environment_free(&e);
    kk_bench_environment_free(&copy);
    assert_null(copy.argv);

    kk_bench_switch many[KK_BENCH_MAX_SWITCHES + 1];
    memset(many, 0, sizeof many);
    kk_bench_switch dup[2] = {{"tf32", "on"}, {"tf32", "off"}};
    kk_assert_status(kk_bench_environment_capture("cpu", -1, NULL, NULL, 0, &e),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_bench_environment_capture("cpu", 2, NULL, NULL, 0, &e),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_bench_environment_capture("cpu", 0, NULL, many, 33, &e),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_bench_environment_capture("cpu", 0, NULL, dup, 2, &e),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_bench_environment_capture("tpu", 0, NULL, NULL, 0, &e),
                     KK_ERR_INVALID_ARGUMENT);
}

/* A measurement with awkward numbers: no short decimal form, tiny, large. */
static void fake_measurement(kk_bench_measurement *m, size_t n, double scale) {
    memset(m, 0, sizeof *m);
    kk_bench_options_default(&m->options);
    snprintf(m->device, sizeof m->device, "cpu");
    m->samples = malloc(n * sizeof *m->samples);
    for (size_t i = 0; i < n; i++) m->samples[i] = scale * (1.0 + (double)i / 3.0 + 1e-17 * i);
    m->samples[0] = scale * 0.1;
    m->n = n;
    m->batch = 1;
    m->stop = KK_BENCH_STOP_RSE;
    m->final_rse = 1.0 / 3.0;
    m->pinned_cpu = -1;
    m->wall_time_s = 1e-300 + 2.5;
    snprintf(m->throttle_note, sizeof m->throttle_note, "not a \"GPU\"\n\ttab");
}

static kk_status noop(void *ctx, kk_stream stream) {
    (void)ctx;
    (void)stream;
    return KK_OK;
}

static kk_bench_results *build(void) {
    kk_bench_environment env;
    capture(&env);
    kk_bench_results *r;
    kk_assert_ok(kk_bench_results_create(&env, &r));
    kk_bench_environment_free(&env);
    kk_bench_ceilings c = {.copy_gbs = 3000.5,
                           .read_gbs = 3300,
                           .bf16_tflops = 800,
                           .fp8_tflops = 1500,
                           .fp32_tflops = 0};
    kk_assert_ok(kk_bench_results_set_ceilings(r, &c));

    kk_bench_param p[3] = {{.name = "M", .kind = KK_BENCH_PARAM_NUMBER, .number = 4096},
                           {.name = "causal", .kind = KK_BENCH_PARAM_BOOL, .boolean = 1},
                           {.name = "act", .kind = KK_BENCH_PARAM_STRING, .string = "gelu"}};
    kk_bench_spec s = {.name = "gemm/M=4096",
                       .op = "gemm",
                       .dtype = "bf16",
                       .params = p,
                       .nparams = 3,
                       .flops = 2.0 * 4096 * 4096 * 4096,
                       .bytes = 3.0 * 2 * 4096 * 4096,
                       .threshold = 0.05,
                       .resamples = 1000};
    kk_bench_measurement m;
    fake_measurement(&m, 37, 1e-3);
    m.cold = 1; /* read-flushed: the mode must survive the round trip */
    m.flush_bytes = 100ull << 20;
    m.flush_mode = KK_BENCH_FLUSH_READ;
    m.options.flush_mode = KK_BENCH_FLUSH_READ;
    kk_assert_ok(kk_bench_results_add(r, &s, &m));
    kk_bench_measurement_free(&m);

    /* a real measurement, int8 (no TFLOP/s ceiling applies), no flops */
    kk_bench_options o;
    kk_bench_options_default(&o);
    o.min_time_s = 0.01;
    o.warmup_time_s = 0.001;
    o.max_samples = 50;
    kk_bench_spec s2 = {.name = "noop", .op = "", .dtype = "int8", .bytes = 1e6, .resamples = 1000};
    kk_assert_ok(kk_bench_measure("cpu", noop, NULL, &o, &m));
    kk_assert_ok(kk_bench_results_add(r, &s2, &m));
    kk_bench_measurement_free(&m);
    return r;
}

static void derived_numbers(void **state) {
    (void)state;
    kk_bench_results *r = build();
    assert_int_equal(r->count, 2);
    const kk_bench_entry *e = kk_bench_results_find(r, "gemm/M=4096");
    assert_non_null(e);
    assert_int_equal(e->summary.n, 37);
    assert_int_equal(e->summary.resamples, 1000);
    assert_true(fabs(e->tflops - e->flops / e->summary.median / 1e12) <= 1e-12 * e->tflops);
    assert_true(e->share_tflops == e->tflops / 800);
    assert_string_equal(e->tflops_ceiling, "bf16_tflops");
    assert_true(e->share_copy_gbs == e->gbs / 3000.5);
    assert_true(e->share_read_gbs == e->gbs / 3300);
    const kk_bench_entry *n = kk_bench_results_find(r, "noop");
    assert_true(n->tflops == 0 && n->share_tflops == -1 && n->tflops_ceiling[0] == 0);
    assert_true(n->share_copy_gbs > 0);
    assert_null(kk_bench_results_find(r, "nope"));
    /* without ceilings every share is unknown */
    kk_assert_ok(kk_bench_results_set_ceilings(r, NULL));
    assert_true(r->entries[0].share_tflops == -1 && r->entries[0].share_copy_gbs == -1);
    kk_bench_ceilings bad = {.copy_gbs = NAN};
    kk_assert_status(kk_bench_results_set_ceilings(r, &bad), KK_ERR_INVALID_ARGUMENT);
    kk_bench_results_free(r);
}

static void bad_additions(void **state) {
    (void)state;
    kk_bench_results *r = build();
    kk_bench_measurement m;
    fake_measurement(&m, 5, 1);
    kk_bench_spec s = {.name = "gemm/M=4096"};
    kk_assert_status(kk_bench_results_add(r, &s, &m), KK_ERR_INVALID_ARGUMENT); /* taken */
    s.name = "";
    kk_assert_status(kk_bench_results_add(r, &s, &m), KK_ERR_INVALID_ARGUMENT);
    s.name = "x";
    s.flops = NAN;
    kk_assert_status(kk_bench_results_add(r, &s, &m), KK_ERR_INVALID_ARGUMENT);
    s.flops = 0;
    s.threshold = 1.5;
    kk_assert_status(kk_bench_results_add(r, &s, &m), KK_ERR_INVALID_ARGUMENT);
    s.threshold = 0;
    s.nparams = KK_BENCH_MAX_PARAMS + 1;
    kk_assert_status(kk_bench_results_add(r, &s, &m), KK_ERR_INVALID_ARGUMENT);
    kk_bench_param bad = {.name = "M", .kind = KK_BENCH_PARAM_NUMBER, .number = INFINITY};
    s.params = &bad;
    s.nparams = 1;
    kk_assert_status(kk_bench_results_add(r, &s, &m), KK_ERR_INVALID_ARGUMENT);
    s.nparams = 0;
    m.samples[2] = -1;
    kk_assert_status(kk_bench_results_add(r, &s, &m), KK_ERR_INVALID_ARGUMENT);
    m.samples[2] = 1;
    m.batch = 0;
    kk_assert_status(kk_bench_results_add(r, &s, &m), KK_ERR_INVALID_ARGUMENT);
    m.batch = 1;
    size_t n = m.n;
    m.n = 0;
    kk_assert_status(kk_bench_results_add(r, &s, &m), KK_ERR_INVALID_ARGUMENT);
    m.n = n;
    kk_assert_ok(kk_bench_results_add(r, &s, &m));
    assert_int_equal(r->count, 3);
    kk_bench_measurement_free(&m);
    kk_bench_results_free(r);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void round_trip_is_exact(void **state) {
    (void)state;
    kk_bench_results *r = build();
    char *a = NULL, *b = NULL;
    kk_assert_ok(kk_bench_results_to_json(r, &a));
    kk_bench_results *back;
    kk_assert_ok(kk_bench_results_from_json(a, strlen(a), &back));
    kk_assert_ok(kk_bench_results_to_json(back, &b));
    assert_string_equal(a, b);
    kk_assert_contains(a, "\"schema\":\t\"kernelkit.bench/1\"");

    /* the numbers themselves, bit for bit */
    assert_int_equal(back->count, r->count);
    assert_int_equal(back->has_ceilings, 1);
    for (size_t i = 0; i < r->count; i++) {
        const kk_bench_entry *x = &r->entries[i], *y = &back->entries[i];
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->m.n, y->m.n);
        assert_memory_equal(x->m.samples, y->m.samples, x->m.n * sizeof(double));
        assert_memory_equal(&x->summary.median, &y->summary.median, sizeof(double));
        assert_true(x->summary.seed == y->summary.seed);
        assert_memory_equal(&x->m.telemetry_end, &y->m.telemetry_end, sizeof(kk_gpu_telemetry));
        assert_int_equal(x->nparams, y->nparams);
        assert_true(x->share_tflops == y->share_tflops && x->threshold == y->threshold);
        assert_string_equal(x->m.throttle_note, y->m.throttle_note);
        assert_int_equal(x->m.stop, y->m.stop);
        assert_int_equal(x->m.cold, y->m.cold);
        assert_int_equal(x->m.flush_mode, y->m.flush_mode);
        assert_int_equal(x->m.options.flush_mode, y->m.options.flush_mode);
    }
    assert_int_equal(back->entries[0].m.flush_mode, KK_BENCH_FLUSH_READ);
    assert_int_equal(back->entries[0].m.options.flush_mode, KK_BENCH_FLUSH_READ);
    assert_int_equal(back->entries[1].m.flush_mode, KK_BENCH_FLUSH_WRITE); /* the default */
    kk_assert_contains(a, "\"flush_mode\":\t\"read\"");
    kk_assert_contains(a, "\"flush_mode\":\t\"write\"");
    assert_int_equal(back->env.argc, 5);
    assert_string_equal(back->env.argv[4], k_argv[4]);

    /* and through files */
    char path[] = "/tmp/kk_results_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    kk_assert_ok(kk_bench_results_write_file(r, path));
    kk_bench_results *file;
    kk_assert_ok(kk_bench_results_read_file(path, &file));
    char *first = slurp(path);
    kk_assert_ok(kk_bench_results_write_file(file, path));
    char *second = slurp(path);
    assert_string_equal(first, second);
    unlink(path);
    free(first);
    free(second);
    free(a);
    free(b);
    kk_bench_results_free(back);
    kk_bench_results_free(file);
    kk_bench_results_free(r);
}

/* ---- hostile documents ---- */

/* noinline: inlined, gcc 13 mistakes the returned heap text for a pointer to
 * the local that held it (-Wdangling-pointer) */
__attribute__((noinline)) static char *good_text(void) {
    kk_bench_results *r = build();
    char *text = NULL;
    kk_status st = kk_bench_results_to_json(r, &text);
    kk_bench_results_free(r);
    assert_int_equal(st, KK_OK);
    assert_non_null(text);
    return text;
}

/* The node at "a.b.0.c" (numbers index arrays); its parent and key. */
static cJSON *walk(cJSON *root, const char *path, cJSON **parent, char *key) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    cJSON *node = root;
    *parent = NULL;
    for (char *save = NULL, *t = strtok_r(buf, ".", &save); t; t = strtok_r(NULL, ".", &save)) {
        *parent = node;
        snprintf(key, 64, "%s", t);
        node = cJSON_IsArray(node) ? cJSON_GetArrayItem(node, atoi(t))
                                   : cJSON_GetObjectItemCaseSensitive(node, t);
    }
    return node;
}

typedef struct mutation {
    const char *path;
    const char *json; /* NULL: delete the member */
    kk_status want;
    const char *argument; /* expected kk_last_error()->argument */
} mutation;

static void read_mutated(const char *good, const mutation *mu) {
    cJSON *root = cJSON_Parse(good), *parent;
    char key[64];
    assert_non_null(walk(root, mu->path, &parent, key));
    if (!mu->json) {
        cJSON_DeleteItemFromObjectCaseSensitive(parent, key);
    } else {
        cJSON *v = cJSON_Parse(mu->json);
        assert_non_null(v);
        if (cJSON_IsArray(parent))
            cJSON_ReplaceItemInArray(parent, atoi(key), v);
        else
            cJSON_ReplaceItemInObjectCaseSensitive(parent, key, v);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    kk_bench_results *r = NULL;
    kk_status st = kk_bench_results_from_json(text, strlen(text), &r);
    if (st != mu->want)
        fail_msg("%s -> %s: got %s (%s)", mu->path, mu->json ? mu->json : "(deleted)",
                 kk_status_name(st), kk_last_error_message());
    assert_null(r);
    if (mu->argument && strcmp(kk_last_error()->argument, mu->argument) != 0)
        fail_msg("%s: argument \"%s\", expected \"%s\" (%s)", mu->path, kk_last_error()->argument,
                 mu->argument, kk_last_error_message());
    free(text);
}

#define LONG300                                                                                    \
    "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" \
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" \
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" \
    "xxxxxx\""

static void hostile_documents_are_refused(void **state) {
    (void)state;
    static const mutation cases[] = {
        {"schema", NULL, KK_ERR_IO, "schema"},
        {"schema", "1", KK_ERR_IO, "schema"},
        {"schema", "\"other/1\"", KK_ERR_IO, "schema"},
        {"schema", "\"kernelkit.bench/2\"", KK_ERR_UNSUPPORTED, "schema"},
        {"environment", NULL, KK_ERR_IO, "environment"},
        {"environment", "[]", KK_ERR_IO, "environment"},
        {"environment.hostname", "5", KK_ERR_IO, "environment.hostname"},
        {"environment.hostname", LONG300, KK_ERR_IO, "environment.hostname"},
        {"environment.device_index", "-1", KK_ERR_IO, "environment.device_index"},
        {"environment.l2_bytes", "1.5", KK_ERR_IO, "environment.l2_bytes"},
        {"environment.command_line", "[1]", KK_ERR_IO, NULL},
        {"environment.switches", "{\"a\": 1}", KK_ERR_IO, "environment.switches.a"},
        {"ceilings.copy_gbs", "-1", KK_ERR_IO, "ceilings.copy_gbs"},
        {"ceilings", "7", KK_ERR_IO, "ceilings"},
        {"benchmarks", "{}", KK_ERR_IO, "benchmarks"},
        {"benchmarks.0", "3", KK_ERR_IO, "benchmarks[0]"},
        {"benchmarks.0.name", NULL, KK_ERR_IO, "benchmarks[0].name"},
        {"benchmarks.0.name", "\"\"", KK_ERR_IO, "benchmarks[0].name"},
        {"benchmarks.1.name", "\"gemm/M=4096\"", KK_ERR_IO, "benchmarks.name"},
        {"benchmarks.0.params.M", "[1]", KK_ERR_IO, "benchmarks[0].params.M"},
        {"benchmarks.0.threshold", "2", KK_ERR_IO, "benchmarks[0].threshold"},
        {"benchmarks.0.flops_per_run", "\"many\"", KK_ERR_IO, "benchmarks[0].flops_per_run"},
        {"benchmarks.0.samples", "[]", KK_ERR_IO, "benchmarks[0].samples"},
        {"benchmarks.0.samples", "[1, 2]", KK_ERR_IO, "benchmarks[0].samples"},
        {"benchmarks.0.samples.3", "\"x\"", KK_ERR_IO, "benchmarks[0].samples[3]"},
        {"benchmarks.0.samples.3", "-1e-9", KK_ERR_IO, "benchmarks[0].samples[3]"},
        {"benchmarks.0.samples.3", "null", KK_ERR_IO, "benchmarks[0].samples[3]"},
        {"benchmarks.0.summary.n", "36", KK_ERR_IO, "benchmarks[0].summary.n"},
        {"benchmarks.0.summary.seed", "5", KK_ERR_IO, "benchmarks[0].summary.seed"},
        {"benchmarks.0.summary.seed", "\"99999999999999999999999\"", KK_ERR_IO,
         "benchmarks[0].summary.seed"},
        {"benchmarks.0.summary.seed", "\"-1\"", KK_ERR_IO, "benchmarks[0].summary.seed"},
        {"benchmarks.0.summary.median", "true", KK_ERR_IO, "benchmarks[0].summary.median"},
        {"benchmarks.0.throughput.share", NULL, KK_ERR_IO, "benchmarks[0].throughput.share"},
        {"benchmarks.0.measurement.batch", "0", KK_ERR_IO, "benchmarks[0].measurement.batch"},
        {"benchmarks.0.measurement.batch", "1.5", KK_ERR_IO, "benchmarks[0].measurement.batch"},
        {"benchmarks.0.measurement.stop_reason", "\"bored\"", KK_ERR_IO,
         "benchmarks[0].measurement.stop_reason"},
        {"benchmarks.0.measurement.cold", "1", KK_ERR_IO, "benchmarks[0].measurement.cold"},
        {"benchmarks.0.measurement.flush_mode", "\"erase\"", KK_ERR_IO,
         "benchmarks[0].measurement.flush_mode"},
        {"benchmarks.0.measurement.flush_mode", "1", KK_ERR_IO,
         "benchmarks[0].measurement.flush_mode"},
        {"benchmarks.0.measurement.options.flush_mode", "\"READ\"", KK_ERR_IO,
         "benchmarks[0].measurement.options.flush_mode"},
        {"benchmarks.0.measurement.samples_kept", "1e300", KK_ERR_IO,
         "benchmarks[0].measurement.samples_kept"},
        {"benchmarks.0.measurement.options.min_samples", "0", KK_ERR_IO,
         "benchmarks[0].measurement.options.min_samples"},
        {"benchmarks.0.measurement.options.seed", "null", KK_ERR_IO,
         "benchmarks[0].measurement.options.seed"},
        {"benchmarks.0.measurement.telemetry_start.utilization_gpu_pct", "101", KK_ERR_IO,
         "benchmarks[0].measurement.telemetry_start.utilization_gpu_pct"},
        {"benchmarks.0.measurement.telemetry_end", NULL, KK_ERR_IO,
         "benchmarks[0].measurement.telemetry_end"},
    };
    char *good = good_text();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) read_mutated(good, &cases[i]);
    free(good);
}

/* Files written before "flush_mode" existed read as write-flushed, the only
 * flush there was. */
static void files_without_flush_mode_read_as_write(void **state) {
    (void)state;
    char *good = good_text();
    cJSON *root = cJSON_Parse(good), *parent;
    char key[64];
    assert_non_null(walk(root, "benchmarks.0.measurement.flush_mode", &parent, key));
    cJSON_DeleteItemFromObjectCaseSensitive(parent, key);
    assert_non_null(walk(root, "benchmarks.0.measurement.options.flush_mode", &parent, key));
    cJSON_DeleteItemFromObjectCaseSensitive(parent, key);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    assert_null(strstr(text, "\"read\""));
    kk_bench_results *r = NULL;
    kk_assert_ok(kk_bench_results_from_json(text, strlen(text), &r));
    assert_int_equal(r->entries[0].m.cold, 1);
    assert_int_equal(r->entries[0].m.flush_mode, KK_BENCH_FLUSH_WRITE);
    assert_int_equal(r->entries[0].m.options.flush_mode, KK_BENCH_FLUSH_WRITE);
    kk_bench_results_free(r);
    free(text);
    free(good);
}

/* A file thinned by scripts/thin-results.py (every step-th sample kept,
 * "samples_thinned" {kept, of}) reads with the kept samples; a count that does
 * not match the sampler's, or more kept than there were, is refused. */
static void thinned_samples_read(void **state) {
    (void)state;
    char *good = good_text();
    cJSON *root = cJSON_Parse(good), *parent;
    char key[64];
    assert_non_null(walk(root, "benchmarks.0.samples", &parent, key));
    cJSON *samples = cJSON_GetObjectItemCaseSensitive(parent, key);
    const int n = cJSON_GetArraySize(samples);
    assert_true(n >= 3);
    cJSON *b0 = parent;
    for (int i = n - 1; i >= 0; i -= 1)
        if (i % 2) cJSON_DeleteItemFromArray(samples, i); /* keep samples 0, 2, 4, ... */
    const int kept = cJSON_GetArraySize(samples);
    cJSON *t = cJSON_AddObjectToObject(b0, "samples_thinned");
    cJSON_AddNumberToObject(t, "kept", kept);
    cJSON *of = cJSON_AddNumberToObject(t, "of", n);
    cJSON_AddNumberToObject(t, "step", 2);
    char *text = cJSON_Print(root);
    kk_bench_results *r = NULL;
    kk_assert_ok(kk_bench_results_from_json(text, strlen(text), &r));
    assert_int_equal(r->entries[0].m.n, kept);
    assert_int_equal(r->entries[0].summary.n, n);
    kk_bench_results_free(r);
    free(text);
    cJSON_SetNumberValue(of, n + 1); /* not the sampler's count */
    text = cJSON_Print(root);
    r = NULL;
    kk_assert_status(kk_bench_results_from_json(text, strlen(text), &r), KK_ERR_IO);
    assert_non_null(strstr(kk_last_error()->message, "samples_thinned"));
    free(text);
    cJSON_Delete(root);
    free(good);
}

static void expect_io(const char *text, size_t len) {
    kk_bench_results *r = NULL;
    kk_status st = kk_bench_results_from_json(text, len, &r);
    if (st != KK_ERR_IO)
        fail_msg("%.60s: got %s (%s)", text, kk_status_name(st), kk_last_error_message());
    assert_null(r);
}

static void malformed_text_is_refused(void **state) {
    (void)state;
    static const char *const texts[] = {
        "",
        "   ",
        "{",
        "[]",
        "null",
        "\"kernelkit.bench/1\"",
        "{\"schema\": \"kernelkit.bench/1\"}",
        "{\"schema\": \"kernelkit.bench/1\", \"environment\": {}}",
        "{} trailing",
        "{\"a\": NaN}",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        expect_io(texts[i], strlen(texts[i]));
    /* nesting far deeper than any parser stack should take */
    size_t deep = 200000;
    char *d = malloc(deep);
    memset(d, '[', deep);
    expect_io(d, deep);
    free(d);

    char *good = good_text();
    size_t len = strlen(good);
    /* a number too large for a double, in place of the first sample */
    char *s = strstr(strstr(good, "\"samples\":\t["), "[") + 1;
    size_t keep = (size_t)(s - good), skip = strcspn(s, ",]");
    char *inf = malloc(len + 16);
    snprintf(inf, len + 16, "%.*s1e999%s", (int)keep, good, s + skip);
    expect_io(inf, strlen(inf));
    free(inf);
    /* every truncation fails cleanly */
    for (size_t cut = 0; cut < len; cut += 1 + cut / 50) expect_io(good, cut);
    /* random corruption: a status either way, never a crash (run under ASan) */
    uint64_t x = 12345;
    for (int i = 0; i < 300; i++) {
        char *bad = malloc(len + 1);
        memcpy(bad, good, len + 1);
        for (int k = 0; k < 4; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            bad[(x >> 20) % len] = (char)(x >> 56);
        }
        kk_bench_results *r = NULL;
        if (kk_bench_results_from_json(bad, len, &r) == KK_OK) kk_bench_results_free(r);
        free(bad);
    }
    free(good);
}

static void file_errors(void **state) {
    (void)state;
    kk_bench_results *r = NULL;
    kk_assert_status(kk_bench_results_read_file("/nonexistent/kk.json", &r), KK_ERR_IO);
    assert_string_equal(kk_last_error()->argument, "path");
    kk_assert_status(kk_bench_results_read_file("/tmp", &r), KK_ERR_IO);
    kk_assert_status(kk_bench_results_read_file("/dev/null", &r), KK_ERR_IO);
    const char *p = kk_test_write_temp("{\"schema\": 3}", 13);
    kk_assert_status(kk_bench_results_read_file(p, &r), KK_ERR_IO);
    kk_assert_contains(kk_last_error_message(), p); /* the file is named */
    unlink(p);
    assert_null(r);
    kk_bench_results *doc = build();
    kk_assert_status(kk_bench_results_write_file(doc, "/nonexistent/dir/kk.json"), KK_ERR_IO);
    kk_bench_results_free(doc);
    kk_assert_status(kk_bench_results_from_json(NULL, 0, &r), KK_ERR_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(environment_has_every_field),
        cmocka_unit_test(derived_numbers),
        cmocka_unit_test(bad_additions),
        cmocka_unit_test(round_trip_is_exact),
        cmocka_unit_test(hostile_documents_are_refused),
        cmocka_unit_test(files_without_flush_mode_read_as_write),
        cmocka_unit_test(thinned_samples_read),
        cmocka_unit_test(malformed_text_is_refused),
        cmocka_unit_test(file_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
