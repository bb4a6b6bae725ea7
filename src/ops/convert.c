/* kk_convert (kernelkit/ops.h): the `convert` op; n, src and dst are read off
 * x and y. */
#include "core/error.h"
#include "opdef/convert.h"
#include "ops/entry.h"

static kk__op_row row = KK__OP_ROW("convert");

kk_status kk_convert(const kk_tensor *x, kk_tensor *y, kk_stream stream) {
    kk_op_params p;
    kk_status st = kk__entry_need("convert", "x", x, -1); /* any shape: the op is flat */
    if (st == KK_OK) st = kk__entry_need("convert", "y", y, -1);
    if (st == KK_OK && kk_tensor_numel(x) < 1)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, "convert", "x", "at least one element",
                           "%lld elements", (long long)kk_tensor_numel(x));
    if (st == KK_OK) st = kk__entry_params(&row, &p);
    if (st != KK_OK) return st;
    p.i[KK__CVT_N] = kk_tensor_numel(x);
    p.i[KK__CVT_SRC] = x->dtype;
    p.i[KK__CVT_DST] = y->dtype;
    static const kk__entry_arg args[] = {{KK__CVT_SRC, "x"}, {KK__CVT_DST, "y"}};
    return kk__entry_run(&p, (const kk_tensor *[]){x, y}, 2, stream, args, 2);
}

kk_status kk__convert_entry(const kk_op_params *p, kk_tensor *const *t, kk_stream stream) {
    (void)p;
    return kk_convert(t[0], t[1], stream);
}
