/*
** search_gpu.c — the GPU phases of the tuning pipeline, as a worker process
** runs them (search.c forks it): the measured ceilings, the timing plan
** (copies, graphs, the shorter screening graphs), the correctness gate, the
** strategy's timing of the correct candidates, the final round and the
** winner rule. Invariant: every result is stored as soon as it is known and
** sent to the parent; before each candidate's launch the parent is told
** which one it is (step_on).
*/
#include "search_run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The roofline floor of one call, µs: bytes at the read ceiling plus an
** empty kernel (the deadlines of worker.h are multiples of it). */
static double floor_us(const run *r)
{
    const at_search_result *res = r->res;
    if (!(res->dev.read_gbps > 0))
        return 0.0;
    return res->bytes / (res->dev.read_gbps * 1e3) + res->dev.empty_us;
}

/* Worker side: candidate i starts a step of `calls` contestant calls in
** `graphs` freshly captured graphs; the parent kills the worker if the
** step is not over (step_off) within the limit. */
static void step_on(run *r, int i, double calls, int graphs)
{
    if (!r->w)
        return;
    at_worker_on(r->w, i, at_worker_limit_s(floor_us(r), calls, graphs, r->warm ? !r->warm[i] : 1));
    if (r->warm)
        r->warm[i] = 1;
}

static void step_off(run *r)
{
    if (r->w)
        at_worker_off(r->w);
}

/* Picks the number of copies of the rotated data and launches per replay
** (docs/measurement.md rule 1: the rotated working set is >= 3x L2; ~200 µs per
** replay). Up to SINGLE_GRAPH copies, a replay has at least one launch per
** copy, so no copy is reused while still in L2, within a replay or across
** two. Past that (tiny calls: a norm row of a few KiB) the copies are split
** into `groups` groups of `launches` copies, one graph per group, and
** successive replays (of any contestant) take successive groups: a group
** is used again only after every other group was read, >= 1.5x L2 later.
** Screening (a measurement below full reps: the strategy's cheap look,
** time_screen) in a single graph replays a shorter one: the fewest whole
** passes over the copies that last SCREEN_US, so every launch still reads a
** cold copy but the graph is cheaper to capture and each replay shorter
** (1x2048x5120 on the H200: 9 launches instead of 45). With several groups
** there is no shorter graph: each is needed to keep the copies cold. */
#define SINGLE_GRAPH 4096
#define SCREEN_US 40.0
#define KEEP_SCREEN_NODES 65536 /* kernel nodes of kept screening graphs, at most */
int at_search_plan_timing(run *r, size_t wbytes)
{
    at_search_result *res = r->res;
    size_t freeb = 0, total = 0;
    int64_t l2 = res->dev.l2_bytes > 0 ? res->dev.l2_bytes : (64 << 20);
    int64_t c64 = (3 * l2 + (int64_t)wbytes - 1) / (int64_t)wbytes;
    int c = c64 > r->op->max_copies ? r->op->max_copies : (int)c64;
    if (c < 2)
        c = 2;
    r->gpu->cu.cuMemGetInfo_(&freeb, &total);
    while (c > 2 && (double)c * (double)wbytes > 0.6 * (double)freeb)
        c--;
    if ((double)c * (double)wbytes > 0.8 * (double)freeb)
        return at_fail(AT_ERR_CUDA, "cuda: %s of %.0f MiB do not fit twice in %.0f MiB free", r->op->copy_what,
                       (double)wbytes / 1048576.0, (double)freeb / 1048576.0);
    double est_us = (double)wbytes / (res->dev.read_gbps * 1e3) + res->dev.empty_us;
    int launches = (int)ceil(200.0 / est_us);
    if (c <= SINGLE_GRAPH) {
        if (launches < c)
            launches = c;
        if (launches > 1000)
            launches = 1000;
        launches = (launches + c - 1) / c * c; /* a multiple of c, >= c */
        r->groups = 1;
        r->screen_launches = c;
        while (r->screen_launches < launches && r->screen_launches * est_us < SCREEN_US)
            r->screen_launches += c;
    } else {
        if (launches > 1000)
            launches = 1000;
        if (launches < 1)
            launches = 1;
        r->groups = (c + launches - 1) / launches;
        c = r->groups * launches;
        r->screen_launches = launches;
    }
    r->copies = c;
    res->copies = c;
    res->groups = r->groups;
    res->working_set_mib = (double)c * (double)wbytes / 1048576.0;
    res->launches = launches;
    res->screen_launches = r->screen_launches;
    return AT_OK;
}

static at_contestant row_contestant(run *r, int i)
{
    at_search_row *row = &r->res->rows[i];
    at_contestant c = {.baseline = -1};
    CUfunction fn = NULL;
    r->gpu->cu.cuModuleGetFunction_(&fn, r->mods[i], at_spec_strategy_kernel(r->spec, row->cand.strategy));
    c.kernel.fn = fn;
    memcpy(c.kernel.grid, row->cand.grid, sizeof c.kernel.grid);
    memcpy(c.kernel.block, row->cand.block, sizeof c.kernel.block);
    c.kernel.smem = row->cand.smem;
    c.kernel.pdl = at_candidate_param(&row->cand, "TP_PDL", 0) != 0;
    return c;
}

static int contest_enqueue(void *arg, int copy)
{
    contest *t = arg;
    return t->r->op->enqueue(t->r->op_state, &t->c, copy);
}

void at_search_contest_free(run *r, contest *t)
{
    for (int i = 0; i < t->ngr; i++)
        at_graph_free(r->gpu, &t->gr[i]);
    free(t->gr);
    t->gr = NULL;
    t->ngr = 0;
}

/* One replay of t, on the next copy group: µs per launch. */
static int contest_replay(run *r, contest *t, double *us)
{
    int g = (int)(r->turn++ % (unsigned)t->ngr);
    return at_graph_time(r->gpu, &t->gr[g], us);
}

/* Captures c's graphs, `groups` of `launches` each (the full ones: one
** per copy group; a screening one: 1 of r->screen_launches), into *t and
** replays each once (warm-up: a graph's first launch uploads it), in turn
** order, so the next replay finds the group read longest ago. */
static int contest_build(run *r, const at_contestant *c, int groups, int launches, contest *t)
{
    int rc = AT_OK;
    double us;
    memset(t, 0, sizeof *t);
    t->r = r;
    t->c = *c;
    if (!(t->gr = calloc((size_t)groups, sizeof *t->gr)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    double t0 = now_s();
    for (int g = 0; g < groups && rc == AT_OK; g++, t->ngr++)
        rc = at_graph_build(r->gpu, contest_enqueue, t, g * launches, r->copies, launches, &t->gr[g]);
    for (int g = 0; g < groups && rc == AT_OK; g++)
        rc = contest_replay(r, t, &us);
    r->res->t_graph += now_s() - t0; /* the first replay uploads the graph: counted here */
    r->res->ngraphs += groups;
    return rc;
}

static int contest_build_full(run *r, const at_contestant *c, contest *t)
{
    return contest_build(r, c, r->groups, r->res->launches, t);
}

/* Replays t and the `nb` contests base[] `reps` times, alternating
** (docs/measurement.md rule 3); per-launch µs into cand[] and bt[b][]. */
static int replay_interleaved(run *r, contest *t, contest *base, int nb, int reps, double *cand, double **bt)
{
    int rc = AT_OK;
    for (int i = 0; i < reps && rc == AT_OK; i++) {
        rc = contest_replay(r, t, &cand[i]);
        for (int b = 0; b < nb && rc == AT_OK; b++)
            rc = contest_replay(r, &base[b], &bt[b][i]);
    }
    return rc;
}

/* A fresh full-precision contest for c against the first nb baselines. */
static int time_interleaved(run *r, const at_contestant *c, int reps, double *cand, int nb, double **base)
{
    contest t;
    int rc = contest_build_full(r, c, &t); /* and warms it up */
    if (rc == AT_OK)
        rc = replay_interleaved(r, &t, r->base, nb, reps, cand, base);
    at_search_contest_free(r, &t);
    return rc;
}

/* Graphs of a screening contest: one short graph, or the full groups when
** there is no shorter one. */
static int screen_groups(const run *r)
{
    return r->screen_launches < r->res->launches ? 1 : r->groups;
}

/* A screening of row i: its screening graphs (kept in r->screen when there
** is room, built now otherwise) replayed `reps` times, alone. Screening only
** ranks candidates among themselves, for the strategy; every measurement at
** full reps, and the final round that decides the winner, alternates with
** the baseline (docs/measurement.md rule 3). Cold reads hold the same: each replay is
** whole passes over the copies. */
static int time_screen(run *r, int i, const at_contestant *c, int reps, double *cand)
{
    contest tmp, *t = r->screen ? &r->screen[i] : &tmp;
    int rc = AT_OK;
    if (!r->screen || t->ngr == 0)
        rc = contest_build(r, c, screen_groups(r), r->screen_launches, t);
    for (int k = 0; k < reps && rc == AT_OK; k++)
        rc = contest_replay(r, t, &cand[k]);
    if (!r->screen || rc != AT_OK)
        at_search_contest_free(r, t);
    return rc;
}

static void set_row_stats(at_search_row *row, double *v, int n, double bytes)
{
    at_stats(v, n, &row->trial.us, &row->trial.us_min, &row->trial.us_max);
    row->gbps = bytes / (row->trial.us * 1e3);
}

/* Phase: check the op's own baselines (a wrong one is a harness bug), then
** load each compiled candidate, run it once on poisoned output, record the
** wrong ones (never timed). */
int at_search_phase_verify(run *r)
{
    at_search_result *res = r->res;
    double t0 = now_s();
    int rc = AT_OK, done = 0, total = 0;
    r->mods = calloc((size_t)res->nrows, sizeof *r->mods);
    r->warm = calloc((size_t)res->nrows, 1);
    if (!r->mods || !r->warm)
        return at_fail(AT_ERR_NOMEM, "out of memory");
    for (int b = 0; r->op->check_baselines && b < res->nbaselines; b++) {
        at_contestant c = {.baseline = b};
        at_op_check ck;
        if ((rc = r->op->check(r->op_state, &c, &ck)) != AT_OK)
            return rc;
        if (ck.wrong)
            return at_fail(AT_ERR_HARNESS, "harness error: the %s baseline fails the correctness gate: %s",
                           res->baselines[b].strategy, ck.reason);
    }
    for (int i = 0; i < res->nrows; i++)
        total += r->jobs[i].ok && res->rows[i].trial.state == AT_TRIAL_OK;
    for (int i = 0; i < res->nrows && rc == AT_OK && !interrupted(r->o); i++) {
        at_search_row *row = &res->rows[i];
        at_op_check ck;
        /* not compiled, spills, or decided before (by an earlier worker, or
        ** its parent: crashed, timeout) */
        if (!r->jobs[i].ok || row->trial.state != AT_TRIAL_OK)
            continue;
        at_progress_update(r->pg, "verify", ++done, total, NULL);
        if (r->verified && r->verified[i]) { /* correct in an earlier worker: load only */
            rc = at_gpu_check(r->gpu, r->gpu->cu.cuModuleLoadData_(&r->mods[i], r->jobs[i].cubin),
                              "cuModuleLoadData");
            continue;
        }
        step_on(r, i, 1, 0); /* the first launch of its module */
        CUresult cr = r->gpu->cu.cuModuleLoadData_(&r->mods[i], r->jobs[i].cubin);
        if (cr != CUDA_SUCCESS) {
            rc = at_gpu_check(r->gpu, cr, "cuModuleLoadData");
            break;
        }
        at_contestant c = row_contestant(r, i);
        rc = r->op->check(r->op_state, &c, &ck);
        row->trial.rel_err = ck.err;
        if (rc == AT_ERR_CUDA_STICKY)
            break; /* the context is gone: the parent records the candidate in flight
                   ** as crashed and starts a fresh worker */
        step_off(r);
        if (rc != AT_OK) {
            /* a launch the driver refused (too many registers for the
            ** block, ...): this candidate's fault, not the run's */
            row->trial.state = AT_TRIAL_CRASHED;
            copy_str(row->trial.reason, sizeof row->trial.reason, at_errmsg());
            res->ncrashed++;
            at_search_store_trial(r, row);
            rc = AT_OK;
            continue;
        }
        if (ck.wrong) {
            row->trial.state = AT_TRIAL_WRONG;
            copy_str(row->trial.reason, sizeof row->trial.reason, ck.reason);
            res->nwrong++;
            at_search_store_trial(r, row);
            continue;
        }
        res->ncorrect++;
        at_search_send_row(r, i);
    }
    at_progress_end(r->pg);
    res->t_verify = now_s() - t0;
    return rc;
}

/* The strategy's measure callback (strategy.h): one row timed with `reps`
** replays, each alternating with one of baseline 0 (time_interleaved).
** A row that cannot be timed is a result (crashed, *us = INFINITY); a
** sticky CUDA error or an interrupt stops the search. The row keeps its
** most precise time; one below full_reps is stored with a reason that says
** so (trials in state ok are never reused to skip a measurement: only
** failed ones are, see phase_compile). */
typedef struct timing {
    run *r;
    const int *rows;   /* strategy index -> row index */
    double *cand, *base;
    int cap;           /* room in cand and base */
    int calls, total;  /* progress: calls made, calls expected */
    double best_us;
    int best_reps;
    char best[64];
} timing;

static int measure_row(void *arg, int k, int reps, double *us)
{
    timing *t = arg;
    run *r = t->r;
    at_search_result *res = r->res;
    at_search_row *row = &res->rows[t->rows[k]];
    double med, lo, hi;
    int rc;
    if (interrupted(r->o))
        return at_fail(AT_ERR_INTERRUPTED, "interrupted");
    if (reps > t->cap) {
        double *c = realloc(t->cand, (size_t)reps * sizeof *c);
        if (c)
            t->cand = c;
        double *b = realloc(t->base, (size_t)reps * sizeof *b);
        if (b)
            t->base = b;
        if (!c || !b)
            return at_fail(AT_ERR_NOMEM, "out of memory");
        t->cap = reps;
    }
    if (++t->calls >= t->total) /* more calls than estimated: never a finished line early */
        t->total = t->calls + 1;
    if (row->trial.state != AT_TRIAL_OK) {
        /* it crashed in an earlier call of this search (its screening time
        ** may still be in trial.us): not launched again, never a contender */
        *us = INFINITY;
        at_progress_update(r->pg, "time", t->calls, t->total, t->best);
        return AT_OK;
    }
    if (row->trial.us > 0 && row->reps >= reps) {
        /* timed at this precision by an earlier worker (the last one died
        ** on another candidate): its stored result stands */
        *us = row->trial.us;
        at_progress_update(r->pg, "time", t->calls, t->total, t->best);
        return AT_OK;
    }
    at_contestant c = row_contestant(r, t->rows[k]);
    if (reps < res->full_reps) {
        int kept = r->screen && r->screen[t->rows[k]].ngr > 0;
        step_on(r, t->rows[k], (double)(screen_groups(r) + reps) * r->screen_launches, kept ? 0 : screen_groups(r));
        rc = time_screen(r, t->rows[k], &c, reps, t->cand);
    } else {
        step_on(r, t->rows[k], (double)(r->groups + reps) * res->launches * 2, r->groups);
        rc = time_interleaved(r, &c, reps, t->cand, 1, &t->base);
    }
    if (rc == AT_ERR_CUDA_STICKY)
        return rc; /* the context is gone: the parent records the candidate in
                   ** flight as crashed and a fresh worker goes on */
    step_off(r);
    if (rc != AT_OK) {
        row->trial.state = AT_TRIAL_CRASHED;
        copy_str(row->trial.reason, sizeof row->trial.reason, at_errmsg());
        res->ncrashed++;
        at_search_store_trial(r, row);
        at_progress_update(r->pg, "time", t->calls, t->total, t->best);
        *us = INFINITY;
        return AT_OK;
    }
    if (reps >= row->reps) {
        set_row_stats(row, t->cand, reps, res->bytes); /* sorts cand */
        row->reps = reps;
        med = row->trial.us;
        if (reps < res->full_reps)
            snprintf(row->trial.reason, sizeof row->trial.reason,
                     "screened: median of %d replay%s of %d launches, alone (%s; full: %d of %d, alternated)",
                     reps, reps == 1 ? "" : "s", r->screen_launches, res->search, res->full_reps, res->launches);
        else
            row->trial.reason[0] = '\0';
        at_search_store_trial(r, row);
    } else {
        at_stats(t->cand, reps, &med, &lo, &hi);
    }
    *us = med;
    if (reps > t->best_reps || (reps == t->best_reps && med < t->best_us)) { /* the most precise best */
        t->best_reps = reps;
        t->best_us = med;
        snprintf(t->best, sizeof t->best, "best %.2f us (median of %d)", med, reps);
    }
    at_progress_update(r->pg, "time", t->calls, t->total, t->best);
    return AT_OK;
}

/* Warm start: the rows (indices into rows[0..n)) whose (strategy, params)
** won one of the WARM_SHAPES nearest shapes tuned before, same op, dtype
** and GPU. Advisory: a cache that cannot answer gives no seeds and a
** warning, never a failed run. */
static int warm_seeds(run *r, const int *rows, int n, int *seeds, int *nseeds)
{
    at_search_result *res = r->res;
    at_winner_ref *refs = NULL;
    const char **names = NULL, **params = NULL;
    int nrefs = 0, rc = AT_OK;
    *nseeds = 0;
    if (!r->cache || n == 0)
        return AT_OK;
    refs = malloc(WARM_MAX_REFS * sizeof *refs);
    names = malloc((size_t)n * sizeof *names);
    params = malloc((size_t)n * sizeof *params);
    if (!refs || !names || !params) {
        rc = at_fail(AT_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (at_cache_list_winners(r->cache, &res->key, refs, WARM_MAX_REFS, &nrefs) != AT_OK) {
        at_search_warn(r, at_errmsg());
        goto done;
    }
    for (int k = 0; k < n; k++) {
        names[k] = res->rows[rows[k]].trial.strategy;
        params[k] = res->rows[rows[k]].trial.params;
    }
    rc = at_strategy_warm_seeds(refs, nrefs, &r->o->shape, WARM_SHAPES, names, params, n, seeds, nseeds,
                                &res->nwarm_shapes);
done:
    free(refs);
    free(names);
    free(params);
    return rc;
}

/* Phase: capture the baselines' graphs, then let the strategy (at_search_plan)
** time the correct candidates, each interleaved with baseline 0, seeded
** with the warm-start winners; its ranking goes to at_search_phase_final in r->rank.
** Correct rows it never timed keep state ok, us 0 and a "not measured"
** reason, and are not stored: a later run measures them. */
int at_search_phase_time(run *r)
{
    at_search_result *res = r->res;
    int rc = AT_OK, n = 0, nseeds = 0;
    double t0 = now_s();
    int *rows = malloc((size_t)res->nrows * sizeof *rows), *seeds = malloc((size_t)res->nrows * sizeof *seeds);
    at_candidate *cands = malloc((size_t)res->nrows * sizeof *cands);
    at_strategy_result sr;
    timing t = {.r = r, .best_us = INFINITY};
    memset(&sr, 0, sizeof sr);
    r->rank = malloc((size_t)res->nrows * sizeof *r->rank);
    if (!rows || !seeds || !cands || !r->rank) {
        rc = at_fail(AT_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int b = 0; b < res->nbaselines && rc == AT_OK; b++) {
        at_contestant c = {.baseline = b};
        rc = contest_build_full(r, &c, &r->base[b]); /* and warms it up */
    }
    if (rc != AT_OK)
        goto done;

    for (int i = 0; i < res->nrows; i++)
        if (r->jobs[i].ok && res->rows[i].trial.state == AT_TRIAL_OK) {
            rows[n] = i;
            cands[n++] = res->rows[i].cand;
        }
    /* screening graphs are kept across rungs while they are small */
    if ((int64_t)n * r->screen_launches * screen_groups(r) <= KEEP_SCREEN_NODES &&
        !(r->screen = calloc((size_t)res->nrows, sizeof *r->screen))) {
        rc = at_fail(AT_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = at_search_plan(r, n)) != AT_OK || (rc = warm_seeds(r, rows, n, seeds, &nseeds)) != AT_OK)
        goto done;
    r->so.warm = seeds;
    r->so.nwarm = res->nwarm = nseeds;
    t.rows = rows;
    t.total = at_strategy_estimate_calls(&r->so, n);
    if (t.total < 1)
        t.total = 1;
    if (n > 0) /* nothing correct: at_search_phase_final times the baselines alone */
        rc = at_strategy_run(cands, n, &r->so, measure_row, &t, &sr);
    if (rc == AT_OK && t.calls > 0)
        at_progress_update(r->pg, "time", t.calls, t.calls, t.best); /* the line ends at what was done */
    at_progress_end(r->pg);
    res->nmeasured = sr.nmeasured;
    res->cost_reps = sr.cost;
    for (int k = 0; k < n && sr.reps; k++) {
        at_search_row *row = &res->rows[rows[k]];
        if (sr.reps[k] != 0 || row->trial.state != AT_TRIAL_OK)
            continue;
        res->nnot_measured++;
        if (rc != AT_OK)
            copy_str(row->trial.reason, sizeof row->trial.reason, "not measured (the search stopped)");
        else if (res->budget > 0)
            snprintf(row->trial.reason, sizeof row->trial.reason, "not measured (strategy %s, budget %d)",
                     res->search, res->budget);
        else
            snprintf(row->trial.reason, sizeof row->trial.reason, "not measured (strategy %s)", res->search);
    }
    for (int k = 0; k < sr.nmeasured; k++) { /* most precise first, then fastest */
        int i = rows[sr.rank[k]];
        if (res->rows[i].trial.state == AT_TRIAL_OK && res->rows[i].trial.us > 0)
            r->rank[r->nrank++] = i;
    }
    if (rc == AT_ERR_INTERRUPTED)
        rc = AT_OK; /* at_search_run reports the interrupt; what was measured is stored */
done:
    for (int i = 0; r->screen && i < res->nrows; i++)
        at_search_contest_free(r, &r->screen[i]);
    free(r->screen);
    r->screen = NULL;
    at_strategy_result_free(&sr);
    free(rows);
    free(seeds);
    free(cands);
    free(t.cand);
    free(t.base);
    r->so.warm = NULL;
    r->so.nwarm = 0;
    res->t_time = now_s() - t0;
    return rc;
}

/* Re-times the first FINALISTS of the strategy's ranking (r->rank: the
** most precise measurements first, then the fastest; halving's finalists
** when it keeps more) with 3x the strategy's full replays, each interleaved
** with every baseline; decides the winner by the winner rule (docs/measurement.md) against
** baseline 0. */
int at_search_phase_final(run *r)
{
    at_search_result *res = r->res;
    int reps2 = res->final_reps > 0 ? res->final_reps : 3 * res->reps, nfinal = 0, rc = AT_OK, win = -1;
    int nb = res->nbaselines, want = FINALISTS;
    if (r->so.kind == AT_STRATEGY_HALVING && r->so.finalists > want)
        want = r->so.finalists;
    double *cand = malloc((size_t)reps2 * sizeof(double));
    double *base[AT_MAX_BASELINES] = {NULL};
    double *tmp = malloc((size_t)reps2 * sizeof(double));
    double noise_best = 0.0, t0 = now_s();
    int ntimed = r->rank ? r->nrank : 0;
    int alloc_ok = cand && tmp;
    char best[64] = "";
    for (int b = 0; b < nb; b++)
        alloc_ok &= (base[b] = malloc((size_t)reps2 * (size_t)want * sizeof(double))) != NULL;
    if (!alloc_ok) {
        rc = at_fail(AT_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (want > ntimed)
        want = ntimed;
    for (int f = 0; f < ntimed && nfinal < want && !interrupted(r->o); f++) {
        int i = r->rank[f];
        at_search_row *row = &res->rows[i];
        at_contestant c = row_contestant(r, i);
        double *bslot[AT_MAX_BASELINES];
        at_progress_update(r->pg, "final", nfinal, want, best);
        for (int b = 0; b < nb; b++)
            bslot[b] = base[b] + (size_t)nfinal * (size_t)reps2;
        step_on(r, i, (double)(r->groups + reps2) * res->launches * (1 + nb) + r->copies + res->launches,
                r->groups);
        if ((rc = time_interleaved(r, &c, reps2, cand, nb, bslot)) != AT_OK)
            goto done; /* sticky: the parent blames the candidate in flight */
        memcpy(tmp, cand, (size_t)reps2 * sizeof(double));
        set_row_stats(row, tmp, reps2, res->bytes); /* sorts tmp */
        row->reps = reps2;
        row->trial.reason[0] = '\0';
        double noise = 0.5 * (at_percentile(tmp, reps2, 0.9) - at_percentile(tmp, reps2, 0.1));
        double s_us = 0.0;
        contest t = {.r = r, .c = c};
        rc = at_stream_time(r->gpu, contest_enqueue, &t, r->copies, res->launches, &s_us);
        if (rc == AT_ERR_CUDA_STICKY)
            goto done;
        if (rc == AT_OK)
            row->trial.stream_us = s_us;
        rc = AT_OK;
        step_off(r);
        row->final = 1;
        at_search_store_trial(r, row);
        if (win < 0 || row->trial.us < res->rows[win].trial.us) {
            win = i;
            noise_best = noise;
            snprintf(best, sizeof best, "best %.2f us (median of %d)", row->trial.us, reps2);
        }
        nfinal++;
    }
    if (nfinal > 0)
        at_progress_update(r->pg, "final", nfinal, nfinal, best);
    at_progress_end(r->pg);
    res->nfinal = nfinal;
    for (int b = 0; b < nb; b++) {
        at_search_baseline *bl = &res->baselines[b];
        int n = nfinal * reps2;
        if (nfinal == 0) { /* nothing timed: the baselines alone, alternating */
            n = reps2;
            if (b == 0)
                for (int i = 0; i < reps2; i++)
                    for (int k = 0; k < nb; k++)
                        if ((rc = contest_replay(r, &r->base[k], &base[k][i])) != AT_OK)
                            goto done;
        }
        at_stats(base[b], n, &bl->us, &bl->us_min, &bl->us_max); /* sorts base[b] */
        if (b == 0 && nfinal > 0) {
            double base_noise = 0.5 * (at_percentile(base[0], n, 0.9) - at_percentile(base[0], n, 0.1));
            if (noise_best < base_noise)
                noise_best = base_noise;
        }
        at_stream_time(r->gpu, contest_enqueue, &r->base[b], r->copies, res->launches, &bl->stream_us);
        bl->gbps = bl->us > 0 ? res->bytes / (bl->us * 1e3) : 0.0;
    }
    res->base_us = res->baselines[0].us;
    res->base_min = res->baselines[0].us_min;
    res->base_max = res->baselines[0].us_max;
    res->base_stream_us = res->baselines[0].stream_us;
    for (int i = 0; i < res->nrows; i++)
        if (res->rows[i].trial.state == AT_TRIAL_OK && res->rows[i].trial.us > 0) {
            at_search_row *row = &res->rows[i];
            row->ratio = res->base_us / row->trial.us;
            if (res->dev.read_gbps > 0 && row->gbps > res->dev.read_gbps * HARNESS_SLACK) {
                res->harness_errors++;
                snprintf(row->trial.reason, sizeof row->trial.reason,
                         "harness error: %.0f GB/s is above the read ceiling %.0f GB/s", row->gbps,
                         res->dev.read_gbps);
                at_search_store_trial(r, row);
                if (i == win)
                    win = -1;
            }
        }
    /* our own baselines answer to the ceiling too (cuBLAS is left as before) */
    for (int b = 0; r->op->check_baselines && b < nb; b++)
        if (res->dev.read_gbps > 0 && res->baselines[b].gbps > res->dev.read_gbps * HARNESS_SLACK) {
            res->harness_errors++;
            at_progress_end(r->pg);
            fprintf(stderr, "harness error: the %s baseline's %.0f GB/s is above the read ceiling %.0f GB/s\n",
                    res->baselines[b].strategy, res->baselines[b].gbps, res->dev.read_gbps);
        }

    /* the winner rule: beat baseline 0 by more than the noise */
    at_winner *w = &res->winner;
    memset(w, 0, sizeof *w);
    w->bytes = res->bytes;
    w->baseline_us = res->base_us;
    w->baseline_min = res->base_min;
    w->baseline_max = res->base_max;
    if (win >= 0 && res->base_us - res->rows[win].trial.us > noise_best) {
        at_search_row *row = &res->rows[win];
        int j = win;
        copy_str(w->strategy, sizeof w->strategy, row->trial.strategy);
        copy_str(w->kernel, sizeof w->kernel, at_spec_strategy_kernel(r->spec, row->cand.strategy));
        copy_str(w->template_name, sizeof w->template_name,
                 at_spec_strategy_template(r->spec, row->cand.strategy));
        copy_str(w->params, sizeof w->params, row->trial.params);
        w->us = row->trial.us;
        w->us_min = row->trial.us_min;
        w->us_max = row->trial.us_max;
        memcpy(w->grid, row->cand.grid, sizeof w->grid);
        memcpy(w->block, row->cand.block, sizeof w->block);
        w->smem = row->cand.smem;
        if ((w->cubin = malloc(r->jobs[j].cubin_size)) != NULL) {
            memcpy(w->cubin, r->jobs[j].cubin, r->jobs[j].cubin_size);
            w->cubin_size = r->jobs[j].cubin_size;
            at_sha256_hex(w->cubin, w->cubin_size, w->cubin_sha);
        }
    } else {
        if ((rc = r->op->baseline_winner(r->op_state, w)) != AT_OK)
            goto done;
        w->us = res->base_us;
        w->us_min = res->base_min;
        w->us_max = res->base_max;
    }
    w->speedup = w->us > 0 ? res->base_us / w->us : 1.0;
    /* the answer replaces the problem's earlier ones (another spec,
    ** templates, components), so the runtime cannot serve a stale row */
    if (!interrupted(r->o) && r->cache &&
        (rc = at_cache_replace_winners(r->cache, &res->key, w, &res->nsuperseded)) != AT_OK)
        goto done;
done:
    free(cand);
    for (int b = 0; b < nb; b++)
        free(base[b]);
    free(tmp);
    res->t_time += now_s() - t0;
    return rc;
}

/* The device identity and ceilings: from the cache when measured before. */
int at_search_device_ceilings(run *r)
{
    at_search_result *res = r->res;
    int found = 0, rc;
    if ((rc = at_cache_get_device(r->cache, &res->dev, &found)) != AT_OK)
        return rc;
    if (found && res->dev.read_gbps > 0)
        return AT_OK;
    at_progress_update(r->pg, "ceiling", 0, 1, "measuring read/copy bandwidth and an empty kernel");
    if ((rc = at_bench_ceilings(r->gpu)) != AT_OK)
        return rc;
    at_progress_update(r->pg, "ceiling", 1, 1, NULL);
    res->dev = r->gpu->info;
    return at_cache_put_device(r->cache, &res->dev);
}
