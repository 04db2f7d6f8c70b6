/*
** report.h — the decode example's results and how they are reported
** (report.c): per batch size or trace, each mode's step time, atk's paths,
** the agreement check, the per-op breakdown and the bytes a step must move;
** the text tables and the JSON fields. Invariant: a mode not run has a zero
** time and a zero op time, and is printed "-" (text) or null (JSON).
*/
#ifndef DECODE_REPORT_H
#define DECODE_REPORT_H

#include <stdio.h>

#include "args.h"
#include "model.h"

/* Timing rounds: the modes alternate, each replayed --steps times per
** round; the median round is reported, min and max in the JSON. */
#define ROUNDS 5

/* The agreement bound on the worst token row's relative L2 error (hidden
** state and logits) against (1): bf16 through 24 layers with different
** accumulation orders lands near 2.6e-2 (bench/results); one wrong layer
** (a swapped gate/up, a dropped add, the other norm's weight) lands far
** above (DECODE_FAULT shows it). */
#define AGREE_TOL 5e-2

/* Microseconds per step: median, min, max over the rounds; 0 = not run. */
typedef struct timing {
    double med, min, max;
} timing;

/* atk's path counts of one op, for one captured step. */
typedef struct paths {
    unsigned long long calls, tuned, bucket, inferred, fallback;
} paths;

/* (2), (3) or (4) against (1): the worst token row. */
typedef struct check {
    int run;
    double hidden, logits; /* relative L2 error of the worst row */
    int hidden_row, logits_row;
    int hidden_m, logits_m; /* the step size M that row belongs to */
} check;

/* The results of one batch size, or of the trace. */
typedef struct result {
    int B; /* batch size; 0 for the trace */
    timing t[NMODES + 1];
    paths p[NMODES + 1][ATK_NOPS]; /* modes 3 and 4: atk's paths */
    check c[NMODES + 1];
    int agree;
    int have_ops;
    double op_us[NMODES + 1][K_COUNT]; /* 0: the mode does not run that kind */
    step_bytes bytes;                  /* what one step must move (a trace: per step on average) */
} result;

/* The run's settings the report reads, set once by main before any run. */
typedef struct report_settings {
    unsigned modes;   /* --modes: bit m for mode m (modes 3 and 4 need atk) */
    double read_gbps; /* the read ceiling the step's limit is held against; 0: unmeasured */
    int no_standins;  /* --no-standins: the timed step leaves the stand-ins out */
} report_settings;
extern report_settings report_cfg;

/* Names per kind and per mode (report_mode_keys: the JSON's). */
extern const char *const report_op_names[K_COUNT];
extern const char *const report_mode_names[NMODES + 1];
extern const char *const report_mode_keys[NMODES + 1];

/* The sum over ops of one mode's path counts. */
void report_paths_total(const paths p[ATK_NOPS], paths *t);
/* One line per op called: calls and paths. */
void report_paths(FILE *out, const paths p[ATK_NOPS], const char *indent);
/* One line per mode checked against (1): the worst rows, agree or DIFFER. */
void report_checks(FILE *out, const result *r, const char *what);
/* The step's physical limit in us: the bytes it must move (the stand-ins'
** too when they are timed) at the read ceiling; 0 when unmeasured. */
double report_limit_us(const step_bytes *b);
/* The stand-ins' part of it (0 when they are not timed). */
double report_standin_limit_us(const step_bytes *b);
/* Mode's step time as a share of the limit, in percent; 0: not run. */
double report_pct_of_limit(const result *r, int mode);
/* A right-aligned table cell: v in fmt, or "-" when not run. */
void report_cell(FILE *out, int width, const char *fmt, double v, int run);
/* A JSON number (null when not run or not finite), a JSON string. */
void report_jnum(FILE *f, double v, int run);
void report_jstr(FILE *f, const char *s);
/* The JSON fields of a batch size or the trace (after the opening brace). */
void report_json(FILE *f, const result *r, double tokens_per_step);
/* The per-B tables: time and tokens/s per mode, the step against its limit. */
void report_batch_tables(FILE *out, const result *res, int n, int steps);
/* The per-op breakdown of one batch size, the stand-ins apart. */
void report_ops(FILE *out, const result *r);

#endif
