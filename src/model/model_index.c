/* Sharded models: model.safetensors.index.json's weight_map ({"name": "file"})
 * names the files to load; the files and the map must then agree exactly
 * (every listed tensor in the file the map says, every tensor listed once). */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/model_internal.h"

#define MAX_INDEX_BYTES ((size_t)64 << 20)

typedef struct ix_ctx {
    const char *func;
    const char *path;
    kk_model *m;
    const char **names; /* distinct file names, in first-seen order */
    char **paths;       /* the same, joined to the folder */
    size_t n;
} ix_ctx;

static kk_status fail(const ix_ctx *c, const char *fmt, ...) KK__PRINTF(2, 3);
static kk_status fail(const ix_ctx *c, const char *fmt, ...) {
    char body[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    return kk__set_error(KK_ERR_IO, c->func, "weight_map", c->path, NULL, NULL, "%.300s: %s",
                         c->path, body);
}

/* A plain name in the model folder: the index must not reach outside it. */
static int safe_name(const char *s) {
    size_t n = strlen(s);
    return n > 0 && n < 256 && !strchr(s, '/') && !strchr(s, '\\') && strcmp(s, ".") != 0 &&
           strcmp(s, "..") != 0;
}

static kk_status add_name(ix_ctx *c, const char *tensor, const cJSON *v) {
    if (!cJSON_IsString(v) || !safe_name(v->valuestring))
        return fail(c,
                    "weight_map entry '%.200s' is not a file name: expected a string naming a "
                    "file in the model folder",
                    tensor);
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->names[i], v->valuestring) == 0) return KK_OK;
    const char **names = realloc(c->names, (c->n + 1) * sizeof *names);
    if (names) c->names = names;
    char **paths = realloc(c->paths, (c->n + 1) * sizeof *paths);
    if (paths) c->paths = paths;
    char *p = (names && paths) ? kk__model_path(c->m->dir, v->valuestring) : NULL;
    if (!p) return kk__error(KK_ERR_OUT_OF_MEMORY, c->func, "host allocation failed");
    c->names[c->n] = v->valuestring;
    c->paths[c->n++] = p;
    return KK_OK;
}

/* Each entry's tensor is in the file it names; each tensor is listed once. */
static kk_status check_map(ix_ctx *c, const cJSON *wm) {
    kk_model *m = c->m;
    unsigned char *seen = calloc(m->count + 1, 1);
    if (!seen) return kk__error(KK_ERR_OUT_OF_MEMORY, c->func, "host allocation failed");
    kk_status st = KK_OK;
    const cJSON *it;
    cJSON_ArrayForEach(it, wm) {
        const kk__model_tensor *t = kk__model_find(m, it->string);
        size_t f = 0;
        while (strcmp(c->names[f], it->valuestring) != 0) f++;
        if (!t)
            st = fail(c, "weight_map lists tensor '%.200s' in %.200s, which does not hold it",
                      it->string, it->valuestring);
        else if (seen[t - m->tensors]++)
            st = fail(c, "weight_map lists tensor '%.200s' twice: expected each name once",
                      it->string);
        else if (strcmp(t->file, c->paths[f]) != 0)
            st = fail(c, "weight_map puts tensor '%.200s' in %.200s, but it is in %.300s",
                      it->string, it->valuestring, t->file);
        if (st) break;
    }
    for (size_t i = 0; !st && i < m->count; i++)
        if (!seen[i])
            st = fail(c, "%.300s holds tensor '%.200s', which weight_map does not list",
                      m->tensors[i].file, m->tensors[i].name);
    free(seen);
    return st;
}

static kk_status load(ix_ctx *c, const cJSON *root) {
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm) || !wm->child)
        return fail(c, "no \"weight_map\": expected an object {\"tensor name\": \"file\"}");
    kk_status st;
    const cJSON *it;
    cJSON_ArrayForEach(it, wm) {
        if ((st = add_name(c, it->string, it))) return st;
    }
    for (size_t i = 0; i < c->n; i++)
        if ((st = kk__model_add_file(c->func, c->m, c->paths[i]))) return st;
    if ((st = kk__model_sort(c->func, c->m))) return st;
    return check_map(c, wm);
}

kk_status kk__model_load_index(const char *func, kk_model *m, const char *index_path) {
    ix_ctx c = {func, index_path, m, NULL, NULL, 0};
    char *text = NULL;
    kk_status st = kk__model_read_text(func, index_path, MAX_INDEX_BYTES, &text);
    if (st) return st;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(root))
        st = fail(&c, "not a JSON object: expected {\"weight_map\": {...}}");
    else
        st = load(&c, root);
    cJSON_Delete(root);
    for (size_t i = 0; i < c.n; i++) free(c.paths[i]);
    free(c.paths);
    free(c.names);
    return st;
}
