/* The decoder's ends: token ids to hidden states (model.embed_tokens) and
 * hidden states to logits (model.norm, then lm_head), through the public ops
 * and tensor copies like the layers. */
#include <stdio.h>

#include "core/error.h"
#include "kernelkit/op.h"
#include "model/decoder_internal.h"

kk_status kk_decoder_embed(kk_decoder *d, const kk_tensor *tokens, kk_tensor *hidden_out) {
    static const char func[] = "kk_decoder_embed";
    if (!d) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "d", "a decoder", "NULL");
    if (!d->embed)
        return kk__error(KK_ERR_UNSUPPORTED, func, "the model has no model.embed_tokens.weight");
    if (!tokens || tokens->ndim != 2 || tokens->dtype != KK_DTYPE_INT32 ||
        tokens->device_kind != KK_BACKEND_CPU || !kk_tensor_is_contiguous(tokens))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "tokens",
                             "a contiguous int32 [B,S] tensor on the CPU", "%s",
                             tokens ? "another tensor" : "NULL");
    const int64_t B = tokens->shape[0], S = tokens->shape[1], h = d->cfg.hidden_size;
    if (!hidden_out || hidden_out->ndim != 3 || hidden_out->shape[0] != B ||
        hidden_out->shape[1] != S || hidden_out->shape[2] != h || hidden_out->dtype != d->dtype)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "hidden_out",
                             "[B,S,hidden] of tokens' B, S in the compute dtype", "%s",
                             hidden_out ? "another tensor" : "NULL");
    const int32_t *ids = tokens->data;
    const int64_t vocab = d->embed->shape[0];
    for (int64_t i = 0; i < B * S; i++) /* every id before anything is written */
        if (ids[i] < 0 || ids[i] >= vocab) {
            char e[64];
            snprintf(e, sizeof e, "a token id 0 .. %lld", (long long)vocab - 1);
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "tokens", e, "%d at element %lld",
                                 ids[i], (long long)i);
        }
    kk_tensor *rows = NULL;
    kk_status st = kk_tensor_reshape(hidden_out, 2, (int64_t[]){B * S, h}, &rows);
    for (int64_t i = 0; st == KK_OK && i < B * S; i++) {
        kk_tensor *src = NULL, *dst = NULL;
        st = kk_tensor_slice(d->embed, 0, ids[i], ids[i] + 1, 1, &src);
        if (st == KK_OK) st = kk_tensor_slice(rows, 0, i, i + 1, 1, &dst);
        if (st == KK_OK) st = kk_tensor_copy(dst, src);
        kk_tensor_destroy(src), kk_tensor_destroy(dst);
    }
    kk_tensor_destroy(rows);
    return st;
}

kk_status kk_decoder_logits(kk_decoder *d, const kk_tensor *hidden, kk_tensor *logits) {
    static const char func[] = "kk_decoder_logits";
    if (!d) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "d", "a decoder", "NULL");
    if (!d->lm_head)
        return kk__error(KK_ERR_UNSUPPORTED, func,
                         "the model has no lm_head.weight (and no tied embedding)");
    const int64_t h = d->cfg.hidden_size, vocab = d->lm_head->shape[0];
    if (!hidden || hidden->ndim != 3 || hidden->shape[2] != h)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "hidden", "shape [B,S,hidden]", "%s",
                             hidden ? "another shape" : "NULL");
    const int64_t T = hidden->shape[0] * hidden->shape[1];
    if (T > (int64_t)d->max_batch * d->max_seq)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "hidden",
                             "at most max_batch x max_seq tokens", "%lld tokens", (long long)T);
    if (!logits || logits->ndim != 3 || logits->shape[0] != hidden->shape[0] ||
        logits->shape[1] != hidden->shape[1] || logits->shape[2] != vocab)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "logits", "shape [B,S,vocab]", "%s",
                             logits ? "another shape" : "NULL");
    kk_tensor *x = NULL, *y = NULL, *xn = NULL, *flat = NULL;
    kk_status st = kk_tensor_reshape(hidden, 2, (int64_t[]){T, h}, &x);
    if (st == KK_OK) st = kk_tensor_reshape(logits, 2, (int64_t[]){T, vocab}, &y);
    if (st == KK_OK && d->norm) {
        st = kk_tensor_slice(d->buf[KK__DB_XN], 0, 0, T * h, 1, &flat);
        if (st == KK_OK) st = kk_tensor_reshape(flat, 2, (int64_t[]){T, h}, &xn);
        if (st == KK_OK) st = kk_rmsnorm(x, d->norm, xn, d->cfg.rms_norm_eps, NULL);
    }
    if (st == KK_OK) st = kk_linear(xn ? xn : x, d->lm_head, NULL, y, KK_ACT_NONE, NULL);
    if (st == KK_OK) st = kk_op_synchronize(d->device, NULL);
    kk_tensor_destroy(x), kk_tensor_destroy(y), kk_tensor_destroy(xn), kk_tensor_destroy(flat);
    return st;
}
