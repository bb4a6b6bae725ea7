/* The active configuration's fields that kernels read at run time
 * (config_active.h): cached, and read again when the variables that decide
 * them change. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config_active.h"
#include "core/config_internal.h"
#include "core/log_internal.h"

/* The variables the cached answer depends on; their values at the last read. */
static const char *const k_keys[] = {"KK_CONFIG", "KK_MODE", "KK_OPT_LEVEL", "KK_TF32"};
enum { NKEYS = sizeof k_keys / sizeof k_keys[0], VALUE_MAX = 1024 };

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_valid;
static char g_seen[NKEYS][VALUE_MAX]; /* "" for unset */
static bool g_tf32;

/* The keys' values now ("" for unset); 0 when one is too long to keep (it
 * never matches, so the configuration is read each time). */
static int snapshot(char (*now)[VALUE_MAX]) {
    int ok = 1;
    for (int i = 0; i < NKEYS; i++) {
        const char *v = getenv(k_keys[i]);
        if (!v) v = "";
        if (strlen(v) >= VALUE_MAX) ok = 0;
        snprintf(now[i], VALUE_MAX, "%s", v);
    }
    return ok;
}

/* The configuration is read outside the lock: it logs, and a log sink may
 * call back into the library. */
static bool read_tf32(void) {
    kk_config c;
    kk_config_init_defaults(&c);
    if (kk_config_from_environment(&c) == KK_OK) return c.hardware.nvidia.tf32_allowed;
    KK_LOG(KK_LOG_WARN, KK__CONFIG_LOGGER,
           "configuration from the environment rejected; f32 matmuls run exact (no TF32)",
           KK_F_STR("error", kk_last_error_message()));
    kk_clear_error();
    return false;
}

bool kk__config_tf32_allowed(void) {
    char now[NKEYS][VALUE_MAX];
    const int keep = snapshot(now);
    pthread_mutex_lock(&g_lock);
    int same = keep && g_valid;
    for (int i = 0; same && i < NKEYS; i++) same = strcmp(now[i], g_seen[i]) == 0;
    bool v = g_tf32;
    pthread_mutex_unlock(&g_lock);
    if (same) return v;
    v = read_tf32();
    pthread_mutex_lock(&g_lock);
    memcpy(g_seen, now, sizeof now);
    g_tf32 = v;
    g_valid = keep;
    pthread_mutex_unlock(&g_lock);
    return v;
}
