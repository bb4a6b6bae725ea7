/* libFuzzer target for the .npy reader (and, through round trips, the writer).
 *
 * Any input: kk_npy_read_memory must return a status, never crash, leak or read
 * out of bounds. When it accepts the input, the array is written back, read
 * again and compared field by field and byte by byte; writing the result again
 * must give the same bytes. Every kk_dtype the array can be reinterpreted as is
 * round-tripped the same way. A mismatch aborts. fuzz/README.md says how to
 * build and run it (fuzz/build.sh). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernelkit/npy.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) __builtin_trap();                                                             \
    } while (0)

static void same_array(const kk_npy_array *a, const kk_npy_array *b) {
    CHECK(!strcmp(a->descr, b->descr));
    CHECK(a->dtype == b->dtype);
    CHECK(a->itemsize == b->itemsize);
    CHECK(a->ndim == b->ndim);
    CHECK(!memcmp(a->shape, b->shape, sizeof a->shape));
    CHECK(a->count == b->count);
    CHECK(a->nbytes == b->nbytes);
    CHECK(a->data && b->data);
    CHECK(!memcmp(a->data, b->data, a->nbytes));
}

/* Write a, read it back (as `hint` unless KK_NPY_DTYPE_NONE), compare, write again. */
static void round_trip(const kk_npy_array *a, kk_dtype hint) {
    void *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0;
    CHECK(kk_npy_write_memory(a, &buf, &len) == KK_OK);
    kk_npy_array b;
    kk_status st = hint == KK_NPY_DTYPE_NONE ? kk_npy_read_memory(buf, len, &b)
                                             : kk_npy_read_memory_as(buf, len, hint, &b);
    CHECK(st == KK_OK);
    CHECK(len % 64 == a->nbytes % 64); /* the header is padded to 64 bytes */
    same_array(a, &b);
    CHECK(kk_npy_write_memory(&b, &buf2, &len2) == KK_OK);
    CHECK(len2 == len && !memcmp(buf, buf2, len));
    free(buf);
    free(buf2);
    kk_npy_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kk_npy_array a;
    memset(&a, 0x5A, sizeof a);
    kk_npy_array before = a;
    if (kk_npy_read_memory(data, size, &a) != KK_OK) {
        CHECK(!memcmp(&a, &before, sizeof a)); /* untouched on failure */
        return 0;
    }
    CHECK(a.ndim >= 0 && a.ndim <= KK_NPY_MAX_DIMS);
    CHECK(a.nbytes == a.count * a.itemsize);
    CHECK(a.nbytes <= size);
    round_trip(&a, KK_NPY_DTYPE_NONE);
    for (int d = 0; d < KK_DTYPE_COUNT; d++) {
        kk_npy_array v = a; /* shares a.data; reinterpret only rewrites the struct */
        if (kk_npy_reinterpret(&v, (kk_dtype)d) != KK_OK) {
            CHECK(!memcmp(&v, &a, sizeof v));
            continue;
        }
        CHECK(v.dtype == (kk_dtype)d && v.data == a.data && v.nbytes == a.nbytes);
        round_trip(&v, (kk_dtype)d);
    }
    kk_npy_free(&a);
    return 0;
}
