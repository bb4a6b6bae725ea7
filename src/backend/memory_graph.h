/* Internal: memory for CUDA graphs (the decoder's decode step). A graph
 * replays the addresses it was captured with, so the blocks its ops took from
 * the caching allocator while it was captured (fp8_linear's scratch) must stay
 * the graph's: a pool is held for the graphs (no other allocation lands in it,
 * kk_mem_empty_cache and the out-of-memory trim leave it alone), and while a
 * thread captures, or runs the warm-up step before, its default-pool
 * allocations on that device are redirected there. Stream-ordered reuse works
 * inside the pool as anywhere else: the graph's ops free on the capturing
 * stream, so the next op of the same capture takes the same block, and the
 * graphs of one owner replay on that one stream. docs/memory.md, "CUDA graphs". */
#ifndef KK_BACKEND_MEMORY_GRAPH_H
#define KK_BACKEND_MEMORY_GRAPH_H

#include "kernelkit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Hold a pool of `device` for graphs: the highest id (63 down to 1) that is
 * empty (no segment) and not held. KK_ERR_UNSUPPORTED when none is. */
kk_status kk__mem_graph_pool_acquire(const char *device, int *pool);

/* Give the pool back: its cached segments are released. The graphs that used
 * it must be destroyed and their work finished first. */
void kk__mem_graph_pool_release(const char *device, int pool);

/* From now on this thread's allocations on `device` that ask for the default
 * pool come from `pool` (held with kk__mem_graph_pool_acquire); pool 0 ends
 * the redirection. An allocation that names a held pool itself is refused
 * (KK_ERR_INVALID_ARGUMENT). */
kk_status kk__mem_graph_redirect(const char *device, int pool);

#ifdef __cplusplus
}
#endif
#endif
