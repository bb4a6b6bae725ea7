/* One safetensors file of a model: mapped read-only, its header validated,
 * its tensors added as CPU views of the mapping. A file's mapping is a tensor
 * storage (read-only, unmapped by its last release), so views a user makes
 * keep it alive after kk_model_close. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "model/model_internal.h"
#include "model/safetensors.h"

typedef struct mapping {
    void *base;
    size_t size;
} mapping;

static void unmap(void *ctx) {
    mapping *mp = ctx;
    if (mp->base) munmap(mp->base, mp->size);
    free(mp);
}

static kk_status oom(const char *func) {
    return kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation failed");
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *p = realloc(*arr, n * elem);
    if (!p) return 0;
    *arr = p;
    *cap = n;
    return 1;
}

/* A read-only CPU storage the model holds one reference to. On failure
 * release(ctx) is called, so the caller never leaks what it handed over. */
static kk__tensor_storage *new_storage(const char *func, kk_model *m, size_t bytes,
                                       void (*release)(void *), void *ctx) {
    kk__tensor_storage *s = NULL;
    if (!grow((void **)&m->storages, &m->cap_storages, m->n_storages + 1, sizeof *m->storages) ||
        !(s = calloc(1, sizeof *s))) {
        release(ctx);
        oom(func);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    s->bytes = bytes;
    memcpy(s->device, "cpu", 4);
    s->release = release;
    s->release_ctx = ctx;
    s->read_only = 1;
    m->storages[m->n_storages++] = s;
    return s;
}

static kk_status map_file(const char *func, const char *path, mapping **out) {
    char ebuf[128];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kk__set_error(KK_ERR_IO, func, "path", path, NULL, NULL, "%.300s: cannot open: %s",
                             path, strerror_r(errno, ebuf, sizeof ebuf));
    struct stat sb;
    kk_status st = KK_OK;
    mapping *mp = calloc(1, sizeof *mp);
    if (!mp)
        st = oom(func);
    else if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        st = kk__set_error(KK_ERR_IO, func, "path", path, NULL, NULL, "%.300s: not a regular file",
                           path);
    else if ((mp->size = (size_t)sb.st_size) > 0 &&
             (mp->base = mmap(NULL, mp->size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
        st = kk__set_error(KK_ERR_IO, func, "path", path, NULL, NULL, "%.300s: cannot map: %s",
                           path, strerror_r(errno, ebuf, sizeof ebuf));
    close(fd);
    if (st) {
        free(mp);
        return st;
    }
    if (!mp->size) mp->base = NULL; /* the parser reports an empty file */
    *out = mp;
    return KK_OK;
}

/* A tensor whose bytes are not aligned to its element size (a writer that did
 * not pad its header) is copied once into aligned memory: kernels load whole
 * elements, and the format allows such files. */
static const void *aligned_copy(const char *func, kk_model *m, const void *src, size_t bytes,
                                kk__tensor_storage **storage) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        oom(func);
        return NULL;
    }
    memcpy(p, src, bytes);
    *storage = new_storage(func, m, bytes, free, p);
    return *storage ? p : NULL;
}

static kk_status add_tensors(const char *func, kk_model *m, const char *file, const mapping *mp,
                             const kk__st_header *h, kk__tensor_storage *s) {
    if (!grow((void **)&m->tensors, &m->cap, m->count + h->count, sizeof *m->tensors))
        return oom(func);
    for (size_t i = 0; i < h->count; i++) {
        const kk__st_entry *e = &h->entries[i];
        kk__model_tensor *mt = &m->tensors[m->count];
        memset(mt, 0, sizeof *mt);
        if (!(mt->name = strdup(e->name))) return oom(func);
        m->count++;
        mt->file = file;
        kk_tensor *t = &mt->t;
        t->dtype = e->dtype;
        t->ndim = e->ndim;
        memcpy(t->shape, e->shape, sizeof t->shape);
        kk__contiguous_strides(e->ndim, e->shape, t->strides);
        t->device_kind = KK_BACKEND_CPU;
        memcpy(t->device, "cpu", 4);
        t->storage = s;
        if (e->numel == 0) continue; /* empty: data stays NULL */
        const unsigned char *p = (const unsigned char *)mp->base + h->data_offset + e->begin;
        size_t bytes = (size_t)(e->end - e->begin);
        if ((uintptr_t)p % kk__st_elem_bytes(e->dtype) != 0 &&
            !(p = aligned_copy(func, m, p, bytes, &t->storage)))
            return KK_ERR_OUT_OF_MEMORY;
        t->data = (void *)p; /* read-only: the storage says so */
    }
    return KK_OK;
}

kk_status kk__model_add_file(const char *func, kk_model *m, const char *path) {
    mapping *mp = NULL;
    kk_status st = map_file(func, path, &mp);
    if (st) return st;
    kk__st_header h;
    if ((st = kk__st_parse(func, path, mp->base, mp->size, &h))) {
        unmap(mp);
        return st;
    }
    char *file = NULL;
    kk__tensor_storage *s = NULL;
    if (!grow((void **)&m->files, &m->cap_files, m->n_files + 1, sizeof *m->files) ||
        !(file = strdup(path))) {
        kk__st_free(&h);
        unmap(mp);
        return oom(func);
    }
    m->files[m->n_files++] = file;
    if (!(s = new_storage(func, m, mp->size, unmap, mp))) {
        kk__st_free(&h);
        return KK_ERR_OUT_OF_MEMORY;
    }
    st = add_tensors(func, m, file, mp, &h, s);
    kk__st_free(&h);
    return st;
}
