/* Internal: how many threads the CPU backend's kernels use.
 *
 * Kernels open their OpenMP regions with num_threads(kk__cpu_threads()), never
 * with OpenMP's own default, so that KK_NUM_THREADS, the configuration
 * (hardware.cpu.num_threads) and kk_cpu_set_num_threads are obeyed. */
#ifndef KK_CORE_THREADS_H
#define KK_CORE_THREADS_H

#ifdef __cplusplus
extern "C" {
#endif

/* >= 1. First call reads KK_NUM_THREADS (0 or unset = one per core). */
int kk__cpu_threads(void);

#ifdef __cplusplus
}
#endif
#endif
