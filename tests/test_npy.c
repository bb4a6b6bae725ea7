/* labels: unit cpu */
/* .npy reading and writing: the numpy-made fixtures of tests/data/npy (every
 * numeric type in both byte orders, format versions 1-3, 0-d, zero-size, 8-d,
 * ml_dtypes arrays as np.save writes them and as KernelKit writes them), byte
 * for byte agreement with np.save, round trips of every kk_dtype and numpy type,
 * and every kind of bad file built here from bytes. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernelkit/npy.h"

#define NPY_DIR KK_TEST_DATA_DIR "/npy/"

/* ---- helpers ---- */

static unsigned char *slurp(const char *name, size_t *len) {
    char path[512];
    snprintf(path, sizeof path, NPY_DIR "%s", name);
    FILE *fp = fopen(path, "rb");
    if (!fp) fail_msg("cannot open fixture %s", path);
    unsigned char *buf = malloc(1 << 16);
    assert_non_null(buf);
    *len = fread(buf, 1, 1 << 16, fp);
    fclose(fp);
    return buf;
}

static void read_fixture(const char *name, kk_npy_array *a) {
    char path[512];
    snprintf(path, sizeof path, NPY_DIR "%s", name);
    kk_assert_ok(kk_npy_read_file(path, a));
}

static void read_fixture_as(const char *name, kk_dtype dt, kk_npy_array *a) {
    char path[512];
    snprintf(path, sizeof path, NPY_DIR "%s", name);
    kk_assert_ok(kk_npy_read_file_as(path, dt, a));
}

static void assert_shape(const kk_npy_array *a, int ndim, const int64_t *shape) {
    assert_int_equal(a->ndim, ndim);
    for (int d = 0; d < ndim; d++) assert_int_equal(a->shape[d], shape[d]);
    for (int d = ndim; d < KK_NPY_MAX_DIMS; d++) assert_int_equal(a->shape[d], 0);
}

static const int64_t k_2x3[] = {2, 3};

/* A sentinel-filled array: a failed call must leave it exactly so. */
static void sentinel(kk_npy_array *a) { memset(a, 0xAB, sizeof *a); }
static void assert_sentinel(const kk_npy_array *a) {
    kk_npy_array s;
    sentinel(&s);
    assert_memory_equal(a, &s, sizeof s);
}

/* Read `len` bytes and expect `status` with `needle` in the message. */
static void expect_bad(const void *buf, size_t len, kk_status status, const char *needle) {
    kk_npy_array a;
    sentinel(&a);
    kk_status st = kk_npy_read_memory(buf, len, &a);
    if (st != status)
        fail_msg("expected %s, got %s: %s", kk_status_name(status), kk_status_name(st),
                 kk_last_error_message());
    assert_sentinel(&a);
    kk_assert_contains(kk_last_error_message(), needle);
    assert_int_equal(kk_last_error()->status, status);
    if (st == KK_OK) kk_npy_free(&a);
}

static kk_npy_array expect_good(const void *buf, size_t len) {
    kk_npy_array a;
    kk_assert_ok(kk_npy_read_memory(buf, len, &a));
    return a;
}

/* Build a .npy: magic, version, the header length field, `header` verbatim,
 * then `data_len` bytes of data (0, 1, 2...). Returns the length. */
static size_t build(unsigned char *out, int major, int minor, const char *header, size_t data_len) {
    size_t hl = strlen(header), n = 0;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)major;
    out[7] = (unsigned char)minor;
    n = 8;
    out[n++] = (unsigned char)(hl & 0xff);
    out[n++] = (unsigned char)(hl >> 8 & 0xff);
    if (major != 1) {
        out[n++] = (unsigned char)(hl >> 16 & 0xff);
        out[n++] = (unsigned char)(hl >> 24 & 0xff);
    }
    memcpy(out + n, header, hl);
    n += hl;
    for (size_t k = 0; k < data_len; k++) out[n++] = (unsigned char)k;
    return n;
}

/* A version 1.0 file whose dict is `dict`, padded like numpy, with data_len bytes. */
static size_t build_dict(unsigned char *out, const char *dict, size_t data_len) {
    char header[1024];
    size_t dl = strlen(dict);
    size_t pad = 64 - (10 + dl + 1) % 64;
    memcpy(header, dict, dl);
    memset(header + dl, ' ', pad);
    header[dl + pad] = '\n';
    header[dl + pad + 1] = 0;
    return build(out, 1, 0, header, data_len);
}

/* half -> double for normal numbers and zero (enough for the fixtures) */
static double half_to_double(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m / 1024.0, -14);
    return sign ? -v : v;
}

/* ---- the numpy type fixtures: values are formulas of i = 0..5 (make_fixtures.py) ---- */

typedef struct ntype {
    const char *code;  /* "i4" */
    const char *canon; /* descr after reading on a little-endian host */
    kk_dtype dtype;
    size_t itemsize;
} ntype;

static const ntype k_types[] = {
    {"b1", "|b1", KK_NPY_DTYPE_NONE, 1}, {"i1", "|i1", KK_DTYPE_INT8, 1},
    {"i2", "<i2", KK_NPY_DTYPE_NONE, 2}, {"i4", "<i4", KK_DTYPE_INT32, 4},
    {"i8", "<i8", KK_NPY_DTYPE_NONE, 8}, {"u1", "|u1", KK_DTYPE_UINT8, 1},
    {"u2", "<u2", KK_NPY_DTYPE_NONE, 2}, {"u4", "<u4", KK_NPY_DTYPE_NONE, 4},
    {"u8", "<u8", KK_NPY_DTYPE_NONE, 8}, {"f2", "<f2", KK_DTYPE_F16, 2},
    {"f4", "<f4", KK_DTYPE_F32, 4},      {"f8", "<f8", KK_DTYPE_F64, 8},
    {"c8", "<c8", KK_NPY_DTYPE_NONE, 8}, {"c16", "<c16", KK_NPY_DTYPE_NONE, 16},
};
#define N_TYPES (sizeof k_types / sizeof k_types[0])

static uint64_t int_mul(size_t size) {
    return size == 1 ? 50 : size == 2 ? 10007 : size == 4 ? 700000001 : 3000000000000000001ULL;
}

/* Fill data with the fixture values of type t. */
static void fill_values(const ntype *t, void *data) {
    unsigned char *p = data;
    for (int i = 0; i < 6; i++, p += t->itemsize) {
        char kind = t->code[0];
        if (kind == 'b') {
            p[0] = i % 3 == 0;
        } else if (kind == 'i') {
            int64_t v = (int64_t)(i - 2) * (int64_t)int_mul(t->itemsize);
            if (t->itemsize == 1) {
                int8_t x = (int8_t)v;
                memcpy(p, &x, 1);
            }
            if (t->itemsize == 2) {
                int16_t x = (int16_t)v;
                memcpy(p, &x, 2);
            }
            if (t->itemsize == 4) {
                int32_t x = (int32_t)v;
                memcpy(p, &x, 4);
            }
            if (t->itemsize == 8) memcpy(p, &v, 8);
        } else if (kind == 'u') {
            uint64_t v = (uint64_t)i * int_mul(t->itemsize);
            if (t->itemsize == 1) {
                uint8_t x = (uint8_t)v;
                memcpy(p, &x, 1);
            }
            if (t->itemsize == 2) {
                uint16_t x = (uint16_t)v;
                memcpy(p, &x, 2);
            }
            if (t->itemsize == 4) {
                uint32_t x = (uint32_t)v;
                memcpy(p, &x, 4);
            }
            if (t->itemsize == 8) memcpy(p, &v, 8);
        } else if (kind == 'f') {
            double v = (i - 2) * 1.5 + 0.25;
            if (t->itemsize == 4) {
                float x = (float)v;
                memcpy(p, &x, 4);
            }
            if (t->itemsize == 8) memcpy(p, &v, 8);
            if (t->itemsize == 2) { /* exact in half: find the pattern */
                uint16_t h = 0;
                for (uint32_t b = 0; b < 0x7c00; b++)
                    if (half_to_double((uint16_t)b) == fabs(v)) h = (uint16_t)b;
                if (v < 0) h |= 0x8000;
                memcpy(p, &h, 2);
            }
        } else { /* complex */
            double re = (i - 2) * 1.5, im = i * 0.25;
            if (t->itemsize == 8) {
                float c[2] = {(float)re, (float)im};
                memcpy(p, c, 8);
            } else {
                double c[2] = {re, im};
                memcpy(p, c, 16);
            }
        }
    }
}

static void check_values(const ntype *t, const kk_npy_array *a) {
    unsigned char want[96];
    fill_values(t, want);
    assert_int_equal(a->nbytes, 6 * t->itemsize);
    assert_memory_equal(a->data, want, a->nbytes);
    if (!strcmp(t->code, "f2")) { /* and the decoded values, independently */
        for (int i = 0; i < 6; i++) {
            uint16_t h;
            memcpy(&h, (const unsigned char *)a->data + 2 * i, 2);
            assert_true(half_to_double(h) == (i - 2) * 1.5 + 0.25);
        }
    }
}

static void every_numpy_type_reads_in_both_byte_orders(void **state) {
    (void)state;
    for (size_t k = 0; k < N_TYPES; k++) {
        const ntype *t = &k_types[k];
        for (int be = 0; be < 2; be++) {
            if (be && t->itemsize == 1) continue;
            char name[32];
            snprintf(name, sizeof name, "%s_%s.npy", be ? "be" : "le", t->code);
            kk_npy_array a;
            read_fixture(name, &a);
            assert_string_equal(a.descr, t->canon);
            assert_int_equal(a.dtype, t->dtype);
            assert_int_equal(a.itemsize, t->itemsize);
            assert_shape(&a, 2, k_2x3);
            assert_int_equal(a.count, 6);
            check_values(t, &a);
            kk_npy_free(&a);
        }
    }
    /* spot checks written out, independent of fill_values */
    kk_npy_array a;
    read_fixture("be_i4.npy", &a);
    int32_t i4[6];
    memcpy(i4, a.data, sizeof i4);
    assert_int_equal(i4[0], -1400000002);
    assert_int_equal(i4[5], 2100000003);
    kk_npy_free(&a);
    read_fixture("be_f8.npy", &a);
    assert_true(((double *)a.data)[0] == -2.75 && ((double *)a.data)[5] == 4.75);
    kk_npy_free(&a);
    read_fixture("be_c8.npy", &a);
    assert_true(((float *)a.data)[10] == 4.5f && ((float *)a.data)[11] == 1.25f);
    kk_npy_free(&a);
}

static void format_versions_2_and_3_read(void **state) {
    (void)state;
    const ntype *f4 = &k_types[10];
    const char *names[] = {"v2_f4.npy", "v3_f4.npy"};
    for (int k = 0; k < 2; k++) {
        kk_npy_array a;
        read_fixture(names[k], &a);
        assert_int_equal(a.dtype, KK_DTYPE_F32);
        assert_shape(&a, 2, k_2x3);
        check_values(f4, &a);
        kk_npy_free(&a);
    }
}

static void scalar_zero_size_and_8d_read(void **state) {
    (void)state;
    kk_npy_array a;
    read_fixture("scalar_f8.npy", &a);
    assert_int_equal(a.ndim, 0);
    assert_int_equal(a.count, 1);
    assert_int_equal(a.nbytes, 8);
    assert_true(*(double *)a.data == 3.5);
    kk_npy_free(&a);

    read_fixture("empty_0x3_f4.npy", &a);
    assert_shape(&a, 2, (const int64_t[]){0, 3});
    assert_int_equal(a.count, 0);
    assert_int_equal(a.nbytes, 0);
    assert_non_null(a.data);
    kk_npy_free(&a);

    read_fixture("empty_2x0x4_i2.npy", &a);
    assert_shape(&a, 3, (const int64_t[]){2, 0, 4});
    assert_int_equal(a.count, 0);
    assert_string_equal(a.descr, "<i2");
    kk_npy_free(&a);

    read_fixture("dims8_u1.npy", &a);
    assert_shape(&a, 8, (const int64_t[]){1, 2, 1, 2, 1, 1, 1, 2});
    assert_int_equal(a.count, 8);
    for (int i = 0; i < 8; i++) assert_int_equal(((uint8_t *)a.data)[i], i);
    kk_npy_free(&a);
    kk_npy_free(&a); /* twice is fine */
    kk_npy_free(NULL);
    assert_int_equal(a.dtype, KK_NPY_DTYPE_NONE);
    assert_null(a.data);
}

static void unsupported_fixtures_say_why(void **state) {
    (void)state;
    struct {
        const char *name, *needle1, *needle2;
    } cases[] = {
        {"fortran_f4.npy", "Fortran-order arrays are not supported", "np.ascontiguousarray"},
        {"unicode_U3.npy", "unsupported dtype '<U3'", "string"},
        {"object.npy", "unsupported dtype '|O'", "pickled"},
        {"structured.npy", "structured dtypes", "not supported"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char path[512];
        snprintf(path, sizeof path, NPY_DIR "%s", cases[k].name);
        kk_npy_array a;
        sentinel(&a);
        kk_assert_status(kk_npy_read_file(path, &a), KK_ERR_UNSUPPORTED);
        assert_sentinel(&a);
        kk_assert_contains(kk_last_error_message(), cases[k].needle1);
        kk_assert_contains(kk_last_error_message(), cases[k].needle2);
        kk_assert_contains(kk_last_error_message(), "kk_npy_read_file");
        kk_assert_contains(kk_last_error_message(), cases[k].name);
        assert_string_equal(kk_last_error()->argument, "path");
    }
}

/* ---- ml_dtypes ---- */

static const uint16_t k_bf16_bits[6] = {0x3f80, 0xc000, 0x3f00, 0x4040, 0x3fc0, 0xbe80};
static const uint8_t k_e4m3_bits[6] = {0x38, 0xc0, 0x30, 0x44, 0x7e, 0x98};
static const uint8_t k_e5m2_bits[6] = {0x3c, 0xc0, 0x38, 0x42, 0x7b, 0xac};
static const uint8_t k_e2m1_unpacked[6] = {0x01, 0x0a, 0x07, 0x00, 0x03, 0x0f};
static const uint8_t k_e2m1_packed[6] = {0xa1, 0x07, 0xf3, 0x42, 0x65, 0xd9};

static void ml_dtypes_by_name_read_directly(void **state) {
    (void)state;
    kk_npy_array a;
    read_fixture("named_bf16.npy", &a);
    assert_string_equal(a.descr, "bfloat16");
    assert_int_equal(a.dtype, KK_DTYPE_BF16);
    assert_int_equal(a.itemsize, 2);
    assert_shape(&a, 2, k_2x3);
    assert_memory_equal(a.data, k_bf16_bits, 12);
    kk_npy_free(&a);

    read_fixture("named_e4m3.npy", &a);
    assert_string_equal(a.descr, "float8_e4m3fn");
    assert_int_equal(a.dtype, KK_DTYPE_FP8_E4M3);
    assert_memory_equal(a.data, k_e4m3_bits, 6);
    kk_npy_free(&a);

    read_fixture("named_e5m2.npy", &a);
    assert_string_equal(a.descr, "float8_e5m2");
    assert_int_equal(a.dtype, KK_DTYPE_FP8_E5M2);
    assert_memory_equal(a.data, k_e5m2_bits, 6);
    kk_npy_free(&a);

    /* np.save writes float8_e5m2 as '<f1' (which np.load itself rejects): read as e5m2 */
    read_fixture("npsave_e5m2.npy", &a);
    assert_string_equal(a.descr, "float8_e5m2");
    assert_int_equal(a.dtype, KK_DTYPE_FP8_E5M2);
    assert_memory_equal(a.data, k_e5m2_bits, 6);
    kk_npy_free(&a);

    /* ml_dtypes' float4_e2m1fn holds one element per byte: raw, no kk_dtype */
    read_fixture("named_e2m1_unpacked.npy", &a);
    assert_string_equal(a.descr, "float4_e2m1fn");
    assert_int_equal(a.dtype, KK_NPY_DTYPE_NONE);
    assert_int_equal(a.itemsize, 1);
    assert_memory_equal(a.data, k_e2m1_unpacked, 6);
    kk_npy_free(&a);
}

static void np_save_voids_need_the_dtype_hint(void **state) {
    (void)state;
    kk_npy_array a;
    read_fixture("npsave_bf16.npy", &a);
    assert_string_equal(a.descr, "|V2");
    assert_int_equal(a.dtype, KK_NPY_DTYPE_NONE);
    assert_int_equal(a.itemsize, 2);
    assert_memory_equal(a.data, k_bf16_bits, 12);
    kk_assert_ok(kk_npy_reinterpret(&a, KK_DTYPE_BF16));
    assert_string_equal(a.descr, "bfloat16");
    assert_int_equal(a.dtype, KK_DTYPE_BF16);
    assert_shape(&a, 2, k_2x3);
    kk_npy_free(&a);

    read_fixture_as("npsave_bf16.npy", KK_DTYPE_BF16, &a);
    assert_int_equal(a.dtype, KK_DTYPE_BF16);
    assert_memory_equal(a.data, k_bf16_bits, 12);
    kk_npy_free(&a);

    read_fixture_as("npsave_e4m3.npy", KK_DTYPE_FP8_E4M3, &a);
    assert_string_equal(a.descr, "float8_e4m3fn");
    assert_memory_equal(a.data, k_e4m3_bits, 6);
    kk_npy_free(&a);

    /* the hint agrees with a named file: nothing to do */
    read_fixture_as("named_bf16.npy", KK_DTYPE_BF16, &a);
    kk_npy_free(&a);

    /* a '|V2' is no fp8, an f32 is no bf16, a '|V1' (unpacked) is no packed e2m1 */
    struct {
        const char *name;
        kk_dtype dt;
        const char *needle;
    } bad[] = {
        {"npsave_bf16.npy", KK_DTYPE_FP8_E4M3, "'|V2' data cannot be taken as fp8_e4m3"},
        {"le_f4.npy", KK_DTYPE_BF16, "'<f4' data cannot be taken as bf16"},
        {"npsave_e2m1_unpacked.npy", KK_DTYPE_E2M1, "cannot be taken as packed e2m1"},
        {"named_e2m1_unpacked.npy", KK_DTYPE_E2M1, "cannot be taken as packed e2m1"},
        {"named_e4m3.npy", KK_DTYPE_FP8_E5M2, "'float8_e4m3fn' data cannot be taken"},
        {"scalar_f8.npy", KK_DTYPE_F32, "'<f8' data cannot be taken as f32"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char path[512];
        snprintf(path, sizeof path, NPY_DIR "%s", bad[k].name);
        sentinel(&a);
        kk_assert_status(kk_npy_read_file_as(path, bad[k].dt, &a), KK_ERR_INVALID_ARGUMENT);
        assert_sentinel(&a);
        kk_assert_contains(kk_last_error_message(), bad[k].needle);
        kk_assert_contains(kk_last_error_message(), "kk_npy_read_file_as");
    }
    /* reinterpret leaves the array alone when it refuses */
    read_fixture("le_f4.npy", &a);
    kk_npy_array copy = a;
    kk_assert_status(kk_npy_reinterpret(&a, KK_DTYPE_BF16), KK_ERR_INVALID_ARGUMENT);
    assert_memory_equal(&a, &copy, sizeof a);
    kk_assert_status(kk_npy_reinterpret(&a, (kk_dtype)99), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_reinterpret(&a, KK_NPY_DTYPE_NONE), KK_ERR_INVALID_ARGUMENT);
    kk_npy_free(&a);
    kk_assert_status(kk_npy_reinterpret(NULL, KK_DTYPE_BF16), KK_ERR_INVALID_ARGUMENT);
}

static void packed_e2m1_is_uint8_with_half_the_last_dim(void **state) {
    (void)state;
    kk_npy_array a;
    read_fixture("e2m1_packed.npy", &a);
    assert_string_equal(a.descr, "|u1");
    assert_int_equal(a.dtype, KK_DTYPE_UINT8);
    assert_shape(&a, 2, k_2x3);
    kk_assert_ok(kk_npy_reinterpret(&a, KK_DTYPE_E2M1));
    assert_int_equal(a.dtype, KK_DTYPE_E2M1);
    assert_string_equal(a.descr, "|u1");
    assert_int_equal(a.itemsize, 1);
    assert_shape(&a, 2, (const int64_t[]){2, 6});
    assert_int_equal(a.count, 12);
    assert_int_equal(a.nbytes, 6);
    assert_memory_equal(a.data, k_e2m1_packed, 6);
    /* element j of row r is nibble j%2 of byte j/2: row 0 is 0.5 -1 6 0 1.5 -6 */
    const uint8_t *b = a.data;
    assert_int_equal(b[0] & 0xf, 0x1); /* 0.5 */
    assert_int_equal(b[0] >> 4, 0xa);  /* -1 */
    /* and back out exactly as the fixture */
    void *buf;
    size_t len, flen;
    kk_assert_ok(kk_npy_write_memory(&a, &buf, &len));
    unsigned char *fix = slurp("e2m1_packed.npy", &flen);
    assert_int_equal(len, flen);
    assert_memory_equal(buf, fix, len);
    free(buf);
    free(fix);
    kk_npy_free(&a);

    read_fixture_as("e2m1_packed.npy", KK_DTYPE_E2M1, &a);
    assert_shape(&a, 2, (const int64_t[]){2, 6});
    kk_npy_free(&a);

    /* 0-d uint8 cannot be packed e2m1 */
    kk_assert_ok(kk_npy_array_init(&a, KK_DTYPE_UINT8, 0, NULL));
    kk_assert_status(kk_npy_reinterpret(&a, KK_DTYPE_E2M1), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "0-d");
    kk_npy_free(&a);
}

/* ---- writing: byte for byte what np.save wrote ---- */

static void assert_writes_fixture(const kk_npy_array *a, const char *name) {
    void *buf;
    size_t len, flen;
    kk_assert_ok(kk_npy_write_memory(a, &buf, &len));
    unsigned char *fix = slurp(name, &flen);
    if (len != flen || memcmp(buf, fix, len))
        fail_msg("writing %s does not reproduce it (%zu vs %zu bytes)", name, len, flen);
    assert_int_equal(len % 64, (a->nbytes) % 64); /* header is a multiple of 64 */
    free(buf);
    free(fix);
}

static void writing_matches_np_save_byte_for_byte(void **state) {
    (void)state;
    for (size_t k = 0; k < N_TYPES; k++) {
        const ntype *t = &k_types[k];
        char name[32], descr[8];
        snprintf(name, sizeof name, "le_%s.npy", t->code);
        /* made from scratch */
        snprintf(descr, sizeof descr, "%s", t->canon);
        kk_npy_array a;
        kk_assert_ok(kk_npy_array_init_descr(&a, descr, 2, k_2x3));
        assert_int_equal(a.dtype, t->dtype);
        fill_values(t, a.data);
        assert_writes_fixture(&a, name);
        kk_npy_free(&a);
        /* read from big-endian, written little-endian */
        if (t->itemsize > 1) {
            char be[32];
            snprintf(be, sizeof be, "be_%s.npy", t->code);
            read_fixture(be, &a);
            assert_writes_fixture(&a, name);
            kk_npy_free(&a);
        }
    }
    const char *same[] = {"scalar_f8.npy",  "empty_0x3_f4.npy",        "empty_2x0x4_i2.npy",
                          "dims8_u1.npy",   "named_bf16.npy",          "named_e4m3.npy",
                          "named_e5m2.npy", "named_e2m1_unpacked.npy", "npsave_bf16.npy",
                          "npsave_e4m3.npy"};
    for (size_t k = 0; k < sizeof same / sizeof same[0]; k++) {
        kk_npy_array a;
        read_fixture(same[k], &a);
        if (!strncmp(same[k], "npsave_", 7)) {
            /* np.save writes '<V2', numpy's canonical form of which is '|V2' */
            void *buf;
            size_t len, flen;
            kk_assert_ok(kk_npy_write_memory(&a, &buf, &len));
            unsigned char *fix = slurp(same[k], &flen);
            assert_int_equal(len, flen);
            assert_memory_equal((char *)buf + len - a.nbytes, fix + flen - a.nbytes, a.nbytes);
            kk_assert_contains((char *)buf + 10, "'descr': '|V");
            free(buf);
            free(fix);
        } else {
            assert_writes_fixture(&a, same[k]);
        }
        kk_npy_free(&a);
    }
    /* format 2.0 and 3.0 files are written back as 1.0 */
    kk_npy_array a;
    read_fixture("v3_f4.npy", &a);
    assert_writes_fixture(&a, "le_f4.npy");
    kk_npy_free(&a);
    /* np.save's '<f1' (float8_e5m2) is written back under the ml_dtypes name */
    read_fixture("npsave_e5m2.npy", &a);
    assert_writes_fixture(&a, "named_e5m2.npy");
    kk_npy_free(&a);
    /* bf16 reinterpreted from np.save's '<V2' is written as our named file */
    read_fixture_as("npsave_bf16.npy", KK_DTYPE_BF16, &a);
    assert_writes_fixture(&a, "named_bf16.npy");
    kk_npy_free(&a);
}

/* ---- round trips ---- */

static void fill_pattern(void *data, size_t n, unsigned seed) {
    unsigned char *p = data;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (unsigned char)(x >> 24);
    }
}

static void roundtrip_memory_and_file(const kk_npy_array *a, kk_dtype hint) {
    void *buf;
    size_t len;
    kk_assert_ok(kk_npy_write_memory(a, &buf, &len));
    kk_npy_array b;
    if (hint == KK_NPY_DTYPE_NONE)
        kk_assert_ok(kk_npy_read_memory(buf, len, &b));
    else
        kk_assert_ok(kk_npy_read_memory_as(buf, len, hint, &b));
    free(buf);
    assert_string_equal(b.descr, a->descr);
    assert_int_equal(b.dtype, a->dtype);
    assert_int_equal(b.itemsize, a->itemsize);
    assert_shape(&b, a->ndim, a->shape);
    assert_int_equal(b.count, a->count);
    assert_int_equal(b.nbytes, a->nbytes);
    assert_memory_equal(b.data, a->data, a->nbytes);
    kk_npy_free(&b);

    char dir[] = "/tmp/kk_npy_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/a.npy", dir);
    kk_assert_ok(kk_npy_write_file(path, a));
    if (hint == KK_NPY_DTYPE_NONE)
        kk_assert_ok(kk_npy_read_file(path, &b));
    else
        kk_assert_ok(kk_npy_read_file_as(path, hint, &b));
    assert_string_equal(b.descr, a->descr);
    assert_shape(&b, a->ndim, a->shape);
    assert_memory_equal(b.data, a->data, a->nbytes);
    kk_npy_free(&b);
    /* overwriting works too, and leaves no temporary behind */
    kk_assert_ok(kk_npy_write_file(path, a));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void every_kk_dtype_round_trips(void **state) {
    (void)state;
    static const int64_t shapes[][3] = {{3, 4, 0}, {2, 0, 4}, {1, 6, 2}};
    for (int d = 0; d < KK_DTYPE_COUNT; d++) {
        for (size_t s = 0; s < 3; s++) {
            int ndim = shapes[s][2] ? 3 : 2;
            kk_npy_array a;
            kk_assert_ok(kk_npy_array_init(&a, (kk_dtype)d, ndim, shapes[s]));
            assert_int_equal(a.dtype, d);
            assert_string_equal(a.descr, kk_npy_dtype_descr((kk_dtype)d));
            for (size_t k = 0; k < a.nbytes; k++) assert_int_equal(((char *)a.data)[k], 0);
            fill_pattern(a.data, a.nbytes, (unsigned)d);
            /* a kk_dtype is written so that it reads back as itself, except that
             * packed e2m1 reads back as its uint8 bytes unless asked for e2m1 */
            roundtrip_memory_and_file(&a, d == KK_DTYPE_E2M1 ? KK_DTYPE_E2M1 : KK_NPY_DTYPE_NONE);
            kk_npy_free(&a);
        }
        if (d != KK_DTYPE_E2M1) { /* 0-d */
            kk_npy_array a;
            kk_assert_ok(kk_npy_array_init(&a, (kk_dtype)d, 0, NULL));
            assert_int_equal(a.count, 1);
            fill_pattern(a.data, a.nbytes, 7);
            roundtrip_memory_and_file(&a, KK_NPY_DTYPE_NONE);
            kk_npy_free(&a);
        }
    }
    /* e2m1 read without the hint: uint8 with half the last dimension */
    kk_npy_array a, b;
    kk_assert_ok(kk_npy_array_init(&a, KK_DTYPE_E2M1, 2, (const int64_t[]){3, 8}));
    assert_int_equal(a.count, 24);
    assert_int_equal(a.nbytes, 12);
    void *buf;
    size_t len;
    kk_assert_ok(kk_npy_write_memory(&a, &buf, &len));
    kk_assert_ok(kk_npy_read_memory(buf, len, &b));
    assert_int_equal(b.dtype, KK_DTYPE_UINT8);
    assert_shape(&b, 2, (const int64_t[]){3, 4});
    free(buf);
    kk_npy_free(&a);
    kk_npy_free(&b);
}

static void every_numpy_type_round_trips(void **state) {
    (void)state;
    const char *orders = "<>|=";
    for (size_t k = 0; k < N_TYPES; k++) {
        for (int o = 0; o < 5; o++) {
            char descr[16];
            if (o < 4)
                snprintf(descr, sizeof descr, "%c%s", orders[o], k_types[k].code);
            else
                snprintf(descr, sizeof descr, "%s", k_types[k].code);
            kk_npy_array a;
            kk_assert_ok(kk_npy_array_init_descr(&a, descr, 2, (const int64_t[]){5, 3}));
            assert_string_equal(a.descr, k_types[k].canon);
            assert_int_equal(a.dtype, k_types[k].dtype);
            fill_pattern(a.data, a.nbytes, (unsigned)k);
            roundtrip_memory_and_file(&a, KK_NPY_DTYPE_NONE);
            kk_npy_free(&a);
        }
    }
    const char *raw[] = {"|V1",         "<V2",           "|V3",
                         "V16",         "bfloat16",      "float8_e4m3fn",
                         "float8_e5m2", "float4_e2m1fn", "float8_e8m0fnu",
                         "int4",        "float6_e2m3fn"};
    for (size_t k = 0; k < sizeof raw / sizeof raw[0]; k++) {
        kk_npy_array a;
        kk_assert_ok(kk_npy_array_init_descr(&a, raw[k], 1, (const int64_t[]){7}));
        fill_pattern(a.data, a.nbytes, (unsigned)k);
        roundtrip_memory_and_file(&a, KK_NPY_DTYPE_NONE);
        kk_npy_free(&a);
    }
}

/* ---- bad files, built from bytes ---- */

static void truncated_anywhere_is_an_io_error(void **state) {
    (void)state;
    unsigned char buf[512];
    size_t n = build_dict(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
    kk_npy_array a = expect_good(buf, n);
    kk_npy_free(&a);
    /* every proper prefix fails with KK_ERR_IO, never a crash */
    for (size_t cut = 0; cut < n; cut++) {
        kk_npy_array b;
        sentinel(&b);
        kk_assert_status(kk_npy_read_memory(buf, cut, &b), KK_ERR_IO);
        assert_sentinel(&b);
    }
    expect_bad(buf, 0, KK_ERR_IO, "empty file");
    expect_bad(buf, 4, KK_ERR_IO, "truncated: 4 bytes, the file ends inside the .npy magic");
    expect_bad(buf, 7, KK_ERR_IO, "truncated: the file ends inside the format version");
    expect_bad(buf, 9, KK_ERR_IO, "truncated: the file ends inside the header length");
    expect_bad(buf, 40, KK_ERR_IO,
               "truncated: the header length says 118 bytes from byte 10, the file has 30");
    expect_bad(buf, n - 4, KK_ERR_IO, "truncated: header says 24 bytes of data, file has 20");
    expect_bad(buf, 128, KK_ERR_IO, "file has 0");

    /* version 2.0: a 4-byte length */
    n = build(buf, 2, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", 4);
    a = expect_good(buf, n);
    kk_npy_free(&a);
    expect_bad(buf, 11, KK_ERR_IO, "inside the header length");
    /* a header length far beyond the file */
    buf[11] = 0x7f;
    expect_bad(buf, n, KK_ERR_IO, "truncated: the header length says");

    /* lying header: a big shape over a small file is caught before allocating */
    n = build_dict(buf, "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }", 8);
    expect_bad(buf, n, KK_ERR_IO, "truncated: header says 8000000000000 bytes of data, file has 8");
    /* trailing bytes are rejected */
    n = build_dict(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 9);
    expect_bad(buf, n, KK_ERR_IO, "trailing data: header says 8 bytes of data, file has 9");
}

static void not_npy_and_versions(void **state) {
    (void)state;
    expect_bad(
        "GARBAGE!GARBAGE!", 16, KK_ERR_IO,
        "not a .npy file: missing the \\x93NUMPY magic (first bytes: 47 41 52 42 41 47 45 21)");
    expect_bad("PK\x03\x04zzzzzzzz", 12, KK_ERR_IO, "zip archive");
    expect_bad("\x93NUMPZ\x01\x00", 8, KK_ERR_IO, "not a .npy file");
    expect_bad("\x93NU", 3, KK_ERR_IO, "ends inside the .npy magic");
    expect_bad("\x93NX", 3, KK_ERR_IO, "not a .npy file");
    unsigned char buf[512];
    const char *h = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n";
    size_t n = build(buf, 4, 0, h, 4);
    expect_bad(buf, n, KK_ERR_UNSUPPORTED, "format version 4.0 is not supported");
    n = build(buf, 1, 1, h, 4);
    expect_bad(buf, n, KK_ERR_UNSUPPORTED, "format version 1.1 is not supported");
    n = build(buf, 0, 0, h, 4);
    expect_bad(buf, n, KK_ERR_UNSUPPORTED, "format version 0.0");
    n = build(buf, 3, 0, h, 4);
    kk_npy_array a = expect_good(buf, n);
    kk_npy_free(&a);
    /* a header over the limit */
    memcpy(buf, "\x93NUMPY\x02\x00\x00\x00\x20\x00", 12); /* 2 MiB */
    unsigned char *big = calloc(1, (2u << 20) + 12);
    assert_non_null(big);
    memcpy(big, buf, 12);
    expect_bad(big, (2u << 20) + 12, KK_ERR_UNSUPPORTED, "over the limit");
    free(big);
}

typedef struct bad_header {
    const char *dict; /* padded like numpy unless it ends with '\n' or `raw` */
    kk_status status;
    const char *needle;
} bad_header;

static void malformed_headers_are_named(void **state) {
    (void)state;
    static const bad_header cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, }", KK_ERR_IO, "missing key 'shape'"},
        {"{'fortran_order': False, 'shape': (2,), }", KK_ERR_IO, "missing key 'descr'"},
        {"{'descr': '<f4', 'shape': (2,), }", KK_ERR_IO, "missing key 'fortran_order'"},
        {"{}", KK_ERR_IO, "missing key 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'foo': 1, }", KK_ERR_IO,
         "unexpected key 'foo'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", KK_ERR_IO,
         "duplicate key 'descr'"},
        {"{'descr: '<f4', 'fortran_order': False, 'shape': (2,), }", KK_ERR_IO,
         "expected ':' after a key"},
        {"{'descr': \"<f4', 'fortran_order': False, 'shape': (2,), }", KK_ERR_IO,
         "unterminated string"},
        {"{descr: '<f4', 'fortran_order': False, 'shape': (2,), }", KK_ERR_IO,
         "expected a quoted key or '}'"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,), }", KK_ERR_IO,
         "expected ',' or '}'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), },", KK_ERR_IO,
         "unexpected ',' after the dict"},
        {"['descr', '<f4']", KK_ERR_IO, "expected '{', found '['"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.5, 3), }", KK_ERR_IO,
         "not an integer"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': ('2',), }", KK_ERR_IO,
         "non-integer entry in 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (None,), }", KK_ERR_IO,
         "non-integer entry in 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, (3,)), }", KK_ERR_IO,
         "non-integer entry in 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0x10,), }", KK_ERR_IO,
         "not an integer"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (02,), }", KK_ERR_IO, "leading zero"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", KK_ERR_IO,
         "'shape' must be a tuple of integers, found a list"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': 6, }", KK_ERR_IO,
         "'shape' must be a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", KK_ERR_IO, "is not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", KK_ERR_IO,
         "expected ',' or ')' in 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,,), }", KK_ERR_IO,
         "non-integer entry"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3), }", KK_ERR_IO,
         "negative dimension"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", KK_ERR_IO,
         "'fortran_order' must be True or False"},
        {"{'descr': '<f4', 'fortran_order': false, 'shape': (2,), }", KK_ERR_IO,
         "'fortran_order' must be True or False"},
        {"{'descr': 4, 'fortran_order': False, 'shape': (2,), }", KK_ERR_IO,
         "'descr' must be a string"},
        {"{'descr': [('a', '<i4'), ('b', '<f8' ], 'fortran_order': False, 'shape': (2,), }",
         KK_ERR_IO, "expected ',' or ')'"},
        /* valid but unsupported */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }",
         KK_ERR_UNSUPPORTED, "9 dimensions: at most 8 are supported"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (281474976710657,), }",
         KK_ERR_UNSUPPORTED, "array too large: shape (281474976710657,) of '<f4'"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (70368744177664,), }",
         KK_ERR_UNSUPPORTED, "over the limit of 2^48 bytes"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), "
         "}",
         KK_ERR_UNSUPPORTED, "array too large"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (99999999999999999999999999,), }",
         KK_ERR_UNSUPPORTED, "array too large"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", KK_ERR_UNSUPPORTED,
         "Fortran-order arrays are not supported (shape (2, 3), fortran_order True)"},
        {"{'descr': '<U10', 'fortran_order': False, 'shape': (2,), }", KK_ERR_UNSUPPORTED,
         "unsupported dtype '<U10': string arrays"},
        {"{'descr': '|S3', 'fortran_order': False, 'shape': (2,), }", KK_ERR_UNSUPPORTED,
         "unsupported dtype '|S3'"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", KK_ERR_UNSUPPORTED,
         "unsupported dtype '|O': object arrays"},
        {"{'descr': '<M8[D]', 'fortran_order': False, 'shape': (2,), }", KK_ERR_UNSUPPORTED,
         "unsupported dtype '<M8[D]': datetimes"},
        {"{'descr': '<f16', 'fortran_order': False, 'shape': (2,), }", KK_ERR_UNSUPPORTED,
         "unsupported dtype '<f16'"},
        {"{'descr': '<c32', 'fortran_order': False, 'shape': (2,), }", KK_ERR_UNSUPPORTED,
         "unsupported dtype '<c32'"},
        {"{'descr': '<i3', 'fortran_order': False, 'shape': (2,), }", KK_ERR_UNSUPPORTED,
         "unsupported dtype '<i3'"},
        {"{'descr': '|V0', 'fortran_order': False, 'shape': (2,), }", KK_ERR_UNSUPPORTED,
         "unsupported dtype '|V0'"},
        {"{'descr': 'float32', 'fortran_order': False, 'shape': (2,), }", KK_ERR_UNSUPPORTED,
         "unsupported dtype 'float32'"},
        {"{'descr': '', 'fortran_order': False, 'shape': (2,), }", KK_ERR_UNSUPPORTED,
         "unsupported dtype ''"},
        {"{'descr': 'x\\x01y', 'fortran_order': False, 'shape': (2,), }", KK_ERR_UNSUPPORTED,
         "unsupported dtype 'xx01y'"},
        {"{'descr': '0123456789012345678901234567890123456789012345678901234567890123456789', "
         "'fortran_order': False, 'shape': (2,), }",
         KK_ERR_UNSUPPORTED, "unsupported dtype '012345678901234567890"},
        {"{'descr': [('a', '<i4'), ('b', '<f8', (2,))], 'fortran_order': False, 'shape': (2,), }",
         KK_ERR_UNSUPPORTED, "structured dtypes"},
        {"{'descr': {'names': ['a'], 'formats': ['<i4']}, 'fortran_order': False, 'shape': (2,), }",
         KK_ERR_UNSUPPORTED, "structured dtypes"},
    };
    unsigned char buf[1024];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t n = build_dict(buf, cases[k].dict, 64);
        kk_npy_array a;
        sentinel(&a);
        kk_status st = kk_npy_read_memory(buf, n, &a);
        if (st != cases[k].status)
            fail_msg("case %zu (%s): expected %s, got %s: %s", k, cases[k].dict,
                     kk_status_name(cases[k].status), kk_status_name(st), kk_last_error_message());
        assert_sentinel(&a);
        if (!strstr(kk_last_error_message(), cases[k].needle))
            fail_msg("case %zu (%s): message \"%s\" lacks \"%s\"", k, cases[k].dict,
                     kk_last_error_message(), cases[k].needle);
        if (st == KK_ERR_IO) {
            kk_assert_contains(kk_last_error_message(),
                               "kk_npy_read_memory: malformed .npy header: ");
            kk_assert_contains(kk_last_error_message(), " at byte ");
        }
    }
}

static void header_framing(void **state) {
    (void)state;
    unsigned char buf[512];
    /* byte offsets count from the start of the file */
    size_t n = build_dict(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 0);
    expect_bad(buf, n, KK_ERR_IO, "negative dimension in 'shape' at byte 61");
    /* not ended by '\n' */
    n = build(buf, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }   ", 4);
    expect_bad(buf, n, KK_ERR_IO, "the header does not end with '\\n' at byte 69");
    n = build(buf, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4);
    expect_bad(buf, n, KK_ERR_IO, "does not end with '\\n'");
    /* junk or NUL padding */
    n = build(buf, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }  x\n", 4);
    expect_bad(buf, n, KK_ERR_IO, "unexpected 'x' after the dict");
    n = build(buf, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }  \n", 4);
    buf[10 + 59] = 0;
    expect_bad(buf, n, KK_ERR_IO, "NUL byte at byte 69");
    n = build(buf, 1, 0, "", 4);
    expect_bad(buf, n, KK_ERR_IO, "expected '{', found the end of the header at byte 10");
    n = build(buf, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,", 4);
    expect_bad(buf, n, KK_ERR_IO, "non-integer entry in 'shape': the end of the header");
    n = build(buf, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\xff\n", 4);
    expect_bad(buf, n, KK_ERR_IO, "unexpected byte 0xff after the dict");

    /* the variants numpy and others write are all accepted */
    const char *good[] = {
        /* no padding, no trailing comma, double quotes, mixed */
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}\n",
        "{'descr':'<f4','fortran_order':False,'shape':(2,3)}\n",
        "  {'shape': (2, 3,), 'fortran_order': False, 'descr': '<f4',}\n",
        /* whitespace and newlines inside, tabs, CRLF */
        "{\n  'descr' : '<f4' ,\n\t'fortran_order' : False ,\n  'shape' : ( 2 , 3 ) ,\n}\r\n",
        /* Python 2 long suffix, explicit plus sign, escaped quote-free string */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, +3L), }\n",
        /* '=' and no byte order mean native; '|' on a multi-byte type too */
        "{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3), }\n",
        "{'descr': 'f4', 'fortran_order': False, 'shape': (2, 3), }\n",
        "{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3), }\n",
        /* old numpy: padded to 16 bytes, newline last */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }    \n",
        /* newline before the padding */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n     \n",
        /* a Fortran-order flag on an array whose layout is the same in C order */
        "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 6), }\n",
        "{'descr': '<f4', 'fortran_order': True, 'shape': (6,), }\n",
    };
    float vals[6] = {-2.75f, -1.25f, 0.25f, 1.75f, 3.25f, 4.75f};
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        n = build(buf, 1, 0, good[k], 0);
        memcpy(buf + n, vals, sizeof vals);
        kk_npy_array a;
        kk_status st = kk_npy_read_memory(buf, n + sizeof vals, &a);
        if (st) fail_msg("good header %zu rejected: %s", k, kk_last_error_message());
        assert_string_equal(a.descr, "<f4");
        assert_int_equal(a.count, 6);
        assert_memory_equal(a.data, vals, sizeof vals);
        kk_npy_free(&a);
    }
    /* Fortran order with zero elements: no data either way */
    n = build_dict(buf, "{'descr': '<f4', 'fortran_order': True, 'shape': (0, 3), }", 0);
    kk_npy_array a = expect_good(buf, n);
    kk_npy_free(&a);
    /* 0-d, '>' byte order of a one-byte type, 8 dims of zero */
    n = build_dict(buf, "{'descr': '>u1', 'fortran_order': False, 'shape': (), }", 1);
    a = expect_good(buf, n);
    assert_int_equal(a.ndim, 0);
    assert_string_equal(a.descr, "|u1");
    kk_npy_free(&a);
    n = build_dict(buf, "{'descr': '<c16', 'fortran_order': False, 'shape': (0,0,0,0,0,0,0,0), }",
                   0);
    a = expect_good(buf, n);
    assert_int_equal(a.ndim, 8);
    kk_npy_free(&a);
    /* a zero dimension makes a huge shape empty */
    n = build_dict(buf, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 281474976710656), }",
                   0);
    a = expect_good(buf, n);
    assert_int_equal(a.count, 0);
    kk_npy_free(&a);
    /* big-endian bfloat16 raw: voids are never swapped, '>u2' is */
    n = build_dict(buf, "{'descr': '>V2', 'fortran_order': False, 'shape': (1,), }", 2);
    a = expect_good(buf, n);
    assert_string_equal(a.descr, "|V2");
    assert_int_equal(((uint8_t *)a.data)[0], 0);
    kk_npy_free(&a);
    n = build_dict(buf, "{'descr': '>u2', 'fortran_order': False, 'shape': (1,), }", 2);
    a = expect_good(buf, n);
    assert_int_equal(((uint16_t *)a.data)[0], 0x0001);
    kk_assert_ok(kk_npy_reinterpret(&a, KK_DTYPE_BF16));
    assert_int_equal(((uint16_t *)a.data)[0], 0x0001);
    kk_npy_free(&a);
}

/* ---- files ---- */

static void file_errors(void **state) {
    (void)state;
    kk_npy_array a;
    sentinel(&a);
    kk_assert_status(kk_npy_read_file("/nonexistent/x.npy", &a), KK_ERR_IO);
    assert_sentinel(&a);
    kk_assert_contains(kk_last_error_message(),
                       "kk_npy_read_file: /nonexistent/x.npy: cannot open: No such file");
    assert_string_equal(kk_last_error()->value, "/nonexistent/x.npy");
    kk_assert_status(kk_npy_read_file("/tmp", &a), KK_ERR_IO);
    kk_assert_contains(kk_last_error_message(), "directory");
    assert_sentinel(&a);

    /* a truncated file on disk */
    size_t len;
    unsigned char *fix = slurp("le_f8.npy", &len);
    const char *p = kk_test_write_temp((const char *)fix, len - 1);
    assert_non_null(p);
    kk_assert_status(kk_npy_read_file(p, &a), KK_ERR_IO);
    kk_assert_contains(kk_last_error_message(),
                       "truncated: header says 48 bytes of data, file has 47");
    assert_sentinel(&a);
    unlink(p);
    p = kk_test_write_temp((const char *)fix, 100);
    kk_assert_status(kk_npy_read_file(p, &a), KK_ERR_IO);
    kk_assert_contains(kk_last_error_message(),
                       "the header length says 118 bytes from byte 10, the file has 90");
    unlink(p);
    free(fix);

    /* writing */
    kk_npy_array w;
    kk_assert_ok(kk_npy_array_init(&w, KK_DTYPE_F32, 1, (const int64_t[]){3}));
    kk_assert_status(kk_npy_write_file("/nonexistent/dir/x.npy", &w), KK_ERR_IO);
    kk_assert_contains(kk_last_error_message(),
                       "kk_npy_write_file: /nonexistent/dir/x.npy: cannot write");
    kk_npy_free(&w);
}

typedef struct pipe_job {
    const char *path;
    const unsigned char *data;
    size_t len;
} pipe_job;

static void *pipe_writer(void *arg) {
    pipe_job *j = arg;
    int fd = open(j->path, O_WRONLY);
    if (fd >= 0) {
        size_t done = 0;
        while (done < j->len) {
            ssize_t k = write(fd, j->data + done, j->len - done);
            if (k <= 0) break;
            done += (size_t)k;
        }
        close(fd);
    }
    return NULL;
}

/* A pipe has no size: truncation and trailing data are found by reading. */
static kk_status read_through_fifo(const unsigned char *data, size_t len, kk_npy_array *a) {
    char dir[] = "/tmp/kk_npy_fifo_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/f", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    pipe_job j = {path, data, len};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pipe_writer, &j), 0);
    kk_status st = kk_npy_read_file(path, a);
    pthread_join(t, NULL);
    unlink(path);
    rmdir(dir);
    return st;
}

static void reading_from_a_pipe(void **state) {
    (void)state;
    size_t len;
    unsigned char *fix = slurp("le_i8.npy", &len);
    unsigned char *more = malloc(len + 1);
    memcpy(more, fix, len);
    more[len] = 0;
    kk_npy_array a;
    kk_assert_ok(read_through_fifo(fix, len, &a));
    check_values(&k_types[4], &a);
    kk_npy_free(&a);
    sentinel(&a);
    kk_assert_status(read_through_fifo(fix, len - 3, &a), KK_ERR_IO);
    kk_assert_contains(kk_last_error_message(),
                       "truncated: header says 48 bytes of data, file has 45");
    assert_sentinel(&a);
    kk_assert_status(read_through_fifo(more, len + 1, &a), KK_ERR_IO);
    kk_assert_contains(kk_last_error_message(), "trailing data");
    assert_sentinel(&a);
    kk_assert_status(read_through_fifo(fix, 50, &a), KK_ERR_IO);
    kk_assert_contains(kk_last_error_message(),
                       "truncated: the header length says 118 bytes from byte 10, the file has 40");
    assert_sentinel(&a);
    free(fix);
    free(more);
}

/* ---- arguments ---- */

static void bad_arguments(void **state) {
    (void)state;
    kk_npy_array a;
    int64_t shape[9] = {2, 2, 2, 2, 2, 2, 2, 2, 2};
    sentinel(&a);
    kk_assert_status(kk_npy_array_init(NULL, KK_DTYPE_F32, 1, shape), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_array_init(&a, KK_DTYPE_COUNT, 1, shape), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "dtype");
    kk_assert_status(kk_npy_array_init(&a, (kk_dtype)-1, 1, shape), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_array_init(&a, KK_DTYPE_F32, 9, shape), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "ndim = 9: expected 0..8");
    kk_assert_status(kk_npy_array_init(&a, KK_DTYPE_F32, -1, shape), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_array_init(&a, KK_DTYPE_F32, 2, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_array_init(&a, KK_DTYPE_F32, 2, (const int64_t[]){2, -3}),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "shape[1] = -3: expected at least 0");
    kk_assert_status(kk_npy_array_init(&a, KK_DTYPE_F32, 2, (const int64_t[]){1 << 30, 1 << 30}),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "2^48");
    kk_assert_status(kk_npy_array_init(&a, KK_DTYPE_E2M1, 2, (const int64_t[]){2, 3}),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "even");
    kk_assert_status(kk_npy_array_init(&a, KK_DTYPE_E2M1, 0, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_array_init_descr(&a, "<U3", 1, shape), KK_ERR_UNSUPPORTED);
    kk_assert_contains(kk_last_error_message(), "descr = <U3");
    kk_assert_status(kk_npy_array_init_descr(&a, NULL, 1, shape), KK_ERR_INVALID_ARGUMENT);
    assert_sentinel(&a);

    kk_assert_status(kk_npy_read_file(NULL, &a), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_read_file("x", NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_read_memory(NULL, 0, &a), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_read_memory("x", 1, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_read_file_as(NPY_DIR "le_f4.npy", (kk_dtype)42, &a),
                     KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_read_memory_as("x", 1, KK_NPY_DTYPE_NONE, &a), KK_ERR_INVALID_ARGUMENT);
    assert_sentinel(&a);
    assert_null(kk_npy_dtype_descr(KK_DTYPE_COUNT));
    assert_string_equal(kk_npy_dtype_descr(KK_DTYPE_BF16), "bfloat16");
    assert_string_equal(kk_npy_dtype_descr(KK_DTYPE_E2M1), "|u1");

    /* writing checks the struct agrees with itself */
    kk_npy_array w;
    void *buf = (void *)0x1;
    size_t len = 7;
    kk_assert_ok(kk_npy_array_init(&w, KK_DTYPE_F32, 2, (const int64_t[]){2, 3}));
    kk_npy_array bad = w;
    bad.count = 5;
    kk_assert_status(kk_npy_write_memory(&bad, &buf, &len), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "arr->count = 5");
    bad = w;
    bad.nbytes = 4;
    kk_assert_status(kk_npy_write_memory(&bad, &buf, &len), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "arr->nbytes");
    bad = w;
    bad.itemsize = 8;
    kk_assert_status(kk_npy_write_memory(&bad, &buf, &len), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "arr->itemsize");
    bad = w;
    snprintf(bad.descr, sizeof bad.descr, "<i4");
    kk_assert_status(kk_npy_write_memory(&bad, &buf, &len), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "dtype wants '<f4'");
    bad = w;
    snprintf(bad.descr, sizeof bad.descr, ">f4"); /* the same type: fine */
    kk_assert_ok(kk_npy_write_memory(&bad, &buf, &len));
    free(buf);
    buf = (void *)0x1;
    len = 7;
    bad = w;
    bad.descr[0] = 0; /* empty: from dtype */
    kk_assert_ok(kk_npy_write_memory(&bad, &buf, &len));
    free(buf);
    buf = (void *)0x1;
    len = 7;
    bad = w;
    bad.dtype = KK_NPY_DTYPE_NONE; /* the descr alone */
    kk_assert_ok(kk_npy_write_memory(&bad, &buf, &len));
    free(buf);
    buf = (void *)0x1;
    len = 7;
    bad.descr[0] = 0;
    kk_assert_status(kk_npy_write_memory(&bad, &buf, &len), KK_ERR_INVALID_ARGUMENT);
    bad = w;
    bad.dtype = (kk_dtype)77;
    kk_assert_status(kk_npy_write_memory(&bad, &buf, &len), KK_ERR_INVALID_ARGUMENT);
    bad = w;
    snprintf(bad.descr, sizeof bad.descr, "|O");
    bad.dtype = KK_NPY_DTYPE_NONE;
    kk_assert_status(kk_npy_write_memory(&bad, &buf, &len), KK_ERR_UNSUPPORTED);
    bad = w;
    memset(bad.descr, 'x', sizeof bad.descr);
    kk_assert_status(kk_npy_write_memory(&bad, &buf, &len), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_reinterpret(&bad, KK_DTYPE_BF16), KK_ERR_INVALID_ARGUMENT);
    bad = w;
    bad.data = NULL;
    kk_assert_status(kk_npy_write_memory(&bad, &buf, &len), KK_ERR_INVALID_ARGUMENT);
    bad = w;
    bad.ndim = 9;
    kk_assert_status(kk_npy_write_memory(&bad, &buf, &len), KK_ERR_INVALID_ARGUMENT);
    bad = w;
    bad.shape[1] = -3;
    kk_assert_status(kk_npy_write_memory(&bad, &buf, &len), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_write_memory(NULL, &buf, &len), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_write_memory(&w, NULL, &len), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_write_memory(&w, &buf, NULL), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_write_file(NULL, &w), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_npy_write_file("/tmp/x.npy", NULL), KK_ERR_INVALID_ARGUMENT);
    assert_ptr_equal(buf, (void *)0x1); /* untouched on failure */
    assert_int_equal(len, 7);
    kk_npy_free(&w);

    /* e2m1 with an odd last dimension cannot be written */
    kk_assert_ok(kk_npy_array_init(&w, KK_DTYPE_E2M1, 1, (const int64_t[]){4}));
    w.shape[0] = 3;
    kk_assert_status(kk_npy_write_memory(&w, &buf, &len), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "even last dimension");
    kk_npy_free(&w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_numpy_type_reads_in_both_byte_orders),
        cmocka_unit_test(format_versions_2_and_3_read),
        cmocka_unit_test(scalar_zero_size_and_8d_read),
        cmocka_unit_test(unsupported_fixtures_say_why),
        cmocka_unit_test(ml_dtypes_by_name_read_directly),
        cmocka_unit_test(np_save_voids_need_the_dtype_hint),
        cmocka_unit_test(packed_e2m1_is_uint8_with_half_the_last_dim),
        cmocka_unit_test(writing_matches_np_save_byte_for_byte),
        cmocka_unit_test(every_kk_dtype_round_trips),
        cmocka_unit_test(every_numpy_type_round_trips),
        cmocka_unit_test(truncated_anywhere_is_an_io_error),
        cmocka_unit_test(not_npy_and_versions),
        cmocka_unit_test(malformed_headers_are_named),
        cmocka_unit_test(header_framing),
        cmocka_unit_test(file_errors),
        cmocka_unit_test(reading_from_a_pipe),
        cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
