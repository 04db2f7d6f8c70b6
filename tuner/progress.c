/*
** progress.c — the progress display: a live line per phase on a terminal
** ("\r\033[K" redraws, cut to the terminal's width so it never wraps), plain
** rate-limited lines elsewhere, nothing when off. Invariant: a live line is
** either open (no newline yet) or finished; notes and new phases finish or
** clear it first, so no two writers' text shares a line.
*/
#include "progress.h"

#include "autotune.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

struct at_progress {
    FILE *f;
    at_progress_mode mode;
    double (*now)(void *);
    void *now_arg;
    int width;         /* live: columns (0: ask the terminal) */
    char phase[16];
    int started;       /* a phase is under way */
    int open;          /* live: a line without its newline is on screen */
    int done, total;
    char best[96];
    double t0;         /* the phase's first update */
    double last_write; /* the last line written or drawn */
    int written;       /* plain: the current state has been written */
};

static double clock_now(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

at_progress_mode at_progress_mode_for(FILE *f, int quiet)
{
    if (quiet || !f)
        return AT_PROGRESS_OFF;
    return isatty(fileno(f)) ? AT_PROGRESS_LIVE : AT_PROGRESS_PLAIN;
}

int at_progress_open(FILE *f, at_progress_mode mode, at_progress **out)
{
    at_progress *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p)
        return at_fail(AT_ERR_NOMEM, "out of memory");
    p->f = f;
    p->mode = f ? mode : AT_PROGRESS_OFF;
    p->now = clock_now;
    *out = p;
    return AT_OK;
}

void at_progress_set_clock(at_progress *p, double (*now)(void *arg), void *arg)
{
    if (p) {
        p->now = now ? now : clock_now;
        p->now_arg = arg;
    }
}

void at_progress_set_width(at_progress *p, int columns)
{
    if (p)
        p->width = columns;
}

static int columns(const at_progress *p)
{
    struct winsize ws;
    if (p->width > 0)
        return p->width;
    if (ioctl(fileno(p->f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 80;
}

/* "42s", "3m05s", "1h02m" */
static void format_seconds(double s, char *buf, size_t n)
{
    long t = s < 0 ? 0 : (long)(s + 0.5);
    if (t < 60)
        snprintf(buf, n, "%lds", t);
    else if (t < 3600)
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, n, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
}

/* The text of the current state, without newline. */
static void render(const at_progress *p, double now, char *buf, size_t n)
{
    char tail[48] = "";
    double el = now - p->t0;
    if (p->done >= p->total) {
        char t[24];
        format_seconds(el, t, sizeof t);
        snprintf(tail, sizeof tail, "  %s", t);
    } else if (p->done > 0 && el >= 1.0) {
        char t[24];
        format_seconds(el * (double)(p->total - p->done) / (double)p->done, t, sizeof t);
        snprintf(tail, sizeof tail, "  ETA %s", t);
    }
    snprintf(buf, n, "%-8s %d/%d%s%s%s", p->phase, p->done, p->total, p->best[0] ? "  " : "", p->best, tail);
}

static void draw(at_progress *p, double now)
{
    char line[512];
    render(p, now, line, sizeof line);
    if (p->mode == AT_PROGRESS_LIVE) {
        int w = columns(p) - 1; /* the last column would wrap on some terminals */
        if (w < 10)
            w = 10;
        if ((int)strlen(line) > w)
            line[w] = '\0';
        fprintf(p->f, "\r\033[K%s", line);
        p->open = 1;
    } else
        fprintf(p->f, "%s\n", line);
    fflush(p->f);
    p->last_write = now;
    p->written = 1;
}

/* Finishes the current line (live: newline; plain: the last state). */
static void finish(at_progress *p, double now)
{
    if (p->mode == AT_PROGRESS_LIVE) {
        if (!p->written)
            draw(p, now);
        if (p->open)
            fputc('\n', p->f);
        p->open = 0;
    } else if (!p->written)
        draw(p, now);
    fflush(p->f);
    p->started = 0;
}

void at_progress_update(at_progress *p, const char *phase, int done, int total, const char *best)
{
    if (!p || p->mode == AT_PROGRESS_OFF)
        return;
    double now = p->now(p->now_arg);
    const char *name = phase ? phase : "";
    if (p->started && strncmp(p->phase, name, sizeof p->phase - 1) != 0)
        finish(p, now); /* a new phase: the old one's line stays as it was */
    int first = !p->started;
    if (first) {
        snprintf(p->phase, sizeof p->phase, "%s", name);
        p->t0 = now;
        p->started = 1;
    }
    int changed = first || done != p->done || total != p->total || strcmp(p->best, best ? best : "") != 0;
    p->done = done;
    p->total = total;
    snprintf(p->best, sizeof p->best, "%s", best ? best : "");
    if (changed)
        p->written = 0;
    int last = done >= total;
    double gap = p->mode == AT_PROGRESS_LIVE ? AT_PROGRESS_LIVE_INTERVAL : AT_PROGRESS_PLAIN_INTERVAL;
    if (last)
        finish(p, now);
    else if (changed && (first || now - p->last_write >= gap))
        draw(p, now);
}

void at_progress_end(at_progress *p)
{
    if (p && p->mode != AT_PROGRESS_OFF && p->started)
        finish(p, p->now(p->now_arg));
}

void at_progress_note(at_progress *p, const char *fmt, ...)
{
    va_list ap;
    if (!p || p->mode == AT_PROGRESS_OFF)
        return;
    if (p->open)
        fputs("\r\033[K", p->f); /* the live line makes room, then comes back */
    va_start(ap, fmt);
    vfprintf(p->f, fmt, ap);
    va_end(ap);
    fputc('\n', p->f);
    p->open = 0;
    if (p->mode == AT_PROGRESS_LIVE && p->started)
        draw(p, p->now(p->now_arg));
    fflush(p->f);
}

void at_progress_close(at_progress *p)
{
    if (!p)
        return;
    if (p->mode == AT_PROGRESS_LIVE && p->open) {
        fputc('\n', p->f);
        fflush(p->f);
    }
    free(p);
}
