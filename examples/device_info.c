/* List the devices KernelKit sees and check the best one runs this build.
 *
 *   cc device_info.c $(pkg-config --cflags --libs kernelkit) -o device_info
 *
 * Shows the error convention: every call returns a kk_status, and
 * kk_last_error_message() says what went wrong. */
#include <stdio.h>

#include <kernelkit/kernelkit.h>

int main(void) {
    printf("KernelKit %s\n", kk_version());
    for (int k = 0; k < KK_BACKEND_COUNT; k++) {
        kk_backend_kind kind = (kk_backend_kind)k;
        if (kk_backend_available(kind))
            printf("backend %s: %d device(s)\n", kk_backend_name(kind),
                   kk_backend_device_count(kind));
        else
            printf("backend %s: unavailable (%s)\n", kk_backend_name(kind),
                   kk_backend_unavailable_reason(kind));
    }

    const char *best = kk_device_best();
    kk_device_info info;
    if (kk_device_get_info(best, &info) != KK_OK) {
        fprintf(stderr, "device_info: %s\n", kk_last_error_message());
        return 1;
    }
    printf("best device: %s (%s)\n", info.spec, info.name);
    if (info.backend == KK_BACKEND_CUDA)
        printf("  compute capability %d.%d (%s), %d SMs\n", info.cc_major, info.cc_minor,
               kk_arch_name(info.arch), info.sm_count);

    if (kk_device_selftest(best) != KK_OK) {
        fprintf(stderr, "device_info: selftest failed: %s\n", kk_last_error_message());
        return 1;
    }
    printf("selftest on %s: ok\n", best);

    /* A bad argument is reported, never crashes. */
    if (kk_device_get_info("gpu:7", &info) != KK_OK)
        printf("as expected, 'gpu:7' is rejected: %s\n", kk_last_error_message());
    return 0;
}
