/* Cases, suites and the runner: what `kernelkit check` and `kernelkit run` do,
 * as a library.
 *
 * A case is one op with one set of parameters and one seed. Its inputs are
 * drawn from the seed (kk_case_fill_inputs), so a case is reproducible from
 * (op, params, seed, distribution) alone. Cases come from suite files
 * (kk_suite_load; bench/suites/NAME.json), from the fuzzer (random valid
 * parameters, kk_case_fuzz), or from the caller.
 *
 *   kk_case c;
 *   kk_suite_case_find("smoke/convert/n37-f32-bf16", 1, KK_DIST_FULL, &c);  // or kk_case_fuzz
 *   kk_run_options o = {.device = "cpu"};
 *   kk_case_result r;
 *   kk_case_run(&c, &o, &r);       // r.status: KK_CASE_PASS / FAIL / ERROR / SKIP
 *
 * kk_case_run allocates the tensors on the device, copies the inputs in,
 * poisons every output, runs the op's kernel for that device's backend on its
 * own copies, copies the outputs back and checks them against the float64
 * reference, which works on separate decoded copies of the inputs. See
 * docs/harness.md ("Cases and suites", "kernelkit check").
 *
 * Functions return KK_OK or an error in kk_last_error() for bad arguments; a
 * case that ran reports its verdict in its result, not in the status. */
#ifndef KERNELKIT_CASES_H
#define KERNELKIT_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/harness.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- input distributions ---- */

typedef enum kk_input_dist {
    /* gemm, linear, attention: normal(0,1) rounded to the input dtype.
     * nvfp4_gemv: every e2m1 code; e4m3 scales 2^[-6..1] x uniform[1,2);
     * global scales uniform [0.25, 0.75). convert: every code of src (NaN and
     * inf included) and normal values over 2^[-12, 12]. */
    KK_DIST_FULL = 0,
    /* nvfp4_gemv as GPU MODE draws it: e2m1 values in {0, +-0.5, +-1, +-1.5},
     * scales in {0, 1, 2}, global scales 1. Other ops: as FULL. */
    KK_DIST_GPUMODE,
    KK_DIST_COUNT
} kk_input_dist;

/* "full", "gpumode"; "?" out of range. */
KK_API const char *kk_input_dist_name(kk_input_dist dist);
/* KK_ERR_INVALID_ARGUMENT naming the accepted names. */
KK_API kk_status kk_input_dist_parse(const char *name, kk_input_dist *out);

/* Fill the op's inputs (host buffers in kk_op_tensors order, inputs only, each
 * of kk_dtype_bytes(dtype, numel) bytes) with values drawn from `seed`. The
 * same (params, seed, dist) gives the same bytes on every platform. */
KK_API kk_status kk_case_fill_inputs(const kk_op_params *p, uint64_t seed, kk_input_dist dist,
                                     void *const *inputs);

/* ---- cases ---- */

#define KK_CASE_NAME_MAX 96

typedef struct kk_case {
    char name[KK_CASE_NAME_MAX]; /* "smoke/gemm/5x7x64-bf16", "fuzz/attention/3" */
    kk_op_params params;         /* valid */
    uint64_t seed;               /* the inputs' seed */
    kk_input_dist dist;
    int no_bench; /* a suite case marked "bench": false: kernelkit bench skips it */
} kk_case;

/* The seed of the case called `name` in a run with seed `run_seed`: a hash of
 * both (splitmix64 over FNV-1a of the name), so a case keeps its seed however
 * the run is filtered. */
KK_API uint64_t kk_case_seed(uint64_t run_seed, const char *name);

/* The dtype a case is reported and filtered by: its first output's dtype. */
KK_API kk_dtype kk_case_dtype(const kk_op_params *p);

/* Make the case's dtype `dtype` by setting the first DTYPE parameter that
 * decides the first output's dtype (gemm/linear/attention: dtype; convert:
 * dst). KK_OK also when it already is; KK_ERR_UNSUPPORTED when no parameter
 * can make it so (nvfp4_gemv always writes f16; gemm has no e2m1). */
KK_API kk_status kk_case_force_dtype(kk_op_params *p, kk_dtype dtype);

/* Memory a case needs: on the device (every tensor once) and on the host
 * (input and output staging, a second output copy for the two-run poison
 * check, and float64 copies of every tensor for the reference). */
typedef struct kk_case_memory {
    uint64_t device_bytes;
    uint64_t host_bytes;
} kk_case_memory;

KK_API kk_status kk_case_memory_need(const kk_op_params *p, kk_case_memory *out);

/* ---- suites ---- */

/* A suite is a JSON file of cases, read by `kernelkit check` and `kernelkit
 * bench` alike (docs/harness.md, "Suites"):
 *
 *   {"name": "smoke", "description": "...",
 *    "cases": [{"name": "smoke/gemm/5x7x33", "op": "gemm", "params": "M=5 N=7 K=33"},
 *              {"name": "smoke/convert/1Mi-f32-bf16", "op": "convert",
 *               "params": "n=1048576 src=f32 dst=bf16", "note": "why it is there"}]}
 *
 * A case's params leaving out a DTYPE parameter stand for every dtype it
 * accepts, one case each, the dtypes appended to the name: the first case
 * above is smoke/gemm/5x7x33-f32, -f16 and -bf16. "bench": false marks a case
 * too small to be worth timing: kk_case.no_bench, which kernelkit bench skips.
 *
 * A suite given by name is NAME.json in the first suite directory that has it:
 * each directory of $KK_SUITES_DIR (':' between them), then $KK_BENCH_SUITES
 * (its older name), share/kernelkit/suites next to the library (an install,
 * wherever it was installed), the source tree's bench/suites, and the install
 * directory the build was configured for. Anything with a '/' or ending in
 * ".json" is a path. */

#define KK_SUITE_NAME_MAX 64
#define KK_SUITE_PATH_MAX 4096

typedef struct kk_suite {
    char name[KK_SUITE_NAME_MAX]; /* the file's "name", else its base name */
    char path[KK_SUITE_PATH_MAX]; /* the file it was read from */
    int count;
    kk_case *cases; /* count cases, in file order, dtypes expanded */
} kk_suite;

/* The file of suite `name_or_path` into `path`: a path as it is, a name
 * searched for as above. KK_ERR_IO when no directory has the name, the message
 * naming every place looked in. */
KK_API kk_status kk_suite_locate(const char *name_or_path, char *path, size_t size);

/* Read a suite (a name or a path, as kk_suite_locate takes it), each case
 * seeded with kk_case_seed(run_seed, name) and drawing from `dist`. A file
 * that is not a suite gives KK_ERR_INVALID_ARGUMENT, the message naming the
 * file, the field ("cases[3].params") and what was expected. Free *out with
 * kk_suite_free, also after an error. */
KK_API kk_status kk_suite_load(const char *name_or_path, uint64_t run_seed, kk_input_dist dist,
                               kk_suite *out);
KK_API void kk_suite_free(kk_suite *suite);

/* The names of every suite in the suite directories, sorted, each once (a
 * directory searched earlier hides a same-named file of a later one). Free
 * with kk_suite_names_free. */
KK_API kk_status kk_suite_names(char ***names, int *count);
KK_API void kk_suite_names_free(char **names, int count);

/* The case called `name` in any suite of the suite directories (its first
 * part's suite first: "smoke/..." is looked for in smoke.json);
 * KK_ERR_INVALID_ARGUMENT when there is none. */
KK_API kk_status kk_suite_case_find(const char *name, uint64_t run_seed, kk_input_dist dist,
                                    kk_case *out);

/* ---- fuzzing ---- */

/* Case `index` of op `op`'s fuzz stream for `run_seed`: random valid
 * parameters (sizes 1, odd sizes, sizes next to multiples of 16, 64 and 128),
 * named "fuzz/<op>/<index>". With `big` NULL the sizes stay small (every
 * tensor <= 2^18 elements, the reference <= 2^25 FLOPs: milliseconds on a
 * CPU). With `big`, one dimension per op grows until the case needs about as
 * much memory as *big allows (device and host), the others staying small. */
KK_API kk_status kk_case_fuzz(const kk_op *op, uint64_t run_seed, int index, kk_input_dist dist,
                              const kk_case_memory *big, kk_case *out);

/* ---- running ---- */

typedef enum kk_case_status {
    KK_CASE_PASS = 0,
    KK_CASE_FAIL,  /* an output is wrong, unwritten, or an input was changed */
    KK_CASE_ERROR, /* the kernel (or copying, allocating) returned an error */
    KK_CASE_SKIP   /* could not run here: no kernel, too large, kernel unsupported */
} kk_case_status;

/* "PASS", "FAIL", "ERROR", "SKIP". */
KK_API const char *kk_case_status_name(kk_case_status status);

typedef struct kk_case_output {
    const char *name; /* "c", "o", "lse", "y" */
    kk_dtype dtype;
    kk_check_result check;
    size_t unwritten;        /* elements the two poison runs disagree on */
    int64_t first_unwritten; /* -1 when none */
} kk_case_output;

typedef struct kk_case_result {
    kk_case_status status;
    int noutputs;
    kk_case_output outputs[KK_OP_MAX_TENSORS];
    /* Over every output: the largest errors, and the first bad element of the
     * first output that failed (first_bad -1 and first_bad_tensor NULL when none). */
    double max_abs_err, max_rel_err, rel_l2_err;
    const char *first_bad_tensor;
    int64_t first_bad;
    double first_bad_out, first_bad_ref;
    int kernel_runs;  /* 1, or 2 with the two-variant poison check */
    double kernel_ms; /* first run, host clock, includes synchronization */
    double reference_ms;
    char message[512]; /* why it failed, erred or was skipped; "" on PASS */
} kk_case_result;

typedef struct kk_run_options {
    const char *device;   /* "cpu", "cuda", "cuda:N"; NULL: kk_device_best() */
    double max_ref_flops; /* skip cases whose reference needs more; 0: no limit */
    int check_memory;     /* non-zero: skip cases that do not fit in free memory */
} kk_run_options;

/* Run one case (see the top of this file). Returns KK_OK whenever the case
 * got a verdict, the error status only for bad arguments. */
KK_API kk_status kk_case_run(const kk_case *c, const kk_run_options *opt, kk_case_result *r);

/* The case and its result as one JSON object (one line): name, op, params,
 * dtype, seed (a string), dist, status, message, the metrics (non-finite ones
 * as "inf"/"nan" strings), timings and one object per output. *json is
 * malloc'd: free() it. */
KK_API kk_status kk_case_result_json(const kk_case *c, const kk_case_result *r, char **json);

/* ---- one op on given data (kernelkit run) ---- */

/* Run params' kernel for `device`'s backend on host buffers (kk_op_tensors
 * order: inputs, then outputs, each kk_dtype_bytes(dtype, numel) bytes): copy
 * the inputs to the device, poison the outputs, run, copy the outputs back.
 * KK_ERR_UNSUPPORTED when that backend has no kernel for the op. */
KK_API kk_status kk_run_kernel_host(const kk_op_params *p, const char *device,
                                    void *const *buffers);

/* The same with the float64 reference: decode the inputs, run the reference,
 * write each output rounded to its dtype (kk_convert_host). */
KK_API kk_status kk_run_reference_host(const kk_op_params *p, void *const *buffers);

/* ---- a run of many cases ---- */

typedef struct kk_check_tally {
    int passed, failed, skipped; /* failed includes KK_CASE_ERROR */
} kk_check_tally;

KK_API void kk_check_tally_add(kk_check_tally *t, kk_case_status status);

/* The exit status of `kernelkit check`: 1 when any case failed, 2 when none
 * ran (all skipped, or nothing selected), 0 when every case that ran passed. */
KK_API int kk_check_tally_exit_code(const kk_check_tally *t);

/* ---- benchmarking one case (kernelkit bench) ---- */

struct kk_bench_options;
struct kk_bench_measurement;

/* Time the kernel of c's op for `device`'s backend with kk_bench_measure
 * (kernelkit/bench.h): every tensor is allocated on the device once, the
 * inputs are filled from c's seed and copied in, and each timed run calls the
 * kernel slot on the same tensors, as kk_op_run would but without its checks
 * (host overhead, measured apart by kk_op_host_overhead). `opt` NULL = the
 * sampler's defaults. On "cuda:N" the kernel is enqueued on the sampler's
 * stream, so it is timed with events, graph-batched when short and behind the
 * blocking kernel. KK_ERR_UNSUPPORTED when that backend has no kernel for the op. */
KK_API kk_status kk_case_bench(const kk_case *c, const char *device,
                               const struct kk_bench_options *opt,
                               struct kk_bench_measurement *out);

/* ---- host overhead of dispatch (kernelkit bench --host-overhead) ---- */

/* What one kk_op_run call costs the calling thread, the device's own work
 * excluded. `dispatch`: the parameter and tensor checks, the kernel lookup and
 * the device switch, with a kernel slot that does nothing. `launch` (CUDA
 * only; has_launch = 1): the same with the real kernel slot, i.e. until the
 * kernel is enqueued on a non-blocking stream; batches of `calls_per_sample`
 * calls are timed together and the stream is drained between batches, untimed,
 * so the host never waits for the device inside a timed batch. On a GPU the
 * device is made current for the measurement. Samples are seconds per call. */
typedef struct kk_host_overhead {
    struct kk_bench_measurement *dispatch; /* caller-provided */
    struct kk_bench_measurement *launch;   /* caller-provided; filled when has_launch */
    /* Optional (may be NULL): the CUDA runtime's own cost of launching a tiny
     * kernel on the same stream, no kk_op_run at all: the floor under
     * `launch`, so what KernelKit adds is launch - bare. */
    struct kk_bench_measurement *bare;
    int has_launch, has_bare;
    /* Optional (may be NULL): the op's typed entry point of kernelkit/ops.h
     * (kk_attention, kk_rmsnorm, ...) called on the same tensors with the same
     * do-nothing kernel, so what the entry point adds to kk_op_run (reading
     * the shapes, filling the parameters) is entry - dispatch. Its batches
     * alternate with dispatch's, so both see the same machine. has_entry = 1
     * when measured (every op has an entry point). */
    struct kk_bench_measurement *entry;
    int has_entry;
} kk_host_overhead;

#define KK_HOST_OVERHEAD_GOAL_S 5e-6 /* the goal per call */

/* Measure case c's op on `device` (its tensors allocated there, inputs from c's
 * seed). samples: how many batches (0 = 200); calls_per_sample (0 = 64).
 * KK_ERR_UNSUPPORTED when the device's backend has no kernel for the op. */
KK_API kk_status kk_op_host_overhead(const kk_case *c, const char *device, size_t samples,
                                     size_t calls_per_sample, kk_host_overhead *out);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_CASES_H */
