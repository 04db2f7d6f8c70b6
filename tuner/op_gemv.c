/*
** op_gemv.c — the GEMV op (y[M,N] = x[M,K] . W[N,K]^T, MxKxN) for the op
** table: random x and W, the fp64 reference, the weights rotated over
** copies (x and y stay put: in decode only the weights are cold), cuBLAS
** (cublasGemmEx, fp32 compute) as the one baseline. y has guard zones
** (op.h): a candidate writing before or past it is wrong (guard zones not
** yet run on a GPU).
*/
#include "op.h"
#include "verify.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct gemv {
    at_dtype dtype;
    int64_t M, K, N;
    at_gpu *g;
    CUdeviceptr x, y, wbase; /* wbase: one block holding every weight copy */
    at_guarded yg;           /* y with its guard zones: y = yg.p */
    CUdeviceptr *W;          /* the copies */
    int copies;
    uint16_t *hx, *hW, *hy;
    double *ref;
} gemv;

static int gemv_open(const at_op_env *env, at_search_result *res, void **state)
{
    gemv *s = calloc(1, sizeof *s);
    if (!s)
        return at_fail(AT_ERR_NOMEM, "out of memory");
    s->dtype = env->o->dtype;
    s->M = env->o->shape.M;
    s->K = env->o->shape.K;
    s->N = env->o->shape.N;
    res->nbaselines = 1;
    at_search_baseline *b = &res->baselines[0];
    snprintf(b->strategy, sizeof b->strategy, "cublas");
    snprintf(b->label, sizeof b->label, "cuBLAS");
    snprintf(b->what, sizeof b->what, "cublasGemmEx (fp32 compute)");
    snprintf(b->json_name, sizeof b->json_name, "cublasGemmEx");
    *state = s;
    return AT_OK;
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
    s->hx = malloc((size_t)(M * K) * 2);
    s->hW = malloc(wbytes);
    s->hy = malloc((size_t)(M * N) * 2);
    s->ref = malloc((size_t)(M * N) * sizeof(double));
    if (!s->hx || !s->hW || !s->hy || !s->ref)
        return at_fail(AT_ERR_NOMEM, "out of host memory for %lld x %lld weights", (long long)N,
                       (long long)K);
    /* fresh random inputs each run, never zeros */
    at_fill_random(s->dtype, s->hx, (size_t)(M * K), seed, 1.0f);
    at_fill_random(s->dtype, s->hW, (size_t)(N * K), seed * 31 + 7, 1.0f);
    if ((rc = at_ref_gemv(s->dtype, M, K, N, s->hx, s->hW, s->ref)) != AT_OK)
        return rc;
    size_t stride = (wbytes + 255) / 256 * 256;
    if (!(s->W = calloc((size_t)copies, sizeof *s->W)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    if ((rc = at_gpu_alloc(g, &s->x, (size_t)(M * K) * 2)) != AT_OK ||
        (rc = at_guarded_alloc(g, &s->yg, (size_t)(M * N) * 2)) != AT_OK ||
        (rc = at_gpu_alloc(g, &s->wbase, stride * (size_t)copies)) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->x, s->hx, (size_t)(M * K) * 2, g->stream),
                           "cuMemcpyHtoDAsync")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyHtoDAsync_(s->wbase, s->hW, wbytes, g->stream),
                           "cuMemcpyHtoDAsync")) != AT_OK)
        return rc;
    s->y = s->yg.p;
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
    if (c->call) {
        at_op_call_args a = {.x = x, .W = w, .y = y, .M = s->M, .K = s->K, .N = s->N};
        return c->call(c->call_arg, &a);
    }
    if (c->baseline >= 0) {
        /* cuBLAS is column-major: y^T[N,M] = W[N,K] . x^T[K,M], W stored as
        ** a K x N column-major matrix (lda = K), hence OP_T on it. */
        const float one = 1.0f, zero = 0.0f;
        cudaDataType t = s->dtype == AT_FP16 ? CUDA_R_16F : CUDA_R_16BF;
        return at_gpu_check_blas(cublasGemmEx(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one,
                                              (const void *)w, t, K, (const void *)x, t, K, &zero,
                                              (void *)y, t, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                                 "cublasGemmEx");
    }
    void *args[] = {&x, &w, &y, &M, &K, &N};
    return at_op_launch(g, &c->kernel, args);
}

/* Runs c once on poisoned output with armed guard zones and compares with
** the reference. */
static int gemv_check(void *state, const at_contestant *c, at_op_check *out)
{
    gemv *s = state;
    at_gpu *g = s->g;
    size_t n = (size_t)(s->M * s->N);
    double tol = at_dtype_tolerance(s->dtype);
    int rc;
    memset(out, 0, sizeof *out);
    /* poison: 0xFFFF is a NaN in bf16 and fp16, so an unwritten y fails */
    if ((rc = at_gpu_check(g, g->cu.cuMemsetD16Async_(s->y, 0xFFFF, n, g->stream), "cuMemsetD16Async")) != AT_OK ||
        (rc = at_guarded_arm(g, &s->yg)) != AT_OK || (rc = gemv_enqueue(s, c, 0)) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "kernel run")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuMemcpyDtoHAsync_(s->hy, s->y, n * 2, g->stream), "cuMemcpyDtoHAsync")) != AT_OK ||
        (rc = at_guarded_fetch(g, &s->yg)) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuStreamSynchronize_(g->stream), "cuStreamSynchronize")) != AT_OK)
        return rc;
    out->wrong = at_guarded_verdict(&s->yg, "output", out->reason, sizeof out->reason);
    out->err = at_rel_err(s->dtype, s->hy, s->ref, n, &out->nonfinite);
    if (out->nonfinite || !(out->err <= tol)) {
        size_t len = strlen(out->reason);
        out->wrong = 1;
        if (out->nonfinite)
            snprintf(out->reason + len, sizeof out->reason - len, "%s%zu outputs NaN/Inf (unwritten or overflow)",
                     len ? "; " : "", out->nonfinite);
        else
            snprintf(out->reason + len, sizeof out->reason - len, "%srel. error %.3g > %.0e", len ? "; " : "",
                     out->err, tol);
    }
    return AT_OK;
}

static int gemv_baseline_winner(void *state, at_winner *w)
{
    (void)state;
    snprintf(w->strategy, sizeof w->strategy, "cublas");
    snprintf(w->params, sizeof w->params, "cublasGemmEx");
    return AT_OK;
}

static void gemv_close(void *state)
{
    gemv *s = state;
    if (!s)
        return;
    if (s->g) {
        at_gpu_free(s->g, s->x);
        at_gpu_free(s->g, s->wbase);
    }
    at_guarded_free(s->g, &s->yg); /* without a GPU: the host copy only */
    free(s->W);
    free(s->hx);
    free(s->hW);
    free(s->hy);
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
