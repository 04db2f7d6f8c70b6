/*
** test_suite.c — suites: the Qwen3.5 suite files load with every GEMV at
** M = 1..16 and their norms; bad files (syntax, unknown op, bad shape, empty,
** duplicates, unknown fields, sandbox escapes, runaway loops) fail with
** "file:line:" and the spec status; --only filtering; and the runner hands
** every entry to exactly one of several worker processes, which share one
** SQLite cache without losing a row (a fake worker: no GPU needed).
*/
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autotune.h"
#include "devices.h"
#include "suite.h"
#include "tinytest.h"

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
        CHECK_EQ_INT(count_op(s, "gemv"), 7 * 5);
        CHECK_EQ_INT(count_op(s, "gemma_rmsnorm"), 8);
        CHECK_EQ_INT(count_op(s, "add_gemma_rmsnorm"), 8);
        CHECK_EQ_INT(s->nentries, 51);
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

int main(void)
{
    TT_RUN(qwen_suites_load);
    TT_RUN(bad_suites_name_file_and_line);
    TT_RUN(files_and_fields);
    return TT_DONE();
}
