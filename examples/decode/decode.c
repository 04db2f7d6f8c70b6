/*
** decode.c — an engine that links atk: the decode of a Qwen3.5-2B-shaped
** stack (model.c; synthetic weights, stand-ins named in README.md) at batch
** sizes B (B tokens per step, one per sequence), each step captured in a
** CUDA graph, timed in three modes — (1) cuBLAS + the unfused norm chain,
** (2) cuBLAS + the naive fused norm, (3) everything through atk with the
** tuned cache — interleaved, with atk's path counts per step, an optional
** per-op breakdown, and a trace of varying batch sizes (one graph per
** distinct M, replayed in trace order). Every token row of the final hidden
** state and logits of (2) and (3) is compared with (1): exit 0 when all
** agree, 1 when not (or on a CUDA failure), 2 on a bad argument.
**
** usage: decode --help (args.c)
*/
#include "args.h"
#include "model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DECODE_TEMPLATES
#define DECODE_TEMPLATES "templates"
#endif

/* Timing rounds: the three modes alternate, each replayed --steps times per
** round; the median round is reported, min and max in the JSON. */
#define ROUNDS 5

static const char *const op_names[K_COUNT] = {
    "gemv 2048->5120 (qkv+gate)", "gemv 2048->2048 (attn/lin out)", "gemv 2048->8192 (in_proj_qkvz)",
    "gemv 2048->32 (in_proj_ba) *", "gemv 2048->12288 (gate_up)",      "gemv 6144->2048 (down)",
    "gemv 2048->248320 (lm_head)", "add + gemma rmsnorm (x49)",      "attention (stand-in)",
    "linear attention (stand-in)", "silu * mul"};
static const char *const mode_names[4] = {"", "cuBLAS + unfused norms", "cuBLAS + naive fused norms",
                                          "atk (tuned cache)"};
static const char *const mode_keys[4] = {"", "cublas_unfused", "cublas_naive", "atk"};

/* Microseconds per step: median, min, max over the rounds; 0 = not run. */
typedef struct timing {
    double med, min, max;
} timing;

/* atk's path counts of one op, for one captured step. */
typedef struct paths {
    unsigned long long calls, tuned, bucket, inferred, fallback;
} paths;

/* (2) or (3) against (1): the worst token row. */
typedef struct check {
    int run;
    double hidden, logits; /* relative L2 error of the worst row */
    int hidden_row, logits_row;
    int hidden_m, logits_m; /* the step size M that row belongs to */
} check;

/* The results of one batch size, or of the trace. */
typedef struct result {
    int B; /* batch size; 0 for the trace */
    timing t[4];
    paths p[ATK_NOPS];
    check c[4];
    int agree;
    int have_ops;
    double op_us[4][K_COUNT];
} result;

/* Host buffers for the agreement check, max_batch rows each. */
typedef struct host {
    unsigned short *bf16;
    float *h1, *l1, *hx, *lx;
} host;

/* A graph of one step of M tokens (ops in mask) in `mode`. */
static int capture(model *m, enum mode mode, unsigned mask, int M, CUgraphExec *exec)
{
    CUgraph g = NULL;
    *exec = NULL;
    int rc = cu_check(cuStreamBeginCapture(m->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "begin capture");
    if (rc)
        return rc;
    rc = model_step(m, mode, mask, M);
    int rc2 = cu_check(cuStreamEndCapture(m->stream, &g), "end capture");
    if (!rc && !rc2)
        rc = cu_check(cuGraphInstantiate(exec, g, 0), "cuGraphInstantiate");
    if (g)
        cuGraphDestroy(g);
    return rc || rc2;
}

/* Replays graphs[order[s % norder]] for s = 0..steps-1 between one event
** pair, after 3 untimed replays; *us is the time per step. */
static int time_seq(model *m, const CUgraphExec *graphs, const int *order, int norder, int steps, double *us)
{
    CUevent a = NULL, b = NULL;
    float ms = 0.0f;
    int rc = cu_check(cuEventCreate(&a, CU_EVENT_DEFAULT), "event") ||
             cu_check(cuEventCreate(&b, CU_EVENT_DEFAULT), "event");
    for (int i = 0; i < 3 && !rc; i++)
        rc = cu_check(cuGraphLaunch(graphs[order[i % norder]], m->stream), "cuGraphLaunch");
    rc = rc || cu_check(cuEventRecord(a, m->stream), "record");
    for (int s = 0; s < steps && !rc; s++)
        rc = cu_check(cuGraphLaunch(graphs[order[s % norder]], m->stream), "cuGraphLaunch");
    rc = rc || cu_check(cuEventRecord(b, m->stream), "record") || cu_check(cuEventSynchronize(b), "sync") ||
         cu_check(cuEventElapsedTime(&ms, a, b), "elapsed");
    *us = 1000.0 * (double)ms / steps;
    if (a)
        cuEventDestroy(a);
    if (b)
        cuEventDestroy(b);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ROUNDS rounds, the modes that have graphs (graphs[mode][...] != NULL)
** alternating within each round. */
static int time_modes(model *m, CUgraphExec *const graphs[4], const int *order, int norder, int steps,
                      timing t[4])
{
    double r[4][ROUNDS];
    for (int k = 0; k < ROUNDS; k++)
        for (int mode = 1; mode <= 3; mode++)
            if (graphs[mode] && time_seq(m, graphs[mode], order, norder, steps, &r[mode][k]))
                return 1;
    for (int mode = 1; mode <= 3; mode++) {
        if (!graphs[mode])
            continue;
        qsort(r[mode], ROUNDS, sizeof(double), cmp_double);
        t[mode].med = r[mode][ROUNDS / 2];
        t[mode].min = r[mode][0];
        t[mode].max = r[mode][ROUNDS - 1];
    }
    return 0;
}

/* One eager step (cuBLAS initialises itself and loads, lazily, the kernel
** it picks for a shape on first use, which must not happen inside a
** capture; atk's kernels are loaded at atk_open), then the capture; for
** mode 3, atk's counters over the capture alone: one step's calls. */
/* The ops of the timed step: all, or without the stand-ins (--no-standins). */
static unsigned step_mask = ALL_OPS;

static int prepare(model *m, enum mode mode, int M, CUgraphExec *exec, paths p[ATK_NOPS])
{
    if (model_step(m, mode, ALL_OPS, M) || cu_check(cuStreamSynchronize(m->stream), "warm-up step"))
        return 1;
    if (mode == MODE_ATK)
        atk_stats_reset(m->atk);
    if (capture(m, mode, step_mask, M, exec))
        return 1;
    if (mode == MODE_ATK && p)
        for (int op = 0; op < ATK_NOPS; op++) {
            atk_op_stats s;
            if (atk_stats(m->atk, op, &s) != ATK_OK)
                continue;
            p[op].calls += s.calls;
            p[op].tuned += s.tuned;
            p[op].bucket += s.bucket;
            p[op].inferred += s.inferred;
            p[op].fallback += s.fallback;
        }
    return 0;
}

static double rel_err(const float *a, const float *ref, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        if (a[i] != a[i])
            return INFINITY;
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void widen(const unsigned short *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned u = (unsigned)src[i] << 16;
        memcpy(&dst[i], &u, 4);
    }
}

/* Replays exec (a step of M tokens) once from zero linear-attention states;
** the final normed hidden state [M, HIDDEN] and the logits [M, VOCAB] to
** the host as floats. */
static int run_once(model *m, CUgraphExec exec, int M, host *h, float *hidden, float *logits)
{
    int rc = model_reset_state(m) || cu_check(cuGraphLaunch(exec, m->stream), "cuGraphLaunch") ||
             cu_check(cuMemcpyDtoHAsync(h->bf16, m->normed, (size_t)M * HIDDEN * 2, m->stream), "copy") ||
             cu_check(cuStreamSynchronize(m->stream), "sync");
    if (rc)
        return rc;
    widen(h->bf16, hidden, (size_t)M * HIDDEN);
    rc = cu_check(cuMemcpyDtoHAsync(h->bf16, m->logits, (size_t)M * VOCAB * 2, m->stream), "copy") ||
         cu_check(cuStreamSynchronize(m->stream), "sync");
    if (!rc)
        widen(h->bf16, logits, (size_t)M * VOCAB);
    return rc;
}

/* (2) and (3) against (1), every token row, from the same zero state;
** r->c and r->agree. */
static int compare(model *m, CUgraphExec *const execs[4], int idx, int M, host *h, result *r)
{
    if (run_once(m, execs[1][idx], M, h, h->h1, h->l1))
        return 1;
    r->agree = 1;
    for (int mode = 2; mode <= 3; mode++) {
        check *c = &r->c[mode];
        if (!execs[mode]) {
            r->agree = 0; /* (3) without atk cannot agree */
            continue;
        }
        if (run_once(m, execs[mode][idx], M, h, h->hx, h->lx))
            return 1;
        c->run = 1;
        c->hidden = c->logits = -1.0;
        for (int row = 0; row < M; row++) {
            double eh = rel_err(h->hx + (size_t)row * HIDDEN, h->h1 + (size_t)row * HIDDEN, HIDDEN);
            double el = rel_err(h->lx + (size_t)row * VOCAB, h->l1 + (size_t)row * VOCAB, VOCAB);
            if (!(eh <= c->hidden)) { /* NaN-safe: an inf/NaN row wins */
                c->hidden = eh;
                c->hidden_row = row;
                c->hidden_m = M;
            }
            if (!(el <= c->logits)) {
                c->logits = el;
                c->logits_row = row;
                c->logits_m = M;
            }
        }
        if (!(c->hidden <= 5e-2 && c->logits <= 5e-2))
            r->agree = 0;
    }
    return 0;
}

static void destroy_all(CUgraphExec *execs, int n)
{
    for (int i = 0; i < n; i++)
        if (execs[i]) {
            cuGraphExecDestroy(execs[i]);
            execs[i] = NULL;
        }
}

/* One batch size: the three modes' step graphs, timed interleaved, atk's
** paths, the agreement check, and (ops) the per-op breakdown. */
static int run_batch(model *m, int B, int have_atk, int steps, int ops, host *h, result *r)
{
    CUgraphExec g[4] = {NULL, NULL, NULL, NULL};
    CUgraphExec *execs[4] = {NULL, &g[1], &g[2], have_atk ? &g[3] : NULL};
    static const int order0[1] = {0};
    int rc = 1;
    memset(r, 0, sizeof *r);
    r->B = B;
    for (int mode = 1; mode <= 3; mode++)
        if (execs[mode] && prepare(m, (enum mode)mode, B, execs[mode], r->p))
            goto done;
    if (time_modes(m, execs, order0, 1, steps, r->t) || compare(m, execs, 0, B, h, r))
        goto done;
    if (ops) {
        r->have_ops = 1;
        for (int mode = 1; mode <= 3; mode++) {
            if (!execs[mode])
                continue;
            for (int k = 0; k < K_COUNT; k++) {
                CUgraphExec e = NULL;
                int bad = capture(m, (enum mode)mode, 1u << k, B, &e) ||
                          time_seq(m, &e, order0, 1, steps, &r->op_us[mode][k]);
                if (e)
                    cuGraphExecDestroy(e);
                if (bad)
                    goto done;
            }
        }
    }
    rc = 0;
done:
    destroy_all(g, 4);
    return rc;
}

/* The trace: one graph per distinct M and mode, captured once each,
** replayed in trace order for `steps` steps; paths summed over the steps. */
static int run_trace(model *m, const decode_args *a, int have_atk, host *h, result *r, int *distinct, int *nd,
                     long long *tokens)
{
    static CUgraphExec g[4][DECODE_MAX_BATCH];
    static int order[DECODE_MAX_TRACE];
    paths per_m[DECODE_MAX_BATCH][ATK_NOPS];
    CUgraphExec *execs[4] = {NULL, g[1], g[2], have_atk ? g[3] : NULL};
    int slot[DECODE_MAX_BATCH + 1], rc = 1;
    memset(g, 0, sizeof g);
    memset(per_m, 0, sizeof per_m);
    memset(r, 0, sizeof *r);
    /* distinct Ms ascending, and the trace as indices into them */
    *nd = 0;
    for (int M = 1; M <= DECODE_MAX_BATCH; M++) {
        slot[M] = -1;
        for (int i = 0; i < a->ntrace; i++)
            if (a->trace[i] == M) {
                slot[M] = *nd;
                distinct[(*nd)++] = M;
                break;
            }
    }
    for (int i = 0; i < a->ntrace; i++)
        order[i] = slot[a->trace[i]];
    *tokens = 0;
    for (int s = 0; s < a->steps; s++)
        *tokens += a->trace[s % a->ntrace];
    for (int mode = 1; mode <= 3; mode++)
        for (int i = 0; execs[mode] && i < *nd; i++)
            if (prepare(m, (enum mode)mode, distinct[i], &execs[mode][i], per_m[i]))
                goto done;
    if (time_modes(m, execs, order, a->ntrace, a->steps, r->t))
        goto done;
    for (int s = 0; s < a->steps; s++) /* paths of the replayed steps */
        for (int op = 0; op < ATK_NOPS; op++) {
            const paths *p = &per_m[order[s % a->ntrace]][op];
            r->p[op].calls += p->calls;
            r->p[op].tuned += p->tuned;
            r->p[op].bucket += p->bucket;
            r->p[op].inferred += p->inferred;
            r->p[op].fallback += p->fallback;
        }
    /* every distinct M's graphs agree, or the trace does not */
    r->agree = 1;
    for (int i = 0; i < *nd; i++) {
        result c;
        memset(&c, 0, sizeof c);
        if (compare(m, execs, i, distinct[i], h, &c))
            goto done;
        r->agree &= c.agree;
        for (int mode = 2; mode <= 3; mode++) { /* the worst row over every M */
            const check *n = &c.c[mode];
            check *w = &r->c[mode];
            if (!n->run)
                continue;
            if (!w->run || !(n->hidden <= w->hidden)) {
                w->hidden = n->hidden;
                w->hidden_row = n->hidden_row;
                w->hidden_m = n->hidden_m;
            }
            if (!w->run || !(n->logits <= w->logits)) {
                w->logits = n->logits;
                w->logits_row = n->logits_row;
                w->logits_m = n->logits_m;
            }
            w->run = 1;
        }
    }
    rc = 0;
done:
    for (int mode = 1; mode <= 3; mode++)
        destroy_all(g[mode], DECODE_MAX_BATCH);
    return rc;
}

/* ------------------------------------------------------------------ output */

static void paths_total(const result *r, paths *t)
{
    memset(t, 0, sizeof *t);
    for (int op = 0; op < ATK_NOPS; op++) {
        t->calls += r->p[op].calls;
        t->tuned += r->p[op].tuned;
        t->bucket += r->p[op].bucket;
        t->inferred += r->p[op].inferred;
        t->fallback += r->p[op].fallback;
    }
}

static void print_paths(FILE *out, const result *r, const char *indent)
{
    for (int op = 0; op < ATK_NOPS; op++) {
        const paths *p = &r->p[op];
        if (p->calls)
            fprintf(out, "%s%-18s calls %7llu  tuned %7llu  bucket %7llu  inferred %7llu  fallback %7llu\n", indent,
                    atk_op_name(op), p->calls, p->tuned, p->bucket, p->inferred, p->fallback);
    }
}

static void print_checks(FILE *out, const result *r, const char *what)
{
    for (int mode = 2; mode <= 3; mode++) {
        const check *c = &r->c[mode];
        if (!c->run) {
            fprintf(out, "  %s (%d) vs (1): not run (atk_open failed): FAIL\n", what, mode);
            continue;
        }
        int ok = c->hidden <= 5e-2 && c->logits <= 5e-2;
        fprintf(out, "  %s (%d) vs (1): worst token row: hidden rel err %.3e (M=%d row %d), logits %.3e (M=%d row "
                     "%d): %s\n",
                what, mode, c->hidden, c->hidden_m, c->hidden_row, c->logits, c->logits_m, c->logits_row,
                ok ? "agree (<= 5e-2)" : "DIFFER");
    }
}

/* A JSON number, or null for not run / not finite. */
static void jnum(FILE *f, double v, int run)
{
    if (run && isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

static void jstr(FILE *f, const char *s)
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

/* The fields common to a batch size and the trace (after the opening). */
static void json_result(FILE *f, const result *r, double tokens_per_step)
{
    fputs("\"us_per_step\": {", f);
    for (int mode = 1; mode <= 3; mode++) {
        fprintf(f, "%s\"%s\": {\"median\": ", mode > 1 ? ", " : "", mode_keys[mode]);
        jnum(f, r->t[mode].med, r->t[mode].med > 0);
        fputs(", \"min\": ", f);
        jnum(f, r->t[mode].min, r->t[mode].med > 0);
        fputs(", \"max\": ", f);
        jnum(f, r->t[mode].max, r->t[mode].med > 0);
        fputc('}', f);
    }
    fputs("}, \"tokens_per_s\": {", f);
    for (int mode = 1; mode <= 3; mode++) {
        fprintf(f, "%s\"%s\": ", mode > 1 ? ", " : "", mode_keys[mode]);
        jnum(f, r->t[mode].med > 0 ? 1e6 * tokens_per_step / r->t[mode].med : 0, r->t[mode].med > 0);
    }
    fputs("}, \"ratio_atk_over_cublas_naive\": ", f);
    jnum(f, r->t[3].med > 0 ? r->t[2].med / r->t[3].med : 0, r->t[3].med > 0);
    fputs(", \"atk_paths\": {", f);
    int first = 1;
    for (int op = 0; op < ATK_NOPS; op++) {
        const paths *p = &r->p[op];
        if (!p->calls)
            continue;
        fprintf(f, "%s", first ? "" : ", ");
        jstr(f, atk_op_name(op));
        fprintf(f, ": {\"calls\": %llu, \"tuned\": %llu, \"bucket\": %llu, \"inferred\": %llu, \"fallback\": %llu}",
                p->calls, p->tuned, p->bucket, p->inferred, p->fallback);
        first = 0;
    }
    fputs("}, \"check\": {", f);
    for (int mode = 2; mode <= 3; mode++) {
        const check *c = &r->c[mode];
        fprintf(f, "%s\"%s\": {\"hidden_rel_err\": ", mode > 2 ? ", " : "", mode_keys[mode]);
        jnum(f, c->hidden, c->run);
        fprintf(f, ", \"hidden_m\": %d, \"hidden_row\": %d, \"logits_rel_err\": ", c->hidden_m, c->hidden_row);
        jnum(f, c->logits, c->run);
        fprintf(f, ", \"logits_m\": %d, \"logits_row\": %d}", c->logits_m, c->logits_row);
    }
    fprintf(f, "}, \"agree\": %s", r->agree ? "true" : "false");
    if (r->have_ops) {
        fputs(", \"op_us\": {", f);
        for (int mode = 1; mode <= 3; mode++) {
            fprintf(f, "%s\"%s\": [", mode > 1 ? ", " : "", mode_keys[mode]);
            for (int k = 0; k < K_COUNT; k++) {
                fputs(k ? ", " : "", f);
                jnum(f, r->op_us[mode][k], r->op_us[mode][k] > 0);
            }
            fputc(']', f);
        }
        fputc('}', f);
    }
}

int main(int argc, char **argv)
{
    decode_args a;
    char err[512], dbbuf[4096], tplbuf[4096], name[128] = "";
    const char *templates, *db;
    int rc = 1, have_atk = 0, major = 0, minor = 0, max_batch = 0, all_fallback = 0;
    int st = decode_args_parse(argc, argv, &a, err, sizeof err);
    if (a.no_standins)
        step_mask = ALL_OPS & ~((1u << K_ATTN) | (1u << K_LINEAR) | (1u << K_SILU_MUL));
    if (st == DECODE_ARGS_HELP) {
        fputs(decode_args_usage(), stdout);
        return 0;
    }
    if (st != DECODE_ARGS_OK) {
        fprintf(stderr, "decode: %s\n", err);
        return 2;
    }
    /* --json -: the JSON alone on stdout, the text report on stderr */
    FILE *out = stdout, *jf = NULL;
    if (a.json && !strcmp(a.json, "-")) {
        jf = stdout;
        out = stderr;
    } else if (a.json && !(jf = fopen(a.json, "w"))) {
        fprintf(stderr, "decode: --json '%s': cannot open: %s\n", a.json, strerror(errno));
        return 2;
    }
    /* the driver is loaded, not linked: without a GPU, say so and stop */
    if (decode_driver_load(err, sizeof err)) {
        fprintf(stderr, "decode: %s\n", err);
        if (jf && jf != stdout)
            fclose(jf);
        return 1;
    }
    for (int i = 0; i < a.nbatch; i++)
        max_batch = a.batch[i] > max_batch ? a.batch[i] : max_batch;
    for (int i = 0; i < a.ntrace; i++)
        max_batch = a.trace[i] > max_batch ? a.trace[i] : max_batch;

    templates = a.templates;
    if (!templates && getenv("AUTOTUNE_HOME")) {
        snprintf(tplbuf, sizeof tplbuf, "%s/templates", getenv("AUTOTUNE_HOME"));
        templates = tplbuf;
    }
    if (!templates) {
        char probe_path[4200];
        snprintf(probe_path, sizeof probe_path, "%s/common/dtype.cuh", DECODE_TEMPLATES);
        FILE *probe = fopen(probe_path, "rb");
        templates = DECODE_TEMPLATES;
        if (probe)
            fclose(probe);
        else /* a build moved to another machine: the tree it runs in */
            templates = "templates";
    }
    db = a.db;
    if (!db) {
        const char *x = getenv("XDG_CACHE_HOME"), *hm = getenv("HOME");
        snprintf(dbbuf, sizeof dbbuf, "%s%s/autotune/tune.db", x && x[0] == '/' ? x : hm ? hm : ".",
                 x && x[0] == '/' ? "" : "/.cache");
        db = dbbuf;
    }

    model m;
    memset(&m, 0, sizeof m);
    host h = {NULL, NULL, NULL, NULL, NULL};
    result *res = calloc((size_t)(a.nbatch > 0 ? a.nbatch : 1), sizeof *res);
    result tr;
    int distinct[DECODE_MAX_BATCH], nd = 0;
    long long trace_tokens = 0;
    memset(&tr, 0, sizeof tr);
    CUdevice dev = 0;
    if (!res) {
        fprintf(stderr, "decode: out of host memory\n");
        goto done;
    }
    if (cu_check(cuInit(0), "cuInit (decode needs a GPU)") ||
        cu_check(cuDeviceGet(&dev, a.device), "cuDeviceGet") ||
        cu_check(cuDeviceGetName(name, sizeof name, dev), "name") ||
        cu_check(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cc") ||
        cu_check(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cc") ||
        cu_check(cuDevicePrimaryCtxRetain(&m.ctx, dev), "context") || cu_check(cuCtxSetCurrent(m.ctx), "context") ||
        cu_check(cuStreamCreate(&m.stream, CU_STREAM_NON_BLOCKING), "stream"))
        goto done;
    if (cublasCreate(&m.blas) != CUBLAS_STATUS_SUCCESS || cu_check(cuMemAlloc(&m.blas_ws, 32u << 20), "workspace") ||
        cublasSetStream(m.blas, m.stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(m.blas, (void *)m.blas_ws, 32u << 20) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "decode: cublas setup failed\n");
        goto done;
    }
    fprintf(out, "decode: %s (sm_%d%d), Qwen3.5-2B-shaped stack, bf16, up to %d tokens per step\n", name, major,
            minor, max_batch);
    h.bf16 = malloc((size_t)max_batch * VOCAB * 2);
    h.h1 = malloc((size_t)max_batch * HIDDEN * sizeof(float));
    h.hx = malloc((size_t)max_batch * HIDDEN * sizeof(float));
    h.l1 = malloc((size_t)max_batch * VOCAB * sizeof(float));
    h.lx = malloc((size_t)max_batch * VOCAB * sizeof(float));
    if (!h.bf16 || !h.h1 || !h.hx || !h.l1 || !h.lx) {
        fprintf(stderr, "decode: out of host memory\n");
        goto done;
    }
    if (model_init(&m, templates, 10 * major + minor, max_batch))
        goto done;
    fprintf(out, "weights %.2f GB (synthetic), cache %s\n", (double)m.weight_bytes / 1e9, db);
    /* where atk finds a template to rebuild a cubin this driver does not
    ** load (the caller's ATK_TEMPLATES wins) */
    setenv("ATK_TEMPLATES", templates, 0);
    have_atk = atk_open(db, a.device, 0, &m.atk) == ATK_OK;
    if (have_atk) {
        atk_info info;
        fputs(atk_report(m.atk), out);
        if (atk_get_info(m.atk, &info) == ATK_OK && info.all_fallback) {
            all_fallback = 1;
            fprintf(stderr, "decode: warning: atk loaded nothing tuned for this GPU (see above): mode 3 is cuBLAS + "
                            "atk's naive fused norm, not tuned kernels\n");
        }
    } else
        fprintf(stderr, "decode: atk_open: %s (mode 3 skipped)\n", atk_errmsg(NULL));

    int ops = a.ops == 1 || (a.ops == -1 && a.nbatch == 1 && a.ntrace == 0);
    rc = 0;
    for (int i = 0; i < a.nbatch; i++) {
        if (run_batch(&m, a.batch[i], have_atk, a.steps, ops, &h, &res[i])) {
            rc = 1;
            goto done;
        }
        rc |= !res[i].agree;
    }
    if (a.ntrace) {
        if (run_trace(&m, &a, have_atk, &h, &tr, distinct, &nd, &trace_tokens)) {
            rc = 1;
            goto done;
        }
        rc |= !tr.agree;
    }

    /* the text report */
    if (a.nbatch) {
        fprintf(out, "\nper batch size B (B tokens per step; graph replay of one step%s, median of %d rounds of %d "
                     "steps, modes interleaved)\n",
                a.no_standins ? " WITHOUT the stand-ins and SiLU*mul" : "", ROUNDS, a.steps);
        fprintf(out, "  %4s %11s %11s %11s %12s %12s %12s %8s   %s\n", "B", "(1) us/step", "(2) us/step", "(3) us/step",
                "(1) tok/s", "(2) tok/s", "(3) tok/s", "(3)/(2)", "atk paths tuned/bucket/inferred/fallback");
        for (int i = 0; i < a.nbatch; i++) {
            const result *r = &res[i];
            paths t;
            paths_total(r, &t);
            fprintf(out, "  %4d", r->B);
            for (int mode = 1; mode <= 3; mode++)
                fprintf(out, " %11.1f", r->t[mode].med);
            for (int mode = 1; mode <= 3; mode++)
                fprintf(out, " %12.1f", r->t[mode].med > 0 ? 1e6 * r->B / r->t[mode].med : 0.0);
            if (r->t[3].med > 0)
                fprintf(out, " %7.2fx   %llu/%llu/%llu/%llu\n", r->t[2].med / r->t[3].med, t.tuned, t.bucket,
                        t.inferred, t.fallback);
            else
                fprintf(out, " %8s   -\n", "-");
        }
        for (int i = 0; i < a.nbatch; i++) {
            fprintf(out, "\nB=%d: atk calls in one captured step:\n", res[i].B);
            print_paths(out, &res[i], "  ");
            print_checks(out, &res[i], "hidden state:");
            if (!res[i].have_ops)
                continue;
            fprintf(out, "  per op kind, us per step (each kind alone in a graph; the sum exceeds a step by the "
                         "launch gaps it hides)\n");
            fprintf(out, "    %-32s %10s %10s %10s\n", "op", "(1)", "(2)", "(3)");
            for (int k = 0; k < K_COUNT; k++)
                fprintf(out, "    %-32s %10.1f %10.1f %10.1f\n", op_names[k], res[i].op_us[1][k],
                        res[i].op_us[2][k], res[i].op_us[3][k]);
            fprintf(out, "    * its 18 weights (2.4 MB) stay in L2 across replays of a graph of this kind alone: "
                         "warm, unlike the\n      other GEMVs (and unlike in a whole step, where 3.76 GB of other "
                         "weights pass through L2)\n");
        }
    }
    if (a.ntrace) {
        double per_step = (double)trace_tokens / a.steps;
        fprintf(out, "\ntrace of %d steps (%d distinct M: one graph each per mode, replayed in trace order, %d "
                     "steps cycling through it; %lld tokens; median of %d rounds)\n  M:",
                a.ntrace, nd, a.steps, trace_tokens, ROUNDS);
        for (int i = 0; i < a.ntrace && i < 32; i++)
            fprintf(out, "%s%d", i ? "," : " ", a.trace[i]);
        fprintf(out, "%s\n", a.ntrace > 32 ? ",..." : "");
        fprintf(out, "  %-28s %10s %12s %8s\n", "mode", "us/step", "tokens/s", "vs (2)");
        for (int mode = 1; mode <= 3; mode++)
            if (tr.t[mode].med > 0)
                fprintf(out, "  (%d) %-24s %10.1f %12.1f %7.2fx\n", mode, mode_names[mode], tr.t[mode].med,
                        1e6 * per_step / tr.t[mode].med, tr.t[2].med / tr.t[mode].med);
        fprintf(out, "  atk calls over the %d replayed steps (each distinct M's captured step, times its steps):\n",
                a.steps);
        print_paths(out, &tr, "    ");
        print_checks(out, &tr, "every distinct M, hidden state:");
    }
    if (all_fallback)
        fprintf(out, "\nnote: atk loaded nothing tuned for this GPU: (3) ran on fallback only\n");
    fprintf(out, "\n%s\n", rc ? "FAIL: (2) or (3) differs from (1) (or did not run)" : "ok: every mode agrees with (1)");

    if (jf) {
        fputs("{\"device\": ", jf);
        jstr(jf, name);
        fprintf(jf, ", \"cc\": %d, \"steps\": %d, \"rounds\": %d, \"db\": ", 10 * major + minor, a.steps, ROUNDS);
        jstr(jf, db);
        fprintf(jf, ", \"atk\": %s, \"atk_all_fallback\": %s, \"weights_gb\": %.4g,\n \"batch\": [",
                have_atk ? "true" : "false", all_fallback ? "true" : "false", (double)m.weight_bytes / 1e9);
        for (int i = 0; i < a.nbatch; i++) {
            fprintf(jf, "%s\n  {\"B\": %d, ", i ? "," : "", res[i].B);
            json_result(jf, &res[i], res[i].B);
            fputc('}', jf);
        }
        fputs("],\n \"trace\": ", jf);
        if (a.ntrace) {
            fputs("{\"m\": [", jf);
            for (int i = 0; i < a.ntrace; i++)
                fprintf(jf, "%s%d", i ? ", " : "", a.trace[i]);
            fputs("], \"distinct\": [", jf);
            for (int i = 0; i < nd; i++)
                fprintf(jf, "%s%d", i ? ", " : "", distinct[i]);
            fprintf(jf, "], \"steps\": %d, \"tokens\": %lld, ", a.steps, trace_tokens);
            json_result(jf, &tr, (double)trace_tokens / a.steps);
            fputc('}', jf);
        } else
            fputs("null", jf);
        fprintf(jf, ",\n \"agree\": %s}\n", rc ? "false" : "true");
    }
done:
    if (jf && jf != stdout && fclose(jf) != 0) {
        fprintf(stderr, "decode: --json '%s': write failed: %s\n", a.json, strerror(errno));
        rc = 1;
    }
    atk_close(m.atk);
    model_free(&m);
    if (m.blas)
        cublasDestroy(m.blas);
    if (m.blas_ws)
        cuMemFree(m.blas_ws);
    if (m.stream)
        cuStreamDestroy(m.stream);
    if (m.ctx)
        cuDevicePrimaryCtxRelease(dev);
    free(res);
    free(h.bf16);
    free(h.h1);
    free(h.hx);
    free(h.l1);
    free(h.lx);
    return rc;
}
