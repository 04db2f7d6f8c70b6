/*
** cache_validation.c — the cache's `validations` table (cache_validation.h):
** what `autotune validate` measured per call shape. The table is optional
** in schema version 1 (schema.sql): a cache made before it gets it from
** the first put, readers treat its absence as no rows, and tuners that
** predate it ignore it.
*/
#include "cache_internal.h"
#include "cache_validation.h"
#include "at_schema_sql.h" /* generated from schema.sql */

#include <stdlib.h>
#include <string.h>

#define NOW_SQL "strftime('%Y-%m-%dT%H:%M:%fZ','now')"

/* schema.sql's validations statement, alone */
static const char VALIDATIONS_SQL[] = AT_SCHEMA_SQL_VALIDATIONS;

static int fail(at_cache *c, const char *what)
{
    return at_fail(AT_ERR_CACHE, "sqlite: %s: %s: %s", c->path, what, sqlite3_errmsg(c->db));
}

static void text_col(sqlite3_stmt *s, int i, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static double real_col(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? 0.0 : sqlite3_column_double(s, i);
}

int at_validation_is_override(const at_validation *v)
{
    return !strcmp(v->verdict, "slower") || !strcmp(v->verdict, "wrong");
}

int at_cache_list_tuned(at_cache *c, const char *device, int cc, int sms, at_tuned_shape **out, int *n)
{
    const char *sql = device ? "SELECT DISTINCT op, dtype, shape FROM winners WHERE device = ?1 AND cc = ?2"
                               " AND sms = ?3 ORDER BY op, dtype, shape"
                             : "SELECT DISTINCT op, dtype, shape FROM winners ORDER BY op, dtype, shape";
    sqlite3_stmt *s = NULL;
    at_tuned_shape *v = NULL;
    int cap = 0, rc, st = AT_OK;
    *out = NULL, *n = 0;
    if (sqlite3_prepare_v2(c->db, sql, -1, &s, NULL) != SQLITE_OK)
        return fail(c, "listing tuned shapes");
    if (device) {
        sqlite3_bind_text(s, 1, device, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 2, cc);
        sqlite3_bind_int(s, 3, sms);
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        char dtype[16];
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            at_tuned_shape *w = realloc(v, (size_t)cap * sizeof *w);
            if (!w) {
                st = at_fail(AT_ERR_NOMEM, "out of memory");
                break;
            }
            v = w;
        }
        at_tuned_shape *t = &v[*n];
        text_col(s, 0, t->op, sizeof t->op);
        text_col(s, 1, dtype, sizeof dtype);
        text_col(s, 2, t->shape, sizeof t->shape);
        if (at_dtype_parse(dtype, &t->dtype) != AT_OK)
            continue; /* a row of a dtype this build does not know */
        (*n)++;
    }
    if (st == AT_OK && rc != SQLITE_DONE)
        st = fail(c, "listing tuned shapes");
    sqlite3_finalize(s);
    if (st != AT_OK) {
        free(v);
        *n = 0;
        return st;
    }
    *out = v;
    return AT_OK;
}

int at_cache_put_validation(at_cache *c, const at_validation *v)
{
    static const char sql[] =
        "INSERT OR REPLACE INTO validations (device, cc, sms, op, dtype, shape, path, chosen, strategy, from_shape,"
        " bucket, us, us_min, us_max, baseline_us, baseline_min, baseline_max, noise, rel_err, verdict, reason,"
        " created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
        " ?19, ?20, ?21, " NOW_SQL ")";
    sqlite3_stmt *s = NULL;
    int rc;
    if (sqlite3_exec(c->db, VALIDATIONS_SQL, NULL, NULL, NULL) != SQLITE_OK)
        return fail(c, "creating the validations table");
    if (sqlite3_prepare_v2(c->db, sql, -1, &s, NULL) != SQLITE_OK)
        return fail(c, "storing a validation");
    const char *text[] = {v->device, v->op, at_dtype_name(v->dtype), v->shape, v->path, v->chosen, v->strategy,
                          v->from};
    const int at[] = {1, 4, 5, 6, 7, 8, 9, 10};
    for (int i = 0; i < 8; i++)
        sqlite3_bind_text(s, at[i], text[i], -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, v->cc);
    sqlite3_bind_int(s, 3, v->sms);
    sqlite3_bind_int(s, 11, v->bucket);
    const double num[] = {v->us, v->us_min, v->us_max, v->base_us, v->base_min, v->base_max, v->noise, v->err};
    for (int i = 0; i < 8; i++) {
        if (num[i] == num[i]) /* NaN is stored as NULL */
            sqlite3_bind_double(s, 12 + i, num[i]);
        else
            sqlite3_bind_null(s, 12 + i);
    }
    sqlite3_bind_text(s, 20, v->verdict, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 21, v->reason, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? AT_OK : fail(c, "storing a validation");
}

int at_cache_each_validation(at_cache *c, int (*fn)(void *arg, const at_validation *v), void *arg)
{
    static const char sql[] =
        "SELECT device, cc, sms, op, dtype, shape, path, chosen, strategy, from_shape, bucket, us, us_min, us_max,"
        " baseline_us, baseline_min, baseline_max, noise, rel_err, verdict, reason FROM validations"
        " ORDER BY device, cc, sms, op, dtype, shape";
    sqlite3_stmt *s = NULL;
    int rc, st = AT_OK, have = 0;
    if (sqlite3_prepare_v2(c->db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'validations'",
                           -1, &s, NULL) != SQLITE_OK)
        return fail(c, "reading validations");
    if (sqlite3_step(s) == SQLITE_ROW)
        have = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    if (!have)
        return AT_OK;
    if (sqlite3_prepare_v2(c->db, sql, -1, &s, NULL) != SQLITE_OK)
        return fail(c, "reading validations");
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        at_validation v;
        char dtype[16];
        memset(&v, 0, sizeof v);
        text_col(s, 0, v.device, sizeof v.device);
        v.cc = sqlite3_column_int(s, 1);
        v.sms = sqlite3_column_int(s, 2);
        text_col(s, 3, v.op, sizeof v.op);
        text_col(s, 4, dtype, sizeof dtype);
        if (at_dtype_parse(dtype, &v.dtype) != AT_OK)
            continue;
        text_col(s, 5, v.shape, sizeof v.shape);
        text_col(s, 6, v.path, sizeof v.path);
        text_col(s, 7, v.chosen, sizeof v.chosen);
        text_col(s, 8, v.strategy, sizeof v.strategy);
        text_col(s, 9, v.from, sizeof v.from);
        v.bucket = sqlite3_column_int(s, 10);
        double *num[] = {&v.us, &v.us_min, &v.us_max, &v.base_us, &v.base_min, &v.base_max, &v.noise, &v.err};
        for (int i = 0; i < 8; i++)
            *num[i] = real_col(s, 11 + i);
        text_col(s, 19, v.verdict, sizeof v.verdict);
        text_col(s, 20, v.reason, sizeof v.reason);
        if ((st = fn(arg, &v)) != AT_OK)
            break;
    }
    if (st == AT_OK && rc != SQLITE_DONE)
        st = fail(c, "reading validations");
    sqlite3_finalize(s);
    return st;
}
