/* labels: unit cpu */
/* Backends and devices without a GPU: architecture mapping, names, device
 * specs, the CPU device, the registry, and the CUDA-unavailable and
 * NVML-unavailable paths (checked when this machine has no usable GPU). */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "cuda/cuda_internal.h"

/* ---- architecture mapping ---- */

typedef struct cc_row {
    int major, minor;
    kk_arch arch;
} cc_row;

/* Every compute capability NVIDIA has shipped (CUDA programming guide), plus
 * impossible and not-yet-known ones. */
static const cc_row k_cc[] = {
    {1, 0, KK_ARCH_PRE_PASCAL},
    {2, 1, KK_ARCH_PRE_PASCAL},
    {3, 0, KK_ARCH_PRE_PASCAL},
    {3, 5, KK_ARCH_PRE_PASCAL},
    {3, 7, KK_ARCH_PRE_PASCAL},
    {5, 0, KK_ARCH_PRE_PASCAL},
    {5, 2, KK_ARCH_PRE_PASCAL},
    {5, 3, KK_ARCH_PRE_PASCAL},
    {6, 0, KK_ARCH_PASCAL},
    {6, 1, KK_ARCH_PASCAL},
    {6, 2, KK_ARCH_PASCAL},
    {7, 0, KK_ARCH_VOLTA},
    {7, 2, KK_ARCH_VOLTA},
    {7, 5, KK_ARCH_TURING},
    {8, 0, KK_ARCH_AMPERE},
    {8, 6, KK_ARCH_AMPERE},
    {8, 7, KK_ARCH_AMPERE},
    {8, 9, KK_ARCH_ADA},
    {9, 0, KK_ARCH_HOPPER},
    {10, 0, KK_ARCH_BLACKWELL},
    {10, 1, KK_ARCH_BLACKWELL},
    {10, 3, KK_ARCH_BLACKWELL},
    {11, 0, KK_ARCH_BLACKWELL},
    {12, 0, KK_ARCH_BLACKWELL},
    {12, 1, KK_ARCH_BLACKWELL},
    /* capabilities that do not exist */
    {7, 1, KK_ARCH_UNKNOWN},
    {7, 3, KK_ARCH_UNKNOWN},
    {7, 4, KK_ARCH_UNKNOWN},
    {8, 1, KK_ARCH_UNKNOWN},
    {8, 8, KK_ARCH_UNKNOWN},
    {9, 1, KK_ARCH_UNKNOWN},
    {13, 0, KK_ARCH_UNKNOWN},
    {20, 0, KK_ARCH_UNKNOWN},
    /* impossible values */
    {0, 0, KK_ARCH_UNKNOWN},
    {0, 5, KK_ARCH_UNKNOWN},
    {-1, 0, KK_ARCH_UNKNOWN},
    {9, -1, KK_ARCH_UNKNOWN},
    {-8, -6, KK_ARCH_UNKNOWN},
};

static void compute_capabilities_map_to_families(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_cc / sizeof k_cc[0]; i++) {
        kk_arch got = kk_arch_from_compute_capability(k_cc[i].major, k_cc[i].minor);
        if (got != k_cc[i].arch)
            fail_msg("cc %d.%d: got %s, expected %s", k_cc[i].major, k_cc[i].minor,
                     kk_arch_name(got), kk_arch_name(k_cc[i].arch));
    }
}

static void supported_capabilities_start_at_8_0(void **state) {
    (void)state;
    assert_false(kk__cc_supported(7, 5));
    assert_false(kk__cc_supported(7, 9));
    assert_true(kk__cc_supported(8, 0));
    assert_true(kk__cc_supported(8, 9));
    assert_true(kk__cc_supported(9, 0));
    assert_true(kk__cc_supported(12, 1));
    assert_false(kk__cc_supported(-1, 0));
    assert_false(kk__cc_supported(9, -1));
}

static void arch_names_round_trip(void **state) {
    (void)state;
    static const char *const expected[KK_ARCH_COUNT] = {
        "unknown", "pre-pascal", "pascal", "volta",     "turing",
        "ampere",  "ada",        "hopper", "blackwell",
    };
    for (int a = 0; a < KK_ARCH_COUNT; a++) {
        assert_string_equal(kk_arch_name((kk_arch)a), expected[a]);
        kk_arch parsed = KK_ARCH_COUNT;
        kk_assert_ok(kk_arch_parse(expected[a], &parsed));
        assert_int_equal(parsed, a);
        /* capitalised and upper case too */
        char cap[32];
        snprintf(cap, sizeof cap, "%s", expected[a]);
        cap[0] = (char)(cap[0] - 'a' + 'A');
        parsed = KK_ARCH_COUNT;
        kk_assert_ok(kk_arch_parse(cap, &parsed));
        assert_int_equal(parsed, a);
    }
    kk_arch parsed = KK_ARCH_UNKNOWN;
    kk_assert_ok(kk_arch_parse("HOPPER", &parsed));
    assert_int_equal(parsed, KK_ARCH_HOPPER);
    assert_string_equal(kk_arch_name(KK_ARCH_COUNT), "unknown");
    assert_string_equal(kk_arch_name((kk_arch)-1), "unknown");
    assert_string_equal(kk_arch_name((kk_arch)1000), "unknown");
}

static void bad_arch_names_are_rejected_with_the_accepted_list(void **state) {
    (void)state;
    static const char *const bad[] = {"", "hoper", "sm_90", "hopper ", " hopper", "9.0", "kepler"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kk_arch out = KK_ARCH_ADA;
        kk_assert_status(kk_arch_parse(bad[i], &out), KK_ERR_INVALID_ARCHITECTURE);
        assert_int_equal(out, KK_ARCH_ADA); /* untouched on failure */
        const kk_error_info *e = kk_last_error();
        assert_string_equal(e->function, "kk_arch_parse");
        assert_string_equal(e->argument, "name");
        kk_assert_contains(e->message, "hopper");
        kk_assert_contains(e->message, "blackwell");
        kk_assert_contains(e->message, "pre-pascal");
    }
    kk_arch out;
    kk_assert_status(kk_arch_parse(NULL, &out), KK_ERR_INVALID_ARCHITECTURE);
    kk_assert_contains(kk_last_error_message(), "NULL");
    kk_assert_status(kk_arch_parse("hopper", NULL), KK_ERR_INVALID_ARGUMENT);
}

/* ---- backends and the registry ---- */

static void backends_have_names_and_the_cpu_is_always_there(void **state) {
    (void)state;
    assert_string_equal(kk_backend_name(KK_BACKEND_CPU), "cpu");
    assert_string_equal(kk_backend_name(KK_BACKEND_CUDA), "cuda");
    assert_null(kk_backend_name(KK_BACKEND_COUNT));
    assert_null(kk_backend_name((kk_backend_kind)-1));

    assert_true(kk_backend_available(KK_BACKEND_CPU));
    assert_string_equal(kk_backend_unavailable_reason(KK_BACKEND_CPU), "");
    assert_int_equal(kk_backend_device_count(KK_BACKEND_CPU), 1);

    assert_false(kk_backend_available(KK_BACKEND_COUNT));
    assert_int_equal(kk_backend_device_count(KK_BACKEND_COUNT), 0);
    assert_non_null(kk_backend_unavailable_reason(KK_BACKEND_COUNT));
    assert_true(strlen(kk_backend_unavailable_reason((kk_backend_kind)-5)) > 0);

    /* CUDA: either available with devices and no reason, or the opposite */
    if (kk_backend_available(KK_BACKEND_CUDA)) {
        assert_true(kk_backend_device_count(KK_BACKEND_CUDA) >= 1);
        assert_string_equal(kk_backend_unavailable_reason(KK_BACKEND_CUDA), "");
    } else {
        assert_int_equal(kk_backend_device_count(KK_BACKEND_CUDA), 0);
        assert_true(strlen(kk_backend_unavailable_reason(KK_BACKEND_CUDA)) > 10);
    }
}

static void registry_has_one_complete_table_per_kind(void **state) {
    (void)state;
    for (int k = 0; k < KK_BACKEND_COUNT; k++) {
        const kk__backend *b = kk__backend_get((kk_backend_kind)k);
        assert_non_null(b);
        assert_int_equal(b->kind, k);
        assert_string_equal(b->name, kk_backend_name((kk_backend_kind)k));
        assert_non_null(b->spec_forms);
        assert_non_null(b->probe);
        assert_non_null(b->available);
        assert_non_null(b->unavailable_reason);
        assert_non_null(b->device_count);
        assert_non_null(b->device_info);
        assert_true(kk_status_is(b->unavailable_status, KK_ERR_DEVICE));
    }
    assert_null(kk__backend_get(KK_BACKEND_COUNT));
    assert_null(kk__backend_get((kk_backend_kind)-1));
    assert_int_equal(kk__backend_get(KK_BACKEND_CUDA)->unavailable_status, KK_ERR_CUDA_UNAVAILABLE);
}

/* ---- device specs ---- */

static void good_specs_parse(void **state) {
    (void)state;
    kk_backend_kind b = KK_BACKEND_COUNT;
    int index = -1;
    kk_assert_ok(kk_device_parse("cpu", &b, &index));
    assert_int_equal(b, KK_BACKEND_CPU);
    assert_int_equal(index, 0);
    kk_assert_ok(kk_device_parse("cpu", NULL, NULL)); /* outputs are optional */

    /* the CUDA forms are well-formed whether or not CUDA is present */
    static const struct {
        const char *spec;
        int index;
    } cuda[] = {{"cuda", 0}, {"cuda:0", 0}, {"cuda:1", 1}, {"cuda:12", 12}, {"cuda:007", 7}};
    int avail = kk_backend_available(KK_BACKEND_CUDA);
    int count = kk_backend_device_count(KK_BACKEND_CUDA);
    for (size_t i = 0; i < sizeof cuda / sizeof cuda[0]; i++) {
        b = KK_BACKEND_COUNT;
        index = -1;
        kk_status st = kk_device_parse(cuda[i].spec, &b, &index);
        kk_status want = !avail                  ? KK_ERR_CUDA_UNAVAILABLE
                         : cuda[i].index < count ? KK_OK
                                                 : KK_ERR_INVALID_ARGUMENT;
        if (st != want)
            fail_msg("%s: got %s, expected %s (%s)", cuda[i].spec, kk_status_name(st),
                     kk_status_name(want), kk_last_error_message());
        /* a well-formed spec fills the outputs even when the device is absent */
        assert_int_equal(b, KK_BACKEND_CUDA);
        assert_int_equal(index, cuda[i].index);
    }
}

static void bad_specs_are_rejected(void **state) {
    (void)state;
    static const char *const bad[] = {
        "",
        "gpu",
        "cuda:-1",
        "cuda:1x",
        "cuda:99999999999",
        "cuda:2147483648",
        "cuda:",
        "cuda: 1",
        "cuda:+1",
        "cuda:0x1",
        "cuda:1 ",
        " cpu",
        "cpu ",
        "CPU",
        "CUDA",
        "cudax",
        "cuda0",
        "cuda::0",
        "cuda:0:",
        "cpu:",
        "cpu:x",
        "cuda:1.0",
        "c",
        "cudacpu",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kk_backend_kind b = KK_BACKEND_COUNT;
        int index = -7;
        kk_status st = kk_device_parse(bad[i], &b, &index);
        if (st != KK_ERR_INVALID_ARGUMENT)
            fail_msg("\"%s\": got %s, expected KK_ERR_INVALID_ARGUMENT", bad[i],
                     kk_status_name(st));
        assert_int_equal(b, KK_BACKEND_COUNT);
        assert_int_equal(index, -7);
        const kk_error_info *e = kk_last_error();
        assert_string_equal(e->function, "kk_device_parse");
        assert_string_equal(e->argument, "spec");
        kk_assert_contains(e->expected, "\"cpu\"");
        kk_assert_contains(e->expected, "\"cuda:N\"");
    }
    kk_assert_status(kk_device_parse(NULL, NULL, NULL), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->value, "NULL");

    /* well-formed, but there is one CPU */
    kk_assert_status(kk_device_parse("cpu:1", NULL, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error()->expected, "cpu:0");
    /* well-formed, absent GPU: never OK */
    kk_status st = kk_device_parse("cuda:4096", NULL, NULL);
    assert_true(st == KK_ERR_INVALID_ARGUMENT || st == KK_ERR_CUDA_UNAVAILABLE);
}

/* ---- the CPU device ---- */

static void cpu_info_is_sane(void **state) {
    (void)state;
    kk_device_info d;
    memset(&d, 0xab, sizeof d);
    kk_assert_ok(kk_device_get_info("cpu", &d));
    assert_int_equal(d.backend, KK_BACKEND_CPU);
    assert_int_equal(d.index, 0);
    assert_string_equal(d.spec, "cpu");
    assert_int_equal(d.device_count_in_backend, 1);
    assert_true(strlen(d.name) > 0);
    assert_true(d.cpu_cores >= 1);
    assert_true(d.cpu_threads >= 1);
    assert_true(d.cpu_cores <= d.cpu_threads);
    assert_true(d.host_mem_total_bytes > (64ull << 20));
    assert_true(d.host_mem_available_bytes > 0);
    assert_true(d.host_mem_available_bytes <= d.host_mem_total_bytes);
    /* GPU fields are zero on the CPU device */
    assert_int_equal(d.cc_major, 0);
    assert_int_equal(d.sm_count, 0);
    assert_int_equal(d.mem_total_bytes, 0);
    assert_int_equal(d.arch, KK_ARCH_UNKNOWN);
    assert_string_equal(d.pci_bus_id, "");

    /* threads are what this process may run on */
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < CPU_SETSIZE)
        assert_int_equal(d.cpu_threads, CPU_COUNT(&set));
#if defined(__x86_64__)
    assert_true(d.cpu_features & KK_CPU_SSE2); /* part of x86-64 */
    assert_false(d.cpu_features & KK_CPU_NEON);
#elif defined(__aarch64__)
    assert_true(d.cpu_features & KK_CPU_NEON);
#endif
    /* implied features */
    if (d.cpu_features & KK_CPU_AVX2) assert_true(d.cpu_features & KK_CPU_AVX);
    if (d.cpu_features & KK_CPU_AVX512BW) assert_true(d.cpu_features & KK_CPU_AVX512F);

    kk_assert_status(kk_device_get_info("cpu", NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_device_get_info("nope", &d), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->function, "kk_device_get_info");
}

static void cpu_features_string(void **state) {
    (void)state;
    char buf[256];
    assert_ptr_equal(kk_cpu_features_str(0, buf, sizeof buf), buf);
    assert_string_equal(buf, "none");
    kk_cpu_features_str(KK_CPU_SSE2 | KK_CPU_AVX | KK_CPU_AVX2 | KK_CPU_FMA, buf, sizeof buf);
    assert_string_equal(buf, "sse2,avx,avx2,fma");
    kk_cpu_features_str(KK_CPU_AVX512_BF16 | KK_CPU_AMX_TILE | KK_CPU_NEON, buf, sizeof buf);
    assert_string_equal(buf, "avx512_bf16,amx_tile,neon");
    kk_cpu_features_str(0x3fffu, buf, sizeof buf);
    assert_string_equal(buf, "sse2,sse4_2,avx,avx2,fma,f16c,avx512f,avx512bw,avx512vl,"
                             "avx512_bf16,avx512_fp16,avx_vnni,amx_tile,neon");
    kk_cpu_features_str(KK_CPU_AMX_TILE | KK_CPU_AMX_BF16, buf, sizeof buf);
    assert_string_equal(buf, "amx_tile,amx_bf16");
    kk_cpu_features_str(1u << 20, buf, sizeof buf); /* unknown bits are ignored */
    assert_string_equal(buf, "none");
    /* too small: whole names only, always terminated */
    char small[12];
    kk_cpu_features_str(KK_CPU_SSE2 | KK_CPU_SSE4_2 | KK_CPU_AVX, small, sizeof small);
    assert_string_equal(small, "sse2,sse4_2");
    char tiny[3];
    kk_cpu_features_str(KK_CPU_SSE2, tiny, sizeof tiny);
    assert_string_equal(tiny, "");
    assert_null(kk_cpu_features_str(KK_CPU_SSE2, NULL, 10));
    kk_cpu_features_str(KK_CPU_SSE2, buf, 0); /* must not write */

    kk_device_info d;
    kk_assert_ok(kk_device_get_info("cpu", &d));
    kk_cpu_features_str(d.cpu_features, buf, sizeof buf);
    assert_true(strlen(buf) > 0);
}

static const char k_cpuinfo_2s_ht[] =
    "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Test CPU @ 2.00GHz\n"
    "physical id\t: 0\ncore id\t\t: 0\n\n"
    "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Test CPU @ 2.00GHz\nphysical id\t: 0\ncore "
    "id\t\t: 1\n\n"
    "processor\t: 2\nmodel name\t: Intel(R) Xeon(R) Test CPU @ 2.00GHz\nphysical id\t: 1\ncore "
    "id\t\t: 0\n\n"
    "processor\t: 3\nmodel name\t: Intel(R) Xeon(R) Test CPU @ 2.00GHz\nphysical id\t: 1\ncore "
    "id\t\t: 1\n\n"
    "processor\t: 4\nmodel name\t: Intel(R) Xeon(R) Test CPU @ 2.00GHz\nphysical id\t: 0\ncore "
    "id\t\t: 0\n\n"
    "processor\t: 5\nmodel name\t: Intel(R) Xeon(R) Test CPU @ 2.00GHz\nphysical id\t: 0\ncore "
    "id\t\t: 1\n\n"
    "processor\t: 6\nmodel name\t: Intel(R) Xeon(R) Test CPU @ 2.00GHz\nphysical id\t: 1\ncore "
    "id\t\t: 0\n\n"
    "processor\t: 7\nmodel name\t: Intel(R) Xeon(R) Test CPU @ 2.00GHz\nphysical id\t: 1\ncore "
    "id\t\t: 1\n";

static void cpuinfo_parsers(void **state) {
    (void)state;
    char name[256];
    assert_true(kk__cpu_parse_model_name(k_cpuinfo_2s_ht, name, sizeof name));
    assert_string_equal(name, "Intel(R) Xeon(R) Test CPU @ 2.00GHz");
    assert_false(
        kk__cpu_parse_model_name("processor\t: 0\nBogoMIPS\t: 50.00\n", name, sizeof name));
    assert_string_equal(name, "");
    assert_false(kk__cpu_parse_model_name("model name\t:   \n", name, sizeof name));
    assert_false(kk__cpu_parse_model_name(NULL, name, sizeof name));
    char shortname[8];
    assert_true(kk__cpu_parse_model_name(k_cpuinfo_2s_ht, shortname, sizeof shortname));
    assert_string_equal(shortname, "Intel(R");

    /* 2 sockets x 2 cores x 2 threads */
    assert_int_equal(kk__cpu_count_physical_cores(k_cpuinfo_2s_ht, NULL, 0), 4);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    CPU_SET(4, &set); /* hyperthread siblings: one core */
    assert_int_equal(kk__cpu_count_physical_cores(k_cpuinfo_2s_ht, &set, sizeof set), 1);
    CPU_SET(2, &set); /* another socket's core 0 */
    assert_int_equal(kk__cpu_count_physical_cores(k_cpuinfo_2s_ht, &set, sizeof set), 2);
    /* no topology (ARM, some VMs): 0, the caller falls back to the thread count */
    assert_int_equal(kk__cpu_count_physical_cores("processor\t: 0\n\nprocessor\t: 1\n", NULL, 0),
                     0);
    assert_int_equal(kk__cpu_count_physical_cores("", NULL, 0), 0);
    assert_int_equal(kk__cpu_count_physical_cores(NULL, NULL, 0), 0);

    unsigned long long total = 0, avail = 0;
    assert_true(kk__parse_meminfo("MemTotal:       24683656 kB\nMemFree:        24397636 kB\n"
                                  "MemAvailable:   24396380 kB\nBuffers: 1 kB\n",
                                  &total, &avail));
    assert_int_equal(total, 24683656ull * 1024);
    assert_int_equal(avail, 24396380ull * 1024);
    assert_false(kk__parse_meminfo("MemTotal: 100 kB\n", &total, &avail)); /* no MemAvailable */
    assert_false(kk__parse_meminfo(NULL, &total, &avail));
}

/* ---- selftest and best device ---- */

static void cpu_selftest_passes_and_best_device_is_consistent(void **state) {
    (void)state;
    kk_assert_ok(kk_device_selftest("cpu"));
    kk_assert_status(kk_device_selftest("gpu"), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->function, "kk_device_selftest");
    kk_assert_status(kk_device_selftest(NULL), KK_ERR_INVALID_ARGUMENT);

    const char *best = kk_device_best();
    assert_non_null(best);
    assert_ptr_equal(best, kk_device_best()); /* stable */
    if (kk_backend_available(KK_BACKEND_CUDA)) {
        assert_memory_equal(best, "cuda:", 5);
    } else {
        assert_string_equal(best, "cpu");
    }
    kk_device_info d;
    kk_assert_ok(kk_device_get_info(best, &d));
    assert_string_equal(d.spec, best);
}

/* ---- no GPU: the CUDA-unavailable path ---- */

static void cuda_unavailable_says_why(void **state) {
    (void)state;
    if (kk_backend_available(KK_BACKEND_CUDA)) skip(); /* covered by test_cuda_device */
    const char *reason = kk_backend_unavailable_reason(KK_BACKEND_CUDA);
    if (!kk_built_with_cuda()) {
        assert_string_equal(reason, "built without CUDA (configure with -DKK_CUDA=ON)");
    } else {
        int known = strstr(reason, "no NVIDIA driver found (cudaError") ||
                    strstr(reason, "no CUDA-capable GPU is visible (cudaError") ||
                    strstr(reason, "NVIDIA driver is too old") ||
                    strstr(reason, "CUDA initialization failed (cudaError") ||
                    strstr(reason, "no GPU with compute capability 8.0 or newer");
        if (!known) fail_msg("unexpected reason: %s", reason);
    }
    assert_int_equal(kk_backend_device_count(KK_BACKEND_CUDA), 0);
    assert_string_equal(kk_device_best(), "cpu");

    static const char *const specs[] = {"cuda", "cuda:0", "cuda:3"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        kk_device_info d;
        memset(&d, 0x5a, sizeof d);
        kk_assert_status(kk_device_get_info(specs[i], &d), KK_ERR_CUDA_UNAVAILABLE);
        const kk_error_info *e = kk_last_error();
        assert_string_equal(e->function, "kk_device_get_info");
        assert_string_equal(e->value, specs[i]);
        kk_assert_contains(e->message, "cuda backend is unavailable");
        kk_assert_contains(e->message, reason);
        if (kk_built_with_cuda() && strstr(reason, "(cudaError"))
            assert_memory_equal(e->cuda_error, "cudaError", 9);
        assert_int_equal(d.cc_major, 0); /* cleared, not left as garbage */
        assert_string_equal(d.name, "");
    }
    kk_assert_status(kk_device_selftest("cuda:0"), KK_ERR_CUDA_UNAVAILABLE);
    kk__cuda_selftest_result r;
    kk_assert_status(kk__cuda_selftest(0, &r), KK_ERR_CUDA_UNAVAILABLE);
    kk_assert_contains(kk_last_error_message(), reason);
    assert_false(kk__cuda_device_usable(0));
}

/* ---- telemetry ---- */

static void telemetry_rejects_bad_arguments(void **state) {
    (void)state;
    kk_gpu_telemetry t;
    kk_assert_status(kk_gpu_telemetry_read(-1, &t), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->function, "kk_gpu_telemetry_read");
    assert_string_equal(kk_last_error()->argument, "index");
    assert_string_equal(kk_last_error()->value, "-1");
    kk_assert_status(kk_gpu_telemetry_read(-2147483647 - 1, &t), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_gpu_telemetry_read(0, NULL), KK_ERR_INVALID_ARGUMENT);
    if (kk_backend_available(KK_BACKEND_CUDA) || kk__nvml_load(NULL)) {
        /* an index past the GPUs that are there */
        kk_assert_status(kk_gpu_telemetry_read(4096, &t), KK_ERR_INVALID_ARGUMENT);
        kk_assert_contains(kk_last_error()->expected, "below");
    }
}

static void telemetry_without_nvml_is_unavailable_with_a_reason(void **state) {
    (void)state;
    const char *reason = NULL;
    if (kk__nvml_load(&reason)) skip(); /* NVML present: covered by test_cuda_device */
    assert_non_null(reason);
    kk_assert_contains(reason, "libnvidia-ml.so.1");
    for (int i = 0; i < 3; i++) {
        kk_gpu_telemetry t;
        memset(&t, 0x77, sizeof t);
        kk_clear_error();
        kk_assert_ok(kk_gpu_telemetry_read(i, &t));
        assert_int_equal(t.available, 0);
        assert_string_equal(t.unavailable_reason, reason);
        assert_int_equal(t.sm_clock_mhz, 0); /* everything else cleared */
        assert_true(t.power_w == 0.0);
        assert_string_equal(t.driver_version, "");
        assert_int_equal(kk_last_error()->status, KK_OK); /* not an error */
    }
    assert_memory_equal(reason, "NVML not available (libnvidia-ml.so.1: ", 39);
}

static void throttle_reason_text(void **state) {
    (void)state;
    char buf[256];
    kk__throttle_text(0, buf, sizeof buf);
    assert_string_equal(buf, "none");
    kk__throttle_text(0x4 | 0x40, buf, sizeof buf);
    assert_string_equal(buf, "sw_power_cap,hw_thermal_slowdown");
    kk__throttle_text(0x1ff, buf, sizeof buf);
    assert_string_equal(buf, "gpu_idle,applications_clocks_setting,sw_power_cap,hw_slowdown,"
                             "sync_boost,sw_thermal_slowdown,hw_thermal_slowdown,"
                             "hw_power_brake_slowdown,display_clock_setting");
    kk__throttle_text(0x1000 | 0x8, buf, sizeof buf);
    assert_string_equal(buf, "hw_slowdown,0x1000");
    kk__throttle_text(0x10, buf, sizeof buf);
    assert_string_equal(buf, "sync_boost");
    char small[16];
    kk__throttle_text(0x4 | 0x8 | 0x20, small, sizeof small);
    assert_string_equal(small, "sw_power_cap"); /* whole names only */
    kk__throttle_text(0x4, buf, 0);             /* must not write */
}

/* ---- thread safety: the first probe, from many threads at once (in main) ---- */

enum { THREADS = 8 };

typedef struct thread_result {
    int cuda_available, cuda_count, cpu_ok, cores;
    const char *best;
} thread_result;

static void *probe_thread(void *arg) {
    thread_result *r = arg;
    r->cuda_available = kk_backend_available(KK_BACKEND_CUDA);
    r->cuda_count = kk_backend_device_count(KK_BACKEND_CUDA);
    r->best = kk_device_best();
    kk_device_info d;
    r->cpu_ok = kk_device_get_info("cpu", &d) == KK_OK;
    r->cores = d.cpu_cores;
    return NULL;
}

static thread_result g_first[THREADS];

static void first_probe_from_many_threads(void) {
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, probe_thread, &g_first[i]) != 0) g_first[i].cores = -1;
    for (int i = 0; i < THREADS; i++)
        if (g_first[i].cores != -1) pthread_join(t[i], NULL);
}

static void concurrent_first_queries_agree(void **state) {
    (void)state;
    for (int i = 0; i < THREADS; i++) {
        assert_true(g_first[i].cpu_ok);
        assert_true(g_first[i].cores >= 1);
        assert_int_equal(g_first[i].cuda_available, kk_backend_available(KK_BACKEND_CUDA));
        assert_int_equal(g_first[i].cuda_count, kk_backend_device_count(KK_BACKEND_CUDA));
        assert_int_equal(g_first[i].cores, g_first[0].cores);
        assert_ptr_equal(g_first[i].best, kk_device_best());
    }
}

/* ---- logging of the probe ---- */

static char g_probe_log[2048];

static void capture_sink(const kk_log_record *rec, void *user) {
    (void)user;
    if (strncmp(rec->logger, "kernelkit.cuda", 14) != 0) return;
    size_t used = strlen(g_probe_log);
    snprintf(g_probe_log + used, sizeof g_probe_log - used, "%s\n", rec->line);
}

static void probe_is_logged_once(void **state) {
    (void)state;
    if (!kk_built_with_cuda()) skip(); /* nothing to probe */
    if (kk_backend_available(KK_BACKEND_CUDA)) {
        kk_assert_contains(g_probe_log, "backend initialized");
    } else {
        kk_assert_contains(g_probe_log, "backend unavailable");
        kk_assert_contains(g_probe_log, kk_backend_unavailable_reason(KK_BACKEND_CUDA));
    }
    const char *first = strstr(g_probe_log, "kernelkit.cuda.device: backend");
    assert_non_null(first);
    assert_null(strstr(first + 1, "kernelkit.cuda.device: backend")); /* once */
}

int main(void) {
    /* The first (and only) probe happens here, from several threads at once,
     * with its log records captured. */
    kk_log_set_level("kernelkit.cuda", KK_LOG_INFO);
    kk_log_set_format(KK_LOG_FORMAT_TEXT);
    kk_log_set_sink(capture_sink, NULL);
    first_probe_from_many_threads();
    (void)kk_backend_available(KK_BACKEND_CUDA);
    kk_log_reset();

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(compute_capabilities_map_to_families),
        cmocka_unit_test(supported_capabilities_start_at_8_0),
        cmocka_unit_test(arch_names_round_trip),
        cmocka_unit_test(bad_arch_names_are_rejected_with_the_accepted_list),
        cmocka_unit_test(backends_have_names_and_the_cpu_is_always_there),
        cmocka_unit_test(registry_has_one_complete_table_per_kind),
        cmocka_unit_test(good_specs_parse),
        cmocka_unit_test(bad_specs_are_rejected),
        cmocka_unit_test(cpu_info_is_sane),
        cmocka_unit_test(cpu_features_string),
        cmocka_unit_test(cpuinfo_parsers),
        cmocka_unit_test(cpu_selftest_passes_and_best_device_is_consistent),
        cmocka_unit_test(cuda_unavailable_says_why),
        cmocka_unit_test(telemetry_rejects_bad_arguments),
        cmocka_unit_test(telemetry_without_nvml_is_unavailable_with_a_reason),
        cmocka_unit_test(throttle_reason_text),
        cmocka_unit_test(concurrent_first_queries_agree),
        cmocka_unit_test(probe_is_logged_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
