/*
** op_fused.c — the fused decode ops for the op table (MxKxN; one
** implementation, seven ops): rmsnorm_gemv and gemma_rmsnorm_gemv (the
** norm of x in the GEMV's prologue, TP_NORM 1 / 2), gemv_swiglu (y =
** silu(x . Wg^T) * (x . Wu^T), TP_SWIGLU 1), the two norm + SwiGLU forms,
** and the residual-add forms add_rmsnorm_gemv / add_gemma_rmsnorm_gemv
** (TP_RES 1: z = x + residual written back in place, the norm of z). The
** candidates are search/gemv.lua's warp_row / splitk / multi_token kernels
** built with TP_NORM / TP_SWIGLU / TP_RES; every one takes the nine
** parameters (x, W, y, M, K, N, Wu, nw, eps), the add forms two more (res,
** cnt: the counters at the start of the scratch) [FUSED_ARGS]. Random x,
** w, W (and residual), the fp64 reference (fused_ref.h), the weights
** rotated over copies: each copy holds the [N or 2N, K] weight block (Wg =
** W, Wu = W + N*K) and the norm weight w; x and the residual stay put (the
** residual grows by x each timed call; checks restore it). y and the
** residual have guard zones; y is poisoned before each check, the residual
** must come back as z bit for bit and the counters as zero.
** Baselines: 0 "unfused", the runtime's own unfused sequence over the
** tuner's cache (the op's atk call on an ATK_UNFUSED context: atk_rmsnorm /
** atk_gemma_rmsnorm into scratch, atk_gemv, its SiLU-mul), whose components
** the pipeline tunes first (components.c): the winner rule's yardstick; 1
** the naive norm (baseline/norm_naive.cu), cublasGemmEx, silu_mul.cu.
** tests/test_gpu.c runs every candidate of each op on a GPU.
*/
#include "fused_ref.h"
#include "norm_ref.h"
#include "op.h"
#include "verify.h"

#include "atk.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The baseline kernels: templates/baseline/<name>.cu, entry point <name>. */
enum { B_NAIVE, B_SILU, NB };
static const char *const bname[NB] = {"norm_naive", "silu_mul"};
static const char *const btemplate[NB] = {"baseline/norm_naive.cu", "baseline/silu_mul.cu"};
/* extra_templates (hashed into the key): those each op compiles */
static const char *const tpl_norm[] = {"baseline/norm_naive.cu", NULL};
static const char *const tpl_swiglu[] = {"baseline/silu_mul.cu", NULL};
static const char *const tpl_both[] = {"baseline/norm_naive.cu", "baseline/silu_mul.cu", NULL};

#define NAIVE_THREADS 256u /* norm_naive.cu: one 256-thread block per row */

typedef struct fused {
    int norm, swiglu, res; /* TP_NORM (0, 1 rmsnorm, 2 Gemma), TP_SWIGLU, TP_RES */
    int atk_op;       /* ATK_OP_RMSNORM_GEMV ... */
    at_dtype dtype;
    int64_t M, K, N, rows; /* rows of the weight block: N, 2N with SwiGLU */
    float eps;
    at_templates *tpl;
    const char *cubin_dir, *db_path;
    int arch, threads, device;
    at_gpu *g;
    atk_ctx *rt; /* baseline 0: the runtime over the tuner's cache */
    int copies;
    size_t wbytes, nwoff, stride; /* one copy: weights, then w at nwoff; copies stride apart */
    CUdeviceptr x, base;          /* base: every copy */
    CUdeviceptr scratch, xn, gu;  /* the unfused sequences' xn (M x K) and g|u (M x 2N), in scratch */
    at_guarded yg;                /* y with its guard zones */
    at_guarded rg;                /* the residual (add forms) with its guard zones */
    uint16_t *hx, *hw, *hW, *hy;
    uint16_t *hr, *hz, *hzr;      /* add forms: the residual, z expected, z read back */
    unsigned *hcnt;               /* the counters read back */
    double *ref;
    at_compile_job jobs[NB];
    CUmodule mod[NB];
    CUfunction fn[NB];
} fused;

/* The norm op of a fused op's unfused sequence (its value is the norm
** templates' TP_OP, its name the norm's --op): Gemma or not, add_ or not. */
static at_norm_op norm_op(int norm, int res)
{
    return norm == AT_FUSED_NORM_GEMMA ? (res ? AT_NORM_ADD_GEMMA_RMSNORM : AT_NORM_GEMMA_RMSNORM)
                                       : (res ? AT_NORM_ADD_RMSNORM : AT_NORM_RMSNORM);
}

static size_t round256(size_t n)
{
    return (n + 255) / 256 * 256;
}

/* Every candidate must build this op: TP_NORM, TP_SWIGLU and TP_RES as the
** op's, no TP_ADD (a kernel of another op would fail every check, or worse,
** pass some). */
static int check_spec(const fused *s, const at_op_env *env)
{
    at_candidate *c = NULL;
    int n = 0, rc;
    if ((rc = at_spec_expand(env->spec, env->pb, &c, &n)) != AT_OK)
        return rc;
    for (int i = 0; i < n && rc == AT_OK; i++) {
        int64_t nm = at_candidate_param(&c[i], "TP_NORM", 0), sw = at_candidate_param(&c[i], "TP_SWIGLU", 0);
        if (nm != s->norm || sw != s->swiglu)
            rc = at_fail(AT_ERR_SPEC,
                         "%s: candidate %d of %s has TP_NORM=%lld TP_SWIGLU=%lld, but %s is TP_NORM=%d "
                         "TP_SWIGLU=%d (the spec must set them for this op)",
                         env->o->spec_path, i, env->o->op, (long long)nm, (long long)sw, env->o->op, s->norm,
                         s->swiglu);
        else if ((at_candidate_param(&c[i], "TP_RES", 0) != 0) != s->res)
            rc = at_fail(AT_ERR_SPEC, "%s: candidate %d of %s has TP_RES=%lld, but %s is %s",
                         env->o->spec_path, i, env->o->op, (long long)at_candidate_param(&c[i], "TP_RES", 0),
                         env->o->op, s->res ? "a residual-add form (TP_RES=1 or 2)" : "TP_RES=0");
        else if (at_candidate_param(&c[i], "TP_ADD", 0) != 0)
            rc = at_fail(AT_ERR_SPEC, "%s: candidate %d of %s has TP_ADD=1 (no fused op adds a residual)",
                         env->o->spec_path, i, env->o->op);
    }
    free(c);
    return rc;
}

static int open_op(const at_op_env *env, at_search_result *res, void **state, int norm, int swiglu, int add)
{
    const at_search_opts *o = env->o;
    double eps = o->eps == 0.0 ? 1e-6 : o->eps;
    int64_t rows = swiglu ? 2 * o->shape.N : o->shape.N;
    fused *s;
    int rc;
    if (norm && (!(eps > 0.0 && eps <= 1.0) || !((float)eps > 0.0f)))
        return at_fail(AT_ERR_USAGE, "eps %g: must be a number in (0, 1]", eps);
    if (!norm && o->eps != 0.0)
        return at_fail(AT_ERR_USAGE, "--eps applies to the ops with a norm, not %s", o->op);
    if (o->shape.M > INT_MAX || o->shape.K > INT_MAX || rows > INT_MAX)
        return at_fail(AT_ERR_USAGE, "shape too large: M, K and %s must fit an int", swiglu ? "2N" : "N");
    if (add && o->shape.M > ATK_FUSED_COUNTER_BYTES / 4)
        return at_fail(AT_ERR_USAGE,
                       "%s at M=%lld: the residual-add kernels serve M <= %d (one counter per token group in the "
                       "scratch); a larger M runs the unfused sequence",
                       o->op, (long long)o->shape.M, ATK_FUSED_COUNTER_BYTES / 4);
    if (!(s = calloc(1, sizeof *s)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    *state = s;
    s->norm = norm;
    s->swiglu = swiglu;
    s->res = add;
    s->atk_op = swiglu ? (norm == AT_FUSED_NORM_NONE    ? ATK_OP_GEMV_SWIGLU
                          : norm == AT_FUSED_NORM_RMS ? ATK_OP_RMSNORM_GEMV_SWIGLU
                                                      : ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU)
                : add  ? (norm == AT_FUSED_NORM_RMS ? ATK_OP_ADD_RMSNORM_GEMV : ATK_OP_ADD_GEMMA_RMSNORM_GEMV)
                : norm == AT_FUSED_NORM_RMS ? ATK_OP_RMSNORM_GEMV
                                            : ATK_OP_GEMMA_RMSNORM_GEMV;
    s->dtype = o->dtype;
    s->M = o->shape.M;
    s->K = o->shape.K;
    s->N = o->shape.N;
    s->rows = rows;
    s->eps = norm ? (float)eps : 0.0f;
    s->tpl = env->tpl;
    s->cubin_dir = env->cubin_dir;
    s->db_path = o->db_path;
    s->arch = env->pb->arch;
    s->threads = o->threads;
    s->device = o->device;
    s->wbytes = (size_t)(rows * s->K) * 2;
    s->nwoff = round256(s->wbytes);
    s->stride = norm ? round256(s->nwoff + (size_t)s->K * 2) : s->nwoff;
    res->eps = (double)s->eps;
    if ((rc = check_spec(s, env)) != AT_OK)
        return rc;

    /* baseline 0's what says its steps; search.c adds which were tuned */
    char steps[96];
    if (norm)
        snprintf(steps, sizeof steps, "atk unfused: %s + gemv%s", at_norm_ref_op_name(norm_op(norm, add)),
                 swiglu ? " 2N + silu_mul" : "");
    else
        snprintf(steps, sizeof steps, "atk unfused: gemv 2N + silu_mul");
    res->nbaselines = 2;
    at_search_baseline *b = &res->baselines[0];
    snprintf(b->strategy, sizeof b->strategy, "unfused");
    snprintf(b->label, sizeof b->label, "unfused");
    snprintf(b->what, sizeof b->what, "%s", steps);
    snprintf(b->json_name, sizeof b->json_name, "atk_unfused");
    b = &res->baselines[1];
    snprintf(b->strategy, sizeof b->strategy, "cublas");
    snprintf(b->label, sizeof b->label, "%s", norm && swiglu ? "naive+cuBLAS+silu" : norm ? "naive+cuBLAS" : "cuBLAS+silu");
    snprintf(b->what, sizeof b->what, "%s%scublasGemmEx%s", norm ? "norm_naive " : "", norm ? "+ " : "",
             swiglu ? " 2N + silu_mul" : "");
    snprintf(b->json_name, sizeof b->json_name, "%s", norm && swiglu ? "norm_naive+cublasGemmEx+silu_mul"
                                                     : norm          ? "norm_naive+cublasGemmEx"
                                                                     : "cublasGemmEx+silu_mul");
    return AT_OK;
}

/* The components of baseline 0: the norm at T = M, H = K (add forms: the
** add_ norm), and the GEMV at M x K x N (SwiGLU: 2N, one GEMV over the
** concatenated weight). */
static int components(const at_search_opts *o, int norm, int swiglu, int add, at_op_component *out, int max)
{
    int n = 0;
    if (norm && n < max)
        out[n++] =
            (at_op_component){.op = at_norm_ref_op_name(norm_op(norm, add)), .shape = {.rank = 2, .M = o->shape.M, .K = o->shape.K}};
    if (n < max)
        out[n++] = (at_op_component){
            .op = "gemv",
            .shape = {.rank = 3, .M = o->shape.M, .K = o->shape.K, .N = swiglu ? 2 * o->shape.N : o->shape.N}};
    return n;
}

static void fused_key_options(void *state, char *buf, size_t len)
{
    (void)state; /* TP_NORM / TP_SWIGLU are the candidates' params; the op is in the key */
    if (len)
        buf[0] = '\0';
}

static size_t fused_copy_bytes(void *state)
{
    fused *s = state;
    return s->stride;
}

static int fused_setup(void *state, at_gpu *g, int copies)
{
    fused *s = state;
    int64_t M = s->M, K = s->K, N = s->N;
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    /* one scratch for both unfused baselines: the runtime's (baseline 0,
    ** atk_fused_scratch_bytes: the counters first) and baseline 1's xn,
    ** then g|u, 256-aligned, after the counters too */
    size_t xnbytes = s->norm ? round256((size_t)(M * K) * 2) : 0;
    size_t gubytes = s->swiglu ? round256((size_t)(M * 2 * N) * 2) : 0;
    size_t sbytes = atk_fused_scratch_bytes(s->atk_op, s->dtype == AT_FP16 ? ATK_FP16 : ATK_BF16, M, K, N);
    if (sbytes < ATK_FUSED_COUNTER_BYTES + xnbytes + gubytes)
        sbytes = ATK_FUSED_COUNTER_BYTES + xnbytes + gubytes;
    int rc;

    s->g = g;
    s->copies = copies;
    /* the baselines' own kernels: the naive norm, the SiLU-mul */
    at_compile_job list[NB];
    const char *entries[NB];
    CUmodule mods[NB] = {0};
    CUfunction fns[NB] = {0};
    int idx[NB], n = 0;
    for (int b = 0; b < NB; b++) {
        if (b == B_NAIVE ? !s->norm : !s->swiglu)
            continue;
        list[n] = (at_compile_job){.name = btemplate[b]};
        if (b == B_NAIVE) /* [NORM_OP] the norm's TP_OP, w of the element dtype */
            snprintf(list[n].options, sizeof list[n].options, "-DTP_OP=%d -DTP_WFP32=0",
                     (int)norm_op(s->norm, s->res));
        entries[n] = bname[b];
        idx[n++] = b;
    }
    rc = at_op_compile_load(g, s->tpl, s->arch, s->dtype, s->cubin_dir, s->threads, list, entries, n, mods, fns);
    for (int k = 0; k < n; k++) {
        s->jobs[idx[k]] = list[k];
        s->mod[idx[k]] = mods[k];
        s->fn[idx[k]] = fns[k];
    }
    if (rc != AT_OK)
        return rc;
    /* baseline 0: the runtime library over the tuner's cache, fused entries
    ** left out (ATK_UNFUSED): the fused calls run the unfused sequence */
    if (!s->db_path)
        return at_fail(AT_ERR_USAGE, "%s needs the cache: its unfused baseline runs the runtime over it",
                       s->swiglu ? "a SwiGLU op" : "a fused norm op");
    if (atk_open(s->db_path, s->device, ATK_UNFUSED, &s->rt) != ATK_OK)
        return at_fail(AT_ERR_CUDA, "atk_open %s: %s", s->db_path, atk_errmsg(NULL));

    s->hx = malloc((size_t)(M * K) * 2);
    s->hw = malloc((size_t)K * 2);
    s->hW = malloc(s->wbytes);
    s->hy = malloc((size_t)(M * N) * 2);
    s->ref = malloc((size_t)(M * N) * sizeof(double));
    if (!s->hx || !s->hw || !s->hW || !s->hy || !s->ref)
        return at_fail(AT_ERR_NOMEM, "out of host memory for %lld x %lld weights", (long long)s->rows, (long long)K);
    /* fresh random inputs each run, never zeros */
    at_fill_random(s->dtype, s->hx, (size_t)(M * K), seed, 1.0f);
    at_fill_random(s->dtype, s->hW, (size_t)(s->rows * K), seed * 31 + 7, 1.0f);
    at_fill_random(s->dtype, s->hw, (size_t)K, seed * 17 + 3, 1.0f);
    if (s->res) { /* the residual stream, and z = rne(x + residual): the norm's input */
        s->hr = malloc((size_t)(M * K) * 2);
        s->hz = malloc((size_t)(M * K) * 2);
        s->hzr = malloc((size_t)(M * K) * 2);
        s->hcnt = malloc(ATK_FUSED_COUNTER_BYTES);
        if (!s->hr || !s->hz || !s->hzr || !s->hcnt)
            return at_fail(AT_ERR_NOMEM, "out of host memory");
        at_fill_random(s->dtype, s->hr, (size_t)(M * K), seed * 13 + 5, 1.0f);
        if ((rc = at_fused_ref_add(s->dtype, (size_t)(M * K), s->hx, s->hr, s->hz)) != AT_OK)
            return rc;
    }
    if ((rc = at_fused_ref_run(s->norm, s->swiglu, s->dtype, M, K, N, s->res ? s->hz : s->hx, s->hw, s->hW, s->eps,
                               s->ref)) != AT_OK)
        return rc;
    if (s->res &&
        ((rc = at_guarded_alloc(g, &s->rg, (size_t)(M * K) * 2)) != AT_OK ||
         (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->rg.p, s->hr, (size_t)(M * K) * 2, g->stream),
                            "cuMemcpyHtoDAsync")) != AT_OK))
        return rc;

    if ((rc = at_gpu_alloc(g, &s->x, (size_t)(M * K) * 2)) != AT_OK ||
        (rc = at_guarded_alloc(g, &s->yg, (size_t)(M * N) * 2)) != AT_OK ||
        (rc = at_gpu_alloc(g, &s->scratch, sbytes)) != AT_OK ||
        (rc = at_gpu_alloc(g, &s->base, s->stride * (size_t)copies)) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->x, s->hx, (size_t)(M * K) * 2, g->stream),
                           "cuMemcpyHtoDAsync")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->base, s->hW, s->wbytes, g->stream), "cuMemcpyHtoDAsync")) !=
            AT_OK ||
        (s->norm && (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->base + s->nwoff, s->hw, (size_t)K * 2, g->stream),
                                       "cuMemcpyHtoDAsync")) != AT_OK) ||
        (rc = at_op_replicate(g, s->base, s->stride, copies)) != AT_OK ||
        /* y: defined bytes (timing never reads it; checks poison it) */
        (rc = at_gpu_check(g, g->cu.cuMemsetD8Async_(s->yg.p, 0, (size_t)(M * N) * 2, g->stream),
                           "cuMemsetD8Async")) != AT_OK ||
        /* the scratch: its counters start at zero (atk.h), every call leaves them so */
        (rc = at_gpu_check(g, g->cu.cuMemsetD8Async_(s->scratch, 0, sbytes, g->stream), "cuMemsetD8Async")) !=
            AT_OK)
        return rc;
    s->xn = s->scratch + ATK_FUSED_COUNTER_BYTES;
    s->gu = s->xn + xnbytes;
    return at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "cuStreamSynchronize");
}

/* The SiLU-mul kernel over g|u (M rows of 2N) into y, launched as the
** runtime launches it (templates/baseline/silu_mul.cu). */
static int enqueue_silu(fused *s, CUdeviceptr y)
{
    int M = (int)s->M, N = (int)s->N, ld = 2 * N;
    CUdeviceptr u = s->gu + (CUdeviceptr)N * 2;
    at_op_kernel k = {.fn = s->fn[B_SILU],
                      .grid = {(unsigned)((N + 255) / 256), (unsigned)(M < 65535 ? M : 65535), 1},
                      .block = {256, 1, 1}};
    void *args[] = {&s->gu, &u, &y, &M, &N, &ld};
    return at_op_launch(s->g, &k, args);
}

/* Baseline 0: the op's own atk call on a context opened with ATK_UNFUSED:
** no fused entry loads, so the call runs the runtime's unfused sequence
** (atk_rmsnorm / atk_gemma_rmsnorm into scratch, atk_gemv over N, or once
** over 2N since Wu = Wg + N*K, then its SiLU-mul kernel), each step the
** kernel the cache holds for it (or the runtime's fallback): exactly what
** the runtime serves when "unfused" is the stored answer. */
static int enqueue_unfused(fused *s, CUdeviceptr W, CUdeviceptr Wu, CUdeviceptr nw, CUdeviceptr y)
{
    void *res = (void *)s->rg.p;
    atk_stream st = (atk_stream)s->g->stream;
    int dt = s->dtype == AT_FP16 ? ATK_FP16 : ATK_BF16, rc;
    const void *x = (const void *)s->x, *w = (const void *)nw, *wg = (const void *)W, *wu = (const void *)Wu;
    void *out = (void *)y, *sc = (void *)s->scratch;
    int64_t M = s->M, K = s->K, N = s->N;
    switch (s->atk_op) {
    case ATK_OP_RMSNORM_GEMV:
        rc = atk_rmsnorm_gemv(s->rt, st, dt, M, K, N, x, w, wg, out, s->eps, sc);
        break;
    case ATK_OP_GEMMA_RMSNORM_GEMV:
        rc = atk_gemma_rmsnorm_gemv(s->rt, st, dt, M, K, N, x, w, wg, out, s->eps, sc);
        break;
    case ATK_OP_GEMV_SWIGLU:
        rc = atk_gemv_swiglu(s->rt, st, dt, M, K, N, x, wg, wu, out, sc);
        break;
    case ATK_OP_RMSNORM_GEMV_SWIGLU:
        rc = atk_rmsnorm_gemv_swiglu(s->rt, st, dt, M, K, N, x, w, wg, wu, out, s->eps, sc);
        break;
    case ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU:
        rc = atk_gemma_rmsnorm_gemv_swiglu(s->rt, st, dt, M, K, N, x, w, wg, wu, out, s->eps, sc);
        break;
    case ATK_OP_ADD_RMSNORM_GEMV:
        rc = atk_add_rmsnorm_gemv(s->rt, st, dt, M, K, N, x, res, w, wg, out, s->eps, sc);
        break;
    default:
        rc = atk_add_gemma_rmsnorm_gemv(s->rt, st, dt, M, K, N, x, res, w, wg, out, s->eps, sc);
        break;
    }
    if (rc == ATK_OK)
        return AT_OK;
    return at_fail(rc == ATK_ERR_CUDA_STICKY ? AT_ERR_CUDA_STICKY : rc == ATK_ERR_USAGE ? AT_ERR_USAGE : AT_ERR_CUDA,
                   "atk: %s: %s", atk_op_name(s->atk_op), atk_errmsg(s->rt));
}

/* Baseline 1: the naive norm kernel (the add forms: its add_ form, the
** residual in place), cublasGemmEx, the SiLU-mul kernel. */
static int enqueue_naive(fused *s, CUdeviceptr W, CUdeviceptr nw, CUdeviceptr y)
{
    at_gpu *g = s->g;
    CUdeviceptr in = s->x, out = s->swiglu ? s->gu : y;
    int rc;
    if (s->norm) {
        CUdeviceptr res = s->rg.p; /* norm_naive's residual: 0 and unused by TP_OP 0 and 2 */
        int T = (int)s->M, H = (int)s->K;
        void *args[] = {&s->x, &res, &nw, &s->xn, &T, &H, &s->eps};
        at_op_kernel k = {.fn = s->fn[B_NAIVE], .grid = {(unsigned)T, 1, 1}, .block = {NAIVE_THREADS, 1, 1}};
        if ((rc = at_op_launch(g, &k, args)) != AT_OK)
            return rc;
        in = s->xn;
    }
    /* column-major: out^T[rows,M] = W[rows,K] . in^T[K,M] (see op_gemv.c) */
    const float one = 1.0f, zero = 0.0f;
    cudaDataType t = s->dtype == AT_FP16 ? CUDA_R_16F : CUDA_R_16BF;
    int R = (int)s->rows, M = (int)s->M, K = (int)s->K;
    if ((rc = at_gpu_check_blas(cublasGemmEx(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, R, M, K, &one, (const void *)W, t, K,
                                             (const void *)in, t, K, &zero, (void *)out, t, R, CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT),
                                "cublasGemmEx")) != AT_OK ||
        !s->swiglu)
        return rc;
    return enqueue_silu(s, y);
}

/* Copy `copy`'s weights, Wu and norm weight, then c on them into y. */
static int enqueue_on(fused *s, const at_contestant *c, int copy, CUdeviceptr y)
{
    CUdeviceptr W = s->base + (CUdeviceptr)(s->stride * (size_t)copy);
    CUdeviceptr Wu = s->swiglu ? W + (CUdeviceptr)((size_t)(s->N * s->K) * 2) : 0;
    CUdeviceptr nw = s->norm ? W + (CUdeviceptr)s->nwoff : 0; /* 0: a kernel that reads it faults */
    if (c->call) {
        at_op_call_args a = {.x = s->x, .W = W, .y = y, .residual = s->rg.p, .M = s->M, .K = s->K, .N = s->N,
                             .eps = s->eps, .Wu = Wu, .nw = nw, .scratch = s->scratch};
        return c->call(c->call_arg, &a);
    }
    if (c->baseline == 0)
        return enqueue_unfused(s, W, Wu, nw, y);
    if (c->baseline == 1)
        return enqueue_naive(s, W, nw, y);
    /* [FUSED_ARGS] the nine parameters of every fused kernel, whatever the
    ** op, then the add forms' two: the residual and the scratch's counters
    ** (a kernel without TP_RES reads nine) */
    int M = (int)s->M, K = (int)s->K, N = (int)s->N;
    float eps = s->eps;
    void *args[] = {&s->x, &W, &y, &M, &K, &N, &Wu, &nw, &eps, &s->rg.p, &s->scratch};
    return at_op_launch(s->g, &c->kernel, args);
}

static int fused_enqueue(void *state, const at_contestant *c, int copy)
{
    fused *s = state;
    return enqueue_on(s, c, copy, s->yg.p);
}

/* The add forms, after a check's run: the residual must hold z bit for bit
** and the counters must be back at zero (the next call counts from there).
** Appends what is wrong to out->reason; 1 when something is. */
static int res_verdict(const fused *s, at_op_check *out)
{
    size_t n = (size_t)(s->M * s->K), bad = 0, first = 0, cnt = 0;
    for (size_t i = 0; i < n; i++)
        if (s->hzr[i] != s->hz[i] && !bad++)
            first = i;
    for (size_t i = 0; i < ATK_FUSED_COUNTER_BYTES / sizeof(unsigned); i++)
        cnt += s->hcnt[i] != 0;
    size_t len = strlen(out->reason);
    if (bad)
        len += (size_t)snprintf(out->reason + len, sizeof out->reason - len,
                                "%sresidual: %zu of %zu values are not z = rne(x + residual) (first at %zu: 0x%04x, "
                                "want 0x%04x)",
                                len ? "; " : "", bad, n, first, s->hzr[first], s->hz[first]);
    if (cnt && len < sizeof out->reason)
        snprintf(out->reason + len, sizeof out->reason - len, "%s%zu counters left nonzero in the scratch",
                 len ? "; " : "", cnt);
    return bad || cnt;
}

/* Runs c once on copy 0 with y poisoned (0xFFFF: NaN in bf16 and fp16, so
** an unwritten output fails) and its guard zones armed (the add forms: the
** residual restored and its zones armed too); compares with the reference. */
static int fused_check(void *state, const at_contestant *c, at_op_check *out)
{
    fused *s = state;
    at_gpu *g = s->g;
    size_t n = (size_t)(s->M * s->N), nr = (size_t)(s->M * s->K) * 2;
    int rc;
    memset(out, 0, sizeof *out);
    /* the add forms: the residual restored, the counters zeroed (a wrong
    ** candidate before this one may have left them otherwise) */
    if (s->res &&
        ((rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->rg.p, s->hr, nr, g->stream), "cuMemcpyHtoDAsync")) !=
             AT_OK ||
         (rc = at_gpu_check(g, g->cu.cuMemsetD8Async_(s->scratch, 0, ATK_FUSED_COUNTER_BYTES, g->stream),
                            "cuMemsetD8Async")) != AT_OK ||
         (rc = at_guarded_arm(g, &s->rg)) != AT_OK))
        return rc;
    if ((rc = at_gpu_check(g, g->cu.cuMemsetD16Async_(s->yg.p, 0xFFFF, n, g->stream), "cuMemsetD16Async")) != AT_OK ||
        (rc = at_guarded_arm(g, &s->yg)) != AT_OK || (rc = enqueue_on(s, c, 0, s->yg.p)) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "kernel run")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyDtoHAsync_(s->hy, s->yg.p, n * 2, g->stream), "cuMemcpyDtoHAsync")) !=
            AT_OK ||
        (rc = at_guarded_fetch(g, &s->yg)) != AT_OK)
        return rc;
    if (s->res &&
        ((rc = at_gpu_check(g, g->cu.cuMemcpyDtoHAsync_(s->hzr, s->rg.p, nr, g->stream), "cuMemcpyDtoHAsync")) !=
             AT_OK ||
         (rc = at_gpu_check(g, g->cu.cuMemcpyDtoHAsync_(s->hcnt, s->scratch, ATK_FUSED_COUNTER_BYTES, g->stream),
                            "cuMemcpyDtoHAsync")) != AT_OK ||
         (rc = at_guarded_fetch(g, &s->rg)) != AT_OK))
        return rc;
    if ((rc = at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "cuStreamSynchronize")) != AT_OK)
        return rc;
    out->wrong = at_guarded_verdict(&s->yg, "output", out->reason, sizeof out->reason);
    if (s->res) {
        out->wrong |= at_guarded_verdict(&s->rg, "residual", out->reason, sizeof out->reason);
        out->wrong |= res_verdict(s, out);
    }
    at_op_verdict(out, s->dtype, s->hy, s->ref, n);
    return AT_OK;
}

/* The stored answer when no fused kernel beats baseline 0: "unfused", which
** the runtime serves with its own unfused sequence. [FUSED_UNFUSED] */
static int fused_baseline_winner(void *state, at_winner *w)
{
    (void)state;
    snprintf(w->strategy, sizeof w->strategy, "unfused");
    snprintf(w->params, sizeof w->params, "atk unfused sequence");
    return AT_OK;
}

static void fused_close(void *state)
{
    fused *s = state;
    if (!s)
        return;
    atk_close(s->rt);
    if (s->g) {
        for (int b = 0; b < NB; b++)
            if (s->mod[b])
                s->g->cu.cuModuleUnload_(s->mod[b]);
        at_gpu_free(s->g, s->x);
        at_gpu_free(s->g, s->base);
        at_gpu_free(s->g, s->scratch);
    }
    at_guarded_free(s->g, &s->yg); /* without a GPU: the host copy only */
    at_guarded_free(s->g, &s->rg);
    for (int b = 0; b < NB; b++)
        at_compile_job_clear(&s->jobs[b]);
    free(s->hx);
    free(s->hw);
    free(s->hW);
    free(s->hy);
    free(s->ref);
    free(s->hr);
    free(s->hz);
    free(s->hzr);
    free(s->hcnt);
    free(s);
}

#define FUSED_OP(var, opname, openfn, compfn, extra, eps)                                          \
    const at_op var = {                                                                            \
        .name = opname,                                                                            \
        .rank = 3,                                                                                 \
        .shape_form = "MxKxN",                                                                     \
        .max_copies = 4096,                                                                        \
        .copy_what = "weights",                                                                    \
        .extra_templates = extra,                                                                  \
        .check_baselines = 1, /* the runtime's sequence and ours, within the gate */               \
        .takes_eps = eps,                                                                          \
        .components = compfn,                                                                      \
        .open = openfn,                                                                            \
        .key_options = fused_key_options,                                                          \
        .copy_bytes = fused_copy_bytes,                                                            \
        .setup = fused_setup,                                                                      \
        .check = fused_check,                                                                      \
        .enqueue = fused_enqueue,                                                                  \
        .baseline_winner = fused_baseline_winner,                                                  \
        .close = fused_close,                                                                      \
    }

/* [FUSED_OPS] the seven ops: name, TP_NORM, TP_SWIGLU, TP_RES, the baseline
** templates hashed into the key; each gets its open and components. */
#define FUSED_OPS(X)                                                                               \
    X(rmsnorm_gemv, AT_FUSED_NORM_RMS, 0, 0, tpl_norm)                                             \
    X(gemma_rmsnorm_gemv, AT_FUSED_NORM_GEMMA, 0, 0, tpl_norm)                                     \
    X(gemv_swiglu, AT_FUSED_NORM_NONE, 1, 0, tpl_swiglu)                                           \
    X(rmsnorm_gemv_swiglu, AT_FUSED_NORM_RMS, 1, 0, tpl_both)                                      \
    X(gemma_rmsnorm_gemv_swiglu, AT_FUSED_NORM_GEMMA, 1, 0, tpl_both)                              \
    X(add_rmsnorm_gemv, AT_FUSED_NORM_RMS, 0, 1, tpl_norm)                                         \
    X(add_gemma_rmsnorm_gemv, AT_FUSED_NORM_GEMMA, 0, 1, tpl_norm)

#define FUSED_DEFINE(op, norm, swiglu, add, extra)                                                 \
    static int open_##op(const at_op_env *env, at_search_result *res, void **state)                \
    {                                                                                              \
        return open_op(env, res, state, norm, swiglu, add);                                        \
    }                                                                                              \
    static int comp_##op(const at_search_opts *o, at_op_component *out, int max)                   \
    {                                                                                              \
        return components(o, norm, swiglu, add, out, max);                                         \
    }                                                                                              \
    FUSED_OP(at_op_##op, #op, open_##op, comp_##op, extra, (norm) != AT_FUSED_NORM_NONE);
FUSED_OPS(FUSED_DEFINE)
