/*
** test_cache.c — sha256 against the FIPS/NIST vectors, the cache key's text
** and digest, and the SQLite cache: round trips, refusal of files that are not
** ours (left byte-for-byte unchanged), damaged blobs, two writers on one file,
** a fresh answer replacing its problem's stale ones.
** Everything is written under a fresh mkdtemp directory in /tmp, removed at exit.
*/
#include "autotune.h"
#include "tinytest.h"
#include "test_files.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[64];

/* tmpdir/name into buf. */
static const char *tpath(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
    return buf;
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Opening `path` must fail with AT_ERR_CACHE, name the path and `why`, and
** leave the file's bytes as they were. */
static void check_refused(const char *path, const char *why)
{
    size_t before_n, after_n;
    unsigned char *before = tt_slurp(path, &before_n), *after;
    at_cache *c = (at_cache *)1;
    CHECK(before != NULL);
    int st = at_cache_open(path, &c);
    CHECK_EQ_INT(st, AT_ERR_CACHE);
    CHECK(c == NULL);
    CHECK_STR_HAS(at_errmsg(), path);
    CHECK_STR_HAS(at_errmsg(), why);
    if (st == AT_OK)
        at_cache_close(c);
    after = tt_slurp(path, &after_n);
    CHECK(after != NULL);
    CHECK_EQ_INT(after_n, before_n);
    CHECK(after && before && memcmp(before, after, before_n) == 0);
    free(before);
    free(after);
}

/* Runs SQL on the file with a plain sqlite3 connection (not the cache). */
static int raw_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

static long long raw_count(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    long long n = -1;
    if (sqlite3_open(path, &db) == SQLITE_OK && sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return n;
}

static at_key base_key(void)
{
    at_key k;
    memset(&k, 0, sizeof k);
    strcpy(k.op, "gemv");
    k.dtype = AT_BF16;
    strcpy(k.shape, "1x2048x8192");
    strcpy(k.device, "NVIDIA H200");
    k.cc = 90;
    k.sms = 132;
    k.driver_version = 13000;
    k.nvrtc_version = 13000;
    at_sha256_hex("spec", 4, k.space_sha);
    strcpy(k.options, "-std=c++17 --use_fast_math");
    strcpy(k.tuner_version, AT_TUNER_VERSION);
    return k;
}

static at_trial sample_trial(int i)
{
    at_trial t;
    memset(&t, 0, sizeof t);
    strcpy(t.strategy, "warp_row");
    snprintf(t.params, sizeof t.params, "TP_VEC=8 TP_ROWS=%d", i);
    t.state = AT_TRIAL_OK;
    strcpy(t.reason, "");
    t.us = 10.5 + i;
    t.us_min = 10.25;
    t.us_max = 11.75;
    t.stream_us = 14.0;
    t.rel_err = 1.5e-3;
    t.regs = 40;
    t.spill_bytes = 0;
    t.smem_bytes = 1024;
    return t;
}

static at_winner sample_winner(void *blob, size_t size)
{
    at_winner w;
    memset(&w, 0, sizeof w);
    strcpy(w.strategy, "warp_row");
    strcpy(w.kernel, "gemv_warp_row");
    strcpy(w.template_name, "gemv/gemv_warp_row.cu");
    strcpy(w.params, "TP_VEC=8 TP_ROWS=4");
    w.us = 9.5, w.us_min = 9.25, w.us_max = 9.75;
    w.baseline_us = 10.7, w.baseline_min = 10.5, w.baseline_max = 11.0;
    w.speedup = 10.7 / 9.5;
    w.bytes = 33554432.0;
    w.grid[0] = 2048, w.grid[1] = 1, w.grid[2] = 1;
    w.block[0] = 128, w.block[1] = 1, w.block[2] = 1;
    w.smem = 512;
    w.cubin = blob;
    w.cubin_size = size;
    return w;
}

/* ---------------------------------------------------------------- sha256 */

static int sha_is(const void *data, size_t len, const char *want)
{
    char hex[65];
    at_sha256_hex(data, len, hex);
    if (strcmp(hex, want) != 0)
        fprintf(stderr, "  sha256 of %zu bytes: %s, want %s\n", len, hex, want);
    return strcmp(hex, want) == 0;
}

static void test_sha256_vectors(void)
{
    CHECK(sha_is("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    CHECK(sha_is(NULL, 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    CHECK(sha_is("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    const char *v448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    CHECK(sha_is(v448, strlen(v448), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    const char *v896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    CHECK(sha_is(v896, strlen(v896), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"));
    char *a = malloc(1000000);
    CHECK(a != NULL);
    if (!a)
        return;
    memset(a, 'a', 1000000);
    CHECK(sha_is(a, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
    /* Padding edges: 55/56 bytes (length fits / spills into a second block), 64. */
    CHECK(sha_is(a, 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"));
    CHECK(sha_is(a, 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"));
    CHECK(sha_is(a, 63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"));
    CHECK(sha_is(a, 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"));
    CHECK(sha_is(a, 65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"));
    CHECK(sha_is(a, 119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"));
    CHECK(sha_is(a, 120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"));
    free(a);
}

/* ---------------------------------------------------------------- key */

/* [CACHE_KEY] The key of a known entry, text and digest spelled out (as the
** tuner wrote them before the key moved into cache/key.c): a change to the
** format shows here first, and every stored winner would need a retune.
** The runtime library reads rows through at_key_text_*, checked here to give
** the same bytes (tests/test_atk.c pins atk's adapter to the same digest). */
#define PINNED_TEXT                                                                                    \
    "v1;op=gemv;dtype=bf16;shape=1x2048x8192;device=NVIDIA H200;cc=90;sms=132;driver=13000;"         \
    "nvrtc=13000;space=d4f02eaafd1a9e9de7d10972ca8e47fa7a985825c3c9c1e249c72683cb3e4f19;"             \
    "options=-std\\=c++17 --use_fast_math;tuner=0.1.0"
#define PINNED_DIGEST "b4da6993a11a179f88e3386b49261ee8f3693b2aa1d00ce3d685496143fe355d"
#define PINNED_ODD_DIGEST "e6b74a20bf2207fbcde6a5a92e82236d4448d9d5cd4b9f8651b705af1f4208a8"

static void test_key_pinned(void)
{
    at_key k;
    char text[4096], hex[65];
    memset(&k, 0, sizeof k);
    strcpy(k.op, "gemv");
    k.dtype = AT_BF16;
    strcpy(k.shape, "1x2048x8192");
    strcpy(k.device, "NVIDIA H200");
    k.cc = 90;
    k.sms = 132;
    k.driver_version = 13000;
    k.nvrtc_version = 13000;
    at_sha256_hex("spec", 4, k.space_sha);
    strcpy(k.options, "-std=c++17 --use_fast_math");
    strcpy(k.tuner_version, "0.1.0");
    at_key_string(&k, text, sizeof text);
    CHECK(strcmp(text, PINNED_TEXT) == 0);
    at_key_digest(&k, hex);
    CHECK(strcmp(hex, PINNED_DIGEST) == 0);

    /* the same fields as a stored row holds them */
    at_key_text t = {.op = "gemv", .dtype = "bf16", .shape = "1x2048x8192", .device = "NVIDIA H200", .cc = 90,
                     .sms = 132, .driver_version = 13000, .nvrtc_version = 13000, .space_sha = k.space_sha,
                     .options = "-std=c++17 --use_fast_math", .tuner_version = "0.1.0"};
    at_key_text_string(&t, text, sizeof text);
    CHECK(strcmp(text, PINNED_TEXT) == 0);
    at_key_text_digest(&t, hex);
    CHECK(strcmp(hex, PINNED_DIGEST) == 0);

    /* escapes, and a dtype with no name ("#7") */
    k.dtype = (at_dtype)7;
    strcpy(k.device, "a;b=c\\d");
    at_key_digest(&k, hex);
    CHECK(strcmp(hex, PINNED_ODD_DIGEST) == 0);
    at_key_dtype_text(k.dtype, text);
    CHECK(strcmp(text, "#7") == 0);
    t.dtype = "#7";
    t.device = "a;b=c\\d";
    at_key_text_digest(&t, hex);
    CHECK(strcmp(hex, PINNED_ODD_DIGEST) == 0);
    at_key_text_string(&t, text, sizeof text);
    CHECK_STR_HAS(text, ";dtype=#7;shape=1x2048x8192;device=a\\;b\\=c\\\\d;cc=90;");
}

static void test_key_string_and_digest(void)
{
    at_key k = base_key(), k2 = base_key();
    char s1[4096], s2[4096], d1[65], d2[65];
    at_key_string(&k, s1, sizeof s1);
    at_key_string(&k2, s2, sizeof s2);
    CHECK(strcmp(s1, s2) == 0);
    const char *head = "v1;op=gemv;dtype=bf16;shape=1x2048x8192;device=NVIDIA H200;cc=90;"
                       "sms=132;driver=13000;nvrtc=13000;space=";
    CHECK(strncmp(s1, head, strlen(head)) == 0);
    CHECK_STR_HAS(s1, ";options=-std\\=c++17 --use_fast_math;tuner=" AT_TUNER_VERSION);
    at_key_digest(&k, d1);
    at_key_digest(&k2, d2);
    CHECK_EQ_INT(strlen(d1), 64);
    CHECK(strcmp(d1, d2) == 0);
    char want[65];
    at_sha256_hex(s1, strlen(s1), want);
    CHECK(strcmp(d1, want) == 0);

    /* Every single field changes the text and the digest. */
    for (int f = 0; f < 11; f++) {
        at_key m = base_key();
        switch (f) {
        case 0:
            strcpy(m.op, "gemw");
            break;
        case 1:
            m.dtype = AT_FP16;
            break;
        case 2:
            strcpy(m.shape, "1x2048x8193");
            break;
        case 3:
            strcpy(m.device, "NVIDIA H100");
            break;
        case 4:
            m.cc = 89;
            break;
        case 5:
            m.sms = 131;
            break;
        case 6:
            m.driver_version = 12080;
            break;
        case 7:
            m.nvrtc_version = 12080;
            break;
        case 8:
            m.space_sha[0] = m.space_sha[0] == '0' ? '1' : '0';
            break;
        case 9:
            strcat(m.options, " -G");
            break;
        case 10:
            strcpy(m.tuner_version, "0.1.1");
            break;
        }
        at_key_string(&m, s2, sizeof s2);
        at_key_digest(&m, d2);
        if (strcmp(s1, s2) == 0 || strcmp(d1, d2) == 0)
            fprintf(stderr, "  field %d does not change the key\n", f);
        CHECK(strcmp(s1, s2) != 0);
        CHECK(strcmp(d1, d2) != 0);
    }

    /* A small buffer truncates, NUL-terminated; an invalid dtype is "#n". */
    char small[8];
    at_key_string(&k, small, sizeof small);
    CHECK(strcmp(small, "v1;op=g") == 0);
    k.dtype = (at_dtype)99;
    at_key_string(&k, s2, sizeof s2);
    CHECK_STR_HAS(s2, ";dtype=#99;");

    /* A field filling its whole array without a NUL is read only up to its size. */
    k = base_key();
    memset(k.device, 'x', sizeof k.device);
    at_key_string(&k, s2, sizeof s2);
    char xs[sizeof k.device + 16];
    memset(xs, 'x', sizeof k.device);
    strcpy(xs + sizeof k.device, ";cc=90;");
    CHECK_STR_HAS(s2, xs);
}

static void test_key_escaping(void)
{
    char s1[4096], s2[4096], d1[65], d2[65];
    /* Without escaping these would both read "...;options=-O3;tuner=1;tuner=2". */
    at_key a = base_key(), b = base_key();
    strcpy(a.options, "-O3;tuner=1");
    strcpy(a.tuner_version, "2");
    strcpy(b.options, "-O3");
    strcpy(b.tuner_version, "1;tuner=2");
    at_key_string(&a, s1, sizeof s1);
    at_key_string(&b, s2, sizeof s2);
    at_key_digest(&a, d1);
    at_key_digest(&b, d2);
    CHECK(strcmp(s1, s2) != 0);
    CHECK(strcmp(d1, d2) != 0);
    CHECK_STR_HAS(s1, ";options=-O3\\;tuner\\=1;tuner=2");

    /* Shifting a separator between op and shape. */
    a = base_key(), b = base_key();
    strcpy(a.op, "gemv;dtype=bf16");
    strcpy(b.op, "gemv");
    strcpy(b.shape, "x;dtype=bf16");
    at_key_digest(&a, d1);
    at_key_digest(&b, d2);
    CHECK(strcmp(d1, d2) != 0);

    /* A backslash cannot be used to cancel an escape: "a\" + ";b" vs "a\;b". */
    a = base_key(), b = base_key();
    strcpy(a.device, "a\\");
    strcpy(a.shape, "1");
    strcpy(b.device, "a\\;shape=1");
    at_key_string(&a, s1, sizeof s1);
    at_key_string(&b, s2, sizeof s2);
    CHECK(strcmp(s1, s2) != 0);
    CHECK_STR_HAS(s1, ";device=a\\\\;cc=");
    CHECK_STR_HAS(s2, ";device=a\\\\\\;shape\\=1;cc=");
}

static void test_trial_state_names(void)
{
    CHECK(strcmp(at_trial_state_name(AT_TRIAL_OK), "ok") == 0);
    CHECK(strcmp(at_trial_state_name(AT_TRIAL_PRUNED), "pruned") == 0);
    CHECK(strcmp(at_trial_state_name(AT_TRIAL_COMPILE_FAIL), "compile-fail") == 0);
    CHECK(strcmp(at_trial_state_name(AT_TRIAL_WRONG), "wrong") == 0);
    CHECK(strcmp(at_trial_state_name(AT_TRIAL_CRASHED), "crashed") == 0);
    CHECK(strcmp(at_trial_state_name(AT_TRIAL_TIMEOUT), "timeout") == 0);
    CHECK(strcmp(at_trial_state_name(AT_TRIAL_SPILLS), "spills") == 0);
    CHECK(strcmp(at_trial_state_name((at_trial_state)42), "unknown") == 0);
}

/* ---------------------------------------------------------------- open */

static void test_open_creates_dirs_and_schema(void)
{
    char path[256];
    at_cache *c = NULL;
    tpath(path, sizeof path, "a/b/c/tune.db");
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    CHECK(c != NULL);
    CHECK(exists(path));
    at_cache_close(c);
    at_cache_close(NULL);
    CHECK_EQ_INT(raw_count(path, "PRAGMA user_version"), AT_SCHEMA_VERSION);
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM sqlite_master WHERE type='table'"
                                 " AND name IN ('devices','trials','winners')"),
                 3);
    /* Reopening an existing cache works and keeps WAL mode. */
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    at_cache_close(c);
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(s) == SQLITE_ROW);
    CHECK(strcmp((const char *)sqlite3_column_text(s, 0), "wal") == 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    /* A pre-existing empty file is a new database, not a foreign one. */
    tpath(path, sizeof path, "empty.db");
    CHECK(tt_spit(path, "", 0) == 0);
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    at_cache_close(c);
}

static void test_refuse_not_sqlite(void)
{
    char path[256];
    unsigned char junk[8192];
    srand(7);
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(rand() & 0xff);
    tpath(path, sizeof path, "random.db");
    CHECK(tt_spit(path, junk, sizeof junk) == 0);
    check_refused(path, "is not an autotune cache");
    char side[300];
    snprintf(side, sizeof side, "%s-wal", path);
    CHECK(!exists(side));

    const char *text = "# my notes\nthis is a text file, not a database\n";
    tpath(path, sizeof path, "notes.txt");
    CHECK(tt_spit(path, text, strlen(text)) == 0);
    check_refused(path, "not an SQLite database");

    /* Shorter than SQLite's header: SQLite alone would take these for empty
    ** databases and write over them. */
    tpath(path, sizeof path, "one.db");
    CHECK(tt_spit(path, "x", 1) == 0);
    check_refused(path, "not an SQLite database");
    tpath(path, sizeof path, "short.db");
    CHECK(tt_spit(path, "SQLite format", 13) == 0);
    check_refused(path, "not an SQLite database");

    /* A directory where the file should be. */
    tpath(path, sizeof path, "adir.db");
    CHECK(mkdir(path, 0755) == 0);
    at_cache *c = NULL;
    CHECK_EQ_INT(at_cache_open(path, &c), AT_ERR_CACHE);
    CHECK_STR_HAS(at_errmsg(), path);
}

static void test_refuse_foreign_and_newer(void)
{
    char path[256];
    tpath(path, sizeof path, "foreign.db");
    CHECK(raw_exec(path, "CREATE TABLE people (name TEXT, age INTEGER);"
                         "INSERT INTO people VALUES ('ada', 36);") == SQLITE_OK);
    check_refused(path, "is not an autotune cache");

    /* A foreign db that happens to use user_version 1 but not our tables. */
    tpath(path, sizeof path, "foreign1.db");
    CHECK(raw_exec(path, "CREATE TABLE t (x); PRAGMA user_version = 1;") == SQLITE_OK);
    check_refused(path, "is not an autotune cache");

    /* A cache written by a newer autotune. */
    at_cache *c = NULL;
    tpath(path, sizeof path, "newer.db");
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    at_cache_close(c);
    CHECK(raw_exec(path, "PRAGMA user_version = 99;") == SQLITE_OK);
    check_refused(path, "has schema version 99, newer than this autotune (1)");
}

/* A valid cache cut at many lengths: refused (file unchanged) or opened
** cleanly, never a crash. */
static void test_truncated_copies(void)
{
    char path[256], cut[256];
    at_cache *c = NULL;
    at_key k = base_key();
    tpath(path, sizeof path, "full.db");
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    if (!c)
        return;
    CHECK_EQ_INT(at_cache_begin(c), AT_OK);
    for (int i = 0; i < 300; i++) {
        at_trial t = sample_trial(i);
        snprintf(t.reason, sizeof t.reason, "reason %d with some padding text to fill pages", i);
        CHECK_EQ_INT(at_cache_put_trial(c, &k, &t), AT_OK);
    }
    CHECK_EQ_INT(at_cache_commit(c), AT_OK);
    at_cache_close(c);

    size_t n;
    unsigned char *full = tt_slurp(path, &n);
    CHECK(full != NULL && n > 8192);
    if (!full)
        return;
    size_t lens[] = {1, 16, 50, 99, 100, 101, 512, 1024, 4095, 4096, 4097, 8192, n / 2, n - 4096, n - 1};
    int refused = 0;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        snprintf(cut, sizeof cut, "%s/cut%zu.db", tmpdir, i);
        CHECK(tt_spit(cut, full, lens[i]) == 0);
        c = NULL;
        int st = at_cache_open(cut, &c);
        CHECK(st == AT_OK || st == AT_ERR_CACHE);
        if (st == AT_OK) {
            at_winner w;
            int found = 0;
            /* Reads may report the damage; they must not crash. */
            (void)at_cache_get_winner(c, &k, &w, &found);
            at_winner_clear(&w);
            at_cache_close(c);
        } else {
            size_t m;
            unsigned char *after = tt_slurp(cut, &m);
            CHECK_EQ_INT(m, lens[i]);
            CHECK(after && memcmp(after, full, lens[i]) == 0);
            CHECK_STR_HAS(at_errmsg(), cut);
            free(after);
            refused++;
        }
    }
    CHECK(refused > 0);
    free(full);
}

static void test_unwritable(void)
{
    char path[256], file[256];
    at_cache *c = (at_cache *)1;
    /* A parent "directory" that is a regular file: cannot be created. */
    tpath(file, sizeof file, "x");
    CHECK(mkdir(file, 0755) == 0);
    tpath(file, sizeof file, "x/file");
    CHECK(tt_spit(file, "data", 4) == 0);
    tpath(path, sizeof path, "x/file/tune.db");
    CHECK_EQ_INT(at_cache_open(path, &c), AT_ERR_CACHE);
    CHECK(c == NULL);
    CHECK_STR_HAS(at_errmsg(), path);
    tpath(path, sizeof path, "x/file/deeper/tune.db");
    CHECK_EQ_INT(at_cache_open(path, &c), AT_ERR_CACHE);
    CHECK_STR_HAS(at_errmsg(), "x/file");

    /* A read-only cache file. Root writes through mode bits, so only a
    ** non-root run can expect the refusal; root must at least not crash. */
    tpath(path, sizeof path, "ro.db");
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    at_cache_close(c);
    CHECK(chmod(path, 0444) == 0);
    c = NULL;
    int st = at_cache_open(path, &c);
    if (geteuid() != 0) {
        CHECK_EQ_INT(st, AT_ERR_CACHE);
        CHECK_STR_HAS(at_errmsg(), path);
    } else {
        CHECK(st == AT_OK || st == AT_ERR_CACHE);
    }
    at_cache_close(c);
    chmod(path, 0644);
}

/* ---------------------------------------------------------------- rows */

static void test_device_roundtrip(void)
{
    char path[256];
    at_cache *c = NULL;
    tpath(path, sizeof path, "dev.db");
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    if (!c)
        return;
    at_device_info d, q;
    memset(&d, 0, sizeof d);
    strcpy(d.name, "NVIDIA H200");
    d.cc_major = 9, d.cc_minor = 0, d.sms = 132;
    d.l2_bytes = 62914560, d.mem_bytes = 150754820096LL;
    d.driver_version = 13000, d.nvrtc_major = 13, d.nvrtc_minor = 0;
    d.read_gbps = 4580.5, d.copy_gbps = 4260.25, d.empty_us = 0.5;
    int found = -1;
    q = d;
    CHECK_EQ_INT(at_cache_get_device(c, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 0);
    CHECK_EQ_INT(at_cache_put_device(c, &d), AT_OK);
    memset(&q, 0, sizeof q);
    strcpy(q.name, d.name);
    q.cc_major = 9, q.cc_minor = 0, q.sms = 132;
    CHECK_EQ_INT(at_cache_get_device(c, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 1);
    CHECK(memcmp(&q, &d, sizeof d) == 0);
    /* Replace. */
    d.read_gbps = 4600.0;
    d.driver_version = 13010;
    CHECK_EQ_INT(at_cache_put_device(c, &d), AT_OK);
    CHECK_EQ_INT(at_cache_get_device(c, &q, &found), AT_OK);
    CHECK(found == 1 && q.read_gbps == 4600.0 && q.driver_version == 13010);
    /* A different SM count (a MIG slice) is another device. */
    q.sms = 66;
    CHECK_EQ_INT(at_cache_get_device(c, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 0);
    at_cache_close(c);
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM devices"), 1);
}

static void test_trial_roundtrip(void)
{
    char path[256];
    at_cache *c = NULL;
    tpath(path, sizeof path, "trial.db");
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    if (!c)
        return;
    at_key k = base_key();
    at_trial t = sample_trial(4), q;
    int found = -1;
    CHECK_EQ_INT(at_cache_get_trial(c, &k, t.strategy, t.params, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 0);
    CHECK_EQ_INT(at_cache_put_trial(c, &k, &t), AT_OK);
    CHECK_EQ_INT(at_cache_get_trial(c, &k, t.strategy, t.params, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 1);
    CHECK(memcmp(&q, &t, sizeof t) == 0);

    /* Replace: same (key, strategy, params), new result; still one row. */
    t.state = AT_TRIAL_WRONG;
    strcpy(t.reason, "rel_err 0.37 > 0.01; y[3] = 'nan'");
    t.rel_err = NAN;
    t.us = 0;
    CHECK_EQ_INT(at_cache_put_trial(c, &k, &t), AT_OK);
    CHECK_EQ_INT(at_cache_get_trial(c, &k, t.strategy, t.params, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 1);
    CHECK_EQ_INT(q.state, AT_TRIAL_WRONG);
    CHECK(strcmp(q.reason, t.reason) == 0);
    CHECK(isnan(q.rel_err));
    CHECK(q.us == 0.0);
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM trials"), 1);
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM trials WHERE state = 'wrong'"
                                 " AND op = 'gemv' AND dtype = 'bf16' AND cc = 90"),
                 1);

    /* Every state round-trips; other params / key miss. */
    for (int s = AT_TRIAL_OK; s <= AT_TRIAL_SPILLS; s++) {
        at_trial u = sample_trial(100 + s);
        u.state = (at_trial_state)s;
        CHECK_EQ_INT(at_cache_put_trial(c, &k, &u), AT_OK);
        CHECK_EQ_INT(at_cache_get_trial(c, &k, u.strategy, u.params, &q, &found), AT_OK);
        CHECK(found == 1 && q.state == (at_trial_state)s);
    }
    CHECK_EQ_INT(at_cache_get_trial(c, &k, t.strategy, "TP_VEC=4", &q, &found), AT_OK);
    CHECK_EQ_INT(found, 0);
    at_key other = base_key();
    other.sms = 66;
    CHECK_EQ_INT(at_cache_get_trial(c, &other, t.strategy, t.params, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 0);

    /* Text longer than the struct field is truncated, never overflows. */
    CHECK(raw_exec(path, "UPDATE trials SET reason = printf('%.1000c', 'r')") == SQLITE_OK);
    CHECK_EQ_INT(at_cache_get_trial(c, &k, t.strategy, t.params, &q, &found), AT_OK);
    CHECK(found == 1 && strlen(q.reason) == sizeof q.reason - 1);
    /* A state this build does not know is an error, not "ok". */
    CHECK(raw_exec(path, "UPDATE trials SET state = 'sideways'") == SQLITE_OK);
    CHECK_EQ_INT(at_cache_get_trial(c, &k, t.strategy, t.params, &q, &found), AT_ERR_CACHE);
    CHECK_EQ_INT(found, 0);
    CHECK_STR_HAS(at_errmsg(), "sideways");
    at_cache_close(c);
}

static void test_winner_roundtrip(void)
{
    char path[256];
    at_cache *c = NULL;
    tpath(path, sizeof path, "winner.db");
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    if (!c)
        return;
    size_t size = 70001;
    unsigned char *blob = malloc(size);
    CHECK(blob != NULL);
    if (!blob)
        return;
    for (size_t i = 0; i < size; i++)
        blob[i] = (unsigned char)(i * 131u + 7u);
    blob[0] = 0x7f, blob[1] = 'E', blob[2] = 'L', blob[3] = 'F';
    at_key k = base_key();
    at_winner w = sample_winner(blob, size), q;
    int found = -1;
    CHECK_EQ_INT(at_cache_get_winner(c, &k, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 0);
    CHECK(q.cubin == NULL);
    CHECK_EQ_INT(at_cache_put_winner(c, &k, &w), AT_OK);
    CHECK_EQ_INT(at_cache_get_winner(c, &k, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 1);
    CHECK_EQ_INT(q.cubin_size, size);
    CHECK(q.cubin != NULL && q.cubin != blob && memcmp(q.cubin, blob, size) == 0);
    char sha[65];
    at_sha256_hex(blob, size, sha);
    CHECK(strcmp(q.cubin_sha, sha) == 0);
    CHECK(strcmp(q.strategy, w.strategy) == 0 && strcmp(q.kernel, w.kernel) == 0);
    CHECK(strcmp(q.template_name, w.template_name) == 0 && strcmp(q.params, w.params) == 0);
    CHECK(q.us == w.us && q.us_min == w.us_min && q.us_max == w.us_max);
    CHECK(q.baseline_us == w.baseline_us && q.baseline_min == w.baseline_min &&
          q.baseline_max == w.baseline_max);
    CHECK(q.speedup == w.speedup && q.bytes == w.bytes && q.smem == w.smem);
    CHECK(memcmp(q.grid, w.grid, sizeof w.grid) == 0);
    CHECK(memcmp(q.block, w.block, sizeof w.block) == 0);
    at_winner_clear(&q);
    CHECK(q.cubin == NULL && q.cubin_size == 0 && q.strategy[0] == '\0');
    at_winner_clear(NULL);

    /* A baseline winner replaces it: no blob. */
    at_winner b = sample_winner(NULL, 0);
    strcpy(b.strategy, "cublas");
    b.kernel[0] = b.template_name[0] = b.params[0] = '\0';
    b.us = b.baseline_us, b.speedup = 1.0;
    CHECK_EQ_INT(at_cache_put_winner(c, &k, &b), AT_OK);
    CHECK_EQ_INT(at_cache_get_winner(c, &k, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 1);
    CHECK(q.cubin == NULL && q.cubin_size == 0 && q.cubin_sha[0] == '\0');
    CHECK(strcmp(q.strategy, "cublas") == 0 && q.kernel[0] == '\0' && q.speedup == 1.0);
    at_winner_clear(&q);
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM winners"), 1);
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM winners WHERE cubin IS NULL"), 1);

    /* Another key is another row. */
    at_key k2 = base_key();
    strcpy(k2.shape, "1x2048x2048");
    CHECK_EQ_INT(at_cache_get_winner(c, &k2, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 0);
    free(blob);
    at_cache_close(c);
}

/* A blob altered behind the cache's back is reported absent. */
static void test_winner_tampered(void)
{
    char path[256];
    at_cache *c = NULL;
    tpath(path, sizeof path, "tamper.db");
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    if (!c)
        return;
    unsigned char blob[4096];
    for (size_t i = 0; i < sizeof blob; i++)
        blob[i] = (unsigned char)(i ^ 0x5a);
    at_key k = base_key();
    at_winner w = sample_winner(blob, sizeof blob), q;
    int found = -1;
    const char *edits[] = {
        "UPDATE winners SET cubin = X'00112233'",
        "UPDATE winners SET cubin = substr(cubin, 1, 100)",
        "UPDATE winners SET cubin = NULL",
        "UPDATE winners SET cubin_sha = ''",
        /* the sha256 of zero bytes, with the blob gone */
        ("UPDATE winners SET cubin = NULL, cubin_sha = "
         "'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'"),
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        CHECK_EQ_INT(at_cache_put_winner(c, &k, &w), AT_OK);
        CHECK_EQ_INT(at_cache_get_winner(c, &k, &q, &found), AT_OK);
        CHECK_EQ_INT(found, 1);
        at_winner_clear(&q);
        CHECK(raw_exec(path, edits[i]) == SQLITE_OK);
        CHECK_EQ_INT(at_cache_get_winner(c, &k, &q, &found), AT_OK);
        if (found)
            fprintf(stderr, "  tampered winner handed out after: %s\n", edits[i]);
        CHECK_EQ_INT(found, 0);
        CHECK(q.cubin == NULL);
        at_winner_clear(&q);
    }
    at_cache_close(c);
}

/* ---------------------------------------------------------- concurrency */

static void test_transactions(void)
{
    char path[256];
    at_cache *c = NULL;
    tpath(path, sizeof path, "txn.db");
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    if (!c)
        return;
    at_key k = base_key();
    CHECK_EQ_INT(at_cache_commit(c), AT_OK); /* nothing open: no-op */
    CHECK_EQ_INT(at_cache_begin(c), AT_OK);
    at_trial t = sample_trial(1);
    CHECK_EQ_INT(at_cache_put_trial(c, &k, &t), AT_OK);
    CHECK_EQ_INT(at_cache_commit(c), AT_OK);
    CHECK_EQ_INT(at_cache_commit(c), AT_OK);
    /* A batch left open at close is rolled back. */
    CHECK_EQ_INT(at_cache_begin(c), AT_OK);
    t = sample_trial(2);
    CHECK_EQ_INT(at_cache_put_trial(c, &k, &t), AT_OK);
    at_cache_close(c);
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM trials"), 1);
}

/* Two handles on one file, as two processes would hold them. */
static void test_two_handles(void)
{
    char path[256];
    at_cache *a = NULL, *b = NULL;
    tpath(path, sizeof path, "shared/tune.db");
    CHECK_EQ_INT(at_cache_open(path, &a), AT_OK);
    CHECK_EQ_INT(at_cache_open(path, &b), AT_OK);
    if (!a || !b) {
        at_cache_close(a);
        at_cache_close(b);
        return;
    }
    at_key ka = base_key(), kb = base_key();
    strcpy(kb.shape, "1x2048x5120");
    int found = -1;
    at_trial q;
    for (int round = 0; round < 20; round++) {
        CHECK_EQ_INT(at_cache_begin(a), AT_OK);
        for (int i = 0; i < 5; i++) {
            at_trial t = sample_trial(round * 5 + i);
            CHECK_EQ_INT(at_cache_put_trial(a, &ka, &t), AT_OK);
        }
        /* b reads while a holds the write lock (WAL): a's batch is invisible. */
        at_trial t0 = sample_trial(round * 5);
        CHECK_EQ_INT(at_cache_get_trial(b, &ka, t0.strategy, t0.params, &q, &found), AT_OK);
        CHECK_EQ_INT(found, 0);
        CHECK_EQ_INT(at_cache_commit(a), AT_OK);
        CHECK_EQ_INT(at_cache_get_trial(b, &ka, t0.strategy, t0.params, &q, &found), AT_OK);
        CHECK_EQ_INT(found, 1);

        CHECK_EQ_INT(at_cache_begin(b), AT_OK);
        for (int i = 0; i < 5; i++) {
            at_trial t = sample_trial(round * 5 + i);
            CHECK_EQ_INT(at_cache_put_trial(b, &kb, &t), AT_OK);
        }
        CHECK_EQ_INT(at_cache_commit(b), AT_OK);
        at_trial t = sample_trial(1000 + round); /* autocommit puts */
        CHECK_EQ_INT(at_cache_put_trial(a, &ka, &t), AT_OK);
        CHECK_EQ_INT(at_cache_put_trial(b, &kb, &t), AT_OK);
    }
    at_cache_close(a);
    at_cache_close(b);
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM trials"), 2 * (100 + 20));
}

/* Real processes: four children create the same fresh cache at once and
** write batches concurrently; no row may be lost. */
static void test_processes(void)
{
    char path[256];
    enum { KIDS = 4, BATCHES = 10, PER = 10 };
    pid_t pids[KIDS];
    tpath(path, sizeof path, "procs/tune.db");
    fflush(NULL);
    for (int p = 0; p < KIDS; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            at_cache *c = NULL;
            int bad = 0;
            if (at_cache_open(path, &c) != AT_OK) {
                fprintf(stderr, "  child %d: %s\n", p, at_errmsg());
                _exit(1);
            }
            at_key k = base_key();
            k.sms = p;
            for (int b = 0; b < BATCHES && !bad; b++) {
                bad |= at_cache_begin(c) != AT_OK;
                for (int i = 0; i < PER && !bad; i++) {
                    at_trial t = sample_trial(b * PER + i);
                    bad |= at_cache_put_trial(c, &k, &t) != AT_OK;
                }
                bad |= at_cache_commit(c) != AT_OK;
            }
            if (bad)
                fprintf(stderr, "  child %d: %s\n", p, at_errmsg());
            at_cache_close(c);
            _exit(bad);
        }
        CHECK(pids[p] > 0);
    }
    for (int p = 0; p < KIDS; p++) {
        int status = -1;
        if (pids[p] > 0)
            waitpid(pids[p], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM trials"), KIDS * BATCHES * PER);
}

/* ---------------------------------------------------------- default path */

static void restore_env(const char *name, const char *saved)
{
    if (saved)
        setenv(name, saved, 1);
    else
        unsetenv(name);
}

static void test_default_path(void)
{
    char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char *sx = xdg ? strdup(xdg) : NULL, *sh = home ? strdup(home) : NULL;
    char buf[256];
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    setenv("HOME", "/home/u", 1);
    CHECK_EQ_INT(at_cache_default_path(buf, sizeof buf), AT_OK);
    CHECK(strcmp(buf, "/x/cache/autotune/tune.db") == 0);
    setenv("XDG_CACHE_HOME", "", 1);
    CHECK_EQ_INT(at_cache_default_path(buf, sizeof buf), AT_OK);
    CHECK(strcmp(buf, "/home/u/.cache/autotune/tune.db") == 0);
    setenv("XDG_CACHE_HOME", "relative/dir", 1); /* XDG: relative is ignored */
    CHECK_EQ_INT(at_cache_default_path(buf, sizeof buf), AT_OK);
    CHECK(strcmp(buf, "/home/u/.cache/autotune/tune.db") == 0);
    unsetenv("XDG_CACHE_HOME");
    CHECK_EQ_INT(at_cache_default_path(buf, sizeof buf), AT_OK);
    CHECK(strcmp(buf, "/home/u/.cache/autotune/tune.db") == 0);
    CHECK_EQ_INT(at_cache_default_path(buf, 10), AT_ERR_USAGE);
    CHECK(buf[0] == '\0');
    CHECK_EQ_INT(at_cache_default_path(buf, strlen("/home/u/.cache/autotune/tune.db")), AT_ERR_USAGE);
    CHECK_EQ_INT(at_cache_default_path(buf, strlen("/home/u/.cache/autotune/tune.db") + 1), AT_OK);
    unsetenv("HOME");
    CHECK_EQ_INT(at_cache_default_path(buf, sizeof buf), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "HOME");
    setenv("HOME", "", 1);
    CHECK_EQ_INT(at_cache_default_path(buf, sizeof buf), AT_ERR_USAGE);
    restore_env("XDG_CACHE_HOME", sx);
    restore_env("HOME", sh);
    free(sx);
    free(sh);
}

/* ---------------------------------------------------------------- main */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* at_cache_list_winners (warm start): the winners of one device, cc, sms,
** op and dtype under any other key field, newest first, capped at max. */
static void test_list_winners(void)
{
    char path[128];
    at_cache *c = NULL;
    at_winner_ref refs[8];
    int n = -1;
    CHECK_EQ_INT(at_cache_open(tpath(path, sizeof path, "warm.db"), &c), AT_OK);
    if (!c)
        return;
    at_key k = base_key();
    CHECK_EQ_INT(at_cache_list_winners(c, &k, refs, 8, &n), AT_OK);
    CHECK_EQ_INT(n, 0);
    const char *shapes[] = {"1x2048x2048", "1x2048x4096", "1x4096x4096"};
    for (int i = 0; i < 3; i++) { /* same GPU, op, dtype: listed */
        at_key ki = base_key();
        at_winner w = sample_winner(NULL, 0);
        strcpy(ki.shape, shapes[i]);
        snprintf(w.params, sizeof w.params, "TP_ROWS=%d", i + 1);
        w.us = 5.0 + i;
        CHECK_EQ_INT(at_cache_put_winner(c, &ki, &w), AT_OK);
    }
    at_key old = base_key(); /* another driver: still this GPU's */
    old.driver_version = 12040;
    at_winner w = sample_winner(NULL, 0);
    strcpy(old.shape, "1x2048x2048");
    strcpy(w.params, "TP_ROWS=9");
    CHECK_EQ_INT(at_cache_put_winner(c, &old, &w), AT_OK);
    at_key other[4] = {base_key(), base_key(), base_key(), base_key()}; /* not listed */
    other[0].sms = 114;
    strcpy(other[1].device, "NVIDIA A100");
    other[2].dtype = AT_FP16;
    strcpy(other[3].op, "rmsnorm");
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT(at_cache_put_winner(c, &other[i], &w), AT_OK);
    CHECK_EQ_INT(at_cache_list_winners(c, &k, refs, 8, &n), AT_OK);
    CHECK_EQ_INT(n, 4);
    CHECK_STR_HAS(refs[0].params, "TP_ROWS=9"); /* newest first */
    CHECK_STR_HAS(refs[0].shape, "1x2048x2048");
    CHECK_STR_HAS(refs[3].params, "TP_ROWS=1");
    CHECK_STR_HAS(refs[3].strategy, "warp_row");
    CHECK(refs[3].us == 5.0);
    CHECK_EQ_INT(at_cache_list_winners(c, &k, refs, 2, &n), AT_OK);
    CHECK_EQ_INT(n, 2);
    at_cache_close(c);
}

/* A fresh tune's answer replaces its problem's earlier ones under the same
** driver, NVRTC and options (another spec, templates, tuner version), in
** or outside a transaction; other drivers, options, shapes, GPUs and the
** trials stay; a plain put (an import) keeps the union; a failed delete
** undoes the put. */
static void test_replace_winners(void)
{
    char path[128];
    at_cache *c = NULL;
    int n = -1, found = -1;
    CHECK_EQ_INT(at_cache_open(tpath(path, sizeof path, "replace.db"), &c), AT_OK);
    if (!c)
        return;
    at_winner w = sample_winner(NULL, 0), q;
    at_key stay[5] = {base_key(), base_key(), base_key(), base_key(), base_key()};
    stay[0].driver_version = 12040;               /* another driver */
    strcat(stay[1].options, " -DTP_WEIGHT_FP32"); /* other options */
    strcpy(stay[2].shape, "1x2048x2048");         /* another shape */
    stay[3].sms = 114;                            /* another GPU */
    strcpy(stay[4].op, "gemv_add");               /* another op */
    for (int i = 0; i < 5; i++) {
        at_sha256_hex("old spec", 8, stay[i].space_sha);
        CHECK_EQ_INT(at_cache_put_winner(c, &stay[i], &w), AT_OK);
    }
    at_key old_space = base_key(), old_tuner = base_key(), k = base_key();
    at_sha256_hex("old spec", 8, old_space.space_sha);
    strcpy(old_tuner.tuner_version, "0.0.9");
    CHECK_EQ_INT(at_cache_put_winner(c, &old_space, &w), AT_OK);
    CHECK_EQ_INT(at_cache_put_winner(c, &old_tuner, &w), AT_OK); /* an import's union: both stay */
    at_trial t = sample_trial(1);
    CHECK_EQ_INT(at_cache_put_trial(c, &old_space, &t), AT_OK);
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM winners"), 7);

    strcpy(w.params, "TP_VEC=8 TP_ROWS=8");
    w.us = 12.0; /* slower than the rows it replaces: the runtime would have served those */
    CHECK_EQ_INT(at_cache_replace_winners(c, &k, &w, &n), AT_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(at_cache_get_winner(c, &k, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 1);
    CHECK_STR_HAS(q.params, "TP_ROWS=8");
    at_winner_clear(&q);
    CHECK_EQ_INT(at_cache_get_winner(c, &old_space, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 0);
    CHECK_EQ_INT(at_cache_get_winner(c, &old_tuner, &q, &found), AT_OK);
    CHECK_EQ_INT(found, 0);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_INT(at_cache_get_winner(c, &stay[i], &q, &found), AT_OK);
        CHECK_EQ_INT(found, 1);
        at_winner_clear(&q);
    }
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM winners"), 6);
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM trials"), 1);

    /* again, the same key: nothing else to replace (NULL count allowed) */
    CHECK_EQ_INT(at_cache_replace_winners(c, &k, &w, &n), AT_OK);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(at_cache_replace_winners(c, &k, &w, NULL), AT_OK);
    /* inside a transaction: a savepoint, committed with it */
    CHECK_EQ_INT(at_cache_put_winner(c, &old_space, &w), AT_OK);
    CHECK_EQ_INT(at_cache_begin(c), AT_OK);
    CHECK_EQ_INT(at_cache_replace_winners(c, &k, &w, &n), AT_OK);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(at_cache_commit(c), AT_OK);
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM winners"), 6);
    at_cache_close(c);

    /* the delete refused (a trigger): the error names it, and the put is undone with it */
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    if (!c)
        return;
    CHECK_EQ_INT(at_cache_put_winner(c, &old_space, &w), AT_OK);
    CHECK_EQ_INT(raw_exec(path, "CREATE TRIGGER no_delete BEFORE DELETE ON winners BEGIN"
                                " SELECT RAISE(ABORT, 'deletes refused'); END"),
                 SQLITE_OK);
    strcpy(w.params, "TP_VEC=8 TP_ROWS=16");
    CHECK_EQ_INT(at_cache_replace_winners(c, &k, &w, &n), AT_ERR_CACHE);
    CHECK_STR_HAS(at_errmsg(), "supersede winners");
    CHECK_EQ_INT(at_cache_get_winner(c, &k, &q, &found), AT_OK);
    CHECK_STR_HAS(q.params, "TP_ROWS=8"); /* the put was undone with it */
    at_winner_clear(&q);
    CHECK_EQ_INT(raw_count(path, "SELECT count(*) FROM winners"), 7);
    at_cache_close(c);
}

int main(void)
{
    strcpy(tmpdir, "/tmp/test_cache.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    TT_RUN(test_sha256_vectors);
    TT_RUN(test_key_string_and_digest);
    TT_RUN(test_key_pinned);
    TT_RUN(test_key_escaping);
    TT_RUN(test_trial_state_names);
    TT_RUN(test_open_creates_dirs_and_schema);
    TT_RUN(test_refuse_not_sqlite);
    TT_RUN(test_refuse_foreign_and_newer);
    TT_RUN(test_truncated_copies);
    TT_RUN(test_unwritable);
    TT_RUN(test_device_roundtrip);
    TT_RUN(test_trial_roundtrip);
    TT_RUN(test_winner_roundtrip);
    TT_RUN(test_winner_tampered);
    TT_RUN(test_transactions);
    TT_RUN(test_two_handles);
    TT_RUN(test_processes);
    TT_RUN(test_default_path);
    TT_RUN(test_list_winners);
    TT_RUN(test_replace_winners);
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return TT_DONE();
}
