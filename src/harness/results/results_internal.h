/* Internal: what the results files (results.c, results_write.c, results_read*.c)
 * share. The document is a kk_bench_results (include/kernelkit/bench.h);
 * docs/harness-results.md is the schema. */
#ifndef KK_HARNESS_RESULTS_INTERNAL_H
#define KK_HARNESS_RESULTS_INTERNAL_H

#include <cjson/cJSON.h>

#include "kernelkit/bench.h"

/* Most benchmarks one document holds. */
#define KK__RESULTS_MAX_ENTRIES 100000
/* Largest integer a JSON number carries exactly (2^53 - 1). */
#define KK__RESULTS_MAX_EXACT 9007199254740991.0

/* An empty document (environment zeroed). NULL when out of memory. */
kk_bench_results *kk__results_new(void);

/* Room for one more entry; KK_ERR_OUT_OF_MEMORY recorded under `func`. */
kk_status kk__results_reserve(kk_bench_results *r, const char *func);

/* Throughput and shares of `e` from its summary and the document's ceilings. */
void kk__results_derive(const kk_bench_results *r, kk_bench_entry *e);

/* ---- reading (results_read_fields.c) ----
 * Each getter reads one member of a JSON object, checks its type and range,
 * and returns 1; on failure it records KK_ERR_IO naming the field path
 * ("benchmarks[2].summary.median") in *rd and returns 0. Only the first
 * failure is recorded, so `ok = ok && get(...)` chains stop at it. */
typedef struct kk__rd {
    kk_status st;
    const char *func;   /* public entry point, for the error */
    const char *source; /* file path for messages, or NULL */
} kk__rd;

int kk__rd_fail(kk__rd *c, const char *path, const char *key, const char *found,
                const char *expected);
/* The member, of any type; records "missing" when absent. */
const cJSON *kk__rd_get(kk__rd *c, const cJSON *obj, const char *path, const char *key);
int kk__rd_double(kk__rd *c, const cJSON *obj, const char *path, const char *key, double lo,
                  double hi, double *out);
int kk__rd_int(kk__rd *c, const cJSON *obj, const char *path, const char *key, double lo, double hi,
               long long *out);
int kk__rd_size(kk__rd *c, const cJSON *obj, const char *path, const char *key, double hi,
                size_t *out);
int kk__rd_u64(kk__rd *c, const cJSON *obj, const char *path, const char *key, uint64_t *out);
int kk__rd_bool(kk__rd *c, const cJSON *obj, const char *path, const char *key, int *out);
int kk__rd_string(kk__rd *c, const cJSON *obj, const char *path, const char *key, char *buf,
                  size_t size);
/* A uint64 written as a decimal string (seeds: JSON numbers stop at 2^53). */
int kk__rd_u64_string(kk__rd *c, const cJSON *obj, const char *path, const char *key,
                      uint64_t *out);
/* An object member that must be an object / array. */
const cJSON *kk__rd_object(kk__rd *c, const cJSON *obj, const char *path, const char *key);
const cJSON *kk__rd_array(kk__rd *c, const cJSON *obj, const char *path, const char *key);

int kk__rd_environment(kk__rd *c, const cJSON *obj, kk_bench_environment *env);
/* obj[key], at `path` (its parent's path) */
int kk__rd_telemetry(kk__rd *c, const cJSON *obj, const char *path, const char *key,
                     kk_gpu_telemetry *t);
int kk__rd_options(kk__rd *c, const cJSON *obj, const char *path, kk_bench_options *o);
/* The optional "flush_mode" member ("write" or "read"); absent means
 * KK_BENCH_FLUSH_WRITE. */
int kk__rd_flush_mode(kk__rd *c, const cJSON *obj, const char *path, int *out);

#endif
