/* GPU architecture families from compute capabilities, and their names. */
#include <strings.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"

kk_arch kk_arch_from_compute_capability(int major, int minor) {
    if (major < 1 || minor < 0) return KK_ARCH_UNKNOWN;
    if (major < 6) return KK_ARCH_PRE_PASCAL; /* Tesla, Fermi, Kepler, Maxwell */
    switch (major) {
    case 6: /* 6.0 GP100, 6.1 GP10x, 6.2 Tegra X2 */ return KK_ARCH_PASCAL;
    case 7:
        if (minor == 0 || minor == 2) return KK_ARCH_VOLTA; /* GV100, Xavier */
        if (minor == 5) return KK_ARCH_TURING;
        return KK_ARCH_UNKNOWN;
    case 8:
        if (minor == 0 || minor == 6 || minor == 7) return KK_ARCH_AMPERE; /* A100, GA10x, Orin */
        if (minor == 9) return KK_ARCH_ADA;
        return KK_ARCH_UNKNOWN;
    case 9: return minor == 0 ? KK_ARCH_HOPPER : KK_ARCH_UNKNOWN;
    case 10: /* B200/B300, Thor (10.x) */
    case 11: /* Thor renumbered (11.0) */
    case 12: /* RTX 50xx, DGX Spark (12.x) */ return KK_ARCH_BLACKWELL;
    default: return KK_ARCH_UNKNOWN; /* newer than this build knows */
    }
}

static const char *const k_arch_names[KK_ARCH_COUNT] = {
    [KK_ARCH_UNKNOWN] = "unknown",
    [KK_ARCH_PRE_PASCAL] = "pre-pascal",
    [KK_ARCH_PASCAL] = "pascal",
    [KK_ARCH_VOLTA] = "volta",
    [KK_ARCH_TURING] = "turing",
    [KK_ARCH_AMPERE] = "ampere",
    [KK_ARCH_ADA] = "ada",
    [KK_ARCH_HOPPER] = "hopper",
    [KK_ARCH_BLACKWELL] = "blackwell",
};

const char *kk_arch_name(kk_arch arch) {
    if ((int)arch < 0 || arch >= KK_ARCH_COUNT) return "unknown";
    return k_arch_names[arch];
}

kk_status kk_arch_parse(const char *name, kk_arch *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st) return st;
    for (int a = 0; name && a < KK_ARCH_COUNT; a++) {
        if (strcasecmp(name, k_arch_names[a]) == 0) {
            *out = (kk_arch)a;
            return KK_OK;
        }
    }
    char expected[256] = "one of ";
    size_t used = strlen(expected);
    for (int a = 0; a < KK_ARCH_COUNT; a++) {
        int n = snprintf(expected + used, sizeof expected - used, "%s%s", a ? ", " : "",
                         k_arch_names[a]);
        if (n < 0 || (size_t)n >= sizeof expected - used) break;
        used += (size_t)n;
    }
    snprintf(expected + used, sizeof expected - used, " (any case)");
    if (!name)
        return kk__arg_error(KK_ERR_INVALID_ARCHITECTURE, __func__, "name", expected, "NULL");
    return kk__arg_error(KK_ERR_INVALID_ARCHITECTURE, __func__, "name", expected, "\"%.100s\"",
                         name);
}

int kk__cc_supported(int major, int minor) {
    if (major < 1 || minor < 0) return 0;
    return major > KK__MIN_CC_MAJOR || (major == KK__MIN_CC_MAJOR && minor >= KK__MIN_CC_MINOR);
}
