/* Size estimation and tensor-core padding for contiguous tensors. */
#include <string.h>

#include "core/error.h"
#include "core/tensor_internal.h"

kk_status kk_tensor_bytes_for(kk_dtype dtype, int ndim, const int64_t *shape, size_t *bytes) {
    kk_status st = KK__CHECK_NOT_NULL(bytes);
    if (st) return st;
    *bytes = 0;
    return kk__check_shape(__func__, dtype, ndim, shape, NULL, bytes);
}

/* cuBLASLt wants every tensor-core operand's rows 16-byte aligned: that is 8
 * elements of 16 bits, 16 of 8 bits and 32 of e2m1 (the FP4 minimum, which is
 * also TMA's 16-byte granule). */
int64_t kk_tensor_pad_multiple(kk_dtype dtype) {
    int bits = kk_dtype_bits(dtype);
    return bits > 0 ? 128 / bits : 0;
}

kk_status kk_tensor_pad_shape(kk_dtype dtype, int ndim, const int64_t *shape, kk_pad_info *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    memset(out, 0, sizeof *out);
    kk_pad_info info;
    memset(&info, 0, sizeof info);
    if ((st = kk__check_shape(__func__, dtype, ndim, shape, NULL, &info.bytes))) return st;
    info.multiple = kk_tensor_pad_multiple(dtype);
    for (int d = 0; d < ndim; d++) {
        int64_t n = shape[d];
        if (d >= ndim - 2 && !kk__mul_i64(kk__ceil_div(n, info.multiple), info.multiple, &n))
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "shape",
                                 "a padded size that fits int64_t", "shape[%d] = %lld", d,
                                 (long long)shape[d]);
        info.padded_shape[d] = n;
    }
    if ((st = kk__check_shape(__func__, dtype, ndim, info.padded_shape, NULL, &info.padded_bytes)))
        return st;
    info.waste_bytes = info.padded_bytes - info.bytes;
    info.waste_percent =
        info.padded_bytes ? 100.0 * (double)info.waste_bytes / (double)info.padded_bytes : 0.0;
    *out = info;
    return KK_OK;
}
