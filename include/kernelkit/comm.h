/* Communicators: collectives (all-reduce, all-gather, reduce-scatter) between
 * the ranks of a tensor-parallel group (docs/distributed.md).
 *
 *   // one process per GPU (kernelkit model --tp N launches them; or torchrun-style):
 *   kk_comm *c;
 *   kk_comm_init_env("cuda:0", &c);              // KK_RANK, KK_WORLD_SIZE, KK_COMM_ID_FILE
 *   kk_comm_all_reduce(c, x, x, NULL);           // in place: x = sum over ranks
 *   kk_comm_destroy(c);
 *
 *   // ranks as threads of one process, on the CPU (tests, CI):
 *   kk_comm *cs[4];
 *   kk_comm_loopback_create(4, cs);              // cs[r] is rank r's handle
 *
 * Two backends behind one interface:
 *   nccl      NVIDIA's NCCL, loaded at run time (dlopen) from KK_NCCL_LIBRARY or
 *             "libnccl.so.2": the library loads and runs without it, and every
 *             NCCL entry point then answers KK_ERR_UNSUPPORTED saying why.
 *             NCCL_NVLS_ENABLE is set to 0 (NVLink multicast off) unless the
 *             environment sets it. Tensors live on the rank's GPU; collectives
 *             are enqueued on `stream` (NULL: the legacy default stream, where
 *             kk_op_run's kernels go) and return without waiting.
 *   loopback  ranks are threads of this process, tensors on the CPU; each
 *             collective returns when every rank has called it and the result
 *             is written (a barrier-based reduce in rank order, f32
 *             accumulation for f16/bf16, one rounding). `stream` is ignored.
 * Every rank calls the same collectives in the same order, with tensors of the
 * same dtype and sizes. Sums only (NCCL's ncclSum). Errors are KK_ERR_*
 * naming the argument (a NULL, a wrong dtype, size or device), and for NCCL's
 * own failures the NCCL error name and message (ncclGetErrorString,
 * ncclGetLastError) in kk_last_error(). */
#ifndef KERNELKIT_COMM_H
#define KERNELKIT_COMM_H

#include <stddef.h>

#include "kernelkit/memory.h"
#include "kernelkit/status.h"
#include "kernelkit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kk_comm kk_comm;

/* NCCL's unique id (ncclUniqueId: 128 opaque bytes), made by one rank and
 * handed to all of them. */
#define KK_COMM_ID_BYTES 128
typedef struct kk_comm_id {
    unsigned char bytes[KK_COMM_ID_BYTES];
} kk_comm_id;

/* ---- NCCL ---- */

/* 1 when NCCL loads (once; a failed load is retried on the next call), else 0
 * and *reason (may be NULL; static text) says why. *version gets NCCL's
 * version code (e.g. 23007 for 2.30.7) when non-NULL. */
KK_API int kk_comm_nccl_available(const char **reason, int *version);

/* A fresh unique id (ncclGetUniqueId), to give every rank. */
KK_API kk_status kk_comm_id_create(kk_comm_id *out);

/* The id as 256 hex digits in a file, written atomically (a temporary file
 * renamed over path), and read back. kk_comm_id_load waits up to timeout_s
 * seconds for the file to appear (0: not at all). KK_ERR_IO naming the path. */
KK_API kk_status kk_comm_id_save(const kk_comm_id *id, const char *path);
KK_API kk_status kk_comm_id_load(const char *path, double timeout_s, kk_comm_id *out);

/* The id as 256 hex digits and a NUL (buf of at least 257 bytes), and back. */
KK_API void kk_comm_id_to_hex(const kk_comm_id *id, char *buf);
KK_API kk_status kk_comm_id_from_hex(const char *hex, kk_comm_id *out);

/* Rank `rank` of `world` (ncclCommInitRank) on `device` ("cuda:N"); every
 * rank passes the same id. Blocks until all ranks have joined. */
KK_API kk_status kk_comm_init_rank(const kk_comm_id *id, int world, int rank, const char *device,
                                   kk_comm **out);

/* One process, n GPUs (ncclCommInitAll): comms[i] is rank i on devices[i].
 * Drive them from n threads (one per rank), or from one thread between
 * kk_comm_group_start and kk_comm_group_end. */
KK_API kk_status kk_comm_init_all(int n, const char *const *devices, kk_comm **comms);

/* torchrun-style: rank and size from KK_RANK and KK_WORLD_SIZE; the id from
 * KK_COMM_ID (256 hex digits) or else the file KK_COMM_ID_FILE, which rank 0
 * creates when it is missing and the others wait for (KK_COMM_TIMEOUT seconds,
 * default 120). KK_WORLD_SIZE 1 needs no id. device NULL: "cuda:<KK_LOCAL_RANK,
 * else KK_RANK>". KK_ERR_CONFIG naming the variable when one is missing or bad. */
KK_API kk_status kk_comm_init_env(const char *device, kk_comm **out);

/* Merge the collectives of several communicators issued from one thread
 * (ncclGroupStart/End). No-ops when NCCL is not loaded. */
KK_API kk_status kk_comm_group_start(void);
KK_API kk_status kk_comm_group_end(void);

/* ---- loopback ---- */

/* n (1 .. 64) handles of one loopback group: comms[r] is rank r, each to be
 * used by its own thread and destroyed on its own. */
KK_API kk_status kk_comm_loopback_create(int n, kk_comm **comms);

/* ---- collectives (any backend); send may equal recv (in place) ----
 * dtypes: f32, f16, bf16 (and f64, int32 on NCCL and loopback alike). */

/* recv = sum over ranks of send; same dtype and element count. */
KK_API kk_status kk_comm_all_reduce(kk_comm *c, const kk_tensor *send, kk_tensor *recv,
                                    kk_stream stream);

/* recv = the ranks' sends one after another (rank 0's first): recv holds
 * size x send's elements. */
KK_API kk_status kk_comm_all_gather(kk_comm *c, const kk_tensor *send, kk_tensor *recv,
                                    kk_stream stream);

/* recv = this rank's share of the sum: send holds size x recv's elements, and
 * rank r gets elements [r * n, (r + 1) * n) of the sum (n = recv's count). */
KK_API kk_status kk_comm_reduce_scatter(kk_comm *c, const kk_tensor *send, kk_tensor *recv,
                                        kk_stream stream);

/* Wait for the collectives enqueued on `stream` (NCCL); KK_OK at once on the
 * loopback. */
KK_API kk_status kk_comm_synchronize(kk_comm *c, kk_stream stream);

/* ---- queries (NULL gives 0, 1, "" ) ---- */
KK_API int kk_comm_rank(const kk_comm *c);
KK_API int kk_comm_size(const kk_comm *c);
/* "nccl" or "loopback". */
KK_API const char *kk_comm_backend(const kk_comm *c);
/* The rank's device, canonical ("cuda:1", "cpu"). */
KK_API const char *kk_comm_device(const kk_comm *c);

/* Release the handle (ncclCommDestroy; the loopback group when its last
 * handle goes). NULL is a no-op. */
KK_API void kk_comm_destroy(kk_comm *c);

#ifdef __cplusplus
}
#endif
#endif /* KERNELKIT_COMM_H */
