/* Internal: the `attention_varlen` op's registry row (src/opdef/attention_varlen.c)
 * and its kernels (src/cpu/attention_varlen_cpu.c, src/cuda/kernels/attention_varlen.cu):
 * attention over a packed batch of variable-length sequences, FlashAttention's
 * varlen forward, each sequence one `attention` with B = 1; and what
 * attention_varlen_backward shares with it (sizes, lists, checks of the
 * offsets, the fuzz draw). Layouts, cu_seqlens, dropout and the seqlens lists:
 * docs/kernels/attention.md, "Variable-length batches". */
#ifndef KK_OPDEF_ATTENTION_VARLEN_H
#define KK_OPDEF_ATTENTION_VARLEN_H

#include "opdef/attention.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    KK__AVL_NSEQ,
    KK__AVL_HQ,
    KK__AVL_HKV,
    KK__AVL_TQ,
    KK__AVL_TK,
    KK__AVL_MAXQ,
    KK__AVL_MAXK,
    KK__AVL_D,
    KK__AVL_CAUSAL,
    KK__AVL_WL,
    KK__AVL_WR,
    KK__AVL_SCALE,
    KK__AVL_LSE,
    KK__AVL_DTYPE,
    KK__AVL_DROPOUT,
    KK__AVL_SEED,
    KK__AVL_OFFSET,
    KK__AVL_LENS_Q,
    KK__AVL_LENS_K,
    KK__AVL_NPARAMS
};

/* Tensor order: the kernels' t[]. */
enum {
    KK__AVL_T_Q,
    KK__AVL_T_K,
    KK__AVL_T_V,
    KK__AVL_T_CUQ,
    KK__AVL_T_CUK,
    KK__AVL_T_O,
    KK__AVL_T_LSE
};

/* The sizes the parameters resolve to (0s taken from the lists). */
typedef struct kk__varlen_dims {
    int64_t nseq, total_q, total_k, max_q, max_k;
} kk__varlen_dims;

/* The parameter rows both varlen ops share (this op's table and
 * attention_varlen_backward's): the forward's indices up to the scale, then
 * the rows each table places at its own index. */
#define KK__AVL_PARAMS_TO_SCALE                                                                    \
    [KK__AVL_NSEQ] = KK__P_INT("nseq", 0, 65536, 1, 0, "sequences; 0 = as many as seqlens_q has"), \
    [KK__AVL_HQ] = KK__P_INT("Hq", 1, 1024, 1, 4, "query heads"),                                  \
    [KK__AVL_HKV] = KK__P_INT("Hkv", 1, 1024, 1, 4, "key/value heads; Hq % Hkv == 0 (GQA)"),       \
    [KK__AVL_TQ] = KK__P_INT("total_q", 0, KK__DIM_MAX, 1, 0,                                      \
                             "query rows of all sequences; 0 = the sum of seqlens_q"),             \
    [KK__AVL_TK] = KK__P_INT("total_k", 0, KK__DIM_MAX, 1, 0,                                      \
                             "keys of all sequences; 0 = the sum of seqlens_k"),                   \
    [KK__AVL_MAXQ] = KK__P_INT("max_seqlen_q", 0, KK__SEQ_MAX, 1, 0,                               \
                               "at least the longest query sequence (sizes the CUDA grid); 0 = "   \
                               "the longest"),                                                     \
    [KK__AVL_MAXK] = KK__P_INT("max_seqlen_k", 0, KK__SEQ_MAX, 1, 0,                               \
                               "at least the longest key sequence; 0 = the longest"),              \
    [KK__AVL_D] = KK__P_INT("D", 16, 256, 1, 64, "head dimension"),                                \
    [KK__AVL_CAUSAL] = KK__P_BOOL(                                                                 \
        "causal", 0, "query i of a sequence sees keys j <= i + Sk - Sq of that sequence"),         \
    [KK__AVL_WL] = KK__P_INT("window_left", -1, KK__SEQ_MAX, 1, -1,                                \
                             "keys j >= i + Sk - Sq - w only; -1 = unlimited"),                    \
    [KK__AVL_WR] = KK__P_INT("window_right", -1, KK__SEQ_MAX, 1, -1,                               \
                             "keys j <= i + Sk - Sq + w only; -1 = unlimited"),                    \
    [KK__AVL_SCALE] = KK__P_FLOAT("scale", 0.0, 1e6, 0.0, "softmax scale; 0 = 1/sqrt(D)")
#define KK__AVL_PARAM_SEED KK__P_INT("seed", 0, INT64_MAX, 1, 0, "dropout: Philox key")
#define KK__AVL_PARAM_OFFSET                                                                       \
    KK__P_INT("offset", 0, INT64_MAX, 1, 0, "dropout: Philox counter offset")
#define KK__AVL_PARAM_SEQLENS_Q                                                                    \
    {                                                                                              \
        .name = "seqlens_q", .kind = KK_PARAM_LIST, .min = 0, .max = KK__SEQ_MAX,                  \
        .help = "query length of each sequence, e.g. 5:0:17 (fills cu_seqlens_q); none = the "     \
                "even split of total_q",                                                           \
        .def_list = "37:0:100:64"                                                                  \
    }
#define KK__AVL_PARAM_SEQLENS_K                                                                    \
    {                                                                                              \
        .name = "seqlens_k", .kind = KK_PARAM_LIST, .min = 0, .max = KK__SEQ_MAX,                  \
        .help = "key length of each sequence, as many as seqlens_q", .def_list = "50:7:100:64"     \
    }

void kk__attention_varlen_dims(const kk_op_params *p, kk__varlen_dims *d);
/* Length of sequence s (which 0: queries, 1: keys) as the case has it: the
 * list's value, else the even split. */
int64_t kk__attention_varlen_len(const kk_op_params *p, int which, int64_t s);
/* The `attention` op's parameters for one sequence of lq queries and lk keys
 * (B = 1, the mask, scale and dropout of p): what kk__attention_key_range and
 * the reference's rows take. Not validated (lk may be 0). */
void kk__attention_varlen_seq_params(const kk_op_params *p, int64_t lq, int64_t lk,
                                     kk_op_params *out);
/* The offsets cq, ck [nseq+1] of the cu_seqlens_q, cu_seqlens_k inputs of p's
 * case (a varlen op's: the first sizes are the forward's), from a kernel's
 * int32 tensors or the reference's decoded values, checked: cu[0] = 0,
 * nondecreasing, cu[nseq] = the total, no length above max_seqlen. The error
 * names p's op, the tensor, the element and its value. */
kk_status kk__attention_varlen_offsets(const kk_op_params *p, const int32_t *cu_q,
                                       const int32_t *cu_k, int64_t *cq, int64_t *ck);
kk_status kk__attention_varlen_offsets_f64(const kk_op_params *p, const double *cu_q,
                                           const double *cu_k, int64_t *cq, int64_t *ck);
/* Checks the parameters of a varlen op (its sizes are the forward's); errors
 * name p's op. */
kk_status kk__attention_varlen_validate(const kk_op_params *p);
int kk__attention_varlen_describe(const kk_op_params *p, kk_op_tensor *out);
double kk__attention_varlen_flops(const kk_op_params *p);
kk_status kk__attention_varlen_reference(const kk_op_params *p, const double *const *in,
                                         double *const *out);
/* The harness's cu_seqlens input of `keys` (0: cu_seqlens_q): the case's
 * lengths summed, n = nseq + 1 offsets. */
void kk__attention_varlen_write_cu(const kk_op_params *p, int keys, int32_t *cu, int64_t n);
/* The fuzzer's draw of a packed batch (lengths, max_seqlen, windows) on
 * attention's draw; a varlen op's fuzz hook. */
void kk__attention_varlen_fuzz(kk__rng *r, kk_op_params *p, int big);

/* The `attention` row's tolerances: the same arithmetic per sequence. */

extern const kk_op kk__op_attention_varlen;

#ifdef __cplusplus
}
#endif
#endif
