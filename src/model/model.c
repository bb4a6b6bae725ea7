/* The model handle: kk_model_open (config.json, then the weights: sharded
 * through the index or one model.safetensors, then every standard weight
 * checked against the config), lookups by name and kk_model_close. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "model/model_internal.h"

char *kk__model_path(const char *dir, const char *name) {
    size_t n = strlen(dir);
    int slash = n == 0 || dir[n - 1] == '/'; /* "" is the current folder */
    char *p = malloc(n + strlen(name) + 2);
    if (p) sprintf(p, "%s%s%s", dir, slash ? "" : "/", name);
    return p;
}

kk_status kk__model_read_text(const char *func, const char *path, size_t max, char **out) {
    char ebuf[128];
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return kk__set_error(KK_ERR_IO, func, "path", path, NULL, NULL, "%.300s: cannot open: %s",
                             path, strerror_r(errno, ebuf, sizeof ebuf));
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max + 1, fp) : 0;
    int err = ferror(fp);
    fclose(fp);
    if (!buf) return kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation failed");
    if (err || n > max) {
        free(buf);
        return kk__set_error(KK_ERR_IO, func, "path", path, NULL, NULL, "%.300s: %s", path,
                             err ? "read error" : "file too large");
    }
    buf[n] = '\0';
    *out = buf;
    return KK_OK;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const kk__model_tensor *)a)->name, ((const kk__model_tensor *)b)->name);
}

/* Sort by name; a name in two files is an error naming both. */
static kk_status sort_tensors(const char *func, kk_model *m) {
    if (m->count > 1) qsort(m->tensors, m->count, sizeof *m->tensors, by_name);
    for (size_t i = 1; i < m->count; i++)
        if (strcmp(m->tensors[i].name, m->tensors[i - 1].name) == 0)
            return kk__set_error(KK_ERR_IO, func, m->tensors[i].name, m->dir, NULL, NULL,
                                 "%.300s: tensor '%.200s' is in both %.200s and %.200s: expected "
                                 "each tensor in one file",
                                 m->dir, m->tensors[i].name, m->tensors[i - 1].file,
                                 m->tensors[i].file);
    return KK_OK;
}

const kk__model_tensor *kk__model_find(const kk_model *m, const char *name) {
    kk__model_tensor key = {.name = (char *)name};
    if (!m->count) return NULL;
    return bsearch(&key, m->tensors, m->count, sizeof *m->tensors, by_name);
}

static kk_status load_weights(const char *func, kk_model *m) {
    char *index = kk__model_path(m->dir, "model.safetensors.index.json");
    char *single = kk__model_path(m->dir, "model.safetensors");
    kk_status st;
    if (!index || !single)
        st = kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation failed");
    else if (access(index, F_OK) == 0)
        st = kk__model_load_index(func, m, index);
    else if (access(single, F_OK) == 0) {
        if (!(st = kk__model_add_file(func, m, single))) st = sort_tensors(func, m);
    } else
        st = kk__set_error(KK_ERR_IO, func, "dir", m->dir, NULL, NULL,
                           "%.300s: no weights: expected model.safetensors.index.json (sharded) "
                           "or model.safetensors",
                           m->dir);
    free(index);
    free(single);
    return st;
}

kk_status kk__model_sort(const char *func, kk_model *m) { return sort_tensors(func, m); }

kk_status kk_model_open(const char *dir, kk_model **out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st || (st = KK__CHECK_NOT_NULL(dir))) return st;
    *out = NULL;
    kk_model *m = calloc(1, sizeof *m);
    char *config = kk__model_path(dir, "config.json");
    if (!m || !config || !(m->dir = strdup(dir))) {
        free(config);
        kk_model_close(m);
        return kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "host allocation failed");
    }
    st = kk__model_config_load(__func__, config, &m->config);
    free(config);
    if (!st) st = load_weights(__func__, m);
    kk_model_globals g;
    if (!st) st = kk__model_globals(__func__, m, &g);
    for (int64_t i = 0; !st && i < m->config.num_hidden_layers; i++) {
        kk_model_layer l;
        st = kk__model_layer(__func__, m, i, &l);
    }
    if (st) {
        kk_model_close(m);
        return st;
    }
    *out = m;
    return KK_OK;
}

void kk_model_close(kk_model *m) {
    if (!m) return;
    for (size_t i = 0; i < m->count; i++) free(m->tensors[i].name);
    for (size_t i = 0; i < m->n_storages; i++) kk__storage_release(m->storages[i]);
    for (size_t i = 0; i < m->n_files; i++) free(m->files[i]);
    free(m->tensors);
    free(m->storages);
    free(m->files);
    free(m->dir);
    free(m);
}

const kk_model_config *kk_model_get_config(const kk_model *m) { return m ? &m->config : NULL; }

kk_status kk_model_tensor(const kk_model *m, const char *name, const kk_tensor **out) {
    kk_status st = KK__CHECK_NOT_NULL(m);
    if (st || (st = KK__CHECK_NOT_NULL(name)) || (st = KK__CHECK_NOT_NULL(out))) return st;
    const kk__model_tensor *t = kk__model_find(m, name);
    if (!t)
        return kk__set_error(KK_ERR_INVALID_ARGUMENT, __func__, "name", name, NULL, NULL,
                             "no tensor '%.200s' in %.300s", name, m->dir);
    *out = &t->t;
    return KK_OK;
}

int64_t kk_model_tensor_count(const kk_model *m) { return m ? (int64_t)m->count : 0; }

kk_status kk_model_tensor_at(const kk_model *m, int64_t i, const char **name,
                             const kk_tensor **out) {
    kk_status st = KK__CHECK_NOT_NULL(m);
    if (st) return st;
    if (i < 0 || (uint64_t)i >= m->count) {
        char expected[64];
        snprintf(expected, sizeof expected, "0 to %lld", (long long)m->count - 1);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "i", expected, "%lld",
                             (long long)i);
    }
    if (name) *name = m->tensors[i].name;
    if (out) *out = &m->tensors[i].t;
    return KK_OK;
}

kk_status kk_model_layer_weights(const kk_model *m, int64_t layer, kk_model_layer *out) {
    kk_status st = KK__CHECK_NOT_NULL(m);
    if (st || (st = KK__CHECK_NOT_NULL(out))) return st;
    if (layer < 0 || layer >= m->config.num_hidden_layers) {
        char expected[64];
        snprintf(expected, sizeof expected, "0 to %lld (num_hidden_layers - 1)",
                 (long long)m->config.num_hidden_layers - 1);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "layer", expected, "%lld",
                             (long long)layer);
    }
    return kk__model_layer(__func__, m, layer, out);
}

kk_status kk_model_global_weights(const kk_model *m, kk_model_globals *out) {
    kk_status st = KK__CHECK_NOT_NULL(m);
    if (st || (st = KK__CHECK_NOT_NULL(out))) return st;
    return kk__model_globals(__func__, m, out);
}
