/* Warm timings of the (tensor-parallel) decoder for issue 21's scaling goals,
 * every case in one process per rank: prefills of B x S tokens from an empty
 * cache (warm-up calls, then `reps` of each overlap mode, interleaved, each
 * call waited for) and decode steps at a KV length (a prefill of L tokens,
 * warm-up steps, then `steps` single steps). With overlap on, rank 0 also
 * compares the prefill's output with overlap off's (max abs difference; 0:
 * bit for bit). One process per rank, torchrun-style: KK_WORLD_SIZE,
 * KK_RANK, KK_COMM_ID_FILE (kk_comm_init_env; scripts/device-tp.sh starts them
 * with CUDA_VISIBLE_DEVICES per rank and KK_TP_DEVICE=cuda:0); no
 * KK_WORLD_SIZE: TP 1 (no comm: overlap does not apply). Rank 0 prints one
 * JSON line per measurement.
 *   kk_tp_bench DIR [--device D] [--level L] [--prefill BxS]... [--decode B]...
 *               [--kv L] [--steps N] [--reps R] [--overlap off,on] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernelkit/kernelkit.h"

enum { MAXCASES = 8, MAXREPS = 100 };

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* median, min, mean of v[0..n) (sorts v) */
static void stats(double *v, int n, double out[3]) {
    double mean = 0;
    for (int i = 0; i < n; i++) mean += v[i] / n;
    qsort(v, (size_t)n, sizeof *v, cmp);
    out[0] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    out[1] = v[0];
    out[2] = mean;
}

/* [B,S,hidden] on device in dtype: values in [-1, 1) from a fixed generator
 * (every rank makes the same). */
static kk_tensor *hidden(const char *device, kk_dtype dt, int64_t B, int64_t S, int64_t h) {
    kk_tensor *f = NULL, *c = NULL, *d = NULL;
    const int64_t shape[3] = {B, S, h};
    uint64_t rng = 12345;
    if (kk_tensor_create("cpu", KK_DTYPE_F32, 3, shape, &f) != KK_OK) return NULL;
    for (int64_t i = 0; i < B * S * h; i++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        ((float *)f->data)[i] = (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1);
    }
    if (kk_tensor_create("cpu", dt, 3, shape, &c) == KK_OK && kk_convert(f, c, NULL) == KK_OK &&
        kk_tensor_create(device, dt, 3, shape, &d) == KK_OK && kk_tensor_copy(d, c) != KK_OK)
        kk_tensor_destroy(d), d = NULL;
    kk_tensor_destroy(f), kk_tensor_destroy(c);
    return d;
}

/* t as f32 on the host (NULL on failure). */
static kk_tensor *host_f32(const kk_tensor *t) {
    kk_tensor *h = NULL, *f = NULL;
    if (kk_tensor_create("cpu", t->dtype, t->ndim, t->shape, &h) != KK_OK) return NULL;
    if (kk_tensor_copy(h, t) == KK_OK &&
        kk_tensor_create("cpu", KK_DTYPE_F32, t->ndim, t->shape, &f) == KK_OK &&
        kk_convert(h, f, NULL) != KK_OK)
        kk_tensor_destroy(f), f = NULL;
    kk_tensor_destroy(h);
    return f;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != KK_OK) {                                                                     \
            fprintf(stderr, "kk_tp_bench rank %d: %s: %s\n", rank, #call,                          \
                    kk_last_error_message());                                                      \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int rank; /* for CHECK */

int main(int argc, char **argv) {
    const char *dir = NULL, *device = "cuda:0", *overlaps = "off,on";
    kk_opt_level level = KK_OPT_BALANCED;
    long pB[MAXCASES], pS[MAXCASES], dB[MAXCASES], L = 2048, steps = 32, reps = 10;
    int np = 0, nd = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (a[0] != '-' && !dir)
            dir = a;
        else if (!strcmp(a, "--device"))
            device = v, i++;
        else if (!strcmp(a, "--level")) {
            if (kk_opt_level_parse(v, &level) != KK_OK) return 2;
            i++;
        } else if (!strcmp(a, "--prefill") && np < MAXCASES) {
            if (sscanf(v, "%ldx%ld", &pB[np], &pS[np]) != 2 || pB[np] < 1 || pS[np] < 1) {
                fprintf(stderr, "kk_tp_bench: bad --prefill '%s': expected BxS\n", v);
                return 2;
            }
            np++, i++;
        } else if (!strcmp(a, "--decode") && nd < MAXCASES) {
            if ((dB[nd] = atol(v)) < 1) return 2;
            nd++, i++;
        } else if (!strcmp(a, "--kv"))
            L = atol(v), i++;
        else if (!strcmp(a, "--steps"))
            steps = atol(v), i++;
        else if (!strcmp(a, "--reps"))
            reps = atol(v), i++;
        else if (!strcmp(a, "--overlap"))
            overlaps = v, i++;
        else {
            fprintf(stderr, "kk_tp_bench: unknown argument '%s' (see the file's head)\n", a);
            return 2;
        }
    }
    if (!dir || L < 1 || steps < 1 || steps > 4096 || reps < 1 || reps > MAXREPS || np + nd == 0) {
        fprintf(stderr, "usage: kk_tp_bench DIR [--device D] [--level L] [--prefill BxS]... "
                        "[--decode B]... [--kv L] [--steps N] [--reps R] [--overlap off,on]\n");
        return 2;
    }
    kk_tp_overlap modes[3];
    int nm = 0;
    char list[64];
    snprintf(list, sizeof list, "%s", overlaps);
    for (char *tok = strtok(list, ","); tok && nm < 3; tok = strtok(NULL, ","))
        if (kk_tp_overlap_parse(tok, &modes[nm++]) != KK_OK) {
            fprintf(stderr, "kk_tp_bench: bad --overlap '%s'\n", overlaps);
            return 2;
        }
    const int world = getenv("KK_WORLD_SIZE") ? atoi(getenv("KK_WORLD_SIZE")) : 1;
    rank = getenv("KK_RANK") ? atoi(getenv("KK_RANK")) : 0;
    if (getenv("KK_TP_DEVICE")) device = getenv("KK_TP_DEVICE");
    if (world == 1) modes[0] = KK_TP_OVERLAP_OFF, nm = 1; /* no comm: nothing to overlap */
    kk_model *m = NULL;
    kk_comm *comm = NULL;
    kk_decoder *d = NULL;
    CHECK(kk_model_open(dir, &m));
    const int64_t h = kk_model_get_config(m)->hidden_size;
    const long warm = 3;
    long maxb = 1, maxs = L + warm + steps;
    for (int i = 0; i < np; i++) {
        maxb = pB[i] > maxb ? pB[i] : maxb;
        maxs = pS[i] > maxs ? pS[i] : maxs;
    }
    for (int i = 0; i < nd; i++) maxb = dB[i] > maxb ? dB[i] : maxb;
    const double t_open = now_ms();
    if (world > 1) {
        CHECK(kk_comm_init_env(device, &comm));
        CHECK(kk_decoder_create_tp(m, NULL, level, (int)maxb, (int)maxs, comm, &d));
    } else
        CHECK(kk_decoder_create(m, device, level, (int)maxb, (int)maxs, &d));
    const kk_dtype dt = kk_decoder_dtype(d);
    const long long layers = (long long)kk_model_get_config(m)->num_hidden_layers;
    if (rank == 0)
        fprintf(stderr, "kk_tp_bench: TP %d decoder made in %.0f ms\n", world, now_ms() - t_open);
#define HEAD                                                                                       \
    "{\"tp\": %d, \"comm\": \"%s\", \"device\": \"%s\", \"level\": \"%s\", \"dtype\": \"%s\", "    \
    "\"layers\": %lld, \"hidden\": %lld, "
#define HEAD_ARGS                                                                                  \
    world, comm ? kk_comm_backend(comm) : "none", device, kk_opt_level_name(level),                \
        kk_dtype_name(dt), layers, (long long)h

    /* ---- prefills ---- */
    for (int c = 0; c < np; c++) {
        const long B = pB[c], S = pS[c];
        kk_tensor *x = hidden(device, dt, B, S, h), *y = hidden(device, dt, B, S, h);
        if (!x || !y) {
            fprintf(stderr, "kk_tp_bench rank %d: inputs: %s\n", rank, kk_last_error_message());
            return 1;
        }
        double ms[3][MAXREPS];
        kk_tensor *ref = NULL; /* overlap off's output (rank 0) */
        double diff[3] = {0, 0, 0};
        for (int k = 0; k < nm; k++) { /* warm-up: kernels chosen, memory pooled, NCCL set up */
            CHECK(kk_decoder_set_tp_overlap(d, modes[k]));
            for (int i = 0; i < 2; i++) {
                kk_decoder_reset(d);
                CHECK(kk_decoder_prefill(d, x, y));
            }
            if (rank != 0) continue;
            kk_tensor *out = host_f32(y);
            if (!out) CHECK(KK_ERR_INTERNAL);
            if (!ref) {
                ref = out;
                continue;
            }
            const float *a = out->data, *r = ref->data;
            for (int64_t e = 0; e < kk_tensor_numel(out); e++) {
                const double dd = fabs((double)a[e] - r[e]);
                diff[k] = dd > diff[k] || isnan(dd) ? dd : diff[k];
            }
            kk_tensor_destroy(out);
        }
        kk_tensor_destroy(ref);
        for (long i = 0; i < reps; i++)
            for (int k = 0; k < nm; k++) { /* interleaved, so drift hits every mode alike */
                CHECK(kk_decoder_set_tp_overlap(d, modes[k]));
                kk_decoder_reset(d);
                const double t0 = now_ms();
                CHECK(kk_decoder_prefill(d, x, y));
                ms[k][i] = now_ms() - t0;
            }
        for (int k = 0; rank == 0 && k < nm; k++) {
            double s[3];
            stats(ms[k], (int)reps, s);
            printf(HEAD "\"case\": \"prefill\", \"batch\": %ld, \"tokens\": %ld, \"overlap\": "
                        "\"%s\", \"reps\": %ld, \"ms_median\": %.4f, \"ms_min\": %.4f, "
                        "\"ms_mean\": %.4f, \"tokens_per_s\": %.1f, "
                        "\"max_abs_diff_vs_first_mode\": %.6g}\n",
                   HEAD_ARGS, B, S, kk_tp_overlap_name(modes[k]), reps, s[0], s[1], s[2],
                   B * S / (s[0] / 1e3), diff[k]);
            fflush(stdout);
        }
        kk_tensor_destroy(x), kk_tensor_destroy(y);
    }

    /* ---- decode steps at KV L (never split: the overlap mode does not matter) ---- */
    CHECK(kk_decoder_set_tp_overlap(d, KK_TP_OVERLAP_AUTO));
    for (int c = 0; c < nd; c++) {
        const long B = dB[c];
        kk_tensor *xl = hidden(device, dt, B, L, h), *yl = hidden(device, dt, B, L, h);
        kk_tensor *x1 = hidden(device, dt, B, 1, h), *y1 = hidden(device, dt, B, 1, h);
        if (!xl || !yl || !x1 || !y1) {
            fprintf(stderr, "kk_tp_bench rank %d: inputs: %s\n", rank, kk_last_error_message());
            return 1;
        }
        static double dec[4096];
        kk_decoder_reset(d);
        CHECK(kk_decoder_prefill(d, xl, yl));
        for (long i = 0; i < warm; i++) CHECK(kk_decoder_step(d, x1, y1));
        for (long i = 0; i < steps; i++) {
            const double t0 = now_ms();
            CHECK(kk_decoder_step(d, x1, y1));
            dec[i] = now_ms() - t0;
        }
        double s[3];
        stats(dec, (int)steps, s);
        if (rank == 0)
            printf(HEAD "\"case\": \"decode\", \"batch\": %ld, \"kv\": %ld, \"steps\": %ld, "
                        "\"ms_median\": %.4f, \"ms_min\": %.4f, \"ms_mean\": %.4f}\n",
                   HEAD_ARGS, B, L, steps, s[0], s[1], s[2]);
        fflush(stdout);
        kk_tensor_destroy(xl), kk_tensor_destroy(yl), kk_tensor_destroy(x1), kk_tensor_destroy(y1);
    }
    kk_decoder_free(d);
    kk_comm_destroy(comm);
    kk_model_close(m);
    return 0;
}
