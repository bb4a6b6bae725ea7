/* Internal: the model handle shared by the files of src/model (open and lookups,
 * config.json, the standard weights). */
#ifndef KK_MODEL_INTERNAL_H
#define KK_MODEL_INTERNAL_H

#include <stddef.h>

#include "core/tensor_internal.h"
#include "kernelkit/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kk__model_tensor {
    char *name;       /* malloc'd */
    const char *file; /* the file it came from: one of kk_model.files */
    kk_tensor t;      /* a read-only CPU view; t.storage is one of kk_model.storages */
} kk__model_tensor;

struct kk_model {
    char *dir;
    kk_model_config config;
    kk__model_tensor *tensors; /* sorted by name */
    size_t count, cap;
    char **files; /* paths of the safetensors files, malloc'd */
    size_t n_files, cap_files;
    /* One reference each, dropped by kk_model_close: a file's mapping, or the
     * copy of an unaligned tensor. Views of the tensors hold their own. */
    kk__tensor_storage **storages;
    size_t n_storages, cap_storages;
};

/* dir/name, malloc'd (NULL when out of memory); "" is the current folder. */
char *kk__model_path(const char *dir, const char *name);

/* config.json at `path` into *out (untouched on failure); errors name func. */
kk_status kk__model_config_load(const char *func, const char *path, kk_model_config *out);

/* The whole file as a NUL-terminated string (malloc'd) of at most max bytes;
 * KK_ERR_IO naming func and path otherwise. */
kk_status kk__model_read_text(const char *func, const char *path, size_t max, char **out);

/* The tensor called name, or NULL. */
const kk__model_tensor *kk__model_find(const kk_model *m, const char *name);

/* Layer `layer`'s / the global weights, found and checked against the config;
 * KK_ERR_CONFIG naming func, the tensor, its shape and the expected one. */
kk_status kk__model_layer(const char *func, const kk_model *m, int64_t layer, kk_model_layer *out);
kk_status kk__model_globals(const char *func, const kk_model *m, kk_model_globals *out);

/* Map the safetensors file `path` and add its tensors to m (sorted later). */
kk_status kk__model_add_file(const char *func, kk_model *m, const char *path);

/* Sort m's tensors by name; a name in two files is KK_ERR_IO naming both. */
kk_status kk__model_sort(const char *func, kk_model *m);

/* Sharded models: the index's weight_map, its files added and checked against it. */
kk_status kk__model_load_index(const char *func, kk_model *m, const char *index_path);

#ifdef __cplusplus
}
#endif
#endif
