/* softmax on the CPU: one row per OpenMP iteration, three passes over the row
 * in f32 chunks on the stack (cpu_rows.h): the maximum, the sum of
 * exponentials, then y, so nothing is allocated and y is rounded once. The
 * exponent is (x - max x) * scale, in that order, to keep the error relative.
 * docs/backends/cpu.md, "Norms, softmax, rotary embeddings". */
#include <math.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_rows.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "opdef/softmax.h"

/* e^t for t <= 0 (NaN in, NaN out), within 1 ulp where the result is a
 * normal float; below e^-87 (about 1.6e-38) it returns a value of that
 * size instead of a subnormal. Cody-Waite reduction t = k ln2 + r, |r| <=
 * ln2/2, Cephes' minimax polynomial for e^r, then 2^k from the exponent bits.
 * The clamps and the NaN select work on the bits: float comparisons may trap,
 * and under GCC's default -ftrapping-math they keep the loop from
 * vectorizing. */
KK__ISA_INLINE float exp_nonpositive(float t) {
    const uint32_t u = kk__f32_bits(t);
    uint32_t cu = u > 0xC2AE0000u ? 0xC2AE0000u : u; /* below -87 (and -NaN): -87 */
    cu = cu < 0x80000000u ? 0u : cu;                 /* +0, positive, +NaN: 0 */
    const float c = kk__bits_f32(cu);
    const float k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(c/ln2) */
    const float r = (c - k * 0.693359375f) - k * -2.12194440e-4f;
    float poly = 1.9875691500e-4f;
    poly = poly * r + 1.3981999507e-3f;
    poly = poly * r + 8.3334519073e-3f;
    poly = poly * r + 4.1665795894e-2f;
    poly = poly * r + 1.6666665459e-1f;
    poly = poly * r + 5.0000001201e-1f;
    const float er = poly * r * r + r + 1.0f;
    const float two_k = kk__bits_f32((uint32_t)((int32_t)k + 127) << 23);
    const uint32_t nan = 0u - (uint32_t)((u & 0x7FFFFFFFu) > 0x7F800000u); /* all ones or 0 */
    return kk__bits_f32((nan & u) | (~nan & kk__f32_bits(er * two_k)));
}

/* The row's maximum, taken on order-preserving integer keys of the floats: a
 * float max (x > m ? x : m) is no reduction clang will vectorize without
 * -ffast-math. key = ~bits for negatives, bits | 2^31 otherwise; a +NaN
 * sorts above +inf, so a NaN in the row makes the whole row NaN. */
KK__ISA_INLINE float row_max(const void *x, kk_dtype dt, int64_t row, int64_t n) {
    float buf[KK__ROW_CHUNK];
    uint32_t km = 0; /* below the key of -inf */
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int len = kk__row_chunk(n, at);
        kk__row_load(x, dt, row * n + at, buf, len);
#pragma omp simd reduction(max : km)
        for (int i = 0; i < len; i++) {
            const uint32_t u = kk__f32_bits(buf[i]);
            const uint32_t key = u ^ ((0u - (u >> 31)) | 0x80000000u);
            km = key > km ? key : km;
        }
    }
    return kk__bits_f32(km ^ ((0u - ((km >> 31) ^ 1u)) | 0x80000000u));
}

KK__ISA_INLINE double row_sum_exp(const void *x, kk_dtype dt, int64_t row, int64_t n, float m,
                                  float scale) {
    float buf[KK__ROW_CHUNK];
    double total = 0.0;
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int len = kk__row_chunk(n, at);
        kk__row_load(x, dt, row * n + at, buf, len);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < len; i++) s += exp_nonpositive((buf[i] - m) * scale);
        total += s;
    }
    return total;
}

KK__ISA_INLINE void write_row(const void *x, void *y, kk_dtype dt, int64_t row, int64_t n, float m,
                              float scale, float inv) {
    float buf[KK__ROW_CHUNK];
    for (int64_t at = 0; at < n; at += KK__ROW_CHUNK) {
        const int len = kk__row_chunk(n, at);
        kk__row_load(x, dt, row * n + at, buf, len);
#pragma omp simd
        for (int i = 0; i < len; i++) buf[i] = exp_nonpositive((buf[i] - m) * scale) * inv;
        kk__row_store(y, dt, row * n + at, buf, len);
    }
}

/* One row: scale >= 0, so the max of x * scale is scale * (max x). */
KK__ISA_INLINE void softmax_row(const void *x, void *y, kk_dtype dt, int64_t n, float scale,
                                int64_t r) {
    const float m = row_max(x, dt, r, n);
    const float inv = (float)(1.0 / row_sum_exp(x, dt, r, n, m, scale));
    write_row(x, y, dt, r, n, m, scale, inv);
}
KK__ISA_CLONES(softmax_row,
               (const void *x, void *y, kk_dtype dt, int64_t n, float scale, int64_t r),
               (x, y, dt, n, scale, r))

kk_status kk__softmax_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    const kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const int64_t rows = p->i[KK__SMX_ROWS], n = p->i[KK__SMX_N];
    const float scale = (float)p->f[KK__SMX_SCALE];
    const kk_dtype dt = (kk_dtype)p->i[KK__SMX_DTYPE];
    const void *x = t[0]->data;
    void *y = t[1]->data;
    void (*const row)(const void *, void *, kk_dtype, int64_t, float, int64_t) =
        KK__ISA_PICK(softmax_row);
#pragma omp parallel for schedule(static) num_threads(kk__cpu_threads())
    for (int64_t r = 0; r < rows; r++) row(x, y, dt, n, scale, r);
    return KK_OK;
}
