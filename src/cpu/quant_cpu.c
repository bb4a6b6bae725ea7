/* Quantization on the CPU. Each layout is one function: the amax of every
 * scale block is found first, then the block is quantized with it (a
 * two-phase pass per block; per-tensor and NVFP4 need the whole tensor's amax
 * first, so they make two passes over the tensor). The arithmetic is
 * src/core/quant_math.h, shared with the CUDA kernels, so both give the same
 * bits. */
#include <string.h>

#include "core/quant_internal.h"
#include "core/quant_math.h"
#include "kernelkit/dtype.h"

static inline float load_x(const void *x, kk_dtype dt, int64_t i) {
    switch (dt) {
    case KK_DTYPE_BF16: return kk_bf16_to_f32(((const uint16_t *)x)[i]);
    case KK_DTYPE_F16: return kk_f16_to_f32(((const uint16_t *)x)[i]);
    default: return ((const float *)x)[i];
    }
}

static inline uint32_t abs_bits(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u & 0x7FFFFFFFu;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float fp8_max(kk_dtype qd) {
    return qd == KK_DTYPE_FP8_E4M3 ? KK__E4M3_MAX : KK__E5M2_MAX;
}

/* max |x| over x[start, start + n) as f32 bits (inf/NaN sort above finite). */
static uint32_t amax_range(const kk__quant_job *j, int64_t start, int64_t n) {
    uint32_t m = 0;
    for (int64_t i = start; i < start + n; i++) {
        uint32_t a = abs_bits(load_x(j->x, j->x_dtype, i));
        m = a > m ? a : m;
    }
    return m;
}

static void quantize_fp8_range(const kk__quant_job *j, int64_t start, int64_t n, float scale) {
    uint8_t *q = j->q;
    const int e4m3 = j->q_dtype == KK_DTYPE_FP8_E4M3;
    for (int64_t i = start; i < start + n; i++) {
        float r = kk__q_ratio(load_x(j->x, j->x_dtype, i), scale);
        q[i] = e4m3 ? kk_f32_to_e4m3(r) : kk_f32_to_e5m2(r);
    }
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static void per_tensor(kk__quant_job *j) {
    const int64_t n = j->batch * j->rows * j->k;
    j->amax_bits = amax_range(j, 0, n);
    float s =
        j->given_scale ? j->scale : kk__fp8_scale(bits_f32(j->amax_bits), fp8_max(j->q_dtype));
    ((float *)j->scales)[0] = s;
    quantize_fp8_range(j, 0, n, s);
}

static void per_1x128(kk__quant_job *j) {
    float *scales = j->scales;
    uint32_t all = 0;
    for (int64_t r = 0; r < j->batch * j->rows; r++)
        for (int64_t c = 0; c < j->scale_cols; c++) {
            const int64_t lo = r * j->k + c * KK__FP8_BLOCK;
            const int64_t len = min64(KK__FP8_BLOCK, j->k - c * KK__FP8_BLOCK);
            uint32_t m = amax_range(j, lo, len);
            all = m > all ? m : all;
            float s = kk__fp8_scale(bits_f32(m), fp8_max(j->q_dtype));
            scales[r * j->scale_cols + c] = s;
            quantize_fp8_range(j, lo, len, s);
        }
    j->amax_bits = all;
}

/* One 128x128 tile of matrix b: rows [i0, i1), columns [c0, c0 + len). */
static uint32_t tile_amax(const kk__quant_job *j, int64_t b, int64_t i0, int64_t i1, int64_t c0,
                          int64_t len) {
    uint32_t m = 0;
    for (int64_t i = i0; i < i1; i++) {
        uint32_t a = amax_range(j, (b * j->rows + i) * j->k + c0, len);
        m = a > m ? a : m;
    }
    return m;
}

static void per_128x128(kk__quant_job *j) {
    float *scales = j->scales;
    uint32_t all = 0;
    for (int64_t b = 0; b < j->batch; b++)
        for (int64_t rb = 0; rb < j->row_blocks; rb++)
            for (int64_t c = 0; c < j->scale_cols; c++) {
                const int64_t i0 = rb * 128, i1 = min64(j->rows, i0 + 128);
                const int64_t c0 = c * KK__FP8_BLOCK, len = min64(KK__FP8_BLOCK, j->k - c0);
                uint32_t m = tile_amax(j, b, i0, i1, c0, len);
                all = m > all ? m : all;
                float s = kk__fp8_scale(bits_f32(m), fp8_max(j->q_dtype));
                scales[(b * j->row_blocks + rb) * j->scale_cols + c] = s;
                for (int64_t i = i0; i < i1; i++)
                    quantize_fp8_range(j, (b * j->rows + i) * j->k + c0, len, s);
            }
    j->amax_bits = all;
}

/* Index of the scale of (flat row r, scale column c) in either NVFP4 layout. */
static int64_t nvfp4_scale_index(const kk__quant_job *j, int64_t r, int64_t c) {
    if (j->layout == KK_SCALE_NVFP4) return r * j->scale_cols + c;
    return kk__nvfp4_blocked_index(j->row_blocks, j->col_blocks, r / j->rows, r % j->rows, c);
}

static void nvfp4(kk__quant_job *j) {
    const int64_t n = j->batch * j->rows * j->k;
    uint8_t *q = j->q, *scales = j->scales;
    j->amax_bits = amax_range(j, 0, n);
    const float g = kk__nvfp4_global(bits_f32(j->amax_bits));
    *j->global = g;
    memset(q, 0, (size_t)(n / 2 + n % 2)); /* the odd tail's high nibble stays 0 */
    if (j->layout == KK_SCALE_NVFP4_BLOCKED) memset(scales, 0, (size_t)j->scale_count);
    for (int64_t r = 0; r < j->batch * j->rows; r++)
        for (int64_t c = 0; c < j->scale_cols; c++) {
            const int64_t lo = r * j->k + c * KK__NVFP4_BLOCK;
            const int64_t len = min64(KK__NVFP4_BLOCK, j->k - c * KK__NVFP4_BLOCK);
            const float bm = bits_f32(amax_range(j, lo, len));
            const uint8_t code =
                kk__nvfp4_fix_scale(kk_f32_to_e4m3(kk__nvfp4_scale_target(bm, g)), bm);
            scales[nvfp4_scale_index(j, r, c)] = code;
            const float d = kk__nvfp4_denom(kk_e4m3_to_f32(code), g);
            for (int64_t e = lo; e < lo + len; e++) {
                unsigned nib = kk_f32_to_e2m1(kk__q_ratio(load_x(j->x, j->x_dtype, e), d)) & 0xFu;
                q[e >> 1] |= (uint8_t)(nib << ((e & 1) * 4));
            }
        }
}

void kk__quantize_cpu(kk__quant_job *job) {
    switch (job->layout) {
    case KK_SCALE_PER_TENSOR: per_tensor(job); break;
    case KK_SCALE_1X128: per_1x128(job); break;
    case KK_SCALE_128X128: per_128x128(job); break;
    default: nvfp4(job); break;
    }
}
