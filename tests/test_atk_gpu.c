/*
** test_atk_gpu.c — the runtime library on a GPU (label gpu; skips visibly
** without one). A cache is made here with real cubins (NVRTC, the tuner's
** templates, chosen parameters), then atk_* results are compared with the
** fp64 reference for tuned, inferred and fallback paths of the GEMV and the
** norms; a cubin that does not load is rebuilt from ATK_TEMPLATES; a CUDA
** graph captured through atk replays to the same bits; eight threads
** dispatch at once on their own streams; every bucket kernel at every
** M = 1..17 on K, N no suite lists; the fused decode ops (tuned kernel,
** unfused sequence, fallback) against fp64.
*/
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "atk.h"
#include "autotune.h"
#include "gpu.h"
#include "norm_ref.h"
#include "verify.h"
#include "tinytest.h"
#include "gpu_isolated.h"

#include <dlfcn.h>

static char db_path[128];

/* ------------------------------------------------------------ the cache */

#define GEMV_PARAMS(pdl) "TP_WARPS=8 TP_WPR=4 TP_ROWS=2 TP_VEC=8 TP_UNROLL=2 TP_CACHE=1 TP_PDL=" pdl
#define NORM_PARAMS "TP_THREADS=256 TP_OP=0 TP_WFP32=0 TP_VEC=8 TP_REGS=1 TP_ITEMS=1 TP_PDL=0"
#define ADD_PARAMS "TP_THREADS_PER_ROW=32 TP_ROWS_PER_BLOCK=4 TP_OP=1 TP_WFP32=0 TP_VEC=8 TP_REGS=1 TP_ITEMS=8 TP_PDL=0"
#define SPLIT_PARAMS "TP_SPLIT=4 TP_THREADS=128 TP_OP=3 TP_WFP32=0 TP_VEC=8 TP_REGS=1 TP_ITEMS=1 TP_PDL=0"

static at_key key_for(const at_device_info *d, const char *op, const char *shape)
{
    at_key k;
    memset(&k, 0, sizeof k);
    snprintf(k.op, sizeof k.op, "%s", op);
    k.dtype = AT_BF16;
    snprintf(k.shape, sizeof k.shape, "%s", shape);
    snprintf(k.device, sizeof k.device, "%s", d->name);
    k.cc = 10 * d->cc_major + d->cc_minor;
    k.sms = d->sms;
    k.driver_version = d->driver_version;
    k.nvrtc_version = at_nvrtc_version();
    at_sha256_hex("test", 4, k.space_sha);
    at_nvrtc_common_options(AT_BF16, k.cc, k.options, sizeof k.options);
    strcpy(k.tuner_version, AT_TUNER_VERSION);
    return k;
}

/* Compiles template `tpl` with params for the present GPU and stores it as
** the winner of op/shape; `garbage` stores bytes that do not load instead
** (with their true sha256), so atk must rebuild them. */
static int put_compiled(at_cache *c, at_templates *t, const at_device_info *d, const char *op, const char *shape,
                        const char *tpl, const char *kernel, const char *params, const unsigned grid[3],
                        unsigned block, unsigned smem, int garbage)
{
    at_compile_job job;
    const char *src = NULL;
    memset(&job, 0, sizeof job);
    if (at_templates_source(t, tpl, &src) != AT_OK)
        return -1;
    job.tpl = t;
    job.name = tpl;
    job.source = src;
    job.arch = 10 * d->cc_major + d->cc_minor;
    job.dtype = AT_BF16;
    size_t pos = 0;
    for (const char *p = params; *p;) {
        size_t n = strcspn(p, " ");
        pos += (size_t)snprintf(job.options + pos, sizeof job.options - pos, "%s-D%.*s", pos ? " " : "", (int)n, p);
        p += n;
        while (*p == ' ')
            p++;
    }
    if (at_nvrtc_compile(&job) != AT_OK || !job.ok) {
        fprintf(stderr, "  %s does not compile: %s\n", tpl, job.log ? job.log : at_errmsg());
        at_compile_job_clear(&job);
        return -1;
    }
    at_winner w;
    memset(&w, 0, sizeof w);
    snprintf(w.strategy, sizeof w.strategy, "%s", kernel + strcspn(kernel, "_") + 1);
    snprintf(w.kernel, sizeof w.kernel, "%s", kernel);
    snprintf(w.template_name, sizeof w.template_name, "%s", tpl);
    snprintf(w.params, sizeof w.params, "%s", params);
    w.us = 1.0;
    w.baseline_us = 2.0;
    w.speedup = 2.0;
    memcpy(w.grid, grid, sizeof w.grid);
    w.block[0] = block, w.block[1] = w.block[2] = 1;
    w.smem = smem;
    static unsigned char junk[256];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 31 + 7);
    w.cubin = garbage ? junk : job.cubin;
    w.cubin_size = garbage ? sizeof junk : job.cubin_size;
    at_key k = key_for(d, op, shape);
    int rc = at_cache_put_winner(c, &k, &w);
    at_compile_job_clear(&job);
    return rc == AT_OK ? 0 : -1;
}

/* gemv 1x2048x2048 (splitk, PDL on sm_90+), gemv 1x1024x512 (a cubin that
** does not load), rmsnorm 4x2048 (block_row), add_rmsnorm 4x2048 (warp_rows),
** and on sm_90+ add_gemma_rmsnorm 2x4096 (split_row: a thread-block cluster
** per row; the tuner itself never launches a norm, so this is its first run). */
static int build_cache(at_gpu *g)
{
    at_cache *c = NULL;
    at_templates *t = NULL;
    const at_device_info *d = &g->info;
    int rc = -1, pdl = d->cc_major >= 9;
    unlink(db_path);
    if (at_cache_open(db_path, &c) != AT_OK || at_templates_open("templates", &t) != AT_OK)
        goto done;
    const unsigned g1[3] = {2048 / 4, 1, 1}, g2[3] = {512 / 4, 1, 1}, g3[3] = {4, 1, 1}, g4[3] = {1, 1, 1};
    if (put_compiled(c, t, d, "gemv", "1x2048x2048", "gemv/gemv_splitk.cu", "gemv_splitk",
                     pdl ? GEMV_PARAMS("1") : GEMV_PARAMS("0"), g1, 256, 0, 0) ||
        put_compiled(c, t, d, "gemv", "1x1024x512", "gemv/gemv_splitk.cu", "gemv_splitk", GEMV_PARAMS("0"), g2, 256,
                     0, 1) ||
        put_compiled(c, t, d, "rmsnorm", "4x2048", "norm/norm_block_row.cu", "norm_block_row", NORM_PARAMS, g3, 256,
                     0, 0) ||
        put_compiled(c, t, d, "add_rmsnorm", "4x2048", "norm/norm_warp_rows.cu", "norm_warp_rows", ADD_PARAMS, g4,
                     128, 0, 0))
        goto done;
    const unsigned g5[3] = {4, 2, 1};
    if (pdl && put_compiled(c, t, d, "add_gemma_rmsnorm", "2x4096", "norm/norm_split_row.cu", "norm_split_row",
                            SPLIT_PARAMS, g5, 128, 0, 0))
        goto done;
    rc = 0;
done:
    at_templates_free(t);
    at_cache_close(c);
    return rc;
}

/* A GPU (tuner's helper: primary context current, a stream) and the cache. */
static at_gpu *setup(atk_ctx **ctx)
{
    at_gpu *g = NULL;
    *ctx = NULL;
    if (at_gpu_open(0, 0, &g) != AT_OK) {
        fprintf(stderr, "  %s\n", at_errmsg());
        return NULL;
    }
    CHECK_EQ_INT(build_cache(g), 0);
    setenv("ATK_TEMPLATES", "templates", 1);
    int rc = atk_open(db_path, 0, 0, ctx);
    CHECK_EQ_INT(rc, ATK_OK);
    if (rc != ATK_OK)
        fprintf(stderr, "  atk_open: %s\n", atk_errmsg(NULL));
    else
        printf("%s", atk_report(*ctx));
    return g;
}

/* ------------------------------------------------------------ buffers */

typedef struct buf {
    CUdeviceptr d;
    uint16_t *h;
    size_t n;
} buf;

static int buf_new(at_gpu *g, buf *b, size_t n, uint64_t seed)
{
    b->n = n;
    b->h = malloc(n * sizeof *b->h);
    if (!b->h || at_gpu_alloc(g, &b->d, n * 2) != AT_OK)
        return -1;
    at_fill_random(AT_BF16, b->h, n, seed, 1.0f);
    g->cu.cuMemcpyHtoDAsync_(b->d, b->h, n * 2, g->stream);
    return g->cu.cuStreamSynchronize_(g->stream) == CUDA_SUCCESS ? 0 : -1;
}

static void buf_get(at_gpu *g, buf *b)
{
    g->cu.cuMemcpyDtoHAsync_(b->h, b->d, b->n * 2, g->stream);
    g->cu.cuStreamSynchronize_(g->stream);
}

static void buf_free(at_gpu *g, buf *b)
{
    at_gpu_free(g, b->d);
    free(b->h);
}

/* ||y - ref|| / ||ref|| for y of bf16 bits. */
static double rel_err(const uint16_t *y, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double v = at_bf16_to_f32(y[i]), e = v - ref[i];
        if (v != v)
            return INFINITY;
        num += e * e;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* y = atk_gemv(x, W) for MxKxN against fp64, on the expected path; with
** `shift`, x starts one element into its buffer (2-byte aligned only), so a
** kernel with 16-byte loads must not serve it: atk falls back. */
static void check_gemv_at(at_gpu *g, atk_ctx *ctx, int M, int K, int N, int want_path, int shift)
{
    buf x, W, y;
    atk_choice ch;
    atk_op_stats before, after;
    CHECK_EQ_INT(atk_explain(ctx, ATK_OP_GEMV, ATK_BF16, M, K, N, &ch), ATK_OK);
    CHECK_EQ_INT(ch.path, want_path);
    atk_stats(ctx, ATK_OP_GEMV, &before);
    if (buf_new(g, &x, (size_t)M * (size_t)K + 1, 1) || buf_new(g, &W, (size_t)N * (size_t)K, 2) || buf_new(g, &y, (size_t)M * (size_t)N, 3)) {
        CHECK(0);
        return;
    }
    g->cu.cuMemsetD16Async_(y.d, 0x7fc0, y.n, g->stream); /* NaN poison */
    CHECK_EQ_INT(atk_gemv(ctx, (atk_stream)g->stream, ATK_BF16, M, K, N, (void *)(x.d + 2u * (unsigned)shift),
                          (void *)W.d, (void *)y.d),
                 ATK_OK);
    buf_get(g, &y);
    atk_stats(ctx, ATK_OP_GEMV, &after);
    if (shift)
        CHECK_EQ_INT(after.fallback, before.fallback + 1);
    double *ref = malloc((size_t)M * (size_t)N * sizeof *ref);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (double)at_bf16_to_f32(x.h[(size_t)m * (size_t)K + (size_t)k + (size_t)shift]) * at_bf16_to_f32(W.h[(size_t)n * (size_t)K + (size_t)k]);
            ref[(size_t)m * (size_t)N + (size_t)n] = s;
        }
    double err = rel_err(y.h, ref, y.n);
    printf("  gemv %dx%dx%d path %d (%s %s) rel err %.2e\n", M, K, N, ch.path, ch.strategy, ch.params, err);
    CHECK(err <= 1e-2);
    free(ref);
    buf_free(g, &x);
    buf_free(g, &W);
    buf_free(g, &y);
}

static void check_gemv(at_gpu *g, atk_ctx *ctx, int M, int K, int N, int want_path)
{
    check_gemv_at(g, ctx, M, K, N, want_path, 0);
}

static void check_norm(at_gpu *g, atk_ctx *ctx, int op, int T, int H, int want_path)
{
    static const at_norm_op ref_op[ATK_NOPS] = {0, AT_NORM_RMSNORM, AT_NORM_ADD_RMSNORM, AT_NORM_GEMMA_RMSNORM,
                                                AT_NORM_ADD_GEMMA_RMSNORM};
    int add = op == ATK_OP_ADD_RMSNORM || op == ATK_OP_ADD_GEMMA_RMSNORM;
    buf x, r, w, y;
    atk_choice ch;
    const float eps = 1e-6f;
    CHECK_EQ_INT(atk_explain(ctx, op, ATK_BF16, T, H, 0, &ch), ATK_OK);
    CHECK_EQ_INT(ch.path, want_path);
    if (buf_new(g, &x, (size_t)T * (size_t)H, 4) || buf_new(g, &r, (size_t)T * (size_t)H, 5) || buf_new(g, &w, (size_t)H, 6) ||
        buf_new(g, &y, (size_t)T * (size_t)H, 7)) {
        CHECK(0);
        return;
    }
    double *ref = malloc((size_t)T * (size_t)H * sizeof *ref);
    uint16_t *z = malloc((size_t)T * (size_t)H * 2);
    CHECK_EQ_INT(at_norm_ref_run(ref_op[op], AT_BF16, T, H, x.h, add ? r.h : NULL, w.h, 0, eps, ref, add ? z : NULL),
                 AT_OK);
    int rc;
    atk_stream s = (atk_stream)g->stream;
    void *px = (void *)x.d, *pr = (void *)r.d, *pw = (void *)w.d, *py = (void *)y.d;
    switch (op) {
    case ATK_OP_RMSNORM: rc = atk_rmsnorm(ctx, s, ATK_BF16, T, H, px, pw, py, eps); break;
    case ATK_OP_ADD_RMSNORM: rc = atk_add_rmsnorm(ctx, s, ATK_BF16, T, H, px, pr, pw, py, eps); break;
    case ATK_OP_GEMMA_RMSNORM: rc = atk_gemma_rmsnorm(ctx, s, ATK_BF16, T, H, px, pw, py, eps); break;
    default: rc = atk_add_gemma_rmsnorm(ctx, s, ATK_BF16, T, H, px, pr, pw, py, eps); break;
    }
    CHECK_EQ_INT(rc, ATK_OK);
    buf_get(g, &y);
    double err = rel_err(y.h, ref, y.n);
    printf("  %s %dx%d path %d (%s) rel err %.2e\n", atk_op_name(op), T, H, ch.path, ch.kernel, err);
    CHECK(err <= 1e-2);
    if (add) { /* z is bit-exact */
        buf_get(g, &r);
        CHECK(memcmp(r.h, z, r.n * 2) == 0);
    }
    free(ref);
    free(z);
    buf_free(g, &x);
    buf_free(g, &r);
    buf_free(g, &w);
    buf_free(g, &y);
}

/* ---------------------------------------------------------------- tests */

static void results_equal_reference(void)
{
    atk_ctx *ctx;
    if (!gpu_present())
        TT_SKIP("no GPU");
    at_gpu *g = setup(&ctx);
    if (!g || !ctx) {
        CHECK(0);
        return;
    }
    atk_info in;
    atk_get_info(ctx, &in);
    const int sm90 = in.cc >= 90;
    CHECK_EQ_INT(in.loaded, sm90 ? 5 : 4);
    CHECK_EQ_INT(in.recompiled, 1); /* 1x1024x512's cubin did not load */
    check_gemv(g, ctx, 1, 2048, 2048, ATK_PATH_TUNED);
    check_gemv(g, ctx, 1, 1024, 512, ATK_PATH_TUNED);  /* the rebuilt cubin */
    check_gemv(g, ctx, 1, 2048, 1000, ATK_PATH_INFERRED);
    check_gemv(g, ctx, 3, 2048, 777, ATK_PATH_FALLBACK); /* an M=1 kernel never serves M > 1 */
    check_gemv(g, ctx, 2, 2050, 300, ATK_PATH_FALLBACK); /* K % 8: cuBLAS */
    check_gemv_at(g, ctx, 1, 2048, 2048, ATK_PATH_TUNED, 1); /* misaligned x: cuBLAS */
    check_norm(g, ctx, ATK_OP_RMSNORM, 4, 2048, ATK_PATH_TUNED);
    check_norm(g, ctx, ATK_OP_RMSNORM, 3, 4096, ATK_PATH_INFERRED); /* re-read path: 2 vectors per thread */
    check_norm(g, ctx, ATK_OP_RMSNORM, 7, 4096, ATK_PATH_FALLBACK);  /* above the largest tuned T */
    check_norm(g, ctx, ATK_OP_RMSNORM, 3, 1030, ATK_PATH_FALLBACK); /* H % 8: naive */
    check_norm(g, ctx, ATK_OP_ADD_RMSNORM, 4, 2048, ATK_PATH_TUNED);
    check_norm(g, ctx, ATK_OP_ADD_RMSNORM, 3, 2048, ATK_PATH_BUCKET); /* T=4's kernel, one row masked */
    check_norm(g, ctx, ATK_OP_ADD_RMSNORM, 9, 2048, ATK_PATH_FALLBACK);
    check_norm(g, ctx, ATK_OP_GEMMA_RMSNORM, 2, 2048, ATK_PATH_FALLBACK);
    check_norm(g, ctx, ATK_OP_ADD_GEMMA_RMSNORM, 2, 2050, ATK_PATH_FALLBACK);
    if (sm90) { /* split_row, tuned and inferred (a row of 256 vectors over 4 blocks of 128 threads) */
        check_norm(g, ctx, ATK_OP_ADD_GEMMA_RMSNORM, 2, 4096, ATK_PATH_TUNED);
        check_norm(g, ctx, ATK_OP_ADD_GEMMA_RMSNORM, 2, 2048, ATK_PATH_INFERRED);
        check_norm(g, ctx, ATK_OP_ADD_GEMMA_RMSNORM, 3, 2048, ATK_PATH_FALLBACK); /* above T=2, the only tuned T */
    }
    atk_op_stats s;
    atk_stats(ctx, ATK_OP_GEMV, &s);
    CHECK(s.calls == 6 && s.tuned == 2 && s.inferred == 1 && s.fallback == 3);
    atk_close(ctx);
    at_gpu_close(g);
}

/* A step captured through atk replays to the same bits as eager calls, on
** the stream it was warmed up on and on a stream first seen in a capture. */
static void graph_capture(void)
{
    atk_ctx *ctx;
    if (!gpu_present())
        TT_SKIP("no GPU");
    at_gpu *g = setup(&ctx);
    if (!g || !ctx) {
        CHECK(0);
        return;
    }
    buf x, W, y, y2, w, h;
    CHECK(!buf_new(g, &x, 2048, 11) && !buf_new(g, &W, 2048 * 2048, 12) && !buf_new(g, &y, 2048, 13) &&
          !buf_new(g, &y2, 2048, 14) && !buf_new(g, &w, 2048, 15) && !buf_new(g, &h, 300, 16));
    atk_stream s = (atk_stream)g->stream;
    void *px = (void *)x.d, *pW = (void *)W.d, *py = (void *)y.d, *py2 = (void *)y2.d, *pw = (void *)w.d,
         *ph = (void *)h.d;
    /* tuned GEMV -> y, norm (inferred: T=1) -> y2, GEMV fallback (cuBLAS, K
    ** 2046) -> h, norm fallback (gemma) -> y[0..300) */
#define STEP()                                                                                               \
    (atk_gemv(ctx, s, ATK_BF16, 1, 2048, 2048, px, pW, py) | atk_rmsnorm(ctx, s, ATK_BF16, 1, 2048, py, pw, py2, 1e-6f) | \
     atk_gemv(ctx, s, ATK_BF16, 1, 2046, 300, py2, pW, ph) | atk_gemma_rmsnorm(ctx, s, ATK_BF16, 1, 300, ph, pw, py, 1e-6f))
    CHECK_EQ_INT(STEP(), ATK_OK);
    buf_get(g, &y);
    uint16_t eager[300];
    memcpy(eager, y.h, sizeof eager);
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CHECK_EQ_INT(g->cu.cuStreamBeginCapture_(g->stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_EQ_INT(STEP(), ATK_OK);
    CHECK_EQ_INT(g->cu.cuStreamEndCapture_(g->stream, &graph), CUDA_SUCCESS);
    CHECK_EQ_INT(g->cu.cuGraphInstantiate_(&exec, graph, 0), CUDA_SUCCESS);
    g->cu.cuMemsetD16Async_(y.d, 0x7fc0, 2048, g->stream);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(g->cu.cuGraphLaunch_(exec, g->stream), CUDA_SUCCESS);
    buf_get(g, &y);
    CHECK(memcmp(y.h, eager, sizeof eager) == 0); /* the last op's output, through all four */
    /* a stream atk has never served, captured at once: a cuBLAS handle is
    ** bound to it and its first cublasSetStream / cublasSetWorkspace run
    ** inside the capture (cuBLAS itself was warmed up by the eager step) */
    CUstream s2 = NULL;
    CUgraph graph2 = NULL;
    CUgraphExec exec2 = NULL;
    CHECK_EQ_INT(g->cu.cuStreamCreate_(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    s = (atk_stream)s2;
    CHECK_EQ_INT(g->cu.cuStreamBeginCapture_(s2, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_EQ_INT(STEP(), ATK_OK);
    CHECK_EQ_INT(g->cu.cuStreamEndCapture_(s2, &graph2), CUDA_SUCCESS);
    CHECK_EQ_INT(g->cu.cuGraphInstantiate_(&exec2, graph2, 0), CUDA_SUCCESS);
    g->cu.cuMemsetD16Async_(y.d, 0x7fc0, 2048, g->stream);
    CHECK_EQ_INT(g->cu.cuStreamSynchronize_(g->stream), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(g->cu.cuGraphLaunch_(exec2, s2), CUDA_SUCCESS);
    CHECK_EQ_INT(g->cu.cuStreamSynchronize_(s2), CUDA_SUCCESS);
    buf_get(g, &y);
    CHECK(memcmp(y.h, eager, sizeof eager) == 0);
#undef STEP
    if (exec2)
        g->cu.cuGraphExecDestroy_(exec2);
    if (graph2)
        g->cu.cuGraphDestroy_(graph2);
    if (s2)
        g->cu.cuStreamDestroy_(s2);
    if (exec)
        g->cu.cuGraphExecDestroy_(exec);
    if (graph)
        g->cu.cuGraphDestroy_(graph);
    buf_free(g, &x), buf_free(g, &W), buf_free(g, &y), buf_free(g, &y2), buf_free(g, &w), buf_free(g, &h);
    atk_close(ctx);
    at_gpu_close(g);
}

typedef struct worker {
    at_gpu *g;
    atk_ctx *ctx;
    CUdeviceptr x, W, y;
    int id, errors;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    CUstream s = NULL;
    /* creating the stream needs the context current; then the odd threads
    ** drop it, so atk must push its own context (and pop it) on every call */
    if (w->g->cu.cuCtxSetCurrent_(w->g->ctx) != CUDA_SUCCESS ||
        w->g->cu.cuStreamCreate_(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        w->errors++;
        return NULL;
    }
    if (w->id % 2 && w->g->cu.cuCtxSetCurrent_(NULL) != CUDA_SUCCESS)
        w->errors++;
    CUdeviceptr y = w->y + (CUdeviceptr)w->id * 2048 * 2;
    for (int r = 0; r < 200; r++) {
        int N = r % 3 == 0 ? 2048 : r % 3 == 1 ? 1000 : 300; /* tuned, inferred, cuBLAS (K=2046) */
        int K = r % 3 == 2 ? 2046 : 2048;
        if (atk_gemv(w->ctx, (atk_stream)s, ATK_BF16, 1, K, N, (void *)w->x, (void *)w->W, (void *)y) != ATK_OK)
            w->errors++;
    }
    if ((w->id % 2 && w->g->cu.cuCtxSetCurrent_(w->g->ctx) != CUDA_SUCCESS) ||
        w->g->cu.cuStreamSynchronize_(s) != CUDA_SUCCESS)
        w->errors++;
    w->g->cu.cuStreamDestroy_(s);
    return NULL;
}

static void many_threads(void)
{
    atk_ctx *ctx;
    if (!gpu_present())
        TT_SKIP("no GPU");
    at_gpu *g = setup(&ctx);
    if (!g || !ctx) {
        CHECK(0);
        return;
    }
    buf x, W, y;
    CHECK(!buf_new(g, &x, 2048, 21) && !buf_new(g, &W, 2048 * 2048, 22) && !buf_new(g, &y, 8 * 2048, 23));
    pthread_t t[8];
    worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (worker){.g = g, .ctx = ctx, .x = x.d, .W = W.d, .y = y.d, .id = i};
        CHECK_EQ_INT(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ_INT(w[i].errors, 0);
    }
    /* every thread's last call was r = 199: N = 1000 (inferred), same inputs */
    buf_get(g, &y);
    for (int i = 1; i < 8; i++)
        CHECK(memcmp(y.h, y.h + (size_t)i * 2048, 1000 * 2) == 0);
    atk_op_stats s;
    atk_stats(ctx, ATK_OP_GEMV, &s);
    CHECK(s.calls == 1600 && s.tuned + s.inferred + s.fallback == 1600);
    buf_free(g, &x), buf_free(g, &W), buf_free(g, &y);
    atk_close(ctx);
    at_gpu_close(g);
}

/* ------------------------------------------------------------ buckets */

static char bucket_db[128];

/* Stores, as the winner of op at `shape`, the first live candidate of the
** real spec whose strategy is one of prefer[] (in that order), compiled for
** this GPU; its strategy into *chosen. 0 when stored. */
static int put_live(at_cache *c, at_templates *t, const at_device_info *d, const char *op, const char *shape,
                    const char *const *prefer, char *chosen, size_t len)
{
    char path[64], params[256];
    at_spec *spec = NULL;
    at_candidate *cand = NULL;
    int n = 0, rc = -1;
    at_problem pb = {.op = op, .dtype = AT_BF16, .arch = 10 * d->cc_major + d->cc_minor, .sms = d->sms};
    at_spec_default_path(".", op, path, sizeof path);
    if (at_shape_parse(shape, strcmp(op, "gemv") ? 2 : 3, &pb.shape) != AT_OK ||
        at_spec_load_op(path, op, &spec) != AT_OK ||
        at_spec_expand(spec, &pb, &cand, &n) != AT_OK) {
        fprintf(stderr, "  %s %s: %s\n", op, shape, at_errmsg());
        goto done;
    }
    for (int p = 0; prefer[p] && rc; p++)
        for (int i = 0; i < n && rc; i++) {
            const at_candidate *k = &cand[i];
            if (k->pruned_by[0] || strcmp(at_spec_strategy_name(spec, k->strategy), prefer[p]))
                continue;
            at_candidate_params_string(k, params, sizeof params);
            rc = put_compiled(c, t, d, op, shape, at_spec_strategy_template(spec, k->strategy),
                              at_spec_strategy_kernel(spec, k->strategy), params, k->grid, k->block[0], k->smem, 0);
            if (!rc)
                snprintf(chosen, len, "%s %s", prefer[p], params);
        }
done:
    free(cand);
    at_spec_free(spec);
    return rc;
}

/* Every kernel the runtime serves from a bucket, at every M (T) = 1..17 on
** K, N (H) that no suite lists: tuned at 2, 4, 8, 16 with the strategies
** that read each weight once for all their tokens, the calls between served
** by the next larger bucket (tokens past M masked), 17 by the fallback.
** Outputs poisoned with NaN, compared with fp64. */
static void bucket_kernels_at_every_m(void)
{
    static const char *const mt[] = {"multi_token", "mma", "mma_bulk", NULL};
    static const char *const mma[] = {"mma", "mma_bulk", "multi_token", NULL};
    static const char *const bulk[] = {"mma_bulk", "mma", "multi_token", NULL};
    static const char *const norm[] = {"warp_rows", "block_row", NULL};
    static const int kn[][2] = {{1096, 1000}, {2056, 3080}};
    at_gpu *g = NULL;
    at_cache *c = NULL;
    at_templates *t = NULL;
    atk_ctx *ctx = NULL;
    char chosen[320];
    if (!gpu_present())
        TT_SKIP("no GPU");
    if (at_gpu_open(0, 0, &g) != AT_OK) {
        CHECK(0);
        return;
    }
    unlink(bucket_db);
    CHECK(at_cache_open(bucket_db, &c) == AT_OK && at_templates_open("templates", &t) == AT_OK);
    for (size_t i = 0; c && t && i < sizeof kn / sizeof kn[0]; i++) {
        const int ms[] = {2, 4, 8, 16};
        const char *const *prefer[] = {mt, mma, mma, bulk};
        for (int j = 0; j < 4; j++) {
            char shape[64];
            snprintf(shape, sizeof shape, "%dx%dx%d", ms[j], kn[i][0], kn[i][1]);
            CHECK_EQ_INT(put_live(c, t, &g->info, "gemv", shape, prefer[j], chosen, sizeof chosen), 0);
            printf("  tuned %s: %s\n", shape, chosen);
        }
    }
    CHECK_EQ_INT(put_live(c, t, &g->info, "rmsnorm", "4x2056", norm, chosen, sizeof chosen), 0);
    CHECK_EQ_INT(put_live(c, t, &g->info, "rmsnorm", "16x2056", norm, chosen, sizeof chosen), 0);
    at_templates_free(t);
    at_cache_close(c);
    CHECK_EQ_INT(atk_open(bucket_db, 0, ATK_NO_INFER, &ctx), ATK_OK);
    if (!ctx) {
        at_gpu_close(g);
        return;
    }
    printf("%s", atk_report(ctx));
    for (size_t i = 0; i < sizeof kn / sizeof kn[0]; i++)
        for (int m = 1; m <= 17; m++) {
            int want = m == 17 ? ATK_PATH_FALLBACK
                       : (m == 2 || m == 4 || m == 8 || m == 16) ? ATK_PATH_TUNED
                                                                 : ATK_PATH_BUCKET;
            check_gemv(g, ctx, m, kn[i][0], kn[i][1], want);
        }
    for (int tt = 1; tt <= 17; tt++)
        check_norm(g, ctx, ATK_OP_RMSNORM, tt, 2056,
                   tt == 17 ? ATK_PATH_FALLBACK : (tt == 4 || tt == 16) ? ATK_PATH_TUNED : ATK_PATH_BUCKET);
    atk_op_stats st;
    atk_stats(ctx, ATK_OP_GEMV, &st);
    CHECK(st.tuned == 8 && st.bucket == 24 && st.fallback == 2);
    atk_close(ctx);
    at_gpu_close(g);
}

/* gemv_add through atk, bit for bit: the same warp_row kernel tuned as
** gemv and as gemv_add (TP_ADD=1) at an awkward shape; atk_gemv writes y,
** atk_gemv_add adds into a copy of the residual r0, and every output must
** equal rne(r0 + y) computed on the host from that y (the two kernels sum
** in the same order). An untuned shape falls back to cuBLAS with beta = 1
** (one rounding: checked against fp64 within the gate). */
#define ADD_PARAMS_WR "TP_WARPS=4 TP_ROWS=2 TP_VEC=8 TP_UNROLL=1 TP_CACHE=1 TP_PDL=0"

static void gemv_add_bit_exact(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    at_gpu *g = NULL;
    if (at_gpu_open(0, 0, &g) != AT_OK) {
        fprintf(stderr, "  %s\n", at_errmsg());
        CHECK(0);
        return;
    }
    char db[160];
    snprintf(db, sizeof db, "%s.add", db_path);
    unlink(db);
    at_cache *c = NULL;
    at_templates *t = NULL;
    const size_t K = 1096, N = 1000;
    const unsigned grid[3] = {(unsigned)((N + 7) / 8), 1, 1};
    int ok = at_cache_open(db, &c) == AT_OK && at_templates_open("templates", &t) == AT_OK &&
             !put_compiled(c, t, &g->info, "gemv", "1x1096x1000", "gemv/gemv_warp_row.cu", "gemv_warp_row",
                           ADD_PARAMS_WR, grid, 128, 0, 0) &&
             !put_compiled(c, t, &g->info, "gemv_add", "1x1096x1000", "gemv/gemv_warp_row.cu", "gemv_warp_row",
                           ADD_PARAMS_WR " TP_ADD=1", grid, 128, 0, 0);
    at_templates_free(t);
    at_cache_close(c);
    CHECK(ok);
    atk_ctx *ctx = NULL;
    CHECK_EQ_INT(atk_open(db, 0, ATK_NO_INFER, &ctx), ATK_OK);
    if (!ok || !ctx) {
        at_gpu_close(g);
        return;
    }
    atk_choice ch;
    CHECK_EQ_INT(atk_explain(ctx, ATK_OP_GEMV_ADD, ATK_BF16, 1, (int64_t)K, (int64_t)N, &ch), ATK_OK);
    CHECK_EQ_INT(ch.path, ATK_PATH_TUNED);
    buf x, W, y, r;
    if (buf_new(g, &x, K, 11) || buf_new(g, &W, N * K, 12) || buf_new(g, &y, N, 13) ||
        buf_new(g, &r, N, 14)) {
        CHECK(0);
        return;
    }
    uint16_t *r0 = malloc(N * 2);
    memcpy(r0, r.h, N * 2);
    CHECK_EQ_INT(atk_gemv(ctx, (atk_stream)g->stream, ATK_BF16, 1, (int64_t)K, (int64_t)N, (void *)x.d, (void *)W.d, (void *)y.d),
                 ATK_OK);
    CHECK_EQ_INT(atk_gemv_add(ctx, (atk_stream)g->stream, ATK_BF16, 1, (int64_t)K, (int64_t)N, (void *)x.d, (void *)W.d, (void *)r.d),
                 ATK_OK);
    buf_get(g, &y);
    buf_get(g, &r);
    int bad = 0;
    for (size_t n = 0; n < N; n++) {
        uint16_t want = at_f32_to_half(AT_BF16, at_bf16_to_f32(r0[n]) + at_bf16_to_f32(y.h[n]));
        if (r.h[n] != want && bad++ < 3)
            fprintf(stderr, "  residual[%zu] = 0x%04x, want 0x%04x\n", n, r.h[n], want);
    }
    CHECK_EQ_INT(bad, 0);
    /* the fallback (untuned shape, ATK_NO_INFER): cuBLAS beta = 1 */
    const size_t M2 = 3, K2 = 520, N2 = 300;
    buf x2, W2, r2;
    if (buf_new(g, &x2, M2 * K2, 21) || buf_new(g, &W2, N2 * K2, 22) ||
        buf_new(g, &r2, M2 * N2, 23)) {
        CHECK(0);
        return;
    }
    memcpy(r0 = realloc(r0, M2 * N2 * 2), r2.h, M2 * N2 * 2);
    CHECK_EQ_INT(atk_explain(ctx, ATK_OP_GEMV_ADD, ATK_BF16, (int64_t)M2, (int64_t)K2, (int64_t)N2, &ch), ATK_OK);
    CHECK_EQ_INT(ch.path, ATK_PATH_FALLBACK);
    CHECK_EQ_INT(atk_gemv_add(ctx, (atk_stream)g->stream, ATK_BF16, (int64_t)M2, (int64_t)K2, (int64_t)N2, (void *)x2.d, (void *)W2.d,
                              (void *)r2.d),
                 ATK_OK);
    buf_get(g, &r2);
    double *ref = malloc(M2 * N2 * sizeof *ref);
    for (size_t m = 0; m < M2; m++)
        for (size_t n = 0; n < N2; n++) {
            double s = at_bf16_to_f32(r0[m * N2 + n]);
            for (size_t k = 0; k < K2; k++)
                s += (double)at_bf16_to_f32(x2.h[m * K2 + k]) * at_bf16_to_f32(W2.h[n * K2 + k]);
            ref[m * N2 + n] = s;
        }
    double err = rel_err(r2.h, ref, r2.n);
    printf("  gemv_add tuned 1x%zux%zu: %d of %zu outputs differ from rne(r0 + y); fallback %zux%zux%zu rel err %.2e\n",
           K, N, bad, N, M2, K2, N2, err);
    CHECK(err <= 1e-2);
    atk_op_stats s;
    atk_stats(ctx, ATK_OP_GEMV_ADD, &s);
    CHECK(s.calls == 2 && s.tuned == 1 && s.fallback == 1);
    free(ref);
    free(r0);
    buf_free(g, &x);
    buf_free(g, &W);
    buf_free(g, &y);
    buf_free(g, &r);
    buf_free(g, &x2);
    buf_free(g, &W2);
    buf_free(g, &r2);
    atk_close(ctx);
    at_gpu_close(g);
    unlink(db);
}

/* ------------------------------------------------------ fused decode ops */

static int is_swiglu(int op)
{
    return op == ATK_OP_GEMV_SWIGLU || op == ATK_OP_RMSNORM_GEMV_SWIGLU || op == ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU;
}

static int is_add(int op)
{
    return op == ATK_OP_ADD_RMSNORM_GEMV || op == ATK_OP_ADD_GEMMA_RMSNORM_GEMV;
}

/* The fused ops' fp64 reference, rounded where the unfused sequence stores
** (xn, g and u to bf16): y[M,N] for op over x[M,K], w[K], Wg/Wu [N,K] (the
** add forms: x is z, the residual already added). */
static void fused_ref(int op, const uint16_t *x, const uint16_t *w, const uint16_t *Wg, const uint16_t *Wu, size_t M,
                      size_t K, size_t N, double *y)
{
    int nrm = op == ATK_OP_RMSNORM_GEMV || op == ATK_OP_RMSNORM_GEMV_SWIGLU || op == ATK_OP_ADD_RMSNORM_GEMV ? 1
              : op == ATK_OP_GEMMA_RMSNORM_GEMV || op == ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU ||
                      op == ATK_OP_ADD_GEMMA_RMSNORM_GEMV
                  ? 2
                  : 0;
    int swi = is_swiglu(op);
    float *xn = malloc(K * sizeof *xn);
    for (size_t m = 0; m < M; m++) {
        double ss = 0;
        for (size_t k = 0; k < K; k++)
            ss += (double)at_bf16_to_f32(x[m * K + k]) * at_bf16_to_f32(x[m * K + k]);
        double r = 1.0 / sqrt(ss / (double)K + 1e-6);
        for (size_t k = 0; k < K; k++) {
            double v = at_bf16_to_f32(x[m * K + k]);
            if (nrm) {
                double f = at_bf16_to_f32(w[k]);
                v = v * r * (nrm == 2 ? 1.0 + f : f);
            }
            xn[k] = at_bf16_to_f32(at_f32_to_half(AT_BF16, (float)v));
        }
        for (size_t n = 0; n < N; n++) {
            double g = 0, u = 0;
            for (size_t k = 0; k < K; k++) {
                g += (double)xn[k] * at_bf16_to_f32(Wg[n * K + k]);
                if (swi)
                    u += (double)xn[k] * at_bf16_to_f32(Wu[n * K + k]);
            }
            if (swi) {
                g = at_bf16_to_f32(at_f32_to_half(AT_BF16, (float)g));
                u = at_bf16_to_f32(at_f32_to_half(AT_BF16, (float)u));
                g = g / (1.0 + exp(-g)) * u;
            }
            y[m * N + n] = g;
        }
    }
    free(xn);
}

/* Poisons a device buffer of n bytes with 0xFF bytes (bf16 NaN). */
static void poison(at_gpu *g, CUdeviceptr p, size_t n)
{
    g->cu.cuMemsetD8Async_(p, 0xFF, n, g->stream);
}

/* One fused call of op on the given buffers (Wu may be W + N*K; Wu is the
** residual in the add forms). */
static int fused_call(atk_ctx *ctx, at_gpu *g, int op, size_t M, size_t K, size_t N, CUdeviceptr x, CUdeviceptr w,
                      CUdeviceptr Wg, CUdeviceptr Wu, CUdeviceptr y, CUdeviceptr scratch)
{
    atk_stream s = (atk_stream)g->stream;
    const void *px = (void *)x, *pw = (void *)w, *pg = (void *)Wg, *pu = (void *)Wu;
    void *py = (void *)y, *ps = (void *)scratch, *pr = (void *)Wu;
    int64_t m = (int64_t)M, k = (int64_t)K, n = (int64_t)N;
    switch (op) {
    case ATK_OP_RMSNORM_GEMV:
        return atk_rmsnorm_gemv(ctx, s, ATK_BF16, m, k, n, px, pw, pg, py, 1e-6f, ps);
    case ATK_OP_GEMMA_RMSNORM_GEMV:
        return atk_gemma_rmsnorm_gemv(ctx, s, ATK_BF16, m, k, n, px, pw, pg, py, 1e-6f, ps);
    case ATK_OP_GEMV_SWIGLU:
        return atk_gemv_swiglu(ctx, s, ATK_BF16, m, k, n, px, pg, pu, py, ps);
    case ATK_OP_RMSNORM_GEMV_SWIGLU:
        return atk_rmsnorm_gemv_swiglu(ctx, s, ATK_BF16, m, k, n, px, pw, pg, pu, py, 1e-6f, ps);
    case ATK_OP_ADD_RMSNORM_GEMV:
        return atk_add_rmsnorm_gemv(ctx, s, ATK_BF16, m, k, n, px, pr, pw, pg, py, 1e-6f, ps);
    case ATK_OP_ADD_GEMMA_RMSNORM_GEMV:
        return atk_add_gemma_rmsnorm_gemv(ctx, s, ATK_BF16, m, k, n, px, pr, pw, pg, py, 1e-6f, ps);
    default:
        return atk_gemma_rmsnorm_gemv_swiglu(ctx, s, ATK_BF16, m, k, n, px, pw, pg, pu, py, 1e-6f, ps);
    }
}

/* Each fused op through atk against the fp64 reference at an awkward K, N
** (1096 x 1000): the tuned fused kernel (warp_row, TP_NORM / TP_SWIGLU,
** compiled here) at M = 1; the unfused sequence over a tuned gemv and
** rmsnorm (ATK_UNFUSED) at M = 1; the plain fallback (cuBLAS, naive norms)
** at M = 3 (ATK_NO_INFER: warp_row serves M = 1 only). SwiGLU both with
** two weights and with one [2N, K] weight (Wu = Wg + N*K: one GEMV over 2N
** rows). y and scratch are poisoned with NaN before every call, but the
** scratch's counters, zeroed once: the add forms' residual must come back
** as z = rne(x + residual) bit for bit and the counters as zero, on two
** calls in a row (the second adds x again). add_rmsnorm_gemv's kernel is
** TP_RES=1 (the last warp writes z), add_gemma_rmsnorm_gemv's TP_RES=2 (z
** staged in dynamic shared memory, the last block writes it). */
#define FUSED_WR "TP_WARPS=4 TP_ROWS=2 TP_VEC=8 TP_UNROLL=1 TP_CACHE=1 TP_PDL=0"

static void fused_ops_against_fp64(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    at_gpu *g = NULL;
    if (at_gpu_open(0, 0, &g) != AT_OK) {
        fprintf(stderr, "  %s\n", at_errmsg());
        CHECK(0);
        return;
    }
    char db[160];
    snprintf(db, sizeof db, "%s.fused", db_path);
    unlink(db);
    const size_t K = 1096, N = 1000, MMAX = 3;
    at_cache *c = NULL;
    at_templates *t = NULL;
    const unsigned grid[3] = {(unsigned)((N + 7) / 8), 1, 1}, gn[3] = {1, 1, 1};
    static const char *const fparams[7] = {FUSED_WR " TP_NORM=1 TP_SWIGLU=0", FUSED_WR " TP_NORM=2 TP_SWIGLU=0",
                                           FUSED_WR " TP_NORM=0 TP_SWIGLU=1", FUSED_WR " TP_NORM=1 TP_SWIGLU=1",
                                           FUSED_WR " TP_NORM=2 TP_SWIGLU=1", FUSED_WR " TP_NORM=1 TP_RES=1",
                                           FUSED_WR " TP_NORM=2 TP_RES=2"};
    int ok = at_cache_open(db, &c) == AT_OK && at_templates_open("templates", &t) == AT_OK &&
             !put_compiled(c, t, &g->info, "gemv", "1x1096x1000", "gemv/gemv_warp_row.cu", "gemv_warp_row", FUSED_WR,
                           grid, 128, 0, 0) &&
             !put_compiled(c, t, &g->info, "rmsnorm", "1x1096", "norm/norm_block_row.cu", "norm_block_row",
                           NORM_PARAMS, gn, 256, 0, 0);
    for (int i = 0; ok && i < 7; i++) /* TP_RES=2 stages z: K elements of dynamic shared memory */
        ok = !put_compiled(c, t, &g->info, atk_op_name(ATK_OP_RMSNORM_GEMV + i), "1x1096x1000",
                           "gemv/gemv_warp_row.cu", "gemv_warp_row", fparams[i], grid, 128,
                           strstr(fparams[i], "TP_RES=2") ? (unsigned)(K * 2) : 0, 0);
    at_templates_free(t);
    at_cache_close(c);
    CHECK(ok);
    atk_ctx *ctx = NULL, *unf = NULL;
    CHECK_EQ_INT(atk_open(db, 0, ATK_NO_INFER, &ctx), ATK_OK);
    CHECK_EQ_INT(atk_open(db, 0, ATK_NO_INFER | ATK_UNFUSED, &unf), ATK_OK);
    buf x, w, Wgu, Wg, Wu, y, r;
    CUdeviceptr scratch = 0;
    size_t sbytes = atk_fused_scratch_bytes(ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU, ATK_BF16, MMAX, K, N);
    uint16_t *r0 = malloc(MMAX * K * 2), *z = malloc(MMAX * K * 2);
    unsigned counters[ATK_FUSED_COUNTER_BYTES / sizeof(unsigned)];
    if (!ok || !ctx || !unf || !r0 || !z || buf_new(g, &x, MMAX * K, 31) || buf_new(g, &w, K, 32) ||
        buf_new(g, &Wgu, 2 * N * K, 33) || buf_new(g, &Wg, N * K, 34) || buf_new(g, &Wu, N * K, 35) ||
        buf_new(g, &y, MMAX * N, 36) || buf_new(g, &r, MMAX * K, 37) || at_gpu_alloc(g, &scratch, sbytes) != AT_OK) {
        CHECK(0);
        atk_close(ctx);
        atk_close(unf);
        at_gpu_close(g);
        return;
    }
    double *ref = malloc(MMAX * N * sizeof *ref);
    memcpy(r0, r.h, MMAX * K * 2);
    g->cu.cuMemsetD8Async_(scratch, 0, ATK_FUSED_COUNTER_BYTES, g->stream); /* once, as atk.h asks */
    for (int op = ATK_OP_RMSNORM_GEMV; op < ATK_NOPS; op++) {
        int swi = is_swiglu(op), add = is_add(op);
        for (int form = 0; form < 1 + swi + add; form++) { /* 0: Wg, Wu apart; 1: one [2N,K] weight */
            CUdeviceptr dg = form && swi ? Wgu.d : Wg.d, du = add ? r.d : form ? Wgu.d + N * K * 2 : Wu.d;
            const uint16_t *hg = form && swi ? Wgu.h : Wg.h, *hu = form ? Wgu.h + N * K : Wu.h;
            static const struct {
                int unfused;
                size_t M;
                int path;
            } cases[3] = {{0, 1, ATK_PATH_TUNED}, {1, 1, ATK_PATH_FALLBACK}, {0, 3, ATK_PATH_FALLBACK}};
            for (int ci = 0; ci < 3; ci++) {
                atk_ctx *cx = cases[ci].unfused ? unf : ctx;
                size_t M = cases[ci].M;
                atk_choice ch;
                CHECK_EQ_INT(atk_explain(cx, op, ATK_BF16, (int64_t)M, (int64_t)K, (int64_t)N, &ch), ATK_OK);
                CHECK_EQ_INT(ch.path, cases[ci].path);
                poison(g, y.d, y.n * 2);
                poison(g, scratch + ATK_FUSED_COUNTER_BYTES, sbytes - ATK_FUSED_COUNTER_BYTES);
                atk_stats_reset(cx);
                /* the add forms, form 1: a second call on the residual the first one left */
                if (add && form == 0) {
                    memcpy(r.h, r0, MMAX * K * 2);
                    g->cu.cuMemcpyHtoDAsync_(r.d, r.h, MMAX * K * 2, g->stream);
                }
                if (add) { /* z: what the residual must hold after the call */
                    for (size_t i = 0; i < M * K; i++)
                        z[i] = at_f32_to_half(AT_BF16, at_bf16_to_f32(x.h[i]) + at_bf16_to_f32(r.h[i]));
                }
                int rc = fused_call(cx, g, op, M, K, N, x.d, w.d, dg, du, y.d, scratch);
                CHECK_EQ_INT(rc, ATK_OK);
                if (rc != ATK_OK)
                    fprintf(stderr, "  %s: %s\n", atk_op_name(op), atk_errmsg(cx));
                CHECK_EQ_INT(g->cu.cuStreamSynchronize_(g->stream), CUDA_SUCCESS);
                buf_get(g, &y);
                fused_ref(op, add ? z : x.h, w.h, hg, hu, M, K, N, ref);
                double err = rel_err(y.h, ref, M * N);
                printf("  %-26s %zux%zux%zu %-8s %-12s %s rel err %.2e\n", atk_op_name(op), M, K, N,
                       ch.path == ATK_PATH_TUNED ? "tuned" : "fallback", ch.strategy,
                       swi ? (form ? "[2N,K] weight" : "Wg, Wu apart ") : add ? (form ? "second call  " : "first call   ")
                                                                             : "             ",
                       err);
                CHECK(err <= 1e-2);
                if (add) {
                    buf_get(g, &r);
                    size_t differ = 0;
                    for (size_t i = 0; i < M * K; i++)
                        differ += r.h[i] != z[i];
                    CHECK_EQ_INT((int)differ, 0);
                    g->cu.cuMemcpyDtoHAsync_(counters, scratch, sizeof counters, g->stream);
                    g->cu.cuStreamSynchronize_(g->stream);
                    size_t nonzero = 0;
                    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
                        nonzero += counters[i] != 0;
                    CHECK_EQ_INT((int)nonzero, 0);
                }
                atk_op_stats s;
                atk_stats(cx, op, &s);
                CHECK(s.calls == 1 && (ch.path == ATK_PATH_TUNED ? s.tuned : s.fallback) == 1);
                atk_stats(cx, ATK_OP_GEMV, &s);
                CHECK(s.calls == 0); /* the unfused components count nowhere */
            }
        }
    }
    /* a misaligned scratch is refused before anything launches */
    CHECK_EQ_INT(fused_call(ctx, g, ATK_OP_GEMV_SWIGLU, 1, K, N, x.d, w.d, Wg.d, Wu.d, y.d, scratch + 8),
                 ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "16-byte aligned");
    free(ref);
    free(r0);
    free(z);
    buf_free(g, &r);
    at_gpu_free(g, scratch);
    buf_free(g, &x);
    buf_free(g, &w);
    buf_free(g, &Wgu);
    buf_free(g, &Wg);
    buf_free(g, &Wu);
    buf_free(g, &y);
    atk_close(ctx);
    atk_close(unf);
    at_gpu_close(g);
    unlink(db);
}

int main(void)
{
    snprintf(db_path, sizeof db_path, "/tmp/test_atk_gpu.%ld.db", (long)getpid());
    TT_RUN_ISOLATED(results_equal_reference);
    TT_RUN_ISOLATED(graph_capture);
    TT_RUN_ISOLATED(many_threads);
    TT_RUN_ISOLATED(gemv_add_bit_exact);
    TT_RUN_ISOLATED(fused_ops_against_fp64);
    snprintf(bucket_db, sizeof bucket_db, "/tmp/test_atk_gpu_buckets.%ld.db", (long)getpid());
    TT_RUN_ISOLATED(bucket_kernels_at_every_m);
    unlink(db_path);
    unlink(bucket_db);
    return TT_DONE();
}
