/*
** search.c — the tuning pipeline for one (op, dtype, shape) on one GPU:
** spec -> candidates -> NVRTC -> correctness gate -> timing against the
** op's baselines -> cache. What an op computes, reads and launches is in
** the op table (op.h); this file is op-independent. Invariant: every result
** is written to the cache as soon as it is known, so an interruption loses
** nothing already measured, and a winner is stored only when it beats
** baseline 0 (cuBLAS, or the naive fused norm) beyond the measured noise.
*/
#include "bench.h"
#include "op.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FINALISTS 5
#define HARNESS_SLACK 1.03 /* allowed above the measured read ceiling */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int interrupted(const at_search_opts *o) { return o->interrupt && *o->interrupt; }

static void progress_line(const at_search_opts *o, const char *phase, int i, int n, const char *extra)
{
    if (!o->progress)
        return;
    fprintf(stderr, "\r\033[K%-8s %d/%d %s", phase, i, n, extra ? extra : "");
    if (i == n)
        fputc('\n', stderr);
    fflush(stderr);
}

static void compile_progress(void *arg, int done, int total)
{
    progress_line(arg, "compile", done, total, NULL);
}

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
} run;

static void store_trial(run *r, at_search_row *row)
{
    if (r->cache && at_cache_put_trial(r->cache, &r->res->key, &row->trial) != AT_OK)
        fprintf(stderr, "warning: %s\n", at_errmsg());
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

/* Phase: compile every live candidate (skipping ones the cache already
** knows failed), record compile failures. */
static int phase_compile(run *r)
{
    at_search_result *res = r->res;
    const at_search_opts *o = r->o;
    int rc, njobs = 0;
    at_compile_job *list;
    int *idx;
    double t0 = now_s();
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
    rc = at_nvrtc_compile_all(list, njobs, o->threads, o->progress ? compile_progress : NULL, (void *)o);
    for (int k = 0; k < njobs; k++) {
        at_search_row *row = &res->rows[idx[k]];
        r->jobs[idx[k]] = list[k];
        row->trial.regs = list[k].regs;
        row->trial.spill_bytes = list[k].spill_bytes;
        row->trial.smem_bytes = list[k].smem_bytes;
        if (list[k].ok) {
            res->ncompiled++;
            res->ncompile_cached += list[k].cached;
            if (list[k].spill_bytes > 0)
                res->nspills++;
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
    return rc;
}

/* Phase: check the op's own baselines (a wrong one is a harness bug), then
** load each compiled candidate, run it once on poisoned output, record the
** wrong ones (never timed). */
static int phase_verify(run *r)
{
    at_search_result *res = r->res;
    double t0 = now_s();
    int rc = AT_OK, done = 0;
    r->mods = calloc((size_t)res->nrows, sizeof *r->mods);
    if (!r->mods)
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
    for (int i = 0; i < res->nrows && rc == AT_OK && !interrupted(r->o); i++) {
        at_search_row *row = &res->rows[i];
        at_op_check ck;
        if (!r->jobs[i].ok)
            continue;
        progress_line(r->o, "verify", ++done, res->ncompiled, NULL);
        CUresult cr = r->gpu->cu.cuModuleLoadData_(&r->mods[i], r->jobs[i].cubin);
        if (cr != CUDA_SUCCESS) {
            rc = at_gpu_check(r->gpu, cr, "cuModuleLoadData");
            break;
        }
        at_contestant c = row_contestant(r, i);
        rc = r->op->check(r->op_state, &c, &ck);
        row->trial.rel_err = ck.err;
        if (rc == AT_ERR_CUDA_STICKY) {
            row->trial.state = AT_TRIAL_CRASHED;
            copy_str(row->trial.reason, sizeof row->trial.reason, at_errmsg());
            res->ncrashed++;
            store_trial(r, row);
            break; /* the context is gone; what was stored stays */
        }
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
    }
    if (r->o->progress && done < res->ncompiled)
        fputc('\n', stderr);
    res->t_verify = now_s() - t0;
    return rc;
}

/* Phase: capture the baselines' graphs, screen every correct candidate
** (interleaved with baseline 0), re-time the best FINALISTS later. */
static int phase_time(run *r)
{
    at_search_result *res = r->res;
    const at_search_opts *o = r->o;
    int reps = res->reps, rc = AT_OK, done = 0;
    double *cand = malloc((size_t)reps * sizeof(double));
    double *base = malloc((size_t)reps * sizeof(double));
    double t0 = now_s();
    char best[96] = "";
    if (!cand || !base) {
        free(cand);
        free(base);
        return at_fail(AT_ERR_NOMEM, "out of memory");
    }
    for (int b = 0; b < res->nbaselines && rc == AT_OK; b++) {
        at_contestant c = {.baseline = b};
        rc = contest_build(r, &c, &r->base[b]); /* and warms it up */
    }
    if (rc != AT_OK)
        goto done;

    /* screening: median of `reps` replays each */
    double best_us = 1e30;
    for (int i = 0; i < res->nrows && !interrupted(o); i++) {
        at_search_row *row = &res->rows[i];
        if (!r->jobs[i].ok || row->trial.state != AT_TRIAL_OK)
            continue;
        progress_line(o, "time", ++done, res->ncorrect, best);
        at_contestant c = row_contestant(r, i);
        rc = time_interleaved(r, &c, reps, cand, 1, &base);
        if (rc != AT_OK) {
            row->trial.state = AT_TRIAL_CRASHED;
            copy_str(row->trial.reason, sizeof row->trial.reason, at_errmsg());
            res->ncrashed++;
            store_trial(r, row);
            if (rc == AT_ERR_CUDA_STICKY)
                goto done;
            rc = AT_OK;
            continue;
        }
        set_row_stats(row, cand, reps, res->bytes);
        if (row->trial.us < best_us) {
            best_us = row->trial.us;
            snprintf(best, sizeof best, "best %.2f us", best_us);
        }
        store_trial(r, row);
    }
    if (o->progress && done < res->ncorrect)
        fputc('\n', stderr);
done:
    free(cand);
    free(base);
    res->t_time = now_s() - t0;
    return rc;
}

/* Orders row indices by screening µs (qsort_r: `rows` is the row array). */
static int cmp_index_us(const void *a, const void *b, void *rows)
{
    const at_search_row *x = (const at_search_row *)rows + *(const int *)a;
    const at_search_row *y = (const at_search_row *)rows + *(const int *)b;
    return (x->trial.us > y->trial.us) - (x->trial.us < y->trial.us);
}

/* Re-times the FINALISTS fastest with 3x the replays, each interleaved with
** every baseline; decides the winner by the rule in DESIGN.md against
** baseline 0. */
static int phase_final(run *r)
{
    at_search_result *res = r->res;
    int reps2 = 3 * res->reps, nfinal = 0, rc = AT_OK, win = -1, nb = res->nbaselines;
    double *cand = malloc((size_t)reps2 * sizeof(double));
    double *base[AT_MAX_BASELINES] = {NULL};
    double *tmp = malloc((size_t)reps2 * sizeof(double));
    double noise_best = 0.0, t0 = now_s();
    int *order = malloc((size_t)res->nrows * sizeof(int)), ntimed = 0;
    int alloc_ok = cand && tmp && order;
    for (int b = 0; b < nb; b++)
        alloc_ok &= (base[b] = malloc((size_t)reps2 * FINALISTS * sizeof(double))) != NULL;
    if (!alloc_ok) {
        rc = at_fail(AT_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < res->nrows; i++)
        if (res->rows[i].trial.state == AT_TRIAL_OK && res->rows[i].trial.us > 0)
            order[ntimed++] = i;
    qsort_r(order, (size_t)ntimed, sizeof *order, cmp_index_us, res->rows);
    for (int f = 0; f < ntimed && nfinal < FINALISTS && !interrupted(r->o); f++) {
        int i = order[f];
        at_search_row *row = &res->rows[i];
        at_contestant c = row_contestant(r, i);
        double *bslot[AT_MAX_BASELINES];
        for (int b = 0; b < nb; b++)
            bslot[b] = base[b] + (size_t)nfinal * (size_t)reps2;
        if ((rc = time_interleaved(r, &c, reps2, cand, nb, bslot)) != AT_OK)
            goto done;
        memcpy(tmp, cand, (size_t)reps2 * sizeof(double));
        set_row_stats(row, tmp, reps2, res->bytes); /* sorts tmp */
        double noise = 0.5 * (percentile(tmp, reps2, 0.9) - percentile(tmp, reps2, 0.1));
        double s_us = 0.0;
        contest t = {.r = r, .c = c};
        if (at_stream_time(r->gpu, contest_enqueue, &t, r->copies, res->launches, &s_us) == AT_OK)
            row->trial.stream_us = s_us;
        row->final = 1;
        store_trial(r, row);
        if (win < 0 || row->trial.us < res->rows[win].trial.us) {
            win = i;
            noise_best = noise;
        }
        nfinal++;
    }
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
    free(order);
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
    at_cache_close(r->cache);
    at_gpu_close(r->gpu);
    at_templates_free(r->tpl);
    at_spec_free(r->spec);
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
    progress_line(r->o, "ceiling", 0, 1, "measuring read/copy bandwidth and an empty kernel");
    if ((rc = at_bench_ceilings(r->gpu)) != AT_OK)
        return rc;
    progress_line(r->o, "ceiling", 1, 1, "");
    res->dev = r->gpu->info;
    return at_cache_put_device(r->cache, &res->dev);
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

    /* the device: identity first (cheap), the full context only if needed */
    if (!o->dry_run) {
        if ((rc = at_gpu_open(o->device, 1, &r.gpu)) != AT_OK)
            goto done;
        res->dev = r.gpu->info;
        res->arch = 10 * res->dev.cc_major + res->dev.cc_minor;
        /* compiled kernels live beside the db: <dir of db>/cubins */
        const char *slash = strrchr(o->db_path, '/');
        if (slash)
            snprintf(r.cubin_dir, sizeof r.cubin_dir, "%.*s/cubins", (int)(slash - o->db_path), o->db_path);
        else
            snprintf(r.cubin_dir, sizeof r.cubin_dir, "cubins");
    } else {
        res->arch = o->arch > 0 ? o->arch : 90;
        if (o->arch <= 0 && at_gpu_open(o->device, 1, &r.gpu) == AT_OK)
            res->arch = 10 * r.gpu->info.cc_major + r.gpu->info.cc_minor;
        if (r.gpu)
            res->dev = r.gpu->info;
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

    /* from here on the GPU is needed for real */
    at_gpu_close(r.gpu);
    r.gpu = NULL;
    if ((rc = at_gpu_open(o->device, 0, &r.gpu)) != AT_OK || (rc = device_ceilings(&r)) != AT_OK ||
        (rc = plan_timing(&r, r.op->copy_bytes(r.op_state))) != AT_OK ||
        (rc = r.op->setup(r.op_state, r.gpu, r.copies)) != AT_OK || (rc = phase_verify(&r)) != AT_OK ||
        o->verify_only)
        goto done;
    /* with nothing correct, the timing still measures the baselines, and
    ** baseline 0 then is the stored answer */
    rc = phase_time(&r);
    if (rc == AT_OK)
        rc = phase_final(&r);
    if (rc == AT_OK && res->harness_errors)
        rc = at_fail(AT_ERR_HARNESS, "harness error: %d measurement(s) above the read ceiling of %.0f GB/s",
                     res->harness_errors, res->dev.read_gbps);
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
