/* labels: unit cpu */
/* The decoder's cost model (src/model/cost_model.c) and profile
 * (decoder_profile.c, cost_report.c) on a one-layer f32 model written here
 * (hidden 64, 4 heads of 16, 2 KV heads, intermediate 128): each step's
 * FLOPs, bytes, ceiling and predicted time against values worked out by hand
 * below (a check shown to catch a wrong cost: attention without the causal
 * halving, a ceiling swapped), the fallbacks for unknown ceilings, the
 * errors; then a profile on the CPU: every step that runs is measured, the
 * skipped ones are not, the cache and the next call's output are untouched,
 * and the results (steps as benchmarks, the "model" member) read back. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_testutil.h"

#define CONFIG                                                                                     \
    "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128,\n"               \
    " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,\n"         \
    " \"vocab_size\": 16, \"rms_norm_eps\": 1e-05, \"torch_dtype\": \"float32\"}\n"

static char g_dir[64];

static int setup(void **state) {
    (void)state;
    /* one thread: on a loaded machine waking a team costs milliseconds per call */
    if (kk_cpu_set_num_threads(1) != KK_OK) return -1;
    snprintf(g_dir, sizeof g_dir, "/tmp/kk_cost_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", g_dir);
    mt_write_text(path, CONFIG);
    static const struct {
        const char *suffix;
        int64_t d0, d1;
    } w[] = {{"self_attn.q_proj", 64, 64},        {"self_attn.k_proj", 32, 64},
             {"self_attn.v_proj", 32, 64},        {"self_attn.o_proj", 64, 64},
             {"mlp.gate_proj", 128, 64},          {"mlp.up_proj", 128, 64},
             {"mlp.down_proj", 64, 128},          {"input_layernorm", 64, -1},
             {"post_attention_layernorm", 64, -1}};
    mt_tensor t[9];
    int n = 0;
    for (int i = 0; i < 9; i++) {
        char name[96];
        snprintf(name, sizeof name, "model.layers.0.%s.weight", w[i].suffix);
        mt_add(t, &n, name, KK_DTYPE_F32, w[i].d0, w[i].d1);
    }
    for (int i = 0; i < 7; i++) t[i].seed += 100; /* small enough to keep the states finite */
    mt_write_model(g_dir, t, n);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static kk_decoder *decoder(kk_opt_level level) {
    kk_model *m = NULL;
    kk_decoder *d = NULL;
    kk_assert_ok(kk_model_open(g_dir, &m));
    kk_assert_ok(kk_decoder_create(m, "cpu", level, 2, 16, &d));
    kk_model_close(m);
    return d;
}

static const kk_step_cost *step(const kk_decoder_cost *c, const char *name) {
    for (int i = 0; i < c->nsteps; i++)
        if (strcmp(c->steps[i].name, name) == 0) return &c->steps[i];
    fail_msg("no step '%s'", name);
    return NULL;
}

/* What a step should be, worked out by hand. */
typedef struct want {
    const char *name;
    int calls;
    double flops, rd, wr;
    kk_ceiling_kind bw;
    const char *bound;
    double predicted;
} want;

/* Mismatches between a step and what it should be (printed); 0 when equal. */
static int mismatches(const kk_decoder_cost *c, const want *w) {
    const kk_step_cost *s = step(c, w->name);
    int bad = 0;
#define SAME(got, exp)                                                                             \
    if (fabs((double)(got) - (double)(exp)) > 1e-9 * fabs((double)(exp)) + 1e-15) {                \
        printf("%s: %s = %.10g: expected %.10g\n", w->name, #got, (double)(got), (double)(exp));   \
        bad++;                                                                                     \
    }
    SAME(s->calls, w->calls);
    SAME(s->flops, w->flops);
    SAME(s->bytes_read, w->rd);
    SAME(s->bytes_written, w->wr);
    SAME(s->bandwidth, w->bw);
    SAME(s->predicted_s, w->predicted);
#undef SAME
    if (strcmp(s->bound, w->bound) != 0) {
        printf("%s: bound %s: expected %s\n", w->name, s->bound, w->bound);
        bad++;
    }
    return bad;
}

/* copy 1 GB/s, read 2 GB/s, fp32 1 GFLOP/s (the f32 model's matrix rate too:
 * bf16 0 = unknown), launch floor 1 us. */
static const kk_bench_ceilings g_ceil = {1.0, 2.0, 0.0, 0.0, 1e-3};

static void prefill_costs_match_the_hand_values(void **state) {
    (void)state;
    kk_decoder *d = decoder(KK_OPT_CONSERVATIVE);
    kk_decoder_cost c;
    /* B=2, S=3 after 0 cached: T = 6 tokens; 4 bytes per element */
    kk_assert_ok(kk_decoder_predict(d, 2, 3, 0, &g_ceil, 1e-6, &c));
    const want w[] = {
        /* gate: 2*6*128*64 FLOPs; x 6x64 + W 128x64 read, 6x128 written; writes
         * under 1/8 of reads: the read ceiling. max(37376 / 2e9, 98304 / 1e9) + 1e-6 */
        {"gate_proj", 1, 98304, 34304, 3072, KK_CEILING_READ, "compute", 98304 / 1e9 + 1e-6},
        /* causal, nothing cached: 6 pairs per sequence and head (3 * 4 / 2);
         * 4 * B * H * D * pairs = 4*2*4*16*6; q 6x64 and k, v 2x2x3x16 each
         * read, 6x64 written: copy ceiling, memory-bound */
        {"attention", 1, 3072, 3072, 1536, KK_CEILING_COPY, "memory", 4608 / 1e9 + 1e-6},
        /* [6, 64] permuted: 1536 bytes each way */
        {"layout q", 1, 0, 1536, 1536, KK_CEILING_COPY, "memory", 3072 / 1e9 + 1e-6},
        /* k and v rows: two copies of 6 x 32 floats */
        {"kv cache write", 2, 0, 1536, 1536, KK_CEILING_COPY, "memory", 3072 / 1e9 + 2e-6},
        /* 4 FLOPs per element; x and the weight read, y written */
        {"input_norm", 1, 1536, 1792, 1536, KK_CEILING_COPY, "memory", 3328 / 1e9 + 1e-6},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) bad += mismatches(&c, &w[i]);
    assert_int_equal(bad, 0);
    assert_int_equal(c.nsteps, 18);
    double sum = 0;
    for (int i = 0; i < c.nsteps; i++) sum += c.steps[i].predicted_s;
    assert_true(fabs(c.predicted_s - sum) < 1e-15); /* one layer */
    assert_true(c.measured_s == -1 && step(&c, "q_proj")->measured_s == -1);
    assert_string_equal(c.level, "conservative");
    /* the check catches a wrong cost: attention without the causal halving
     * (4*B*H*S*Lk*D = 4608 FLOPs), or the bandwidths swapped */
    want wrong = w[1];
    wrong.flops = 4608;
    assert_int_equal(mismatches(&c, &wrong), 1);
    kk_bench_ceilings swapped = g_ceil;
    swapped.copy_gbs = g_ceil.read_gbs, swapped.read_gbs = g_ceil.copy_gbs;
    kk_decoder_cost c2;
    kk_assert_ok(kk_decoder_predict(d, 2, 3, 0, &swapped, 1e-6, &c2));
    assert_true(mismatches(&c2, &w[1]) > 0);
    /* a floor over the roofline: launch-bound */
    kk_assert_ok(kk_decoder_predict(d, 2, 3, 0, &g_ceil, 1e-5, &c2));
    assert_string_equal(step(&c2, "input_norm")->bound, "launch");
    kk_decoder_free(d);
}

static void decode_costs_match_the_hand_values(void **state) {
    (void)state;
    kk_decoder *d = decoder(KK_OPT_BALANCED);
    kk_decoder_cost c;
    /* B=1, S=1 after 7 cached */
    kk_assert_ok(kk_decoder_predict(d, 1, 1, 7, &g_ceil, 1e-6, &c));
    const want w[] = {
        /* q, k, v stacked (N = 64 + 2*32): 2*128*64; x + W read (33024 B)
         * against 512 written: read ceiling, 33536 / 2e9 = 16.768 us over
         * 16.384 us of FLOPs */
        {"qkv_proj", 1, 16384, 33024, 512, KK_CEILING_READ, "memory", 33536 / 2e9 + 1e-6},
        /* 8 keys (7 cached + itself): 4*1*4*16*8; q and 8 rows of k and v */
        {"attention", 1, 2048, 2304, 256, KK_CEILING_READ, "compute", 2048 / 1e9 + 1e-6},
        /* gate and up: 4*T*I*h + 5*T*I FLOPs; x and both weights read */
        {"gate_up + silu_mul", 1, 33408, 65792, 512, KK_CEILING_READ, "compute",
         33408 / 1e9 + 1e-6},
        /* q, k, v in; q rotated and the cache rows out; 3 FLOPs per rotated
         * element of q (64) and k (32) */
        {"rope + kv append", 1, 288, 512, 512, KK_CEILING_COPY, "memory", 1024 / 1e9 + 1e-6},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) bad += mismatches(&c, &w[i]);
    assert_int_equal(bad, 0);
    /* balanced reads q, k, v through strides: no layout step at all */
    assert_int_equal(c.nsteps, 8);
    for (int i = 0; i < c.nsteps; i++) assert_null(strstr(c.steps[i].name, "layout"));
    /* no copy ceiling stored: the read one stands in; no ceilings at all: work only */
    kk_bench_ceilings read_only = g_ceil;
    read_only.copy_gbs = 0;
    kk_assert_ok(kk_decoder_predict(d, 1, 1, 7, &read_only, 0, &c));
    assert_true(fabs(step(&c, "rope + kv append")->predicted_s - 1024 / 2e9) < 1e-18);
    kk_assert_ok(kk_decoder_predict(d, 1, 1, 7, NULL, 0, &c));
    assert_true(c.predicted_s == -1 && step(&c, "qkv_proj")->predicted_s == -1);
    assert_true(step(&c, "qkv_proj")->flops == 16384 && step(&c, "qkv_proj")->bound[0] == '\0');
    /* errors name the argument */
    kk_assert_status(kk_decoder_predict(d, 0, 1, 0, NULL, 0, &c), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "batch = 0");
    kk_assert_status(kk_decoder_predict(d, 1, 1, -1, NULL, 0, &c), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "cached = -1");
    kk_assert_status(kk_decoder_predict(d, 1, 1, 0, NULL, -1, &c), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "launch_floor_s");
    kk_assert_status(kk_decoder_predict(NULL, 1, 1, 0, NULL, 0, &c), KK_ERR_INVALID_ARGUMENT);
    kk_decoder_free(d);
}

static kk_tensor *hidden(int64_t B, int64_t S, float scale) {
    kk_tensor *x = NULL;
    kk_assert_ok(kk_tensor_create("cpu", KK_DTYPE_F32, 3, (int64_t[]){B, S, 64}, &x));
    for (int64_t i = 0; i < B * S * 64; i++) ((float *)x->data)[i] = scale * mt_value(3, i);
    return x;
}

static void a_profile_measures_what_runs_and_changes_nothing(void **state) {
    (void)state;
    kk_decoder *d = decoder(KK_OPT_CONSERVATIVE), *fresh = decoder(KK_OPT_CONSERVATIVE);
    kk_tensor *x = hidden(2, 3, 0.5f), *y = hidden(2, 3, 0), *y2 = hidden(2, 3, 0);
    kk_bench_options o;
    kk_decoder_profile_options(&o, 0.05);
    /* samples at a power-capped clock are the model's time: not dropped */
    assert_true(o.throttle_fraction == 0);
    assert_true(o.time_budget_s == 0.05 && o.batch == 1 && o.blocking_kernel == 0);
    double floor_s = 0;
    kk_assert_ok(kk_decoder_launch_floor(d, &o, &floor_s));
    printf("launch floor on the CPU: %.3g s\n", floor_s);
    assert_true(floor_s > 0 && floor_s < 0.5);
    kk_decoder_cost *c = calloc(2, sizeof *c);
    kk_assert_ok(kk_decoder_profile(d, x, &g_ceil, floor_s, &o, &c[0]));
    assert_int_equal(kk_decoder_length(d), 0); /* the profile leaves the cache as it was */
    double sum = 0;
    for (int i = 0; i < c[0].nsteps; i++) {
        const kk_step_cost *s = &c[0].steps[i];
        assert_true(s->m.n >= 1 && s->measured_s > 0);
        sum += s->measured_s;
    }
    assert_true(fabs(c[0].measured_s - sum) <= 1e-12 * sum);
    /* a call the decoder refuses: the profile fails with its error, and is off after */
    kk_tensor *big = hidden(3, 1, 0.5f);
    kk_decoder_cost bad;
    kk_assert_status(kk_decoder_profile(d, big, &g_ceil, floor_s, &o, &bad),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "batch = 3");
    assert_int_equal(bad.nsteps, 0);
    kk_tensor_destroy(big);
    /* the real call after it gives a fresh decoder's bits */
    kk_assert_ok(kk_decoder_prefill(d, x, y));
    kk_assert_ok(kk_decoder_prefill(fresh, x, y2));
    assert_memory_equal(y->data, y2->data, kk_tensor_nbytes(y));
    /* a decode step's profile: the layouts are skipped, not measured */
    kk_tensor *x1 = hidden(2, 1, 0.25f);
    kk_assert_ok(kk_decoder_profile(d, x1, &g_ceil, floor_s, &o, &c[1]));
    assert_int_equal(c[1].cached, 3);
    assert_int_equal(step(&c[1], "layout q")->m.n, 0);
    assert_true(step(&c[1], "layout q")->measured_s == -1);
    assert_true(step(&c[1], "attention")->measured_s > 0);
    /* results: one benchmark per measured step, and the model member */
    kk_bench_environment env;
    kk_assert_ok(kk_bench_environment_capture("cpu", 0, NULL, NULL, 0, &env));
    kk_bench_results *r = NULL, *back = NULL;
    kk_assert_ok(kk_bench_results_create(&env, &r));
    kk_assert_ok(kk_decoder_cost_add_results(&c[0], "prefill", r));
    kk_assert_ok(kk_decoder_cost_add_results(&c[1], "decode", r));
    assert_int_equal(r->count, 18 + 16);
    const kk_bench_entry *e = kk_bench_results_find(r, "model/conservative/prefill/02 q_proj");
    assert_non_null(e);
    assert_true(e->flops == 2.0 * 6 * 64 * 64);
    const kk_decoder_cost *costs[] = {&c[0], &c[1]};
    const char *phases[] = {"prefill", "decode"};
    char *json = NULL, *md = NULL;
    kk_assert_ok(kk_decoder_results_json(r, costs, phases, 2, &json));
    kk_assert_contains(json, "\"model\"");
    kk_assert_contains(json, "\"phases\"");
    kk_assert_ok(kk_bench_results_from_json(json, strlen(json), &back));
    assert_int_equal(back->count, r->count);
    kk_assert_ok(kk_decoder_cost_markdown(costs, phases, 2, &env, &md));
    kk_assert_contains(md, "## prefill: conservative, B=2 S=3 after 0 cached");
    kk_assert_contains(md, "| 10 | attention | `kk_attention` | 1 |");
    free(json), free(md);
    char *none = NULL;
    kk_assert_status(kk_decoder_results_json(r, costs, phases, -1, &none), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "n");
    kk_assert_status(kk_decoder_cost_markdown(costs, phases, -1, &env, &none),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "0 or more");
    kk_bench_results_free(r), kk_bench_results_free(back);
    kk_bench_environment_free(&env);
    kk_decoder_cost_free(&c[0]), kk_decoder_cost_free(&c[1]);
    free(c);
    kk_tensor_destroy(x), kk_tensor_destroy(x1), kk_tensor_destroy(y), kk_tensor_destroy(y2);
    kk_decoder_free(d), kk_decoder_free(fresh);
}

static void speedup_is_the_ratio_of_totals(void **state) {
    (void)state;
    kk_decoder_cost a = {0}, b = {0};
    a.measured_s = 3, a.predicted_s = 2, b.measured_s = 1.5, b.predicted_s = 1;
    double m, p;
    kk_decoder_cost_speedup(&a, &b, &m, &p);
    assert_true(m == 2 && p == 2);
    b.measured_s = -1;
    kk_decoder_cost_speedup(&a, &b, &m, &p);
    assert_true(m == -1 && p == 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prefill_costs_match_the_hand_values),
        cmocka_unit_test(decode_costs_match_the_hand_values),
        cmocka_unit_test(a_profile_measures_what_runs_and_changes_nothing),
        cmocka_unit_test(speedup_is_the_ratio_of_totals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
