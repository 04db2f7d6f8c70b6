/*
** fuzz_cache.c — libFuzzer harness for the cache readers on damaged or
** hand-edited caches: a small valid cache (built once) gets the input's
** edits — column values of any type (NULL, integers, doubles, text, blobs)
** in any row of devices / trials / winners, rows deleted, user_version —
** through bound SQL on a copy, then at_cache_open_readonly,
** at_cache_read_table, the three writers, at_table_show, at_cache_open and
** at_cache_get_winner / at_cache_apply_table of what was read. Invariants
** (abort()): only AT_OK / AT_ERR_CACHE / AT_ERR_NOMEM, a refusal has a
** message, what is read has digests and cubins that match, and no crash,
** leak or undefined behaviour on the way (the three writers and the apply
** included), and the JSON export of a cache that reads imports again.
*/
#include "autotune.h"
#include "table.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char work[64];
static unsigned char *templ;
static size_t templ_size;

static void fail(const char *what, int rc)
{
    fprintf(stderr, "fuzz_cache: invariant broken: %s (status %d, errmsg '%s')\n", what, rc, at_errmsg());
    abort();
}

static at_key key_for(const char *shape, int dt)
{
    at_key k;
    memset(&k, 0, sizeof k);
    strcpy(k.op, "gemv");
    k.dtype = dt ? AT_FP16 : AT_BF16;
    snprintf(k.shape, sizeof k.shape, "%s", shape);
    strcpy(k.device, "NVIDIA H200");
    k.cc = 90;
    k.sms = 132;
    k.driver_version = 13000;
    k.nvrtc_version = 13000;
    at_sha256_hex("space", 5, k.space_sha);
    strcpy(k.options, "-arch=sm_90");
    strcpy(k.tuner_version, AT_TUNER_VERSION);
    return k;
}

/* The template: one GPU, three winners (two with cubins), a few trials. */
static void build_template(void)
{
    static const at_device_info dev = {"NVIDIA H200", 9, 0, 132, 62914560, 150754820096LL, 13000, 13, 0,
                                       4580.5,        4260.25, 0.53};
    char path[64];
    unsigned char blob[64];
    at_cache *c = NULL;
    snprintf(path, sizeof path, "/tmp/fuzz_cache_templ.%d.db", (int)getpid());
    unlink(path);
    if (at_cache_open(path, &c) != AT_OK || at_cache_put_device(c, &dev) != AT_OK)
        fail("cannot build the template cache", 0);
    for (int i = 0; i < 3; i++) {
        at_key k = key_for(i == 0 ? "1x2048x8192" : i == 1 ? "1x64x64" : "4x2048x5120", i == 2);
        at_winner w;
        memset(&w, 0, sizeof w);
        strcpy(w.strategy, i == 1 ? "cublas" : "warp_row");
        strcpy(w.kernel, i == 1 ? "" : "gemv_warp_row");
        strcpy(w.template_name, i == 1 ? "" : "gemv/gemv_warp_row.cu");
        snprintf(w.params, sizeof w.params, "TP_VEC=8 TP_ROWS=%d", i);
        w.us = 8.5 + i, w.us_min = 8 + i, w.us_max = 9 + i;
        w.baseline_us = 10, w.baseline_min = 9.5, w.baseline_max = 11, w.speedup = 10 / w.us;
        w.bytes = 1e6;
        w.grid[0] = 64, w.grid[1] = w.grid[2] = 1, w.block[0] = 128, w.block[1] = w.block[2] = 1;
        for (size_t j = 0; j < sizeof blob; j++)
            blob[j] = (unsigned char)(j * 5 + (size_t)i);
        w.cubin = i == 1 ? NULL : blob;
        w.cubin_size = i == 1 ? 0 : sizeof blob - (size_t)i;
        if (at_cache_put_winner(c, &k, &w) != AT_OK)
            fail("template winner", 0);
        for (int j = 0; j < 3; j++) {
            at_trial t;
            memset(&t, 0, sizeof t);
            strcpy(t.strategy, "warp_row");
            snprintf(t.params, sizeof t.params, "TP_VEC=8 TP_ROWS=%d", j);
            t.state = (at_trial_state)j;
            t.us = 9 + j;
            if (at_cache_put_trial(c, &k, &t) != AT_OK)
                fail("template trial", 0);
        }
    }
    at_cache_close(c);
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0)
        fail("template read", 0);
    templ_size = (size_t)ftell(f);
    rewind(f);
    templ = malloc(templ_size);
    if (!templ || fread(templ, 1, templ_size, f) != templ_size)
        fail("template read", 0);
    fclose(f);
    unlink(path);
    const char *shm = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(work, sizeof work, "%s/fuzz_cache.%d.db", shm, (int)getpid());
}

/* --------------------------------------------------------------- edits */

static const char *const TABLES[] = {"devices", "trials", "winners"};
/* Columns each edit may set (names are constants: no input reaches SQL text). */
static const char *const COLS[3][34] = {
    {"name", "cc_major", "cc_minor", "sms", "l2_bytes", "mem_bytes", "driver_version", "nvrtc_major",
     "nvrtc_minor", "read_gbps", "copy_gbps", "empty_us", "measured_at", NULL},
    {"key_sha", "op", "dtype", "shape", "device", "cc", "sms", "driver_version", "nvrtc_version", "space_sha",
     "options", "tuner_version", "strategy", "params", "state", "reason", "us", "us_min", "us_max", "stream_us",
     "rel_err", "regs", "spill_bytes", "smem_bytes", "created_at", NULL},
    {"key_sha", "op", "dtype", "shape", "device", "cc", "sms", "driver_version", "nvrtc_version", "space_sha",
     "options", "tuner_version", "strategy", "kernel", "template_name", "params", "us", "us_min", "us_max",
     "baseline_us", "baseline_min", "baseline_max", "speedup", "bytes", "grid_x", "grid_y", "grid_z",
     "block_x", "block_y", "block_z", "smem", "cubin", "cubin_sha", NULL},
};

typedef struct cursor {
    const uint8_t *p, *end;
} cursor;

static unsigned take(cursor *c)
{
    return c->p < c->end ? *c->p++ : 0;
}

static uint64_t take64(cursor *c)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | take(c);
    return v;
}

/* Binds the next value of the input as ?1: NULL, integer, double, text or blob. */
static void bind_value(sqlite3_stmt *s, cursor *c)
{
    unsigned kind = take(c) % 7;
    if (kind == 0) {
        sqlite3_bind_null(s, 1);
    } else if (kind == 1) {
        sqlite3_bind_int64(s, 1, (sqlite3_int64)take64(c));
    } else if (kind == 2) {
        uint64_t bits = take64(c);
        double d;
        memcpy(&d, &bits, sizeof d);
        sqlite3_bind_double(s, 1, d);
    } else if (kind == 3 || kind == 4) {
        size_t n = take(c);
        if (n > (size_t)(c->end - c->p))
            n = (size_t)(c->end - c->p);
        if (kind == 3)
            sqlite3_bind_text(s, 1, (const char *)c->p, (int)n, SQLITE_TRANSIENT);
        else
            sqlite3_bind_blob(s, 1, c->p, (int)n, SQLITE_TRANSIENT);
        c->p += n;
    } else if (kind == 5) {
        sqlite3_bind_int(s, 1, (int)take(c) - 2);
    } else { /* a long text: 64 to 320 bytes of one character */
        size_t n = 64 + take(c);
        char buf[320];
        memset(buf, 'a' + (int)(take(c) % 26), n);
        sqlite3_bind_text(s, 1, buf, (int)n, SQLITE_TRANSIENT);
    }
}

static void apply_edits(const uint8_t *data, size_t size)
{
    sqlite3 *db = NULL;
    cursor c = {data, data + size};
    char sql[256];
    if (sqlite3_open(work, &db) != SQLITE_OK)
        fail("cannot open the work copy", 0);
    for (int n = 0; n < 8 && c.p < c.end; n++) {
        unsigned op = take(&c), t = op % 3, what = (op / 3) % 8;
        sqlite3_stmt *s = NULL;
        if (what == 7) { /* delete one row */
            snprintf(sql, sizeof sql, "DELETE FROM %s WHERE rowid = (SELECT rowid FROM %s LIMIT 1 OFFSET ?1)",
                     TABLES[t], TABLES[t]);
            if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
                sqlite3_bind_int(s, 1, (int)(take(&c) % 4));
                sqlite3_step(s);
            }
        } else if (what == 6 && t == 0) { /* another schema version */
            static const char *const v[] = {"PRAGMA user_version = 0", "PRAGMA user_version = 2",
                                            "PRAGMA user_version = -1"};
            sqlite3_exec(db, v[take(&c) % 3], NULL, NULL, NULL);
        } else {
            int ncol = 0;
            while (COLS[t][ncol])
                ncol++;
            const char *col = COLS[t][take(&c) % (unsigned)ncol];
            snprintf(sql, sizeof sql, "UPDATE %s SET %s = ?1 WHERE rowid = (SELECT rowid FROM %s LIMIT 1 OFFSET ?2)",
                     TABLES[t], col, TABLES[t]);
            if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
                sqlite3_bind_int(s, 2, (int)(take(&c) % 4));
                bind_value(s, &c);
                sqlite3_step(s); /* a NOT NULL or UNIQUE refusal is fine */
            }
        }
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
}

/* ------------------------------------------------------------- readers */

static void check_status(const char *call, int rc)
{
    if (rc != AT_OK && rc != AT_ERR_CACHE && rc != AT_ERR_NOMEM)
        fail(call, rc);
    if (rc != AT_OK && !at_errmsg()[0])
        fail("a refusal without a message", rc);
}

static void check_read(const at_table *t)
{
    char sha[65];
    for (size_t i = 0; i < t->ndevices; i++)
        for (size_t j = 0; j < t->devices[i].nentries; j++) {
            const at_table_entry *e = &t->devices[i].entries[j];
            at_key_digest(&e->key, sha);
            if (strcmp(sha, e->key_sha) != 0)
                fail("an entry's key_sha is not its key's digest", 0);
            if ((e->w.cubin_size == 0) != (e->w.cubin == NULL))
                fail("cubin pointer and size disagree", 0);
            if (e->w.cubin_size) {
                at_sha256_hex(e->w.cubin, e->w.cubin_size, sha);
                if (strcmp(sha, e->w.cubin_sha) != 0)
                    fail("a cubin read does not match its sha256", 0);
            }
        }
}

/* The three formats of what was read; the JSON one must import again. */
static void write_all(const at_table *t)
{
    const at_table_device **sel = calloc(t->ndevices + 1, sizeof *sel);
    char json[96];
    FILE *f = fopen("/dev/null", "w");
    snprintf(json, sizeof json, "%s.json", work);
    FILE *j = fopen(json, "wb");
    if (!sel || !f || !j)
        fail("harness out of memory", 0);
    for (size_t i = 0; i < t->ndevices; i++)
        sel[i] = &t->devices[i];
    for (int fmt = AT_TABLE_CSV; fmt <= AT_TABLE_C; fmt++)
        at_table_write(f, (at_table_format)fmt, sel, t->ndevices);
    at_table_write(j, AT_TABLE_JSON, sel, t->ndevices);
    fclose(f);
    fclose(j);
    free(sel);
    at_table back;
    int rc = at_table_read_json(json, &back);
    if (rc != AT_OK && rc != AT_ERR_NOMEM)
        fail("the export of a cache that reads does not import again", rc);
    at_table_free(&back);
    unlink(json);
}

/* The readers' view of the edited copy. */
static void read_copy(void)
{
    at_cache *c = NULL;
    at_table t = {0};
    at_fail(AT_OK, "%s", "");
    int rc = at_cache_open_readonly(work, &c), read_ok = 0;
    check_status("at_cache_open_readonly", rc);
    if (rc == AT_OK) {
        rc = at_cache_read_table(c, NULL, &t);
        check_status("at_cache_read_table", rc);
        read_ok = rc == AT_OK;
        if (!read_ok)
            at_table_free(&t); /* partly read: nothing to check */
    }
    at_cache_close(c);
    FILE *devnull = fopen("/dev/null", "w");
    rc = at_table_show(work, NULL, devnull);
    if (rc != AT_OK && rc != AT_ERR_CACHE && rc != AT_ERR_NOMEM && rc != AT_ERR_USAGE)
        fail("at_table_show", rc);
    if (read_ok) {
        check_read(&t);
        write_all(&t);
    }
    /* the writers' view: open for writing, look each winner up, apply the
    ** table to the cache it came from (every entry is already there) */
    c = NULL;
    rc = at_cache_open(work, &c);
    check_status("at_cache_open", rc);
    if (rc == AT_OK) {
        for (size_t i = 0; i < t.ndevices; i++)
            for (size_t j = 0; j < t.devices[i].nentries; j++) {
                at_winner w;
                int found = 0;
                rc = at_cache_get_winner(c, &t.devices[i].entries[j].key, &w, &found);
                check_status("at_cache_get_winner", rc);
                at_winner_clear(&w);
            }
        rc = at_cache_apply_table(c, &t, "fuzz", devnull);
        if (rc != AT_OK && rc != AT_ERR_CACHE && rc != AT_ERR_NOMEM && rc != AT_ERR_USAGE)
            fail("at_cache_apply_table", rc);
    }
    at_cache_close(c);
    fclose(devnull);
    at_table_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char side[80];
    if (!templ)
        build_template();
    FILE *f = fopen(work, "wb");
    if (!f || fwrite(templ, 1, templ_size, f) != templ_size || fclose(f) != 0)
        fail("cannot write the work copy", 0);
    snprintf(side, sizeof side, "%s-wal", work);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", work);
    unlink(side);
    apply_edits(data, size);
    read_copy();
    return 0;
}
