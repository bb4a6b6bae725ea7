/* Internal: the dispatcher behind kk_op_run (dispatch.c): which backend's
 * kernel runs an op, and the hooks the harness and the tests use. */
#ifndef KK_OPS_DISPATCH_H
#define KK_OPS_DISPATCH_H

#include "backend/backend.h"

/* The kernel of `backend` for `op`; {NULL, 0} when it has none. */
kk__slot kk__op_slot(const kk_op *op, kk_backend_kind backend);

/* kk_op_run with the kernel replaced by `override` (NULL: the backend's own):
 * every check and the device switch of kk_op_run, then `override`. The
 * host-overhead benchmark passes a kernel that does nothing. KK__RUN_STRICT:
 * never fall back to the CPU (the checker, so that a case reported on a
 * device ran on it: an unsupported configuration is then KK_ERR_UNSUPPORTED). */
enum { KK__RUN_STRICT = 1u };
kk_status kk__op_run_with(const kk_op_params *p, kk_tensor *const *tensors, kk_stream stream,
                          kk_op_kernel_fn override, unsigned flags);

/* For the host-overhead benchmark only: a kernel that kk__op_run_with runs on
 * this thread, instead of the backend's slot, when its `override` is NULL (so
 * a typed entry point of kernelkit/ops.h can be timed with a kernel that does
 * nothing). NULL clears it. */
void kk__op_run_set_thread_override(kk_op_kernel_fn kernel);

/* While on (per thread), kk_op_run never falls back to the CPU: a kernel that
 * declines is KK_ERR_UNSUPPORTED. The decoder sets it while it captures a CUDA
 * graph, whose work must all be enqueued on the capturing stream (a fallback
 * would copy and compute on the host instead, outside the graph). */
void kk__op_run_set_thread_strict(int on);

/* Test hooks, on a test's own copy of a row (kk_op row = *op): from now on
 * `backend` runs `kernel` for it (NULL: no kernel) wherever the row is used
 * (kk_op_run, the checker, the runner); the other backends keep theirs.
 * kk__op_swap_none: no backend has a kernel until swapped in. */
void kk__op_swap(kk_op *row, kk_backend_kind backend, kk_op_kernel_fn kernel);
void kk__op_swap_none(kk_op *row);
/* ... and whether `backend`'s kernel for it takes strided tensors. */
void kk__op_swap_strided(kk_op *row, kk_backend_kind backend, int strided);

#endif
