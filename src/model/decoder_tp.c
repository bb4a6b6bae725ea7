/* The tensor-parallel decoder (Megatron-style): each rank holds a shard of
 * every layer and runs the same plan on it, with an all-reduce after the two
 * row-parallel projections. Column-parallel q/k/v and gate/up keep whole heads
 * and whole intermediate rows per rank, so attention and SwiGLU need no
 * communication; o_proj and down_proj then give partial sums of the hidden
 * state, summed by kk_comm_all_reduce. The residual is added once: in the
 * fused plan rank 0 alone adds it in its down_proj (the others' partial sums
 * add to it in the all-reduce). docs/distributed.md, "Sharding". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/decoder_internal.h"

/* A config count that must divide by the size; KK_ERR_INVALID_ARGUMENT naming it. */
static kk_status divide(const char *func, const char *name, int64_t *v, int tp) {
    if (*v % tp == 0) {
        *v /= tp;
        return KK_OK;
    }
    char value[32], expected[128];
    snprintf(value, sizeof value, "%lld", (long long)*v);
    snprintf(expected, sizeof expected,
             "a multiple of the tensor-parallel size %d (each rank holds whole %s)", tp,
             strcmp(name, "intermediate_size") == 0 ? "MLP rows" : "heads");
    return kk__set_error(KK_ERR_INVALID_ARGUMENT, func, name, value, expected, NULL, NULL);
}

/* The plan with an all-reduce after o_proj and after down_proj. */
static void shard_plan(kk__dplan *p, int rank) {
    kk__dplan q = *p;
    q.n = 0;
    for (int i = 0; i < p->n; i++) {
        kk__dstep s = p->steps[i];
        const int attn = s.in[1] == KK__DB_W_O, mlp = s.in[1] == KK__DB_W_DOWN;
        if (mlp && s.op == KK__DS_LINEAR_RES && rank != 0) {
            /* the residual once: rank 0's fused step adds it */
            s.op = KK__DS_LINEAR;
            s.in[2] = KK__DB_NONE;
            s.name = "down_proj (partial)";
        }
        q.steps[q.n++] = s;
        if (attn || mlp)
            q.steps[q.n++] = (kk__dstep){attn ? "all_reduce attn" : "all_reduce mlp",
                                         KK__DS_ALL_REDUCE,
                                         {s.out[0]},
                                         {s.out[0]}};
    }
    *p = q;
}

kk_status kk__dtp_setup(const char *func, kk_decoder *d, kk_comm *comm) {
    if (strcmp(d->device, kk_comm_device(comm)) != 0)
        return kk__set_error(KK_ERR_INVALID_ARGUMENT, func, "device", d->device,
                             kk_comm_device(comm), NULL,
                             "device = %s: expected the comm's device %s (or NULL)", d->device,
                             kk_comm_device(comm));
    const int tp = kk_comm_size(comm);
    kk_model_config c = d->cfg;
    kk_status st;
    if ((st = divide(func, "num_attention_heads", &c.num_attention_heads, tp)) != KK_OK ||
        (st = divide(func, "num_key_value_heads", &c.num_key_value_heads, tp)) != KK_OK ||
        (st = divide(func, "intermediate_size", &c.intermediate_size, tp)) != KK_OK)
        return st;
    d->cfg = c;
    d->comm = comm;
    d->tp_rank = kk_comm_rank(comm);
    d->tp_size = tp;
    shard_plan(&d->plan, d->tp_rank);
    return KK_OK;
}

kk_status kk__dtp_weight(const char *func, const kk_decoder *d, int k, const kk_tensor *w,
                         kk_tensor **out) {
    (void)func; /* the failing call names itself */
    *out = NULL;
    const int r = d->tp_rank, tp = d->tp_size;
    const int rows = k <= 2 || k == 4 || k == 5; /* q, k, v, gate, up: output rows */
    const int cols = k == 3 || k == 6;           /* o_proj, down_proj: input columns */
    if (!rows && !cols) return KK_OK;            /* the norms: replicated */
    const int dim = rows ? 0 : 1;
    const int64_t n = w->shape[dim] / tp;
    kk_tensor *view = NULL;
    kk_status st = kk_tensor_slice(w, dim, r * n, (r + 1) * n, 1, &view);
    if (st != KK_OK || rows) {
        *out = view;
        return st;
    }
    /* a column block is strided: a contiguous copy for the GEMM */
    kk_tensor *copy = NULL;
    st = kk_tensor_create("cpu", w->dtype, 2, view->shape, &copy);
    if (st == KK_OK) st = kk_tensor_copy(copy, view);
    kk_tensor_destroy(view);
    if (st != KK_OK) kk_tensor_destroy(copy), copy = NULL;
    *out = copy;
    return st;
}

kk_status kk__dtp_note(const char *func, kk_decoder *d) {
    const kk_model_config *c = &d->cfg;
    const int tp = d->tp_size;
    char line[512];
    const int n = snprintf(
        line, sizeof line,
        "  tensor parallel: rank %d of %d (%s comm): heads %lld of %lld, kv heads %lld of %lld, "
        "intermediate %lld of %lld on this rank; o_proj and down_proj each followed by an "
        "all-reduce; embedding, norms and lm_head replicated\n",
        d->tp_rank, tp, kk_comm_backend(d->comm), (long long)c->num_attention_heads,
        (long long)c->num_attention_heads * tp, (long long)c->num_key_value_heads,
        (long long)c->num_key_value_heads * tp, (long long)c->intermediate_size,
        (long long)c->intermediate_size * tp);
    const size_t len = strlen(d->plan_text);
    char *s = realloc(d->plan_text, len + (size_t)n + 1);
    if (!s) return kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation failed");
    memcpy(s + len, line, (size_t)n + 1);
    d->plan_text = s;
    return KK_OK;
}

kk_status kk__dtp_all_reduce(kk_decoder *d, kk_tensor *t, kk_stream stream) {
    if (d->profile)
        return kk__error(KK_ERR_UNSUPPORTED, "kk_decoder_profile",
                         "a tensor-parallel decoder cannot be profiled: the sampler repeats each "
                         "step as often as it needs, and the other ranks' all-reduces would not "
                         "match");
    /* the ops' stream (NULL: the default stream), so the sum follows the GEMM */
    return kk_comm_all_reduce(d->comm, t, t, stream);
}

kk_status kk_decoder_create_tp(const kk_model *model, const char *device, kk_opt_level level,
                               int max_batch, int max_seq, kk_comm *comm, kk_decoder **out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    *out = NULL;
    if ((st = KK__CHECK_NOT_NULL(comm)) != KK_OK) return st;
    return kk__decoder_create(__func__, model, device ? device : kk_comm_device(comm), level,
                              max_batch, max_seq, comm, out);
}

int kk_decoder_tp_size(const kk_decoder *d) { return d ? d->tp_size : 1; }

kk_status kk_decoder_set_tp_overlap(kk_decoder *d, kk_tp_overlap mode) {
    kk_status st = KK__CHECK_NOT_NULL(d);
    if (st != KK_OK) return st;
    if (mode != KK_TP_OVERLAP_AUTO && mode != KK_TP_OVERLAP_OFF && mode != KK_TP_OVERLAP_ON)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "mode",
                             "KK_TP_OVERLAP_AUTO, _OFF or _ON", "%d", (int)mode);
    d->overlap = mode;
    return KK_OK;
}

kk_tp_overlap kk_decoder_tp_overlap(const kk_decoder *d) {
    return d ? d->overlap : KK_TP_OVERLAP_AUTO;
}

const char *kk_tp_overlap_name(kk_tp_overlap mode) {
    return mode == KK_TP_OVERLAP_OFF ? "off" : mode == KK_TP_OVERLAP_ON ? "on" : "auto";
}

kk_status kk_tp_overlap_parse(const char *text, kk_tp_overlap *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    static const kk_tp_overlap modes[] = {KK_TP_OVERLAP_AUTO, KK_TP_OVERLAP_OFF, KK_TP_OVERLAP_ON};
    for (int i = 0; text && i < 3; i++)
        if (strcmp(text, kk_tp_overlap_name(modes[i])) == 0) {
            *out = modes[i];
            return KK_OK;
        }
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "text", "auto, off or on", "\"%.40s\"",
                         text ? text : "(null)");
}
