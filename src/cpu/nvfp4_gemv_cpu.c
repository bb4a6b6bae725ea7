/* nvfp4_gemv on the CPU, the twin of src/cuda/kernels/nvfp4_gemv.cu: every
 * block's 16-term dot product (and its product with sa*sb) is exact in f32,
 * so the only roundings are the GPU's and the two differ only in the order of
 * the f32 sum over blocks. a's bytes are decoded with vectorized bit
 * arithmetic (SSE2 and AVX2, picked at run time). docs/kernels/nvfp4_gemv.md,
 * "The CPU twin". */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/quant_math.h"
#include "core/threads.h"
#include "cpu/cpu_isa.h"
#include "cpu/cpu_kernels.h"
#include "opdef/nvfp4_gemv.h"
#include "kernelkit/dtype.h"

#define BLOCK 16 /* elements per scale */

/* e4m3 -> f32 for the scales: built once, thread-safely. */
static float e4m3_table[256];
static pthread_once_t e4m3_once = PTHREAD_ONCE_INIT;

static void build_e4m3_table(void) {
    for (int c = 0; c < 256; c++) e4m3_table[c] = kk_e4m3_to_f32((uint8_t)c);
}

/* e2m1 code (low 4 bits of c) -> f32, with integer ops that vectorize: the
 * code's 3 magnitude bits placed at f32 bit 22 give exponent e and mantissa m,
 * and adding 126 to the exponent gives 2^(e-1) * (1 + m/2), the value of every
 * normal code (e >= 1); codes 0 and 1 (0 and 0.5) are m/2. Equal to
 * kk_e2m1_to_f32 for all 16 codes (tests/test_nvfp4_gemv.c). */
static inline float e2m1_decode(uint32_t c) {
    const uint32_t mag = c & 7u;
    uint32_t bits = (mag << 22) + (126u << 23);
    bits = mag < 2u ? (0u - mag) & 0x3F000000u : bits; /* 0 -> 0.0f, 1 -> 0.5f */
    bits |= (c & 8u) << 28;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* For tests/test_nvfp4_gemv.c, which compares it with kk_e2m1_to_f32. */
float kk__nvfp4_e2m1_decode_cpu(uint32_t code);
float kk__nvfp4_e2m1_decode_cpu(uint32_t code) { return e2m1_decode(code); }

/* The tensors must be what the parameters describe, on `kind`: kk_op_run has
 * checked them, so this only stops a harness bug from becoming a wild read.
 * Shared with the CUDA slot (src/cuda/kernels/nvfp4_gemv.cu). */
kk_status kk__nvfp4_gemv_check(const kk_op_params *p, kk_tensor *const *t, kk_backend_kind kind);
kk_status kk__nvfp4_gemv_check(const kk_op_params *p, kk_tensor *const *t, kk_backend_kind kind) {
    kk_op_tensor d[KK_OP_MAX_TENSORS];
    if (!p || !p->op)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "nvfp4_gemv", "p", "parameters of nvfp4_gemv",
                             "NULL");
    const int n = kk__nvfp4_gemv_describe(p, d);
    for (int k = 0; k < n; k++)
        if (!t || !t[k] || t[k]->dtype != d[k].dtype || kk_tensor_numel(t[k]) != d[k].numel ||
            !kk_tensor_is_contiguous(t[k]) || t[k]->device_kind != kind)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "nvfp4_gemv", d[k].name,
                                 "a contiguous tensor of the described dtype and size on the "
                                 "kernel's backend",
                                 "%s", t && t[k] ? t[k]->device : "NULL");
    return KK_OK;
}

#define CHUNK_BLOCKS 32 /* blocks decoded per vector loop: 256 bytes of a, 1 KiB of stack */
#define TILE_BLOCKS 128 /* blocks of K per tile: 2048 elements, 8 KiB of decoded b */
#define GROUP_ROWS 8    /* rows that share a tile of b */
#define SLAB_FLOATS ((int64_t)1 << 24) /* decoded b of several batches: up to 64 MiB */

/* Offset of scale column j in a row's scales: plain rows are contiguous; a
 * blocked row has its 4 columns of each 512-byte atom side by side. */
static inline int64_t scale_col(int blocked, int64_t j) {
    return blocked ? (j >> 2) * 512 + (j & 3) : j;
}

/* Where row m of batch l of a matrix of `rows` rows starts in its scales. */
static int64_t scale_row(int blocked, int64_t rows, int64_t C, int64_t l, int64_t m) {
    if (!blocked) return (l * rows + m) * C;
    return kk__nvfp4_blocked_index((rows + 127) / 128, (C + 3) / 4, l, m, 0);
}

/* Blocks [j0, j0 + n) of one row into its four partial sums (acc[j % 4], for
 * ILP and a shorter rounding chain). Per chunk of blocks one vector loop
 * decodes and multiplies (each byte's two products added: exact), then each
 * block's 8 sums are added (exact) and multiplied by the block's scale product
 * once. */
static inline __attribute__((always_inline)) void
row_blocks_body(const uint8_t *restrict a, const uint8_t *restrict sa, int blocked, int64_t j0,
                int64_t n, const float *restrict be, const float *restrict bo,
                const float *restrict sbf, float acc[4]) {
    float prod[CHUNK_BLOCKS * BLOCK / 2], dot[CHUNK_BLOCKS];
    for (int64_t j1 = j0; j1 < j0 + n; j1 += CHUNK_BLOCKS) {
        const int nb = j0 + n - j1 < CHUNK_BLOCKS ? (int)(j0 + n - j1) : CHUNK_BLOCKS;
        const uint8_t *restrict ac = a + j1 * (BLOCK / 2);
        const float *restrict bec = be + j1 * (BLOCK / 2), *restrict boc = bo + j1 * (BLOCK / 2);
#pragma omp simd
        for (int i = 0; i < nb * (BLOCK / 2); i++)
            prod[i] = e2m1_decode(ac[i]) * bec[i] + e2m1_decode((uint32_t)ac[i] >> 4) * boc[i];
#pragma omp simd
        for (int jb = 0; jb < nb; jb++) {
            const float *q = prod + jb * (BLOCK / 2);
            dot[jb] = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
        }
        for (int jb = 0; jb < nb; jb++) {
            const int64_t j = j1 + jb;
            acc[j & 3] += dot[jb] * (e4m3_table[sa[scale_col(blocked, j)]] * sbf[j]);
        }
    }
}

typedef void (*row_blocks_fn)(const uint8_t *, const uint8_t *, int, int64_t, int64_t,
                              const float *, const float *, const float *, float *);

/* The same loops compiled three times: for the baseline (SSE2), AVX2 and
 * AVX-512, picked at run time by kk__cpu_isa() (KK_CPU_ISA caps it). Every sum
 * they make is exact (see the top), so all give the same bits. */
static void row_blocks_sse2(const uint8_t *a, const uint8_t *sa, int blocked, int64_t j0, int64_t n,
                            const float *be, const float *bo, const float *sbf, float *acc) {
    row_blocks_body(a, sa, blocked, j0, n, be, bo, sbf, acc);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void row_blocks_avx2(const uint8_t *a, const uint8_t *sa,
                                                            int blocked, int64_t j0, int64_t n,
                                                            const float *be, const float *bo,
                                                            const float *sbf, float *acc) {
    row_blocks_body(a, sa, blocked, j0, n, be, bo, sbf, acc);
}
__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma"))) static void
row_blocks_avx512(const uint8_t *a, const uint8_t *sa, int blocked, int64_t j0, int64_t n,
                  const float *be, const float *bo, const float *sbf, float *acc) {
    row_blocks_body(a, sa, blocked, j0, n, be, bo, sbf, acc);
}
#endif

static row_blocks_fn pick_row_blocks(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    const kk__isa isa = kk__cpu_isa();
    if (isa >= KK__ISA_AVX512) return row_blocks_avx512;
    if (isa >= KK__ISA_AVX2) return row_blocks_avx2;
#endif
    return row_blocks_sse2;
}

typedef struct gemv_batch {
    const uint8_t *a;  /* this batch's rows */
    const uint8_t *sa; /* all of sa: scale_row finds a row's scales */
    int64_t M, C, l;
    int blocked;
    const float *be, *bo, *sbf;
    float g;
    uint16_t *c; /* this batch's */
    row_blocks_fn row_blocks;
} gemv_batch;

/* Rows [m0, m0 + nr), nr <= GROUP_ROWS, tile by tile of K, so that the tile of
 * decoded b (be, bo: 8 KiB) stays in L1 while the rows stream past it. */
static void row_group(const gemv_batch *B, int64_t m0, int nr) {
    float acc[GROUP_ROWS][4] = {{0.0f}};
    const int64_t half = B->C * (BLOCK / 2);
    for (int64_t j0 = 0; j0 < B->C; j0 += TILE_BLOCKS) {
        const int64_t n = B->C - j0 < TILE_BLOCKS ? B->C - j0 : TILE_BLOCKS;
        for (int r = 0; r < nr; r++)
            B->row_blocks(B->a + (m0 + r) * half,
                          B->sa + scale_row(B->blocked, B->M, B->C, B->l, m0 + r), B->blocked, j0,
                          n, B->be, B->bo, B->sbf, acc[r]);
    }
    for (int r = 0; r < nr; r++)
        B->c[m0 + r] = kk_f32_to_f16(((acc[r][0] + acc[r][1]) + (acc[r][2] + acc[r][3])) * B->g);
}

kk_status kk__nvfp4_gemv_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    kk_status st = kk__nvfp4_gemv_check(p, t, KK_BACKEND_CPU);
    if (st != KK_OK) return st;
    const int64_t M = p->i[KK__GEMV_M], K = p->i[KK__GEMV_K], L = p->i[KK__GEMV_L];
    const int64_t C = K / BLOCK, half = K / 2;
    const int blocked = p->i[KK__GEMV_LAYOUT] == KK__GEMV_BLOCKED;
    const int global = (int)p->i[KK__GEMV_GLOBAL];
    const uint8_t *a = t[0]->data, *b = t[1]->data, *sa = t[2]->data, *sb = t[3]->data;
    const float g = global ? *(const float *)t[4]->data * *(const float *)t[5]->data : 1.0f;
    uint16_t *c = t[global ? 6 : 4]->data;
    pthread_once(&e4m3_once, build_e4m3_table);
    const row_blocks_fn row_blocks = pick_row_blocks();

    /* Decoded b of a slab of batches (even elements, odd elements, scales: K + C
     * floats a batch), shared by every row; rows of all the slab's batches are
     * then spread over the threads together, so small M with many batches
     * still keeps every thread busy. */
    const int64_t per_batch = K + C;
    const int64_t slab = L < SLAB_FLOATS / per_batch   ? L
                         : SLAB_FLOATS / per_batch > 1 ? SLAB_FLOATS / per_batch
                                                       : 1;
    float *bdec = malloc((size_t)(slab * per_batch) * sizeof(float));
    if (!bdec)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "nvfp4_gemv",
                         "no host memory for decoded b (%lld floats)",
                         (long long)(slab * per_batch));
    /* rows per task: up to GROUP_ROWS, fewer when there are few rows, so every
     * thread has work */
    const int threads = kk__cpu_threads();
    const int64_t per_thread = M * slab / (4 * (int64_t)threads);
    const int rows = per_thread < 1 ? 1 : per_thread > GROUP_ROWS ? GROUP_ROWS : (int)per_thread;
    const int64_t groups = (M + rows - 1) / rows; /* per batch */
#pragma omp parallel num_threads(threads)
    for (int64_t l0 = 0; l0 < L; l0 += slab) {
        const int64_t nl = L - l0 < slab ? L - l0 : slab;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < nl * half; i++) {
            const int64_t ll = i / half, k2 = i % half;
            const uint8_t code = b[(l0 + ll) * half + k2];
            bdec[ll * per_batch + k2] = e2m1_decode(code);
            bdec[ll * per_batch + half + k2] = e2m1_decode((uint32_t)code >> 4);
        }
#pragma omp for schedule(static)
        for (int64_t i = 0; i < nl * C; i++) {
            const int64_t ll = i / C, j = i % C;
            const uint8_t *sb_row = sb + scale_row(blocked, 1, C, l0 + ll, 0);
            bdec[ll * per_batch + K + j] = e4m3_table[sb_row[scale_col(blocked, j)]];
        }
#pragma omp for schedule(static)
        for (int64_t task = 0; task < nl * groups; task++) {
            const int64_t ll = task / groups, l = l0 + ll, m0 = (task % groups) * rows;
            const float *bl = bdec + ll * per_batch;
            const gemv_batch B = {.a = a + l * M * half,
                                  .sa = sa,
                                  .M = M,
                                  .C = C,
                                  .l = l,
                                  .blocked = blocked,
                                  .be = bl,
                                  .bo = bl + half,
                                  .sbf = bl + K,
                                  .g = g,
                                  .c = c + l * M,
                                  .row_blocks = row_blocks};
            row_group(&B, m0, M - m0 < rows ? (int)(M - m0) : rows);
        }
    }
    free(bdec);
    return KK_OK;
}
