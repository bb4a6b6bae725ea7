/* The CPU backend's slot table: every op of op_list.h has a CPU kernel,
 * kk__<op>_cpu. The ops whose CPU kernel reads strides are listed in
 * STRIDED. */
#include "cpu/cpu_kernels.h"

#define STRIDED(id)                                                                                \
    ((id) == KK__OP_ID_attention || (id) == KK__OP_ID_attention_varlen ||                          \
     (id) == KK__OP_ID_rope_kv_append || (id) == KK__OP_ID_attention_varlen_backward)

const kk__slot *const kk__cpu_slots[KK__OP_COUNT] = {
#define KK_OP(name)                                                                                \
    [KK__OP_ID_##name] = &(const kk__slot){kk__##name##_cpu, STRIDED(KK__OP_ID_##name)},
#include "opdef/op_list.h"
#undef KK_OP
};
