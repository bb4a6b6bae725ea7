/* Ops: the vocabulary of every kernel KernelKit has, and the one door to them.
 *
 * Every op (gemm, linear, attention, rmsnorm, ...) is a row with a name, a
 * parameter schema, the tensors it takes, its FLOP and byte counts, its
 * float64 reference and its tolerances per dtype. The typed entry points of
 * kernelkit/ops.h (kk_attention, kk_rmsnorm, ...) fill the parameters from
 * tensor shapes; this header is the generic form, for tools and harnesses:
 *
 *   const kk_op *op;
 *   kk_op_params p;
 *   kk_op_find("attention", &op);
 *   if (kk_op_params_parse(op, "B=2 Hq=8 Hkv=2 Sq=100 Sk=300 D=64 causal=1", &p) != KK_OK)
 *       puts(kk_last_error_message());  // e.g. "attention: D = 300: expected 16..256"
 *   kk_op_tensor t[KK_OP_MAX_TENSORS];
 *   int n;
 *   kk_op_tensors(&p, t, &n);           // q, k, v (inputs), o (output)
 *   kk_op_run(&p, tensors, stream);     // tensors in that order, on one device
 *
 * All functions return KK_OK or an error recorded in kk_last_error(). */
#ifndef KERNELKIT_OP_H
#define KERNELKIT_OP_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/device.h"
#include "kernelkit/dtype.h"
#include "kernelkit/memory.h"
#include "kernelkit/status.h"
#include "kernelkit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KK_OP_MAX_PARAMS 24
#define KK_OP_MAX_LISTS 2      /* KK_PARAM_LIST parameters of one op */
#define KK_OP_LIST_MAX 64      /* values of one KK_PARAM_LIST parameter */
#define KK_OP_MAX_TENSORS 12   /* rope_kv_append has 9 */
#define KK_OP_MAX_TOLERANCES 8 /* convert has one row per float dtype: 7 */

/* ---- parameter schema ---- */

typedef enum kk_param_kind {
    KK_PARAM_INT = 0, /* int64 in [min, max], a multiple of `multiple` when > 1 */
    KK_PARAM_FLOAT,   /* finite double in [fmin, fmax] */
    KK_PARAM_BOOL,    /* 0 or 1; parsed from 0/1/true/false/yes/no/on/off */
    KK_PARAM_ENUM,    /* index into `choices` */
    KK_PARAM_DTYPE,   /* a kk_dtype whose name (kk_dtype_name) is in `choices` */
    /* 0..KK_OP_LIST_MAX integers in [min, max], written "5:0:17" ("none" or ""
     * for the empty list): data a case carries, such as the sequence lengths
     * of attention_varlen. i[] holds the count, lists[] the values. */
    KK_PARAM_LIST
} kk_param_kind;

typedef struct kk_op_param {
    const char *name; /* as written in "k=v" strings, e.g. "Hq" (case-sensitive) */
    kk_param_kind kind;
    int64_t min, max;           /* INT: inclusive range */
    int64_t multiple;           /* INT: 0 or 1 = any value */
    double fmin, fmax;          /* FLOAT: inclusive range */
    int64_t def;                /* default of INT, BOOL, ENUM (index), DTYPE (kk_dtype); a
                                   LIST's is def_list */
    double fdef;                /* default of FLOAT */
    const char *const *choices; /* ENUM and DTYPE: names, NULL-terminated */
    const char *help;           /* one line */
    const char *def_list;       /* LIST: the default as text ("5:0:17"); NULL = empty */
} kk_op_param;

/* An op (opaque): look it up with kk_op_find or kk_op_at. */
typedef struct kk_op kk_op;

/* Parameter values of one op. Integer-like kinds live in i[], floats in f[],
 * both indexed like op->params. A LIST parameter's count is in i[], its
 * values in lists[n] where n counts the LIST parameters before it (read them
 * with kk_op_params_list); values past the count are 0. Fill with
 * kk_op_params_init / _parse. */
typedef struct kk_op_params {
    const kk_op *op;
    int64_t i[KK_OP_MAX_PARAMS];
    double f[KK_OP_MAX_PARAMS];
    int32_t lists[KK_OP_MAX_LISTS][KK_OP_LIST_MAX];
} kk_op_params;

/* ---- tensors an op takes ---- */

/* Contiguous row-major, in the order the reference and the kernels take them:
 * every input first, then every output. */
typedef struct kk_op_tensor {
    const char *name; /* "q", "k", "v", "o", "lse", ... */
    kk_dtype dtype;
    int ndim;
    int64_t shape[KK_TENSOR_MAX_DIMS];
    int64_t numel;
    int is_output;
} kk_op_tensor;

/* ---- tolerances (what the checker allows an op's output) ---- */

enum {
    KK_CHECK_ELEMENTWISE = 1u << 0, /* every element: |out - ref| <= atol + rtol * |ref| */
    KK_CHECK_L2 = 1u << 1,          /* ||out - ref||_2 / ||ref||_2 <= l2 */
};
enum {
    /* A non-finite reference element passes when out is the same non-finite
     * value (NaN for NaN, an infinity of the same sign). Without this flag a
     * non-finite reference element never passes. */
    KK_CHECK_ALLOW_NONFINITE = 1u << 0,
};

typedef struct kk_tolerance {
    kk_dtype dtype;    /* the dtype of the output this row applies to */
    double atol, rtol; /* elementwise rule */
    double l2;         /* relative L2 limit */
    unsigned criteria; /* KK_CHECK_ELEMENTWISE and/or KK_CHECK_L2: what decides pass */
    unsigned flags;    /* KK_CHECK_ALLOW_NONFINITE */
    /* Accumulation coefficient: with the op's per-element magnitude m
     * (kk_op_magnitude), the elementwise rule is
     * |out - ref| <= atol + rtol*|ref| + acc*m. 0 for ops without a magnitude
     * (then the rule is the plain atol + rtol*|ref|). docs/harness.md. */
    double acc;
} kk_tolerance;

/* ---- references and kernels ---- */

/* Inputs and outputs are float64 arrays, contiguous, in kk_op_tensors order,
 * the inputs already decoded exactly from their dtype. Params are valid. */
typedef kk_status (*kk_op_reference_fn)(const kk_op_params *p, const double *const *inputs,
                                        double *const *outputs);

/* A backend's kernel: tensors in kk_op_tensors order (inputs, then outputs),
 * contiguous, of the described dtypes and sizes, all on that backend's device
 * (kk_op_run checks all of this before it calls a kernel).
 *   CPU: runs synchronously; `stream` is NULL.
 *   CUDA: called with the tensors' device current on the calling thread;
 *   enqueues its work on `stream` (a cudaStream_t of that device; NULL = the
 *   legacy default stream) and returns without synchronizing. It reports a
 *   failed launch as KK_ERR_KERNEL_LAUNCH; the outputs are ready once the
 *   stream is synchronized. It never allocates in a way that synchronizes, so
 *   it can be captured into a CUDA graph.
 * A slot whose kernels do not cover the parameters (an f32 attention on CUDA)
 * returns KK_ERR_UNSUPPORTED before enqueuing anything; kk_op_run then runs
 * the CPU kernel instead (see kk_op_run). */
typedef kk_status (*kk_op_kernel_fn)(const kk_op_params *p, kk_tensor *const *tensors,
                                     kk_stream stream);

/* ---- registry lookup ---- */

KK_API int kk_op_count(void);
/* Row i (0 <= i < kk_op_count()), NULL otherwise. */
KK_API const kk_op *kk_op_at(int i);
/* KK_ERR_INVALID_ARGUMENT naming the known ops when there is no such op. */
KK_API kk_status kk_op_find(const char *name, const kk_op **out);
/* Bit (1u << kk_backend_kind) for every backend that has a kernel for the op. */
KK_API unsigned kk_op_backends(const kk_op *op);
/* "cpu, cuda": the backends with a kernel for the op ("none" when none). */
KK_API kk_status kk_op_backends_format(const kk_op *op, char *buf, size_t size);
/* 1 when `backend` has a kernel for the op, else 0. */
KK_API int kk_op_has_kernel(const kk_op *op, kk_backend_kind backend);
/* "attention"; "" for NULL. */
KK_API const char *kk_op_name(const kk_op *op);
/* One line saying what the op computes; "" for NULL. */
KK_API const char *kk_op_summary(const kk_op *op);
/* Its parameters: kk_op_param_count of them, kk_op_param_at(op, i) each
 * (NULL out of range), in the order of kk_op_params' arrays. */
KK_API int kk_op_param_count(const kk_op *op);
KK_API const kk_op_param *kk_op_param_at(const kk_op *op, int i);
/* Index of a parameter in op->params, -1 when there is none of that name. */
KK_API int kk_op_param_index(const kk_op *op, const char *name);
/* The tolerance row for an output of `dtype`; KK_ERR_UNSUPPORTED when the op
 * has none (it does not produce that dtype). The checker may widen it for how
 * a backend computes under the active configuration: gemm and linear in f32 on
 * CUDA with hardware.nvidia.tf32_allowed on (docs/harness.md, "Tolerances"). */
KK_API kk_status kk_op_tolerance(const kk_op *op, kk_dtype dtype, kk_tolerance *out);

/* ---- parameters ---- */

/* Every parameter at its default. */
KK_API kk_status kk_op_params_init(const kk_op *op, kk_op_params *p);
/* Set one parameter from text, checking its own range. Errors name the op,
 * the parameter and the accepted values: "attention: D = 300: expected 16..256". */
KK_API kk_status kk_op_params_set(kk_op_params *p, const char *name, const char *value);
/* Defaults, then each "key=value" of `text` (separated by spaces or commas;
 * NULL or "" keeps the defaults), then kk_op_params_validate. */
KK_API kk_status kk_op_params_parse(const kk_op *op, const char *text, kk_op_params *p);
/* Every parameter in range, then the op's own rules. */
KK_API kk_status kk_op_params_validate(const kk_op_params *p);
/* Value by name (INT, BOOL, ENUM index, DTYPE as kk_dtype; FLOAT); 0 when the
 * op has no such parameter. */
KK_API int64_t kk_op_params_int(const kk_op_params *p, const char *name);
KK_API double kk_op_params_float(const kk_op_params *p, const char *name);
/* The values of LIST parameter `name` (*values may be NULL); returns their
 * count, 0 for an empty list or when the op has no LIST parameter of that
 * name. */
KK_API int kk_op_params_list(const kk_op_params *p, const char *name, const int32_t **values);
/* "M=128 N=256 K=64 dtype=bf16": what kk_op_params_parse reads back.
 * KK_ERR_INVALID_ARGUMENT when it does not fit in `size`. */
KK_API kk_status kk_op_params_format(const kk_op_params *p, char *buf, size_t size);

/* ---- what an op does, for valid params (validated here first) ---- */

KK_API kk_status kk_op_tensors(const kk_op_params *p, kk_op_tensor *out, int *count);
/* Run op p->op on `tensors` (kk_op_tensors order) where they live. Checks the
 * parameters and every tensor (count, dtype, size, contiguity, one device for
 * all) and names the first that is wrong. Tensors must be contiguous, except
 * where the row's `strided` says the device's kernel takes strided ones
 * (the innermost dimension contiguous): attention on CUDA, so q, k, v, o in
 * a [B,S,H,D] buffer need no copy. On a CUDA device the kernel is
 * enqueued on `stream` (NULL = the legacy default stream) with the tensors'
 * device current, and the call returns without synchronizing; the caller's
 * current device is left as it was. When the tensors' backend has no kernel
 * for the op and the CPU has one, the op runs on the CPU instead: the inputs
 * are copied to the host, the CPU kernel runs, the outputs are copied back,
 * synchronously, and a warning naming the op is logged once per op and
 * backend (logger "kernelkit.ops"); the same when the backend's kernel answers
 * KK_ERR_UNSUPPORTED for these parameters. KK_ERR_UNSUPPORTED when no backend
 * can run it. */
KK_API kk_status kk_op_run(const kk_op_params *p, kk_tensor *const *tensors, kk_stream stream);

/* Wait for the work kk_op_run enqueued on `stream` of `device` ("cuda:N";
 * "cpu" returns at once). KK_ERR_KERNEL_LAUNCH with the CUDA error name when
 * the work failed while it ran. */
KK_API kk_status kk_op_synchronize(const char *device, kk_stream stream);

/* NaN when p is not valid (kk_last_error says why). */
KK_API double kk_op_flops(const kk_op_params *p);
KK_API double kk_op_bytes(const kk_op_params *p);
KK_API kk_status kk_op_reference(const kk_op_params *p, const double *const *inputs,
                                 double *const *outputs);
/* The per-element error scale of the op's outputs, with the reference's
 * arguments: for each output element a magnitude m >= 0, the size of the terms
 * its value is computed from, propagated through the op's nonlinearity to
 * first order (gemm: m[i,j] = sum_k |a_ik * b_jk|). The checker allows
 * tol.acc * m on top of atol + rtol*|ref|. KK_ERR_UNSUPPORTED when the op has
 * none (kk_op_has_magnitude). docs/harness.md, "Tolerances". */
KK_API kk_status kk_op_magnitude(const kk_op_params *p, const double *const *inputs,
                                 double *const *outputs);
KK_API int kk_op_has_magnitude(const kk_op *op);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_OP_H */
