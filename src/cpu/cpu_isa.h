/* Internal: which instruction set the CPU kernels run on. The library is built
 * for baseline x86-64; kernels that gain from wider vectors have one variant
 * per level, compiled with target attributes, and pick one per call by
 * kk__cpu_isa(). KK_CPU_ISA=generic|avx2|avx512|avx512_bf16|amx caps the level
 * (a level above what the CPU has is capped at the CPU's), so every lower path
 * can be run and tested on a machine that has a higher one.
 * docs/backends/cpu.md, "Instruction sets". */
#ifndef KK_CPU_ISA_H
#define KK_CPU_ISA_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kk__isa {
    KK__ISA_GENERIC = 0,     /* baseline x86-64 (SSE2), or not x86 */
    KK__ISA_AVX2 = 1,        /* AVX2 + FMA */
    KK__ISA_AVX512 = 2,      /* AVX-512 F, BW, VL (+ AVX2, FMA) */
    KK__ISA_AVX512_BF16 = 3, /* ... + AVX512_BF16 (vdpbf16ps) */
    KK__ISA_AMX = 4,         /* ... + AMX-TILE, AMX-BF16 and the OS's leave (Linux) */
    KK__ISA_COUNT
} kk__isa;

/* 1 where the compiler has the AMX intrinsics (gcc 11, clang 12): the amx
 * level exists only then. */
#if defined(__x86_64__) && defined(__clang__) && __clang_major__ >= 12
#define KK__AMX_CODE 1
#elif defined(__x86_64__) && !defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11
#define KK__AMX_CODE 1
#else
#define KK__AMX_CODE 0
#endif

/* The highest level this CPU and OS support. The amx level also needs the
 * kernel's permission to use the tile data (Linux: arch_prctl
 * ARCH_REQ_XCOMP_PERM, asked once per process, the first time a CPU with
 * AMX-BF16 asks); refused, the level is avx512_bf16. */
kk__isa kk__cpu_isa_supported(void);

/* The level kernels use now: the supported one, capped by KK_CPU_ISA (read on
 * every call, so a test can set it) and by kk__cpu_isa_cap. */
kk__isa kk__cpu_isa(void);

/* Tests: cap the level (-1: no cap). */
void kk__cpu_isa_cap(int level);

/* "generic", "avx2", "avx512", "avx512_bf16", "amx". */
const char *kk__cpu_isa_name(kk__isa isa);

/* A name as above into *out; 0 when it is none of them. */
int kk__cpu_isa_parse(const char *name, kk__isa *out);

/* One function body compiled per level: KK__ISA_CLONES(f, (params), (args))
 * defines f_generic, f_avx2 and f_avx512, each calling the always-inline
 * `f` with its own target, so f's loops (and what they inline) vectorize for
 * that level; KK__ISA_PICK(f) is the one for kk__cpu_isa(). Keep the OpenMP
 * loop outside and call the clone per row or per block. */
#define KK__ISA_INLINE static inline __attribute__((always_inline))
#if defined(__x86_64__) && defined(__GNUC__)
#define KK__TARGET_AVX2 __attribute__((target("avx2,fma")))
#define KK__TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
#else
#define KK__TARGET_AVX2
#define KK__TARGET_AVX512
#endif
#define KK__ISA_CLONES(f, params, args)                                                            \
    static void f##_generic params { f args; }                                                     \
    KK__TARGET_AVX2 static void f##_avx2 params { f args; }                                        \
    KK__TARGET_AVX512 static void f##_avx512 params { f args; }
#define KK__ISA_PICK(f)                                                                            \
    (kk__cpu_isa() >= KK__ISA_AVX512 ? f##_avx512                                                  \
     : kk__cpu_isa() >= KK__ISA_AVX2 ? f##_avx2                                                    \
                                     : f##_generic)

#ifdef __cplusplus
}
#endif
#endif
