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

/* Random hidden states [B,S,hidden] (uniform in [-1, 1) from *rng, a 64-bit
 * LCG) in dtype on device: kernelkit model's inputs (cmd_model.c). */
kk_status cli_model_random_hidden(const char *device, kk_dtype dtype, int64_t B, int64_t S,
                                  int64_t hidden, uint64_t *rng, kk_tensor **out);

/* kernelkit model --tp N (cmd_model_tp.c; docs/distributed.md). */
typedef struct cli_tp_run {
    long batch, prefill, decode, seed; /* the command's calls, mirrored by CPU ranks */
    int64_t hidden;
    kk_tp_overlap overlap; /* --tp-overlap */
} cli_tp_run;
/* Non-zero when this process is a rank (KK_RANK set). */
int cli_tp_is_rank(void);
/* Non-zero when `kernelkit COMMAND --tp N` must start the rank processes (a
 * GPU device, N > 1, not a rank itself). */
int cli_tp_launching(long tp, const char *device);
/* The device of this process: KK_TP_DEVICE in a launched rank, else `device`. */
const char *cli_tp_device(const char *device);
/* Start one process per rank (this command line again), wait for them all;
 * an exit code. */
int cli_tp_launch(const char *command, int tp, const char *device);
/* The decoder of this process's rank: kk_decoder_create for tp 1; a rank of
 * the NCCL group (a launched process); on the CPU rank 0 of a loopback group
 * whose other ranks are threads making `run`'s calls. */
kk_status cli_tp_decoder(const kk_model *m, const char *device, kk_opt_level level, int tp,
                         const cli_tp_run *run, kk_decoder **out);
/* After the decoder is freed: join the threads, release the comms; an exit code. */
int cli_tp_finish(const char *command);

/* kernelkit model's cost model and profile (cmd_model_cost.c; docs/model.md,
 * "Cost model"): its options (getopt codes of long options without a short
 * form) and the run before the timed calls. */
enum {
    CLI_MODEL_NO_PROFILE = 1000, /* --no-profile */
    CLI_MODEL_NO_COMPARE,        /* --no-compare */
    CLI_MODEL_CEILINGS,          /* --ceilings FILE */
    CLI_MODEL_FLOOR,             /* --launch-floor-us X */
    CLI_MODEL_BUDGET,            /* --profile-time S */
    CLI_MODEL_OUTPUT,            /* --output FILE */
    CLI_MODEL_REPORT,            /* --report FILE */
    CLI_MODEL_TP_OVERLAP         /* --tp-overlap auto|off|on (cmd_model.c) */
};
typedef struct cli_model_cost {
    int profile, compare; /* 1, 1 by default */
    const char *ceilings; /* NULL: kernelkit calibrate's stored file */
    double floor_us;      /* < 0: measured */
    double budget_s;      /* per step; 0: the profile's default */
    const char *output, *report;
} cli_model_cost;
void cli_model_cost_default(cli_model_cost *o);
/* 1 when `code` is one of the options above (*rc: its parse status), else 0. */
int cli_model_cost_option(cli_model_cost *o, int code, const char *arg, int *rc);
/* Profile d's prefill and first decode step (and a conservative twin's),
 * print the tables and speedups, write --output/--report; d is reset after. */
int cli_model_cost_run(kk_decoder *d, const char *dir, const char *device, kk_opt_level level,
                       long batch, long prefill, long decode, long seed, int64_t hidden,
                       const cli_model_cost *o, int argc, char **argv);

/* Parse the options common to every command (-h/--help); the command's own
 * options are handled by the command. */
int cli_wants_help(int argc, char **argv);

#endif
