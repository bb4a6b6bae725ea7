/* labels: unit cpu */
/* Status codes: every code's string, name and place in the error tree, and the
 * thread-local last error. */
#include "testutil.h"

#include <pthread.h>
#include <string.h>

#include "core/error.h"

typedef struct expected_row {
    kk_status code;
    kk_status parent;
    const char *name;
    const char *text;
} expected_row;

/* Written out independently of src/core/status.c so that a change there shows here. */
static const expected_row k_expected[] = {
    {KK_OK, KK_OK, "KK_OK", "success"},
    {KK_ERR_BACKEND, KK_OK, "KK_ERR_BACKEND", "backend error"},
    {KK_ERR_DEVICE, KK_ERR_BACKEND, "KK_ERR_DEVICE", "device error"},
    {KK_ERR_CUDA_UNAVAILABLE, KK_ERR_DEVICE, "KK_ERR_CUDA_UNAVAILABLE", "CUDA not available"},
    {KK_ERR_DEVICE_FAILURE, KK_ERR_DEVICE, "KK_ERR_DEVICE_FAILURE", "CUDA device failure"},
    {KK_ERR_KERNEL_LAUNCH, KK_ERR_DEVICE, "KK_ERR_KERNEL_LAUNCH", "kernel launch failed"},
    {KK_ERR_INVALID_COMPUTE_CAPABILITY, KK_ERR_DEVICE, "KK_ERR_INVALID_COMPUTE_CAPABILITY",
     "invalid compute capability"},
    {KK_ERR_INVALID_ARCHITECTURE, KK_ERR_DEVICE, "KK_ERR_INVALID_ARCHITECTURE",
     "invalid architecture"},
    {KK_ERR_MEMORY, KK_ERR_BACKEND, "KK_ERR_MEMORY", "memory error"},
    {KK_ERR_ALLOCATION, KK_ERR_MEMORY, "KK_ERR_ALLOCATION", "memory allocation failed"},
    {KK_ERR_OUT_OF_MEMORY, KK_ERR_ALLOCATION, "KK_ERR_OUT_OF_MEMORY", "out of memory"},
    {KK_ERR_CONFIG, KK_ERR_BACKEND, "KK_ERR_CONFIG", "configuration error"},
    {KK_ERR_INVALID_ARGUMENT, KK_ERR_BACKEND, "KK_ERR_INVALID_ARGUMENT", "invalid argument"},
    {KK_ERR_UNSUPPORTED, KK_ERR_BACKEND, "KK_ERR_UNSUPPORTED", "unsupported"},
    {KK_ERR_QUANTIZATION, KK_ERR_BACKEND, "KK_ERR_QUANTIZATION", "quantization error"},
    {KK_ERR_ATTENTION, KK_ERR_BACKEND, "KK_ERR_ATTENTION", "attention error"},
    {KK_ERR_MODEL_OPTIMIZATION, KK_ERR_BACKEND, "KK_ERR_MODEL_OPTIMIZATION",
     "model optimization error"},
    {KK_ERR_IO, KK_ERR_BACKEND, "KK_ERR_IO", "I/O error"},
    {KK_ERR_INTERNAL, KK_ERR_BACKEND, "KK_ERR_INTERNAL", "internal error"},
};
#define N_EXPECTED (sizeof k_expected / sizeof k_expected[0])

static void every_code_has_its_string_name_and_parent(void **state) {
    (void)state;
    for (size_t i = 0; i < N_EXPECTED; i++) {
        const expected_row *r = &k_expected[i];
        assert_string_equal(kk_status_str(r->code), r->text);
        assert_string_equal(kk_status_name(r->code), r->name);
        assert_int_equal(kk_status_parent(r->code), r->parent);
    }
}

static kk_status expected_parent(kk_status c) {
    for (size_t k = 0; k < N_EXPECTED; k++)
        if (k_expected[k].code == c) return k_expected[k].parent;
    return KK_OK;
}

static int expected_is(kk_status c, kk_status ancestor) {
    if (ancestor == KK_OK) return c == KK_OK;
    for (kk_status s = c; s != KK_OK; s = expected_parent(s))
        if (s == ancestor) return 1;
    return 0;
}

static void ancestry_follows_the_tree(void **state) {
    (void)state;
    for (size_t i = 0; i < N_EXPECTED; i++) {
        kk_status c = k_expected[i].code;
        assert_true(kk_status_is(c, c));
        if (c != KK_OK) {
            assert_true(kk_status_is(c, KK_ERR_BACKEND));
            assert_false(kk_status_is(c, KK_OK));
        } else {
            assert_true(kk_status_is(c, KK_OK));
            assert_false(kk_status_is(c, KK_ERR_BACKEND));
        }
        /* ancestry is exactly the chain of parents in the table above */
        for (size_t j = 0; j < N_EXPECTED; j++) {
            kk_status a = k_expected[j].code;
            assert_int_equal(kk_status_is(c, a), expected_is(c, a));
        }
    }
    assert_true(kk_status_is(KK_ERR_OUT_OF_MEMORY, KK_ERR_ALLOCATION));
    assert_true(kk_status_is(KK_ERR_OUT_OF_MEMORY, KK_ERR_MEMORY));
    assert_true(kk_status_is(KK_ERR_KERNEL_LAUNCH, KK_ERR_DEVICE));
    assert_false(kk_status_is(KK_ERR_CONFIG, KK_ERR_DEVICE));
    assert_false(kk_status_is(KK_ERR_MEMORY, KK_ERR_OUT_OF_MEMORY));
}

static void unknown_codes_are_reported_as_unknown(void **state) {
    (void)state;
    assert_string_equal(kk_status_str((kk_status)4242), "unknown status");
    assert_string_equal(kk_status_name((kk_status)-3), "KK_ERR_UNKNOWN");
    assert_int_equal(kk_status_parent((kk_status)4242), KK_OK);
    assert_false(kk_status_is((kk_status)4242, KK_ERR_BACKEND));
}

static void last_error_carries_every_field(void **state) {
    (void)state;
    kk_clear_error();
    assert_int_equal(kk_last_error()->status, KK_OK);
    assert_string_equal(kk_last_error_message(), "");

    kk_status st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_thing", "n", "at least 1", "%d", 0);
    assert_int_equal(st, KK_ERR_INVALID_ARGUMENT);
    const kk_error_info *e = kk_last_error();
    assert_int_equal(e->status, KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(e->function, "kk_thing");
    assert_string_equal(e->argument, "n");
    assert_string_equal(e->value, "0");
    assert_string_equal(e->expected, "at least 1");
    assert_string_equal(e->cuda_error, "");
    assert_string_equal(e->message, "kk_thing: n = 0: expected at least 1");

    kk__cuda_error(KK_ERR_CUDA_UNAVAILABLE, "kk_probe", "cudaErrorNoDevice",
                   "no CUDA-capable device is detected", "cudaGetDeviceCount failed");
    e = kk_last_error();
    assert_string_equal(e->cuda_error, "cudaErrorNoDevice");
    assert_string_equal(e->argument, "");
    kk_assert_contains(e->message, "kk_probe: cudaGetDeviceCount failed");
    kk_assert_contains(e->message, "cudaErrorNoDevice");

    kk_clear_error();
    assert_int_equal(kk_last_error()->status, KK_OK);
    assert_string_equal(kk_last_error()->function, "");
}

static void long_values_are_truncated_not_overflowed(void **state) {
    (void)state;
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    kk__arg_error(KK_ERR_INVALID_ARGUMENT, big, big, big, "%s", big);
    assert_true(strlen(kk_last_error_message()) < 1024);
    assert_true(strlen(kk_last_error()->value) < 512);
}

static void *other_thread(void *arg) {
    (void)arg;
    /* A fresh thread sees no error, and its own error does not leak out. */
    int clean = kk_last_error()->status == KK_OK;
    kk__error(KK_ERR_IO, "kk_other", "thread-local");
    return (void *)(intptr_t)clean;
}

static void last_error_is_thread_local(void **state) {
    (void)state;
    kk__error(KK_ERR_CONFIG, "kk_main", "mine");
    pthread_t t;
    void *clean = NULL;
    assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
    assert_int_equal(pthread_join(t, &clean), 0);
    assert_true((intptr_t)clean);
    assert_int_equal(kk_last_error()->status, KK_ERR_CONFIG);
    assert_string_equal(kk_last_error_message(), "kk_main: mine");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_code_has_its_string_name_and_parent),
        cmocka_unit_test(ancestry_follows_the_tree),
        cmocka_unit_test(unknown_codes_are_reported_as_unknown),
        cmocka_unit_test(last_error_carries_every_field),
        cmocka_unit_test(long_values_are_truncated_not_overflowed),
        cmocka_unit_test(last_error_is_thread_local),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
