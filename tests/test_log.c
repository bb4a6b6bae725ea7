/* labels: unit cpu */
/* Logging: the text and JSON formats, quoting and escaping, level filtering,
 * per-logger prefixes, KK_LOG and KK_LOG_FORMAT, the sink, many threads at
 * once, and truncation of lines that do not fit. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log_internal.h"

/* Lines are at most LINE_CAP - 1 bytes (docs/logging.md). */
enum { LINE_CAP = 4096, KEEP = 16 };

#define LEVELS_TEXT "error, warn, info, debug, trace, off"

/* ---- a sink that keeps what it was given ---- */

typedef struct capture {
    int count;
    char lines[KEEP][LINE_CAP + 64]; /* the first KEEP lines */
    char last[LINE_CAP + 64];
    kk_log_level level;
    char logger[128];
    char message[256];
    size_t field_count;
    long long first_int;
    double unix_time;
    void *user_data;
} capture;

static capture g_cap;

static void capture_sink(const kk_log_record *r, void *user_data) {
    capture *c = user_data;
    if (c->count < KEEP) snprintf(c->lines[c->count], sizeof c->lines[0], "%s", r->line);
    snprintf(c->last, sizeof c->last, "%s", r->line);
    c->count++;
    c->level = r->level;
    snprintf(c->logger, sizeof c->logger, "%s", r->logger);
    snprintf(c->message, sizeof c->message, "%.255s", r->message);
    c->field_count = r->field_count;
    c->first_int = r->field_count && r->fields[0].type == KK_LOG_FIELD_INT ? r->fields[0].v.i : 0;
    c->unix_time = r->unix_time;
    c->user_data = user_data;
}

static int setup(void **state) {
    (void)state;
    unsetenv("KK_LOG");
    unsetenv("KK_LOG_FORMAT");
    kk_log_reset();
    memset(&g_cap, 0, sizeof g_cap);
    kk_log_set_sink(capture_sink, &g_cap);
    kk_clear_error();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unsetenv("KK_LOG");
    unsetenv("KK_LOG_FORMAT");
    kk_log_reset();
    return 0;
}

/* Writes one record and returns its line, failing if it was not written. */
static const char *log_one(kk_log_level level, const char *logger, const char *message,
                           const kk_log_field *fields, size_t n) {
    int before = g_cap.count;
    kk_log_write(level, logger, message, fields, n);
    assert_int_equal(g_cap.count, before + 1);
    return g_cap.last;
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- stderr, for the default sink and the KK_LOG warning ---- */

typedef struct stderr_capture {
    int saved_fd;
    FILE *file;
} stderr_capture;

static void stderr_begin(stderr_capture *c) {
    fflush(stderr);
    c->file = tmpfile();
    assert_non_null(c->file);
    c->saved_fd = dup(2);
    assert_true(c->saved_fd >= 0);
    assert_true(dup2(fileno(c->file), 2) >= 0);
}

static void stderr_end(stderr_capture *c, char *buf, size_t size) {
    fflush(stderr);
    dup2(c->saved_fd, 2);
    close(c->saved_fd);
    rewind(c->file);
    size_t n = fread(buf, 1, size - 1, c->file);
    buf[n] = '\0';
    fclose(c->file);
}

static int count_char(const char *s, char c) {
    int n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

static cJSON *parse_json_line(const char *line) {
    cJSON *root = cJSON_Parse(line);
    if (!root) fail_msg("not valid JSON: %s", line);
    assert_true(cJSON_IsObject(root));
    return root;
}

static const char *json_str(const cJSON *root, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!cJSON_IsString(item)) fail_msg("member %s is not a string", key);
    return item->valuestring;
}

static double json_num(const cJSON *root, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!cJSON_IsNumber(item)) fail_msg("member %s is not a number", key);
    return item->valuedouble;
}

/* ---- tests ---- */

static void level_names_and_parsing(void **state) {
    (void)state;
    static const char *names[] = {"off", "error", "warn", "info", "debug", "trace"};
    for (int i = KK_LOG_OFF; i <= KK_LOG_TRACE; i++) {
        kk_log_level parsed = KK_LOG_OFF;
        assert_string_equal(kk_log_level_name((kk_log_level)i), names[i]);
        kk_assert_ok(kk_log_level_parse(names[i], &parsed));
        assert_int_equal(parsed, i);
    }
    assert_string_equal(kk_log_level_name((kk_log_level)42), "?");

    kk_log_level out = KK_LOG_OFF;
    kk_assert_ok(kk_log_level_parse("WARNING", &out));
    assert_int_equal(out, KK_LOG_WARN);
    kk_assert_ok(kk_log_level_parse("Trace", &out));
    assert_int_equal(out, KK_LOG_TRACE);

    kk_assert_status(kk_log_level_parse("loud", &out), KK_ERR_INVALID_ARGUMENT);
    assert_int_equal(out, KK_LOG_TRACE); /* untouched */
    kk_assert_contains(kk_last_error_message(), "\"loud\"");
    kk_assert_contains(kk_last_error_message(), LEVELS_TEXT);
    kk_assert_status(kk_log_level_parse("info ", &out), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_log_level_parse(NULL, &out), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_log_level_parse("info", NULL), KK_ERR_INVALID_ARGUMENT);
}

static void text_format_of_each_field_type(void **state) {
    (void)state;
    kk_assert_ok(kk_log_set_level(NULL, KK_LOG_TRACE));

    /* The example from the issue, with cc given as a string. */
    const kk_log_field device[] = {KK_F_STR("device", "NVIDIA H200"), KK_F_STR("cc", "9.0"),
                                   KK_F_INT("sms", 132), KK_F_STR("arch", "hopper")};
    assert_string_equal(
        log_one(KK_LOG_INFO, "kernelkit.cuda.device", "backend initialized", device, 4),
        "INFO kernelkit.cuda.device: backend initialized device=\"NVIDIA H200\" cc=9.0 sms=132 "
        "arch=hopper");

    const kk_log_field all[] = {
        KK_F_STR("s", "plain"), KK_F_INT("i", -42),         KK_F_UINT("u", UINT64_MAX),
        KK_F_DBL("d", 0.1),     KK_F_DBL("whole", 9.0),     KK_F_DBL("big", 1.234567e20),
        KK_F_DBL("tiny", 1e-7), KK_F_DBL("third", 1.0 / 3), KK_F_BOOL("t", 7),
        KK_F_BOOL("f", 0),      KK_F_DBL("nan", NAN),       KK_F_DBL("ninf", -INFINITY),
    };
    assert_string_equal(log_one(KK_LOG_DEBUG, "app", "types", all, N_OF(all)),
                        "DEBUG app: types s=plain i=-42 u=18446744073709551615 d=0.1 whole=9 "
                        "big=1.23457e+20 tiny=1e-07 third=0.333333 t=true f=false nan=nan "
                        "ninf=-inf");

    /* Every level's name, upper-case. */
    static const char *upper[] = {
        "", "ERROR app: m", "WARN app: m", "INFO app: m", "DEBUG app: m", "TRACE app: m"};
    for (int lv = KK_LOG_ERROR; lv <= KK_LOG_TRACE; lv++)
        assert_string_equal(log_one((kk_log_level)lv, "app", "m", NULL, 0), upper[lv]);

    /* No message, no logger, no timestamp. */
    const kk_log_field one[] = {KK_F_INT("k", 1)};
    assert_string_equal(log_one(KK_LOG_INFO, "app", "", one, 1), "INFO app: k=1");
    assert_string_equal(log_one(KK_LOG_INFO, NULL, NULL, one, 1), "INFO: k=1");

    /* A locale with a decimal comma must not leak into the line (checked only
     * where such a locale is installed). */
    const char *locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"};
    for (size_t i = 0; i < N_OF(locales); i++) {
        if (!setlocale(LC_NUMERIC, locales[i])) continue;
        const kk_log_field dec[] = {KK_F_DBL("x", 9.5), KK_F_DBL("y", 0.1)};
        char text[128];
        snprintf(text, sizeof text, "%.100s", log_one(KK_LOG_INFO, "app", "m", dec, 2));
        kk_log_set_format(KK_LOG_FORMAT_JSON);
        cJSON *root = cJSON_Parse(log_one(KK_LOG_INFO, "app", "m", dec, 2));
        kk_log_set_format(KK_LOG_FORMAT_TEXT);
        setlocale(LC_NUMERIC, "C");
        assert_string_equal(text, "INFO app: m x=9.5 y=0.1");
        assert_non_null(root);
        assert_true(json_num(root, "x") == 9.5 && json_num(root, "y") == 0.1);
        cJSON_Delete(root);
        break;
    }
}

static void text_quoting_and_escaping(void **state) {
    (void)state;
    kk_assert_ok(kk_log_set_level(NULL, KK_LOG_INFO));
    const kk_log_field f[] = {
        KK_F_STR("e", ""),
        KK_F_STR("s", "a b"),
        KK_F_STR("q", "say \"hi\""),
        KK_F_STR("eq", "a=b"),
        KK_F_STR("path", "C:\\dir"),  /* a backslash alone needs no quotes */
        KK_F_STR("pq", "C:\\my dir"), /* but is escaped inside them */
        KK_F_STR("nl", "a\nb"),
        KK_F_STR("tab", "a\tb"),
        KK_F_STR("cr", "a\rb"),
        KK_F_STR("ctl", "a\x01"
                        "b"),
        KK_F_STR("u", "h\xc3\xa9llo"), /* UTF-8 passes through unquoted */
        KK_F_STR("bad", "\xff"),       /* invalid UTF-8 is escaped */
        KK_F_STR("none", NULL),
        KK_F_INT("bad key=", 1), /* keys cannot break key=value */
    };
    const char *line = log_one(KK_LOG_INFO, "app", "two\nlines", f, N_OF(f));
    assert_string_equal(line,
                        "INFO app: two\\nlines e=\"\" s=\"a b\" q=\"say \\\"hi\\\"\" eq=\"a=b\" "
                        "path=C:\\dir pq=\"C:\\\\my dir\" nl=\"a\\nb\" tab=\"a\\tb\" cr=\"a\\rb\" "
                        "ctl=\"a\\x01b\" u=h\xc3\xa9llo bad=\"\\xff\" none=(null) bad_key_=1");
    assert_null(strchr(line, '\n'));
}

static void json_lines_parse_back_with_cjson(void **state) {
    (void)state;
    kk_log_set_format(KK_LOG_FORMAT_JSON);
    assert_int_equal(kk_log_get_format(), KK_LOG_FORMAT_JSON);
    kk_assert_ok(kk_log_set_level(NULL, KK_LOG_INFO));

    const char *nasty = "q\"b\\s/\n\r\t\b\f\x01\x1f\x7f caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80";
    const kk_log_field f[] = {
        KK_F_STR("device", "NVIDIA H200"),
        KK_F_STR("cc", "9.0"),
        KK_F_INT("sms", 132),
        KK_F_INT("neg", -42),
        KK_F_UINT("u", 1ULL << 60),
        KK_F_DBL("d", 0.1),
        KK_F_DBL("third", 1.0 / 3),
        KK_F_DBL("big", 6.02214076e23),
        KK_F_BOOL("yes", 1),
        KK_F_BOOL("no", 0),
        KK_F_STR("nasty", nasty),
        KK_F_STR("bad", "a\xff\xc3(b\xed\xa0\x80"),
        KK_F_STR("none", NULL),
        KK_F_DBL("nan", NAN),
        KK_F_DBL("inf", INFINITY),
    };
    time_t before = time(NULL);
    const char *line =
        log_one(KK_LOG_INFO, "kernelkit.cuda.device", "backend initialized", f, N_OF(f));
    time_t after = time(NULL);

    /* Fixed members first, ts with milliseconds, no raw control characters. */
    assert_memory_equal(line, "{\"ts\":", 6);
    const char *dot = strchr(line, '.');
    assert_non_null(dot);
    assert_true(dot[1] >= '0' && dot[1] <= '9' && dot[3] >= '0' && dot[3] <= '9' && dot[4] == ',');
    kk_assert_contains(line, ",\"level\":\"info\",\"logger\":\"kernelkit.cuda.device\","
                             "\"msg\":\"backend initialized\",\"device\":");
    for (const unsigned char *p = (const unsigned char *)line; *p; p++) assert_true(*p >= 0x20);
    kk_assert_contains(line, "\\u0001");
    kk_assert_contains(line, "caf\xc3\xa9"); /* non-ASCII passes through */

    cJSON *root = parse_json_line(line);
    double ts = json_num(root, "ts");
    assert_true(ts >= (double)before - 1 && ts <= (double)after + 1);
    assert_string_equal(json_str(root, "level"), "info");
    assert_string_equal(json_str(root, "logger"), "kernelkit.cuda.device");
    assert_string_equal(json_str(root, "msg"), "backend initialized");
    assert_string_equal(json_str(root, "device"), "NVIDIA H200");
    assert_string_equal(json_str(root, "cc"), "9.0");
    assert_true(json_num(root, "sms") == 132);
    assert_true(json_num(root, "neg") == -42);
    assert_true(json_num(root, "u") == (double)(1ULL << 60));
    assert_true(json_num(root, "d") == 0.1); /* exact: shortest round-trip digits */
    assert_true(json_num(root, "third") == 1.0 / 3);
    assert_true(json_num(root, "big") == 6.02214076e23);
    kk_assert_contains(line, "\"d\":0.1,");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "yes")));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "no")));
    assert_string_equal(json_str(root, "nasty"), nasty);
    /* Invalid UTF-8 (stray byte, cut sequence, surrogate) becomes U+FFFD. */
    assert_string_equal(json_str(root, "bad"),
                        "a\xef\xbf\xbd\xef\xbf\xbd(b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "none")));
    assert_string_equal(json_str(root, "nan"), "nan");
    assert_string_equal(json_str(root, "inf"), "inf");
    assert_null(cJSON_GetObjectItemCaseSensitive(root, "truncated"));
    cJSON_Delete(root);

    kk_log_set_format(KK_LOG_FORMAT_TEXT);
    assert_string_equal(log_one(KK_LOG_WARN, "app", "back", NULL, 0), "WARN app: back");
}

static int g_evaluations;
static int count_evaluation(void) { return ++g_evaluations; }

static void level_filtering(void **state) {
    (void)state;
    assert_int_equal(kk_log_get_level("app"), KK_LOG_WARN); /* the default */
    assert_true(kk_log_enabled("app", KK_LOG_ERROR));
    assert_true(kk_log_enabled("app", KK_LOG_WARN));
    assert_false(kk_log_enabled("app", KK_LOG_INFO));
    assert_false(kk_log_enabled("app", KK_LOG_TRACE));
    assert_false(kk_log_enabled("app", KK_LOG_OFF));
    assert_false(kk_log_enabled("app", (kk_log_level)9));
    assert_false(kk_log_enabled("app", (kk_log_level)-1));

    kk_log_write(KK_LOG_INFO, "app", "dropped", NULL, 0);
    assert_int_equal(g_cap.count, 0);
    log_one(KK_LOG_WARN, "app", "kept", NULL, 0);

    kk_assert_ok(kk_log_set_level("", KK_LOG_ERROR));
    kk_log_write(KK_LOG_WARN, "app", "dropped", NULL, 0);
    assert_int_equal(g_cap.count, 1);
    log_one(KK_LOG_ERROR, "app", "kept", NULL, 0);

    kk_assert_ok(kk_log_set_level(NULL, KK_LOG_OFF));
    assert_int_equal(kk_log_get_level("app"), KK_LOG_OFF);
    kk_log_write(KK_LOG_ERROR, "app", "dropped", NULL, 0);
    assert_int_equal(g_cap.count, 2);

    /* KK_LOG builds its fields only when the record is enabled. */
    kk_assert_ok(kk_log_set_level(NULL, KK_LOG_WARN));
    g_evaluations = 0;
    KK_LOG(KK_LOG_DEBUG, "app", "hidden", KK_F_INT("n", count_evaluation()));
    assert_int_equal(g_evaluations, 0);
    assert_int_equal(g_cap.count, 2);
    kk_assert_ok(kk_log_set_level(NULL, KK_LOG_TRACE));
    KK_LOG(KK_LOG_DEBUG, "app", "shown", KK_F_INT("n", count_evaluation()));
    assert_int_equal(g_evaluations, 1);
    assert_string_equal(g_cap.last, "DEBUG app: shown n=1");
    KK_LOG0(KK_LOG_TRACE, "app", "bare");
    assert_string_equal(g_cap.last, "TRACE app: bare");
    /* A record of level "off" is never written, even at trace. */
    kk_log_write(KK_LOG_OFF, "app", "never", NULL, 0);
    assert_int_equal(g_cap.count, 4);
}

static void per_logger_prefix_matching(void **state) {
    (void)state;
    kk_assert_ok(kk_log_set_level("kernelkit.cuda", KK_LOG_TRACE));
    assert_int_equal(kk_log_get_level("kernelkit.cuda"), KK_LOG_TRACE);
    assert_int_equal(kk_log_get_level("kernelkit.cuda.memory"), KK_LOG_TRACE);
    assert_int_equal(kk_log_get_level("kernelkit.cudax"), KK_LOG_WARN);
    assert_int_equal(kk_log_get_level("kernelkit.cud"), KK_LOG_WARN);
    assert_int_equal(kk_log_get_level("kernelkit"), KK_LOG_WARN);
    assert_int_equal(kk_log_get_level("Kernelkit.cuda"), KK_LOG_WARN); /* case matters */
    assert_int_equal(kk_log_get_level(NULL), KK_LOG_WARN);
    assert_true(kk_log_enabled("kernelkit.cuda.memory", KK_LOG_TRACE));
    assert_false(kk_log_enabled("kernelkit.cudax", KK_LOG_INFO));

    /* Longest prefix wins, whatever the order the prefixes were set in. */
    for (int order = 0; order < 2; order++) {
        kk_log_reset();
        kk_log_set_sink(capture_sink, &g_cap);
        const char *prefixes[] = {"kernelkit", "kernelkit.cuda", "kernelkit.cuda.memory"};
        const kk_log_level levels[] = {KK_LOG_ERROR, KK_LOG_DEBUG, KK_LOG_OFF};
        for (int k = 0; k < 3; k++) {
            int i = order ? 2 - k : k;
            kk_assert_ok(kk_log_set_level(prefixes[i], levels[i]));
        }
        assert_int_equal(kk_log_get_level("kernelkit"), KK_LOG_ERROR);
        assert_int_equal(kk_log_get_level("kernelkit.cpu"), KK_LOG_ERROR);
        assert_int_equal(kk_log_get_level("kernelkit.cudax"), KK_LOG_ERROR);
        assert_int_equal(kk_log_get_level("kernelkit.cuda.device"), KK_LOG_DEBUG);
        assert_int_equal(kk_log_get_level("kernelkit.cuda.memory"), KK_LOG_OFF);
        assert_int_equal(kk_log_get_level("kernelkit.cuda.memory.pool"), KK_LOG_OFF);
        assert_int_equal(kk_log_get_level("kernelkitx"), KK_LOG_WARN);
        assert_int_equal(kk_log_get_level("app"), KK_LOG_WARN);
    }
    int before = g_cap.count;
    log_one(KK_LOG_DEBUG, "kernelkit.cuda.device", "shown", NULL, 0);
    kk_log_write(KK_LOG_ERROR, "kernelkit.cuda.memory", "silenced", NULL, 0);
    kk_log_write(KK_LOG_WARN, "kernelkit.cpu", "below error", NULL, 0);
    assert_int_equal(g_cap.count, before + 1);

    /* Setting a prefix again replaces its level. */
    kk_assert_ok(kk_log_set_level("kernelkit.cuda", KK_LOG_INFO));
    assert_int_equal(kk_log_get_level("kernelkit.cuda.device"), KK_LOG_INFO);
}

static void set_level_rejects_bad_input_and_has_a_fixed_capacity(void **state) {
    (void)state;
    char long_name[200];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    const char *bad[] = {"kernel kit", "a..b", ".a", "a.", "a=b", "a*", "caf\xc3\xa9", long_name};
    for (size_t i = 0; i < N_OF(bad); i++) {
        kk_assert_status(kk_log_set_level(bad[i], KK_LOG_TRACE), KK_ERR_INVALID_ARGUMENT);
        assert_string_equal(kk_last_error()->argument, "logger_prefix");
        kk_assert_contains(kk_last_error()->expected, "logger name");
        assert_int_equal(kk_log_get_level(bad[i]), KK_LOG_WARN);
    }
    long_name[127] = '\0'; /* 127 bytes is the longest accepted */
    kk_assert_ok(kk_log_set_level(long_name, KK_LOG_INFO));
    assert_int_equal(kk_log_get_level(long_name), KK_LOG_INFO);
    kk_assert_ok(kk_log_set_level("my-app.sub_system.v2", KK_LOG_INFO));

    kk_assert_status(kk_log_set_level("app", (kk_log_level)6), KK_ERR_INVALID_ARGUMENT);
    kk_assert_status(kk_log_set_level(NULL, (kk_log_level)-1), KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->argument, "level");
    assert_int_equal(kk_log_get_level("app"), KK_LOG_WARN);

    /* 64 prefixes fit; the 65th is refused, an existing one can still change. */
    kk_log_reset();
    kk_log_set_sink(capture_sink, &g_cap);
    char name[32];
    for (int i = 0; i < 64; i++) {
        snprintf(name, sizeof name, "app.p%d", i);
        kk_assert_ok(kk_log_set_level(name, KK_LOG_DEBUG));
    }
    kk_assert_status(kk_log_set_level("app.one_more", KK_LOG_DEBUG), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "64");
    assert_int_equal(kk_log_get_level("app.one_more"), KK_LOG_WARN);
    kk_assert_ok(kk_log_set_level("app.p5", KK_LOG_TRACE));
    assert_int_equal(kk_log_get_level("app.p5"), KK_LOG_TRACE);
    kk_assert_ok(kk_log_set_level(NULL, KK_LOG_INFO)); /* the default needs no slot */

    /* A spec that needs a new slot changes nothing at all. */
    kk_assert_status(kk_log_configure("error,app.p1=trace,app.new=info"), KK_ERR_INVALID_ARGUMENT);
    kk_assert_contains(kk_last_error_message(), "\"app.new\"");
    assert_string_equal(kk_last_error()->value, "app.new");
    assert_int_equal(kk_log_get_level("app"), KK_LOG_INFO);
    assert_int_equal(kk_log_get_level("app.p1"), KK_LOG_DEBUG);

    /* With one slot left, the second new prefix is the one named. */
    kk_log_reset();
    kk_log_set_sink(capture_sink, &g_cap);
    for (int i = 0; i < 63; i++) {
        snprintf(name, sizeof name, "app.p%d", i);
        kk_assert_ok(kk_log_set_level(name, KK_LOG_DEBUG));
    }
    kk_assert_status(kk_log_configure("app.a=info,app.p3=info,app.b=info"),
                     KK_ERR_INVALID_ARGUMENT);
    assert_string_equal(kk_last_error()->value, "app.b");
    assert_int_equal(kk_log_get_level("app.a"), KK_LOG_WARN);
    kk_assert_ok(kk_log_configure("app.a=info,app.p3=info"));
    assert_int_equal(kk_log_get_level("app.a"), KK_LOG_INFO);

    kk_log_reset(); /* empties the table */
    kk_assert_ok(kk_log_set_level("app.new", KK_LOG_INFO));
    assert_int_equal(kk_log_get_level("app.p1"), KK_LOG_WARN);
}

static void configure_applies_good_specs(void **state) {
    (void)state;
    kk_assert_ok(kk_log_configure("info"));
    assert_int_equal(kk_log_get_level("app"), KK_LOG_INFO);

    kk_assert_ok(kk_log_configure(" warn , kernelkit.cuda = trace,kernelkit.cpu=OFF,"));
    assert_int_equal(kk_log_get_level("app"), KK_LOG_WARN);
    assert_int_equal(kk_log_get_level("kernelkit.cuda.memory"), KK_LOG_TRACE);
    assert_int_equal(kk_log_get_level("kernelkit.cpu"), KK_LOG_OFF);

    /* Applied on top of what is set; a repeated prefix: the last one wins. */
    kk_assert_ok(kk_log_configure("kernelkit.config=info,kernelkit.config=Error"));
    assert_int_equal(kk_log_get_level("kernelkit.config"), KK_LOG_ERROR);
    assert_int_equal(kk_log_get_level("kernelkit.cuda"), KK_LOG_TRACE);
    assert_int_equal(kk_log_get_level("app"), KK_LOG_WARN);

    kk_assert_ok(kk_log_configure("")); /* nothing to do */
    assert_int_equal(kk_log_get_level("kernelkit.cpu"), KK_LOG_OFF);
}

typedef struct bad_spec {
    const char *spec;
    const char *token; /* the bad part, as the error names it */
    int is_level;      /* the error then lists the accepted levels */
} bad_spec;

static void configure_rejects_bad_specs_and_changes_nothing(void **state) {
    (void)state;
    kk_assert_ok(kk_log_configure("info,kernelkit.cuda=debug"));
    const bad_spec bad[] = {
        {"loud", "loud", 1},
        {"warn,kernelkit.cuda=loud", "loud", 1},
        {"trace,kernelkit.cuda=trace,kernelkit.cpu=verbose", "verbose", 1},
        {"kernelkit.cuda=trace=debug", "trace=debug", 1},
        {"kernelkit.cpu=", "", 1},
        {"kernel kit=info", "kernel kit", 0},
        {"=info", "", 0},
        {"error,a..b=info", "a..b", 0},
        {"kernelkit.cuda.=info", "kernelkit.cuda.", 0},
    };
    char quoted[160];
    for (size_t i = 0; i < N_OF(bad); i++) {
        kk_clear_error();
        kk_assert_status(kk_log_configure(bad[i].spec), KK_ERR_INVALID_ARGUMENT);
        const kk_error_info *e = kk_last_error();
        assert_string_equal(e->function, "kk_log_configure");
        assert_string_equal(e->argument, "spec");
        assert_string_equal(e->value, bad[i].token);
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[i].token);
        kk_assert_contains(e->message, quoted);
        if (bad[i].is_level) kk_assert_contains(e->message, LEVELS_TEXT);
        /* nothing changed, not even the parts before the bad one */
        assert_int_equal(kk_log_get_level("app"), KK_LOG_INFO);
        assert_int_equal(kk_log_get_level("kernelkit.cuda"), KK_LOG_DEBUG);
        assert_int_equal(kk_log_get_level("kernelkit.cpu"), KK_LOG_INFO);
    }
    kk_assert_status(kk_log_configure(NULL), KK_ERR_INVALID_ARGUMENT);
}

static void kk_log_env_is_read_by_reset(void **state) {
    (void)state;
    setenv("KK_LOG", "debug", 1);
    kk_log_reset();
    assert_int_equal(kk_log_get_level("anything"), KK_LOG_DEBUG);
    assert_int_equal(kk_log_get_format(), KK_LOG_FORMAT_TEXT);

    setenv("KK_LOG", "kernelkit.cuda=trace", 1);
    kk_log_reset();
    assert_int_equal(kk_log_get_level("app"), KK_LOG_WARN);
    assert_int_equal(kk_log_get_level("kernelkit.cuda.memory"), KK_LOG_TRACE);
    assert_int_equal(kk_log_get_level("kernelkit.cudax"), KK_LOG_WARN);

    setenv("KK_LOG", "warn,kernelkit.cuda=trace,kernelkit.cpu=off", 1);
    kk_log_reset();
    assert_int_equal(kk_log_get_level("kernelkit"), KK_LOG_WARN);
    assert_int_equal(kk_log_get_level("kernelkit.cuda.device"), KK_LOG_TRACE);
    assert_int_equal(kk_log_get_level("kernelkit.cpu"), KK_LOG_OFF);
    assert_false(kk_log_enabled("kernelkit.cpu", KK_LOG_ERROR));
    assert_true(kk_log_enabled("kernelkit.cuda", KK_LOG_TRACE));

    /* Reset drops what was set in code, then applies the environment again. */
    kk_assert_ok(kk_log_set_level("kernelkit.cpu", KK_LOG_INFO));
    kk_assert_ok(kk_log_set_level("app", KK_LOG_ERROR));
    kk_log_set_format(KK_LOG_FORMAT_JSON);
    kk_log_reset();
    assert_int_equal(kk_log_get_level("kernelkit.cpu"), KK_LOG_OFF);
    assert_int_equal(kk_log_get_level("app"), KK_LOG_WARN);
    assert_int_equal(kk_log_get_format(), KK_LOG_FORMAT_TEXT);

    unsetenv("KK_LOG");
    kk_log_reset();
    assert_int_equal(kk_log_get_level("kernelkit.cuda"), KK_LOG_WARN);
    assert_int_equal(kk_log_get_level("kernelkit.cpu"), KK_LOG_WARN);
}

static void bad_env_keeps_defaults_and_warns_once(void **state) {
    (void)state;
    char out[8192];
    stderr_capture cap;

    setenv("KK_LOG", "debug,kernelkit.cuda=loud", 1);
    kk__error(KK_ERR_IO, "kk_caller", "the caller's own error");
    stderr_begin(&cap);
    kk_log_reset();
    stderr_end(&cap, out, sizeof out);
    assert_int_equal(count_char(out, '\n'), 1); /* exactly one record */
    assert_memory_equal(out, "WARN kernelkit: ", 16);
    kk_assert_contains(out, "var=KK_LOG ");
    kk_assert_contains(out, "value=\"debug,kernelkit.cuda=loud\"");
    kk_assert_contains(out, "\\\"loud\\\"");
    kk_assert_contains(out, LEVELS_TEXT);
    assert_int_equal(kk_log_get_level("app"), KK_LOG_WARN); /* "debug" was not applied */
    assert_int_equal(kk_log_get_level("kernelkit.cuda"), KK_LOG_WARN);
    /* Reading the environment does not touch the caller's last error. */
    assert_int_equal(kk_last_error()->status, KK_ERR_IO);

    unsetenv("KK_LOG");
    setenv("KK_LOG_FORMAT", "xml", 1);
    stderr_begin(&cap);
    kk_log_reset();
    stderr_end(&cap, out, sizeof out);
    assert_int_equal(count_char(out, '\n'), 1);
    kk_assert_contains(out, "var=KK_LOG_FORMAT value=xml");
    kk_assert_contains(out, "expected text or json");
    assert_int_equal(kk_log_get_format(), KK_LOG_FORMAT_TEXT);

    /* Good values report nothing. */
    setenv("KK_LOG_FORMAT", "text", 1);
    setenv("KK_LOG", "info", 1);
    stderr_begin(&cap);
    kk_log_reset();
    stderr_end(&cap, out, sizeof out);
    assert_string_equal(out, "");
    assert_int_equal(kk_log_get_level("app"), KK_LOG_INFO);
}

static void kk_log_format_json_from_env(void **state) {
    (void)state;
    setenv("KK_LOG_FORMAT", "json", 1);
    setenv("KK_LOG", "info", 1);
    kk_log_reset();
    assert_int_equal(kk_log_get_format(), KK_LOG_FORMAT_JSON);
    kk_log_set_sink(capture_sink, &g_cap);
    const kk_log_field f[] = {KK_F_INT("n", 3)};
    cJSON *root = parse_json_line(log_one(KK_LOG_INFO, "kernelkit.harness", "ran", f, 1));
    assert_string_equal(json_str(root, "level"), "info");
    assert_string_equal(json_str(root, "logger"), "kernelkit.harness");
    assert_string_equal(json_str(root, "msg"), "ran");
    assert_true(json_num(root, "n") == 3);
    cJSON_Delete(root);

    setenv("KK_LOG_FORMAT", "JSON", 1);
    kk_log_reset();
    assert_int_equal(kk_log_get_format(), KK_LOG_FORMAT_JSON);
    setenv("KK_LOG_FORMAT", "text", 1);
    kk_log_reset();
    assert_int_equal(kk_log_get_format(), KK_LOG_FORMAT_TEXT);
}

static void sink_receives_records_and_null_restores_stderr(void **state) {
    (void)state;
    const kk_log_field f[] = {KK_F_INT("n", 7), KK_F_STR("s", "x")};
    struct timespec t0, t1;
    clock_gettime(CLOCK_REALTIME, &t0);
    log_one(KK_LOG_ERROR, "kernelkit.cpu", "failed", f, 2);
    clock_gettime(CLOCK_REALTIME, &t1);
    assert_int_equal(g_cap.level, KK_LOG_ERROR);
    assert_string_equal(g_cap.logger, "kernelkit.cpu");
    assert_string_equal(g_cap.message, "failed");
    assert_int_equal(g_cap.field_count, 2);
    assert_int_equal(g_cap.first_int, 7);
    assert_ptr_equal(g_cap.user_data, &g_cap);
    assert_true(g_cap.unix_time >= (double)t0.tv_sec && g_cap.unix_time <= (double)t1.tv_sec + 1);
    assert_string_equal(g_cap.last, "ERROR kernelkit.cpu: failed n=7 s=x");

    /* NULL fields with a count are taken as no fields. */
    log_one(KK_LOG_ERROR, "app", "m", NULL, 5);
    assert_int_equal(g_cap.field_count, 0);

    char out[1024];
    stderr_capture cap;
    int before = g_cap.count;
    kk_log_set_sink(NULL, NULL);
    stderr_begin(&cap);
    kk_log_write(KK_LOG_WARN, "app", "to stderr", f, 1);
    stderr_end(&cap, out, sizeof out);
    assert_string_equal(out, "WARN app: to stderr n=7\n");
    assert_int_equal(g_cap.count, before);

    kk_log_set_sink(capture_sink, &g_cap);
    log_one(KK_LOG_WARN, "app", "captured again", NULL, 0);
}

/* A sink that logs, asks kk_log_enabled, changes levels and replaces itself:
 * none of it may deadlock, and records logged from inside it are dropped. */
static int g_nested_enabled = -1;

static void meddling_sink(const kk_log_record *r, void *user_data) {
    capture_sink(r, user_data);
    g_nested_enabled = kk_log_enabled("app", KK_LOG_ERROR);
    kk_log_write(KK_LOG_ERROR, "app", "from inside the sink", NULL, 0);
    kk_log_set_level("app.quiet", KK_LOG_OFF);
    kk_log_set_sink(capture_sink, user_data);
}

static void a_sink_may_call_back_into_logging(void **state) {
    (void)state;
    kk_log_set_sink(meddling_sink, &g_cap);
    log_one(KK_LOG_ERROR, "app", "outer", NULL, 0);
    assert_string_equal(g_cap.last, "ERROR app: outer"); /* the inner record was dropped */
    assert_int_equal(g_nested_enabled, 0);
    assert_int_equal(kk_log_get_level("app.quiet"), KK_LOG_OFF);
    /* The sink replaced itself: the next record goes to capture_sink only. */
    g_nested_enabled = -1;
    log_one(KK_LOG_ERROR, "app", "second", NULL, 0);
    assert_int_equal(g_nested_enabled, -1);
}

/* Once kk_log_set_sink returns, the old sink is not running any more, so its
 * user data can be freed. */
static atomic_int g_slow_inside;

static void slow_sink(const kk_log_record *r, void *user_data) {
    (void)r;
    (void)user_data;
    atomic_store(&g_slow_inside, 1);
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
    atomic_store(&g_slow_inside, 0);
}

static void *log_once_thread(void *arg) {
    (void)arg;
    kk_log_write(KK_LOG_ERROR, "app", "slow", NULL, 0);
    return NULL;
}

static void replacing_the_sink_waits_for_the_old_one(void **state) {
    (void)state;
    kk_log_set_sink(slow_sink, NULL);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, log_once_thread, NULL), 0);
    while (!atomic_load(&g_slow_inside)) sched_yield();
    kk_log_set_sink(capture_sink, &g_cap);
    assert_int_equal(atomic_load(&g_slow_inside), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    log_one(KK_LOG_ERROR, "app", "new sink", NULL, 0);
}

/* ---- many threads ---- */

enum { N_THREADS = 8, PER_THREAD = 2000, PAYLOAD = 200 };

typedef struct concurrency {
    atomic_int inside; /* sink calls in progress */
    int overlaps;
    int count;
    int bad_lines;
    int last_seq[N_THREADS];
    atomic_int stop;
} concurrency;

static concurrency g_conc;

/* Each line must be whole: the right payload for its thread, in order. */
static void checking_sink(const kk_log_record *r, void *user_data) {
    concurrency *c = user_data;
    if (atomic_fetch_add(&c->inside, 1) != 0) c->overlaps++;
    int thread = -1, seq = -1, consumed = 0;
    char payload[PAYLOAD + 2] = "";
    int ok = sscanf(r->line, "INFO kernelkit.test: concurrent thread=%d seq=%d payload=%201s%n",
                    &thread, &seq, payload, &consumed) == 3 &&
             r->line[consumed] == '\0' && thread >= 0 && thread < N_THREADS &&
             strlen(payload) == PAYLOAD && seq == c->last_seq[thread] + 1;
    for (int i = 0; ok && i < PAYLOAD; i++) ok = payload[i] == 'a' + thread;
    if (ok)
        c->last_seq[thread] = seq;
    else
        c->bad_lines++;
    c->count++;
    atomic_fetch_sub(&c->inside, 1);
}

static void *logging_thread(void *arg) {
    int thread = (int)(intptr_t)arg;
    char payload[PAYLOAD + 1];
    memset(payload, 'a' + thread, PAYLOAD);
    payload[PAYLOAD] = '\0';
    for (int i = 0; i < PER_THREAD; i++)
        KK_LOG(KK_LOG_INFO, "kernelkit.test", "concurrent", KK_F_INT("thread", thread),
               KK_F_INT("seq", i), KK_F_STR("payload", payload));
    return NULL;
}

/* Reconfigures an unrelated logger meanwhile, so kk_log_enabled takes its
 * locked path and the level table changes under the writers. */
static void *configuring_thread(void *arg) {
    (void)arg;
    for (int i = 0; !atomic_load(&g_conc.stop); i++)
        kk_log_configure(i % 2 ? "kernelkit.other=debug" : "kernelkit.other=error");
    return NULL;
}

static void threads_log_concurrently_without_tearing(void **state) {
    (void)state;
    memset(&g_conc, 0, sizeof g_conc);
    for (int t = 0; t < N_THREADS; t++) g_conc.last_seq[t] = -1;
    kk_assert_ok(kk_log_configure("info,kernelkit.test=info"));
    kk_log_set_sink(checking_sink, &g_conc);

    pthread_t threads[N_THREADS], configurer;
    assert_int_equal(pthread_create(&configurer, NULL, configuring_thread, NULL), 0);
    for (int t = 0; t < N_THREADS; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, logging_thread, (void *)(intptr_t)t), 0);
    for (int t = 0; t < N_THREADS; t++) assert_int_equal(pthread_join(threads[t], NULL), 0);
    atomic_store(&g_conc.stop, 1);
    assert_int_equal(pthread_join(configurer, NULL), 0);

    assert_int_equal(g_conc.count, N_THREADS * PER_THREAD);
    assert_int_equal(g_conc.bad_lines, 0);
    assert_int_equal(g_conc.overlaps, 0);
    for (int t = 0; t < N_THREADS; t++) assert_int_equal(g_conc.last_seq[t], PER_THREAD - 1);
}

/* ---- truncation ---- */

static char *filled(size_t n, const char *unit) {
    size_t u = strlen(unit);
    char *s = malloc(n * u + 1);
    assert_non_null(s);
    for (size_t i = 0; i < n; i++) memcpy(s + i * u, unit, u);
    s[n * u] = '\0';
    return s;
}

static void huge_records_are_truncated_safely(void **state) {
    (void)state;
    char *huge = filled(100000, "x");
    const kk_log_field after[] = {KK_F_INT("after", 1)};

    /* Text: the message is cut, later fields are dropped, the cut is marked. */
    const char *line = log_one(KK_LOG_WARN, "app", huge, after, 1);
    size_t len = strlen(line);
    assert_true(len < LINE_CAP);
    assert_true(len > LINE_CAP - 64); /* cut near the limit, not early */
    assert_memory_equal(line, "WARN app: xxxx", 14);
    assert_string_equal(line + len - 15, " truncated=true");
    assert_null(strstr(line, "after="));

    /* A cut quoted value is closed before the marker. */
    huge[0] = ' ';
    const kk_log_field quoted[] = {KK_F_STR("s", huge)};
    line = log_one(KK_LOG_WARN, "app", "m", quoted, 1);
    len = strlen(line);
    assert_true(len < LINE_CAP);
    assert_string_equal(line + len - 16, "\" truncated=true");
    assert_int_equal(count_char(line, '"'), 2);

    /* JSON: still one valid object, with the message cut and "truncated":true. */
    kk_log_set_format(KK_LOG_FORMAT_JSON);
    huge[0] = 'x';
    line = log_one(KK_LOG_WARN, "app", huge, after, 1);
    assert_true(strlen(line) < LINE_CAP);
    cJSON *root = parse_json_line(line);
    const char *msg = json_str(root, "msg");
    assert_true(strlen(msg) > LINE_CAP - 128);
    assert_int_equal(strspn(msg, "x"), strlen(msg));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "truncated")));
    assert_null(cJSON_GetObjectItemCaseSensitive(root, "after"));
    cJSON_Delete(root);

    /* Never cut inside a UTF-8 character or an escape sequence. */
    const char *units[] = {"\xc3\xa9", "\n", "\x01", "\xe6\x97\xa5"};
    for (size_t u = 0; u < N_OF(units); u++) {
        char *s = filled(5000, units[u]);
        root = parse_json_line(log_one(KK_LOG_WARN, "app", s, NULL, 0));
        msg = json_str(root, "msg");
        size_t ul = strlen(units[u]), ml = strlen(msg);
        assert_true(ml > 0 && ml % ul == 0);
        assert_memory_equal(msg, s, ml);
        cJSON_Delete(root);
        free(s);
    }

    /* A key too long to fit drops the whole member. */
    const kk_log_field big_key[] = {KK_F_INT("small", 1), KK_F_INT(huge, 2)};
    root = parse_json_line(log_one(KK_LOG_WARN, "app", "m", big_key, 2));
    assert_true(json_num(root, "small") == 1);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "truncated")));
    assert_int_equal(cJSON_GetArraySize(root), 6); /* ts level logger msg small truncated */
    cJSON_Delete(root);

    /* The same in text: the key is dropped, not cut. */
    kk_log_set_format(KK_LOG_FORMAT_TEXT);
    assert_string_equal(log_one(KK_LOG_WARN, "app", "m", big_key, 2),
                        "WARN app: m small=1 truncated=true");
    free(huge);
}

/* Cut at every point near the limit, for each kind of value: the JSON line
 * always parses, and a text field never ends as a bare "key=". */
static void every_cut_point_gives_a_valid_line(void **state) {
    (void)state;
    char *msg = filled(LINE_CAP, "m");
    const kk_log_field kinds[][2] = {
        {KK_F_INT("k", LLONG_MIN), KK_F_INT("z", 1)},
        {KK_F_UINT("k", UINT64_MAX), KK_F_INT("z", 1)},
        {KK_F_DBL("k", -1.2345678901234567e-300), KK_F_INT("z", 1)},
        {KK_F_BOOL("k", 0), KK_F_INT("z", 1)},
        {KK_F_STR("k", NULL), KK_F_INT("z", 1)},
        {KK_F_STR("k", "with \"quotes\" and \\ and \n"), KK_F_INT("z", 1)},
    };
    for (int format = 0; format < 2; format++) {
        kk_log_set_format((kk_log_format)format);
        for (size_t kind = 0; kind < N_OF(kinds); kind++) {
            for (size_t len = LINE_CAP - 140; len < LINE_CAP - 20; len++) {
                msg[len] = '\0';
                const char *line = log_one(KK_LOG_WARN, "app", msg, kinds[kind], 2);
                msg[len] = 'm';
                assert_true(strlen(line) < LINE_CAP);
                if (format == KK_LOG_FORMAT_JSON) {
                    cJSON_Delete(parse_json_line(line));
                } else {
                    assert_null(strstr(line, "k= "));
                    assert_null(strstr(line, "z= "));
                    size_t n = strlen(line);
                    assert_false(n > 0 && line[n - 1] == '=');
                }
            }
        }
    }
    free(msg);
}

/* ---- the first call in a fresh process ----
 * pthread_once can run only once per process, so these run this test binary
 * again with --child MODE and the environment under test. */

static int child_main(const char *mode) {
    if (strcmp(mode, "get-level") == 0) {
        printf("level=%d format=%d\n", (int)kk_log_get_level("kernelkit.cuda.memory"),
               (int)kk_log_get_format());
    } else if (strcmp(mode, "enabled") == 0) {
        int a = kk_log_enabled("kernelkit", KK_LOG_WARN), b = kk_log_enabled("app", KK_LOG_INFO);
        KK_LOG0(KK_LOG_WARN, "app", "after the first call");
        printf("enabled=%d,%d level=%d\n", a, b, (int)kk_log_get_level("kernelkit"));
    } else if (strcmp(mode, "reset") == 0) {
        kk_log_reset();
        printf("level=%d\n", (int)kk_log_get_level("kernelkit"));
    } else {
        return 2;
    }
    return 0;
}

static int count_of(const char *haystack, const char *needle) {
    int n = 0;
    for (const char *p = strstr(haystack, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void run_child(const char *env, const char *mode, char *out, size_t size) {
    char self[1024], cmd[2048];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0';
    snprintf(cmd, sizeof cmd, "env -u KK_LOG -u KK_LOG_FORMAT %s '%s' --child %s", env, self, mode);
    assert_int_equal(kk_test_run(cmd, out, size), 0);
}

static void environment_is_read_lazily_at_the_first_call(void **state) {
    (void)state;
    char out[4096];
    /* Read without any reset, by whichever call comes first. */
    run_child("KK_LOG=kernelkit.cuda=trace KK_LOG_FORMAT=json", "get-level", out, sizeof out);
    assert_string_equal(out, "level=5 format=1\n");

    /* A bad KK_LOG found by kk_log_enabled: defaults kept, reported once. */
    run_child("KK_LOG=warn,kernelkit=loud", "enabled", out, sizeof out);
    assert_int_equal(count_of(out, "WARN kernelkit: ignoring invalid environment variable"), 1);
    kk_assert_contains(out, "\\\"loud\\\"");
    kk_assert_contains(out, "WARN app: after the first call\n");
    kk_assert_contains(out, "enabled=1,0 level=2\n");

    /* kk_log_reset as the very first call reads the environment twice but
     * reports it once. */
    run_child("KK_LOG=loud", "reset", out, sizeof out);
    assert_int_equal(count_of(out, "ignoring invalid environment variable"), 1);
    kk_assert_contains(out, "level=2\n");
}

#define TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--child") == 0) return child_main(argv[2]);
    const struct CMUnitTest tests[] = {
        TEST(level_names_and_parsing),
        TEST(text_format_of_each_field_type),
        TEST(text_quoting_and_escaping),
        TEST(json_lines_parse_back_with_cjson),
        TEST(level_filtering),
        TEST(per_logger_prefix_matching),
        TEST(set_level_rejects_bad_input_and_has_a_fixed_capacity),
        TEST(configure_applies_good_specs),
        TEST(configure_rejects_bad_specs_and_changes_nothing),
        TEST(kk_log_env_is_read_by_reset),
        TEST(bad_env_keeps_defaults_and_warns_once),
        TEST(kk_log_format_json_from_env),
        TEST(sink_receives_records_and_null_restores_stderr),
        TEST(a_sink_may_call_back_into_logging),
        TEST(replacing_the_sink_waits_for_the_old_one),
        TEST(threads_log_concurrently_without_tearing),
        TEST(huge_records_are_truncated_safely),
        TEST(every_cut_point_gives_a_valid_line),
        cmocka_unit_test(environment_is_read_lazily_at_the_first_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
