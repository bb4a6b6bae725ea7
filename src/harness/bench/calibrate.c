/* kernelkit calibrate: the orchestration. Each ceiling is one piece of work
 * timed by the benchmark sampler (warm samples: the buffers are far larger
 * than any cache, and the GEMMs are compute-bound); the backend files say what
 * the work is (src/cpu/calibrate_cpu.c, src/cuda/calibrate_cuda.c). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "harness/bench/calibrate_internal.h"
#include "kernelkit/device.h"
#include "kernelkit/stats.h"
#include "kernelkit/version.h"

#define FUNC KK__CALIBRATE_FUNC

static const char *const k_names[KK_CEILING_COUNT] = {
    "copy_gbs", "read_gbs", "bf16_tflops", "fp8_tflops", "fp32_tflops", "amx_bf16_tflops"};

const char *kk_ceiling_name(kk_ceiling_kind kind) {
    return (unsigned)kind < KK_CEILING_COUNT ? k_names[kind] : "?";
}

const char *kk_ceiling_unit(kk_ceiling_kind kind) {
    if ((unsigned)kind >= KK_CEILING_COUNT) return "?";
    return kind == KK_CEILING_COPY || kind == KK_CEILING_READ ? "GB/s" : "TFLOP/s";
}

void kk_calibrate_options_default(kk_calibrate_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
}

kk_status kk__calibrate_measure(const char *device, kk_bench_fn fn, void *ctx, double work,
                                double unit_scale, const kk_calibrate_options *o,
                                const char *method, kk_ceiling *out) {
    kk_bench_options bo;
    kk_bench_options_default(&bo);
    bo.cold = 0;
    /* every piece of work lasts far longer than a launch, and cudaMemcpyAsync and
     * cuBLASLt may wait on the stream while enqueuing, which a held stream forbids */
    bo.blocking_kernel = 0;
    bo.warmup_runs = 2;
    bo.warmup_time_s = 0.02;
    if (o->quick) {
        bo.rse_target = 0.02;
        bo.min_samples = 5;
        bo.min_time_s = 0.05;
        bo.time_budget_s = o->time_budget_s > 0 ? o->time_budget_s : 1.0;
    } else {
        bo.rse_target = 0.005;
        bo.min_samples = 10;
        bo.min_time_s = 0.5;
        bo.time_budget_s = o->time_budget_s > 0 ? o->time_budget_s : 6.0;
    }
    kk_bench_measurement m;
    memset(&m, 0, sizeof m);
    kk_status st = kk_bench_measure(device, fn, ctx, &bo, &m);
    if (st) return st;
    kk_stats_summary s;
    st = kk_stats_summarize(m.samples, m.n, KK_STATS_DEFAULT_SEED, KK_STATS_MIN_RESAMPLES, &s);
    if (st == KK_OK && !(s.median > 0))
        st = kk__error(KK_ERR_INTERNAL, FUNC, "%s: median time %g s is not positive", method,
                       s.median);
    if (st == KK_OK) {
        memset(out, 0, sizeof *out);
        out->available = 1;
        snprintf(out->method, sizeof out->method, "%s", method);
        out->median_s = s.median;
        out->median_ci_low_s = s.median_ci_low;
        out->median_ci_high_s = s.median_ci_high;
        out->work = work;
        out->value = work / s.median / unit_scale;
        out->value_ci_low = s.median_ci_high > 0 ? work / s.median_ci_high / unit_scale : 0;
        out->value_ci_high = s.median_ci_low > 0 ? work / s.median_ci_low / unit_scale : 0;
        out->samples = m.n;
        out->sm_clock_mean_mhz = m.sm_clock_mean_mhz;
    }
    kk_bench_measurement_free(&m);
    return st;
}

kk_status kk_calibrate(const char *device, const kk_calibrate_options *opt, kk_calibration *out) {
    kk_status st = KK__CHECK_NOT_NULL(device);
    if (st) return st;
    if ((st = KK__CHECK_NOT_NULL(out))) return st;
    memset(out, 0, sizeof *out);
    kk_calibrate_options o;
    kk_calibrate_options_default(&o);
    if (opt) o = *opt;
    if (!(o.time_budget_s >= 0) || o.time_budget_s > 3600)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, FUNC, "options.time_budget_s",
                             "0 (default) to 3600", "%g", o.time_budget_s);
    kk_backend_kind kind;
    int index;
    if ((st = kk_device_parse(device, &kind, &index))) return st;

    kk_bench_environment env;
    if ((st = kk_bench_environment_capture(device, 0, NULL, NULL, 0, &env))) return st;
    snprintf(out->device, sizeof out->device, "%s", env.device);
    snprintf(out->device_name, sizeof out->device_name, "%s", env.device_name);
    snprintf(out->driver_version, sizeof out->driver_version, "%s", env.driver_version);
    snprintf(out->timestamp_utc, sizeof out->timestamp_utc, "%s", env.timestamp_utc);
    snprintf(out->kk_version, sizeof out->kk_version, "%s", KK_VERSION_STRING);
    out->sm_clock_max_mhz = env.sm_clock_max_mhz;
    int dev_index = env.device_index;
    kk_bench_environment_free(&env);
    out->quick = o.quick ? 1 : 0;

    /* a ceiling the backend does not measure stays unavailable with a reason */
    for (int i = 0; i < KK_CEILING_COUNT; i++)
        kk__ceiling_unavailable(&out->ceilings[i], "not measured on this device");
    const kk__backend *b = kk__backend_get(kind);
    if (!b->calibrate)
        return kk__error(KK_ERR_UNSUPPORTED, KK__CALIBRATE_FUNC, "%s has nothing to calibrate",
                         b->name);
    st = b->calibrate(b->context, dev_index, &o, kk__calibrate_measure, out);
    if (kind != KK_BACKEND_CPU) {
        if (st == KK_OK) {
            kk_gpu_telemetry t;
            if (kk_gpu_telemetry_read(dev_index, &t) == KK_OK && t.available) {
                out->sm_clock_mhz = t.sm_clock_mhz;
                out->mem_clock_mhz = t.mem_clock_mhz;
                if (t.sm_clock_max_mhz > 0) out->sm_clock_max_mhz = t.sm_clock_max_mhz;
            }
        }
    }
    return st;
}

void kk_calibration_to_ceilings(const kk_calibration *cal, kk_bench_ceilings *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!cal) return;
    double v[KK_CEILING_COUNT];
    for (int i = 0; i < KK_CEILING_COUNT; i++)
        v[i] = cal->ceilings[i].available && isfinite(cal->ceilings[i].value)
                   ? cal->ceilings[i].value
                   : 0;
    out->copy_gbs = v[KK_CEILING_COPY];
    out->read_gbs = v[KK_CEILING_READ];
    /* the CPU's bf16 peak at the amx level is the tiles' (its bf16 GEMM runs on them) */
    out->bf16_tflops = v[KK_CEILING_AMX_BF16] > 0 ? v[KK_CEILING_AMX_BF16] : v[KK_CEILING_BF16];
    out->fp8_tflops = v[KK_CEILING_FP8];
    out->fp32_tflops = v[KK_CEILING_FP32];
}
