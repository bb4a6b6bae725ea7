/* Suite files into cases: kk_suite_load, kk_suite_case_find.
 *
 * A case of a file names its op, a name and a parameter text. Each DTYPE
 * parameter the text does not set is expanded over every dtype the parameter
 * accepts, and the dtypes join the name: {"name": "smoke/convert/n37", "op":
 * "convert", "params": "n=37"} gives smoke/convert/n37-f64-f64,
 * smoke/convert/n37-f64-f32, ... (49 cases). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "harness/check/suite_internal.h"
#include "opdef/opdef.h"
#include "kernelkit/cases.h"

#define MAX_SUITE_FILE_BYTES ((long)16 << 20)

/* KK_ERR_INVALID_ARGUMENT: "bad suite file PATH: FIELD: expected ...". */
static kk_status bad_file(const char *path, const char *field, const char *fmt, ...)
    KK__PRINTF(3, 4);

static kk_status bad_file(const char *path, const char *field, const char *fmt, ...) {
    char what[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return kk__error(KK_ERR_INVALID_ARGUMENT, "kk_suite_load", "bad suite file %.400s: %s: %s",
                     path, field, what);
}

static kk_status read_text(const char *path, char **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return kk__error(KK_ERR_IO, "kk_suite_load", "cannot read suite file %.400s: %s", path,
                         strerror(errno));
    char *text = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size >= 0 && size <= MAX_SUITE_FILE_BYTES && fseek(f, 0, SEEK_SET) == 0 &&
        (text = malloc((size_t)size + 1)) != NULL) {
        const size_t got = fread(text, 1, (size_t)size, f);
        text[got] = 0;
    }
    fclose(f);
    if (!text)
        return size > MAX_SUITE_FILE_BYTES
                   ? bad_file(path, "(document)", "expected at most 16 MiB")
                   : kk__error(KK_ERR_IO, "kk_suite_load", "cannot read suite file %.400s", path);
    *out = text;
    return KK_OK;
}

/* ---- one case of the file into one or more cases ---- */

/* Non-zero when the "k=v ..." text sets parameter `name`. */
static int text_sets(const char *text, const char *name) {
    const size_t n = strlen(name);
    for (const char *s = text; *s;) {
        s += strspn(s, ", \t");
        if (strncmp(s, name, n) == 0 && s[n] == '=') return 1;
        s += strcspn(s, ", \t");
    }
    return 0;
}

/* The DTYPE parameters a case leaves free, and how many choices each. */
typedef struct expansion {
    int nfree, combos;
    int param[KK_OP_MAX_PARAMS];
    int nchoices[KK_OP_MAX_PARAMS];
} expansion;

static void find_free(const kk_op *op, const char *text, expansion *e) {
    e->nfree = 0;
    e->combos = 1;
    for (int i = 0; i < op->nparams; i++) {
        if (op->params[i].kind != KK_PARAM_DTYPE || text_sets(text, op->params[i].name)) continue;
        int n = 0;
        while (op->params[i].choices && op->params[i].choices[n]) n++;
        e->param[e->nfree] = i;
        e->nchoices[e->nfree++] = n;
        e->combos *= n;
    }
}

typedef struct file_case {
    const char *name, *params;
    const kk_op *op;
    int no_bench;
} file_case;

/* Case number `combo` of a file case (mixed radix over the free dtypes) into *c;
 * `field` names the file case for errors ("cases[3]"). */
static kk_status make_case(const char *path, const char *field, const file_case *fc,
                           const expansion *x, int combo, uint64_t run_seed, kk_input_dist dist,
                           kk_case *c) {
    char where[128], error[512];
    memset(c, 0, sizeof *c);
    if (kk_op_params_parse(fc->op, fc->params, &c->params) != KK_OK) {
        snprintf(error, sizeof error, "%s", kk_last_error_message());
        snprintf(where, sizeof where, "%.32s.params", field);
        return bad_file(path, where, "%s", error);
    }
    size_t used = (size_t)snprintf(c->name, sizeof c->name, "%s", fc->name);
    char dtypes[128] = "";
    for (int f = 0; f < x->nfree && used < sizeof c->name; f++) {
        const kk_op_param *d = &fc->op->params[x->param[f]];
        const char *choice = d->choices[combo % x->nchoices[f]];
        combo /= x->nchoices[f];
        kk_op_params_set(&c->params, d->name, choice); /* one of its own choices */
        used += (size_t)snprintf(c->name + used, sizeof c->name - used, "-%s", choice);
        const size_t dl = strlen(dtypes);
        snprintf(dtypes + dl, sizeof dtypes - dl, " %s=%s", d->name, choice);
    }
    if (used >= sizeof c->name) {
        snprintf(where, sizeof where, "%.32s.name", field);
        return bad_file(path, where, "expected at most %d characters with the dtypes appended (%s)",
                        KK_CASE_NAME_MAX - 1, fc->name);
    }
    if (kk_op_params_validate(&c->params) != KK_OK) {
        snprintf(error, sizeof error, "%s", kk_last_error_message());
        snprintf(where, sizeof where, "%.32s.params", field);
        return bad_file(path, where, "%s%s%s%s", error, dtypes[0] ? " (with" : "", dtypes,
                        dtypes[0] ? ")" : "");
    }
    c->seed = kk_case_seed(run_seed, c->name);
    c->dist = dist;
    c->no_bench = fc->no_bench;
    return KK_OK;
}

/* ---- the file ---- */

static kk_status add_case(kk_suite *s, int *cap, const kk_case *c) {
    if (s->count == *cap) {
        const int n = *cap ? 2 * *cap : 64;
        kk_case *v = realloc(s->cases, (size_t)n * sizeof *v);
        if (!v) return kk__error(KK_ERR_OUT_OF_MEMORY, "kk_suite_load", "out of memory");
        s->cases = v;
        *cap = n;
    }
    s->cases[s->count++] = *c;
    return KK_OK;
}

static int only_keys(const cJSON *obj, const char *const *keys, const char **unknown) {
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        int known = 0;
        for (int k = 0; keys[k] && !known; k++) known = strcmp(it->string, keys[k]) == 0;
        if (!known) {
            *unknown = it->string;
            return 0;
        }
    }
    return 1;
}

/* cases[i] of the file: check its fields, expand it into s. */
static kk_status load_case(const char *path, const cJSON *item, int i, uint64_t run_seed,
                           kk_input_dist dist, kk_suite *s, int *cap) {
    static const char *const keys[] = {"name", "op", "params", "bench", "note", NULL};
    char field[32], where[128];
    const char *unknown = NULL;
    snprintf(field, sizeof field, "cases[%d]", i);
    if (!cJSON_IsObject(item)) return bad_file(path, field, "expected an object");
    if (!only_keys(item, keys, &unknown)) {
        snprintf(where, sizeof where, "%.32s.%.40s", field, unknown);
        return bad_file(path, where, "expected only name, op, params, bench and note");
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(item, "op");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(item, "params");
    const cJSON *bench = cJSON_GetObjectItemCaseSensitive(item, "bench");
    const cJSON *note = cJSON_GetObjectItemCaseSensitive(item, "note");
    file_case fc = {.params = "", .no_bench = cJSON_IsFalse(bench)};
    snprintf(where, sizeof where, "%.32s.name", field);
    if (!cJSON_IsString(name) || !name->valuestring[0])
        return bad_file(path, where, "expected a non-empty string");
    fc.name = name->valuestring;
    snprintf(where, sizeof where, "%.32s.op", field);
    if (!cJSON_IsString(op)) return bad_file(path, where, "expected the name of a registered op");
    if (kk_op_find(op->valuestring, &fc.op) != KK_OK)
        return bad_file(path, where, "expected the name of a registered op, not \"%.64s\"",
                        op->valuestring);
    snprintf(where, sizeof where, "%.32s.params", field);
    if (params && !cJSON_IsString(params))
        return bad_file(path, where, "expected a string \"k=v ...\"");
    if (params) fc.params = params->valuestring;
    snprintf(where, sizeof where, "%.32s.bench", field);
    if (bench && !cJSON_IsBool(bench)) return bad_file(path, where, "expected true or false");
    snprintf(where, sizeof where, "%.32s.note", field);
    if (note && !cJSON_IsString(note)) return bad_file(path, where, "expected a string");

    expansion x;
    find_free(fc.op, fc.params, &x);
    for (int k = 0; k < x.combos; k++) {
        kk_case c;
        kk_status st = make_case(path, field, &fc, &x, k, run_seed, dist, &c);
        for (int j = 0; st == KK_OK && j < s->count; j++)
            if (strcmp(s->cases[j].name, c.name) == 0) {
                snprintf(where, sizeof where, "%.32s.name", field);
                st = bad_file(path, where, "expected a name no other case has (%s)", c.name);
            }
        if (st == KK_OK) st = add_case(s, cap, &c);
        if (st != KK_OK) return st;
    }
    return KK_OK;
}

static kk_status load_document(const char *path, const cJSON *root, uint64_t run_seed,
                               kk_input_dist dist, kk_suite *s) {
    static const char *const keys[] = {"name", "description", "cases", NULL};
    const char *unknown = NULL;
    if (!cJSON_IsObject(root)) return bad_file(path, "(document)", "expected a JSON object");
    if (!only_keys(root, keys, &unknown))
        return bad_file(path, unknown, "expected only name, description and cases");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    const cJSON *description = cJSON_GetObjectItemCaseSensitive(root, "description");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    if (name && (!cJSON_IsString(name) || !name->valuestring[0] ||
                 strlen(name->valuestring) >= KK_SUITE_NAME_MAX))
        return bad_file(path, "name", "expected a string of 1 to %d characters",
                        KK_SUITE_NAME_MAX - 1);
    if (description && !cJSON_IsString(description))
        return bad_file(path, "description", "expected a string");
    if (!cJSON_IsArray(cases)) return bad_file(path, "cases", "expected an array");
    if (name) {
        snprintf(s->name, sizeof s->name, "%s", name->valuestring);
    } else { /* the file's base name */
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        const size_t len = strlen(base);
        const int cut = len > 5 && strcmp(base + len - 5, ".json") == 0 ? 5 : 0;
        snprintf(s->name, sizeof s->name, "%.*s", (int)(len - (size_t)cut), base);
    }
    int i = 0, cap = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, cases) {
        kk_status st = load_case(path, item, i++, run_seed, dist, s, &cap);
        if (st != KK_OK) return st;
    }
    return KK_OK;
}

kk_status kk_suite_load(const char *name_or_path, uint64_t run_seed, kk_input_dist dist,
                        kk_suite *out) {
    kk_status st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    memset(out, 0, sizeof *out);
    st = KK__CHECK_NOT_NULL(name_or_path);
    if (st == KK_OK && ((int)dist < 0 || dist >= KK_DIST_COUNT))
        st = kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "dist", "a kk_input_dist", "%d",
                           (int)dist);
    if (st == KK_OK) st = kk_suite_locate(name_or_path, out->path, sizeof out->path);
    char *text = NULL;
    if (st == KK_OK) st = read_text(out->path, &text);
    if (st != KK_OK) return st;
    cJSON *root = cJSON_Parse(text);
    free(text);
    st = root ? load_document(out->path, root, run_seed, dist, out)
              : bad_file(out->path, "(document)", "expected valid JSON");
    cJSON_Delete(root);
    return st;
}

void kk_suite_free(kk_suite *suite) {
    if (!suite) return;
    free(suite->cases);
    suite->cases = NULL;
    suite->count = 0;
}

/* ---- one case by name, across the suites ---- */

/* 1 and *out set when `suite` has a case called `name`; 0 when not; -1 on an
 * error in kk_last_error(). */
static int find_in(const char *suite, const char *name, uint64_t run_seed, kk_input_dist dist,
                   kk_case *out) {
    kk_suite s;
    if (kk_suite_load(suite, run_seed, dist, &s) != KK_OK) {
        kk_suite_free(&s);
        return -1;
    }
    int found = 0;
    for (int i = 0; i < s.count && !found; i++)
        if (strcmp(s.cases[i].name, name) == 0) {
            *out = s.cases[i];
            found = 1;
        }
    kk_suite_free(&s);
    return found;
}

kk_status kk_suite_case_find(const char *name, uint64_t run_seed, kk_input_dist dist,
                             kk_case *out) {
    kk_status st = KK__CHECK_NOT_NULL(name);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    /* "smoke/convert/n37-f32-bf16": smoke.json first, then every suite */
    char first[KK_SUITE_NAME_MAX], path[KK_SUITE_PATH_MAX];
    const size_t len = strcspn(name, "/");
    snprintf(first, sizeof first, "%.*s", (int)(len < sizeof first ? len : 0), name);
    int found = 0;
    if (first[0] && !kk__suite_is_path(first) && kk_suite_locate(first, path, sizeof path) == KK_OK)
        found = find_in(first, name, run_seed, dist, out);
    /* A suite that cannot be read does not hide the others; it is named when
     * the case is found nowhere. */
    char unreadable[400] = "";
    if (found < 0) snprintf(unreadable, sizeof unreadable, "%s", kk_last_error_message());
    char **names = NULL;
    int count = 0;
    if (found <= 0) st = kk_suite_names(&names, &count);
    for (int i = 0; st == KK_OK && found <= 0 && i < count; i++) {
        if (strcmp(names[i], first) == 0) continue;
        found = find_in(names[i], name, run_seed, dist, out);
        if (found < 0 && !unreadable[0])
            snprintf(unreadable, sizeof unreadable, "%s", kk_last_error_message());
    }
    kk_suite_names_free(names, count);
    if (st != KK_OK) return st;
    if (found > 0) return KK_OK;
    return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "name",
                         "a case of a suite, e.g. smoke/convert/n37-f32-bf16 "
                         "(kernelkit check --suite all --list)",
                         "%s%s%s", name, unreadable[0] ? "; a suite could not be read: " : "",
                         unreadable);
}
