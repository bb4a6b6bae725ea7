/* cuBLASLt loaded at run time (see cublaslt_dl.h), in the manner of
 * src/backend/nvml.c: dlopen once, every symbol checked. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda/cublaslt_dl.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static kk__cublaslt g_lt;
static int g_ok;
static char g_reason[256];

static int sym(void *lib, const char *name, void *fn_ptr, size_t fn_size) {
    void *p = dlsym(lib, name);
    memcpy(fn_ptr, &p, fn_size);
    if (!p) snprintf(g_reason, sizeof g_reason, "cuBLASLt lacks the symbol %s", name);
    return p != NULL;
}

#define SYM(field, name) sym(lib, name, &g_lt.field, sizeof g_lt.field)

static void load_once(void) {
    static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so"};
    void *lib = NULL;
    char first[200] = "";
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            snprintf(g_lt.path, sizeof g_lt.path, "%s", names[i]);
        } else if (!first[0]) {
            const char *e = dlerror();
            snprintf(first, sizeof first, "%s", e ? e : names[i]);
        }
    }
    if (!lib) {
        snprintf(g_reason, sizeof g_reason, "cannot load cuBLASLt: %s", first);
        return;
    }
    int ok = SYM(create, "cublasLtCreate") && SYM(destroy, "cublasLtDestroy") &&
             SYM(status_name, "cublasLtGetStatusName") &&
             SYM(desc_create, "cublasLtMatmulDescCreate") &&
             SYM(desc_destroy, "cublasLtMatmulDescDestroy") &&
             SYM(desc_set, "cublasLtMatmulDescSetAttribute") &&
             SYM(layout_create, "cublasLtMatrixLayoutCreate") &&
             SYM(layout_destroy, "cublasLtMatrixLayoutDestroy") &&
             SYM(pref_create, "cublasLtMatmulPreferenceCreate") &&
             SYM(pref_destroy, "cublasLtMatmulPreferenceDestroy") &&
             SYM(pref_set, "cublasLtMatmulPreferenceSetAttribute") &&
             SYM(heuristic, "cublasLtMatmulAlgoGetHeuristic") && SYM(matmul, "cublasLtMatmul");
    if (!ok) {
        dlclose(lib);
        return;
    }
    g_ok = 1; /* the library stays loaded for the life of the process */
}

const kk__cublaslt *kk__cublaslt_load(char *why, size_t size) {
    pthread_once(&g_once, load_once);
    if (why && size) snprintf(why, size, "%s", g_ok ? g_lt.path : g_reason);
    return g_ok ? &g_lt : NULL;
}

const char *kk__cublaslt_status_name(int status) {
    static __thread char buf[48];
    const char *n = g_ok && g_lt.status_name ? g_lt.status_name(status) : NULL;
    if (n) return n;
    snprintf(buf, sizeof buf, "cuBLAS status %d", status);
    return buf;
}
