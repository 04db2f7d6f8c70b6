/*
** atk_lookup.c — which kernel serves a call. An exact hit is one probe
** sequence in an open-addressing index over (op, dtype, M, K, N), built at
** open and never changed. A miss looks for the nearest tuned shape of the
** same op and dtype whose kernel is valid for the asked shape (the
** template's preconditions hold and its grid recomputes, atk_entry.c); the
** answer, inferred or fallback, is remembered in a lock-free memo whose
** slots are written once, so repeated calls cost a hash and a probe.
*/
#include "atk_internal.h"

#include <math.h>
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

/* |log2| distance between shapes: a factor of two in any dimension costs 1. */
static double distance(const atk_entry *e, int M, int K, int N)
{
    double d = fabs(log2((double)M / e->M)) + fabs(log2((double)K / e->K));
    if (e->op == ATK_OP_GEMV)
        d += fabs(log2((double)N / e->N));
    return d;
}

/* The nearest valid inferable entry, or -1. Ties keep the first (entries
** are sorted by op, dtype, M, K, N). */
static int nearest(const atk_ctx *ctx, int op, int dtype, int M, int K, int N)
{
    int best = -1;
    double bd = 0.0;
    unsigned g[3], b[3];
    for (size_t i = 0; i < ctx->nentries; i++) {
        const atk_entry *e = &ctx->entries[i];
        if (e->op != op || e->dtype != dtype || !e->inferable || !atk__entry_geometry(e, M, K, N, g, b))
            continue;
        double d = distance(e, M, K, N);
        if (best < 0 || d < bd) {
            best = (int)i;
            bd = d;
        }
    }
    return best;
}

#define MEMO_PROBES 8

int atk__lookup(atk_ctx *ctx, int op, int dtype, int M, int K, int N, int *path)
{
    uint64_t hash = mix(op, dtype, M, K, N);
    int i = exact(ctx, op, dtype, M, K, N, hash);
    if (i >= 0) {
        *path = ATK_PATH_TUNED;
        return i;
    }
    if (ctx->flags & ATK_NO_INFER) {
        *path = ATK_PATH_FALLBACK;
        return -1;
    }
    size_t h = (size_t)(hash >> 20) & (ATK_MEMO_SLOTS - 1);
    atk_memo_slot *free_slot = NULL;
    for (int p = 0; p < MEMO_PROBES; p++) {
        atk_memo_slot *s = &ctx->memo[(h + (size_t)p) & (ATK_MEMO_SLOTS - 1)];
        unsigned state = atomic_load_explicit(&s->state, memory_order_acquire);
        if (state == 2u && s->op == op && s->dtype == dtype && s->M == M && s->K == K && s->N == N) {
            *path = s->entry >= 0 ? ATK_PATH_INFERRED : ATK_PATH_FALLBACK;
            return s->entry;
        }
        if (state == 0u && !free_slot)
            free_slot = s;
    }
    i = nearest(ctx, op, dtype, M, K, N);
    *path = i >= 0 ? ATK_PATH_INFERRED : ATK_PATH_FALLBACK;
    unsigned expect = 0u;
    if (free_slot && atomic_compare_exchange_strong_explicit(&free_slot->state, &expect, 1u, memory_order_acq_rel,
                                                             memory_order_relaxed)) {
        free_slot->op = op, free_slot->dtype = dtype;
        free_slot->M = M, free_slot->K = K, free_slot->N = N;
        free_slot->entry = i;
        atomic_store_explicit(&free_slot->state, 2u, memory_order_release);
    }
    return i;
}

int atk_explain(atk_ctx *ctx, int op, int dtype, int64_t M, int64_t K, int64_t N, atk_choice *out)
{
    static const char *const naive = "norm_naive";
    int path;
    if (!ctx || !out)
        return atk__fail(ctx, ATK_ERR_USAGE, "atk_explain: NULL %s", ctx ? "out" : "context");
    memset(out, 0, sizeof *out);
    if (op < 0 || op >= ATK_NOPS || (dtype != ATK_BF16 && dtype != ATK_FP16) || M < 1 || K < 1 || M > 0x7fffffff ||
        K > 0x7fffffff || (op == ATK_OP_GEMV && (N < 1 || N > 0x7fffffff)))
        return atk__fail(ctx, ATK_ERR_USAGE, "atk_explain: bad op, dtype or shape");
    if (op != ATK_OP_GEMV)
        N = 0;
    int i = atk__lookup(ctx, op, dtype, (int)M, (int)K, (int)N, &path);
    out->path = path;
    const atk_entry *e = i >= 0 ? &ctx->entries[i] : NULL;
    if (e && e->strategy != ATK_S_BASELINE) {
        out->strategy = e->strategy_name;
        out->kernel = e->kernel;
        out->params = e->params;
        out->from = e->shape;
        out->pdl = e->pdl;
        out->recompiled = e->recompiled;
        out->smem = e->smem;
        if (path == ATK_PATH_TUNED) {
            memcpy(out->grid, e->grid, sizeof out->grid);
            memcpy(out->block, e->block, sizeof out->block);
        } else {
            atk__entry_geometry(e, (int)M, (int)K, (int)N, out->grid, out->block);
        }
    } else {
        out->strategy = op == ATK_OP_GEMV ? "cublas" : naive;
        out->kernel = op == ATK_OP_GEMV ? "" : naive;
        out->params = "";
        out->from = e ? e->shape : "";
        if (op != ATK_OP_GEMV) {
            out->grid[0] = (unsigned)M, out->grid[1] = out->grid[2] = 1;
            out->block[0] = 256, out->block[1] = out->block[2] = 1;
        }
    }
    atk__clear(ctx);
    return ATK_OK;
}
