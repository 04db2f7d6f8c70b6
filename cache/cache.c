/*
** cache.c — the SQLite tuning cache: devices (measured ceilings), trials (every
** candidate's result under a key) and winners (the answer per key, with its
** cubin). Invariants: a file that is not ours is refused and never written;
** every value goes through sqlite3_bind_*; a winner whose cubin no longer
** matches its sha256 is never handed out.
*/
#include "cache.h"
#include "cache_internal.h"
#include "at_schema_sql.h" /* generated from schema.sql */

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* struct at_cache and its statement slots: cache_internal.h */

#define NOW_SQL "strftime('%Y-%m-%dT%H:%M:%fZ','now')"

/* The readable key columns, in the order bind_key binds them (?1..?12). */
#define KEY_COLS                                                                                             \
    "key_sha, op, dtype, shape, device, cc, sms, driver_version, nvrtc_version, space_sha, options, "        \
    "tuner_version"
#define KEY_UPDATE                                                                                           \
    "op=excluded.op, dtype=excluded.dtype, shape=excluded.shape, device=excluded.device, cc=excluded.cc, "   \
    "sms=excluded.sms, driver_version=excluded.driver_version, nvrtc_version=excluded.nvrtc_version, "       \
    "space_sha=excluded.space_sha, options=excluded.options, tuner_version=excluded.tuner_version, "

/* The schema (cache/schema.sql, embedded by cmake/at_embed_sql.cmake):
** created in one transaction on an empty file, its last statement setting
** user_version. A change there bumps AT_SCHEMA_VERSION. NaN doubles are
** stored as NULL. */
static const char SCHEMA_SQL[] = AT_SCHEMA_SQL;
_Static_assert(AT_SCHEMA_SQL_VERSION == AT_SCHEMA_VERSION, "cache/schema.sql sets another user_version");

static const char *const STMT_SQL[S_COUNT] = {
    [S_GET_DEVICE] = "SELECT l2_bytes, mem_bytes, driver_version, nvrtc_major, nvrtc_minor, read_gbps,"
                     " copy_gbps, empty_us FROM devices"
                     " WHERE name = ?1 AND cc_major = ?2 AND cc_minor = ?3 AND sms = ?4",
    [S_PUT_DEVICE] =
        "INSERT INTO devices (name, cc_major, cc_minor, sms, l2_bytes, mem_bytes, driver_version,"
        " nvrtc_major, nvrtc_minor, read_gbps, copy_gbps, empty_us, measured_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, " NOW_SQL ")"
        " ON CONFLICT (name, cc_major, cc_minor, sms) DO UPDATE SET l2_bytes=excluded.l2_bytes,"
        " mem_bytes=excluded.mem_bytes, driver_version=excluded.driver_version,"
        " nvrtc_major=excluded.nvrtc_major, nvrtc_minor=excluded.nvrtc_minor,"
        " read_gbps=excluded.read_gbps, copy_gbps=excluded.copy_gbps,"
        " empty_us=excluded.empty_us, measured_at=excluded.measured_at",
    [S_GET_TRIAL] =
        "SELECT state, reason, us, us_min, us_max, stream_us, rel_err, regs, spill_bytes, smem_bytes"
        " FROM trials WHERE key_sha = ?1 AND strategy = ?2 AND params = ?3",
    [S_PUT_TRIAL] = "INSERT INTO trials (" KEY_COLS ", strategy, params, state, reason, us, us_min, us_max,"
                    " stream_us, rel_err, regs, spill_bytes, smem_bytes, created_at) VALUES (?1, ?2, ?3,"
                    " ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,"
                    " ?22, ?23, ?24, " NOW_SQL ") ON CONFLICT (key_sha, strategy, params) DO UPDATE"
                    " SET " KEY_UPDATE "state=excluded.state, reason=excluded.reason, us=excluded.us,"
                    " us_min=excluded.us_min, us_max=excluded.us_max, stream_us=excluded.stream_us,"
                    " rel_err=excluded.rel_err, regs=excluded.regs, spill_bytes=excluded.spill_bytes,"
                    " smem_bytes=excluded.smem_bytes, created_at=excluded.created_at",
    [S_GET_WINNER] = "SELECT strategy, kernel, template_name, params, us, us_min, us_max, baseline_us,"
                     " baseline_min, baseline_max, speedup, bytes, grid_x, grid_y, grid_z, block_x, block_y,"
                     " block_z, smem, cubin, cubin_sha FROM winners WHERE key_sha = ?1",
    [S_PUT_WINNER] =
        "INSERT INTO winners (" KEY_COLS ", strategy, kernel, template_name, params, us,"
        " us_min, us_max, baseline_us, baseline_min, baseline_max, speedup, bytes, grid_x,"
        " grid_y, grid_z, block_x, block_y, block_z, smem, cubin, cubin_sha, created_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,"
        " ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, " NOW_SQL
        ") ON CONFLICT (key_sha) DO UPDATE SET " KEY_UPDATE
        "strategy=excluded.strategy, kernel=excluded.kernel, template_name=excluded.template_name,"
        " params=excluded.params, us=excluded.us, us_min=excluded.us_min, us_max=excluded.us_max,"
        " baseline_us=excluded.baseline_us, baseline_min=excluded.baseline_min,"
        " baseline_max=excluded.baseline_max, speedup=excluded.speedup, bytes=excluded.bytes,"
        " grid_x=excluded.grid_x, grid_y=excluded.grid_y, grid_z=excluded.grid_z,"
        " block_x=excluded.block_x, block_y=excluded.block_y, block_z=excluded.block_z,"
        " smem=excluded.smem, cubin=excluded.cubin, cubin_sha=excluded.cubin_sha,"
        " created_at=excluded.created_at",
    /* the other winners of ?1's problem under its driver, NVRTC and options:
    ** another spec, other templates or components, another tuner version
    ** (bound as bind_key binds; the winners_by_problem index) */
    [S_SUPERSEDE] = "DELETE FROM winners WHERE device = ?5 AND cc = ?6 AND sms = ?7 AND op = ?2 AND dtype = ?3"
                    " AND shape = ?4 AND driver_version = ?8 AND nvrtc_version = ?9 AND options = ?11"
                    " AND key_sha <> ?1 AND (space_sha <> ?10 OR tuner_version <> ?12)",
};

const char *at_trial_state_name(at_trial_state s)
{
    switch (s) {
    case AT_TRIAL_OK:
        return "ok";
    case AT_TRIAL_PRUNED:
        return "pruned";
    case AT_TRIAL_COMPILE_FAIL:
        return "compile-fail";
    case AT_TRIAL_WRONG:
        return "wrong";
    case AT_TRIAL_CRASHED:
        return "crashed";
    case AT_TRIAL_TIMEOUT:
        return "timeout";
    case AT_TRIAL_SPILLS:
        return "spills";
    }
    return "unknown";
}

static int trial_state_parse(const char *name, at_trial_state *out)
{
    for (int s = AT_TRIAL_OK; s <= AT_TRIAL_SPILLS; s++)
        if (strcmp(name, at_trial_state_name((at_trial_state)s)) == 0) {
            *out = (at_trial_state)s;
            return 1;
        }
    return 0;
}

/* --------------------------------------------------------------- helpers */

int at_cache_sql_fail(at_cache *c, int rc, const char *what)
{
    int st = (rc == SQLITE_NOMEM) ? AT_ERR_NOMEM : AT_ERR_CACHE;
    return at_fail(st, "sqlite: %s: %s: %s", c->path, what, sqlite3_errmsg(c->db));
}

/* The cached statement, reset and with bindings cleared, ready to bind. */
static int stmt(at_cache *c, int which, sqlite3_stmt **out)
{
    if (!c->st[which]) {
        int rc =
            sqlite3_prepare_v3(c->db, STMT_SQL[which], -1, SQLITE_PREPARE_PERSISTENT, &c->st[which], NULL);
        if (rc != SQLITE_OK)
            return at_cache_sql_fail(c, rc, "prepare");
    }
    sqlite3_reset(c->st[which]);
    sqlite3_clear_bindings(c->st[which]);
    *out = c->st[which];
    return AT_OK;
}

/* Binds a fixed-size char field without reading past it (it may lack a NUL). */
static int bind_str(sqlite3_stmt *s, int i, const char *v, size_t cap)
{
    return sqlite3_bind_text(s, i, v, (int)strnlen(v, cap), SQLITE_STATIC);
}

#define BIND_FIELD(s, i, field) bind_str((s), (i), (field), sizeof(field))

/* Binds n doubles as ?first..; NaN is stored as NULL (see col_double). */
static int bind_doubles(sqlite3_stmt *s, int first, const double *v, int n)
{
    int rc = SQLITE_OK;
    for (int i = 0; i < n && rc == SQLITE_OK; i++)
        rc = sqlite3_bind_double(s, first + i, v[i]);
    return rc;
}

static int bind_ints(sqlite3_stmt *s, int first, const int64_t *v, int n)
{
    int rc = SQLITE_OK;
    for (int i = 0; i < n && rc == SQLITE_OK; i++)
        rc = sqlite3_bind_int64(s, first + i, v[i]);
    return rc;
}

/* The bind helpers return nonzero on failure; this is the code to report. */
static int bind_error(at_cache *c)
{
    int rc = sqlite3_errcode(c->db);
    return rc != SQLITE_OK ? rc : SQLITE_ERROR;
}

/* Binds key_sha and the readable key columns as ?1..?12 (nonzero on
** failure). `sha` and `dt` must outlive the step. */
static int bind_key(sqlite3_stmt *s, const at_key *k, const char *sha, const char *dt)
{
    const int64_t n[] = {k->cc, k->sms, k->driver_version, k->nvrtc_version};
    return sqlite3_bind_text(s, 1, sha, -1, SQLITE_STATIC) || BIND_FIELD(s, 2, k->op) ||
           sqlite3_bind_text(s, 3, dt, -1, SQLITE_STATIC) || BIND_FIELD(s, 4, k->shape) ||
           BIND_FIELD(s, 5, k->device) || bind_ints(s, 6, n, 4) || BIND_FIELD(s, 10, k->space_sha) ||
           BIND_FIELD(s, 11, k->options) || BIND_FIELD(s, 12, k->tuner_version);
}

/* Column text into a fixed field, truncated to fit, always NUL-terminated. */
static void col_text(sqlite3_stmt *s, int i, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

#define COL_TEXT(s, i, field) col_text((s), (i), (field), sizeof(field))

/* SQLite stores a bound NaN as NULL; reading NULL back gives NaN again. */
static double col_double(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}

/* Ends a step: SQLITE_DONE is AT_OK, anything else names `what`. */
static int finish(at_cache *c, sqlite3_stmt *s, int rc, const char *what)
{
    int st = rc == SQLITE_DONE ? AT_OK : at_cache_sql_fail(c, rc, what);
    sqlite3_reset(s);
    return st;
}

static unsigned col_uint(sqlite3_stmt *s, int i)
{
    return (unsigned)sqlite3_column_int64(s, i);
}

/* Runs one statement and reads the first column of its first row as an int
** (*num) and/or text (text[len]); no row reads as 0 / "". */
static int query(sqlite3 *db, const char *sql, int *num, char *text, size_t len)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    if (num)
        *num = 0;
    if (text)
        text[0] = '\0';
    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (num)
            *num = sqlite3_column_int(s, 0);
        if (text)
            col_text(s, 0, text, len);
    }
    sqlite3_finalize(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* ------------------------------------------------------------ open/close */

/* mkdir -p of the directory part of `path` (mode 0755). */
static int make_parents(const char *path)
{
    char *dir = strdup(path);
    int st = AT_OK;
    if (!dir)
        return at_fail(AT_ERR_NOMEM, "out of memory");
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        goto done; /* relative file in cwd, or a file in "/" */
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        struct stat sb;
        *p = '\0';
        if (stat(dir, &sb) != 0) {
            if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
                st = at_fail(AT_ERR_CACHE, "%s: cannot create directory %s: %s", path, dir, strerror(errno));
                goto done;
            }
        } else if (!S_ISDIR(sb.st_mode)) {
            st = at_fail(AT_ERR_CACHE, "%s: cannot create directory %s: %s", path, dir, strerror(ENOTDIR));
            goto done;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
done:
    free(dir);
    return st;
}

/* 1 when the file is empty or starts with SQLite's magic. SQLite itself
** reports a 1-byte file as size 0 (os_unix.c, ticket #3260) and would write
** over it; this keeps such a file ours to refuse. Reads through SQLite's own
** descriptor: opening and closing a second one would drop every POSIX lock
** this process holds on the file (sqlite.org/howtocorrupt.html, 2.2). */
static int sqlite_magic(sqlite3 *db)
{
    static const char magic[16] = "SQLite format 3";
    static const char zero[16];
    sqlite3_file *f = NULL;
    char head[16];
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &f) != SQLITE_OK || !f || !f->pMethods)
        return 0;
    int rc = f->pMethods->xRead(f, head, (int)sizeof head, 0);
    if (rc == SQLITE_IOERR_SHORT_READ) /* zero-filled: all zero means empty */
        return memcmp(head, zero, sizeof head) == 0;
    return rc == SQLITE_OK && memcmp(head, magic, sizeof head) == 0;
}

static int foreign(at_cache *c, const char *why)
{
    return at_fail(AT_ERR_CACHE, "%s is not an autotune cache (%s)", c->path, why);
}

/* Reads (never writes) the file as it is: refuses what is not SQLite, is
** corrupt, is newer, or is someone else's database. Runs in one read
** transaction so a concurrent creator is seen either before or after its
** schema transaction, never half-way (and the magic is read under SQLite's
** shared lock, never mid-write). */
static int check_file(at_cache *c, int existed)
{
    sqlite3 *db = c->db;
    char text[256], why[300];
    int v = 0, n = 0, st = AT_OK;
    int rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = query(db, "PRAGMA schema_version", &n, NULL, 0);
    if (rc == SQLITE_OK && existed) {
        if (!sqlite_magic(db))
            rc = SQLITE_NOTADB;
        else if ((rc = query(db, "PRAGMA quick_check(1)", NULL, text, sizeof text)) == SQLITE_OK &&
                 strcmp(text, "ok") != 0) {
            snprintf(why, sizeof why, "corrupt: %s", text);
            st = foreign(c, why);
            goto done;
        }
    }
    if (rc == SQLITE_OK)
        rc = query(db, "PRAGMA user_version", &v, NULL, 0);
    if (rc == SQLITE_OK && v == 0) /* new: must be empty */
        rc = query(db, "SELECT count(*) FROM sqlite_master", &n, NULL, 0);
    else if (rc == SQLITE_OK && v == AT_SCHEMA_VERSION)
        rc = query(db,
                   "SELECT 3 - count(*) FROM sqlite_master WHERE type = 'table'"
                   " AND name IN ('devices', 'trials', 'winners')",
                   &n, NULL, 0);
    if (rc == SQLITE_NOTADB) {
        st = foreign(c, "not an SQLite database");
    } else if (rc == SQLITE_CORRUPT) {
        snprintf(why, sizeof why, "corrupt: %s", sqlite3_errmsg(db));
        st = foreign(c, why);
    } else if (rc == SQLITE_READONLY || rc == SQLITE_CANTOPEN) { /* e.g. no -shm */
        st = at_cache_sql_fail(c, rc,
                      "cannot open for writing (are the file and its directory "
                      "writable?)");
    } else if (rc != SQLITE_OK) {
        st = at_cache_sql_fail(c, rc, "cannot read");
    } else if (v > AT_SCHEMA_VERSION) {
        st = at_fail(AT_ERR_CACHE, "%s has schema version %d, newer than this autotune (%d)", c->path, v,
                     AT_SCHEMA_VERSION);
    } else if (v == 0 && n != 0) {
        st = foreign(c, "an SQLite database with other tables");
    } else if (v < 0 || n != 0) {
        snprintf(why, sizeof why, "user_version %d without autotune's tables", v);
        st = foreign(c, why);
    }
done:
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL); /* ends the read; writes nothing */
    return st;
}

/* PRAGMA journal_mode=WAL, retried for up to the busy timeout: switching a
** new file to WAL needs an exclusive lock and SQLite returns SQLITE_BUSY at
** once, without its busy handler, when a second opener holds a shared one.
** WAL is persistent, so this only waits the first time a file is opened. */
static int set_wal(sqlite3 *db)
{
    int rc = SQLITE_BUSY;
    for (int waited = 0; waited < 10000; waited += 10) {
        rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
        if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED)
            break;
        sqlite3_sleep(10);
    }
    return rc;
}

/* Creates the schema if user_version is still 0 (re-read under the write
** lock: another process may have created it since check_file). */
static int ensure_schema(at_cache *c)
{
    int v = 0, rc = sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return at_cache_sql_fail(c, rc, "cannot lock for writing");
    rc = query(c->db, "PRAGMA user_version", &v, NULL, 0);
    if (rc == SQLITE_OK && v == 0)
        rc = sqlite3_exec(c->db, SCHEMA_SQL, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        int st = at_cache_sql_fail(c, rc, "cannot create schema");
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
        return st;
    }
    if (v > AT_SCHEMA_VERSION)
        return at_fail(AT_ERR_CACHE, "%s has schema version %d, newer than this autotune (%d)", c->path, v,
                       AT_SCHEMA_VERSION);
    return AT_OK;
}

/* Opens (creating file, parent directories and schema if needed) the cache
** at `path`; *out is the handle (close with at_cache_close), NULL on error.
** A file that is not ours is refused with AT_ERR_CACHE and left untouched. */
int at_cache_open(const char *path, at_cache **out)
{
    struct stat sb;
    int st, rc, existed;
    at_cache *c;
    if (!out)
        return at_fail(AT_ERR_USAGE, "at_cache_open: NULL out");
    *out = NULL;
    if (!path || !path[0])
        return at_fail(AT_ERR_USAGE, "cache path is empty");
    if (!(c = calloc(1, sizeof *c)) || !(c->path = strdup(path))) {
        free(c);
        return at_fail(AT_ERR_NOMEM, "out of memory");
    }
    existed = stat(path, &sb) == 0;
    if (existed && !S_ISREG(sb.st_mode)) {
        st = at_fail(AT_ERR_CACHE, "%s is not an autotune cache (not a regular file)", path);
        goto fail;
    }
    existed = existed && sb.st_size > 0; /* SQLite takes an empty file as new */
    if (!existed && (st = make_parents(path)) != AT_OK)
        goto fail;
    rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        st = at_fail(rc == SQLITE_NOMEM ? AT_ERR_NOMEM : AT_ERR_CACHE, "sqlite: cannot open %s: %s", path,
                     c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_extended_result_codes(c->db, 0);
    sqlite3_busy_timeout(c->db, 10000); /* two tuners may share one cache */
    if ((st = check_file(c, existed)) != AT_OK)
        goto fail;
    /* SQLite falls back to read-only when it cannot write the file. */
    if (sqlite3_db_readonly(c->db, "main") == 1) {
        st = at_fail(AT_ERR_CACHE, "%s: cache is read-only (cannot write the file)", path);
        goto fail;
    }
    rc = set_wal(c->db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(c->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        st = at_cache_sql_fail(c, rc, "cannot set journal mode");
        goto fail;
    }
    if ((st = ensure_schema(c)) != AT_OK)
        goto fail;
    *out = c;
    return AT_OK;
fail:
    at_cache_close(c);
    return st;
}

/* Finalizes every statement and closes; an open transaction is rolled back. */
void at_cache_close(at_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < S_COUNT; i++)
        sqlite3_finalize(c->st[i]);
    sqlite3_close(c->db);
    free(c->path);
    free(c);
}

/* $XDG_CACHE_HOME/autotune/tune.db (absolute XDG only, per the XDG spec),
** else $HOME/.cache/autotune/tune.db. AT_ERR_USAGE when neither is usable or
** buf is too small. */
int at_cache_default_path(char *buf, size_t len)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (!buf || !len)
        return at_fail(AT_ERR_USAGE, "cache path: no buffer");
    buf[0] = '\0';
    if (xdg && xdg[0] == '/')
        n = snprintf(buf, len, "%s/autotune/tune.db", xdg);
    else if (home && home[0] == '/')
        n = snprintf(buf, len, "%s/.cache/autotune/tune.db", home);
    else
        return at_fail(AT_ERR_USAGE, "cannot choose a cache path: neither XDG_CACHE_HOME "
                                     "nor HOME is set to an absolute directory");
    if (n < 0 || (size_t)n >= len) {
        buf[0] = '\0';
        return at_fail(AT_ERR_USAGE, "cache path too long (%d bytes, room for %zu)", n, len - 1);
    }
    return AT_OK;
}

/* --------------------------------------------------------------- devices */

/* dev->name, cc_major, cc_minor and sms select the row; the other fields are
** filled when *found = 1 and left alone otherwise. */
int at_cache_get_device(at_cache *c, at_device_info *dev, int *found)
{
    sqlite3_stmt *s = NULL;
    int st, rc;
    *found = 0;
    if ((st = stmt(c, S_GET_DEVICE, &s)) != AT_OK)
        return st;
    const int64_t n[] = {dev->cc_major, dev->cc_minor, dev->sms};
    if (BIND_FIELD(s, 1, dev->name) || bind_ints(s, 2, n, 3))
        return finish(c, s, bind_error(c), "get device");
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        dev->l2_bytes = sqlite3_column_int64(s, 0);
        dev->mem_bytes = sqlite3_column_int64(s, 1);
        dev->driver_version = sqlite3_column_int(s, 2);
        dev->nvrtc_major = sqlite3_column_int(s, 3);
        dev->nvrtc_minor = sqlite3_column_int(s, 4);
        dev->read_gbps = col_double(s, 5);
        dev->copy_gbps = col_double(s, 6);
        dev->empty_us = col_double(s, 7);
        *found = 1;
        rc = SQLITE_DONE;
    }
    return finish(c, s, rc, "get device");
}

/* Inserts or replaces the device row (measured_at = now). */
int at_cache_put_device(at_cache *c, const at_device_info *dev)
{
    sqlite3_stmt *s = NULL;
    int st;
    if ((st = stmt(c, S_PUT_DEVICE, &s)) != AT_OK)
        return st;
    const int64_t n[] = {dev->cc_major,  dev->cc_minor,       dev->sms,         dev->l2_bytes,
                         dev->mem_bytes, dev->driver_version, dev->nvrtc_major, dev->nvrtc_minor};
    const double d[] = {dev->read_gbps, dev->copy_gbps, dev->empty_us};
    if (BIND_FIELD(s, 1, dev->name) || bind_ints(s, 2, n, 8) || bind_doubles(s, 10, d, 3))
        return finish(c, s, bind_error(c), "put device");
    return finish(c, s, sqlite3_step(s), "put device");
}

/* ---------------------------------------------------------------- trials */

/* Inserts or replaces the trial row for (key, t->strategy, t->params). */
int at_cache_put_trial(at_cache *c, const at_key *k, const at_trial *t)
{
    sqlite3_stmt *s = NULL;
    char sha[65], dt[24];
    int st;
    if ((st = stmt(c, S_PUT_TRIAL, &s)) != AT_OK)
        return st;
    at_key_digest(k, sha);
    at_key_dtype_text(k->dtype, dt);
    const double d[] = {t->us, t->us_min, t->us_max, t->stream_us, t->rel_err};
    const int64_t n[] = {t->regs, t->spill_bytes, t->smem_bytes};
    if (bind_key(s, k, sha, dt) || BIND_FIELD(s, 13, t->strategy) || BIND_FIELD(s, 14, t->params) ||
        sqlite3_bind_text(s, 15, at_trial_state_name(t->state), -1, SQLITE_STATIC) ||
        BIND_FIELD(s, 16, t->reason) || bind_doubles(s, 17, d, 5) || bind_ints(s, 22, n, 3))
        return finish(c, s, bind_error(c), "put trial");
    return finish(c, s, sqlite3_step(s), "put trial");
}

/* Fills *out (zeroed when not found). A row with a state this build does not
** know is an AT_ERR_CACHE, not a silent "ok". */
int at_cache_get_trial(at_cache *c, const at_key *k, const char *strategy, const char *params, at_trial *out,
                       int *found)
{
    sqlite3_stmt *s = NULL;
    char sha[65], state[32];
    int st, rc;
    *found = 0;
    memset(out, 0, sizeof *out);
    if ((st = stmt(c, S_GET_TRIAL, &s)) != AT_OK)
        return st;
    at_key_digest(k, sha);
    if (sqlite3_bind_text(s, 1, sha, -1, SQLITE_STATIC) ||
        sqlite3_bind_text(s, 2, strategy, -1, SQLITE_STATIC) ||
        sqlite3_bind_text(s, 3, params, -1, SQLITE_STATIC))
        return finish(c, s, bind_error(c), "get trial");
    if ((rc = sqlite3_step(s)) != SQLITE_ROW)
        return finish(c, s, rc, "get trial");
    snprintf(out->strategy, sizeof out->strategy, "%s", strategy);
    snprintf(out->params, sizeof out->params, "%s", params);
    COL_TEXT(s, 0, state);
    COL_TEXT(s, 1, out->reason);
    double *d[] = {&out->us, &out->us_min, &out->us_max, &out->stream_us, &out->rel_err};
    for (int i = 0; i < 5; i++)
        *d[i] = col_double(s, 2 + i);
    out->regs = sqlite3_column_int(s, 7);
    out->spill_bytes = sqlite3_column_int(s, 8);
    out->smem_bytes = sqlite3_column_int(s, 9);
    sqlite3_reset(s);
    if (!trial_state_parse(state, &out->state)) {
        memset(out, 0, sizeof *out);
        return at_fail(AT_ERR_CACHE, "%s: trial row has unknown state '%s'", c->path, state);
    }
    *found = 1;
    return AT_OK;
}

/* --------------------------------------------------------------- winners */

/* Inserts or replaces the key's winner. The stored cubin_sha is computed here
** from the bytes written ("" when there is no blob: the baseline). */
int at_cache_put_winner(at_cache *c, const at_key *k, const at_winner *w)
{
    sqlite3_stmt *s = NULL;
    char sha[65], dt[24], blob_sha[65] = "";
    int st, has_blob = w->cubin && w->cubin_size > 0;
    if ((st = stmt(c, S_PUT_WINNER, &s)) != AT_OK)
        return st;
    at_key_digest(k, sha);
    at_key_dtype_text(k->dtype, dt);
    if (has_blob)
        at_sha256_hex(w->cubin, w->cubin_size, blob_sha);
    const double d[] = {w->us,           w->us_min,       w->us_max,  w->baseline_us,
                        w->baseline_min, w->baseline_max, w->speedup, w->bytes};
    const int64_t n[] = {w->grid[0], w->grid[1], w->grid[2], w->block[0], w->block[1], w->block[2], w->smem};
    if (bind_key(s, k, sha, dt) || BIND_FIELD(s, 13, w->strategy) || BIND_FIELD(s, 14, w->kernel) ||
        BIND_FIELD(s, 15, w->template_name) || BIND_FIELD(s, 16, w->params) || bind_doubles(s, 17, d, 8) ||
        bind_ints(s, 25, n, 7) ||
        (has_blob && sqlite3_bind_blob64(s, 32, w->cubin, (sqlite3_uint64)w->cubin_size, SQLITE_STATIC)) ||
        sqlite3_bind_text(s, 33, blob_sha, -1, SQLITE_STATIC))
        return finish(c, s, bind_error(c), "put winner");
    return finish(c, s, sqlite3_step(s), "put winner");
}

/* at_cache_put_winner, then the problem's other winners under k's driver,
** NVRTC and options deleted, in one savepoint (inside or outside a
** transaction): both happen or neither. */
int at_cache_replace_winners(at_cache *c, const at_key *k, const at_winner *w, int *superseded)
{
    sqlite3_stmt *s = NULL;
    char sha[65], dt[24];
    int st, rc;
    if (superseded)
        *superseded = 0;
    if ((rc = sqlite3_exec(c->db, "SAVEPOINT at_replace_winners", NULL, NULL, NULL)) != SQLITE_OK)
        return at_cache_sql_fail(c, rc, "replace winners");
    if ((st = at_cache_put_winner(c, k, w)) == AT_OK && (st = stmt(c, S_SUPERSEDE, &s)) == AT_OK) {
        at_key_digest(k, sha);
        at_key_dtype_text(k->dtype, dt);
        if (bind_key(s, k, sha, dt))
            st = finish(c, s, bind_error(c), "supersede winners");
        else if ((st = finish(c, s, sqlite3_step(s), "supersede winners")) == AT_OK && superseded)
            *superseded = sqlite3_changes(c->db);
    }
    if (st != AT_OK) /* the error is set: undo the put as well */
        sqlite3_exec(c->db, "ROLLBACK TO at_replace_winners", NULL, NULL, NULL);
    if ((rc = sqlite3_exec(c->db, "RELEASE at_replace_winners", NULL, NULL, NULL)) != SQLITE_OK && st == AT_OK)
        st = at_cache_sql_fail(c, rc, "replace winners");
    return st;
}

/* Fills *out (zeroed first; not freed, so pass a cleared struct) with a
** malloc'ed copy of the cubin. A blob whose sha256 differs from the stored
** cubin_sha, or a missing blob where one was recorded, reads as absent. */
int at_cache_get_winner(at_cache *c, const at_key *k, at_winner *out, int *found)
{
    sqlite3_stmt *s = NULL;
    char sha[65], want[65], got[65] = "";
    int st, rc;
    *found = 0;
    memset(out, 0, sizeof *out);
    if ((st = stmt(c, S_GET_WINNER, &s)) != AT_OK)
        return st;
    at_key_digest(k, sha);
    if (sqlite3_bind_text(s, 1, sha, -1, SQLITE_STATIC))
        return finish(c, s, bind_error(c), "get winner");
    if ((rc = sqlite3_step(s)) != SQLITE_ROW)
        return finish(c, s, rc, "get winner");
    const void *blob = sqlite3_column_blob(s, 19);
    size_t size = (size_t)sqlite3_column_bytes(s, 19);
    COL_TEXT(s, 20, want);
    if (blob && size > 0)
        at_sha256_hex(blob, size, got);
    if (strcmp(got, want) != 0) { /* damaged or mismatched: never hand it out */
        sqlite3_reset(s);
        return AT_OK;
    }
    if (size > 0) {
        if (!(out->cubin = malloc(size))) {
            sqlite3_reset(s);
            return at_fail(AT_ERR_NOMEM, "out of memory (cubin of %zu bytes)", size);
        }
        memcpy(out->cubin, blob, size);
        out->cubin_size = size;
    }
    snprintf(out->cubin_sha, sizeof out->cubin_sha, "%s", want);
    COL_TEXT(s, 0, out->strategy);
    COL_TEXT(s, 1, out->kernel);
    COL_TEXT(s, 2, out->template_name);
    COL_TEXT(s, 3, out->params);
    double *d[] = {&out->us,           &out->us_min,       &out->us_max,  &out->baseline_us,
                   &out->baseline_min, &out->baseline_max, &out->speedup, &out->bytes};
    for (int i = 0; i < 8; i++)
        *d[i] = col_double(s, 4 + i);
    for (int i = 0; i < 3; i++) {
        out->grid[i] = col_uint(s, 12 + i);
        out->block[i] = col_uint(s, 15 + i);
    }
    out->smem = col_uint(s, 18);
    sqlite3_reset(s);
    *found = 1;
    return AT_OK;
}

/* Frees the cubin and zeroes the struct; NULL is a no-op. */
void at_winner_clear(at_winner *w)
{
    if (!w)
        return;
    free(w->cubin);
    memset(w, 0, sizeof *w);
}

/* ---------------------------------------------------------- transactions */

/* BEGIN IMMEDIATE: takes the write lock now (waiting up to the busy timeout)
** so a batch of puts cannot fail half-way on a lock upgrade. */
int at_cache_begin(at_cache *c)
{
    int rc = sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    return rc == SQLITE_OK ? AT_OK : at_cache_sql_fail(c, rc, "begin");
}

/* COMMIT; a no-op when no transaction is open. A failed commit is rolled
** back so the handle stays usable (the batch is lost and reported). */
int at_cache_commit(at_cache *c)
{
    if (sqlite3_get_autocommit(c->db))
        return AT_OK;
    int rc = sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        return AT_OK;
    int st = at_cache_sql_fail(c, rc, "commit (batch rolled back)");
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

/* ------------------------------------------------------------ warm start */

/* Read-only; a fresh statement per call (warm start asks once per run). The
** winners_by_problem index covers the WHERE clause. */
int at_cache_list_winners(at_cache *c, const at_key *k, at_winner_ref *out, int max, int *n)
{
    static const char sql[] = "SELECT shape, strategy, params, us, speedup FROM winners"
                              " WHERE device = ?1 AND cc = ?2 AND sms = ?3 AND op = ?4 AND dtype = ?5"
                              " ORDER BY created_at DESC, rowid DESC";
    sqlite3_stmt *s = NULL;
    char dt[24];
    int rc;
    *n = 0;
    if (!c || !k || (max > 0 && !out))
        return at_fail(AT_ERR_USAGE, "at_cache_list_winners: NULL argument");
    if ((rc = sqlite3_prepare_v2(c->db, sql, -1, &s, NULL)) != SQLITE_OK)
        return at_cache_sql_fail(c, rc, "list winners");
    at_key_dtype_text(k->dtype, dt);
    if (sqlite3_bind_text(s, 1, k->device, -1, SQLITE_STATIC) || sqlite3_bind_int(s, 2, k->cc) ||
        sqlite3_bind_int(s, 3, k->sms) || sqlite3_bind_text(s, 4, k->op, -1, SQLITE_STATIC) ||
        sqlite3_bind_text(s, 5, dt, -1, SQLITE_STATIC)) {
        int st = at_cache_sql_fail(c, bind_error(c), "list winners");
        sqlite3_finalize(s);
        return st;
    }
    while (*n < max && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        at_winner_ref *w = &out[(*n)++];
        memset(w, 0, sizeof *w);
        COL_TEXT(s, 0, w->shape);
        COL_TEXT(s, 1, w->strategy);
        COL_TEXT(s, 2, w->params);
        w->us = col_double(s, 3);
        w->speedup = col_double(s, 4);
    }
    if (*n < max && rc != SQLITE_DONE) {
        int st = at_cache_sql_fail(c, rc, "list winners");
        sqlite3_finalize(s);
        *n = 0;
        return st;
    }
    sqlite3_finalize(s);
    return AT_OK;
}
