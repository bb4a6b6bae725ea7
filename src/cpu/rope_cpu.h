/* Internal: what rope's CPU kernel (src/cpu/rope_cpu.c) lends rope_kv_append's
 * (src/cpu/rope_kv_append_cpu.c): the cos/sin table and the row rotation. */
#ifndef KK_CPU_ROPE_CPU_H
#define KK_CPU_ROPE_CPU_H

#include <stdint.h>

#include "kernelkit/status.h"
#include "opdef/rope.h"

#define KK__ROPE_MAX_D 1024 /* the D parameter's maximum */

/* cos and sin of every (position, pair) for the T positions pos[0..T) (NULL:
 * offset + t) with rope params p's frequencies: angles in f64, rounded to f32
 * once. *table holds cos [T][R/2], then sin [T][R/2]; free() it. */
kk_status kk__rope_cpu_table(const kk_op_params *p, const int64_t *pos, int64_t T, float **table);

/* Row xrow of x (D elements) rotated by one table row (c, s: R/2 each) into
 * row yrow of y; dimensions past R copied; stream: streaming stores. */
typedef void (*kk__rope_row_fn)(const void *x, int64_t xrow, void *y, int64_t yrow, kk_dtype dt,
                                int64_t D, int64_t R, const float *c, const float *s, int gptj,
                                int stream);

/* The rotation compiled for the instruction set of kk__cpu_isa(). */
kk__rope_row_fn kk__rope_cpu_row(void);

#endif
