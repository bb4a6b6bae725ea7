/* labels: gpu */
/* Conversions on the GPU give the CPU's bits: every code of every narrow
 * format decoded, 10M random f32 inputs encoded into every format, and every
 * pair of dtypes on random data, each compared bit for bit with kk_convert_host.
 * Then KernelKit's device encoders are compared with NVIDIA's own (PTX
 * cvt.rn.satfinite through cuda_fp8.h on sm_89+, cuda_fp16/bf16/fp4.h) on all
 * 2^32 f32 inputs. Skips (77) with no GPU. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/dtype_cuda.h"

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static uint64_t next_u64(void) { /* splitmix64 */
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const kk_dtype k_narrow[] = {KK_DTYPE_F16, KK_DTYPE_BF16, KK_DTYPE_FP8_E4M3,
                                    KK_DTYPE_FP8_E5M2, KK_DTYPE_E2M1};
#define N_NARROW (sizeof k_narrow / sizeof k_narrow[0])

/* Convert on the CPU and on cuda:0; the bytes must be equal. */
static void same_on_both(const void *src, kk_dtype s, kk_dtype d, size_t count) {
    const size_t bytes = kk_dtype_bytes(d, count);
    uint8_t *cpu = malloc(bytes), *gpu = malloc(bytes);
    assert_non_null(cpu);
    assert_non_null(gpu);
    memset(cpu, 0x11, bytes);
    memset(gpu, 0x22, bytes);
    kk_assert_ok(kk_convert_host(src, s, cpu, d, count));
    kk_assert_ok(kk__cuda_convert_host_buffers(0, src, s, gpu, d, count));
    if (memcmp(cpu, gpu, bytes) != 0) {
        size_t i = 0;
        while (cpu[i] == gpu[i]) i++;
        fail_msg("%s -> %s, %zu elements: byte %zu differs: cpu 0x%02x, gpu 0x%02x",
                 kk_dtype_name(s), kk_dtype_name(d), count, i, cpu[i], gpu[i]);
    }
    free(cpu);
    free(gpu);
}

static void every_code_decodes_the_same(void **state) {
    (void)state;
    for (size_t k = 0; k < N_NARROW; k++) {
        const kk_dtype t = k_narrow[k];
        const size_t codes = (size_t)1 << kk_dtype_bits(t);
        /* every code, as the format's own buffer */
        uint8_t *src = malloc(2 * codes);
        assert_non_null(src);
        for (size_t c = 0; c < codes; c++) {
            if (kk_dtype_bits(t) == 16)
                ((uint16_t *)(void *)src)[c] = (uint16_t)c;
            else if (kk_dtype_bits(t) == 8)
                src[c] = (uint8_t)c;
            else if (c % 2 == 0)
                src[c / 2] = (uint8_t)(c | (c + 1) << 4);
        }
        for (int d = 0; d < KK_DTYPE_COUNT; d++) same_on_both(src, t, (kk_dtype)d, codes);
        free(src);
    }
}

static void random_f32_encode_the_same(void **state) {
    (void)state;
    const size_t n = 10000000 + 1; /* odd: packed e2m1's last byte */
    uint32_t *in = malloc(n * sizeof *in);
    assert_non_null(in);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_u64();
        uint32_t u = (uint32_t)r;
        if ((r >> 32) & 1) u = (u & 0x807FFFFFu) | (uint32_t)(87 + (r >> 40) % 61) << 23;
        in[i] = u;
    }
    /* the edges: zeros, infinities, NaNs, the largest and smallest */
    const uint32_t edges[] = {0x00000000u,
                              0x80000000u,
                              0x7F800000u,
                              0xFF800000u,
                              0x7FC00000u,
                              0xFFC00000u,
                              0x7F800001u,
                              0xFFFFFFFFu,
                              0x7F7FFFFFu,
                              0x00000001u,
                              0x43E80000u /* 464 */,
                              0x47700000u /* 61440 */,
                              0x477FF000u /* 65520 */,
                              0x40E00000u /* 7 */};
    memcpy(in, edges, sizeof edges);
    for (size_t k = 0; k < N_NARROW; k++) same_on_both(in, KK_DTYPE_F32, k_narrow[k], n);
    free(in);
}

static void every_pair_the_same(void **state) {
    (void)state;
    const size_t n = 100001;
    uint8_t *src = malloc(n * 8);
    assert_non_null(src);
    for (int s = 0; s < KK_DTYPE_COUNT; s++) {
        /* random bits of the source type; f64 and f32 also get values near the
         * narrow formats' ranges and integers */
        for (size_t i = 0; i < n * 8; i += 8) {
            uint64_t r = next_u64();
            memcpy(src + i, &r, 8);
        }
        if (s == KK_DTYPE_F64 || s == KK_DTYPE_F32)
            for (size_t i = 0; i < n; i += 2) {
                uint64_t r = next_u64();
                double v =
                    (double)(int64_t)(r >> 20) * (double)(1ull << (r & 31)) / (double)(1ull << 40);
                if (s == KK_DTYPE_F64)
                    memcpy(src + 8 * i, &v, 8);
                else {
                    float f = (float)v;
                    memcpy(src + 4 * i, &f, 4);
                }
            }
        for (int d = 0; d < KK_DTYPE_COUNT; d++) same_on_both(src, (kk_dtype)s, (kk_dtype)d, n);
    }
    free(src);
}

static void matches_nvidia_on_every_f32(void **state) {
    (void)state;
    /* 2^32 inputs per format: minutes under compute-sanitizer, which sets this. */
    if (getenv("KK_TEST_QUICK")) skip();
    for (size_t k = 0; k < N_NARROW; k++) {
        const kk_dtype t = k_narrow[k];
        kk__nvidia_compare r;
        kk_assert_ok(kk__cuda_convert_compare_nvidia(0, t, &r));
        print_message(
            "%-8s vs NVIDIA: %llu f32 inputs, %llu differ (+%llu NaN inputs), "
            "%llu codes decoded, %llu differ\n",
            kk_dtype_name(t), (unsigned long long)r.encode_checked,
            (unsigned long long)r.encode_mismatches, (unsigned long long)r.encode_nan_mismatches,
            (unsigned long long)r.decode_checked, (unsigned long long)r.decode_mismatches);
        assert_int_equal(r.encode_checked, 1ull << 32);
        if (r.encode_mismatches)
            fail_msg("%s: f32 0x%08x: ours 0x%x, NVIDIA's 0x%x", kk_dtype_name(t), r.first_input,
                     r.first_ours, r.first_theirs);
        if (r.decode_mismatches)
            fail_msg("%s: code 0x%x decodes differently", kk_dtype_name(t), r.first_code);
        /* NaN: fp8 and e2m1 give NVIDIA's exact code; f16/bf16 keep the NaN's sign
         * and payload where NVIDIA writes its canonical NaN (docs/formats.md) */
        if (t == KK_DTYPE_FP8_E4M3 || t == KK_DTYPE_FP8_E5M2 || t == KK_DTYPE_E2M1)
            assert_int_equal(r.encode_nan_mismatches, 0);
    }
}

static void bad_arguments(void **state) {
    (void)state;
    float f = 1.0f;
    uint16_t h = 0;
    kk_assert_status(kk__cuda_convert_host_buffers(0, NULL, KK_DTYPE_F32, &h, KK_DTYPE_F16, 1),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "src_host");
    kk_assert_status(kk__cuda_convert_host_buffers(0, &f, KK_DTYPE_F32, &h, KK_DTYPE_COUNT, 1),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "dst_dtype");
    kk_assert_status(kk__cuda_convert_host_buffers(-1, &f, KK_DTYPE_F32, &h, KK_DTYPE_F16, 1),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "device");
    kk_assert_ok(kk__cuda_convert_host_buffers(0, NULL, KK_DTYPE_F32, NULL, KK_DTYPE_F16, 0));
    kk__nvidia_compare r;
    kk_assert_status(kk__cuda_convert_compare_nvidia(0, KK_DTYPE_F32, &r), KK_ERR_INVALID_ARGUMENT);
}

int main(void) {
    if (kk_test_no_gpu()) {
        /* without a GPU the entry points say so */
        float f = 1.0f;
        uint16_t h = 0;
        kk_status st = kk__cuda_convert_host_buffers(0, &f, KK_DTYPE_F32, &h, KK_DTYPE_F16, 1);
        if (st != KK_ERR_CUDA_UNAVAILABLE) {
            printf("FAIL: kk__cuda_convert_host_buffers without a GPU returned %s\n",
                   kk_status_name(st));
            return 1;
        }
        return KK_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_code_decodes_the_same),
        cmocka_unit_test(random_f32_encode_the_same),
        cmocka_unit_test(every_pair_the_same),
        cmocka_unit_test(matches_nvidia_on_every_f32),
        cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
