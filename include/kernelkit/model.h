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

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_MODEL_H */
