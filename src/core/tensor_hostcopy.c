/* Element-wise strided copy between two host tensors of the same dtype and
 * shape: an odometer over every dimension but the last, one row at a time. */
#include <string.h>

#include "core/tensor_internal.h"

static inline unsigned get_nibble(const unsigned char *p, int64_t e) {
    return (p[e >> 1] >> ((e & 1) * 4)) & 0xFu;
}

static inline void set_nibble(unsigned char *p, int64_t e, unsigned v) {
    const int shift = (int)(e & 1) * 4;
    p[e >> 1] = (unsigned char)((p[e >> 1] & ~(0xFu << shift)) | (v << shift));
}

static void copy_row_e2m1(unsigned char *d, int64_t doff, const unsigned char *s, int64_t soff,
                          int64_t len) {
    /* Last strides are 1 for e2m1; byte-aligned rows copy whole bytes. */
    if (doff % 2 == 0 && soff % 2 == 0) {
        memcpy(d + doff / 2, s + soff / 2, (size_t)(len / 2));
        if (len % 2) set_nibble(d, doff + len - 1, get_nibble(s, soff + len - 1));
        return;
    }
    for (int64_t i = 0; i < len; i++) set_nibble(d, doff + i, get_nibble(s, soff + i));
}

/* Typed loops so the compiler emits plain loads and stores. */
#define COPY_ROW(T)                                                                                \
    do {                                                                                           \
        T *dp = (T *)dst->data + doff;                                                             \
        const T *sp = (const T *)src->data + soff;                                                 \
        for (int64_t i = 0; i < len; i++) dp[i * ds] = sp[i * ss];                                 \
    } while (0)

static void copy_row(const kk_tensor *dst, int64_t doff, int64_t ds, const kk_tensor *src,
                     int64_t soff, int64_t ss, int64_t len) {
    const int bits = kk_dtype_bits(src->dtype);
    if (bits == 4) {
        copy_row_e2m1(dst->data, doff, src->data, soff, len);
        return;
    }
    if (ds == 1 && ss == 1) {
        memcpy((char *)dst->data + doff * (bits / 8), (const char *)src->data + soff * (bits / 8),
               (size_t)len * (size_t)(bits / 8));
        return;
    }
    switch (bits) {
    case 8: COPY_ROW(uint8_t); break;
    case 16: COPY_ROW(uint16_t); break;
    case 32: COPY_ROW(uint32_t); break;
    default: COPY_ROW(uint64_t); break;
    }
}

void kk__host_strided_copy(const kk_tensor *dst, const kk_tensor *src) {
    if (kk_tensor_numel(src) == 0) return;
    if (src->ndim == 0) {
        copy_row(dst, 0, 1, src, 0, 1, 1);
        return;
    }
    const int last = src->ndim - 1;
    const int64_t len = src->shape[last];
    const int64_t rows = kk_tensor_numel(src) / len;
    int64_t idx[KK_TENSOR_MAX_DIMS] = {0}, doff = 0, soff = 0;
    for (int64_t r = 0; r < rows; r++) {
        copy_row(dst, doff, dst->strides[last], src, soff, src->strides[last], len);
        for (int d = last - 1; d >= 0; d--) { /* advance the odometer */
            doff += dst->strides[d];
            soff += src->strides[d];
            if (++idx[d] < src->shape[d]) break;
            doff -= src->shape[d] * dst->strides[d];
            soff -= src->shape[d] * src->strides[d];
            idx[d] = 0;
        }
    }
}
