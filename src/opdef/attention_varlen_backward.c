/* The `attention_varlen_backward` op: dq, dk, dv of `attention_varlen`, the
 * backward of a packed batch. Sequence s is exactly `attention_backward` of
 * its own lengths (B = 1) with s as the dropout mask's batch, so everything is
 * the two ops' own: the forward's sizes, lists, checks and fuzz draw, the
 * backward's reference per kv group (kk__attention_backward_ref_group, on the
 * sequence's rows), its tolerances and its inputs (q, k, v drawn from the
 * parameters, o and lse made by the varlen forward's float64 reference).
 * docs/kernels/attention.md, "Varlen backward". */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/threads.h"
#include "opdef/attention_varlen_backward.h"

static const kk_op_param params[KK__AVB_NPARAMS] = {
    KK__AVL_PARAMS_TO_SCALE,
    [KK__AVB_DTYPE] = KK__P_DTYPE("dtype", kk__float_dtypes, KK_DTYPE_BF16,
                                  "element type of q, k, v, o, dO and the gradients"),
    [KK__AVB_DROPOUT] = KK__P_FLOAT("dropout", 0.0, 0.99, 0.0,
                                    "the forward's drop probability (src/core/philox.h, batch = "
                                    "sequence)"),
    [KK__AVB_SEED] = KK__AVL_PARAM_SEED,
    [KK__AVB_OFFSET] = KK__AVL_PARAM_OFFSET,
    [KK__AVB_LENS_Q] = KK__AVL_PARAM_SEQLENS_Q,
    [KK__AVB_LENS_K] = KK__AVL_PARAM_SEQLENS_K,
};

void kk__attention_varlen_backward_forward_params(const kk_op_params *p, kk_op_params *fwd) {
    const kk_op *row = NULL;
    kk_op_find("attention_varlen", &row);
    memset(fwd, 0, sizeof *fwd);
    fwd->op = row;
    for (int k = KK__AVL_NSEQ; k <= KK__AVL_SCALE; k++) {
        fwd->i[k] = p->i[k];
        fwd->f[k] = p->f[k];
    }
    fwd->i[KK__AVL_LSE] = 1;
    fwd->i[KK__AVL_DTYPE] = p->i[KK__AVB_DTYPE];
    fwd->f[KK__AVL_DROPOUT] = p->f[KK__AVB_DROPOUT];
    fwd->i[KK__AVL_SEED] = p->i[KK__AVB_SEED];
    fwd->i[KK__AVL_OFFSET] = p->i[KK__AVB_OFFSET];
    fwd->i[KK__AVL_LENS_Q] = p->i[KK__AVB_LENS_Q]; /* the counts; the values are lists[] */
    fwd->i[KK__AVL_LENS_K] = p->i[KK__AVB_LENS_K];
    memcpy(fwd->lists, p->lists, sizeof fwd->lists);
}

void kk__attention_varlen_backward_seq_params(const kk_op_params *p, int64_t lq, int64_t lk,
                                              kk_op_params *out) {
    kk_op_params fwd, att;
    kk__attention_varlen_backward_forward_params(p, &fwd);
    kk__attention_varlen_seq_params(&fwd, lq, lk, &att);
    kk__attention_backward_params_of(&att, out);
}

static int describe(const kk_op_params *p, kk_op_tensor *out) {
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    const int64_t Hq = p->i[KK__AVB_HQ], Hkv = p->i[KK__AVB_HKV], D = p->i[KK__AVB_D];
    const kk_dtype dt = (kk_dtype)p->i[KK__AVB_DTYPE];
    const int64_t qs[4] = {1, Hq, d.total_q, D}, ks[4] = {1, Hkv, d.total_k, D};
    int n = 0;
    n += kk__tensor(&out[n], "q", dt, 0, 4, qs);
    n += kk__tensor(&out[n], "k", dt, 0, 4, ks);
    n += kk__tensor(&out[n], "v", dt, 0, 4, ks);
    n += kk__tensor(&out[n], "o", dt, 0, 4, qs);
    n += kk__tensor(&out[n], "dO", dt, 0, 4, qs);
    n += kk__tensor(&out[n], "lse", KK_DTYPE_F32, 0, 3, (int64_t[]){1, Hq, d.total_q});
    n += kk__tensor(&out[n], "cu_seqlens_q", KK_DTYPE_INT32, 0, 1, (int64_t[]){d.nseq + 1});
    n += kk__tensor(&out[n], "cu_seqlens_k", KK_DTYPE_INT32, 0, 1, (int64_t[]){d.nseq + 1});
    n += kk__tensor(&out[n], "dq", dt, 1, 4, qs);
    n += kk__tensor(&out[n], "dk", dt, 1, 4, ks);
    n += kk__tensor(&out[n], "dv", dt, 1, 4, ks);
    return n;
}

/* attention_backward's 2.5 times the forward's count, over the sequences. */
static double flops(const kk_op_params *p) {
    kk_op_params fwd;
    kk__attention_varlen_backward_forward_params(p, &fwd);
    return 2.5 * kk__attention_varlen_flops(&fwd);
}

/* The reference (mag = 0) or the magnitude (mag = 1): attention_backward's
 * kv group per (sequence, kv head), on the sequence's rows of the packed
 * [1,H,total,D] tensors. */
static kk_status run(const kk_op_params *p, const double *const *in, double *const *out, int mag) {
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    const int64_t Hkv = p->i[KK__AVB_HKV], D = p->i[KK__AVB_D];
    const int64_t TQ = d.total_q, TK = d.total_k, ns = d.max_k > 0 ? d.max_k : 1;
    int64_t *cu = malloc((size_t)(2 * (d.nseq + 1)) * sizeof *cu);
    if (!cu)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention_varlen_backward",
                         "no memory for %" PRId64 " offsets", 2 * (d.nseq + 1));
    int64_t *cq = cu, *ck = cu + d.nseq + 1;
    const kk_status st =
        kk__attention_varlen_offsets_f64(p, in[KK__AVB_T_CUQ], in[KK__AVB_T_CUK], cq, ck);
    if (st != KK_OK) {
        free(cu);
        return st;
    }
    int failed = 0;
#pragma omp parallel num_threads(kk__cpu_threads())
    {
        double *s = malloc((size_t)ns * 2 * sizeof *s);
        if (!s) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic)
        for (int64_t g = 0; g < d.nseq * Hkv; g++) {
            if (!s) continue;
            const int64_t seq = g / Hkv, kvh = g % Hkv;
            const int64_t q0 = cq[seq], k0 = ck[seq];
            const int64_t qoff = q0 * D, kvoff = (kvh * TK + k0) * D;
            kk_op_params a;
            kk__attention_varlen_backward_seq_params(p, cq[seq + 1] - q0, ck[seq + 1] - k0, &a);
            const kk__atb_ref_rows rows = {.q = in[KK__AVB_T_Q] + qoff,
                                           .o = in[KK__AVB_T_O] + qoff,
                                           .dO = in[KK__AVB_T_DO] + qoff,
                                           .k = in[KK__AVB_T_K] + kvoff,
                                           .v = in[KK__AVB_T_V] + kvoff,
                                           .dq = out[0] + qoff,
                                           .dk = out[1] + kvoff,
                                           .dv = out[2] + kvoff,
                                           .hs = TQ * D};
            /* the sequence is the dropout mask's batch: bh = seq * Hq + h */
            kk__attention_backward_ref_group(&a, &rows, mag, seq, kvh, s, s + ns);
        }
        free(s);
    }
    free(cu);
    if (failed)
        return kk__error(KK_ERR_OUT_OF_MEMORY, "attention_varlen_backward",
                         "no memory for %" PRId64 " scores", ns);
    return KK_OK;
}

static kk_status reference(const kk_op_params *p, const double *const *in, double *const *out) {
    return run(p, in, out, 0);
}

static kk_status magnitude(const kk_op_params *p, const double *const *in, double *const *out) {
    return run(p, in, out, 1);
}

/* ---- inputs: attention_backward's (q, k, v from the parameters, o and lse
 * by the forward reference, dO from the case seed), and the offsets from the
 * case's lengths as attention_varlen's ---- */

static kk__fill_rule fill(const kk_op_params *p, int k) {
    (void)p;
    return (kk__fill_rule){k == KK__AVB_T_DO ? KK__FILL_NORMAL : KK__FILL_BY_OP, 0};
}

/* o and lse: attention_varlen's reference on q, k, v and the case's offsets. */
static kk_status forward(const kk_op_params *p, const double *q, const double *k, const double *v,
                         double *o, double *lse) {
    kk_op_params fwd;
    kk__attention_varlen_backward_forward_params(p, &fwd);
    kk__varlen_dims d;
    kk__attention_varlen_dims(&fwd, &d);
    const int64_t n = d.nseq + 1;
    int32_t *cu = malloc((size_t)n * 2 * sizeof *cu);
    double *cud = malloc((size_t)n * 2 * sizeof *cud);
    kk_status st = KK_OK;
    if (!cu || !cud) {
        st = kk__error(KK_ERR_OUT_OF_MEMORY, "attention_varlen_backward",
                       "no memory for %" PRId64 " offsets", 2 * n);
    } else {
        kk__attention_varlen_write_cu(&fwd, 0, cu, n);
        kk__attention_varlen_write_cu(&fwd, 1, cu + n, n);
        for (int64_t s = 0; s < 2 * n; s++) cud[s] = cu[s];
        st = kk__attention_varlen_reference(&fwd, (const double *const[]){q, k, v, cud, cud + n},
                                            (double *const[]){o, lse});
    }
    free(cu);
    free(cud);
    return st;
}

static void write_input(const kk_op_params *p, int t, void *buf, int64_t n) {
    if (t == KK__AVB_T_CUQ || t == KK__AVB_T_CUK) {
        kk__attention_varlen_write_cu(p, t == KK__AVB_T_CUK, buf, n);
        return;
    }
    kk__varlen_dims d;
    kk__attention_varlen_dims(p, &d);
    const int64_t Hq = p->i[KK__AVB_HQ], Hkv = p->i[KK__AVB_HKV], D = p->i[KK__AVB_D];
    const kk__atb_inputs x = {.dt = (kk_dtype)p->i[KK__AVB_DTYPE],
                              .nq = Hq * d.total_q * D,
                              .nk = Hkv * d.total_k * D,
                              .nlse = Hq * d.total_q,
                              .forward = forward};
    kk__attention_backward_write_input(p, &x, t, buf, n);
}

/* Tolerances: attention_backward's rows and magnitude (the same arithmetic per
 * sequence; docs/kernels/attention.md, "Backward", "Tolerances"). */
const kk_op kk__op_attention_varlen_backward = {
    .id = KK__OP_ID_attention_varlen_backward,
    .name = "attention_varlen_backward",
    .summary = "dq, dk, dv of attention_varlen per sequence of a packed batch (cu_seqlens_q, "
               "cu_seqlens_k); GQA, causal, windows, dropout",
    .nparams = KK__AVB_NPARAMS,
    .params = params,
    .validate = kk__attention_varlen_validate, /* the forward's sizes and lists */
    .describe = describe,
    .flops = flops,
    .bytes = kk__op_bytes_io,
    .reference = reference,
    .magnitude = magnitude,
    KK__ATB_TOLERANCES,
    .tolerance_on = kk__attention_backward_tolerance_on,
    .fuzz = kk__attention_varlen_fuzz,
    .grow_param = "Hq",
    .fill = fill,
    .write_input = write_input,
};
