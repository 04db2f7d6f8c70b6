/*
** search_run.h — what the two halves of the tuning pipeline share (internal):
** search.c (spec, candidates, compilation, the worker split, the cache) and
** search_gpu.c (the GPU phases a worker runs: the correctness gate, timing,
** the final round, the winner rule). One `run` holds a pipeline's state; in
** a worker it is the parent's copy, forked.
*/
#ifndef AT_SEARCH_RUN_H
#define AT_SEARCH_RUN_H

#include "bench.h"
#include "op.h"
#include "progress.h"
#include "strategy.h"
#include "worker.h"

#include <stdio.h>
#include <time.h>

#define FINALISTS 5   /* re-timed in the final round (more if halving keeps more) */
#define WARM_SHAPES 4 /* warm start: winners of this many nearest tuned shapes */
#define WARM_MAX_REFS 1024
#define HARNESS_SLACK 1.03 /* allowed above the measured read ceiling */

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int interrupted(const at_search_opts *o) { return o->interrupt && *o->interrupt; }

static inline void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

struct run;

/* A contestant with its graphs: one per copy group (see plan_timing). */
typedef struct contest {
    struct run *r;
    at_contestant c;
    at_graph *gr;
    int ngr;
} contest;

/* Everything a run holds on the GPU and the host. */
typedef struct run {
    const at_search_opts *o;
    at_search_result *res;
    const at_op *op;
    void *op_state;       /* the op's buffers, reference, baselines */
    at_spec *spec;
    at_templates *tpl;
    at_cache *cache;
    at_gpu *gpu;
    at_compile_job *jobs; /* one per row (unused for pruned rows) */
    char cubin_dir[1100]; /* compiled-kernel cache beside the db; "" for none */
    CUmodule *mods;
    int copies;           /* copies of the rotated data */
    int groups;           /* graphs per contestant, each over its own copies */
    int screen_launches;  /* of a screening graph (groups 1); == res->launches: none shorter */
    unsigned turn;        /* replays so far: the next replay uses group turn % groups */
    contest base[AT_MAX_BASELINES];
    /* screening (measurements below full reps, see plan_timing): each row's
    ** screening graphs, kept across rungs when they are small (NULL: built
    ** and freed per measurement) */
    contest *screen;
    at_progress *pg;      /* the progress display (o->progress); NULL: none */
    at_strategy_opts so;  /* the timing phase's search (plan_search) */
    int *rank, nrank;     /* rows the strategy timed, its ranking (phase_time) */
    /* the worker split (worker.h; the messages: see gpu_phases) */
    at_worker *w;            /* set in the GPU worker, NULL in the parent */
    int phase;               /* PH_*: what the worker is doing */
    unsigned char *verified; /* parent's, inherited by each worker: passed the gate before */
    unsigned char *warm;     /* worker's: the row's module has launched in this worker */
    int end_seen, end_rc;    /* parent's: the worker's final message */
    char end_err[1024];
} run;

/* What the worker is doing (run.phase; the parent reads it from messages). */
enum { PH_NONE, PH_VERIFY, PH_TIME, PH_FINAL, PH_END };

/* search.c */
/* Stores a trial in the cache (a warning if that fails) and, in a worker,
** sends the row to the parent. */
void at_search_store_trial(run *r, at_search_row *row);
/* In a worker: row i's outcome to the parent; no-op in the parent. */
void at_search_send_row(run *r, int i);
/* A warning on stderr, above a live progress line if there is one. */
void at_search_warn(run *r, const char *msg);
/* The timing phase's search for n correct candidates into r->so and res. */
int at_search_plan(run *r, int n);

/* components.c: a fused op's components (op->components) tuned, or found
** in the cache, with o's options before its own search; nothing for an op
** without them, a dry run or a verify-only run; a compile-only run (a
** suite's compile-ahead) looks them up and compiles those it does not find,
** and folds them into the key only when it found them all. tuned[len]
** receives "rmsnorm=block_row gemv=splitk" (the winners' strategies), and
** space_sha (the fused op's key digest of its spec and templates) is folded
** with which kernels won (at_components_fold_key). A component's failure is
** returned with a message naming it. */
int at_search_components(const at_search_opts *o, const at_op *op, at_progress *pg, char *tuned, size_t len,
                         char space_sha[65]);
/* space_sha becomes the digest of itself and idents (one line per
** component: op, shape, its key digest, strategy, params, cubin digest);
** unchanged when idents is empty. */
int at_components_fold_key(char space_sha[65], const char *idents);

/* search_gpu.c: the GPU phases, in order (each returns an at_status; a
** sticky CUDA error leaves the candidate in flight for the parent) */
int at_search_device_ceilings(run *r);
int at_search_plan_timing(run *r, size_t wbytes);
int at_search_phase_verify(run *r);
int at_search_phase_time(run *r);
int at_search_phase_final(run *r);
void at_search_contest_free(run *r, contest *t);

#endif
