/* Logging: levels per logger prefix, KK_LOG / KK_LOG_FORMAT, the sink, and
 * writing records (formatting a record into a line is log_format.c).
 * docs/logging.md. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/error.h"
#include "core/log_internal.h"

#include "core/log_format.h"

enum {
    MAX_PREFIXES = 64,  /* per-logger levels; fixed so nothing grows without bound */
    NAME_MAX_LEN = 127, /* bytes of a logger prefix */
    LINE_CAP = 4096     /* a line, NUL included; longer ones are truncated */
};

#define LEVEL_LIST "one of error, warn, info, debug, trace, off"
#define NAME_RULE                                                                                  \
    "a logger name: dot-separated parts of letters, digits, '_' or '-', at most 127 bytes"

/* ---- state ---- */

typedef struct prefix_level {
    char name[NAME_MAX_LEN + 1];
    size_t len;
    kk_log_level level;
} prefix_level;

/* Locking: g_levels_lock guards the level table; g_out_lock guards the sink
 * and the shared line buffer and serialises sink calls. The two are never
 * held together, so there is no lock order. kk_log_enabled usually takes no
 * lock (it reads the atomic summaries below). A sink runs with g_out_lock
 * held, so records logged from inside a sink are dropped. */
static pthread_rwlock_t g_levels_lock = PTHREAD_RWLOCK_INITIALIZER;
static prefix_level g_prefixes[MAX_PREFIXES];      /* guarded by g_levels_lock */
static size_t g_prefix_count;                      /* guarded by g_levels_lock */
static kk_log_level g_default_level = KK_LOG_WARN; /* guarded by g_levels_lock */

/* Summaries for kk_log_enabled, published under the write lock. A reader
 * racing a reconfiguration may see the old or the new answer, nothing else. */
static atomic_int g_max_level = KK_LOG_WARN; /* the highest level set anywhere */
static atomic_int g_min_level = KK_LOG_WARN; /* the lowest */
static atomic_size_t g_has_prefixes;         /* non-zero: per-logger levels exist */
static atomic_int g_format = KK_LOG_FORMAT_TEXT;

static void stderr_sink(const kk_log_record *record, void *user_data);

static pthread_mutex_t g_out_lock = PTHREAD_MUTEX_INITIALIZER;
static kk_log_sink_fn g_sink = stderr_sink; /* guarded by g_out_lock */
static void *g_sink_data;                   /* guarded by g_out_lock */
static char g_line[LINE_CAP];               /* guarded by g_out_lock */
static _Thread_local int t_in_sink;         /* this thread holds g_out_lock */

/* ---- levels and names ---- */

const char *kk_log_level_name(kk_log_level level) {
    switch (level) {
    case KK_LOG_OFF: return "off";
    case KK_LOG_ERROR: return "error";
    case KK_LOG_WARN: return "warn";
    case KK_LOG_INFO: return "info";
    case KK_LOG_DEBUG: return "debug";
    case KK_LOG_TRACE: return "trace";
    default: return "?";
    }
}

static int level_is_valid(kk_log_level level) {
    return (int)level >= KK_LOG_OFF && (int)level <= KK_LOG_TRACE;
}

/* Case-insensitive, on a (pointer, length) slice of a spec. */
static int parse_level_n(const char *s, size_t n, kk_log_level *out) {
    static const struct {
        const char *name;
        kk_log_level level;
    } k_names[] = {{"off", KK_LOG_OFF},      {"error", KK_LOG_ERROR}, {"warn", KK_LOG_WARN},
                   {"warning", KK_LOG_WARN}, {"info", KK_LOG_INFO},   {"debug", KK_LOG_DEBUG},
                   {"trace", KK_LOG_TRACE}};
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++) {
        if (strlen(k_names[i].name) == n && strncasecmp(s, k_names[i].name, n) == 0) {
            *out = k_names[i].level;
            return 1;
        }
    }
    return 0;
}

kk_status kk_log_level_parse(const char *text, kk_log_level *out) {
    kk_status st = KK__CHECK_NOT_NULL(text);
    if (st == KK_OK) st = KK__CHECK_NOT_NULL(out);
    if (st != KK_OK) return st;
    if (!parse_level_n(text, strlen(text), out))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "text", LEVEL_LIST, "\"%.100s\"",
                             text);
    return KK_OK;
}

static int is_name_char(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == '-';
}

/* "kernelkit.cuda": non-empty parts joined by single dots. */
static int name_is_valid(const char *s, size_t n) {
    size_t part = 0;
    if (n == 0 || n > NAME_MAX_LEN) return 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.') {
            if (part == 0) return 0;
            part = 0;
        } else if (is_name_char(s[i])) {
            part++;
        } else {
            return 0;
        }
    }
    return part > 0;
}

/* ---- the level table (callers hold g_levels_lock) ---- */

static int find_prefix_locked(const char *name, size_t len) {
    for (size_t i = 0; i < g_prefix_count; i++)
        if (g_prefixes[i].len == len && memcmp(g_prefixes[i].name, name, len) == 0) return (int)i;
    return -1;
}

/* The caller has checked that a new entry fits. */
static void set_prefix_locked(const char *name, size_t len, kk_log_level level) {
    int i = find_prefix_locked(name, len);
    if (i < 0) {
        i = (int)g_prefix_count++;
        memcpy(g_prefixes[i].name, name, len);
        g_prefixes[i].name[len] = '\0';
        g_prefixes[i].len = len;
    }
    g_prefixes[i].level = level;
}

static void publish_summary_locked(void) {
    int max = (int)g_default_level, min = max;
    for (size_t i = 0; i < g_prefix_count; i++) {
        int lv = (int)g_prefixes[i].level;
        if (lv > max) max = lv;
        if (lv < min) min = lv;
    }
    atomic_store(&g_max_level, max);
    atomic_store(&g_min_level, min);
    atomic_store(&g_has_prefixes, g_prefix_count);
}

/* Longest prefix that matches on a dot boundary: "kernelkit.cuda" matches
 * kernelkit.cuda and kernelkit.cuda.memory, not kernelkit.cudax. */
static kk_log_level level_of_locked(const char *logger) {
    kk_log_level level = g_default_level;
    size_t best = 0;
    for (size_t i = 0; i < g_prefix_count; i++) {
        const prefix_level *p = &g_prefixes[i];
        if (p->len <= best || strncmp(logger, p->name, p->len) != 0) continue;
        char next = logger[p->len]; /* in bounds: the first len bytes matched */
        if (next == '\0' || next == '.') {
            best = p->len;
            level = p->level;
        }
    }
    return level;
}

static kk_log_level level_of(const char *logger) {
    pthread_rwlock_rdlock(&g_levels_lock);
    kk_log_level level = level_of_locked(logger ? logger : "");
    pthread_rwlock_unlock(&g_levels_lock);
    return level;
}

static void reset_levels(void) {
    pthread_rwlock_wrlock(&g_levels_lock);
    g_prefix_count = 0;
    g_default_level = KK_LOG_WARN;
    publish_summary_locked();
    pthread_rwlock_unlock(&g_levels_lock);
}

/* ---- specs: "warn,kernelkit.cuda=trace" ----
 * Parsed completely before anything is applied, so a bad spec changes
 * nothing. Parsing reports into a spec_error rather than the last error,
 * because KK_LOG is read lazily inside unrelated calls whose caller's last
 * error must not be clobbered. */

typedef struct spec_item {
    const char *name; /* points into the spec */
    size_t len;
    kk_log_level level;
} spec_item;

typedef struct parsed_spec {
    int has_default;
    kk_log_level default_level;
    size_t count;
    spec_item items[MAX_PREFIXES];
} parsed_spec;

typedef struct spec_error {
    char token[128];   /* the bad part */
    char problem[384]; /* a sentence naming it and what is accepted */
    const char *expected;
} spec_error;

static int spec_fail(spec_error *err, const char *expected, const char *token, size_t token_len,
                     const char *what, const char *item, size_t item_len) {
    int tl = token_len > 100 ? 100 : (int)token_len, il = item_len > 150 ? 150 : (int)item_len;
    snprintf(err->token, sizeof err->token, "%.*s", tl, token);
    if (token == item && token_len == item_len)
        snprintf(err->problem, sizeof err->problem, "bad %s \"%.*s\": expected %s", what, tl, token,
                 expected);
    else
        snprintf(err->problem, sizeof err->problem, "bad %s \"%.*s\" in \"%.*s\": expected %s",
                 what, tl, token, il, item, expected);
    err->expected = expected;
    return -1;
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

static void trim(const char **s, size_t *n) {
    while (*n > 0 && is_blank(**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && is_blank((*s)[*n - 1])) (*n)--;
}

#define TABLE_FULL "at most 64 logger prefixes in all (kk_log_reset empties the table)"

static int spec_full(spec_error *err, const char *name, size_t len) {
    int nl = len > 100 ? 100 : (int)len;
    snprintf(err->token, sizeof err->token, "%.*s", nl, name);
    snprintf(err->problem, sizeof err->problem,
             "too many logger prefixes: no room for \"%.*s\": expected " TABLE_FULL, nl, name);
    err->expected = TABLE_FULL;
    return -1;
}

static int add_item(parsed_spec *out, const char *name, size_t len, kk_log_level level,
                    spec_error *err) {
    for (size_t i = 0; i < out->count; i++) {
        if (out->items[i].len == len && memcmp(out->items[i].name, name, len) == 0) {
            out->items[i].level = level; /* repeated in one spec: the last one wins */
            return 0;
        }
    }
    if (out->count == MAX_PREFIXES) return spec_full(err, name, len);
    out->items[out->count++] = (spec_item){name, len, level};
    return 0;
}

/* One comma-separated item: "LEVEL" or "PREFIX=LEVEL". */
static int parse_item(const char *item, size_t n, parsed_spec *out, spec_error *err) {
    const char *eq = memchr(item, '=', n);
    if (!eq) {
        if (!parse_level_n(item, n, &out->default_level))
            return spec_fail(err, LEVEL_LIST, item, n, "level", item, n);
        out->has_default = 1;
        return 0;
    }
    const char *name = item, *level_text = eq + 1;
    size_t name_len = (size_t)(eq - item), level_len = n - name_len - 1;
    kk_log_level level;
    trim(&name, &name_len);
    trim(&level_text, &level_len);
    if (!name_is_valid(name, name_len))
        return spec_fail(err, NAME_RULE, name, name_len, "logger name", item, n);
    if (!parse_level_n(level_text, level_len, &level))
        return spec_fail(err, LEVEL_LIST, level_text, level_len, "level", item, n);
    return add_item(out, name, name_len, level, err);
}

static int parse_spec(const char *spec, parsed_spec *out, spec_error *err) {
    memset(out, 0, sizeof *out);
    const char *p = spec;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *item = p;
        trim(&item, &n);
        if (n > 0 && parse_item(item, n, out, err) != 0) return -1; /* empty items: skipped */
        if (!end) return 0;
        p = end + 1;
    }
}

/* Fails only when the new prefixes do not fit, and then changes nothing. */
static int apply_spec(const parsed_spec *spec, spec_error *err) {
    pthread_rwlock_wrlock(&g_levels_lock);
    size_t fresh = 0, room = MAX_PREFIXES - g_prefix_count;
    for (size_t i = 0; i < spec->count; i++) {
        const spec_item *item = &spec->items[i];
        if (find_prefix_locked(item->name, item->len) >= 0) continue;
        if (++fresh > room) {
            pthread_rwlock_unlock(&g_levels_lock);
            return spec_full(err, item->name, item->len); /* the first that does not fit */
        }
    }
    for (size_t i = 0; i < spec->count; i++)
        set_prefix_locked(spec->items[i].name, spec->items[i].len, spec->items[i].level);
    if (spec->has_default) g_default_level = spec->default_level;
    publish_summary_locked();
    pthread_rwlock_unlock(&g_levels_lock);
    return 0;
}

static int configure(const char *spec, spec_error *err) {
    parsed_spec parsed;
    if (parse_spec(spec, &parsed, err) != 0) return -1;
    return apply_spec(&parsed, err);
}

/* ---- the environment ----
 * Read once, lazily, by the first logging or configuration call; again by
 * kk_log_reset. A bad value keeps the defaults and is reported as one WARN
 * record per variable, written only after the configuration is complete (and,
 * for the first read, after pthread_once has returned: logging from inside
 * the once-routine would wait on itself). */

typedef struct env_problem {
    const char *var;
    char value[256];
    char problem[384];
} env_problem;

typedef struct env_problems {
    int count;
    env_problem item[2]; /* KK_LOG_FORMAT, KK_LOG */
} env_problems;

/* Where the first read stands. READY is checked on every call, so it is the
 * only value the fast path needs to see. */
enum { INIT_NOT_DONE = 0, INIT_REPORT_PENDING = 1, INIT_READY = 2 };

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static atomic_int g_init_state;
static env_problems g_first_problems; /* written once by read_env_once, then read-only */

static void note_problem(env_problems *p, const char *var, const char *value, const char *problem) {
    env_problem *e = &p->item[p->count++];
    e->var = var;
    snprintf(e->value, sizeof e->value, "%s", value);
    snprintf(e->problem, sizeof e->problem, "%s", problem);
}

static void read_env(env_problems *problems) {
    const char *format = getenv("KK_LOG_FORMAT");
    if (format && *format) {
        if (strcasecmp(format, "json") == 0)
            atomic_store(&g_format, KK_LOG_FORMAT_JSON);
        else if (strcasecmp(format, "text") == 0)
            atomic_store(&g_format, KK_LOG_FORMAT_TEXT);
        else
            note_problem(problems, "KK_LOG_FORMAT", format, "expected text or json");
    }
    const char *spec = getenv("KK_LOG");
    spec_error err;
    if (spec && *spec && configure(spec, &err) != 0)
        note_problem(problems, "KK_LOG", spec, err.problem);
}

static void report_problems(const env_problems *p) {
    for (int i = 0; i < p->count; i++)
        KK_LOG(KK_LOG_WARN, "kernelkit", "ignoring invalid environment variable, using defaults",
               KK_F_STR("var", p->item[i].var), KK_F_STR("value", p->item[i].value),
               KK_F_STR("problem", p->item[i].problem));
}

static void read_env_once(void) {
    read_env(&g_first_problems);
    atomic_store(&g_init_state, g_first_problems.count ? INIT_REPORT_PENDING : INIT_READY);
}

static void finish_init(void) {
    pthread_once(&g_once, read_env_once);
    /* The exchange lets exactly one caller report. */
    if (atomic_exchange(&g_init_state, INIT_READY) == INIT_REPORT_PENDING)
        report_problems(&g_first_problems);
}

/* One acquire load once initialised: this runs on every kk_log_enabled. */
static inline void ensure_init(void) {
    if (atomic_load_explicit(&g_init_state, memory_order_acquire) != INIT_READY) finish_init();
}

/* ---- public configuration ---- */

kk_status kk_log_configure(const char *spec) {
    ensure_init();
    kk_status st = KK__CHECK_NOT_NULL(spec);
    if (st != KK_OK) return st;
    spec_error err;
    if (configure(spec, &err) != 0)
        return kk__set_error(KK_ERR_INVALID_ARGUMENT, __func__, "spec", err.token, err.expected,
                             NULL, "%s", err.problem);
    return KK_OK;
}

kk_status kk_log_set_level(const char *logger_prefix, kk_log_level level) {
    ensure_init();
    if (!level_is_valid(level))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "level",
                             "KK_LOG_OFF .. KK_LOG_TRACE", "%d", (int)level);
    size_t len = logger_prefix ? strlen(logger_prefix) : 0;
    if (len > 0 && !name_is_valid(logger_prefix, len))
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "logger_prefix", NAME_RULE,
                             "\"%.100s\"", logger_prefix);
    pthread_rwlock_wrlock(&g_levels_lock);
    int full =
        len > 0 && find_prefix_locked(logger_prefix, len) < 0 && g_prefix_count == MAX_PREFIXES;
    if (!full) {
        if (len == 0)
            g_default_level = level;
        else
            set_prefix_locked(logger_prefix, len, level);
        publish_summary_locked();
    }
    pthread_rwlock_unlock(&g_levels_lock);
    if (full)
        return kk__arg_error(KK_ERR_INVALID_ARGUMENT, __func__, "logger_prefix",
                             "one of the prefixes already set: " TABLE_FULL, "\"%s\"",
                             logger_prefix);
    return KK_OK;
}

kk_log_level kk_log_get_level(const char *logger) {
    ensure_init();
    return level_of(logger);
}

/* Called for every KK_LOG in the library, so the common cases take no lock:
 * above the highest level set anywhere, at or below the lowest, or no
 * per-logger levels at all. */
int kk_log_enabled(const char *logger, kk_log_level level) {
    ensure_init();
    int lv = (int)level;
    if (lv < KK_LOG_ERROR || lv > atomic_load_explicit(&g_max_level, memory_order_relaxed))
        return 0;
    if (t_in_sink) return 0; /* kk_log_write would drop it */
    if (lv <= atomic_load_explicit(&g_min_level, memory_order_relaxed) ||
        atomic_load_explicit(&g_has_prefixes, memory_order_relaxed) == 0)
        return 1;
    return lv <= (int)level_of(logger);
}

void kk_log_set_format(kk_log_format format) {
    ensure_init();
    if (format == KK_LOG_FORMAT_TEXT || format == KK_LOG_FORMAT_JSON)
        atomic_store(&g_format, (int)format);
}

kk_log_format kk_log_get_format(void) {
    ensure_init();
    return (kk_log_format)atomic_load(&g_format);
}

/* ---- the sink ---- */

static void stderr_sink(const kk_log_record *record, void *user_data) {
    (void)user_data;
    fprintf(stderr, "%s\n", record->line); /* the only place the library prints */
}

static void replace_sink(kk_log_sink_fn sink, void *user_data) {
    /* Inside a sink this thread already holds g_out_lock: locking again would
     * deadlock, and the change is just as safe without it. */
    int locked = !t_in_sink;
    if (locked) pthread_mutex_lock(&g_out_lock);
    g_sink = sink ? sink : stderr_sink;
    g_sink_data = sink ? user_data : NULL;
    if (locked) pthread_mutex_unlock(&g_out_lock);
}

void kk_log_set_sink(kk_log_sink_fn sink, void *user_data) {
    ensure_init();
    replace_sink(sink, user_data);
}

void kk_log_reset(void) {
    pthread_once(&g_once, read_env_once);
    /* The environment is read again below and reported afresh: a report still
     * pending from the first read would be a duplicate. */
    atomic_store(&g_init_state, INIT_READY);
    reset_levels();
    atomic_store(&g_format, KK_LOG_FORMAT_TEXT);
    replace_sink(NULL, NULL);
    env_problems problems = {0};
    read_env(&problems);
    report_problems(&problems);
}

/* ---- writing ---- */

static double unix_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void kk_log_write(kk_log_level level, const char *logger, const char *message,
                  const kk_log_field *fields, size_t field_count) {
    if (!kk_log_enabled(logger, level)) return; /* also false inside a sink */
    kk_log_record record = {
        .level = level,
        .logger = logger ? logger : "",
        .message = message ? message : "",
        .fields = fields,
        .field_count = fields ? field_count : 0,
        .unix_time = unix_now(),
        .line = g_line,
    };
    /* A thread cancelled inside the sink (fprintf is a cancellation point)
     * would leave g_out_lock held forever. */
    int cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    pthread_mutex_lock(&g_out_lock);
    kk__log_format_line(&record, (kk_log_format)atomic_load(&g_format), g_line, sizeof g_line);
    t_in_sink = 1;
    g_sink(&record, g_sink_data);
    t_in_sink = 0;
    pthread_mutex_unlock(&g_out_lock);
    pthread_setcancelstate(cancel_state, NULL);
}
