/*
** test_table.c — exported tables: the strict JSON reader on its own, export
** (JSON, CSV, a C header that compiles and links), byte-stable round trips
** through import, merge conflicts (the faster entry wins, and says so), bad
** tables and foreign caches refused with the cache left byte-for-byte as it
** was, export errors, show, prune (the rows the runtime never serves).
** Everything lives in a fresh mkdtemp folder.
*/
#include "autotune.h"
#include "json.h"
#include "table.h"
#include "tinytest.h"
#include "test_files.h"

#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[64];

static const char *tpath(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
    return buf;
}

/* Whole file, NUL-terminated, malloc'ed (NULL if unreadable). */
static char *slurp(const char *path, size_t *size)
{
    return (char *)tt_slurp(path, size);
}

static int spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = strlen(text), w = fwrite(text, 1, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

/* Everything written to a tmpfile, as a malloc'ed string. */
static char *drain(FILE *f)
{
    long n = ftell(f);
    char *buf = malloc((size_t)(n > 0 ? n : 0) + 1);
    rewind(f);
    size_t k = buf ? fread(buf, 1, (size_t)(n > 0 ? n : 0), f) : 0;
    if (buf)
        buf[k] = '\0';
    fclose(f);
    return buf;
}

static int same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* ------------------------------------------------------------- fixtures */

static const at_device_info H200 = {"NVIDIA H200", 9,  0, 132,    62914560, 150754820096LL,
                                    13000,         13, 0, 4580.5, 4260.25,  0.53};
static const at_device_info RTX = {
    "NVIDIA GeForce RTX 4070", 8, 9, 46, 37748736, 12878086144LL, 12080, 12, 8, 482.125, 450.7, NAN};
static const at_device_info A100 = {
    "NVIDIA A100-SXM4-80GB", 8, 0, 108, 41943040, 85899345920LL, 13000, 13, 0, 1800, 1700, 0.6};

static at_key key_for(const at_device_info *d, const char *shape, at_dtype dt)
{
    at_key k;
    memset(&k, 0, sizeof k);
    strcpy(k.op, "gemv");
    k.dtype = dt;
    snprintf(k.shape, sizeof k.shape, "%s", shape);
    snprintf(k.device, sizeof k.device, "%s", d->name);
    k.cc = 10 * d->cc_major + d->cc_minor;
    k.sms = d->sms;
    k.driver_version = d->driver_version;
    k.nvrtc_version = 1000 * d->nvrtc_major + 10 * d->nvrtc_minor;
    at_sha256_hex("space", 5, k.space_sha);
    snprintf(k.options, sizeof k.options, "-arch=sm_%d%d -std=c++17", d->cc_major, d->cc_minor);
    strcpy(k.tuner_version, AT_TUNER_VERSION);
    return k;
}

/* A winner; cubin_size 0 makes it the baseline (cuBLAS). Bytes from a seed. */
static at_winner make_winner(const char *params, double us, double base, size_t cubin_size, unsigned seed)
{
    at_winner w;
    memset(&w, 0, sizeof w);
    strcpy(w.strategy, cubin_size ? "warp_row" : "cublas");
    strcpy(w.kernel, cubin_size ? "gemv_warp_row" : "");
    strcpy(w.template_name, cubin_size ? "gemv/gemv_warp_row.cu" : "");
    snprintf(w.params, sizeof w.params, "%s", params);
    w.us = us;
    w.us_min = us - 0.125;
    w.us_max = us + 0.25;
    w.baseline_us = base;
    w.baseline_min = base - 0.1;
    w.baseline_max = base + 0.3;
    w.speedup = base / us;
    w.bytes = 33570816;
    w.grid[0] = 2048, w.grid[1] = 1, w.grid[2] = 1;
    w.block[0] = 128, w.block[1] = 1, w.block[2] = 1;
    w.smem = cubin_size ? 512 : 0;
    if (cubin_size) {
        unsigned char *b = malloc(cubin_size);
        for (size_t i = 0; i < cubin_size; i++) {
            seed = seed * 1103515245u + 12345u;
            b[i] = (unsigned char)(seed >> 16);
        }
        w.cubin = b;
        w.cubin_size = cubin_size;
    }
    return w;
}

static void put(at_cache *c, const at_key *k, at_winner w)
{
    CHECK_EQ_INT(at_cache_put_winner(c, k, &w), AT_OK);
    at_winner_clear(&w);
}

/* The main fixture: two GPUs with winners (cubins of 1000, 1001, 999 and 998
** bytes: every base64 padding), one baseline winner, a NaN, awkward text
** (quote, comma, tab, a trigraph) and a third GPU with nothing tuned. */
static void build_cache(const char *path, int with_a100)
{
    at_cache *c = NULL;
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    if (!c)
        return;
    CHECK_EQ_INT(at_cache_put_device(c, &H200), AT_OK);
    CHECK_EQ_INT(at_cache_put_device(c, &RTX), AT_OK);
    if (with_a100)
        CHECK_EQ_INT(at_cache_put_device(c, &A100), AT_OK);
    at_key k = key_for(&H200, "1x2048x8192", AT_BF16);
    put(c, &k, make_winner("TP_WARPS=16 TP_ROWS=2 TP_VEC=8", 8.1, 10.7, 1000, 1));
    k = key_for(&H200, "1x2048x2048", AT_BF16);
    put(c, &k, make_winner("TP_WARPS=8 TP_ROWS=1 TP_VEC=8", 4.25, 6.0, 1001, 2));
    k = key_for(&H200, "1x2048x32", AT_BF16);
    put(c, &k, make_winner("", 4.6, 4.6, 0, 0));
    k = key_for(&H200, "1x4096x4096", AT_FP16);
    at_winner w = make_winner("TP_VEC=4 note=\"a,b?\?=c\"\tend", 7.0 / 3.0, 1.0 / 3.0, 999, 3);
    w.us_min = NAN;
    put(c, &k, w);
    k = key_for(&RTX, "1x2048x8192", AT_BF16);
    put(c, &k, make_winner("TP_WARPS=4 TP_ROWS=1 TP_VEC=8", 71.5, 80.25, 998, 4));
    at_cache_close(c);
}

/* ---------------------------------------------------------- JSON reader */

static at_json *parse(const char *text)
{
    at_json *v = NULL;
    int st = at_json_parse(text, strlen(text), "t", &v);
    return st == AT_OK ? v : NULL;
}

static void test_json_valid(void)
{
    at_json *v = parse(" {\"a\": [1, -2.5e3, true, false, null, \"x\"], \"b\": {}, \"c\": [], "
                       "\"d\": -0, \"e\": 12345678901234567890} \n");
    CHECK(v != NULL);
    if (!v)
        return;
    const at_json *a = at_json_member(v, "a");
    CHECK(a && a->type == AT_JSON_ARRAY && a->count == 6);
    CHECK(a->items[0].is_int && a->items[0].integer == 1);
    CHECK(!a->items[1].is_int && a->items[1].number == -2500.0);
    CHECK(a->items[2].type == AT_JSON_BOOL && a->items[2].boolean == 1);
    CHECK(a->items[3].type == AT_JSON_BOOL && a->items[3].boolean == 0);
    CHECK(a->items[4].type == AT_JSON_NULL);
    CHECK(a->items[5].type == AT_JSON_STRING && !strcmp(a->items[5].string, "x"));
    CHECK(at_json_member(v, "b")->type == AT_JSON_OBJECT && at_json_member(v, "b")->count == 0);
    CHECK(at_json_member(v, "d")->is_int && at_json_member(v, "d")->integer == 0);
    CHECK(!at_json_member(v, "e")->is_int); /* beyond int64: a double only */
    CHECK(at_json_member(v, "zz") == NULL);
    at_json_free(v);

    /* escapes: simple ones, \u in the BMP, a surrogate pair, UTF-8 as is */
    v = parse("\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u00e9\\u20AC \\ud83d\\ude00 \xc3\xa9\"");
    CHECK(v != NULL);
    if (v)
        CHECK(!strcmp(v->string, "q\" b\\ s/ \b\f\n\r\t \xc3\xa9\xe2\x82\xac \xf0\x9f\x98\x80 \xc3\xa9"));
    at_json_free(v);

    /* nesting: exactly the limit is fine */
    char deep[2 * AT_JSON_MAX_DEPTH + 1];
    for (int i = 0; i < AT_JSON_MAX_DEPTH; i++) {
        deep[i] = '[';
        deep[2 * AT_JSON_MAX_DEPTH - 1 - i] = ']';
    }
    deep[2 * AT_JSON_MAX_DEPTH] = '\0';
    v = parse(deep);
    CHECK(v != NULL);
    at_json_free(v);
}

static void test_json_invalid(void)
{
    /* clang-format off */
    static const char *const bad[] = {
        "", "   ", "{", "[1,]", "{\"a\":1,}", "[1 2]", "{\"a\" 1}", "{a:1}", "01", "1.", "-", ".5", "+1",
        "1e", "0x10", "NaN", "Infinity", "1e999", "-1e999", "tru", "nul", "[1] x", "\"abc", "\"a\nb\"",
        "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"", "\"\\ud800\"", "\"\\ud800\\u0041\"", "\"\\udc00\"",
        "\"\\u0000\"", "{\"a\":1,\"a\":2}", "\xEF\xBB\xBF{}", "\"\xC3\x28\"", "\"\xC0\xAF\"",
        "\"\xED\xA0\x80\"", "\"\xF4\x90\x80\x80\"", "// c\n1", "[1,/*x*/2]", "'a'", "\"\\", "{\"a\":}",
    };
    /* clang-format on */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        at_json *v = (at_json *)1;
        int st = at_json_parse(bad[i], strlen(bad[i]), "doc.json", &v);
        if (st == AT_OK)
            fprintf(stderr, "accepted: %s\n", bad[i]);
        CHECK_EQ_INT(st, AT_ERR_USAGE);
        CHECK(v == NULL);
        CHECK_STR_HAS(at_errmsg(), "doc.json:");
    }
    /* a NUL byte inside the text (length given explicitly) */
    at_json *v = NULL;
    CHECK_EQ_INT(at_json_parse("[1,\0 2]", 7, "n", &v), AT_ERR_USAGE);
    /* a number literal that is too long */
    char num[AT_JSON_MAX_NUMBER + 8];
    memset(num, '1', sizeof num - 1);
    num[sizeof num - 1] = '\0';
    CHECK_EQ_INT(at_json_parse(num, strlen(num), "n", &v), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "longer than");
    /* one level past the limit, and a deep pile of brackets */
    char deep[2 * AT_JSON_MAX_DEPTH + 3];
    for (int i = 0; i <= AT_JSON_MAX_DEPTH; i++) {
        deep[i] = '[';
        deep[2 * AT_JSON_MAX_DEPTH + 1 - i] = ']';
    }
    deep[2 * AT_JSON_MAX_DEPTH + 2] = '\0';
    CHECK_EQ_INT(at_json_parse(deep, strlen(deep), "n", &v), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "nesting deeper than");
    char *pile = malloc(200001);
    memset(pile, '[', 200000);
    pile[200000] = '\0';
    CHECK_EQ_INT(at_json_parse(pile, 200000, "n", &v), AT_ERR_USAGE);
    free(pile);
    /* the message points at the line and column */
    const char *doc = "{\n  \"a\": tru\n}";
    CHECK_EQ_INT(at_json_parse(doc, strlen(doc), "pos.json", &v), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "pos.json:2:8:");
}

static void test_json_writers(void)
{
    char buf[32];
    const double xs[] = {0.1, 10.7, 1.0 / 3.0, 4580.5, 33570816, 1e-300, -2.5e20, 0};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        at_json_format_number(xs[i], buf, sizeof buf);
        CHECK(strtod(buf, NULL) == xs[i]);
    }
    at_json_format_number(10.7, buf, sizeof buf);
    CHECK(!strcmp(buf, "10.7"));
    at_json_format_number(131200, buf, sizeof buf);
    CHECK(!strcmp(buf, "131200"));
    at_json_format_number(NAN, buf, sizeof buf);
    CHECK(!strcmp(buf, "null"));
    at_json_format_number(INFINITY, buf, sizeof buf);
    CHECK(!strcmp(buf, "null"));

    /* write_string output reads back as the same text */
    FILE *f = tmpfile();
    at_json_write_string(f, "a\"b\\c\n\x01 \xc3\xa9");
    char *s = drain(f);
    at_json *v = s ? parse(s) : NULL;
    CHECK(v && !strcmp(v->string, "a\"b\\c\n\x01 \xc3\xa9"));
    at_json_free(v);
    free(s);

    /* base64: every padding round-trips; non-canonical text is refused */
    for (size_t n = 0; n < 7; n++) {
        unsigned char data[7] = {0xff, 0x00, 0x10, 0x83, 0xfe, 0x7f, 0x01}, *out = NULL;
        size_t got = 99;
        const char *why = NULL;
        f = tmpfile();
        at_json_write_base64(f, data, n);
        s = drain(f);
        CHECK_EQ_INT(at_json_base64_decode(s, strlen(s), &out, &got, &why), AT_OK);
        CHECK_EQ_INT(got, n);
        CHECK(out && memcmp(out, data, n) == 0);
        free(out);
        free(s);
    }
    static const char *const bad64[] = {"QQ", "QQ=", "QR==", "Q===", "QQ==QQ==", "QQ\n==", "QQ!=", "=QQQ"};
    for (size_t i = 0; i < sizeof bad64 / sizeof bad64[0]; i++) {
        unsigned char *out = NULL;
        size_t got = 0;
        const char *why = NULL;
        CHECK_EQ_INT(at_json_base64_decode(bad64[i], strlen(bad64[i]), &out, &got, &why), AT_ERR_USAGE);
        CHECK(out == NULL && why != NULL);
    }
}

/* -------------------------------------------------------------- export */

static void test_export_json_content(void)
{
    char db[128], out[128];
    size_t n;
    build_cache(tpath(db, sizeof db, "content.db"), 0);
    CHECK_EQ_INT(
        at_table_export_file(db, "NVIDIA H200", 0, AT_TABLE_JSON, tpath(out, sizeof out, "h200.json")),
        AT_OK);
    char *text = slurp(out, &n);
    CHECK(text != NULL);
    if (!text)
        return;
    CHECK(!strncmp(text, "{\n  \"format\": \"autotune-table\",\n  \"version\": 1,\n", 48));
    CHECK_STR_HAS(text, "\"name\": \"NVIDIA H200\"");
    CHECK_STR_HAS(text, "\"cc_major\": 9");
    CHECK_STR_HAS(text, "\"sms\": 132");
    CHECK_STR_HAS(text, "\"driver_version\": 13000");
    CHECK_STR_HAS(text, "\"read_gbps\": 4580.5");
    CHECK_STR_HAS(text, "\"copy_gbps\": 4260.25");
    CHECK_STR_HAS(text, "\"empty_us\": 0.53");
    CHECK_STR_HAS(text, "\"shape\": \"1x2048x8192\"");
    CHECK_STR_HAS(text, "\"us\": 8.1");
    CHECK_STR_HAS(text, "\"baseline_us\": 10.7");
    CHECK_STR_HAS(text, "\"strategy\": \"cublas\"");
    CHECK_STR_HAS(text, "\"cubin\": null");
    CHECK_STR_HAS(text, "\"us_min\": null");
    CHECK_STR_HAS(text, "\"params\": \"TP_VEC=4 note=\\\"a,b?\?=c\\\"\\tend\"");
    CHECK(strstr(text, "RTX") == NULL); /* one GPU only */
    at_key k = key_for(&H200, "1x2048x8192", AT_BF16);
    char sha[65], want[100];
    at_key_digest(&k, sha);
    snprintf(want, sizeof want, "\"key_sha\": \"%s\"", sha);
    CHECK_STR_HAS(text, want);
    at_winner w = make_winner("", 8.1, 10.7, 1000, 1);
    at_sha256_hex(w.cubin, w.cubin_size, sha);
    snprintf(want, sizeof want, "\"cubin_sha256\": \"%s\"", sha);
    CHECK_STR_HAS(text, want);
    at_winner_clear(&w);
    /* the file is a JSON document our own reader accepts */
    at_table t;
    CHECK_EQ_INT(at_table_read_json(out, &t), AT_OK);
    CHECK_EQ_INT(t.ndevices, 1);
    CHECK_EQ_INT(t.ndevices ? t.devices[0].nentries : 0, 4);
    at_table_free(&t);
    free(text);
}

static void test_export_csv_content(void)
{
    char db[128], out[128];
    size_t n;
    build_cache(tpath(db, sizeof db, "csv.db"), 0);
    CHECK_EQ_INT(at_table_export_file(db, NULL, 1, AT_TABLE_CSV, tpath(out, sizeof out, "all.csv")), AT_OK);
    char *text = slurp(out, &n);
    CHECK(text != NULL);
    if (!text)
        return;
    CHECK(!strncmp(text, "device,arch,sms,driver_version,nvrtc_version,read_gbps,", 55));
    CHECK_STR_HAS(text,
                  "\nNVIDIA GeForce RTX 4070,sm_89,46,12080,12080,482.125,450.7,,gemv,bf16,1x2048x8192,");
    CHECK_STR_HAS(text, "\nNVIDIA H200,sm_90,132,13000,13000,4580.5,4260.25,0.53,gemv,bf16,1x2048x32,");
    CHECK_STR_HAS(text, ",cublas,,,,2048,1,1,128,1,1,0,4.6,");
    CHECK_STR_HAS(text, ",\"TP_VEC=4 note=\"\"a,b?\?=c\"\"\tend\",");
    int lines = 0;
    for (char *p = text; *p; p++)
        lines += *p == '\n';
    CHECK_EQ_INT(lines, 1 + 5);
    free(text);
}

/* export -> import into an empty cache -> export: the same bytes. */
static void test_roundtrip_stable(void)
{
    char db[128], db2[128], a[128], b[128];
    build_cache(tpath(db, sizeof db, "rt.db"), 0);
    tpath(db2, sizeof db2, "rt2.db");
    CHECK_EQ_INT(at_table_export_file(db, NULL, 1, AT_TABLE_JSON, tpath(a, sizeof a, "rt_a.json")), AT_OK);
    FILE *rep = tmpfile();
    CHECK_EQ_INT(at_table_import(db2, a, rep), AT_OK);
    char *r = drain(rep);
    CHECK_STR_HAS(r, "imported 4 entries for NVIDIA H200 (sm_90)");
    CHECK_STR_HAS(r, "imported 1 entry for NVIDIA GeForce RTX 4070 (sm_89)");
    free(r);
    CHECK_EQ_INT(at_table_export_file(db2, NULL, 1, AT_TABLE_JSON, tpath(b, sizeof b, "rt_b.json")), AT_OK);
    CHECK(same_file(a, b));
    /* CSV and C of the imported cache equal those of the original */
    static const at_table_format fmts[] = {AT_TABLE_CSV, AT_TABLE_C};
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(at_table_export_file(db, NULL, 1, fmts[i], tpath(a, sizeof a, "rt_a.x")), AT_OK);
        CHECK_EQ_INT(at_table_export_file(db2, NULL, 1, fmts[i], tpath(b, sizeof b, "rt_b.x")), AT_OK);
        CHECK(same_file(a, b));
    }
    /* the imported winners are served by the cache API, cubins intact */
    at_cache *c = NULL;
    at_winner w1, w2;
    int found = 0;
    at_key k = key_for(&H200, "1x4096x4096", AT_FP16);
    at_winner want = make_winner("", 1, 1, 999, 3);
    CHECK_EQ_INT(at_cache_open(db2, &c), AT_OK);
    CHECK_EQ_INT(at_cache_get_winner(c, &k, &w1, &found), AT_OK);
    CHECK(found && w1.cubin_size == 999 && memcmp(w1.cubin, want.cubin, 999) == 0);
    CHECK(found && isnan(w1.us_min) && w1.us == 7.0 / 3.0);
    k = key_for(&H200, "1x2048x32", AT_BF16);
    CHECK_EQ_INT(at_cache_get_winner(c, &k, &w2, &found), AT_OK);
    CHECK(found && w2.cubin == NULL && !strcmp(w2.strategy, "cublas"));
    at_winner_clear(&w1);
    at_winner_clear(&w2);
    at_winner_clear(&want);
    at_cache_close(c);
    /* importing the same table again changes nothing and says so */
    rep = tmpfile();
    CHECK_EQ_INT(at_table_import(db2, tpath(a, sizeof a, "rt_a.json"), rep), AT_OK);
    r = drain(rep);
    CHECK_STR_HAS(r, "imported 0 entries for NVIDIA H200 (sm_90)");
    CHECK_STR_HAS(r, "4 already present");
    free(r);
}

static int run_cmd(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_c_header(void)
{
    char db[128], hdr[128], cmd[1024], exe[128], outp[128];
    size_t n;
    build_cache(tpath(db, sizeof db, "c.db"), 0);
    CHECK_EQ_INT(at_table_export_file(db, NULL, 1, AT_TABLE_C, tpath(hdr, sizeof hdr, "tuned_table.h")),
                 AT_OK);
    char *text = slurp(hdr, &n);
    CHECK_STR_HAS(text, "atk_open_table");
    CHECK_STR_HAS(text, "#include <stddef.h>");
    CHECK_STR_HAS(text, "#ifndef ATK_EXPORTED_TABLE_H");
    CHECK_STR_HAS(text, "\\077\\077="); /* no trigraph left in a literal */
    /* layout 2: the entries' template and the shared headers are embedded */
    CHECK_STR_HAS(text, "#ifndef ATK_TABLE_TYPES_V2");
    CHECK_STR_HAS(text, "{.name = \"gemv/gemv_warp_row.cu\", .text = (const char *)atk_source_0");
    CHECK_STR_HAS(text, "{.name = \"common/vec.cuh\"");
    CHECK_STR_HAS(text, ".source = 0,");
    free(text);
    snprintf(cmd, sizeof cmd, "gcc -std=c11 -Wall -Wextra -Werror -x c -c %s -o %s/hdr.o", hdr, tmpdir);
    CHECK_EQ_INT(run_cmd(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "gcc -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror -I%s "
             "tests/fixtures/table_prog.c -o %s && %s > %s",
             tmpdir, tpath(exe, sizeof exe, "prog"), exe, tpath(outp, sizeof outp, "prog.out"));
    CHECK_EQ_INT(run_cmd(cmd), 0);
    text = slurp(outp, &n);
    /* devices sort by name: the RTX first; its one entry is index 0 */
    CHECK_STR_HAS(text, "1 2 5 3998 NVIDIA GeForce RTX 4070 TP_VEC=4 note=\"a,b?\?=c\"\tend -1");
    free(text);
}

/* ---------------------------------------------------------------- merge */

static void check_winner(at_cache *c, const at_key *k, double us, const char *params, size_t cubin_size)
{
    at_winner w;
    int found = 0;
    CHECK_EQ_INT(at_cache_get_winner(c, k, &w, &found), AT_OK);
    CHECK(found && w.us == us && !strcmp(w.params, params) && w.cubin_size == cubin_size);
    at_winner_clear(&w);
}

static void test_merge_conflicts(void)
{
    char local[128], other[128];
    at_cache *c = NULL;
    tpath(local, sizeof local, "local.db");
    tpath(other, sizeof other, "other.db");
    CHECK_EQ_INT(at_cache_open(local, &c), AT_OK);
    at_cache_put_device(c, &H200);
    at_key k1 = key_for(&H200, "1x2048x8192", AT_BF16), k2 = key_for(&H200, "1x2048x2048", AT_BF16);
    at_key k3 = key_for(&RTX, "1x2048x8192", AT_BF16);
    put(c, &k1, make_winner("TP_ROWS=1", 9.5, 10.7, 100, 10)); /* slower here */
    put(c, &k2, make_winner("TP_ROWS=2", 4.0, 6.0, 100, 11));  /* faster here */
    at_cache_close(c);
    CHECK_EQ_INT(at_cache_open(other, &c), AT_OK);
    at_cache_put_device(c, &H200);
    at_cache_put_device(c, &RTX);
    put(c, &k1, make_winner("TP_ROWS=4", 8.25, 10.7, 120, 12));
    put(c, &k2, make_winner("TP_ROWS=8", 4.5, 6.0, 120, 13));
    put(c, &k3, make_winner("TP_ROWS=1", 70.0, 80.0, 120, 14));
    at_cache_close(c);

    size_t n;
    char *bytes = slurp(other, &n), other_copy[128];
    FILE *keep = fopen(tpath(other_copy, sizeof other_copy, "other.copy"), "wb");
    CHECK(bytes && keep && fwrite(bytes, 1, n, keep) == n);
    fclose(keep);
    free(bytes);
    FILE *rep = tmpfile();
    CHECK_EQ_INT(at_table_merge(local, other, rep), AT_OK);
    char *r = drain(rep);
    CHECK_STR_HAS(r, "gemv bf16 1x2048x8192 on NVIDIA H200 (sm_90): kept ");
    CHECK_STR_HAS(r,
                  "'s entry (warp_row TP_ROWS=4, 8.25 us) over the local one (warp_row TP_ROWS=1, 9.5 us)");
    CHECK_STR_HAS(
        r, "gemv bf16 1x2048x2048 on NVIDIA H200 (sm_90): kept the local entry (warp_row TP_ROWS=2, 4 us)");
    CHECK_STR_HAS(r, "imported 1 entry for NVIDIA H200 (sm_90)");
    CHECK_STR_HAS(r, "0 new, 1 faster than the local one; 1 local kept (faster)");
    CHECK_STR_HAS(r, "imported 1 entry for NVIDIA GeForce RTX 4070 (sm_89)");
    free(r);

    int found = 0;
    CHECK_EQ_INT(at_cache_open(local, &c), AT_OK);
    check_winner(c, &k1, 8.25, "TP_ROWS=4", 120);
    check_winner(c, &k2, 4.0, "TP_ROWS=2", 100);
    check_winner(c, &k3, 70.0, "TP_ROWS=1", 120);
    at_device_info d = RTX;
    d.read_gbps = 0;
    CHECK_EQ_INT(at_cache_get_device(c, &d, &found), AT_OK);
    CHECK(found && d.read_gbps == RTX.read_gbps); /* the device came along */
    at_cache_close(c);
    CHECK(same_file(other, other_copy));                            /* the other cache was only read */
    CHECK_EQ_INT(at_table_merge(local, local, NULL), AT_ERR_USAGE); /* into itself */
}

/* ---------------------------------------------------- refusals, unchanged */

/* `fn` must fail and leave the cache file byte-for-byte as it was. */
static void check_unchanged(const char *db, int (*fn)(const char *db, const char *arg, FILE *r),
                            const char *arg, int want, const char *msg)
{
    size_t n0, n1;
    char *before = slurp(db, &n0);
    int st = fn(db, arg, NULL);
    if (st != want)
        fprintf(stderr, "  %s: got %d (%s)\n", arg, st, at_errmsg());
    CHECK_EQ_INT(st, want);
    if (msg)
        CHECK_STR_HAS(at_errmsg(), msg);
    char *after = slurp(db, &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
    free(before);
    free(after);
}

/* The good export with the first `from` replaced by `to`, written to name. */
static const char *variant(const char *good, const char *from, const char *to, const char *name, char *path)
{
    const char *at = strstr(good, from);
    CHECK(at != NULL);
    if (!at)
        return tpath(path, 128, name);
    size_t pre = (size_t)(at - good), nf = strlen(from), nt = strlen(to), rest = strlen(at + nf);
    char *text = malloc(pre + nt + rest + 1);
    memcpy(text, good, pre);
    memcpy(text + pre, to, nt);
    memcpy(text + pre + nt, at + nf, rest + 1);
    spit(tpath(path, 128, name), text);
    free(text);
    return path;
}

static void test_import_refused(void)
{
    char db[128], good_path[128], p[128], sha[65];
    size_t n;
    build_cache(tpath(db, sizeof db, "refuse.db"), 0);
    CHECK_EQ_INT(
        at_table_export_file(db, "NVIDIA H200", 0, AT_TABLE_JSON, tpath(good_path, 128, "good.json")), AT_OK);
    char *good = slurp(good_path, &n);
    if (!good)
        return;
    /* truncated */
    char *half = strndup(good, n / 2);
    spit(tpath(p, sizeof p, "half.json"), half);
    free(half);
    check_unchanged(db, at_table_import, p, AT_ERR_USAGE, "half.json:");
    struct {
        const char *from, *to, *msg;
    } cases[] = {
        {"\"sms\": 132", "\"sms\": \"132\"", "devices[0].sms: expected an integer"},
        {"\"sms\": 132", "\"sms\": 132.5", "devices[0].sms: expected an integer"},
        {"\"sms\": 132", "\"sms\": 1e999", "out of range"},
        {"\"l2_bytes\": 62914560", "\"l2_bytes\": 99999999999999999999", "l2_bytes: expected an integer in"},
        {"\"version\": 1", "\"version\": 2", "table version 2 is not supported"},
        {"\"format\": \"autotune-table\"", "\"format\": \"other\"", "not an autotune table"},
        {"\"op\": \"gemv\",", "", "entries[0].op: missing field"},
        {"\"op\": \"gemv\",", "\"op\": \"gemv\", \"extra\": 1,", "entries[0].extra: unknown field"},
        {"\"us\": 8.1", "\"us\": \"fast\"", "us: expected a number or null"},
        {"\"grid\": [2048, 1, 1]", "\"grid\": [2048, 1]", "grid: expected an array of 3"},
        {"\"dtype\": \"bf16\"", "\"dtype\": \"int4\"", "unknown dtype"},
        {"\"shape\": \"1x2048x8192\"", "\"shape\": \"01x2048x8192\"", "not written canonically"},
        {"\"cubin\": \"", "\"cubin\": \"!", "bad base64"},
        {"\"devices\": [", "\"devices\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "nesting deeper"},
        {"\"driver_version\": 13000,\n          \"nvrtc", "\"driver_version\": 13001,\n          \"nvrtc",
         "key_sha: does not match the key fields"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad%zu.json", i);
        check_unchanged(db, at_table_import, variant(good, cases[i].from, cases[i].to, name, p), AT_ERR_USAGE,
                        cases[i].msg);
    }
    /* a cubin whose sha256 does not match (one hex digit changed) */
    at_winner w = make_winner("", 1, 1, 1000, 1);
    char from[100], to[100];
    at_sha256_hex(w.cubin, w.cubin_size, sha);
    at_winner_clear(&w);
    snprintf(from, sizeof from, "\"cubin_sha256\": \"%s\"", sha);
    sha[10] = sha[10] == '0' ? '1' : '0';
    snprintf(to, sizeof to, "\"cubin_sha256\": \"%s\"", sha);
    check_unchanged(db, at_table_import, variant(good, from, to, "sha.json", p), AT_ERR_USAGE,
                    "cubin_sha256: does not match the cubin");
    /* a cubin of the wrong length for its size */
    check_unchanged(db, at_table_import,
                    variant(good, "\"cubin_size\": 1000", "\"cubin_size\": 1001", "size.json", p),
                    AT_ERR_USAGE, "cubin_size says 1001");
    /* two entries with one key */
    const char *e0 = strstr(good, "        {\n          \"op\""),
               *e1 = e0 ? strstr(e0 + 1, "        {\n") : NULL;
    CHECK(e0 && e1);
    if (e0 && e1) {
        char *dup = strndup(e0, (size_t)(e1 - e0));
        char *twice = malloc(strlen(dup) + 40);
        sprintf(twice, "\"entries\": [\n%s", dup);
        check_unchanged(db, at_table_import, variant(good, "\"entries\": [\n", twice, "dup.json", p),
                        AT_ERR_USAGE, "with the same key");
        free(twice);
        free(dup);
    }
    /* too large: a sparse file one byte over the limit */
    FILE *f = fopen(tpath(p, sizeof p, "huge.json"), "wb");
    CHECK(f && ftruncate(fileno(f), AT_TABLE_MAX_BYTES + 1) == 0);
    if (f)
        fclose(f);
    check_unchanged(db, at_table_import, p, AT_ERR_USAGE, "larger than");
    check_unchanged(db, at_table_import, tpath(p, sizeof p, "missing.json"), AT_ERR_IO, "missing.json");
    /* a bad table does not even create a missing cache */
    char fresh[128];
    CHECK(at_table_import(tpath(fresh, sizeof fresh, "never.db"), tpath(p, sizeof p, "half.json"), NULL) !=
          AT_OK);
    CHECK(access(fresh, F_OK) != 0);
    free(good);
}

/* A failure half-way through applying rolls everything back. */
static void test_apply_rolls_back(void)
{
    char db[128];
    at_cache *c = NULL;
    at_table t = {0};
    size_t n0, n1;
    build_cache(tpath(db, sizeof db, "rollback.db"), 0);
    char *before = slurp(db, &n0);
    t.ndevices = 2;
    t.devices = calloc(2, sizeof *t.devices);
    t.devices[0].info = A100; /* a new device and a new entry: written... */
    t.devices[0].nentries = 1;
    t.devices[0].entries = calloc(1, sizeof *t.devices[0].entries);
    t.devices[0].entries[0].key = key_for(&A100, "1x2048x8192", AT_BF16);
    t.devices[0].entries[0].w = make_winner("TP_ROWS=1", 20, 30, 64, 5);
    t.devices[1].info = H200; /* ...then an entry keyed for another GPU */
    t.devices[1].nentries = 1;
    t.devices[1].entries = calloc(1, sizeof *t.devices[1].entries);
    t.devices[1].entries[0].key = key_for(&RTX, "1x2048x8192", AT_BF16);
    t.devices[1].entries[0].w = make_winner("TP_ROWS=1", 1, 30, 64, 6);
    CHECK_EQ_INT(at_cache_open(db, &c), AT_OK);
    CHECK_EQ_INT(at_cache_apply_table(c, &t, "hand-made", NULL), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "keyed for another device");
    at_cache_close(c);
    at_table_free(&t);
    char *after = slurp(db, &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
    free(before);
    free(after);
}

static void test_merge_refused(void)
{
    char db[128], p[128];
    sqlite3 *s = NULL;
    build_cache(tpath(db, sizeof db, "merge_refuse.db"), 0);
    spit(tpath(p, sizeof p, "text.db"), "this is not a database, just some text that is long enough\n");
    check_unchanged(db, at_table_merge, p, AT_ERR_CACHE, "not an SQLite database");
    sqlite3_open(tpath(p, sizeof p, "foreign.db"), &s);
    sqlite3_exec(s, "CREATE TABLE people (name TEXT)", NULL, NULL, NULL);
    sqlite3_close(s);
    check_unchanged(db, at_table_merge, p, AT_ERR_CACHE, "not an autotune cache");
    build_cache(tpath(p, sizeof p, "newer.db"), 0);
    sqlite3_open(p, &s);
    sqlite3_exec(s, "PRAGMA user_version = 7", NULL, NULL, NULL);
    sqlite3_close(s);
    check_unchanged(db, at_table_merge, p, AT_ERR_CACHE, "newer than this autotune");
    check_unchanged(db, at_table_merge, tpath(p, sizeof p, "absent.db"), AT_ERR_CACHE, "no cache at");
    /* a damaged cubin in the other cache is refused, not copied */
    build_cache(tpath(p, sizeof p, "damaged.db"), 0);
    sqlite3_open(p, &s);
    sqlite3_exec(s, "UPDATE winners SET cubin = zeroblob(1000) WHERE length(cubin) = 1000", NULL, NULL, NULL);
    sqlite3_close(s);
    check_unchanged(db, at_table_merge, p, AT_ERR_CACHE, "does not match its sha256");
}

/* ------------------------------------------------------ export errors, show */

static int export_to_null(const char *db, const char *device, FILE *r)
{
    FILE *f = fopen("/dev/null", "w");
    int st = at_table_export(db, device, 0, AT_TABLE_JSON, f);
    (void)r;
    fclose(f);
    return st;
}

static void test_export_errors(void)
{
    char db[128], out[128];
    build_cache(tpath(db, sizeof db, "errors.db"), 1);
    check_unchanged(db, export_to_null, "NVIDIA B200", AT_ERR_USAGE, "no GPU named 'NVIDIA B200'");
    check_unchanged(db, export_to_null, A100.name, AT_ERR_USAGE,
                    "NVIDIA A100-SXM4-80GB (sm_80) has no tuned entries");
    check_unchanged(db, export_to_null, NULL, AT_ERR_USAGE, "pass --device NAME or --all");
    CHECK_STR_HAS(at_errmsg(), "3 GPUs");
    /* --all skips the GPU with nothing tuned */
    CHECK_EQ_INT(at_table_export_file(db, NULL, 1, AT_TABLE_JSON, tpath(out, sizeof out, "all.json")), AT_OK);
    at_table t;
    CHECK_EQ_INT(at_table_read_json(out, &t), AT_OK);
    CHECK_EQ_INT(t.ndevices, 2);
    at_table_free(&t);
    /* a failed export leaves no file, not even a temporary one */
    CHECK(at_table_export_file(db, "NVIDIA B200", 0, AT_TABLE_C, tpath(out, sizeof out, "none.h")) != AT_OK);
    CHECK(access(out, F_OK) != 0);
    DIR *dir = opendir(tmpdir);
    struct dirent *de;
    while (dir && (de = readdir(dir)))
        CHECK(strncmp(de->d_name, ".none.h.", 8) != 0 && strncmp(de->d_name, ".all.json.", 10) != 0);
    if (dir)
        closedir(dir);
    /* an empty cache, and none at all */
    at_cache *c = NULL;
    CHECK_EQ_INT(at_cache_open(tpath(out, sizeof out, "empty.db"), &c), AT_OK);
    at_cache_close(c);
    check_unchanged(out, export_to_null, NULL, AT_ERR_USAGE, "nothing tuned yet");
    CHECK_EQ_INT(export_to_null(tpath(out, sizeof out, "nothere.db"), NULL, NULL), AT_ERR_CACHE);
    CHECK(access(out, F_OK) != 0);
}

static void test_show(void)
{
    char db[128], p[128];
    build_cache(tpath(db, sizeof db, "show.db"), 1);
    FILE *f = tmpfile();
    CHECK_EQ_INT(at_table_show(db, NULL, f), AT_OK);
    char *s = drain(f);
    CHECK_STR_HAS(s,
                  "NVIDIA H200 (sm_90, 132 SMs, driver 13000, NVRTC 13.0): read 4.58 TB/s, copy 4.26 TB/s, "
                  "empty kernel 0.53 us\n");
    CHECK_STR_HAS(s,
                  "  gemv bf16 1x2048x8192 -> warp_row (TP_WARPS=16 TP_ROWS=2 TP_VEC=8)  8.10 us, baseline "
                  "10.70 us, 1.32x\n");
    CHECK_STR_HAS(s, "  gemv bf16 1x2048x32   -> cublas  4.60 us, baseline 4.60 us, 1.00x\n");
    CHECK_STR_HAS(s, "empty kernel not measured");
    CHECK_STR_HAS(s, "NVIDIA A100-SXM4-80GB (sm_80, 108 SMs, driver 13000, NVRTC 13.0): read 1.80 TB/s, copy "
                     "1.70 TB/s, empty kernel 0.60 us\n  nothing tuned yet\n");
    free(s);
    f = tmpfile();
    CHECK_EQ_INT(at_table_show(db, RTX.name, f), AT_OK);
    s = drain(f);
    CHECK(s && strstr(s, "H200") == NULL);
    CHECK_STR_HAS(s, "gemv bf16 1x2048x8192 -> warp_row");
    free(s);
    CHECK_EQ_INT(at_table_show(db, "NVIDIA B200", stdout), AT_ERR_USAGE);
    f = tmpfile();
    CHECK_EQ_INT(at_table_show(tpath(p, sizeof p, "noshow.db"), NULL, f), AT_OK);
    s = drain(f);
    CHECK_STR_HAS(s, "nothing tuned yet");
    free(s);
    CHECK(access(p, F_OK) != 0);
}

/* prune: of one shape's rows on one GPU under one driver, NVRTC version and
** set of options, the one the runtime serves stays (lowest us, an
** unmeasured one last, ties to the lower key_sha); other drivers, options,
** shapes and GPUs stay; show and a merge that leave such rows say so;
** --dry-run lists the same and leaves the file as it was; a second prune
** finds nothing; a missing cache is not made. */
static void test_prune(void)
{
    char db[128], none[128];
    at_cache *c = NULL;
    CHECK_EQ_INT(at_cache_open(tpath(db, sizeof db, "prune.db"), &c), AT_OK);
    if (!c)
        return;
    at_cache_put_device(c, &H200);
    at_key served = key_for(&H200, "1x2048x8192", AT_BF16), other_space = served, unmeasured = served;
    at_key old_driver = served, fp32 = served, tie_a = key_for(&H200, "4x2048x2048", AT_BF16), tie_b = tie_a;
    at_key rtx = key_for(&RTX, "1x2048x8192", AT_BF16);
    at_sha256_hex("other space", 11, other_space.space_sha);
    strcpy(unmeasured.tuner_version, "0.0.1");
    old_driver.driver_version = 12040;
    strcat(fp32.options, " -DTP_WEIGHT_FP32=1");
    at_sha256_hex("tie space", 9, tie_b.space_sha);
    put(c, &other_space, make_winner("TP_ROWS=1", 8.5, 10.7, 100, 1));
    put(c, &served, make_winner("TP_ROWS=2", 8.25, 10.7, 100, 2));
    at_winner w = make_winner("TP_ROWS=3", 1.0, 10.7, 100, 3);
    w.us = NAN; /* not measured: ranked last */
    put(c, &unmeasured, w);
    put(c, &old_driver, make_winner("TP_ROWS=4", 9.0, 10.7, 100, 4)); /* other driver: ranked apart */
    put(c, &fp32, make_winner("TP_ROWS=5", 9.5, 10.7, 100, 5));       /* other options */
    put(c, &rtx, make_winner("TP_ROWS=6", 70.0, 80.0, 100, 6));       /* another GPU */
    put(c, &tie_a, make_winner("TP_ROWS=7", 4.0, 6.0, 100, 7));
    put(c, &tie_b, make_winner("TP_ROWS=8", 4.0, 6.0, 100, 8));
    at_cache_close(c);
    char sa[65], sb[65];
    at_key_digest(&tie_a, sa);
    at_key_digest(&tie_b, sb);
    const at_key *tie_kept = strcmp(sa, sb) < 0 ? &tie_a : &tie_b, *tie_gone = tie_kept == &tie_a ? &tie_b : &tie_a;

    FILE *f = tmpfile();
    CHECK_EQ_INT(at_table_show(db, NULL, f), AT_OK); /* show says so */
    char *r = drain(f);
    CHECK_STR_HAS(r, "3 winners are never served (another row of the same shape, GPU and driver measured "
                     "faster): autotune prune removes them\n");
    free(r);
    /* a merge that leaves such rows says so too */
    char other[128];
    CHECK_EQ_INT(at_cache_open(tpath(other, sizeof other, "prune_other.db"), &c), AT_OK);
    at_cache_put_device(c, &H200);
    at_key newer = served;
    at_sha256_hex("newer space", 11, newer.space_sha);
    put(c, &newer, make_winner("TP_ROWS=9", 8.75, 10.7, 100, 9));
    at_cache_close(c);
    f = tmpfile();
    CHECK_EQ_INT(at_table_merge(db, other, f), AT_OK);
    r = drain(f);
    CHECK_STR_HAS(r, "4 winners are never served");
    free(r);

    size_t n0, n1;
    char *before = slurp(db, &n0);
    f = tmpfile();
    CHECK_EQ_INT(at_table_prune(db, 1, f), AT_OK);
    r = drain(f);
    char *after = slurp(db, &n1);
    CHECK_STR_HAS(r, "  gemv bf16 1x2048x8192 on NVIDIA H200 (driver 13000): 8.50 us (key ");
    CHECK_STR_HAS(r, ") goes, 8.25 us (key ");
    CHECK_STR_HAS(r, "  gemv bf16 1x2048x8192 on NVIDIA H200 (driver 13000): not measured (key ");
    CHECK_STR_HAS(r, "  gemv bf16 4x2048x2048 on NVIDIA H200 (driver 13000): 4.00 us (key ");
    CHECK_STR_HAS(r, "would prune 4 of 9 winners in ");
    CHECK_STR_HAS(r, "(--dry-run: nothing deleted)");
    CHECK(strstr(r, "driver 12040") == NULL && strstr(r, "RTX") == NULL);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
    free(r);
    free(before);
    free(after);

    f = tmpfile();
    CHECK_EQ_INT(at_table_prune(db, 0, f), AT_OK);
    r = drain(f);
    CHECK_STR_HAS(r, "pruned 4 of 9 winners in ");
    free(r);
    CHECK_EQ_INT(at_cache_open(db, &c), AT_OK);
    check_winner(c, &served, 8.25, "TP_ROWS=2", 100);
    check_winner(c, &old_driver, 9.0, "TP_ROWS=4", 100);
    check_winner(c, &fp32, 9.5, "TP_ROWS=5", 100);
    check_winner(c, &rtx, 70.0, "TP_ROWS=6", 100);
    check_winner(c, tie_kept, 4.0, tie_kept == &tie_a ? "TP_ROWS=7" : "TP_ROWS=8", 100);
    const at_key *gone[] = {&other_space, &unmeasured, tie_gone, &newer};
    for (int i = 0; i < 4; i++) {
        int found = -1;
        CHECK_EQ_INT(at_cache_get_winner(c, gone[i], &w, &found), AT_OK);
        CHECK_EQ_INT(found, 0);
    }
    at_cache_close(c);

    char *again[] = {"prune", "--db", db, NULL};
    f = tmpfile();
    CHECK_EQ_INT(at_table_prune(db, 0, f), AT_OK);
    r = drain(f);
    CHECK_STR_HAS(r, "nothing to prune: ");
    CHECK_STR_HAS(r, "(5)");
    free(r);
    f = tmpfile();
    CHECK_EQ_INT(at_table_show(db, NULL, f), AT_OK);
    r = drain(f);
    CHECK(r && strstr(r, "never served") == NULL);
    free(r);
    CHECK_EQ_INT(at_table_main(3, again), AT_OK);
    f = tmpfile();
    CHECK_EQ_INT(at_table_prune(tpath(none, sizeof none, "none.db"), 0, f), AT_OK);
    r = drain(f);
    CHECK_STR_HAS(r, "nothing to prune (no cache at ");
    free(r);
    CHECK(access(none, F_OK) != 0);
    char *bad1[] = {"prune", "--db", db, "other.db", NULL};
    CHECK_EQ_INT(at_table_main(4, bad1), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "prune: unexpected argument 'other.db'");
    char *bad2[] = {"show", "--db", db, "--dry-run", NULL};
    CHECK_EQ_INT(at_table_main(4, bad2), AT_ERR_USAGE);
}

static void test_cli_args(void)
{
    char db[128], out[128];
    build_cache(tpath(db, sizeof db, "cli.db"), 0);
    char *bad1[] = {"export", "--db", db, "--format", "xml", NULL};
    CHECK_EQ_INT(at_table_main(5, bad1), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "unknown table format 'xml'");
    char *bad2[] = {"export", "--db", db, "--all", NULL};
    CHECK_EQ_INT(at_table_main(4, bad2), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "--format");
    char *bad3[] = {"import", "--db", db, NULL};
    CHECK_EQ_INT(at_table_main(3, bad3), AT_ERR_USAGE);
    char *bad4[] = {"show", "--db", db, "--format", "json", NULL};
    CHECK_EQ_INT(at_table_main(5, bad4), AT_ERR_USAGE);
    char *bad5[] = {"export", "--db", db, "--device", "X", "--all", "--format", "c", NULL};
    CHECK_EQ_INT(at_table_main(8, bad5), AT_ERR_USAGE);
    tpath(out, sizeof out, "cli.csv");
    char *ok[] = {"export", "--db", db, "--all", "--format", "csv", "-o", out, NULL};
    CHECK_EQ_INT(at_table_main(8, ok), AT_OK);
    CHECK(access(out, F_OK) == 0);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int main(void)
{
    strcpy(tmpdir, "/tmp/test_table.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    TT_RUN(test_json_valid);
    TT_RUN(test_json_invalid);
    TT_RUN(test_json_writers);
    TT_RUN(test_export_json_content);
    TT_RUN(test_export_csv_content);
    TT_RUN(test_roundtrip_stable);
    TT_RUN(test_c_header);
    TT_RUN(test_merge_conflicts);
    TT_RUN(test_import_refused);
    TT_RUN(test_apply_rolls_back);
    TT_RUN(test_merge_refused);
    TT_RUN(test_export_errors);
    TT_RUN(test_show);
    TT_RUN(test_prune);
    TT_RUN(test_cli_args);
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return TT_DONE();
}
