/*
** atk_validations.c — the overrides `autotune validate` stored in an
** autotune SQLite cache (its optional `validations` table; the columns are
** cache/cache_validation.c's [VALIDATIONS]), read-only. A cache that was
** never validated has no such table: no overrides, not an error.
*/
#include "atk_internal.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

static const char *text_col(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? (const char *)t : "";
}

int atk__read_sqlite_overrides(const char *path, const char *name, int cc, int sms, atk_rows *rows)
{
    static const char sql[] = "SELECT device, cc, sms, op, dtype, shape, chosen, verdict, us, baseline_us"
                              " FROM validations WHERE device = ?1 AND cc = ?2 AND sms = ?3"
                              " AND verdict IN ('slower', 'wrong') ORDER BY op, dtype, shape";
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int st = ATK_OK, rc, have = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        goto done; /* the winners' reader has already said why */
    sqlite3_busy_timeout(db, 2000);
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'validations'",
                           -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        have = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    s = NULL;
    if (!have)
        goto done;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK || sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC) ||
        sqlite3_bind_int(s, 2, cc) || sqlite3_bind_int(s, 3, sms)) {
        st = atk__fail(NULL, ATK_ERR_TABLE, "sqlite: %s: cannot read validations: %s", path, sqlite3_errmsg(db));
        goto done;
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && st == ATK_OK)
        st = atk__override_row(rows, name, cc, sms, text_col(s, 0), sqlite3_column_int(s, 1),
                               sqlite3_column_int(s, 2), text_col(s, 3), text_col(s, 4), text_col(s, 5),
                               text_col(s, 6), text_col(s, 7), sqlite3_column_double(s, 8),
                               sqlite3_column_double(s, 9));
    if (st == ATK_OK && rc != SQLITE_DONE)
        st = atk__fail(NULL, ATK_ERR_TABLE, "sqlite: %s: reading validations: %s", path, sqlite3_errmsg(db));
done:
    sqlite3_finalize(s);
    sqlite3_close(db);
    return st;
}
