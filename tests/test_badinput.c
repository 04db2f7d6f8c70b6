/*
** test_badinput.c — issue 6's bad-input sweep where the module tests stop:
** each case runs the `autotune` binary (no GPU: --dry-run or a subcommand)
** and asserts the documented exit code, exactly one stderr line
** "autotune: ..." naming the problem, nothing on stdout, and that nothing
** changed (every file under the test folder keeps its bytes and mtime, none
** appears: a refused cache gets no -wal/-shm, a refused import creates no
** cache). Then library checks: SQL metacharacters in every text field, and a
** repeated name in a large JSON object. Prints the case count per category.
*/
#include "autotune.h"
#include "cli_run.h"
#include "json.h"
#include "table.h"
#include "tinytest.h"
#include "test_files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <ftw.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];
static int ncases;    /* cases of the running category */
static int stdout_ok; /* the case may print a partial report on stdout */

static const char *tpath(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
    return buf;
}

static int spits(const char *path, const char *text)
{
    return tt_spit(path, text, strlen(text));
}

/* ------------------------------------------------------------ snapshot */

/* One line per entry under tmpdir: path, type, size, mtime (ns) and, for a
** regular file, the sha256 of its bytes (a FIFO is never opened). */
static char *snap_buf;
static size_t snap_len, snap_cap;

/* Hashes already computed, by path, size, mtime and ctime: a write changes
** mtime and ctime (ctime cannot be set back), so an entry that matches all
** four has the bytes hashed before. Saves hashing ~2 MB twice per case. */
typedef struct known_hash {
    char path[160];
    long long size, mtime, ctime;
    char sha[65];
} known_hash;
static known_hash known[64];
static int nknown;

static void file_sha(const char *path, const struct stat *sb, char sha[65])
{
    long long mt = (long long)sb->st_mtim.tv_sec * 1000000000LL + sb->st_mtim.tv_nsec;
    long long ct = (long long)sb->st_ctim.tv_sec * 1000000000LL + sb->st_ctim.tv_nsec;
    for (int i = 0; i < nknown; i++)
        if (!strcmp(known[i].path, path) && known[i].size == (long long)sb->st_size && known[i].mtime == mt &&
            known[i].ctime == ct) {
            memcpy(sha, known[i].sha, 65);
            return;
        }
    size_t n;
    unsigned char *data = tt_slurp(path, &n);
    at_sha256_hex(data ? data : (const unsigned char *)"", data ? n : 0, sha);
    free(data);
    if (nknown < 64 && strlen(path) < sizeof known[0].path) {
        known_hash *k = &known[nknown++];
        snprintf(k->path, sizeof k->path, "%s", path);
        k->size = (long long)sb->st_size, k->mtime = mt, k->ctime = ct;
        memcpy(k->sha, sha, 65);
    }
}

static int snap_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    char line[768], sha[65] = "-";
    (void)flag, (void)ftw;
    if (S_ISREG(sb->st_mode) && sb->st_size <= (1 << 24)) /* the sparse 256 MiB table: size and times */
        file_sha(path, sb, sha);
    /* a folder's size and mtime move when SQLite makes and removes its
    ** side files in it; what it holds is listed entry by entry */
    int dir = S_ISDIR(sb->st_mode);
    int k = snprintf(line, sizeof line, "%s %o %lld %lld.%09ld %s\n", path, (unsigned)(sb->st_mode & S_IFMT),
                     dir ? 0LL : (long long)sb->st_size, dir ? 0LL : (long long)sb->st_mtim.tv_sec,
                     dir ? 0L : sb->st_mtim.tv_nsec, sha);
    if (k < 0)
        return 0;
    if (snap_len + (size_t)k + 1 > snap_cap) {
        snap_cap = 2 * (snap_len + (size_t)k + 1);
        snap_buf = realloc(snap_buf, snap_cap);
    }
    memcpy(snap_buf + snap_len, line, (size_t)k + 1);
    snap_len += (size_t)k;
    return 0;
}

/* The state of tmpdir as one malloc'ed string (sorted by nftw's walk: a
** folder that did not change is walked in the same order). */
static char *snapshot(void)
{
    snap_buf = NULL, snap_len = snap_cap = 0;
    nftw(tmpdir, snap_entry, 16, FTW_PHYS);
    return snap_buf ? snap_buf : strdup("");
}

/* ------------------------------------------------------------- running */

static cli_out out;

/* Runs `autotune args` (30 s at most: a hang is a failure, exit 124). */
static void run_bin(const char *args)
{
    char cmd[8192], p[128];
    /* per-process names: tests may run in parallel */
    snprintf(cmd, sizeof cmd, "timeout 30 %s %s >/tmp/at_bi_out.%d 2>/tmp/at_bi_err.%d </dev/null", cli_bin(),
             args, (int)getpid(), (int)getpid());
    int st = system(cmd);
    out.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    snprintf(p, sizeof p, "/tmp/at_bi_out.%d", (int)getpid());
    slurp(p, out.out, sizeof out.out);
    remove(p);
    snprintf(p, sizeof p, "/tmp/at_bi_err.%d", (int)getpid());
    slurp(p, out.err, sizeof out.err);
    remove(p);
}

/* The same for a subcommand, without starting the binary (which takes
** ~0.1 s to map cuBLAS and NVRTC): a child process runs at_table_main, the
** function main() hands `autotune export|import|merge|show ...` to, with
** the space-separated words of args as its argv. */
static void run_sub(const char *args)
{
    char po[64], pe[64];
    snprintf(po, sizeof po, "/tmp/at_bi_out.%d", (int)getpid());
    snprintf(pe, sizeof pe, "/tmp/at_bi_err.%d", (int)getpid());
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        char buf[4096], *argv[64], *save = NULL;
        int argc = 0;
        alarm(30); /* a hang ends the child: SIGALRM, not an exit code */
        if (!freopen(po, "w", stdout) || !freopen(pe, "w", stderr))
            _exit(99);
        snprintf(buf, sizeof buf, "%s", args);
        for (char *t = strtok_r(buf, " ", &save); t && argc < 63; t = strtok_r(NULL, " ", &save))
            argv[argc++] = t;
        argv[argc] = NULL;
        int rc = at_table_main(argc, argv);
        fflush(NULL);
        _exit(rc & 0xff);
    }
    int st = -1;
    if (pid > 0)
        waitpid(pid, &st, 0);
    out.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    slurp(po, out.out, sizeof out.out);
    remove(po);
    slurp(pe, out.err, sizeof out.err);
    remove(pe);
}

/* stderr holds one of the '|'-separated needles */
static int has_any(const char *hay, const char *needles)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", needles);
    for (char *save = NULL, *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save))
        if (strstr(hay, t))
            return 1;
    return 0;
}

/* One bad invocation: exit code, one printable line "autotune: ..." holding
** a needle, empty stdout, the test folder as it was. */
static void expect_with(void (*run)(const char *), const char *args, int code, const char *needles)
{
    char *before = snapshot();
    run(args);
    char *after = snapshot();
    const char *nl = strchr(out.err, '\n');
    int printable = 1;
    for (const unsigned char *p = (const unsigned char *)out.err; *p; p++)
        printable &= *p >= 0x20 || *p == '\n' || *p == '\t';
    int ok = out.code == code && has_any(out.err, needles) && !strncmp(out.err, "autotune: ", 10) && nl &&
             nl[1] == '\0' && printable && (stdout_ok || out.out[0] == '\0') && !strcmp(before, after);
    if (!ok) {
        fprintf(stderr, "  case `autotune %s`: want %d '%s', got %d\n  stderr: %s  stdout: %.300s\n", args, code,
                needles, out.code, out.err, out.out);
        if (strcmp(before, after))
            fprintf(stderr, "  the folder changed:\n--- before\n%s--- after\n%s", before, after);
    }
    CHECK_EQ_INT(out.code, code);
    CHECK(has_any(out.err, needles));
    CHECK(!strncmp(out.err, "autotune: ", 10));
    CHECK(nl != NULL && nl[1] == '\0'); /* exactly one line */
    CHECK(printable);
    CHECK(stdout_ok || out.out[0] == '\0');
    CHECK(!strcmp(before, after)); /* nothing changed, nothing created */
    free(before);
    free(after);
    ncases++;
}

static void expect(const char *args, int code, const char *needles)
{
    expect_with(run_bin, args, code, needles);
}

static void expect_fmt(void (*run)(const char *), int code, const char *needles, const char *fmt, va_list ap)
{
    char args[4096];
    vsnprintf(args, sizeof args, fmt, ap);
    expect_with(run, args, code, needles);
}

/* expectf: through the binary; subf: a subcommand in a child (run_sub). */
static void expectf(int code, const char *needles, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void subf(int code, const char *needles, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void expectf(int code, const char *needles, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    expect_fmt(run_bin, code, needles, fmt, ap);
    va_end(ap);
}

static void subf(int code, const char *needles, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    expect_fmt(run_sub, code, needles, fmt, ap);
    va_end(ap);
}

static void count(const char *category)
{
    printf("  cases: %-28s %d\n", category, ncases);
    ncases = 0;
}

/* ------------------------------------------------------------ fixtures */

static const at_device_info H200 = {"NVIDIA H200", 9,  0, 132,    62914560, 150754820096LL,
                                    13000,         13, 0, 4580.5, 4260.25,  0.53};

static at_key key_for(const char *shape)
{
    at_key k;
    memset(&k, 0, sizeof k);
    strcpy(k.op, "gemv");
    k.dtype = AT_BF16;
    snprintf(k.shape, sizeof k.shape, "%s", shape);
    snprintf(k.device, sizeof k.device, "%s", H200.name);
    k.cc = 90;
    k.sms = 132;
    k.driver_version = 13000;
    k.nvrtc_version = 13000;
    at_sha256_hex("space", 5, k.space_sha);
    strcpy(k.options, "-arch=sm_90");
    strcpy(k.tuner_version, AT_TUNER_VERSION);
    return k;
}

static at_winner winner(unsigned char *blob, size_t n)
{
    at_winner w;
    memset(&w, 0, sizeof w);
    strcpy(w.strategy, "warp_row");
    strcpy(w.kernel, "gemv_warp_row");
    strcpy(w.template_name, "gemv/gemv_warp_row.cu");
    strcpy(w.params, "TP_VEC=8");
    w.us = 8.0, w.us_min = 7.9, w.us_max = 8.2;
    w.baseline_us = 10.0, w.baseline_min = 9.9, w.baseline_max = 10.3;
    w.speedup = 1.25;
    w.bytes = 33554432;
    w.grid[0] = w.grid[1] = w.grid[2] = 1;
    w.block[0] = 128, w.block[1] = w.block[2] = 1;
    w.cubin = blob;
    w.cubin_size = n;
    return w;
}

/* good.db: one GPU, a few winners and 200 trials (several pages); good.json: its export. */
static int make_good(void)
{
    char db[128], js[128];
    unsigned char blob[300];
    at_cache *c = NULL;
    for (size_t i = 0; i < sizeof blob; i++)
        blob[i] = (unsigned char)(i * 7);
    if (at_cache_open(tpath(db, sizeof db, "good.db"), &c) != AT_OK)
        return -1;
    int bad = at_cache_put_device(c, &H200) != AT_OK || at_cache_begin(c) != AT_OK;
    const char *shapes[] = {"1x2048x8192", "1x2048x2048", "1x6144x2048"};
    for (int i = 0; i < 3; i++) {
        at_key k = key_for(shapes[i]);
        at_winner w = winner(blob, sizeof blob - (size_t)i);
        bad |= at_cache_put_winner(c, &k, &w) != AT_OK;
        for (int j = 0; j < 70; j++) {
            at_trial t;
            memset(&t, 0, sizeof t);
            strcpy(t.strategy, "warp_row");
            snprintf(t.params, sizeof t.params, "TP_VEC=8 TP_ROWS=%d", j);
            snprintf(t.reason, sizeof t.reason, "padding padding padding padding padding %d", j);
            t.us = 9 + j;
            bad |= at_cache_put_trial(c, &k, &t) != AT_OK;
        }
    }
    bad |= at_cache_commit(c) != AT_OK;
    at_cache_close(c);
    bad |= at_table_export_file(db, NULL, 0, AT_TABLE_JSON, tpath(js, sizeof js, "good.json")) != AT_OK;
    return bad ? -1 : 0;
}

/* A copy of good.db under `name`, cut to `len` bytes (0: whole), with bytes
** [from, to) overwritten by a pattern (none when to <= from). */
static void variant_db(const char *name, size_t len, size_t from, size_t to)
{
    char src[128], dst[128];
    size_t n;
    unsigned char *d = tt_slurp(tpath(src, sizeof src, "good.db"), &n);
    if (!d)
        return;
    for (size_t i = from; i < to && i < n; i++)
        d[i] = (unsigned char)(i * 131 + 17);
    CHECK(tt_spit(tpath(dst, sizeof dst, name), d, len && len < n ? len : n) == 0);
    free(d);
}

static void raw_sql(const char *name, const char *sql)
{
    char p[128];
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(tpath(p, sizeof p, name), &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
}

/* ------------------------------------------------------------- CLI args */

static void cli_shapes(void)
{
    static const struct {
        const char *shape, *needle;
    } cases[] = {
        {"-1x2048x8192", "positive"},
        {"1x-5x8", "positive"},
        {"0x0x0", "at least 1"},
        {"1x4294967297x8", "larger than 2147483647"},          /* 2^32+1: wraps to 1 as uint32 */
        {"1x18446744073709551617x8", "larger than 2147483647"}, /* 2^64+1: wraps to 1 as uint64 */
        {"1048576x1048577x1", "elements, more than"},           /* M*K just past 2^40 */
        {"1x1048577x1048576", "elements, more than"},           /* N*K just past 2^40 */
        {"2147483647x2147483647x2147483647", "elements, more than"}, /* past size_t for 2-byte elements */
        {"", "expected MxKxN"},
        {"2048x8192", "expected MxKxN"},
        {"1x2048x8192x1x1", "3 dimensions"},
        {"1e3x2048x8192", "expected MxKxN"},
        {"0x10x8", "at least 1"},
        {"\xef\xbc\x91x2048x8192", "expected a number"}, /* a full-width digit one */
        {"1x2048x8192;", "3 dimensions"},
        {" 1x2048x8192", "expected a number"},
    };
    /* each through the parser; a few through the binary (exit code, one line) */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        at_shape sh = {7, 7, 7, 3};
        CHECK_EQ_INT(at_shape_parse(cases[i].shape, 3, &sh), AT_ERR_USAGE);
        CHECK_STR_HAS(at_errmsg(), "bad shape");
        CHECK_STR_HAS(at_errmsg(), cases[i].needle);
        CHECK_EQ_INT(sh.M, 7);
        if (i == 0 || i == 3 || i == 7 || i == 8 || i == 13)
            expectf(2, cases[i].needle, "--op gemv --dry-run --shape '%s'", cases[i].shape);
        else
            ncases++;
    }
    count("CLI shapes");
}

static void cli_options(void)
{
    static const struct {
        const char *args, *needle;
    } cases[] = {
        {"--op '' --shape 1x64x64 --dry-run", "unknown op ''"},
        {"--op GEMV --shape 1x64x64 --dry-run", "unknown op 'GEMV'"},
        {"--op ../search/gemv --shape 1x64x64 --dry-run", "unknown op '../search/gemv'"},
        {"--op gemm --shape 1x2048x2048 --dry-run", "unknown op 'gemm'"},
        {"--op rmsnorm --shape 1x2048x2048 --dry-run", "takes a TxH shape"}, /* a norm takes TxH */
        {"--op gemv --shape 1x64x64 --dtype BF16 --dry-run", "unknown dtype 'BF16'"},
        {"--op gemv --shape 1x64x64 --dtype '' --dry-run", "unknown dtype ''"},
        {"--op gemv --shape 1x64x64 --dtype fp32 --dry-run", "unknown dtype 'fp32'"},
        {"--op gemv --shape 1x64x64 --device -1 --dry-run", "--device"},
        {"--op gemv --shape 1x64x64 --device 1024 --dry-run", "--device"},
        {"--op gemv --shape 1x64x64 --device 0x1 --dry-run", "--device"},
        {"--op gemv --shape 1x64x64 --threads 257 --dry-run", "--threads"},
        {"--op gemv --shape 1x64x64 --reps 99999999999999999999 --dry-run", "--reps"},
        {"--op gemv --shape 1x64x64 --top abc --dry-run", "--top"},
        {"--op gemv --shape 1x64x64 --dry-run --arch sm_", "--arch"},
        {"--op gemv --shape 1x64x64 --dry-run --arch sm_-90", "--arch"},
        {"--op gemv --shape 1x64x64 --dry-run --arch sm_9999", "--arch"},
        {"frobnicate", "unknown option 'frobnicate'"},
        {"--op gemv --shape 1x64x64 --dry-run --spec", "--spec needs a value"},
    };
    static const struct {
        const char *args, *needle;
    } subs[] = {
        {"import", "import needs a file"},
        {"import a.json b.json", "unexpected argument 'b.json'"},
        {"show --device", "--device needs a value"},
        {"show --db", "--db needs a value"},
        {"export --all", "--format"},
        {"export --format xml", "unknown table format 'xml'"},
        {"export --format json --all --device X", "not both"},
        {"merge", "merge needs a file"},
        {"merge a.db --all", "unexpected argument '--all'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect(cases[i].args, 2, cases[i].needle);
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        expect_with(run_sub, subs[i].args, 2, subs[i].needle);
    expect("import", 2, "import needs a file"); /* and through main()'s dispatch */
    count("CLI options, op, dtype");
}

/* --spec, --templates and import FILE that are missing or not files. */
static void cli_files(void)
{
    char fifo[128], dir[128], big[128], empty[128], p[128];
    tpath(fifo, sizeof fifo, "fifo");
    CHECK(mkfifo(fifo, 0644) == 0); /* no process ever writes it */
    tpath(dir, sizeof dir, "adir");
    CHECK(mkdir(dir, 0755) == 0);
    tpath(big, sizeof big, "big.lua");
    char *pad = malloc(200 * 1024 + 1);
    memset(pad, '-', 200 * 1024);
    pad[200 * 1024] = '\0';
    CHECK(spits(big, pad) == 0);
    free(pad);
    CHECK(spits(tpath(empty, sizeof empty, "empty"), "") == 0);
    const char *dry = "--op gemv --shape 1x64x64 --dry-run";
    expectf(3, "cannot read spec", "%s --spec %s/missing.lua", dry, tmpdir);
    expectf(3, "Is a directory", "%s --spec %s", dry, dir);
    expectf(3, "must return a table", "%s --spec %s", dry, fifo); /* no hang on open */
    expectf(3, "larger than 128 KiB", "%s --spec /dev/zero", dry);
    expectf(3, "larger than 128 KiB", "%s --spec %s", dry, big);
    expectf(3, "must return a table", "%s --spec %s", dry, empty);
    expectf(9, "templates", "%s --templates %s/missing", dry, tmpdir);
    expectf(9, "templates", "%s --templates %s", dry, empty);
    expectf(9, "templates", "%s --templates %s", dry, dir); /* no common/ */
    expectf(9, "templates", "%s --templates %s", dry, fifo);
    char tdir[160], hfifo[192];
    tpath(tdir, sizeof tdir, "tplfifo");
    snprintf(hfifo, sizeof hfifo, "%s/common", tdir);
    CHECK(mkdir(tdir, 0755) == 0 && mkdir(hfifo, 0755) == 0);
    snprintf(hfifo, sizeof hfifo, "%s/common/stuck.cuh", tdir);
    CHECK(mkfifo(hfifo, 0644) == 0); /* a shared header nobody writes: no hang on open */
    expectf(9, "not a regular file", "%s --templates %s", dry, tdir);
    char db[128];
    tpath(db, sizeof db, "never/tune.db"); /* must not be created */
    subf(9, "cannot read", "import %s/missing.json --db %s", tmpdir, db);
    subf(2, "not a regular file", "import %s --db %s", dir, db);
    subf(2, "not a regular file", "import %s --db %s", fifo, db); /* no hang on open */
    subf(2, "not a regular file", "import /dev/zero --db %s", db);
    FILE *f = fopen(tpath(p, sizeof p, "huge.json"), "wb");
    CHECK(f && ftruncate(fileno(f), AT_TABLE_MAX_BYTES + 1) == 0); /* sparse */
    if (f)
        fclose(f);
    subf(2, "larger than the 256 MiB", "import %s --db %s", p, db);
    remove(p);
    subf(8, "no cache at", "merge %s/missing.db --db %s", tmpdir, db);
    subf(8, "not a regular file", "merge %s --db %s", fifo, db);
    count("missing / non-regular files");
}

/* ------------------------------------------------------------ caches */

static void cache_files(void)
{
    char p[128], good[128], gjs[128];
    size_t n;
    tpath(good, sizeof good, "good.db");
    tpath(gjs, sizeof gjs, "good.json");
    free(tt_slurp(good, &n));
    CHECK(n > 16384);
    /* the bad caches */
    CHECK(spits(tpath(p, sizeof p, "text.db"), "# notes, not a database\n") == 0);
    unsigned char junk[8192];
    srand(11);
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)rand();
    CHECK(tt_spit(tpath(p, sizeof p, "random.db"), junk, sizeof junk) == 0);
    CHECK(spits(tpath(p, sizeof p, "onebyte.db"), "x") == 0);
    CHECK(spits(tpath(p, sizeof p, "magic.db"), "SQLite format 3") == 0); /* the magic, then nothing */
    variant_db("header.db", 100, 0, 0);
    variant_db("half.db", n / 2, 0, 0);
    variant_db("lastpage.db", n - 4096, 0, 0);
    variant_db("pages.db", 0, 4096, 3 * 4096); /* pages 2-3 overwritten */
    variant_db("newer.db", 0, 0, 0);
    raw_sql("newer.db", "PRAGMA user_version = 99");
    raw_sql("foreign.db", "CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('ada')");
    raw_sql("foreign1.db", "CREATE TABLE t (x); PRAGMA user_version = 1");
    CHECK(mkdir(tpath(p, sizeof p, "dir.db"), 0755) == 0);

    static const struct {
        const char *name, *needle;
    } bad[] = {
        {"text.db", "not an SQLite database"},
        {"random.db", "not an SQLite database"},
        {"onebyte.db", "is not an autotune cache"},
        {"magic.db", "is not an autotune cache"},
        {"header.db", "corrupt|malformed"},
        {"half.db", "corrupt|malformed"},
        {"lastpage.db", "corrupt|malformed"},
        {"pages.db", "corrupt|malformed|btree"},
        {"newer.db", "schema version 99, newer than this autotune"},
        {"foreign.db", "is not an autotune cache"},
        {"foreign1.db", "is not an autotune cache"},
        {"dir.db", "not a regular file"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char db[128], needle[256];
        tpath(db, sizeof db, bad[i].name);
        /* the message names the file and the problem */
        snprintf(needle, sizeof needle, "%s", bad[i].needle);
        subf(8, needle, "show --db %s", db);
        CHECK_STR_HAS(out.err, db);
        subf(8, needle, "export --format json --db %s", db);
        subf(8, needle, "export --format c --db %s -o %s/out.h", db, tmpdir);
        subf(8, needle, "import %s --db %s", gjs, db);
        CHECK_STR_HAS(out.err, db);
        subf(8, needle, "merge %s --db %s", good, db);
        subf(8, needle, "merge %s --db %s", db, good); /* and good.db is untouched */
    }
    /* structurally valid, but numbers no tuner writes: 10 * cc_major
    ** overflowed int (UBSan) before the reader checked the ranges */
    variant_db("damaged_cc.db", 0, 0, 0);
    raw_sql("damaged_cc.db", "UPDATE devices SET cc_major = 300000000");
    variant_db("damaged_grid.db", 0, 0, 0);
    raw_sql("damaged_grid.db", "UPDATE winners SET grid_x = -1");
    /* rows autotune never writes: exported, they would not import again */
    variant_db("damaged_shape.db", 0, 0, 0);
    raw_sql("damaged_shape.db", "UPDATE winners SET shape = '01x2048x8192' WHERE shape = '1x2048x8192'");
    variant_db("damaged_twice.db", 0, 0, 0); /* one key in two rows (stored key_sha differs) */
    raw_sql("damaged_twice.db", "CREATE TEMP TABLE t AS SELECT * FROM winners LIMIT 1;"
                                " UPDATE t SET key_sha = 'another'; INSERT INTO winners SELECT * FROM t");
    static const char *const damaged[] = {"damaged_cc.db", "damaged_grid.db", "damaged_shape.db",
                                          "damaged_twice.db"};
    for (size_t i = 0; i < sizeof damaged / sizeof damaged[0]; i++) {
        char db[128];
        tpath(db, sizeof db, damaged[i]);
        subf(8, "damaged", "show --db %s", db);
        subf(8, "damaged", "export --format csv --db %s", db);
        subf(8, "damaged", "merge %s --db %s", db, good);
    }
    /* through main()'s dispatch too */
    expectf(8, "not an SQLite database", "show --db %s/text.db", tmpdir);
    expectf(8, "schema version 99", "import %s --db %s/newer.db", gjs, tmpdir);
    /* a cache whose folder is a file, and one beside it that cannot be created */
    subf(8, "cannot create directory", "import %s --db %s/text.db/sub/tune.db", gjs, tmpdir);
    subf(2, "is the cache itself", "merge %s --db %s", good, good);
    subf(8, "not an SQLite database", "merge %s --db %s", gjs, good);
    subf(2, "json: unexpected character 'S'", "import %s --db %s", good, good); /* a cache is no table */
    /* read-only: root writes through mode bits, so only a normal user can see the refusal */
    if (geteuid() != 0) {
        variant_db("ro.db", 0, 0, 0);
        chmod(tpath(p, sizeof p, "ro.db"), 0444);
        subf(8, "read-only", "import %s --db %s", gjs, p);
    } else {
        printf("  note: running as root: the read-only cache case is not checkable here\n");
    }
    count("cache files");
}

/* ------------------------------------------------------------- tables */

static void table_files(void)
{
    char gjs[128], p[128], db[128], good[128];
    size_t n;
    tpath(gjs, sizeof gjs, "good.json");
    tpath(good, sizeof good, "good.db");
    tpath(db, sizeof db, "fresh/tune.db"); /* never created by a bad table */
    unsigned char *g = tt_slurp(gjs, &n);
    CHECK(g && n > 1000);
    if (!g)
        return;
    static const size_t cuts[] = {0, 1, 2, 10, 100, 1000};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        CHECK(tt_spit(tpath(p, sizeof p, "cut.json"), g, cuts[i] ? cuts[i] : n / 2) == 0);
        subf(2, "cut.json:", "import %s --db %s", p, db);
    }
    CHECK(tt_spit(tpath(p, sizeof p, "minus1.json"), g, n - 2) == 0); /* without its last '}' */
    subf(2, "missing '}'", "import %s --db %s", p, db);
    char *bom = malloc(n + 3);
    memcpy(bom, "\xEF\xBB\xBF", 3);
    memcpy(bom + 3, g, n);
    CHECK(tt_spit(tpath(p, sizeof p, "bom.json"), bom, n + 3) == 0);
    free(bom);
    subf(2, "unexpected byte 0xef", "import %s --db %s", p, db);
    CHECK(tt_spit(tpath(p, sizeof p, "utf16.json"), "\xFF\xFE{\0}\0", 6) == 0);
    subf(2, "json:", "import %s --db %s", p, db);
    static const struct {
        const char *name, *text, *needle;
    } cases[] = {
        {"ws.json", " \n\t ", "empty document"},
        {"null.json", "null", "not an autotune table"},
        {"array.json", "[]", "not an autotune table"},
        {"nul.json", "{\"format\": \"autotune-table\"\0}", "json:"},
        {"v2.json", "{\"format\": \"autotune-table\", \"version\": 2, \"devices\": []}", "table version 2"},
        {"vbig.json", "{\"format\": \"autotune-table\", \"version\": 1e999, \"devices\": []}", "out of range"},
        {"vneg.json", "{\"format\": \"autotune-table\", \"version\": -9223372036854775809, \"devices\": []}",
         "version"},
        {"devs.json", "{\"format\": \"autotune-table\", \"version\": 1, \"devices\": {}}", "devices: expected an array"},
        {"dup.json", "{\"format\": \"autotune-table\", \"version\": 1, \"version\": 1, \"devices\": []}",
         "duplicate key \"version\""},
        {"deep.json", "{\"format\": \"autotune-table\", \"version\": 1, \"devices\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                      "[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
         "nesting deeper than 32"},
        {"newline.json", "{\"format\": \"autotune-table\", \"version\": 1, \"devices\": [], \"a\\nb\\u001b[2J\": 0}",
         "unknown field"},
        {"csv.json", "device,arch,sms\nNVIDIA H200,sm_90,132\n", "unexpected character 'd'"},
        {"header.json", "/* Tuned kernel table */\n#ifndef X\n", "unexpected character '/'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = strlen(cases[i].text);
        if (!strcmp(cases[i].name, "nul.json"))
            len = 30; /* through the NUL byte */
        CHECK(tt_spit(tpath(p, sizeof p, cases[i].name), cases[i].text, len) == 0);
        subf(2, cases[i].needle, "import %s --db %s", p, db);
    }
    /* a good table imported into good.db, then a bad one: good.db unchanged */
    char args[512];
    snprintf(args, sizeof args, "import %s --db %s", gjs, good);
    run_sub(args);
    CHECK_EQ_INT(out.code, 0);
    CHECK_STR_HAS(out.out, "already present");
    subf(2, "table version 2", "import %s/v2.json --db %s", tmpdir, good);
    expectf(2, "table version 2", "import %s/v2.json --db %s", tmpdir, good); /* through main() */
    free(g);
    count("exported tables");
}

/* ------------------------------------------------------------- specs */

/* A spec with one strategy; any argument may replace its part. */
static const char *spec_text(const char *top, const char *tpl, const char *params, const char *cons)
{
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "%s\nreturn {\n  op = 'gemv',\n  strategies = {\n    { name = 's', kernel = 'gemv_broken',"
             " template = '%s',\n      params = %s,\n      constraints = %s,\n"
             "      grid = function(p, s) return {1, 1, 1} end,\n"
             "      block = function(p, s) return {32, 1, 1} end },\n  },\n"
             "  bytes = function(s) return 1 end,\n}\n",
             top ? top : "", tpl ? tpl : "gemv/gemv_broken.cu", params ? params : "{ { 'TP_BREAK', {0} } }",
             cons ? cons : "{}");
    return buf;
}

static void specs(void)
{
    static const struct {
        const char *name, *top, *tpl, *params, *cons, *needle;
    } cases[] = {
        {"syntax.lua", "local x = = 1", NULL, NULL, NULL, "syntax.lua:1:"},
        {"runtime.lua", "local t = nil\nlocal y = t.x", NULL, NULL, NULL, "runtime.lua:2: attempt to index"},
        {"cons_error.lua", NULL, NULL, NULL, "{ { 'boom', function(p) return p.nope.x end } }",
         "constraint 'boom'"},
        {"cons_type.lua", NULL, NULL, NULL, "{ { 'num', function(p) return 42 end } }", "returned a number"},
        {"values.lua", NULL, NULL, "{ { 'TP_BREAK', {'0'} } }", NULL, "values must be integers"},
        {"params.lua", NULL, NULL, "'TP_BREAK'", NULL, "params must be a list"},
        {"noparams.lua", NULL, NULL, "{ { 'TP_BREAK', {} } }", NULL, "values must be a list"},
        {"pruned.lua", NULL, NULL, NULL, "{ { 'never', function(p) return false end } }",
         "every one of the 1 candidates was pruned"},
        {"loop.lua", "while true do end", NULL, NULL, NULL, "instruction limit exceeded"},
        {"memory.lua", "local s = string.rep('x', 1 << 30)", NULL, NULL, NULL, "memory limit exceeded"},
        {"os.lua", "os.execute('touch /tmp/at_bi_pwned')", NULL, NULL, NULL, "global 'os'"},
        {"io.lua", "io.open('/etc/passwd')", NULL, NULL, NULL, "global 'io'"},
        {"require.lua", "require('os')", NULL, NULL, NULL, "global 'require'"},
        {"debug.lua", "debug.sethook()", NULL, NULL, NULL, "global 'debug'"},
        {"package.lua", "package.loadlib('libc.so.6', 'system')", NULL, NULL, NULL, "global 'package'"},
        {"dofile.lua", "dofile('/etc/passwd')", NULL, NULL, NULL, "global 'dofile'"},
        {"bytecode.lua", "local f, e = load('\\27Lua\\84\\0') if not f then error(e) end", NULL, NULL, NULL,
         "binary chunk"},
        {"dump.lua", "string.dump(print)", NULL, NULL, NULL, "field 'dump'"},
        {"newline.lua", "error('first line\\nsecond line')", NULL, NULL, NULL, "first line second line"},
        {"escape.lua", "error('\\27[2J\\27[31mred')", NULL, NULL, NULL, "?[2J?[31mred"},
        {"dotdot.lua", NULL, "gemv/../../../etc/passwd", NULL, NULL, "leaves the templates folder"},
        {"absolute.lua", NULL, "/etc/passwd", NULL, NULL, "leaves the templates folder"},
        {"tilde.lua", NULL, "~/x.cu", NULL, NULL, "template"},
        {"empty.lua", "do return { op = 'gemv', strategies = {}, bytes = print } end", NULL, NULL, NULL,
         "no strategies"},
        {"otherop.lua", "do return { op = 'rmsnorm', strategies = {}, bytes = print } end", NULL, NULL, NULL,
         "no strategies|not 'gemv'"},
        {"huge.lua", NULL, NULL,
         "{ {'TP_A', {1,2,3,4,5,6,7,8,9,10}}, {'TP_B', {1,2,3,4,5,6,7,8,9,10}}, {'TP_C', {1,2,3,4,5,6,7,8,9,10}},"
         " {'TP_D', {1,2,3,4,5,6,7,8,9,10}}, {'TP_E', {1,2,3,4,5,6,7,8,9,10}}, {'TP_F', {1,2,3,4,5,6,7,8,9,10}},"
         " {'TP_G', {1,2,3,4,5,6,7,8,9,10}} }",
         NULL, "too large|candidate cap|candidates"},
    };
    char p[128];
    CHECK(mkdir(tpath(p, sizeof p, "specs"), 0755) == 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "specs/%s", cases[i].name);
        CHECK(spits(tpath(p, sizeof p, name), spec_text(cases[i].top, cases[i].tpl, cases[i].params,
                                                         cases[i].cons)) == 0);
    }
    CHECK(tt_spit(tpath(p, sizeof p, "specs/binary.lua"), "\x1bLuaT\0\x19\x93\r\n\x1a\n", 12) == 0);
    CHECK(tt_spit(tpath(p, sizeof p, "specs/nul.lua"), "return {\0}", 10) == 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stdout_ok = !strcmp(cases[i].name, "pruned.lua"); /* the table of what was pruned, and why */
        expectf(3, cases[i].needle,
                "--op gemv --shape 1x64x64 --dry-run --spec %s/specs/%s --templates tests/fixtures/templates",
                tmpdir, cases[i].name);
        stdout_ok = 0;
    }
    expectf(3, "binary.lua", "--op gemv --shape 1x64x64 --dry-run --spec %s/specs/binary.lua", tmpdir);
    expectf(3, "nul.lua:1:", "--op gemv --shape 1x64x64 --dry-run --spec %s/specs/nul.lua", tmpdir);
    CHECK(access("/tmp/at_bi_pwned", F_OK) != 0);
    count("Lua specs");
}

/* ------------------------------------------------------ library checks */

/* Text fields full of SQL syntax are data: stored and read back as they
** are, every table intact (the cache binds every value). */
static void sql_text_is_data(void)
{
    char db[128];
    at_cache *c = NULL;
    const char *evil = "x'); DROP TABLE winners; --\"";
    CHECK_EQ_INT(at_cache_open(tpath(db, sizeof db, "sql.db"), &c), AT_OK);
    if (!c)
        return;
    at_key k = key_for("1x64x64");
    snprintf(k.op, sizeof k.op, "%.*s", (int)sizeof k.op - 1, evil);
    snprintf(k.device, sizeof k.device, "%s", evil);
    snprintf(k.options, sizeof k.options, "%s", evil);
    at_trial t, q;
    memset(&t, 0, sizeof t);
    snprintf(t.strategy, sizeof t.strategy, "%s", evil);
    snprintf(t.params, sizeof t.params, "%s", evil);
    snprintf(t.reason, sizeof t.reason, "%s", evil);
    CHECK_EQ_INT(at_cache_put_trial(c, &k, &t), AT_OK);
    int found = 0;
    CHECK_EQ_INT(at_cache_get_trial(c, &k, t.strategy, t.params, &q, &found), AT_OK);
    CHECK(found && !strcmp(q.reason, evil));
    at_winner w = winner(NULL, 0), r;
    snprintf(w.params, sizeof w.params, "%s", evil);
    CHECK_EQ_INT(at_cache_put_winner(c, &k, &w), AT_OK);
    CHECK_EQ_INT(at_cache_get_winner(c, &k, &r, &found), AT_OK);
    CHECK(found && !strcmp(r.params, evil));
    at_winner_clear(&r);
    at_device_info d = H200;
    snprintf(d.name, sizeof d.name, "%s", evil);
    CHECK_EQ_INT(at_cache_put_device(c, &d), AT_OK);
    at_cache_close(c);
    /* every table still there, one row each; show reads it */
    sqlite3 *s = NULL;
    sqlite3_stmt *st = NULL;
    CHECK(sqlite3_open(db, &s) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(s,
                             "SELECT (SELECT count(*) FROM devices), (SELECT count(*) FROM trials),"
                             " (SELECT count(*) FROM winners)",
                             -1, &st, NULL) == SQLITE_OK);
    CHECK(st && sqlite3_step(st) == SQLITE_ROW);
    if (st) {
        CHECK_EQ_INT(sqlite3_column_int(st, 0), 1);
        CHECK_EQ_INT(sqlite3_column_int(st, 1), 1);
        CHECK_EQ_INT(sqlite3_column_int(st, 2), 1);
    }
    sqlite3_finalize(st);
    sqlite3_close(s);
    FILE *f = tmpfile();
    CHECK_EQ_INT(at_table_show(db, NULL, f), AT_OK);
    if (f)
        fclose(f);
}

/* 4096 long names (16 MiB) with one repeat at the end: refused at the
** repeat's position; without the repeat, accepted. (The check used to
** compare each name with every earlier one: quadratic in the names.) */
static void json_many_long_names(void)
{
    enum { NAMES = 4096, LEN = 4000 };
    size_t cap = (size_t)NAMES * (LEN + 16) + 64, pos = 0;
    char *doc = malloc(cap);
    CHECK(doc != NULL);
    if (!doc)
        return;
    doc[pos++] = '{';
    for (int i = 0; i < NAMES; i++) {
        pos += (size_t)snprintf(doc + pos, cap - pos, "%s\n\"", i ? "," : "");
        memset(doc + pos, 'k', LEN);
        pos += LEN;
        /* the last name repeats the first */
        pos += (size_t)snprintf(doc + pos, cap - pos, "%04d\": %d", i == NAMES - 1 ? 0 : i, i);
    }
    doc[pos++] = '}';
    at_json *v = NULL;
    CHECK_EQ_INT(at_json_parse(doc, pos, "names.json", &v), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "names.json:4097:1: json: duplicate key \"kkkk");
    CHECK(v == NULL);
    /* the same document without the repeat */
    char *last = strstr(doc + pos - LEN - 32, "0000\"");
    CHECK(last != NULL);
    if (last)
        memcpy(last, "9999", 4);
    CHECK_EQ_INT(at_json_parse(doc, pos, "names.json", &v), AT_OK);
    CHECK(v && v->count == NAMES);
    at_json_free(v);
    free(doc);
}

/* ---------------------------------------------------------------- main */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int main(void)
{
    char p[128];
    (void)cli_run; /* cli_run.h's runner: this file runs with a timeout instead */
    strcpy(tmpdir, "/tmp/test_badinput.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    /* a default cache, if anything made one, would appear in the snapshot */
    setenv("XDG_CACHE_HOME", tpath(p, sizeof p, "xdg"), 1);
    setenv("HOME", tpath(p, sizeof p, "home"), 1);
    if (make_good() != 0) {
        fprintf(stderr, "cannot build the fixture cache: %s\n", at_errmsg());
        return 1;
    }
    TT_RUN(cli_shapes);
    TT_RUN(cli_options);
    TT_RUN(cli_files);
    TT_RUN(cache_files);
    TT_RUN(table_files);
    TT_RUN(specs);
    TT_RUN(sql_text_is_data);
    TT_RUN(json_many_long_names);
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return TT_DONE();
}
