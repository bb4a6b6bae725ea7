/* Internal: the CPU attention backward's core (src/cpu/attention_backward_cpu.c),
 * one kv group of one batch, on tensors given by base offsets and strides, so
 * that attention_backward (per batch) and attention_varlen_backward (per
 * sequence of a packed batch) run the same code. docs/kernels/attention.md,
 * "Backward" and "Varlen backward". */
#ifndef KK_CPU_ATTENTION_BACKWARD_CPU_H
#define KK_CPU_ATTENTION_BACKWARD_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/dtype.h"
#include "opdef/opdef.h"

/* Rows of one tensor: element d of row i of head h at at + h * hs + i * ss + d
 * (elements of the tensor's dtype; lse: floats, d = 0). */
typedef struct kk__atb_view {
    void *data;
    int64_t at, hs, ss;
} kk__atb_view;

/* The tensors of one batch (or sequence): q, o, dO, dq and lse by query head,
 * k, v, dk, dv by kv head. */
typedef struct kk__atb_views {
    kk__atb_view q, k, v, o, dO, lse, dq, dk, dv;
    kk_dtype dt; /* of every tensor but lse (f32) */
} kk__atb_views;

/* A thread's f32 scratch for Sq rows, Sk keys and head dim D (the longest of
 * the calls it serves): its float count, and its pieces carved from m. */
typedef struct kk__atb_scratch {
    float *k, *dk, *dv; /* [Sk, D] */
    float *kt, *vt;     /* [D, Sk]: K and V transposed */
    float *q, *dO, *dq; /* [Sq, D] */
    float *lse, *di;    /* [Sq] */
} kk__atb_scratch;

size_t kk__atb_scratch_floats(int64_t Sq, int64_t Sk, int64_t D);
void kk__atb_scratch_carve(float *m, int64_t Sq, int64_t Sk, int64_t D, kk__atb_scratch *w);

/* dq of the query heads kvh*G .. (kvh+1)*G-1 and dk, dv of kv head kvh of one
 * batch: p is an attention_backward parameter set whose Sq, Sk are this
 * batch's (Sq or Sk may be 0: nothing is read, zeros are written), b the
 * dropout mask's batch (bh = b * Hq + h). Every output row of the group is
 * written. */
void kk__attention_backward_cpu_group(const kk_op_params *p, const kk__atb_views *x, int64_t b,
                                      int64_t kvh, const kk__atb_scratch *w);

#endif
