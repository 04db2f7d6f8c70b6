/*
** op_norm.c — the RMSNorm family (rmsnorm, add_rmsnorm, gemma_rmsnorm,
** add_gemma_rmsnorm; TxH) for the op table. Every copy of the rotated data
** holds its own x, residual (add ops), w and y, so a call reads all of them
** from HBM. Two baselines, compiled with NVRTC at run time like the
** candidates: the naive fused kernel (baseline 0, the runtime's fallback,
** the winner rule's yardstick) and the unfused eager chain (one kernel per
** elementary op). The check restores the residual and poisons y first, and
** for the add ops compares the residual output z bit for bit. The check
** runs on its own y and residual buffers with guard zones (op.h), so a
** candidate writing past either is wrong.
** tests/test_gpu.c runs every candidate of each op on a GPU.
*/
#include "norm_ref.h"
#include "op.h"
#include "verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The baseline kernels, one file each: templates/baseline/<name>.cu with
** the entry point <name>. */
enum { B_NAIVE, B_ADD, B_CAST_F32, B_SQUARE, B_MEAN, B_RSQRT, B_MUL_ROWS, B_MUL_W, B_CAST_BACK, NB };
static const char *const bname[NB] = {"norm_naive",     "norm_add",      "norm_cast_f32",
                                      "norm_square",    "norm_mean",     "norm_rsqrt_eps",
                                      "norm_mul_rows",  "norm_mul_weight", "norm_cast_back"};
static const char *const btemplates[NB + 1] = {
    "baseline/norm_naive.cu",    "baseline/norm_add.cu",        "baseline/norm_cast_f32.cu",
    "baseline/norm_square.cu",   "baseline/norm_mean.cu",       "baseline/norm_rsqrt_eps.cu",
    "baseline/norm_mul_rows.cu", "baseline/norm_mul_weight.cu", "baseline/norm_cast_back.cu",
    NULL};

#define NAIVE_THREADS 256u /* norm_naive.cu: one 256-thread block per row */

typedef struct norm {
    at_norm_op op;
    int add, gemma, wfp32;
    at_dtype dtype;
    int64_t T, H;
    float eps;
    at_templates *tpl;
    const char *cubin_dir;
    int arch, threads;
    at_gpu *g;
    int copies;
    size_t rstride, wstride; /* bytes between copies: a row block (x, residual, y), w */
    CUdeviceptr xb, rb, yb, wb; /* copy i of x at xb + i * rstride, ... */
    CUdeviceptr xf, sq, ms, rs, xn, yw; /* the chain's fp32 scratch, shared by the copies */
    at_guarded ychk, rchk; /* the check's y and residual (add ops), with guard zones */
    uint16_t *hx, *hr, *hw, *hy, *hz, *zref;
    float *hw32;
    double *ref;
    at_compile_job jobs[NB];
    CUmodule mod[NB];
    CUfunction fn[NB];
} norm;

static int uses_baseline(const norm *s, int b)
{
    return b != B_ADD || s->add;
}

/* Reads the fixed TP_OP and TP_WFP32 of the spec's candidates: every one
** must build this op, and all must agree on w's type (the buffers and the
** reference depend on it). */
static int read_spec_params(norm *s, const at_op_env *env)
{
    at_candidate *c = NULL;
    int n = 0, rc;
    if ((rc = at_spec_expand(env->spec, env->pb, &c, &n)) != AT_OK)
        return rc;
    for (int i = 0; i < n && rc == AT_OK; i++) {
        int64_t op = at_candidate_param(&c[i], "TP_OP", -1), wf = at_candidate_param(&c[i], "TP_WFP32", 0);
        if (op != (int64_t)s->op)
            rc = at_fail(AT_ERR_SPEC, "%s: candidate %d has TP_OP=%lld, but op %s is TP_OP=%d",
                         env->o->spec_path, i, (long long)op, env->o->op, (int)s->op);
        else if (wf != 0 && wf != 1)
            rc = at_fail(AT_ERR_SPEC, "%s: TP_WFP32=%lld (0 or 1)", env->o->spec_path, (long long)wf);
        else if (i > 0 && (int)wf != s->wfp32)
            rc = at_fail(AT_ERR_SPEC, "%s: candidates disagree on TP_WFP32 (w's type must be one per run)",
                         env->o->spec_path);
        else if (wf && !s->gemma)
            rc = at_fail(AT_ERR_SPEC, "%s: TP_WFP32=1 (fp32 w) is for the Gemma ops, not %s",
                         env->o->spec_path, env->o->op);
        s->wfp32 = (int)wf;
    }
    free(c);
    return rc;
}

static int norm_open(const at_op_env *env, at_search_result *res, void **state)
{
    const at_search_opts *o = env->o;
    double eps = o->eps == 0.0 ? 1e-6 : o->eps;
    norm *s;
    int rc;
    if (!(eps > 0.0 && eps <= 1.0) || !((float)eps > 0.0f))
        return at_fail(AT_ERR_USAGE, "eps %g: must be a number in (0, 1]", eps);
    if (o->shape.M > 2147483647LL || o->shape.K > 2147483647LL)
        return at_fail(AT_ERR_USAGE, "shape too large for int T and H");
    if (!(s = calloc(1, sizeof *s)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    *state = s;
    if ((rc = at_norm_ref_parse_op(o->op, &s->op)) != AT_OK)
        return rc;
    s->add = at_norm_ref_has_residual(s->op);
    s->gemma = at_norm_ref_is_gemma(s->op);
    s->dtype = o->dtype;
    s->T = o->shape.M;
    s->H = o->shape.K;
    s->eps = (float)eps;
    s->tpl = env->tpl;
    s->cubin_dir = env->cubin_dir;
    s->arch = env->pb->arch;
    s->threads = o->threads;
    res->eps = (double)s->eps;
    if ((rc = read_spec_params(s, env)) != AT_OK)
        return rc;

    res->nbaselines = 2;
    at_search_baseline *b = &res->baselines[0];
    snprintf(b->strategy, sizeof b->strategy, "naive");
    snprintf(b->label, sizeof b->label, "naive");
    snprintf(b->what, sizeof b->what, "norm_naive TP_OP=%d TP_WFP32=%d (256 threads a row)", (int)s->op,
             s->wfp32);
    snprintf(b->json_name, sizeof b->json_name, "norm_naive");
    b = &res->baselines[1];
    snprintf(b->strategy, sizeof b->strategy, "unfused");
    snprintf(b->label, sizeof b->label, "unfused");
    snprintf(b->what, sizeof b->what, "%d kernels: %scast sq mean rsqrt mul mul-w cast",
             s->add ? 8 : 7, s->add ? "add " : "");
    snprintf(b->json_name, sizeof b->json_name, "unfused");
    return AT_OK;
}

/* fp32 Gemma weights build other kernels: say so in the key's options, so
** the key (and the runtime reading it) tells the two apart. [CACHE_KEY] */
static void norm_key_options(void *state, char *buf, size_t len)
{
    norm *s = state;
    snprintf(buf, len, "%s", s->wfp32 ? "-DTP_WFP32=1" : "");
}

static size_t round256(size_t n)
{
    return (n + 255) / 256 * 256;
}

static size_t norm_copy_bytes(void *state)
{
    norm *s = state;
    size_t row = round256((size_t)(s->T * s->H) * 2);
    return (s->add ? 3 : 2) * row + round256((size_t)s->H * (s->wfp32 ? 4 : 2));
}

/* Compiles the baselines this op uses (NVRTC, the compiled-kernel cache
** when there is one) and loads them. */
static int compile_baselines(norm *s)
{
    at_compile_job list[NB];
    const char *entries[NB];
    CUmodule mods[NB] = {0};
    CUfunction fns[NB] = {0};
    int idx[NB], n = 0;
    for (int b = 0; b < NB; b++) {
        if (!uses_baseline(s, b))
            continue;
        list[n] = (at_compile_job){.name = btemplates[b]};
        if (b == B_NAIVE || b == B_MUL_W)
            snprintf(list[n].options, sizeof list[n].options, "-DTP_OP=%d -DTP_WFP32=%d", (int)s->op, s->wfp32);
        entries[n] = bname[b];
        idx[n++] = b;
    }
    int rc = at_op_compile_load(s->g, s->tpl, s->arch, s->dtype, s->cubin_dir, s->threads, list, entries, n, mods, fns);
    for (int k = 0; k < n; k++) { /* what was compiled and loaded, for close and baseline_winner */
        s->jobs[idx[k]] = list[k];
        s->mod[idx[k]] = mods[k];
        s->fn[idx[k]] = fns[k];
    }
    return rc;
}

static int norm_setup(void *state, at_gpu *g, int copies)
{
    norm *s = state;
    size_t n = (size_t)(s->T * s->H), wbytes = (size_t)s->H * (s->wfp32 ? 4 : 2);
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    const void *w;
    int rc;

    s->g = g;
    s->copies = copies;
    if ((rc = compile_baselines(s)) != AT_OK)
        return rc;
    s->hx = malloc(n * 2);
    s->hy = malloc(n * 2);
    s->ref = malloc(n * sizeof(double));
    if (s->wfp32)
        s->hw32 = malloc(wbytes);
    else
        s->hw = malloc(wbytes);
    if (s->add) {
        s->hr = malloc(n * 2);
        s->hz = malloc(n * 2);
        s->zref = malloc(n * 2);
    }
    if (!s->hx || !s->hy || !s->ref || !(s->hw || s->hw32) || (s->add && (!s->hr || !s->hz || !s->zref)))
        return at_fail(AT_ERR_NOMEM, "out of host memory for %lld x %lld inputs", (long long)s->T,
                       (long long)s->H);
    /* fresh random inputs each run, never zeros */
    at_fill_random(s->dtype, s->hx, n, seed, 1.0f);
    if (s->add)
        at_fill_random(s->dtype, s->hr, n, seed * 17 + 3, 1.0f);
    if (s->wfp32)
        at_fill_random_f32(s->hw32, (size_t)s->H, seed * 31 + 7, 1.0f);
    else
        at_fill_random(s->dtype, s->hw, (size_t)s->H, seed * 31 + 7, 1.0f);
    w = s->wfp32 ? (const void *)s->hw32 : (const void *)s->hw;
    if ((rc = at_norm_ref_run(s->op, s->dtype, s->T, s->H, s->hx, s->hr, w, s->wfp32, s->eps, s->ref,
                              s->zref)) != AT_OK)
        return rc;

    s->rstride = round256(n * 2);
    s->wstride = round256(wbytes);
    size_t C = (size_t)copies;
    if ((rc = at_gpu_alloc(g, &s->xb, s->rstride * C)) != AT_OK ||
        (rc = at_gpu_alloc(g, &s->yb, s->rstride * C)) != AT_OK ||
        (rc = at_gpu_alloc(g, &s->wb, s->wstride * C)) != AT_OK ||
        (s->add && (rc = at_gpu_alloc(g, &s->rb, s->rstride * C)) != AT_OK) ||
        (rc = at_gpu_alloc(g, &s->xf, n * 4)) != AT_OK || (rc = at_gpu_alloc(g, &s->sq, n * 4)) != AT_OK ||
        (rc = at_gpu_alloc(g, &s->xn, n * 4)) != AT_OK || (rc = at_gpu_alloc(g, &s->yw, n * 4)) != AT_OK ||
        (rc = at_gpu_alloc(g, &s->ms, (size_t)s->T * 4)) != AT_OK ||
        (rc = at_gpu_alloc(g, &s->rs, (size_t)s->T * 4)) != AT_OK ||
        (rc = at_guarded_alloc(g, &s->ychk, n * 2)) != AT_OK ||
        (s->add && (rc = at_guarded_alloc(g, &s->rchk, n * 2)) != AT_OK))
        return rc;
    if ((rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->xb, s->hx, n * 2, g->stream), "cuMemcpyHtoDAsync")) !=
            AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->wb, w, wbytes, g->stream), "cuMemcpyHtoDAsync")) !=
            AT_OK ||
        (s->add && (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->rb, s->hr, n * 2, g->stream),
                                      "cuMemcpyHtoDAsync")) != AT_OK) ||
        (rc = at_op_replicate(g, s->xb, s->rstride, copies)) != AT_OK ||
        (rc = at_op_replicate(g, s->wb, s->wstride, copies)) != AT_OK ||
        (s->add && (rc = at_op_replicate(g, s->rb, s->rstride, copies)) != AT_OK) ||
        /* y: defined bytes everywhere (timing never reads it; checks poison it) */
        (rc = at_gpu_check(g, g->cu.cuMemsetD8Async_(s->yb, 0, s->rstride * C, g->stream), "cuMemsetD8Async")) !=
            AT_OK)
        return rc;
    return at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "cuStreamSynchronize");
}

/* One launch of baseline kernel b over n elements (grid ceil(n / 1024)). */
static int chain_launch(norm *s, int b, unsigned grid, void **args)
{
    at_op_kernel k = {.fn = s->fn[b], .grid = {grid, 1, 1}, .block = {AT_ELTWISE_THREADS, 1, 1}};
    return at_op_launch(s->g, &k, args);
}

/* The unfused chain as an eager framework runs it: [add,] cast, square,
** mean, rsqrt(+eps), multiply by the row's scale, multiply by w, cast back;
** each its own kernel, every intermediate through memory (fp32). */
static int enqueue_unfused(norm *s, CUdeviceptr x, CUdeviceptr r, CUdeviceptr w, CUdeviceptr y)
{
    long long n = (long long)(s->T * s->H), nt = (long long)s->T;
    int T = (int)s->T, H = (int)s->H, rc;
    float eps = s->eps;
    unsigned ge = (unsigned)((n + AT_ELTWISE_PER_BLOCK - 1) / AT_ELTWISE_PER_BLOCK);
    unsigned gt = (unsigned)((nt + AT_ELTWISE_PER_BLOCK - 1) / AT_ELTWISE_PER_BLOCK);
    CUdeviceptr src = x;
    if (s->add) {
        void *a[] = {&x, &r, &n}; /* residual := rne(x + residual) = z */
        if ((rc = chain_launch(s, B_ADD, ge, a)) != AT_OK)
            return rc;
        src = r;
    }
    void *a1[] = {&src, &s->xf, &n};
    void *a2[] = {&s->xf, &s->sq, &n};
    void *a3[] = {&s->sq, &s->ms, &T, &H};
    void *a4[] = {&s->ms, &s->rs, &nt, &eps};
    void *a5[] = {&s->xf, &s->rs, &s->xn, &n, &H};
    void *a6[] = {&s->xn, &w, &s->yw, &n, &H};
    void *a7[] = {&s->yw, &y, &n};
    if ((rc = chain_launch(s, B_CAST_F32, ge, a1)) != AT_OK || (rc = chain_launch(s, B_SQUARE, ge, a2)) != AT_OK ||
        (rc = chain_launch(s, B_MEAN, (unsigned)T, a3)) != AT_OK ||
        (rc = chain_launch(s, B_RSQRT, gt, a4)) != AT_OK || (rc = chain_launch(s, B_MUL_ROWS, ge, a5)) != AT_OK ||
        (rc = chain_launch(s, B_MUL_W, ge, a6)) != AT_OK || (rc = chain_launch(s, B_CAST_BACK, ge, a7)) != AT_OK)
        return rc;
    return AT_OK;
}

/* [NORM_ARGS] Every fused kernel (templates/norm/ *.cu, norm_naive.cu)
** takes (x, residual, w, y, int T, int H, float eps); the runtime library
** launches them with the same list. residual is 0 for the non-add ops
** (they never touch it). */
static int enqueue_on(norm *s, const at_contestant *c, CUdeviceptr x, CUdeviceptr r, CUdeviceptr w, CUdeviceptr y)
{
    int T = (int)s->T, H = (int)s->H;
    float eps = s->eps;
    void *args[] = {&x, &r, &w, &y, &T, &H, &eps};
    if (c->call) {
        at_op_call_args a = {.x = x, .W = w, .y = y, .residual = r, .M = s->T, .K = s->H, .eps = s->eps};
        return c->call(c->call_arg, &a);
    }
    if (c->baseline == 1)
        return enqueue_unfused(s, x, r, w, y);
    if (c->baseline == 0) {
        at_op_kernel k = {.fn = s->fn[B_NAIVE], .grid = {(unsigned)T, 1, 1}, .block = {NAIVE_THREADS, 1, 1}};
        return at_op_launch(s->g, &k, args);
    }
    return at_op_launch(s->g, &c->kernel, args);
}

static int norm_enqueue(void *state, const at_contestant *c, int copy)
{
    norm *s = state;
    CUdeviceptr x = s->xb + (CUdeviceptr)(s->rstride * (size_t)copy);
    CUdeviceptr r = s->add ? s->rb + (CUdeviceptr)(s->rstride * (size_t)copy) : 0;
    CUdeviceptr w = s->wb + (CUdeviceptr)(s->wstride * (size_t)copy);
    CUdeviceptr y = s->yb + (CUdeviceptr)(s->rstride * (size_t)copy);
    return enqueue_on(s, c, x, r, w, y);
}

static int norm_check(void *state, const at_contestant *c, at_op_check *out)
{
    norm *s = state;
    at_gpu *g = s->g;
    size_t n = (size_t)(s->T * s->H), zbad = 0, zfirst = 0;
    int rc;
    memset(out, 0, sizeof *out);
    CUdeviceptr r = s->add ? s->rchk.p : 0;
    /* the add ops update residual in place: restore it, then poison y
    ** (0xFFFF is a NaN in bf16 and fp16, so an unwritten y fails) and arm
    ** the guard zones around both; inputs x and w are copy 0's */
    if ((s->add && (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(r, s->hr, n * 2, g->stream),
                                      "cuMemcpyHtoDAsync")) != AT_OK) ||
        (s->add && (rc = at_guarded_arm(g, &s->rchk)) != AT_OK) ||
        (rc = at_gpu_check(g, g->cu.cuMemsetD16Async_(s->ychk.p, 0xFFFF, n, g->stream), "cuMemsetD16Async")) !=
            AT_OK ||
        (rc = at_guarded_arm(g, &s->ychk)) != AT_OK || (rc = enqueue_on(s, c, s->xb, r, s->wb, s->ychk.p)) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "kernel run")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyDtoHAsync_(s->hy, s->ychk.p, n * 2, g->stream), "cuMemcpyDtoHAsync")) !=
            AT_OK ||
        (rc = at_guarded_fetch(g, &s->ychk)) != AT_OK ||
        (s->add && (rc = at_gpu_check(g, g->cu.cuMemcpyDtoHAsync_(s->hz, r, n * 2, g->stream),
                                      "cuMemcpyDtoHAsync")) != AT_OK) ||
        (s->add && (rc = at_guarded_fetch(g, &s->rchk)) != AT_OK) ||
        (rc = at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "cuStreamSynchronize")) != AT_OK)
        return rc;
    out->wrong = at_guarded_verdict(&s->ychk, "output", out->reason, sizeof out->reason);
    if (s->add)
        out->wrong |= at_guarded_verdict(&s->rchk, "residual", out->reason, sizeof out->reason);
    at_op_verdict(out, s->dtype, s->hy, s->ref, n);
    if (s->add) /* z is exact: the same fp32 add and rounding as the reference */
        for (size_t i = n; i-- > 0;)
            if (s->hz[i] != s->zref[i]) {
                zbad++;
                zfirst = i;
            }
    if (zbad) {
        size_t len = strnlen(out->reason, sizeof out->reason - 1);
        out->wrong = 1;
        snprintf(out->reason + len, sizeof out->reason - len,
                 "%sresidual output z wrong at %zu of %zu elements (first [%lld,%lld]: 0x%04x, want 0x%04x)",
                 len ? "; " : "", zbad, n, (long long)(zfirst / (size_t)s->H),
                 (long long)(zfirst % (size_t)s->H), s->hz[zfirst], s->zref[zfirst]);
    }
    return AT_OK;
}

/* The naive fused kernel as the stored answer, with its cubin. [NAIVE_WINNER]
** kernels/atk_entry.c serves a "naive" row with its built-in copy. */
static int norm_baseline_winner(void *state, at_winner *w)
{
    norm *s = state;
    const at_compile_job *j = &s->jobs[B_NAIVE];
    snprintf(w->strategy, sizeof w->strategy, "naive");
    snprintf(w->kernel, sizeof w->kernel, "%s", bname[B_NAIVE]);
    snprintf(w->template_name, sizeof w->template_name, "%s", btemplates[B_NAIVE]);
    snprintf(w->params, sizeof w->params, "TP_OP=%d TP_WFP32=%d", (int)s->op, s->wfp32);
    w->grid[0] = (unsigned)s->T;
    w->grid[1] = w->grid[2] = 1;
    w->block[0] = NAIVE_THREADS;
    w->block[1] = w->block[2] = 1;
    w->smem = 0;
    if (!j->cubin)
        return at_fail(AT_ERR_NVRTC, "nvrtc: the naive baseline was not compiled");
    if (!(w->cubin = malloc(j->cubin_size)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    memcpy(w->cubin, j->cubin, j->cubin_size);
    w->cubin_size = j->cubin_size;
    at_sha256_hex(w->cubin, w->cubin_size, w->cubin_sha);
    return AT_OK;
}

static void norm_close(void *state)
{
    norm *s = state;
    if (!s)
        return;
    if (s->g) {
        for (int b = 0; b < NB; b++)
            if (s->mod[b])
                s->g->cu.cuModuleUnload_(s->mod[b]);
        CUdeviceptr all[] = {s->xb, s->rb, s->yb, s->wb, s->xf, s->sq, s->ms, s->rs, s->xn, s->yw};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            at_gpu_free(s->g, all[i]);
    }
    at_guarded_free(s->g, &s->ychk); /* without a GPU: the host copy only */
    at_guarded_free(s->g, &s->rchk);
    for (int b = 0; b < NB; b++)
        at_compile_job_clear(&s->jobs[b]);
    free(s->hx);
    free(s->hr);
    free(s->hw);
    free(s->hw32);
    free(s->hy);
    free(s->hz);
    free(s->zref);
    free(s->ref);
    free(s);
}

#define NORM_OP(var, opname)                                                                       \
    const at_op var = {                                                                            \
        .name = opname,                                                                            \
        .rank = 2,                                                                                 \
        .shape_form = "TxH",                                                                       \
        .max_copies = 1 << 16,                                                                     \
        .copy_what = "inputs",                                                                     \
        .extra_templates = btemplates,                                                             \
        .check_baselines = 1,                                                                      \
        .takes_eps = 1,                                                                            \
        .open = norm_open,                                                                         \
        .key_options = norm_key_options,                                                           \
        .copy_bytes = norm_copy_bytes,                                                             \
        .setup = norm_setup,                                                                       \
        .check = norm_check,                                                                       \
        .enqueue = norm_enqueue,                                                                   \
        .baseline_winner = norm_baseline_winner,                                                   \
        .close = norm_close,                                                                       \
    }

NORM_OP(at_op_rmsnorm, "rmsnorm");
NORM_OP(at_op_add_rmsnorm, "add_rmsnorm");
NORM_OP(at_op_gemma_rmsnorm, "gemma_rmsnorm");
NORM_OP(at_op_add_gemma_rmsnorm, "add_gemma_rmsnorm");
