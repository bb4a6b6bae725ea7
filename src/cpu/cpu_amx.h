/* AMX tiles for the CPU kernels: the tile configuration (palette 1, tiles
 * 0..7 all 16 rows of 64 bytes: the 64-byte block _tile_loadconfig reads),
 * shared by the bf16 GEMM (gemm_bf16_amx.c), the bf16 attention's products
 * (attention_cpu_amx.c) and calibrate's AMX ceiling (calibrate_cpu.c); and
 * the tile operations those kernels use (TILE_LOAD, TILE_STORE, TILE_ZERO,
 * TILE_DP, tiles_begin/tiles_end, TARGET_AMX): the instructions, or with
 * KK_AMX_EMULATE (tests only) the same in C, so the kernels' layouts and
 * edges are checked on CPUs without AMX. */
#ifndef KK_CPU_CPU_AMX_H
#define KK_CPU_CPU_AMX_H

#include <stdint.h>
#include <string.h>

#include "cpu/cpu_isa.h"

typedef struct kk__amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} kk__amx_config;

static const kk__amx_config kk__amx_config_16x64
    __attribute__((aligned(64), unused)) = {.palette = 1,
                                            .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
                                            .rows = {16, 16, 16, 16, 16, 16, 16, 16}};

#if KK__AMX_CODE
#ifdef KK_AMX_EMULATE
/* ---- the tile instructions in C (tests only) ---- */
#define TARGET_AMX
static _Thread_local unsigned char emu_tile[8][16][64];

static inline void emu_load(int t, const void *p, int64_t stride) {
    for (int r = 0; r < 16; r++) memcpy(emu_tile[t][r], (const char *)p + r * stride, 64);
}
static inline void emu_store(int t, void *p, int64_t stride) {
    for (int r = 0; r < 16; r++) memcpy((char *)p + r * stride, emu_tile[t][r], 64);
}
static inline float emu_bf16(const unsigned char *row, int i) {
    uint16_t h;
    memcpy(&h, row + 2 * i, 2);
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* tdpbf16ps as the SDM writes it: per row m of c and pair k, both products
 * of column n added in turn */
static inline void emu_dp(int c, int a, int b) {
    for (int m = 0; m < 16; m++) {
        float acc[16];
        memcpy(acc, emu_tile[c][m], 64);
        for (int k = 0; k < 16; k++)
            for (int n = 0; n < 16; n++) {
                acc[n] += emu_bf16(emu_tile[a][m], 2 * k) * emu_bf16(emu_tile[b][k], 2 * n);
                acc[n] += emu_bf16(emu_tile[a][m], 2 * k + 1) * emu_bf16(emu_tile[b][k], 2 * n + 1);
            }
        memcpy(emu_tile[c][m], acc, 64);
    }
}
#define TILE_LOAD(t, p, stride) emu_load(t, p, stride)
#define TILE_STORE(t, p, stride) emu_store(t, p, stride)
#define TILE_ZERO(t) memset(emu_tile[t], 0, sizeof emu_tile[t])
#define TILE_DP(c, a, b) emu_dp(c, a, b)
static inline void tiles_begin(void) {}
static inline void tiles_end(void) {}

#else
/* ---- the real instructions ---- */
#include <immintrin.h>
#define TARGET_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))
/* gcc's tileloadd is an asm without a memory operand: the barrier makes the
 * stores before it (packing, the edge buffers) happen first. */
#define TILE_LOAD(t, p, stride)                                                                    \
    do {                                                                                           \
        __asm__ volatile("" ::: "memory");                                                         \
        _tile_loadd(t, p, stride);                                                                 \
    } while (0)
#define TILE_STORE(t, p, stride) _tile_stored(t, p, stride)
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_DP(c, a, b) _tile_dpbf16ps(c, a, b)

/* Per thread, around the tile code: the configuration, then its release. */
TARGET_AMX static inline void tiles_begin(void) { _tile_loadconfig(&kk__amx_config_16x64); }
TARGET_AMX static inline void tiles_end(void) { _tile_release(); }
#endif
#endif

#endif
