/* Configuration files: bounded reading, atomic writing. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config_internal.h"
#include "core/log_internal.h"

/* KK_ERR_IO naming the file: as argument "path", or as the variable it came
 * from (KK_CONFIG) when `var` is set. `what` is "cannot open", "cannot write"... */
static kk_status io_error_var(const char *function, const char *var, const char *path,
                              const char *what, const char *expected, const char *reason) {
    if (var)
        return kk__set_error(KK_ERR_IO, function, var, path, expected, NULL, "%s=%.400s: %s: %s",
                             var, path, what, reason);
    return kk__set_error(KK_ERR_IO, function, "path", path, expected, NULL, "%s %.400s: %s", what,
                         path, reason);
}

static kk_status io_error(const char *function, const char *var, const char *path, const char *what,
                          const char *expected, int err) {
    char buf[128];
    /* GNU strerror_r (we build with _GNU_SOURCE): thread-safe, returns the text. */
    return io_error_var(function, var, path, what, expected, strerror_r(err, buf, sizeof buf));
}

#define READABLE "a readable regular file"
#define WRITABLE "a writable file path"

/* Read all of fd into a NUL-terminated malloc'd buffer. Stops after
 * KK_CONFIG_MAX_FILE_BYTES + 1 bytes: enough to know the file is too big. */
static int read_bounded(int fd, size_t size_hint, char **out, size_t *len) {
    size_t cap = (size_hint < KK_CONFIG_MAX_FILE_BYTES ? size_hint : KK_CONFIG_MAX_FILE_BYTES) + 2;
    size_t used = 0;
    char *buf = malloc(cap);
    if (!buf) return ENOMEM;
    for (;;) {
        if (used + 1 == cap) {
            if (used > KK_CONFIG_MAX_FILE_BYTES) break; /* over the limit: caller rejects */
            size_t grown =
                cap * 2 > KK_CONFIG_MAX_FILE_BYTES + 2 ? KK_CONFIG_MAX_FILE_BYTES + 2 : cap * 2;
            char *p = realloc(buf, grown);
            if (!p) {
                free(buf);
                return ENOMEM;
            }
            buf = p;
            cap = grown;
        }
        ssize_t n = read(fd, buf + used, cap - 1 - used);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int err = errno;
            free(buf);
            return err;
        }
        if (n == 0) break;
        used += (size_t)n;
    }
    buf[used] = 0;
    *out = buf;
    *len = used;
    return 0;
}

kk_status kk__config_load_path(const char *path, kk_config *cfg, const char *function,
                               const char *var) {
    char source[512]; /* prefix of content errors: the path, or KK_CONFIG=path */
    if (var)
        snprintf(source, sizeof source, "%s=%.400s", var, path);
    else
        snprintf(source, sizeof source, "%.400s", path);
    /* O_NONBLOCK: opening a FIFO must not hang; non-regular files are refused below. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return io_error(function, var, path, "cannot open", READABLE, errno);
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return io_error(function, var, path, "cannot read", READABLE, err);
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return io_error_var(function, var, path, "cannot read", READABLE,
                            S_ISDIR(sb.st_mode) ? "is a directory" : "not a regular file");
    }
    if (sb.st_size > KK_CONFIG_MAX_FILE_BYTES) {
        char v[32];
        close(fd);
        snprintf(v, sizeof v, "%lld", (long long)sb.st_size);
        return kk__config_fail(function, source, NULL, v, "at most 1048576 bytes",
                               "file is %s bytes; the limit is 1048576 (1 MiB)", v);
    }
    char *text = NULL;
    size_t len = 0;
    int err = read_bounded(fd, (size_t)sb.st_size, &text, &len);
    close(fd);
    if (err == ENOMEM)
        return kk__error(KK_ERR_OUT_OF_MEMORY, function, "cannot read %.400s: out of memory", path);
    if (err) return io_error(function, var, path, "cannot read", READABLE, err);
    kk_status st = kk__config_load_text(text, len, cfg, function, source);
    free(text);
    return st;
}

kk_status kk_config_load_file(const char *path, kk_config *cfg) {
    kk_status st = KK__CHECK_NOT_NULL(path);
    if (!st) st = KK__CHECK_NOT_NULL(cfg);
    if (st) return st;
    st = kk__config_load_path(path, cfg, __func__, NULL);
    if (!st)
        KK_LOG(KK_LOG_DEBUG, KK__CONFIG_LOGGER, "config file applied", KK_F_STR("path", path),
               KK_F_STR("mode", kk_config_mode_name(cfg->mode)),
               KK_F_STR("level", kk_opt_level_name(cfg->level)));
    return st;
}

/* ---- saving ---- */

static int write_all(int fd, const char *data, size_t len) {
    while (len) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? errno : EIO;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Write into a new file beside `path`, then rename over it: a reader never sees
 * half a file, and a failed save leaves the old file as it was. */
static kk_status write_atomically(const char *function, const char *path, const char *text) {
    static atomic_uint counter;
    const char *var = NULL; /* saving never comes from a variable */
    char tmp[4096];
    int fd = -1, err = 0;
    for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
        int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
                         atomic_fetch_add(&counter, 1u));
        if (n < 0 || (size_t)n >= sizeof tmp)
            return io_error(function, var, path, "cannot write", WRITABLE, ENAMETOOLONG);
        /* 0666 and the umask: the same permissions fopen(path, "w") would give. */
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            return io_error(function, var, path, "cannot write", WRITABLE, errno);
    }
    if (fd < 0) return io_error(function, var, path, "cannot write", WRITABLE, EEXIST);
    err = write_all(fd, text, strlen(text));
    if (!err) err = write_all(fd, "\n", 1);
    if (!err && fsync(fd) != 0) err = errno;
    if (close(fd) != 0 && !err) err = errno;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) {
        unlink(tmp);
        return io_error(function, var, path, "cannot write", WRITABLE, err);
    }
    return KK_OK;
}

kk_status kk_config_save_file(const kk_config *cfg, const char *path) {
    kk_status st = KK__CHECK_NOT_NULL(cfg);
    if (!st) st = KK__CHECK_NOT_NULL(path);
    if (st) return st;
    char *text = NULL;
    st = kk__config_print(cfg, __func__, &text);
    if (!st) st = write_atomically(__func__, path, text);
    free(text);
    if (!st) KK_LOG(KK_LOG_DEBUG, KK__CONFIG_LOGGER, "config file saved", KK_F_STR("path", path));
    return st;
}
