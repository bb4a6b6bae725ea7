/* The AMX tile configuration shared by the bf16 GEMM's tile kernel
 * (gemm_bf16_amx.c) and calibrate's AMX ceiling (calibrate_cpu.c): the 64-byte
 * block _tile_loadconfig reads, palette 1, tiles 0..7 all 16 rows of 64 bytes. */
#ifndef KK_CPU_CPU_AMX_H
#define KK_CPU_CPU_AMX_H

#include <stdint.h>

typedef struct kk__amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} kk__amx_config;

static const kk__amx_config kk__amx_config_16x64
    __attribute__((aligned(64), unused)) = {.palette = 1,
                                            .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
                                            .rows = {16, 16, 16, 16, 16, 16, 16, 16}};

#endif
