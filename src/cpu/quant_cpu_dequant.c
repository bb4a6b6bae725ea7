/* Dequantization and NVFP4 scale-layout conversion on the CPU. Every layout
 * is read as rows of scale blocks (per-tensor: one block of the whole row);
 * each block's multiplier comes from scale_at, then every element is
 * element * multiplier in f32, rounded to the output dtype. */
#include <string.h>

#include "core/quant_internal.h"
#include "core/quant_math.h"
#include "kernelkit/dtype.h"

static inline void store_y(void *y, kk_dtype dt, int64_t i, float v) {
    switch (dt) {
    case KK_DTYPE_BF16: ((uint16_t *)y)[i] = kk_f32_to_bf16(v); break;
    case KK_DTYPE_F16: ((uint16_t *)y)[i] = kk_f32_to_f16(v); break;
    default: ((float *)y)[i] = v; break;
    }
}

static inline float decode(const kk__quant_job *j, int64_t e) {
    const uint8_t *q = j->q;
    switch (j->q_dtype) {
    case KK_DTYPE_FP8_E4M3: return kk_e4m3_to_f32(q[e]);
    case KK_DTYPE_FP8_E5M2: return kk_e5m2_to_f32(q[e]);
    default: return kk_e2m1_to_f32((uint8_t)(q[e >> 1] >> ((e & 1) * 4)));
    }
}

/* Elements per scale block along a row. */
static int64_t block_width(const kk__quant_job *j) {
    switch (j->layout) {
    case KK_SCALE_PER_TENSOR: return j->k > 0 ? j->k : 1;
    case KK_SCALE_NVFP4:
    case KK_SCALE_NVFP4_BLOCKED: return KK__NVFP4_BLOCK;
    default: return KK__FP8_BLOCK;
    }
}

/* The multiplier of flat row r, block column c. */
static float scale_at(const kk__quant_job *j, int64_t r, int64_t c) {
    const float *fs = j->scales;
    const uint8_t *bs = j->scales;
    const int64_t b = r / j->rows, i = r % j->rows;
    switch (j->layout) {
    case KK_SCALE_PER_TENSOR: return fs[0];
    case KK_SCALE_1X128: return fs[r * j->scale_cols + c];
    case KK_SCALE_128X128: return fs[(b * j->row_blocks + i / 128) * j->scale_cols + c];
    case KK_SCALE_NVFP4:
        return kk__nvfp4_denom(kk_e4m3_to_f32(bs[r * j->scale_cols + c]), *j->global);
    default:
        return kk__nvfp4_denom(
            kk_e4m3_to_f32(bs[kk__nvfp4_blocked_index(j->row_blocks, j->col_blocks, b, i, c)]),
            *j->global);
    }
}

void kk__dequantize_cpu(const kk__quant_job *j) {
    const int64_t w = block_width(j), cols = j->k / w + (j->k % w != 0);
    for (int64_t r = 0; r < j->batch * j->rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const float s = scale_at(j, r, c);
            const int64_t lo = r * j->k + c * w, hi = lo + (j->k - c * w < w ? j->k - c * w : w);
            for (int64_t e = lo; e < hi; e++) store_y(j->x, j->x_dtype, e, kk__dq(decode(j, e), s));
        }
}

void kk__scale_layout_cpu(const kk__scale_layout_job *j) {
    const int64_t atoms = j->batch * j->row_blocks * j->col_blocks;
    if (j->to_blocked) memset(j->dst, 0, (size_t)(atoms * 512));
    for (int64_t l = 0; l < j->batch; l++)
        for (int64_t i = 0; i < j->rows; i++)
            for (int64_t c = 0; c < j->cols; c++) {
                const int64_t p = (l * j->rows + i) * j->cols + c;
                const int64_t b = kk__nvfp4_blocked_index(j->row_blocks, j->col_blocks, l, i, c);
                if (j->to_blocked)
                    j->dst[b] = j->src[p];
                else
                    j->dst[p] = j->src[b];
            }
}
