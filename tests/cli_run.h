/*
** cli_run.h — runs the autotune binary (AT_BIN) as a user would, capturing
** its exit code, stdout and stderr, for the CLI and end-to-end tests.
*/
#ifndef CLI_RUN_H
#define CLI_RUN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct cli_out {
    int code;
    char out[1 << 22]; /* declare cli_out variables static: this is big */
    char err[8192];
} cli_out;

static void slurp(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    size_t k = f ? fread(buf, 1, n - 1, f) : 0;
    buf[k] = '\0';
    if (f)
        fclose(f);
}

/* The autotune binary: beside this test's folder (build/tests/.. ), so the
** build tree can move to another machine; else the path CMake recorded. */
static const char *cli_bin(void)
{
    static char path[4096];
    char exe[4000];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(path, sizeof path, "%s/../autotune", exe);
            if (access(path, X_OK) == 0)
                return path;
        }
    }
    return AT_BIN;
}

/* Runs `autotune args` from the current folder; fills *o. */
static void cli_run(const char *args, cli_out *o)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s >/tmp/at_cli_out.$PPID 2>/tmp/at_cli_err.$PPID </dev/null", cli_bin(),
             args);
    /* $PPID in a shell started by system() is this process */
    int st = system(cmd);
    o->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    char p[64];
    snprintf(p, sizeof p, "/tmp/at_cli_out.%d", (int)getpid());
    slurp(p, o->out, sizeof o->out);
    remove(p);
    snprintf(p, sizeof p, "/tmp/at_cli_err.%d", (int)getpid());
    slurp(p, o->err, sizeof o->err);
    remove(p);
}

#endif
