/*
** atk_build.c — from the rows a table holds for this GPU to the context's
** entries: each row is checked (its key rebuilt and digested, its cubin
** hashed, its strategy understood), rows for the same op, dtype and shape
** are ranked (tuned under the present driver first, then under the NVRTC
** atk links, then the lower measured µs) and the best one that loads is
** kept. Then the immutable lookup index and the decision memo are built.
*/
#include "atk_internal.h"

#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
    atk_entry e;
    const atk_row *r;
    int rank_driver, rank_nvrtc; /* 0 = matches the present one (better) */
} cand;

static int linked_nvrtc(void)
{
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    return 1000 * major + 10 * minor;
}

static int cmp_cand(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    const int ka[] = {a->e.op, a->e.dtype, a->e.M, a->e.K, a->e.N, a->rank_driver, a->rank_nvrtc};
    const int kb[] = {b->e.op, b->e.dtype, b->e.M, b->e.K, b->e.N, b->rank_driver, b->rank_nvrtc};
    for (int i = 0; i < 7; i++)
        if (ka[i] != kb[i])
            return ka[i] < kb[i] ? -1 : 1;
    double ua = a->r->us >= 0 ? a->r->us : 1e300, ub = b->r->us >= 0 ? b->r->us : 1e300;
    if (ua != ub)
        return ua < ub ? -1 : 1;
    return strcmp(a->r->key_sha, b->r->key_sha);
}

static int same_problem(const atk_entry *a, const atk_entry *b)
{
    return a->op == b->op && a->dtype == b->dtype && a->M == b->M && a->K == b->K && a->N == b->N;
}

/* Checks that need no GPU; 0 with why[] when the row is unusable. */
static int row_ok(atk_ctx *ctx, const atk_row *r, char *why, size_t len)
{
    char hex[65];
    atk__key_digest(r, hex);
    if (strcmp(hex, r->key_sha)) {
        snprintf(why, len, "key fields do not digest to the stored key_sha (damaged, or another key format)");
        return 0;
    }
    if ((ctx->flags & ATK_SAME_DRIVER) && r->driver_version != ctx->info.driver_version) {
        snprintf(why, len, "tuned under driver %d, this is %d (ATK_SAME_DRIVER)", r->driver_version,
                 ctx->info.driver_version);
        return 0;
    }
    if (r->cubin_size) {
        atk__sha256_hex(r->cubin, r->cubin_size, hex);
        if (strcmp(hex, r->cubin_sha)) {
            snprintf(why, len, "cubin does not match its sha256");
            return 0;
        }
    } else if (r->cubin_sha[0]) {
        snprintf(why, len, "cubin missing (a sha256 is recorded)");
        return 0;
    }
    return 1;
}

int atk__ctx_build(atk_ctx *ctx, atk_rows *rows, atk_sources *src)
{
    atk_info *in = &ctx->info;
    cand *c = NULL;
    size_t nc = 0;
    int st = ATK_OK, nvrtc = linked_nvrtc();
    char why[512];
    size_t unfused = 0;
    in->for_this_gpu = rows->n;
    if (rows->n && !(c = calloc(rows->n, sizeof *c)))
        return atk__fail(NULL, ATK_ERR_NOMEM, "atk: out of memory");
    for (size_t i = 0; i < rows->n; i++) {
        const atk_row *r = &rows->v[i];
        if (!row_ok(ctx, r, why, sizeof why) || !atk__entry_init(&c[nc].e, r, why, sizeof why)) {
            atk__report(ctx, "  %s %s %s: %s: falls back", r->op, r->dtype, r->shape, why);
            in->failed++;
            continue;
        }
        if ((ctx->flags & ATK_UNFUSED) && atk__is_fused(c[nc].e.op)) {
            unfused++; /* neither loaded nor failed: set aside on request */
            continue;
        }
        c[nc].r = r;
        c[nc].rank_driver = r->driver_version != in->driver_version;
        c[nc].rank_nvrtc = r->nvrtc_version != nvrtc;
        nc++;
    }
    if (unfused)
        atk__report(ctx, "  %zu fused-op entr%s not loaded (ATK_UNFUSED): the unfused sequence serves those calls",
                    unfused, unfused == 1 ? "y" : "ies");
    if (nc)
        qsort(c, nc, sizeof *c, cmp_cand);
    if (nc && !(ctx->entries = calloc(nc, sizeof *ctx->entries))) {
        st = atk__fail(NULL, ATK_ERR_NOMEM, "atk: out of memory");
        goto done;
    }
    for (size_t i = 0; i < nc;) {
        size_t j = i;
        int kept = 0;
        for (; j < nc && same_problem(&c[i].e, &c[j].e); j++) {
            if (kept)
                continue; /* a better-ranked row of the same problem loaded */
            atk_entry *e = &ctx->entries[ctx->nentries];
            *e = c[j].e;
            if (atk__entry_load(ctx, e, c[j].r, src, why, sizeof why)) {
                kept = 1;
                ctx->nentries++;
                in->recompiled += (size_t)e->recompiled;
                if (e->recompiled)
                    atk__report(ctx, "  %s %s %s: cubin did not load; recompiled with NVRTC", c[j].r->op,
                                c[j].r->dtype, c[j].r->shape);
            } else {
                atk__report(ctx, "  %s %s %s: %s%s", c[j].r->op, c[j].r->dtype, c[j].r->shape, why,
                            j + 1 < nc && same_problem(&c[i].e, &c[j + 1].e) ? "" : ": falls back");
                in->failed++;
            }
        }
        i = j;
    }
    in->loaded = ctx->nentries;
    in->all_fallback = ctx->nentries == 0;
    atk__report(ctx, "  %zu entries in the table, %zu for this GPU, %zu loaded (%zu recompiled), %zu unusable",
                in->rows, in->for_this_gpu, in->loaded, in->recompiled, in->failed);
    if ((st = atk__index_build(ctx)) != ATK_OK)
        goto done;
    if (!(ctx->memo = calloc(ATK_MEMO_SLOTS, sizeof *ctx->memo))) {
        st = atk__fail(NULL, ATK_ERR_NOMEM, "atk: out of memory");
        goto done;
    }
    for (size_t i = 0; i < ATK_MEMO_SLOTS; i++)
        atomic_init(&ctx->memo[i].state, 0u);
    if (!(ctx->flags & ATK_NO_OVERRIDES) && (st = atk__overrides_apply(ctx, rows->ov, rows->nov)) != ATK_OK)
        goto done;
    atk__report_buckets(ctx);
done:
    free(c);
    return st;
}
