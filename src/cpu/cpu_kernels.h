/* Internal: the CPU backend's kernels, one per op of src/opdef/op_list.h
 * (kk__<op>_cpu in src/cpu/<op>_cpu.c), and their slot table. */
#ifndef KK_CPU_KERNELS_H
#define KK_CPU_KERNELS_H

#include "backend/backend.h"

#define KK_OP(name)                                                                                \
    kk_status kk__##name##_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream);
#include "opdef/op_list.h"
#undef KK_OP

/* By op id (KK__OP_COUNT entries). */
extern const kk__slot *const kk__cpu_slots[];

#endif
