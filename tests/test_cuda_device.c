/* labels: gpu */
/* The CUDA backend on a real GPU: device properties are plausible and agree
 * with each other, the probe kernel runs and writes what it should, NVML
 * telemetry reads sane values, and the probe is logged. Skips (77) with no GPU. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "cuda/cuda_internal.h"

static char g_log[4096];

static void capture_sink(const kk_log_record *rec, void *user) {
    (void)user;
    if (strncmp(rec->logger, "kernelkit.cuda", 14) != 0) return;
    size_t used = strlen(g_log);
    snprintf(g_log + used, sizeof g_log - used, "%s\n", rec->line);
}

static void backend_is_available_with_devices(void **state) {
    (void)state;
    assert_true(kk_backend_available(KK_BACKEND_CUDA));
    assert_string_equal(kk_backend_unavailable_reason(KK_BACKEND_CUDA), "");
    assert_true(kk_backend_device_count(KK_BACKEND_CUDA) >= 1);
    assert_true(kk_built_with_cuda());
}

static void properties_are_plausible(void **state) {
    (void)state;
    int n = kk_backend_device_count(KK_BACKEND_CUDA);
    for (int i = 0; i < n; i++) {
        char spec[24];
        snprintf(spec, sizeof spec, "cuda:%d", i);
        kk_device_info d;
        kk_assert_ok(kk_device_get_info(spec, &d));
        print_message(
            "%s: %s cc %d.%d (%s) %d SMs, %.1f/%.1f GiB free, L2 %llu KiB, smem %llu KiB, "
            "SM %d MHz, mem %d MHz x %d bit = %.0f GB/s, pci %s\n",
            spec, d.name, d.cc_major, d.cc_minor, kk_arch_name(d.arch), d.sm_count,
            d.mem_free_bytes / 1073741824.0, d.mem_total_bytes / 1073741824.0,
            (unsigned long long)d.l2_bytes >> 10,
            (unsigned long long)d.smem_per_block_optin_bytes >> 10, d.sm_clock_max_mhz,
            d.mem_clock_max_mhz, d.mem_bus_width_bits, d.mem_bandwidth_theoretical_gbs,
            d.pci_bus_id);
        assert_int_equal(d.backend, KK_BACKEND_CUDA);
        assert_int_equal(d.index, i);
        assert_string_equal(d.spec, spec);
        assert_int_equal(d.device_count_in_backend, n);
        assert_true(strlen(d.name) > 0);
        assert_int_equal(d.arch, kk_arch_from_compute_capability(d.cc_major, d.cc_minor));
        assert_true(d.sm_count > 0);
        assert_true(d.mem_total_bytes > (1ull << 30));
        assert_true(d.mem_free_bytes > 0);
        assert_true(d.mem_free_bytes < d.mem_total_bytes);
        assert_true(d.l2_bytes > 0);
        assert_true(d.smem_per_block_optin_bytes >= 48 * 1024);
        assert_true(d.sm_clock_max_mhz > 100);
        assert_true(d.mem_clock_max_mhz > 100);
        assert_true(d.mem_bus_width_bits >= 64);
        assert_true(d.mem_bandwidth_theoretical_gbs > 0);
        /* the formula, from the MHz fields (rounded down from kHz: within 0.2%) */
        double from_fields = 2.0 * d.mem_clock_max_mhz * 1e6 * (d.mem_bus_width_bits / 8.0) / 1e9;
        assert_true(d.mem_bandwidth_theoretical_gbs >= from_fields);
        assert_true(d.mem_bandwidth_theoretical_gbs <= from_fields * 1.002 + 1.0);
        assert_true(strlen(d.pci_bus_id) >= 7); /* "0000:01:00.0" */
        assert_non_null(strchr(d.pci_bus_id, ':'));
        /* CPU fields are zero on a GPU */
        assert_int_equal(d.cpu_cores, 0);
        assert_int_equal(d.host_mem_total_bytes, 0);
        if (kk__cuda_device_usable(i)) assert_true(d.cc_major >= 8);
    }
    /* "cuda" is cuda:0 */
    kk_device_info a, b;
    kk_assert_ok(kk_device_get_info("cuda", &a));
    kk_assert_ok(kk_device_get_info("cuda:0", &b));
    assert_string_equal(a.spec, "cuda:0");
    assert_string_equal(a.name, b.name);
    assert_string_equal(a.pci_bus_id, b.pci_bus_id);
    /* one past the last device */
    char past[24];
    snprintf(past, sizeof past, "cuda:%d", n);
    kk_assert_status(kk_device_get_info(past, &a), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error()->expected, "present");
}

static void probe_kernel_runs_and_verifies(void **state) {
    (void)state;
    int n = kk_backend_device_count(KK_BACKEND_CUDA);
    for (int i = 0; i < n; i++) {
        kk_device_info d;
        char spec[24];
        snprintf(spec, sizeof spec, "cuda:%d", i);
        kk_assert_ok(kk_device_get_info(spec, &d));
        kk__cuda_selftest_result r;
        memset(&r, 0, sizeof r);
        if (!kk__cuda_device_usable(i)) {
            kk_assert_status(kk__cuda_selftest(i, &r), KK_ERR_INVALID_COMPUTE_CAPABILITY);
            kk_assert_status(kk_device_selftest(spec), KK_ERR_INVALID_COMPUTE_CAPABILITY);
            continue;
        }
        kk_assert_ok(kk__cuda_selftest(i, &r));
        print_message("%s: probe kernel ran as sm_%d%s, %d values checked, %.3f ms\n", spec,
                      r.arch_ran / 10, r.arch_specific ? "a" : "", r.elements, r.ms);
        assert_int_equal(r.elements, 1 << 16);
        assert_true(r.ms > 0);
        int cc = d.cc_major * 100 + d.cc_minor * 10;
        /* built for sm_80 (SASS + PTX) and sm_90a: the best image for this GPU */
        if (d.cc_major == 9 && d.cc_minor == 0) {
            assert_int_equal(r.arch_ran, 900);
            assert_int_equal(r.arch_specific, 1);
        } else {
            assert_int_equal(r.arch_ran, 800); /* 8.x SASS, or compute_80 PTX JIT */
            assert_int_equal(r.arch_specific, 0);
        }
        assert_true(r.arch_ran <= cc);
        kk_assert_ok(kk_device_selftest(spec));
    }
    kk_assert_ok(kk_device_selftest("cuda"));
    kk_assert_status(kk__cuda_selftest(-1, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk__cuda_selftest(n, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_ok(kk__cuda_selftest(0, NULL)); /* result is optional */
}

static void telemetry_is_sane(void **state) {
    (void)state;
    int n = kk_backend_device_count(KK_BACKEND_CUDA);
    for (int i = 0; i < n; i++) {
        kk_gpu_telemetry t;
        kk_assert_ok(kk_gpu_telemetry_read(i, &t));
        if (!t.available) fail_msg("cuda:%d: telemetry unavailable: %s", i, t.unavailable_reason);
        print_message("cuda:%d: %.0f C, SM %d/%d MHz, mem %d MHz, %.1f/%.1f W, util %d%%/%d%%, "
                      "clock events %s (0x%llx), driver %s\n",
                      i, t.temperature_c, t.sm_clock_mhz, t.sm_clock_max_mhz, t.mem_clock_mhz,
                      t.power_w, t.power_limit_w, t.utilization_gpu_pct, t.utilization_mem_pct,
                      t.throttle_text, (unsigned long long)t.throttle_reasons, t.driver_version);
        assert_string_equal(t.unavailable_reason, "");
        assert_true(t.temperature_c >= 1 && t.temperature_c <= 120);
        assert_true(t.sm_clock_mhz > 0);
        assert_true(t.sm_clock_max_mhz >= t.sm_clock_mhz);
        assert_true(t.mem_clock_mhz > 0);
        assert_true(t.power_w > 0 && t.power_w < 5000);
        assert_true(t.power_limit_w > 0 && t.power_limit_w < 5000);
        assert_true(t.utilization_gpu_pct >= 0 && t.utilization_gpu_pct <= 100);
        assert_true(t.utilization_mem_pct >= 0 && t.utilization_mem_pct <= 100);
        assert_true(strlen(t.throttle_text) > 0);
        assert_true(strlen(t.driver_version) > 0);
        /* the text is the bits' names */
        char text[256];
        kk__throttle_text(t.throttle_reasons, text, sizeof text);
        assert_string_equal(t.throttle_text, text);
    }
    kk_gpu_telemetry t;
    kk_assert_status(kk_gpu_telemetry_read(n, &t), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_gpu_telemetry_read(-1, &t), KK_ERR_INVALID_ARGUMENT);
}

static void best_device_is_the_first_gpu(void **state) {
    (void)state;
    if (kk__cuda_device_usable(0))
        assert_string_equal(kk_device_best(), "cuda:0");
    else
        assert_memory_equal(kk_device_best(), "cuda:", 5);
}

static void probe_was_logged_once_at_info(void **state) {
    (void)state;
    kk_device_info d;
    kk_assert_ok(kk_device_get_info(kk_device_best(), &d));
    char want[512];
    snprintf(want, sizeof want, "backend initialized device=\"%s\" cc=%d.%d sms=%d arch=%s", d.name,
             d.cc_major, d.cc_minor, d.sm_count, kk_arch_name(d.arch));
    kk_assert_contains(g_log, want);
    char devices[32];
    snprintf(devices, sizeof devices, "devices=%d", kk_backend_device_count(KK_BACKEND_CUDA));
    kk_assert_contains(g_log, devices);
    const char *first = strstr(g_log, "backend initialized");
    assert_null(strstr(first + 1, "backend initialized"));
}

int main(void) {
    /* Capture the probe's log records (the probe happens in kk_test_no_gpu). */
    kk_log_set_level("kernelkit.cuda", KK_LOG_INFO);
    kk_log_set_format(KK_LOG_FORMAT_TEXT);
    kk_log_set_sink(capture_sink, NULL);
    int no_gpu = kk_test_no_gpu();
    kk_log_reset();
    if (no_gpu) return KK_TEST_SKIP;

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(backend_is_available_with_devices),
        cmocka_unit_test(properties_are_plausible),
        cmocka_unit_test(probe_kernel_runs_and_verifies),
        cmocka_unit_test(telemetry_is_sane),
        cmocka_unit_test(best_device_is_the_first_gpu),
        cmocka_unit_test(probe_was_logged_once_at_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
