/*
** test_suite.c — suites: the Qwen3.5 suite files load with every GEMV at
** M = 1..16 and their norms; bad files (syntax, unknown op, bad shape, empty,
** duplicates, unknown fields, sandbox escapes, runaway loops) fail with
** "file:line:" and the spec status; --only filtering; and the runner hands
** every entry to exactly one of several worker processes, which share one
** SQLite cache without losing a row (a fake worker: no GPU needed); the
** CLI runs a dry-run suite on three workers and refuses bad input cleanly.
*/
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autotune.h"
#include "cli_run.h"
#include "devices.h"
#include "suite.h"
#include "tinytest.h"
#include "worker.h"

#include <sqlite3.h>

static int count_op(const at_suite *s, const char *op)
{
    int n = 0;
    for (int i = 0; i < s->nentries; i++)
        n += strcmp(s->entries[i].op, op) == 0;
    return n;
}

static const at_suite_entry *find(const at_suite *s, const char *op, const char *shape)
{
    for (int i = 0; i < s->nentries; i++)
        if (!strcmp(s->entries[i].op, op) && !strcmp(s->entries[i].shape_text, shape))
            return &s->entries[i];
    return NULL;
}

static void qwen_suites_load(void)
{
    at_suite *s = NULL;
    int rc = at_suite_load("search/models/qwen3.5-2b.lua", &s);
    if (rc != AT_OK)
        fprintf(stderr, "  %s\n", at_errmsg());
    CHECK_EQ_INT(rc, AT_OK);
    if (s) {
        CHECK(strcmp(s->name, "qwen3.5-2b") == 0);
        CHECK_EQ_INT(count_op(s, "gemv"), 8 * 5);
        CHECK_EQ_INT(count_op(s, "gemma_rmsnorm"), 8);
        CHECK_EQ_INT(count_op(s, "add_gemma_rmsnorm"), 8);
        CHECK_EQ_INT(s->nentries, 56);
        CHECK(find(s, "gemv", "16x2048x8224") != NULL); /* examples/decode's qkvz|ba weight */
        const at_suite_entry *e = find(s, "gemv", "1x2048x5120");
        CHECK(e != NULL);
        if (e) {
            CHECK_EQ_INT(e->dtype, AT_BF16);
            CHECK_EQ_INT(e->shape.rank, 3);
            CHECK(e->line > 0);
            CHECK_STR_HAS(e->note, "attn");
            CHECK(e->spec[0] == '\0');
        }
        for (int m = 1; m <= 16; m *= 2) {
            char shape[64];
            snprintf(shape, sizeof shape, "%dx2048x248320", m);
            CHECK(find(s, "gemv", shape) != NULL);
            snprintf(shape, sizeof shape, "%dx6144x2048", m);
            CHECK(find(s, "gemv", shape) != NULL);
        }
        e = find(s, "add_gemma_rmsnorm", "4096x2048");
        CHECK(e != NULL && e->shape.rank == 2 && e->shape.M == 4096 && e->shape.K == 2048);
    }
    at_suite_free(s);
    s = NULL;
    rc = at_suite_load("search/models/qwen3.5-4b.lua", &s);
    CHECK_EQ_INT(rc, AT_OK);
    if (s) {
        CHECK_EQ_INT(count_op(s, "gemv"), 7 * 5);
        CHECK(find(s, "gemv", "16x9216x2560") != NULL);
        CHECK(find(s, "gemv", "1x2560x64") != NULL);
        CHECK(find(s, "gemma_rmsnorm", "1x2560") != NULL);
    }
    at_suite_free(s);
    /* the fused ops at the shapes examples/decode's mode 4 calls */
    s = NULL;
    rc = at_suite_load("search/models/qwen3.5-2b-fused.lua", &s);
    if (rc != AT_OK)
        fprintf(stderr, "  %s\n", at_errmsg());
    CHECK_EQ_INT(rc, AT_OK);
    if (s) {
        CHECK_EQ_INT(count_op(s, "gemma_rmsnorm_gemv"), 5 * 5);
        CHECK_EQ_INT(count_op(s, "gemma_rmsnorm_gemv_swiglu"), 5);
        CHECK_EQ_INT(count_op(s, "gemv_add"), 2 * 5);
        CHECK_EQ_INT(count_op(s, "add_gemma_rmsnorm_gemv"), 3);
        CHECK_EQ_INT(s->nentries, 43);
        CHECK(find(s, "gemma_rmsnorm_gemv", "1x2048x8224") != NULL);
        CHECK(find(s, "add_gemma_rmsnorm_gemv", "1x2048x12288") != NULL);
        const at_suite_entry *e = find(s, "gemma_rmsnorm_gemv_swiglu", "16x2048x6144");
        CHECK(e != NULL && e->shape.rank == 3 && e->shape.M == 16 && e->shape.K == 2048 && e->shape.N == 6144);
        CHECK(find(s, "gemma_rmsnorm_gemv", "1x2048x248320") != NULL);
        CHECK(find(s, "gemv_add", "8x6144x2048") != NULL);
    }
    at_suite_free(s);
}

/* Loads src; expects status `code` and a message containing needle. */
static void bad(const char *src, int code, const char *needle)
{
    at_suite *s = (at_suite *)1;
    int rc = at_suite_load_string(src, "t.lua", NULL, &s);
    if (rc != code || !strstr(at_errmsg(), needle))
        fprintf(stderr, "  source: %s\n  status %d, message: %s\n", src, rc, at_errmsg());
    CHECK_EQ_INT(rc, code);
    CHECK_STR_HAS(at_errmsg(), needle);
    CHECK(s == NULL);
}

static void bad_suites_name_file_and_line(void)
{
    bad("return {entries = {\n tune('gemv', '1x64x64'),\n tune('gemvv', '1x64x64') }}", AT_ERR_SPEC,
        "t.lua:3: tune: unknown op 'gemvv'");
    bad("return {entries = {\n\n tune('gemv', {'1x64x64', '1x0x64'}) }}", AT_ERR_SPEC,
        "t.lua:3: tune: gemv: bad shape '1x0x64'");
    bad("return {entries = {\n tune('gemma_rmsnorm', '1x2048x5120') }}", AT_ERR_SPEC,
        "t.lua:2: tune: gemma_rmsnorm: bad shape '1x2048x5120'");
    bad("return {entries = {\n tune('gemv', '1x64x64', {nite = 'x'}) }}", AT_ERR_SPEC,
        "t.lua:2: tune: unknown field 'nite'");
    bad("return {entries = {\n tune('gemv', '1x64x64', {dtype = 'fp8'}) }}", AT_ERR_SPEC,
        "t.lua:2: tune: dtype must be");
    bad("return {entries = {\n tune('gemv', {}) }}", AT_ERR_SPEC, "t.lua:2: tune: shapes must be a non-empty list");
    bad("return {entries = {\n tune('gemv', '1x64x64'),\n tune('gemv', {'2x64x64', '1x64x64'}) }}", AT_ERR_SPEC,
        "t.lua:3: gemv bf16 1x64x64 is listed twice (first at line 2)");
    bad("return {entries = {}}", AT_ERR_SPEC, "t.lua: the suite has no entries");
    bad("return {}", AT_ERR_SPEC, "t.lua: entries must be a list");
    bad("return 42", AT_ERR_SPEC, "must return a table");
    bad("return {entrys = {}}", AT_ERR_SPEC, "unknown field 'entrys'");
    bad("return {entries = {\n tune('gemv', '1x64x64'\n }}", AT_ERR_SPEC, "t.lua:3:"); /* syntax */
    bad("return {entries = { {op = 'gemv', shape = '1x64x64'}, {op = 'conv', shape = '1x2x3'} }}", AT_ERR_SPEC,
        "t.lua: entries[2]: unknown op 'conv'");
    bad("return {entries = { {op = 'gemv', shape = '1x64x64', shapes = {'2x64x64'}} }}", AT_ERR_SPEC,
        "entries[1]: give exactly one of shape");
    bad("return {entries = { 'gemv 1x64x64' }}", AT_ERR_SPEC, "entries[1]: an entry must be a table");
    bad("os.execute('true')\nreturn {}", AT_ERR_SPEC, "t.lua:1:"); /* no os in the sandbox */
    bad("local x = io.open('/etc/passwd')\nreturn {}", AT_ERR_SPEC, "t.lua:1:");
    bad("while true do end", AT_ERR_SPEC, "instruction limit");
    bad("return {dtype = 'int8', entries = { tune('gemv', '1x64x64') }}", AT_ERR_SPEC, "dtype must be");
    /* an unreadable file is a spec error (exit 3), naming the file */
    at_suite *s = NULL;
    CHECK_EQ_INT(at_suite_load("/nonexistent/suite.lua", &s), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "/nonexistent/suite.lua");
    CHECK(s == NULL);
}

/* A shape may be a range of batch buckets, as --shape takes it: one entry
** per bucket, in order, each with the line of its tune; a bad range or a
** bucket listed again is named. */
static void ranges_name_their_buckets(void)
{
    at_suite *s = NULL;
    int rc = at_suite_load_string("return {entries = {\n tune('gemv', '3..12x64x32', 'a'),\n"
                                  " tune('rmsnorm', {'1..2x64', '7x64'}) }}",
                                  "t.lua", NULL, &s);
    if (rc != AT_OK)
        fprintf(stderr, "  %s\n", at_errmsg());
    CHECK_EQ_INT(rc, AT_OK);
    if (s) {
        static const char *const want[] = {"3x64x32", "4x64x32", "8x64x32", "12x64x32", "1x64", "2x64", "7x64"};
        CHECK_EQ_INT(s->nentries, 7);
        for (int i = 0; i < s->nentries && i < 7; i++) {
            CHECK(strcmp(s->entries[i].shape_text, want[i]) == 0);
            CHECK_EQ_INT(s->entries[i].line, i < 4 ? 2 : 3);
            CHECK_EQ_INT(s->entries[i].shape.M, atoi(want[i]));
        }
        CHECK_STR_HAS(s->entries[3].note, "a");
    }
    at_suite_free(s);
    bad("return {entries = {\n tune('gemv', '16..1x64x64') }}", AT_ERR_SPEC,
        "t.lua:2: tune: gemv: bad shape '16..1x64x64': a range of M is LO..HI");
    bad("return {entries = {\n tune('gemv', '1..4x64x64'),\n tune('gemv', '2x64x64') }}", AT_ERR_SPEC,
        "t.lua:3: gemv bf16 2x64x64 is listed twice (first at line 2)");
    bad("return {entries = {\n tune('rmsnorm', '1..4x64x64') }}", AT_ERR_SPEC,
        "t.lua:2: tune: rmsnorm: bad shape '1x64x64'");
}

/* A file on disk: errors carry its path; spec paths resolve against its folder. */
static void files_and_fields(void)
{
    char dir[] = "/tmp/at_suite_XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/m.lua", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("-- a test suite\n"
          "return {\n"
          "  dtype = 'fp16',\n"
          "  entries = {\n"
          "    tune('gemv', {'1x64x64', '2x64x64'}, {spec = 'my.lua', note = 'mine'}),\n"
          "    tune('gemv', '1x64x64', {dtype = 'bf16', spec = '/abs/gemv.lua'}),\n"
          "    {op = 'rmsnorm', shapes = {'4x4096'}},\n"
          "  },\n"
          "}\n",
          f);
    fclose(f);
    at_suite *s = NULL;
    int rc = at_suite_load(path, &s);
    if (rc != AT_OK)
        fprintf(stderr, "  %s\n", at_errmsg());
    CHECK_EQ_INT(rc, AT_OK);
    if (s) {
        char want[300];
        CHECK_EQ_INT(s->nentries, 4);
        CHECK(strcmp(s->name, "m") == 0); /* from the file name */
        snprintf(want, sizeof want, "%s/my.lua", dir);
        CHECK(strcmp(s->entries[0].spec, want) == 0);
        CHECK_EQ_INT(s->entries[0].dtype, AT_FP16);
        CHECK_EQ_INT(s->entries[0].line, 5);
        CHECK(strcmp(s->entries[1].shape_text, "2x64x64") == 0);
        CHECK(strcmp(s->entries[1].note, "mine") == 0);
        CHECK_EQ_INT(s->entries[2].dtype, AT_BF16); /* not a duplicate: another dtype */
        CHECK(strcmp(s->entries[2].spec, "/abs/gemv.lua") == 0);
        CHECK_EQ_INT(s->entries[3].line, 0);
        CHECK_EQ_INT(s->entries[3].shape.rank, 2);

        int *idx = NULL, n = 0;
        CHECK_EQ_INT(at_suite_select(s, "rmsnorm", &idx, &n), AT_OK);
        CHECK(n == 1 && idx && idx[0] == 3);
        free(idx);
        idx = NULL;
        CHECK_EQ_INT(at_suite_select(s, NULL, &idx, &n), AT_OK);
        CHECK_EQ_INT(n, 4);
        free(idx);
        idx = NULL;
        CHECK_EQ_INT(at_suite_select(s, "gemv,rmsnorm", &idx, &n), AT_OK);
        CHECK_EQ_INT(n, 4);
        free(idx);
        idx = NULL;
        CHECK_EQ_INT(at_suite_select(s, "gemma_rmsnorm", &idx, &n), AT_ERR_USAGE);
        CHECK_STR_HAS(at_errmsg(), "no entry");
        CHECK_EQ_INT(at_suite_select(s, "conv", &idx, &n), AT_ERR_USAGE);
        CHECK_STR_HAS(at_errmsg(), "unknown op 'conv'");
    }
    at_suite_free(s);
    /* a syntax error names the path and line */
    f = fopen(path, "w");
    if (f) {
        fputs("return {\n  entries = {\n    tune('gemv' '1x64x64'),\n  },\n}\n", f);
        fclose(f);
    }
    s = NULL;
    CHECK_EQ_INT(at_suite_load(path, &s), AT_ERR_SPEC);
    char want[300];
    snprintf(want, sizeof want, "%s:3:", path);
    CHECK_STR_HAS(at_errmsg(), want);
    remove(path);
    rmdir(dir);
}


/* ---------------------------------------------------------- the pool */

typedef struct item_result {
    int item, pid, next;
} item_result;

typedef struct pool_log {
    int seen[256];      /* done() calls per item */
    int lost[256];      /* of those, workers that died */
    int pids[256];
    int stop_after;     /* set *flag after this many answers (0: never) */
    volatile int *flag;
    int answers;
    const char *path;   /* the workers' own log: one line per item done */
    int crash_item, restart_item, retire_item;
    int order[8][256], norder[8]; /* per slot: its items, in the order done */
    int next[256];                /* per item: the reservation it went out with */
} pool_log;

static pool_log plog;

static int log_work(void *arg, int slot, int item, int next, void *result)
{
    pool_log *l = arg;
    item_result *r = result;
    (void)slot;
    if (item < 0) /* the worker's end */
        return AT_POOL_NEXT;
    if (item == l->crash_item)
        kill(getpid(), SIGKILL); /* a candidate that takes the process down (no core file) */
    usleep((useconds_t)(1000 * (item % 4)));
    char line[64];
    int fd = open(l->path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    int len = snprintf(line, sizeof line, "%d %d\n", item, (int)getpid());
    if (fd >= 0) {
        ssize_t w = write(fd, line, (size_t)len); /* O_APPEND: whole lines, never interleaved */
        (void)w;
        close(fd);
    }
    r->item = item;
    r->pid = (int)getpid();
    r->next = next;
    return item == l->restart_item ? AT_POOL_RESTART : item == l->retire_item ? AT_POOL_RETIRE : AT_POOL_NEXT;
}

static int log_done(void *arg, int slot, int item, const void *result, const char *lost)
{
    pool_log *l = arg;
    (void)slot;
    if (item >= 0 && item < 256) {
        l->seen[item]++;
        if (!result) {
            l->lost[item]++;
            CHECK_STR_HAS(lost, "signal");
        } else {
            const item_result *r = result;
            CHECK_EQ_INT(r->item, item);
            l->pids[item] = r->pid;
            l->next[item] = r->next;
            if (slot >= 0 && slot < 8)
                l->order[slot][l->norder[slot]++] = item;
        }
    }
    if (++l->answers == l->stop_after && l->flag)
        *l->flag = 1;
    return 0;
}

static int count_log_lines(const char *path, int item)
{
    FILE *f = fopen(path, "r");
    int a, b, n = 0;
    while (f && fscanf(f, "%d %d", &a, &b) == 2)
        n += a == item;
    if (f)
        fclose(f);
    return n;
}

/* A fresh log for one pool run: the workers' log file created at path
** (a mkstemp template), no faulting item, no stop. */
static void plog_reset(char *path)
{
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    memset(&plog, 0, sizeof plog);
    plog.path = path;
    plog.crash_item = plog.restart_item = plog.retire_item = -1;
}

static void pool_does_every_item_once(void)
{
    char path[] = "/tmp/at_pool_log_XXXXXX";
    plog_reset(path);
    plog.crash_item = 13;
    plog.restart_item = 7;
    int rc = at_pool_run(4, 60, sizeof(item_result), log_work, log_done, &plog, NULL);
    CHECK_EQ_INT(rc, AT_OK);
    int pids[256], npids = 0;
    for (int i = 0; i < 60; i++) {
        CHECK_EQ_INT(plog.seen[i], 1);
        CHECK_EQ_INT(count_log_lines(path, i), i == 13 ? 0 : 1);
        int known = 0;
        for (int k = 0; k < npids; k++)
            known |= pids[k] == plog.pids[i];
        if (!known && plog.pids[i])
            pids[npids++] = plog.pids[i];
    }
    CHECK_EQ_INT(plog.lost[13], 1); /* reported lost, not dropped, not retried */
    CHECK(npids >= 4);              /* several processes did the work */
    /* the worker that restarted after item 7 did not do a later item */
    for (int i = 8; i < 60; i++)
        CHECK(plog.pids[i] != plog.pids[7]);
    remove(path);
}

static void pool_interrupt_stops_handing_out(void)
{
    static volatile int flag;
    char path[] = "/tmp/at_pool_log_XXXXXX";
    plog_reset(path);
    plog.stop_after = 5;
    plog.flag = &flag;
    flag = 0;
    void (*old)(int) = signal(SIGINT, SIG_IGN); /* the workers finish their item */
    int rc = at_pool_run(3, 100, sizeof(item_result), log_work, log_done, &plog, &flag);
    signal(SIGINT, old);
    CHECK_EQ_INT(rc, AT_ERR_INTERRUPTED);
    int total = 0;
    for (int i = 0; i < 100; i++) {
        CHECK(plog.seen[i] <= 1);
        total += plog.seen[i];
    }
    CHECK(total >= 5 && total <= 8); /* at most the ones in flight after the 5th */
    remove(path);
}

/* Each item goes out with the slot's next item reserved: one slot gets
** i+1 with item i; several keep their promises but for the steals at the
** end, and every item but each slot's first was reserved exactly once. */
static void pool_reserves_the_next_item(void)
{
    for (int nslots = 1; nslots <= 3; nslots += 2) {
        const int n = 40;
        char path[] = "/tmp/at_pool_log_XXXXXX";
        plog_reset(path);
        CHECK_EQ_INT(at_pool_run(nslots, n, sizeof(item_result), log_work, log_done, &plog, NULL), AT_OK);
        int reserved[256] = {0}, never = 0, broken = 0, total = 0;
        for (int i = 0; i < n; i++) {
            CHECK_EQ_INT(plog.seen[i], 1);
            CHECK(plog.next[i] >= -1 && plog.next[i] < n && plog.next[i] != i);
            if (plog.next[i] >= 0)
                reserved[plog.next[i]]++;
            if (nslots == 1)
                CHECK_EQ_INT(plog.next[i], i + 1 < n ? i + 1 : -1);
        }
        for (int i = 0; i < n; i++) {
            CHECK(reserved[i] <= 1);
            never += reserved[i] == 0;
        }
        CHECK_EQ_INT(never, nslots); /* each slot's first item */
        for (int sl = 0; sl < nslots; sl++) {
            total += plog.norder[sl];
            for (int k = 0; k < plog.norder[sl]; k++) {
                int promised = plog.next[plog.order[sl][k]];
                int got = k + 1 < plog.norder[sl] ? plog.order[sl][k + 1] : -1;
                broken += promised >= 0 && promised != got; /* taken by another slot */
            }
        }
        CHECK_EQ_INT(total, n);
        CHECK(broken <= (nslots > 1 ? nslots : 0)); /* only reservations taken at the end */
        if (nslots == 1)
            CHECK_EQ_INT(broken, 0);
        remove(path);
    }
}

/* A slot that retires holding a reservation gives it back: another slot
** runs it, and every item is still done once. */
static void pool_retired_reservation_is_run(void)
{
    char path[] = "/tmp/at_pool_log_XXXXXX";
    plog_reset(path);
    plog.retire_item = 2; /* its slot holds item 3 reserved at that point */
    CHECK_EQ_INT(at_pool_run(2, 12, sizeof(item_result), log_work, log_done, &plog, NULL), AT_OK);
    for (int i = 0; i < 12; i++)
        CHECK_EQ_INT(plog.seen[i], 1);
    remove(path);
}

static void devices_parse(void)
{
    int *d = NULL, n = 0;
    CHECK_EQ_INT(at_devices_parse("0,1,3", 0, &d, &n), AT_OK);
    CHECK(n == 3 && d && d[0] == 0 && d[1] == 1 && d[2] == 3);
    free(d);
    CHECK_EQ_INT(at_devices_parse("0,0", 0, &d, &n), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "listed twice");
    CHECK_EQ_INT(at_devices_parse("0,0", 1, &d, &n), AT_OK); /* dry runs may share one GPU */
    CHECK_EQ_INT(n, 2);
    free(d);
    static const char *const badv[] = {"", "x", "1,", ",1", "-1", "0;1", "2048", "1,,2"};
    for (size_t i = 0; i < sizeof badv / sizeof badv[0]; i++) {
        CHECK_EQ_INT(at_devices_parse(badv[i], 0, &d, &n), AT_ERR_USAGE);
        CHECK(d == NULL);
    }
    int count = -1;
    CHECK_EQ_INT(at_devices_count(&count), AT_OK);
    CHECK(count >= 0);
    int rc = at_devices_parse("all", 0, &d, &n);
    if (count == 0) {
        CHECK_EQ_INT(rc, AT_ERR_NOGPU);
        CHECK_EQ_INT(at_devices_parse("all", 1, &d, &n), AT_OK);
        CHECK(n == 1 && d[0] == 0);
    } else
        CHECK(rc == AT_OK && n == count);
    free(d);
}

/* ------------------------------------------- the runner, with a fake worker */

#define TRIALS_PER_ENTRY 25
static char shared_db[256], worker_log[256];

static void fake_key(const at_suite_entry *e, const at_search_opts *o, at_key *k)
{
    memset(k, 0, sizeof *k);
    snprintf(k->op, sizeof k->op, "%s", e->op);
    k->dtype = o->dtype;
    snprintf(k->shape, sizeof k->shape, "%s", e->shape_text);
    snprintf(k->device, sizeof k->device, "Fake GPU");
    k->cc = 90;
    k->sms = 132;
    snprintf(k->space_sha, sizeof k->space_sha, "%064d", 0);
    snprintf(k->tuner_version, sizeof k->tuner_version, "%s", AT_TUNER_VERSION);
}

/* Stands in for at_search_run: every trial and the winner written one by
** one through at_cache_* into the shared cache, as the real pipeline does. */
static int fake_worker(void *arg, const at_suite_entry *e, const at_search_opts *o, at_suite_outcome *out)
{
    at_cache *c = NULL;
    at_key k;
    int rc;
    (void)arg;
    if (strcmp(e->shape_text, "3x64x64") == 0)
        return at_fail(AT_ERR_CUDA_STICKY, "cuda: kernel run: CUDA_ERROR_ILLEGAL_ADDRESS (fake)");
    if ((rc = at_cache_open(o->db_path, &c)) != AT_OK)
        return rc;
    fake_key(e, o, &k);
    for (int t = 0; t < TRIALS_PER_ENTRY && rc == AT_OK; t++) {
        at_trial tr = {.state = AT_TRIAL_OK, .us = 10.0 + t};
        snprintf(tr.strategy, sizeof tr.strategy, "fake");
        snprintf(tr.params, sizeof tr.params, "TP_T=%d", t);
        rc = at_cache_put_trial(c, &k, &tr);
    }
    at_winner w = {.us = 10.0, .baseline_us = 12.0, .speedup = 1.2, .bytes = 1e6};
    snprintf(w.strategy, sizeof w.strategy, "fake");
    snprintf(w.params, sizeof w.params, "TP_T=0");
    if (rc == AT_OK)
        rc = at_cache_put_winner(c, &k, &w);
    at_cache_close(c);
    snprintf(out->winner, sizeof out->winner, "fake");
    snprintf(out->device_name, sizeof out->device_name, "Fake GPU");
    out->us = 10.0;
    out->base_us = 12.0;
    out->speedup = 1.2;
    out->bytes = 1e6;
    out->read_gbps = 1000.0;
    int fd = open(worker_log, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
        char line[96];
        int len = snprintf(line, sizeof line, "%s %s\n", e->op, e->shape_text);
        ssize_t wr = write(fd, line, (size_t)len);
        (void)wr;
        close(fd);
    }
    return rc;
}

static const char *const fake_suite =
    "local t = {}\n"
    "for m = 1, 24 do t[m] = m .. 'x64x64' end\n"
    "return { name = 'fake', entries = {\n"
    "  tune('gemv', t, 'two dozen'),\n"
    "  tune('rmsnorm', {'1x4096', '2x4096', '4x4096'}),\n"
    "} }\n";

static void runner_shares_one_cache_without_losing_rows(void)
{
    at_suite *s = NULL;
    snprintf(shared_db, sizeof shared_db, "/tmp/at_suite_shared_%d.db", (int)getpid());
    snprintf(worker_log, sizeof worker_log, "/tmp/at_suite_log_%d", (int)getpid());
    remove(shared_db);
    remove(worker_log);
    CHECK_EQ_INT(at_suite_load_string(fake_suite, "fake.lua", NULL, &s), AT_OK);
    if (!s)
        return;
    CHECK_EQ_INT(s->nentries, 27);
    int devices[4] = {0, 1, 2, 3};
    at_suite_run_opts o = {.base = {.db_path = shared_db, .dtype = AT_BF16, .reps = 5}, .devices = devices,
                           .ndevices = 4, .quiet = 1, .worker = fake_worker};
    at_suite_outcome *r = NULL;
    int n = 0;
    int rc = at_suite_run(s, &o, &r, &n);
    /* the sticky entry fails (and restarts its worker); all others succeed */
    CHECK_EQ_INT(rc, AT_ERR_CUDA_STICKY);
    CHECK_STR_HAS(at_errmsg(), "gemv bf16 3x64x64");
    CHECK_EQ_INT(n, 27);
    int workers_used[4] = {0};
    for (int i = 0; r && i < n; i++) {
        CHECK_EQ_INT(r[i].index, i); /* file order */
        CHECK_EQ_INT(r[i].ran, 1);
        CHECK_EQ_INT(r[i].status, strcmp(s->entries[i].shape_text, "3x64x64") == 0 ? AT_ERR_CUDA_STICKY : AT_OK);
        CHECK(r[i].worker >= 0 && r[i].worker < 4);
        if (r[i].worker >= 0 && r[i].worker < 4)
            workers_used[r[i].worker] = 1;
        CHECK_EQ_INT(r[i].device, r[i].worker); /* devices[slot] */
    }
    CHECK(workers_used[0] + workers_used[1] + workers_used[2] + workers_used[3] >= 2);
    /* every entry done exactly once (the workers' own log) */
    FILE *f = fopen(worker_log, "r");
    char op[32], shape[64];
    int lines = 0;
    while (f && fscanf(f, "%31s %63s", op, shape) == 2) {
        lines++;
        int matches = 0;
        for (int i = 0; i < s->nentries; i++)
            matches += !strcmp(s->entries[i].op, op) && !strcmp(s->entries[i].shape_text, shape);
        CHECK_EQ_INT(matches, 1);
    }
    if (f)
        fclose(f);
    CHECK_EQ_INT(lines, 26);
    /* every row every worker wrote is in the shared cache */
    at_cache *c = NULL;
    CHECK_EQ_INT(at_cache_open(shared_db, &c), AT_OK);
    int trials = 0, winners = 0;
    at_search_opts so = {.dtype = AT_BF16};
    for (int i = 0; c && i < s->nentries; i++) {
        at_key k;
        int found = 0;
        fake_key(&s->entries[i], &so, &k);
        for (int t = 0; t < TRIALS_PER_ENTRY; t++) {
            char params[32];
            at_trial tr;
            snprintf(params, sizeof params, "TP_T=%d", t);
            if (at_cache_get_trial(c, &k, "fake", params, &tr, &found) == AT_OK && found)
                trials++;
        }
        at_winner w;
        if (at_cache_get_winner(c, &k, &w, &found) == AT_OK && found)
            winners++;
        at_winner_clear(&w);
    }
    at_cache_close(c);
    CHECK_EQ_INT(trials, 26 * TRIALS_PER_ENTRY);
    CHECK_EQ_INT(winners, 26);

    /* the summary names every entry; the JSON is one document */
    static char buf[1 << 16];
    FILE *t = tmpfile();
    if (t && r) {
        at_suite_report_text(t, s, r, n, rc);
        rewind(t);
        buf[fread(buf, 1, sizeof buf - 1, t)] = '\0';
        CHECK_STR_HAS(buf, "suite   fake");
        CHECK_STR_HAS(buf, "24x64x64");
        CHECK_STR_HAS(buf, "rmsnorm");
        CHECK_STR_HAS(buf, "failed (6): cuda: kernel run");
        CHECK_STR_HAS(buf, "26 of 27 ok");
        CHECK_STR_HAS(buf, "1.20x");
        CHECK_STR_HAS(buf, "time    entries"); /* where the entries' time went */
        fclose(t);
    }
    t = tmpfile();
    if (t && r) {
        at_suite_report_json(t, s, r, n, rc, shared_db);
        rewind(t);
        buf[fread(buf, 1, sizeof buf - 1, t)] = '\0';
        CHECK(buf[0] == '{');
        CHECK_STR_HAS(buf, "\"status\":6,\"suite\":\"fake\"");
        CHECK_STR_HAS(buf, "\"summary\":{\"entries\":27,\"ok\":26,\"from_cache\":0,\"failed\":1,\"not_run\":0");
        CHECK_STR_HAS(buf, "\"pct_ceiling\":1");
        CHECK_STR_HAS(buf, "\"compile_s\":0,\"gpu_s\":0");
        fclose(t);
    }
    free(r);
    r = NULL;
    /* --only keeps one op */
    o.only = "rmsnorm";
    rc = at_suite_run(s, &o, &r, &n);
    CHECK_EQ_INT(rc, AT_OK);
    CHECK_EQ_INT(n, 3);
    free(r);
    at_suite_free(s);
    remove(shared_db);
    char side[300];
    snprintf(side, sizeof side, "%s-wal", shared_db);
    remove(side);
    snprintf(side, sizeof side, "%s-shm", shared_db);
    remove(side);
    remove(worker_log);
}


/* -------------------------------------------------- compiling ahead */

/* .cubin files in dir/cubins */
static int count_cubins(const char *dir)
{
    char path[300];
    int n = 0;
    snprintf(path, sizeof path, "%s/cubins", dir);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strlen(e->d_name) > 6 && strcmp(e->d_name + strlen(e->d_name) - 6, ".cubin") == 0;
    if (d)
        closedir(d);
    return n;
}

static void remove_tree(const char *dir)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

/* the H200's identity as a probe would report it, without a GPU */
static void pretend_h200(void)
{
    at_device_info d = {.cc_major = 9, .cc_minor = 0, .sms = 132, .driver_version = 13000, .read_gbps = 4000};
    snprintf(d.name, sizeof d.name, "NVIDIA H200 (pretended)");
    at_worker_identity_remember(0, &d);
}

/* A compile-ahead child fills the cubin cache a run then reads, runs one
** at a time, and stores nothing in the tuning cache. */
static void compile_ahead_fills_the_cubin_cache(void)
{
    char dir[] = "/tmp/at_ahead_XXXXXX", db[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(db, sizeof db, "%s/c.db", dir);
    pretend_h200();
    at_search_opts so = {.op = "gemv", .dtype = AT_BF16, .spec_path = "tests/fixtures/spec_good.lua",
                         .templates_root = "templates", .db_path = db, .reps = 7};
    CHECK_EQ_INT(at_shape_parse("1x64x64", 3, &so.shape), AT_OK);
    CHECK_EQ_INT(at_compile_ahead_start(&so), 1);
    CHECK_EQ_INT(at_compile_ahead_start(&so), 0); /* one at a time */
    CHECK_EQ_INT(at_compile_ahead_wait(NULL), 1);
    CHECK_EQ_INT(at_compile_ahead_wait(NULL), 0);
    int n = count_cubins(dir);
    CHECK(n >= 5);
    /* the same search finds every cubin there: the keys the real run uses */
    at_search_result res;
    so.compile_only = 1;
    CHECK_EQ_INT(at_search_run(&so, &res), AT_OK);
    CHECK(res.ncompiled >= 5);
    CHECK_EQ_INT(res.ncompile_cached, res.ncompiled);
    CHECK_EQ_INT(res.ncorrect, 0); /* nothing ran */
    at_search_result_free(&res);
    CHECK_EQ_INT(count_cubins(dir), n);
    /* nothing tuned, nothing stored */
    sqlite3 *q = NULL;
    int rows = -1;
    CHECK_EQ_INT(sqlite3_open(db, &q), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(q, "SELECT (SELECT count(*) FROM trials) + (SELECT count(*) FROM winners)", -1, &st,
                           NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        rows = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(q);
    CHECK_EQ_INT(rows, 0);
    /* a candidate that fails to compile is not stored either: the real run
    ** finds it out (and stores it) in its turn */
    so.compile_only = 0;
    so.spec_path = "tests/fixtures/spec_broken_template.lua";
    so.templates_root = "tests/fixtures/templates";
    CHECK_EQ_INT(at_compile_ahead_start(&so), 1);
    CHECK_EQ_INT(at_compile_ahead_wait(NULL), 1);
    so.compile_only = 1;
    CHECK_EQ_INT(at_search_run(&so, &res), AT_OK);
    CHECK_EQ_INT(res.ncompile_failed, 1); /* compiled again, not skipped as known bad */
    CHECK_EQ_INT(res.nskipped, 0);
    at_search_result_free(&res);
    rows = -1;
    CHECK_EQ_INT(sqlite3_open(db, &q), SQLITE_OK);
    if (sqlite3_prepare_v2(q, "SELECT count(*) FROM trials", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        rows = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(q);
    CHECK_EQ_INT(rows, 0);
    remove_tree(dir);
}

/* A fake entry "on the GPU": it starts its successor's compile as the real
** search does, and logs whether it could and how many cubins it found. */
static int ahead_worker(void *arg, const at_suite_entry *e, const at_search_opts *o, at_suite_outcome *out)
{
    const char *dir = arg;
    snprintf(out->winner, sizeof out->winner, "fake");
    out->us = 1.0;
    out->ncompiled = count_cubins(dir); /* what this entry found when it began */
    out->ncand = o->before_gpu != NULL;
    if (o->before_gpu)
        o->before_gpu(o->before_gpu_arg);
    (void)e;
    return AT_OK;
}

static void suite_compiles_the_next_entry_ahead(void)
{
    char dir[] = "/tmp/at_ahead_XXXXXX", db[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(db, sizeof db, "%s/c.db", dir);
    pretend_h200();
    at_suite *s = NULL;
    CHECK_EQ_INT(at_suite_load_string("return { name = 'ahead', entries = {\n"
                                      "  tune('gemv', {'1x64x64', '1x64x96'}, {spec = 'tests/fixtures/spec_good.lua'}),\n"
                                      "} }\n",
                                      "ahead.lua", NULL, &s),
                 AT_OK);
    if (!s)
        return;
    int dev = 0;
    for (int no_ahead = 1; no_ahead >= 0; no_ahead--) {
        at_suite_run_opts o = {.base = {.db_path = db, .templates_root = "templates", .dtype = AT_BF16, .reps = 7},
                               .devices = &dev, .ndevices = 1, .quiet = 1, .no_ahead = no_ahead,
                               .worker = ahead_worker, .worker_arg = dir};
        at_suite_outcome *r = NULL;
        int n = 0;
        CHECK_EQ_INT(at_suite_run(s, &o, &r, &n), AT_OK);
        CHECK_EQ_INT(n, 2);
        if (r && n == 2) {
            CHECK_EQ_INT(r[0].ncand, !no_ahead); /* the first entry starts the second's compile */
            CHECK_EQ_INT(r[1].ncand, 0);         /* the last has no successor */
            CHECK_EQ_INT(r[0].ncompiled, 0);
            if (no_ahead) {
                CHECK_EQ_INT(r[1].ncompiled, 0); /* nothing compiled it */
                CHECK(r[1].compile_s == 0.0);
            } else {
                CHECK(r[1].ncompiled >= 5); /* compiled, and whole, before its turn came */
                /* the fake "GPU phase" is instant: the wait for that compile is the entry's */
                CHECK(r[1].compile_s > 0.0 && r[1].seconds >= r[1].compile_s);
            }
        }
        free(r);
    }
    CHECK(count_cubins(dir) >= 5);
    at_suite_free(s);
    remove_tree(dir);
}

/* ------------------------------------------------------------ the CLI */

static void cli_suite_dry_run_on_three_workers(void)
{
    static cli_out o;
    cli_run("--suite tests/fixtures/suite_small.lua --dry-run --arch sm_90 --templates tests/fixtures/templates "
            "--devices 0,0,0 --json",
            &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK(o.out[0] == '{');
    CHECK(strchr(o.out, '\n') == o.out + strlen(o.out) - 1); /* stdout: one JSON document, nothing else */
    CHECK_STR_HAS(o.out, "\"summary\":{\"entries\":3,\"ok\":3");
    CHECK_STR_HAS(o.out, "\"compiled\":1,\"compile_failed\":1");
    CHECK_STR_HAS(o.out, "\"worker\":2"); /* the first three entries go to three workers */
    CHECK_STR_HAS(o.err, "[3/3] gemv bf16");  /* progress: on stderr */
    /* the text summary */
    cli_run("--suite tests/fixtures/suite_small.lua --dry-run --arch sm_90 --templates tests/fixtures/templates "
            "--quiet --only gemv",
            &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "suite   small");
    CHECK_STR_HAS(o.out, "4x64x64        dry run: 2 candidates, 0 pruned, 1 compiled, 1 failed");
    CHECK_STR_HAS(o.out, "done    3 of 3 ok");
    CHECK_EQ_INT(strlen(o.err), 0); /* --quiet */
}

static void cli_bad_suite_changes_nothing(void)
{
    static cli_out o;
    const char *db = "/tmp/at_suite_cli_untouched.db";
    FILE *f = fopen("/tmp/at_suite_bad.lua", "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("return { entries = {\n  tune('gemv', '1x64x64'),\n  tune('gemv', '1x0x64'),\n} }\n", f);
    fclose(f);
    remove(db);
    cli_run("--suite /tmp/at_suite_bad.lua --db /tmp/at_suite_cli_untouched.db", &o);
    CHECK_EQ_INT(o.code, 3);
    CHECK_STR_HAS(o.err, "autotune: /tmp/at_suite_bad.lua:3: tune: gemv: bad shape '1x0x64'");
    CHECK(strchr(o.err, '\n') == o.err + strlen(o.err) - 1);
    CHECK_EQ_INT(strlen(o.out), 0);
    CHECK(access(db, F_OK) != 0);
    cli_run("--suite /tmp/at_suite_bad.lua --json", &o);
    CHECK_EQ_INT(o.code, 3);
    CHECK_STR_HAS(o.out, "{\"status\":3,\"error\":\"/tmp/at_suite_bad.lua:3:");
    static const struct {
        const char *args, *needle;
        int code;
    } cases[] = {
        {"--suite /nonexistent/s.lua", "cannot read suite /nonexistent/s.lua", 3},
        {"--suite tests/fixtures/suite_small.lua --only conv", "unknown op 'conv'", 2},
        {"--suite tests/fixtures/suite_small.lua --only rmsnorm", "no entry", 2},
        {"--suite tests/fixtures/suite_small.lua --op gemv", "drop --op", 2},
        {"--suite tests/fixtures/suite_small.lua --devices 0,0", "listed twice", 2},
        {"--suite tests/fixtures/suite_small.lua --devices 0,x --dry-run", "--devices", 2},
        {"--suite tests/fixtures/suite_small.lua --strategy greedy", "unknown strategy 'greedy'", 2},
        {"--suite tests/fixtures/suite_small.lua --effort fast", "unknown effort 'fast'", 2},
        {"--op gemv --shape 1x64x64 --budget -3", "--budget", 2},
        {"--op gemv --shape 1x64x64 --only gemv", "--only applies to --suite", 2},
        {"--op gemv --shape 1x64x64 --no-compile-ahead", "--no-compile-ahead applies to --suite", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_run(cases[i].args, &o);
        if (o.code != cases[i].code || !strstr(o.err, cases[i].needle))
            fprintf(stderr, "  case '%s': code %d, stderr: %s", cases[i].args, o.code, o.err);
        CHECK_EQ_INT(o.code, cases[i].code);
        CHECK_STR_HAS(o.err, cases[i].needle);
    }
    remove("/tmp/at_suite_bad.lua");
    cli_run("--help", &o);
    CHECK_STR_HAS(o.out, "--suite FILE");
    CHECK_STR_HAS(o.out, "--devices LIST");
    CHECK_STR_HAS(o.out, "--effort E");
    CHECK_STR_HAS(o.out, "--strategy S");
    CHECK_STR_HAS(o.out, "--budget N");
    CHECK_STR_HAS(o.out, "--no-compile-ahead");
}

int main(void)
{
    TT_RUN(qwen_suites_load);
    TT_RUN(bad_suites_name_file_and_line);
    TT_RUN(ranges_name_their_buckets);
    TT_RUN(files_and_fields);
    TT_RUN(pool_does_every_item_once);
    TT_RUN(pool_interrupt_stops_handing_out);
    TT_RUN(pool_reserves_the_next_item);
    TT_RUN(pool_retired_reservation_is_run);
    TT_RUN(devices_parse);
    TT_RUN(runner_shares_one_cache_without_losing_rows);
    TT_RUN(compile_ahead_fills_the_cubin_cache);
    TT_RUN(suite_compiles_the_next_entry_ahead);
    TT_RUN(cli_suite_dry_run_on_three_workers);
    TT_RUN(cli_bad_suite_changes_nothing);
    return TT_DONE();
}
