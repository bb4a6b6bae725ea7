#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int kk_test_no_gpu(void) {
    if (kk_backend_available(KK_BACKEND_CUDA)) return 0;
    printf("SKIP: no usable CUDA device: %s\n", kk_backend_unavailable_reason(KK_BACKEND_CUDA));
    return 1;
}

int kk_test_no_hopper(const char *what) {
    kk_device_info d;
    if (kk_device_get_info("cuda:0", &d) != KK_OK) return 1;
    if (d.cc_major == 9 && d.cc_minor == 0) return 0;
    fprintf(stderr, "SKIP: %s is compute capability %d.%d, the %s is sm_90a's\n", d.name,
            d.cc_major, d.cc_minor, what);
    return 1;
}

void kk_test_wrong_kernel_fails(const char *device, const char *op, const char *text,
                                kk_op_kernel_fn wrong, uint64_t seed) {
    assert_int_equal(kk_test_run_case_on(device, kk_test_op(op), text, seed).status, KK_CASE_PASS);
    kk_device_info d;
    kk_assert_ok(kk_device_get_info(device, &d));
    kk_op row = *kk_test_op(op);
    kk__op_swap(&row, d.backend, wrong);
    assert_int_equal(kk_test_run_case_on(device, &row, text, seed).status, KK_CASE_FAIL);
}

void kk_test_expect_verdict(const kk_case *c, const kk_run_options *o, int in_kernel, int *passed) {
    kk_case_result r;
    kk_assert_ok(kk_case_run(c, o, &r));
    if (in_kernel) {
        if (r.status != KK_CASE_PASS)
            fail_msg("%s (seed %llu): %s %s", c->name, (unsigned long long)c->seed,
                     kk_case_status_name(r.status), r.message);
        (*passed)++;
    } else {
        if (r.status != KK_CASE_SKIP)
            fail_msg("%s: %s, expected SKIP", c->name, kk_case_status_name(r.status));
        kk_assert_contains(r.message, "does not support");
    }
}

const char *kk_test_write_temp(const char *text, size_t len) {
    static char path[256];
    snprintf(path, sizeof path, "/tmp/kk_test_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, text + done, len - done);
        if (n <= 0) break;
        done += (size_t)n;
    }
    close(fd);
    return path;
}

int kk_test_run(const char *cmd, char *buf, size_t size) {
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t used = 0;
    if (size) buf[0] = 0;
    while (size && used + 1 < size) {
        size_t n = fread(buf + used, 1, size - 1 - used, p);
        if (n == 0) break;
        used += n;
    }
    if (size) buf[used] = 0;
    char drain[512];
    while (fread(drain, 1, sizeof drain, p) > 0) {}
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

const kk_op *kk_test_op(const char *name) {
    const kk_op *op;
    kk_assert_ok(kk_op_find(name, &op));
    return op;
}

kk_case_result kk_test_run_case_on(const char *device, const kk_op *row, const char *text,
                                   uint64_t seed) {
    kk_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "test/%s/%s", device, kk_op_name(row));
    kk_assert_ok(kk_op_params_parse(row, text, &c.params));
    c.seed = seed;
    c.dist = KK_DIST_FULL;
    const kk_run_options o = {.device = device};
    kk_case_result r;
    kk_assert_ok(kk_case_run(&c, &o, &r));
    print_message("    %-4s %-12s %-60s max_abs %.3g max_rel %.3g l2 %.3g %s\n",
                  kk_case_status_name(r.status), kk_op_name(row), text, r.max_abs_err,
                  r.max_rel_err, r.rel_l2_err, r.message);
    return r;
}

void kk_test_pair_open(kk_test_pair *s, const char *device, const char *op, const char *text,
                       uint64_t seed) {
    kk_assert_ok(kk_op_params_parse(kk_test_op(op), text, &s->p));
    kk_assert_ok(kk_op_tensors(&s->p, s->d, &s->n));
    void *raw[KK_OP_MAX_TENSORS];
    for (int k = 0; k < s->n; k++) {
        kk_assert_ok(
            kk_tensor_create("cpu", s->d[k].dtype, s->d[k].ndim, s->d[k].shape, &s->host[k]));
        kk_assert_ok(
            kk_tensor_create(device, s->d[k].dtype, s->d[k].ndim, s->d[k].shape, &s->dev[k]));
        raw[k] = s->host[k]->data;
    }
    kk_assert_ok(kk_case_fill_inputs(&s->p, seed, KK_DIST_FULL, raw));
    for (int k = 0; k < s->n; k++)
        if (!s->d[k].is_output) kk_assert_ok(kk_tensor_copy(s->dev[k], s->host[k]));
}

void kk_test_pair_close(kk_test_pair *s) {
    for (int k = 0; k < s->n; k++) {
        kk_tensor_destroy(s->host[k]);
        kk_tensor_destroy(s->dev[k]);
    }
}

kk_case_result kk_test_run_cpu_case(const char *op_name, const char *text, kk_op_kernel_fn kernel,
                                    uint64_t seed) {
    const kk_op *found;
    kk_assert_ok(kk_op_find(op_name, &found));
    static kk_op row; /* the case's params point at it: it must outlive the case */
    row = *found;
    if (kernel) kk__op_swap(&row, KK_BACKEND_CPU, kernel);
    kk_case c = {.seed = seed, .dist = KK_DIST_FULL};
    snprintf(c.name, sizeof c.name, "test/%s", op_name);
    kk_assert_ok(kk_op_params_parse(&row, text, &c.params));
    const kk_run_options o = {.device = "cpu"};
    kk_case_result r;
    kk_assert_ok(kk_case_run(&c, &o, &r));
    print_message("    %-5s %s  max_abs=%.3g rel_l2=%.3g %s\n", kk_case_status_name(r.status), text,
                  r.max_abs_err, r.rel_l2_err, r.message);
    return r;
}

double kk_test_fd_error(double (*loss)(void *ctx), void *ctx, double *x, const double *g,
                        int64_t n) {
    const double h = 1e-6;
    double worst = 0.0, gmax = 0.0;
    for (int64_t e = 0; e < n; e++) gmax = fmax(gmax, fabs(g[e]));
    for (int64_t e = 0; e < n; e++) {
        const double keep = x[e];
        x[e] = keep + h;
        const double lp = loss(ctx);
        x[e] = keep - h;
        const double lm = loss(ctx);
        x[e] = keep;
        worst = fmax(worst, fabs((lp - lm) / (2.0 * h) - g[e]) / fmax(gmax, 1e-3));
    }
    return worst;
}

void kk_test_varlen_fuzz_passes(const char *op, int count) {
    const kk_op *row = kk_test_op(op);
    int empty = 0, unequal = 0;
    for (int i = 0; i < count; i++) {
        kk_case c;
        kk_assert_ok(kk_case_fuzz(row, 42, i, KK_DIST_FULL, NULL, &c));
        const int32_t *lq, *lk;
        const int n = kk_op_params_list(&c.params, "seqlens_q", &lq);
        assert_int_equal(kk_op_params_list(&c.params, "seqlens_k", &lk), n);
        for (int s = 0; s < n; s++) {
            empty += lq[s] == 0 || lk[s] == 0;
            unequal += lq[s] != lk[s];
        }
        const kk_run_options o = {.device = "cpu"};
        kk_case_result r;
        kk_assert_ok(kk_case_run(&c, &o, &r));
        if (r.status != KK_CASE_PASS) {
            char text[1024];
            kk_op_params_format(&c.params, text, sizeof text);
            fail_msg("%s fuzz case %d (%s): %s", op, i, text, r.message);
        }
    }
    assert_true(empty > 5 && unequal > 20); /* the draw covers what it should */
}
