/* Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0).
 *
 * One array per file, C order, every numpy numeric type (bool, int8..int64,
 * uint8..uint64, float16/32/64, complex64/128) in either byte order, raw void
 * ('|V<n>') and the ml_dtypes type names ('bfloat16', 'float8_e4m3fn',
 * 'float8_e5m2', ...). Data is converted to the host byte order on read and
 * written little-endian. docs/npy.md gives the conventions (bf16, fp8 and packed
 * e2m1 in .npy, with the Python side) and every error.
 *
 * All functions return KK_OK or an error recorded in kk_last_error(); on
 * failure the output arguments are left untouched. Bad files give KK_ERR_IO
 * (unreadable, truncated, trailing data, "malformed .npy header: ... at byte N")
 * or KK_ERR_UNSUPPORTED (Fortran order, object/string/structured dtypes, more
 * than 8 dimensions, arrays over 2^48 bytes, unknown format versions). */
#ifndef KERNELKIT_NPY_H
#define KERNELKIT_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/dtype.h"
#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KK_NPY_MAX_DIMS 8
#define KK_NPY_DESCR_MAX 64
/* kk_npy_array.dtype of a type KernelKit has no kk_dtype for (int16, int64,
 * uint16..uint64, bool, complex, raw void, the other ml_dtypes types). */
#define KK_NPY_DTYPE_NONE KK_DTYPE_COUNT
/* Largest array (in bytes of data) and largest dimension read or created. */
#define KK_NPY_MAX_BYTES ((uint64_t)1 << 48)
/* Largest header accepted (numpy itself refuses more than 10000 bytes by default). */
#define KK_NPY_MAX_HEADER_BYTES ((size_t)1 << 20)

typedef struct kk_npy_array {
    /* numpy descr of the data as it is in memory, normalized: byte order '<'
     * on little-endian hosts ('>' on big-endian ones), '|' for one-byte types:
     * "<f4", "|u1", "<c16", "|V2", or an ml_dtypes name such as "bfloat16". */
    char descr[KK_NPY_DESCR_MAX];
    kk_dtype dtype;  /* the matching kk_dtype, or KK_NPY_DTYPE_NONE */
    size_t itemsize; /* bytes per numpy item (1 for packed e2m1: one byte holds two) */
    int ndim;        /* 0 (a scalar) .. KK_NPY_MAX_DIMS */
    int64_t shape[KK_NPY_MAX_DIMS]; /* in elements of dtype; unused entries are 0 */
    size_t count;  /* number of elements: the product of shape (1 when ndim is 0) */
    size_t nbytes; /* bytes at data */
    void *data;    /* malloc'd, C order, host byte order; never NULL after success */
} kk_npy_array;

/* A new array of `dtype` and `shape` (ndim entries; may be NULL when ndim is 0),
 * data zeroed. For KK_DTYPE_E2M1 the shape is the logical one: its last
 * dimension must be even, and the data holds two elements per byte. Overwrites
 * *arr without freeing it: release the old array first. */
KK_API kk_status kk_npy_array_init(kk_npy_array *arr, kk_dtype dtype, int ndim,
                                   const int64_t *shape);

/* The same for any supported numpy descr ("<i8", ">c8", "|b1", "|V3", "bfloat16"...);
 * dtype is set when one matches. */
KK_API kk_status kk_npy_array_init_descr(kk_npy_array *arr, const char *descr, int ndim,
                                         const int64_t *shape);

/* Release the data and zero the struct (dtype becomes KK_NPY_DTYPE_NONE). NULL is fine;
 * freeing twice is fine. */
KK_API void kk_npy_free(kk_npy_array *arr);

/* Read a whole .npy file / buffer. Extra bytes after the array are an error. */
KK_API kk_status kk_npy_read_file(const char *path, kk_npy_array *out);
KK_API kk_status kk_npy_read_memory(const void *buf, size_t len, kk_npy_array *out);

/* Read, then make sure the array is `dtype`: either the file says so, or the file
 * holds raw bits of the right width that kk_npy_reinterpret accepts (what np.save
 * writes for ml_dtypes arrays: '<V2' for bfloat16, '<V1' for float8_e4m3fn). Any
 * other type is KK_ERR_INVALID_ARGUMENT; nothing is converted. */
KK_API kk_status kk_npy_read_file_as(const char *path, kk_dtype dtype, kk_npy_array *out);
KK_API kk_status kk_npy_read_memory_as(const void *buf, size_t len, kk_dtype dtype,
                                       kk_npy_array *out);

/* Give the bytes of `arr` the type `dtype` without changing them. Accepted when
 * arr already is `dtype`, or when arr holds raw void, signed or unsigned integers
 * whose item size is the storage size of `dtype` (2 bytes for bf16, 1 for fp8;
 * for KK_DTYPE_E2M1 one byte holds two elements, so the last dimension doubles:
 * a (M, K/2) uint8 array becomes a logical (M, K) e2m1 one). Integers are taken
 * by value (after byte-order conversion), voids as stored. descr becomes the one
 * the array is written with ("bfloat16", "float8_e4m3fn", "|u1" for e2m1...). */
KK_API kk_status kk_npy_reinterpret(kk_npy_array *arr, kk_dtype dtype);

/* The descr written to a file for a kk_dtype: "<f8" "<f4" "<f2" "bfloat16"
 * "float8_e4m3fn" "float8_e5m2" "|u1" (e2m1, packed) "|i1" "|u1" "<i4";
 * NULL for an invalid dtype. */
KK_API const char *kk_npy_dtype_descr(kk_dtype dtype);

/* Write `arr` as .npy: format 1.0 (2.0 only when the header needs more than
 * 65535 bytes), little-endian, header padded with spaces to a multiple of 64
 * bytes and ended by '\n', byte for byte what np.save writes for numpy types.
 * The descr is kk_npy_dtype_descr(arr->dtype) when dtype is set (arr->descr must
 * then be empty or name the same type), else arr->descr. count, nbytes and
 * itemsize must agree with the shape. write_file writes a temporary file next to
 * `path` and renames it. write_memory returns a malloc'd buffer (free() it). */
KK_API kk_status kk_npy_write_file(const char *path, const kk_npy_array *arr);
KK_API kk_status kk_npy_write_memory(const kk_npy_array *arr, void **buf, size_t *len);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_NPY_H */
