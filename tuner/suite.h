/*
** suite.h — internal to the tuner: suites (a model's ops and shapes, from a
** small sandboxed Lua file, suite.c) and the runner that tunes every entry
** of one on one or several GPUs (suite_run.c, over devices.h's worker pool).
** Invariant: a suite is validated whole before anything runs; a bad file
** changes nothing.
**
** A suite file (see search/models/qwen3.5-2b.lua) returns one table:
**
**   local M = {1, 2, 4, 8, 16}
**   local function each_m(kn)          -- "2048x5120" -> {"1x2048x5120", ...}
**     local t = {}
**     for i, m in ipairs(M) do t[i] = m .. "x" .. kn end
**     return t
**   end
**   return {
**     name = "qwen3.5-2b",            -- optional (default: the file name)
**     dtype = "bf16",                 -- optional default of its entries
**     entries = {
**       tune("gemv", each_m "2048x5120", "attn qkv + gate"),
**       tune("gemma_rmsnorm", {"1x2048", "4x2048"}, {note = "input norm"}),
**     },
**   }
**
** tune(op, shape_or_shapes [, note_or_fields]) checks its arguments at once
** (an error names the file and the line of the call) and returns an entry
** group; fields are note, dtype and spec (a search spec path, relative to
** the suite file's folder; default search/OP.lua). A plain table {op = ...,
** shapes = {...}} (or shape = "...") is accepted in entries too; its errors
** name the file and entries[i] (Lua keeps no line for a table).
*/
#ifndef AT_SUITE_H
#define AT_SUITE_H

#include "autotune.h"
#include "progress.h"

#define AT_SUITE_MAX_ENTRIES 4096
#define AT_SUITE_PATH_LEN 1024

/* The ops a suite may name and the rank of their shapes (3: MxKxN, 2: TxH).
** [OP_TABLE] main.c's known_ops and search.c's op table list the same ops:
** change them together. */
int at_suite_op_rank(const char *op); /* 0 for an unknown op */
/* "gemv, rmsnorm, ..." for messages. */
const char *at_suite_known_ops(void);

typedef struct at_suite_entry {
    char op[32];
    at_dtype dtype;                /* the entry's, else the suite's, else bf16 */
    at_shape shape;
    char shape_text[64];           /* at_shape_format */
    char note[128];                /* free text, may be "" */
    char spec[AT_SUITE_PATH_LEN];  /* "" for search/OP.lua, else a path */
    int line;                      /* line of its tune() call; 0 unknown */
} at_suite_entry;

typedef struct at_suite {
    char *path;     /* as given (or the chunk name) */
    char name[64];
    int nentries;
    at_suite_entry *entries; /* in file order; no (op, dtype, shape) twice */
} at_suite;

/* Loads the suite file at `path` (at most 64 KiB) in the spec sandbox (no
** io, os, require ...; instruction and memory limits). Every failure
** changes nothing and is AT_ERR_SPEC with "path:line: message" where a line
** is known (syntax errors, Lua errors, tune() calls), "path: entries[i]:
** ..." otherwise: unknown op, bad shape for the op, unknown field, unknown
** dtype, an entry listed twice, no entries. An unreadable file is
** AT_ERR_SPEC too (as an unreadable spec is). Free with at_suite_free. */
int at_suite_load(const char *path, at_suite **out);
/* Same from a string; relative spec paths resolve against `dir` (may be NULL:
** the current folder). */
int at_suite_load_string(const char *source, const char *chunkname, const char *dir, at_suite **out);
void at_suite_free(at_suite *s); /* NULL is a no-op */

/* --------------------------------------------------------------- runner */

/* What one entry's run came to: plain data, sent from a worker process to
** the parent over a pipe. */
typedef struct at_suite_outcome {
    int index;          /* into the suite's entries */
    int dtype;          /* at_dtype it ran with (--dtype overrides the file) */
    int ran;            /* 0: not run (interrupted, no worker left) */
    int status;         /* at_status of the entry's run */
    char msg[320];      /* at_errmsg() when status != AT_OK */
    int device;         /* GPU ordinal of the worker that ran it */
    int worker;         /* worker slot */
    int from_cache;
    int dry_run;
    char device_name[128];
    char winner[AT_NAME_LEN];   /* strategy; "cublas" when the baseline won */
    char params[256];
    double us, base_us, speedup; /* winner and baseline µs (graph replay) */
    double bytes, read_gbps;     /* for % of the read ceiling */
    double seconds;              /* wall time of the entry */
    double compile_s, gpu_s;     /* of it: compiling; the GPU phases (setup, verify, timing) */
    int ncand, npruned, ncompiled, ncompile_failed, ncorrect;
    int ncompile_cached;         /* of ncompiled, from the cubin cache (compiled ahead or earlier) */
} at_suite_outcome;

/* Runs one entry with options o (o->op, dtype, shape, spec_path are set for
** it; o->device is the worker's GPU) in a worker process and fills *out.
** The default is at_suite_run_entry; tests inject their own. */
typedef int (*at_suite_worker_fn)(void *arg, const at_suite_entry *e, const at_search_opts *o,
                                  at_suite_outcome *out);

/* The default worker: at_search_run, summarised. */
int at_suite_run_entry(void *arg, const at_suite_entry *e, const at_search_opts *o, at_suite_outcome *out);

typedef struct at_suite_run_opts {
    at_search_opts base;  /* shared by every entry: templates_root, db_path,
                             dry_run, force, arch, reps, threads, effort ...;
                             op, shape and spec_path are set per entry */
    int dtype_override;   /* 1: base.dtype for every entry (--dtype given) */
    const char *home;     /* folder holding search/ (default specs); may be NULL */
    const char *only;     /* comma-separated ops to keep, or NULL */
    const int *devices;   /* GPU ordinal of each worker */
    int ndevices;         /* >= 1 */
    int quiet;
    int no_ahead;         /* 1: no entry compiles while another is on the GPU */
    at_suite_worker_fn worker; /* NULL: at_suite_run_entry */
    void *worker_arg;
} at_suite_run_opts;

/* The entries of s that o->only keeps, as indices into s->entries, in
** file order (*idx malloc'ed). AT_ERR_USAGE when --only names an op that
** is not known, or when nothing is left. */
int at_suite_select(const at_suite *s, const char *only, int **idx, int *n);

/* Tunes the selected entries of s, one worker process per device, entries
** handed out one at a time (a slow one holds no other back); progress on
** stderr unless quiet. *out (malloc'ed, *nout rows, in file order) holds
** one outcome per selected entry, also for those not run. Returns AT_OK
** when every entry ran and succeeded; AT_ERR_INTERRUPTED when interrupted;
** else the status of the first entry (in file order) that failed. Setup
** failures (no memory, cannot fork) return before anything ran, with
** *out NULL. */
int at_suite_run(const at_suite *s, const at_suite_run_opts *o, at_suite_outcome **out, int *nout);

/* Compiling ahead (compile_ahead.c), one child per process: start forks
** one that runs at_search_run(next) with compile_only set (filling the
** cubin cache, storing nothing) and returns 1, or 0 when it started none
** (one is running, a dry run, interrupted, fork failed). wait reaps it,
** first passing it a SIGINT if *interrupt is set; 0 when there was none. */
int at_compile_ahead_start(const at_search_opts *next);
int at_compile_ahead_wait(volatile int *interrupt);

/* `autotune --suite FILE` after main.c has parsed the options: loads and
** checks the suite (a bad one changes nothing), picks the workers from
** `devices` ("0,1", "all"; NULL: base.device alone), runs, prints the
** summary (or JSON) on stdout and the error on stderr; returns the exit
** status (an at_status). */
typedef struct at_suite_cli {
    at_search_opts base;  /* as for at_suite_run_opts */
    int dtype_override;
    const char *suite_path, *home, *only, *devices;
    int json, quiet, no_ahead;
} at_suite_cli;
int at_suite_main(const at_suite_cli *c);

/* The summary table (per entry: op, dtype, shape, winner, µs, vs baseline,
** % of ceiling, from cache, GPU) and totals, to f. */
void at_suite_report_text(FILE *f, const at_suite *s, const at_suite_outcome *r, int n, int status);
/* The same as one JSON document. */
void at_suite_report_json(FILE *f, const at_suite *s, const at_suite_outcome *r, int n, int status,
                          const char *db_path);

#endif /* AT_SUITE_H */
