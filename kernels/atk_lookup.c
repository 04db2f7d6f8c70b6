/*
** atk_lookup.c — which kernel serves a call (the rule is spelled out at
** enum atk_path in atk.h). An exact hit is one probe sequence in an
** open-addressing index over (op, dtype, M, K, N), built at open and never
** changed. A miss looks for a larger tuned M of the same K, N whose kernel
** reads each weight once (a bucket), then for the nearest valid K, N within
** one bucket; the answer is remembered in a lock-free memo whose slots are
** written once, so repeated calls cost a hash and a probe.
*/
#include "atk_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(int op, int dtype, int M, int K, int N)
{
    uint64_t h = ((uint64_t)(unsigned)op << 56) ^ ((uint64_t)(unsigned)dtype << 48) ^ (uint64_t)(unsigned)M;
    const uint64_t more[2] = {(uint64_t)(unsigned)K, (uint64_t)(unsigned)N};
    for (int i = 0; i < 3; i++) {
        h += 0x9e3779b97f4a7c15ull + (i ? more[i - 1] << 17 : 0);
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    return h;
}

int atk__index_build(atk_ctx *ctx)
{
    size_t size = 16;
    while (size < 2 * ctx->nentries)
        size *= 2;
    if (!(ctx->index = malloc(size * sizeof *ctx->index)))
        return atk__fail(NULL, ATK_ERR_NOMEM, "atk: out of memory");
    for (size_t i = 0; i < size; i++)
        ctx->index[i] = -1;
    ctx->index_mask = size - 1;
    for (size_t i = 0; i < ctx->nentries; i++) {
        const atk_entry *e = &ctx->entries[i];
        size_t h = (size_t)mix(e->op, e->dtype, e->M, e->K, e->N) & ctx->index_mask;
        while (ctx->index[h] >= 0)
            h = (h + 1) & ctx->index_mask;
        ctx->index[h] = (int32_t)i;
    }
    return ATK_OK;
}

static int exact(const atk_ctx *ctx, int op, int dtype, int M, int K, int N, uint64_t hash)
{
    for (size_t h = (size_t)hash & ctx->index_mask;; h = (h + 1) & ctx->index_mask) {
        int32_t i = ctx->index[h];
        if (i < 0)
            return -1;
        const atk_entry *e = &ctx->entries[i];
        if (e->op == op && e->dtype == dtype && e->M == M && e->K == K && e->N == N)
            return i;
    }
}

/* |log2| distance between the K, N of shapes: a factor of two costs 1. */
static double distance(const atk_entry *e, int K, int N)
{
    double d = fabs(log2((double)K / e->K));
    if (atk__is_gemv(e->op))
        d += fabs(log2((double)N / e->N));
    return d;
}

/* The smallest tuned M' >= M of this op and dtype, any K, N (0: none). */
static int bucket_of(const atk_ctx *ctx, int op, int dtype, int M)
{
    int best = 0;
    for (size_t i = 0; i < ctx->nentries; i++) {
        const atk_entry *e = &ctx->entries[i];
        if (e->op == op && e->dtype == dtype && !e->synthetic && e->M >= M && (!best || e->M < best))
            best = e->M;
    }
    return best;
}

/* The entry of the smallest tuned M' > M of this K, N, whatever serves it
** (-1: none). */
static int next_tuned(const atk_ctx *ctx, int op, int dtype, int M, int K, int N)
{
    int best = -1;
    for (size_t i = 0; i < ctx->nentries; i++) {
        const atk_entry *e = &ctx->entries[i];
        if (e->op == op && e->dtype == dtype && e->K == K && e->N == N && !e->synthetic && e->M > M &&
            (best < 0 || e->M < ctx->entries[best].M))
            best = (int)i;
    }
    return best;
}

int atk__decide(const atk_ctx *ctx, int op, int dtype, int M, int K, int N, int *path)
{
    unsigned g[3], b[3];
    int i = exact(ctx, op, dtype, M, K, N, mix(op, dtype, M, K, N)), best = -1;
    if (i >= 0) {
        *path = ATK_PATH_TUNED;
        return i;
    }
    *path = ATK_PATH_FALLBACK;
    /* the smallest larger M of the same K, N whose kernel reads each weight
    ** once for all its tokens: its cost at M is at most its tuned cost */
    for (size_t j = 0; j < ctx->nentries; j++) {
        const atk_entry *e = &ctx->entries[j];
        if (e->op == op && e->dtype == dtype && e->K == K && e->N == N && e->M > M && e->batch &&
            (best < 0 || e->M < ctx->entries[best].M) && atk__entry_geometry(e, M, K, N, g, b))
            best = (int)j;
    }
    if (best >= 0) {
        *path = ATK_PATH_BUCKET;
        return best;
    }
    if (ctx->flags & ATK_NO_INFER)
        return -1;
    /* the fallback won the next tuned M of this K, N: what was measured here
    ** speaks against another shape's kernel */
    int next = next_tuned(ctx, op, dtype, M, K, N);
    if (next >= 0 && ctx->entries[next].strategy == ATK_S_BASELINE)
        return -1;
    /* within one bucket, the nearest other K, N the kernel is valid for (at
    ** M > 1 only a kernel that reads each weight once: an M=1 strategy
    ** tuned at M=2 serves that shape alone); ties keep the first (entries
    ** are sorted by op, dtype, M, K, N). At M > 1 a GEMV kernel must also
    ** take all M tokens in one token group (grid y = 1): each group reads
    ** the whole weight, which the bucket's own shape may have found in L2
    ** (a 2048x32 kernel of 2 tokens a group, tuned at M=16, read its 128
    ** KiB eight times) but a larger one reads from HBM again per group
    ** (served at 2048x8224, M=16, it ran 5x slower than cuBLAS). */
    int mb = bucket_of(ctx, op, dtype, M);
    double bd = 0.0;
    for (size_t j = 0; mb && j < ctx->nentries; j++) {
        const atk_entry *e = &ctx->entries[j];
        if (e->op != op || e->dtype != dtype || e->M != mb || !e->inferable || (M > 1 && !e->batch) ||
            !atk__entry_geometry(e, M, K, N, g, b) || (M > 1 && atk__is_gemv(op) && g[1] > 1))
            continue;
        double d = distance(e, K, N);
        if (best < 0 || d < bd) {
            best = (int)j;
            bd = d;
        }
    }
    if (best >= 0)
        *path = ATK_PATH_INFERRED;
    return best;
}

#define MEMO_PROBES 8

int atk__lookup(atk_ctx *ctx, int op, int dtype, int M, int K, int N, int *path)
{
    uint64_t hash = mix(op, dtype, M, K, N);
    int i = exact(ctx, op, dtype, M, K, N, hash);
    if (i >= 0) {
        *path = ctx->entries[i].overridden ? ATK_PATH_FALLBACK : ATK_PATH_TUNED;
        return i;
    }
    size_t h = (size_t)(hash >> 20) & (ATK_MEMO_SLOTS - 1);
    atk_memo_slot *free_slot = NULL;
    for (int p = 0; p < MEMO_PROBES; p++) {
        atk_memo_slot *s = &ctx->memo[(h + (size_t)p) & (ATK_MEMO_SLOTS - 1)];
        unsigned state = atomic_load_explicit(&s->state, memory_order_acquire);
        if (state == 2u && s->op == op && s->dtype == dtype && s->M == M && s->K == K && s->N == N) {
            *path = s->path;
            return s->entry;
        }
        if (state == 0u && !free_slot)
            free_slot = s;
    }
    i = atk__decide(ctx, op, dtype, M, K, N, path);
    unsigned expect = 0u;
    if (free_slot && atomic_compare_exchange_strong_explicit(&free_slot->state, &expect, 1u, memory_order_acq_rel,
                                                             memory_order_relaxed)) {
        free_slot->op = op, free_slot->dtype = dtype;
        free_slot->M = M, free_slot->K = K, free_slot->N = N;
        free_slot->entry = i;
        free_slot->path = *path;
        atomic_store_explicit(&free_slot->state, 2u, memory_order_release);
    }
    return i;
}

/* The largest tuned M of this K, N (0: none). */
static int largest_m(const atk_ctx *ctx, int op, int dtype, int K, int N)
{
    int m = 0;
    for (size_t i = 0; i < ctx->nentries; i++) {
        const atk_entry *e = &ctx->entries[i];
        if (e->op == op && e->dtype == dtype && e->K == K && e->N == N && !e->synthetic && e->M > m)
            m = e->M;
    }
    return m;
}

/* choice->reason for a decision (see enum atk_path in atk.h). */
static void reason(const atk_ctx *ctx, int op, int dtype, int M, int K, int N, int path, const atk_entry *e,
                   atk_choice *out)
{
    const char *base = atk__is_fused(op)  ? "the unfused sequence"
                       : atk__is_gemv(op) ? "cuBLAS"
                                          : "the naive fused norm",
               *m = atk__is_gemv(op) ? "M" : "T";
    char *r = out->reason;
    size_t len = sizeof out->reason;
    if (e && e->overridden && e->val_wrong) {
        snprintf(r, len, "validated: %s was wrong at %s=%d; %s serves it", e->strategy_name, m, M, base);
    } else if (e && e->overridden) {
        snprintf(r, len, "validated: %s faster at %s=%d (%.2f vs %.2f us for %s)", base, m, M, e->val_base_us,
                 e->val_us, e->strategy_name);
    } else if (path == ATK_PATH_TUNED) {
        snprintf(r, len, e->strategy == ATK_S_BASELINE ? "tuned: %s won at this shape" : "tuned", base);
    } else if (path == ATK_PATH_BUCKET) {
        snprintf(r, len, "bucket %s=%d (%s, %d %s masked)", m, e->M, e->strategy_name, e->M - M,
                 atk__is_gemv(op) ? (e->M - M == 1 ? "token" : "tokens") : (e->M - M == 1 ? "row" : "rows"));
    } else if (path == ATK_PATH_INFERRED) {
        snprintf(r, len, "inferred: %s of %s, bucket %s=%d", e->strategy_name, e->shape, m, e->M);
    } else if (ctx->flags & ATK_NO_INFER) {
        snprintf(r, len, "fallback: not tuned at this shape (ATK_NO_INFER)");
    } else {
        int top = largest_m(ctx, op, dtype, K, N);
        int next = top && M < top ? next_tuned(ctx, op, dtype, M, K, N) : -1;
        if (top && M > top)
            snprintf(r, len, "fallback: no kernel reads the weights once at %s=%d (largest tuned %s here: %d)", m, M,
                     m, top);
        else if (next >= 0 && ctx->entries[next].strategy == ATK_S_BASELINE)
            snprintf(r, len, "fallback: %s won the next tuned %s here (%d)", base, m, ctx->entries[next].M);
        else if (top)
            snprintf(r, len, "fallback: no tuned %s >= %d here reads each weight once", m, M);
        else if (M > 1 && atk__is_gemv(op))
            snprintf(r, len, "fallback: this K, N is not tuned, and no kernel of another takes M=%d in one token group",
                     M);
        else
            snprintf(r, len, "fallback: nothing tuned serves this shape");
    }
}

int atk_explain(atk_ctx *ctx, int op, int dtype, int64_t M, int64_t K, int64_t N, atk_choice *out)
{
    static const char *const naive = "norm_naive";
    int path;
    if (!ctx || !out)
        return atk__fail(ctx, ATK_ERR_USAGE, "atk_explain: NULL %s", ctx ? "out" : "context");
    memset(out, 0, sizeof *out);
    if (op < 0 || op >= ATK_NOPS || (dtype != ATK_BF16 && dtype != ATK_FP16) || M < 1 || K < 1 || M > 0x7fffffff ||
        K > 0x7fffffff || (atk__is_gemv(op) && (N < 1 || N > 0x7fffffff)))
        return atk__fail(ctx, ATK_ERR_USAGE, "atk_explain: bad op, dtype or shape");
    if (!atk__is_gemv(op))
        N = 0;
    int i = atk__lookup(ctx, op, dtype, (int)M, (int)K, (int)N, &path);
    out->path = path;
    const atk_entry *e = i >= 0 ? &ctx->entries[i] : NULL;
    reason(ctx, op, dtype, (int)M, (int)K, (int)N, path, e, out);
    out->key = e && !e->synthetic ? e->key_sha : "";
    if (path == ATK_PATH_BUCKET || path == ATK_PATH_INFERRED)
        out->bucket = e->M;
    if (e && e->strategy != ATK_S_BASELINE && path != ATK_PATH_FALLBACK) {
        out->strategy = e->strategy_name;
        out->kernel = e->kernel;
        out->params = e->params;
        out->from = e->shape;
        out->pdl = e->pdl;
        out->recompiled = e->recompiled;
        out->smem = path == ATK_PATH_TUNED ? e->smem : atk__entry_smem(e, (int)K);
        if (path == ATK_PATH_TUNED) {
            memcpy(out->grid, e->grid, sizeof out->grid);
            memcpy(out->block, e->block, sizeof out->block);
        } else {
            atk__entry_geometry(e, (int)M, (int)K, (int)N, out->grid, out->block);
        }
    } else {
        /* a fused op's fallback: norm, GEMV(s), SiLU-mul, each as its own
        ** call would be served (atk_explain on those ops says how) */
        out->strategy = atk__is_fused(op) ? "unfused" : atk__is_gemv(op) ? "cublas" : naive;
        out->kernel = atk__is_gemv(op) ? "" : naive;
        out->params = "";
        out->from = e && !e->synthetic ? e->shape : "";
        if (!atk__is_gemv(op)) {
            out->grid[0] = (unsigned)M, out->grid[1] = out->grid[2] = 1;
            out->block[0] = 256, out->block[1] = out->block[2] = 1;
        }
    }
    atk__clear(ctx);
    return ATK_OK;
}
