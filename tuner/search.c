/*
** search.c — the tuning pipeline for one (op, dtype, shape) on one GPU:
** spec -> candidates -> NVRTC -> correctness gate -> timing against the
** op's baselines (which candidates, how long: strategy.h) -> cache. What
** an op computes, reads and launches is in the op table (op.h); this file
** is op-independent. Invariant: every result
** is written to the cache as soon as it is known, so an interruption loses
** nothing already measured, and a winner is stored only when it beats
** baseline 0 (cuBLAS, or the naive fused norm) beyond the measured noise.
** The GPU phases (search_gpu.c) run in a worker process (worker.h, gpu_phases): a
** candidate that kills its CUDA context or hangs is recorded crashed /
** timeout and a fresh worker goes on; this process never initialises CUDA.
*/
#include "search_run.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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



static void compile_progress(void *arg, int done, int total)
{
    run *r = arg;
    at_progress_update(r->pg, "compile", done, total, NULL);
}

/* A warning on stderr, above a live progress line if there is one. */
void at_search_warn(run *r, const char *msg)
{
    if (r->pg && r->o->progress != AT_PROGRESS_OFF)
        at_progress_note(r->pg, "warning: %s", msg);
    else
        fprintf(stderr, "warning: %s\n", msg);
}

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

void at_search_send_row(run *r, int i)
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

void at_search_store_trial(run *r, at_search_row *row)
{
    if (r->cache && at_cache_put_trial(r->cache, &r->res->key, &row->trial) != AT_OK)
        at_search_warn(r, at_errmsg());
    at_search_send_row(r, (int)(row - r->res->rows)); /* in a worker: the parent's table too */
}

/* The timing phase's search for n candidates, in at_strategy_choose's
** order (--strategy, --effort's, the spec's search_strategy, normal's;
** --budget), into r->so and the result's description. The random choices
** derive from the key, so one key always searches the same way. */
int at_search_plan(run *r, int n)
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

/* [PDL_LAUNCH] On sm_90 and later TP_PDL only decides how the kernel is
** launched: griddepcontrol.wait and .launch_dependents are no-ops in a
** kernel launched without programmatic stream serialization, and the
** templates' code is the same either way (common/pdl.cuh), so a TP_PDL=0
** candidate runs the TP_PDL=1 build, launched without the attribute, and
** the two share one compile. Before sm_90 the instructions do not exist:
** TP_PDL=0 compiles them out. */
void at_candidate_compile_options(const at_candidate *c, int arch, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int p = 0; p < c->nparams && len < cap; p++) {
        long long v = c->params[p].value;
        if (arch >= 90 && strcmp(c->params[p].name, "TP_PDL") == 0)
            v = 1;
        len += (size_t)snprintf(buf + len, cap - len, "%s-D%s=%lld", p ? " " : "", c->params[p].name, v);
    }
}

/* A job's results for a second row: its own copies of the log and cubin. */
static int job_copy(at_compile_job *dst, const at_compile_job *src)
{
    *dst = *src;
    dst->log = NULL;
    dst->cubin = NULL;
    if (src->log && !(dst->log = strdup(src->log)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    if (src->cubin && src->cubin_size) {
        if (!(dst->cubin = malloc(src->cubin_size))) {
            free(dst->log);
            dst->log = NULL;
            return at_fail(AT_ERR_NOMEM, "out of memory");
        }
        memcpy(dst->cubin, src->cubin, src->cubin_size);
    }
    return AT_OK;
}

/* Phase: compile every live candidate (skipping ones the cache already
** knows failed; rows with the same template and options share one NVRTC
** program, [PDL_LAUNCH]), record compile failures; a candidate that spills
** is not timed unless the spec says allow_spills = true, nor one whose
** estimated occupancy is below the spec's min_occupancy. */
static int phase_compile(run *r)
{
    at_search_result *res = r->res;
    const at_search_opts *o = r->o;
    int rc, njobs = 0, nlive = 0;
    at_compile_job *list;
    int *idx, *jk; /* the live rows, and each one's job in list */
    double t0 = now_s();
    res->spills_allowed = at_spec_allow_spills(r->spec);
    res->min_occupancy = at_spec_min_occupancy(r->spec);
    list = calloc((size_t)res->nrows, sizeof *list);
    idx = calloc((size_t)res->nrows, sizeof *idx);
    jk = calloc((size_t)res->nrows, sizeof *jk);
    r->jobs = calloc((size_t)res->nrows, sizeof *r->jobs);
    if (!list || !idx || !jk || !r->jobs) {
        free(list);
        free(idx);
        free(jk);
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
        const char *name = at_spec_strategy_template(r->spec, row->cand.strategy);
        if ((rc = at_templates_source(r->tpl, name, &src)) != AT_OK) {
            free(list);
            free(idx);
            free(jk);
            return rc;
        }
        char opts[sizeof list->options];
        at_candidate_compile_options(&row->cand, res->arch, opts, sizeof opts);
        int k = 0;
        while (k < njobs && (strcmp(list[k].name, name) != 0 || strcmp(list[k].options, opts) != 0))
            k++;
        if (k == njobs) { /* a new program */
            at_compile_job *j = &list[njobs++];
            j->tpl = r->tpl;
            j->name = name;
            j->source = src;
            j->arch = res->arch;
            j->dtype = o->dtype;
            j->cubin_dir = r->cubin_dir[0] ? r->cubin_dir : NULL;
            j->stop = o->interrupt;
            copy_str(j->options, sizeof j->options, opts);
        }
        idx[nlive] = i;
        jk[nlive++] = k;
    }
    res->nprograms = njobs;
    rc = at_nvrtc_compile_all(list, njobs, o->threads, r->pg ? compile_progress : NULL, r);
    at_progress_end(r->pg); /* an interrupted compile leaves its line open */
    for (int e = 0; e < nlive; e++) {
        at_search_row *row = &res->rows[idx[e]];
        const at_compile_job *J = &list[jk[e]];
        int crc = job_copy(&r->jobs[idx[e]], J);
        if (crc != AT_OK) {
            if (rc == AT_OK)
                rc = crc;
            continue;
        }
        row->trial.regs = J->regs;
        row->trial.spill_bytes = J->spill_bytes;
        row->trial.smem_bytes = J->smem_bytes;
        if (J->ok) {
            const unsigned *b = row->cand.block;
            int threads = (int)(b[0] * b[1] * b[2]), blocks = 0;
            int smem = J->smem_bytes + (int)row->cand.smem;
            /* without ptxas's report registers and spills are unknown: no estimate, no check */
            row->trial.occupancy = J->reported ? at_occupancy(res->arch, threads, J->regs, smem, &blocks) : 0.0;
            res->ncompiled++;
            res->ncompile_cached += J->cached;
            res->nunreported += !J->reported;
            if (res->min_occupancy > 0 && J->reported && row->trial.occupancy < res->min_occupancy &&
                J->spill_bytes == 0) { /* not stored: the spec decides it again each run */
                row->trial.state = AT_TRIAL_PRUNED;
                snprintf(row->trial.reason, sizeof row->trial.reason,
                         "min_occupancy: estimated occupancy %.2f < %.2f (%d registers, %d threads, "
                         "%d B shared: %d blocks per SM)",
                         row->trial.occupancy, res->min_occupancy, J->regs, threads, smem, blocks);
                res->noccupancy_rejected++;
            }
            if (J->spill_bytes > 0) {
                res->nspills++;
                if (!res->spills_allowed) { /* [SPILLS] report.c explains the state */
                    row->trial.state = AT_TRIAL_SPILLS;
                    snprintf(row->trial.reason, sizeof row->trial.reason,
                             "spills %d bytes of registers to local memory: not timed (the spec may set "
                             "allow_spills = true)",
                             J->spill_bytes);
                    res->nspills_rejected++;
                    if (!o->dry_run && !o->compile_only)
                        at_search_store_trial(r, row);
                }
            }
        } else if (!J->done) {
            copy_str(row->trial.reason, sizeof row->trial.reason, "not compiled: interrupted");
        } else if (rc == AT_OK) {
            res->ncompile_failed++;
            row->trial.state = AT_TRIAL_COMPILE_FAIL;
            first_error(J->log, row->trial.reason, sizeof row->trial.reason);
            if (!o->dry_run && !o->compile_only)
                at_search_store_trial(r, row);
        }
    }
    for (int k = 0; k < njobs; k++) /* each row has its own copy */
        at_compile_job_clear(&list[k]);
    free(list);
    free(idx);
    free(jk);
    res->t_compile = now_s() - t0;
    if (rc == AT_OK) { /* what the timing phase will do, for a dry run's report too */
        int n = 0;
        for (int i = 0; i < res->nrows; i++)
            n += r->jobs[i].ok && res->rows[i].trial.state == AT_TRIAL_OK;
        rc = at_search_plan(r, n);
    }
    return rc;
}

/* "by NAME COUNT, ..." for the three constraints that pruned the most
** candidates, so a space that is empty for this shape says why. */
static void top_prune_names(const at_search_result *res, char *buf, size_t len)
{
    enum { MAXN = 64 };
    const char *names[MAXN];
    int counts[MAXN], n = at_report_prune_counts(res, names, counts, MAXN);
    size_t used = 0;
    buf[0] = '\0';
    for (int shown = 0; shown < 3 && shown < n; shown++) {
        int best = 0;
        for (int j = 1; j < n; j++)
            if (counts[j] > counts[best])
                best = j;
        int w = snprintf(buf + used, len - used, "%s%s %d", shown ? ", " : "by ", names[best], counts[best]);
        if (w < 0 || (size_t)w >= len - used)
            break;
        used += (size_t)w;
        counts[best] = -1;
    }
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
    at_spec_space_text(r->spec, res->space_text, sizeof res->space_text);
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
    if (res->npruned == n && n > 0) {
        char why[256];
        top_prune_names(res, why, sizeof why);
        return at_fail(AT_ERR_SPEC, "%s: every one of the %d candidates was pruned for shape %s (%s)",
                       r->o->spec_path, n, res->key.shape, why);
    }
    if (n == 0) /* every strategy ruled out, or every value of a param cut, before crossing */
        return at_fail(AT_ERR_SPEC, "%s: no candidate for shape %s: %s", r->o->spec_path, res->key.shape,
                       res->space_text[0] == ';' ? res->space_text + 2 : res->space_text);
    return AT_OK;
}

static void release(run *r)
{
    if (r->gpu) {
        for (int b = 0; b < AT_MAX_BASELINES; b++)
            at_search_contest_free(r, &r->base[b]);
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

/* The GPU phases, in the worker process (gpu_phases forks it): its own
** cache connection and CUDA context; setup, the correctness gate, timing
** and the final round skip what the parent already knows (rows decided or
** timed, `verified`). Every row outcome goes to the parent as it is known
** (at_search_store_trial, at_search_send_row); at the end every compiled row once more (the
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
    double t0 = now_s();
    if ((rc = at_cache_open(wo.db_path, &r->cache)) != AT_OK || (rc = at_gpu_open(wo.device, 0, &r->gpu)) != AT_OK ||
        (rc = at_search_device_ceilings(r)) != AT_OK || (rc = at_search_plan_timing(r, r->op->copy_bytes(r->op_state))) != AT_OK ||
        (rc = r->op->setup(r->op_state, r->gpu, r->copies)) != AT_OK)
        goto done;
    res->t_setup += now_s() - t0; /* += : a restarted worker sets up again */
    r->phase = PH_VERIFY;
    if ((rc = at_search_phase_verify(r)) != AT_OK || wo.verify_only)
        goto done;
    /* with nothing correct, the timing still measures the baselines, and
    ** baseline 0 then is the stored answer */
    r->phase = PH_TIME;
    rc = at_search_phase_time(r);
    r->phase = PH_FINAL;
    if (rc == AT_OK)
        rc = at_search_phase_final(r);
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
            at_search_send_row(r, i);
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
        /* the worker was forked from this process's result and only added
        ** to it: take all of it but the rows (kept up to date by MSG_ROW)
        ** and the winner's cubin (after the message) */
        at_search_row *rows = res->rows;
        at_winner_clear(&res->winner);
        *res = e->res;
        res->rows = rows;
        res->winner.cubin = NULL;
        res->winner.cubin_size = 0;
        size_t cb = e->res.winner.cubin_size;
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
    if (r->o->before_gpu) /* this process holds no connection now: it may fork */
        r->o->before_gpu(r->o->before_gpu_arg);
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
    if ((rc = at_spec_load_op(o->spec_path, o->op, &r.spec)) != AT_OK) {
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

    if (r.op->components) {
        /* a fused op: its components first (components.c, which says when
        ** there is nothing to do), so that baseline 0 runs the tuned
        ** sequence, and their winners go into this op's key (space_sha):
        ** its stored answer was measured against them (a compile-ahead
        ** looks them up, and compiles the missing ones). Their GPU workers
        ** fork: no SQLite connection is open yet. */
        char tuned[96];
        if ((rc = at_search_components(o, r.op, r.pg, tuned, sizeof tuned, res->key.space_sha)) != AT_OK ||
            interrupted(o))
            goto done;
        at_search_baseline *b0 = &res->baselines[0];
        size_t wl = strlen(b0->what);
        if (tuned[0])
            snprintf(b0->what + wl, sizeof b0->what - wl, " [tuned first: %s]", tuned);
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
    if ((rc = phase_compile(&r)) != AT_OK || o->dry_run || o->compile_only || interrupted(o))
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
