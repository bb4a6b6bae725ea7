/* The built-in suites, as data: one row per (suite, op, shape).
 *
 * A row's params leave out a DTYPE parameter to mean "every dtype it accepts"
 * (src/harness/case_suite.c expands them), so `smoke/gemm/5x7x33` runs in
 * f32, f16 and bf16 and convert's rows cover all 49 (src, dst) pairs.
 * Sources of the shapes: docs/harness.md ("Cases and suites") and ANCHORS.md:
 *   - nvfp4_gemv: GPU MODE's test shapes (correctness, both scale layouts) and
 *     benchmark shapes (performance); the seeds' smoke/correctness/performance.
 *   - attention: ANCHORS' forward table (bf16, 16k tokens, hidden 2048), its
 *     decode table, the seeds' configuration, and the seeds' 27-config matrix.
 *   - linear: ANCHORS' Linear + activation table; gemm: the 8192^3 ceiling.
 * Performance rows are for `kernelkit bench`; `kernelkit check` skips those
 * whose float64 reference is too slow (--max-ref-gflop). */
#include <stddef.h>

#include "kernelkit/harness_run.h"

#define S KK_SUITE_SMOKE
#define C KK_SUITE_CORRECTNESS
#define P KK_SUITE_PERFORMANCE
#define F27 KK_SUITE_ATTENTION_FUZZ27

/* clang-format off */
/* One cell of the seeds' attention matrix: D = 64, fp16, non-causal. */
#define FUZZ27(s, b, h)                                                                            \
    {F27, "attention", "S" #s "-B" #b "-H" #h,                                                     \
     "B=" #b " Hq=" #h " Hkv=" #h " Sq=" #s " Sk=" #s " D=64 causal=0 dtype=f16"}
#define FUZZ27_B(s, b) FUZZ27(s, b, 4), FUZZ27(s, b, 8), FUZZ27(s, b, 16)
#define FUZZ27_S(s) FUZZ27_B(s, 16), FUZZ27_B(s, 32), FUZZ27_B(s, 48)

/* ANCHORS' forward table: B = 16384/S, H = 2048/D. */
#define FWD(d, c, s, b, h)                                                                         \
    {P, "attention", "fwd-d" #d "-causal" #c "-S" #s,                                              \
     "B=" #b " Hq=" #h " Hkv=" #h " Sq=" #s " Sk=" #s " D=" #d " causal=" #c " dtype=bf16"}
#define FWD_S(d, c, h)                                                                             \
    FWD(d, c, 512, 32, h), FWD(d, c, 2048, 8, h), FWD(d, c, 8192, 2, h), FWD(d, c, 16384, 1, h)

/* ANCHORS' decode table: one query token, H = 32, D = 128. */
#define DECODE(b, sk)                                                                              \
    {P, "attention", "decode-B" #b "-S" #sk,                                                       \
     "B=" #b " Hq=32 Hkv=32 Sq=1 Sk=" #sk " D=128 dtype=bf16"}

/* ANCHORS' Linear + activation table. */
#define LIN(m, n, k, act)                                                                          \
    {P, "linear", #m "x" #n "x" #k "-" #act,                                                       \
     "M=" #m " N=" #n " K=" #k " bias=1 activation=" #act " dtype=bf16"}
#define LIN3(m, n, k) LIN(m, n, k, none), LIN(m, n, k, gelu_tanh), LIN(m, n, k, silu)

/* GPU MODE's nvfp4_gemv test shapes (M, K, L), in both scale layouts. */
#define GM(i, m, k, l)                                                                             \
    {C, "nvfp4_gemv", "gpumode-test" #i "-plain",                                                  \
     "M=" #m " K=" #k " L=" #l " scale_layout=plain"},                                             \
    {C, "nvfp4_gemv", "gpumode-test" #i "-blocked",                                                \
     "M=" #m " K=" #k " L=" #l " scale_layout=blocked"}

#define GEMV(suite, label, m, k, l) {suite, "nvfp4_gemv", label, "M=" #m " K=" #k " L=" #l}
/* clang-format on */

static const kk_suite_entry entries[] = {
    /* ---- smoke: tiny, seconds for everything on a CPU ---- */
    {S, "convert", "n37", "n=37"},
    {S, "gemm", "1x1x1", "M=1 N=1 K=1"},
    {S, "gemm", "5x7x33", "M=5 N=7 K=33"},
    {S, "linear", "5x7x33-gelu_erf", "M=5 N=7 K=33 bias=1 activation=gelu_erf"},
    {S, "linear", "3x5x17-swiglu", "M=3 N=5 K=17 bias=1 activation=swiglu"},
    /* fp8_gemm: c_dtype left out, so bf16 and f32; e5m2 x e5m2 is invalid */
    {S, "fp8_gemm", "5x7x33-e4m3", "M=5 N=7 K=33 a_dtype=fp8_e4m3 b_dtype=fp8_e4m3"},
    {S, "fp8_gemm", "3x5x17-e5m2xe4m3", "M=3 N=5 K=17 a_dtype=fp8_e5m2 b_dtype=fp8_e4m3"},
    {S, "attention", "17x33-gqa-causal", "B=1 Hq=2 Hkv=1 Sq=17 Sk=33 D=64 causal=1"},
    {S, "attention", "9x9-d32-lse", "B=1 Hq=2 Hkv=2 Sq=9 Sk=9 D=32 lse=1"},
    /* attention_varlen: the lengths are the case's data (seqlens_q, seqlens_k) */
    {S, "attention_varlen", "3seq-gqa-causal",
     "Hq=2 Hkv=1 D=64 causal=1 seqlens_q=5:0:17 seqlens_k=9:4:17"},
    {S, "attention_varlen", "even4-d32-lse",
     "nseq=4 total_q=30 total_k=41 Hq=2 Hkv=2 D=32 lse=1 seqlens_q=none seqlens_k=none"},
    GEMV(S, "seeds-smoke1", 128, 256, 1),
    GEMV(S, "seeds-smoke2", 256, 512, 2),
    {S, "nvfp4_gemv", "129x256x1-blocked-global", "M=129 K=256 L=1 scale_layout=blocked global=1"},
    /* norms, softmax, rope, nvfp4_gemm (issue 5): odd n, rows of one, a partial chunk */
    {S, "rmsnorm", "3x37", "rows=3 n=37"},
    {S, "rmsnorm", "1x1", "rows=1 n=1"},
    {S, "softmax", "3x37", "rows=3 n=37"},
    {S, "softmax", "1x1", "rows=1 n=1"},
    {S, "layernorm", "3x37", "rows=3 n=37"},
    {S, "layernorm", "1x1-noaffine", "rows=1 n=1 affine=0"},
    {S, "rope", "1x2x5x64", "B=1 H=2 S=5 D=64"},
    {S, "rope", "1x1x3x10-gptj-r6", "B=1 H=1 S=3 D=10 rotary_dim=6 style=gptj"},
    {S, "nvfp4_gemm", "1x7x64", "M=1 N=7 K=64"},
    {S, "nvfp4_gemm", "3x33x128-global", "M=3 N=33 K=128 global=1"},

    /* ---- correctness: a spread of shapes ---- */
    {C, "convert", "n1", "n=1"},
    {C, "convert", "n4097", "n=4097"},
    {C, "gemm", "1x128x64", "M=1 N=128 K=64"},
    {C, "gemm", "127x129x65", "M=127 N=129 K=65"},
    {C, "gemm", "64x48x1000", "M=64 N=48 K=1000"},
    {C, "gemm", "1000x3x17", "M=1000 N=3 K=17"},
    {C, "gemm", "256x256x256", "M=256 N=256 K=256"},
    {C, "linear", "33x65x127-none", "M=33 N=65 K=127 bias=1 activation=none"},
    {C, "linear", "33x65x127-relu", "M=33 N=65 K=127 bias=1 activation=relu"},
    {C, "linear", "33x65x127-gelu_erf", "M=33 N=65 K=127 bias=1 activation=gelu_erf"},
    {C, "linear", "33x65x127-gelu_tanh", "M=33 N=65 K=127 bias=1 activation=gelu_tanh"},
    {C, "linear", "33x65x127-silu", "M=33 N=65 K=127 bias=1 activation=silu"},
    {C, "linear", "33x65x127-swiglu", "M=33 N=65 K=127 bias=1 activation=swiglu"},
    {C, "linear", "16x32x64-none-nobias", "M=16 N=32 K=64 bias=0 activation=none"},
    {C, "linear", "7x9x11-swiglu-nobias", "M=7 N=9 K=11 bias=0 activation=swiglu"},
    {C, "linear", "128x256x128-gelu_tanh", "M=128 N=256 K=128 bias=1 activation=gelu_tanh"},
    {C, "fp8_gemm", "1x1x1-e4m3", "M=1 N=1 K=1 a_dtype=fp8_e4m3 b_dtype=fp8_e4m3"},
    {C, "fp8_gemm", "127x129x65-e4m3", "M=127 N=129 K=65 a_dtype=fp8_e4m3 b_dtype=fp8_e4m3"},
    {C, "fp8_gemm", "64x48x1000-e4m3xe5m2", "M=64 N=48 K=1000 a_dtype=fp8_e4m3 b_dtype=fp8_e5m2"},
    {C, "fp8_gemm", "1000x3x17-e5m2xe4m3", "M=1000 N=3 K=17 a_dtype=fp8_e5m2 b_dtype=fp8_e4m3"},
    {C, "fp8_gemm", "1x4096x256-e4m3", "M=1 N=4096 K=256 a_dtype=fp8_e4m3 b_dtype=fp8_e4m3"},
    {C, "attention", "b2h4-128x128", "B=2 Hq=4 Hkv=4 Sq=128 Sk=128 D=64"},
    {C, "attention", "gqa8:2-100x300-causal", "B=2 Hq=8 Hkv=2 Sq=100 Sk=300 D=64 causal=1"},
    {C, "attention", "300x100-causal-lse", "B=1 Hq=2 Hkv=1 Sq=300 Sk=100 D=64 causal=1 lse=1"},
    {C, "attention", "200x200-window64-0-lse",
     "B=1 Hq=4 Hkv=4 Sq=200 Sk=200 D=64 window_left=64 window_right=0 lse=1"},
    {C, "attention", "d16", "B=1 Hq=2 Hkv=2 Sq=64 Sk=64 D=16"},
    {C, "attention", "d80-65x129", "B=1 Hq=2 Hkv=1 Sq=65 Sk=129 D=80"},
    {C, "attention", "d128-causal", "B=1 Hq=4 Hkv=2 Sq=96 Sk=96 D=128 causal=1"},
    {C, "attention", "d256", "B=1 Hq=2 Hkv=1 Sq=64 Sk=96 D=256"},
    {C, "attention", "decode-1x512", "B=4 Hq=8 Hkv=2 Sq=1 Sk=512 D=128"},
    /* the CUDA decode path (flash-decoding: group x Sq <= 16, Sk >= 512):
     * splits that end mid-block, GQA groups, causal and windows with Sq > 1,
     * fully masked splits, lse, dropout, head dims 64 and 128 (and 40 -> 64) */
    {C, "attention", "decode-gqa4-Sq3-4097-causal-lse",
     "B=2 Hq=8 Hkv=2 Sq=3 Sk=4097 D=128 causal=1 lse=1"},
    {C, "attention", "decode-mqa16-1000", "B=1 Hq=16 Hkv=1 Sq=1 Sk=1000 D=64"},
    {C, "attention", "decode-Sq16-777-window-lse",
     "B=3 Hq=2 Hkv=2 Sq=8 Sk=777 D=64 window_left=100 window_right=0 lse=1"},
    {C, "attention", "decode-d40-2053", "B=1 Hq=4 Hkv=4 Sq=2 Sk=2053 D=40"},
    {C, "attention", "decode-dropout-1500",
     "B=2 Hq=4 Hkv=2 Sq=2 Sk=1500 D=128 dropout=0.2 seed=99 offset=5"},
    {C, "attention", "scale0.5", "B=1 Hq=2 Hkv=2 Sq=33 Sk=47 D=64 scale=0.5"},
    /* attention_varlen: empty sequences (no queries, no keys: rows with o = 0
     * and lse = -inf), Sq != Sk per sequence under the bottom-right mask,
     * lengths next to the tile sizes, max_seqlen above the longest, dropout
     * with the sequence as the mask's batch, many one-row sequences (decode) */
    {C, "attention_varlen", "empty-seqs-causal-lse",
     "Hq=4 Hkv=2 D=64 causal=1 lse=1 seqlens_q=0:130:1:64:0 seqlens_k=3:200:1:0:0"},
    {C, "attention_varlen", "sq-gt-sk-causal-lse",
     "Hq=2 Hkv=1 D=64 causal=1 lse=1 seqlens_q=100:7:129 seqlens_k=30:7:128"},
    {C, "attention_varlen", "window32-0-d128-lse",
     "Hq=2 Hkv=2 D=128 window_left=32 window_right=0 lse=1 seqlens_q=129:64:1 seqlens_k=129:300:1"},
    {C, "attention_varlen", "d96-max-above",
     "Hq=4 Hkv=4 D=96 max_seqlen_q=300 max_seqlen_k=400 seqlens_q=129:127:1 seqlens_k=65:256:2"},
    {C, "attention_varlen", "d256-mqa-causal",
     "Hq=4 Hkv=1 D=256 causal=1 seqlens_q=33:64 seqlens_k=47:64"},
    {C, "attention_varlen", "d40-scale0.5", "Hq=2 Hkv=2 D=40 scale=0.5 seqlens_q=17:200 seqlens_k=33:190"},
    {C, "attention_varlen", "dropout-causal",
     "Hq=4 Hkv=2 D=64 causal=1 dropout=0.2 seed=99 offset=5 seqlens_q=100:0:37 seqlens_k=120:9:37"},
    {C, "attention_varlen", "decode-8x1-mqa",
     "Hq=8 Hkv=1 D=128 seqlens_q=1:1:1:1:1:1:1:1 seqlens_k=512:3:1000:77:256:1:130:64"},
    {C, "attention_varlen", "even16-causal",
     "nseq=16 total_q=1000 total_k=1000 Hq=2 Hkv=2 D=64 causal=1 seqlens_q=none seqlens_k=none"},
    GEMV(C, "seeds-correctness1", 128, 256, 1),
    GEMV(C, "seeds-correctness2", 256, 512, 4),
    GEMV(C, "seeds-correctness3", 512, 1024, 8),
    GEMV(C, "seeds-correctness4", 1024, 2048, 16),
    GM(1, 128, 256, 1),
    GM(2, 128, 1536, 1),
    GM(3, 128, 3072, 1),
    GM(4, 256, 7168, 1),
    GM(5, 2432, 4608, 2),
    GM(6, 384, 7168, 2),
    GM(7, 512, 512, 2),
    GM(8, 512, 4096, 2),
    GM(9, 512, 1536, 2),
    {C, "nvfp4_gemv", "1x64x1", "M=1 K=64 L=1"},
    {C, "nvfp4_gemv", "200x320x3-blocked-global", "M=200 K=320 L=3 scale_layout=blocked global=1"},
    /* norms, softmax, rope, nvfp4_gemm: size 1, odd sizes, chunk (256) edges, big eps */
    {C, "rmsnorm", "1x1", "rows=1 n=1"},
    {C, "rmsnorm", "1x4096", "rows=1 n=4096"},
    {C, "rmsnorm", "33x257", "rows=33 n=257"},
    {C, "rmsnorm", "7x1000-eps0.25", "rows=7 n=1000 eps=0.25"},
    {C, "rmsnorm", "2x65537", "rows=2 n=65537"},
    {C, "rmsnorm", "128x4096", "rows=128 n=4096"},
    {C, "softmax", "1x1", "rows=1 n=1"},
    {C, "softmax", "1x4096", "rows=1 n=4096"},
    {C, "softmax", "33x257", "rows=33 n=257"},
    {C, "softmax", "7x1000-scale0.125", "rows=7 n=1000 scale=0.125"},
    {C, "softmax", "5x300-scale50", "rows=5 n=300 scale=50"},
    {C, "softmax", "3x77-scale0", "rows=3 n=77 scale=0"},
    {C, "softmax", "2x65537", "rows=2 n=65537"},
    {C, "softmax", "128x4096", "rows=128 n=4096"},
    {C, "layernorm", "1x1", "rows=1 n=1"},
    {C, "layernorm", "1x4096", "rows=1 n=4096"},
    {C, "layernorm", "33x257", "rows=33 n=257"},
    {C, "layernorm", "33x257-noaffine", "rows=33 n=257 affine=0"},
    {C, "layernorm", "7x1000-eps0.25", "rows=7 n=1000 eps=0.25"},
    {C, "layernorm", "2x65537", "rows=2 n=65537"},
    {C, "layernorm", "128x4096", "rows=128 n=4096"},
    {C, "rope", "1x1x1x2", "B=1 H=1 S=1 D=2"},
    {C, "rope", "2x3x17x128-neox", "B=2 H=3 S=17 D=128 style=neox"},
    {C, "rope", "2x3x17x128-gptj", "B=2 H=3 S=17 D=128 style=gptj"},
    {C, "rope", "1x4x33x80-r32-neox", "B=1 H=4 S=33 D=80 rotary_dim=32 style=neox"},
    {C, "rope", "1x4x33x81-r64-gptj", "B=1 H=4 S=33 D=81 rotary_dim=64 style=gptj"},
    {C, "rope", "decode-4x8x1x128-offset4095", "B=4 H=8 S=1 D=128 offset=4095"},
    {C, "rope", "1x2x7x64-offset1M-theta500k", "B=1 H=2 S=7 D=64 offset=1000000 theta=500000"},
    {C, "rope", "1x32x512x128-llama", "B=1 H=32 S=512 D=128 theta=500000"},
    {C, "nvfp4_gemm", "1x1x64", "M=1 N=1 K=64"},
    {C, "nvfp4_gemm", "1x4096x4096-decode", "M=1 N=4096 K=4096 global=1"},
    {C, "nvfp4_gemm", "17x129x320", "M=17 N=129 K=320"},
    {C, "nvfp4_gemm", "64x257x512-global", "M=64 N=257 K=512 global=1"},
    {C, "nvfp4_gemm", "5x1000x2048", "M=5 N=1000 K=2048"},
    {C, "nvfp4_gemm", "8x64x16384-global", "M=8 N=64 K=16384 global=1"},

    /* ---- performance: what `kernelkit bench` measures (heavy) ---- */
    {P, "convert", "1Gi-f32-bf16", "n=268435456 src=f32 dst=bf16"},
    {P, "convert", "1Gi-bf16-f32", "n=268435456 src=bf16 dst=f32"},
    {P, "convert", "1Gi-f32-fp8_e4m3", "n=268435456 src=f32 dst=fp8_e4m3"},
    {P, "convert", "1Gi-f16-e2m1", "n=268435456 src=f16 dst=e2m1"},
    {P, "gemm", "8192x8192x8192", "M=8192 N=8192 K=8192 dtype=bf16"},
    LIN3(4096, 16384, 4096),
    LIN3(16384, 4096, 1024),
    LIN3(256, 11008, 4096),
    LIN3(16, 11008, 4096),
    FWD_S(64, 0, 32),
    FWD_S(64, 1, 32),
    FWD_S(128, 0, 16),
    FWD_S(128, 1, 16),
    DECODE(1, 8192),
    DECODE(16, 8192),
    DECODE(64, 4096),
    DECODE(1, 65536),
    {P, "attention", "seeds-B32-H8-S512", "B=32 Hq=8 Hkv=8 Sq=512 Sk=512 D=64 dtype=f16"},
    /* 16k tokens in eight sequences of 512 to 4096, H = 16, D = 128 */
    {P, "attention_varlen", "varlen-d128-16k",
     "Hq=16 Hkv=16 D=128 dtype=bf16 seqlens_q=4096:2048:3072:1024:2048:512:1536:2048 "
     "seqlens_k=4096:2048:3072:1024:2048:512:1536:2048"},
    {P, "attention_varlen", "varlen-d128-16k-causal",
     "Hq=16 Hkv=16 D=128 dtype=bf16 causal=1 seqlens_q=4096:2048:3072:1024:2048:512:1536:2048 "
     "seqlens_k=4096:2048:3072:1024:2048:512:1536:2048"},
    GEMV(P, "gpumode-bench1", 7168, 16384, 1),
    GEMV(P, "gpumode-bench2", 4096, 7168, 8),
    GEMV(P, "gpumode-bench3", 7168, 2048, 4),
    GEMV(P, "seeds-performance1", 512, 2048, 32),
    GEMV(P, "seeds-performance2", 1024, 4096, 64),

    /* ---- attention-fuzz27: S x B x H, D = 64, fp16 ---- */
    FUZZ27_S(448),
    FUZZ27_S(512),
    FUZZ27_S(640),
};

int kk_suite_entry_count(void) { return (int)(sizeof entries / sizeof entries[0]); }

const kk_suite_entry *kk_suite_entry_at(int i) {
    return i >= 0 && i < kk_suite_entry_count() ? &entries[i] : NULL;
}
