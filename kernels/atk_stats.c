/*
** atk_stats.c — what a context can tell about itself: per-op counters of
** how calls were served (relaxed atomics: a snapshot, never a lock on the
** launch path), what atk_open found, and the report of what fell back why.
*/
#include "atk_internal.h"

#include <string.h>

#define LOAD(field) atomic_load_explicit(&(field), memory_order_relaxed)
#define ZERO(field) atomic_store_explicit(&(field), 0, memory_order_relaxed)

int atk_stats(const atk_ctx *ctx, int op, atk_op_stats *out)
{
    if (!ctx || !out || op < 0 || op >= ATK_NOPS)
        return atk__fail(ctx, ATK_ERR_USAGE, "atk_stats: %s", !ctx || !out ? "NULL argument" : "unknown op");
    atk_counters *c = (atk_counters *)&ctx->count[op]; /* atomic loads only */
    out->calls = LOAD(c->calls);
    out->tuned = LOAD(c->tuned);
    out->inferred = LOAD(c->inferred);
    out->fallback = LOAD(c->fallback);
    out->missed = LOAD(c->missed);
    out->rejected = LOAD(c->rejected);
    out->bucket = LOAD(c->bucket);
    atk__clear(ctx);
    return ATK_OK;
}

void atk_stats_reset(atk_ctx *ctx)
{
    if (!ctx)
        return;
    for (int i = 0; i < ATK_NOPS; i++) {
        atk_counters *c = &ctx->count[i];
        ZERO(c->calls);
        ZERO(c->tuned);
        ZERO(c->inferred);
        ZERO(c->fallback);
        ZERO(c->missed);
        ZERO(c->rejected);
        ZERO(c->bucket);
    }
}

int atk_get_info(const atk_ctx *ctx, atk_info *out)
{
    if (!ctx || !out)
        return atk__fail(ctx, ATK_ERR_USAGE, "atk_get_info: NULL argument");
    *out = ctx->info;
    atk__clear(ctx);
    return ATK_OK;
}

const char *atk_report(const atk_ctx *ctx)
{
    if (!ctx)
        return "";
    return ctx->report ? ctx->report : "";
}
