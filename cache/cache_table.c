/*
** cache_table.c — exported tables against a cache: open one read-only, read
** its devices and winners into an at_table, write a table back (the faster
** measured entry wins), and the export / import / merge / show operations on
** cache paths. Invariants: keys are rebuilt from their readable columns and
** re-digested, every value is bound, a table is applied in one transaction or
** not at all, and export and show never write to the cache.
*/
#include "cache_internal.h"
#include "json.h"
#include "table.h"

#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int sql_fail(const char *path, sqlite3 *db, int rc, const char *what)
{
    return at_fail(rc == SQLITE_NOMEM ? AT_ERR_NOMEM : AT_ERR_CACHE, "sqlite: %s: %s: %s", path, what,
                   db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

/* First column of the first row of `sql` as an int (0 without a row). */
static int query_int(sqlite3 *db, const char *sql, int *out)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    *out = 0;
    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW)
        *out = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Read-only: no create, no WAL switch, no schema; refuses what is not ours
** the way at_cache_open does (AT_ERR_CACHE naming the path). Opened
** read-write with PRAGMA query_only rather than SQLITE_OPEN_READONLY: a
** read-only connection to a WAL file creates its -wal and -shm but may not
** remove them at close, so show/export/merge left two files beside every
** cache they read (refused ones too). As the last connection this one
** removes them; the file itself is written only to checkpoint a WAL that
** another connection left behind. A write-protected file still opens
** (SQLite falls back to read-only). */
int at_cache_open_readonly(const char *path, at_cache **out)
{
    struct stat sb;
    at_cache *c;
    int st = AT_OK, rc, v = 0, n = 0;
    if (!out)
        return at_fail(AT_ERR_USAGE, "at_cache_open_readonly: NULL out");
    *out = NULL;
    if (!path || !path[0])
        return at_fail(AT_ERR_USAGE, "cache path is empty");
    if (stat(path, &sb) != 0)
        return at_fail(AT_ERR_CACHE, "no cache at %s", path);
    if (!S_ISREG(sb.st_mode))
        return at_fail(AT_ERR_CACHE, "%s is not an autotune cache (not a regular file)", path);
    if (!(c = calloc(1, sizeof *c)) || !(c->path = strdup(path))) {
        free(c);
        return at_fail(AT_ERR_NOMEM, "out of memory");
    }
    rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE, NULL);
    if (rc != SQLITE_OK) {
        st = sql_fail(path, c->db, rc, "cannot open read-only");
        goto done;
    }
    sqlite3_extended_result_codes(c->db, 0);
    sqlite3_busy_timeout(c->db, 10000);
    rc = sqlite3_exec(c->db, "PRAGMA query_only = 1", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = query_int(c->db, "PRAGMA user_version", &v);
    if (rc == SQLITE_OK)
        rc = query_int(c->db,
                       "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                       " AND name IN ('devices', 'trials', 'winners')",
                       &n);
    if (rc == SQLITE_NOTADB)
        st = at_fail(AT_ERR_CACHE, "%s is not an autotune cache (not an SQLite database)", path);
    else if (rc == SQLITE_CORRUPT)
        st = at_fail(AT_ERR_CACHE, "%s is not an autotune cache (corrupt)", path);
    else if (rc != SQLITE_OK)
        st = sql_fail(path, c->db, rc, "cannot read");
    else if (v > AT_SCHEMA_VERSION)
        st = at_fail(AT_ERR_CACHE, "%s has schema version %d, newer than this autotune (%d)", path, v,
                     AT_SCHEMA_VERSION);
    else if (v != AT_SCHEMA_VERSION || n != 3)
        st = at_fail(AT_ERR_CACHE, "%s is not an autotune cache (user_version %d, %d of its 3 tables)", path,
                     v, n);
done:
    if (st != AT_OK) {
        at_cache_close(c);
        return st;
    }
    *out = c;
    return AT_OK;
}

/* ------------------------------------------------------------------ read */

/* Rows of `devices`, then devices known only from winners' keys (ceilings
** NULL, sizes 0, the newest driver/NVRTC of their keys). ?1 NULL = all. */
static const char DEVICES_SQL[] =
    "SELECT name, cc_major, cc_minor, sms, l2_bytes, mem_bytes, driver_version, nvrtc_major,"
    " nvrtc_minor, read_gbps, copy_gbps, empty_us FROM devices WHERE ?1 IS NULL OR name = ?1"
    " UNION ALL "
    "SELECT device, cc / 10, cc % 10, sms, 0, 0, max(driver_version), max(nvrtc_version) / 1000,"
    " max(nvrtc_version) % 1000 / 10, NULL, NULL, NULL FROM winners w"
    " WHERE (?1 IS NULL OR device = ?1) AND NOT EXISTS (SELECT 1 FROM devices d WHERE"
    " d.name = w.device AND d.cc_major * 10 + d.cc_minor = w.cc AND d.sms = w.sms)"
    " GROUP BY device, cc, sms ORDER BY 1, 2, 3, 4";

static const char WINNERS_SQL[] =
    "SELECT op, dtype, shape, driver_version, nvrtc_version, space_sha, options, tuner_version,"
    " strategy, kernel, template_name, params, us, us_min, us_max, baseline_us, baseline_min,"
    " baseline_max, speedup, bytes, grid_x, grid_y, grid_z, block_x, block_y, block_z, smem, cubin,"
    " cubin_sha FROM winners WHERE device = ?1 AND cc = ?2 AND sms = ?3"
    " ORDER BY op, dtype, shape, driver_version, nvrtc_version, space_sha, options, tuner_version, key_sha";

/* Column text into a fixed field; longer than the field is an error (a
** truncated key would digest to another key). */
static int col_text(at_cache *c, sqlite3_stmt *s, int i, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    size_t n = t ? (size_t)sqlite3_column_bytes(s, i) : 0;
    if (n >= cap || (t && strlen((const char *)t) != n))
        return at_fail(AT_ERR_CACHE, "%s: column %s holds %zu bytes, more than autotune keeps (%zu)", c->path,
                       sqlite3_column_name(s, i), n, cap - 1);
    memcpy(dst, t ? (const char *)t : "", n);
    dst[n] = '\0';
    return AT_OK;
}

#define COL_TEXT(c, s, i, field) col_text((c), (s), (i), (field), sizeof(field))

static double col_double(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}

static int col_int(sqlite3_stmt *s, int i)
{
    return (int)sqlite3_column_int64(s, i);
}

/* 1 when s is valid UTF-8 (json.c's rule): text the JSON writer writes as
** it is, so an export reads back as the same bytes. */
static int utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s), n;
    for (; left; p += n, left -= n)
        if (!(n = at_utf8_seq(p, left)))
            return 0;
    return 1;
}

/* Column i holds an integer in lo..hi (a damaged or hand-edited cache may
** hold anything: 10 * cc_major + cc_minor must not overflow, and an export
** must read back through at_table_read_json's ranges). */
static int in_range(sqlite3_stmt *s, int i, long long lo, long long hi)
{
    long long v = sqlite3_column_int64(s, i);
    return sqlite3_column_type(s, i) == SQLITE_INTEGER && v >= lo && v <= hi;
}

/* One winners row into e (key device fields from d). */
static int read_entry(at_cache *c, sqlite3_stmt *s, const at_device_info *d, at_table_entry *e)
{
    char dtype[24], got[65] = "";
    at_key *k = &e->key;
    at_winner *w = &e->w;
    int st;
    if ((st = COL_TEXT(c, s, 0, k->op)) || (st = COL_TEXT(c, s, 1, dtype)) ||
        (st = COL_TEXT(c, s, 2, k->shape)) || (st = COL_TEXT(c, s, 5, k->space_sha)) ||
        (st = COL_TEXT(c, s, 6, k->options)) || (st = COL_TEXT(c, s, 7, k->tuner_version)) ||
        (st = COL_TEXT(c, s, 8, w->strategy)) || (st = COL_TEXT(c, s, 9, w->kernel)) ||
        (st = COL_TEXT(c, s, 10, w->template_name)) || (st = COL_TEXT(c, s, 11, w->params)) ||
        (st = COL_TEXT(c, s, 28, w->cubin_sha)))
        return st;
    if (at_dtype_parse(dtype, &k->dtype) != AT_OK)
        return at_fail(AT_ERR_CACHE, "%s: winner %s %s has unknown dtype '%s'", c->path, k->op, k->shape,
                       dtype);
    int ranges_ok = in_range(s, 3, 0, INT_MAX) && in_range(s, 4, 0, INT_MAX);
    for (int i = 20; i <= 26; i++)
        ranges_ok &= in_range(s, i, 0, UINT_MAX);
    if (!ranges_ok)
        return at_fail(AT_ERR_CACHE, "%s: winner %s %s %s is damaged (a version, grid, block or smem out of range)",
                       c->path, k->op, dtype, k->shape);
    /* what the JSON reader demands, so that an export always imports again */
    const char *text[] = {k->op,      k->shape,  k->space_sha,        k->options, k->tuner_version,
                          w->strategy, w->kernel, w->template_name, w->params};
    int text_ok = 1;
    for (size_t i = 0; i < sizeof text / sizeof text[0]; i++)
        text_ok &= utf8_valid(text[i]);
    at_shape shape;
    char canon[64];
    if (text_ok && at_shape_parse(k->shape, 3, &shape) != AT_OK && at_shape_parse(k->shape, 2, &shape) != AT_OK)
        text_ok = 0;
    else if (text_ok)
        at_shape_format(&shape, canon, sizeof canon);
    if (!text_ok || !k->op[0] || !w->strategy[0] || strcmp(canon, k->shape) != 0 ||
        strspn(k->space_sha, "0123456789abcdef") != 64 || k->space_sha[64])
        return at_fail(AT_ERR_CACHE,
                       "%s: winner %s %s on %s is damaged (an empty op or strategy, a shape, space_sha or text "
                       "autotune does not write)",
                       c->path, dtype, k->shape, d->name);
    snprintf(k->device, sizeof k->device, "%s", d->name);
    k->cc = 10 * d->cc_major + d->cc_minor;
    k->sms = d->sms;
    k->driver_version = col_int(s, 3);
    k->nvrtc_version = col_int(s, 4);
    at_key_digest(k, e->key_sha);
    double *dv[] = {&w->us,           &w->us_min,       &w->us_max,  &w->baseline_us,
                    &w->baseline_min, &w->baseline_max, &w->speedup, &w->bytes};
    for (int i = 0; i < 8; i++)
        *dv[i] = col_double(s, 12 + i);
    for (int i = 0; i < 3; i++) {
        w->grid[i] = (unsigned)sqlite3_column_int64(s, 20 + i);
        w->block[i] = (unsigned)sqlite3_column_int64(s, 23 + i);
    }
    w->smem = (unsigned)sqlite3_column_int64(s, 26);
    const void *blob = sqlite3_column_blob(s, 27);
    size_t size = (size_t)sqlite3_column_bytes(s, 27);
    if (blob && size > 0)
        at_sha256_hex(blob, size, got);
    if (strcmp(got, w->cubin_sha) != 0)
        return at_fail(AT_ERR_CACHE,
                       "%s: winner %s %s %s on %s: the cubin does not match its sha256 (damaged)", c->path,
                       k->op, dtype, k->shape, d->name);
    if (size > 0) {
        if (!(w->cubin = malloc(size)))
            return at_fail(AT_ERR_NOMEM, "out of memory (cubin of %zu bytes)", size);
        memcpy(w->cubin, blob, size);
        w->cubin_size = size;
    }
    return AT_OK;
}

static int read_device_row(at_cache *c, sqlite3_stmt *s, at_device_info *d)
{
    int st = COL_TEXT(c, s, 0, d->name);
    if (st == AT_OK && (!d->name[0] || !utf8_valid(d->name) || !in_range(s, 1, 1, 99) || !in_range(s, 2, 0, 9) ||
                        !in_range(s, 3, 0, 1000000) || !in_range(s, 4, 0, LLONG_MAX) ||
                        !in_range(s, 5, 0, LLONG_MAX) || !in_range(s, 6, 0, INT_MAX) ||
                        !in_range(s, 7, 0, 1000) || !in_range(s, 8, 0, 1000)))
        return at_fail(AT_ERR_CACHE,
                       "%s: device '%s' is damaged (compute capability %lld.%lld, %lld SMs, or a size or "
                       "version out of range)",
                       c->path, d->name, (long long)sqlite3_column_int64(s, 1),
                       (long long)sqlite3_column_int64(s, 2), (long long)sqlite3_column_int64(s, 3));
    d->cc_major = col_int(s, 1);
    d->cc_minor = col_int(s, 2);
    d->sms = col_int(s, 3);
    d->l2_bytes = sqlite3_column_int64(s, 4);
    d->mem_bytes = sqlite3_column_int64(s, 5);
    d->driver_version = col_int(s, 6);
    d->nvrtc_major = col_int(s, 7);
    d->nvrtc_minor = col_int(s, 8);
    d->read_gbps = col_double(s, 9);
    d->copy_gbps = col_double(s, 10);
    d->empty_us = col_double(s, 11);
    return st;
}

static int read_entries(at_cache *c, sqlite3_stmt *s, at_table_device *td)
{
    size_t cap = 0;
    int rc, st;
    const at_device_info *d = &td->info;
    sqlite3_reset(s);
    if (sqlite3_bind_text(s, 1, d->name, -1, SQLITE_STATIC) ||
        sqlite3_bind_int(s, 2, 10 * d->cc_major + d->cc_minor) || sqlite3_bind_int(s, 3, d->sms))
        return sql_fail(c->path, c->db, sqlite3_errcode(c->db), "bind");
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (td->nentries == cap) {
            size_t ncap = cap ? 2 * cap : 8;
            at_table_entry *ne = realloc(td->entries, ncap * sizeof *ne);
            if (!ne)
                return at_fail(AT_ERR_NOMEM, "out of memory");
            td->entries = ne;
            cap = ncap;
        }
        at_table_entry *e = &td->entries[td->nentries++];
        memset(e, 0, sizeof *e);
        if ((st = read_entry(c, s, d, e)) != AT_OK)
            return st;
        /* rows sorted by the key's fields: two rows of one key are neighbours
        ** (their stored key_sha differs; the recomputed one does not) */
        if (td->nentries > 1 && !strcmp(e[-1].key_sha, e->key_sha))
            return at_fail(AT_ERR_CACHE, "%s: two winners for %s %s %s on %s (damaged)", c->path, e->key.op,
                           at_dtype_name(e->key.dtype), e->key.shape, d->name);
    }
    return rc == SQLITE_DONE ? AT_OK : sql_fail(c->path, c->db, rc, "read winners");
}

/* at_cache_each_validation's callback: the row to its device, if read. */
static int add_validation(void *arg, const at_validation *v)
{
    at_table *t = arg;
    for (size_t i = 0; i < t->ndevices; i++) {
        at_table_device *td = &t->devices[i];
        if (strcmp(td->info.name, v->device) || 10 * td->info.cc_major + td->info.cc_minor != v->cc ||
            td->info.sms != v->sms)
            continue;
        at_validation *nv = realloc(td->validations, (td->nvalidations + 1) * sizeof *nv);
        if (!nv)
            return at_fail(AT_ERR_NOMEM, "out of memory");
        td->validations = nv;
        td->validations[td->nvalidations++] = *v;
        break;
    }
    return AT_OK;
}

int at_cache_read_table(at_cache *c, const char *device, at_table *out)
{
    sqlite3_stmt *sd = NULL, *sw = NULL;
    size_t cap = 0;
    int rc, st = AT_OK, began = 0;
    memset(out, 0, sizeof *out);
    if ((rc = sqlite3_prepare_v2(c->db, DEVICES_SQL, -1, &sd, NULL)) != SQLITE_OK ||
        (rc = sqlite3_prepare_v2(c->db, WINNERS_SQL, -1, &sw, NULL)) != SQLITE_OK) {
        st = sql_fail(c->path, c->db, rc, "prepare");
        goto done;
    }
    /* one read transaction: devices and winners from the same snapshot (or
    ** the caller's own transaction, if one is open: left alone) */
    began = sqlite3_get_autocommit(c->db);
    if (began && (rc = sqlite3_exec(c->db, "BEGIN", NULL, NULL, NULL)) != SQLITE_OK) {
        began = 0;
        st = sql_fail(c->path, c->db, rc, "begin");
        goto done;
    }
    if (device && sqlite3_bind_text(sd, 1, device, -1, SQLITE_STATIC)) {
        st = sql_fail(c->path, c->db, sqlite3_errcode(c->db), "bind");
        goto done;
    }
    while (st == AT_OK && (rc = sqlite3_step(sd)) == SQLITE_ROW) {
        if (out->ndevices == cap) {
            size_t ncap = cap ? 2 * cap : 4;
            at_table_device *nd = realloc(out->devices, ncap * sizeof *nd);
            if (!nd) {
                st = at_fail(AT_ERR_NOMEM, "out of memory");
                break;
            }
            out->devices = nd;
            cap = ncap;
        }
        at_table_device *td = &out->devices[out->ndevices++];
        memset(td, 0, sizeof *td);
        st = read_device_row(c, sd, &td->info);
    }
    if (st == AT_OK && rc != SQLITE_DONE)
        st = sql_fail(c->path, c->db, rc, "read devices");
    for (size_t i = 0; st == AT_OK && i < out->ndevices; i++)
        st = read_entries(c, sw, &out->devices[i]);
    if (st == AT_OK)
        st = at_cache_each_validation(c, add_validation, out);
done:
    sqlite3_finalize(sd);
    sqlite3_finalize(sw);
    if (began && !sqlite3_get_autocommit(c->db))
        sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL); /* ends the read; writes nothing */
    return st;
}

void at_table_free(at_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ndevices; i++) {
        for (size_t j = 0; j < t->devices[i].nentries; j++)
            at_winner_clear(&t->devices[i].entries[j].w);
        free(t->devices[i].entries);
        free(t->devices[i].validations);
    }
    free(t->devices);
    memset(t, 0, sizeof *t);
}

/* ----------------------------------------------------------------- apply */

static int same_double(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

/* Everything the runtime or a reader would see is equal. */
static int same_winner(const at_winner *a, const at_winner *b)
{
    const double da[] = {a->us,           a->us_min,       a->us_max,  a->baseline_us,
                         a->baseline_min, a->baseline_max, a->speedup, a->bytes};
    const double db[] = {b->us,           b->us_min,       b->us_max,  b->baseline_us,
                         b->baseline_min, b->baseline_max, b->speedup, b->bytes};
    for (int i = 0; i < 8; i++)
        if (!same_double(da[i], db[i]))
            return 0;
    for (int i = 0; i < 3; i++)
        if (a->grid[i] != b->grid[i] || a->block[i] != b->block[i])
            return 0;
    return a->smem == b->smem && !strcmp(a->strategy, b->strategy) && !strcmp(a->kernel, b->kernel) &&
           !strcmp(a->template_name, b->template_name) && !strcmp(a->params, b->params) &&
           !strcmp(a->cubin_sha, b->cubin_sha);
}

/* The incoming entry replaces the local one only when strictly faster; a NaN
** measurement never wins. */
static int faster(double incoming, double local)
{
    if (isnan(incoming))
        return 0;
    return isnan(local) || incoming < local;
}

/* One line of output: the text after formatting made printable (names,
** params and ops come from files: tab, CR and LF become a space, other
** control bytes '?', so a name cannot add lines or move the cursor). */
static void put_line(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put_line(FILE *f, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (unsigned char *p = (unsigned char *)line; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = (*p == '\t' || *p == '\n' || *p == '\r') ? ' ' : '?';
    fputs(line, f);
    fputc('\n', f);
}

/* "warp_row TP_VEC=8" / "cublas" */
static void describe(const at_winner *w, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s", w->strategy, w->params[0] ? " " : "", w->params);
}

static int apply_device(at_cache *c, const at_table_device *td, const char *source, FILE *log)
{
    at_device_info have = td->info;
    size_t nnew = 0, nfaster = 0, nkept = 0, nsame = 0;
    int found = 0, st, cc = 10 * td->info.cc_major + td->info.cc_minor;
    if ((st = at_cache_get_device(c, &have, &found)) != AT_OK)
        return st;
    /* a device measured here keeps its own ceilings; one never measured takes them */
    if ((!found || (!(have.read_gbps > 0) && td->info.read_gbps > 0)) &&
        (st = at_cache_put_device(c, &td->info)) != AT_OK)
        return st;
    for (size_t i = 0; i < td->nentries; i++) {
        const at_table_entry *e = &td->entries[i];
        const at_key *k = &e->key;
        at_winner old;
        char dold[320], dnew[320];
        if (strcmp(k->device, td->info.name) != 0 || k->cc != cc || k->sms != td->info.sms)
            return at_fail(AT_ERR_USAGE, "%s: an entry of %s is keyed for another device (%s)", source,
                           td->info.name, k->device);
        if ((st = at_cache_get_winner(c, k, &old, &found)) != AT_OK)
            return st;
        if (found && same_winner(&old, &e->w)) {
            nsame++;
        } else if (found && !faster(e->w.us, old.us)) {
            nkept++;
            describe(&old, dold, sizeof dold);
            describe(&e->w, dnew, sizeof dnew);
            put_line(log,
                     "%s %s %s on %s (sm_%d): kept the local entry (%s, %.4g us) over %s's (%s, %.4g us)",
                    k->op, at_dtype_name(k->dtype), k->shape, td->info.name, cc, dold, old.us, source, dnew,
                    e->w.us);
        } else {
            if (found) {
                nfaster++;
                describe(&old, dold, sizeof dold);
                describe(&e->w, dnew, sizeof dnew);
                put_line(log,
                         "%s %s %s on %s (sm_%d): kept %s's entry (%s, %.4g us) over the local one (%s, %.4g "
                         "us)",
                        k->op, at_dtype_name(k->dtype), k->shape, td->info.name, cc, source, dnew, e->w.us,
                        dold, old.us);
            } else {
                nnew++;
            }
            st = at_cache_put_winner(c, k, &e->w);
        }
        at_winner_clear(&old);
        if (st != AT_OK)
            return st;
    }
    /* validations travel with their table: the incoming row replaces the
    ** local one of the same call shape (its `chosen` says which entry it
    ** measured; the runtime ignores it where that entry no longer serves) */
    for (size_t i = 0; i < td->nvalidations; i++)
        if ((st = at_cache_put_validation(c, &td->validations[i])) != AT_OK)
            return st;
    put_line(log,
             "imported %zu %s for %s (sm_%d) from %s: %zu new, %zu faster than the local one;"
             " %zu local kept (faster), %zu already present",
            nnew + nfaster, nnew + nfaster == 1 ? "entry" : "entries", td->info.name, cc, source, nnew,
            nfaster, nkept, nsame);
    return AT_OK;
}

int at_cache_apply_table(at_cache *c, const at_table *t, const char *source, FILE *report)
{
    char *text = NULL;
    size_t len = 0;
    FILE *log = open_memstream(&text, &len); /* printed only once committed */
    int st;
    if (!log)
        return at_fail(AT_ERR_NOMEM, "out of memory");
    if ((st = at_cache_begin(c)) == AT_OK) {
        for (size_t i = 0; st == AT_OK && i < t->ndevices; i++)
            st = apply_device(c, &t->devices[i], source, log);
        if (st == AT_OK)
            st = at_cache_commit(c); /* rolls back itself on failure */
        else if (!sqlite3_get_autocommit(c->db))
            sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    }
    if (fclose(log) != 0 && st == AT_OK)
        st = at_fail(AT_ERR_NOMEM, "out of memory");
    if (st == AT_OK && report && text)
        fputs(text, report);
    if (st == AT_OK) /* what the union left the runtime never serves */
        at_cache_hint_unserved(c, report);
    free(text);
    return st;
}

/* ---------------------------------------------------------------- export */

/* The devices to export: pointers into t (empty ones left out under `all`). */
static int select_devices(const at_table *t, const char *db, const char *device, int all,
                          const at_table_device ***sel, size_t *nsel)
{
    *sel = NULL;
    *nsel = 0;
    if (t->ndevices == 0)
        return device ? at_fail(AT_ERR_USAGE, "no GPU named '%s' in %s", device, db)
                      : at_fail(AT_ERR_USAGE, "no GPU in %s: nothing tuned yet", db);
    if (!device && !all && t->ndevices > 1) {
        char names[512] = "";
        for (size_t i = 0, pos = 0; i < t->ndevices && pos < sizeof names; i++)
            pos += (size_t)snprintf(names + pos, sizeof names - pos, "%s%s (sm_%d%d)", i ? ", " : "",
                                    t->devices[i].info.name, t->devices[i].info.cc_major,
                                    t->devices[i].info.cc_minor);
        return at_fail(AT_ERR_USAGE, "%s holds %zu GPUs (%s): pass --device NAME or --all", db, t->ndevices,
                       names);
    }
    if (!(*sel = calloc(t->ndevices, sizeof **sel)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < t->ndevices; i++) {
        const at_table_device *d = &t->devices[i];
        if (d->nentries == 0 && !all)
            return at_fail(AT_ERR_USAGE, "%s (sm_%d%d) has no tuned entries in %s: nothing to export",
                           d->info.name, d->info.cc_major, d->info.cc_minor, db);
        if (d->nentries)
            (*sel)[(*nsel)++] = d;
    }
    if (*nsel == 0)
        return at_fail(AT_ERR_USAGE, "nothing tuned in %s: no GPU has entries to export", db);
    return AT_OK;
}

/* Reads the cache at db_path read-only and picks the devices to export. */
static int export_prepare(const char *db_path, const char *device, int all, at_table *t,
                          const at_table_device ***sel, size_t *nsel)
{
    at_cache *c = NULL;
    int st;
    memset(t, 0, sizeof *t);
    *sel = NULL;
    if ((st = at_cache_open_readonly(db_path, &c)) == AT_OK &&
        (st = at_cache_read_table(c, device, t)) == AT_OK)
        st = select_devices(t, db_path, device, all, sel, nsel);
    at_cache_close(c);
    return st;
}

int at_table_export(const char *db_path, const char *device, int all, at_table_format fmt, FILE *f)
{
    at_table t;
    const at_table_device **sel = NULL;
    size_t n = 0;
    int st = export_prepare(db_path, device, all, &t, &sel, &n);
    if (st == AT_OK) {
        at_table_write(f, fmt, sel, n);
        if (fflush(f) != 0 || ferror(f))
            st = at_fail(AT_ERR_IO, "cannot write the table: %s", strerror(errno));
    }
    free(sel);
    at_table_free(&t);
    return st;
}

int at_table_export_file(const char *db_path, const char *device, int all, at_table_format fmt,
                         const char *out_path)
{
    at_table t;
    const at_table_device **sel = NULL;
    size_t n = 0;
    char tmp[PATH_MAX];
    FILE *f = NULL;
    int fd = -1, st = export_prepare(db_path, device, all, &t, &sel, &n);
    if (st != AT_OK)
        goto done;
    /* ".NAME.XXXXXX" beside the target, so rename() stays in one file system */
    const char *slash = strrchr(out_path, '/');
    int dirlen = slash ? (int)(slash - out_path + 1) : 0;
    int len = snprintf(tmp, sizeof tmp, "%.*s.%s.XXXXXX", dirlen, out_path, slash ? slash + 1 : out_path);
    if (len < 0 || (size_t)len >= sizeof tmp) {
        st = at_fail(AT_ERR_USAGE, "output path too long: %s", out_path);
        goto done;
    }
    if ((fd = mkstemp(tmp)) < 0 || !(f = fdopen(fd, "wb"))) {
        st = at_fail(AT_ERR_IO, "cannot create a temporary file beside %s: %s", out_path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        goto done;
    }
    if (fchmod(fd, 0644) != 0)
        st = at_fail(AT_ERR_IO, "cannot write %s: %s", out_path, strerror(errno));
    if (st == AT_OK)
        at_table_write(f, fmt, sel, n);
    if (st == AT_OK && (fflush(f) != 0 || ferror(f) || fsync(fd) != 0))
        st = at_fail(AT_ERR_IO, "cannot write %s: %s", out_path, strerror(errno));
    if (fclose(f) != 0 && st == AT_OK)
        st = at_fail(AT_ERR_IO, "cannot write %s: %s", out_path, strerror(errno));
    if (st == AT_OK && rename(tmp, out_path) != 0)
        st = at_fail(AT_ERR_IO, "cannot write %s: %s", out_path, strerror(errno));
    if (st != AT_OK)
        unlink(tmp);
done:
    free(sel);
    at_table_free(&t);
    return st;
}

/* -------------------------------------------------------- import / merge */

/* Opens the local cache (creating it) only now that the input is known good. */
static int apply_to(const char *db_path, const at_table *t, const char *source, FILE *report)
{
    at_cache *c = NULL;
    int st = at_cache_open(db_path, &c);
    if (st == AT_OK)
        st = at_cache_apply_table(c, t, source, report);
    at_cache_close(c);
    return st;
}

int at_table_import(const char *db_path, const char *file, FILE *report)
{
    at_table t;
    int st = at_table_read_json(file, &t);
    if (st == AT_OK)
        st = apply_to(db_path, &t, file, report);
    at_table_free(&t);
    return st;
}

int at_table_merge(const char *db_path, const char *other_path, FILE *report)
{
    at_cache *o = NULL;
    at_table t = {0};
    char a[PATH_MAX], b[PATH_MAX];
    int st;
    if (realpath(other_path, a) && realpath(db_path, b) && !strcmp(a, b))
        return at_fail(AT_ERR_USAGE, "%s is the cache itself: nothing to merge", other_path);
    if ((st = at_cache_open_readonly(other_path, &o)) == AT_OK)
        st = at_cache_read_table(o, NULL, &t);
    at_cache_close(o); /* before writing: the other file stays as it was */
    if (st == AT_OK)
        st = apply_to(db_path, &t, other_path, report);
    at_table_free(&t);
    return st;
}

/* ------------------------------------------------------------------ show */

/* "4.58 TB/s" / "not measured" */
static void rate(double gbps, char *buf, size_t len)
{
    if (isfinite(gbps) && gbps > 0)
        snprintf(buf, len, "%.2f TB/s", gbps / 1e3);
    else
        snprintf(buf, len, "not measured");
}

static void show_device(const at_table_device *td, FILE *f)
{
    const at_device_info *d = &td->info;
    char rd[32], cp[32], em[32];
    int width = 0;
    rate(d->read_gbps, rd, sizeof rd);
    rate(d->copy_gbps, cp, sizeof cp);
    if (isfinite(d->empty_us))
        snprintf(em, sizeof em, "%.2f us", d->empty_us);
    else
        snprintf(em, sizeof em, "not measured");
    put_line(f, "%s (sm_%d%d, %d SMs, driver %d, NVRTC %d.%d): read %s, copy %s, empty kernel %s", d->name,
            d->cc_major, d->cc_minor, d->sms, d->driver_version, d->nvrtc_major, d->nvrtc_minor, rd, cp, em);
    if (!td->nentries)
        fputs("  nothing tuned yet\n", f);
    for (size_t i = 0; i < td->nentries; i++) {
        const at_key *k = &td->entries[i].key;
        int n = (int)(strlen(k->op) + strlen(at_dtype_name(k->dtype)) + strlen(k->shape)) + 2;
        width = n > width ? n : width;
    }
    for (size_t i = 0; i < td->nentries; i++) {
        const at_key *k = &td->entries[i].key;
        const at_winner *w = &td->entries[i].w;
        char label[128], note[96] = "";
        snprintf(label, sizeof label, "%s %s %s", k->op, at_dtype_name(k->dtype), k->shape);
        /* a key this build or this driver would not look up */
        if (k->driver_version != d->driver_version || strcmp(k->tuner_version, AT_TUNER_VERSION) != 0)
            snprintf(note, sizeof note, "  [keyed for driver %d, tuner %s]", k->driver_version,
                     k->tuner_version);
        put_line(f, "  %-*s -> %s%s%s%s  %.2f us, baseline %.2f us, %.2fx%s", width, label, w->strategy,
                w->params[0] ? " (" : "", w->params, w->params[0] ? ")" : "", w->us, w->baseline_us,
                w->speedup, note);
    }
}

int at_table_show(const char *db_path, const char *device, FILE *f)
{
    struct stat sb;
    at_cache *c = NULL;
    at_table t = {0};
    int st;
    if (stat(db_path, &sb) != 0 && errno == ENOENT) {
        if (device)
            return at_fail(AT_ERR_USAGE, "no GPU named '%s': no cache at %s", device, db_path);
        fprintf(f, "nothing tuned yet (no cache at %s)\n", db_path);
        return AT_OK;
    }
    if ((st = at_cache_open_readonly(db_path, &c)) == AT_OK &&
        (st = at_cache_read_table(c, device, &t)) == AT_OK) {
        if (device && !t.ndevices)
            st = at_fail(AT_ERR_USAGE, "no GPU named '%s' in %s", device, db_path);
        else if (!t.ndevices)
            fprintf(f, "nothing tuned yet (no GPU in %s)\n", db_path);
        for (size_t i = 0; st == AT_OK && i < t.ndevices; i++)
            show_device(&t.devices[i], f);
        if (st == AT_OK)
            at_cache_hint_unserved(c, f);
    }
    at_cache_close(c);
    at_table_free(&t);
    return st;
}
