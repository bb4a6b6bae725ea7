/* The CPU timer: CLOCK_MONOTONIC around the calls, an optional cache flush,
 * and pinning of the calling thread.
 *
 * Why CLOCK_MONOTONIC: it never jumps (NTP slews it, never steps it), reads in
 * ~20 ns through the vDSO and has nanosecond resolution, so a run of a few
 * microseconds is timed to well under 1%; shorter runs are batched (measure.c). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "harness/bench/measure_internal.h"

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

double kk__bench_now(void) { return (double)now_ns() * 1e-9; }

/* "32768K" or "8M" (sysfs cache size) in bytes; 0 when unreadable. */
static uint64_t parse_cache_size(const char *text) {
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text) return 0;
    if (*end == 'K')
        v <<= 10;
    else if (*end == 'M')
        v <<= 20;
    else if (*end == 'G')
        v <<= 30;
    return v;
}

uint64_t kk__bench_cpu_flush_for_llc(uint64_t llc) {
    /* Twice the LLC evicts it whatever the replacement policy; the cap keeps a
     * cold sample affordable where sysfs reports a socket's (or a VM host's)
     * whole shared L3: 480 MiB would cost ~0.1 s a sweep and ~2.5 s to fault in. */
    if (llc == 0 || llc > ((uint64_t)1 << 32)) return KK__BENCH_CPU_FLUSH_FALLBACK;
    return 2 * llc < KK__BENCH_CPU_FLUSH_CAP ? 2 * llc : KK__BENCH_CPU_FLUSH_CAP;
}

uint64_t kk__bench_cpu_flush_default(void) {
    /* index3 is the L3 on x86 and most arm64 servers. */
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    char buf[64] = "";
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
        fclose(f);
    }
    return kk__bench_cpu_flush_for_llc(parse_cache_size(buf));
}

/* ---- pinning ---- */

size_t kk__bench_affinity_size(void) { return sizeof(cpu_set_t); }

kk_status kk__bench_pin(int cpu, void *saved) {
    if (sched_getaffinity(0, sizeof(cpu_set_t), (cpu_set_t *)saved) != 0)
        return kk__error(KK_ERR_INTERNAL, KK__BENCH_FUNC, "sched_getaffinity failed: %s",
                         strerror(errno));
    if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, (cpu_set_t *)saved))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, KK__BENCH_FUNC, "options.pin_cpu",
                             "a CPU this thread may run on (see taskset -p)", "%d", cpu);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, KK__BENCH_FUNC, "options.pin_cpu",
                             "a CPU this thread may run on", "%d (%s)", cpu, strerror(errno));
    return KK_OK;
}

void kk__bench_unpin(const void *saved) {
    /* Cannot fail for a mask this thread had a moment ago. */
    (void)sched_setaffinity(0, sizeof(cpu_set_t), (const cpu_set_t *)saved);
}

/* ---- the timer ---- */

typedef struct cpu_timer {
    kk_bench_fn fn;
    void *ctx;
    size_t batch;
    unsigned char *flush; /* allocated at the first cold sample */
    size_t flush_bytes;
    unsigned flushes;
    int read; /* KK_BENCH_FLUSH_READ: sweep the buffer with loads */
} cpu_timer;

/* Read every 64-bit word of the buffer (it was written once, at allocation,
 * so its pages are real and not the shared zero page). The sum goes through
 * an empty asm, so the loads cannot be dropped as dead. */
static void read_sweep(const cpu_timer *c) {
    const uint64_t *p = (const uint64_t *)(const void *)c->flush;
    size_t n = c->flush_bytes / sizeof *p;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a0 += p[i];
        a1 += p[i + 1];
        a2 += p[i + 2];
        a3 += p[i + 3];
    }
    for (; i < n; i++) a0 += p[i];
    uint64_t sum = a0 + a1 + a2 + a3;
    __asm__ __volatile__("" : : "r"(sum) : "memory");
}

/* Empty the caches of the work's data with a buffer larger than the
 * last-level cache: write mode writes every byte (the empty asm tells the
 * compiler the buffer is used, so the writes cannot be dropped as dead);
 * read mode reads it, so the cache is left holding clean lines and the
 * write-back of the work's dirty lines happens here, not in the sample. */
static kk_status flush(cpu_timer *c) {
    if (!c->flush) {
        c->flush = malloc(c->flush_bytes);
        if (!c->flush)
            return kk__error(KK_ERR_OUT_OF_MEMORY, KK__BENCH_FUNC,
                             "cannot allocate the %zu-byte cache flush buffer", c->flush_bytes);
        if (c->read) {
            memset(c->flush, 0x5a, c->flush_bytes);
            __asm__ __volatile__("" : : "r"(c->flush) : "memory");
        }
    }
    if (c->read) {
        read_sweep(c);
        return KK_OK;
    }
    memset(c->flush, (int)(++c->flushes & 0xff), c->flush_bytes);
    __asm__ __volatile__("" : : "r"(c->flush) : "memory");
    return KK_OK;
}

static kk_status cpu_sample(void *impl, int cold, double *seconds) {
    cpu_timer *c = impl;
    kk_status st = cold ? flush(c) : KK_OK;
    if (st) return st;
    /* whole nanoseconds: a difference of two large doubles would add rounding noise */
    int64_t t0 = now_ns();
    for (size_t i = 0; i < c->batch; i++)
        if ((st = c->fn(c->ctx, NULL))) return kk__bench_callback_error(st);
    *seconds = (double)(now_ns() - t0) * 1e-9;
    return KK_OK;
}

static kk_status cpu_set_batch(void *impl, size_t batch) {
    ((cpu_timer *)impl)->batch = batch;
    return KK_OK;
}

static void cpu_destroy(void *impl) {
    cpu_timer *c = impl;
    free(c->flush);
    free(c);
}

kk_status kk__bench_cpu_timer(kk_bench_fn fn, void *ctx, const kk_bench_options *o,
                              kk__bench_timer *t) {
    cpu_timer *c = calloc(1, sizeof *c);
    if (!c) return kk__error(KK_ERR_OUT_OF_MEMORY, KK__BENCH_FUNC, "cannot allocate a timer");
    c->fn = fn;
    c->ctx = ctx;
    c->batch = 1;
    uint64_t bytes = o->flush_bytes ? o->flush_bytes : kk__bench_cpu_flush_default();
    if (bytes > SIZE_MAX) bytes = SIZE_MAX;
    c->flush_bytes = (size_t)bytes;
    c->read = o->flush_mode == KK_BENCH_FLUSH_READ;
    memset(t, 0, sizeof *t);
    t->impl = c;
    t->sample = cpu_sample;
    t->set_batch = cpu_set_batch;
    t->destroy = cpu_destroy;
    t->flush_bytes = bytes;
    return KK_OK;
}
