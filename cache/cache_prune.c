/*
** cache_prune.c — `autotune prune`: the winners the runtime never serves
** deleted. For one shape (op, dtype, shape) of one GPU (name, cc, SMs)
** under one driver, NVRTC version and set of compile options the runtime
** loads the row it ranks first (kernels/atk_build.c: the lower measured
** µs, an unmeasured one last, then the lower key_sha); the others are dead
** weight and, where they answered another spec or other templates, stale.
** They come from imports and merges (which keep the union) and from caches
** written before a retune replaced its stale answer itself
** (at_cache_replace_winners). Invariant: nothing the runtime serves
** changes (rows of other drivers, NVRTC versions or options stay: it ranks
** those apart); all of it goes in one transaction, or nothing.
*/
#include "cache_internal.h"
#include "table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Every winner, each shape's rows together and the one served first. */
static const char PRUNE_SQL[] =
    "SELECT key_sha, op, dtype, shape, device, cc, sms, driver_version, nvrtc_version, options, us FROM winners"
    " ORDER BY device, cc, sms, op, dtype, shape, driver_version, nvrtc_version, options,"
    " (us IS NULL OR us < 0), us, key_sha";

/* A row as the ranking sees it. */
typedef struct prune_row {
    char key_sha[65], op[32], dtype[24], shape[64], device[128], options[160];
    int cc, sms, driver, nvrtc;
    double us; /* < 0: not measured */
} prune_row;

static void text(sqlite3_stmt *s, int i, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static void read_row(sqlite3_stmt *s, prune_row *r)
{
    text(s, 0, r->key_sha, sizeof r->key_sha);
    text(s, 1, r->op, sizeof r->op);
    text(s, 2, r->dtype, sizeof r->dtype);
    text(s, 3, r->shape, sizeof r->shape);
    text(s, 4, r->device, sizeof r->device);
    r->cc = sqlite3_column_int(s, 5);
    r->sms = sqlite3_column_int(s, 6);
    r->driver = sqlite3_column_int(s, 7);
    r->nvrtc = sqlite3_column_int(s, 8);
    text(s, 9, r->options, sizeof r->options);
    r->us = sqlite3_column_type(s, 10) == SQLITE_NULL ? -1.0 : sqlite3_column_double(s, 10);
}

static int same_shape(const prune_row *a, const prune_row *b)
{
    return !strcmp(a->device, b->device) && a->cc == b->cc && a->sms == b->sms && !strcmp(a->op, b->op) &&
           !strcmp(a->dtype, b->dtype) && !strcmp(a->shape, b->shape) && a->driver == b->driver &&
           a->nvrtc == b->nvrtc && !strcmp(a->options, b->options);
}

static void us_text(double us, char *buf, size_t len)
{
    if (us >= 0)
        snprintf(buf, len, "%.2f us", us);
    else
        snprintf(buf, len, "not measured");
}

static int sql_fail(at_cache *c, int rc, const char *what)
{
    return at_fail(rc == SQLITE_NOMEM ? AT_ERR_NOMEM : AT_ERR_CACHE, "sqlite: %s: %s: %s", c->path, what,
                   sqlite3_errmsg(c->db));
}

/* Finds the rows to delete (keys into *dead, a malloc'ed array of 65-byte
** digests; dead NULL: counted only), printing one line each to report (may
** be NULL). */
static int find_dead(at_cache *c, FILE *report, char (**dead)[65], int *ndead, int *nrows)
{
    sqlite3_stmt *s = NULL;
    prune_row kept, r;
    int rc, cap = 0, st = AT_OK;
    if (dead)
        *dead = NULL;
    *ndead = *nrows = 0;
    if ((rc = sqlite3_prepare_v2(c->db, PRUNE_SQL, -1, &s, NULL)) != SQLITE_OK)
        return sql_fail(c, rc, "read winners");
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        read_row(s, &r);
        if (!(*nrows)++ || !same_shape(&kept, &r)) {
            kept = r; /* the first of its shape: the one served */
            continue;
        }
        if (!dead) {
            ++*ndead;
            continue;
        }
        if (*ndead == cap) {
            cap = cap ? 2 * cap : 16;
            char(*grown)[65] = realloc(*dead, (size_t)cap * sizeof **dead);
            if (!grown) {
                st = at_fail(AT_ERR_NOMEM, "out of memory");
                break;
            }
            *dead = grown;
        }
        memcpy((*dead)[(*ndead)++], r.key_sha, 65);
        if (!report)
            continue;
        char ud[32], uk[32];
        us_text(r.us, ud, sizeof ud);
        us_text(kept.us, uk, sizeof uk);
        fprintf(report, "  %s %s %s on %s (driver %d): %s (key %.8s) goes, %s (key %.8s) stays\n", r.op, r.dtype,
                r.shape, r.device, r.driver, ud, r.key_sha, uk, kept.key_sha);
    }
    if (st == AT_OK && rc != SQLITE_DONE)
        st = sql_fail(c, rc, "read winners");
    sqlite3_finalize(s);
    return st;
}

static int delete_dead(at_cache *c, char (*dead)[65], int ndead)
{
    sqlite3_stmt *s = NULL;
    int rc;
    if ((rc = sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL)) != SQLITE_OK)
        return sql_fail(c, rc, "begin");
    if ((rc = sqlite3_prepare_v2(c->db, "DELETE FROM winners WHERE key_sha = ?1", -1, &s, NULL)) == SQLITE_OK) {
        for (int i = 0; i < ndead && rc == SQLITE_OK; i++) {
            sqlite3_reset(s);
            if ((rc = sqlite3_bind_text(s, 1, dead[i], -1, SQLITE_STATIC)) == SQLITE_OK &&
                (rc = sqlite3_step(s)) == SQLITE_DONE)
                rc = SQLITE_OK;
        }
        sqlite3_finalize(s);
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        int st = sql_fail(c, rc, "delete winners (nothing deleted)");
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
        return st;
    }
    return AT_OK;
}

int at_cache_count_unserved(at_cache *c, int *n)
{
    int nrows = 0;
    return find_dead(c, NULL, NULL, n, &nrows);
}

void at_cache_hint_unserved(at_cache *c, FILE *f)
{
    int n = 0;
    if (f && at_cache_count_unserved(c, &n) == AT_OK && n > 0)
        fprintf(f, "%d winner%s never served (another row of the same shape, GPU and driver measured faster):"
                   " autotune prune removes %s\n",
                n, n == 1 ? " is" : "s are", n == 1 ? "it" : "them");
}

int at_table_prune(const char *db_path, int dry_run, FILE *report)
{
    struct stat sb;
    at_cache *c = NULL;
    char(*dead)[65] = NULL;
    int ndead = 0, nrows = 0, st;
    if (stat(db_path, &sb) != 0 && errno == ENOENT) {
        fprintf(report, "nothing to prune (no cache at %s)\n", db_path);
        return AT_OK;
    }
    st = dry_run ? at_cache_open_readonly(db_path, &c) : at_cache_open(db_path, &c);
    if (st == AT_OK)
        st = find_dead(c, report, &dead, &ndead, &nrows);
    if (st == AT_OK && ndead && !dry_run)
        st = delete_dead(c, dead, ndead);
    if (st == AT_OK) {
        if (!ndead)
            fprintf(report, "nothing to prune: %s holds one winner per shape, GPU, driver and NVRTC (%d)\n",
                    db_path, nrows);
        else
            fprintf(report, "%s %d of %d winners in %s: rows the runtime never serves%s\n",
                    dry_run ? "would prune" : "pruned", ndead, nrows, db_path,
                    dry_run ? " (--dry-run: nothing deleted)" : "");
    }
    free(dead);
    at_cache_close(c);
    return st;
}
