/* The decoder's cost model and per-step profile (docs/model.md, "Cost model").
 *
 *   kk_bench_ceilings c;                          // kernelkit calibrate's
 *   kk_ceilings_load("cuda:0", NULL, &c);
 *   kk_decoder_cost p;
 *   kk_decoder_profile(d, x, &c, -1, NULL, &p);   // x [B,S,hidden]: one call's steps timed
 *   // p.steps[i]: work, predicted and measured time of step i of a layer
 *   kk_decoder_cost_free(&p);
 *
 * Each step of the plan (one layer) gets its work from the shapes of the call
 * (FLOPs, bytes read and written, op calls) and a roofline time from the
 * device's measured ceilings: max(bytes / bandwidth, FLOPs / rate) + calls x
 * the launch floor. The profile times each step of layer 0 with the benchmark
 * sampler inside a real call over the caller's hidden states. Nothing prints,
 * aborts or exits. */
#ifndef KERNELKIT_MODEL_COST_H
#define KERNELKIT_MODEL_COST_H

#include "kernelkit/bench.h"
#include "kernelkit/calibrate.h"
#include "kernelkit/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KK_DECODER_MAX_STEPS 32

/* One step of a layer. Times are for one layer (the decoder runs `layers`). */
typedef struct kk_step_cost {
    char name[32]; /* the plan's name: "q_proj", "rope + kv append" */
    char op[32];   /* "kk_linear", "kk_tensor_copy", ... */
    int calls;     /* op calls per layer at this B, S (0: skipped at S = 1) */
    double flops;  /* per layer */
    double bytes_read, bytes_written;
    kk_ceiling_kind rate;      /* the FLOP rate used: KK_CEILING_BF16, _FP8 or _FP32 */
    kk_ceiling_kind bandwidth; /* KK_CEILING_COPY, or KK_CEILING_READ (read-dominated) */
    char bound[12];            /* "memory", "compute", "launch"; "" without ceilings */
    double predicted_s;        /* -1 without ceilings */
    double measured_s;         /* median of the samples; -1 when not measured */
    kk_bench_measurement m;    /* the samples (n = 0 when not measured) */
} kk_step_cost;

typedef struct kk_decoder_cost {
    char level[16];             /* "balanced" */
    char device[16];            /* "cuda:0" */
    char dtype[8];              /* the compute dtype */
    int64_t batch, seq, cached; /* B, new tokens S, cached tokens L of the call */
    int64_t layers;
    int nsteps;
    kk_step_cost steps[KK_DECODER_MAX_STEPS];
    int has_ceilings;
    kk_bench_ceilings ceilings;
    double launch_floor_s; /* added per op call */
    double predicted_s;    /* the call: sum of the steps x layers; -1 without ceilings */
    double measured_s;     /* likewise from the medians; -1 when not measured */
} kk_decoder_cost;

/* The cost model alone, for a call of `batch` x `seq` new tokens after `cached`
 * ones: each step's work, and with `ceilings` (NULL: none) its roofline time
 * plus `launch_floor_s` (>= 0) per op call. A ceiling of 0 (unknown) is
 * replaced by the other of its kind (read for copy, fp32 for a matrix rate);
 * a step none can price predicts only its floor. Errors: KK_ERR_INVALID_ARGUMENT
 * naming the argument (batch, seq >= 1, cached >= 0, launch_floor_s). */
KK_API kk_status kk_decoder_predict(const kk_decoder *d, int64_t batch, int64_t seq, int64_t cached,
                                    const kk_bench_ceilings *ceilings, double launch_floor_s,
                                    kk_decoder_cost *out);

/* The sampler options of a profile: warm-up, at most `budget_s` seconds per
 * step (0: 0.5 s), RSE target 1%, one run per sample (no CUDA graph, no
 * blocking kernel: the step is timed as the executor issues it, launch
 * included), caches flushed on a GPU (weights come from memory, as in a
 * layer that follows others). */
KK_API void kk_decoder_profile_options(kk_bench_options *o, double budget_s);

/* kk_decoder_predict for hidden_in's B and S after the cached tokens, then a
 * call over hidden_in in which each step of layer 0, before it runs, is timed
 * with the sampler (opt NULL: kk_decoder_profile_options(o, 0)) on its inputs
 * as the call made them. The call's output is discarded and the cache length
 * stays (its rows past the length are written, as by any call). Errors are
 * kk_decoder_prefill's and the sampler's. Free with kk_decoder_cost_free. */
KK_API kk_status kk_decoder_profile(kk_decoder *d, const kk_tensor *hidden_in,
                                    const kk_bench_ceilings *ceilings, double launch_floor_s,
                                    const kk_bench_options *opt, kk_decoder_cost *out);

/* The launch floor measured: the median time of the smallest public-op call
 * (kk_rmsnorm of one row of 32 in the decoder's dtype on its device), timed
 * as profile steps are (opt NULL: kk_decoder_profile_options(o, 0)). */
KK_API kk_status kk_decoder_launch_floor(const kk_decoder *d, const kk_bench_options *opt,
                                         double *seconds);

/* Free the samples; the struct is zeroed. NULL is a no-op. */
KK_API void kk_decoder_cost_free(kk_decoder_cost *c);

/* Append one benchmark per measured step to `r` (kernelkit.bench/1): name
 * "model/<level>/<phase>/<NN> <step>", flops and bytes per layer, the
 * samples, and the shapes, calls, predicted time and bound as parameters. */
KK_API kk_status kk_decoder_cost_add_results(const kk_decoder_cost *c, const char *phase,
                                             kk_bench_results *r);

/* The results file (kernelkit.bench/1) of `r` with an added member "model"
 * that a reader of the schema ignores: {"phases": [{phase, level, device,
 * dtype, batch, seq, cached, layers, launch_floor_s, predicted_s, measured_s,
 * steps: [{name, op, calls, flops, bytes_read, bytes_written, rate,
 * bandwidth, bound, predicted_s, measured_s}]}], "speedups": [{phase, level,
 * measured, predicted}]} (times for all layers; -1 unknown). phases[i] names
 * costs[i] ("prefill", "decode"). JSON text, malloc'd. */
KK_API kk_status kk_decoder_results_json(const kk_bench_results *r,
                                         const kk_decoder_cost *const *costs,
                                         const char *const *phases, int n, char **text);

/* The speedup of `c` over `conservative` (the same phase at level
 * conservative): measured (their measured_s ratio) and predicted; -1 when a
 * side is unknown. */
KK_API void kk_decoder_cost_speedup(const kk_decoder_cost *conservative, const kk_decoder_cost *c,
                                    double *measured, double *predicted);

/* A markdown report of the costs: per phase the step table (predicted,
 * measured, share, ratio) and, where a phase of level conservative has a
 * twin of another level, the speedup measured and predicted. */
KK_API kk_status kk_decoder_cost_markdown(const kk_decoder_cost *const *costs,
                                          const char *const *phases, int n,
                                          const kk_bench_environment *env, char **text);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_MODEL_COST_H */
