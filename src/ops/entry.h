/* Internal: what the typed entry points of kernelkit/ops.h share (one file per
 * op under src/ops/). They fill the op's parameters by index and call
 * kk_op_run, with no text formatted or parsed, so an entry point costs little
 * more than kk_op_run itself (`kernelkit bench --host-overhead` measures both).
 * docs/architecture.md, "Kernels of an op". */
#ifndef KK_OPS_ENTRY_H
#define KK_OPS_ENTRY_H

#include <stdatomic.h>

#include "kernelkit/ops.h"
#include "opdef/opdef.h"

/* An entry point, in short:
 *   static kk__op_row row = KK__OP_ROW("softmax");
 *   kk_op_params p;
 *   kk_status st = kk__entry_need("softmax", "x", x, 2);
 *   if (st == KK_OK) st = kk__entry_params(&row, &p);
 *   if (st != KK_OK) return st;
 *   p.i[KK__SMX_ROWS] = x->shape[0]; ...
 *   return kk__entry_run(&p, (const kk_tensor *[]){x, y}, 2, stream, NULL, 0);
 *
 * An op's registry row and its parameters at their defaults, looked up on the
 * first call and kept: later calls pay one atomic load and a copy instead of
 * a search of the table and kk_op_params_init (which parses the defaults of
 * LIST parameters from text). */
typedef struct kk__op_row {
    const char *name;
    atomic_int state; /* ROW_EMPTY, ROW_FILLING (one thread), ROW_READY: entry.c */
    kk_op_params defaults;
} kk__op_row;

#define KK__OP_ROW(op_name)                                                                        \
    { .name = (op_name) }

/* A tensor the op needs: present, with `ndim` dimensions (any when ndim < 0:
 * kk_op_run checks its shape). Errors name the op and the argument. */
kk_status kk__entry_need(const char *op, const char *argument, const kk_tensor *t, int ndim);

/* `row`'s parameters at their defaults, ready to be set by index. */
kk_status kk__entry_params(kk__op_row *row, kk_op_params *p);

/* The entry point's argument a parameter comes from, so that an error about
 * that parameter names what the caller wrote: the dtype from "x", theta from
 * "opt->theta". */
typedef struct kk__entry_arg {
    int param;            /* index into the op's parameters */
    const char *argument; /* "x", "opt->theta" */
} kk__entry_arg;

/* kk_op_run on tensors[0..n) (kk_op_tensors order; inputs are only read),
 * which validates p first. When p is invalid in a parameter listed in
 * args[0..nargs), the error is recorded again naming that argument. */
kk_status kk__entry_run(const kk_op_params *p, const kk_tensor *const *tensors, int n,
                        kk_stream stream, const kk__entry_arg *args, int nargs);

/* ---- what the attention entry points share ---- */

/* opt->seed and opt->offset fit the parameters (at most 2^63-1). */
kk_status kk__entry_attention_options(const char *op, const kk_attention_options *opt);

/* The varlen ops' arguments (kk_attention_varlen, kk_attention_varlen_backward):
 * q present with 3 dimensions [total_q,Hq,D] or 4 [1,Hq,total_q,D] (the other
 * tensors are checked against q's rank by the caller), cu_seqlens_q and
 * cu_seqlens_k 1-dimensional with 2 or more offsets, max_seqlen_q and
 * max_seqlen_k in 1..2^20, the options as above. */
kk_status kk__entry_varlen_args(const char *op, const kk_tensor *q, const kk_tensor *cu_seqlens_q,
                                const kk_tensor *cu_seqlens_k, int64_t max_seqlen_q,
                                int64_t max_seqlen_k, const kk_attention_options *opt);
/* A [total,H,D] tensor (FlashAttention's varlen layout) as the [1,H,total,D]
 * view the varlen ops take; a 4-dimensional one as it is. The view is a copy
 * of the descriptor in *view, valid while t is: nothing is allocated. */
const kk_tensor *kk__entry_packed_view(const kk_tensor *t, kk_tensor *view);
/* lse [Hq,total_q] as [1,Hq,total_q]; NULL or a 3-dimensional one as it is. */
const kk_tensor *kk__entry_lse_view(const kk_tensor *t, kk_tensor *view);
/* The parameters both varlen ops keep at the forward's indices (KK__AVL_NSEQ
 * .. KK__AVL_SCALE, attention_varlen_backward's too): sequences, heads,
 * totals, maximum lengths and head dim from cu_seqlens_q and the
 * [1,H,total,D] views of q and k; the mask and scale from opt. */
void kk__entry_varlen_shape(kk_op_params *p, const kk_tensor *cu_seqlens_q, const kk_tensor *qv,
                            const kk_tensor *kv, int64_t max_seqlen_q, int64_t max_seqlen_k,
                            const kk_attention_options *opt);

/* ---- the host-overhead benchmark's adapters ----
 *
 * Each calls its op's typed entry point with the tensors of a case (in
 * kk_op_tensors order) and the scalar options of its parameters, so that
 * kk_op_host_overhead can time the entry point beside kk_op_run on the same
 * case. They have a kernel slot's signature; they live in src/ops/<op>.c. */
#define KK_OP(name)                                                                                \
    kk_status kk__##name##_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream);
#include "opdef/op_list.h"
#undef KK_OP

/* The adapter of `op` (NULL for NULL). */
kk_op_kernel_fn kk__entry_adapter(const kk_op *op);

#endif
