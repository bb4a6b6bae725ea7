/* labels: unit cpu */
/* kernelkit calibrate without a GPU: a quick CPU calibration gives positive
 * finite copy, read and fp32 figures (bf16/fp8 unavailable with a reason); the
 * ceilings file round-trips exactly through a temporary XDG_CACHE_HOME and
 * loads into kk_bench_ceilings; loading with no file gives KK_ERR_IO "no
 * ceilings stored"; hostile files are refused; the cuBLASLt loader either loads
 * or says why, and the GPU paths fail cleanly with KK_ERR_CUDA_UNAVAILABLE
 * when no GPU can be used; the CLI stores a file and rejects bad options. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda/cublaslt_dl.h"
#include "cuda/bench_cuda.h"
#include "harness/bench/calibrate_internal.h"
#include "kernelkit/calibrate.h"

static char g_dir[256];
static kk_calibration g_cal; /* the quick CPU calibration, measured once */

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/kk_calibrate_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    setenv("XDG_CACHE_HOME", g_dir, 1);
    kk_calibrate_options o;
    kk_calibrate_options_default(&o);
    o.quick = 1;
    o.time_budget_s = 0.5;
    return kk_calibrate("cpu", &o, &g_cal) == KK_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_cpu_quick(void **state) {
    (void)state;
    assert_string_equal(g_cal.device, "cpu");
    assert_true(g_cal.device_name[0] != '\0');
    assert_int_equal(g_cal.quick, 1);
    const kk_ceiling_kind measured[] = {KK_CEILING_COPY, KK_CEILING_READ, KK_CEILING_FP32};
    for (size_t i = 0; i < 3; i++) {
        const kk_ceiling *c = &g_cal.ceilings[measured[i]];
        assert_int_equal(c->available, 1);
        assert_true(isfinite(c->value) && c->value > 0);
        assert_true(c->value_ci_low > 0 && c->value_ci_low <= c->value);
        assert_true(c->value_ci_high >= c->value && isfinite(c->value_ci_high));
        assert_true(c->median_s > 0 && c->work > 0 && c->samples >= 1);
        assert_true(c->method[0] != '\0');
    }
    assert_true(g_cal.ceilings[KK_CEILING_COPY].value < 1e5); /* GB/s: sane */
    assert_true(g_cal.ceilings[KK_CEILING_FP32].value < 100); /* TFLOP/s on a few cores */
    /* the bf16 rate is measured exactly where the kernels have vdpbf16ps */
    const kk_ceiling *bf16 = &g_cal.ceilings[KK_CEILING_BF16];
    const int amx = strcmp(kk_cpu_isa(), "amx") == 0;
    if (amx || strcmp(kk_cpu_isa(), "avx512_bf16") == 0) {
        assert_int_equal(bf16->available, 1);
        assert_true(bf16->value > 0 && bf16->value < 100);
        assert_non_null(strstr(bf16->method, "vdpbf16ps"));
    } else {
        assert_int_equal(bf16->available, 0);
        assert_true(bf16->reason[0] != '\0');
    }
    /* the AMX tiles' rate only at the amx level */
    const kk_ceiling *tiles = &g_cal.ceilings[KK_CEILING_AMX_BF16];
    assert_int_equal(tiles->available, amx);
    if (amx)
        assert_true(tiles->value > 0 && tiles->value < 1000 && strstr(tiles->method, "tdpbf16ps"));
    else
        assert_true(tiles->reason[0] != '\0');
    assert_string_equal(kk_ceiling_name(KK_CEILING_AMX_BF16), "amx_bf16_tflops");
    /* the fp32 method names the level it measured */
    assert_non_null(strstr(g_cal.ceilings[KK_CEILING_FP32].method, kk_cpu_isa()));
    assert_int_equal(g_cal.ceilings[KK_CEILING_FP8].available, 0);
    assert_string_equal(kk_ceiling_name(KK_CEILING_FP8), "fp8_tflops");
    assert_string_equal(kk_ceiling_unit(KK_CEILING_READ), "GB/s");
    assert_string_equal(kk_ceiling_name((kk_ceiling_kind)99), "?");
}

static void test_roundtrip_and_load(void **state) {
    (void)state;
    char path[4096], want[600];
    kk_assert_ok(kk_calibration_default_path(g_cal.device_name, path, sizeof path));
    snprintf(want, sizeof want, "%s/kernelkit/ceilings-", g_dir);
    assert_int_equal(strncmp(path, want, strlen(want)), 0);
    assert_null(strchr(path + strlen(want), ' '));
    assert_null(strchr(path + strlen(want), '/'));
    kk_assert_ok(kk_calibration_write_file(&g_cal, path));

    kk_calibration back;
    kk_assert_ok(kk_calibration_read_file(path, &back));
    assert_memory_equal(&back, &g_cal, sizeof back); /* exact: every double, every string */

    kk_bench_ceilings c, want_c;
    kk_assert_ok(kk_ceilings_load("cpu", NULL, &c));
    kk_calibration_to_ceilings(&g_cal, &want_c);
    assert_memory_equal(&c, &want_c, sizeof c);
    assert_true(c.copy_gbs > 0 && c.read_gbs > 0 && c.fp32_tflops > 0);
    const int bf16_level =
        strcmp(kk_cpu_isa(), "avx512_bf16") == 0 || strcmp(kk_cpu_isa(), "amx") == 0;
    assert_true((c.bf16_tflops > 0) == bf16_level);
    if (g_cal.ceilings[KK_CEILING_AMX_BF16].available) /* the tiles' rate is the bf16 peak */
        assert_true(c.bf16_tflops == g_cal.ceilings[KK_CEILING_AMX_BF16].value);
    assert_true(c.fp8_tflops == 0);

    /* a file of another device is refused */
    kk_calibration other = g_cal;
    snprintf(other.device_name, sizeof other.device_name, "Some Other CPU");
    char opath[600];
    snprintf(opath, sizeof opath, "%s/other.json", g_dir);
    kk_assert_ok(kk_calibration_write_file(&other, opath));
    kk_assert_status(kk_ceilings_load("cpu", opath, &c), KK_ERR_INVALID_ARGUMENT);
    remove(path);
}

static void test_none_stored(void **state) {
    (void)state;
    char dir[400];
    snprintf(dir, sizeof dir, "%s/empty", g_dir);
    setenv("XDG_CACHE_HOME", dir, 1);
    kk_bench_ceilings c;
    c.copy_gbs = 7;
    kk_assert_status(kk_ceilings_load("cpu", NULL, &c), KK_ERR_IO);
    assert_string_equal(kk_last_error()->argument, "path");
    kk_assert_contains(kk_last_error_message(), "no ceilings stored");
    kk_assert_contains(kk_last_error_message(), "kernelkit calibrate");
    assert_true(c.copy_gbs == 0);
    setenv("XDG_CACHE_HOME", g_dir, 1);

    /* relative XDG_CACHE_HOME is ignored: HOME is used */
    char path[4096];
    setenv("XDG_CACHE_HOME", "relative", 1);
    setenv("HOME", "/home/someone", 1);
    kk_assert_ok(kk_calibration_default_path("NVIDIA H200 (x/y)", path, sizeof path));
    assert_string_equal(path, "/home/someone/.cache/kernelkit/ceilings-NVIDIA_H200__x_y_.json");
    kk_assert_ok(kk_calibration_default_path("..", path, sizeof path));
    assert_string_equal(path, "/home/someone/.cache/kernelkit/ceilings-unknown.json");
    kk_assert_status(kk_calibration_default_path("x", path, 8), KK_ERR_INVALID_ARGUMENT);
    setenv("XDG_CACHE_HOME", g_dir, 1);
}

/* Replace the first occurrence of `from` in the stored JSON by `to`. */
static char *mutate(const char *json, const char *from, const char *to) {
    const char *at = strstr(json, from);
    assert_non_null(at);
    size_t n = strlen(json) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    assert_non_null(out);
    snprintf(out, n, "%.*s%s%s", (int)(at - json), json, to, at + strlen(from));
    return out;
}

static void test_hostile(void **state) {
    (void)state;
    char *json;
    kk_assert_ok(kk_calibration_to_json(&g_cal, &json));
    kk_calibration back;
    kk_assert_ok(kk_calibration_from_json(json, strlen(json), &back));

    struct {
        const char *from, *to;
        kk_status want;
    } cases[] = {
        {"\"kernelkit.ceilings/1\"", "\"kernelkit.ceilings/2\"", KK_ERR_UNSUPPORTED},
        {"\"kernelkit.ceilings/1\"", "\"kernelkit.bench/1\"", KK_ERR_IO},
        {"\"kernelkit.ceilings/1\"", "1", KK_ERR_IO},
        {"\"copy_gbs\"", "\"copy\"", KK_ERR_IO},
        {"\"value\":", "\"value\": -1, \"x\":", KK_ERR_IO},
        {"\"value\":", "\"value\": \"fast\", \"x\":", KK_ERR_IO},
        {"\"median_s\":", "\"median_s\": 0, \"x\":", KK_ERR_IO},
        {"\"samples\":", "\"samples\": 1.5, \"x\":", KK_ERR_IO},
        {"\"unit\":\t\"GB/s\"", "\"unit\":\t\"TB/s\"", KK_ERR_IO},
        {"\"quick\":", "\"quick\": 1, \"x\":", KK_ERR_IO},
        {"\"clocks\":", "\"clocks\": [], \"x\":", KK_ERR_IO},
        {"\"sm_clock_mhz\":", "\"sm_clock_mhz\": -5, \"x\":", KK_ERR_IO},
        {"\"available\":", "\"available\": null, \"x\":", KK_ERR_IO},
        {"\"device\":", "\"device\": \"\", \"x\":", KK_ERR_IO},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *bad = mutate(json, cases[i].from, cases[i].to);
        kk_status st = kk_calibration_from_json(bad, strlen(bad), &back);
        if (st != cases[i].want)
            fail_msg("case %zu (%s -> %s): got %s, want %s (%s)", i, cases[i].from, cases[i].to,
                     kk_status_name(st), kk_status_name(cases[i].want), kk_last_error_message());
        free(bad);
    }
    /* a file written before the AMX ceiling existed reads, that ceiling unavailable */
    char *older = mutate(json, "\"amx_bf16_tflops\"", "\"unknown_key\"");
    kk_assert_ok(kk_calibration_from_json(older, strlen(older), &back));
    assert_int_equal(back.ceilings[KK_CEILING_AMX_BF16].available, 0);
    assert_string_equal(back.ceilings[KK_CEILING_AMX_BF16].reason, "not in this file");
    assert_memory_equal(&back.ceilings[KK_CEILING_COPY], &g_cal.ceilings[KK_CEILING_COPY],
                        sizeof back.ceilings[0]);
    free(older);
    /* a long device name, truncated JSON, not JSON, nesting, a huge file */
    char *longname = malloc(2000);
    assert_non_null(longname);
    memset(longname, 'A', 1999);
    longname[1999] = '\0';
    char *to = malloc(2100);
    assert_non_null(to);
    snprintf(to, 2100, "\"device_name\": \"%s\", \"x\":", longname);
    char *bad = mutate(json, "\"device_name\":", to);
    kk_assert_status(kk_calibration_from_json(bad, strlen(bad), &back), KK_ERR_IO);
    free(bad);
    free(to);
    free(longname);
    kk_assert_status(kk_calibration_from_json(json, strlen(json) / 2, &back), KK_ERR_IO);
    kk_assert_status(kk_calibration_from_json("nope", 4, &back), KK_ERR_IO);
    kk_assert_status(kk_calibration_from_json("[[[[[[[[[[", 10, &back), KK_ERR_IO);
    kk_assert_status(kk_calibration_from_json("{}", KK_CEILINGS_MAX_FILE_BYTES + 1, &back),
                     KK_ERR_IO);
    char path[600];
    snprintf(path, sizeof path, "%s/big.json", g_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < KK_CEILINGS_MAX_FILE_BYTES / 8 + 2; i++) fputs("        ", f);
    fclose(f);
    kk_assert_status(kk_calibration_read_file(path, &back), KK_ERR_IO);
    /* a directory as the path */
    kk_assert_status(kk_calibration_read_file(g_dir, &back), KK_ERR_IO);
    free(json);
}

static void test_cublaslt_and_gpu_paths(void **state) {
    (void)state;
    char why[256] = "";
    const kk__cublaslt *lt = kk__cublaslt_load(why, sizeof why);
    assert_true(why[0] != '\0');
    if (lt) {
        assert_non_null(lt->matmul);
        assert_non_null(lt->heuristic);
        kk_assert_contains(why, "libcublasLt.so");
    }
    print_message("cuBLASLt: %s (%s)\n", lt ? "loaded" : "unavailable", why);
    if (kk_backend_available(KK_BACKEND_CUDA)) {
        print_message("a GPU is present: the GPU paths are tested by test_cuda_calibrate\n");
        return;
    }
    kk_ceiling c;
    kk_calibrate_options o;
    kk_calibrate_options_default(&o);
    o.quick = 1;
    kk_assert_status(kk__calibrate_cuda_gemm(0, 0, &o, kk__calibrate_measure, &c),
                     KK_ERR_CUDA_UNAVAILABLE);
    assert_int_equal(c.available, 0);
    kk_assert_status(kk__calibrate_cuda_gemm(0, 1, &o, kk__calibrate_measure, &c),
                     KK_ERR_CUDA_UNAVAILABLE);
    kk_calibration cal;
    kk_status st = kk_calibrate("cuda:0", &o, &cal);
    assert_true(kk_status_is(st, KK_ERR_CUDA_UNAVAILABLE) || st == KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_calibrate("tpu:3", &o, &cal), KK_ERR_INVALID_ARGUMENT);
    o.time_budget_s = -1;
    kk_assert_status(kk_calibrate("cpu", &o, &cal), KK_ERR_INVALID_ARGUMENT);
}

static void test_cli(void **state) {
    (void)state;
    char out[8192], cmd[1200], path[600];
    snprintf(path, sizeof path, "%s/sub/dir/cal.json", g_dir);
    snprintf(cmd, sizeof cmd, "'%s' calibrate --device cpu --quick --output '%s'", KK_CLI_PATH,
             path);
    int rc = kk_test_run(cmd, out, sizeof out);
    if (rc != 0) fail_msg("rc %d: %s", rc, out);
    kk_assert_contains(out, "copy_gbs");
    kk_assert_contains(out, "fp32_tflops");
    kk_assert_contains(out, "unavailable");
    kk_assert_contains(out, path);
    kk_calibration back;
    kk_assert_ok(kk_calibration_read_file(path, &back));
    assert_string_equal(back.device, "cpu");
    assert_int_equal(back.ceilings[KK_CEILING_COPY].available, 1);

    snprintf(cmd, sizeof cmd, "'%s' calibrate --bogus", KK_CLI_PATH);
    assert_int_equal(kk_test_run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "'%s' calibrate --device tpu", KK_CLI_PATH);
    assert_int_equal(kk_test_run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "'%s' calibrate --help", KK_CLI_PATH);
    assert_int_equal(kk_test_run(cmd, out, sizeof out), 0);
    kk_assert_contains(out, "--quick");
    if (!kk_backend_available(KK_BACKEND_CUDA)) {
        snprintf(cmd, sizeof cmd, "'%s' calibrate --device cuda:0 --quick --output '%s/x.json'",
                 KK_CLI_PATH, g_dir);
        assert_int_equal(kk_test_run(cmd, out, sizeof out), 2);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_quick),
        cmocka_unit_test(test_roundtrip_and_load),
        cmocka_unit_test(test_none_stored),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_cublaslt_and_gpu_paths),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
