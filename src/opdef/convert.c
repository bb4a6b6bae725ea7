/* The `convert` op: its parameters, tensors, work counts, reference and its
 * kernels' contract (the CPU's is kk_convert_host, CUDA's kk__cuda_convert).
 * The reference rounds each value with the library's own conversion, so it is
 * the expected output and the tolerance is exact. docs/formats.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "opdef/opdef.h"
#include "opdef/convert.h"

static const char *const cvt_dtypes[] = {"f64",      "f32",      "f16",  "bf16",
                                         "fp8_e4m3", "fp8_e5m2", "e2m1", NULL};

/* n caps at 2^34 elements (128 GiB as f64): far beyond any device, and no
 * byte count of it overflows. */
const kk_op_param kk__convert_params[KK__CVT_NPARAMS] = {
    [KK__CVT_N] = {.name = "n",
                   .kind = KK_PARAM_INT,
                   .min = 1,
                   .max = INT64_C(1) << 34,
                   .def = 4096,
                   .help = "elements"},
    [KK__CVT_SRC] = {.name = "src",
                     .kind = KK_PARAM_DTYPE,
                     .choices = cvt_dtypes,
                     .def = KK_DTYPE_F32,
                     .help = "element type of x"},
    [KK__CVT_DST] = {.name = "dst",
                     .kind = KK_PARAM_DTYPE,
                     .choices = cvt_dtypes,
                     .def = KK_DTYPE_BF16,
                     .help = "element type of y"},
};

int kk__convert_describe(const kk_op_params *p, kk_op_tensor *out) {
    const int64_t shape[1] = {p->i[KK__CVT_N]};
    int n = kk__tensor(&out[0], "x", (kk_dtype)p->i[KK__CVT_SRC], 0, 1, shape);
    n += kk__tensor(&out[1], "y", (kk_dtype)p->i[KK__CVT_DST], 1, 1, shape);
    return n;
}

/* A conversion does no arithmetic worth counting: its speed is its bytes. */
double kk__convert_flops(const kk_op_params *p) {
    (void)p;
    return 0.0;
}

/* Whole bytes, as they move: an odd e2m1 count still moves its last byte. */
double kk__convert_bytes(const kk_op_params *p) {
    const size_t n = (size_t)p->i[KK__CVT_N];
    return (double)kk_dtype_bytes((kk_dtype)p->i[KK__CVT_SRC], n) +
           (double)kk_dtype_bytes((kk_dtype)p->i[KK__CVT_DST], n);
}

kk_status kk__convert_reference(const kk_op_params *p, const double *const *in,
                                double *const *out) {
    const size_t n = (size_t)p->i[KK__CVT_N];
    const kk_dtype dst = (kk_dtype)p->i[KK__CVT_DST];
    /* src == dst is a copy in kk_convert_host: an e5m2 infinity stays one
   * (rounding it would saturate it to 57344). */
    if (dst == (kk_dtype)p->i[KK__CVT_SRC]) {
        memcpy(out[0], in[0], n * sizeof(double));
        return KK_OK;
    }
    void *tmp = malloc(kk_dtype_bytes(dst, n));
    if (!tmp)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "convert", "no host memory for %zu elements", n);
    kk_status st = kk_convert_host(in[0], KK_DTYPE_F64, tmp, dst, n);
    if (st == KK_OK) st = kk_convert_host(tmp, dst, out[0], KK_DTYPE_F64, n);
    free(tmp);
    return st;
}

/* The tensors a kernel gets must be what the parameters describe, on the
 * kernel's own backend: a harness bug must not turn into a wild write. */
kk_status kk__convert_check_tensors(const kk_op_params *p, kk_tensor *const *t,
                                    kk_backend_kind kind) {
    kk_op_tensor d[2];
    kk__convert_describe(p, d);
    for (int k = 0; k < 2; k++) {
        if (!t || !t[k] || t[k]->dtype != d[k].dtype || kk_tensor_numel(t[k]) != d[k].numel ||
            !kk_tensor_is_contiguous(t[k]) || t[k]->device_kind != kind)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "convert", d[k].name,
                                 "a contiguous tensor of the described dtype and size on the "
                                 "kernel's backend",
                                 "%s", t && t[k] ? t[k]->device : "NULL");
    }
    return KK_OK;
}

/* Longer vectors than the generic draw. */
static void fuzz(kk__rng *r, kk_op_params *p, int big) {
    (void)big;
    kk__fuzz_set_int(p, "n", kk__fuzz_size(r, 5000));
}

/* Every input spread over the dtype's range, a quarter of it random bits. */
static kk__fill_rule fill(const kk_op_params *p, int k) {
    (void)p;
    (void)k;
    return (kk__fill_rule){KK__FILL_SPREAD, 0};
}

const kk_op kk__op_convert = {
    .id = KK__OP_ID_convert,
    .name = "convert",
    .summary = "y = x converted from src to dst (kk_convert_host's rounding); x, y [n]",
    .nparams = KK__CVT_NPARAMS,
    .params = kk__convert_params,
    .describe = kk__convert_describe,
    .flops = kk__convert_flops,
    .bytes = kk__convert_bytes,
    .reference = kk__convert_reference,
    .ntolerances = 7,
    .tolerances = {KK__CVT_TOL(KK_DTYPE_F64), KK__CVT_TOL(KK_DTYPE_F32), KK__CVT_TOL(KK_DTYPE_F16),
                   KK__CVT_TOL(KK_DTYPE_BF16), KK__CVT_TOL(KK_DTYPE_FP8_E4M3),
                   KK__CVT_TOL(KK_DTYPE_FP8_E5M2), KK__CVT_TOL(KK_DTYPE_E2M1)},
    .fuzz = fuzz,
    .grow_param = "n",
    .fill = fill,
};
