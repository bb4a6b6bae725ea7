/* convert on the CPU: kk_convert_host, whose rounding the op defines. */
#include "core/error.h"
#include "cpu/cpu_kernels.h"
#include "opdef/convert.h"

kk_status kk__convert_cpu(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)stream;
    kk_status st = kk__convert_check_tensors(p, t, KK_BACKEND_CPU);
    if (st != KK_OK) return st;
    return kk_convert_host(t[0]->data, t[0]->dtype, t[1]->data, t[1]->dtype,
                           (size_t)p->i[KK__CVT_N]);
}
