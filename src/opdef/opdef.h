/* Internal: the op vocabulary every layer above core/ shares. An op is one
 * kk_op row (defined in src/opdef/<op>.c, listed in op_list.h): parameters,
 * tensors, FLOP and byte counts, tolerances, the float64 reference and the
 * hooks the harness calls to draw its cases. Kernels are not here: each
 * backend lists its own (src/backend/backend.h, kk__slot). */
#ifndef KK_OPDEF_OPDEF_H
#define KK_OPDEF_OPDEF_H

#include "core/rng.h"
#include "kernelkit/op.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Op ids: the position of each op in op_list.h. */
enum {
#define KK_OP(name) KK__OP_ID_##name,
#include "opdef/op_list.h"
#undef KK_OP
    KK__OP_COUNT
};

/* How the harness fills one input tensor (case_inputs.c draws the values). */
typedef enum kk__fill {
    KK__FILL_NORMAL = 0,   /* N(0, 1) */
    KK__FILL_SPREAD,       /* normal times 2^(-12..12), a quarter random bits: every code */
    KK__FILL_NVFP4_CODES,  /* e2m1 codes: all 16 (GPU MODE's inputs: 0, +-0.5, +-1, +-1.5) */
    KK__FILL_NVFP4_SCALES, /* 2^e [1, 2), e in -6..1 shifted down by `shift` (GPU MODE: 0..2) */
    KK__FILL_GLOBAL_SCALE, /* 0.25 .. 0.75, far from 1 (GPU MODE: 1) */
    KK__FILL_BY_OP,        /* not random: the op's write_input hook writes it */
} kk__fill;

typedef struct kk__fill_rule {
    kk__fill kind;
    int shift; /* KK__FILL_NVFP4_SCALES */
} kk__fill_rule;

struct kk_op {
    int id; /* KK__OP_ID_<name> */
    const char *name;
    const char *summary; /* one line */
    int nparams;
    const kk_op_param *params;
    /* Rules between parameters (Hq % Hkv == 0); NULL when none. Called once
     * every parameter is in its own range. */
    kk_status (*validate)(const kk_op_params *p);
    /* Writes the tensors (<= KK_OP_MAX_TENSORS) and returns their count. */
    int (*describe)(const kk_op_params *p, kk_op_tensor *out);
    double (*flops)(const kk_op_params *p); /* exact; docs/harness.md */
    double (*bytes)(const kk_op_params *p); /* inputs read once + outputs written once */
    kk_op_reference_fn reference;
    /* Optional: the per-element error scale (kk_op_magnitude), same arguments
     * as the reference; the rows' `acc` multiplies it. NULL: none, and the
     * elementwise rule is atol + rtol*|ref| alone. */
    kk_op_reference_fn magnitude;
    int ntolerances;
    kk_tolerance tolerances[KK_OP_MAX_TOLERANCES];
    /* Optional: widen row *t (the output dtype's) to what the kernels of
     * `backend` compute under the active configuration (gemm, linear: TF32 on
     * CUDA when hardware.nvidia.tf32_allowed is on); kk__op_tolerance_on
     * calls it. NULL: the rows hold everywhere. */
    void (*tolerance_on)(kk_backend_kind backend, kk_tolerance *t);

    /* ---- hooks for drawing cases (all optional) ---- */
    /* After the fuzzer drew every parameter in range: make the draw typical
     * of the op (GQA ratios, eps large enough to matter). big: --big. */
    void (*fuzz)(kk__rng *r, kk_op_params *p, int big);
    /* The parameter --big grows to fill the memory budget; NULL: the first
     * integer parameter with a minimum >= 1. */
    const char *grow_param;
    /* How input `k` is filled; NULL: KK__FILL_NORMAL for every input. */
    kk__fill_rule (*fill)(const kk_op_params *p, int k);
    /* Writes input `k` (n elements) for a KK__FILL_BY_OP rule. */
    void (*write_input)(const kk_op_params *p, int k, void *buf, int64_t n);

    /* Test hook (kk__op_swap, src/ops/dispatch.h): in a test's copy of a row,
     * kernels that replace the backends'. 0 in every real row. */
    int swapped;
    kk_op_kernel_fn swapped_kernels[KK_BACKEND_COUNT];
    unsigned swapped_strided; /* bit (1u << backend): that kernel takes strides */
};

/* The row of an op id, NULL when out of range. */
const kk_op *kk__op_by_id(int id);

/* kk_op_tolerance's row for `dtype`, then the op's tolerance_on hook for
 * `backend`: the tolerance the checker applies to a run on that backend. */
kk_status kk__op_tolerance_on(const kk_op *op, kk_dtype dtype, kk_backend_kind backend,
                              kk_tolerance *out);

/* ---- helpers for the rows ---- */

/* Caps that keep every tensor's element count below 2^63. */
#define KK__DIM_MAX (INT64_C(1) << 24)
#define KK__SEQ_MAX (INT64_C(1) << 20)

#define KK__P_INT(nm, lo, hi, mul, d, h)                                                           \
    { .name = nm, .kind = KK_PARAM_INT, .min = lo, .max = hi, .multiple = mul, .def = d, .help = h }
#define KK__P_BOOL(nm, d, h)                                                                       \
    { .name = nm, .kind = KK_PARAM_BOOL, .min = 0, .max = 1, .def = d, .help = h }
#define KK__P_ENUM(nm, ch, d, h)                                                                   \
    { .name = nm, .kind = KK_PARAM_ENUM, .choices = ch, .def = d, .help = h }
#define KK__P_DTYPE(nm, ch, d, h)                                                                  \
    { .name = nm, .kind = KK_PARAM_DTYPE, .choices = ch, .def = d, .help = h }
#define KK__P_FLOAT(nm, lo, hi, d, h)                                                              \
    { .name = nm, .kind = KK_PARAM_FLOAT, .fmin = lo, .fmax = hi, .fdef = d, .help = h }

#define KK__BOTH (KK_CHECK_ELEMENTWISE | KK_CHECK_L2)
#define KK__TOL(dt, a, r, l, crit, fl)                                                             \
    { .dtype = dt, .atol = a, .rtol = r, .l2 = l, .criteria = crit, .flags = fl }
#define KK__TOL_ACC(dt, a, r, l, crit, fl, ac)                                                     \
    { .dtype = dt, .atol = a, .rtol = r, .l2 = l, .criteria = crit, .flags = fl, .acc = ac }
/* The accumulation coefficient of an f32-accumulated sum, in units of the
 * magnitude m = sum |terms| (the op's magnitude hook): 4 unit roundoffs of f32,
 * 4 * 2^-24 = 2.4e-7. A sum of K terms of random sign in f32, in any blocked
 * order, is off by about u*m (the partial sums stay near sqrt(k) while m grows
 * as k); 4u leaves room for the products' own rounding, a bias add and an
 * order that is not random. A lost term (about m/K) still exceeds it by
 * 2^22/K: 4e3 at K = 1k, 256 at K = 16k. docs/harness.md, "Tolerances". */
#define KK__ACC_F32 0x1p-22
/* The GEMMs' rows (gemm, linear): docs/harness.md ("Tolerances") gives each
 * number. Every dtype accumulates in f32, so every row takes KK__ACC_F32; in
 * f16 and bf16 the output's rounding (rtol) dominates wherever nothing cancels. */
#define KK__FLOAT_TOLERANCES(fl)                                                                   \
    .ntolerances = 3,                                                                              \
    .tolerances = {KK__TOL_ACC(KK_DTYPE_F32, 1e-4, 1e-4, 1e-5, KK__BOTH, fl, KK__ACC_F32),         \
                   KK__TOL_ACC(KK_DTYPE_F16, 1e-3, 2e-3, 5e-3, KK__BOTH, fl, KK__ACC_F32),         \
                   KK__TOL_ACC(KK_DTYPE_BF16, 1e-2, 1.6e-2, 1e-2, KK__BOTH, fl, KK__ACC_F32)}

/* Ops whose f32 arithmetic is exact to a few units of roundoff (the norms,
 * RoPE): 1e-5 throughout in f32, the float ops' rows in f16 and bf16. Each op's
 * header says why it fits. */
#define KK__ROW_OP_TOLERANCES                                                                      \
    .ntolerances = 3, .tolerances = {KK__TOL(KK_DTYPE_F32, 1e-5, 1e-5, 1e-5, KK__BOTH, 0),         \
                                     KK__TOL(KK_DTYPE_F16, 1e-3, 2e-3, 5e-3, KK__BOTH, 0),         \
                                     KK__TOL(KK_DTYPE_BF16, 1e-2, 1.6e-2, 1e-2, KK__BOTH, 0)}

extern const char *const kk__float_dtypes[]; /* "f32", "f16", "bf16" */

/* Fill one tensor description (numel computed); returns 1 so describe
 * functions can count with n += kk__tensor(...). */
int kk__tensor(kk_op_tensor *t, const char *name, kk_dtype dtype, int is_output, int ndim,
               const int64_t *shape);

/* Bytes of every tensor of kk_op_tensors: inputs read once, outputs written once. */
double kk__op_bytes_io(const kk_op_params *p);

/* ---- fuzzing helpers for the rows' fuzz hooks ---- */

/* A size in 1..cap from a mixture kernels get wrong: 1, small odd sizes,
 * sizes at and next to multiples of 16, 64, 128, and uniform sizes. */
int64_t kk__fuzz_size(kk__rng *r, int64_t cap);
/* v clamped to the parameter's range and rounded to its multiple. */
int64_t kk__fuzz_fit_int(const kk_op_param *d, int64_t v);
/* Set parameter `name` (integer-like: fitted to its range; float: as is);
 * nothing when the op has no such parameter. */
void kk__fuzz_set_int(kk_op_params *p, const char *name, int64_t v);
void kk__fuzz_set_float(kk_op_params *p, const char *name, double v);

#ifdef __cplusplus
}
#endif
#endif
