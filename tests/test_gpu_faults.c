/*
** test_gpu_faults.c — a tuning run survives its candidates (label gpu;
** skips visibly without one): over tests/fixtures/spec_faults.lua one
** variant is correct, one writes to a wild pointer, one never ends, one
** writes past y. The CLI run completes (exit 0) in bounded time with the
** correct one timed and the others crashed / timeout / wrong, all stored,
** so a rerun skips them; the library run says the same; the norm path's
** guard zones (before y, past the residual) catch planted writes; Ctrl-C while
** timing (to the process group, as a terminal sends it) exits 130 with a
** partial table and a sound cache.
*/
#include <dlfcn.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "autotune.h"
#include "cli_run.h"
#include "tinytest.h"
#include "gpu_isolated.h"

#define FAULTS_ARGS                                                                                          \
    "--op gemv --shape 1x512x512 --spec tests/fixtures/spec_faults.lua --templates tests/fixtures/templates"
#define RUN_LIMIT_S 300.0 /* "bounded": a hang that was not killed would never end */


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fresh_db(char *buf, size_t n, const char *tag)
{
    snprintf(buf, n, "/tmp/at_faults_%s_%d.db", tag, (int)getpid());
    remove(buf);
    char p[300];
    snprintf(p, sizeof p, "%s-wal", buf);
    remove(p);
    snprintf(p, sizeof p, "%s-shm", buf);
    remove(p);
}

/* The candidate row of TP_FAULT=f, from its params ("" if absent). Only
** the "candidates" array counts: "best_without_pdl" names params too. */
static const char *row_of(const char *json, int f, char *buf, size_t n)
{
    char key[64];
    const char *rows = strstr(json, "\"candidates\":[");
    snprintf(key, sizeof key, "\"params\":\"TP_FAULT=%d TP_THREADS=128\"", f);
    const char *p = rows ? strstr(rows, key) : NULL, *e;
    buf[0] = '\0';
    if (!p)
        return buf;
    e = strchr(p, '}');
    snprintf(buf, n, "%.*s", (int)(e ? e - p : (long)strlen(p)), p);
    return buf;
}

static double json_num(const char *row, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(row, k);
    return p ? strtod(p + strlen(k), NULL) : -1.0;
}

/* The four verdicts in one JSON document. */
static void check_verdicts(const char *json)
{
    char row[2048];
    row_of(json, 0, row, sizeof row);
    CHECK_STR_HAS(row, "\"state\":\"ok\"");
    CHECK(json_num(row, "us") > 0); /* the correct one was timed */
    row_of(json, 1, row, sizeof row);
    CHECK_STR_HAS(row, "\"state\":\"crashed\"");
    CHECK_STR_HAS(row, "cuda");
    printf("    crashed: %s\n", row);
    row_of(json, 2, row, sizeof row);
    CHECK_STR_HAS(row, "\"state\":\"timeout\"");
    CHECK_STR_HAS(row, "ran past its limit");
    printf("    timeout: %s\n", row);
    row_of(json, 3, row, sizeof row);
    CHECK_STR_HAS(row, "\"state\":\"wrong\"");
    CHECK_STR_HAS(row, "bytes past the output");
    printf("    wrong:   %s\n", row);
}

static void faults_survived_through_the_cli(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    static cli_out o;
    char db[256], args[1024];
    fresh_db(db, sizeof db, "cli");
    snprintf(args, sizeof args, FAULTS_ARGS " --db %s --json --quiet", db);
    double t0 = now_s();
    cli_run(args, &o);
    double took = now_s() - t0;
    printf("    first run: exit %d in %.1f s\n", o.code, took);
    CHECK_EQ_INT(o.code, 0);
    CHECK(took < RUN_LIMIT_S);
    CHECK_STR_HAS(o.out, "\"winner\":{\"strategy\":");
    CHECK_STR_HAS(o.out, "\"skipped\":0");
    check_verdicts(o.out);
    if (o.code != 0)
        fprintf(stderr, "%s\n", o.err);

    /* a rerun without the winner (removed here) skips the three: stored */
    sqlite3 *h = NULL;
    CHECK(sqlite3_open(db, &h) == SQLITE_OK);
    CHECK(sqlite3_exec(h, "DELETE FROM winners", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(h);
    t0 = now_s();
    cli_run(args, &o);
    took = now_s() - t0;
    printf("    rerun: exit %d in %.1f s\n", o.code, took);
    CHECK_EQ_INT(o.code, 0);
    CHECK(took < RUN_LIMIT_S);
    CHECK_STR_HAS(o.out, "\"skipped\":3");
    check_verdicts(o.out);
    remove(db);
}

/* The correctness gate alone (verify_only) of op over a fixture spec, in
** the library; says why when it fails. */
static int gate_run(const char *op, const char *spec, const char *shape, int rank, const char *db, int force,
                    at_search_result *res)
{
    at_search_opts o = {.op = op,
                        .dtype = AT_BF16,
                        .spec_path = spec,
                        .templates_root = "tests/fixtures/templates",
                        .db_path = db,
                        .reps = 5,
                        .force = force,
                        .verify_only = 1};
    int rc = at_shape_parse(shape, rank, &o.shape);
    CHECK_EQ_INT(rc, AT_OK);
    if (rc == AT_OK)
        rc = at_search_run(&o, res);
    if (rc != AT_OK)
        fprintf(stderr, "  %s\n", at_errmsg());
    return rc;
}

static void faults_survived_in_the_library(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    char db[256];
    fresh_db(db, sizeof db, "lib");
    at_search_result res;
    int rc = gate_run("gemv", "tests/fixtures/spec_faults.lua", "2x300x1000", 3, db, 1, &res);
    CHECK_EQ_INT(rc, AT_OK);
    CHECK_EQ_INT(res.ncompiled, 4);
    CHECK_EQ_INT(res.ncorrect, 1);
    CHECK_EQ_INT(res.nwrong, 1);
    CHECK_EQ_INT(res.ncrashed, 1);
    CHECK_EQ_INT(res.ntimeout, 1);
    for (int i = 0; i < res.nrows; i++) {
        const at_trial *t = &res.rows[i].trial;
        printf("    %s %s: %s\n", t->params, at_trial_state_name(t->state), t->reason);
        if (strstr(t->params, "TP_FAULT=0"))
            CHECK_EQ_INT(t->state, AT_TRIAL_OK);
        if (strstr(t->params, "TP_FAULT=1"))
            CHECK_EQ_INT(t->state, AT_TRIAL_CRASHED);
        if (strstr(t->params, "TP_FAULT=2"))
            CHECK_EQ_INT(t->state, AT_TRIAL_TIMEOUT);
        if (strstr(t->params, "TP_FAULT=3")) {
            CHECK_EQ_INT(t->state, AT_TRIAL_WRONG);
            CHECK_STR_HAS(t->reason, "wrote 8 bytes past the output"); /* 4 bf16 past y */
        }
    }
    at_search_result_free(&res);
    /* the same again without --force: the three come from the cache */
    rc = gate_run("gemv", "tests/fixtures/spec_faults.lua", "2x300x1000", 3, db, 0, &res);
    CHECK_EQ_INT(rc, AT_OK);
    CHECK_EQ_INT(res.nskipped, 3);
    CHECK_EQ_INT(res.ncorrect, 1);
    at_search_result_free(&res);
    remove(db);
}

/* The norm path's guard zones: before y, past the residual (add ops). */
static void norm_guard_zones(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    char db[256];
    fresh_db(db, sizeof db, "norm");
    at_search_result res;
    int rc = gate_run("add_rmsnorm", "tests/fixtures/spec_norm_guard.lua", "3x1000", 2, db, 1, &res);
    CHECK_EQ_INT(rc, AT_OK);
    CHECK_EQ_INT(res.ncorrect, 1);
    CHECK_EQ_INT(res.nwrong, 2);
    for (int i = 0; i < res.nrows; i++) {
        const at_trial *t = &res.rows[i].trial;
        printf("    %s %s: %s\n", t->params, at_trial_state_name(t->state), t->reason);
        if (strstr(t->params, "TP_OOB=0"))
            CHECK_EQ_INT(t->state, AT_TRIAL_OK);
        if (strstr(t->params, "TP_OOB=1"))
            CHECK_STR_HAS(t->reason, "wrote 4 bytes before the output");
        if (strstr(t->params, "TP_OOB=2"))
            CHECK_STR_HAS(t->reason, "wrote 6 bytes past the residual");
    }
    at_search_result_free(&res);
    remove(db);
}

static int count_timed(const char *db)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    int n = -1;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, "SELECT count(*) FROM trials WHERE state = 'ok' AND us > 0", -1, &st, NULL) ==
            SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

/* A real tune, interrupted (SIGINT to its process group) once the first
** candidate is timed and stored: exit 130, a partial table, the cache
** sound and holding at least what was stored before the signal. */
static void ctrl_c_while_timing(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    char db[256], out[300], err[300];
    static cli_out o;
    fresh_db(db, sizeof db, "int");
    snprintf(out, sizeof out, "/tmp/at_faults_int_out.%d", (int)getpid());
    snprintf(err, sizeof err, "/tmp/at_faults_int_err.%d", (int)getpid());
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0); /* its own group, like a terminal's foreground job */
        if (!freopen(out, "w", stdout) || !freopen(err, "w", stderr))
            _exit(126);
        execl(cli_bin(), "autotune", "--op", "gemv", "--shape", "1x2048x4096", "--db", db, "--quiet",
              (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    int before = 0, st = 0, code = -1;
    double t0 = now_s();
    while (now_s() - t0 < RUN_LIMIT_S && waitpid(pid, &st, WNOHANG) == 0 && (before = count_timed(db)) < 1)
        usleep(50 * 1000);
    if (before >= 1) {
        kill(-pid, SIGINT);
        double t1 = now_s();
        while (waitpid(pid, &st, WNOHANG) == 0) {
            if (now_s() - t1 > 60.0) {
                kill(-pid, SIGKILL);
                waitpid(pid, &st, 0);
                break;
            }
            usleep(20 * 1000);
        }
        code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    } else {
        kill(-pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    slurp(out, o.out, sizeof o.out);
    slurp(err, o.err, sizeof o.err);
    remove(out);
    remove(err);
    printf("    interrupted after %d timed trial(s): exit %d\n", before, code);
    CHECK(before >= 1);
    CHECK_EQ_INT(code, 130);
    CHECK_STR_HAS(o.err, "interrupted");
    CHECK_STR_HAS(o.out, "TP_"); /* the partial table */
    CHECK(count_timed(db) >= before);
    sqlite3 *h = NULL;
    sqlite3_stmt *q = NULL;
    CHECK(sqlite3_open(db, &h) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &q, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(q) == SQLITE_ROW);
    CHECK_STR_HAS((const char *)sqlite3_column_text(q, 0), "ok");
    sqlite3_finalize(q);
    sqlite3_close(h);
    remove(db);
}

int main(void)
{
    TT_RUN_ISOLATED(faults_survived_through_the_cli);
    TT_RUN_ISOLATED(faults_survived_in_the_library);
    TT_RUN_ISOLATED(norm_guard_zones);
    TT_RUN_ISOLATED(ctrl_c_while_timing);
    return TT_DONE();
}
