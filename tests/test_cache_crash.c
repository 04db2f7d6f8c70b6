/*
** test_cache_crash.c — the cache under concurrency and crashes, with real
** processes: two writers on one fresh cache at once (trials and winners,
** batches and single puts interleaved: both finish, no row lost, no "database
** is locked"), and a writer killed with SIGKILL at many moments (before it
** opens, while it creates the schema, mid-batch): every time the cache opens,
** PRAGMA integrity_check is ok, every row the writer reported committed is
** intact, no batch is half there, and the next writer resumes where the
** committed rows end. All under a fresh mkdtemp folder; a few seconds.
*/
#include "autotune.h"
#include "table.h"
#include "tinytest.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[64];

enum { BATCH = 5, CUBIN = 3000 };

static at_key key_of(int writer)
{
    at_key k;
    memset(&k, 0, sizeof k);
    strcpy(k.op, "gemv");
    k.dtype = AT_BF16;
    strcpy(k.shape, "1x2048x8192");
    strcpy(k.device, "NVIDIA H200");
    k.cc = 90;
    k.sms = 132;
    k.driver_version = 13000;
    k.nvrtc_version = 13000;
    at_sha256_hex("spec", 4, k.space_sha);
    strcpy(k.options, "-arch=sm_90");
    strcpy(k.tuner_version, AT_TUNER_VERSION);
    snprintf(k.shape, sizeof k.shape, "1x2048x%d", 1000 + writer); /* one key per writer */
    return k;
}

/* Row i of a writer: content that can be checked byte for byte. */
static at_trial trial_of(int i)
{
    at_trial t;
    memset(&t, 0, sizeof t);
    strcpy(t.strategy, "warp_row");
    snprintf(t.params, sizeof t.params, "TP_I=%d", i);
    t.state = (at_trial_state)(i % 7);
    for (size_t j = 0; j < 200; j++)
        t.reason[j] = (char)('a' + (i + (int)j) % 26);
    t.us = i + 0.5;
    t.us_min = i + 0.25;
    t.us_max = i + 0.75;
    t.regs = i % 255;
    t.smem_bytes = i;
    return t;
}

static int same_trial(const at_trial *a, const at_trial *b)
{
    return !strcmp(a->strategy, b->strategy) && !strcmp(a->params, b->params) && a->state == b->state &&
           !strcmp(a->reason, b->reason) && a->us == b->us && a->us_min == b->us_min && a->us_max == b->us_max &&
           a->regs == b->regs && a->smem_bytes == b->smem_bytes;
}

/* Winner for key (writer, i): a cubin of CUBIN bytes from i. */
static at_key winner_key(int writer, int i)
{
    at_key k = key_of(writer);
    snprintf(k.shape, sizeof k.shape, "%dx%dx64", 1 + writer, 1 + i);
    return k;
}

static at_winner winner_of(int i, unsigned char *blob)
{
    at_winner w;
    memset(&w, 0, sizeof w);
    strcpy(w.strategy, "splitk");
    strcpy(w.kernel, "gemv_splitk");
    strcpy(w.template_name, "gemv/gemv_splitk.cu");
    snprintf(w.params, sizeof w.params, "TP_I=%d", i);
    w.us = 1.0 + i;
    w.baseline_us = 2.0 + i;
    w.speedup = w.baseline_us / w.us;
    w.grid[0] = (unsigned)i + 1, w.grid[1] = w.grid[2] = 1;
    w.block[0] = 256, w.block[1] = w.block[2] = 1;
    unsigned s = (unsigned)i * 2654435761u + 1;
    for (size_t j = 0; j < CUBIN; j++) {
        s = s * 1103515245u + 12345u;
        blob[j] = (unsigned char)(s >> 16);
    }
    w.cubin = blob;
    w.cubin_size = CUBIN;
    return w;
}

static int winner_ok(at_cache *c, int writer, int i)
{
    unsigned char want[CUBIN];
    at_winner got, w = winner_of(i, want);
    at_key k = winner_key(writer, i);
    int found = 0;
    if (at_cache_get_winner(c, &k, &got, &found) != AT_OK || !found)
        return 0;
    int ok = got.cubin_size == CUBIN && !memcmp(got.cubin, want, CUBIN) && !strcmp(got.params, w.params) &&
             got.us == w.us && got.grid[0] == w.grid[0];
    at_winner_clear(&got);
    return ok;
}

static int trial_ok(at_cache *c, const at_key *k, int i, int *found)
{
    at_trial want = trial_of(i), got;
    if (at_cache_get_trial(c, k, want.strategy, want.params, &got, found) != AT_OK)
        return 0;
    return !*found || same_trial(&want, &got);
}

static long long sql_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    long long n = -1;
    if (sqlite3_open(path, &db) == SQLITE_OK && sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return n;
}

static int integrity_ok(const char *path)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int ok = 0;
    if (sqlite3_open(path, &db) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(s, 0);
        ok = t && !strcmp((const char *)t, "ok");
        if (!ok)
            fprintf(stderr, "  integrity_check: %s\n", t ? (const char *)t : "(null)");
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    return ok;
}

/* -------------------------------------------------- two writers at once */

enum { ROUNDS = 200 };

/* Writer w: per round either a batch of BATCH trials in one transaction or
** a single autocommit put; every 10th round a winner, read back at once. */
static int writer_main(const char *path, int w, int go_fd)
{
    at_cache *c = NULL;
    char go;
    if (read(go_fd, &go, 1) != 1) /* both start together */
        return 2;
    if (at_cache_open(path, &c) != AT_OK) {
        fprintf(stderr, "  writer %d: %s\n", w, at_errmsg());
        return 1;
    }
    at_key k = key_of(w);
    int i = 0, bad = 0;
    for (int r = 0; r < ROUNDS && !bad; r++) {
        if (r % 2 == 0) {
            bad |= at_cache_begin(c) != AT_OK;
            for (int j = 0; j < BATCH && !bad; j++) {
                at_trial t = trial_of(i++);
                bad |= at_cache_put_trial(c, &k, &t) != AT_OK;
            }
            bad |= !bad && at_cache_commit(c) != AT_OK;
        } else {
            at_trial t = trial_of(i++);
            bad |= at_cache_put_trial(c, &k, &t) != AT_OK;
        }
        if (!bad && r % 10 == 0) {
            unsigned char blob[CUBIN];
            at_winner win = winner_of(r, blob);
            at_key wk = winner_key(w, r);
            bad |= at_cache_put_winner(c, &wk, &win) != AT_OK;
            bad |= !bad && !winner_ok(c, w, r);
        }
    }
    if (bad)
        fprintf(stderr, "  writer %d: %s\n", w, at_errmsg());
    at_cache_close(c);
    return bad;
}

/* While they write: what export and show do, again and again (read-only
** open, the whole table in one read transaction). */
static int reader_main(const char *path, int go_fd)
{
    char go;
    if (read(go_fd, &go, 1) != 1)
        return 2;
    for (int n = 0; n < 40; n++) {
        at_cache *c = NULL;
        at_table t;
        int st = at_cache_open_readonly(path, &c);
        if (st == AT_ERR_CACHE && strstr(at_errmsg(), "no cache at")) { /* not created yet */
            usleep(2000);
            continue;
        }
        if (st == AT_OK)
            st = at_cache_read_table(c, NULL, &t);
        if (st != AT_OK) {
            /* a fresh file seen before its schema commits reads as foreign: not a failure of the readers' path */
            if (!strstr(at_errmsg(), "user_version 0")) {
                fprintf(stderr, "  reader: %s\n", at_errmsg());
                at_cache_close(c);
                return 1;
            }
        } else {
            at_table_free(&t);
        }
        at_cache_close(c);
    }
    return 0;
}

static void test_two_writers(void)
{
    char path[128];
    int go[2];
    pid_t pid[3];
    snprintf(path, sizeof path, "%s/two/tune.db", tmpdir);
    CHECK(pipe(go) == 0);
    fflush(NULL);
    for (int w = 0; w < 3; w++) {
        pid[w] = fork();
        if (pid[w] == 0) {
            close(go[1]);
            _exit(w < 2 ? writer_main(path, w, go[0]) : reader_main(path, go[0]));
        }
        CHECK(pid[w] > 0);
    }
    close(go[0]);
    CHECK(write(go[1], "ggg", 3) == 3);
    close(go[1]);
    for (int w = 0; w < 3; w++) {
        int st = -1;
        if (pid[w] > 0)
            waitpid(pid[w], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    /* every row of both, intact */
    const int per = ROUNDS / 2 * BATCH + ROUNDS / 2;
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM trials"), 2 * per);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM winners"), 2 * (ROUNDS / 10));
    CHECK(integrity_ok(path));
    at_cache *c = NULL;
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    if (!c)
        return;
    int lost = 0;
    for (int w = 0; w < 2; w++) {
        at_key k = key_of(w);
        for (int i = 0; i < per; i++) {
            int found = 0;
            lost += !trial_ok(c, &k, i, &found) || !found;
        }
        for (int r = 0; r < ROUNDS; r += 10)
            lost += !winner_ok(c, w, r);
    }
    CHECK_EQ_INT(lost, 0);
    at_cache_close(c);
}

/* ------------------------------------------------------- kill -9 rounds */

/* The first trial index not stored for writer 0's key (rows are written in
** order, batch by batch), checking each stored row on the way. */
static int resume_point(at_cache *c, int *damaged)
{
    at_key k = key_of(0);
    int i = 0, found = 1;
    for (; found; i++)
        if (!trial_ok(c, &k, i, &found))
            (*damaged)++;
    return i - 1;
}

/* Writes batches from the resume point on, forever; after each commit
** reports the count of committed rows on fd. Winners ride in the batches. */
static int crash_writer(const char *path, int fd)
{
    at_cache *c = NULL;
    int damaged = 0;
    if (at_cache_open(path, &c) != AT_OK) {
        fprintf(stderr, "  crash writer: %s\n", at_errmsg());
        return 1;
    }
    at_key k = key_of(0);
    int i = resume_point(c, &damaged);
    if (damaged || i % BATCH) {
        fprintf(stderr, "  crash writer: resumed at %d with %d damaged rows\n", i, damaged);
        return 1;
    }
    for (;;) {
        unsigned char blob[CUBIN];
        int bad = at_cache_begin(c) != AT_OK;
        for (int j = 0; j < BATCH && !bad; j++, i++) {
            at_trial t = trial_of(i);
            bad |= at_cache_put_trial(c, &k, &t) != AT_OK;
        }
        at_winner w = winner_of(i, blob);
        at_key wk = winner_key(0, i);
        bad |= !bad && at_cache_put_winner(c, &wk, &w) != AT_OK;
        bad |= !bad && at_cache_commit(c) != AT_OK;
        if (bad) {
            fprintf(stderr, "  crash writer: %s\n", at_errmsg());
            return 1;
        }
        if (write(fd, &i, sizeof i) != (ssize_t)sizeof i)
            return 1;
    }
}

static void test_kill9(void)
{
    /* the moments, ms after fork: at once (before the open), while the
    ** schema is created, and mid-write at several depths */
    static const int delays_ms[] = {0, 1, 2, 3, 5, 8, 12, 20, 30, 45, 70, 100, 150};
    char path[128];
    int reported = 0, committed = 0;
    snprintf(path, sizeof path, "%s/crash/tune.db", tmpdir);
    srand((unsigned)time(NULL)); /* jitter: each run hits other moments */
    for (size_t r = 0; r < sizeof delays_ms / sizeof delays_ms[0]; r++) {
        int fd[2];
        CHECK(pipe(fd) == 0);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            close(fd[0]);
            _exit(crash_writer(path, fd[1]));
        }
        close(fd[1]);
        CHECK(pid > 0);
        if (pid <= 0) { /* never kill(-1, ...): that is every process */
            close(fd[0]);
            continue;
        }
        struct timespec ts = {0, (long)(delays_ms[r] * 1000000L + (rand() % 1000) * 1000L)};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int st = -1, n;
        waitpid(pid, &st, 0);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL); /* it was still writing */
        while (read(fd[0], &n, sizeof n) == (ssize_t)sizeof n)
            reported = n > reported ? n : reported;
        close(fd[0]);
        /* the cache opens, is consistent, holds every reported row intact */
        struct stat sb;
        if (stat(path, &sb) != 0)
            continue; /* killed before it created the file */
        at_cache *c = NULL;
        CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
        if (!c) {
            fprintf(stderr, "  round %zu: %s\n", r, at_errmsg());
            continue;
        }
        CHECK(integrity_ok(path));
        int damaged = 0, next = resume_point(c, &damaged);
        CHECK_EQ_INT(damaged, 0);
        CHECK(next >= reported);    /* nothing committed is lost */
        CHECK_EQ_INT(next % BATCH, 0); /* no batch half there */
        CHECK(next >= committed);
        for (int b = BATCH; b <= next; b += BATCH)
            CHECK(winner_ok(c, 0, b));
        committed = next;
        at_cache_close(c);
    }
    CHECK(committed > 0); /* some rounds got to write */
    /* the next writer resumes: one more round that is not killed early */
    int fd[2];
    CHECK(pipe(fd) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        _exit(crash_writer(path, fd[1]));
    }
    close(fd[1]);
    CHECK(pid > 0);
    if (pid <= 0) {
        close(fd[0]);
        return;
    }
    int n = 0, last = committed;
    while (last < committed + 20 * BATCH && read(fd[0], &n, sizeof n) == (ssize_t)sizeof n)
        last = n;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(fd[0]);
    CHECK(last >= committed + 20 * BATCH);
    CHECK(sql_int(path, "SELECT count(*) FROM trials") >= last);
    CHECK(integrity_ok(path));
    printf("  %zu kill -9 rounds, %d rows committed before the last writer, %d after\n",
           sizeof delays_ms / sizeof delays_ms[0], committed, last);
}

/* ---------------------------------------------------------------- main */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int main(void)
{
    strcpy(tmpdir, "/tmp/test_cache_crash.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    TT_RUN(test_two_writers);
    TT_RUN(test_kill9);
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return TT_DONE();
}
