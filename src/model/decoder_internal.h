/* Internal: the decoder shared by src/model/decoder*.c: the plan (one layer's
 * op calls over named buffers), the weights on the device, the KV caches and
 * the work buffers. */
#ifndef KK_DECODER_INTERNAL_H
#define KK_DECODER_INTERNAL_H

#include "kernelkit/bench.h"
#include "kernelkit/comm.h"
#include "kernelkit/model.h"
#include "kernelkit/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a step calls. */
typedef enum kk__dstep_op {
    KK__DS_RMSNORM,     /* kk_rmsnorm(in0, w) -> out0 */
    KK__DS_LINEAR,      /* kk_linear(in0, w) -> out0 */
    KK__DS_LINEAR_RES,  /* kk_linear_residual(in0, w, residual in1) -> out0 */
    KK__DS_LAYOUT,      /* kk_tensor_copy [B,S,H,D] -> [B,H,S,D]; skipped when S = 1 */
    KK__DS_ROPE,        /* kk_rope(in0) -> out0 at positions len + s */
    KK__DS_KV_WRITE,    /* kk_tensor_copy of in0 (k), in1 (v) into the cache rows */
    KK__DS_ROPE_KV,     /* kk_rope_kv_append(q, k, v) -> q_out, caches */
    KK__DS_ATTENTION,   /* kk_attention(q, cache k, cache v), causal -> out0 */
    KK__DS_ADD,         /* kk_add_rmsnorm's sum: out0 = in0 + in1 (its norm discarded) */
    KK__DS_ADD_RMSNORM, /* kk_add_rmsnorm: out0 = in0 + in1, out1 = rmsnorm(out0) */
    KK__DS_SILU_MUL,    /* kk_silu_mul(in0, in1) -> out0 */
    KK__DS_SWIGLU,      /* kk_swiglu(in0, w gate, w2 up) -> out0 */
    KK__DS_ALL_REDUCE,  /* kk_comm_all_reduce(out0) in place: the ranks' partial sums (TP) */
    KK__DS_FP8_LINEAR,  /* kk_fp8_linear(in0, fp8 weight in1 [, residual in2]) -> out0 */
    KK__DS_OP_COUNT
} kk__dstep_op;

/* Buffers and weights a step names. The activations are [T = B*S, n]
 * row-major; Q, K, V, QR, KR are [B,H,S,D]. */
typedef enum kk__dbuf {
    KK__DB_NONE = 0,
    KK__DB_RES,     /* the residual stream [T,hidden] */
    KK__DB_XN,      /* normalized [T,hidden] */
    KK__DB_QT,      /* q projection [T,Hq*D] */
    KK__DB_KT,      /* [T,Hkv*D] */
    KK__DB_VT,      /* [T,Hkv*D] */
    KK__DB_Q,       /* [B,Hq,S,D] */
    KK__DB_K,       /* [B,Hkv,S,D] */
    KK__DB_V,       /* [B,Hkv,S,D] */
    KK__DB_QR,      /* rotated q [B,Hq,S,D] */
    KK__DB_KR,      /* rotated k [B,Hkv,S,D] */
    KK__DB_KC,      /* the layer's k cache [B,Hkv,S_max,D] */
    KK__DB_VC,      /* the layer's v cache */
    KK__DB_OT,      /* attention output [T,Hq*D] (written as [B,Hq,S,D] strided) */
    KK__DB_A,       /* a projection back to hidden [T,hidden] */
    KK__DB_G,       /* gate [T,I] */
    KK__DB_U,       /* up [T,I] */
    KK__DB_ACT,     /* silu(gate) * up [T,I] */
    KK__DB_SCRATCH, /* the discarded norm of KK__DS_ADD [T,hidden] */
    KK__DB_GU,      /* gate and up side by side [T,2I] (the fp8 plan's fused projection) */
    KK__DB_QKV,     /* q, k, v side by side [T,(Hq+2Hkv)*D] (plan.qkv's fused projection) */
    KK__DB_W_Q,
    KK__DB_W_K,
    KK__DB_W_V,
    KK__DB_W_O,
    KK__DB_W_GATE,
    KK__DB_W_UP,
    KK__DB_W_DOWN,
    KK__DB_W_IN_NORM,
    KK__DB_W_POST_NORM,
    KK__DB_W_GATE_UP, /* fp8 only: W_gate and W_up stacked [2I,hidden] */
    KK__DB_W_QKV,     /* W_q, W_k and W_v stacked [(Hq+2Hkv)*D,hidden] (plan.qkv) */
    KK__DB_COUNT
} kk__dbuf;

#define KK__DSTEP_MAX_IN 4
#define KK__DSTEP_MAX_OUT 3
#define KK__DPLAN_MAX_STEPS 32

typedef struct kk__dstep {
    const char *name; /* "q_proj", "rope q", ... */
    kk__dstep_op op;
    kk__dbuf in[KK__DSTEP_MAX_IN];
    kk__dbuf out[KK__DSTEP_MAX_OUT];
} kk__dstep;

typedef struct kk__dplan {
    kk_opt_level level;
    int n;
    kk__dstep steps[KK__DPLAN_MAX_STEPS];
    /* aggressive only: FP8 projections (kk_fp8_linear, weights quantized at
     * load) and CUDA graphs of the decode step; `why` says why one is off */
    int fp8, graphs;
    /* balanced and aggressive: q, k, v one projection (W_qkv, the qkv buffer) */
    int qkv;
    const char *fp8_why, *graphs_why;
} kk__dplan;

/* The plan of one decoder layer at `level`; with fp8 (aggressive only) the
 * projections are kk_fp8_linear steps. tp (a tensor-parallel rank): q, k, v
 * stay three projections (later work: each rank's stacked shard). */
void kk__dplan_build(kk_opt_level level, int fp8, int tp, kk__dplan *plan);

/* The op a step calls, as the plan text names it ("kk_linear", ...). */
const char *kk__dstep_op_name(kk__dstep_op op);

/* A buffer's name as the plan text shows it. */
const char *kk__dbuf_name(kk__dbuf b);

/* The plan as text (malloc'd), NULL when out of memory. */
char *kk__dplan_text(const kk__dplan *plan, const kk_model_config *cfg, const char *device,
                     kk_dtype dtype);

/* A layer's weights by id - KK__DB_W_Q: the file's nine (q, k, v, o, gate,
 * up, down, the two norms), then W_gate_up (fp8 only: never placed) and
 * W_qkv (q, k, v stacked, for plans with qkv: placed instead of the three). */
#define KK__DLAYER_FILE_WEIGHTS 9
#define KK__DLAYER_WEIGHTS 11
/* The fp8 plan's weights per layer: qkv, o, gate_up, down (kk_qtensor: e4m3
 * codes and 128x128 block scales, quantized once at create). */
#define KK__DFP8_WEIGHTS 4

/* The fp8 weight slot (0 .. KK__DFP8_WEIGHTS - 1) of weight id `w`, -1 if none. */
int kk__dfp8_slot(kk__dbuf w);

struct kk_decoder {
    kk_model_config cfg;
    char device[16];
    kk_dtype dtype;
    int max_batch, max_seq;
    kk__dplan plan;
    char *plan_text;
    int64_t layers;
    /* per layer: the weights in the order KK__DB_W_Q .. KK__DB_W_QKV (KK__DLAYER_WEIGHTS),
     * then the caches */
    kk_tensor **weights; /* [layers * KK__DLAYER_WEIGHTS]; the fp8 plan's projections NULL */
    kk_qtensor *fp8w;    /* [layers * KK__DFP8_WEIGHTS] with plan.fp8, else NULL */
    kk_tensor **k_cache, **v_cache;
    /* the globals on the device, each NULL when absent; lm_head may be embed
     * itself (tied: freed once) */
    kk_tensor *embed, *norm, *lm_head;
    /* flat work buffers, one per activation id, max_batch * max_seq tokens */
    kk_tensor *buf[KK__DB_COUNT];
    /* every sequence's cached length for rope_kv_append: int32, pos_rows rows
     * of max_batch on the device; row p all p (a table written once,
     * pos_rows = max_seq) or, when that is over 16 MiB, 2 rows (one per
     * micro-batch) written by each call (decoder_run.c) */
    kk_tensor *seqlens;
    int64_t pos_rows;
    int64_t batch;  /* batch of the cached tokens (0 when empty) */
    int64_t length; /* tokens cached per sequence */
    /* tensor parallel (decoder_tp.c): this rank's shard of heads, KV heads and
     * intermediate is in cfg; comm NULL and tp_size 1 alone */
    kk_comm *comm;
    int tp_rank, tp_size;
    /* overlap (decoder_run.c): the mode, and the communication stream and
     * events made by the first overlapped call (none on the CPU) */
    kk_tp_overlap overlap;
    kk_stream comm_stream;
    void *events[4];
    /* the profiling pass (decoder_profile.c): set only inside
     * kk_decoder_profile, NULL otherwise */
    struct kk__dprofile *profile;
    /* CUDA graphs of the decode step (decoder_graph.c): NULL when off */
    struct kk__dgraphs *graphs;
};

/* kk_decoder_create's work (decoder.c); with a comm, rank kk_comm_rank(comm)'s
 * shard of a tensor-parallel decoder. */
kk_status kk__decoder_create(const char *func, const kk_model *model, const char *device,
                             kk_opt_level level, int max_batch, int max_seq, kk_comm *comm,
                             kk_decoder **out);

/* Make d->seqlens and d->pos_rows (decoder_run.c): the table of positions
 * when it fits, else the two rows each call writes. */
kk_status kk__dpos_create(const char *func, kk_decoder *d);

/* Release the communication stream and events (decoder_run.c). */
void kk__doverlap_free(kk_decoder *d);

/* ---- tensor parallelism (decoder_tp.c) ---- */

/* Make d (its device known, nothing placed yet) rank comm's shard: check the
 * device and that heads, KV heads and intermediate divide by the size, divide
 * them in d->cfg, add the all-reduces to the plan. */
kk_status kk__dtp_setup(const char *func, kk_decoder *d, kk_comm *comm);

/* Layer weight k (KK__DB_W_Q + k order) of d's rank, a CPU tensor to place:
 * its rows or columns of w (a contiguous copy for columns). */
kk_status kk__dtp_weight(const char *func, const kk_decoder *d, int k, const kk_tensor *w,
                         kk_tensor **out);

/* Append the tensor-parallel line to d->plan_text. */
kk_status kk__dtp_note(const char *func, kk_decoder *d);

/* The all-reduce step: t summed over the ranks, in place, on the ops' stream.
 * Refused inside a profiling pass (the sampler repeats a step as often as it
 * needs, which the other ranks would not match). */
kk_status kk__dtp_all_reduce(kk_decoder *d, kk_tensor *t, kk_stream stream);

/* ---- the cost model and the profiling pass (cost_model.c, decoder_profile.c) ---- */

/* The profiler's hook, called by the executor before step i of layer 0 runs
 * (its inputs as the call made them): time fn (that step on the sampler's
 * stream) and keep the measurement. */
struct kk__dprofile;
kk_status kk__dprofile_step(struct kk__dprofile *p, const kk_decoder *d, int i, int64_t B,
                            int64_t S, int64_t L, kk_bench_fn fn, void *fn_ctx);

/* Run the layers over hidden_in [B,S,hidden] (decoder_run.c). */
kk_status kk__decoder_run(const char *func, kk_decoder *d, const kk_tensor *hidden_in,
                          kk_tensor *hidden_out);

/* ---- the aggressive level (decoder_fp8.c) ---- */

/* Whether d's plan at `level` uses FP8 projections and CUDA graphs on d's
 * device (d->device set), and why not (static text, NULL when on). */
void kk__dlevel_choose(kk_decoder *d, kk_opt_level level, int tp, int *fp8, int *graphs,
                       const char **fp8_why, const char **graphs_why);

/* Layer `layer`'s projections quantized into d->fp8w (allocated on first use). */
kk_status kk__dfp8_place(kk_decoder *d, int64_t layer, const kk_model_layer *l);
void kk__dfp8_free(kk_decoder *d);

/* Whether layer weight k (KK__DB_W_Q + k order) is held as fp8 instead of
 * being placed (a projection of an fp8 plan). */
/* parts[0..n) ([N_i,K], one dtype; names for errors) stacked into a host
 * [sum N_i, K] tensor. */
kk_status kk__dstack_rows(const kk_tensor *const *parts, const char *const *names, int n,
                          kk_tensor **out);
int kk__dweight_is_fp8(const kk_decoder *d, int k);

/* ---- CUDA graphs of the decode step (decoder_graph.c) ---- */

/* One call's state, built by decoder_run.c: the views of the work buffers
 * for B x S tokens after L cached, and the ops' stream. */
typedef struct kk__dcall kk__dcall;

/* Run step i of layer l of the call (decoder_run.c). */
kk_status kk__dcall_step(kk__dcall *c, int64_t layer, int i);

/* Set the call's stream (NULL: the ops' default) and the lengths its
 * rope_kv_append reads (NULL: d->seqlens' row; graphs pass a buffer of their
 * own, whose address the captured call keeps). */
void kk__dcall_set_stream(kk__dcall *c, kk_stream stream, kk_tensor *lens);

/* Whether step `s` may be inside a captured graph: it reads nothing the host
 * passes per call (the cache length) and calls no collective. */
int kk__dstep_capturable(const kk__dstep *s);

/* Set up graphs for d (a CUDA decoder whose plan has graphs on): the pool
 * and the stream. KK_OK with d->graphs NULL when the backend has none. */
kk_status kk__dgraphs_create(const char *func, kk_decoder *d);
void kk__dgraphs_free(kk_decoder *d);

/* Whether decode calls go through the graphs (made and not switched off). */
int kk__dgraphs_on(const kk_decoder *d);

/* The layers of a decode call (S = 1) through the graphs: replayed when
 * captured for this batch; otherwise run eagerly (the warm-up), then captured
 * for the next call; eager for good, with one warning, when capture fails.
 * Leaves the work queued on the graphs' stream, then waits for it. */
kk_status kk__dgraphs_run(kk_decoder *d, kk__dcall *c, int64_t B);

#ifdef __cplusplus
}
#endif
#endif
