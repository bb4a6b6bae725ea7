/* The aggressive level's choices and its FP8 weights (docs/model.md,
 * "Levels"): whether the plan uses FP8 projections and CUDA graphs on this
 * device and configuration, and the projections quantized once at create to
 * e4m3 with 128x128 block scales (kk_quantize's KK_SCALE_128X128, what
 * kk_fp8_linear's block scaling takes, the only scaling its CUDA kernel runs),
 * gate and up stacked into one weight. The bf16 projections are then not
 * placed: on a GPU the device holds only the codes and scales. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "kernelkit/config.h"
#include "kernelkit/device.h"
#include "model/decoder_internal.h"

/* hardware.nvidia.fp8_enabled as the level sets it, KK_FP8 (when set) over it. */
static int fp8_enabled(kk_opt_level level) {
    kk_config c;
    kk_config_init_defaults(&c);
    (void)kk_config_set_level(&c, level);
    const char *e = getenv("KK_FP8");
    if (e && *e) {
        kk_config env;
        kk_config_init_defaults(&env);
        if (kk_config_apply_env(&env) == KK_OK)
            c.hardware.nvidia.fp8_enabled = env.hardware.nvidia.fp8_enabled;
    }
    return c.hardware.nvidia.fp8_enabled;
}

void kk__dlevel_choose(kk_decoder *d, kk_opt_level level, int tp, int *fp8, int *graphs,
                       const char **fp8_why, const char **graphs_why) {
    *fp8 = *graphs = 0;
    *fp8_why = *graphs_why = NULL;
    if (level != KK_OPT_AGGRESSIVE) return;
    kk_backend_kind kind = KK_BACKEND_CPU;
    int index = 0;
    (void)kk_device_parse(d->device, &kind, &index);
    if (tp) {
        *fp8_why = "tensor parallel: the shards stay in the compute dtype (later work)";
        *graphs_why = "tensor parallel: the all-reduces are not captured (later work)";
        return;
    }
    if (kind == KK_BACKEND_CPU)
        *graphs_why = "the CPU runs its steps as they are called";
    else if (!kk__backend_get(kind) || !kk__backend_get(kind)->graph_begin)
        *graphs_why = "the backend has no graphs";
    else
        *graphs = 1;
    if (!fp8_enabled(level)) {
        *fp8_why = "hardware.nvidia.fp8_enabled is off (KK_FP8)";
        return;
    }
    if (kind != KK_BACKEND_CPU) {
        kk_device_info info;
        memset(&info, 0, sizeof info);
        if (kk_device_get_info(d->device, &info) != KK_OK || info.cc_major < 9) {
            *fp8_why = "the GPU's compute capability is below 9.0: the FP8 GEMM kernel needs "
                       "sm_90a (it would run on the CPU)";
            return;
        }
    }
    *fp8 = 1;
}

/* w [N,K] (a CPU tensor, any float dtype) quantized into q on the decoder's
 * device. */
static kk_status quantize_to(const kk_decoder *d, const kk_tensor *w, kk_qtensor *q) {
    kk_tensor *src = NULL;
    kk_status st = KK_OK;
    if (w->dtype != KK_DTYPE_F32 && w->dtype != KK_DTYPE_F16 && w->dtype != KK_DTYPE_BF16) {
        st = kk_tensor_create("cpu", KK_DTYPE_F32, w->ndim, w->shape, &src);
        if (st == KK_OK) st = kk_convert(w, src, NULL);
        if (st != KK_OK) {
            kk_tensor_destroy(src);
            return st;
        }
        w = src;
    }
    kk_qtensor host;
    memset(&host, 0, sizeof host);
    st = kk_qtensor_create("cpu", KK_DTYPE_FP8_E4M3, KK_SCALE_128X128, 2, w->shape, &host);
    if (st == KK_OK) st = kk_quantize(w, &host, NULL);
    kk_tensor_destroy(src);
    if (st != KK_OK || strcmp(d->device, "cpu") == 0) {
        if (st != KK_OK) kk_qtensor_destroy(&host);
        *q = host;
        return st;
    }
    st = kk_qtensor_create(d->device, KK_DTYPE_FP8_E4M3, KK_SCALE_128X128, 2, w->shape, q);
    if (st == KK_OK) st = kk_tensor_copy(q->data, host.data);
    if (st == KK_OK) st = kk_tensor_copy(q->scales, host.scales);
    kk_qtensor_destroy(&host);
    if (st != KK_OK) kk_qtensor_destroy(q);
    return st;
}

/* gate [I,K] and up [I,K] stacked into [2I,K] on the host, in their dtype. */
static kk_status stack(const kk_tensor *gate, const kk_tensor *up, kk_tensor **out) {
    const int64_t I = gate->shape[0];
    kk_tensor *t = NULL, *half = NULL;
    kk_status st = kk_tensor_create("cpu", gate->dtype, 2, (int64_t[]){2 * I, gate->shape[1]}, &t);
    if (st == KK_OK) st = kk_tensor_slice(t, 0, 0, I, 1, &half);
    if (st == KK_OK) st = kk_tensor_copy(half, gate);
    kk_tensor_destroy(half), half = NULL;
    if (st == KK_OK && up->dtype != gate->dtype)
        st = kk__arg_error(KK_ERR_UNSUPPORTED, "kk_decoder_create", "up_proj dtype",
                           kk_dtype_name(gate->dtype), "%s (gate_proj's differs)",
                           kk_dtype_name(up->dtype));
    if (st == KK_OK) st = kk_tensor_slice(t, 0, I, 2 * I, 1, &half);
    if (st == KK_OK) st = kk_tensor_copy(half, up);
    kk_tensor_destroy(half);
    if (st != KK_OK) kk_tensor_destroy(t), t = NULL;
    *out = t;
    return st;
}

kk_status kk__dfp8_place(kk_decoder *d, int64_t layer, const kk_model_layer *l) {
    if (!d->fp8w) {
        d->fp8w = calloc((size_t)d->layers * KK__DFP8_WEIGHTS, sizeof *d->fp8w);
        if (!d->fp8w)
            return kk__error(KK_ERR_OUT_OF_MEMORY, "kk_decoder_create", "host allocation failed");
    }
    kk_qtensor *q = &d->fp8w[layer * KK__DFP8_WEIGHTS];
    const kk_tensor *w[KK__DFP8_WEIGHTS] = {l->q_proj, l->k_proj, l->v_proj,
                                            l->o_proj, NULL,      l->down_proj};
    kk_status st = KK_OK;
    for (int k = 0; st == KK_OK && k < KK__DFP8_WEIGHTS; k++) {
        if (w[k]) {
            st = quantize_to(d, w[k], &q[k]);
            continue;
        }
        kk_tensor *gu = NULL;
        st = stack(l->gate_proj, l->up_proj, &gu);
        if (st == KK_OK) st = quantize_to(d, gu, &q[k]);
        kk_tensor_destroy(gu);
    }
    return st;
}

void kk__dfp8_free(kk_decoder *d) {
    if (!d->fp8w) return;
    for (int64_t i = 0; i < d->layers * KK__DFP8_WEIGHTS; i++) kk_qtensor_destroy(&d->fp8w[i]);
    free(d->fp8w);
    d->fp8w = NULL;
}

int kk__dweight_is_fp8(const kk_decoder *d, int k) {
    /* KK__DB_W_Q + k order: q, k, v, o, gate, up, down are the projections */
    return d->plan.fp8 && k <= 6;
}
