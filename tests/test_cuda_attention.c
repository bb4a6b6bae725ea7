/* labels: gpu */
/* The CUDA attention kernel against the float64 reference, on fresh random
 * inputs (the seed is printed; KK_TEST_SEED replays it): the smoke and
 * correctness suites and 500 fuzz cases (40 under KK_TEST_QUICK, as the
 * sanitizer runs use). bf16 and f16 cases must pass; f32 and head dims that
 * are not multiples of 8 are outside the kernel and must say so (SKIP), and
 * through kk_op_run they run on the CPU with one warning. Dropout: the CUDA
 * kernel drops exactly the elements the CPU kernel drops. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernelkit/harness_run.h"
#include "kernelkit/ops.h"

static uint64_t run_seed;
static const kk_op *attention;
static const kk_run_options on_gpu = {.device = "cuda:0", .check_memory = 1};

static int in_kernel(const kk_op_params *p) {
  const kk_dtype dt = (kk_dtype)kk_op_params_int(p, "dtype");
  return (dt == KK_DTYPE_BF16 || dt == KK_DTYPE_F16) && kk_op_params_int(p, "D") % 8 == 0;
}

/* PASS when the kernel covers the case, SKIP saying why when it does not. */
static void expect_verdict(const kk_case *c, int *passed) {
  kk_case_result r;
  kk_assert_ok(kk_case_run(c, &on_gpu, &r));
  if (in_kernel(&c->params)) {
    if (r.status != KK_CASE_PASS)
      fail_msg("%s (seed %llu): %s %s", c->name, (unsigned long long)c->seed,
               kk_case_status_name(r.status), r.message);
    (*passed)++;
  } else {
    if (r.status != KK_CASE_SKIP)
      fail_msg("%s: %s, expected SKIP", c->name, kk_case_status_name(r.status));
    kk_assert_contains(r.message, "does not support");
  }
}

static void suites_pass(void **state) {
  (void)state;
  const unsigned mask = (1u << KK_SUITE_SMOKE) | (1u << KK_SUITE_CORRECTNESS);
  int n = 0;
  kk_assert_ok(kk_suite_cases(mask, attention, run_seed, KK_DIST_FULL, NULL, 0, &n));
  kk_case *cases = calloc((size_t)n, sizeof *cases);
  assert_non_null(cases);
  kk_assert_ok(kk_suite_cases(mask, attention, run_seed, KK_DIST_FULL, cases, n, &n));
  int passed = 0;
  for (int i = 0; i < n; i++) expect_verdict(&cases[i], &passed);
  printf("suites: %d of %d cases in the kernel passed\n", passed, n);
  assert_true(passed > 0);
  free(cases);
}

static void fuzz_passes(void **state) {
  (void)state;
  const int count = getenv("KK_TEST_QUICK") ? 40 : 500;
  int passed = 0;
  for (int i = 0; i < count; i++) {
    kk_case c;
    kk_assert_ok(kk_case_fuzz(attention, run_seed, i, KK_DIST_FULL, NULL, &c));
    expect_verdict(&c, &passed);
  }
  printf("fuzz: %d of %d cases in the kernel passed (seed %llu)\n", passed, count,
         (unsigned long long)run_seed);
  assert_true(passed > count / 4);
}

/* With V = the identity (Sk = D keys), o[i][j] is row i's weight of key j:
 * exactly 0 where dropped, positive where kept. The two kernels must agree on
 * which, element for element. */
static void dropout_mask_matches_cpu(void **state) {
  (void)state;
  enum { B = 2, H = 3, S = 64, D = 64 };
  kk_op_params p;
  kk_assert_ok(kk_op_params_parse(attention,
                                  "B=2 Hq=3 Hkv=3 Sq=64 Sk=64 D=64 dtype=bf16 dropout=0.3 "
                                  "seed=123456789012 offset=77",
                                  &p));
  kk_op_tensor t[KK_OP_MAX_TENSORS];
  int n = 0;
  kk_assert_ok(kk_op_tensors(&p, t, &n));
  static uint16_t q[B * H * S * D], k[B * H * S * D], v[B * H * S * D];
  static uint16_t o_cpu[B * H * S * D], o_gpu[B * H * S * D];
  kk_assert_ok(kk_case_fill_inputs(&p, run_seed, KK_DIST_FULL, (void *[]){q, k, v}));
  float one = 1.0f, zero = 0.0f;
  uint16_t b1, b0;
  kk_assert_ok(kk_convert_host(&one, KK_DTYPE_F32, &b1, KK_DTYPE_BF16, 1));
  kk_assert_ok(kk_convert_host(&zero, KK_DTYPE_F32, &b0, KK_DTYPE_BF16, 1));
  for (int i = 0; i < B * H * S * D; i++) v[i] = (i / D) % S == i % D ? b1 : b0;
  kk_assert_ok(kk_run_kernel_host(&p, "cpu", (void *[]){q, k, v, o_cpu}));
  kk_assert_ok(kk_run_kernel_host(&p, "cuda:0", (void *[]){q, k, v, o_gpu}));
  int dropped = 0;
  for (int i = 0; i < B * H * S * D; i++) {
    const int cpu_zero = (o_cpu[i] & 0x7FFF) == 0, gpu_zero = (o_gpu[i] & 0x7FFF) == 0;
    if (cpu_zero != gpu_zero)
      fail_msg("element %d: cpu %s, cuda %s", i, cpu_zero ? "dropped" : "kept",
               gpu_zero ? "dropped" : "kept");
    dropped += cpu_zero;
  }
  /* about 30% of the weights dropped: the mask is not empty or full */
  assert_true(dropped > B * H * S * D / 5 && dropped < B * H * S * D * 2 / 5);
}

static int warnings;
static void count_sink(const kk_log_record *r, void *user) {
  (void)user;
  if (r->level == KK_LOG_WARN && strcmp(r->logger, "kernelkit.ops") == 0) warnings++;
}

/* An f32 attention on CUDA tensors: the kernel declines, kk_op_run runs the
 * CPU kernel instead, warning once; the result is the CPU kernel's. */
static void f32_falls_back_to_cpu(void **state) {
  (void)state;
  kk_op_params p;
  kk_assert_ok(kk_op_params_parse(attention, "B=1 Hq=2 Hkv=1 Sq=5 Sk=9 D=16 dtype=f32 causal=1",
                                  &p));
  static float q[2 * 5 * 16], k[9 * 16], v[9 * 16], o_cpu[2 * 5 * 16], o_gpu[2 * 5 * 16];
  kk_assert_ok(kk_case_fill_inputs(&p, run_seed, KK_DIST_FULL, (void *[]){q, k, v}));
  kk_assert_ok(kk_run_kernel_host(&p, "cpu", (void *[]){q, k, v, o_cpu}));
  warnings = 0;
  kk_log_set_sink(count_sink, NULL);
  kk_assert_ok(kk_run_kernel_host(&p, "cuda:0", (void *[]){q, k, v, o_gpu}));
  kk_assert_ok(kk_run_kernel_host(&p, "cuda:0", (void *[]){q, k, v, o_gpu}));
  kk_log_set_sink(NULL, NULL);
  assert_int_equal(warnings, 1);
  assert_memory_equal(o_cpu, o_gpu, sizeof o_cpu);
}


/* q, k, v, o as [B,S,H,D] buffers seen as [B,H,S,D] views (no copy): the
 * kernel reads the strides and gives the very bits it gives on contiguous
 * tensors. With 8-byte aligned rows (a view starting 4 elements in) the CUDA
 * kernel declines and kk_op_run runs the CPU kernel on contiguous copies. */
static kk_tensor *bshd_view(kk_tensor *bshd) {
  kk_tensor *v = NULL;
  kk_assert_ok(kk_tensor_transpose(bshd, 1, 2, &v));
  return v;
}

static void strided_layout_matches_contiguous(void **state) {
  (void)state;
  enum { B = 2, S = 70, Hq = 4, Hkv = 2, D = 64 };
  kk_op_params p;
  kk_assert_ok(kk_op_params_parse(attention, "B=2 Hq=4 Hkv=2 Sq=70 Sk=70 D=64 causal=1 dtype=bf16", &p));
  static uint16_t q[B * Hq * S * D], k[B * Hkv * S * D], v[B * Hkv * S * D];
  static uint16_t o_contig[B * Hq * S * D], o_strided[B * Hq * S * D];
  kk_assert_ok(kk_case_fill_inputs(&p, run_seed, KK_DIST_FULL, (void *[]){q, k, v}));
  kk_assert_ok(kk_run_kernel_host(&p, "cuda:0", (void *[]){q, k, v, o_contig}));
  /* the same data in [B,S,H,D] buffers on the GPU, through [B,H,S,D] views */
  const int64_t hq_shape[4] = {B, Hq, S, D}, hkv_shape[4] = {B, Hkv, S, D};
  kk_tensor *hq_host, *hk_host, *hv_host, *ho_host;
  kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_BF16, 4, hq_shape, NULL, q, &hq_host));
  kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_BF16, 4, hkv_shape, NULL, k, &hk_host));
  kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_BF16, 4, hkv_shape, NULL, v, &hv_host));
  kk_assert_ok(kk_tensor_wrap("cpu", KK_DTYPE_BF16, 4, hq_shape, NULL, o_strided, &ho_host));
  kk_tensor *bq, *bk, *bv, *bo;
  kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, S, Hq, D}, &bq));
  kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, S, Hkv, D}, &bk));
  kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, S, Hkv, D}, &bv));
  kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, S, Hq, D}, &bo));
  kk_tensor *vq = bshd_view(bq), *vk = bshd_view(bk), *vv = bshd_view(bv), *vo = bshd_view(bo);
  assert_false(kk_tensor_is_contiguous(vq));
  kk_assert_ok(kk_tensor_copy(vq, hq_host));
  kk_assert_ok(kk_tensor_copy(vk, hk_host));
  kk_assert_ok(kk_tensor_copy(vv, hv_host));
  kk_attention_options opt;
  kk_attention_options_init(&opt);
  opt.causal = 1;
  kk_assert_ok(kk_attention(vq, vk, vv, vo, NULL, &opt, NULL));
  kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
  kk_assert_ok(kk_tensor_copy(ho_host, vo));
  assert_memory_equal(o_contig, o_strided, sizeof o_contig); /* the GPU's own bits */

  /* rows 8 bytes off alignment: the CPU kernel on contiguous copies, warned */
  kk_tensor *wide_q, *wq, *vwq;
  kk_assert_ok(kk_tensor_create("cuda:0", KK_DTYPE_BF16, 4, (int64_t[]){B, S, Hq, D + 8}, &wide_q));
  kk_assert_ok(kk_tensor_slice(wide_q, 3, 4, 4 + D, 1, &wq));
  vwq = bshd_view(wq);
  kk_assert_ok(kk_tensor_copy(vwq, hq_host));
  static uint16_t o_cpu[B * Hq * S * D];
  kk_assert_ok(kk_run_kernel_host(&p, "cpu", (void *[]){q, k, v, o_cpu}));
  /* the two kernels round differently somewhere, so the bits tell who ran */
  assert_true(memcmp(o_cpu, o_contig, sizeof o_cpu) != 0);
  kk_assert_ok(kk_attention(vwq, vk, vv, vo, NULL, &opt, NULL));
  kk_assert_ok(kk_op_synchronize("cuda:0", NULL));
  kk_assert_ok(kk_tensor_copy(ho_host, vo));
  assert_memory_equal(o_cpu, o_strided, sizeof o_cpu); /* the CPU kernel's bits */
  kk_tensor *all[] = {hq_host, hk_host, hv_host, ho_host, bq, bk, bv, bo, vq, vk, vv, vo, wide_q, wq, vwq};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kk_tensor_destroy(all[i]);
}

int main(void) {
  if (kk_test_no_gpu()) return KK_TEST_SKIP;
  const char *env = getenv("KK_TEST_SEED");
  run_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
  printf("test_cuda_attention: seed %llu (KK_TEST_SEED=%llu replays it)\n",
         (unsigned long long)run_seed, (unsigned long long)run_seed);
  if (kk_op_find("attention", &attention) != KK_OK) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(suites_pass),
      cmocka_unit_test(fuzz_passes),
      cmocka_unit_test(dropout_mask_matches_cpu),
      cmocka_unit_test(f32_falls_back_to_cpu),
      cmocka_unit_test(strided_layout_matches_contiguous),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
