/* Where suite files are found: kk_suite_locate and kk_suite_names. The
 * directories and their order (an installed library reads its own copies, a
 * build folder never those of an older install): docs/harness.md,
 * "Suites". */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "harness/check/suite_internal.h"
#include "kernelkit/cases.h"

#ifndef KK_SOURCE_SUITES_DIR
#define KK_SOURCE_SUITES_DIR ""
#endif
#ifndef KK_INSTALL_SUITES_DIR
#define KK_INSTALL_SUITES_DIR ""
#endif
#ifndef KK_LIBDIR_TO_SUITES_DIR /* from the library's directory to the installed suites */
#define KK_LIBDIR_TO_SUITES_DIR "../share/kernelkit/suites"
#endif

static const char *const suite_env_vars[] = {"KK_SUITES_DIR", "KK_BENCH_SUITES"};

/* share/kernelkit/suites relative to the file this code was loaded from. */
static int library_relative_dir(char *dir, size_t size) {
    Dl_info info;
    if (!dladdr((void *)kk_suite_locate, &info) || !info.dli_fname) return 0;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash) return 0;
    const int n = snprintf(dir, size, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname,
                           KK_LIBDIR_TO_SUITES_DIR);
    return n > 0 && (size_t)n < size;
}

void kk__suite_each_dir(kk__suite_dir_fn fn, void *ctx) {
    char dir[KK_SUITE_PATH_MAX];
    for (size_t v = 0; v < sizeof suite_env_vars / sizeof suite_env_vars[0]; v++) {
        const char *list = getenv(suite_env_vars[v]);
        for (const char *s = list; s && *s;) {
            const size_t len = strcspn(s, ":");
            if (len > 0 && len < sizeof dir) {
                memcpy(dir, s, len);
                dir[len] = 0;
                if (fn(dir, ctx)) return;
            }
            s += len + (s[len] == ':');
        }
    }
    if (library_relative_dir(dir, sizeof dir) && fn(dir, ctx)) return;
    if (KK_SOURCE_SUITES_DIR[0] && fn(KK_SOURCE_SUITES_DIR, ctx)) return;
    if (KK_INSTALL_SUITES_DIR[0]) fn(KK_INSTALL_SUITES_DIR, ctx);
}

int kk__suite_is_path(const char *name_or_path) {
    const size_t n = strlen(name_or_path);
    return strchr(name_or_path, '/') || (n > 5 && strcmp(name_or_path + n - 5, ".json") == 0);
}

static int is_regular_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

typedef struct locate_ctx {
    const char *name;
    char *path;
    size_t size;
    int found;
    char looked[640]; /* the directories, for the error message */
} locate_ctx;

static int locate_in(const char *dir, void *p) {
    locate_ctx *c = p;
    const int n = snprintf(c->path, c->size, "%s/%s.json", dir, c->name);
    if (n > 0 && (size_t)n < c->size && is_regular_file(c->path)) return c->found = 1;
    const size_t used = strlen(c->looked);
    snprintf(c->looked + used, sizeof c->looked - used, "%s%s", used ? ", " : "", dir);
    return 0;
}

kk_status kk_suite_locate(const char *name_or_path, char *path, size_t size) {
    kk_status st = KK__CHECK_NOT_NULL(name_or_path);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(path);
    if (st == KK_OK && size == 0)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "size", "at least 1", "0");
    if (st != KK_OK) return st;
    if (kk__suite_is_path(name_or_path)) {
        if ((size_t)snprintf(path, size, "%s", name_or_path) >= size)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "size", "room for the path",
                                 "%zu", size);
        return KK_OK;
    }
    if (!name_or_path[0])
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "name_or_path",
                             "a suite name or a path", "\"\"");
    locate_ctx c = {.name = name_or_path, .path = path, .size = size};
    kk__suite_each_dir(locate_in, &c);
    if (c.found) return KK_OK;
    path[0] = 0;
    return kk__error(KK_ERR_IO, __func__,
                     "no suite '%.100s' (looked for %.100s.json in: $KK_SUITES_DIR%s, "
                     "$KK_BENCH_SUITES%s, %s)",
                     name_or_path, name_or_path, getenv("KK_SUITES_DIR") ? "" : " (unset)",
                     getenv("KK_BENCH_SUITES") ? "" : " (unset)",
                     c.looked[0] ? c.looked : "no directory");
}

/* ---- every suite's name ---- */

typedef struct names_ctx {
    char **v;
    int n, cap;
    kk_status st;
} names_ctx;

static int has_name(const names_ctx *c, const char *name) {
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->v[i], name) == 0) return 1;
    return 0;
}

/* Append a copy of `name`; 0 when out of memory. */
static int add_name(names_ctx *c, const char *name) {
    if (c->n == c->cap) {
        const int cap = c->cap ? 2 * c->cap : 16;
        char **v = realloc(c->v, (size_t)cap * sizeof *v);
        if (!v) return 0;
        c->v = v;
        c->cap = cap;
    }
    return (c->v[c->n] = strdup(name)) != NULL ? (c->n++, 1) : 0;
}

static int names_in(const char *dir, void *p) {
    names_ctx *c = p;
    DIR *d = opendir(dir);
    if (!d) return 0; /* a directory that is not there has no suites */
    char path[KK_SUITE_PATH_MAX];
    for (struct dirent *e; c->st == KK_OK && (e = readdir(d)) != NULL;) {
        const size_t len = strlen(e->d_name);
        if (len <= 5 || len - 5 >= KK_SUITE_NAME_MAX || strcmp(e->d_name + len - 5, ".json"))
            continue;
        const int n = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (n < 0 || (size_t)n >= sizeof path || !is_regular_file(path)) continue;
        char name[KK_SUITE_NAME_MAX];
        snprintf(name, sizeof name, "%.*s", (int)(len - 5), e->d_name);
        if (!has_name(c, name) && !add_name(c, name))
            c->st = kk__error(KK_ERR_OUT_OF_MEMORY, "kk_suite_names", "out of memory");
    }
    closedir(d);
    return c->st != KK_OK;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

kk_status kk_suite_names(char ***names, int *count) {
    kk_status st = KK__CHECK_NOT_NULL(names);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(count);
    if (st != KK_OK) return st;
    names_ctx c = {.st = KK_OK};
    kk__suite_each_dir(names_in, &c);
    if (c.st != KK_OK) {
        kk_suite_names_free(c.v, c.n);
        return c.st;
    }
    if (c.n > 1) qsort(c.v, (size_t)c.n, sizeof *c.v, compare_names);
    *names = c.v;
    *count = c.n;
    return KK_OK;
}

void kk_suite_names_free(char **names, int count) {
    for (int i = 0; names && i < count; i++) free(names[i]);
    free(names);
}
