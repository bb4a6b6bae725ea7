/* The CPU backend's matrix-product driver (cpu_gemm_internal.h) and the
 * `gemm` op's kernel: c[M,N] = a[M,K] . b[N,K]^T in f32, f16 or bf16, through
 * OpenBLAS's cblas_sgemm on f32 panels. Work that follows the product runs on
 * each block of rows while it is still in cache, so the output is written once.
 * docs/backends/cpu.md, "GEMM and Linear". */
#include <cblas.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/error.h"
#include "cpu/cpu_gemm_internal.h"
#include "cpu/cpu_isa.h"
#include "core/threads.h"
#include "cpu/cpu_kernels.h"
#include "opdef/gemm.h"

#define PANEL_BYTES (INT64_C(32) << 20)   /* decoded rows of b, per weight */
#define A_BLOCK_BYTES (INT64_C(16) << 20) /* decoded rows of a */
#define C_BLOCK_BYTES (INT64_C(8) << 20)  /* f32 product scratch, per weight */
#define EPI_CHUNK 2048                    /* columns per epilogue work item */

static atomic_llong block_rows_set, panel_rows_set; /* 0 = the sizes below */

void kk__cpu_gemm_set_blocking(int64_t rows, int64_t panel_rows) {
    atomic_store(&block_rows_set, rows > 0 ? rows : 0);
    atomic_store(&panel_rows_set, panel_rows > 0 ? panel_rows : 0);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* OpenBLAS keeps one global thread count; set it only when it differs, since
 * the call is not free. Its OpenMP build runs one thread per call inside a
 * parallel region and shares libgomp's pool with the kernels otherwise. */
static void blas_threads(int n) {
    if (openblas_get_num_threads() != n) openblas_set_num_threads(n);
}

static size_t elem_size(kk_dtype dt) { return kk_dtype_bytes(dt, 1); }

/* fp8 codes to f32 through their table: a gather, which AVX2 and AVX-512 have. */
KK__ISA_INLINE void decode_table(const uint8_t *restrict s, const float *restrict table,
                                 float *restrict out, int64_t n) {
    for (int64_t k = 0; k < n; k++) out[k] = table[s[k]];
}
KK__ISA_CLONES(decode_table,
               (const uint8_t *restrict s, const float *restrict table, float *restrict out,
                int64_t n),
               (s, table, out, n))

/* rows [r0, r0 + rows) of a [*, K] matrix of `dt` to f32 (table: fp8). */
static void decode_rows(const void *src, kk_dtype dt, const float *table, int64_t r0, int64_t rows,
                        int64_t K, float *dst) {
    void (*const decode)(const uint8_t *, const float *, float *, int64_t) =
        KK__ISA_PICK(decode_table);
#pragma omp parallel for num_threads(kk__cpu_threads()) schedule(static)
    for (int64_t i = 0; i < rows; i++) {
        const int64_t at = (r0 + i) * K;
        float *out = dst + i * K;
        if (table) {
            decode((const uint8_t *)src + at, table, out, K);
        } else {
            kk_convert_host((const char *)src + (size_t)at * elem_size(dt), dt, out, KK_DTYPE_F32,
                            (size_t)K);
        }
    }
}

void kk__cpu_store_row(const float *src, void *dst, kk_dtype dt, int64_t i0, int64_t n) {
    if (dt == KK_DTYPE_F32) {
        if ((float *)dst + i0 != src) memcpy((float *)dst + i0, src, (size_t)n * sizeof(float));
        return;
    }
    kk_convert_host(src, KK_DTYPE_F32, (char *)dst + (size_t)i0 * elem_size(dt), dt, (size_t)n);
}

/* The epilogue of rows [m0, m0 + rows), columns [n0, n0 + cols): work items
 * of one row and up to EPI_CHUNK columns, so that one long row (decode, M = 1)
 * still spreads over every thread. */
static void epilogue(const kk__gemm_job *job, float *const *c, const int64_t *ldc, int64_t m0,
                     int64_t rows, int64_t n0, int64_t cols) {
    const int64_t chunks = (cols + EPI_CHUNK - 1) / EPI_CHUNK;
#pragma omp parallel for num_threads(kk__cpu_threads()) schedule(dynamic, 8)
    for (int64_t item = 0; item < rows * chunks; item++) {
        const int64_t r = item / chunks, j0 = (item % chunks) * EPI_CHUNK;
        float *row[2] = {NULL, NULL};
        for (int w = 0; w < job->nweights; w++) row[w] = c[w] + r * ldc[w] + j0;
        job->row(job, row, m0 + r, n0 + j0, min64(EPI_CHUNK, cols - j0));
    }
}

/* The epilogue of one tile of the bf16 product (of both weights' tiles, for
 * SwiGLU), run by the thread that computed it while the tile is in its cache. */
typedef struct tile_ctx {
    const kk__gemm_job *job;
    int64_t m0, n0; /* the block's first row and column */
} tile_ctx;

static void epilogue_tile(void *ctx, float *c0, float *c1, int64_t ldc, int64_t i0, int64_t rows,
                          int64_t j0, int64_t cols) {
    const tile_ctx *t = ctx;
    for (int64_t r = 0; r < rows; r++) {
        float *row[2] = {c0 + r * ldc, c1 ? c1 + r * ldc : NULL};
        t->job->row(t->job, row, t->m0 + i0 + r, t->n0 + j0, cols);
    }
}

typedef struct scratch {
    float *a, *b[2], *c[2], *p;
} scratch;

static void scratch_free(scratch *s) {
    free(s->a);
    free(s->p);
    for (int w = 0; w < 2; w++) {
        free(s->b[w]);
        free(s->c[w]);
    }
}

/* c = sum_g scale_g * (a . b^T over group g of K), for rows [m0, m0 + rows)
 * and columns [n0, n0 + cols) of the block: one parallel region, each thread
 * a tile of its own (rows, or columns when there are few rows) through every
 * group, the first group's product straight into c, each later one into its
 * tile of p, combined by job->group. One region instead of a synchronized
 * sgemm and epilogue per group: on a loaded machine every synchronization may
 * wait for a descheduled thread (measured: 6x slower). */
static void group_product(const kk__gemm_job *job, const float *a, const float *b, float *c,
                          int64_t ldc, float *p, int64_t m0, int64_t rows, int64_t n0,
                          int64_t cols) {
    const int64_t K = job->K, kg = job->k_group;
    const int nt = kk__cpu_threads();
    const int by_rows = rows >= 16 * (int64_t)nt;
    const int64_t span = by_rows ? rows : cols, step = (span + nt - 1) / nt;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; t++) {
        const int64_t lo = t * step, n = min64(step, span - lo);
        if (n <= 0) continue;
        const int64_t r0 = by_rows ? lo : 0, nr = by_rows ? n : rows;
        const int64_t c0 = by_rows ? 0 : lo, nc = by_rows ? cols : n;
        float *ct = c + r0 * ldc + c0, *pt = p ? p + r0 * cols + c0 : NULL;
        for (int64_t k0 = 0, g = 0; k0 < K; k0 += kg, g++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)nr, (blasint)nc,
                        (blasint)min64(kg, K - k0), 1.0f, a + r0 * K + k0, (blasint)K,
                        b + c0 * K + k0, (blasint)K, 0.0f, g == 0 ? ct : pt,
                        (blasint)(g == 0 ? ldc : cols));
            job->group(job, g, ct, ldc, g == 0 ? NULL : pt, cols, m0 + r0, nr, n0 + c0, nc);
        }
    }
}

static int64_t block_rows(int64_t N) {
    const int64_t set = atomic_load(&block_rows_set);
    return set > 0 ? set : max64(16, KK__GEMM_BLOCK_BYTES / (4 * N));
}

kk_status kk__cpu_gemm_run(const kk__gemm_job *job, const char *op) {
    const int64_t M = job->M, N = job->N, K = job->K;
    const int a_f32 = job->a_dtype == KK_DTYPE_F32, b_f32 = job->b_dtype == KK_DTYPE_F32;
    const float *a_table = job->a_dtype == KK_DTYPE_FP8_E4M3 || job->a_dtype == KK_DTYPE_FP8_E5M2
                               ? job->tables[0]
                               : NULL;
    const float *b_table = job->b_dtype == KK_DTYPE_FP8_E4M3 || job->b_dtype == KK_DTYPE_FP8_E5M2
                               ? job->tables[1]
                               : NULL;
    /* bf16 with AVX512_BF16: products straight from the bf16 operands */
    const int bf16_dot = job->a_dtype == KK_DTYPE_BF16 && job->b_dtype == KK_DTYPE_BF16 &&
                         kk__cpu_gemm_bf16_available();
    const int grouped = job->group && job->k_group > 0 && !bf16_dot;
    /* grouped: each thread calls sgemm on a tile of its own (group_product) */
    blas_threads(grouped ? 1 : kk__cpu_threads());
    if (!job->row && a_f32 && b_f32 && job->c_direct) { /* plain f32: one call */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)K,
                    1.0f, job->a, (blasint)K, job->b[0], (blasint)K, 0.0f, job->c_direct,
                    (blasint)N);
        return KK_OK;
    }
    /* the bf16 product (SwiGLU's two at once) with the epilogue run tile by
     * tile inside it (a bf16 job always has one: the rounding at least) */
    const int fused = bf16_dot && job->row != NULL;
    int64_t mb = min64(block_rows(N), M), nb = N;
    const int decode_a = !a_f32 && !fused, decode_b = !b_f32 && !fused;
    if (decode_a) mb = min64(mb, max64(1, A_BLOCK_BYTES / (4 * K)));
    if (decode_b) nb = min64(nb, max64(1, PANEL_BYTES / (4 * K)));
    /* the fused bf16 product keeps its f32 tiles in its threads' buffers: no
     * scratch, and no blocks but the ones a test asks for */
    if (fused) {
        mb = atomic_load(&block_rows_set) > 0 ? min64(M, atomic_load(&block_rows_set)) : M;
        nb = N;
    }
    const int scratch_c0 = job->c_direct == NULL && !fused;
    const int scratch_p = grouped && job->k_group < K; /* more than one group */
    if ((scratch_c0 || job->nweights > 1 || scratch_p) && !fused)
        nb = min64(nb, max64(64, C_BLOCK_BYTES / (4 * mb)));
    if (atomic_load(&panel_rows_set) > 0) nb = min64(N, atomic_load(&panel_rows_set));
    scratch s = {0};
    int ok = 1;
    if (decode_a) ok &= (s.a = malloc((size_t)(mb * K) * sizeof(float))) != NULL;
    if (scratch_p) ok &= (s.p = malloc((size_t)(mb * nb) * sizeof(float))) != NULL;
    for (int w = 0; w < job->nweights; w++) {
        if (decode_b) ok &= (s.b[w] = malloc((size_t)(min64(nb, N) * K) * sizeof(float))) != NULL;
        if ((w > 0 || scratch_c0) && !fused)
            ok &= (s.c[w] = malloc((size_t)(mb * nb) * sizeof(float))) != NULL;
    }
    if (!ok) {
        scratch_free(&s);
        return kk__error(KK_ERR_OUT_OF_MEMORY, op,
                         "no host memory for the f32 panels of a %lldx%lldx%lld product",
                         (long long)M, (long long)N, (long long)K);
    }
    kk_status st = KK_OK;
    for (int64_t n0 = 0; n0 < N && st == KK_OK; n0 += nb) {
        const int64_t cols = min64(nb, N - n0);
        const float *b[2] = {NULL, NULL};
        for (int w = 0; w < job->nweights; w++) {
            if (!decode_b) {
                b[w] = (const float *)job->b[w] + n0 * K; /* f32; fused reads job->b */
            } else {
                decode_rows(job->b[w], job->b_dtype, b_table, n0, cols, K, s.b[w]);
                b[w] = s.b[w];
            }
        }
        for (int64_t m0 = 0; m0 < M && st == KK_OK; m0 += mb) {
            const int64_t rows = min64(mb, M - m0);
            const float *a = (const float *)job->a + m0 * K;
            if (decode_a) {
                decode_rows(job->a, job->a_dtype, a_table, m0, rows, K, s.a);
                a = s.a;
            }
            if (fused) {
                const int two = job->nweights == 2;
                tile_ctx t = {job, m0, n0};
                st = kk__cpu_gemm_bf16_pair(rows, cols, K, (const uint16_t *)job->a + m0 * K, K,
                                            (const uint16_t *)job->b[0] + n0 * K,
                                            two ? (const uint16_t *)job->b[1] + n0 * K : NULL, K,
                                            NULL, NULL, 0, epilogue_tile, &t);
                continue;
            }
            float *c[2];
            int64_t ldc[2];
            for (int w = 0; w < job->nweights; w++) {
                const int direct = w == 0 && !scratch_c0;
                c[w] = direct ? job->c_direct + m0 * N + n0 : s.c[w];
                ldc[w] = direct ? N : cols;
            }
            for (int w = 0; w < job->nweights; w++) {
                if (grouped) {
                    group_product(job, a, b[w], c[w], ldc[w], s.p, m0, rows, n0, cols);
                } else {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows,
                                (blasint)cols, (blasint)K, 1.0f, a, (blasint)K, b[w], (blasint)K,
                                0.0f, c[w], (blasint)ldc[w]);
                }
            }
            if (job->row && st == KK_OK) epilogue(job, c, ldc, m0, rows, n0, cols);
        }
    }
    scratch_free(&s);
    return st;
}

/* f16/bf16: the f32 product of a block, rounded once into c (bf16 in this
 * clone's vectors; the epilogue's pieces are at most EPI_CHUNK long). */
KK__ISA_INLINE void round_row(const kk__gemm_job *job, float *const *c, int64_t m, int64_t n0,
                              int64_t cols) {
    kk_tensor *out = (kk_tensor *)job->ctx;
    if (out->dtype == KK_DTYPE_BF16)
        kk__row_store(out->data, out->dtype, m * job->N + n0, c[0], (int)cols);
    else
        kk__cpu_store_row(c[0], out->data, out->dtype, m * job->N + n0, cols);
}
KK__ISA_CLONES(round_row,
               (const kk__gemm_job *job, float *const *c, int64_t m, int64_t n0, int64_t cols),
               (job, c, m, n0, cols))

kk_status kk__gemm_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream s) {
    (void)s;
    kk_status st = kk__cpu_check_tensors(p, t);
    if (st != KK_OK) return st;
    const kk_dtype dt = (kk_dtype)p->i[KK__GEMM_DTYPE];
    const int f32 = dt == KK_DTYPE_F32;
    const kk__gemm_job job = {.M = p->i[KK__GEMM_M],
                              .N = p->i[KK__GEMM_N],
                              .K = p->i[KK__GEMM_K],
                              .a = t[0]->data,
                              .a_dtype = dt,
                              .b = {t[1]->data, NULL},
                              .b_dtype = dt,
                              .nweights = 1,
                              .c_direct = f32 ? (float *)t[2]->data : NULL,
                              .row = f32 ? NULL : KK__ISA_PICK(round_row),
                              .ctx = t[2]};
    return kk__cpu_gemm_run(&job, "gemm");
}
