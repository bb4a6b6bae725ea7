/* Internal: the safetensors header, parsed and validated (docs/model.md,
 * "Loading"). The parser reads a buffer holding a whole file, so the model
 * loader (a mapped file) and the fuzz test (bytes in memory) share it. */
#ifndef KK_MODEL_SAFETENSORS_H
#define KK_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kk__st_entry {
    char *name; /* malloc'd */
    kk_dtype dtype;
    int ndim;
    int64_t shape[KK_TENSOR_MAX_DIMS];
    int64_t numel;
    uint64_t begin, end; /* byte offsets in the data region, begin <= end */
} kk__st_entry;

typedef struct kk__st_header {
    kk__st_entry *entries; /* sorted by name, no two alike */
    size_t count;
    uint64_t data_offset; /* where the data region starts in the file: 8 + header length */
    uint64_t data_bytes;  /* bytes of the data region: the rest of the file */
} kk__st_header;

/* Parse and validate the header of the safetensors file buf[0, len): every
 * offset inside the data region, sizes matching dtype and shape, no overlap,
 * no duplicate. Errors name `func`, `path` and the tensor. *out is zeroed
 * first and holds nothing on failure. */
kk_status kk__st_parse(const char *func, const char *path, const unsigned char *buf, size_t len,
                       kk__st_header *out);

/* Free the entries; zeroes h. NULL is fine. */
void kk__st_free(kk__st_header *h);

/* Bytes per element of a dtype the reader accepts (1, 2, 4 or 8). */
size_t kk__st_elem_bytes(kk_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
