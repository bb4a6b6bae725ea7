/* kk_nvfp4_gemm (kernelkit/ops.h): the `nvfp4_gemm` op; gw present is its
 * global parameter. */
#include "opdef/nvfp4_gemm.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("nvfp4_gemm");

kk_status kk_nvfp4_gemm(const kk_tensor *x, const kk_tensor *w, const kk_tensor *sw,
                        const kk_tensor *gw, kk_tensor *y, kk_stream stream) {
    static const char *const op = "nvfp4_gemm";
    kk_op_params p;
    kk_status st = kk__entry_need(op, "x", x, 2);
    if (st == KK_OK) st = kk__entry_need(op, "w", w, 2);
    if (st == KK_OK) st = kk__entry_need(op, "sw", sw, 2);
    if (st == KK_OK && gw) st = kk__entry_need(op, "gw", gw, -1); /* [1]: kk_op_run checks */
    if (st == KK_OK) st = kk__entry_need(op, "y", y, 2);
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__NVG_M] = x->shape[0];
    p.i[KK__NVG_N] = w->shape[0];
    p.i[KK__NVG_K] = x->shape[1];
    p.i[KK__NVG_GLOBAL] = gw != NULL;
    if (gw) return kk__entry_run(&p, (const kk_tensor *[]){x, w, sw, gw, y}, 5, stream, NULL, 0);
    return kk__entry_run(&p, (const kk_tensor *[]){x, w, sw, y}, 4, stream, NULL, 0);
}

/* Tensors as the op describes them: x, w, sw, [gw], y. */
kk_status kk__nvfp4_gemm_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    if (p->i[KK__NVG_GLOBAL]) return kk_nvfp4_gemm(t[0], t[1], t[2], t[3], t[4], stream);
    return kk_nvfp4_gemm(t[0], t[1], t[2], NULL, t[3], stream);
}
