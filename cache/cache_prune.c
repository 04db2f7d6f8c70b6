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

/* The rows the runtime never serves: per shape of one GPU under one driver,
** NVRTC version and option set, every row ranked after the first (the row
** served; its key and us come along for the report). SQL compares the
** columns whole, so no field is cut to a buffer before the grouping. */
static const char DEAD_SQL[] =
    "SELECT key_sha, op, dtype, shape, device, driver_version, us, kept_key, kept_us FROM ("
    " SELECT *, row_number() OVER w AS rank, first_value(key_sha) OVER w AS kept_key,"
    " first_value(us) OVER w AS kept_us FROM winners"
    " WINDOW w AS (PARTITION BY device, cc, sms, op, dtype, shape, driver_version, nvrtc_version, options"
    " ORDER BY (us IS NULL OR us < 0), us, key_sha))"
    " WHERE rank > 1 ORDER BY device, cc, sms, op, dtype, shape, driver_version, nvrtc_version, options, rank";

static const char *text(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? (const char *)t : "";
}

/* "8.25 us" / "not measured" for column i */
static void us_text(sqlite3_stmt *s, int i, char *buf, size_t len)
{
    if (sqlite3_column_type(s, i) != SQLITE_NULL && sqlite3_column_double(s, i) >= 0)
        snprintf(buf, len, "%.2f us", sqlite3_column_double(s, i));
    else
        snprintf(buf, len, "not measured");
}

/* Finds the rows to delete (keys into *dead, a malloc'ed array of 65-byte
** digests; dead NULL: counted only), printing one line each to report (may
** be NULL); *nrows receives how many winners the cache holds. */
static int find_dead(at_cache *c, FILE *report, char (**dead)[65], int *ndead, int *nrows)
{
    sqlite3_stmt *s = NULL;
    int rc, cap = 0, st = AT_OK;
    if (dead)
        *dead = NULL;
    *ndead = *nrows = 0;
    if ((rc = sqlite3_prepare_v2(c->db, "SELECT count(*) FROM winners", -1, &s, NULL)) != SQLITE_OK ||
        (rc = sqlite3_step(s)) != SQLITE_ROW) {
        st = at_cache_sql_fail(c, rc, "count winners");
        sqlite3_finalize(s);
        return st;
    }
    *nrows = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    if ((rc = sqlite3_prepare_v2(c->db, DEAD_SQL, -1, &s, NULL)) != SQLITE_OK)
        return at_cache_sql_fail(c, rc, "read winners");
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
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
        snprintf((*dead)[(*ndead)++], 65, "%s", text(s, 0));
        if (!report)
            continue;
        char ud[32], uk[32];
        us_text(s, 6, ud, sizeof ud);
        us_text(s, 8, uk, sizeof uk);
        fprintf(report, "  %s %s %s on %s (driver %d): %s (key %.8s) goes, %s (key %.8s) stays\n", text(s, 1),
                text(s, 2), text(s, 3), text(s, 4), sqlite3_column_int(s, 5), ud, text(s, 0), uk, text(s, 7));
    }
    if (st == AT_OK && rc != SQLITE_DONE)
        st = at_cache_sql_fail(c, rc, "read winners");
    sqlite3_finalize(s);
    return st;
}

static int delete_dead(at_cache *c, char (*dead)[65], int ndead)
{
    sqlite3_stmt *s = NULL;
    int rc;
    if ((rc = sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL)) != SQLITE_OK)
        return at_cache_sql_fail(c, rc, "begin");
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
        int st = at_cache_sql_fail(c, rc, "delete winners (nothing deleted)");
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
