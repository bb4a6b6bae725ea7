/* kernelkit model --tp N: tensor parallelism for the model command
 * (docs/distributed.md, "Launching").
 *   On GPUs, one process per rank: the command launches them itself (fork and
 *   exec of its own command line) with KK_RANK, KK_WORLD_SIZE, KK_LOCAL_RANK,
 *   KK_COMM_ID_FILE (the NCCL id, made here, in a temporary file) and
 *   CUDA_VISIBLE_DEVICES set to the rank's GPU (KK_TP_ISOLATE=0: all GPUs
 *   visible, rank r on cuda:base+r); rank 0 prints, the others' stdout goes
 *   to /dev/null. A process started with KK_RANK set (by this launcher or a
 *   torchrun-style one) is a rank.
 *   On the CPU, ranks are threads over the loopback communicator: rank 0 is
 *   the command itself, each other rank a thread that makes the same decoder
 *   calls with the same hidden states (the same generator and seed as
 *   cmd_model.c's cli_model_random_hidden, which both call). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include "cli/cli.h"

enum { TP_MAX = 64 };

static struct {
    int n;                  /* loopback ranks (0: none) */
    kk_comm *comms[TP_MAX]; /* the loopback's, or [0] = this process's NCCL rank */
    pthread_t threads[TP_MAX];
    kk_status status[TP_MAX];
    char message[TP_MAX][256]; /* a failed thread's last error */
    const kk_model *model;
    char device[32];
    kk_opt_level level;
    cli_tp_run run;
} g_tp;

int cli_tp_is_rank(void) { return getenv("KK_RANK") != NULL; }

const char *cli_tp_device(const char *device) {
    const char *d = getenv("KK_TP_DEVICE");
    return cli_tp_is_rank() && d && *d ? d : device;
}

int cli_tp_launching(long tp, const char *device) {
    return tp > 1 && strncmp(device, "cpu", 3) != 0 && !cli_tp_is_rank();
}

/* The GPU index of "cuda" / "cuda:N". */
static int base_index(const char *device) {
    const char *colon = strchr(device, ':');
    return colon ? atoi(colon + 1) : 0;
}

/* The full command line of this process (/proc/self/cmdline), argv-style. */
static char **own_argv(char *buf, size_t size) {
    int fd = open("/proc/self/cmdline", O_RDONLY);
    if (fd < 0) return NULL;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0 || (size_t)n >= size - 1) return NULL;
    buf[n] = '\0';
    static char *argv[256];
    int k = 0;
    for (ssize_t i = 0; i < n && k < 255; i += (ssize_t)strlen(buf + i) + 1) argv[k++] = buf + i;
    argv[k] = NULL;
    return argv;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

extern char **environ;

static void free_env(char **env) {
    for (int i = 0; env && env[i]; i++) free(env[i]);
    free(env);
}

/* This process's environment with rank r's variables set (malloc'd). */
static char **rank_env(int r, int tp, const char *idfile, const char *visible, const char *device) {
    static const char *const ours[] = {
        "KK_RANK=",         "KK_LOCAL_RANK=", "KK_WORLD_SIZE=",
        "KK_COMM_ID_FILE=", "KK_TP_DEVICE=",  "CUDA_VISIBLE_DEVICES="};
    int n = 0, k = 0;
    while (environ[n]) n++;
    char **env = calloc((size_t)n + 8, sizeof *env);
    if (!env) return NULL;
    for (int i = 0; i < n; i++) {
        int mine = 0;
        for (size_t o = 0; o < sizeof ours / sizeof ours[0]; o++)
            mine |= strncmp(environ[i], ours[o], strlen(ours[o])) == 0;
        if (mine && (visible || strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) != 0)) continue;
        if (!(env[k++] = strdup(environ[i]))) return free_env(env), NULL;
    }
    char v[4200];
    static const char *const counts[] = {"KK_RANK", "KK_LOCAL_RANK", "KK_WORLD_SIZE"};
    for (int i = 0; i < 3; i++) {
        snprintf(v, sizeof v, "%s=%d", counts[i], i < 2 ? r : tp);
        if (!(env[k++] = strdup(v))) return free_env(env), NULL;
    }
    snprintf(v, sizeof v, "KK_COMM_ID_FILE=%s", idfile);
    if (!(env[k++] = strdup(v))) return free_env(env), NULL;
    snprintf(v, sizeof v, "KK_TP_DEVICE=%s", device);
    if (!(env[k++] = strdup(v))) return free_env(env), NULL;
    if (visible) {
        snprintf(v, sizeof v, "CUDA_VISIBLE_DEVICES=%s", visible);
        if (!(env[k++] = strdup(v))) return free_env(env), NULL;
    }
    return env;
}

int cli_tp_launch(const char *command, int tp, const char *device) {
    const int base = base_index(device), count = kk_backend_device_count(KK_BACKEND_CUDA);
    if (base < 0 || base + tp > count)
        return cli_usage_error(command,
                               "bad --tp %d: needs GPUs cuda:%d .. cuda:%d, %d visible (%s)", tp,
                               base, base + tp - 1, count,
                               count ? "CUDA_VISIBLE_DEVICES may hide some"
                                     : kk_backend_unavailable_reason(KK_BACKEND_CUDA));
    static char cmdline[65536];
    char **argv = own_argv(cmdline, sizeof cmdline);
    if (!argv) {
        fprintf(stderr, "kernelkit %s: cannot read /proc/self/cmdline to start the ranks\n",
                command);
        return CLI_FAILED;
    }
    char dir[] = "/tmp/kk-tp-XXXXXX", idfile[64];
    if (!mkdtemp(dir)) {
        fprintf(stderr, "kernelkit %s: cannot make a temporary folder: %s\n", command,
                strerror(errno));
        return CLI_FAILED;
    }
    snprintf(idfile, sizeof idfile, "%s/comm-id", dir);
    kk_comm_id id;
    if (kk_comm_id_create(&id) != KK_OK || kk_comm_id_save(&id, idfile) != KK_OK) {
        rmdir(dir);
        return cli_fail(command, "making the NCCL id (--tp needs NCCL)");
    }
    /* the physical GPUs: CUDA_VISIBLE_DEVICES' entries when it is set */
    char visible[1024] = "", *gpu[TP_MAX * 2];
    int ngpu = 0;
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (cvd) {
        snprintf(visible, sizeof visible, "%s", cvd);
        for (char *save = NULL, *t = strtok_r(visible, ",", &save); t && ngpu < TP_MAX * 2;
             t = strtok_r(NULL, ",", &save))
            gpu[ngpu++] = t;
    }
    const int isolate = !getenv("KK_TP_ISOLATE") || strcmp(getenv("KK_TP_ISOLATE"), "0") != 0;
    /* every rank's environment made here: after fork the child only calls
     * what is async-signal-safe (this process has NCCL's and CUDA's threads) */
    char **envs[TP_MAX] = {0};
    int ok = 1;
    for (int r = 0; ok && r < tp; r++) {
        char physical[64], dev[32];
        if (isolate && base + r < ngpu)
            snprintf(physical, sizeof physical, "%s", gpu[base + r]);
        else
            snprintf(physical, sizeof physical, "%d", base + r);
        snprintf(dev, sizeof dev, "cuda:%d", isolate ? 0 : base + r);
        ok = (envs[r] = rank_env(r, tp, idfile, isolate ? physical : NULL, dev)) != NULL;
    }
    const int null = open("/dev/null", O_WRONLY);
    pid_t pid[TP_MAX];
    double failed_at = 0;
    int started = 0, rc = ok && null >= 0 ? CLI_OK : CLI_FAILED;
    if (rc != CLI_OK) fprintf(stderr, "kernelkit %s: out of memory or no /dev/null\n", command);
    fflush(stdout), fflush(stderr);
    for (int r = 0; rc == CLI_OK && r < tp; r++) {
        pid[r] = fork();
        if (pid[r] < 0) {
            fprintf(stderr, "kernelkit %s: fork failed: %s\n", command, strerror(errno));
            rc = CLI_FAILED;
            break;
        }
        if (pid[r] > 0) {
            started++;
            continue;
        }
        if (r != 0) dup2(null, STDOUT_FILENO); /* rank 0 prints */
        execve("/proc/self/exe", argv, envs[r]);
        static const char msg[] = "kernelkit: a rank's exec of /proc/self/exe failed\n";
        if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) _exit(CLI_FAILED);
        _exit(CLI_FAILED);
    }
    if (null >= 0) close(null);
    for (int r = 0; r < tp; r++) free_env(envs[r]);
    if (rc != CLI_OK && started) failed_at = now_s(); /* the started ones would wait forever */
    /* wait for every rank; once one fails the others would wait for it in
     * NCCL forever: they get 10 s to report, then are killed */
    int left = started;
    while (left > 0) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            left--;
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : CLI_FAILED;
            if (code != 0) {
                if (rc == CLI_OK) rc = code;
                if (!failed_at) failed_at = now_s();
                for (int r = 0; r < started; r++)
                    if (pid[r] == p)
                        fprintf(stderr, "kernelkit %s: rank %d %s %d\n", command, r,
                                WIFEXITED(status) ? "exited with" : "killed by signal",
                                WIFEXITED(status) ? code : WTERMSIG(status));
            }
            for (int r = 0; r < started; r++)
                if (pid[r] == p) pid[r] = 0;
            continue;
        }
        if (p < 0 && errno != EINTR) break;
        if (failed_at && now_s() - failed_at > 10)
            for (int r = 0; r < started; r++)
                if (pid[r] > 0) kill(pid[r], SIGKILL);
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
    unlink(idfile);
    rmdir(dir);
    if (rc == CLI_OK && started < tp) rc = CLI_FAILED;
    return rc;
}

/* ---- the CPU ranks (threads over the loopback) ---- */

/* One call as rank 0 makes it. */
static kk_status follow_call(kk_decoder *d, int64_t S, uint64_t *rng) {
    const cli_tp_run *r = &g_tp.run;
    kk_tensor *x = NULL, *y = NULL;
    kk_status st =
        cli_model_random_hidden("cpu", kk_decoder_dtype(d), r->batch, S, r->hidden, rng, &x);
    if (st == KK_OK) st = kk_tensor_create("cpu", kk_decoder_dtype(d), 3, x->shape, &y);
    if (st == KK_OK)
        st = S == 1 && kk_decoder_length(d) > 0 ? kk_decoder_step(d, x, y)
                                                : kk_decoder_prefill(d, x, y);
    kk_tensor_destroy(x), kk_tensor_destroy(y);
    return st;
}

static void *follower(void *arg) {
    const int rank = (int)(intptr_t)arg;
    const cli_tp_run *r = &g_tp.run;
    kk_decoder *d = NULL;
    kk_status st = kk_decoder_create_tp(g_tp.model, "cpu", g_tp.level, (int)r->batch,
                                        (int)(r->prefill + r->decode), g_tp.comms[rank], &d);
    if (st == KK_OK) st = kk_decoder_set_tp_overlap(d, r->overlap);
    uint64_t rng = (uint64_t)r->seed * 2654435761u + 1;
    if (st == KK_OK) st = follow_call(d, r->prefill, &rng);
    for (long i = 0; st == KK_OK && i < r->decode; i++) st = follow_call(d, 1, &rng);
    if (st != KK_OK)
        snprintf(g_tp.message[rank], sizeof g_tp.message[rank], "%s", kk_last_error_message());
    kk_decoder_free(d);
    g_tp.status[rank] = st;
    return NULL;
}

kk_status cli_tp_decoder(const kk_model *m, const char *device, kk_opt_level level, int tp,
                         const cli_tp_run *run, kk_decoder **out) {
    const int seq = (int)(run->prefill + run->decode);
    *out = NULL;
    if (tp <= 1) return kk_decoder_create(m, device, level, (int)run->batch, seq, out);
    kk_status st;
    if (cli_tp_is_rank()) { /* one process of an NCCL group */
        if ((st = kk_comm_init_env(device, &g_tp.comms[0])) != KK_OK ||
            (st = kk_decoder_create_tp(m, NULL, level, (int)run->batch, seq, g_tp.comms[0], out)) !=
                KK_OK)
            return st;
        return kk_decoder_set_tp_overlap(*out, run->overlap);
    }
    /* the CPU: rank 0 here, the others on threads */
    if ((st = kk_comm_loopback_create(tp, g_tp.comms)) != KK_OK) return st;
    g_tp.n = tp, g_tp.model = m, g_tp.level = level, g_tp.run = *run;
    snprintf(g_tp.device, sizeof g_tp.device, "%s", device);
    for (int r = 1; r < tp; r++)
        if (pthread_create(&g_tp.threads[r], NULL, follower, (void *)(intptr_t)r) != 0) {
            g_tp.status[r] = KK_ERR_INTERNAL;
            g_tp.threads[r] = 0;
        }
    if ((st = kk_decoder_create_tp(m, device, level, (int)run->batch, seq, g_tp.comms[0], out)) !=
        KK_OK)
        return st;
    return kk_decoder_set_tp_overlap(*out, run->overlap);
}

int cli_tp_finish(const char *command) {
    int rc = CLI_OK;
    for (int r = 1; r < g_tp.n; r++) {
        if (g_tp.threads[r]) pthread_join(g_tp.threads[r], NULL);
        if (g_tp.status[r] != KK_OK && rc == CLI_OK) {
            fprintf(stderr, "kernelkit %s: rank %d (thread) failed: %s\n", command, r,
                    g_tp.message[r][0] ? g_tp.message[r] : kk_status_name(g_tp.status[r]));
            rc = CLI_FAILED;
        }
    }
    for (int r = 0; r < (g_tp.n ? g_tp.n : 1); r++)
        kk_comm_destroy(g_tp.comms[r]), g_tp.comms[r] = NULL;
    g_tp.n = 0;
    return rc;
}
