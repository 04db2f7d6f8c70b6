/*
** search.c — the tuning pipeline for one (op, dtype, shape) on one GPU:
** spec -> candidates -> NVRTC -> correctness gate -> timing against cuBLAS
** -> cache. Invariant: every result is written to the cache as soon as it is
** known, so an interruption loses nothing already measured, and a winner is
** stored only when it beats the baseline beyond the measured noise.
*/
#include "bench.h"
#include "verify.h"

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
static int space_digest(at_spec *spec, at_templates *tpl, char hex[65])
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

/* Everything a run holds on the GPU and the host. */
typedef struct run {
    const at_search_opts *o;
    at_search_result *res;
    at_spec *spec;
    at_templates *tpl;
    at_cache *cache;
    at_gpu *gpu;
    at_compile_job *jobs; /* one per row (unused for pruned rows) */
    char cubin_dir[1100]; /* compiled-kernel cache beside the db; "" for none */
    CUmodule *mods;
    CUdeviceptr x, y, wbase; /* wbase: one block holding every weight copy */
    CUdeviceptr *W;          /* the copies, `copies` of them */
    int copies;
    uint16_t *hx, *hW, *hy;
    double *ref;
    at_launch base;
    at_graph base_graph;
} run;

static void store_trial(run *r, at_search_row *row)
{
    if (r->cache && at_cache_put_trial(r->cache, &r->res->key, &row->trial) != AT_OK)
        fprintf(stderr, "warning: %s\n", at_errmsg());
}

/* Picks the number of weight copies and launches per replay (DESIGN.md
** rule 1: the rotated working set is >= 3x L2; ~200 µs per replay). A
** replay has at least one launch per copy, so no copy is reused while still
** in L2, within a replay or across two. */
#define MAX_COPIES 4096
static int plan_timing(run *r, size_t wbytes)
{
    at_search_result *res = r->res;
    size_t freeb = 0, total = 0;
    int64_t l2 = res->dev.l2_bytes > 0 ? res->dev.l2_bytes : (64 << 20);
    int c = (int)((3 * l2 + (int64_t)wbytes - 1) / (int64_t)wbytes);
    if (c < 2)
        c = 2;
    if (c > MAX_COPIES)
        c = MAX_COPIES;
    r->gpu->cu.cuMemGetInfo_(&freeb, &total);
    while (c > 2 && (double)c * (double)wbytes > 0.6 * (double)freeb)
        c--;
    if ((double)c * (double)wbytes > 0.8 * (double)freeb)
        return at_fail(AT_ERR_CUDA, "cuda: weights of %.0f MiB do not fit twice in %.0f MiB free",
                       (double)wbytes / 1048576.0, (double)freeb / 1048576.0);
    r->copies = c;
    res->copies = c;
    res->working_set_mib = (double)c * (double)wbytes / 1048576.0;
    double est_us = (double)wbytes / (res->dev.read_gbps * 1e3) + res->dev.empty_us;
    int launches = (int)ceil(200.0 / est_us);
    if (launches < c)
        launches = c;
    if (launches > 1000)
        launches = 1000;
    launches = (launches + c - 1) / c * c; /* a multiple of c, >= c */
    res->launches = launches;
    return AT_OK;
}

static int setup_buffers(run *r)
{
    const at_search_opts *o = r->o;
    int64_t M = o->shape.M, K = o->shape.K, N = o->shape.N;
    size_t wbytes = (size_t)(N * K) * 2;
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    int rc;

    if ((rc = plan_timing(r, wbytes)) != AT_OK)
        return rc;
    r->hx = malloc((size_t)(M * K) * 2);
    r->hW = malloc(wbytes);
    r->hy = malloc((size_t)(M * N) * 2);
    r->ref = malloc((size_t)(M * N) * sizeof(double));
    if (!r->hx || !r->hW || !r->hy || !r->ref)
        return at_fail(AT_ERR_NOMEM, "out of host memory for %lld x %lld weights", (long long)N,
                       (long long)K);
    /* fresh random inputs each run, never zeros */
    at_fill_random(o->dtype, r->hx, (size_t)(M * K), seed, 1.0f);
    at_fill_random(o->dtype, r->hW, (size_t)(N * K), seed * 31 + 7, 1.0f);
    if ((rc = at_ref_gemv(o->dtype, M, K, N, r->hx, r->hW, r->ref)) != AT_OK)
        return rc;
    at_gpu *g = r->gpu;
    size_t stride = (wbytes + 255) / 256 * 256;
    if (!(r->W = calloc((size_t)r->copies, sizeof *r->W)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    if ((rc = at_gpu_alloc(g, &r->x, (size_t)(M * K) * 2)) != AT_OK ||
        (rc = at_gpu_alloc(g, &r->y, (size_t)(M * N) * 2)) != AT_OK ||
        (rc = at_gpu_alloc(g, &r->wbase, stride * (size_t)r->copies)) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(r->x, r->hx, (size_t)(M * K) * 2, g->stream),
                           "cuMemcpyHtoDAsync")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(r->wbase, r->hW, wbytes, g->stream),
                           "cuMemcpyHtoDAsync")) != AT_OK)
        return rc;
    for (int i = 0; i < r->copies; i++) {
        r->W[i] = r->wbase + (CUdeviceptr)(stride * (size_t)i);
        if (i > 0 && (rc = at_gpu_check(g, g->cu.cuMemcpyDtoDAsync_(r->W[i], r->wbase, wbytes, g->stream),
                                        "cuMemcpyDtoDAsync")) != AT_OK)
            return rc;
    }
    if ((rc = at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "cuStreamSynchronize")) != AT_OK)
        return rc;
    r->base = (at_launch){.fn = NULL, .dtype = o->dtype, .M = (int)M, .K = (int)K, .N = (int)N,
                          .x = r->x, .y = r->y};
    return AT_OK;
}

/* Runs l once on poisoned output and compares with the reference. */
static int check_output(run *r, const at_launch *l, double *err, size_t *nonfinite)
{
    at_gpu *g = r->gpu;
    size_t n = (size_t)(r->o->shape.M * r->o->shape.N);
    int rc;
    /* poison: 0xFFFF is a NaN in bf16 and fp16, so an unwritten y fails */
    if ((rc = at_gpu_check(g, g->cu.cuMemsetD16Async_(r->y, 0xFFFF, n, g->stream), "cuMemsetD16Async")) != AT_OK ||
        (rc = at_launch_gemv(g, l, r->W[0])) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "kernel run")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyDtoHAsync_(r->hy, r->y, n * 2, g->stream), "cuMemcpyDtoHAsync")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "cuStreamSynchronize")) != AT_OK)
        return rc;
    *err = at_rel_err(r->o->dtype, r->hy, r->ref, n, nonfinite);
    return AT_OK;
}

static at_launch row_launch(run *r, int i)
{
    at_search_row *row = &r->res->rows[i];
    at_launch l = r->base;
    CUfunction fn = NULL;
    r->gpu->cu.cuModuleGetFunction_(&fn, r->mods[i], at_spec_strategy_kernel(r->spec, row->cand.strategy));
    l.fn = fn;
    memcpy(l.grid, row->cand.grid, sizeof l.grid);
    memcpy(l.block, row->cand.block, sizeof l.block);
    l.smem = row->cand.smem;
    l.pdl = at_candidate_param(&row->cand, "TP_PDL", 0) != 0;
    return l;
}

/* Replays the candidate's graph and the baseline's `reps` times, alternating
** (DESIGN.md rule 3); per-launch µs into cand[] and base[]. */
static int time_interleaved(run *r, const at_launch *l, int reps, double *cand, double *base)
{
    at_graph gr;
    double us;
    int rc = at_graph_build(r->gpu, l, r->W, r->copies, r->res->launches, &gr);
    if (rc == AT_OK)
        rc = at_graph_time(r->gpu, &gr, &us); /* warm-up */
    for (int i = 0; i < reps && rc == AT_OK; i++) {
        if ((rc = at_graph_time(r->gpu, &gr, &cand[i])) == AT_OK)
            rc = at_graph_time(r->gpu, &r->base_graph, &base[i]);
    }
    at_graph_free(r->gpu, &gr);
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

/* Phase: load each compiled candidate, run it once on poisoned output,
** record the wrong ones (never timed). */
static int phase_verify(run *r)
{
    at_search_result *res = r->res;
    double tol = at_dtype_tolerance(r->o->dtype), t0 = now_s();
    int rc = AT_OK, done = 0;
    r->mods = calloc((size_t)res->nrows, sizeof *r->mods);
    if (!r->mods)
        return at_fail(AT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < res->nrows && rc == AT_OK && !interrupted(r->o); i++) {
        at_search_row *row = &res->rows[i];
        double err = 0.0;
        size_t nonfinite = 0;
        if (!r->jobs[i].ok)
            continue;
        progress_line(r->o, "verify", ++done, res->ncompiled, NULL);
        CUresult cr = r->gpu->cu.cuModuleLoadData_(&r->mods[i], r->jobs[i].cubin);
        if (cr != CUDA_SUCCESS) {
            rc = at_gpu_check(r->gpu, cr, "cuModuleLoadData");
            break;
        }
        at_launch l = row_launch(r, i);
        rc = check_output(r, &l, &err, &nonfinite);
        row->trial.rel_err = err;
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
        if (nonfinite || !(err <= tol)) {
            row->trial.state = AT_TRIAL_WRONG;
            if (nonfinite)
                snprintf(row->trial.reason, sizeof row->trial.reason,
                         "%zu outputs NaN/Inf (unwritten or overflow)", nonfinite);
            else
                snprintf(row->trial.reason, sizeof row->trial.reason,
                         "rel. error %.3g > %.0e", err, tol);
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

/* Phase: screen every correct candidate, re-time the best FINALISTS longer,
** time the baseline interleaved throughout. */
static int phase_time(run *r)
{
    at_search_result *res = r->res;
    const at_search_opts *o = r->o;
    int reps = res->reps, rc, done = 0;
    double *cand = malloc((size_t)reps * sizeof(double));
    double *base = malloc((size_t)reps * sizeof(double));
    double t0 = now_s(), us;
    char best[96] = "";
    if (!cand || !base) {
        free(cand);
        free(base);
        return at_fail(AT_ERR_NOMEM, "out of memory");
    }
    if ((rc = at_graph_build(r->gpu, &r->base, r->W, r->copies, res->launches, &r->base_graph)) != AT_OK ||
        (rc = at_graph_time(r->gpu, &r->base_graph, &us)) != AT_OK)
        goto done;

    /* screening: median of `reps` replays each */
    double best_us = 1e30;
    for (int i = 0; i < res->nrows && !interrupted(o); i++) {
        at_search_row *row = &res->rows[i];
        if (!r->jobs[i].ok || row->trial.state != AT_TRIAL_OK)
            continue;
        progress_line(o, "time", ++done, res->ncorrect, best);
        at_launch l = row_launch(r, i);
        rc = time_interleaved(r, &l, reps, cand, base);
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
** the baseline; decides the winner by the rule in DESIGN.md. */
static int phase_final(run *r)
{
    at_search_result *res = r->res;
    int reps2 = 3 * res->reps, nfinal = 0, rc = AT_OK, win = -1;
    double *cand = malloc((size_t)reps2 * sizeof(double));
    double *base = malloc((size_t)reps2 * FINALISTS * sizeof(double));
    double *tmp = malloc((size_t)reps2 * sizeof(double));
    double noise_best = 0.0, t0 = now_s();
    int *order = malloc((size_t)res->nrows * sizeof(int)), ntimed = 0;
    if (!cand || !base || !tmp || !order) {
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
        at_launch l = row_launch(r, i);
        if ((rc = time_interleaved(r, &l, reps2, cand, base + (size_t)nfinal * (size_t)reps2)) != AT_OK)
            goto done;
        memcpy(tmp, cand, (size_t)reps2 * sizeof(double));
        set_row_stats(row, tmp, reps2, res->bytes); /* sorts tmp */
        double noise = 0.5 * (percentile(tmp, reps2, 0.9) - percentile(tmp, reps2, 0.1));
        double s_us = 0.0;
        if (at_stream_time(r->gpu, &l, r->W, r->copies, res->launches, &s_us) == AT_OK)
            row->trial.stream_us = s_us;
        row->final = 1;
        store_trial(r, row);
        if (win < 0 || row->trial.us < res->rows[win].trial.us) {
            win = i;
            noise_best = noise;
        }
        nfinal++;
    }
    if (nfinal > 0) {
        int nb = nfinal * reps2;
        at_stats(base, nb, &res->base_us, &res->base_min, &res->base_max); /* sorts base */
        double base_noise = 0.5 * (percentile(base, nb, 0.9) - percentile(base, nb, 0.1));
        if (noise_best < base_noise)
            noise_best = base_noise;
    } else {
        for (int i = 0; i < reps2; i++)
            if ((rc = at_graph_time(r->gpu, &r->base_graph, &base[i])) != AT_OK)
                goto done;
        at_stats(base, reps2, &res->base_us, &res->base_min, &res->base_max);
    }
    at_stream_time(r->gpu, &r->base, r->W, r->copies, res->launches, &res->base_stream_us);
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

    /* the winner rule: beat the baseline by more than the noise */
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
        copy_str(w->strategy, sizeof w->strategy, "cublas");
        copy_str(w->params, sizeof w->params, "cublasGemmEx");
        w->us = res->base_us;
        w->us_min = res->base_min;
        w->us_max = res->base_max;
    }
    w->speedup = w->us > 0 ? res->base_us / w->us : 1.0;
    if (!interrupted(r->o) && r->cache && (rc = at_cache_put_winner(r->cache, &res->key, w)) != AT_OK)
        goto done;
done:
    free(cand);
    free(base);
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
        at_graph_free(r->gpu, &r->base_graph);
        if (r->mods)
            for (int i = 0; i < r->res->nrows; i++)
                if (r->mods[i])
                    r->gpu->cu.cuModuleUnload_(r->mods[i]);
        at_gpu_free(r->gpu, r->x);
        at_gpu_free(r->gpu, r->y);
        at_gpu_free(r->gpu, r->wbase);
    }
    if (r->jobs)
        for (int i = 0; i < r->res->nrows; i++)
            at_compile_job_clear(&r->jobs[i]);
    free(r->jobs);
    free(r->mods);
    free(r->W);
    free(r->hx);
    free(r->hW);
    free(r->hy);
    free(r->ref);
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
    char opts[160];
    double t0 = now_s();
    int rc;

    memset(res, 0, sizeof *res);
    res->dry_run = o->dry_run;
    res->reps = o->reps < 5 ? 5 : o->reps;
    if (o->shape.rank != 3)
        return at_fail(AT_ERR_USAGE, "op %s takes a shape MxKxN", o->op);
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
        (rc = space_digest(r.spec, r.tpl, res->key.space_sha)) != AT_OK)
        goto done;

    /* the device: identity first (cheap), the full context only if needed */
    if (!o->dry_run) {
        if ((rc = at_gpu_open(o->device, 1, &r.gpu)) != AT_OK)
            goto done;
        res->dev = r.gpu->info;
        res->arch = 10 * res->dev.cc_major + res->dev.cc_minor;
    } else {
        res->arch = o->arch > 0 ? o->arch : 90;
        if (o->arch <= 0 && at_gpu_open(o->device, 1, &r.gpu) == AT_OK)
            res->arch = 10 * r.gpu->info.cc_major + r.gpu->info.cc_minor;
        if (r.gpu)
            res->dev = r.gpu->info;
    }

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
    copy_str(k->options, sizeof k->options, opts);
    copy_str(k->tuner_version, sizeof k->tuner_version, AT_TUNER_VERSION);
    at_key_digest(k, res->key_sha);

    if (!o->dry_run) {
        int found = 0;
        if ((rc = at_cache_open(o->db_path, &r.cache)) != AT_OK)
            goto done;
        /* compiled kernels live beside the db: <dir of db>/cubins */
        const char *slash = strrchr(o->db_path, '/');
        if (slash)
            snprintf(r.cubin_dir, sizeof r.cubin_dir, "%.*s/cubins", (int)(slash - o->db_path), o->db_path);
        else
            snprintf(r.cubin_dir, sizeof r.cubin_dir, "cubins");
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
            goto done;
        }
    }

    at_problem pb = {.op = o->op, .dtype = o->dtype, .shape = o->shape, .arch = res->arch,
                     .sms = res->dev.sms};
    if ((rc = at_spec_bytes(r.spec, &pb, &res->bytes)) != AT_OK || (rc = make_rows(&r, &pb)) != AT_OK)
        goto done;
    if ((rc = phase_compile(&r)) != AT_OK || o->dry_run || interrupted(o))
        goto done;

    /* from here on the GPU is needed for real */
    at_gpu_close(r.gpu);
    r.gpu = NULL;
    if ((rc = at_gpu_open(o->device, 0, &r.gpu)) != AT_OK || (rc = device_ceilings(&r)) != AT_OK ||
        (rc = setup_buffers(&r)) != AT_OK || (rc = phase_verify(&r)) != AT_OK)
        goto done;
    /* with nothing correct, the timing still measures the baseline, which
    ** then is the stored answer */
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
