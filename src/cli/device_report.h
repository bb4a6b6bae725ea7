/* Gathering and printing what `kernelkit info` shows, shared with `selftest`. */
#ifndef KK_CLI_DEVICE_REPORT_H
#define KK_CLI_DEVICE_REPORT_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "kernelkit/harness.h"

/* Hardware capabilities of a device as a short comma-separated list
 * ("bf16/f16/tf32 tensor cores, fp8 tensor cores, wgmma+TMA"). */
const char *report_gpu_capabilities(const kk_device_info *d, char *buf, size_t size);

/* Which of the kernel images in this build the device runs ("sm_90a",
 * "sm_80", "PTX compute_80 (JIT)", or "none: ..."). */
const char *report_kernel_image(const kk_device_info *d, char *buf, size_t size);

/* Human-readable blocks. */
void report_print_build(FILE *out);
void report_print_backends(FILE *out);
void report_print_device(FILE *out, const kk_device_info *d, int with_telemetry);

/* JSON objects (caller owns). */
cJSON *report_build_json(void);
cJSON *report_backends_json(void);
cJSON *report_device_json(const kk_device_info *d, int with_telemetry);

#endif
