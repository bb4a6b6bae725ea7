/* The kernelkit command-line tool: one file per command, a table in main.c. */
#ifndef KK_CLI_H
#define KK_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "kernelkit/harness.h"

/* Exit codes shared by every command. */
enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2 };

typedef struct cli_command {
    const char *name;
    const char *summary;               /* one line for `kernelkit --help` */
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
    void (*help)(FILE *out);
} cli_command;

extern const cli_command cli_cmd_info;
extern const cli_command cli_cmd_selftest;
extern const cli_command cli_cmd_config;
extern const cli_command cli_cmd_check, cli_cmd_run;
extern const cli_command cli_cmd_compare, cli_cmd_report;
extern const cli_command cli_cmd_calibrate;
extern const cli_command cli_cmd_bench;
extern const cli_command cli_cmd_model_info, cli_cmd_model;

/* Print "kernelkit CMD: message" and a hint to stderr; returns CLI_USAGE. */
int cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Print "kernelkit CMD: message: <last error>" to stderr; returns CLI_FAILED. */
int cli_fail(const char *command, const char *what);

/* Write `text` to `path`; on failure print "kernelkit COMMAND: cannot write
 * PATH: reason" to stderr and return -1. */
int cli_write_text(const char *command, const char *path, const char *text);

/* The whole file as a NUL-terminated string (malloc'd), or NULL when it
 * cannot be read or is larger than max_bytes. */
char *cli_read_file(const char *path, long max_bytes);

/* "1.5 GiB", "60.0 MiB", "512 B" into buf; returns buf. */
const char *cli_format_bytes(uint64_t bytes, char *buf, size_t size);

/* The cases of `list`, a comma list of suites (names or paths, as
 * kk_suite_load takes them; "all": every suite of the suite directories),
 * appended to *cases (malloc'd, *count of them) in order. On an error prints
 * "kernelkit COMMAND: bad --suite: <why>" and returns CLI_USAGE. */
int cli_suite_cases(const char *command, const char *list, uint64_t run_seed, kk_input_dist dist,
                    kk_case **cases, int *count);

/* kernelkit bench's suite runner, for the main job: load SUITE as --suite
 * does, measure its cases on `device` (short measurements when quick), print a
 * line per benchmark. *out gets the results, or NULL when nothing ran; free
 * with kk_bench_results_free. Returns an exit code like the command's. */
struct kk_bench_results;
int cli_bench_suite(const char *device, const char *suite, int quick, int argc, char **argv,
                    struct kk_bench_results **out);

/* A results document for `device` with the environment captured (argv as the
 * command line) and the device's stored ceilings; NULL (after a message on
 * stderr) on failure. Free with kk_bench_results_free. */
kk_bench_results *cli_bench_results_new(const char *device, int argc, char **argv);
/* Write r to path with a one-line note on stderr; CLI_OK or CLI_FAILED. */
int cli_bench_results_write(const kk_bench_results *r, const char *path);

/* The op's parameters (registry order) as results parameters, at most cap. */
struct kk_bench_param;
void cli_bench_params(const kk_op_params *p, struct kk_bench_param *out, int cap, int *n);

/* kernelkit bench --import (bench_import.c). */
int cli_bench_import(const char *device, const char *path, const char *output, int argc,
                     char **argv);

/* Parse the options common to every command (-h/--help); the command's own
 * options are handled by the command. */
int cli_wants_help(int argc, char **argv);

#endif
