/*
** report.c — the decode example's report (report.h): the text tables (time
** and tokens/s per mode, the step against its physical limit, atk's paths,
** the agreement checks, the per-op breakdown with the stand-ins apart) and
** the JSON fields of one batch size or of the trace. Reads results only:
** nothing here touches the GPU.
*/
#include "report.h"

#include <math.h>
#include <string.h>

report_settings report_cfg = {DECODE_ALL_MODES, 0.0, 0};

const char *const report_op_names[K_COUNT] = {
    [K_QKVG] = "gemv 2048->5120 (qkv+gate)",
    [K_ATTN_O] = "gemv 2048->2048 (attn/lin out)",
    [K_QKVZBA] = "gemv 2048->8224 (in_proj_qkvz|ba)",
    [K_GATE_UP] = "gemv 2048->12288 (gate_up)",
    [K_DOWN] = "gemv 6144->2048 (down)",
    [K_LM_HEAD] = "gemv 2048->248320 (lm_head)",
    [K_NORM] = "add + gemma rmsnorm (x49)",
    [K_ATTN] = "attention (stand-in)",
    [K_LINEAR] = "linear attention (stand-in)",
    [K_SILU_MUL] = "silu * mul",
    [K_NORM_QKVG] = "norm+gemv 2048->5120 (qkv+gate)",
    [K_NORM_QKVZBA] = "norm+gemv 2048->8224 (qkvz|ba)",
    [K_NORM_SWIGLU] = "norm+gemv+swiglu 2048->6144",
    [K_ATTN_O_ADD] = "gemv+add 2048->2048 (attn out)",
    [K_DOWN_ADD] = "gemv+add 6144->2048 (down)",
    [K_NORM_LM_HEAD] = "norm+gemv 2048->248320 (lm_head)"};
/* The breakdown's order: what each mode runs in step order, then the
** stand-ins apart. */
static const enum op_kind op_order[K_COUNT] = {
    K_NORM,       K_QKVG,        K_QKVZBA,   K_ATTN_O,       K_GATE_UP, K_SILU_MUL,
    K_DOWN,       K_LM_HEAD,     K_NORM_QKVG, K_NORM_QKVZBA, K_ATTN_O_ADD, K_NORM_SWIGLU,
    K_DOWN_ADD,   K_NORM_LM_HEAD, K_ATTN,     K_LINEAR};
const char *const report_mode_names[NMODES + 1] = {"", "cuBLAS + unfused norms", "cuBLAS + naive fused norms",
                                                   "atk (tuned cache)", "atk fused (norm/SwiGLU/add in GEMVs)"};
const char *const report_mode_keys[NMODES + 1] = {"", "cublas_unfused", "cublas_naive", "atk", "atk_fused"};


void report_paths_total(const paths p[ATK_NOPS], paths *t)
{
    memset(t, 0, sizeof *t);
    for (int op = 0; op < ATK_NOPS; op++) {
        t->calls += p[op].calls;
        t->tuned += p[op].tuned;
        t->bucket += p[op].bucket;
        t->inferred += p[op].inferred;
        t->fallback += p[op].fallback;
    }
}

void report_paths(FILE *out, const paths p[ATK_NOPS], const char *indent)
{
    for (int op = 0; op < ATK_NOPS; op++)
        if (p[op].calls)
            fprintf(out, "%s%-26s calls %7llu  tuned %7llu  bucket %7llu  inferred %7llu  fallback %7llu\n", indent,
                    atk_op_name(op), p[op].calls, p[op].tuned, p[op].bucket, p[op].inferred, p[op].fallback);
}

void report_checks(FILE *out, const result *r, const char *what)
{
    for (int mode = 2; mode <= NMODES; mode++) {
        const check *c = &r->c[mode];
        if (!(report_cfg.modes & (1u << mode)))
            continue;
        if (!c->run) {
            fprintf(out, "  %s (%d) vs (1): not run (atk_open failed): FAIL\n", what, mode);
            continue;
        }
        int ok = c->hidden <= AGREE_TOL && c->logits <= AGREE_TOL;
        fprintf(out, "  %s (%d) vs (1): worst token row: hidden rel err %.3e (M=%d row %d), logits %.3e (M=%d row "
                     "%d): %s\n",
                what, mode, c->hidden, c->hidden_m, c->hidden_row, c->logits, c->logits_m, c->logits_row,
                ok ? "agree (<= 5e-2)" : "DIFFER");
    }
}

/* The step's physical limit in us: the bytes it must move (the stand-ins'
** too when the timed step runs them) at the read ceiling; 0 unmeasured. */
double report_limit_us(const step_bytes *b)
{
    if (!(report_cfg.read_gbps > 0))
        return 0.0;
    return (b->weights + b->activations + (report_cfg.no_standins ? 0.0 : b->standins)) / (report_cfg.read_gbps * 1e3);
}

/* The stand-ins' part of the limit (0 when they are not timed). */
double report_standin_limit_us(const step_bytes *b)
{
    return report_cfg.read_gbps > 0 && !report_cfg.no_standins ? b->standins / (report_cfg.read_gbps * 1e3) : 0.0;
}

/* Mode's step time as a share of the limit, in percent; 0: not run. */
double report_pct_of_limit(const result *r, int mode)
{
    double lim = report_limit_us(&r->bytes);
    return lim > 0 && r->t[mode].med > 0 ? 100.0 * lim / r->t[mode].med : 0.0;
}

/* A table report_cell: the value, or "-" for a mode not run. */
void report_cell(FILE *out, int width, const char *fmt, double v, int run)
{
    char buf[64];
    if (run)
        snprintf(buf, sizeof buf, fmt, v);
    else
        snprintf(buf, sizeof buf, "-");
    fprintf(out, " %*s", width, buf);
}

/* A JSON number, or null for not run / not finite. */
void report_jnum(FILE *f, double v, int run)
{
    if (run && isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

void report_jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_paths(FILE *f, const paths p[ATK_NOPS])
{
    int first = 1;
    fputc('{', f);
    for (int op = 0; op < ATK_NOPS; op++) {
        if (!p[op].calls)
            continue;
        fprintf(f, "%s", first ? "" : ", ");
        report_jstr(f, atk_op_name(op));
        fprintf(f, ": {\"calls\": %llu, \"tuned\": %llu, \"bucket\": %llu, \"inferred\": %llu, \"fallback\": %llu}",
                p[op].calls, p[op].tuned, p[op].bucket, p[op].inferred, p[op].fallback);
        first = 0;
    }
    fputc('}', f);
}

/* "b over a": mode b's tokens/s over mode a's (null unless both ran). */
static void json_ratio(FILE *f, const char *key, const result *r, int b, int a)
{
    fprintf(f, ", \"%s\": ", key);
    report_jnum(f, r->t[b].med > 0 ? r->t[a].med / r->t[b].med : 0, r->t[a].med > 0 && r->t[b].med > 0);
}

/* The fields common to a batch size and the trace (after the opening). */
void report_json(FILE *f, const result *r, double tokens_per_step)
{
    fputs("\"us_per_step\": {", f);
    for (int mode = 1; mode <= NMODES; mode++) {
        fprintf(f, "%s\"%s\": ", mode > 1 ? ", " : "", report_mode_keys[mode]);
        if (!(r->t[mode].med > 0)) {
            fputs("null", f);
            continue;
        }
        fputs("{\"median\": ", f);
        report_jnum(f, r->t[mode].med, 1);
        fputs(", \"min\": ", f);
        report_jnum(f, r->t[mode].min, 1);
        fputs(", \"max\": ", f);
        report_jnum(f, r->t[mode].max, 1);
        fputc('}', f);
    }
    fputs("}, \"tokens_per_s\": {", f);
    for (int mode = 1; mode <= NMODES; mode++) {
        fprintf(f, "%s\"%s\": ", mode > 1 ? ", " : "", report_mode_keys[mode]);
        report_jnum(f, r->t[mode].med > 0 ? 1e6 * tokens_per_step / r->t[mode].med : 0, r->t[mode].med > 0);
    }
    fputc('}', f);
    json_ratio(f, "ratio_atk_over_cublas_naive", r, MODE_ATK, MODE_CUBLAS_NAIVE);
    json_ratio(f, "ratio_fused_over_cublas_unfused", r, MODE_FUSED, MODE_CUBLAS_UNFUSED);
    json_ratio(f, "ratio_fused_over_cublas_naive", r, MODE_FUSED, MODE_CUBLAS_NAIVE);
    json_ratio(f, "ratio_fused_over_atk", r, MODE_FUSED, MODE_ATK);
    fputs(", \"limit\": {\"read_gbps\": ", f);
    report_jnum(f, report_cfg.read_gbps, report_cfg.read_gbps > 0);
    fprintf(f, ", \"weight_bytes\": %.0f, \"activation_bytes\": %.0f, \"standin_bytes\": %.0f, \"standins_timed\": %s, "
               "\"us\": ",
            r->bytes.weights, r->bytes.activations, r->bytes.standins, report_cfg.no_standins ? "false" : "true");
    report_jnum(f, report_limit_us(&r->bytes), report_cfg.read_gbps > 0);
    fputs(", \"standin_us\": ", f);
    report_jnum(f, report_standin_limit_us(&r->bytes), report_cfg.read_gbps > 0);
    fputs(", \"pct_of_limit\": {", f);
    for (int mode = 1; mode <= NMODES; mode++) {
        fprintf(f, "%s\"%s\": ", mode > 1 ? ", " : "", report_mode_keys[mode]);
        report_jnum(f, report_pct_of_limit(r, mode), report_pct_of_limit(r, mode) > 0);
    }
    fputs("}}, \"atk_paths\": ", f);
    json_paths(f, r->p[MODE_ATK]);
    fputs(", \"atk_fused_paths\": ", f);
    json_paths(f, r->p[MODE_FUSED]);
    fputs(", \"check\": {", f);
    for (int mode = 2; mode <= NMODES; mode++) {
        const check *c = &r->c[mode];
        fprintf(f, "%s\"%s\": ", mode > 2 ? ", " : "", report_mode_keys[mode]);
        if (!(report_cfg.modes & (1u << mode))) {
            fputs("null", f);
            continue;
        }
        fputs("{\"hidden_rel_err\": ", f);
        report_jnum(f, c->hidden, c->run);
        fprintf(f, ", \"hidden_m\": %d, \"hidden_row\": %d, \"logits_rel_err\": ", c->hidden_m, c->hidden_row);
        report_jnum(f, c->logits, c->run);
        fprintf(f, ", \"logits_m\": %d, \"logits_row\": %d}", c->logits_m, c->logits_row);
    }
    fprintf(f, "}, \"agree\": %s", r->agree ? "true" : "false");
    if (r->have_ops) {
        fputs(", \"op_us\": {", f);
        for (int mode = 1; mode <= NMODES; mode++) {
            fprintf(f, "%s\"%s\": [", mode > 1 ? ", " : "", report_mode_keys[mode]);
            for (int k = 0; k < K_COUNT; k++) {
                fputs(k ? ", " : "", f);
                report_jnum(f, r->op_us[mode][k], r->op_us[mode][k] > 0);
            }
            fputc(']', f);
        }
        fputc('}', f);
    }
}

/* The per-B tables: time and tokens/s per mode, then the step against its
** physical limit. */
void report_batch_tables(FILE *out, const result *res, int n, int steps)
{
    fprintf(out, "\nper batch size B (B tokens per step; graph replay of one step%s, median of %d rounds of %d "
                 "steps, modes interleaved)\n",
            report_cfg.no_standins ? " WITHOUT the stand-ins and SiLU*mul" : "", ROUNDS, steps);
    fprintf(out, "  %4s", "B");
    for (int mode = 1; mode <= NMODES; mode++)
        fprintf(out, "  (%d) us/step", mode);
    for (int mode = 1; mode <= NMODES; mode++)
        fprintf(out, "    (%d) tok/s", mode);
    fprintf(out, " %8s %8s %8s\n", "(3)/(2)", "(4)/(2)", "(4)/(1)");
    for (int i = 0; i < n; i++) {
        const result *r = &res[i];
        fprintf(out, "  %4d", r->B);
        for (int mode = 1; mode <= NMODES; mode++)
            report_cell(out, 12, "%.1f", r->t[mode].med, r->t[mode].med > 0);
        for (int mode = 1; mode <= NMODES; mode++)
            report_cell(out, 12, "%.1f", r->t[mode].med > 0 ? 1e6 * r->B / r->t[mode].med : 0, r->t[mode].med > 0);
        /* (3)/(2), (4)/(2), (4)/(1): tokens/s over tokens/s */
        static const int ratio[3][2] = {{3, 2}, {4, 2}, {4, 1}};
        for (int k = 0; k < 3; k++) {
            const timing *num = &r->t[ratio[k][0]], *den = &r->t[ratio[k][1]];
            report_cell(out, 8, "%.2fx", num->med > 0 ? den->med / num->med : 0, num->med > 0 && den->med > 0);
        }
        fputc('\n', out);
    }
    if (!(report_cfg.read_gbps > 0)) {
        fprintf(out, "\nthe step's physical limit: the read ceiling was not measured\n");
        return;
    }
    fprintf(out, "\nthe step against its physical limit: the bytes it must move (every weight once, the activations "
                 "of the fused\ndataflow; the stand-ins' apart: their states and inputs%s) over the read ceiling, "
                 "%.0f GB/s (measured here)\n",
            report_cfg.no_standins ? ", NOT in the limit: not timed" : ", in the limit: timed", report_cfg.read_gbps);
    fprintf(out, "  %4s %10s %9s %12s %9s %14s", "B", "weights MB", "activ. MB", "stand-ins MB", "limit us",
            "of it stand-ins");
    for (int mode = 1; mode <= NMODES; mode++)
        fprintf(out, "  (%d) %% of limit", mode);
    fputc('\n', out);
    for (int i = 0; i < n; i++) {
        const result *r = &res[i];
        fprintf(out, "  %4d %10.1f %9.2f %12.2f %9.1f %14.1f", r->B, r->bytes.weights / 1e6,
                r->bytes.activations / 1e6, r->bytes.standins / 1e6, report_limit_us(&r->bytes),
                report_standin_limit_us(&r->bytes));
        for (int mode = 1; mode <= NMODES; mode++)
            report_cell(out, 16, "%.1f%%", report_pct_of_limit(r, mode), report_pct_of_limit(r, mode) > 0);
        fputc('\n', out);
    }
}

/* The per-op breakdown of one batch size: each mode's kinds in step order,
** then the stand-ins apart; "-" where a mode does not run a kind. */
void report_ops(FILE *out, const result *r)
{
    double sum[NMODES + 1] = {0};
    fprintf(out, "  per op kind, us per step (each kind alone in a graph; the sum exceeds a step by the launch gaps "
                 "it hides)\n");
    fprintf(out, "    %-34s", "op");
    for (int mode = 1; mode <= NMODES; mode++)
        fprintf(out, " %10s", mode == 1 ? "(1)" : mode == 2 ? "(2)" : mode == 3 ? "(3)" : "(4)");
    fputc('\n', out);
    for (int i = 0; i < K_COUNT; i++) {
        enum op_kind k = op_order[i];
        if (k == K_ATTN) { /* the stand-ins from here on */
            fprintf(out, "    %-34s", "sum without the stand-ins");
            for (int mode = 1; mode <= NMODES; mode++)
                report_cell(out, 10, "%.1f", sum[mode], sum[mode] > 0);
            fprintf(out, "\n    stand-ins (every mode runs them):\n");
        }
        fprintf(out, "    %-34s", report_op_names[k]);
        for (int mode = 1; mode <= NMODES; mode++) {
            int ran = r->op_us[mode][k] > 0;
            report_cell(out, 10, "%.1f", r->op_us[mode][k], ran);
            if (ran && k != K_ATTN && k != K_LINEAR)
                sum[mode] += r->op_us[mode][k];
        }
        fputc('\n', out);
    }
}
