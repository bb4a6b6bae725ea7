/* Case inputs: values drawn from the case seed, per op, by each input's fill
 * hook. Every block of 65536 elements has a stream of its own, so a tensor's
 * values depend neither on other tensors nor on the thread count; values are
 * rounded to the input dtype with kk_convert_host, and the reference decodes
 * those bytes, so it sees exactly what the kernel sees. docs/harness.md, "Inputs". */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "opdef/opdef.h"
#include "core/rng.h"
#include "kernelkit/cases.h"

#define GOLDEN UINT64_C(0x9e3779b97f4a7c15)
#define BLOCK ((size_t)65536) /* elements per stream; even: e2m1 blocks start at a byte */
#define CHUNK 4096            /* values converted at a time */
#define MAX_THREADS 16

/* ---- value generators: fill out[0..m) ---- */

typedef void (*gen_fn)(kk__rng *r, const void *ctx, double *out, size_t m);

static void gen_normal(kk__rng *r, const void *ctx, double *out, size_t m) {
    (void)ctx;
    for (size_t i = 0; i < m; i += 2) { /* Box-Muller, both values; 1 - u is in (0, 1] */
        const double u = 1.0 - kk__rng_uniform(r), v = 6.283185307179586 * kk__rng_uniform(r);
        const double rad = sqrt(-2.0 * log(u));
        out[i] = rad * cos(v);
        if (i + 1 < m) out[i + 1] = rad * sin(v);
    }
}

/* convert's finite values: normal, times 2^k with k in -12..12, so that every
 * dst meets subnormals, ties and saturation. */
static void gen_spread(kk__rng *r, const void *ctx, double *out, size_t m) {
    gen_normal(r, ctx, out, m);
    for (size_t i = 0; i < m; i++) out[i] = ldexp(out[i], (int)kk__rng_below(r, 25) - 12);
}

/* NVFP4 scales 2^e * [1, 2), e in -6..1 (shifted down by *ctx for long K). */
static void gen_scale_full(kk__rng *r, const void *ctx, double *out, size_t m) {
    const int shift = *(const int *)ctx;
    for (size_t i = 0; i < m; i++)
        out[i] = ldexp(1.0 + kk__rng_uniform(r), (int)kk__rng_below(r, 8) - 6 - shift);
}

static void gen_scale_gpumode(kk__rng *r, const void *ctx, double *out, size_t m) {
    (void)ctx;
    for (size_t i = 0; i < m; i++) out[i] = (double)kk__rng_below(r, 3); /* 0, 1, 2 */
}

/* Global scales: far from 1, so a kernel that ignores them cannot pass. */
static void gen_global(kk__rng *r, const void *ctx, double *out, size_t m) {
    (void)ctx;
    for (size_t i = 0; i < m; i++) out[i] = 0.25 + 0.5 * kk__rng_uniform(r);
}

static void gen_one(kk__rng *r, const void *ctx, double *out, size_t m) {
    (void)r;
    (void)ctx;
    for (size_t i = 0; i < m; i++) out[i] = 1.0;
}

/* ---- how one tensor is filled ---- */

typedef struct fill_spec {
    gen_fn gen; /* values, or NULL for e2m1 codes */
    const void *ctx;
    const uint8_t *codes; /* e2m1: each element one of these */
    uint32_t ncodes;
    int sprinkle; /* then a quarter of the elements get random bits (convert) */
} fill_spec;

static const uint8_t all_codes[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
static const uint8_t gpumode_codes[7] = {0, 1, 2, 3, 9, 10, 11}; /* 0, +-0.5, +-1, +-1.5 */

/* What the op's row asks for input k, as generators under `dist`. */
static fill_spec spec_for(const kk_op_params *p, int k, kk_input_dist dist,
                          const kk__fill_rule *rule) {
    const int gm = dist == KK_DIST_GPUMODE;
    switch (rule->kind) {
    case KK__FILL_SPREAD: return (fill_spec){.gen = gen_spread, .sprinkle = 1};
    case KK__FILL_NVFP4_CODES:
        return (fill_spec){.codes = gm ? gpumode_codes : all_codes, .ncodes = gm ? 7 : 16};
    case KK__FILL_NVFP4_SCALES:
        return (fill_spec){.gen = gm ? gen_scale_gpumode : gen_scale_full, .ctx = &rule->shift};
    case KK__FILL_GLOBAL_SCALE: return (fill_spec){.gen = gm ? gen_one : gen_global};
    case KK__FILL_NORMAL:
    case KK__FILL_BY_OP: break;
    }
    (void)p;
    (void)k;
    return (fill_spec){.gen = gen_normal};
}

/* Overwrite about a quarter of elements [start, start + m) with random bits:
 * every code of the dtype, NaN and infinities included. */
static void sprinkle(uint8_t *b, kk_dtype dt, size_t start, size_t m, kk__rng *r) {
    const size_t width = (size_t)kk_dtype_bits(dt) / 8; /* 0 for e2m1 */
    for (size_t i = start; i < start + m; i++) {
        if (kk__rng_below(r, 4) != 0) continue;
        const uint64_t bits = kk__rng_next(r);
        if (width == 0)
            b[i / 2] =
                (uint8_t)((b[i / 2] & (0xF0u >> (4 * (i % 2)))) | ((bits & 0xFu) << (4 * (i % 2))));
        else
            for (size_t k = 0; k < width; k++) b[i * width + k] = (uint8_t)(bits >> (8 * k));
    }
}

/* Elements [start, start + m) of buf; start is a multiple of BLOCK. */
static kk_status fill_block(const fill_spec *s, uint8_t *buf, kk_dtype dt, size_t start, size_t m,
                            kk__rng *r) {
    if (s->codes) {
        memset(buf + start / 2, 0, kk_dtype_bytes(KK_DTYPE_E2M1, m));
        for (size_t i = start; i < start + m; i++)
            buf[i / 2] |= (uint8_t)(s->codes[kk__rng_below(r, s->ncodes)] << (4 * (i % 2)));
        return KK_OK;
    }
    double tmp[CHUNK];
    for (size_t at = start; at < start + m; at += CHUNK) {
        const size_t k = start + m - at < CHUNK ? start + m - at : CHUNK;
        s->gen(r, s->ctx, tmp, k);
        kk_status st = kk_convert_host(tmp, KK_DTYPE_F64, buf + kk_dtype_bytes(dt, at), dt, k);
        if (st != KK_OK) return st;
    }
    if (s->sprinkle) sprinkle(buf, dt, start, m, r);
    return KK_OK;
}

/* ---- blocks in parallel ---- */

/* splitmix64's finalizer: seeds that differ by one give unrelated streams
 * (kk__rng_seed's own splitmix of s and s + GOLDEN would overlap). */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

typedef struct fill_job {
    const fill_spec *spec;
    uint8_t *buf;
    kk_dtype dtype;
    size_t n;
    uint64_t seed;
    atomic_size_t next; /* the next block to take */
    atomic_int failed;
} fill_job;

static void *fill_worker(void *arg) {
    fill_job *j = arg;
    for (;;) {
        const size_t b = atomic_fetch_add(&j->next, 1);
        if (b * BLOCK >= j->n || atomic_load(&j->failed)) return NULL;
        kk__rng r;
        kk__rng_seed(&r, mix64(j->seed ^ mix64((uint64_t)b + 1)));
        const size_t m = j->n - b * BLOCK < BLOCK ? j->n - b * BLOCK : BLOCK;
        if (fill_block(j->spec, j->buf, j->dtype, b * BLOCK, m, &r) != KK_OK)
            atomic_store(&j->failed, 1);
    }
}

static kk_status fill_tensor(const fill_spec *s, void *buf, kk_dtype dt, size_t n, uint64_t seed) {
    fill_job j = {.spec = s, .buf = buf, .dtype = dt, .n = n, .seed = seed};
    atomic_init(&j.next, 0);
    atomic_init(&j.failed, 0);
    const size_t blocks = (n + BLOCK - 1) / BLOCK;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t want = blocks < MAX_THREADS ? blocks : MAX_THREADS;
    if (cpus > 0 && (size_t)cpus < want) want = (size_t)cpus;
    pthread_t threads[MAX_THREADS];
    size_t started = 0;
    while (started + 1 < want && pthread_create(&threads[started], NULL, fill_worker, &j) == 0)
        started++;
    fill_worker(&j); /* this thread works too, and alone when no thread starts */
    for (size_t i = 0; i < started; i++) pthread_join(threads[i], NULL);
    if (!atomic_load(&j.failed)) return KK_OK;
    return kk__error(KK_ERR_INTERNAL, "kk_case_fill_inputs", "converting random values failed");
}

kk_status kk_case_fill_inputs(const kk_op_params *p, uint64_t seed, kk_input_dist dist,
                              void *const *inputs) {
    kk_op_tensor t[KK_OP_MAX_TENSORS];
    int n = 0;
    kk_status st = KK__CHECK_NOT_NULL(inputs);
    if (st == KK_OK) st = kk_op_tensors(p, t, &n);
    if (st == KK_OK && ((int)dist < 0 || dist >= KK_DIST_COUNT))
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "dist", "a kk_input_dist", "%d",
                           (int)dist);
    if (st != KK_OK) return st;
    for (int k = 0; st == KK_OK && k < n && !t[k].is_output; k++) {
        if (t[k].numel > 0 && !inputs[k])
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, t[k].name,
                                 "a buffer for every input", "NULL");
        const kk__fill_rule rule = p->op->fill ? p->op->fill(p, k) : (kk__fill_rule){0};
        if (rule.kind == KK__FILL_BY_OP) {
            p->op->write_input(p, k, inputs[k], t[k].numel);
            continue;
        }
        const fill_spec s = spec_for(p, k, dist, &rule);
        st = fill_tensor(&s, inputs[k], t[k].dtype, (size_t)t[k].numel,
                         mix64(seed + (uint64_t)(k + 1) * GOLDEN));
    }
    return st;
}
