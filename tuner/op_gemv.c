/*
** op_gemv.c — the GEMV ops for the op table (MxKxN): gemv, y[M,N] = x[M,K]
** . W[N,K]^T, and gemv_add, residual[M,N] += x . W^T in place (the same
** templates with TP_ADD=1: residual = rne(residual + rne(acc))). Random x,
** W (and residual), the fp64 reference, the weights rotated over copies (x
** and y stay put: in decode only the weights are cold). gemv's one
** baseline is cuBLAS (cublasGemmEx, fp32 compute); gemv_add's are the
** unfused sequence an engine runs (cuBLAS into a scratch y, then
** baseline/norm_add.cu: the winner rule's yardstick) and cublasGemmEx with
** beta = 1 (cuBLAS's own fused form, the runtime's fallback). y (the
** residual) has guard zones (op.h): a candidate writing before or past it
** is wrong.
*/
#include "op.h"
#include "verify.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* gemv_add's add kernel (baseline 0's second half): residual = rne(y +
** residual), the add an engine runs after the GEMV. [GEMV_ADD_BASELINE] */
static const char *const add_templates[] = {"baseline/norm_add.cu", NULL};
#define ADD_KERNEL "norm_add"

typedef struct gemv {
    int add;                 /* gemv_add: y is the residual, updated in place */
    at_dtype dtype;
    int64_t M, K, N;
    at_templates *tpl;
    const char *cubin_dir;
    int arch, threads;
    at_gpu *g;
    CUdeviceptr x, y, wbase; /* wbase: one block holding every weight copy */
    CUdeviceptr tmp;         /* gemv_add: baseline 0's scratch y */
    at_guarded yg;           /* y with its guard zones: y = yg.p */
    CUdeviceptr *W;          /* the copies */
    int copies;
    uint16_t *hx, *hW, *hy, *hr; /* hr: gemv_add's residual as generated */
    double *ref;
    at_compile_job job; /* gemv_add: the add kernel */
    CUmodule mod;
    CUfunction addfn;
} gemv;

static int open_op(const at_op_env *env, at_search_result *res, void **state, int add)
{
    gemv *s = calloc(1, sizeof *s);
    if (!s)
        return at_fail(AT_ERR_NOMEM, "out of memory");
    *state = s;
    s->add = add;
    s->dtype = env->o->dtype;
    s->M = env->o->shape.M;
    s->K = env->o->shape.K;
    s->N = env->o->shape.N;
    s->tpl = env->tpl;
    s->cubin_dir = env->cubin_dir;
    s->arch = env->pb->arch;
    s->threads = env->o->threads;
    at_search_baseline *b = &res->baselines[0];
    if (!add) {
        res->nbaselines = 1;
        snprintf(b->strategy, sizeof b->strategy, "cublas");
        snprintf(b->label, sizeof b->label, "cuBLAS");
        snprintf(b->what, sizeof b->what, "cublasGemmEx (fp32 compute)");
        snprintf(b->json_name, sizeof b->json_name, "cublasGemmEx");
        return AT_OK;
    }
    /* the spec must build the add into every candidate: a TP_ADD=0 kernel
    ** would overwrite the residual and fail every check */
    at_candidate *c = NULL;
    int n = 0, rc;
    if ((rc = at_spec_expand(env->spec, env->pb, &c, &n)) != AT_OK)
        return rc;
    for (int i = 0; i < n && rc == AT_OK; i++)
        if (at_candidate_param(&c[i], "TP_ADD", 0) != 1)
            rc = at_fail(AT_ERR_SPEC, "%s: candidate %d of gemv_add has no TP_ADD=1 (the spec must set it for "
                                      "this op)",
                         env->o->spec_path, i);
    free(c);
    if (rc != AT_OK)
        return rc;
    res->nbaselines = 2;
    snprintf(b->strategy, sizeof b->strategy, "cublas");
    snprintf(b->label, sizeof b->label, "unfused");
    snprintf(b->what, sizeof b->what, "cublasGemmEx into y, then norm_add: residual = rne(y + residual)");
    snprintf(b->json_name, sizeof b->json_name, "cublasGemmEx+add");
    b = &res->baselines[1];
    snprintf(b->strategy, sizeof b->strategy, "cublas_beta1");
    snprintf(b->label, sizeof b->label, "cuBLAS b=1");
    snprintf(b->what, sizeof b->what, "cublasGemmEx with beta = 1 (one rounding: rne(acc + residual))");
    snprintf(b->json_name, sizeof b->json_name, "cublasGemmEx_beta1");
    return AT_OK;
}

static int gemv_open(const at_op_env *env, at_search_result *res, void **state)
{
    return open_op(env, res, state, 0);
}

static int gemv_add_open(const at_op_env *env, at_search_result *res, void **state)
{
    return open_op(env, res, state, 1);
}

/* Compiles (NVRTC, the compiled-kernel cache when there is one) and loads
** gemv_add's add kernel. */
static int compile_add(gemv *s)
{
    static const char *const entry[] = {ADD_KERNEL};
    s->job.name = add_templates[0];
    return at_op_compile_load(s->g, s->tpl, s->arch, s->dtype, s->cubin_dir, s->threads, &s->job, entry, 1, &s->mod,
                              &s->addfn);
}

static void gemv_key_options(void *state, char *buf, size_t len)
{
    (void)state;
    if (len)
        buf[0] = '\0';
}

static size_t gemv_copy_bytes(void *state)
{
    gemv *s = state;
    return (size_t)(s->N * s->K) * 2;
}

static int gemv_setup(void *state, at_gpu *g, int copies)
{
    gemv *s = state;
    int64_t M = s->M, K = s->K, N = s->N;
    size_t wbytes = (size_t)(N * K) * 2;
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    int rc;

    s->g = g;
    s->copies = copies;
    if (s->add && (rc = compile_add(s)) != AT_OK)
        return rc;
    s->hx = malloc((size_t)(M * K) * 2);
    s->hW = malloc(wbytes);
    s->hy = malloc((size_t)(M * N) * 2);
    s->ref = malloc((size_t)(M * N) * sizeof(double));
    if (s->add)
        s->hr = malloc((size_t)(M * N) * 2);
    if (!s->hx || !s->hW || !s->hy || !s->ref || (s->add && !s->hr))
        return at_fail(AT_ERR_NOMEM, "out of host memory for %lld x %lld weights", (long long)N,
                       (long long)K);
    /* fresh random inputs each run, never zeros */
    at_fill_random(s->dtype, s->hx, (size_t)(M * K), seed, 1.0f);
    at_fill_random(s->dtype, s->hW, (size_t)(N * K), seed * 31 + 7, 1.0f);
    if ((rc = at_ref_gemv(s->dtype, M, K, N, s->hx, s->hW, s->ref)) != AT_OK)
        return rc;
    if (s->add) { /* ref = rne(residual + rne(dot)), as the unfused GEMV + add rounds */
        at_fill_random(s->dtype, s->hr, (size_t)(M * N), seed * 17 + 3, 1.0f);
        at_ref_add(s->dtype, (size_t)(M * N), s->hr, s->ref);
    }
    size_t stride = (wbytes + 255) / 256 * 256;
    if (!(s->W = calloc((size_t)copies, sizeof *s->W)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    if ((rc = at_gpu_alloc(g, &s->x, (size_t)(M * K) * 2)) != AT_OK ||
        (rc = at_guarded_alloc(g, &s->yg, (size_t)(M * N) * 2)) != AT_OK ||
        (s->add && (rc = at_gpu_alloc(g, &s->tmp, (size_t)(M * N) * 2)) != AT_OK) ||
        (rc = at_gpu_alloc(g, &s->wbase, stride * (size_t)copies)) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->x, s->hx, (size_t)(M * K) * 2, g->stream),
                           "cuMemcpyHtoDAsync")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->wbase, s->hW, wbytes, g->stream),
                           "cuMemcpyHtoDAsync")) != AT_OK)
        return rc;
    s->y = s->yg.p;
    /* gemv_add: the residual starts as generated (each check restores it);
    ** while timed it drifts, since every replay adds into it, and may
    ** saturate (even to Inf in fp16): the kernels' time does not depend on
    ** the values, so timing runs on whatever it holds */
    if (s->add && (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->y, s->hr, (size_t)(M * N) * 2, g->stream),
                                     "cuMemcpyHtoDAsync")) != AT_OK)
        return rc;
    for (int i = 0; i < copies; i++) {
        s->W[i] = s->wbase + (CUdeviceptr)(stride * (size_t)i);
        if (i > 0 && (rc = at_gpu_check(g, g->cu.cuMemcpyDtoDAsync_(s->W[i], s->wbase, wbytes, g->stream),
                                        "cuMemcpyDtoDAsync")) != AT_OK)
            return rc;
    }
    return at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "cuStreamSynchronize");
}

static int gemv_enqueue(void *state, const at_contestant *c, int copy)
{
    gemv *s = state;
    at_gpu *g = s->g;
    CUdeviceptr x = s->x, w = s->W[copy], y = s->y;
    int M = (int)s->M, K = (int)s->K, N = (int)s->N;
    if (c->call) { /* gemv_add: y is the residual, read and written */
        at_op_call_args a = {.x = x, .W = w, .y = y, .residual = s->add ? y : 0, .M = s->M, .K = s->K, .N = s->N};
        return c->call(c->call_arg, &a);
    }
    if (c->baseline >= 0) {
        /* cuBLAS is column-major: y^T[N,M] = W[N,K] . x^T[K,M], W stored as
        ** a K x N column-major matrix (lda = K), hence OP_T on it.
        ** gemv_add: baseline 0 writes a scratch y that the add kernel adds
        ** into the residual; baseline 1 adds in cuBLAS (beta = 1). */
        const float one = 1.0f, zero = 0.0f;
        cudaDataType t = s->dtype == AT_FP16 ? CUDA_R_16F : CUDA_R_16BF;
        CUdeviceptr out = s->add && c->baseline == 0 ? s->tmp : y;
        int rc = at_gpu_check_blas(cublasGemmEx(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, (const void *)w,
                                                t, K, (const void *)x, t, K, s->add && c->baseline == 1 ? &one : &zero,
                                                (void *)out, t, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                                   "cublasGemmEx");
        if (rc != AT_OK || !s->add || c->baseline != 0)
            return rc;
        long long n = (long long)(s->M * s->N);
        at_op_kernel k = {.fn = s->addfn,
                          .grid = {(unsigned)((n + AT_ELTWISE_PER_BLOCK - 1) / AT_ELTWISE_PER_BLOCK), 1, 1},
                          .block = {AT_ELTWISE_THREADS, 1, 1}};
        void *args[] = {&out, &y, &n};
        return at_op_launch(g, &k, args);
    }
    void *args[] = {&x, &w, &y, &M, &K, &N};
    return at_op_launch(g, &c->kernel, args);
}

/* Runs c once on poisoned output (gemv) or the restored residual
** (gemv_add) with armed guard zones and compares with the reference. */
static int gemv_check(void *state, const at_contestant *c, at_op_check *out)
{
    gemv *s = state;
    at_gpu *g = s->g;
    size_t n = (size_t)(s->M * s->N);
    int rc;
    memset(out, 0, sizeof *out);
    /* poison: 0xFFFF is a NaN in bf16 and fp16, so an unwritten y fails;
    ** gemv_add's y is an input (in place): restored instead, an unwritten
    ** one then misses the dot products and fails the error bound */
    if ((rc = s->add ? at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->y, s->hr, n * 2, g->stream), "cuMemcpyHtoDAsync")
                     : at_gpu_check(g, g->cu.cuMemsetD16Async_(s->y, 0xFFFF, n, g->stream), "cuMemsetD16Async")) !=
            AT_OK ||
        (rc = at_guarded_arm(g, &s->yg)) != AT_OK || (rc = gemv_enqueue(s, c, 0)) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "kernel run")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyDtoHAsync_(s->hy, s->y, n * 2, g->stream), "cuMemcpyDtoHAsync")) != AT_OK ||
        (rc = at_guarded_fetch(g, &s->yg)) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "cuStreamSynchronize")) != AT_OK)
        return rc;
    out->wrong = at_guarded_verdict(&s->yg, s->add ? "residual" : "output", out->reason, sizeof out->reason);
    at_op_verdict(out, s->dtype, s->hy, s->ref, n);
    return AT_OK;
}

/* The stored answer when no kernel beats baseline 0: "cublas", which the
** runtime serves with its fallback (gemv_add: cublasGemmEx with beta = 1,
** one call, no scratch). */
static int gemv_baseline_winner(void *state, at_winner *w)
{
    gemv *s = state;
    snprintf(w->strategy, sizeof w->strategy, "cublas");
    snprintf(w->params, sizeof w->params, "%s", s->add ? "cublasGemmEx beta=1" : "cublasGemmEx");
    return AT_OK;
}

static void gemv_close(void *state)
{
    gemv *s = state;
    if (!s)
        return;
    if (s->g) {
        if (s->mod)
            s->g->cu.cuModuleUnload_(s->mod);
        at_gpu_free(s->g, s->x);
        at_gpu_free(s->g, s->wbase);
        at_gpu_free(s->g, s->tmp);
    }
    at_compile_job_clear(&s->job);
    at_guarded_free(s->g, &s->yg); /* without a GPU: the host copy only */
    free(s->W);
    free(s->hx);
    free(s->hW);
    free(s->hy);
    free(s->hr);
    free(s->ref);
    free(s);
}

const at_op at_op_gemv = {
    .name = "gemv",
    .rank = 3,
    .shape_form = "MxKxN",
    .max_copies = 4096,
    .copy_what = "weights",
    .extra_templates = NULL,
    .check_baselines = 0, /* cuBLAS is the yardstick, not checked */
    .open = gemv_open,
    .key_options = gemv_key_options,
    .copy_bytes = gemv_copy_bytes,
    .setup = gemv_setup,
    .check = gemv_check,
    .enqueue = gemv_enqueue,
    .baseline_winner = gemv_baseline_winner,
    .close = gemv_close,
};

const at_op at_op_gemv_add = {
    .name = "gemv_add",
    .rank = 3,
    .shape_form = "MxKxN",
    .max_copies = 4096,
    .copy_what = "weights",
    .extra_templates = add_templates,
    .check_baselines = 1, /* our add kernel, and cuBLAS's beta = 1 rounding, within the gate */
    .open = gemv_add_open,
    .key_options = gemv_key_options,
    .copy_bytes = gemv_copy_bytes,
    .setup = gemv_setup,
    .check = gemv_check,
    .enqueue = gemv_enqueue,
    .baseline_winner = gemv_baseline_winner,
    .close = gemv_close,
};
