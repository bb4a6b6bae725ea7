/* The op registry: one row per op. The harness, the CLI and the tests read
 * this table and nothing else, so adding an op is adding a row here and its
 * ref_<op>.c (docs/harness.md says how). Below the table: lookup, what an
 * op does (tensors, FLOPs, bytes, reference), and the parameters: defaults,
 * "k=v" parsing and validation with errors that name the accepted range.
 *
 * Tolerances: docs/harness.md ("Tolerances") gives the reasoning for every
 * number; in short, rtol is about four unit roundoffs of the output dtype,
 * atol a floor for outputs that cancel to near zero, and the L2 limits are the
 * issue's attention numbers (1e-5 f32, 5e-3 f16, 1e-2 bf16) for every op. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "harness/harness_internal.h"
#include "harness/op_convert.h"
#include "harness/op_fp8_gemm.h"
#include "harness/op_kernels.h"
#include "harness/op_rmsnorm.h"
#include "harness/op_softmax.h"
#include "harness/op_layernorm.h"
#include "harness/op_rope.h"
#include "harness/op_nvfp4_gemm.h"
#include "harness/op_attention_varlen.h"

/* Caps that keep every tensor's element count below 2^63 (the largest, an NVFP4
 * a [L,M,K], is at most 2^12 * 2^24 * 2^24 = 2^60). */
#define DIM_MAX (INT64_C(1) << 24)
#define SEQ_MAX (INT64_C(1) << 20)
/* Room for one parameter's value as text: a LIST of KK_OP_LIST_MAX values. */
#define KK__PARAM_TEXT_MAX 1024

#define P_INT(nm, lo, hi, mul, d, h)                                           \
  {                                                                            \
    .name = nm, .kind = KK_PARAM_INT, .min = lo, .max = hi, .multiple = mul,   \
    .def = d, .help = h                                                        \
  }
#define P_BOOL(nm, d, h)                                                       \
  { .name = nm, .kind = KK_PARAM_BOOL, .min = 0, .max = 1, .def = d, .help = h }
#define P_ENUM(nm, ch, d, h)                                                   \
  { .name = nm, .kind = KK_PARAM_ENUM, .choices = ch, .def = d, .help = h }
#define P_DTYPE(nm, ch, d, h)                                                  \
  { .name = nm, .kind = KK_PARAM_DTYPE, .choices = ch, .def = d, .help = h }
#define P_FLOAT(nm, lo, hi, d, h)                                              \
  {                                                                            \
    .name = nm, .kind = KK_PARAM_FLOAT, .fmin = lo, .fmax = hi, .fdef = d,     \
    .help = h                                                                  \
  }

#define BOTH (KK_CHECK_ELEMENTWISE | KK_CHECK_L2)
#define TOL(dt, a, r, l, crit, fl)                                             \
  { .dtype = dt, .atol = a, .rtol = r, .l2 = l, .criteria = crit, .flags = fl }

static const char *const float_dtypes[] = {"f32", "f16", "bf16", NULL};
static const char *const activations[] = {
    "none", "relu", "gelu_erf", "gelu_tanh", "silu", "swiglu", NULL};
static const char *const scale_layouts[] = {"plain", "blocked", NULL};

static const kk_op_param gemm_params[KK__GEMM_NPARAMS] = {
    P_INT("M", 1, DIM_MAX, 1, 256, "rows of a and c"),
    P_INT("N", 1, DIM_MAX, 1, 256, "rows of b, columns of c"),
    P_INT("K", 1, DIM_MAX, 1, 256, "the reduced dimension: columns of a and b"),
    P_DTYPE("dtype", float_dtypes, KK_DTYPE_BF16, "element type of a, b and c"),
};

static const kk_op_param linear_params[KK__LIN_NPARAMS] = {
    P_INT("M", 1, DIM_MAX, 1, 256, "rows of x and y (tokens)"),
    P_INT("N", 1, DIM_MAX, 1, 256, "output features: rows of W"),
    P_INT("K", 1, DIM_MAX, 1, 256, "input features"),
    P_BOOL("bias", 1, "add a bias vector [N] (two for swiglu: gate and up)"),
    P_ENUM("activation", activations, KK__ACT_NONE, "applied after the bias"),
    P_DTYPE("dtype", float_dtypes, KK_DTYPE_BF16,
            "element type of every tensor"),
};

static const kk_op_param attention_params[KK__ATT_NPARAMS] = {
    P_INT("B", 1, 65536, 1, 1, "batch"),
    P_INT("Hq", 1, 1024, 1, 4, "query heads"),
    P_INT("Hkv", 1, 1024, 1, 4, "key/value heads; Hq % Hkv == 0 (GQA)"),
    P_INT("Sq", 1, SEQ_MAX, 1, 128, "query length"),
    P_INT("Sk", 1, SEQ_MAX, 1, 128, "key length"),
    P_INT("D", 16, 256, 1, 64, "head dimension"),
    P_BOOL("causal", 0,
           "query i sees keys j <= i + Sk - Sq (bottom-right aligned)"),
    P_INT("window_left", -1, SEQ_MAX, 1, -1,
          "keys j >= i + Sk - Sq - w only; -1 = unlimited"),
    P_INT("window_right", -1, SEQ_MAX, 1, -1,
          "keys j <= i + Sk - Sq + w only; -1 = unlimited"),
    P_FLOAT("scale", 0.0, 1e6, 0.0, "softmax scale; 0 = 1/sqrt(D)"),
    P_BOOL("lse", 0, "also write the log-sum-exp [B,Hq,Sq] (f32, natural log)"),
    P_DTYPE("dtype", float_dtypes, KK_DTYPE_BF16,
            "element type of q, k, v and o"),
    P_FLOAT("dropout", 0.0, 0.99, 0.0,
            "drop probability of each softmax weight (src/core/philox.h)"),
    P_INT("seed", 0, INT64_MAX, 1, 0, "dropout: Philox key"),
    P_INT("offset", 0, INT64_MAX, 1, 0, "dropout: Philox counter offset"),
};

static const kk_op_param gemv_params[KK__GEMV_NPARAMS] = {
    P_INT("M", 1, DIM_MAX, 1, 128, "rows of a and c"),
    P_INT("K", 64, DIM_MAX, 64, 256, "the reduced dimension, a multiple of 64"),
    P_INT("L", 1, 4096, 1, 1, "batch (outermost)"),
    P_ENUM("scale_layout", scale_layouts, KK__GEMV_PLAIN,
           "plain or cuBLAS 128x4 blocked"),
    P_BOOL("global", 0,
           "f32 global scales ga and gb multiply a's and b's scales"),
};

/* Float ops share one table: see docs/harness.md for each number. */
#define FLOAT_TOLERANCES(fl)                                                   \
  .ntolerances = 3,                                                            \
  .tolerances = {TOL(KK_DTYPE_F32, 1e-4, 1e-4, 1e-5, BOTH, fl),                \
                 TOL(KK_DTYPE_F16, 1e-3, 2e-3, 5e-3, BOTH, fl),                \
                 TOL(KK_DTYPE_BF16, 1e-2, 1.6e-2, 1e-2, BOTH, fl)}

static const kk_op ops[] = {
    {.name = "gemm",
     .summary = "c = a . b^T; a [M,K], b [N,K], c [M,N]",
     .nparams = KK__GEMM_NPARAMS,
     .params = gemm_params,
     .describe = kk__gemm_describe,
     .flops = kk__gemm_flops,
     .bytes = kk__op_bytes_io,
     .reference = kk__gemm_reference,
     FLOAT_TOLERANCES(0),
     .kernels = {[KK_BACKEND_CPU] = kk__gemm_cpu}},
    {.name = "linear",
     .summary =
         "y = act(x . W^T + bias); swiglu: silu(x.Wg^T + bg) * (x.Wu^T + bu)",
     .nparams = KK__LIN_NPARAMS,
     .params = linear_params,
     .describe = kk__linear_describe,
     .flops = kk__linear_flops,
     .bytes = kk__op_bytes_io,
     .reference = kk__linear_reference,
     FLOAT_TOLERANCES(0),
     .kernels = {[KK_BACKEND_CPU] = kk__linear_cpu}},
    /* lse is -inf on fully masked rows, hence ALLOW_NONFINITE. Its f32 row
     * serves the f32 lse of every dtype. Elementwise f32 is tighter than the
     * GEMMs': outputs are averages of V, of magnitude <= max|v|. */
    {.name = "attention",
     .summary =
         "o = softmax(scale . q k^T + mask) v per head; GQA, causal, windows",
     .nparams = KK__ATT_NPARAMS,
     .params = attention_params,
     .validate = kk__attention_validate,
     .describe = kk__attention_describe,
     .flops = kk__attention_flops,
     .bytes = kk__op_bytes_io,
     .reference = kk__attention_reference,
     .ntolerances = 3,
     .tolerances = {TOL(KK_DTYPE_F32, 1e-5, 1e-4, 1e-5, BOTH,
                        KK_CHECK_ALLOW_NONFINITE),
                    TOL(KK_DTYPE_F16, 2e-3, 4e-3, 5e-3, BOTH,
                        KK_CHECK_ALLOW_NONFINITE),
                    TOL(KK_DTYPE_BF16, 1e-2, 2e-2, 1e-2, BOTH,
                        KK_CHECK_ALLOW_NONFINITE)},
     .kernels = {[KK_BACKEND_CPU] = kk__attention_cpu,
                 [KK_BACKEND_CUDA] = KK__CUDA_SLOT(kk__attention_cuda)},
     .strided = (1u << KK_BACKEND_CPU) | (1u << KK_BACKEND_CUDA)},
    /* GPU MODE's checker exactly: |out - ref| <= 1e-3 + 1e-3 |ref|, NaN/inf
       must match. */
    {.name = "nvfp4_gemv",
     .summary =
         "c[l,m] = sum_k a*sa*ga * b*sb*gb; e2m1 a [L,M,K], b [L,1,K]; c f16",
     .nparams = KK__GEMV_NPARAMS,
     .params = gemv_params,
     .describe = kk__nvfp4_gemv_describe,
     .flops = kk__nvfp4_gemv_flops,
     .bytes = kk__nvfp4_gemv_bytes,
     .reference = kk__nvfp4_gemv_reference,
     .ntolerances = 1,
     .tolerances = {TOL(KK_DTYPE_F16, 1e-3, 1e-3, 0.0, KK_CHECK_ELEMENTWISE,
                        KK_CHECK_ALLOW_NONFINITE)},
     .kernels = {[KK_BACKEND_CPU] = kk__nvfp4_gemv_cpu,
                 [KK_BACKEND_CUDA] = KK__CUDA_SLOT(kk__nvfp4_gemv_cuda)}},
    KK__CONVERT_ROW, /* src/harness/op_convert.c */
    KK__FP8_GEMM_ROW, /* src/harness/op_fp8_gemm.c */
    KK__RMSNORM_ROW, /* src/harness/op_rmsnorm.c */
    KK__SOFTMAX_ROW, /* src/harness/op_softmax.c */
    KK__LAYERNORM_ROW, /* src/harness/op_layernorm.c */
    KK__ROPE_ROW, /* src/harness/op_rope.c */
    KK__NVFP4_GEMM_ROW, /* src/harness/op_nvfp4_gemm.c */
    KK__ATTENTION_VARLEN_ROW, /* src/harness/op_attention_varlen.c */
};

#define OP_COUNT ((int)(sizeof ops / sizeof ops[0]))

/* ---- lookup ---- */

int kk_op_count(void) { return OP_COUNT; }

const kk_op *kk_op_at(int i) { return i >= 0 && i < OP_COUNT ? &ops[i] : NULL; }

kk_status kk_op_find(const char *name, const kk_op **out) {
  kk_status st = KK__CHECK_NOT_NULL(out);
  if (st != KK_OK)
    return st;
  for (int i = 0; name && i < OP_COUNT; i++)
    if (strcmp(ops[i].name, name) == 0) {
      *out = &ops[i];
      return KK_OK;
    }
  char known[256] = "one of";
  for (int i = 0; i < OP_COUNT; i++)
    snprintf(known + strlen(known), sizeof known - strlen(known), "%s %s",
             i ? "," : "", ops[i].name);
  return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "name", known, "%s",
                       name ? name : "NULL");
}

unsigned kk_op_backends(const kk_op *op) {
  unsigned mask = 0;
  for (int b = 0; op && b < KK_BACKEND_COUNT; b++)
    if (op->kernels[b])
      mask |= 1u << b;
  return mask;
}

int kk_op_param_index(const kk_op *op, const char *name) {
  for (int i = 0; op && name && i < op->nparams; i++)
    if (strcmp(op->params[i].name, name) == 0)
      return i;
  return -1;
}

kk_status kk_op_tolerance(const kk_op *op, kk_dtype dtype, kk_tolerance *out) {
  kk_status st = KK__CHECK_NOT_NULL(op);
  if (st == KK_OK)
    st = KK__CHECK_NOT_NULL(out);
  if (st != KK_OK)
    return st;
  for (int i = 0; i < op->ntolerances; i++)
    if (op->tolerances[i].dtype == dtype) {
      *out = op->tolerances[i];
      return KK_OK;
    }
  return kk__arg_error(KK_ERR_UNSUPPORTED, op->name, "dtype",
                       "a dtype this op writes", "%s", kk_dtype_name(dtype));
}

/* ---- what an op does ---- */

int kk__tensor(kk_op_tensor *t, const char *name, kk_dtype dtype, int is_output,
               int ndim, const int64_t *shape) {
  memset(t, 0, sizeof *t);
  t->name = name;
  t->dtype = dtype;
  t->is_output = is_output;
  t->ndim = ndim;
  t->numel = 1;
  for (int d = 0; d < ndim; d++) {
    t->shape[d] = shape[d];
    t->numel *= shape[d];
  }
  return 1;
}

double kk__op_bytes_io(const kk_op_params *p) {
  kk_op_tensor t[KK_OP_MAX_TENSORS];
  const int n = p->op->describe(p, t);
  double bytes = 0.0;
  for (int i = 0; i < n; i++)
    bytes += (double)t[i].numel * kk_dtype_bits(t[i].dtype) / 8.0;
  return bytes;
}

kk_status kk_op_tensors(const kk_op_params *p, kk_op_tensor *out, int *count) {
  kk_status st = KK__CHECK_NOT_NULL(out);
  if (st == KK_OK)
    st = KK__CHECK_NOT_NULL(count);
  if (st == KK_OK)
    st = kk_op_params_validate(p);
  if (st != KK_OK)
    return st;
  *count = p->op->describe(p, out);
  return KK_OK;
}

double kk_op_flops(const kk_op_params *p) {
  return kk_op_params_validate(p) == KK_OK ? p->op->flops(p) : (double)NAN;
}

double kk_op_bytes(const kk_op_params *p) {
  return kk_op_params_validate(p) == KK_OK ? p->op->bytes(p) : (double)NAN;
}

kk_status kk_op_reference(const kk_op_params *p, const double *const *inputs,
                          double *const *outputs) {
  kk_status st = kk_op_params_validate(p);
  if (st == KK_OK)
    st = KK__CHECK_NOT_NULL(inputs);
  if (st == KK_OK)
    st = KK__CHECK_NOT_NULL(outputs);
  return st == KK_OK ? p->op->reference(p, inputs, outputs) : st;
}

/* ---- parameters ---- */

static int count_choices(const char *const *choices) {
  int n = 0;
  while (choices && choices[n])
    n++;
  return n;
}

static int dtype_allowed(const kk_op_param *d, int64_t v) {
  if (v < 0 || v >= KK_DTYPE_COUNT)
    return 0;
  for (int c = 0; d->choices && d->choices[c]; c++)
    if (strcmp(d->choices[c], kk_dtype_name((kk_dtype)v)) == 0)
      return 1;
  return 0;
}

static int in_range(const kk_op_param *d, int64_t v, double f) {
  switch (d->kind) {
  case KK_PARAM_INT:
    return v >= d->min && v <= d->max &&
           (d->multiple <= 1 || v % d->multiple == 0);
  case KK_PARAM_FLOAT:
    return isfinite(f) && f >= d->fmin && f <= d->fmax;
  case KK_PARAM_BOOL:
    return v == 0 || v == 1;
  case KK_PARAM_ENUM:
    return v >= 0 && v < count_choices(d->choices);
  case KK_PARAM_DTYPE:
    return dtype_allowed(d, v);
  case KK_PARAM_LIST: /* the count; the values: list_in_range */
    return v >= 0 && v <= KK_OP_LIST_MAX;
  }
  return 0;
}

/* Which of p->lists holds LIST parameter idx: the LIST parameters before it. */
static int list_slot(const kk_op *op, int idx) {
  int n = 0;
  for (int k = 0; k < idx; k++)
    n += op->params[k].kind == KK_PARAM_LIST;
  return n;
}

/* Index of the first value of LIST parameter idx outside [min, max], -1 when
 * none. */
static int list_bad_value(const kk_op_params *p, int idx) {
  const kk_op_param *d = &p->op->params[idx];
  const int slot = list_slot(p->op, idx);
  for (int k = 0; slot < KK_OP_MAX_LISTS && k < p->i[idx]; k++)
    if (p->lists[slot][k] < d->min || p->lists[slot][k] > d->max)
      return k;
  return -1;
}

/* What an error says would have been accepted: "16..256", "one of f32, f16,
 * bf16". */
static void expected_text(const kk_op_param *d, char *buf, size_t size) {
  switch (d->kind) {
  case KK_PARAM_INT:
    if (d->multiple > 1)
      snprintf(buf, size, "a multiple of %lld in %lld..%lld",
               (long long)d->multiple, (long long)d->min, (long long)d->max);
    else
      snprintf(buf, size, "%lld..%lld", (long long)d->min, (long long)d->max);
    return;
  case KK_PARAM_FLOAT:
    snprintf(buf, size, "a number in %g..%g", d->fmin, d->fmax);
    return;
  case KK_PARAM_BOOL:
    snprintf(buf, size, "0 or 1 (or true/false, yes/no, on/off)");
    return;
  case KK_PARAM_LIST:
    snprintf(buf, size,
             "up to %d integers in %lld..%lld separated by ':' (none: the empty list)",
             KK_OP_LIST_MAX, (long long)d->min, (long long)d->max);
    return;
  default:
    break;
  }
  snprintf(buf, size, "one of");
  for (int c = 0; d->choices && d->choices[c]; c++)
    snprintf(buf + strlen(buf), size - strlen(buf), "%s %s", c ? "," : "",
             d->choices[c]);
}

static kk_status range_error(const kk_op *op, const kk_op_param *d,
                             const char *value) {
  char expected[256];
  expected_text(d, expected, sizeof expected);
  return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op->name, d->name, expected,
                       "%s", value);
}

static int parse_bool(const char *s, int64_t *v) {
  static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {
                                                                   "0", "false",
                                                                   "no", "off"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0)
      return (*v = 1), 1;
    if (strcasecmp(s, no[i]) == 0)
      return (*v = 0), 1;
  }
  return 0;
}

/* Text to a value of kind d->kind; 0 when the text is not one (no range check).
 */
static int parse_value(const kk_op_param *d, const char *s, int64_t *v,
                       double *f) {
  char *end = NULL;
  errno = 0;
  switch (d->kind) {
  case KK_PARAM_INT:
    *v = strtoll(s, &end, 10);
    break;
  case KK_PARAM_FLOAT:
    *f = strtod(s, &end);
    break;
  case KK_PARAM_BOOL:
    return parse_bool(s, v);
  case KK_PARAM_ENUM:
    for (int c = 0; d->choices && d->choices[c]; c++)
      if (strcasecmp(d->choices[c], s) == 0)
        return (*v = c), 1;
    return 0;
  case KK_PARAM_DTYPE: {
    kk_dtype dt;
    if (kk_dtype_parse(s, &dt) != KK_OK)
      return 0;
    *v = dt;
    return 1;
  }
  case KK_PARAM_LIST: /* parse_list */
    return 0;
  }
  return end != s && *end == '\0' && errno == 0;
}

/* "5:0:17" (or "none" or "" for the empty list) into values[]; the count in
 * *n. 0 when the text is not such a list, a value is out of [min, max] or
 * there are more than KK_OP_LIST_MAX. */
static int parse_list(const kk_op_param *d, const char *s, int32_t *values,
                      int64_t *n) {
  *n = 0;
  if (*s == '\0' || strcasecmp(s, "none") == 0)
    return 1;
  for (;;) {
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (end == s || errno != 0 || v < d->min || v > d->max ||
        *n == KK_OP_LIST_MAX || (*end != ':' && *end != '\0'))
      return 0;
    values[(*n)++] = (int32_t)v;
    if (*end == '\0')
      return 1;
    s = end + 1;
  }
}

kk_status kk_op_params_init(const kk_op *op, kk_op_params *p) {
  kk_status st = KK__CHECK_NOT_NULL(op);
  if (st == KK_OK)
    st = KK__CHECK_NOT_NULL(p);
  if (st != KK_OK)
    return st;
  memset(p, 0, sizeof *p);
  p->op = op;
  for (int i = 0; i < op->nparams; i++) {
    p->i[i] = op->params[i].def;
    p->f[i] = op->params[i].fdef;
    if (op->params[i].kind == KK_PARAM_LIST && op->params[i].def_list) {
      const int slot = list_slot(op, i);
      if (slot >= KK_OP_MAX_LISTS ||
          !parse_list(&op->params[i], op->params[i].def_list, p->lists[slot], &p->i[i]))
        return range_error(op, &op->params[i], op->params[i].def_list);
    }
  }
  return KK_OK;
}

kk_status kk_op_params_set(kk_op_params *p, const char *name,
                           const char *value) {
  kk_status st = KK__CHECK_NOT_NULL(p);
  if (st == KK_OK)
    st = KK__CHECK_NOT_NULL(name);
  if (st == KK_OK)
    st = KK__CHECK_NOT_NULL(value);
  if (st == KK_OK)
    st = KK__CHECK_NOT_NULL(p->op);
  if (st != KK_OK)
    return st;
  const int idx = kk_op_param_index(p->op, name);
  if (idx < 0) {
    char known[256] = "a parameter of";
    for (int i = 0; i < p->op->nparams; i++)
      snprintf(known + strlen(known), sizeof known - strlen(known), "%s %s",
               i ? "," : "", p->op->params[i].name);
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, p->op->name, name, known,
                         "%s", value);
  }
  const kk_op_param *d = &p->op->params[idx];
  int64_t v = 0;
  double f = 0.0;
  if (d->kind == KK_PARAM_LIST) {
    const int slot = list_slot(p->op, idx);
    int32_t values[KK_OP_LIST_MAX] = {0};
    if (slot >= KK_OP_MAX_LISTS || !parse_list(d, value, values, &v))
      return range_error(p->op, d, value);
    memcpy(p->lists[slot], values, sizeof values); /* zeros past the count */
    p->i[idx] = v;
    return KK_OK;
  }
  if (!parse_value(d, value, &v, &f) || !in_range(d, v, f))
    return range_error(p->op, d, value);
  p->i[idx] = v;
  p->f[idx] = f;
  return KK_OK;
}

static int is_separator(char c) {
  return c == ',' || isspace((unsigned char)c);
}

kk_status kk_op_params_parse(const kk_op *op, const char *text,
                             kk_op_params *p) {
  kk_status st = kk_op_params_init(op, p);
  for (const char *s = text; st == KK_OK && s && *s;) {
    while (*s && is_separator(*s))
      s++;
    const char *end = s;
    while (*end && !is_separator(*end))
      end++;
    if (end == s)
      break;
    const char *eq = memchr(s, '=', (size_t)(end - s));
    char key[64], value[KK__PARAM_TEXT_MAX];
    if (!eq || eq == s || eq - s >= (long)sizeof key ||
        end - eq > (long)sizeof value)
      return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op->name, "parameter",
                           "key=value, e.g. M=128", "%.*s", (int)(end - s), s);
    snprintf(key, sizeof key, "%.*s", (int)(eq - s), s);
    snprintf(value, sizeof value, "%.*s", (int)(end - eq - 1), eq + 1);
    st = kk_op_params_set(p, key, value);
    s = end;
  }
  return st == KK_OK ? kk_op_params_validate(p) : st;
}

/* The value of parameter idx as text, as kk_op_params_set reads it. */
static void value_text(const kk_op_params *p, int idx, char *buf, size_t size) {
  const kk_op_param *d = &p->op->params[idx];
  const int64_t v = p->i[idx];
  if (d->kind == KK_PARAM_FLOAT)
    snprintf(buf, size, "%.17g", p->f[idx]);
  else if (d->kind == KK_PARAM_ENUM && v >= 0 && v < count_choices(d->choices))
    snprintf(buf, size, "%s", d->choices[v]);
  else if (d->kind == KK_PARAM_DTYPE && v >= 0 && v < KK_DTYPE_COUNT)
    snprintf(buf, size, "%s", kk_dtype_name((kk_dtype)v));
  else if (d->kind == KK_PARAM_LIST) {
    const int slot = list_slot(p->op, idx);
    snprintf(buf, size, "%s", v > 0 ? "" : "none");
    for (int64_t k = 0; slot < KK_OP_MAX_LISTS && k < v && k < KK_OP_LIST_MAX; k++)
      snprintf(buf + strlen(buf), size - strlen(buf), "%s%d", k ? ":" : "",
               (int)p->lists[slot][k]);
  } else
    snprintf(buf, size, "%lld", (long long)v);
}

kk_status kk_op_params_validate(const kk_op_params *p) {
  kk_status st = KK__CHECK_NOT_NULL(p);
  if (st == KK_OK)
    st = KK__CHECK_NOT_NULL(p->op);
  if (st != KK_OK)
    return st;
  for (int i = 0; i < p->op->nparams; i++) {
    const kk_op_param *d = &p->op->params[i];
    if (!in_range(d, p->i[i], p->f[i]) ||
        (d->kind == KK_PARAM_LIST &&
         (list_slot(p->op, i) >= KK_OP_MAX_LISTS || list_bad_value(p, i) >= 0))) {
      char text[KK__PARAM_TEXT_MAX];
      value_text(p, i, text, sizeof text);
      return range_error(p->op, d, text);
    }
  }
  return p->op->validate ? p->op->validate(p) : KK_OK;
}

int64_t kk_op_params_int(const kk_op_params *p, const char *name) {
  const int idx = p ? kk_op_param_index(p->op, name) : -1;
  if (idx < 0)
    return 0;
  return p->op->params[idx].kind == KK_PARAM_FLOAT ? (int64_t)p->f[idx]
                                                   : p->i[idx];
}

double kk_op_params_float(const kk_op_params *p, const char *name) {
  const int idx = p ? kk_op_param_index(p->op, name) : -1;
  if (idx < 0)
    return 0.0;
  return p->op->params[idx].kind == KK_PARAM_FLOAT ? p->f[idx]
                                                   : (double)p->i[idx];
}

int kk_op_params_list(const kk_op_params *p, const char *name,
                      const int32_t **values) {
  const int idx = p ? kk_op_param_index(p->op, name) : -1;
  if (values)
    *values = NULL;
  if (idx < 0 || p->op->params[idx].kind != KK_PARAM_LIST)
    return 0;
  const int slot = list_slot(p->op, idx);
  if (slot >= KK_OP_MAX_LISTS || p->i[idx] < 0 || p->i[idx] > KK_OP_LIST_MAX)
    return 0;
  if (values)
    *values = p->lists[slot];
  return (int)p->i[idx];
}

kk_status kk_op_params_format(const kk_op_params *p, char *buf, size_t size) {
  kk_status st = KK__CHECK_NOT_NULL(p);
  if (st == KK_OK)
    st = KK__CHECK_NOT_NULL(p->op);
  if (st == KK_OK)
    st = KK__CHECK_NOT_NULL(buf);
  if (st != KK_OK)
    return st;
  size_t used = 0;
  for (int i = 0; i < p->op->nparams; i++) {
    char text[KK__PARAM_TEXT_MAX];
    value_text(p, i, text, sizeof text);
    char *at = used < size ? buf + used : NULL; /* past the end: only count */
    int n = snprintf(at, at ? size - used : 0, "%s%s=%s", i ? " " : "",
                     p->op->params[i].name, text);
    used += (size_t)(n > 0 ? n : 0);
  }
  if (size == 0 || used >= size)
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "size",
                         "room for the whole text", "%zu", size);
  return KK_OK;
}
