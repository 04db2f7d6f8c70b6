/*
** decode.c — an engine that links atk: the decode of a Qwen3.5-2B-shaped
** stack (model.c; synthetic weights, stand-ins named in README.md) at batch
** sizes B (B tokens per step, one per sequence), each step captured in a
** CUDA graph, timed in four modes — (1) cuBLAS + the unfused norm chain,
** (2) cuBLAS + the naive fused norm, (3) atk's GEMVs and add+norms with the
** tuned cache, (4) atk's fused ops (norm, SwiGLU and residual add inside
** the GEMVs) — interleaved, with atk's path counts per step, the step's
** time against its physical limit (the bytes it must move over the
** measured read ceiling), an optional per-op breakdown, and a trace of
** varying batch sizes (one graph per distinct M, replayed in trace order).
** Every token row of the final hidden state and logits of (2)..(4) is
** compared with (1): exit 0 when all agree, 1 when not (or on a CUDA
** failure), 2 on a bad argument.
**
** usage: decode --help (args.c)
*/
#include "args.h"
#include "model.h"
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DECODE_TEMPLATES
#define DECODE_TEMPLATES "templates"
#endif

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
static int time_modes(model *m, CUgraphExec *const graphs[NMODES + 1], const int *order, int norder, int steps,
                      timing t[NMODES + 1])
{
    double r[NMODES + 1][ROUNDS];
    for (int k = 0; k < ROUNDS; k++)
        for (int mode = 1; mode <= NMODES; mode++)
            if (graphs[mode] && time_seq(m, graphs[mode], order, norder, steps, &r[mode][k]))
                return 1;
    for (int mode = 1; mode <= NMODES; mode++) {
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
** modes 3 and 4, atk's counters over the capture alone: one step's calls.
** With --no-standins the timed step leaves out the stand-ins and SiLU*mul;
** the agreement check replays the whole step (check_exec). */
/* The ops of the timed step: all, or without the stand-ins (--no-standins). */
static unsigned step_mask = ALL_OPS;

static int prepare(model *m, enum mode mode, int M, CUgraphExec *exec, CUgraphExec *check_exec,
                   paths p[ATK_NOPS])
{
    const int uses_atk = mode == MODE_ATK || mode == MODE_FUSED;
    if (model_step(m, mode, ALL_OPS, M) || cu_check(cuStreamSynchronize(m->stream), "warm-up step"))
        return 1;
    if (uses_atk)
        atk_stats_reset(m->atk);
    if (capture(m, mode, step_mask, M, exec))
        return 1;
    if (uses_atk && p)
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
    return step_mask != ALL_OPS && capture(m, mode, ALL_OPS, M, check_exec);
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
** the final hidden state [M, HIDDEN] (the residual stream after the last
** layer, before the final norm: mode 4 never writes the normed one) and the
** logits [M, VOCAB] to the host as floats. */
static int run_once(model *m, CUgraphExec exec, int M, host *h, float *hidden, float *logits)
{
    int rc = model_reset_state(m) || cu_check(cuGraphLaunch(exec, m->stream), "cuGraphLaunch") ||
             cu_check(cuMemcpyDtoHAsync(h->bf16, m->residual, (size_t)M * HIDDEN * 2, m->stream), "copy") ||
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

/* (2)..(4) against (1), every token row, from the same zero state;
** r->c and r->agree. execs[mode] NULL: the mode is not run (not asked
** for, or atk did not open: then it cannot agree). */
static int compare(model *m, CUgraphExec *const execs[NMODES + 1], int idx, int M, host *h, result *r)
{
    if (run_once(m, execs[1][idx], M, h, h->h1, h->l1))
        return 1;
    r->agree = 1;
    for (int mode = 2; mode <= NMODES; mode++) {
        check *c = &r->c[mode];
        if (!execs[mode]) {
            if (report_cfg.modes & (1u << mode))
                r->agree = 0; /* asked for, but atk did not open */
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
        if (!(c->hidden <= AGREE_TOL && c->logits <= AGREE_TOL))
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

/* Whether mode gets graphs: asked for (--modes), and 3 and 4 only with atk. */
static int mode_on(int mode, int have_atk)
{
    return (report_cfg.modes & (1u << mode)) && (mode < MODE_ATK || have_atk);
}

/* One batch size: each mode's step graph, timed interleaved, atk's paths,
** the agreement check, and (ops) the per-op breakdown: each kind a mode
** runs, alone in its own graph. */
static int run_batch(model *m, int B, int have_atk, int steps, int ops, host *h, result *r)
{
    CUgraphExec g[NMODES + 1], gc[NMODES + 1]; /* timed; whole steps for the check (--no-standins) */
    CUgraphExec *execs[NMODES + 1], *checks[NMODES + 1];
    static const int order0[1] = {0};
    int rc = 1;
    memset(g, 0, sizeof g);
    memset(gc, 0, sizeof gc);
    memset(r, 0, sizeof *r);
    r->B = B;
    model_step_bytes(m, B, &r->bytes);
    for (int mode = 0; mode <= NMODES; mode++) {
        execs[mode] = mode && mode_on(mode, have_atk) ? &g[mode] : NULL;
        checks[mode] = execs[mode] && step_mask != ALL_OPS ? &gc[mode] : execs[mode];
    }
    for (int mode = 1; mode <= NMODES; mode++)
        if (execs[mode] && prepare(m, (enum mode)mode, B, execs[mode], &gc[mode], r->p[mode]))
            goto done;
    if (time_modes(m, execs, order0, 1, steps, r->t) || compare(m, checks, 0, B, h, r))
        goto done;
    if (ops) {
        r->have_ops = 1;
        for (int mode = 1; mode <= NMODES; mode++) {
            if (!execs[mode])
                continue;
            for (int k = 0; k < K_COUNT; k++) {
                CUgraphExec e = NULL;
                if (!kind_in_mode((enum op_kind)k, (enum mode)mode))
                    continue;
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
    destroy_all(g, NMODES + 1);
    destroy_all(gc, NMODES + 1);
    return rc;
}

/* The trace: one graph per distinct M and mode, captured once each,
** replayed in trace order for `steps` steps; paths summed over the steps. */
static int run_trace(model *m, const decode_args *a, int have_atk, host *h, result *r, int *distinct, int *nd,
                     long long *tokens)
{
    static CUgraphExec g[NMODES + 1][DECODE_MAX_BATCH], gc[NMODES + 1][DECODE_MAX_BATCH];
    static int order[DECODE_MAX_TRACE];
    static paths per_m[NMODES + 1][DECODE_MAX_BATCH][ATK_NOPS];
    CUgraphExec *execs[NMODES + 1], *checks[NMODES + 1];
    int slot[DECODE_MAX_BATCH + 1], rc = 1;
    memset(g, 0, sizeof g);
    memset(gc, 0, sizeof gc);
    memset(per_m, 0, sizeof per_m);
    memset(r, 0, sizeof *r);
    for (int mode = 0; mode <= NMODES; mode++) {
        execs[mode] = mode && mode_on(mode, have_atk) ? g[mode] : NULL;
        checks[mode] = execs[mode] && step_mask != ALL_OPS ? gc[mode] : execs[mode];
    }
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
    model_step_bytes(m, (double)*tokens / a->steps, &r->bytes); /* linear in M: the mean step's */
    for (int mode = 1; mode <= NMODES; mode++)
        for (int i = 0; execs[mode] && i < *nd; i++)
            if (prepare(m, (enum mode)mode, distinct[i], &execs[mode][i], &gc[mode][i], per_m[mode][i]))
                goto done;
    if (time_modes(m, execs, order, a->ntrace, a->steps, r->t))
        goto done;
    for (int mode = MODE_ATK; mode <= NMODES; mode++) /* paths of the replayed steps */
        for (int s = 0; s < a->steps; s++)
            for (int op = 0; op < ATK_NOPS; op++) {
                const paths *p = &per_m[mode][order[s % a->ntrace]][op];
                paths *t = &r->p[mode][op];
                t->calls += p->calls;
                t->tuned += p->tuned;
                t->bucket += p->bucket;
                t->inferred += p->inferred;
                t->fallback += p->fallback;
            }
    /* every distinct M's graphs agree, or the trace does not */
    r->agree = 1;
    for (int i = 0; i < *nd; i++) {
        result c;
        memset(&c, 0, sizeof c);
        if (compare(m, checks, i, distinct[i], h, &c))
            goto done;
        r->agree &= c.agree;
        for (int mode = 2; mode <= NMODES; mode++) { /* the worst row over every M */
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
    for (int mode = 1; mode <= NMODES; mode++) {
        destroy_all(g[mode], DECODE_MAX_BATCH);
        destroy_all(gc[mode], DECODE_MAX_BATCH);
    }
    return rc;
}

int main(int argc, char **argv)
{
    decode_args a;
    char err[512], dbbuf[4096], tplbuf[4096], name[128] = "";
    const char *templates, *db;
    int rc = 1, have_atk = 0, major = 0, minor = 0, max_batch = 0, all_fallback = 0, sms = 0;
    int st = decode_args_parse(argc, argv, &a, err, sizeof err);
    if (a.no_standins)
        step_mask = ALL_OPS & ~((1u << K_ATTN) | (1u << K_LINEAR) | (1u << K_SILU_MUL));
    report_cfg.no_standins = a.no_standins;
    report_cfg.modes = a.modes;
    if (st == DECODE_ARGS_HELP) {
        fputs(decode_args_usage(), stdout);
        return 0;
    }
    if (st != DECODE_ARGS_OK) {
        fprintf(stderr, "decode: %s\n", err);
        return 2;
    }
    /* the agreement check's self-test: mode 4 with a bug in it */
    enum fault fault = FAULT_NONE;
    const char *fault_env = getenv("DECODE_FAULT");
    if (fault_env && *fault_env) {
        if (!strcmp(fault_env, "swap-gate-up"))
            fault = FAULT_SWAP_GATE_UP;
        else if (!strcmp(fault_env, "swap-norms"))
            fault = FAULT_SWAP_NORMS;
        else if (!strcmp(fault_env, "drop-add"))
            fault = FAULT_DROP_ADD;
        else {
            fprintf(stderr, "decode: DECODE_FAULT '%s': unknown (swap-gate-up, swap-norms or drop-add)\n",
                    fault_env);
            return 2;
        }
    }
    /* mode 4's boundaries: "auto" (default) runs one whose fused op atk
    ** serves unfused as mode 3 does; "fused" keeps the fused calls there too
    ** (their own unfused sequence), to time one against the other */
    const char *bnd_env = getenv("DECODE_BOUNDARIES");
    int always_fused = 0;
    if (bnd_env && *bnd_env) {
        if (!strcmp(bnd_env, "fused"))
            always_fused = 1;
        else if (strcmp(bnd_env, "auto")) {
            fprintf(stderr, "decode: DECODE_BOUNDARIES '%s': unknown (auto or fused)\n", bnd_env);
            return 2;
        }
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
        cu_check(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "sms") ||
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
    m.fault = fault;
    m.always_fused = always_fused;
    fprintf(out, "weights %.2f GB (synthetic), cache %s\n", (double)m.weight_bytes / 1e9, db);
    if (model_read_ceiling(&m, sms, &report_cfg.read_gbps))
        goto done;
    fprintf(out, "read ceiling %.0f GB/s (the tuner's streaming-read kernel over the 1.02 GB lm_head weight)\n",
            report_cfg.read_gbps);
    if (fault)
        fprintf(stderr, "decode: DECODE_FAULT=%s: mode 4 runs with this bug; the agreement check must fail\n",
                fault_env);
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
                            "atk's naive fused norm, mode 4 atk's unfused sequences, not tuned kernels\n");
        }
    } else
        fprintf(stderr, "decode: atk_open: %s (modes 3 and 4 skipped)\n", atk_errmsg(NULL));

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
        report_batch_tables(out, res, a.nbatch, a.steps);
        for (int i = 0; i < a.nbatch; i++) {
            const result *r = &res[i];
            fprintf(out, "\nB=%d:\n", r->B);
            for (int mode = MODE_ATK; mode <= NMODES; mode++) {
                paths t;
                report_paths_total(r->p[mode], &t);
                if (!t.calls)
                    continue;
                fprintf(out, "  (%d) atk calls in one captured step (tuned/bucket/inferred/fallback %llu/%llu/%llu/"
                             "%llu):\n",
                        mode, t.tuned, t.bucket, t.inferred, t.fallback);
                report_paths(out, r->p[mode], "    ");
            }
            report_checks(out, r, "hidden state:");
            if (r->have_ops)
                report_ops(out, r);
        }
    }
    if (a.ntrace) {
        double per_step = (double)trace_tokens / a.steps, lim = report_limit_us(&tr.bytes);
        fprintf(out, "\ntrace of %d steps (%d distinct M: one graph each per mode, replayed in trace order, %d "
                     "steps cycling through it; %lld tokens; median of %d rounds)\n  M:",
                a.ntrace, nd, a.steps, trace_tokens, ROUNDS);
        for (int i = 0; i < a.ntrace && i < 32; i++)
            fprintf(out, "%s%d", i ? "," : " ", a.trace[i]);
        fprintf(out, "%s\n", a.ntrace > 32 ? ",..." : "");
        if (lim > 0)
            fprintf(out, "  limit of the mean step: %.1f us (%.1f of it stand-ins) at %.0f GB/s\n", lim,
                    report_standin_limit_us(&tr.bytes), report_cfg.read_gbps);
        fprintf(out, "  %-40s %10s %12s %8s %11s\n", "mode", "us/step", "tokens/s", "vs (2)", "% of limit");
        for (int mode = 1; mode <= NMODES; mode++)
            if (tr.t[mode].med > 0) {
                fprintf(out, "  (%d) %-36s %10.1f %12.1f", mode, report_mode_names[mode], tr.t[mode].med,
                        1e6 * per_step / tr.t[mode].med);
                report_cell(out, 8, "%.2fx", tr.t[2].med / tr.t[mode].med, tr.t[2].med > 0);
                report_cell(out, 11, "%.1f%%", report_pct_of_limit(&tr, mode), report_pct_of_limit(&tr, mode) > 0);
                fputc('\n', out);
            }
        for (int mode = MODE_ATK; mode <= NMODES; mode++) {
            paths t;
            report_paths_total(tr.p[mode], &t);
            if (!t.calls)
                continue;
            fprintf(out, "  (%d) atk calls over the %d replayed steps (each distinct M's captured step, times its "
                         "steps):\n",
                    mode, a.steps);
            report_paths(out, tr.p[mode], "    ");
        }
        report_checks(out, &tr, "every distinct M, hidden state:");
    }
    if (all_fallback)
        fprintf(out, "\nnote: atk loaded nothing tuned for this GPU: (3) and (4) ran on fallback only\n");
    fprintf(out, "\n%s\n", rc ? "FAIL: a mode differs from (1) (or did not run)" : "ok: every mode agrees with (1)");

    if (jf) {
        fputs("{\"device\": ", jf);
        report_jstr(jf, name);
        fprintf(jf, ", \"cc\": %d, \"steps\": %d, \"rounds\": %d, \"db\": ", 10 * major + minor, a.steps, ROUNDS);
        report_jstr(jf, db);
        fprintf(jf, ", \"atk\": %s, \"atk_all_fallback\": %s, \"weights_gb\": %.4g, \"read_gbps\": ",
                have_atk ? "true" : "false", all_fallback ? "true" : "false", (double)m.weight_bytes / 1e9);
        report_jnum(jf, report_cfg.read_gbps, report_cfg.read_gbps > 0);
        fputs(", \"modes\": [", jf);
        for (int mode = 1, first = 1; mode <= NMODES; mode++)
            if (report_cfg.modes & (1u << mode)) {
                fputs(first ? "" : ", ", jf);
                report_jstr(jf, report_mode_keys[mode]);
                first = 0;
            }
        fputs("], \"standins_timed\": ", jf);
        fputs(report_cfg.no_standins ? "false" : "true", jf);
        fputs(", \"op_kinds\": [", jf);
        for (int k = 0; k < K_COUNT; k++) {
            fputs(k ? ", " : "", jf);
            report_jstr(jf, report_op_names[k]);
        }
        fputs("],\n \"batch\": [", jf);
        for (int i = 0; i < a.nbatch; i++) {
            fprintf(jf, "%s\n  {\"B\": %d, ", i ? "," : "", res[i].B);
            report_json(jf, &res[i], res[i].B);
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
            report_json(jf, &tr, (double)trace_tokens / a.steps);
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
