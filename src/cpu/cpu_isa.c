/* The CPU kernels' instruction-set level (cpu_isa.h). */
#include "cpu/cpu_isa.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "backend/backend.h"
#include "core/log_internal.h"
#include "kernelkit/device.h"

static const char *const k_names[KK__ISA_COUNT] = {"generic", "avx2", "avx512", "avx512_bf16",
                                                   "amx"};

static atomic_int test_cap = -1;

/* Linux enables the 8 KiB of tile data per thread only for a process that
 * asks (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); a tile
 * instruction without that permission is SIGILL. Asked once; the permission
 * holds for every thread of the process. */
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static int amx_granted;

static void amx_ask(void) {
#if defined(__linux__) && defined(__x86_64__)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0) {
        amx_granted = 1;
    } else {
        const int err = errno;
        KK_LOG(KK_LOG_INFO, "kernelkit.cpu", "AMX tiles refused by the kernel: level avx512_bf16",
               KK_F_STR("error", strerror(err)));
    }
#endif
}

static int amx_permitted(void) {
    pthread_once(&amx_once, amx_ask);
    return amx_granted;
}

kk__isa kk__cpu_isa_supported(void) {
    const unsigned f = kk__cpu_features();
    const unsigned avx2 = KK_CPU_AVX2 | KK_CPU_FMA;
    const unsigned avx512 = avx2 | KK_CPU_AVX512F | KK_CPU_AVX512BW | KK_CPU_AVX512VL;
    if ((f & avx2) != avx2) return KK__ISA_GENERIC;
    if ((f & avx512) != avx512) return KK__ISA_AVX2;
    if (!(f & KK_CPU_AVX512_BF16)) return KK__ISA_AVX512;
    const unsigned amx = KK_CPU_AMX_TILE | KK_CPU_AMX_BF16;
    return KK__AMX_CODE && (f & amx) == amx && amx_permitted() ? KK__ISA_AMX : KK__ISA_AVX512_BF16;
}

int kk__cpu_isa_parse(const char *name, kk__isa *out) {
    for (int i = 0; name && i < KK__ISA_COUNT; i++)
        if (strcmp(name, k_names[i]) == 0) {
            *out = (kk__isa)i;
            return 1;
        }
    return 0;
}

/* An unknown KK_CPU_ISA caps nothing; it is logged once, so a typo does not
 * pass for a cap (`kernelkit info` shows the level in use). */
static atomic_int warned_unknown;

kk__isa kk__cpu_isa(void) {
    kk__isa isa = kk__cpu_isa_supported(), env;
    const char *text = getenv("KK_CPU_ISA");
    if (text && *text && !kk__cpu_isa_parse(text, &env)) {
        if (!atomic_exchange(&warned_unknown, 1))
            KK_LOG(KK_LOG_WARN, "kernelkit.cpu", "KK_CPU_ISA ignored: not a level",
                   KK_F_STR("value", text),
                   KK_F_STR("expected", "generic, avx2, avx512, avx512_bf16 or amx"));
    } else if (text && *text && env < isa) {
        isa = env;
    }
    const int cap = atomic_load(&test_cap);
    if (cap >= 0 && cap < (int)isa) isa = (kk__isa)cap;
    return isa;
}

void kk__cpu_isa_cap(int level) { atomic_store(&test_cap, level < 0 ? -1 : level); }

const char *kk_cpu_isa(void) { return kk__cpu_isa_name(kk__cpu_isa()); }

const char *kk__cpu_isa_name(kk__isa isa) {
    return (unsigned)isa < KK__ISA_COUNT ? k_names[isa] : "unknown";
}
