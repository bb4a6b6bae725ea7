/* kernelkit bench --import: turn raw samples timed by another program (the
 * PyTorch side-by-side scripts in bench/) into a "kernelkit.bench/1" results
 * file, so the anchors get the same statistics, environment and work counts
 * as KernelKit's own entries and `kernelkit report` can pair them. The input
 * format: docs/harness.md, "Anchors". */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kernelkit/bench.h"
#include "kernelkit/cases.h"

#define CMD "bench"
#define MAX_IMPORT_BYTES ((long)256 << 20)

static int import_error(const char *path, const char *field, const char *what) {
    fprintf(stderr, "kernelkit " CMD ": bad import file %s: %s: %s\n", path, field, what);
    return CLI_USAGE;
}

/* The registry's parameters as results parameters, plus "implementation". */
static int to_bench_params(const kk_op_params *p, const char *impl, kk_bench_param *out) {
    int n = 0;
    cli_bench_params(p, out, KK_BENCH_MAX_PARAMS - 1, &n);
    kk_bench_param *b = &out[n++];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "implementation");
    b->kind = KK_BENCH_PARAM_STRING;
    snprintf(b->string, sizeof b->string, "%s", impl);
    return n;
}

/* One imported benchmark into r; CLI_OK or an exit code. */
static int import_one(const char *path, int i, const cJSON *it, const char *device,
                      kk_bench_results *r) {
    char field[96];
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
    const cJSON *opname = cJSON_GetObjectItemCaseSensitive(it, "op");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(it, "params");
    const cJSON *impl = cJSON_GetObjectItemCaseSensitive(it, "implementation");
    const cJSON *samples = cJSON_GetObjectItemCaseSensitive(it, "samples");
    const cJSON *cold = cJSON_GetObjectItemCaseSensitive(it, "cold");
    const cJSON *flush = cJSON_GetObjectItemCaseSensitive(it, "flush");
    kk_bench_flush flush_mode = KK_BENCH_FLUSH_WRITE;
    const kk_op *op = NULL;
#define FIELD(f) (snprintf(field, sizeof field, "benchmarks[%d].%s", i, f), field)
    if (!cJSON_IsString(name) || !name->valuestring[0] || strlen(name->valuestring) > 255)
        return import_error(path, FIELD("name"), "expected a string of 1 to 255 bytes");
    if (!cJSON_IsString(opname) || kk_op_find(opname->valuestring, &op) != KK_OK)
        return import_error(path, FIELD("op"), "expected the name of a registered op");
    if (!cJSON_IsString(impl) || !impl->valuestring[0] || strlen(impl->valuestring) > 63 ||
        strcmp(impl->valuestring, "kernelkit") == 0)
        return import_error(path, FIELD("implementation"),
                            "expected the anchor's name (1 to 63 bytes, not \"kernelkit\")");
    kk_op_params p;
    if (!cJSON_IsString(params) || kk_op_params_parse(op, params->valuestring, &p) != KK_OK) {
        char why[512];
        snprintf(why, sizeof why, "expected the op's \"k=v ...\" parameters (%s)",
                 cJSON_IsString(params) ? kk_last_error_message() : "not a string");
        return import_error(path, FIELD("params"), why);
    }
    const int n = cJSON_GetArraySize(samples);
    if (!cJSON_IsArray(samples) || n < 1)
        return import_error(path, FIELD("samples"), "expected an array of at least one number");
    if (cold && !cJSON_IsBool(cold)) return import_error(path, FIELD("cold"), "expected a boolean");
    if (flush &&
        (!cJSON_IsString(flush) || kk_bench_flush_parse(flush->valuestring, &flush_mode) != KK_OK))
        return import_error(path, FIELD("flush"), "expected \"write\" or \"read\"");
    kk_bench_measurement m;
    memset(&m, 0, sizeof m);
    m.samples = malloc((size_t)n * sizeof *m.samples);
    if (!m.samples) return cli_fail(CMD, "out of memory");
    const cJSON *s;
    int k = 0;
    cJSON_ArrayForEach(s, samples) {
        if (!cJSON_IsNumber(s) || !isfinite(s->valuedouble) || s->valuedouble < 0) {
            free(m.samples);
            snprintf(field, sizeof field, "benchmarks[%d].samples[%d]", i, k);
            return import_error(path, field, "expected a finite number of seconds >= 0");
        }
        m.samples[k] = s->valuedouble;
        m.sampled_time_s += s->valuedouble;
        k++;
    }
#undef FIELD
    snprintf(m.device, sizeof m.device, "%s", device);
    m.n = (size_t)n;
    m.batch = 1;
    m.cold = cold ? cJSON_IsTrue(cold) : 0;
    m.stop = KK_BENCH_STOP_MAX_SAMPLES;
    m.wall_time_s = m.sampled_time_s;
    m.pinned_cpu = -1;
    snprintf(m.throttle_note, sizeof m.throttle_note,
             "imported: timed by the %s script, no throttle detection", impl->valuestring);
    m.flush_mode = (int)flush_mode;
    kk_bench_options_default(&m.options);
    m.options.flush_mode = (int)flush_mode;
    m.options.max_samples = (size_t)n;
    if (m.options.min_samples > m.options.max_samples)
        m.options.min_samples = m.options.max_samples;
    kk_bench_param bp[KK_BENCH_MAX_PARAMS];
    const int np = to_bench_params(&p, impl->valuestring, bp);
    const kk_bench_spec spec = {
        .name = name->valuestring,
        .op = kk_op_name(op),
        .dtype = kk_dtype_name(kk_case_dtype(&p)),
        .params = bp,
        .nparams = np,
        .flops = kk_op_flops(&p),
        .bytes = kk_op_bytes(&p),
    };
    const kk_status st = kk_bench_results_add(r, &spec, &m);
    free(m.samples);
    if (st != KK_OK) return cli_fail(CMD, name->valuestring);
    const kk_bench_entry *e = &r->entries[r->count - 1];
    printf("%-44s median %.3f us  %.2f GB/s  %.3f TFLOP/s  n=%zu  (%s)\n", e->name,
           e->summary.median * 1e6, e->gbs, e->tflops, e->m.n, impl->valuestring);
    return CLI_OK;
}

int cli_bench_import(const char *device, const char *path, const char *output, int argc,
                     char **argv) {
    if (!output) return cli_usage_error(CMD, "--import needs -o FILE for the results");
    char *text = cli_read_file(path, MAX_IMPORT_BYTES);
    if (!text) return import_error(path, "file", "cannot read it");
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *list = root ? cJSON_GetObjectItemCaseSensitive(root, "benchmarks") : NULL;
    if (!cJSON_IsArray(list)) {
        cJSON_Delete(root);
        return import_error(path, root ? "benchmarks" : "(document)",
                            root ? "expected an array" : "not JSON");
    }
    kk_bench_results *r = cli_bench_results_new(device, argc, argv);
    if (!r) {
        cJSON_Delete(root);
        return CLI_FAILED;
    }
    int rc = CLI_OK;
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, list) {
        if (rc != CLI_OK) break;
        rc = import_one(path, i++, it, device, r);
    }
    if (rc == CLI_OK && i == 0) rc = import_error(path, "benchmarks", "empty");
    if (rc == CLI_OK) rc = cli_bench_results_write(r, output);
    kk_bench_results_free(r);
    cJSON_Delete(root);
    return rc;
}
