/* Internal: a communicator is a rank, a size, a device and a table of the
 * backend's collectives (comm.c checks the arguments once for all backends);
 * the loopback and NCCL backends fill it (comm_loopback.c, comm_nccl.c). */
#ifndef KK_DIST_COMM_INTERNAL_H
#define KK_DIST_COMM_INTERNAL_H

#include "kernelkit/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kk__coll {
    KK__COLL_ALL_REDUCE,
    KK__COLL_ALL_GATHER,
    KK__COLL_REDUCE_SCATTER,
} kk__coll;

/* A backend's collectives: arguments already checked (dtypes alike and
 * supported, contiguous, on the comm's device, counts as the op needs). */
typedef struct kk__comm_ops {
    const char *name; /* "nccl", "loopback" */
    kk_status (*collective)(kk_comm *c, kk__coll op, const kk_tensor *send, kk_tensor *recv,
                            kk_stream stream, const char *func);
    kk_status (*synchronize)(kk_comm *c, kk_stream stream, const char *func);
    void (*destroy)(kk_comm *c);
} kk__comm_ops;

struct kk_comm {
    const kk__comm_ops *ops;
    int rank, size;
    char device[16];
    kk_backend_kind device_kind; /* the tensors' device, as kk_tensor names it */
    int device_index;
    void *impl; /* the backend's state */
};

/* A new comm (calloc'd) or NULL. */
kk_comm *kk__comm_new(const kk__comm_ops *ops, int rank, int size, kk_backend_kind kind, int index,
                      void *impl);

/* ---- the loopback's reduction, swappable for tests (a wrong one must be caught) ----
 * dst[i] = sum over r < n of src[r][i], for `count` elements of `dtype`. */
typedef void (*kk__loopback_reduce_fn)(kk_dtype dtype, const void *const *src, int n, void *dst,
                                       size_t count);
/* The reduction in use; set NULL to restore the right one. Returns the previous. */
kk__loopback_reduce_fn kk__loopback_set_reduce(kk__loopback_reduce_fn fn);
/* The right one: in rank order, accumulating in f32 (f64 for f64; int32 exact). */
void kk__loopback_reduce(kk_dtype dtype, const void *const *src, int n, void *dst, size_t count);

/* ---- NCCL (comm_nccl.c) ---- */

/* The kk_status for an ncclResult_t, and the error recorded: "what failed:
 * <ncclName>: <ncclGetErrorString>[; <ncclGetLastError>]"; the NCCL name goes
 * in kk_last_error()->cuda_error. `comm` is an ncclComm_t or NULL. */
kk_status kk__nccl_error(const char *func, const char *what, int result, void *comm);

/* The NCCL name of a result code ("ncclInvalidUsage"), "ncclResult N" beyond. */
const char *kk__nccl_result_name(int result);

#ifdef __cplusplus
}
#endif
#endif
