/*
** strategy.h — search strategies for the timing phase (exhaustive, random,
** annealing, successive halving), FFTW-style effort levels, which of them a
** run uses (at_strategy_choose) and the warm-start seeds; internal to the
** tuner (search.c's timing phase). Pure CPU: every measurement goes through
** the caller's callback.
** Invariant: no candidate is measured twice at one precision; only a finite
** time wins.
*/
#ifndef AT_STRATEGY_H
#define AT_STRATEGY_H

#include "autotune.h"

typedef enum at_strategy_kind {
    AT_STRATEGY_EXHAUSTIVE = 0, /* "exhaustive": every candidate once, full reps */
    AT_STRATEGY_RANDOM,         /* "random": `budget` distinct candidates screened */
    AT_STRATEGY_ANNEAL,         /* "anneal": local search, `budget` screenings */
    AT_STRATEGY_HALVING         /* "halving": successive halving, cheap reps first */
} at_strategy_kind;

/* Effort levels, FFTW's idea: one word that picks strategy, budget and reps.
** For n candidates and the caller's reps R (at_strategy_effort):
**
**   level       strategy    budget (rung 0)   eta  reps_min  final reps  finalists
**   quick       halving     max(n/4, 8)       3    1         R           3
**   normal      halving     n (all)           3    1         R           4
**   patient     halving     n (all)           2    3         2R          6
**   exhaustive  exhaustive  n (all)           -    -         R           -
**
** quick sees a quarter of the space: its rung 0 is the warm-start seeds, then
** their neighbours, then random picks, so it is meant for shapes whose
** neighbours were tuned already. At equal final reps, on the 351-candidate
** space of tests/test_strategy.c, normal costs 10% of exhaustive's reps,
** patient 20%, quick 3% (counting a screening rep as a full one, which on
** the GPU it is not: search_gpu.c screens with shorter graphs, alone). */
typedef enum at_effort {
    AT_EFFORT_QUICK = 0,
    AT_EFFORT_NORMAL,
    AT_EFFORT_PATIENT,
    AT_EFFORT_EXHAUSTIVE
} at_effort;

/* Measures candidate `index` with `reps` repetitions and writes the median
** per-launch time in µs to *us. A candidate that cannot be timed (crashed,
** timed out) is a result: return AT_OK with *us = INFINITY (NAN counts the
** same). Any other status (sticky CUDA error, interrupt) aborts the search
** and is returned by at_strategy_run; set the message with at_fail. The cost
** of a call is taken to be proportional to reps. A call below full reps is
** a screening: the tuner times it with a shorter graph (search_gpu.c), so
** random, anneal and every halving rung but the last measure below full
** reps (reps_min, or up to reps - 1 for halving) and only their best
** `finalists` get full reps. */
typedef int (*at_measure_fn)(void *arg, int index, int reps, double *us);

/* anneal starts its walk from the best of its warm-start seeds and of
** at_strategy_anneal_starts(budget) random picks, taken from the spec's
** strategies in turn (so one template's basin cannot hide another's): a
** quarter of the budget, at least AT_STRATEGY_STARTS. On the H200
** landscapes of tests/test_strategy_h200.c four picks left the walk in a
** slow basin on 17 of 80 seeded runs (worst 1.87x the best); a quarter of
** the budget, spread so, on 8 (worst 1.09x). */
#define AT_STRATEGY_STARTS 4
int at_strategy_anneal_starts(int budget);

typedef struct at_strategy_opts {
    at_strategy_kind kind;
    int budget;        /* <= 0 or >= n: all. random: candidates measured; anneal:
                          measurements; halving: rung-0 size; exhaustive: unused */
    int reps;          /* full repetitions, used for every final ranking; >= 1 */
    int reps_min;      /* screening reps: halving's rung 0, every random and
                          anneal pick (0: 2; clamped to reps) */
    int eta;           /* halving: keep 1/eta per rung, eta x reps up to
                          reps - 1 (past that a rung is a cut by those times)
                          until the finalists are left (0: 3; >= 2) */
    int finalists;     /* at most this many get full reps (0: 4): halving's
                          last rung, the fastest random or anneal picks */
    uint64_t rng_seed; /* every random choice derives from it: same seed, same run */
    const int *warm;   /* warm-start seeds, indices into cands (borrowed), or NULL */
    int nwarm;         /* duplicates are ignored; a budget below nwarm grows to it */
} at_strategy_opts;

/* What a search measured. Indices are into the caller's cands. */
typedef struct at_strategy_result {
    int n;
    double *us;    /* [n] median of the most precise measurement; NAN if never
                      measured, INFINITY if the candidate failed */
    int *reps;     /* [n] reps of that measurement; 0 if never measured */
    int *from;     /* [n] anneal: the candidate it was measured as a neighbour
                      of; -1 for starts, random restarts and other strategies */
    int *order;    /* [nmeasured] candidates in the order first measured */
    int *rank;     /* [nmeasured] final ranking: finite before failed, then
                      more reps first, then faster (halving: later rungs first) */
    int nmeasured; /* distinct candidates measured */
    int best;      /* rank[0] when its time is finite, else -1 */
    int64_t cost;  /* sum of reps over every callback call (exhaustive: n*reps) */
    int calls;     /* callback calls */
    int rungs;     /* halving: rungs run; 1 for the other strategies */
    int restarts;  /* anneal: jumps to a random unmeasured candidate, taken
                      when no measured candidate has an unmeasured neighbour */
} at_strategy_result;

/* "exhaustive" | "random" | "anneal" | "halving" -> *out. Anything else
** (NULL included) is AT_ERR_USAGE with a message naming the word. */
int at_strategy_parse(const char *text, at_strategy_kind *out);
/* The word for a strategy ("?" for a value outside the enum). */
const char *at_strategy_name(at_strategy_kind k);

/* "quick" | "normal" | "patient" | "exhaustive" -> *out; anything else is
** AT_ERR_USAGE naming the word. */
int at_strategy_effort_parse(const char *text, at_effort *out);
const char *at_strategy_effort_name(at_effort e);

/* Fills *out with the row of the effort table above for n candidates and
** the caller's reps (>= 1); warm and rng_seed are zeroed for the caller to
** set. --strategy and --budget then override kind and budget. AT_ERR_USAGE
** for an effort outside the enum, n < 0 or reps < 1. */
int at_strategy_effort(at_effort effort, int n, int reps, at_strategy_opts *out);

/* The timing phase's settings for n candidates and the caller's reps R.
** The kind comes from, in this order: `strategy` (--strategy), else the
** effort's strategy when `effort` (--effort) is given, else `spec_strategy`
** (the spec's search_strategy), else the normal effort's (halving). Every
** other setting (budget, eta, reps_min, final reps, finalists) is the
** effort's row (normal when `effort` is NULL); budget > 0 (--budget)
** replaces the budget. *from, if not NULL, gets the kind's source:
** "--strategy", "--effort", "spec" or "default". warm and rng_seed are
** zeroed. AT_ERR_USAGE for an unknown word, n < 0 or reps < 1. */
int at_strategy_choose(const char *strategy, const char *effort, const char *spec_strategy, int budget,
                       int n, int reps, at_strategy_opts *out, const char **from);

/* How many measure calls at_strategy_run makes with o over n candidates
** (for a progress display): exact for exhaustive, random and anneal, and
** for halving when no candidate fails and there are no warm-start seeds
** (failures make it smaller; seeds kept past rung 0 a little larger). */
int at_strategy_estimate_calls(const at_strategy_opts *o, int n);

/* Warm start: the candidates whose (strategy name, params string) equals
** a winner stored for one of the `nearest` shapes nearest to `shape` among
** refs[0..nrefs). Distance = sum over the dimensions of |ln(a/b)|, so
** 1x2048x4096 is as near 1x2048x2048 as 1x2048x1024 is; the same shape
** counts, at distance 0; refs whose shape does not parse at shape->rank
** are skipped, and a shape none of whose winners is a candidate here (the
** baseline won there) does not count towards `nearest`. names[i] and
** params[i] are candidate i's; the seeds go to seeds[0..*nseeds) (room for
** n), nearest shape first, each once; *nshapes (may be NULL) gets how many
** shapes contributed.
** AT_ERR_NOMEM or AT_OK. */
int at_strategy_warm_seeds(const at_winner_ref *refs, int nrefs, const at_shape *shape, int nearest,
                           const char *const *names, const char *const *params, int n, int *seeds,
                           int *nseeds, int *nshapes);

/* Runs the strategy o->kind over cands[0..n) (the live candidates; each
** has its params in spec order, and candidates of one spec strategy share
** their parameter names). Measures through `measure` and fills *res, which
** the caller frees with at_strategy_result_free — also when the run fails
** part-way, so what was measured can still be shown. Returns AT_OK (with
** res->best = -1 when n is 0 or every candidate failed), the callback's
** status when it aborts, AT_ERR_USAGE for bad options (warm index out of
** range, reps < 1, eta < 2 ...), AT_ERR_HARNESS for a negative time, or
** AT_ERR_NOMEM. Warm-start seeds are measured first by every strategy;
** anneal starts from the best of them (else from the best of a few random
** picks); halving keeps them past rung 0's cut. */
int at_strategy_run(const at_candidate *cands, int n, const at_strategy_opts *o, at_measure_fn measure,
                    void *arg, at_strategy_result *res);
/* Frees the arrays of *res and zeroes it; NULL is a no-op. */
void at_strategy_result_free(at_strategy_result *res);

#endif /* AT_STRATEGY_H */
