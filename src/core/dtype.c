/* Element types: names, parsing, sizes and ranges. The conversions are in
 * dtype_convert.c; docs/formats.md describes every format. */
#include <float.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "kernelkit/dtype.h"

typedef struct dtype_row {
    const char *name;  /* kk_dtype_name */
    const char *alias; /* the NumPy / PyTorch / ml_dtypes spelling; NULL when none */
    int bits;
    int is_float;
    double max_finite;
} dtype_row;

/* Indexed by kk_dtype. */
static const dtype_row k_dtypes[KK_DTYPE_COUNT] = {
    [KK_DTYPE_F64] = {"f64", "float64", 64, 1, DBL_MAX},
    [KK_DTYPE_F32] = {"f32", "float32", 32, 1, (double)FLT_MAX},
    [KK_DTYPE_F16] = {"f16", "float16", 16, 1, 65504.0},
    /* (2 - 2^-7) * 2^127 */
    [KK_DTYPE_BF16] = {"bf16", "bfloat16", 16, 1, 3.3895313892515355e38},
    [KK_DTYPE_FP8_E4M3] = {"fp8_e4m3", "float8_e4m3fn", 8, 1, 448.0},
    [KK_DTYPE_FP8_E5M2] = {"fp8_e5m2", "float8_e5m2", 8, 1, 57344.0},
    [KK_DTYPE_E2M1] = {"e2m1", "float4_e2m1fn", 4, 1, 6.0},
    [KK_DTYPE_INT8] = {"int8", NULL, 8, 0, 127.0},
    [KK_DTYPE_UINT8] = {"uint8", NULL, 8, 0, 255.0},
    [KK_DTYPE_INT32] = {"int32", NULL, 32, 0, 2147483647.0},
};

static int valid(kk_dtype dtype) { return (int)dtype >= 0 && dtype < KK_DTYPE_COUNT; }

const char *kk_dtype_name(kk_dtype dtype) { return valid(dtype) ? k_dtypes[dtype].name : "?"; }

kk_status kk_dtype_parse(const char *name, kk_dtype *out) {
    kk_status st = KK__CHECK_NOT_NULL(name);
    if (st != KK_OK) return st;
    if ((st = KK__CHECK_NOT_NULL(out)) != KK_OK) return st;
    for (int i = 0; i < KK_DTYPE_COUNT; i++) {
        const dtype_row *r = &k_dtypes[i];
        if (strcasecmp(name, r->name) == 0 || (r->alias && strcasecmp(name, r->alias) == 0)) {
            *out = (kk_dtype)i;
            return KK_OK;
        }
    }
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "name",
                         "one of f64, f32, f16, bf16, fp8_e4m3, fp8_e5m2, e2m1, int8, uint8, "
                         "int32 (or float64, float32, float16, bfloat16, float8_e4m3fn, "
                         "float8_e5m2, float4_e2m1fn)",
                         "\"%.200s\"", name);
}

int kk_dtype_bits(kk_dtype dtype) { return valid(dtype) ? k_dtypes[dtype].bits : 0; }

size_t kk_dtype_bytes(kk_dtype dtype, size_t count) {
    if (!valid(dtype)) return 0;
    int bits = k_dtypes[dtype].bits;
    if (bits == 4) return count / 2 + count % 2; /* no overflow at SIZE_MAX */
    size_t size = (size_t)bits / 8;
    if (count > SIZE_MAX / size) return 0;
    return count * size;
}

int kk_dtype_is_float(kk_dtype dtype) { return valid(dtype) && k_dtypes[dtype].is_float; }

double kk_dtype_max_finite(kk_dtype dtype) {
    return valid(dtype) ? k_dtypes[dtype].max_finite : 0.0;
}
