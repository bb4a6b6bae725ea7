/* Handing NCCL's unique id to every rank, as torchrun-style launchers do: as
 * hex text in the environment (KK_COMM_ID) or in a file (KK_COMM_ID_FILE)
 * that one rank writes atomically and the others wait for; and
 * kk_comm_init_env, which reads the launch variables (docs/distributed.md,
 * "Launching"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "dist/comm_internal.h"

void kk_comm_id_to_hex(const kk_comm_id *id, char *buf) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < KK_COMM_ID_BYTES; i++) {
        buf[2 * i] = digits[id->bytes[i] >> 4];
        buf[2 * i + 1] = digits[id->bytes[i] & 15];
    }
    buf[2 * KK_COMM_ID_BYTES] = '\0';
}

static int nibble(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static kk_status from_hex(const char *func, const char *hex, kk_comm_id *out) {
    kk_comm_id id;
    size_t n = hex ? strlen(hex) : 0;
    while (n && (hex[n - 1] == '\n' || hex[n - 1] == ' ')) n--; /* a file's last newline */
    int ok = n == 2 * KK_COMM_ID_BYTES;
    for (int i = 0; ok && i < KK_COMM_ID_BYTES; i++) {
        const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
        ok = hi >= 0 && lo >= 0;
        if (ok) id.bytes[i] = (unsigned char)(hi << 4 | lo);
    }
    if (!ok)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "hex", "256 hex digits (a comm id)",
                             "%zu characters \"%.12s...\"", n, hex ? hex : "");
    *out = id;
    return KK_OK;
}

kk_status kk_comm_id_from_hex(const char *hex, kk_comm_id *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK || (st = KK__CHECK_NOT_NULL(hex)) != KK_OK) return st;
    return from_hex(__func__, hex, out);
}

kk_status kk_comm_id_save(const kk_comm_id *id, const char *path) {
    kk_status st = KK__CHECK_NOT_NULL(id);
    if (st != KK_OK || (st = KK__CHECK_NOT_NULL(path)) != KK_OK) return st;
    char hex[2 * KK_COMM_ID_BYTES + 1], tmp[4200], ebuf[128];
    kk_comm_id_to_hex(id, hex);
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "path", "a shorter path",
                             "%zu characters", strlen(path));
    /* written beside it and renamed over it: a reader never sees half an id */
    FILE *fp = fopen(tmp, "w");
    int ok = fp && fprintf(fp, "%s\n", hex) > 0;
    if (fp) ok = fclose(fp) == 0 && ok;
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) {
        const int e = errno;
        unlink(tmp);
        return kk__set_error(KK_ERR_IO, __func__, "path", path, NULL, NULL,
                             "%.300s: cannot write the comm id: %s", path,
                             strerror_r(e, ebuf, sizeof ebuf));
    }
    return KK_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

kk_status kk_comm_id_load(const char *path, double timeout_s, kk_comm_id *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK || (st = KK__CHECK_NOT_NULL(path)) != KK_OK) return st;
    const double until = now_s() + (timeout_s > 0 ? timeout_s : 0);
    char text[2 * KK_COMM_ID_BYTES + 8], ebuf[128];
    for (;;) {
        FILE *fp = fopen(path, "r");
        if (fp) {
            const size_t n = fread(text, 1, sizeof text - 1, fp);
            fclose(fp);
            text[n] = '\0';
            st = from_hex(__func__, text, out);
            if (st != KK_OK)
                return kk__set_error(KK_ERR_IO, __func__, "path", path,
                                     "256 hex digits (kk_comm_id_save's file)", NULL,
                                     "%.300s: not a comm id (%zu bytes)", path, n);
            return KK_OK;
        }
        const int e = errno;
        if (e != ENOENT || now_s() >= until)
            return kk__set_error(KK_ERR_IO, __func__, "path", path, NULL, NULL,
                                 "%.300s: cannot read the comm id%s: %s", path,
                                 e == ENOENT && timeout_s > 0 ? " (waited for it)" : "",
                                 strerror_r(e, ebuf, sizeof ebuf));
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
}

/* An integer environment variable in [lo, hi]; KK_ERR_CONFIG naming it. */
static kk_status env_int(const char *func, const char *name, long lo, long hi, long *out) {
    const char *v = getenv(name);
    char *end = NULL;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || x < lo || x > hi) {
        char e[64];
        snprintf(e, sizeof e, "an integer %ld .. %ld", lo, hi);
        return kk__set_error(KK_ERR_CONFIG, func, name, v ? v : "(unset)", e, NULL, NULL);
    }
    *out = x;
    return KK_OK;
}

kk_status kk_comm_init_env(const char *device, kk_comm **out) {
    static const char func[] = "kk_comm_init_env";
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    *out = NULL;
    long world, rank, local;
    if ((st = env_int(func, "KK_WORLD_SIZE", 1, 64, &world)) != KK_OK ||
        (st = env_int(func, "KK_RANK", 0, world - 1, &rank)) != KK_OK)
        return st;
    char dev[32];
    if (!device) {
        local = rank;
        if (getenv("KK_LOCAL_RANK") &&
            (st = env_int(func, "KK_LOCAL_RANK", 0, 63, &local)) != KK_OK)
            return st;
        snprintf(dev, sizeof dev, "cuda:%ld", local);
        device = dev;
    }
    kk_comm_id id;
    const char *hex = getenv("KK_COMM_ID"), *file = getenv("KK_COMM_ID_FILE");
    if (world == 1)
        st = kk_comm_id_create(&id);
    else if (hex && *hex) {
        if (from_hex(func, hex, &id) != KK_OK)
            return kk__set_error(KK_ERR_CONFIG, func, "KK_COMM_ID", "(not 256 hex digits)",
                                 "256 hex digits (kk_comm_id_to_hex)", NULL, NULL);
    } else if (file && *file) {
        double timeout = 120;
        const char *t = getenv("KK_COMM_TIMEOUT");
        if (t && *t) timeout = strtod(t, NULL);
        /* rank 0 makes the id when nobody has; the others wait for the file */
        if (rank == 0 && access(file, F_OK) != 0) {
            st = kk_comm_id_create(&id);
            if (st == KK_OK) st = kk_comm_id_save(&id, file);
        } else
            st = kk_comm_id_load(file, timeout, &id);
    } else
        return kk__set_error(KK_ERR_CONFIG, func, "KK_COMM_ID_FILE", "(unset)",
                             "KK_COMM_ID_FILE (a path every rank sees) or KK_COMM_ID (hex) when "
                             "KK_WORLD_SIZE > 1",
                             NULL, NULL);
    if (st != KK_OK) return st;
    return kk_comm_init_rank(&id, (int)world, (int)rank, device, out);
}
