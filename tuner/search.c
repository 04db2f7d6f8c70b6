/*
** search.c — the tuning pipeline for one (op, dtype, shape) on one GPU:
** spec -> candidates -> NVRTC -> correctness gate -> timing against the
** op's baselines (which candidates, how long: strategy.h) -> cache. What
** an op computes, reads and launches is in the op table (op.h); this file
** is op-independent. Invariant: every result
** is written to the cache as soon as it is known, so an interruption loses
** nothing already measured, and a winner is stored only when it beats
** baseline 0 (cuBLAS, or the naive fused norm) beyond the measured noise.
** The GPU phases run in a worker process (worker.h, gpu_phases): a
** candidate that kills its CUDA context or hangs is recorded crashed /
** timeout and a fresh worker goes on; this process never initialises CUDA.
*/
#include "bench.h"
#include "op.h"
#include "progress.h"
#include "strategy.h"
#include "worker.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FINALISTS 5   /* re-timed in the final round (more if halving keeps more) */
#define WARM_SHAPES 4 /* warm start: winners of this many nearest tuned shapes */
#define WARM_MAX_REFS 1024
#define HARNESS_SLACK 1.03 /* allowed above the measured read ceiling */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int interrupted(const at_search_opts *o) { return o->interrupt && *o->interrupt; }

/* sha256 over the spec and every file that can change a compiled kernel:
** each template the spec names and the shared headers. [CACHE_KEY] */
static int space_digest(at_spec *spec, at_templates *tpl, const char *const *extra, char hex[65])
{
    size_t cap = 80, len = 0;
    char *buf;
    const char *src;
    int rc;
    int ns = at_spec_nstrategies(spec), nh = at_templates_nheaders(tpl);
    for (int i = 0; i < ns; i++) {
        if ((rc = at_templates_source(tpl, at_spec_strategy_template(spec, i), &src)) != AT_OK)
            return rc;
        cap += strlen(src) + 256;
    }
    for (int i = 0; extra && extra[i]; i++) {
        if ((rc = at_templates_source(tpl, extra[i], &src)) != AT_OK)
            return rc;
        cap += strlen(src) + 256;
    }
    for (int i = 0; i < nh; i++)
        cap += strlen(at_templates_header_source(tpl, i)) + 256;
    if (!(buf = malloc(cap)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    len += (size_t)snprintf(buf + len, cap - len, "spec %s", at_spec_sha256(spec));
    for (int i = 0; i < ns; i++) {
        at_templates_source(tpl, at_spec_strategy_template(spec, i), &src);
        len += (size_t)snprintf(buf + len, cap - len, "\n--template %s\n%s",
                                at_spec_strategy_template(spec, i), src);
    }
    for (int i = 0; extra && extra[i]; i++) { /* the op's baselines (none for gemv) */
        at_templates_source(tpl, extra[i], &src);
        len += (size_t)snprintf(buf + len, cap - len, "\n--baseline %s\n%s", extra[i], src);
    }
    for (int i = 0; i < nh; i++)
        len += (size_t)snprintf(buf + len, cap - len, "\n--header %s\n%s",
                                at_templates_header_name(tpl, i), at_templates_header_source(tpl, i));
    at_sha256_hex(buf, len, hex);
    free(buf);
    return AT_OK;
}

static void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

/* The first line of a compile log that says "error", for the trial reason. */
static void first_error(const char *log, char *buf, size_t n)
{
    const char *p = log ? strstr(log, "error") : NULL;
    const char *start = p, *end;
    if (!p) {
        copy_str(buf, n, "compile failed");
        return;
    }
    while (start > log && start[-1] != '\n')
        start--;
    end = strchr(p, '\n');
    snprintf(buf, n, "%.*s", (int)(end ? end - start : (long)strlen(start)), start);
}

static int cmp_row_us(const void *a, const void *b)
{
    const at_search_row *x = a, *y = b;
    int tx = x->trial.state == AT_TRIAL_OK && x->trial.us > 0;
    int ty = y->trial.state == AT_TRIAL_OK && y->trial.us > 0;
    if (tx != ty)
        return ty - tx; /* timed rows first */
    if (tx && x->final != y->final)
        return y->final - x->final; /* the final round's, then the more precise */
    if (tx && x->reps != y->reps)
        return x->reps > y->reps ? -1 : 1;
    if (tx)
        return (x->trial.us > y->trial.us) - (x->trial.us < y->trial.us);
    return (int)x->trial.state - (int)y->trial.state;
}

/* p-th percentile (0..1) of sorted v[0..n). */
static double percentile(const double *v, int n, double p)
{
    double pos = p * (n - 1);
    int i = (int)pos;
    if (i >= n - 1)
        return v[n - 1];
    return v[i] + (pos - i) * (v[i + 1] - v[i]);
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
    unsigned turn;        /* replays so far: the next replay uses group turn % groups */
    contest base[AT_MAX_BASELINES];
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

static void compile_progress(void *arg, int done, int total)
{
    run *r = arg;
    at_progress_update(r->pg, "compile", done, total, NULL);
}

/* A warning on stderr, above a live progress line if there is one. */
static void warn(run *r, const char *msg)
{
    if (r->pg && r->o->progress != AT_PROGRESS_OFF)
        at_progress_note(r->pg, "warning: %s", msg);
    else
        fprintf(stderr, "warning: %s\n", msg);
}

enum { PH_NONE, PH_VERIFY, PH_TIME, PH_FINAL, PH_END };
enum { MSG_ROW = AT_WMSG_USER, MSG_END };

/* MSG_ROW (row = index): a row's outcome as soon as it is known, with the
** run's verdict counters (a fresh worker inherits the parent's, so they
** stay cumulative over workers). */
typedef struct row_msg {
    int32_t phase, ncorrect, nwrong, ncrashed, ntimeout, final, reps;
    at_trial trial;
    double gbps, ratio;
} row_msg;

/* MSG_END: the worker's status and everything else of its result (rows
** and the winner's cubin pointer zeroed), then winner.cubin_size bytes. */
typedef struct end_msg {
    int32_t rc;
    char err[1024];
    at_search_result res;
} end_msg;

static void send_row(run *r, int i)
{
    at_search_result *res = r->res;
    row_msg m;
    if (!r->w || i < 0 || i >= res->nrows)
        return;
    memset(&m, 0, sizeof m);
    m.phase = r->phase;
    m.ncorrect = res->ncorrect;
    m.nwrong = res->nwrong;
    m.ncrashed = res->ncrashed;
    m.ntimeout = res->ntimeout;
    m.final = res->rows[i].final;
    m.reps = res->rows[i].reps;
    m.trial = res->rows[i].trial;
    m.gbps = res->rows[i].gbps;
    m.ratio = res->rows[i].ratio;
    at_worker_send(r->w, MSG_ROW, i, &m, sizeof m);
}

static void store_trial(run *r, at_search_row *row)
{
    if (r->cache && at_cache_put_trial(r->cache, &r->res->key, &row->trial) != AT_OK)
        warn(r, at_errmsg());
    send_row(r, (int)(row - r->res->rows)); /* in a worker: the parent's table too */
}

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
** (DESIGN.md rule 1: the rotated working set is >= 3x L2; ~200 µs per
** replay). Up to SINGLE_GRAPH copies, a replay has at least one launch per
** copy, so no copy is reused while still in L2, within a replay or across
** two. Past that (tiny calls: a norm row of a few KiB) the copies are split
** into `groups` groups of `launches` copies, one graph per group, and
** successive replays (of any contestant) take successive groups: a group
** is used again only after every other group was read, >= 1.5x L2 later. */
#define SINGLE_GRAPH 4096
static int plan_timing(run *r, size_t wbytes)
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
    } else {
        if (launches > 1000)
            launches = 1000;
        if (launches < 1)
            launches = 1;
        r->groups = (c + launches - 1) / launches;
        c = r->groups * launches;
    }
    r->copies = c;
    res->copies = c;
    res->groups = r->groups;
    res->working_set_mib = (double)c * (double)wbytes / 1048576.0;
    res->launches = launches;
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

static void contest_free(run *r, contest *t)
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

/* Captures c's graphs (one per copy group) into *t and replays each once
** (warm-up: a graph's first launch uploads it), in turn order, so the
** next replay finds the group read longest ago. */
static int contest_build(run *r, const at_contestant *c, contest *t)
{
    int rc = AT_OK;
    double us;
    memset(t, 0, sizeof *t);
    t->r = r;
    t->c = *c;
    if (!(t->gr = calloc((size_t)r->groups, sizeof *t->gr)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    for (int g = 0; g < r->groups && rc == AT_OK; g++, t->ngr++)
        rc = at_graph_build(r->gpu, contest_enqueue, t, g * r->res->launches, r->copies, r->res->launches,
                            &t->gr[g]);
    for (int g = 0; g < r->groups && rc == AT_OK; g++)
        rc = contest_replay(r, t, &us);
    return rc;
}

/* Replays the candidate's graph and the `nb` baselines' `reps` times,
** alternating (DESIGN.md rule 3); per-launch µs into cand[] and base[b][]. */
static int time_interleaved(run *r, const at_contestant *c, int reps, double *cand, int nb, double **base)
{
    contest t;
    int rc = contest_build(r, c, &t); /* and warms it up */
    for (int i = 0; i < reps && rc == AT_OK; i++) {
        rc = contest_replay(r, &t, &cand[i]);
        for (int b = 0; b < nb && rc == AT_OK; b++)
            rc = contest_replay(r, &r->base[b], &base[b][i]);
    }
    contest_free(r, &t);
    return rc;
}

static void set_row_stats(at_search_row *row, double *v, int n, double bytes)
{
    at_stats(v, n, &row->trial.us, &row->trial.us_min, &row->trial.us_max);
    row->gbps = bytes / (row->trial.us * 1e3);
}

/* The timing phase's search for n candidates, in at_strategy_choose's
** order (--strategy, --effort's, the spec's search_strategy, normal's;
** --budget), into r->so and the result's description. The random choices
** derive from the key, so one key always searches the same way. */
static int plan_search(run *r, int n)
{
    at_search_result *res = r->res;
    const at_search_opts *o = r->o;
    const char *from = NULL;
    char seed[17];
    int rc = at_strategy_choose(o->strategy, o->effort, at_spec_search_strategy(r->spec), o->budget, n,
                                res->reps, &r->so, &from);
    if (rc != AT_OK)
        return rc;
    copy_str(res->search, sizeof res->search, at_strategy_name(r->so.kind));
    copy_str(res->search_from, sizeof res->search_from, from);
    copy_str(res->effort, sizeof res->effort, o->effort ? o->effort : "normal");
    res->budget = r->so.kind == AT_STRATEGY_EXHAUSTIVE || r->so.budget >= n ? 0 : r->so.budget;
    res->full_reps = r->so.reps;
    res->final_reps = 3 * r->so.reps;
    snprintf(seed, sizeof seed, "%.16s", res->key_sha);
    r->so.rng_seed = strtoull(seed, NULL, 16);
    return AT_OK;
}

/* Phase: compile every live candidate (skipping ones the cache already
** knows failed), record compile failures; a candidate that spills is not
** timed unless the spec says allow_spills = true. */
static int phase_compile(run *r)
{
    at_search_result *res = r->res;
    const at_search_opts *o = r->o;
    int rc, njobs = 0;
    at_compile_job *list;
    int *idx;
    double t0 = now_s();
    res->spills_allowed = at_spec_allow_spills(r->spec);
    list = calloc((size_t)res->nrows, sizeof *list);
    idx = calloc((size_t)res->nrows, sizeof *idx);
    r->jobs = calloc((size_t)res->nrows, sizeof *r->jobs);
    if (!list || !idx || !r->jobs) {
        free(list);
        free(idx);
        return at_fail(AT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < res->nrows; i++) {
        at_search_row *row = &res->rows[i];
        at_trial stored;
        int found = 0;
        const char *src;
        if (row->trial.state == AT_TRIAL_PRUNED)
            continue;
        if (r->cache && !o->force &&
            at_cache_get_trial(r->cache, &res->key, row->trial.strategy, row->trial.params, &stored,
                               &found) == AT_OK &&
            found && stored.state != AT_TRIAL_OK && stored.state != AT_TRIAL_PRUNED) {
            row->trial = stored; /* known bad: not compiled or run again */
            res->nskipped++;
            res->nspills_rejected += stored.state == AT_TRIAL_SPILLS;
            continue;
        }
        if ((rc = at_templates_source(r->tpl, at_spec_strategy_template(r->spec, row->cand.strategy),
                                      &src)) != AT_OK) {
            free(list);
            free(idx);
            return rc;
        }
        at_compile_job *j = &list[njobs];
        j->tpl = r->tpl;
        j->name = at_spec_strategy_template(r->spec, row->cand.strategy);
        j->source = src;
        j->arch = res->arch;
        j->dtype = o->dtype;
        j->cubin_dir = r->cubin_dir[0] ? r->cubin_dir : NULL;
        j->stop = o->interrupt;
        size_t len = 0;
        for (int p = 0; p < row->cand.nparams; p++)
            len += (size_t)snprintf(j->options + len, sizeof j->options - len, "%s-D%s=%lld",
                                    p ? " " : "", row->cand.params[p].name,
                                    (long long)row->cand.params[p].value);
        idx[njobs++] = i;
    }
    rc = at_nvrtc_compile_all(list, njobs, o->threads, r->pg ? compile_progress : NULL, r);
    at_progress_end(r->pg); /* an interrupted compile leaves its line open */
    for (int k = 0; k < njobs; k++) {
        at_search_row *row = &res->rows[idx[k]];
        r->jobs[idx[k]] = list[k];
        row->trial.regs = list[k].regs;
        row->trial.spill_bytes = list[k].spill_bytes;
        row->trial.smem_bytes = list[k].smem_bytes;
        if (list[k].ok) {
            res->ncompiled++;
            res->ncompile_cached += list[k].cached;
            if (list[k].spill_bytes > 0) {
                res->nspills++;
                if (!res->spills_allowed) { /* [SPILLS] report.c explains the state */
                    row->trial.state = AT_TRIAL_SPILLS;
                    snprintf(row->trial.reason, sizeof row->trial.reason,
                             "spills %d bytes of registers to local memory: not timed (the spec may set "
                             "allow_spills = true)",
                             list[k].spill_bytes);
                    res->nspills_rejected++;
                    if (!o->dry_run)
                        store_trial(r, row);
                }
            }
        } else if (!list[k].done) {
            copy_str(row->trial.reason, sizeof row->trial.reason, "not compiled: interrupted");
        } else if (rc == AT_OK) {
            res->ncompile_failed++;
            row->trial.state = AT_TRIAL_COMPILE_FAIL;
            first_error(list[k].log, row->trial.reason, sizeof row->trial.reason);
            if (!o->dry_run)
                store_trial(r, row);
        }
    }
    free(list);
    free(idx);
    res->t_compile = now_s() - t0;
    if (rc == AT_OK) { /* what the timing phase will do, for a dry run's report too */
        int n = 0;
        for (int i = 0; i < res->nrows; i++)
            n += r->jobs[i].ok && res->rows[i].trial.state == AT_TRIAL_OK;
        rc = plan_search(r, n);
    }
    return rc;
}

/* Phase: check the op's own baselines (a wrong one is a harness bug), then
** load each compiled candidate, run it once on poisoned output, record the
** wrong ones (never timed). */
static int phase_verify(run *r)
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
            store_trial(r, row);
            rc = AT_OK;
            continue;
        }
        if (ck.wrong) {
            row->trial.state = AT_TRIAL_WRONG;
            copy_str(row->trial.reason, sizeof row->trial.reason, ck.reason);
            res->nwrong++;
            store_trial(r, row);
            continue;
        }
        res->ncorrect++;
        send_row(r, i);
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
    if (row->trial.us > 0 && row->reps >= reps) {
        /* timed at this precision by an earlier worker (the last one died
        ** on another candidate): its stored result stands */
        *us = row->trial.us;
        at_progress_update(r->pg, "time", t->calls, t->total, t->best);
        return AT_OK;
    }
    at_contestant c = row_contestant(r, t->rows[k]);
    step_on(r, t->rows[k], (double)(r->groups + reps) * res->launches * 2, r->groups);
    rc = time_interleaved(r, &c, reps, t->cand, 1, &t->base);
    if (rc == AT_ERR_CUDA_STICKY)
        return rc; /* the context is gone: the parent records the candidate in
                   ** flight as crashed and a fresh worker goes on */
    step_off(r);
    if (rc != AT_OK) {
        row->trial.state = AT_TRIAL_CRASHED;
        copy_str(row->trial.reason, sizeof row->trial.reason, at_errmsg());
        res->ncrashed++;
        store_trial(r, row);
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
                     "screened: median of %d replays (%s; full precision is %d)", reps, res->search,
                     res->full_reps);
        else
            row->trial.reason[0] = '\0';
        store_trial(r, row);
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
        warn(r, at_errmsg());
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

/* Phase: capture the baselines' graphs, then let the strategy (plan_search)
** time the correct candidates, each interleaved with baseline 0, seeded
** with the warm-start winners; its ranking goes to phase_final in r->rank.
** Correct rows it never timed keep state ok, us 0 and a "not measured"
** reason, and are not stored: a later run measures them. */
static int phase_time(run *r)
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
        rc = contest_build(r, &c, &r->base[b]); /* and warms it up */
    }
    if (rc != AT_OK)
        goto done;

    for (int i = 0; i < res->nrows; i++)
        if (r->jobs[i].ok && res->rows[i].trial.state == AT_TRIAL_OK) {
            rows[n] = i;
            cands[n++] = res->rows[i].cand;
        }
    if ((rc = plan_search(r, n)) != AT_OK || (rc = warm_seeds(r, rows, n, seeds, &nseeds)) != AT_OK)
        goto done;
    r->so.warm = seeds;
    r->so.nwarm = res->nwarm = nseeds;
    t.rows = rows;
    t.total = at_strategy_estimate_calls(&r->so, n);
    if (t.total < 1)
        t.total = 1;
    if (n > 0) /* nothing correct: phase_final times the baselines alone */
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
** with every baseline; decides the winner by the rule in DESIGN.md against
** baseline 0. */
static int phase_final(run *r)
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
        double noise = 0.5 * (percentile(tmp, reps2, 0.9) - percentile(tmp, reps2, 0.1));
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
        store_trial(r, row);
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
            double base_noise = 0.5 * (percentile(base[0], n, 0.9) - percentile(base[0], n, 0.1));
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
                store_trial(r, row);
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
    if (!interrupted(r->o) && r->cache && (rc = at_cache_put_winner(r->cache, &res->key, w)) != AT_OK)
        goto done;
done:
    free(cand);
    for (int b = 0; b < nb; b++)
        free(base[b]);
    free(tmp);
    res->t_time += now_s() - t0;
    return rc;
}

static int make_rows(run *r, const at_problem *pb)
{
    at_search_result *res = r->res;
    at_candidate *cands = NULL;
    int n = 0, rc;
    if ((rc = at_spec_expand(r->spec, pb, &cands, &n)) != AT_OK)
        return rc;
    res->rows = calloc((size_t)(n ? n : 1), sizeof *res->rows);
    if (!res->rows) {
        free(cands);
        return at_fail(AT_ERR_NOMEM, "out of memory");
    }
    res->nrows = res->ncand = n;
    for (int i = 0; i < n; i++) {
        at_search_row *row = &res->rows[i];
        row->cand = cands[i];
        copy_str(row->trial.strategy, sizeof row->trial.strategy,
                 at_spec_strategy_name(r->spec, cands[i].strategy));
        at_candidate_params_string(&cands[i], row->trial.params, sizeof row->trial.params);
        if (cands[i].pruned_by[0]) {
            row->trial.state = AT_TRIAL_PRUNED;
            if (cands[i].prune_reason[0])
                snprintf(row->trial.reason, sizeof row->trial.reason, "%s: %s", cands[i].pruned_by,
                         cands[i].prune_reason);
            else
                copy_str(row->trial.reason, sizeof row->trial.reason, cands[i].pruned_by);
            res->npruned++;
        }
    }
    free(cands);
    if (res->npruned == n)
        return at_fail(AT_ERR_SPEC, "%s: every one of the %d candidates was pruned for shape %s",
                       r->o->spec_path, n, res->key.shape);
    return AT_OK;
}

static void release(run *r)
{
    if (r->gpu) {
        for (int b = 0; b < AT_MAX_BASELINES; b++)
            contest_free(r, &r->base[b]);
        if (r->mods)
            for (int i = 0; i < r->res->nrows; i++)
                if (r->mods[i])
                    r->gpu->cu.cuModuleUnload_(r->mods[i]);
    }
    if (r->op && r->op_state)
        r->op->close(r->op_state); /* before the GPU closes: it frees device memory */
    if (r->jobs)
        for (int i = 0; i < r->res->nrows; i++)
            at_compile_job_clear(&r->jobs[i]);
    free(r->jobs);
    free(r->mods);
    free(r->verified);
    free(r->warm);
    at_cache_close(r->cache);
    at_gpu_close(r->gpu);
    at_templates_free(r->tpl);
    at_spec_free(r->spec);
    free(r->rank);
    at_progress_close(r->pg); /* ends a line left open */
}

/* The device identity and ceilings: from the cache when measured before. */
static int device_ceilings(run *r)
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

/* The GPU phases, in the worker process (gpu_phases forks it): its own
** cache connection and CUDA context; setup, the correctness gate, timing
** and the final round skip what the parent already knows (rows decided or
** timed, `verified`). Every row outcome goes to the parent as it is known
** (store_trial, send_row); at the end every compiled row once more (the
** final round sets ratios without storing), then MSG_END. */
static void gpu_body(at_worker *w, void *arg)
{
    run *r = arg;
    at_search_result *res = r->res;
    at_search_opts wo = *r->o;
    end_msg *m = calloc(1, sizeof *m);
    int rc;
    wo.interrupt = at_worker_stop_flag(w); /* SIGINT or the parent's stop set this (worker.c) */
    r->o = &wo;
    r->w = w;
    if (!m)
        _exit(4);
    if ((rc = at_cache_open(wo.db_path, &r->cache)) != AT_OK || (rc = at_gpu_open(wo.device, 0, &r->gpu)) != AT_OK ||
        (rc = device_ceilings(r)) != AT_OK || (rc = plan_timing(r, r->op->copy_bytes(r->op_state))) != AT_OK ||
        (rc = r->op->setup(r->op_state, r->gpu, r->copies)) != AT_OK)
        goto done;
    r->phase = PH_VERIFY;
    if ((rc = phase_verify(r)) != AT_OK || wo.verify_only)
        goto done;
    /* with nothing correct, the timing still measures the baselines, and
    ** baseline 0 then is the stored answer */
    r->phase = PH_TIME;
    rc = phase_time(r);
    r->phase = PH_FINAL;
    if (rc == AT_OK)
        rc = phase_final(r);
    if (rc == AT_OK && res->harness_errors)
        rc = at_fail(AT_ERR_HARNESS, "harness error: %d measurement(s) above the read ceiling of %.0f GB/s",
                     res->harness_errors, res->dev.read_gbps);
done:
    m->rc = rc;
    if (rc != AT_OK)
        snprintf(m->err, sizeof m->err, "%s", at_errmsg());
    r->phase = PH_END;
    for (int i = 0; r->jobs && i < res->nrows; i++)
        if (r->jobs[i].ok)
            send_row(r, i);
    m->res = *res;
    m->res.rows = NULL;
    m->res.winner.cubin = NULL;
    size_t cb = res->winner.cubin ? res->winner.cubin_size : 0;
    unsigned char *buf = malloc(sizeof *m + cb);
    if (!buf)
        _exit(4);
    m->res.winner.cubin_size = cb;
    memcpy(buf, m, sizeof *m);
    if (cb)
        memcpy(buf + sizeof *m, res->winner.cubin, cb);
    at_worker_send(w, MSG_END, -1, buf, sizeof *m + cb);
    /* no cleanup: the process ends, and with it the context */
}

/* Parent side: a worker's message into the parent's result. */
static void on_msg(void *arg, const at_worker_msg *m)
{
    run *r = arg;
    at_search_result *res = r->res;
    if (m->type == MSG_ROW && m->len == sizeof(row_msg) && m->row >= 0 && m->row < res->nrows) {
        row_msg rm;
        at_search_row *row = &res->rows[m->row];
        memcpy(&rm, m->data, sizeof rm);
        row->trial = rm.trial;
        row->gbps = rm.gbps;
        row->ratio = rm.ratio;
        row->final = rm.final;
        row->reps = rm.reps;
        res->ncorrect = rm.ncorrect;
        res->nwrong = rm.nwrong;
        res->ncrashed = rm.ncrashed;
        res->ntimeout = rm.ntimeout;
        if (rm.phase == PH_VERIFY)
            r->verified[m->row] = 1;
    } else if (m->type == MSG_END && m->len >= sizeof(end_msg)) {
        end_msg *e = malloc(sizeof *e);
        if (!e)
            return;
        memcpy(e, m->data, sizeof *e);
        r->end_seen = 1;
        r->end_rc = e->rc;
        snprintf(r->end_err, sizeof r->end_err, "%s", e->err);
        const at_search_result *w = &e->res;
        res->dev = w->dev;
        res->harness_errors = w->harness_errors;
        res->copies = w->copies;
        res->working_set_mib = w->working_set_mib;
        res->launches = w->launches;
        res->groups = w->groups;
        memcpy(res->baselines, w->baselines, sizeof res->baselines);
        res->base_us = w->base_us;
        res->base_min = w->base_min;
        res->base_max = w->base_max;
        res->base_stream_us = w->base_stream_us;
        res->t_verify = w->t_verify;
        res->t_time = w->t_time;
        /* what the timing phase's strategy did (plan_search, phase_time) */
        memcpy(res->search, w->search, sizeof res->search);
        memcpy(res->search_from, w->search_from, sizeof res->search_from);
        memcpy(res->effort, w->effort, sizeof res->effort);
        res->budget = w->budget;
        res->full_reps = w->full_reps;
        res->final_reps = w->final_reps;
        res->nmeasured = w->nmeasured;
        res->nnot_measured = w->nnot_measured;
        res->nwarm = w->nwarm;
        res->nwarm_shapes = w->nwarm_shapes;
        res->nfinal = w->nfinal;
        res->cost_reps = w->cost_reps;
        at_winner_clear(&res->winner);
        res->winner = w->winner;
        res->winner.cubin = NULL;
        res->winner.cubin_size = 0;
        size_t cb = w->winner.cubin_size;
        if (cb && m->len == sizeof *e + cb && (res->winner.cubin = malloc(cb)) != NULL) {
            memcpy(res->winner.cubin, (const unsigned char *)m->data + sizeof *e, cb);
            res->winner.cubin_size = cb;
        }
        free(e);
    }
}

/* Parent side: the worker died or hung on row i; record it (stored, so
** reruns skip it) and say so. */
static void blame(run *r, int i, const at_worker_outcome *oc)
{
    at_search_result *res = r->res;
    at_search_row *row = &res->rows[i];
    at_cache *c = NULL;
    row->trial.us = row->trial.us_min = row->trial.us_max = 0.0;
    if (oc->how == AT_WORKER_TIMEOUT) {
        row->trial.state = AT_TRIAL_TIMEOUT;
        snprintf(row->trial.reason, sizeof row->trial.reason, "%s", oc->why);
        res->ntimeout++;
    } else {
        row->trial.state = AT_TRIAL_CRASHED;
        /* a sticky error the worker reported, else how the worker ended */
        const char *why = r->end_seen && r->end_rc == AT_ERR_CUDA_STICKY ? r->end_err : oc->why;
        snprintf(row->trial.reason, sizeof row->trial.reason, "%.*s", (int)sizeof row->trial.reason - 1, why);
        res->ncrashed++;
    }
    if (at_cache_open(r->o->db_path, &c) != AT_OK || at_cache_put_trial(c, &res->key, &row->trial) != AT_OK)
        fprintf(stderr, "warning: %s\n", at_errmsg());
    at_cache_close(c);
    if (r->o->progress)
        fprintf(stderr, "\r\033[K%s %s %s: %s; a fresh worker goes on\n", at_trial_state_name(row->trial.state),
                row->trial.strategy, row->trial.params, row->trial.reason);
}

/* Parent side, after each worker: finished (its MSG_END, not a sticky
** error), or lost in a candidate (recorded: a fresh worker goes on), or
** lost outside any candidate (the run fails, unless interrupted). */
static int judge(void *arg, const at_worker_outcome *oc)
{
    run *r = arg;
    at_search_result *res = r->res;
    int rc = AT_WORKER_AGAIN;
    if (r->end_seen && r->end_rc != AT_ERR_CUDA_STICKY)
        rc = r->end_rc == AT_OK ? AT_OK : at_fail(r->end_rc, "%s", r->end_err);
    else if (oc->row >= 0 && oc->row < res->nrows)
        blame(r, oc->row, oc);
    else if (interrupted(r->o))
        rc = AT_OK; /* stopped while winding down: what was stored stays */
    else
        rc = r->end_seen ? at_fail(r->end_rc, "%s", r->end_err)
                         : at_fail(AT_ERR_CUDA, "cuda: the GPU worker failed outside any candidate: %s", oc->why);
    r->end_seen = 0; /* for the next worker */
    r->end_rc = AT_OK;
    r->end_err[0] = '\0';
    return rc;
}

/* The GPU phases with crash isolation: a worker (gpu_body) at a time; when
** one dies or runs past a candidate's deadline (worker.h), the candidate
** in flight is recorded crashed / timeout and a fresh worker, forked from
** this up-to-date parent, goes on where the last one stopped. Each restart
** decides one more candidate, so this ends. This process keeps no SQLite
** connection across the fork and never initialises CUDA. */
static int gpu_phases(run *r)
{
    at_cache_close(r->cache); /* the worker opens its own; blame() opens one when needed */
    r->cache = NULL;
    if (!(r->verified = calloc((size_t)r->res->nrows, 1)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    return at_worker_loop(gpu_body, r, on_msg, r, judge, r, r->o->interrupt, NULL);
}

int at_search_run(const at_search_opts *o, at_search_result *res)
{
    run r = {.o = o, .res = res};
    char opts[160], extra[64] = "";
    double t0 = now_s();
    int rc;

    memset(res, 0, sizeof *res);
    res->dry_run = o->dry_run;
    res->reps = o->reps < 5 ? 5 : o->reps;
    if (!(r.op = at_op_find(o->op)))
        return at_fail(AT_ERR_USAGE, "unknown op '%s'", o->op ? o->op : "");
    if (o->shape.rank != r.op->rank)
        return at_fail(AT_ERR_USAGE, "op %s takes a shape %s", o->op, r.op->shape_form);
    if (o->progress != AT_PROGRESS_OFF) /* NULL on failure: no display */
        at_progress_open(stderr, (at_progress_mode)o->progress, &r.pg);
    if ((rc = at_spec_load(o->spec_path, &r.spec)) != AT_OK) {
        if (rc == AT_ERR_IO) { /* for the CLI an unreadable spec is a spec error (exit 3) */
            char msg[512];
            snprintf(msg, sizeof msg, "%s", at_errmsg());
            rc = at_fail(AT_ERR_SPEC, "%s", msg);
        }
        goto done;
    }
    if (strcmp(at_spec_op(r.spec), o->op) != 0) {
        rc = at_fail(AT_ERR_USAGE, "%s is a spec for op '%s', not '%s'", o->spec_path,
                     at_spec_op(r.spec), o->op);
        goto done;
    }
    if ((rc = at_templates_open(o->templates_root, &r.tpl)) != AT_OK ||
        (rc = space_digest(r.spec, r.tpl, r.op->extra_templates, res->key.space_sha)) != AT_OK)
        goto done;

    /* the device's identity, read in a child: this process must stay free
    ** of CUDA to fork the GPU worker later (worker.h) */
    if (!o->dry_run) {
        if ((rc = at_worker_identity(o->device, &res->dev)) != AT_OK)
            goto done;
        res->arch = 10 * res->dev.cc_major + res->dev.cc_minor;
        /* compiled kernels live beside the db: <dir of db>/cubins */
        const char *slash = strrchr(o->db_path, '/');
        if (slash)
            snprintf(r.cubin_dir, sizeof r.cubin_dir, "%.*s/cubins", (int)(slash - o->db_path), o->db_path);
        else
            snprintf(r.cubin_dir, sizeof r.cubin_dir, "cubins");
    } else {
        res->arch = o->arch > 0 ? o->arch : 90;
        if (o->arch <= 0 && at_worker_identity(o->device, &res->dev) == AT_OK)
            res->arch = 10 * res->dev.cc_major + res->dev.cc_minor;
    }

    /* the op: options, what it reads from the spec, its baselines' names */
    at_problem pb = {.op = o->op, .dtype = o->dtype, .shape = o->shape, .arch = res->arch,
                     .sms = res->dev.sms};
    at_op_env env = {.o = o, .spec = r.spec, .tpl = r.tpl, .pb = &pb,
                     .cubin_dir = r.cubin_dir[0] ? r.cubin_dir : NULL};
    if ((rc = r.op->open(&env, res, &r.op_state)) != AT_OK)
        goto done;
    r.op->key_options(r.op_state, extra, sizeof extra);

    /* the key [CACHE_KEY] */
    at_key *k = &res->key;
    copy_str(k->op, sizeof k->op, o->op);
    k->dtype = o->dtype;
    at_shape_format(&o->shape, k->shape, sizeof k->shape);
    copy_str(k->device, sizeof k->device, res->dev.name);
    k->cc = res->arch;
    k->sms = res->dev.sms;
    k->driver_version = res->dev.driver_version;
    k->nvrtc_version = at_nvrtc_version();
    at_nvrtc_common_options(o->dtype, res->arch, opts, sizeof opts);
    if (extra[0]) { /* the op's own options after the common ones */
        size_t n = strlen(opts);
        snprintf(opts + n, sizeof opts - n, " %s", extra);
    }
    copy_str(k->options, sizeof k->options, opts);
    copy_str(k->tuner_version, sizeof k->tuner_version, AT_TUNER_VERSION);
    at_key_digest(k, res->key_sha);

    if (!o->dry_run) {
        int found = 0;
        if ((rc = at_cache_open(o->db_path, &r.cache)) != AT_OK)
            goto done;
        if (!o->force && (rc = at_cache_get_winner(r.cache, k, &res->winner, &found)) != AT_OK)
            goto done;
        if (found) {
            int dfound = 0;
            res->from_cache = 1;
            at_cache_get_device(r.cache, &res->dev, &dfound);
            res->base_us = res->winner.baseline_us;
            res->base_min = res->winner.baseline_min;
            res->base_max = res->winner.baseline_max;
            res->bytes = res->winner.bytes;
            res->baselines[0].us = res->base_us;
            res->baselines[0].us_min = res->base_min;
            res->baselines[0].us_max = res->base_max;
            goto done;
        }
    }

    if ((rc = at_spec_bytes(r.spec, &pb, &res->bytes)) != AT_OK || (rc = make_rows(&r, &pb)) != AT_OK)
        goto done;
    if ((rc = phase_compile(&r)) != AT_OK || o->dry_run || interrupted(o))
        goto done;

    /* from here on the GPU is needed for real: in a worker process */
    rc = gpu_phases(&r);
done:
    if (rc == AT_OK && interrupted(o)) {
        res->interrupted = 1;
        rc = at_fail(AT_ERR_INTERRUPTED, "interrupted: %d trial(s) stored; rerun to finish",
                     res->ncompile_failed + res->nwrong + res->ncorrect);
    }
    release(&r);
    if (res->rows) /* timed rows first, fastest first (jobs/mods are gone) */
        qsort(res->rows, (size_t)res->nrows, sizeof *res->rows, cmp_row_us);
    res->t_total = now_s() - t0;
    return rc;
}


void at_search_result_free(at_search_result *res)
{
    free(res->rows);
    res->rows = NULL;
    at_winner_clear(&res->winner);
}
