/* Internal: cuBLASLt loaded at run time (dlopen), so libkernelkit has no link
 * dependency on it and loads where it is absent. Plain C: handles are void *,
 * streams are void * (cudaStream_t). Only the slice KernelKit uses is declared;
 * the values were checked against cublasLt.h, cublas_api.h and
 * library_types.h of CUDA 13.0. */
#ifndef KK_CUDA_CUBLASLT_DL_H
#define KK_CUDA_CUBLASLT_DL_H

#include <stddef.h>
#include <stdint.h>

#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    KK__CUBLAS_STATUS_SUCCESS = 0,
    KK__CUBLAS_OP_N = 0,
    KK__CUBLAS_OP_T = 1,
    KK__CUBLAS_COMPUTE_32F = 68,
    KK__CUDA_R_32F = 0,
    KK__CUDA_R_16BF = 14,
    KK__CUDA_R_8F_E4M3 = 28,
    KK__CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
    KK__CUBLASLT_MATMUL_DESC_TRANSA = 3,
    KK__CUBLASLT_MATMUL_DESC_TRANSB = 4,
    KK__CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17,
    KK__CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18,
    KK__CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
};

typedef struct kk__cublaslt_algo { /* cublasLtMatmulAlgo_t */
    uint64_t data[8];
} kk__cublaslt_algo;

typedef struct kk__cublaslt_heuristic { /* cublasLtMatmulHeuristicResult_t */
    kk__cublaslt_algo algo;
    size_t workspace_size;
    int state;
    float waves_count;
    int reserved[4];
} kk__cublaslt_heuristic;

typedef struct kk__cublaslt {
    char path[64]; /* the name that loaded */
    int (*create)(void **handle);
    int (*destroy)(void *handle);
    const char *(*status_name)(int status);
    int (*desc_create)(void **desc, int compute_type, int scale_type);
    int (*desc_destroy)(void *desc);
    int (*desc_set)(void *desc, int attr, const void *buf, size_t size);
    int (*layout_create)(void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld);
    int (*layout_destroy)(void *layout);
    int (*pref_create)(void **pref);
    int (*pref_destroy)(void *pref);
    int (*pref_set)(void *pref, int attr, const void *buf, size_t size);
    int (*heuristic)(void *handle, void *desc, void *a, void *b, void *c, void *d, void *pref,
                     int requested, kk__cublaslt_heuristic *results, int *returned);
    int (*matmul)(void *handle, void *desc, const void *alpha, const void *a, void *adesc,
                  const void *b, void *bdesc, const void *beta, const void *c, void *cdesc, void *d,
                  void *ddesc, const kk__cublaslt_algo *algo, void *workspace,
                  size_t workspace_size, void *stream);
} kk__cublaslt;

/* Load cuBLASLt once (thread-safe): "libcublasLt.so.13", then "libcublasLt.so".
 * Returns the table, or NULL with a reason ("built without CUDA", the dlerror
 * text, a missing symbol) in `why` (may be NULL). Never records an error. */
const kk__cublaslt *kk__cublaslt_load(char *why, size_t size);

/* "CUBLAS_STATUS_NOT_SUPPORTED" or "cuBLAS status N". */
const char *kk__cublaslt_status_name(int status);

#ifdef __cplusplus
}
#endif
#endif
