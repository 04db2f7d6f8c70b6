/*
** report.c — what a run prints: the human table (device and ceilings, the
** space, how it was timed, the ranking against the baselines, the winner)
** and the same facts as one JSON document for scripts. GEMV has one
** baseline (cuBLAS); the norms two (naive fused, unfused chain), shown side
** by side, the winner rule against the first. Also how the timing phase
** searched (strategy, replays per candidate, warm start) and where the
** time went (compile / verify / time / other).
*/
#include "autotune.h"
#include "json.h"

#include <math.h>
#include <string.h>

/* Baseline b's names; before the op filled them (an early failure), the
** GEMV names, as the output always had. */
static const at_search_baseline *base_desc(const at_search_result *r, int b)
{
    static const at_search_baseline cublas = {.strategy = "cublas", .label = "cuBLAS",
                                              .what = "cublasGemmEx (fp32 compute)",
                                              .json_name = "cublasGemmEx"};
    return b < r->nbaselines ? &r->baselines[b] : &cublas;
}

/* The RMSNorm family (TxH, every input rotated); not the fused ops, whose
** names hold "norm" too but which rotate weights (MxKxN). */
static int is_norm_op(const char *op)
{
    return strstr(op, "norm") && !strstr(op, "gemv");
}

/* Baselines shown beside baseline 0 (the norms' unfused chain). */
static int nbase(const at_search_result *r)
{
    return r->nbaselines > 1 ? r->nbaselines : 1;
}

/* An ok row whose reason flags it (a harness error), not a note such as
** "screened: median of 2 replays" or "not measured". */
static int flagged(const at_trial *t)
{
    return t->state == AT_TRIAL_OK && strncmp(t->reason, "harness error", 13) == 0;
}

/* Seconds not spent compiling, setting up the GPU, verifying or timing
** (the spec, the cache, the reference, the worker's start). */
static double other_s(const at_search_result *r)
{
    double o = r->t_total - r->t_compile - r->t_setup - r->t_verify - r->t_time;
    return o > 0 ? o : 0.0;
}

static double pct_ceiling(const at_search_result *r, double gbps)
{
    return r->dev.read_gbps > 0 ? 100.0 * gbps / r->dev.read_gbps : 0.0;
}

/* The fastest timed row launched without programmatic dependent launch, or
** NULL. A TP_PDL=1 time assumes the kernel before it in the stream lets it
** start early (in the timing loop: itself); this row is the figure that
** holds whatever runs before. */
static const at_search_row *best_without_pdl(const at_search_result *r)
{
    for (int i = 0; i < r->nrows; i++) {
        const at_search_row *row = &r->rows[i];
        if (row->trial.state != AT_TRIAL_OK || row->trial.us <= 0)
            break;
        if (at_candidate_param(&row->cand, "TP_PDL", 0) == 0)
            return row;
    }
    return NULL;
}

static void device_line(FILE *f, const at_search_result *r)
{
    if (!r->dev.name[0]) {
        fprintf(f, "device  none (compiling for sm_%d)\n", r->arch);
        return;
    }
    fprintf(f, "device  %s (sm_%d%d, %d SMs, L2 %.0f MB)", r->dev.name, r->dev.cc_major,
            r->dev.cc_minor, r->dev.sms, (double)r->dev.l2_bytes / 1e6);
    if (r->dev.read_gbps > 0)
        fprintf(f, "  read ceiling %.2f TB/s, copy %.2f TB/s, empty kernel %.2f us",
                r->dev.read_gbps / 1e3, r->dev.copy_gbps / 1e3, r->dev.empty_us);
    fputc('\n', f);
}

static void space_line(FILE *f, const at_search_result *r)
{
    fprintf(f, "space   %d candidates%s%s%s, %d pruned (named constraints), %d compiled (", r->ncand,
            r->space_text[0] ? " (" : "", r->space_text, r->space_text[0] ? ")" : "", r->npruned, r->ncompiled);
    if (r->nprograms && r->nprograms < r->ncompiled + r->ncompile_failed) /* search.c [PDL_LAUNCH] */
        fprintf(f, "%d NVRTC programs, ", r->nprograms);
    fprintf(f, "%d failed", r->ncompile_failed);
    if (r->nspills) /* [SPILLS] search.c sets the state */
        fprintf(f, ", %d spill%s", r->nspills, r->spills_allowed ? ", timed: allow_spills" : " not timed");
    if (r->noccupancy_rejected)
        fprintf(f, ", %d below min_occupancy %.2f", r->noccupancy_rejected, r->min_occupancy);
    if (r->ncompile_cached)
        fprintf(f, ", %d from the cubin cache", r->ncompile_cached);
    if (r->nunreported) /* nvrtc.c: NVRTC gave no ptxas report */
        fprintf(f, ", %d without a ptxas report: spills unknown", r->nunreported);
    fputc(')', f);
    if (!r->dry_run)
        fprintf(f, ", %d correct, %d wrong", r->ncorrect, r->nwrong);
    if (r->ncrashed)
        fprintf(f, ", %d crashed", r->ncrashed);
    if (r->ntimeout)
        fprintf(f, ", %d timed out", r->ntimeout);
    if (r->nskipped)
        fprintf(f, ", %d skipped (failed before, cached)", r->nskipped);
    fputc('\n', f);
}

int at_report_prune_counts(const at_search_result *r, const char **names, int *counts, int max)
{
    int n = 0;
    for (int i = 0; i < r->nrows; i++) {
        const char *by = r->rows[i].cand.pruned_by;
        int k = 0;
        if (!by[0])
            continue;
        while (k < n && strcmp(names[k], by) != 0)
            k++;
        if (k == n && n < max) {
            names[n] = by;
            counts[n++] = 0;
        }
        if (k < n)
            counts[k]++;
    }
    return n;
}

/* "pruned by: widest_vec 3000, registers_for_loads 420, ..." (first seen first). */
static void prune_summary(FILE *f, const at_search_result *r)
{
    enum { MAXC = 32 };
    const char *name[MAXC];
    int count[MAXC], n = at_report_prune_counts(r, name, count, MAXC);
    if (n == 0)
        return;
    fputs("pruned  by", f);
    for (int k = 0; k < n; k++)
        fprintf(f, "%s %s %d", k ? "," : "", name[k], count[k]);
    fputc('\n', f);
}

/* How the timing phase searches (dry run: would search), and what it did:
** each timed row by the replays of its most precise measurement. */
static void search_line(FILE *f, const at_search_result *r)
{
    enum { MAXR = 16 };
    int reps[MAXR], count[MAXR], nr = 0;
    if (!r->search[0])
        return;
    fprintf(f, "search  %s (%s%s), effort %s", r->search, strcmp(r->search_from, "default") ? "from " : "",
            r->search_from, r->effort);
    if (r->budget > 0)
        fprintf(f, ", budget %d", r->budget);
    fprintf(f, "; full precision %d replays, final round %d replays", r->full_reps, r->final_reps);
    if (r->dry_run) {
        fputc('\n', f);
        return;
    }
    for (int i = 0; i < r->nrows; i++) {
        int k = 0, v = r->rows[i].reps;
        if (v <= 0 || r->rows[i].trial.state != AT_TRIAL_OK)
            continue;
        while (k < nr && reps[k] != v)
            k++;
        if (k == nr && nr < MAXR) {
            reps[nr] = v;
            count[nr++] = 0;
        }
        if (k < nr)
            count[k]++;
    }
    for (int a = 1; a < nr; a++) /* fewest replays first */
        for (int b = a; b > 0 && reps[b - 1] > reps[b]; b--) {
            int t = reps[b], c = count[b];
            reps[b] = reps[b - 1], count[b] = count[b - 1];
            reps[b - 1] = t, count[b - 1] = c;
        }
    fprintf(f, "\n        timed %d of %d candidates", r->nmeasured, r->nmeasured + r->nnot_measured);
    for (int k = 0; k < nr; k++)
        fprintf(f, "%s%d at %d replay%s", k ? ", " : " (most precise: ", count[k], reps[k], reps[k] == 1 ? "" : "s");
    if (nr)
        fputc(')', f);
    fprintf(f, ", %lld replays in all", r->cost_reps);
    if (r->nwarm)
        fprintf(f, "; warm start: %d seed%s from %d tuned shape%s", r->nwarm, r->nwarm == 1 ? "" : "s",
                r->nwarm_shapes, r->nwarm_shapes == 1 ? "" : "s");
    if (r->nnot_measured)
        fprintf(f, "; %d not measured (not stored: a later run measures them)", r->nnot_measured);
    fputc('\n', f);
}

static void dry_rows(FILE *f, const at_search_result *r)
{
    fprintf(f, "  %-9s %-52s %-14s %s\n", "strategy", "params", "state", "regs/spill or why pruned");
    for (int i = 0; i < r->nrows; i++) {
        const at_trial *t = &r->rows[i].trial;
        if (t->state == AT_TRIAL_PRUNED || t->state == AT_TRIAL_COMPILE_FAIL || t->state == AT_TRIAL_SPILLS)
            fprintf(f, "  %-9s %-52s %-14s %s\n", t->strategy, t->params, at_trial_state_name(t->state),
                    t->reason);
        else if (t->reason[0]) /* never compiled (interrupted) */
            fprintf(f, "  %-9s %-52s %-14s %s\n", t->strategy, t->params, "-", t->reason);
        else
            fprintf(f, "  %-9s %-52s %-14s %d regs, %d B spill, %d B smem, occupancy %.2f\n", t->strategy,
                    t->params, "compiled", t->regs, t->spill_bytes, t->smem_bytes, t->occupancy);
    }
}

void at_report_text(FILE *f, const at_search_opts *o, const at_search_result *r, int top,
                    const char *db_path)
{
    char shape[64];
    at_shape_format(&o->shape, shape, sizeof shape);
    device_line(f, r);
    if (r->from_cache) {
        const at_winner *w = &r->winner;
        fprintf(f, "cached  %s %s %s (tuned before; --force retunes)\n", o->op, at_dtype_name(o->dtype), shape);
        fprintf(f, "winner  %s %s  %.2f us (%.2f-%.2f), %s %.2f us, %.2fx, %.0f GB/s\n", w->strategy,
                w->params, w->us, w->us_min, w->us_max, base_desc(r, 0)->label, w->baseline_us, w->speedup,
                w->us > 0 ? w->bytes / (w->us * 1e3) : 0.0);
        return;
    }
    space_line(f, r);
    prune_summary(f, r);
    search_line(f, r);
    if (r->dry_run) {
        dry_rows(f, r);
        fprintf(f, "compile %.1f s on all cores for sm_%d (no GPU used)\n", r->t_compile, r->arch);
        fprintf(f, "time    compile %.1f s, other %.1f s, total %.1f s\n", r->t_compile, other_s(r), r->t_total);
        return;
    }
    int full = r->full_reps > 0 ? r->full_reps : r->reps, fin = r->final_reps > 0 ? r->final_reps : 3 * r->reps;
    if (is_norm_op(r->key.op)) /* the norms: every input rotated, two baselines */
        fprintf(f, "timing  cold inputs (%d copies of x%s, w, y: %.0f MiB; %d graph%s of %d launches), graph "
                   "replay, median of up to %d (top %d: median of %d); eps %.7g%s\n",
                r->copies, strstr(r->key.op, "add_") ? ", residual" : "", r->working_set_mib, r->groups,
                r->groups == 1 ? "" : "s", r->launches, full, r->nfinal, fin, r->eps,
                strstr(r->key.op, "add_") ? "; residual updated in place while timed" : "");
    else
        fprintf(f, "timing  cold weights (%d copies, %.0f MiB), graph replay of %d launches (screening: %d), "
                   "median of up to %d (top %d: median of %d)%s%s\n",
                r->copies, r->working_set_mib, r->launches, r->screen_launches, full, r->nfinal, fin,
                strcmp(r->key.op, "gemv_add") == 0 ? "; residual updated in place while timed" : "",
                r->eps > 0 ? "; the norm weight w rotated with them" : "");
    char vs[32];
    snprintf(vs, sizeof vs, "vs %s", base_desc(r, 0)->label);
    fprintf(f, "  %-4s  %-9s %-52s %8s %13s %4s %7s %6s %6s %9s", "rank", "strategy", "params", "us",
            "min-max", "reps", "stream", "GB/s", "%ceil", vs);
    for (int b = 1; b < nbase(r); b++) {
        snprintf(vs, sizeof vs, "vs %s", base_desc(r, b)->label);
        fprintf(f, " %10s", vs);
    }
    fputc('\n', f);
    int shown = 0;
    for (int i = 0; i < r->nrows; i++) {
        const at_search_row *row = &r->rows[i];
        const at_trial *t = &row->trial;
        if (t->state != AT_TRIAL_OK || t->us <= 0)
            break;
        if (top >= 0 && shown >= top)
            break;
        char stream[16] = "-";
        if (t->stream_us > 0)
            snprintf(stream, sizeof stream, "%.2f", t->stream_us);
        fprintf(f, "  %-4d  %-9s %-52s %8.2f %6.2f-%-6.2f %4d %7s %6.0f %5.0f%% %8.2fx", ++shown, t->strategy,
                t->params, t->us, t->us_min, t->us_max, row->reps, stream, row->gbps, pct_ceiling(r, row->gbps),
                row->ratio);
        for (int b = 1; b < nbase(r); b++)
            fprintf(f, " %9.2fx", r->baselines[b].us / t->us);
        fprintf(f, "%s\n", flagged(t) ? "  (!)" : "");
    }
    for (int b = 0; b < nbase(r); b++) {
        const at_search_baseline *d = base_desc(r, b);
        double us = b == 0 ? r->base_us : d->us, mn = b == 0 ? r->base_min : d->us_min;
        double mx = b == 0 ? r->base_max : d->us_max, st = b == 0 ? r->base_stream_us : d->stream_us;
        if (us <= 0)
            continue;
        double g = r->bytes / (us * 1e3);
        fprintf(f, "  %-4s  %-9s %-52s %8.2f %6.2f-%-6.2f %4s %7.2f %6.0f %5.0f%% %8.2fx", "-", d->strategy, d->what,
                us, mn, mx, "", st, g, pct_ceiling(r, g), r->base_us > 0 ? r->base_us / us : 0.0);
        for (int k = 1; k < nbase(r); k++)
            fprintf(f, " %9.2fx", r->baselines[k].us / us);
        fputc('\n', f);
    }
    const at_search_row *np = best_without_pdl(r);
    if (np && np != &r->rows[0])
        fprintf(f, "  best without PDL: %s %s  %.2f us, %.2fx %s\n", np->trial.strategy, np->trial.params,
                np->trial.us, np->ratio, base_desc(r, 0)->label);
    for (int i = 0; i < r->nrows; i++)
        if (flagged(&r->rows[i].trial))
            fprintf(f, "  (!) %s %s: %s\n", r->rows[i].trial.strategy, r->rows[i].trial.params,
                    r->rows[i].trial.reason);
    int nbad = 0;
    for (int i = 0; i < r->nrows; i++) {
        const at_trial *t = &r->rows[i].trial;
        if (t->state == AT_TRIAL_WRONG || t->state == AT_TRIAL_CRASHED || t->state == AT_TRIAL_TIMEOUT ||
            t->state == AT_TRIAL_COMPILE_FAIL) {
            if (nbad++ < 10)
                fprintf(f, "  %-12s %-9s %s: %s\n", at_trial_state_name(t->state), t->strategy, t->params,
                        t->reason);
        }
    }
    if (nbad > 10)
        fprintf(f, "  ... and %d more failed candidates (--json lists all)\n", nbad - 10);
    fprintf(f, "time    compile %.1f s, gpu setup %.1f s, verify %.1f s, timing %.1f s (%d graph captures %.1f s), other %.1f s, total %.1f s\n",
            r->t_compile, r->t_setup, r->t_verify, r->t_time, r->ngraphs, r->t_graph, other_s(r), r->t_total);
    if (r->winner.strategy[0] && !r->interrupted) {
        const at_winner *w = &r->winner;
        if (strcmp(w->strategy, base_desc(r, 0)->strategy) == 0) {
            fprintf(f, "winner  %s (no candidate beat it beyond the noise)", w->strategy);
        } else {
            fprintf(f, "winner  %s %s  %.2f us, %.2fx %s", w->strategy, w->params, w->us, w->speedup,
                    base_desc(r, 0)->label);
        }
        for (int b = 1; b < nbase(r); b++)
            if (w->us > 0)
                fprintf(f, ", %.2fx %s", r->baselines[b].us / w->us, r->baselines[b].label);
        fprintf(f, "  stored in %s", db_path);
        if (r->nsuperseded > 0)
            fprintf(f, ", replacing %d earlier answer%s for this shape", r->nsuperseded,
                    r->nsuperseded == 1 ? "" : "s");
        fputc('\n', f);
    }
}

/* A JSON string (cache/json.c's writer; NULL as ""). */
static void jstr(FILE *f, const char *s)
{
    at_json_write_string(f, s ? s : "");
}

/* A JSON number, or null where C has none (NaN, infinity: JSON has neither). */
static void jnum(FILE *f, const char *key, const char *fmt, double v)
{
    fprintf(f, ",\"%s\":", key);
    if (isfinite(v))
        fprintf(f, fmt, v);
    else
        fputs("null", f);
}

static void jtrial(FILE *f, const at_search_row *row)
{
    const at_trial *t = &row->trial;
    fputs("{\"strategy\":", f);
    jstr(f, t->strategy);
    fputs(",\"params\":", f);
    jstr(f, t->params);
    fputs(",\"state\":", f);
    jstr(f, at_trial_state_name(t->state));
    fputs(",\"reason\":", f);
    jstr(f, t->reason);
    jnum(f, "us", "%.4f", t->us);
    jnum(f, "us_min", "%.4f", t->us_min);
    jnum(f, "us_max", "%.4f", t->us_max);
    jnum(f, "stream_us", "%.4f", t->stream_us);
    jnum(f, "gbps", "%.1f", row->gbps);
    jnum(f, "vs_baseline", "%.4f", row->ratio);
    jnum(f, "rel_err", "%.3g", t->rel_err);
    fprintf(f, ",\"regs\":%d,\"spill_bytes\":%d,\"smem_bytes\":%d", t->regs, t->spill_bytes, t->smem_bytes);
    jnum(f, "occupancy", "%.3f", t->occupancy);
    fprintf(f, ",\"reps\":%d,\"final\":%s}", row->reps, row->final ? "true" : "false");
}

void at_report_json(FILE *f, const at_search_opts *o, const at_search_result *r, const char *db_path,
                    int status)
{
    char shape[64];
    at_shape_format(&o->shape, shape, sizeof shape);
    fputs("{\"op\":", f);
    jstr(f, o->op);
    fputs(",\"dtype\":", f);
    jstr(f, at_dtype_name(o->dtype));
    fputs(",\"shape\":", f);
    jstr(f, shape);
    fprintf(f, ",\"status\":%d,\"error\":", status);
    jstr(f, status ? at_errmsg() : "");
    fprintf(f, ",\"from_cache\":%s,\"dry_run\":%s,\"interrupted\":%s,\"superseded\":%d,\"db\":",
            r->from_cache ? "true" : "false", r->dry_run ? "true" : "false",
            r->interrupted ? "true" : "false", r->nsuperseded);
    jstr(f, db_path ? db_path : "");
    fputs(",\"key_sha\":", f);
    jstr(f, r->key_sha);
    fputs(",\"device\":{\"name\":", f);
    jstr(f, r->dev.name);
    fprintf(f, ",\"arch\":%d,\"sms\":%d,\"l2_bytes\":%lld,\"driver\":%d,\"read_gbps\":%.1f,"
               "\"copy_gbps\":%.1f,\"empty_us\":%.3f}",
            r->arch, r->dev.sms, (long long)r->dev.l2_bytes, r->dev.driver_version, r->dev.read_gbps,
            r->dev.copy_gbps, r->dev.empty_us);
    fprintf(f, ",\"space\":{\"candidates\":%d,\"pruned\":%d,\"compiled\":%d,\"compile_failed\":%d,"
               "\"compile_cached\":%d,\"programs\":%d,\"unreported\":%d,\"spills\":%d,\"spills_rejected\":%d,\"spills_allowed\":%s,\"correct\":%d,"
               "\"wrong\":%d,\"crashed\":%d,\"timeout\":%d,\"skipped\":%d,\"min_occupancy\":%.2f,"
               "\"occupancy_rejected\":%d}",
            r->ncand, r->npruned, r->ncompiled, r->ncompile_failed, r->ncompile_cached, r->nprograms, r->nunreported, r->nspills,
            r->nspills_rejected, r->spills_allowed ? "true" : "false", r->ncorrect, r->nwrong, r->ncrashed,
            r->ntimeout, r->nskipped, r->min_occupancy, r->noccupancy_rejected);
    fputs(",\"search\":{\"strategy\":", f);
    jstr(f, r->search);
    fputs(",\"from\":", f);
    jstr(f, r->search_from);
    fputs(",\"effort\":", f);
    jstr(f, r->effort);
    fprintf(f, ",\"budget\":%d,\"full_reps\":%d,\"final_reps\":%d,\"measured\":%d,\"not_measured\":%d,"
               "\"cost_reps\":%lld,\"warm_seeds\":%d,\"warm_shapes\":%d,\"finalists\":%d}",
            r->budget, r->full_reps, r->final_reps, r->nmeasured, r->nnot_measured, r->cost_reps, r->nwarm,
            r->nwarm_shapes, r->nfinal);
    fprintf(f, ",\"timing\":{\"copies\":%d,\"working_set_mib\":%.1f,\"launches\":%d,\"reps\":%d,"
               "\"bytes\":%.0f,\"compile_s\":%.3f,\"setup_s\":%.3f,\"verify_s\":%.3f,\"time_s\":%.3f,"
               "\"graph_s\":%.3f,\"graphs\":%d,\"screen_launches\":%d,\"other_s\":%.3f,\"total_s\":%.3f}",
            r->copies, r->working_set_mib, r->launches, r->reps, r->bytes, r->t_compile, r->t_setup, r->t_verify,
            r->t_time, r->t_graph, r->ngraphs, r->screen_launches, other_s(r), r->t_total);
    fprintf(f, ",\"baseline\":{\"name\":");
    jstr(f, base_desc(r, 0)->json_name);
    fprintf(f, ",\"us\":%.4f,\"us_min\":%.4f,\"us_max\":%.4f,\"stream_us\":%.4f}", r->base_us, r->base_min,
            r->base_max, r->base_stream_us);
    if (r->nbaselines > 1) { /* the norms and gemv_add: every baseline (the norms: and eps) */
        if (strstr(r->key.op, "norm")) {
            jnum(f, "eps", "%.7g", r->eps); /* a float: 7 digits say it */
            fprintf(f, ",\"groups\":%d", r->groups);
        }
        fputs(",\"baselines\":[", f);
        for (int b = 0; b < r->nbaselines; b++) {
            const at_search_baseline *d = &r->baselines[b];
            fputs(b ? ",{\"name\":" : "{\"name\":", f);
            jstr(f, d->json_name);
            fputs(",\"strategy\":", f);
            jstr(f, d->strategy);
            fputs(",\"what\":", f);
            jstr(f, d->what);
            jnum(f, "us", "%.4f", d->us);
            jnum(f, "us_min", "%.4f", d->us_min);
            jnum(f, "us_max", "%.4f", d->us_max);
            jnum(f, "stream_us", "%.4f", d->stream_us);
            jnum(f, "gbps", "%.1f", d->gbps);
            fputc('}', f);
        }
        fputc(']', f);
    }
    const at_winner *w = &r->winner;
    if (w->strategy[0]) {
        fputs(",\"winner\":{\"strategy\":", f);
        jstr(f, w->strategy);
        fputs(",\"params\":", f);
        jstr(f, w->params);
        fprintf(f, ",\"us\":%.4f,\"us_min\":%.4f,\"us_max\":%.4f,\"baseline_us\":%.4f,\"speedup\":%.4f}",
                w->us, w->us_min, w->us_max, w->baseline_us, w->speedup);
    } else {
        fputs(",\"winner\":null", f);
    }
    const at_search_row *np = best_without_pdl(r);
    if (np) {
        fputs(",\"best_without_pdl\":{\"strategy\":", f);
        jstr(f, np->trial.strategy);
        fputs(",\"params\":", f);
        jstr(f, np->trial.params);
        fprintf(f, ",\"us\":%.4f,\"vs_baseline\":%.4f}", np->trial.us, np->ratio);
    } else {
        fputs(",\"best_without_pdl\":null", f);
    }
    fputs(",\"candidates\":[", f);
    for (int i = 0; i < r->nrows; i++) {
        if (i)
            fputc(',', f);
        jtrial(f, &r->rows[i]);
    }
    fputs("]}\n", f);
}
