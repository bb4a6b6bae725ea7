/* The public op entry points (kernelkit/ops.h): each reads the sizes off the
 * tensors' shapes, turns them into the op's registry parameters and calls
 * kk_op_run, which checks every tensor against what those parameters describe
 * and dispatches. Nothing here knows a kernel: one door for every caller. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kernelkit/harness.h"
#include "kernelkit/ops.h"

#define TEXT_MAX 512

/* A tensor the op needs: present and of `ndim` dimensions. */
static kk_status need(const char *op, const char *name, const kk_tensor *t, int ndim) {
    if (!t)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, name, "a tensor", "NULL");
    if (t->ndim != ndim) {
        char want[32];
        snprintf(want, sizeof want, "%d dimensions", ndim);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, name, want, "%d", t->ndim);
    }
    return KK_OK;
}

/* Parse `text` for op `name` and run it on the n tensors. */
static kk_status run(const char *name, const char *text, const kk_tensor *const *tensors, int n,
                     kk_stream stream) {
    const kk_op *op;
    kk_op_params p;
    kk_status st = kk_op_find(name, &op);
    if (st == KK_OK) st = kk_op_params_parse(op, text, &p);
    if (st != KK_OK) return st;
    kk_tensor *t[KK_OP_MAX_TENSORS];
    for (int i = 0; i < n; i++) t[i] = (kk_tensor *)tensors[i]; /* inputs are only read */
    return kk_op_run(&p, t, stream);
}

kk_status kk_gemm(const kk_tensor *a, const kk_tensor *b, kk_tensor *c, kk_stream stream) {
    kk_status st = need("gemm", "a", a, 2);
    if (st == KK_OK) st = need("gemm", "b", b, 2);
    if (st == KK_OK) st = need("gemm", "c", c, 2);
    if (st != KK_OK) return st;
    char text[TEXT_MAX];
    snprintf(text, sizeof text, "M=%" PRId64 " N=%" PRId64 " K=%" PRId64 " dtype=%s", a->shape[0],
             b->shape[0], a->shape[1], kk_dtype_name(a->dtype));
    const kk_tensor *t[] = {a, b, c};
    return run("gemm", text, t, 3, stream);
}

static const char *const activation_names[KK_ACT_COUNT] = {"none", "relu", "gelu_erf",
                                                           "gelu_tanh", "silu"};

kk_status kk_linear(const kk_tensor *x, const kk_tensor *w, const kk_tensor *bias, kk_tensor *y,
                    kk_activation act, kk_stream stream) {
    if ((int)act < 0 || act >= KK_ACT_COUNT)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "linear", "act",
                             "a kk_activation (KK_ACT_NONE .. KK_ACT_SILU; SwiGLU is kk_swiglu)",
                             "%d", (int)act);
    kk_status st = need("linear", "x", x, 2);
    if (st == KK_OK) st = need("linear", "w", w, 2);
    if (st == KK_OK && bias) st = need("linear", "bias", bias, 1);
    if (st == KK_OK) st = need("linear", "y", y, 2);
    if (st != KK_OK) return st;
    char text[TEXT_MAX];
    snprintf(text, sizeof text,
             "M=%" PRId64 " N=%" PRId64 " K=%" PRId64 " bias=%d activation=%s dtype=%s",
             x->shape[0], w->shape[0], x->shape[1], bias != NULL, activation_names[act],
             kk_dtype_name(x->dtype));
    const kk_tensor *with_bias[] = {x, w, bias, y}, *without[] = {x, w, y};
    return bias ? run("linear", text, with_bias, 4, stream) : run("linear", text, without, 3, stream);
}

kk_status kk_swiglu(const kk_tensor *x, const kk_tensor *w_gate, const kk_tensor *w_up,
                    const kk_tensor *bias_gate, const kk_tensor *bias_up, kk_tensor *y,
                    kk_stream stream) {
    if (!bias_gate != !bias_up)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "linear", "bias_gate, bias_up",
                             "both or neither", "%s", bias_gate ? "bias_up NULL" : "bias_gate NULL");
    kk_status st = need("linear", "x", x, 2);
    if (st == KK_OK) st = need("linear", "w_gate", w_gate, 2);
    if (st == KK_OK) st = need("linear", "w_up", w_up, 2);
    if (st == KK_OK) st = need("linear", "y", y, 2);
    if (st != KK_OK) return st;
    char text[TEXT_MAX];
    snprintf(text, sizeof text,
             "M=%" PRId64 " N=%" PRId64 " K=%" PRId64 " bias=%d activation=swiglu dtype=%s",
             x->shape[0], w_gate->shape[0], x->shape[1], bias_gate != NULL,
             kk_dtype_name(x->dtype));
    const kk_tensor *with_bias[] = {x, w_gate, w_up, bias_gate, bias_up, y};
    const kk_tensor *without[] = {x, w_gate, w_up, y};
    return bias_gate ? run("linear", text, with_bias, 6, stream)
                     : run("linear", text, without, 4, stream);
}

void kk_attention_options_init(kk_attention_options *opt) {
    if (opt) *opt = (kk_attention_options)KK_ATTENTION_OPTIONS_INIT;
}

kk_status kk_attention(const kk_tensor *q, const kk_tensor *k, const kk_tensor *v, kk_tensor *o,
                       kk_tensor *lse, const kk_attention_options *opt, kk_stream stream) {
    const kk_attention_options defaults = KK_ATTENTION_OPTIONS_INIT;
    if (!opt) opt = &defaults;
    kk_status st = need("attention", "q", q, 4);
    if (st == KK_OK) st = need("attention", "k", k, 4);
    if (st == KK_OK) st = need("attention", "v", v, 4);
    if (st == KK_OK) st = need("attention", "o", o, 4);
    if (st == KK_OK && lse) st = need("attention", "lse", lse, 3);
    if (st == KK_OK && opt->seed > INT64_MAX)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, "attention", "opt->seed", "at most 2^63-1",
                           "%" PRIu64, opt->seed);
    if (st == KK_OK && opt->offset > INT64_MAX)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, "attention", "opt->offset", "at most 2^63-1",
                           "%" PRIu64, opt->offset);
    if (st != KK_OK) return st;
    char text[TEXT_MAX];
    snprintf(text, sizeof text,
             "B=%" PRId64 " Hq=%" PRId64 " Hkv=%" PRId64 " Sq=%" PRId64 " Sk=%" PRId64
             " D=%" PRId64 " causal=%d window_left=%" PRId64 " window_right=%" PRId64
             " scale=%.17g lse=%d dtype=%s dropout=%.17g seed=%" PRIu64 " offset=%" PRIu64,
             q->shape[0], q->shape[1], k->shape[1], q->shape[2], k->shape[2], q->shape[3],
             opt->causal != 0, opt->window_left, opt->window_right, opt->scale, lse != NULL,
             kk_dtype_name(q->dtype), opt->dropout, opt->seed, opt->offset);
    const kk_tensor *t[] = {q, k, v, o, lse};
    return run("attention", text, t, lse ? 5 : 4, stream);
}

/* A [total,H,D] tensor (FlashAttention's varlen layout) as the [1,H,total,D]
 * view attention_varlen takes; a 4-dimensional one as it is (*view NULL). */
static kk_status packed_view(const char *name, const kk_tensor *t, kk_tensor **view,
                             const kk_tensor **use) {
    *view = NULL;
    *use = t;
    if (t->ndim == 4) return KK_OK;
    kk_tensor *r = NULL;
    const int64_t shape[4] = {1, t->shape[0], t->shape[1], t->shape[2]};
    kk_status st = kk_tensor_reshape(t, 4, shape, &r);
    if (st == KK_OK) st = kk_tensor_transpose(r, 1, 2, view);
    kk_tensor_destroy(r);
    if (st != KK_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", kk_last_error_message());
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "attention_varlen", name,
                             "a [total,H,D] tensor that a [1,H,total,D] view can read", "%s",
                             why);
    }
    *use = *view;
    return KK_OK;
}

static kk_status seqlen_arg(const char *name, int64_t v) {
    if (v >= 1 && v <= (INT64_C(1) << 20)) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "attention_varlen", name,
                         "1..1048576, at least the longest sequence's length", "%" PRId64, v);
}

kk_status kk_attention_varlen(const kk_tensor *q, const kk_tensor *k, const kk_tensor *v,
                              const kk_tensor *cu_seqlens_q, const kk_tensor *cu_seqlens_k,
                              int64_t max_seqlen_q, int64_t max_seqlen_k, kk_tensor *o,
                              kk_tensor *lse, const kk_attention_options *opt, kk_stream stream) {
    static const char *const op = "attention_varlen";
    const kk_attention_options defaults = KK_ATTENTION_OPTIONS_INIT;
    if (!opt) opt = &defaults;
    kk_status st = q ? KK_OK : kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "q", "a tensor", "NULL");
    if (st == KK_OK && q->ndim != 3 && q->ndim != 4)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "q",
                           "3 dimensions [total_q,Hq,D] or 4 [1,Hq,total_q,D]", "%d", q->ndim);
    if (st == KK_OK) st = need(op, "k", k, q->ndim);
    if (st == KK_OK) st = need(op, "v", v, q->ndim);
    if (st == KK_OK) st = need(op, "o", o, q->ndim);
    if (st == KK_OK) st = need(op, "cu_seqlens_q", cu_seqlens_q, 1);
    if (st == KK_OK) st = need(op, "cu_seqlens_k", cu_seqlens_k, 1);
    if (st == KK_OK && cu_seqlens_q->shape[0] < 2)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "cu_seqlens_q",
                           "nseq + 1 >= 2 offsets (one sequence at least)", "%" PRId64 " offsets",
                           cu_seqlens_q->shape[0]);
    if (st == KK_OK && lse && lse->ndim != 2 && lse->ndim != 3)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "lse",
                           "2 dimensions [Hq,total_q] or 3 [1,Hq,total_q]", "%d", lse->ndim);
    if (st == KK_OK) st = seqlen_arg("max_seqlen_q", max_seqlen_q);
    if (st == KK_OK) st = seqlen_arg("max_seqlen_k", max_seqlen_k);
    if (st == KK_OK && opt->seed > INT64_MAX)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "opt->seed", "at most 2^63-1",
                           "%" PRIu64, opt->seed);
    if (st == KK_OK && opt->offset > INT64_MAX)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "opt->offset", "at most 2^63-1",
                           "%" PRIu64, opt->offset);
    if (st != KK_OK) return st;
    kk_tensor *views[5] = {NULL, NULL, NULL, NULL, NULL};
    const kk_tensor *qv, *kv, *vv, *ov, *lv = lse;
    st = packed_view("q", q, &views[0], &qv);
    if (st == KK_OK) st = packed_view("k", k, &views[1], &kv);
    if (st == KK_OK) st = packed_view("v", v, &views[2], &vv);
    if (st == KK_OK) st = packed_view("o", o, &views[3], &ov);
    if (st == KK_OK && lse && lse->ndim == 2) {
        const int64_t shape[3] = {1, lse->shape[0], lse->shape[1]};
        st = kk_tensor_reshape(lse, 3, shape, &views[4]);
        lv = views[4];
    }
    if (st == KK_OK) {
        char text[TEXT_MAX];
        snprintf(text, sizeof text,
                 "nseq=%" PRId64 " Hq=%" PRId64 " Hkv=%" PRId64 " total_q=%" PRId64
                 " total_k=%" PRId64 " max_seqlen_q=%" PRId64 " max_seqlen_k=%" PRId64
                 " D=%" PRId64 " causal=%d window_left=%" PRId64 " window_right=%" PRId64
                 " scale=%.17g lse=%d dtype=%s dropout=%.17g seed=%" PRIu64 " offset=%" PRIu64
                 " seqlens_q=none seqlens_k=none",
                 cu_seqlens_q->shape[0] - 1, qv->shape[1], kv->shape[1], qv->shape[2],
                 kv->shape[2], max_seqlen_q, max_seqlen_k, qv->shape[3], opt->causal != 0,
                 opt->window_left, opt->window_right, opt->scale, lse != NULL,
                 kk_dtype_name(q->dtype), opt->dropout, opt->seed, opt->offset);
        const kk_tensor *t[] = {qv, kv, vv, cu_seqlens_q, cu_seqlens_k, ov, lv};
        st = run(op, text, t, lse ? 7 : 6, stream);
    }
    for (int i = 0; i < 5; i++) kk_tensor_destroy(views[i]);
    return st;
}

kk_status kk_nvfp4_gemv(const kk_tensor *a, const kk_tensor *sa, const kk_tensor *b,
                        const kk_tensor *sb, const kk_tensor *ga, const kk_tensor *gb,
                        kk_tensor *c, kk_stream stream) {
    if (!ga != !gb)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "nvfp4_gemv", "ga, gb", "both or neither",
                             "%s", ga ? "gb NULL" : "ga NULL");
    kk_status st = need("nvfp4_gemv", "a", a, 3);
    if (st == KK_OK) st = need("nvfp4_gemv", "b", b, 3);
    if (st == KK_OK && !sa)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, "nvfp4_gemv", "sa", "a tensor", "NULL");
    if (st == KK_OK && sa->ndim != 3 && sa->ndim != 4)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, "nvfp4_gemv", "sa",
                           "3 dimensions (plain) or 4 (128x4 blocked)", "%d", sa->ndim);
    if (st == KK_OK) st = need("nvfp4_gemv", "sb", sb, sa->ndim);
    if (st == KK_OK) st = need("nvfp4_gemv", "c", c, 3);
    if (st != KK_OK) return st;
    char text[TEXT_MAX];
    snprintf(text, sizeof text,
             "M=%" PRId64 " K=%" PRId64 " L=%" PRId64 " scale_layout=%s global=%d", a->shape[1],
             a->shape[2], a->shape[0], sa->ndim == 4 ? "blocked" : "plain", ga != NULL);
    const kk_tensor *with_global[] = {a, b, sa, sb, ga, gb, c}, *without[] = {a, b, sa, sb, c};
    return ga ? run("nvfp4_gemv", text, with_global, 7, stream)
              : run("nvfp4_gemv", text, without, 5, stream);
}
