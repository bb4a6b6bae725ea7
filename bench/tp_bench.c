/* Warm timings of the (tensor-parallel) decoder for issue 21's scaling goals:
 * prefill of B x S tokens (warm-up calls, then `reps` prefills from an empty
 * cache, each waited for) and decode steps at a KV length (a prefill of L
 * tokens, warm-up steps, then `steps` single steps). One process per rank,
 * torchrun-style: KK_WORLD_SIZE, KK_RANK, KK_COMM_ID_FILE (kk_comm_init_env;
 * scripts/device-tp.sh starts them with CUDA_VISIBLE_DEVICES per rank and
 * KK_TP_DEVICE=cuda:0); no KK_WORLD_SIZE: TP 1. Rank 0 prints one JSON line.
 *   kk_tp_bench DIR [--device D] [--level L] [--batch B] [--prefill S]
 *               [--kv L] [--steps N] [--reps R] [--decode-batch B] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernelkit/kernelkit.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
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

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != KK_OK) {                                                                     \
            fprintf(stderr, "kk_tp_bench rank %d: %s: %s\n", rank, #call,                          \
                    kk_last_error_message());                                                      \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    const char *dir = NULL, *device = "cuda:0";
    kk_opt_level level = KK_OPT_BALANCED;
    long B = 1, S = 4096, L = 2048, steps = 32, reps = 5, DB = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (a[0] != '-' && !dir)
            dir = a;
        else if (!strcmp(a, "--device"))
            device = v, i++;
        else if (!strcmp(a, "--level")) {
            if (kk_opt_level_parse(v, &level) != KK_OK) return 2;
            i++;
        } else if (!strcmp(a, "--batch"))
            B = atol(v), i++;
        else if (!strcmp(a, "--prefill"))
            S = atol(v), i++;
        else if (!strcmp(a, "--kv"))
            L = atol(v), i++;
        else if (!strcmp(a, "--steps"))
            steps = atol(v), i++;
        else if (!strcmp(a, "--reps"))
            reps = atol(v), i++;
        else if (!strcmp(a, "--decode-batch"))
            DB = atol(v), i++;
        else {
            fprintf(stderr, "kk_tp_bench: unknown argument '%s' (see the file's head)\n", a);
            return 2;
        }
    }
    if (!dir || B < 1 || S < 1 || L < 1 || steps < 1 || reps < 1 || reps > 100 || DB < 1) {
        fprintf(stderr, "usage: kk_tp_bench DIR [--device D] [--batch B] [--prefill S] [--kv L] "
                        "[--steps N] [--reps R] [--decode-batch B]\n");
        return 2;
    }
    const int world = getenv("KK_WORLD_SIZE") ? atoi(getenv("KK_WORLD_SIZE")) : 1;
    const int rank = getenv("KK_RANK") ? atoi(getenv("KK_RANK")) : 0;
    if (getenv("KK_TP_DEVICE")) device = getenv("KK_TP_DEVICE");
    kk_model *m = NULL;
    kk_comm *comm = NULL;
    kk_decoder *d = NULL;
    CHECK(kk_model_open(dir, &m));
    const int64_t h = kk_model_get_config(m)->hidden_size;
    const long maxb = B > DB ? B : DB, warm = 3;
    const long maxs = S > L + warm + steps ? S : L + warm + steps;
    if (world > 1) {
        CHECK(kk_comm_init_env(device, &comm));
        CHECK(kk_decoder_create_tp(m, NULL, level, (int)maxb, (int)maxs, comm, &d));
    } else
        CHECK(kk_decoder_create(m, device, level, (int)maxb, (int)maxs, &d));
    const kk_dtype dt = kk_decoder_dtype(d);
    kk_tensor *x = hidden(device, dt, B, S, h), *y = hidden(device, dt, B, S, h);
    kk_tensor *xl = hidden(device, dt, DB, L, h), *yl = hidden(device, dt, DB, L, h);
    kk_tensor *x1 = hidden(device, dt, DB, 1, h), *y1 = hidden(device, dt, DB, 1, h);
    if (!x || !y || !xl || !yl || !x1 || !y1) {
        fprintf(stderr, "kk_tp_bench rank %d: making inputs: %s\n", rank, kk_last_error_message());
        return 1;
    }
    double pre[100], dec[4096];
    for (long i = 0; i < 2; i++) { /* warm-up: kernels chosen, memory pooled */
        kk_decoder_reset(d);
        CHECK(kk_decoder_prefill(d, x, y));
    }
    for (long i = 0; i < reps; i++) {
        kk_decoder_reset(d);
        const double t0 = now_ms();
        CHECK(kk_decoder_prefill(d, x, y));
        pre[i] = now_ms() - t0;
    }
    kk_decoder_reset(d);
    CHECK(kk_decoder_prefill(d, xl, yl));
    for (long i = 0; i < warm; i++) CHECK(kk_decoder_step(d, x1, y1));
    const long n = steps < 4096 ? steps : 4096;
    for (long i = 0; i < n; i++) {
        const double t0 = now_ms();
        CHECK(kk_decoder_step(d, x1, y1));
        dec[i] = now_ms() - t0;
    }
    double pre_mean = 0, dec_mean = 0;
    for (long i = 0; i < reps; i++) pre_mean += pre[i] / reps;
    for (long i = 0; i < n; i++) dec_mean += dec[i] / n;
    const double pre_med = median(pre, (int)reps), dec_med = median(dec, (int)n);
    const double pre_min = pre[0], dec_min = dec[0]; /* median() sorted them */
    if (rank == 0)
        printf("{\"tp\": %d, \"comm\": \"%s\", \"device\": \"%s\", \"level\": \"%s\", \"dtype\": "
               "\"%s\", \"layers\": %lld, \"hidden\": %lld, \"batch\": %ld, \"prefill_tokens\": "
               "%ld, \"prefill_reps\": %ld, \"prefill_ms_median\": %.4f, \"prefill_ms_min\": "
               "%.4f, \"prefill_ms_mean\": %.4f, \"prefill_tokens_per_s\": %.1f, "
               "\"decode_batch\": %ld, \"decode_kv\": %ld, \"decode_steps\": %ld, "
               "\"decode_ms_median\": %.4f, \"decode_ms_mean\": %.4f, \"decode_ms_min\": %.4f}\n",
               world, comm ? kk_comm_backend(comm) : "none", device, kk_opt_level_name(level),
               kk_dtype_name(dt), (long long)kk_model_get_config(m)->num_hidden_layers,
               (long long)h, B, S, reps, pre_med, pre_min, pre_mean, B * S / (pre_med / 1e3), DB, L,
               n, dec_med, dec_mean, dec_min);
    kk_tensor_destroy(x), kk_tensor_destroy(y), kk_tensor_destroy(xl), kk_tensor_destroy(yl);
    kk_tensor_destroy(x1), kk_tensor_destroy(y1);
    kk_decoder_free(d);
    kk_comm_destroy(comm);
    kk_model_close(m);
    return 0;
}
