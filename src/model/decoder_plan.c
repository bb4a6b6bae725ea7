/* The decoder's plan: the op calls of one layer at a level, over named
 * buffers, and its text for `kernelkit model` (docs/model.md, "Levels"). The
 * executor (decoder_run.c) walks these steps, so what is printed is what runs. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/decoder_internal.h"

const char *kk__dstep_op_name(kk__dstep_op op) {
    static const char *const names[KK__DS_OP_COUNT] = {
        [KK__DS_RMSNORM] = "kk_rmsnorm",
        [KK__DS_LINEAR] = "kk_linear",
        [KK__DS_LINEAR_RES] = "kk_linear_residual",
        [KK__DS_LAYOUT] = "kk_tensor_copy",
        [KK__DS_ROPE] = "kk_rope",
        [KK__DS_KV_WRITE] = "kk_tensor_copy",
        [KK__DS_ROPE_KV] = "kk_rope_kv_append",
        [KK__DS_ATTENTION] = "kk_attention",
        [KK__DS_ADD] = "kk_add_rmsnorm",
        [KK__DS_ADD_RMSNORM] = "kk_add_rmsnorm",
        [KK__DS_SILU_MUL] = "kk_silu_mul",
        [KK__DS_SWIGLU] = "kk_swiglu",
        [KK__DS_ALL_REDUCE] = "kk_comm_all_reduce",
        [KK__DS_FP8_LINEAR] = "kk_fp8_linear",
    };
    return (unsigned)op < KK__DS_OP_COUNT ? names[op] : "?";
}

const char *kk__dbuf_name(kk__dbuf b) {
    static const char *const names[KK__DB_COUNT] = {
        [KK__DB_NONE] = "-",
        [KK__DB_RES] = "h",
        [KK__DB_XN] = "x",
        [KK__DB_QT] = "q_tok",
        [KK__DB_KT] = "k_tok",
        [KK__DB_VT] = "v_tok",
        [KK__DB_Q] = "q",
        [KK__DB_K] = "k",
        [KK__DB_V] = "v",
        [KK__DB_QR] = "q_rot",
        [KK__DB_KR] = "k_rot",
        [KK__DB_KC] = "k_cache",
        [KK__DB_VC] = "v_cache",
        [KK__DB_OT] = "attn",
        [KK__DB_A] = "proj",
        [KK__DB_G] = "gate",
        [KK__DB_U] = "up",
        [KK__DB_ACT] = "act",
        [KK__DB_SCRATCH] = "scratch",
        [KK__DB_GU] = "gate_up",
        [KK__DB_QKV] = "qkv",
        [KK__DB_W_Q] = "W_q",
        [KK__DB_W_K] = "W_k",
        [KK__DB_W_V] = "W_v",
        [KK__DB_W_O] = "W_o",
        [KK__DB_W_GATE] = "W_gate",
        [KK__DB_W_UP] = "W_up",
        [KK__DB_W_DOWN] = "W_down",
        [KK__DB_W_IN_NORM] = "w_input_norm",
        [KK__DB_W_POST_NORM] = "w_post_norm",
        [KK__DB_W_GATE_UP] = "W_gate_up",
        [KK__DB_W_QKV] = "W_qkv",
    };
    return (unsigned)b < KK__DB_COUNT ? names[b] : "?";
}

static void add(kk__dplan *p, const char *name, kk__dstep_op op, kk__dbuf i0, kk__dbuf i1,
                kk__dbuf i2, kk__dbuf i3, kk__dbuf o0, kk__dbuf o1, kk__dbuf o2) {
    kk__dstep *s = &p->steps[p->n++];
    *s = (kk__dstep){name, op, {i0, i1, i2, i3}, {o0, o1, o2}};
}

int kk__dfp8_slot(kk__dbuf w) {
    switch (w) {
    case KK__DB_W_QKV: return 0;
    case KK__DB_W_O: return 1;
    case KK__DB_W_GATE_UP: return 2;
    case KK__DB_W_DOWN: return 3;
    default: return -1;
    }
}

int kk__dstep_capturable(const kk__dstep *s) {
    switch (s->op) {
    case KK__DS_ATTENTION: /* its key range is the cache length, passed by the host */
    case KK__DS_ROPE:      /* position offset L from the host */
    case KK__DS_KV_WRITE:  /* cache rows L .. L + S */
    case KK__DS_ALL_REDUCE: return 0;
    default: return 1; /* rope_kv_append reads the lengths on the device */
    }
}

/* The aggressive level's FP8 plan: balanced's fusions with the projections as
 * kk_fp8_linear (q, k and v stacked into one weight, so x is quantized once
 * for the three, and rope_kv_append reads the packed [T, (Hq+2Hkv)*D] rows;
 * gate and up stacked into one weight, then kk_silu_mul on the packed [T, 2I]
 * output; down_proj's residual in fp8_linear's epilogue). */
static void build_fp8(kk__dplan *p);

#define N KK__DB_NONE
void kk__dplan_build(kk_opt_level level, int fp8, int tp, kk__dplan *p) {
    memset(p, 0, sizeof *p);
    p->level = level;
    if (level == KK_OPT_AGGRESSIVE && fp8) {
        build_fp8(p);
        return;
    }
    const int fused = level != KK_OPT_CONSERVATIVE;
    add(p, "input_norm", KK__DS_RMSNORM, KK__DB_RES, KK__DB_W_IN_NORM, N, N, KK__DB_XN, N, N);
    if (fused && !tp) { /* one q/k/v projection, its [B,S,H,D] rows read through strides */
        p->qkv = 1;
        add(p, "qkv_proj", KK__DS_LINEAR, KK__DB_XN, KK__DB_W_QKV, N, N, KK__DB_QKV, N, N);
        add(p, "rope + kv append", KK__DS_ROPE_KV, KK__DB_QKV, N, N, N, KK__DB_QR, KK__DB_KC,
            KK__DB_VC);
    } else {
        add(p, "q_proj", KK__DS_LINEAR, KK__DB_XN, KK__DB_W_Q, N, N, KK__DB_QT, N, N);
        add(p, "k_proj", KK__DS_LINEAR, KK__DB_XN, KK__DB_W_K, N, N, KK__DB_KT, N, N);
        add(p, "v_proj", KK__DS_LINEAR, KK__DB_XN, KK__DB_W_V, N, N, KK__DB_VT, N, N);
    }
    if (fused && tp) { /* the projections' [B,S,H,D] rows read through strides */
        add(p, "rope + kv append", KK__DS_ROPE_KV, KK__DB_QT, KK__DB_KT, KK__DB_VT, N, KK__DB_QR,
            KK__DB_KC, KK__DB_VC);
    } else if (!fused) {
        add(p, "layout q", KK__DS_LAYOUT, KK__DB_QT, N, N, N, KK__DB_Q, N, N);
        add(p, "layout k", KK__DS_LAYOUT, KK__DB_KT, N, N, N, KK__DB_K, N, N);
        add(p, "rope q", KK__DS_ROPE, KK__DB_Q, N, N, N, KK__DB_QR, N, N);
        add(p, "rope k", KK__DS_ROPE, KK__DB_K, N, N, N, KK__DB_KR, N, N);
        add(p, "kv cache write", KK__DS_KV_WRITE, KK__DB_KR, KK__DB_VT, N, N, KK__DB_KC, KK__DB_VC,
            N);
    }
    add(p, "attention", KK__DS_ATTENTION, KK__DB_QR, KK__DB_KC, KK__DB_VC, N, KK__DB_OT, N, N);
    add(p, "o_proj", KK__DS_LINEAR, KK__DB_OT, KK__DB_W_O, N, N, KK__DB_A, N, N);
    if (fused) {
        add(p, "residual + post_norm", KK__DS_ADD_RMSNORM, KK__DB_A, KK__DB_RES, KK__DB_W_POST_NORM,
            N, KK__DB_RES, KK__DB_XN, N);
        add(p, "gate_up + silu_mul", KK__DS_SWIGLU, KK__DB_XN, KK__DB_W_GATE, KK__DB_W_UP, N,
            KK__DB_ACT, N, N);
        add(p, "down_proj + residual", KK__DS_LINEAR_RES, KK__DB_ACT, KK__DB_W_DOWN, KK__DB_RES, N,
            KK__DB_RES, N, N);
    } else {
        add(p, "residual", KK__DS_ADD, KK__DB_A, KK__DB_RES, KK__DB_W_POST_NORM, N, KK__DB_RES,
            KK__DB_SCRATCH, N);
        add(p, "post_norm", KK__DS_RMSNORM, KK__DB_RES, KK__DB_W_POST_NORM, N, N, KK__DB_XN, N, N);
        add(p, "gate_proj", KK__DS_LINEAR, KK__DB_XN, KK__DB_W_GATE, N, N, KK__DB_G, N, N);
        add(p, "up_proj", KK__DS_LINEAR, KK__DB_XN, KK__DB_W_UP, N, N, KK__DB_U, N, N);
        add(p, "silu_mul", KK__DS_SILU_MUL, KK__DB_G, KK__DB_U, N, N, KK__DB_ACT, N, N);
        add(p, "down_proj", KK__DS_LINEAR, KK__DB_ACT, KK__DB_W_DOWN, N, N, KK__DB_A, N, N);
        add(p, "residual", KK__DS_ADD, KK__DB_A, KK__DB_RES, KK__DB_W_POST_NORM, N, KK__DB_RES,
            KK__DB_SCRATCH, N);
    }
}

static void build_fp8(kk__dplan *p) {
    p->fp8 = p->qkv = 1;
    add(p, "input_norm", KK__DS_RMSNORM, KK__DB_RES, KK__DB_W_IN_NORM, N, N, KK__DB_XN, N, N);
    add(p, "qkv_proj (fp8)", KK__DS_FP8_LINEAR, KK__DB_XN, KK__DB_W_QKV, N, N, KK__DB_QKV, N, N);
    add(p, "rope + kv append", KK__DS_ROPE_KV, KK__DB_QKV, N, N, N, KK__DB_QR, KK__DB_KC,
        KK__DB_VC);
    add(p, "attention", KK__DS_ATTENTION, KK__DB_QR, KK__DB_KC, KK__DB_VC, N, KK__DB_OT, N, N);
    add(p, "o_proj (fp8)", KK__DS_FP8_LINEAR, KK__DB_OT, KK__DB_W_O, N, N, KK__DB_A, N, N);
    add(p, "residual + post_norm", KK__DS_ADD_RMSNORM, KK__DB_A, KK__DB_RES, KK__DB_W_POST_NORM, N,
        KK__DB_RES, KK__DB_XN, N);
    add(p, "gate_up (fp8)", KK__DS_FP8_LINEAR, KK__DB_XN, KK__DB_W_GATE_UP, N, N, KK__DB_GU, N, N);
    add(p, "silu_mul", KK__DS_SILU_MUL, KK__DB_GU, N, N, N, KK__DB_ACT, N, N);
    add(p, "down_proj (fp8) + residual", KK__DS_FP8_LINEAR, KK__DB_ACT, KK__DB_W_DOWN, KK__DB_RES,
        N, KK__DB_RES, N, N);
}
#undef N

static const char *level_note(kk_opt_level level) {
    switch (level) {
    case KK_OPT_CONSERVATIVE:
        return "one op per step, no fusion (the residual add is kk_add_rmsnorm's sum, its "
               "norm discarded: there is no plain add op)";
    case KK_OPT_BALANCED:
        return "fused: q/k/v in one projection (stacked weight), rope + kv append, "
               "residual + rmsnorm, gate/up + silu (swiglu), down_proj + residual";
    default: return "balanced's fusions, FP8 projections, CUDA graphs of the decode step";
    }
}

/* Appends to a growing string; *ok goes 0 when out of memory. */
static void put(char **s, size_t *len, size_t *cap, int *ok, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void put(char **s, size_t *len, size_t *cap, int *ok, const char *fmt, ...) {
    if (!*ok) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (*len + (size_t)n + 1 > *cap) {
        size_t c = (*cap + (size_t)n + 1) * 2;
        char *p = realloc(*s, c);
        if (!p) {
            *ok = 0;
            return;
        }
        *s = p, *cap = c;
    }
    va_start(ap, fmt);
    vsnprintf(*s + *len, *cap - *len, fmt, ap);
    va_end(ap);
    *len += (size_t)n;
}

char *kk__dplan_text(const kk__dplan *p, const kk_model_config *c, const char *device,
                     kk_dtype dtype) {
    char *s = NULL;
    size_t len = 0, cap = 0;
    int ok = 1;
    put(&s, &len, &cap, &ok, "plan: level %s: %s\n", kk_opt_level_name(p->level),
        level_note(p->level));
    put(&s, &len, &cap, &ok,
        "  %lld layers x %d steps on %s, %s; hidden %lld, heads %lld, kv heads %lld, head_dim "
        "%lld, intermediate %lld\n",
        (long long)c->num_hidden_layers, p->n, device, kk_dtype_name(dtype),
        (long long)c->hidden_size, (long long)c->num_attention_heads,
        (long long)c->num_key_value_heads, (long long)c->head_dim, (long long)c->intermediate_size);
    int layouts = 0;
    for (int i = 0; i < p->n; i++) layouts |= p->steps[i].op == KK__DS_LAYOUT;
    if (layouts)
        put(&s, &len, &cap, &ok,
            "  (layout steps are [B,S,H,D] -> [B,H,S,D] copies, skipped when S = 1)\n");
    if (p->level == KK_OPT_AGGRESSIVE) {
        if (p->fp8)
            put(&s, &len, &cap, &ok,
                "  fp8: the (fp8) steps are kk_fp8_linear: weights e4m3 with 128x128 block "
                "scales, quantized once at create (the %s weights not kept); activations "
                "quantized per 1x128 group of a token on the fly; f32 accumulation\n",
                kk_dtype_name(dtype));
        else
            put(&s, &len, &cap, &ok, "  fp8: off (%s): the projections are balanced's\n",
                p->fp8_why ? p->fp8_why : "not allowed");
        if (p->graphs)
            put(&s, &len, &cap, &ok,
                "  cuda graphs: each decode step (S = 1) replayed as graphs captured once per "
                "batch size: the steps between two attentions in one graph, attention (its "
                "key range is the cache length) launched between them\n");
        else
            put(&s, &len, &cap, &ok, "  cuda graphs: off (%s)\n",
                p->graphs_why ? p->graphs_why : "not on this device");
    }
    for (int i = 0; i < p->n; i++) {
        const kk__dstep *st = &p->steps[i];
        put(&s, &len, &cap, &ok, "  %2d  %-22s %-19s", i + 1, st->name, kk__dstep_op_name(st->op));
        for (int k = 0; k < KK__DSTEP_MAX_IN && st->in[k]; k++)
            put(&s, &len, &cap, &ok, "%s%s%s", k ? ", " : "", kk__dbuf_name(st->in[k]),
                st->op == KK__DS_FP8_LINEAR && k == 1 ? ":fp8" : "");
        put(&s, &len, &cap, &ok, " ->");
        for (int k = 0; k < KK__DSTEP_MAX_OUT && st->out[k]; k++)
            put(&s, &len, &cap, &ok, "%s%s", k ? ", " : " ", kk__dbuf_name(st->out[k]));
        put(&s, &len, &cap, &ok, "\n");
    }
    if (!ok) {
        free(s);
        return NULL;
    }
    return s;
}
