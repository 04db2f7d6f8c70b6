/*
** progress.h — the progress display (internal to the tuner): on a terminal
** one live line per phase ("compile  37/120  best 10.21 us  ETA 42s"),
** redrawn in place; elsewhere plain lines at a low rate; nothing when quiet.
** Invariant: it writes only to the stream it was opened on (stderr), never
** stdout, so --json output is unaffected.
**
**   at_progress *p = NULL;
**   at_progress_open(stderr, at_progress_mode_for(stderr, quiet), &p);
**   for (int i = 1; i <= n; i++) at_progress_update(p, "compile", i, n, best);
**   at_progress_close(p);
*/
#ifndef AT_PROGRESS_H
#define AT_PROGRESS_H

#include <stdio.h>

/* LIVE is 1 so that at_search_opts.progress = 1 (today's "live lines on
** stderr") keeps its meaning; PLAIN is for a pipe or a log file. */
typedef enum at_progress_mode {
    AT_PROGRESS_OFF = 0,
    AT_PROGRESS_LIVE = 1,
    AT_PROGRESS_PLAIN = 2
} at_progress_mode;

/* Seconds between two plain lines of one phase (its first and last line
** are always written). */
#define AT_PROGRESS_PLAIN_INTERVAL 10.0
/* Seconds between two redraws of a live line. */
#define AT_PROGRESS_LIVE_INTERVAL 0.1

typedef struct at_progress at_progress;

/* OFF when quiet, LIVE when f is a terminal, else PLAIN. */
at_progress_mode at_progress_mode_for(FILE *f, int quiet);

/* A display writing to f (borrowed; stderr in the tool). *out is NULL on
** failure (AT_ERR_NOMEM). Every function below takes NULL as a no-op. */
int at_progress_open(FILE *f, at_progress_mode mode, at_progress **out);
/* Ends a live line left open (an interrupted phase) and frees p. */
void at_progress_close(at_progress *p);

/* One step of phase `phase` (copied; up to 15 characters shown): done of
** total, `best` a free text or NULL ("best 10.21 us"). A phase name that
** differs from the last one starts a new phase: a new line and a new clock
** for the ETA, which is the rate so far (done / seconds since the phase's
** first update) applied to what is left, shown from one second in. When
** done >= total the phase's line is finished (with its elapsed time instead
** of an ETA) and the next update starts a new line even under the same
** name. Rate limits: LIVE redraws at most every AT_PROGRESS_LIVE_INTERVAL,
** PLAIN writes a phase's first line, its last, and at most one line every
** AT_PROGRESS_PLAIN_INTERVAL in between. */
void at_progress_update(at_progress *p, const char *phase, int done, int total, const char *best);

/* Finishes the current phase's line now (e.g. interrupted before the end):
** LIVE ends the line with a newline; PLAIN writes the last state if it was
** not written. */
void at_progress_end(at_progress *p);

/* A permanent line (printf format, newline added). On a terminal it goes
** above the live line, which is redrawn below it. */
void at_progress_note(at_progress *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* For tests: the clock in seconds (default CLOCK_MONOTONIC) and the width
** of a live line (default: the terminal's, else 80). */
void at_progress_set_clock(at_progress *p, double (*now)(void *arg), void *arg);
void at_progress_set_width(at_progress *p, int columns);

#endif /* AT_PROGRESS_H */
