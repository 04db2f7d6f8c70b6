/*
** atk_sqlite.c — rows from an autotune SQLite cache, opened read-only: the
** winners of one GPU (by name, compute capability and SM count), with their
** cubins. Never writes, never creates: a missing file, a file that is not
** SQLite, another schema or a corrupt page is a reason, not a crash. The
** column names are cache/schema.sql's, schema version 1 ([CACHE_KEY]).
*/
#include "atk_internal.h"
#include "cache.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATK_SCHEMA_VERSION 1
_Static_assert(ATK_SCHEMA_VERSION == AT_SCHEMA_VERSION, "atk reads another schema than the tuner writes");

static int one_int(sqlite3 *db, const char *sql, int *out)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        *out = sqlite3_column_int(s, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(s);
    return rc;
}

static void col_text(sqlite3_stmt *s, int i, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static unsigned col_uint(sqlite3_stmt *s, int i)
{
    sqlite3_int64 v = sqlite3_column_int64(s, i);
    return v < 0 || v > 0xffffffffLL ? 0u : (unsigned)v;
}

int atk__read_sqlite(const char *path, const char *name, int cc, int sms, atk_rows *rows)
{
    static const char sql[] =
        "SELECT key_sha, op, dtype, shape, device, cc, sms, driver_version, nvrtc_version, space_sha,"
        " options, tuner_version, strategy, kernel, template_name, params, us, grid_x, grid_y, grid_z,"
        " block_x, block_y, block_z, smem, cubin, cubin_sha FROM winners"
        " WHERE device = ?1 AND cc = ?2 AND sms = ?3 ORDER BY key_sha";
    static const char magic[16] = "SQLite format 3";
    char head[16] = {0};
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int v = 0, n = 0, total = 0, st = ATK_OK, rc;
    FILE *f = fopen(path, "rb");
    if (!f)
        return atk__fail(NULL, ATK_ERR_IO, "atk: cannot read %s: %s", path, strerror(errno));
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    if (got != sizeof head || memcmp(head, magic, sizeof head))
        return atk__fail(NULL, ATK_ERR_TABLE, "atk: %s is not an autotune table (neither SQLite nor JSON)", path);
    rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
    if (rc != SQLITE_OK) {
        st = atk__fail(NULL, ATK_ERR_TABLE, "sqlite: cannot open %s: %s", path,
                       db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        goto done;
    }
    sqlite3_busy_timeout(db, 2000); /* a tuner may be writing it */
    if ((rc = one_int(db, "PRAGMA user_version", &v)) != SQLITE_OK ||
        (v == ATK_SCHEMA_VERSION &&
         (rc = one_int(db,
                       "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                       " AND name IN ('devices', 'trials', 'winners')",
                       &n)) != SQLITE_OK)) {
        st = atk__fail(NULL, ATK_ERR_TABLE, "sqlite: %s is not an autotune cache (%s)", path, sqlite3_errmsg(db));
        goto done;
    }
    if (v != ATK_SCHEMA_VERSION || n != 3) {
        st = atk__fail(NULL, ATK_ERR_TABLE, "atk: %s is not an autotune cache of schema %d (user_version %d%s)",
                       path, ATK_SCHEMA_VERSION, v, n != 3 ? ", other tables" : "");
        goto done;
    }
    if ((rc = one_int(db, "SELECT count(*) FROM winners", &total)) != SQLITE_OK ||
        (rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL)) != SQLITE_OK ||
        (rc = sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC)) != SQLITE_OK ||
        (rc = sqlite3_bind_int(s, 2, cc)) != SQLITE_OK || (rc = sqlite3_bind_int(s, 3, sms)) != SQLITE_OK) {
        st = atk__fail(NULL, ATK_ERR_TABLE, "sqlite: %s: cannot read winners: %s", path, sqlite3_errmsg(db));
        goto done;
    }
    rows->total = (size_t)total;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        atk_row *r = atk__rows_push(rows);
        if (!r) {
            st = atk__fail(NULL, ATK_ERR_NOMEM, "atk: out of memory reading %s", path);
            goto done;
        }
        char *const text[] = {r->key_sha, r->op, r->dtype, r->shape, r->device};
        const size_t cap[] = {sizeof r->key_sha, sizeof r->op, sizeof r->dtype, sizeof r->shape, sizeof r->device};
        for (int i = 0; i < 5; i++)
            col_text(s, i, text[i], cap[i]);
        r->cc = sqlite3_column_int(s, 5);
        r->sms = sqlite3_column_int(s, 6);
        r->driver_version = sqlite3_column_int(s, 7);
        r->nvrtc_version = sqlite3_column_int(s, 8);
        col_text(s, 9, r->space_sha, sizeof r->space_sha);
        col_text(s, 10, r->options, sizeof r->options);
        col_text(s, 11, r->tuner_version, sizeof r->tuner_version);
        col_text(s, 12, r->strategy, sizeof r->strategy);
        col_text(s, 13, r->kernel, sizeof r->kernel);
        col_text(s, 14, r->template_name, sizeof r->template_name);
        col_text(s, 15, r->params, sizeof r->params);
        r->us = sqlite3_column_type(s, 16) == SQLITE_NULL ? -1.0 : sqlite3_column_double(s, 16);
        for (int i = 0; i < 3; i++) {
            r->grid[i] = col_uint(s, 17 + i);
            r->block[i] = col_uint(s, 20 + i);
        }
        r->smem = col_uint(s, 23);
        const void *blob = sqlite3_column_blob(s, 24);
        size_t size = (size_t)sqlite3_column_bytes(s, 24);
        col_text(s, 25, r->cubin_sha, sizeof r->cubin_sha);
        if (blob && size) {
            unsigned char *copy = malloc(size);
            if (!copy) {
                st = atk__fail(NULL, ATK_ERR_NOMEM, "atk: out of memory (cubin of %zu bytes)", size);
                goto done;
            }
            memcpy(copy, blob, size);
            r->cubin = copy;
            r->cubin_size = size;
            r->cubin_owned = 1;
        }
    }
    if (rc != SQLITE_DONE)
        st = atk__fail(NULL, ATK_ERR_TABLE, "sqlite: %s: reading winners: %s", path, sqlite3_errmsg(db));
done:
    sqlite3_finalize(s);
    sqlite3_close(db);
    return st;
}
