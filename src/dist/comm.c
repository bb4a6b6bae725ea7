/* The communicator's public entry points: each collective's arguments checked
 * once here (dtypes, counts, contiguity, device), then the backend's table
 * (comm_loopback.c, comm_nccl.c); the queries and kk_comm_destroy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dist/comm_internal.h"

kk_comm *kk__comm_new(const kk__comm_ops *ops, int rank, int size, kk_backend_kind kind, int index,
                      void *impl) {
    kk_comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->ops = ops, c->rank = rank, c->size = size, c->impl = impl;
    c->device_kind = kind, c->device_index = index;
    if (kind == KK_BACKEND_CPU)
        snprintf(c->device, sizeof c->device, "cpu");
    else
        snprintf(c->device, sizeof c->device, "cuda:%d", index);
    return c;
}

static int supported(kk_dtype t) {
    return t == KK_DTYPE_F32 || t == KK_DTYPE_F16 || t == KK_DTYPE_BF16 || t == KK_DTYPE_F64 ||
           t == KK_DTYPE_INT32;
}

static kk_status check_tensor(const char *func, const kk_comm *c, const char *name,
                              const kk_tensor *t) {
    if (!t) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name, "a tensor", "NULL");
    if (!supported(t->dtype))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name,
                             "dtype f32, f16, bf16, f64 or int32", "dtype %s",
                             kk_dtype_name(t->dtype));
    if (!kk_tensor_is_contiguous(t))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name, "a contiguous tensor",
                             "a strided view");
    if (t->device_kind != c->device_kind ||
        (c->device_kind != KK_BACKEND_CPU && t->device_index != c->device_index)) {
        char e[48];
        snprintf(e, sizeof e, "a tensor on the comm's device %s", c->device);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, name, e, "a tensor on %s", t->device);
    }
    return KK_OK;
}

static kk_status collective(const char *func, kk_comm *c, kk__coll op, const kk_tensor *send,
                            kk_tensor *recv, kk_stream stream) {
    kk_status st;
    if (!c) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "c", "a communicator", "NULL");
    if ((st = check_tensor(func, c, "send", send)) != KK_OK ||
        (st = check_tensor(func, c, "recv", recv)) != KK_OK)
        return st;
    if (recv->dtype != send->dtype)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "recv", kk_dtype_name(send->dtype),
                             "dtype %s (send is %s)", kk_dtype_name(recv->dtype),
                             kk_dtype_name(send->dtype));
    if (kk_tensor_is_read_only(recv))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "recv", "a writable tensor",
                             "a read-only tensor");
    const int64_t ns = kk_tensor_numel(send), nr = kk_tensor_numel(recv), n = c->size;
    const int64_t want = op == KK__COLL_ALL_GATHER       ? ns * n
                         : op == KK__COLL_REDUCE_SCATTER ? ns / n
                                                         : ns;
    if (op == KK__COLL_REDUCE_SCATTER && ns % n != 0) {
        char e[80];
        snprintf(e, sizeof e, "an element count divisible by the comm size %d", c->size);
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "send", e, "%lld elements",
                             (long long)ns);
    }
    if (nr != want) {
        char e[96];
        snprintf(e, sizeof e, "%lld elements (%s)", (long long)want,
                 op == KK__COLL_ALL_GATHER   ? "size x send's"
                 : op == KK__COLL_ALL_REDUCE ? "as many as send"
                                             : "send's / size");
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "recv", e, "%lld elements",
                             (long long)nr);
    }
    /* overlapping buffers only as NCCL's in-place forms: the same memory for an
     * all-reduce, this rank's part of the larger buffer for the other two */
    const size_t es = kk_dtype_bytes(send->dtype, 1);
    const char *sb = send->data, *rb = recv->data;
    const size_t sl = (size_t)ns * es, rl = (size_t)nr * es;
    if (ns > 0 && sb < rb + rl && rb < sb + sl) {
        const char *in_place = op == KK__COLL_ALL_REDUCE   ? rb
                               : op == KK__COLL_ALL_GATHER ? rb + (size_t)c->rank * sl
                                                           : sb + (size_t)c->rank * rl;
        if ((op == KK__COLL_REDUCE_SCATTER ? rb : sb) != in_place)
            return kk__arg_error(KK_ERR_INVALID_ARGUMENT, func, "recv",
                                 op == KK__COLL_ALL_REDUCE
                                     ? "send's memory exactly, or memory apart from it"
                                     : "memory apart from send, or the in-place form (this "
                                       "rank's part of the larger buffer)",
                                 "overlapping memory on rank %d", c->rank);
    }
    if (ns == 0) return KK_OK;
    return c->ops->collective(c, op, send, recv, stream, func);
}

kk_status kk_comm_all_reduce(kk_comm *c, const kk_tensor *send, kk_tensor *recv, kk_stream s) {
    return collective(__func__, c, KK__COLL_ALL_REDUCE, send, recv, s);
}

kk_status kk_comm_all_gather(kk_comm *c, const kk_tensor *send, kk_tensor *recv, kk_stream s) {
    return collective(__func__, c, KK__COLL_ALL_GATHER, send, recv, s);
}

kk_status kk_comm_reduce_scatter(kk_comm *c, const kk_tensor *send, kk_tensor *recv, kk_stream s) {
    return collective(__func__, c, KK__COLL_REDUCE_SCATTER, send, recv, s);
}

kk_status kk_comm_synchronize(kk_comm *c, kk_stream stream) {
    if (!c) return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "c", "a communicator", "NULL");
    return c->ops->synchronize ? c->ops->synchronize(c, stream, __func__) : KK_OK;
}

int kk_comm_rank(const kk_comm *c) { return c ? c->rank : 0; }
int kk_comm_size(const kk_comm *c) { return c ? c->size : 1; }
const char *kk_comm_backend(const kk_comm *c) { return c ? c->ops->name : ""; }
const char *kk_comm_device(const kk_comm *c) { return c ? c->device : ""; }

void kk_comm_destroy(kk_comm *c) {
    if (!c) return;
    if (c->ops->destroy) c->ops->destroy(c);
    free(c);
}
