/* kk_nvfp4_gemv (kernelkit/ops.h): the `nvfp4_gemv` op; the scale layout is
 * read off the scales' rank. */
#include "core/error.h"
#include "opdef/nvfp4_gemv.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("nvfp4_gemv");

kk_status kk_nvfp4_gemv(const kk_tensor *a, const kk_tensor *sa, const kk_tensor *b,
                        const kk_tensor *sb, const kk_tensor *ga, const kk_tensor *gb, kk_tensor *c,
                        kk_stream stream) {
    static const char *const op = "nvfp4_gemv";
    if (!ga != !gb)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "ga, gb", "both or neither", "%s",
                             ga ? "gb NULL" : "ga NULL");
    kk_status st = kk__entry_need(op, "a", a, 3);
    if (st == KK_OK) st = kk__entry_need(op, "b", b, 3);
    if (st == KK_OK && !sa)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "sa", "a tensor", "NULL");
    if (st == KK_OK && sa->ndim != 3 && sa->ndim != 4)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, op, "sa",
                           "3 dimensions (plain) or 4 (128x4 blocked)", "%d", sa->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "sb", sb, sa->ndim);
    if (st == KK_OK) st = kk__entry_need(op, "c", c, 3);
    kk_op_params p;
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__GEMV_M] = a->shape[1];
    p.i[KK__GEMV_K] = a->shape[2];
    p.i[KK__GEMV_L] = a->shape[0];
    p.i[KK__GEMV_LAYOUT] = sa->ndim == 4 ? KK__GEMV_BLOCKED : KK__GEMV_PLAIN;
    p.i[KK__GEMV_GLOBAL] = ga != NULL;
    if (ga)
        return kk__entry_run(&p, (const kk_tensor *[]){a, b, sa, sb, ga, gb, c}, 7, stream, NULL,
                             0);
    return kk__entry_run(&p, (const kk_tensor *[]){a, b, sa, sb, c}, 5, stream, NULL, 0);
}

/* Tensors as the op describes them: a, b, sa, sb, [ga, gb], c. */
kk_status kk__nvfp4_gemv_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    if (p->i[KK__GEMV_GLOBAL])
        return kk_nvfp4_gemv(t[0], t[2], t[1], t[3], t[4], t[5], t[6], stream);
    return kk_nvfp4_gemv(t[0], t[2], t[1], t[3], NULL, NULL, t[4], stream);
}
