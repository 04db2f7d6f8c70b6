/*
** args.h — the decode example's command line, parsed into a plain struct
** with no CUDA in sight, so the parser is tested on machines without a GPU
** (examples/decode/test_args.c). Invariant: a successful parse leaves every
** field in range (batch sizes and trace entries in 1..DECODE_MAX_BATCH,
** steps in 1..DECODE_MAX_STEPS, at least one batch size or a trace, mode 1
** among the modes).
*/
#ifndef DECODE_ARGS_H
#define DECODE_ARGS_H

#include <stddef.h>

/* The largest M a step may have: the activation buffers (and the
** linear-attention states, one per sequence) are sized for it. */
#define DECODE_MAX_BATCH 64
#define DECODE_MAX_TRACE 4096
#define DECODE_MAX_STEPS 1000000
/* Modes 1..DECODE_NMODES (model.h enum mode); the default runs them all. */
#define DECODE_NMODES 4
#define DECODE_ALL_MODES 0x1e /* bits 1..4 */

enum decode_args_status {
    DECODE_ARGS_OK = 0,   /* run */
    DECODE_ARGS_HELP = 1, /* --help: print decode_args_usage, exit 0 */
    DECODE_ARGS_BAD = 2   /* err says which argument and why: exit 2 */
};

typedef struct decode_args {
    const char *db;        /* --db FILE; NULL: the default cache path */
    const char *templates; /* --templates DIR; NULL: the built-in default */
    const char *json;      /* --json FILE, "-" for stdout; NULL: none */
    int steps;             /* --steps N (default 100) */
    int device;            /* --device N (default 0) */
    int ops;               /* --ops: per-op breakdown at every batch size;
                              -1 default (only when one batch size is run),
                              0 --no-ops, 1 --ops */
    int batch[DECODE_MAX_BATCH]; /* --batch B or B1,B2,...; distinct values */
    int nbatch;                  /* 0 only when a trace is given alone */
    int trace[DECODE_MAX_TRACE]; /* --trace M1,M2,...; repeats allowed */
    int ntrace;
    int no_standins;             /* --no-standins: the timed step leaves out the
                                    attention and recurrence stand-ins and SiLU*mul */
    unsigned modes;              /* --modes 1,2,4: bit m set for mode m run
                                    (default DECODE_ALL_MODES); bit 1 always set:
                                    mode 1 is the agreement check's reference */
} decode_args;

/* Parses argv[1..argc-1] into *a (every field set, defaults first).
** Returns DECODE_ARGS_OK, DECODE_ARGS_HELP, or DECODE_ARGS_BAD with a
** one-line message in err (naming the argument and the bad value; err of
** errlen bytes, always terminated). No allocation: strings in *a point into
** argv. Defaults: --batch 1 when neither --batch nor --trace is given,
** every mode. */
int decode_args_parse(int argc, char **argv, decode_args *a, char *err, size_t errlen);

/* Parses a comma-separated list of integers in lo..hi ("1,2,4" or "8")
** into out[0..*n), at most max of them. Returns 0, or 1 with a message in
** err naming `flag`, the bad item and the reason (empty list or item, not
** a number, out of range, too many). Duplicates are allowed here. */
int decode_args_list(const char *flag, const char *s, int lo, int hi, int *out, int max, int *n, char *err,
                     size_t errlen);

/* The usage text (static storage). */
const char *decode_args_usage(void);

#endif
