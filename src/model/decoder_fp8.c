/* The aggressive level's choices and its FP8 weights (docs/model.md,
 * "Levels"): whether the plan uses FP8 projections and CUDA graphs on this
 * device and configuration, and the projections quantized once at create to
 * e4m3 with 128x128 block scales (kk_quantize's KK_SCALE_128X128, what
 * kk_fp8_linear's block scaling takes, the only scaling its CUDA kernel runs),
 * q, k and v stacked into one weight, gate and up into another. The bf16 projections are then not
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

/* parts stacked, then quantized into q. */
static kk_status quantize_stacked(const kk_decoder *d, const kk_tensor *const *parts,
                                  const char *const *names, int n, kk_qtensor *q) {
    kk_tensor *w = NULL;
    kk_status st = kk__dstack_rows(parts, names, n, &w);
    if (st == KK_OK) st = quantize_to(d, w, q);
    kk_tensor_destroy(w);
    return st;
}

kk_status kk__dfp8_place(kk_decoder *d, int64_t layer, const kk_model_layer *l) {
    if (!d->fp8w) {
        d->fp8w = calloc((size_t)d->layers * KK__DFP8_WEIGHTS, sizeof *d->fp8w);
        if (!d->fp8w)
            return kk__error(KK_ERR_OUT_OF_MEMORY, "kk_decoder_create", "host allocation failed");
    }
    kk_qtensor *q = &d->fp8w[layer * KK__DFP8_WEIGHTS];
    static const char *const qkv_names[] = {"q_proj", "k_proj", "v_proj"};
    static const char *const gu_names[] = {"gate_proj", "up_proj"};
    const kk_tensor *qkv[] = {l->q_proj, l->k_proj, l->v_proj};
    const kk_tensor *gu[] = {l->gate_proj, l->up_proj};
    kk_status st = quantize_stacked(d, qkv, qkv_names, 3, &q[kk__dfp8_slot(KK__DB_W_QKV)]);
    if (st == KK_OK) st = quantize_to(d, l->o_proj, &q[kk__dfp8_slot(KK__DB_W_O)]);
    if (st == KK_OK) st = quantize_stacked(d, gu, gu_names, 2, &q[kk__dfp8_slot(KK__DB_W_GATE_UP)]);
    if (st == KK_OK) st = quantize_to(d, l->down_proj, &q[kk__dfp8_slot(KK__DB_W_DOWN)]);
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
