/*
** atk_override.c — what `autotune validate` measured, applied at open: where
** the runtime's choice at a call shape lost to the fallback, calls of that
** exact shape fall back. An override names the entry it measured (its key
** digest); one whose shape the table now serves otherwise is stale and
** ignored, so a retuned table never inherits an old verdict. Also the
** report's lines that list each shape's tuned buckets.
*/
#include "atk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

atk_override *atk__overrides_push(atk_rows *rows)
{
    if (rows->nov == rows->ovcap) {
        size_t cap = rows->ovcap ? 2 * rows->ovcap : 16;
        atk_override *v = realloc(rows->ov, cap * sizeof *v);
        if (!v)
            return NULL;
        rows->ov = v;
        rows->ovcap = cap;
    }
    atk_override *o = &rows->ov[rows->nov++];
    memset(o, 0, sizeof *o);
    return o;
}

int atk__override_row(atk_rows *rows, const char *name, int cc, int sms, const char *device, int dcc, int dsms,
                      const char *op, const char *dtype, const char *shape, const char *chosen,
                      const char *verdict, double us, double base_us)
{
    int o = atk__op_parse(op), dt = atk__dtype_parse(dtype), d[3];
    int wrong = !strcmp(verdict, "wrong");
    if (strcmp(device, name) || dcc != cc || dsms != sms || (!wrong && strcmp(verdict, "slower")) || o < 0 ||
        dt < 0 || !atk__parse_shape(shape, atk__is_gemv(o) ? 3 : 2, d) || strlen(chosen) != 64)
        return ATK_OK;
    atk_override *v = atk__overrides_push(rows);
    if (!v)
        return atk__fail(NULL, ATK_ERR_NOMEM, "atk: out of memory");
    v->op = o, v->dtype = dt, v->M = d[0], v->K = d[1], v->N = atk__is_gemv(o) ? d[2] : 0;
    snprintf(v->chosen, sizeof v->chosen, "%s", chosen);
    v->us = us, v->base_us = base_us, v->wrong = wrong;
    return ATK_OK;
}

static void shape_text(char *buf, size_t len, int op, int M, int K, int N)
{
    if (atk__is_gemv(op))
        snprintf(buf, len, "%dx%dx%d", M, K, N);
    else
        snprintf(buf, len, "%dx%d", M, K);
}

int atk__overrides_apply(atk_ctx *ctx, const atk_override *ov, size_t n)
{
    int *choice = NULL, *path = NULL, st = ATK_OK;
    size_t added = 0, applied = 0;
    if (!n)
        return ATK_OK;
    if (!(choice = calloc(n, sizeof *choice)) || !(path = calloc(n, sizeof *path))) {
        st = atk__fail(NULL, ATK_ERR_NOMEM, "atk: out of memory");
        goto done;
    }
    /* every decision first, on the table as tuned: applying one override
    ** must not change what another one is compared with */
    for (size_t i = 0; i < n; i++) {
        choice[i] = atk__decide(ctx, ov[i].op, ov[i].dtype, ov[i].M, ov[i].K, ov[i].N, &path[i]);
        if (choice[i] >= 0 && path[i] != ATK_PATH_TUNED)
            added++;
    }
    if (added) {
        atk_entry *v = realloc(ctx->entries, (ctx->nentries + added) * sizeof *v);
        if (!v) {
            st = atk__fail(NULL, ATK_ERR_NOMEM, "atk: out of memory");
            goto done;
        }
        ctx->entries = v;
    }
    for (size_t i = 0; i < n; i++) {
        const atk_override *o = &ov[i];
        char shape[64];
        shape_text(shape, sizeof shape, o->op, o->M, o->K, o->N);
        const atk_entry *e = choice[i] >= 0 ? &ctx->entries[choice[i]] : NULL;
        if (!e || e->strategy == ATK_S_BASELINE || strcmp(e->key_sha, o->chosen)) {
            atk__report(ctx, "  %s %s %s: validation override is stale (the table now serves it %s): ignored",
                        atk_op_name(o->op), o->dtype == ATK_BF16 ? "bf16" : "fp16", shape,
                        !e || e->strategy == ATK_S_BASELINE ? "by the fallback" : "otherwise");
            continue;
        }
        atk_entry *t;
        if (path[i] == ATK_PATH_TUNED) {
            t = &ctx->entries[choice[i]];
        } else {
            t = &ctx->entries[ctx->nentries++];
            *t = *e;
            t->M = o->M, t->K = o->K, t->N = o->N;
            t->strategy = ATK_S_BASELINE;
            t->inferable = t->batch = 0;
            t->synthetic = 1;
            t->mod = NULL, t->fn = NULL;
            snprintf(t->shape, sizeof t->shape, "%s", shape);
        }
        if (t->overridden)
            continue; /* a duplicate: the first one holds */
        t->overridden = 1;
        t->val_us = o->us, t->val_base_us = o->base_us, t->val_wrong = o->wrong;
        applied++;
    }
    if (applied)
        atk__report(ctx, "  %zu validation overrides: those shapes fall back (atk_explain says why)", applied);
    if (added) {
        free(ctx->index);
        ctx->index = NULL;
        st = atk__index_build(ctx);
    }
done:
    free(choice);
    free(path);
    return st;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void atk__report_buckets(atk_ctx *ctx)
{
    char line[512];
    for (size_t i = 0; i < ctx->nentries; i++) {
        const atk_entry *e = &ctx->entries[i], *f;
        size_t j, len = 0;
        if (e->synthetic)
            continue;
        for (j = 0; j < i; j++) { /* the first entry of its (op, dtype, K, N) prints the line */
            f = &ctx->entries[j];
            if (!f->synthetic && f->op == e->op && f->dtype == e->dtype && f->K == e->K && f->N == e->N)
                break;
        }
        if (j < i)
            continue;
        int ms[64], nm = 0, top = 0;
        for (j = i; j < ctx->nentries && nm < 64; j++) {
            f = &ctx->entries[j];
            if (!f->synthetic && f->op == e->op && f->dtype == e->dtype && f->K == e->K && f->N == e->N)
                ms[nm++] = f->M;
        }
        qsort(ms, (size_t)nm, sizeof *ms, cmp_int);
        char kn[48];
        if (atk__is_gemv(e->op))
            snprintf(kn, sizeof kn, "%dx%d", e->K, e->N);
        else
            snprintf(kn, sizeof kn, "H=%d", e->K);
        len = (size_t)snprintf(line, sizeof line, "  buckets %s %s %s:", atk_op_name(e->op),
                               e->dtype == ATK_BF16 ? "bf16" : "fp16", kn);
        for (int k = 0; k < nm && len < sizeof line; k++) {
            for (j = 0; j < ctx->nentries; j++) {
                f = &ctx->entries[j];
                if (!f->synthetic && f->op == e->op && f->dtype == e->dtype && f->K == e->K && f->N == e->N &&
                    f->M == ms[k])
                    break;
            }
            const char *what = f->strategy == ATK_S_BASELINE
                                   ? (atk__is_fused(e->op) ? "unfused" : atk__is_gemv(e->op) ? "cublas" : "naive")
                                                             : f->strategy_name;
            len += (size_t)snprintf(line + len, sizeof line - len, " %s=%d %s%s%s", atk__is_gemv(e->op) ? "M" : "T",
                                    ms[k], what, f->batch ? " (serves smaller)" : "", k + 1 < nm ? "," : "");
            top = ms[k];
        }
        if (len < sizeof line)
            snprintf(line + len, sizeof line - len, "; above %d: fallback", top);
        atk__report(ctx, "%s", line);
    }
}
