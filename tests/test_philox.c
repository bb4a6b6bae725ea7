/* labels: unit cpu */
/* Philox4x32-10 against Random123's known-answer vectors, and the attention
 * dropout mask built on it: a pure function of its coordinates, dropping the
 * requested share, and applied by the float64 reference as documented. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/philox.h"
#include "opdef/all_ops.h"
#include "kernelkit/harness.h"

static void known_answers(void **state) {
    (void)state;
    static const struct {
        uint32_t c[4], k[2], want[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
         {0xffffffffu, 0xffffffffu},
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
         {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (size_t t = 0; t < sizeof kat / sizeof kat[0]; t++) {
        const kk__philox4 c = {{kat[t].c[0], kat[t].c[1], kat[t].c[2], kat[t].c[3]}};
        const kk__philox4 r = kk__philox4x32_10(c, kat[t].k[0], kat[t].k[1]);
        for (int i = 0; i < 4; i++) assert_int_equal(r.v[i], kat[t].want[i]);
    }
}

static void mask_is_documented_function(void **state) {
    (void)state;
    const uint64_t seed = 0x123456789abcdefull, offset = 0x500000007ull;
    const uint32_t thr = kk__dropout_threshold(0.25);
    for (uint32_t j = 0; j < 64; j++) {
        const kk__philox4 c = {{j / 4, 7, 11, (uint32_t)offset}};
        const kk__philox4 r =
            kk__philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32) ^ (uint32_t)(offset >> 32));
        assert_int_equal(kk__dropout_keep(seed, offset, 11, 7, j, thr), r.v[j % 4] >= thr);
    }
    /* the offset's high word changes the mask (it is in the key) */
    int differ = 0;
    for (uint32_t j = 0; j < 256; j++)
        differ |= kk__dropout_keep(seed, 7, 0, 0, j, thr) !=
                  kk__dropout_keep(seed, 7 + (1ull << 32), 0, 0, j, thr);
    assert_true(differ);
    assert_int_equal(kk__dropout_threshold(0.0), 0u);
    assert_int_equal(kk__dropout_threshold(0.5), 0x80000000u);
}

static void mask_drops_requested_share(void **state) {
    (void)state;
    const double ps[] = {0.1, 0.5, 0.9};
    for (size_t t = 0; t < 3; t++) {
        const uint32_t thr = kk__dropout_threshold(ps[t]);
        long kept = 0;
        const long n = 1 << 18;
        for (long e = 0; e < n; e++)
            kept += kk__dropout_keep(42, 0, (uint32_t)(e >> 16), (uint32_t)((e >> 8) & 255),
                                     (uint32_t)(e & 255), thr);
        /* binomial: 6 standard deviations */
        const double want = (1 - ps[t]) * n, sd = sqrt(n * ps[t] * (1 - ps[t]));
        assert_true(fabs(kept - want) < 6 * sd);
    }
}

/* The reference with dropout: o = sum_j keep_j * p_j / (1 - p) * v_j, checked
 * against the undropped reference on a case with one key row of V per key. */
static void reference_applies_mask(void **state) {
    (void)state;
    const kk_op *op;
    kk_assert_ok(kk_op_find("attention", &op));
    kk_op_params p0, p1;
    const char *base = "B=1 Hq=2 Hkv=1 Sq=3 Sk=40 D=16 dtype=f32 lse=1";
    kk_assert_ok(kk_op_params_parse(op, base, &p0));
    char text[160];
    snprintf(text, sizeof text, "%s dropout=0.3 seed=99 offset=5", base);
    kk_assert_ok(kk_op_params_parse(op, text, &p1));
    enum { SQ = 3, SK = 40, D = 16, H = 2 };
    static double q[H * SQ * D], k[SK * D], v[SK * D], o0[H * SQ * D], o1[H * SQ * D], l0[H * SQ],
        l1[H * SQ];
    srand(3);
    for (int i = 0; i < H * SQ * D; i++) q[i] = rand() / (double)RAND_MAX - 0.5;
    for (int i = 0; i < SK * D; i++) k[i] = rand() / (double)RAND_MAX - 0.5;
    /* v row j is the unit vector e_(j % D) times (j + 1): o[d] sums the weights
   * of keys j = d mod D */
    for (int j = 0; j < SK; j++) v[j * D + j % D] = j + 1;
    const double *in[3] = {q, k, v};
    kk_assert_ok(kk_op_reference(&p0, in, (double *const[]){o0, l0}));
    kk_assert_ok(kk_op_reference(&p1, in, (double *const[]){o1, l1}));
    const uint32_t thr = kk__dropout_threshold(0.3);
    int dropped = 0;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < SQ; i++) {
            const int row = h * SQ + i;
            assert_true(l0[row] == l1[row]);
            /* recover the weights: undropped weight of key j from o0 is not separable
       * when two keys share d, so compare the sums per d */
            for (int d = 0; d < D; d++) {
                /* o0[d] = sum_{j%D==d} w_j (j+1); o1[d] = sum keep_j w_j (j+1) / 0.7 */
                double w_sum_kept = 0, w_sum = 0;
                for (int j = d; j < SK; j += D) {
                    /* weight of key j alone: recompute from the scores */
                    double dot = 0, mx = -INFINITY, s[SK], tot = 0;
                    for (int jj = 0; jj < SK; jj++) {
                        dot = 0;
                        for (int e = 0; e < D; e++) dot += q[row * D + e] * k[jj * D + e];
                        s[jj] = dot / 4.0;
                        mx = fmax(mx, s[jj]);
                    }
                    for (int jj = 0; jj < SK; jj++) tot += exp(s[jj] - mx);
                    const double w = exp(s[j] - mx) / tot * (j + 1);
                    const int keep =
                        kk__dropout_keep(99, 5, (uint32_t)h, (uint32_t)i, (uint32_t)j, thr);
                    dropped += !keep;
                    w_sum += w;
                    if (keep) w_sum_kept += w / 0.7;
                }
                assert_true(fabs(o0[row * D + d] - w_sum) < 1e-12);
                assert_true(fabs(o1[row * D + d] - w_sum_kept) < 1e-12);
            }
        }
    assert_true(dropped > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_answers),
        cmocka_unit_test(mask_is_documented_function),
        cmocka_unit_test(mask_drops_requested_share),
        cmocka_unit_test(reference_applies_mask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
