/*
** test_args.c — the decode example's command line (args.c), on the CPU.
** One executable, one group of tests per ctest entry (decode_args_<group>):
** `test_decode_args batch|trace|modes|errors|misc|cli|nodriver`; no argument runs
** them all. cli and nodriver run the decode binary itself (DECODE_BIN): it
** must start, print usage and reject bad input on a machine without a GPU;
** nodriver (a run without a driver says so, exit 1) skips where a driver is.
*/
#include "args.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tinytest.h"

static decode_args A; /* large (the trace array): not on the stack */
static char err[256];

/* Parses a NULL-terminated list of arguments (after argv[0]). */
static int parse(const char *first, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    argv[argc++] = (char *)"decode";
    va_start(ap, first);
    for (const char *s = first; s && argc < 31; s = va_arg(ap, const char *))
        argv[argc++] = (char *)s;
    va_end(ap);
    argv[argc] = NULL;
    return decode_args_parse(argc, argv, &A, err, sizeof err);
}

static void defaults(void)
{
    CHECK_EQ_INT(parse(NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT(A.nbatch, 1);
    CHECK_EQ_INT(A.batch[0], 1);
    CHECK_EQ_INT(A.ntrace, 0);
    CHECK_EQ_INT(A.steps, 100);
    CHECK_EQ_INT(A.device, 0);
    CHECK_EQ_INT(A.ops, -1);
    CHECK_EQ_INT((int)A.modes, DECODE_ALL_MODES);
    CHECK(A.db == NULL && A.templates == NULL && A.json == NULL);
}

static void batch_one(void)
{
    CHECK_EQ_INT(parse("--batch", "8", NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT(A.nbatch, 1);
    CHECK_EQ_INT(A.batch[0], 8);
}

static void batch_list(void)
{
    CHECK_EQ_INT(parse("--batch", "1,2,4,8,16", NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT(A.nbatch, 5);
    CHECK_EQ_INT(A.batch[0], 1);
    CHECK_EQ_INT(A.batch[4], 16);
    CHECK_EQ_INT(parse("--batch", "64,1", NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT(A.nbatch, 2);
    CHECK_EQ_INT(A.batch[0], 64);
    /* the last --batch wins */
    CHECK_EQ_INT(parse("--batch", "1,2", "--batch", "3", NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT(A.nbatch, 1);
    CHECK_EQ_INT(A.batch[0], 3);
}

static void batch_bad(void)
{
    CHECK_EQ_INT(parse("--batch", "0", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--batch '0'");
    CHECK_STR_HAS(err, "out of range 1..64");
    CHECK_EQ_INT(parse("--batch", "65", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "65 is out of range");
    CHECK_EQ_INT(parse("--batch", "-1", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "-1 is out of range");
    CHECK_EQ_INT(parse("--batch", "1,,4", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "empty item at position 2");
    CHECK_EQ_INT(parse("--batch", "1,2,", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "empty item at position 3");
    CHECK_EQ_INT(parse("--batch", "1,x", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "'x' is not a whole number");
    CHECK_EQ_INT(parse("--batch", "4k", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "'4k' is not a whole number");
    CHECK_EQ_INT(parse("--batch", " 4", NULL), DECODE_ARGS_BAD);
    CHECK_EQ_INT(parse("--batch", "+4", NULL), DECODE_ARGS_BAD);
    CHECK_EQ_INT(parse("--batch", "", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--batch: empty list");
    CHECK_EQ_INT(parse("--batch", "2,4,2", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "2 given twice");
    CHECK_EQ_INT(parse("--batch", "99999999999999999999", NULL), DECODE_ARGS_BAD);
    CHECK_EQ_INT(parse("--batch", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--batch needs a value");
}

static void trace_ok(void)
{
    CHECK_EQ_INT(parse("--trace", "1,3,7,12,16,5,3,3", NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT(A.ntrace, 8);
    CHECK_EQ_INT(A.trace[3], 12);
    CHECK_EQ_INT(A.trace[7], 3);
    CHECK_EQ_INT(A.nbatch, 0); /* a trace alone runs no per-B table */
    CHECK_EQ_INT(parse("--trace", "5", "--batch", "1,2", NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT(A.ntrace, 1);
    CHECK_EQ_INT(A.nbatch, 2);
}

static void trace_bad(void)
{
    static char longlist[DECODE_MAX_TRACE * 2 + 8];
    CHECK_EQ_INT(parse("--trace", "", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--trace: empty list");
    CHECK_EQ_INT(parse("--trace", ",", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "empty item at position 1");
    CHECK_EQ_INT(parse("--trace", "1,3,100", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--trace '1,3,100': 100 is out of range 1..64");
    CHECK_EQ_INT(parse("--trace", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--trace needs a value");
    size_t n = 0;
    for (int i = 0; i <= DECODE_MAX_TRACE; i++)
        n += (size_t)snprintf(longlist + n, sizeof longlist - n, i ? ",1" : "1");
    CHECK_EQ_INT(parse("--trace", longlist, NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "more than 4096 items");
}

static void modes_ok(void)
{
    CHECK_EQ_INT(parse("--modes", "1,4", NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT((int)A.modes, (1 << 1) | (1 << 4));
    CHECK_EQ_INT(parse("--modes", "4,3,2,1", NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT((int)A.modes, DECODE_ALL_MODES);
    CHECK_EQ_INT(parse("--modes", "1", "--batch", "2", NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT((int)A.modes, 1 << 1);
    CHECK_EQ_INT(A.batch[0], 2);
    /* the last --modes wins */
    CHECK_EQ_INT(parse("--modes", "1,2", "--modes", "1,3", NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT((int)A.modes, (1 << 1) | (1 << 3));
}

static void modes_bad(void)
{
    CHECK_EQ_INT(parse("--modes", "4", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--modes '4': mode 1 must be among them");
    CHECK_EQ_INT(parse("--modes", "1,5", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--modes '1,5': 5 is out of range 1..4");
    CHECK_EQ_INT(parse("--modes", "0,1", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "0 is out of range 1..4");
    CHECK_EQ_INT(parse("--modes", "1,4,4", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "4 given twice");
    CHECK_EQ_INT(parse("--modes", "1,x", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "'x' is not a whole number");
    CHECK_EQ_INT(parse("--modes", "", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--modes: empty list");
    CHECK_EQ_INT(parse("--modes", "1,2,3,4,1", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "more than 4 items");
    CHECK_EQ_INT(parse("--modes", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--modes needs a value");
}

static void errors_flags(void)
{
    CHECK_EQ_INT(parse("--bogus", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "unknown argument '--bogus'");
    CHECK_EQ_INT(parse("--batch", "2", "extra", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "unknown argument 'extra'");
    CHECK_EQ_INT(parse("--steps", "0", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--steps '0': out of range 1..1000000");
    CHECK_EQ_INT(parse("--steps", "ten", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--steps 'ten': not a whole number");
    CHECK_EQ_INT(parse("--steps", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--steps needs a value");
    CHECK_EQ_INT(parse("--device", "-1", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--device '-1'");
    CHECK_EQ_INT(parse("--json", "", NULL), DECODE_ARGS_BAD);
    CHECK_STR_HAS(err, "--json: empty file name");
}

static void misc_values(void)
{
    CHECK_EQ_INT(parse("--steps", "7", "--device", "1", "--db", "x.db", "--templates", "t", "--json", "-", NULL),
                 DECODE_ARGS_OK);
    CHECK_EQ_INT(A.steps, 7);
    CHECK_EQ_INT(A.device, 1);
    CHECK(A.db && !strcmp(A.db, "x.db"));
    CHECK(A.templates && !strcmp(A.templates, "t"));
    CHECK(A.json && !strcmp(A.json, "-"));
    CHECK_EQ_INT(parse("--ops", NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT(A.ops, 1);
    CHECK_EQ_INT(parse("--ops", "--no-ops", NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT(A.ops, 0);
    CHECK_EQ_INT(A.no_standins, 0);
    CHECK_EQ_INT(parse("--no-standins", NULL), DECODE_ARGS_OK);
    CHECK_EQ_INT(A.no_standins, 1);
    CHECK_EQ_INT(parse("--no-standin", NULL), DECODE_ARGS_BAD);
}

static void misc_help(void)
{
    CHECK_EQ_INT(parse("--help", NULL), DECODE_ARGS_HELP);
    CHECK_EQ_INT(parse("--batch", "2", "-h", NULL), DECODE_ARGS_HELP);
    /* help before a bad argument wins; after one, the error does */
    CHECK_EQ_INT(parse("--help", "--bogus", NULL), DECODE_ARGS_HELP);
    CHECK_EQ_INT(parse("--bogus", "--help", NULL), DECODE_ARGS_BAD);
    const char *u = decode_args_usage();
    CHECK_STR_HAS(u, "--batch");
    CHECK_STR_HAS(u, "--trace");
    CHECK_STR_HAS(u, "--steps");
    CHECK_STR_HAS(u, "--json");
    CHECK_STR_HAS(u, "--modes");
    CHECK_STR_HAS(u, "4 atk fused");
}

static void misc_list(void)
{
    int out[4], n = -1;
    CHECK_EQ_INT(decode_args_list("--x", "3,3,3", 1, 5, out, 4, &n, err, sizeof err), 0);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(decode_args_list("--x", "1,2,3,4,5", 1, 5, out, 4, &n, err, sizeof err), 1);
    CHECK_STR_HAS(err, "more than 4 items");
    CHECK_EQ_INT(decode_args_list("--x", NULL, 1, 5, out, 4, &n, err, sizeof err), 1);
    CHECK_EQ_INT(n, 0);
    /* a tiny err buffer is still terminated */
    char small[8];
    CHECK_EQ_INT(decode_args_list("--x", "9", 1, 5, out, 4, &n, small, sizeof small), 1);
    CHECK(strlen(small) == sizeof small - 1);
}

#ifdef DECODE_BIN
static char output[8192];

/* Runs the decode binary with `args` (shell words), stdout and stderr into
** output; returns its exit status, -1 if it did not exit normally. */
static int run_decode(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", DECODE_BIN, args);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    output[0] = '\0';
    if (!p)
        return -1;
    while (n + 1 < sizeof output) {
        size_t got = fread(output + n, 1, sizeof output - 1 - n, p);
        if (!got)
            break;
        n += got;
    }
    output[n] = '\0';
    while (fgetc(p) != EOF) /* drain the rest */
        ;
    int st = pclose(p);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void cli_help(void)
{
    CHECK_EQ_INT(run_decode("--help"), 0);
    CHECK_STR_HAS(output, "usage: decode");
    CHECK_STR_HAS(output, "--trace");
    CHECK_STR_HAS(output, "--modes");
    CHECK_EQ_INT(run_decode("--batch 4 -h"), 0);
}

static void cli_bad_input(void)
{
    CHECK_EQ_INT(run_decode("--batch 0"), 2);
    CHECK_STR_HAS(output, "decode: --batch '0': 0 is out of range 1..64");
    CHECK_EQ_INT(run_decode("--batch 1,2,x"), 2);
    CHECK_STR_HAS(output, "'x' is not a whole number");
    CHECK_EQ_INT(run_decode("--batch 65"), 2);
    CHECK_EQ_INT(run_decode("--trace ''"), 2);
    CHECK_STR_HAS(output, "--trace: empty list");
    CHECK_EQ_INT(run_decode("--trace 1,,2"), 2);
    CHECK_EQ_INT(run_decode("--frob"), 2);
    CHECK_STR_HAS(output, "unknown argument '--frob'");
    CHECK_EQ_INT(run_decode("--steps"), 2);
    CHECK_STR_HAS(output, "--steps needs a value");
    CHECK_EQ_INT(run_decode("--modes 2,4"), 2);
    CHECK_STR_HAS(output, "decode: --modes '2,4': mode 1 must be among them");
    /* the agreement check's self-test names its bug; an unknown one is bad input */
    setenv("DECODE_FAULT", "bogus", 1);
    CHECK_EQ_INT(run_decode("--batch 1"), 2);
    CHECK_STR_HAS(output, "DECODE_FAULT 'bogus': unknown");
    unsetenv("DECODE_FAULT");
    CHECK_EQ_INT(run_decode("--json /nonexistent-dir/x/results.json"), 2);
    CHECK_STR_HAS(output, "--json '/nonexistent-dir/x/results.json': cannot open");
}

static void nodriver_says_so(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib) {
        dlclose(lib);
        TT_SKIP("a CUDA driver is installed here");
    }
    CHECK_EQ_INT(run_decode("--batch 1,2"), 1);
    CHECK_STR_HAS(output, "no GPU driver on this machine");
    CHECK_STR_HAS(output, "decode needs a GPU");
}
#endif

int main(int argc, char **argv)
{
    const char *g = argc > 1 ? argv[1] : "all";
    int all = !strcmp(g, "all");
    if (all || !strcmp(g, "batch")) {
        TT_RUN(defaults);
        TT_RUN(batch_one);
        TT_RUN(batch_list);
        TT_RUN(batch_bad);
    }
    if (all || !strcmp(g, "trace")) {
        TT_RUN(trace_ok);
        TT_RUN(trace_bad);
    }
    if (all || !strcmp(g, "modes")) {
        TT_RUN(modes_ok);
        TT_RUN(modes_bad);
    }
    if (all || !strcmp(g, "errors"))
        TT_RUN(errors_flags);
    if (all || !strcmp(g, "misc")) {
        TT_RUN(misc_values);
        TT_RUN(misc_help);
        TT_RUN(misc_list);
    }
#ifdef DECODE_BIN
    if (all || !strcmp(g, "cli")) {
        TT_RUN(cli_help);
        TT_RUN(cli_bad_input);
    }
    if (all || !strcmp(g, "nodriver"))
        TT_RUN(nodriver_says_so);
#endif
    return TT_DONE();
}
