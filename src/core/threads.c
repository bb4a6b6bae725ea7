/* The CPU backend's thread count: KK_NUM_THREADS, else kk_cpu_set_num_threads,
 * else one thread per online core. Read once, lazily, thread-safely. */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/threads.h"
#include "kernelkit/config.h"
#include "kernelkit/device.h"

static atomic_int chosen; /* 0 = not decided yet */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void decide(void) {
    if (atomic_load(&chosen) > 0) return; /* set explicitly before the first use */
    kk_config cfg;
    kk_config_init_defaults(&cfg);
    int n = 0;
    if (kk_config_apply_env(&cfg) == KK_OK) n = cfg.hardware.cpu.num_threads;
    if (n <= 0) n = omp_get_num_procs();
    if (n <= 0) n = 1;
    int expected = 0;
    atomic_compare_exchange_strong(&chosen, &expected, n);
}

int kk__cpu_threads(void) {
    pthread_once(&once, decide);
    return atomic_load(&chosen);
}

kk_status kk_cpu_set_num_threads(int n) {
    if (n < 0 || n > KK_CONFIG_MAX_THREADS)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_cpu_set_num_threads", "n",
                             "0 (one per core) to 4096", "%d", n);
    if (n == 0) n = omp_get_num_procs() > 0 ? omp_get_num_procs() : 1;
    atomic_store(&chosen, n);
    return KK_OK;
}

int kk_cpu_num_threads(void) { return kk__cpu_threads(); }
