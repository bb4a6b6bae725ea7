/* The loopback communicator: the ranks are threads of this process and the
 * tensors are on the CPU, so CI checks tensor-parallel code without GPUs.
 * A collective is two barriers: every rank publishes its tensors, then each
 * computes its result from all of them into a buffer of its own, and after
 * the second barrier (nobody reads a send any more) writes it to recv; so
 * in-place calls are safe. A rank that never arrives makes the others fail
 * after KK_COMM_TIMEOUT seconds (default 120) instead of hanging, and the
 * group is then broken for good. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "dist/comm_internal.h"

#define LB_MAX 64

typedef struct lb_group {
    int n;
    double timeout_s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived, broken, refs;
    unsigned long generation;
    /* what each rank published for the collective under way */
    kk__coll op[LB_MAX];
    const kk_tensor *send[LB_MAX];
    kk_tensor *recv[LB_MAX];
} lb_group;

static _Atomic(kk__loopback_reduce_fn) g_reduce = kk__loopback_reduce;

kk__loopback_reduce_fn kk__loopback_set_reduce(kk__loopback_reduce_fn fn) {
    return atomic_exchange(&g_reduce, fn ? fn : kk__loopback_reduce);
}

/* n >= 1; a single rank's values come back bit for bit (no 0 + x, which
 * would turn -0 into +0). */
void kk__loopback_reduce(kk_dtype dtype, const void *const *src, int n, void *dst, size_t count) {
    for (size_t i = 0; i < count; i++) {
        switch (dtype) {
        case KK_DTYPE_F64: {
            double a = ((const double *)src[0])[i];
            for (int r = 1; r < n; r++) a += ((const double *)src[r])[i];
            ((double *)dst)[i] = a;
            break;
        }
        case KK_DTYPE_INT32: { /* wraps as NCCL's does, without signed overflow */
            uint32_t a = 0;
            for (int r = 0; r < n; r++) a += (uint32_t)((const int32_t *)src[r])[i];
            ((int32_t *)dst)[i] = (int32_t)a;
            break;
        }
        case KK_DTYPE_F32: {
            float a = ((const float *)src[0])[i];
            for (int r = 1; r < n; r++) a += ((const float *)src[r])[i];
            ((float *)dst)[i] = a;
            break;
        }
        case KK_DTYPE_F16: {
            float a = kk_f16_to_f32(((const uint16_t *)src[0])[i]);
            for (int r = 1; r < n; r++) a += kk_f16_to_f32(((const uint16_t *)src[r])[i]);
            ((uint16_t *)dst)[i] = kk_f32_to_f16(a);
            break;
        }
        default: { /* bf16: comm.c lets nothing else through */
            float a = kk_bf16_to_f32(((const uint16_t *)src[0])[i]);
            for (int r = 1; r < n; r++) a += kk_bf16_to_f32(((const uint16_t *)src[r])[i]);
            ((uint16_t *)dst)[i] = kk_f32_to_bf16(a);
        }
        }
    }
}

/* Wait until all n ranks arrive. KK_OK, or an error (and the group broken)
 * on timeout or when the group already is. */
static kk_status barrier(lb_group *g, int rank, const char *func) {
    kk_status st = KK_OK;
    pthread_mutex_lock(&g->mu);
    if (g->broken) {
        pthread_mutex_unlock(&g->mu);
        return kk__error(KK_ERR_INTERNAL, func,
                         "the loopback group is broken (a rank timed out in an earlier "
                         "collective): create another");
    }
    const unsigned long gen = g->generation;
    if (++g->arrived == g->n) {
        g->arrived = 0, g->generation++;
        pthread_cond_broadcast(&g->cv);
    } else {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        const double t = until.tv_sec + until.tv_nsec * 1e-9 + g->timeout_s;
        until.tv_sec = (time_t)t;
        until.tv_nsec = (long)((t - floor(t)) * 1e9);
        while (gen == g->generation && !g->broken) {
            if (pthread_cond_timedwait(&g->cv, &g->mu, &until) == ETIMEDOUT &&
                gen == g->generation) {
                g->broken = 1;
                pthread_cond_broadcast(&g->cv);
                break;
            }
        }
        if (gen == g->generation)
            st = kk__set_error(KK_ERR_INTERNAL, func, NULL, NULL, NULL, NULL,
                               "rank %d waited %g s (KK_COMM_TIMEOUT) for the other ranks of the "
                               "loopback group: expected every rank to call the same collective",
                               rank, g->timeout_s);
    }
    pthread_mutex_unlock(&g->mu);
    return st;
}

static const char *coll_name(kk__coll op) {
    return op == KK__COLL_ALL_REDUCE   ? "all_reduce"
           : op == KK__COLL_ALL_GATHER ? "all_gather"
                                       : "reduce_scatter";
}

/* This rank's result from every rank's send into buf (bytes of recv). */
static void compute(const lb_group *g, int rank, kk__coll op, void *buf) {
    const kk_tensor *mine = g->recv[rank];
    const kk_dtype dt = mine->dtype;
    const size_t es = kk_dtype_bytes(dt, 1), count = (size_t)kk_tensor_numel(mine);
    const void *src[LB_MAX];
    if (op == KK__COLL_ALL_GATHER) {
        const size_t part = count / (size_t)g->n * es;
        for (int r = 0; r < g->n; r++) memcpy((char *)buf + r * part, g->send[r]->data, part);
        return;
    }
    const size_t offset = op == KK__COLL_REDUCE_SCATTER ? (size_t)rank * count * es : 0;
    for (int r = 0; r < g->n; r++) src[r] = (const char *)g->send[r]->data + offset;
    atomic_load (&g_reduce)(dt, src, g->n, buf, count);
}

static kk_status lb_collective(kk_comm *c, kk__coll op, const kk_tensor *send, kk_tensor *recv,
                               kk_stream stream, const char *func) {
    (void)stream;
    lb_group *g = c->impl;
    g->op[c->rank] = op, g->send[c->rank] = send, g->recv[c->rank] = recv;
    kk_status st = barrier(g, c->rank, func);
    if (st != KK_OK) return st;
    /* every rank sees the same table, so all agree on a mismatch */
    for (int r = 1; r < g->n; r++)
        if (g->op[r] != g->op[0] || g->send[r]->dtype != g->send[0]->dtype ||
            kk_tensor_numel(g->send[r]) != kk_tensor_numel(g->send[0])) {
            st = kk__set_error(KK_ERR_INVALID_ARGUMENT, func, "send", NULL, NULL, NULL,
                               "rank %d called %s with %lld %s elements, rank 0 %s with %lld %s: "
                               "expected the same collective, dtype and count on every rank",
                               r, coll_name(g->op[r]), (long long)kk_tensor_numel(g->send[r]),
                               kk_dtype_name(g->send[r]->dtype), coll_name(g->op[0]),
                               (long long)kk_tensor_numel(g->send[0]),
                               kk_dtype_name(g->send[0]->dtype));
            break;
        }
    void *buf = st == KK_OK ? malloc(kk_tensor_nbytes(recv)) : NULL;
    if (st == KK_OK && !buf) st = kk__error(KK_ERR_OUT_OF_MEMORY, func, "host allocation failed");
    if (st == KK_OK) compute(g, c->rank, op, buf);
    /* the second barrier even after a failure, so the others do not wait */
    kk_status st2 = barrier(g, c->rank, func);
    if (st == KK_OK && st2 == KK_OK) memcpy(recv->data, buf, kk_tensor_nbytes(recv));
    free(buf);
    return st != KK_OK ? st : st2;
}

static void lb_destroy(kk_comm *c) {
    lb_group *g = c->impl;
    pthread_mutex_lock(&g->mu);
    const int last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (!last) return;
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}

static const kk__comm_ops lb_ops = {
    .name = "loopback",
    .collective = lb_collective,
    .synchronize = NULL,
    .destroy = lb_destroy,
};

kk_status kk_comm_loopback_create(int n, kk_comm **comms) {
    kk_status st = KK__CHECK_NOT_NULL(comms);
    if (st != KK_OK) return st;
    if (n < 1 || n > LB_MAX)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "n", "1 .. 64", "%d", n);
    for (int r = 0; r < n; r++) comms[r] = NULL;
    lb_group *g = calloc(1, sizeof *g);
    if (!g) return kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "host allocation failed");
    g->n = n;
    const char *t = getenv("KK_COMM_TIMEOUT");
    char *end = NULL;
    g->timeout_s = t ? strtod(t, &end) : 120;
    if (t && (end == t || *end || !(g->timeout_s > 0))) {
        free(g);
        return kk__set_error(KK_ERR_CONFIG, __func__, "KK_COMM_TIMEOUT", t, "seconds > 0", NULL,
                             NULL);
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    for (int r = 0; r < n; r++) {
        comms[r] = kk__comm_new(&lb_ops, r, n, KK_BACKEND_CPU, 0, g);
        if (!comms[r]) {
            for (int k = 0; k < r; k++) free(comms[k]), comms[k] = NULL;
            pthread_mutex_destroy(&g->mu);
            pthread_cond_destroy(&g->cv);
            free(g);
            return kk__error(KK_ERR_OUT_OF_MEMORY, __func__, "host allocation failed");
        }
    }
    g->refs = n;
    return KK_OK;
}
