/* Internal: the CPU backend's kernels, one per op of src/opdef/op_list.h
 * (kk__<op>_cpu in src/cpu/<op>_cpu.c), and their slot table. */
#ifndef KK_CPU_KERNELS_H
#define KK_CPU_KERNELS_H

#include "backend/backend.h"

#define KK_OP(name)                                                                                \
    kk_status kk__##name##_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream);
#include "opdef/op_list.h"
#undef KK_OP

/* The CPU's copy, read and fp32 ceilings (bf16 and fp8 marked unavailable):
 * the table's `calibrate` (calibrate_cpu.c). */
kk_status kk__calibrate_cpu(void *ctx, int index, const kk_calibrate_options *o,
                            kk__calibrate_measure_fn measure, kk_calibration *cal);

/* By op id (KK__OP_COUNT entries). */
extern const kk__slot *const kk__cpu_slots[];

#endif
