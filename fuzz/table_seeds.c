/*
** table_seeds.c — writes the seed corpus of fuzz_table (fuzz/corpus/table/):
** real exports of small caches built here (two GPUs, one GPU, a baseline-only
** entry, a norm-shaped key, awkward text, NaN ceilings, cubins of every base64
** padding), an empty table, a GPU without entries, and a few refusals. Cubins
** are tiny so the corpus stays small. Rebuild it with:
**   cmake -DIN=cache/schema.sql -DOUT=/tmp/at_schema_sql.h -P cmake/at_embed_sql.cmake &&
**   gcc -std=c11 -D_GNU_SOURCE -Icache -Ituner -I/tmp fuzz/table_seeds.c cache/{json,table,cache_table,cache,key,shape,dtype,sha256,error}.c -lsqlite3 -lm -o /tmp/table_seeds && /tmp/table_seeds fuzz/corpus/table
*/
#include "autotune.h"
#include "table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *outdir;

static void die(const char *what)
{
    fprintf(stderr, "table_seeds: %s: %s\n", what, at_errmsg());
    exit(1);
}

static at_key key_for(const at_device_info *d, const char *op, const char *shape, at_dtype dt)
{
    at_key k;
    memset(&k, 0, sizeof k);
    snprintf(k.op, sizeof k.op, "%s", op);
    k.dtype = dt;
    snprintf(k.shape, sizeof k.shape, "%s", shape);
    snprintf(k.device, sizeof k.device, "%s", d->name);
    k.cc = 10 * d->cc_major + d->cc_minor;
    k.sms = d->sms;
    k.driver_version = d->driver_version;
    k.nvrtc_version = 1000 * d->nvrtc_major + 10 * d->nvrtc_minor;
    at_sha256_hex(op, strlen(op), k.space_sha);
    snprintf(k.options, sizeof k.options, "-arch=sm_%d%d -std=c++17 --use_fast_math", d->cc_major,
             d->cc_minor);
    snprintf(k.tuner_version, sizeof k.tuner_version, "%s", AT_TUNER_VERSION);
    return k;
}

/* A winner with a cubin of `size` pseudo-random bytes (0: the baseline won). */
static void put(at_cache *c, const at_key *k, const char *params, double us, double base, size_t size)
{
    unsigned char blob[32];
    at_winner w;
    memset(&w, 0, sizeof w);
    snprintf(w.strategy, sizeof w.strategy, "%s", size ? "warp_row" : "cublas");
    snprintf(w.kernel, sizeof w.kernel, "%s", size ? "gemv_warp_row" : "");
    snprintf(w.template_name, sizeof w.template_name, "%s", size ? "gemv/gemv_warp_row.cu" : "");
    snprintf(w.params, sizeof w.params, "%s", params);
    w.us = us, w.us_min = us * 0.98, w.us_max = us * 1.03;
    w.baseline_us = base, w.baseline_min = base * 0.99, w.baseline_max = base * 1.02;
    w.speedup = base / us;
    w.bytes = 33570816;
    w.grid[0] = 2048, w.grid[1] = w.grid[2] = 1;
    w.block[0] = 128, w.block[1] = w.block[2] = 1;
    w.smem = size ? 512 : 0;
    for (size_t i = 0; i < size && i < sizeof blob; i++)
        blob[i] = (unsigned char)(i * 37 + size);
    w.cubin = size ? blob : NULL;
    w.cubin_size = size;
    if (at_cache_put_winner(c, k, &w) != AT_OK)
        die("put winner");
}

static const at_device_info H200 = {"NVIDIA H200", 9,  0, 132,    62914560, 150754820096LL,
                                    13000,         13, 0, 4580.5, 4260.25,  0.53};
static const at_device_info RTX = {"NVIDIA GeForce RTX 4070", 8, 9, 46, 37748736, 12878086144LL, 12080, 12, 8,
                                   482.125, 450.7, NAN};

static void export(const char *db, const char *device, int all, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    if (at_table_export_file(db, device, all, AT_TABLE_JSON, path) != AT_OK)
        die(name);
}

static void text(const char *name, const char *body)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fputs(body, f) < 0 || fclose(f) != 0)
        die(name);
}

int main(int argc, char **argv)
{
    char dir[] = "/tmp/table_seeds.XXXXXX", db[128];
    at_cache *c = NULL;
    if (argc != 2) {
        fprintf(stderr, "usage: table_seeds OUTDIR\n");
        return 2;
    }
    outdir = argv[1];
    if (!mkdtemp(dir))
        die("mkdtemp");
    snprintf(db, sizeof db, "%s/seeds.db", dir);
    if (at_cache_open(db, &c) != AT_OK || at_cache_put_device(c, &H200) != AT_OK ||
        at_cache_put_device(c, &RTX) != AT_OK)
        die("cache");
    at_key k = key_for(&H200, "gemv", "1x2048x8192", AT_BF16);
    put(c, &k, "TP_WARPS=16 TP_ROWS=2 TP_VEC=8", 8.1, 10.7, 16);
    k = key_for(&H200, "gemv", "1x2048x32", AT_BF16);
    put(c, &k, "", 4.6, 4.6, 0); /* the baseline won: cubin null */
    k = key_for(&H200, "gemv", "16x6144x2048", AT_FP16);
    put(c, &k, "TP_VEC=4 note=\"a,b?\?=c\"\tend \xc3\xa9", 7.0 / 3.0, 1.0 / 3.0, 17);
    k = key_for(&H200, "rmsnorm", "4096x2560", AT_BF16); /* a rank-2 shape */
    put(c, &k, "TP_ROWS=1", 3.25, 9.5, 18);
    k = key_for(&RTX, "gemv", "1x2048x8192", AT_BF16);
    put(c, &k, "TP_WARPS=4 TP_ROWS=1 TP_VEC=8", 71.5, 80.25, 19);
    at_cache_close(c);
    export(db, NULL, 1, "two_gpus.json");
    export(db, "NVIDIA H200", 0, "h200.json");
    export(db, "NVIDIA GeForce RTX 4070", 0, "rtx4070_nan_ceiling.json");

    /* an empty table, and a GPU without entries (written directly) */
    text("empty_devices.json", "{\"format\": \"autotune-table\", \"version\": 1, \"devices\": []}\n");
    at_table_device bare = {.info = H200};
    const at_table_device *sel[] = {&bare};
    char path[512];
    snprintf(path, sizeof path, "%s/no_entries.json", outdir);
    FILE *f = fopen(path, "wb");
    if (!f)
        die("no_entries.json");
    at_table_write(f, AT_TABLE_JSON, sel, 1);
    fclose(f);

    /* JSON the reader must parse (escapes, numbers), though no table */
    text("json_escapes.json", "{\"s\": \"q\\\" \\\\ \\/ \\b\\f\\n\\r\\t \\u00e9\\u20AC \\ud83d\\ude00\", "
                              "\"n\": [0, -0, 1.5e-3, -2E+10, 12345678901234567890, 9007199254740993],"
                              " \"b\": [true, false, null], \"o\": {}, \"a\": [[]]}\n");
    text("json_base64.json", "[\"QQ==\", \"QUI=\", \"QUJD\", \"\", \"QR==\", \"QQ\"]\n");
    /* refusals: another version, a duplicate member, not an object */
    text("bad_version.json", "{\"format\": \"autotune-table\", \"version\": 2, \"devices\": []}\n");
    text("bad_duplicate.json", "{\"format\": \"autotune-table\", \"format\": \"x\", \"version\": 1}\n");
    text("bad_array.json", "[{\"format\": \"autotune-table\"}]\n");
    unlink(db);
    rmdir(dir);
    return 0;
}
