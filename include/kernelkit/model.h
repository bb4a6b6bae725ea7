/* Models: a Llama-family decoder's configuration and weights, loaded from a
 * Hugging Face-style folder (config.json plus model.safetensors, or shards
 * listed by model.safetensors.index.json).
 *
 *   kk_model *m;
 *   if (kk_model_open("path/to/model", &m) != KK_OK)
 *       fprintf(stderr, "%s\n", kk_last_error_message());
 *   const kk_model_config *cfg = kk_model_get_config(m);
 *   kk_model_layer l0;
 *   kk_model_layer_weights(m, 0, &l0);   // l0.q_proj: [heads*head_dim, hidden]
 *   kk_model_close(m);
 *
 * Weights are CPU tensors viewing the files, mapped read-only (no copy; a
 * tensor whose bytes are not aligned to its element size is the one exception,
 * copied once). They are read-only (kk_tensor_is_read_only): an op given one
 * as its output refuses it. Tensors returned here belong to the model and are
 * valid until kk_model_close; never destroy them. Views made from them
 * (kk_tensor_slice, ...) keep the mapping alive on their own and outlive the
 * model. kk_model_open checks every rule of docs/model.md ("Loading") before
 * it returns: a model that opens has every standard tensor with the shape its
 * configuration implies. Bad files give KK_ERR_IO (malformed safetensors or
 * index, unreadable files), KK_ERR_UNSUPPORTED (a dtype, rope type or model
 * type KernelKit lacks) or KK_ERR_CONFIG (a bad config.json, weights that do
 * not match it), with the file, the tensor or field, and what was expected in
 * kk_last_error(). */
#ifndef KERNELKIT_MODEL_H
#define KERNELKIT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/comm.h"
#include "kernelkit/config.h"
#include "kernelkit/ops.h"
#include "kernelkit/status.h"
#include "kernelkit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest safetensors header accepted (the format's reference reader's limit). */
#define KK_SAFETENSORS_MAX_HEADER_BYTES ((uint64_t)100 * 1000 * 1000)

typedef struct kk_model kk_model;

/* config.json of a Llama-family model (transformers' LlamaConfig names). */
typedef struct kk_model_config {
    int64_t hidden_size;
    int64_t intermediate_size;
    int64_t num_hidden_layers;
    int64_t num_attention_heads;
    int64_t num_key_value_heads; /* default num_attention_heads */
    int64_t head_dim;            /* default hidden_size / num_attention_heads */
    int64_t vocab_size;
    int64_t max_position_embeddings; /* default 2048, as LlamaConfig */
    double rms_norm_eps;             /* default 1e-6 */
    int tie_word_embeddings;         /* default 0: lm_head.weight is its own tensor */
    /* torch_dtype (or dtype): "bfloat16", "float16", "float32"; absent: f32
     * and torch_dtype_given 0 */
    kk_dtype torch_dtype;
    int torch_dtype_given;
    /* rope_theta (default 10000) and rope_scaling (null, "default" or
     * "llama3"), ready for kk_rope: rotary_dim = head_dim, NeoX pairs */
    kk_rope_options rope;
} kk_model_config;

/* One decoder layer's weights (transformers' Linear layout: [out, in]). */
typedef struct kk_model_layer {
    const kk_tensor *q_proj;                   /* [num_attention_heads * head_dim, hidden_size] */
    const kk_tensor *k_proj;                   /* [num_key_value_heads * head_dim, hidden_size] */
    const kk_tensor *v_proj;                   /* [num_key_value_heads * head_dim, hidden_size] */
    const kk_tensor *o_proj;                   /* [hidden_size, num_attention_heads * head_dim] */
    const kk_tensor *gate_proj;                /* [intermediate_size, hidden_size] */
    const kk_tensor *up_proj;                  /* [intermediate_size, hidden_size] */
    const kk_tensor *down_proj;                /* [hidden_size, intermediate_size] */
    const kk_tensor *input_layernorm;          /* [hidden_size] */
    const kk_tensor *post_attention_layernorm; /* [hidden_size] */
} kk_model_layer;

/* The weights outside the layers; each is optional (NULL when the files lack
 * it). With tie_word_embeddings and no lm_head.weight, lm_head is
 * embed_tokens. */
typedef struct kk_model_globals {
    const kk_tensor *embed_tokens; /* model.embed_tokens.weight [vocab_size, hidden_size] */
    const kk_tensor *norm;         /* model.norm.weight [hidden_size] */
    const kk_tensor *lm_head;      /* lm_head.weight [vocab_size, hidden_size] */
} kk_model_globals;

/* Open the model in folder `dir`: config.json, and model.safetensors.index.json
 * with its shards or else model.safetensors. *out is NULL on failure. */
KK_API kk_status kk_model_open(const char *dir, kk_model **out);

/* Unmap the files and free the model. NULL is a no-op. */
KK_API void kk_model_close(kk_model *model);

/* Parse and validate a config.json alone (kk_model_open does it too). *out is
 * left untouched on failure. */
KK_API kk_status kk_model_config_load(const char *path, kk_model_config *out);

/* The model's configuration; NULL for a NULL model. */
KK_API const kk_model_config *kk_model_get_config(const kk_model *model);

/* The tensor called `name`; KK_ERR_INVALID_ARGUMENT naming it when absent. */
KK_API kk_status kk_model_tensor(const kk_model *model, const char *name, const kk_tensor **out);

/* Every tensor, sorted by name: count, then the i-th's name and tensor (either
 * output may be NULL; both valid until kk_model_close). KK_ERR_INVALID_ARGUMENT
 * when i is out of range. */
KK_API int64_t kk_model_tensor_count(const kk_model *model);
KK_API kk_status kk_model_tensor_at(const kk_model *model, int64_t i, const char **name,
                                    const kk_tensor **out);

/* The standard weights of layer `layer` (0 .. num_hidden_layers - 1). */
KK_API kk_status kk_model_layer_weights(const kk_model *model, int64_t layer, kk_model_layer *out);

/* Embedding, final norm and lm_head. */
KK_API kk_status kk_model_global_weights(const kk_model *model, kk_model_globals *out);

/* ---- executing the decoder layers (docs/model.md, "Execution", "Levels") ----
 *
 *   kk_decoder *d;
 *   kk_decoder_create(m, "cpu", KK_OPT_BALANCED, 2, 512, &d);
 *   kk_decoder_prefill(d, x, y);   // x, y [B,S,hidden]: the layers over S new tokens
 *   kk_decoder_step(d, x1, y1);    // x1, y1 [B,1,hidden]: one more token each
 *   kk_decoder_free(d);
 *
 * A decoder holds the plan (the op calls of one layer at its level), the
 * weights on its device, a KV cache per layer [max_batch, kv_heads, max_seq,
 * head_dim] and work buffers for max_batch x max_seq tokens, all allocated by
 * kk_decoder_create. Hidden states are in the compute dtype (the dtype of
 * q_proj; other weights are converted to it once) on the decoder's device.
 * Every call runs through the public ops (kernelkit/ops.h), so the same code
 * runs on the CPU and on a GPU. The sequences of a batch advance together:
 * each call appends S tokens to every sequence (its positions follow the
 * cached ones) and attends causally to the cache. Errors are
 * KK_ERR_INVALID_ARGUMENT naming the argument (a wrong shape, a batch over
 * max_batch or unlike the cached one, a sequence past max_seq) and leave
 * the cache as it was. */
typedef struct kk_decoder kk_decoder;

/* A decoder for the layers of `model` on `device` ("cpu", "cuda:0") at
 * `level`. On the CPU the weights in the compute dtype are used in place
 * (views that keep the mapped files alive: the model may be closed after);
 * elsewhere they are copied to the device. *out is NULL on failure. */
KK_API kk_status kk_decoder_create(const kk_model *model, const char *device, kk_opt_level level,
                                   int max_batch, int max_seq, kk_decoder **out);

/* Rank kk_comm_rank(comm) of a tensor-parallel decoder over kk_comm_size(comm)
 * ranks (docs/distributed.md): q/k/v and gate/up split by heads and
 * intermediate rows (column-parallel), o_proj and down_proj by their input
 * columns (row-parallel) each followed by an all-reduce of the hidden states,
 * the KV cache by KV heads; the norms, embedding and lm_head replicated. The
 * shards are cut from the same model at load. `device` is the comm's (NULL:
 * kk_comm_device(comm)). Every rank then calls kk_decoder_prefill/step (and
 * kk_decoder_reset) with the same hidden states and gets the same result; the
 * calls are collective. KK_ERR_INVALID_ARGUMENT when num_attention_heads,
 * num_key_value_heads or intermediate_size does not divide by the size, or the
 * device is not the comm's. The comm must outlive the decoder. */
KK_API kk_status kk_decoder_create_tp(const kk_model *model, const char *device, kk_opt_level level,
                                      int max_batch, int max_seq, kk_comm *comm, kk_decoder **out);

/* The tensor-parallel size (1 for kk_decoder_create's decoders and NULL). */
KK_API int kk_decoder_tp_size(const kk_decoder *d);

/* Overlap of a tensor-parallel decoder's all-reduces with its compute
 * (docs/distributed.md, "Overlap"). With overlap a prefill (S >= 2) runs as two
 * micro-batches, halves of the batch (B >= 2) or, for one sequence, of its
 * tokens (the second half attends to the first's cached keys): each layer's
 * steps go micro-batch by micro-batch on the compute stream, and each
 * all-reduce goes on a communication stream of its own (high priority), so
 * that one micro-batch's all-reduce runs while the other one computes. The
 * arithmetic of every row is that of the unsplit call. Decode steps (S = 1)
 * are never split.
 *   KK_TP_OVERLAP_AUTO  on for a prefill of two or more sequences and at
 *                       least 1024 tokens at a tensor-parallel size >= 4 on
 *                       a device with streams (CUDA), where it was measured
 *                       faster; off otherwise; the default
 *   KK_TP_OVERLAP_OFF   never
 *   KK_TP_OVERLAP_ON    every prefill of a kk_decoder_create_tp decoder, on
 *                       any device (on the CPU the split runs without overlap:
 *                       how the tests check its arithmetic) */
typedef enum kk_tp_overlap {
    KK_TP_OVERLAP_AUTO = 0,
    KK_TP_OVERLAP_OFF = 1,
    KK_TP_OVERLAP_ON = 2,
} kk_tp_overlap;

/* Set the overlap mode (any decoder; it matters only with a comm). Every rank
 * must set the same. KK_ERR_INVALID_ARGUMENT for NULL or an unknown mode. */
KK_API kk_status kk_decoder_set_tp_overlap(kk_decoder *d, kk_tp_overlap mode);

/* The mode set (KK_TP_OVERLAP_AUTO for NULL). */
KK_API kk_tp_overlap kk_decoder_tp_overlap(const kk_decoder *d);

/* "auto", "off", "on"; and the reverse (KK_ERR_INVALID_ARGUMENT naming the
 * text otherwise). */
KK_API const char *kk_tp_overlap_name(kk_tp_overlap mode);
KK_API kk_status kk_tp_overlap_parse(const char *text, kk_tp_overlap *out);

/* The decoder layers over hidden_in [B,S,hidden] into hidden_out [B,S,hidden]
 * (the same shape; it may be hidden_in), appending S tokens to the cache.
 * Waits for the device before it returns. */
KK_API kk_status kk_decoder_prefill(kk_decoder *d, const kk_tensor *hidden_in,
                                    kk_tensor *hidden_out);

/* One decode step: kk_decoder_prefill with S = 1. */
KK_API kk_status kk_decoder_step(kk_decoder *d, const kk_tensor *hidden_in, kk_tensor *hidden_out);

/* The embedding of token ids: tokens int32 [B,S] on the CPU (the host reads
 * them: each row of model.embed_tokens is one copy), each in 0 .. vocab - 1;
 * hidden_out [B,S,hidden] in the compute dtype on the decoder's device.
 * KK_ERR_UNSUPPORTED when the model has no embedding. */
KK_API kk_status kk_decoder_embed(kk_decoder *d, const kk_tensor *tokens, kk_tensor *hidden_out);

/* logits [B,S,vocab] = lm_head(norm(hidden)) for hidden [B,S,hidden], with the
 * final norm (model.norm.weight) when the model has one; B*S at most max_batch
 * x max_seq. KK_ERR_UNSUPPORTED when the model has no lm_head (nor a tied
 * embedding). */
KK_API kk_status kk_decoder_logits(kk_decoder *d, const kk_tensor *hidden, kk_tensor *logits);

/* Forget the cached tokens (the next prefill starts at position 0). */
KK_API void kk_decoder_reset(kk_decoder *d);

/* The compute dtype: the hidden states' dtype (KK_DTYPE_F32 for NULL). */
KK_API kk_dtype kk_decoder_dtype(const kk_decoder *d);

/* Tokens cached per sequence so far (0 after create or reset). */
KK_API int64_t kk_decoder_length(const kk_decoder *d);

/* The plan as text: the level, what it fuses, and each step of a layer (name,
 * op, inputs -> outputs). Owned by the decoder; "" for NULL. */
KK_API const char *kk_decoder_plan_text(const kk_decoder *d);

/* Steps per layer of the plan, and step i's name and op (as the text shows). */
KK_API int kk_decoder_plan_steps(const kk_decoder *d);
KK_API kk_status kk_decoder_plan_step(const kk_decoder *d, int i, const char **name,
                                      const char **op);

/* Free the decoder, its cache, buffers and device weights. NULL is a no-op. */
/* CUDA graphs of the decode step: the aggressive level on CUDA captures a
 * decode call once per batch size (its first call at that size runs eagerly)
 * and replays it (docs/model.md, "CUDA graphs"). The same kernels run either
 * way, so the outputs are the same bits. */
typedef struct kk_decoder_graph_stats {
    int enabled;      /* decode calls go through graphs */
    int64_t captures; /* batch sizes captured */
    int64_t replays;  /* decode calls replayed */
    int64_t eager;    /* decode calls run eagerly while enabled (first at a batch size) */
    int64_t failures; /* captures that failed (that batch size then runs eagerly, logged) */
} kk_decoder_graph_stats;

/* enable = 0: every call eager (the graphs are destroyed); 1: graphs again.
 * Enabling a decoder that has none (the CPU, another level, tensor parallel,
 * FP8 or not) is KK_ERR_UNSUPPORTED saying why. */
KK_API kk_status kk_decoder_set_graphs(kk_decoder *d, int enable);
KK_API kk_status kk_decoder_graph_stats_get(const kk_decoder *d, kk_decoder_graph_stats *out);

KK_API void kk_decoder_free(kk_decoder *d);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_MODEL_H */
