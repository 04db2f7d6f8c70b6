/*
** suite_run.c — tuning a whole suite: entries handed to one worker process
** per GPU (devices.c's pool), each running at_search_run with the shared
** options, results collected by the parent for a summary table or JSON.
** While an entry is on the GPU, the entry the pool reserved next for that
** worker compiles in the background (compile_ahead.c).
** Invariant: the cache is the only state between runs, so a rerun answers
** every finished entry from it and an interrupted suite resumes there.
*/
#include "suite.h"

#include "devices.h"
#include "json.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------- selection */

int at_suite_select(const at_suite *s, const char *only, int **idx, int *n)
{
    char ops[512] = "";
    int k = 0;
    *idx = NULL;
    *n = 0;
    if (only) { /* every name must be an op, so a typo is not an empty run */
        const char *p = only;
        while (*p) {
            size_t len = strcspn(p, ",");
            char op[32];
            snprintf(op, sizeof op, "%.*s", (int)(len < sizeof op ? len : sizeof op - 1), p);
            if (!at_suite_op_rank(op))
                return at_fail(AT_ERR_USAGE, "--only: unknown op '%s' (known: %s)", op, at_suite_known_ops());
            p += len + (p[len] == ',');
        }
    }
    int *v = malloc((size_t)(s->nentries ? s->nentries : 1) * sizeof *v);
    if (!v)
        return at_fail(AT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->nentries; i++) {
        const char *op = s->entries[i].op, *p = only;
        int keep = !only;
        while (p && *p && !keep) {
            size_t len = strcspn(p, ",");
            keep = strlen(op) == len && strncmp(p, op, len) == 0;
            p += len + (p[len] == ',');
        }
        if (keep)
            v[k++] = i;
        if (!strstr(ops, op) && strlen(ops) + strlen(op) + 3 < sizeof ops)
            snprintf(ops + strlen(ops), sizeof ops - strlen(ops), "%s%s", ops[0] ? ", " : "", op);
    }
    if (k == 0) {
        free(v);
        return at_fail(AT_ERR_USAGE, "--only %s: no entry of %s has that op (its ops: %s)", only, s->path, ops);
    }
    *idx = v;
    *n = k;
    return AT_OK;
}

/* ------------------------------------------------------- the default worker */

int at_suite_run_entry(void *arg, const at_suite_entry *e, const at_search_opts *o, at_suite_outcome *out)
{
    at_search_result res;
    (void)arg;
    (void)e;
    int rc = at_search_run(o, &res);
    if (rc != AT_OK)
        snprintf(out->msg, sizeof out->msg, "%s", at_errmsg());
    out->from_cache = res.from_cache;
    out->dry_run = res.dry_run;
    snprintf(out->device_name, sizeof out->device_name, "%s", res.dev.name);
    if (res.winner.strategy[0]) {
        snprintf(out->winner, sizeof out->winner, "%s", res.winner.strategy);
        snprintf(out->params, sizeof out->params, "%s", res.winner.params);
        out->us = res.winner.us;
        out->speedup = res.winner.speedup;
    }
    out->base_us = res.base_us;
    out->bytes = res.bytes;
    out->read_gbps = res.dev.read_gbps;
    out->seconds = res.t_total;
    out->compile_s = res.t_compile;
    out->gpu_s = res.t_setup + res.t_verify + res.t_time;
    out->ncompile_cached = res.ncompile_cached;
    out->ncand = res.ncand;
    out->npruned = res.npruned;
    out->ncompiled = res.ncompiled;
    out->ncompile_failed = res.ncompile_failed;
    out->ncorrect = res.ncorrect;
    at_search_result_free(&res);
    return rc;
}

/* ------------------------------------------------------------- the run */

typedef struct ctx {
    const at_suite *s;
    const at_suite_run_opts *o;
    const int *idx; /* selected entries */
    int n;
    at_suite_outcome *out; /* [n], by selection order */
    at_progress *pg;
    int ndone, threads;
    int live;       /* stderr is a terminal: a live "suite i/n" line */
    double geo_log; /* sum of log speedups of finished entries */
    int ngeo;
} ctx;

/* Entry `item`'s options: the shared ones, its op, dtype, shape and spec
** (spec[] holds the path), slot's GPU. */
static void entry_opts(const ctx *c, int slot, int item, at_search_opts *so, char *spec, size_t specn)
{
    const at_suite_run_opts *o = c->o;
    const at_suite_entry *e = &c->s->entries[c->idx[item]];
    *so = o->base;
    if (e->spec[0])
        snprintf(spec, specn, "%s", e->spec);
    else
        at_spec_default_path(o->home ? o->home : ".", e->op, spec, specn);
    so->op = e->op;
    so->dtype = o->dtype_override ? o->base.dtype : e->dtype;
    so->shape = e->shape;
    so->spec_path = spec;
    so->device = o->devices[slot];
    so->threads = c->threads;
    so->progress = o->ndevices == 1 ? o->base.progress : 0; /* several workers: the parent's line only */
}

/* What the entry on the GPU needs to start its successor's compile. */
typedef struct ahead {
    const ctx *c;
    int slot, next;
} ahead;

/* at_search_opts.before_gpu: the GPU phases of this entry begin, so the
** entry reserved next for this worker compiles now (compile_ahead.c). */
static void compile_next(void *arg)
{
    const ahead *a = arg;
    at_search_opts so;
    char spec[AT_SUITE_PATH_LEN + PATH_MAX];
    entry_opts(a->c, a->slot, a->next, &so, spec, sizeof spec);
    at_compile_ahead_start(&so);
}

/* Worker side: one entry with the shared options; item -1 is the worker's end. */
static int work(void *arg, int slot, int item, int next, void *result)
{
    ctx *c = arg;
    const at_suite_run_opts *o = c->o;
    struct timespec t0, t1;
    double waited = 0; /* for its compile ahead: this entry's compile time too */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (at_compile_ahead_wait(o->base.interrupt)) { /* the one the last entry started: its cubins are whole */
        clock_gettime(CLOCK_MONOTONIC, &t1);
        waited = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    }
    if (item < 0)
        return AT_POOL_NEXT;
    const at_suite_entry *e = &c->s->entries[c->idx[item]];
    at_suite_outcome *out = result;
    at_search_opts so;
    char spec[AT_SUITE_PATH_LEN + PATH_MAX];
    entry_opts(c, slot, item, &so, spec, sizeof spec);
    ahead a = {.c = c, .slot = slot, .next = next};
    if (next >= 0 && !o->no_ahead) { /* a dry run never reaches its GPU phases */
        so.before_gpu = compile_next;
        so.before_gpu_arg = &a;
    }
    out->dtype = (int)so.dtype;
    out->index = c->idx[item];
    out->device = so.device;
    out->worker = slot;
    at_suite_worker_fn fn = o->worker ? o->worker : at_suite_run_entry;
    int rc = fn(o->worker_arg, e, &so, out);
    out->seconds += waited;
    out->compile_s += waited;
    out->ran = 1;
    out->status = rc;
    if (rc != AT_OK && !out->msg[0])
        snprintf(out->msg, sizeof out->msg, "%s", at_errmsg());
    if (rc == AT_ERR_CUDA_STICKY)
        return AT_POOL_RESTART; /* the context is gone: a fresh process */
    if (rc == AT_ERR_NOGPU && !so.dry_run)
        return AT_POOL_RETIRE; /* this worker's GPU is missing */
    return AT_POOL_NEXT;
}

static double pct_ceiling(const at_suite_outcome *r)
{
    if (r->us > 0 && r->read_gbps > 0 && r->bytes > 0)
        return 100.0 * r->bytes / (r->us * 1e3) / r->read_gbps;
    return NAN;
}

/* Parent side: keep the answer, show it. */
static int done(void *arg, int slot, int item, const void *result, const char *lost)
{
    ctx *c = arg;
    at_suite_outcome *r = &c->out[item];
    const at_suite_entry *e = &c->s->entries[c->idx[item]];
    if (result)
        *r = *(const at_suite_outcome *)result;
    else {
        r->ran = 1;
        r->status = AT_ERR_CUDA_STICKY; /* a crash takes the process: like a lost context */
        r->worker = slot;
        r->device = c->o->devices[slot];
        snprintf(r->msg, sizeof r->msg, "%s", lost);
    }
    r->index = c->idx[item];
    c->ndone++;
    if (r->status == AT_OK && r->speedup > 0 && !r->dry_run) {
        c->geo_log += log(r->speedup);
        c->ngeo++;
    }
    char what[400];
    if (r->status != AT_OK)
        snprintf(what, sizeof what, "failed: %s", r->msg);
    else if (r->dry_run)
        snprintf(what, sizeof what, "dry run: %d candidates, %d pruned, %d compiled, %d failed", r->ncand,
                 r->npruned, r->ncompiled, r->ncompile_failed);
    else
        snprintf(what, sizeof what, "%s %.2f us  %.2fx%s", r->winner, r->us, r->speedup,
                 r->from_cache ? "  (cache)" : "");
    int w = c->n >= 1000 ? 4 : c->n >= 100 ? 3 : c->n >= 10 ? 2 : 1;
    at_progress_note(c->pg, "[%*d/%d] %s %s %s  %s  gpu %d  %.1fs", w, c->ndone, c->n, e->op,
                     at_dtype_name((at_dtype)r->dtype), e->shape_text, what,
                     r->device, r->seconds);
    if (c->o->ndevices > 1 && c->live) { /* plain output: the note is the line */
        char best[64] = "";
        if (c->ngeo)
            snprintf(best, sizeof best, "geomean %.2fx over %d", exp(c->geo_log / c->ngeo), c->ngeo);
        at_progress_update(c->pg, "suite", c->ndone, c->n, best);
    }
    /* a broken cache or no memory breaks every later entry too */
    return r->status == AT_ERR_CACHE || r->status == AT_ERR_NOMEM || r->status == AT_ERR_IO;
}

int at_suite_run(const at_suite *s, const at_suite_run_opts *o, at_suite_outcome **out, int *nout)
{
    ctx c = {.s = s, .o = o};
    int *idx = NULL, rc;
    *out = NULL;
    *nout = 0;
    if (!o->devices || o->ndevices < 1 || o->ndevices > AT_DEVICES_MAX)
        return at_fail(AT_ERR_USAGE, "at_suite_run: no devices");
    if ((rc = at_suite_select(s, o->only, &idx, &c.n)) != AT_OK)
        return rc;
    c.idx = idx;
    if (!(c.out = calloc((size_t)c.n, sizeof *c.out))) {
        free(idx);
        return at_fail(AT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < c.n; i++) {
        c.out[i].index = idx[i];
        c.out[i].status = AT_ERR_INTERRUPTED; /* until it runs */
        c.out[i].dtype = (int)(o->dtype_override ? o->base.dtype : s->entries[idx[i]].dtype);
        snprintf(c.out[i].msg, sizeof c.out[i].msg, "not run");
    }
    c.threads = o->base.threads;
    if (c.threads == 0 && o->ndevices > 1) { /* share the cores among the workers' compilers */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        c.threads = cores > o->ndevices ? (int)(cores / o->ndevices) : 1;
    }
    /* with one worker its own live lines show the phases; the parent adds
    ** a line per finished entry */
    at_progress_mode mode = at_progress_mode_for(stderr, o->quiet);
    c.live = mode == AT_PROGRESS_LIVE;
    at_progress_open(stderr, mode, &c.pg);
    int workers = o->ndevices < c.n ? o->ndevices : c.n;
    rc = at_pool_run(workers, c.n, sizeof(at_suite_outcome), work, done, &c, o->base.interrupt);
    at_progress_end(c.pg);
    at_progress_close(c.pg);
    int interrupted = rc == AT_ERR_INTERRUPTED || (o->base.interrupt && *o->base.interrupt);
    if (rc == AT_OK || rc == AT_ERR_INTERRUPTED || rc == AT_ERR_NOGPU) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", at_errmsg());
        int first = AT_OK;
        for (int i = 0; i < c.n && first == AT_OK; i++)
            if (c.out[i].ran && c.out[i].status != AT_OK) {
                first = c.out[i].status;
                snprintf(msg, sizeof msg, "%s %s %s: %s", s->entries[idx[i]].op, at_dtype_name((at_dtype)c.out[i].dtype),
                         s->entries[idx[i]].shape_text, c.out[i].msg);
            }
        int notrun = 0;
        for (int i = 0; i < c.n; i++)
            notrun += !c.out[i].ran;
        if (interrupted)
            rc = at_fail(AT_ERR_INTERRUPTED, "interrupted: %d of %d entries not finished; rerun the same command "
                                             "to continue (finished ones come from the cache)",
                         notrun, c.n);
        else if (first != AT_OK)
            rc = at_fail(first, "%s", msg);
        else if (notrun)
            rc = at_fail(rc != AT_OK ? rc : AT_ERR_NOGPU, "%d of %d entries not run: %s", notrun, c.n, msg);
        *out = c.out;
        *nout = c.n;
    } else
        free(c.out);
    free(idx);
    return rc;
}

/* ------------------------------------------------------------- reports */

static void fmt_num(char *buf, size_t n, const char *fmt, double v)
{
    if (isfinite(v) && v > 0)
        snprintf(buf, n, fmt, v);
    else
        snprintf(buf, n, "-");
}

void at_suite_report_text(FILE *f, const at_suite *s, const at_suite_outcome *r, int n, int status)
{
    int ok = 0, cached = 0, failed = 0, notrun = 0, ngeo = 0, ncompiled = 0, nahead = 0;
    double geo = 0, t_compile = 0, t_gpu = 0, t_all = 0;
    char dev[160] = "";
    for (int i = 0; i < n; i++)
        if (r[i].ran && r[i].device_name[0] && !strstr(dev, r[i].device_name) && strlen(dev) < 100)
            snprintf(dev + strlen(dev), sizeof dev - strlen(dev), "%s%s", dev[0] ? ", " : "", r[i].device_name);
    fprintf(f, "suite   %s (%s): %d entries%s%s\n", s->name, s->path, n, dev[0] ? " on " : "", dev);
    fprintf(f, "  %-18s %-5s %-14s %9s %9s %8s %6s %-5s %3s  %s\n", "op", "dtype", "shape", "us", "base us",
            "vs base", "%ceil", "cache", "gpu", "winner");
    for (int i = 0; i < n; i++) {
        const at_suite_outcome *o = &r[i];
        const at_suite_entry *e = &s->entries[o->index];
        char us[24], base[24], ratio[24], pct[24];
        fmt_num(us, sizeof us, "%.2f", o->us);
        fmt_num(base, sizeof base, "%.2f", o->base_us);
        fmt_num(ratio, sizeof ratio, "%.2fx", o->speedup);
        fmt_num(pct, sizeof pct, "%.0f%%", pct_ceiling(o));
        fprintf(f, "  %-18s %-5s %-14s ", e->op, at_dtype_name((at_dtype)o->dtype), e->shape_text);
        if (!o->ran) {
            notrun++;
            fprintf(f, "not run\n");
            continue;
        }
        if (o->status != AT_OK) {
            failed++;
            fprintf(f, "failed (%d): %s\n", o->status, o->msg);
            continue;
        }
        ok++;
        cached += o->from_cache;
        t_compile += o->compile_s;
        t_gpu += o->gpu_s;
        t_all += o->seconds;
        ncompiled += o->ncompiled;
        nahead += o->ncompile_cached;
        if (o->dry_run) {
            fprintf(f, "dry run: %d candidates, %d pruned, %d compiled, %d failed\n", o->ncand, o->npruned,
                    o->ncompiled, o->ncompile_failed);
            continue;
        }
        if (o->speedup > 0) {
            geo += log(o->speedup);
            ngeo++;
        }
        fprintf(f, "%9s %9s %8s %6s %-5s %3d  %s %s\n", us, base, ratio, pct, o->from_cache ? "yes" : "no",
                o->device, o->winner, o->params);
    }
    fprintf(f, "done    %d of %d ok (%d from the cache), %d failed, %d not run", ok, n, cached, failed, notrun);
    if (ngeo)
        fprintf(f, "; geometric mean vs baseline %.2fx over %d", exp(geo / ngeo), ngeo);
    fputc('\n', f);
    if (ok > cached) /* where the time of the entries run went, summed over workers */
        fprintf(f, "time    entries %.1f s: compile %.1f s (%d of %d candidates from the cubin cache), GPU %.1f s, "
                   "other %.1f s\n",
                t_all, t_compile, nahead, ncompiled, t_gpu, t_all - t_compile - t_gpu);
    if (status == AT_ERR_INTERRUPTED)
        fprintf(f, "        interrupted: rerun the same command to continue\n");
}

static void json_num(FILE *f, const char *key, double v)
{
    char buf[40];
    at_json_format_number(v, buf, sizeof buf);
    fprintf(f, ",\"%s\":%s", key, buf);
}

void at_suite_report_json(FILE *f, const at_suite *s, const at_suite_outcome *r, int n, int status,
                          const char *db_path)
{
    int ok = 0, cached = 0, failed = 0, notrun = 0, ngeo = 0;
    double geo = 0;
    fprintf(f, "{\"status\":%d,\"suite\":", status);
    at_json_write_string(f, s->name);
    fputs(",\"path\":", f);
    at_json_write_string(f, s->path);
    fputs(",\"db\":", f);
    if (db_path)
        at_json_write_string(f, db_path);
    else
        fputs("null", f);
    fputs(",\"entries\":[", f);
    for (int i = 0; i < n; i++) {
        const at_suite_outcome *o = &r[i];
        const at_suite_entry *e = &s->entries[o->index];
        fputs(i ? ",{\"op\":" : "{\"op\":", f);
        at_json_write_string(f, e->op);
        fprintf(f, ",\"dtype\":\"%s\",\"shape\":", at_dtype_name((at_dtype)o->dtype));
        at_json_write_string(f, e->shape_text);
        fputs(",\"note\":", f);
        at_json_write_string(f, e->note);
        fprintf(f, ",\"line\":%d,\"ran\":%s,\"status\":%d,\"error\":", e->line, o->ran ? "true" : "false",
                o->ran ? o->status : -1);
        if (o->ran && o->status != AT_OK)
            at_json_write_string(f, o->msg);
        else
            fputs("null", f);
        fprintf(f, ",\"from_cache\":%s,\"dry_run\":%s,\"device\":%d,\"worker\":%d,\"device_name\":",
                o->from_cache ? "true" : "false", o->dry_run ? "true" : "false", o->device, o->worker);
        at_json_write_string(f, o->device_name);
        fputs(",\"winner\":", f);
        at_json_write_string(f, o->winner);
        fputs(",\"params\":", f);
        at_json_write_string(f, o->params);
        int timed = o->ran && o->status == AT_OK && !o->dry_run;
        json_num(f, "us", timed ? o->us : NAN);
        json_num(f, "baseline_us", timed ? o->base_us : NAN);
        json_num(f, "speedup", timed ? o->speedup : NAN);
        json_num(f, "pct_ceiling", timed ? pct_ceiling(o) : NAN);
        json_num(f, "bytes", o->bytes > 0 ? o->bytes : NAN);
        json_num(f, "seconds", o->seconds);
        json_num(f, "compile_s", o->compile_s);
        json_num(f, "gpu_s", o->gpu_s);
        fprintf(f, ",\"candidates\":%d,\"pruned\":%d,\"compiled\":%d,\"compile_failed\":%d,\"compile_cached\":%d,"
                   "\"correct\":%d}",
                o->ncand, o->npruned, o->ncompiled, o->ncompile_failed, o->ncompile_cached, o->ncorrect);
        notrun += !o->ran;
        failed += o->ran && o->status != AT_OK;
        ok += o->ran && o->status == AT_OK;
        cached += o->ran && o->status == AT_OK && o->from_cache;
        if (timed && o->speedup > 0) {
            geo += log(o->speedup);
            ngeo++;
        }
    }
    fprintf(f, "],\"summary\":{\"entries\":%d,\"ok\":%d,\"from_cache\":%d,\"failed\":%d,\"not_run\":%d", n, ok,
            cached, failed, notrun);
    json_num(f, "geomean_speedup", ngeo ? exp(geo / ngeo) : NAN);
    fputs("}}\n", f);
}

/* ------------------------------------------------------------ the command */

static int cli_fail(int rc, int json)
{
    if (json) {
        printf("{\"status\":%d,\"error\":", rc);
        at_json_write_string(stdout, at_errmsg());
        printf("}\n");
    }
    fprintf(stderr, "autotune: %s\n", at_errmsg());
    return rc;
}

int at_suite_main(const at_suite_cli *c)
{
    at_suite *s = NULL;
    at_suite_outcome *res = NULL;
    int *devs = NULL, *idx = NULL, ndev = 0, n = 0, nres = 0, rc, one = c->base.device;
    if ((rc = at_suite_load(c->suite_path, &s)) != AT_OK || (rc = at_suite_select(s, c->only, &idx, &n)) != AT_OK)
        goto fail;
    /* every spec must be there before anything runs */
    for (int i = 0; i < n; i++) {
        const at_suite_entry *e = &s->entries[idx[i]];
        char spec[AT_SUITE_PATH_LEN + PATH_MAX];
        if (e->spec[0])
            snprintf(spec, sizeof spec, "%s", e->spec);
        else if (c->home)
            at_spec_default_path(c->home, e->op, spec, sizeof spec);
        else {
            rc = at_fail(AT_ERR_USAGE, "cannot find the search/ folder for %s's specs; set AUTOTUNE_HOME",
                         s->path);
            goto fail;
        }
        if (access(spec, R_OK) != 0) {
            if (e->line > 0)
                rc = at_fail(AT_ERR_SPEC, "%s:%d: %s %s: cannot read spec %s", s->path, e->line, e->op,
                             e->shape_text, spec);
            else
                rc = at_fail(AT_ERR_SPEC, "%s: %s %s: cannot read spec %s", s->path, e->op, e->shape_text, spec);
            goto fail;
        }
    }
    if (c->devices) {
        if ((rc = at_devices_parse(c->devices, c->base.dry_run, &devs, &ndev)) != AT_OK)
            goto fail;
    }
    at_suite_run_opts o = {.base = c->base, .dtype_override = c->dtype_override, .home = c->home, .only = c->only,
                           .devices = devs ? devs : &one, .ndevices = devs ? ndev : 1, .quiet = c->quiet,
                           .no_ahead = c->no_ahead};
    rc = at_suite_run(s, &o, &res, &nres);
    if (!res)
        goto fail;
    if (c->json)
        at_suite_report_json(stdout, s, res, nres, rc, c->base.dry_run ? NULL : c->base.db_path);
    else
        at_suite_report_text(stdout, s, res, nres, rc);
    if (rc != AT_OK)
        fprintf(stderr, "autotune: %s\n", at_errmsg());
    goto done;
fail:
    rc = cli_fail(rc, c->json);
done:
    free(res);
    free(devs);
    free(idx);
    at_suite_free(s);
    return rc;
}
