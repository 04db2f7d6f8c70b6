/*
** atk_launch.c — the eleven calls an engine makes per step. Each validates
** its arguments, asks atk_lookup.c which kernel serves the shape, counts the
** answer, and enqueues one launch: a tuned, bucket or inferred kernel (with PDL
** when it was tuned with TP_PDL=1), cuBLAS for a GEMV fallback (beta = 1
** for gemv_add: one call, no scratch), the built-in
** naive fused kernel for a norm fallback; a fused op's fallback is its
** unfused sequence (norm, GEMV, SiLU-mul: two to four launches into the
** caller's scratch). Nothing here allocates, waits,
** loads or compiles, so the calls are safe in CUDA graph capture; the only
** shared mutable state is atomic (counters, memo, cuBLAS handle claims).
*/
#include "atk_internal.h"

#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#define INC(field) atomic_fetch_add_explicit(&(field), 1, memory_order_relaxed)

/* Makes the context current on this thread if it is not; *pushed says so. */
static int enter(atk_ctx *ctx, int *pushed)
{
    CUcontext cur = NULL;
    *pushed = 0;
    if (ctx->cu.cuCtxGetCurrent_(&cur) == CUDA_SUCCESS && cur == ctx->cuctx)
        return ATK_OK;
    int st = atk__cuda_check(ctx, &ctx->cu, ctx->cu.cuCtxPushCurrent_(ctx->cuctx), "cuCtxPushCurrent");
    *pushed = st == ATK_OK;
    return st;
}

static void leave(atk_ctx *ctx, int pushed)
{
    CUcontext c;
    if (pushed)
        ctx->cu.cuCtxPopCurrent_(&c);
}

static int launch(atk_ctx *ctx, CUfunction fn, const char *name, const unsigned grid[3], const unsigned block[3],
                  unsigned smem, int pdl, CUstream stream, void **args)
{
    char what[96];
    CUresult r;
    if (pdl) {
        /* may start while the previous kernel drains; the kernel waits
        ** (griddepcontrol.wait) before it reads its inputs or writes */
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig cfg = {.gridDimX = grid[0], .gridDimY = grid[1], .gridDimZ = grid[2], .blockDimX = block[0],
                              .blockDimY = block[1], .blockDimZ = block[2], .sharedMemBytes = smem,
                              .hStream = stream, .attrs = &attr, .numAttrs = 1};
        r = ctx->cu.cuLaunchKernelEx_(&cfg, fn, args, NULL);
    } else {
        r = ctx->cu.cuLaunchKernel_(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, stream, args,
                                    NULL);
    }
    if (r == CUDA_SUCCESS)
        return ATK_OK;
    snprintf(what, sizeof what, "%s %s (grid %u,%u,%u block %u)", pdl ? "cuLaunchKernelEx" : "cuLaunchKernel", name,
             grid[0], grid[1], grid[2], block[0]);
    return atk__cuda_check(ctx, &ctx->cu, r, what);
}

/* A preallocated cuBLAS handle, claimed with a test-and-set: the one bound
** to this stream, else an unbound one (bound to it now), else any (used
** without workspace). *own says whether its workspace is this stream's.
** CU_STREAM_PER_THREAD (= cudaStreamPerThread) is one handle value for a
** different stream in every thread: it never owns a workspace. */
static atk_blas *blas_claim(atk_ctx *ctx, CUstream stream, int *own)
{
    const uintptr_t key = (uintptr_t)stream * 2u + 1u; /* never 0, also for the NULL stream */
    const int first_pass = stream == CU_STREAM_PER_THREAD ? 2 : 0;
    for (unsigned spin = 0;; spin++) {
        for (int pass = first_pass; pass < 3; pass++)
            for (int i = 0; i < ATK_BLAS_HANDLES; i++) {
                atk_blas *b = &ctx->blas[i];
                uintptr_t bound = atomic_load_explicit(&b->bound, memory_order_relaxed);
                if ((pass == 0 && bound != key) || (pass == 1 && bound != 0))
                    continue;
                if (atomic_flag_test_and_set_explicit(&b->busy, memory_order_acquire))
                    continue;
                if (pass == 1 && !b->has_bound) { /* still unbound under the claim: take it */
                    b->has_bound = 1;
                    atomic_store_explicit(&b->bound, key, memory_order_relaxed);
                }
                *own = !first_pass && atomic_load_explicit(&b->bound, memory_order_relaxed) == key;
                return b;
            }
        if (spin > 16)
            sched_yield(); /* more threads than handles: wait for one */
    }
}

/* y = x . W^T (beta 0), or y += x . W^T rounded once (beta 1: gemv_add). */
static int gemv_cublas(atk_ctx *ctx, CUstream stream, int dtype, int M, int K, int N, const void *x, const void *W,
                       void *y, float beta)
{
    int own = 0;
    atk_blas *b = blas_claim(ctx, stream, &own);
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    const char *what = "cublasSetStream";
    /* cublasSetStream resets the workspace to cuBLAS's own pool (which
    ** would allocate during capture): set ours, or none, right after it */
    if (!b->stream_set || b->stream != stream || b->ws_set != own) {
        s = cublasSetStream(b->h, stream);
        if (s == CUBLAS_STATUS_SUCCESS) {
            what = "cublasSetWorkspace";
            s = own ? cublasSetWorkspace(b->h, (void *)(uintptr_t)b->workspace, ATK_BLAS_WORKSPACE)
                    : cublasSetWorkspace(b->h, NULL, 0);
        }
        b->stream_set = s == CUBLAS_STATUS_SUCCESS;
        b->stream = stream;
        b->ws_set = own;
    }
    if (s == CUBLAS_STATUS_SUCCESS) {
        /* the tuner's baseline call (tuner/bench.c): column-major
        ** y^T[N,M] = W[N,K] . x^T[K,M], W a K x N column-major matrix */
        const float one = 1.0f;
        cudaDataType t = dtype == ATK_FP16 ? CUDA_R_16F : CUDA_R_16BF;
        what = "cublasGemmEx";
        s = cublasGemmEx(b->h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W, t, K, x, t, K, &beta,
                         y, t, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    atomic_flag_clear_explicit(&b->busy, memory_order_release);
    if (s != CUBLAS_STATUS_SUCCESS)
        return atk__fail(ctx, ATK_ERR_CUDA, "cublas: %s: status %d", what, (int)s);
    return ATK_OK;
}

/* Argument checks shared by the calls; counts a rejected call. */
static int bad(atk_ctx *ctx, int op, const char *why)
{
    INC(ctx->count[op].rejected);
    return atk__fail(ctx, ATK_ERR_USAGE, "atk_%s: %s", atk_op_name(op), why);
}

/* 1 when every pointer is aligned to the kernel's vector loads (TP_VEC
** elements of 2 bytes); the tuner's buffers came from cuMemAlloc, an
** engine's may be offsets into a larger one. */
static int aligned(const atk_entry *e, const void *a, const void *b, const void *c, const void *d)
{
    uintptr_t mask = (uintptr_t)(e->p.vec > 0 ? 2 * e->p.vec : 2) - 1;
    return !(((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & mask);
}

/* The lookup's answer, demoted to fallback when the pointers do not suit
** the kernel (not in dry contexts: their pointers are never used). Counts
** nothing: the fused ops' unfused sequence picks its components with it. */
static int pick(atk_ctx *ctx, int op, int dtype, int M, int K, int N, const void *const ptr[4], int *path,
                int *demoted)
{
    int entry = atk__lookup(ctx, op, dtype, M, K, N, path);
    *demoted = 0;
    if (entry >= 0 && *path != ATK_PATH_FALLBACK && !ctx->dry && ctx->entries[entry].strategy != ATK_S_BASELINE &&
        !aligned(&ctx->entries[entry], ptr[0], ptr[1], ptr[2], ptr[3])) {
        *path = ATK_PATH_FALLBACK;
        *demoted = 1;
        return -1;
    }
    return entry;
}

/* pick, counted; ATK_ERR_MISS in strict mode for anything but an exact
** tuned entry. */
static int choose(atk_ctx *ctx, int op, int dtype, int M, int K, int N, const void *const ptr[4], int *entry,
                  int *path)
{
    atk_counters *c = &ctx->count[op];
    int demoted;
    *entry = pick(ctx, op, dtype, M, K, N, ptr, path, &demoted);
    if ((ctx->flags & ATK_STRICT) && *path != ATK_PATH_TUNED) {
        INC(c->missed);
        return atk__fail(ctx, ATK_ERR_MISS, "atk_%s %s %dx%d%s%.0d: no tuned entry%s (strict mode)", atk_op_name(op),
                         dtype == ATK_BF16 ? "bf16" : "fp16", M, K, N ? "x" : "", N,
                         demoted ? " for these pointers' alignment" : "");
    }
    if (*path == ATK_PATH_TUNED)
        INC(c->tuned);
    else if (*path == ATK_PATH_BUCKET)
        INC(c->bucket);
    else if (*path == ATK_PATH_INFERRED)
        INC(c->inferred);
    else
        INC(c->fallback);
    return ATK_OK;
}

/* The launch geometry and dynamic shared memory of e for this call: the
** stored ones when tuned here. */
static unsigned geometry(const atk_entry *e, int path, int M, int K, int N, unsigned grid[3], unsigned block[3])
{
    if (path == ATK_PATH_TUNED) {
        memcpy(grid, e->grid, 3 * sizeof *grid);
        memcpy(block, e->block, 3 * sizeof *block);
        return e->smem;
    }
    atk__entry_geometry(e, M, K, N, grid, block);
    return atk__entry_smem(e, K);
}

/* The generated kernel a decided call launches: its entry's, unless the
** call falls back or the entry's answer is the baseline (then NULL). */
static const atk_entry *tuned_kernel(const atk_ctx *ctx, int entry, int path)
{
    const atk_entry *e = entry >= 0 && path != ATK_PATH_FALLBACK ? &ctx->entries[entry] : NULL;
    return e && e->strategy != ATK_S_BASELINE ? e : NULL;
}

/* Enqueues a decided GEMV-op call (gemv or gemv_add; the context is
** current): the entry's kernel, or cuBLAS (beta = 1 for gemv_add). */
static int gemv_run(atk_ctx *ctx, int op, CUstream s, int dtype, int M, int K, int N, const void *x, const void *W,
                    void *y, int entry, int path)
{
    const atk_entry *e = tuned_kernel(ctx, entry, path);
    if (!e)
        return gemv_cublas(ctx, s, dtype, M, K, N, x, W, y, op == ATK_OP_GEMV_ADD ? 1.0f : 0.0f);
    unsigned grid[3], block[3];
    CUdeviceptr dx = (CUdeviceptr)(uintptr_t)x, dw = (CUdeviceptr)(uintptr_t)W, dy = (CUdeviceptr)(uintptr_t)y;
    void *args[] = {&dx, &dw, &dy, &M, &K, &N};
    unsigned smem = geometry(e, path, M, K, N, grid, block);
    return launch(ctx, e->fn, e->kernel, grid, block, smem, e->pdl, s, args);
}

/* atk_gemv and atk_gemv_add: one body; y is the residual for gemv_add (its
** kernels, TP_ADD=1, add into it; its fallback is cuBLAS with beta = 1). */
static int gemv_call(atk_ctx *ctx, int op, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N,
                     const void *x, const void *W, void *y)
{
    int entry, path, st, pushed;
    if (!ctx)
        return atk__fail(NULL, ATK_ERR_USAGE, "atk_%s: NULL context", atk_op_name(op));
    INC(ctx->count[op].calls);
    if (dtype != ATK_BF16 && dtype != ATK_FP16)
        return bad(ctx, op, "dtype must be ATK_BF16 or ATK_FP16");
    if (M < 1 || K < 1 || N < 1 || M > INT32_MAX || K > INT32_MAX || N > INT32_MAX)
        return bad(ctx, op, "M, K and N must lie in 1..INT_MAX");
    if (!ctx->dry && (!x || !W || !y))
        return bad(ctx, op, op == ATK_OP_GEMV_ADD ? "NULL x, W or residual" : "NULL x, W or y");
    const void *const ptr[4] = {x, W, x, W}; /* y is written one element at a time */
    if ((st = choose(ctx, op, dtype, (int)M, (int)K, (int)N, ptr, &entry, &path)) != ATK_OK)
        return st;
    if (ctx->dry) {
        atk__clear(ctx);
        return ATK_OK;
    }
    if ((st = enter(ctx, &pushed)) != ATK_OK)
        return st;
    st = gemv_run(ctx, op, (CUstream)stream, dtype, (int)M, (int)K, (int)N, x, W, y, entry, path);
    leave(ctx, pushed);
    if (st == ATK_OK)
        atk__clear(ctx);
    return st;
}

int atk_gemv(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N, const void *x,
             const void *W, void *y)
{
    return gemv_call(ctx, ATK_OP_GEMV, stream, dtype, M, K, N, x, W, y);
}

int atk_gemv_add(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N, const void *x,
                 const void *W, void *residual)
{
    return gemv_call(ctx, ATK_OP_GEMV_ADD, stream, dtype, M, K, N, x, W, residual);
}

/* Enqueues a decided norm call (the context is current): the entry's
** kernel or the built-in naive fused norm; (x, residual, w, y, T, H, eps),
** as every norm template. */
static int norm_run(atk_ctx *ctx, int op, CUstream s, int dtype, int T, int H, const void *x, void *residual,
                    const void *w, void *y, float eps, int entry, int path)
{
    const atk_entry *e = tuned_kernel(ctx, entry, path);
    CUdeviceptr dx = (CUdeviceptr)(uintptr_t)x, dr = (CUdeviceptr)(uintptr_t)residual,
                dw = (CUdeviceptr)(uintptr_t)w, dy = (CUdeviceptr)(uintptr_t)y;
    void *args[] = {&dx, &dr, &dw, &dy, &T, &H, &eps};
    unsigned grid[3] = {(unsigned)T, 1, 1}, block[3] = {256, 1, 1};
    if (!e)
        return launch(ctx, ctx->naive_fn[op][dtype - 1], "norm_naive", grid, block, 0, 0, s, args);
    unsigned smem = geometry(e, path, T, H, 0, grid, block);
    return launch(ctx, e->fn, e->kernel, grid, block, smem, e->pdl, s, args);
}

/* The RMSNorm family: (x, residual, w, y, T, H, eps), as every norm template. */
static int norm(atk_ctx *ctx, int op, atk_stream stream, int dtype, int64_t T, int64_t H, const void *x,
                void *residual, const void *w, void *y, float eps)
{
    int entry, path, st, pushed, add = op == ATK_OP_ADD_RMSNORM || op == ATK_OP_ADD_GEMMA_RMSNORM;
    if (!ctx)
        return atk__fail(NULL, ATK_ERR_USAGE, "atk_%s: NULL context", atk_op_name(op));
    INC(ctx->count[op].calls);
    if (dtype != ATK_BF16 && dtype != ATK_FP16)
        return bad(ctx, op, "dtype must be ATK_BF16 or ATK_FP16");
    if (T < 1 || H < 1 || T > INT32_MAX || H > INT32_MAX)
        return bad(ctx, op, "T and H must lie in 1..INT_MAX");
    if (!(eps >= 0.0f))
        return bad(ctx, op, "eps must be a number >= 0");
    if (!ctx->dry && (!x || !w || !y || (add && !residual)))
        return bad(ctx, op, add ? "NULL x, residual, w or y" : "NULL x, w or y");
    const void *const ptr[4] = {x, add ? residual : x, w, y};
    if ((st = choose(ctx, op, dtype, (int)T, (int)H, 0, ptr, &entry, &path)) != ATK_OK)
        return st;
    if (ctx->dry) {
        atk__clear(ctx);
        return ATK_OK;
    }
    if ((st = enter(ctx, &pushed)) != ATK_OK)
        return st;
    st = norm_run(ctx, op, (CUstream)stream, dtype, (int)T, (int)H, x, residual, w, y, eps, entry, path);
    leave(ctx, pushed);
    if (st == ATK_OK)
        atk__clear(ctx);
    return st;
}

int atk_rmsnorm(atk_ctx *ctx, atk_stream stream, int dtype, int64_t T, int64_t H, const void *x, const void *w,
                void *y, float eps)
{
    return norm(ctx, ATK_OP_RMSNORM, stream, dtype, T, H, x, NULL, w, y, eps);
}

int atk_add_rmsnorm(atk_ctx *ctx, atk_stream stream, int dtype, int64_t T, int64_t H, const void *x,
                    void *residual, const void *w, void *y, float eps)
{
    return norm(ctx, ATK_OP_ADD_RMSNORM, stream, dtype, T, H, x, residual, w, y, eps);
}

int atk_gemma_rmsnorm(atk_ctx *ctx, atk_stream stream, int dtype, int64_t T, int64_t H, const void *x,
                      const void *w, void *y, float eps)
{
    return norm(ctx, ATK_OP_GEMMA_RMSNORM, stream, dtype, T, H, x, NULL, w, y, eps);
}

int atk_add_gemma_rmsnorm(atk_ctx *ctx, atk_stream stream, int dtype, int64_t T, int64_t H, const void *x,
                          void *residual, const void *w, void *y, float eps)
{
    return norm(ctx, ATK_OP_ADD_GEMMA_RMSNORM, stream, dtype, T, H, x, residual, w, y, eps);
}

/* ------------------------------------------------------ fused decode ops */

static size_t round256(size_t n) { return (n + 255u) & ~(size_t)255u; }

/* The scratch layout: the residual-add kernels' counters (kept zero), then
** the unfused sequence's normalized x [M,K] (norm forms), then g and u,
** [M,N] each (SwiGLU; with a concatenated weight the GEMV's [M,2N] output
** fills both). Every part starts 256-byte aligned; the counters come first
** in every op's layout, so a scratch shared by several fused calls never
** has them overwritten. */
size_t atk_fused_scratch_bytes(int op, int dtype, int64_t M, int64_t K, int64_t N)
{
    if (!atk__is_fused(op) || (dtype != ATK_BF16 && dtype != ATK_FP16) || M < 1 || K < 1 || N < 1 ||
        M > INT32_MAX || K > INT32_MAX || N > INT32_MAX)
        return 0;
    size_t xn = atk__fused_norm(op) ? round256((size_t)M * (size_t)K * ATK_ELEM_BYTES) : 0;
    size_t gu = atk__fused_swiglu(op) ? round256((size_t)M * (size_t)N * ATK_ELEM_BYTES) : 0;
    if (xn > SIZE_MAX - 2 * gu - ATK_FUSED_COUNTER_BYTES) /* > 2^64 bytes: no such buffer */
        return 0;
    return ATK_FUSED_COUNTER_BYTES + xn + 2 * gu;
}

/* The unfused sequence (the context is current): norm into scratch, the
** GEMV(s), SiLU-mul. Each component is chosen by the dispatch rule over
** its own op's entries (a tuned norm, a tuned GEMV) but counted nowhere:
** the fused call counted itself. Strict mode applies to the fused call only. */
static int unfused(atk_ctx *ctx, int op, CUstream s, int dtype, int M, int K, int N, const void *x, void *res,
                   const void *w, const void *Wg, const void *Wu, void *y, float eps, void *scratch)
{
    int nrm = atk__fused_norm(op), st, path, entry, demoted;
    char *sp = (char *)scratch + ATK_FUSED_COUNTER_BYTES;
    const void *xin = x;
    if (nrm) {
        /* the residual-add forms: atk_add_rmsnorm, the residual in place */
        int nop = atk__fused_res(op) ? (nrm == 1 ? ATK_OP_ADD_RMSNORM : ATK_OP_ADD_GEMMA_RMSNORM)
                                     : (nrm == 1 ? ATK_OP_RMSNORM : ATK_OP_GEMMA_RMSNORM);
        const void *const ptr[4] = {x, res ? res : x, w, sp};
        entry = pick(ctx, nop, dtype, M, K, 0, ptr, &path, &demoted);
        if ((st = norm_run(ctx, nop, s, dtype, M, K, x, res, w, sp, eps, entry, path)) != ATK_OK)
            return st;
        xin = sp;
        sp += round256((size_t)M * (size_t)K * ATK_ELEM_BYTES);
    }
    if (!atk__fused_swiglu(op)) {
        const void *const ptr[4] = {xin, Wg, xin, Wg};
        entry = pick(ctx, ATK_OP_GEMV, dtype, M, K, N, ptr, &path, &demoted);
        return gemv_run(ctx, ATK_OP_GEMV, s, dtype, M, K, N, xin, Wg, y, entry, path);
    }
    const char *g = sp, *u;
    int ld;
    if ((const char *)Wu == (const char *)Wg + (size_t)N * (size_t)K * ATK_ELEM_BYTES && 2LL * N <= INT32_MAX) {
        /* gate_up stored as one [2N,K] weight: one GEMV over 2N rows, the
        ** shape an engine tunes (1x2048x12288), output [M,2N] */
        const void *const ptr[4] = {xin, Wg, xin, Wg};
        entry = pick(ctx, ATK_OP_GEMV, dtype, M, K, 2 * N, ptr, &path, &demoted);
        if ((st = gemv_run(ctx, ATK_OP_GEMV, s, dtype, M, K, 2 * N, xin, Wg, sp, entry, path)) != ATK_OK)
            return st;
        u = sp + (size_t)N * ATK_ELEM_BYTES, ld = 2 * N;
    } else {
        u = sp + round256((size_t)M * (size_t)N * ATK_ELEM_BYTES), ld = N;
        const void *const pg[4] = {xin, Wg, xin, Wg}, *const pu[4] = {xin, Wu, xin, Wu};
        entry = pick(ctx, ATK_OP_GEMV, dtype, M, K, N, pg, &path, &demoted);
        if ((st = gemv_run(ctx, ATK_OP_GEMV, s, dtype, M, K, N, xin, Wg, sp, entry, path)) != ATK_OK)
            return st;
        entry = pick(ctx, ATK_OP_GEMV, dtype, M, K, N, pu, &path, &demoted);
        if ((st = gemv_run(ctx, ATK_OP_GEMV, s, dtype, M, K, N, xin, Wu, (void *)u, entry, path)) != ATK_OK)
            return st;
    }
    CUdeviceptr dg = (CUdeviceptr)(uintptr_t)g, du = (CUdeviceptr)(uintptr_t)u, dy = (CUdeviceptr)(uintptr_t)y;
    void *args[] = {&dg, &du, &dy, &M, &N, &ld};
    unsigned grid[3] = {(unsigned)((N + 255) / 256), (unsigned)(M < 65535 ? M : 65535), 1}, block[3] = {256, 1, 1};
    /* With PDL only after a GEMV launched with it (silu_mul.cu waits for the
    ** GEMV): behind a tuned PDL GEMV it saves a launch gap, behind cuBLAS the
    ** PDL launch only costs (both measured on an H100, bench/results/). */
    const atk_entry *ge = tuned_kernel(ctx, entry, path);
    return launch(ctx, ctx->silu_fn[dtype - 1], "silu_mul", grid, block, 0, ctx->info.cc >= 90 && ge && ge->pdl, s,
                  args);
}

/* The seven fused calls: one body. w is NULL without a norm, Wu NULL
** without SwiGLU, res NULL but in the residual-add forms (never read then). */
static int fused_call(atk_ctx *ctx, int op, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N,
                      const void *x, void *res, const void *w, const void *Wg, const void *Wu, void *y, float eps,
                      void *scratch)
{
    int entry, path, st, pushed, nrm = atk__fused_norm(op), swi = atk__fused_swiglu(op), add = atk__fused_res(op);
    if (!ctx)
        return atk__fail(NULL, ATK_ERR_USAGE, "atk_%s: NULL context", atk_op_name(op));
    INC(ctx->count[op].calls);
    if (dtype != ATK_BF16 && dtype != ATK_FP16)
        return bad(ctx, op, "dtype must be ATK_BF16 or ATK_FP16");
    if (M < 1 || K < 1 || N < 1 || M > INT32_MAX || K > INT32_MAX || N > INT32_MAX)
        return bad(ctx, op, "M, K and N must lie in 1..INT_MAX");
    if (nrm && !(eps >= 0.0f))
        return bad(ctx, op, "eps must be a number >= 0");
    /* a dry context checks the pointers too unless every one is NULL (a
    ** planning call): then a dry run catches what a real one would */
    if (!ctx->dry || x || res || w || Wg || Wu || y || scratch) {
        if (!x)
            return bad(ctx, op, "NULL x");
        if (add && !res)
            return bad(ctx, op, "NULL residual");
        if (add && res == x)
            return bad(ctx, op, "residual is x: z = x + residual is written into residual while every block "
                                "still reads x");
        if (nrm && !w)
            return bad(ctx, op, "NULL w (the norm weight)");
        if (!Wg)
            return bad(ctx, op, swi ? "NULL Wg" : "NULL W");
        if (swi && !Wu)
            return bad(ctx, op, "NULL Wu");
        if (!y)
            return bad(ctx, op, "NULL y");
        if (!scratch)
            return bad(ctx, op, "NULL scratch (atk_fused_scratch_bytes bytes: the unfused sequence may serve any "
                                "call)");
        if ((uintptr_t)scratch & 15u)
            return bad(ctx, op, "scratch must be 16-byte aligned");
    }
    const void *const ptr[4] = {x, Wg, swi ? Wu : add ? res : Wg, nrm ? w : x};
    if ((st = choose(ctx, op, dtype, (int)M, (int)K, (int)N, ptr, &entry, &path)) != ATK_OK)
        return st;
    if (ctx->dry) {
        atk__clear(ctx);
        return ATK_OK;
    }
    if ((st = enter(ctx, &pushed)) != ATK_OK)
        return st;
    const atk_entry *e = tuned_kernel(ctx, entry, path);
    int m = (int)M, k = (int)K, n = (int)N;
    if (!e) {
        st = unfused(ctx, op, (CUstream)stream, dtype, m, k, n, x, res, w, Wg, Wu, y, eps, scratch);
    } else {
        /* [FUSED_ARGS] the fused templates' 9 parameters, 11 with TP_RES
        ** (templates/common/gemv_fuse.cuh): the counters lead the scratch */
        unsigned grid[3], block[3];
        CUdeviceptr dx = (CUdeviceptr)(uintptr_t)x, dw = (CUdeviceptr)(uintptr_t)Wg, dy = (CUdeviceptr)(uintptr_t)y,
                    du = (CUdeviceptr)(uintptr_t)(swi ? Wu : NULL), dn = (CUdeviceptr)(uintptr_t)(nrm ? w : NULL),
                    dr = (CUdeviceptr)(uintptr_t)res, dc = (CUdeviceptr)(uintptr_t)scratch;
        void *args[] = {&dx, &dw, &dy, &m, &k, &n, &du, &dn, &eps, &dr, &dc};
        unsigned smem = geometry(e, path, m, k, n, grid, block);
        st = launch(ctx, e->fn, e->kernel, grid, block, smem, e->pdl, (CUstream)stream, args);
    }
    leave(ctx, pushed);
    if (st == ATK_OK)
        atk__clear(ctx);
    return st;
}

int atk_rmsnorm_gemv(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N, const void *x,
                     const void *w, const void *W, void *y, float eps, void *scratch)
{
    return fused_call(ctx, ATK_OP_RMSNORM_GEMV, stream, dtype, M, K, N, x, NULL, w, W, NULL, y, eps, scratch);
}

int atk_gemma_rmsnorm_gemv(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N,
                           const void *x, const void *w, const void *W, void *y, float eps, void *scratch)
{
    return fused_call(ctx, ATK_OP_GEMMA_RMSNORM_GEMV, stream, dtype, M, K, N, x, NULL, w, W, NULL, y, eps, scratch);
}

int atk_gemv_swiglu(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N, const void *x,
                    const void *Wg, const void *Wu, void *y, void *scratch)
{
    return fused_call(ctx, ATK_OP_GEMV_SWIGLU, stream, dtype, M, K, N, x, NULL, NULL, Wg, Wu, y, 0.0f, scratch);
}

int atk_rmsnorm_gemv_swiglu(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N,
                            const void *x, const void *w, const void *Wg, const void *Wu, void *y, float eps,
                            void *scratch)
{
    return fused_call(ctx, ATK_OP_RMSNORM_GEMV_SWIGLU, stream, dtype, M, K, N, x, NULL, w, Wg, Wu, y, eps, scratch);
}

int atk_gemma_rmsnorm_gemv_swiglu(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N,
                                  const void *x, const void *w, const void *Wg, const void *Wu, void *y, float eps,
                                  void *scratch)
{
    return fused_call(ctx, ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU, stream, dtype, M, K, N, x, NULL, w, Wg, Wu, y, eps,
                      scratch);
}

int atk_add_rmsnorm_gemv(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N, const void *x,
                         void *residual, const void *w, const void *W, void *y, float eps, void *scratch)
{
    return fused_call(ctx, ATK_OP_ADD_RMSNORM_GEMV, stream, dtype, M, K, N, x, residual, w, W, NULL, y, eps, scratch);
}

int atk_add_gemma_rmsnorm_gemv(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N,
                               const void *x, void *residual, const void *w, const void *W, void *y, float eps,
                               void *scratch)
{
    return fused_call(ctx, ATK_OP_ADD_GEMMA_RMSNORM_GEMV, stream, dtype, M, K, N, x, residual, w, W, NULL, y, eps,
                      scratch);
}
