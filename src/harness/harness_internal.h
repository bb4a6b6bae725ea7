/* Internal: what the registry table (registry.c) needs from each op's file
 * (ref_<op>.c): parameter indices, tensor descriptions, FLOP counts and the
 * float64 references. The parameter order of each enum below is the order of
 * that op's parameter array in registry.c; tests/test_references.c checks that
 * the two agree. */
#ifndef KK_HARNESS_INTERNAL_H
#define KK_HARNESS_INTERNAL_H

#include "kernelkit/harness.h"

/* ---- gemm: c[M,N] = a[M,K] . b[N,K]^T ---- */
enum { KK__GEMM_M, KK__GEMM_N, KK__GEMM_K, KK__GEMM_DTYPE, KK__GEMM_NPARAMS };
int kk__gemm_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__gemm_flops(const kk_op_params *p);
kk_status kk__gemm_reference(const kk_op_params *p, const double *const *in, double *const *out);

/* ---- linear: y = act(x . W^T + bias) ---- */
enum { KK__LIN_M, KK__LIN_N, KK__LIN_K, KK__LIN_BIAS, KK__LIN_ACT, KK__LIN_DTYPE, KK__LIN_NPARAMS };
/* Indices into the activation enum's choices. */
enum {
    KK__ACT_NONE,
    KK__ACT_RELU,
    KK__ACT_GELU_ERF,
    KK__ACT_GELU_TANH,
    KK__ACT_SILU,
    KK__ACT_SWIGLU,
    KK__ACT_COUNT
};
int kk__linear_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__linear_flops(const kk_op_params *p);
kk_status kk__linear_reference(const kk_op_params *p, const double *const *in, double *const *out);
/* The scalar activation (not SwiGLU, which takes two values). */
double kk__activation_f64(int act, double x);

/* ---- attention forward ---- */
enum {
    KK__ATT_B,
    KK__ATT_HQ,
    KK__ATT_HKV,
    KK__ATT_SQ,
    KK__ATT_SK,
    KK__ATT_D,
    KK__ATT_CAUSAL,
    KK__ATT_WL,
    KK__ATT_WR,
    KK__ATT_SCALE,
    KK__ATT_LSE,
    KK__ATT_DTYPE,
    KK__ATT_DROPOUT,
    KK__ATT_SEED,
    KK__ATT_OFFSET,
    KK__ATT_NPARAMS
};
kk_status kk__attention_validate(const kk_op_params *p);
int kk__attention_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__attention_flops(const kk_op_params *p);
kk_status kk__attention_reference(const kk_op_params *p, const double *const *in,
                                  double *const *out);
/* Keys [*lo, *hi] query row i may see (empty when *hi < *lo): the one
 * definition of the mask, used by the reference and the FLOP count. */
void kk__attention_key_range(const kk_op_params *p, int64_t i, int64_t *lo, int64_t *hi);
/* One row of the reference: o[D] and *lse of query row i from q[D] and the
 * kv head's rows k, v [Sk,D] (contiguous rows; s: Sk scratch doubles); bh
 * is the dropout mask's batch * Hq + head. attention_varlen's reference runs
 * it per sequence. */
void kk__attention_ref_row(const kk_op_params *p, int64_t bh, int64_t i, double scale,
                           const double *q, const double *k, const double *v, double *s,
                           double *o, double *lse);

/* ---- NVFP4 block-scaled GEMV (GPU MODE nvfp4_gemv) ---- */
enum { KK__GEMV_M, KK__GEMV_K, KK__GEMV_L, KK__GEMV_LAYOUT, KK__GEMV_GLOBAL, KK__GEMV_NPARAMS };
enum { KK__GEMV_PLAIN, KK__GEMV_BLOCKED };
int kk__nvfp4_gemv_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__nvfp4_gemv_flops(const kk_op_params *p);
double kk__nvfp4_gemv_bytes(const kk_op_params *p);
kk_status kk__nvfp4_gemv_reference(const kk_op_params *p, const double *const *in,
                                   double *const *out);

/* ---- shared ---- */

/* Fill one tensor description (numel computed); returns 1 so describe
 * functions can count with n += kk__tensor(...). */
int kk__tensor(kk_op_tensor *t, const char *name, kk_dtype dtype, int is_output, int ndim,
               const int64_t *shape);

/* Bytes of every tensor of kk_op_tensors: inputs read once, outputs written once. */
double kk__op_bytes_io(const kk_op_params *p);

/* kk_op_run with the kernel slot replaced by `override` (NULL: the row's own):
 * every check and the device switch of kk_op_run, then `override`. The
 * host-overhead benchmark passes a kernel that does nothing. KK__RUN_STRICT:
 * never fall back to the CPU (the checker, so that a case reported on a device
 * ran on it: an unsupported configuration is then KK_ERR_UNSUPPORTED). */
enum { KK__RUN_STRICT = 1u };
kk_status kk__op_run_with(const kk_op_params *p, kk_tensor *const *tensors, kk_stream stream,
                          kk_op_kernel_fn override, unsigned flags);
/* For the host-overhead benchmark only: a kernel that kk__op_run_with runs on
 * this thread, instead of the row's slot, when its `override` is NULL (so a
 * typed entry point of kernelkit/ops.h can be timed with a kernel that does
 * nothing). NULL clears it. */
void kk__op_run_set_thread_override(kk_op_kernel_fn kernel);

struct kk_case;
/* The tensors of case c on `device`, inputs filled from its seed (bench_run.c).
 * *n is set to the count even on failure; destroy tensors[0..*n) either way. */
kk_status kk__case_tensors(const struct kk_case *c, const char *device, kk_tensor **tensors,
                           int *n);

#endif
