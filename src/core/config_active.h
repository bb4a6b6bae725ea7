/* Internal: what the active configuration says, for kernels and tolerances
 * that depend on it at run time. The active configuration is the one
 * kk_config_from_environment gives (defaults < KK_MODE / KK_OPT_LEVEL <
 * KK_CONFIG < KK_TF32, ...); it is read again whenever one of the variables
 * that can change the answer (KK_CONFIG, KK_MODE, KK_OPT_LEVEL, KK_TF32)
 * differs from the last read, so a process may switch between calls. */
#ifndef KK_CORE_CONFIG_ACTIVE_H
#define KK_CORE_CONFIG_ACTIVE_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* hardware.nvidia.tf32_allowed of the active configuration. When the
 * environment's configuration is rejected (a bad variable or file), false:
 * exact f32, with one warning on the "kernelkit.config" logger per change of
 * the variables. Thread-safe. */
bool kk__config_tf32_allowed(void);

#ifdef __cplusplus
}
#endif
#endif
