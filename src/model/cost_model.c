/* The decoder's cost model (docs/model.md, "Cost model"): each plan step's
 * work from the call's shapes, and its roofline time from kernelkit
 * calibrate's ceilings, max(bytes / bandwidth, FLOPs / rate), plus a launch
 * floor per op call. Pure arithmetic: no device is touched. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kernelkit/model_cost.h"
#include "model/decoder_internal.h"

/* A step's work for one layer. e: bytes per element; T = B*S tokens. */
typedef struct work {
    int calls, matrix; /* matrix: a GEMM or attention (tensor cores); 2: FP8 ones */
    double flops, rd, wr;
} work;

/* *pre: the bytes (of rd + wr) of a memory-bound pass that must finish before
 * the product starts (fp8_linear's quantization of x), priced on its own and
 * added to the product's roofline; 0 for the other steps. */
static work step_work(const kk__dstep *s, const kk_model_config *c, double e, int64_t B, int64_t S,
                      int64_t L, double *pre) {
    const double T = (double)B * (double)S, h = (double)c->hidden_size, D = (double)c->head_dim;
    const double hq = (double)c->num_attention_heads, hkv = (double)c->num_key_value_heads;
    const double I = (double)c->intermediate_size, q = hq * D, kv = hkv * D;
    *pre = 0;
    /* GEMM [T,K] x [N,K]^T: 2TNK FLOPs; reads x and W, writes y */
#define GEMM(N, K)                                                                                 \
    (work) { 1, 1, 2 * T *(N) * (K), (T * (K) + (N) * (K)) * e, T *(N)*e }
    /* N outputs of each weight row: which weight the step reads */
    double n = 0, k = h;
    switch (s->in[1]) {
    case KK__DB_W_Q: n = q; break;
    case KK__DB_W_K:
    case KK__DB_W_V: n = kv; break;
    case KK__DB_W_O: n = h, k = q; break;
    case KK__DB_W_GATE:
    case KK__DB_W_UP: n = I; break;
    case KK__DB_W_DOWN: n = h, k = I; break;
    case KK__DB_W_GATE_UP: n = 2 * I; break;
    case KK__DB_W_QKV: n = q + 2 * kv; break;
    default: break;
    }
    switch (s->op) {
    case KK__DS_RMSNORM: /* square, sum, scale, weight: ~4 per element */
        return (work){1, 0, 4 * T * h, (T * h + h) * e, T * h * e};
    case KK__DS_LINEAR: return GEMM(n, k);
    case KK__DS_LINEAR_RES: { /* + the residual read and added */
        work w = GEMM(n, k);
        w.flops += T * n, w.rd += T * n * e;
        return w;
    }
    case KK__DS_LAYOUT: { /* [T, H*D] -> [B,H,S,D]; none at S = 1 */
        const double x = (s->out[0] == KK__DB_Q ? q : kv) * T * e;
        return S == 1 ? (work){0} : (work){1, 0, 0, x, x};
    }
    case KK__DS_ROPE: { /* two products and a sum per element */
        const double x = (s->in[0] == KK__DB_Q ? q : kv) * T;
        return (work){1, 0, 3 * x, x * e, x * e};
    }
    case KK__DS_KV_WRITE: /* two copies: k and v rows into the cache */
        return (work){2, 0, 0, 2 * T * kv * e, 2 * T * kv * e};
    case KK__DS_ROPE_KV: /* q, k, v in; rotated q and the cache rows out */
        return (work){1, 0, 3 * T * (q + kv), T * (q + 2 * kv) * e, T * (q + 2 * kv) * e};
    case KK__DS_ATTENTION: {
        /* causal, bottom-right: token s sees L + s + 1 keys, so the pairs
         * are S*L + S(S+1)/2 per sequence and head (S^2/2 at L = 0, the usual
         * halving; L + 1 at decode); QK^T and PV: 4 D FLOPs per pair */
        const double pairs = (double)S * (double)L + (double)S * (double)(S + 1) / 2;
        const double lk = (double)(L + S);
        return (work){1, 1, 4 * (double)B * hq * D * pairs, (T * q + 2 * (double)B * lk * kv) * e,
                      T * q * e};
    }
    case KK__DS_ADD: /* kk_add_rmsnorm: sum and the discarded norm both written */
    case KK__DS_ADD_RMSNORM: return (work){1, 0, 5 * T * h, (2 * T * h + h) * e, 2 * T * h * e};
    case KK__DS_SILU_MUL: /* sigmoid (exp, add, divide), two products */
        return (work){1, 0, 5 * T * I, 2 * T * I * e, T * I * e};
    case KK__DS_SWIGLU: /* the gate and up GEMMs and silu * mul in their epilogue */
        return (work){1, 1, 4 * T * I * h + 5 * T * I, (T * h + 2 * I * h) * e, T * I * e};
    case KK__DS_FP8_LINEAR: {
        /* three launches: the amax word cleared, x quantized (x read, 1-byte
         * codes written: the pass before the product), the FP8 GEMM with the
         * epilogue in its registers (codes and 1-byte W read, the residual
         * read, y written). Scales are under 1% and left out. */
        const int res = s->in[2] != KK__DB_NONE;
        *pre = T * k * e + T * k;
        work w = {3, 2, 2 * T * n * k + (res ? T * n : 0),
                  T * k * e + T * k + n * k + (res ? T * n * e : 0), T * k + T * n * e};
        return w;
    }
    default: /* a step this model does not price (an all-reduce): its floor */
        return (work){1, 0, 0, 0, 0};
    }
#undef GEMM
}

/* The matrix rate of the compute dtype; elementwise math runs on the FP32
 * units whatever the dtype. */
static kk_ceiling_kind rate_of(int matrix, kk_dtype dt) {
    if (!matrix) return KK_CEILING_FP32;
    switch (dt) {
    case KK_DTYPE_BF16:
    case KK_DTYPE_F16: return KK_CEILING_BF16;
    case KK_DTYPE_FP8_E4M3:
    case KK_DTYPE_FP8_E5M2: return KK_CEILING_FP8;
    default: return KK_CEILING_FP32;
    }
}

static double ceiling(const kk_bench_ceilings *c, kk_ceiling_kind k) {
    switch (k) {
    case KK_CEILING_COPY: return c->copy_gbs > 0 ? c->copy_gbs * 1e9 : c->read_gbs * 1e9;
    case KK_CEILING_READ: return c->read_gbs > 0 ? c->read_gbs * 1e9 : c->copy_gbs * 1e9;
    case KK_CEILING_BF16: return c->bf16_tflops > 0 ? c->bf16_tflops * 1e12 : c->fp32_tflops * 1e12;
    case KK_CEILING_FP8: return c->fp8_tflops > 0 ? c->fp8_tflops * 1e12 : c->fp32_tflops * 1e12;
    default: return c->fp32_tflops * 1e12;
    }
}

/* The roofline of one step (pre: the bytes of a pass before its product, at
 * the copy bandwidth, added); the bound is whichever term is largest. */
static void price(kk_step_cost *s, const kk_bench_ceilings *c, double floor_s, double pre) {
    const double bw = ceiling(c, s->bandwidth), rate = ceiling(c, s->rate);
    const double copy = ceiling(c, KK_CEILING_COPY);
    const double tp = copy > 0 ? pre / copy : 0;
    const double tm = bw > 0 ? (s->bytes_read + s->bytes_written - pre) / bw : 0;
    const double tc = rate > 0 ? s->flops / rate : 0;
    const double tl = s->calls * floor_s;
    if (s->calls == 0) { /* skipped at this shape */
        s->predicted_s = 0;
        snprintf(s->bound, sizeof s->bound, "skipped");
        return;
    }
    s->predicted_s = tp + (tm > tc ? tm : tc) + tl;
    snprintf(s->bound, sizeof s->bound, "%s",
             tl >= tm + tp && tl >= tc ? "launch"
             : tm + tp >= tc           ? "memory"
                                       : "compute");
}

kk_status kk_decoder_predict(const kk_decoder *d, int64_t batch, int64_t seq, int64_t cached,
                             const kk_bench_ceilings *ceilings, double launch_floor_s,
                             kk_decoder_cost *out) {
    kk_status st = KK__CHECK_NOT_NULL(d);
    if (!st) st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    memset(out, 0, sizeof *out);
    if (batch < 1 || seq < 1 || cached < 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__,
                             batch < 1 ? "batch"
                             : seq < 1 ? "seq"
                                       : "cached",
                             cached < 0 ? "at least 0" : "at least 1", "%lld",
                             (long long)(batch < 1 ? batch
                                         : seq < 1 ? seq
                                                   : cached));
    if (!(launch_floor_s >= 0 && launch_floor_s < 1))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "launch_floor_s",
                             "seconds in [0, 1)", "%g", launch_floor_s);
    snprintf(out->level, sizeof out->level, "%s", kk_opt_level_name(d->plan.level));
    snprintf(out->device, sizeof out->device, "%s", d->device);
    snprintf(out->dtype, sizeof out->dtype, "%s", kk_dtype_name(d->dtype));
    out->batch = batch, out->seq = seq, out->cached = cached, out->layers = d->layers;
    out->nsteps = d->plan.n < KK_DECODER_MAX_STEPS ? d->plan.n : KK_DECODER_MAX_STEPS;
    out->has_ceilings = ceilings != NULL;
    if (ceilings) out->ceilings = *ceilings;
    out->launch_floor_s = launch_floor_s;
    out->predicted_s = ceilings ? 0 : -1;
    out->measured_s = -1;
    const double e = kk_dtype_bits(d->dtype) / 8.0;
    for (int i = 0; i < out->nsteps; i++) {
        const kk__dstep *ps = &d->plan.steps[i];
        kk_step_cost *s = &out->steps[i];
        double pre = 0;
        const work w = step_work(ps, &d->cfg, e, batch, seq, cached, &pre);
        snprintf(s->name, sizeof s->name, "%s", ps->name);
        snprintf(s->op, sizeof s->op, "%s", kk__dstep_op_name(ps->op));
        s->calls = w.calls, s->flops = w.flops, s->bytes_read = w.rd, s->bytes_written = w.wr;
        s->rate = w.matrix == 2 ? KK_CEILING_FP8 : rate_of(w.matrix, d->dtype);
        /* streaming weights or a cache: the read ceiling; else read + write */
        s->bandwidth = w.rd > 0 && w.wr * 8 <= w.rd ? KK_CEILING_READ : KK_CEILING_COPY;
        s->predicted_s = s->measured_s = -1;
        if (!ceilings) continue;
        price(s, ceilings, launch_floor_s, pre);
        out->predicted_s += s->predicted_s * (double)d->layers;
    }
    return KK_OK;
}
