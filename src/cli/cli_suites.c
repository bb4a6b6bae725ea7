/* Suites for the commands that take --suite (check, bench, selftest): a comma
 * list of names or paths, "all" for every suite the library finds. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* Append the suite's cases, each once: "smoke,all" lists smoke's cases once. */
static int append(const char *command, const kk_suite *s, kk_case **cases, int *count) {
    if (s->count == 0) return CLI_OK;
    kk_case *v = realloc(*cases, (size_t)(*count + s->count) * sizeof *v);
    if (!v) return cli_fail(command, "out of memory");
    *cases = v;
    const int before = *count;
    for (int i = 0; i < s->count; i++) {
        int seen = 0;
        for (int k = 0; k < before && !seen; k++) seen = !strcmp(v[k].name, s->cases[i].name);
        if (!seen) v[(*count)++] = s->cases[i];
    }
    return CLI_OK;
}

static int load_one(const char *command, const char *suite, uint64_t run_seed, kk_input_dist dist,
                    kk_case **cases, int *count) {
    kk_suite s;
    int rc = kk_suite_load(suite, run_seed, dist, &s) == KK_OK
                 ? append(command, &s, cases, count)
                 : cli_usage_error(command, "bad --suite: %s", kk_last_error_message());
    kk_suite_free(&s);
    return rc;
}

static int load_all(const char *command, uint64_t run_seed, kk_input_dist dist, kk_case **cases,
                    int *count) {
    char **names = NULL;
    int n = 0, rc = CLI_OK;
    if (kk_suite_names(&names, &n) != KK_OK) return cli_fail(command, "cannot list the suites");
    for (int i = 0; i < n && rc == CLI_OK; i++)
        rc = load_one(command, names[i], run_seed, dist, cases, count);
    kk_suite_names_free(names, n);
    return rc;
}

int cli_suite_cases(const char *command, const char *list, uint64_t run_seed, kk_input_dist dist,
                    kk_case **cases, int *count) {
    const size_t len = strlen(list);
    char *buf = malloc(len + 1);
    if (!buf) return cli_fail(command, "out of memory");
    memcpy(buf, list, len + 1);
    int rc = CLI_OK, any = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && rc == CLI_OK;
         tok = strtok_r(NULL, ",", &save), any = 1)
        rc = strcmp(tok, "all") == 0 ? load_all(command, run_seed, dist, cases, count)
                                     : load_one(command, tok, run_seed, dist, cases, count);
    free(buf);
    if (rc == CLI_OK && !any) rc = cli_usage_error(command, "bad --suite: empty");
    return rc;
}
