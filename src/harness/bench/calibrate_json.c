/* The ceilings file "kernelkit.ceilings/1": writing, reading (every field
 * checked, so a hostile file is refused with the field's name), the default
 * path and loading the stored ceilings of a device. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/bench/calibrate_internal.h"
#include "kernelkit/device.h"

#define SCHEMA_PREFIX "kernelkit.ceilings/"

/* ---- writing ---- */

/* "%.17g", so every double reads back bit for bit (cJSON's own printing
 * accepts a round trip within an epsilon). Values are finite here. */
static int add_number(cJSON *o, const char *k, double v) {
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", isfinite(v) ? v : 0.0);
    return cJSON_AddRawToObject(o, k, buf) != NULL;
}

kk_status kk_calibration_to_json(const kk_calibration *cal, char **text) {
    kk_status st = KK__CHECK_NOT_NULL(cal);
    if (st || (st = KK__CHECK_NOT_NULL(text))) return st;
    *text = NULL;
    cJSON *root = cJSON_CreateObject();
    int ok = root != NULL;
    ok = ok && cJSON_AddStringToObject(root, "schema", KK_CEILINGS_SCHEMA);
    ok = ok && cJSON_AddStringToObject(root, "device", cal->device);
    ok = ok && cJSON_AddStringToObject(root, "device_name", cal->device_name);
    ok = ok && cJSON_AddStringToObject(root, "driver_version", cal->driver_version);
    cJSON *clocks = ok ? cJSON_AddObjectToObject(root, "clocks") : NULL;
    ok = ok && clocks && add_number(clocks, "sm_clock_mhz", cal->sm_clock_mhz) &&
         add_number(clocks, "sm_clock_max_mhz", cal->sm_clock_max_mhz) &&
         add_number(clocks, "mem_clock_mhz", cal->mem_clock_mhz);
    ok = ok && cJSON_AddStringToObject(root, "timestamp_utc", cal->timestamp_utc);
    ok = ok && cJSON_AddStringToObject(root, "kernelkit_version", cal->kk_version);
    ok = ok && cJSON_AddBoolToObject(root, "quick", cal->quick != 0);
    cJSON *ceil = ok ? cJSON_AddObjectToObject(root, "ceilings") : NULL;
    ok = ok && ceil;
    for (int i = 0; ok && i < KK_CEILING_COUNT; i++) {
        const kk_ceiling *c = &cal->ceilings[i];
        cJSON *e = cJSON_AddObjectToObject(ceil, kk_ceiling_name((kk_ceiling_kind)i));
        ok = e && cJSON_AddBoolToObject(e, "available", c->available != 0) &&
             cJSON_AddStringToObject(e, "unit", kk_ceiling_unit((kk_ceiling_kind)i));
        if (ok && !c->available) {
            ok = cJSON_AddStringToObject(e, "reason", c->reason) != NULL;
            continue;
        }
        ok = ok && cJSON_AddStringToObject(e, "method", c->method) &&
             add_number(e, "value", c->value) && add_number(e, "value_ci_low", c->value_ci_low) &&
             add_number(e, "value_ci_high", c->value_ci_high) &&
             add_number(e, "median_s", c->median_s) &&
             add_number(e, "median_ci_low_s", c->median_ci_low_s) &&
             add_number(e, "median_ci_high_s", c->median_ci_high_s) &&
             add_number(e, "work", c->work) && add_number(e, "samples", (double)c->samples) &&
             add_number(e, "sm_clock_mean_mhz", c->sm_clock_mean_mhz);
    }
    char *out = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!out) return kk__error(KK_ERR_OUT_OF_MEMORY, "kk_calibration_to_json", "out of memory");
    *text = out;
    return KK_OK;
}

static kk_status mkdirs(const char *path) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_calibration_write_file", "path",
                             "under 4096 characters", "%.64s...", path);
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf) return KK_OK;
    *slash = '\0';
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) goto fail;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) goto fail;
    return KK_OK;
fail:
    return kk__error(KK_ERR_IO, "kk_calibration_write_file", "cannot create directory %s: %s", buf,
                     strerror(errno));
}

kk_status kk_calibration_write_file(const kk_calibration *cal, const char *path) {
    kk_status st = KK__CHECK_NOT_NULL(path);
    if (st || (st = mkdirs(path))) return st;
    char *text;
    if ((st = kk_calibration_to_json(cal, &text))) return st;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        free(text);
        return kk__error(KK_ERR_IO, "kk_calibration_write_file", "cannot create %s: %s", tmp,
                         strerror(errno));
    }
    size_t len = strlen(text);
    int ok = fwrite(text, 1, len, f) == len && fputc('\n', f) != EOF;
    ok = (fclose(f) == 0) && ok;
    free(text);
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        remove(tmp);
        return kk__error(KK_ERR_IO, "kk_calibration_write_file", "cannot write %s: %s", path,
                         strerror(err));
    }
    return KK_OK;
}

/* ---- reading ---- */

static kk_status bad(const char *field, const char *expected) {
    return kk__arg_error(KK_ERR_IO, "kk_calibration_from_json", field, expected, "%s",
                         "invalid or missing");
}

static kk_status get_string(const cJSON *o, const char *key, const char *field, char *dst,
                            size_t size, int allow_empty) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v) || !v->valuestring) return bad(field, "a string");
    size_t n = strlen(v->valuestring);
    if (n >= size || (!allow_empty && n == 0)) return bad(field, "a string of the right length");
    memcpy(dst, v->valuestring, n + 1);
    return KK_OK;
}

static kk_status get_number(const cJSON *o, const char *key, const char *field, double lo,
                            double hi, double *dst) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi)
        return bad(field, "a finite number in range");
    *dst = v->valuedouble;
    return KK_OK;
}

static kk_status get_int(const cJSON *o, const char *key, const char *field, int *dst) {
    double d = 0;
    kk_status st = get_number(o, key, field, 0, 1e6, &d);
    if (st) return st;
    if (d != floor(d)) return bad(field, "an integer");
    *dst = (int)d;
    return KK_OK;
}

static kk_status get_bool(const cJSON *o, const char *key, const char *field, int *dst) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsBool(v)) return bad(field, "true or false");
    *dst = cJSON_IsTrue(v) ? 1 : 0;
    return KK_OK;
}

static kk_status parse_ceiling(const cJSON *e, const char *name, kk_ceiling_kind kind,
                               kk_ceiling *c) {
    char f[96];
    kk_status st;
    memset(c, 0, sizeof *c);
#define FIELD(k) (snprintf(f, sizeof f, "ceilings.%s.%s", name, k), f)
    if (!cJSON_IsObject(e))
        return bad((snprintf(f, sizeof f, "ceilings.%s", name), f), "an object");
    char unit[16];
    if ((st = get_string(e, "unit", FIELD("unit"), unit, sizeof unit, 0))) return st;
    if (strcmp(unit, kk_ceiling_unit(kind)) != 0) return bad(f, kk_ceiling_unit(kind));
    if ((st = get_bool(e, "available", FIELD("available"), &c->available))) return st;
    if (!c->available)
        return get_string(e, "reason", FIELD("reason"), c->reason, sizeof c->reason, 1);
    const double big = 1e300;
    double samples = 0;
    if ((st = get_string(e, "method", FIELD("method"), c->method, sizeof c->method, 1)) ||
        (st = get_number(e, "value", FIELD("value"), 1e-300, big, &c->value)) ||
        (st = get_number(e, "value_ci_low", FIELD("value_ci_low"), 0, big, &c->value_ci_low)) ||
        (st = get_number(e, "value_ci_high", FIELD("value_ci_high"), 0, big, &c->value_ci_high)) ||
        (st = get_number(e, "median_s", FIELD("median_s"), 1e-300, big, &c->median_s)) ||
        (st = get_number(e, "median_ci_low_s", FIELD("median_ci_low_s"), 0, big,
                         &c->median_ci_low_s)) ||
        (st = get_number(e, "median_ci_high_s", FIELD("median_ci_high_s"), 0, big,
                         &c->median_ci_high_s)) ||
        (st = get_number(e, "work", FIELD("work"), 0, big, &c->work)) ||
        (st = get_number(e, "samples", FIELD("samples"), 1, 1e15, &samples)) ||
        (st = get_number(e, "sm_clock_mean_mhz", FIELD("sm_clock_mean_mhz"), 0, 1e6,
                         &c->sm_clock_mean_mhz)))
        return st;
    if (samples != floor(samples)) return bad(FIELD("samples"), "an integer");
    c->samples = (size_t)samples;
#undef FIELD
    return KK_OK;
}

kk_status kk_calibration_from_json(const char *text, size_t len, kk_calibration *out) {
    kk_status st = KK__CHECK_NOT_NULL(text);
    if (st || (st = KK__CHECK_NOT_NULL(out))) return st;
    memset(out, 0, sizeof *out);
    if (len > KK_CEILINGS_MAX_FILE_BYTES)
        return kk__arg_error(KK_ERR_IO, "kk_calibration_from_json", "len", "at most 1 MiB", "%zu",
                             len);
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) return bad("(document)", "valid JSON");
    char schema[64];
    if (!cJSON_IsObject(root)) {
        st = bad("(document)", "a JSON object");
        goto done;
    }
    if ((st = get_string(root, "schema", "schema", schema, sizeof schema, 0))) goto done;
    if (strcmp(schema, KK_CEILINGS_SCHEMA) != 0) {
        st = strncmp(schema, SCHEMA_PREFIX, strlen(SCHEMA_PREFIX)) == 0
                 ? kk__arg_error(KK_ERR_UNSUPPORTED, "kk_calibration_from_json", "schema",
                                 KK_CEILINGS_SCHEMA, "%s", schema)
                 : bad("schema", KK_CEILINGS_SCHEMA);
        goto done;
    }
    const cJSON *clocks = cJSON_GetObjectItemCaseSensitive(root, "clocks");
    const cJSON *ceil = cJSON_GetObjectItemCaseSensitive(root, "ceilings");
    if ((st = get_string(root, "device", "device", out->device, sizeof out->device, 0)) ||
        (st = get_string(root, "device_name", "device_name", out->device_name,
                         sizeof out->device_name, 0)) ||
        (st = get_string(root, "driver_version", "driver_version", out->driver_version,
                         sizeof out->driver_version, 1)) ||
        (st = get_string(root, "timestamp_utc", "timestamp_utc", out->timestamp_utc,
                         sizeof out->timestamp_utc, 1)) ||
        (st = get_string(root, "kernelkit_version", "kernelkit_version", out->kk_version,
                         sizeof out->kk_version, 1)) ||
        (st = get_bool(root, "quick", "quick", &out->quick)))
        goto done;
    if (!cJSON_IsObject(clocks)) {
        st = bad("clocks", "an object");
        goto done;
    }
    if ((st = get_int(clocks, "sm_clock_mhz", "clocks.sm_clock_mhz", &out->sm_clock_mhz)) ||
        (st = get_int(clocks, "sm_clock_max_mhz", "clocks.sm_clock_max_mhz",
                      &out->sm_clock_max_mhz)) ||
        (st = get_int(clocks, "mem_clock_mhz", "clocks.mem_clock_mhz", &out->mem_clock_mhz)))
        goto done;
    if (!cJSON_IsObject(ceil)) {
        st = bad("ceilings", "an object");
        goto done;
    }
    for (int i = 0; i < KK_CEILING_COUNT; i++) {
        const char *name = kk_ceiling_name((kk_ceiling_kind)i);
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(ceil, name);
        if (!item && i == KK_CEILING_AMX_BF16) { /* files written before it existed */
            kk__ceiling_unavailable(&out->ceilings[i], "not in this file");
            continue;
        }
        if ((st = parse_ceiling(item, name, (kk_ceiling_kind)i, &out->ceilings[i]))) goto done;
    }
done:
    cJSON_Delete(root);
    if (st) memset(out, 0, sizeof *out);
    return st;
}

static kk_status read_file(const char *path, const char *name, kk_calibration *out) {
    kk_status st = KK__CHECK_NOT_NULL(path);
    if (st || (st = KK__CHECK_NOT_NULL(out))) return st;
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT)
            return kk__set_error(KK_ERR_IO, "kk_calibration_read_file", "path", path,
                                 "a ceilings file", NULL,
                                 "no ceilings stored for '%s' (%s): run kernelkit calibrate",
                                 name ? name : "this device", path);
        return kk__error(KK_ERR_IO, "kk_calibration_read_file", "cannot open %s: %s", path,
                         strerror(errno));
    }
    char *buf = malloc(KK_CEILINGS_MAX_FILE_BYTES + 1);
    if (!buf) {
        fclose(f);
        return kk__error(KK_ERR_OUT_OF_MEMORY, "kk_calibration_read_file", "out of memory");
    }
    size_t n = fread(buf, 1, KK_CEILINGS_MAX_FILE_BYTES + 1, f);
    int err = ferror(f);
    fclose(f);
    if (err)
        st = kk__error(KK_ERR_IO, "kk_calibration_read_file", "cannot read %s", path);
    else if (n > KK_CEILINGS_MAX_FILE_BYTES)
        st = kk__error(KK_ERR_IO, "kk_calibration_read_file", "%s is over 1 MiB", path);
    else
        st = kk_calibration_from_json(buf, n, out);
    free(buf);
    return st;
}

kk_status kk_calibration_read_file(const char *path, kk_calibration *out) {
    return read_file(path, NULL, out);
}

/* ---- paths and loading ---- */

kk_status kk_calibration_default_path(const char *device_name, char *buf, size_t size) {
    kk_status st = KK__CHECK_NOT_NULL(device_name);
    if (st || (st = KK__CHECK_NOT_NULL(buf))) return st;
    char name[256];
    size_t n = 0;
    for (const char *p = device_name; *p && n + 1 < sizeof name; p++) {
        char ch = *p;
        int keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                   (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        name[n++] = keep ? ch : '_';
    }
    name[n] = '\0';
    if (n == 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        snprintf(name, sizeof name, "unknown");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int w;
    if (xdg && xdg[0] == '/')
        w = snprintf(buf, size, "%s/kernelkit/ceilings-%s.json", xdg, name);
    else if (home && home[0])
        w = snprintf(buf, size, "%s/.cache/kernelkit/ceilings-%s.json", home, name);
    else
        return kk__error(KK_ERR_IO, "kk_calibration_default_path",
                         "neither XDG_CACHE_HOME (absolute) nor HOME is set");
    if (w < 0 || (size_t)w >= size)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, "kk_calibration_default_path", "size",
                             "large enough for the path", "%zu", size);
    return KK_OK;
}

kk_status kk_ceilings_load(const char *device, const char *path, kk_bench_ceilings *out) {
    kk_status st = KK__CHECK_NOT_NULL(device);
    if (st || (st = KK__CHECK_NOT_NULL(out))) return st;
    memset(out, 0, sizeof *out);
    kk_device_info d;
    if ((st = kk_device_get_info(device, &d))) return st;
    char def[4096];
    if (!path) {
        if ((st = kk_calibration_default_path(d.name, def, sizeof def))) return st;
        path = def;
    }
    kk_calibration *cal = malloc(sizeof *cal);
    if (!cal) return kk__error(KK_ERR_OUT_OF_MEMORY, "kk_ceilings_load", "out of memory");
    st = read_file(path, d.name, cal);
    if (st == KK_OK && strcmp(cal->device_name, d.name) != 0)
        st = kk__set_error(KK_ERR_INVALID_ARGUMENT, "kk_ceilings_load", "device_name",
                           cal->device_name, d.name, NULL,
                           "%s holds the ceilings of '%s', not of %s ('%s')", path,
                           cal->device_name, device, d.name);
    if (st == KK_OK) kk_calibration_to_ceilings(cal, out);
    free(cal);
    return st;
}
