/*
** test_progress.c — the progress display: not on a terminal it writes plain
** lines at a low rate (no escape codes), nothing when quiet; on a
** pseudo-terminal one live line per phase, redrawn in place, cut to the
** width, with notes above it; the ETA comes from the rate so far. A fake
** clock makes every case deterministic.
*/
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "autotune.h"
#include "progress.h"
#include "tinytest.h"

static double fake_t;
static double fake_now(void *arg)
{
    (void)arg;
    return fake_t;
}

/* Everything written to f so far (f rewound to read). */
static void contents(FILE *f, char *buf, size_t n)
{
    fflush(f);
    long end = ftell(f);
    rewind(f);
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = '\0';
    fseek(f, end, SEEK_SET);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void plain_lines_at_a_low_rate(void)
{
    static char buf[1 << 16];
    FILE *f = tmpfile();
    at_progress *p = NULL;
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK_EQ_INT(at_progress_mode_for(f, 0), AT_PROGRESS_PLAIN); /* a file is not a terminal */
    CHECK_EQ_INT(at_progress_open(f, AT_PROGRESS_PLAIN, &p), AT_OK);
    at_progress_set_clock(p, fake_now, NULL);
    fake_t = 100.0;
    /* 1000 steps over 25 s: first line, one per 10 s, last line */
    for (int i = 0; i <= 1000; i++) {
        at_progress_update(p, "compile", i, 1000, i > 500 ? "best 7.10 us" : NULL);
        fake_t += 0.025;
    }
    contents(f, buf, sizeof buf);
    int lines = count_lines(buf);
    CHECK(lines >= 3 && lines <= 5);
    CHECK_STR_HAS(buf, "compile  0/1000\n");
    CHECK_STR_HAS(buf, "compile  1000/1000  best 7.10 us  25s\n");
    CHECK(strchr(buf, '\r') == NULL && strchr(buf, '\033') == NULL);
    /* a second phase starts its own line at once */
    at_progress_update(p, "time", 1, 40, NULL);
    contents(f, buf, sizeof buf);
    CHECK_STR_HAS(buf, "time     1/40\n");
    /* ending early writes the state reached */
    fake_t += 12.0;
    at_progress_update(p, "time", 7, 40, "best 5.00 us");
    at_progress_update(p, "time", 8, 40, "best 4.90 us");
    at_progress_end(p);
    contents(f, buf, sizeof buf);
    CHECK_STR_HAS(buf, "time     8/40  best 4.90 us  ETA 48s\n");
    at_progress_note(p, "[%d/%d] gemv done", 1, 3);
    contents(f, buf, sizeof buf);
    CHECK_STR_HAS(buf, "\n[1/3] gemv done\n");
    at_progress_close(p);
    fclose(f);
}

static void quiet_writes_nothing(void)
{
    static char buf[4096];
    FILE *f = tmpfile();
    at_progress *p = NULL;
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK_EQ_INT(at_progress_mode_for(f, 1), AT_PROGRESS_OFF);
    CHECK_EQ_INT(at_progress_open(f, at_progress_mode_for(f, 1), &p), AT_OK);
    for (int i = 0; i <= 10; i++)
        at_progress_update(p, "verify", i, 10, "best 1 us");
    at_progress_note(p, "a note");
    at_progress_end(p);
    at_progress_close(p);
    contents(f, buf, sizeof buf);
    CHECK_EQ_INT(strlen(buf), 0);
    /* NULL is a no-op everywhere */
    at_progress_update(NULL, "x", 1, 2, NULL);
    at_progress_note(NULL, "x");
    at_progress_end(NULL);
    at_progress_close(NULL);
    fclose(f);
}

static void eta_from_the_rate_so_far(void)
{
    static char buf[4096];
    FILE *f = tmpfile();
    at_progress *p = NULL;
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK_EQ_INT(at_progress_open(f, AT_PROGRESS_PLAIN, &p), AT_OK);
    at_progress_set_clock(p, fake_now, NULL);
    fake_t = 0;
    at_progress_update(p, "suite", 0, 100, NULL);
    fake_t = 30; /* 10 done in 30 s: 90 left take 270 s */
    at_progress_update(p, "suite", 10, 100, NULL);
    contents(f, buf, sizeof buf);
    CHECK_STR_HAS(buf, "suite    10/100  ETA 4m30s\n");
    fake_t = 3 * 3600.0; /* hours */
    at_progress_update(p, "suite", 11, 100, NULL);
    contents(f, buf, sizeof buf);
    CHECK_STR_HAS(buf, "ETA 24h16m");
    at_progress_close(p);
    fclose(f);
}

/* Reads what the master side has, without blocking. */
static size_t drain(int fd, char *buf, size_t n, size_t have)
{
    ssize_t k;
    while (have + 1 < n && (k = read(fd, buf + have, n - 1 - have)) > 0)
        have += (size_t)k;
    buf[have] = '\0';
    return have;
}

static void live_line_on_a_terminal(void)
{
    static char buf[1 << 15];
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0 || !ptsname(master)) {
        if (master >= 0)
            close(master);
        TT_SKIP("no pseudo-terminal here");
    }
    int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
    FILE *f = slave >= 0 ? fdopen(slave, "w") : NULL;
    CHECK(f != NULL);
    if (!f) {
        close(master);
        return;
    }
    fcntl(master, F_SETFL, O_NONBLOCK);
    CHECK_EQ_INT(at_progress_mode_for(f, 0), AT_PROGRESS_LIVE);
    CHECK_EQ_INT(at_progress_mode_for(f, 1), AT_PROGRESS_OFF);
    at_progress *p = NULL;
    CHECK_EQ_INT(at_progress_open(f, at_progress_mode_for(f, 0), &p), AT_OK);
    at_progress_set_clock(p, fake_now, NULL);
    at_progress_set_width(p, 30);
    fake_t = 0;
    for (int i = 0; i <= 50; i++) { /* 50 steps in 2.5 s: about 25 redraws */
        at_progress_update(p, "compile", i, 50, "best so far: a long text that is cut");
        fake_t += 0.05;
        if (i == 20)
            at_progress_note(p, "a note above");
    }
    at_progress_update(p, "verify", 1, 4, NULL);
    at_progress_close(p); /* verify was left open: close ends its line */
    fclose(f);
    usleep(20000);
    size_t n = drain(master, buf, sizeof buf, 0);
    close(master);
    CHECK(n > 0);
    CHECK_STR_HAS(buf, "\r\033[Kcompile  0/50");
    CHECK_STR_HAS(buf, "a note above");
    CHECK_STR_HAS(buf, "\r\033[Kverify   1/4");
    /* one finished line per phase: two newlines besides the note's */
    int newlines = 0, redraws = 0;
    for (const char *s = buf; *s; s++) {
        newlines += *s == '\n';
        redraws += *s == '\r' && s[1] == '\033';
    }
    CHECK_EQ_INT(newlines, 3);
    CHECK(redraws >= 10 && redraws <= 40); /* rate-limited, not one per update */
    /* every drawn line is cut to width - 1 = 29 characters */
    for (const char *s = strstr(buf, "\033[K"); s; s = strstr(s + 1, "\033[K")) {
        const char *e = s + 3;
        size_t len = strcspn(e, "\r\n");
        CHECK(len <= 29);
    }
}

int main(void)
{
    TT_RUN(plain_lines_at_a_low_rate);
    TT_RUN(quiet_writes_nothing);
    TT_RUN(eta_from_the_rate_so_far);
    TT_RUN(live_line_on_a_terminal);
    return TT_DONE();
}
