/* The NCCL communicator. NCCL is loaded at run time (dlopen of KK_NCCL_LIBRARY
 * or libnccl.so.2), as NVML is (src/backend/nvml.c), so the library builds
 * without nccl.h and loads where NCCL is absent; the few types and functions
 * used are declared below. A failed load is retried on the next call (a test
 * or a user may point KK_NCCL_LIBRARY elsewhere); a good one is kept. The
 * CUDA device current for ncclCommInitRank is set through the backend table
 * (call_on_device): no file outside src/cuda/ names a CUDA function; the
 * collectives need none (NCCL sets the comm's device while it launches).
 * docs/distributed.md. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/log_internal.h"
#include "dist/comm_internal.h"

#define NCCL_DEFAULT "libnccl.so.2"
#define LOGGER "kernelkit.dist.nccl"

/* ---- the slice of nccl.h we use ---- */
typedef struct ncclComm *ncclComm_t;
typedef struct {
    char internal[KK_COMM_ID_BYTES];
} ncclUniqueId;
typedef int ncclResult_t;
enum { ncclSuccess = 0, ncclInProgress = 7 };
enum { ncclInt32 = 2, ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 };
enum { ncclSum = 0 };

typedef ncclResult_t (*fn_version)(int *);
typedef ncclResult_t (*fn_unique_id)(ncclUniqueId *);
typedef ncclResult_t (*fn_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
typedef ncclResult_t (*fn_init_all)(ncclComm_t *, int, const int *);
typedef ncclResult_t (*fn_comm)(ncclComm_t);
typedef ncclResult_t (*fn_void)(void);
typedef const char *(*fn_error_string)(ncclResult_t);
typedef const char *(*fn_last_error)(ncclComm_t);
typedef ncclResult_t (*fn_all_reduce)(const void *, void *, size_t, int, int, ncclComm_t, void *);
typedef ncclResult_t (*fn_all_gather)(const void *, void *, size_t, int, ncclComm_t, void *);
typedef ncclResult_t (*fn_reduce_scatter)(const void *, void *, size_t, int, int, ncclComm_t,
                                          void *);

static struct {
    fn_version version;
    fn_unique_id unique_id;
    fn_init_rank init_rank;
    fn_init_all init_all;
    fn_comm destroy;
    fn_void group_start, group_end;
    fn_error_string error_string;
    fn_last_error last_error; /* optional (NCCL >= 2.13) */
    fn_all_reduce all_reduce;
    fn_all_gather all_gather;
    fn_reduce_scatter reduce_scatter;
} nc;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_loaded, g_version;
static char g_reason[480];

const char *kk__nccl_result_name(int r) {
    static const char *const names[] = {
        "ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
        "ncclInvalidArgument", "ncclInvalidUsage",       "ncclRemoteError", "ncclInProgress"};
    static __thread char other[32];
    if (r >= 0 && (size_t)r < sizeof names / sizeof names[0]) return names[r];
    snprintf(other, sizeof other, "ncclResult %d", r);
    return other;
}

/* The kk_status a result maps to: CUDA and system failures are the device's,
 * bad arguments and usage are the caller's. */
static kk_status status_of(int r) {
    switch (r) {
    case 1: return KK_ERR_DEVICE_FAILURE;   /* ncclUnhandledCudaError */
    case 2: return KK_ERR_DEVICE_FAILURE;   /* ncclSystemError: sockets, shared memory */
    case 4:                                 /* ncclInvalidArgument */
    case 5: return KK_ERR_INVALID_ARGUMENT; /* ncclInvalidUsage */
    case 6: return KK_ERR_DEVICE_FAILURE;   /* ncclRemoteError: another rank failed */
    default: return KK_ERR_INTERNAL;        /* ncclInternalError, unknown codes */
    }
}

kk_status kk__nccl_error(const char *func, const char *what, int r, void *comm) {
    const char *text = nc.error_string ? nc.error_string(r) : NULL;
    const char *last = nc.last_error ? nc.last_error((ncclComm_t)comm) : NULL;
    return kk__set_error(status_of(r), func, NULL, NULL, NULL, kk__nccl_result_name(r),
                         "%s failed: %s: %s%s%.300s", what, kk__nccl_result_name(r),
                         text ? text : "(NCCL not loaded)", last && *last ? "; " : "",
                         last ? last : "");
}

/* dlsym into a function pointer without the object-to-function cast. */
static int sym(void *lib, const char *name, void *fn_ptr, size_t fn_size) {
    void *p = dlsym(lib, name);
    memcpy(fn_ptr, &p, fn_size);
    return p != NULL;
}
#define SYM(lib, name, field) sym((lib), (name), &(field), sizeof(field))

/* Load under g_mu: 1 when usable. */
static int load_locked(void) {
    if (g_loaded) return 1;
    const char *path = getenv("KK_NCCL_LIBRARY");
    if (!path || !*path) path = NCCL_DEFAULT;
    dlerror();
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(g_reason, sizeof g_reason,
                 "NCCL not available (%.200s: %.150s; set KK_NCCL_LIBRARY to libnccl.so.2's path)",
                 path, e ? e : "cannot be loaded");
        KK_LOG(KK_LOG_DEBUG, LOGGER, "NCCL unavailable", KK_F_STR("reason", g_reason));
        return 0;
    }
    static const char *const required[] = {
        "ncclGetVersion",  "ncclGetUniqueId", "ncclCommInitRank", "ncclCommInitAll",
        "ncclCommDestroy", "ncclGroupStart",  "ncclGroupEnd",     "ncclGetErrorString",
        "ncclAllReduce",   "ncclAllGather",   "ncclReduceScatter"};
    const int have[] = {
        SYM(lib, required[0], nc.version),        SYM(lib, required[1], nc.unique_id),
        SYM(lib, required[2], nc.init_rank),      SYM(lib, required[3], nc.init_all),
        SYM(lib, required[4], nc.destroy),        SYM(lib, required[5], nc.group_start),
        SYM(lib, required[6], nc.group_end),      SYM(lib, required[7], nc.error_string),
        SYM(lib, required[8], nc.all_reduce),     SYM(lib, required[9], nc.all_gather),
        SYM(lib, required[10], nc.reduce_scatter)};
    for (size_t i = 0; i < sizeof have / sizeof have[0]; i++)
        if (!have[i]) {
            snprintf(g_reason, sizeof g_reason, "NCCL not available (%.200s has no %s)", path,
                     required[i]);
            memset(&nc, 0, sizeof nc);
            dlclose(lib);
            return 0;
        }
    SYM(lib, "ncclGetLastError", nc.last_error);
    if (nc.version(&g_version) != ncclSuccess) g_version = 0;
    /* NVLink multicast (NVLS) stays off unless the user says otherwise: the
     * lent GPU machines require it (docs/distributed.md) */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    g_loaded = 1;
    g_reason[0] = '\0';
    KK_LOG(KK_LOG_DEBUG, LOGGER, "NCCL loaded", KK_F_STR("path", path),
           KK_F_INT("version", g_version));
    return 1;
}

static int load(const char **reason) {
    pthread_mutex_lock(&g_mu);
    const int ok = load_locked();
    pthread_mutex_unlock(&g_mu);
    if (reason) *reason = ok ? "" : g_reason;
    return ok;
}

int kk_comm_nccl_available(const char **reason, int *version) {
    const int ok = load(reason);
    if (version) *version = ok ? g_version : 0;
    return ok;
}

static kk_status need(const char *func) {
    const char *why;
    return load(&why) ? KK_OK : kk__error(KK_ERR_UNSUPPORTED, func, "%s", why);
}

kk_status kk_comm_id_create(kk_comm_id *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK || (st = need(__func__)) != KK_OK) return st;
    ncclUniqueId id;
    const ncclResult_t r = nc.unique_id(&id);
    if (r != ncclSuccess) return kk__nccl_error(__func__, "ncclGetUniqueId", r, NULL);
    memcpy(out->bytes, id.internal, sizeof out->bytes);
    return KK_OK;
}

/* ---- the communicator ---- */

static int dtype_of(kk_dtype t) {
    switch (t) {
    case KK_DTYPE_F32: return ncclFloat32;
    case KK_DTYPE_F16: return ncclFloat16;
    case KK_DTYPE_BF16: return ncclBfloat16;
    case KK_DTYPE_F64: return ncclFloat64;
    default: return ncclInt32; /* comm.c lets nothing else through */
    }
}

typedef struct coll_job {
    kk_comm *c;
    kk__coll op;
    const kk_tensor *send;
    kk_tensor *recv;
    kk_stream stream;
    const char *func;
} coll_job;

static kk_status enqueue(void *arg) {
    const coll_job *j = arg;
    ncclComm_t comm = j->c->impl;
    const int dt = dtype_of(j->send->dtype);
    ncclResult_t r;
    const char *what;
    switch (j->op) {
    case KK__COLL_ALL_REDUCE:
        what = "ncclAllReduce";
        r = nc.all_reduce(j->send->data, j->recv->data, (size_t)kk_tensor_numel(j->send), dt,
                          ncclSum, comm, j->stream);
        break;
    case KK__COLL_ALL_GATHER:
        what = "ncclAllGather";
        r = nc.all_gather(j->send->data, j->recv->data, (size_t)kk_tensor_numel(j->send), dt, comm,
                          j->stream);
        break;
    default:
        what = "ncclReduceScatter";
        r = nc.reduce_scatter(j->send->data, j->recv->data, (size_t)kk_tensor_numel(j->recv), dt,
                              ncclSum, comm, j->stream);
    }
    /* NCCL may answer ncclInProgress for a nonblocking comm: fine */
    return r == ncclSuccess || r == ncclInProgress ? KK_OK : kk__nccl_error(j->func, what, r, comm);
}

static kk_status nccl_collective(kk_comm *c, kk__coll op, const kk_tensor *send, kk_tensor *recv,
                                 kk_stream stream, const char *func) {
    /* Issued on the calling thread whatever device is current: NCCL makes the
     * comm's device current itself while it launches (and puts the caller's
     * back), so a NULL stream is that device's default stream, where kk_op_run
     * enqueues. No helper thread per call (kk_op_run's call_on_device spawns
     * one when the device is not current: ~50-100 us, which made a thread per
     * rank of kk_comm_init_all pay it on every small all-reduce). */
    coll_job j = {c, op, send, recv, stream, func};
    return enqueue(&j);
}

static kk_status nccl_synchronize(kk_comm *c, kk_stream stream, const char *func) {
    const kk__backend *b = kk__backend_get(c->device_kind);
    if (!b || !b->stream_sync) return KK_OK;
    return b->stream_sync(b->context, c->device_index, stream, func);
}

static void nccl_destroy(kk_comm *c) {
    if (c->impl && nc.destroy) {
        const ncclResult_t r = nc.destroy(c->impl);
        if (r != ncclSuccess)
            KK_LOG(KK_LOG_WARN, LOGGER, "ncclCommDestroy failed",
                   KK_F_STR("error", kk__nccl_result_name(r)));
    }
}

static const kk__comm_ops nccl_ops = {
    .name = "nccl",
    .collective = nccl_collective,
    .synchronize = nccl_synchronize,
    .destroy = nccl_destroy,
};

/* The CUDA device behind a spec ("cuda", "cuda:N"), checked. */
static kk_status cuda_device(const char *func, const char *spec, const kk__backend **b,
                             int *index) {
    kk_status st = kk__device_resolve(func, spec, b, index);
    if (st == KK_OK && (*b)->kind != KK_BACKEND_CUDA)
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "device", "a CUDA device (\"cuda:N\")",
                           "\"%.40s\"", spec);
    return st;
}

typedef struct init_job {
    ncclComm_t comm;
    ncclUniqueId id;
    int world, rank;
    const char *func;
} init_job;

static kk_status init_on_device(void *arg) {
    init_job *j = arg;
    const ncclResult_t r = nc.init_rank(&j->comm, j->world, j->id, j->rank);
    return r == ncclSuccess ? KK_OK : kk__nccl_error(j->func, "ncclCommInitRank", r, NULL);
}

kk_status kk_comm_init_rank(const kk_comm_id *id, int world, int rank, const char *device,
                            kk_comm **out) {
    static const char func[] = "kk_comm_init_rank";
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    *out = NULL;
    if ((st = KK__CHECK_NOT_NULL(id)) != KK_OK || (st = KK__CHECK_NOT_NULL(device)) != KK_OK)
        return st;
    if (world < 1)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "world", "at least 1", "%d", world);
    if (rank < 0 || rank >= world)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "rank", "0 .. world - 1", "%d", rank);
    const kk__backend *b;
    int index;
    if ((st = need(func)) != KK_OK || (st = cuda_device(func, device, &b, &index)) != KK_OK)
        return st;
    init_job j = {.world = world, .rank = rank, .func = func};
    memcpy(j.id.internal, id->bytes, sizeof j.id.internal);
    /* NCCL binds the comm to the device current at init */
    st = b->call_on_device ? b->call_on_device(b->context, index, init_on_device, &j)
                           : init_on_device(&j);
    if (st != KK_OK) return st;
    kk_comm *c = kk__comm_new(&nccl_ops, rank, world, KK_BACKEND_CUDA, index, j.comm);
    if (!c) {
        nc.destroy(j.comm);
        return kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation failed");
    }
    *out = c;
    return KK_OK;
}

kk_status kk_comm_init_all(int n, const char *const *devices, kk_comm **comms) {
    static const char func[] = "kk_comm_init_all";
    kk_status st = KK__CHECK_NOT_NULL(comms);
    if (st != KK_OK || (st = KK__CHECK_NOT_NULL(devices)) != KK_OK) return st;
    if (n < 1 || n > 64)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "n", "1 .. 64", "%d", n);
    for (int i = 0; i < n; i++) comms[i] = NULL;
    if ((st = need(func)) != KK_OK) return st;
    int index[64];
    for (int i = 0; i < n; i++) {
        const kk__backend *b;
        if (!devices[i])
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "devices", "a device per rank",
                                 "NULL at %d", i);
        if ((st = cuda_device(func, devices[i], &b, &index[i])) != KK_OK) return st;
        for (int k = 0; k < i; k++)
            if (index[k] == index[i])
                return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "devices",
                                     "a different GPU per rank", "cuda:%d twice", index[i]);
    }
    ncclComm_t nccl[64];
    const ncclResult_t r = nc.init_all(nccl, n, index);
    if (r != ncclSuccess) return kk__nccl_error(func, "ncclCommInitAll", r, NULL);
    for (int i = 0; i < n; i++) {
        comms[i] = kk__comm_new(&nccl_ops, i, n, KK_BACKEND_CUDA, index[i], nccl[i]);
        if (!comms[i]) {
            for (int k = 0; k < n; k++) {
                if (k < i) free(comms[k]), comms[k] = NULL;
                nc.destroy(nccl[k]);
            }
            return kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation failed");
        }
    }
    return KK_OK;
}

kk_status kk_comm_group_start(void) {
    if (!load(NULL)) return KK_OK;
    const ncclResult_t r = nc.group_start();
    return r == ncclSuccess ? KK_OK : kk__nccl_error(__func__, "ncclGroupStart", r, NULL);
}

kk_status kk_comm_group_end(void) {
    if (!load(NULL)) return KK_OK;
    const ncclResult_t r = nc.group_end();
    return r == ncclSuccess ? KK_OK : kk__nccl_error(__func__, "ncclGroupEnd", r, NULL);
}
