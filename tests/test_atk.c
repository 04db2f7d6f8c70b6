/*
** test_atk.c — the runtime library's logic without a GPU (label cpu): the
** key digest equals the tuner's, lookups (exact, inferred, fallback, strict)
** against a cache made here with the tuner's at_cache_* API, missing,
** corrupt, foreign and damaged tables opening on fallback with a reason,
** the JSON and compiled C tables giving the same answers, statistics, many
** threads at once (also run under ThreadSanitizer in .ci/run), and a
** printed (never asserted) lookup cost. Uses atk_open_dry contexts.
*/
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "atk.h"
#include "cache_validation.h"
#include "atk_internal.h"
#include "autotune.h"
#include "table.h"
#include "tinytest.h"
#include "test_files.h"

static char tmpdir[64];

static const char *tpath(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
    return buf;
}

static const atk_gpu_id H200 = {"NVIDIA H200", 90, 132, 13000};
static const at_device_info H200_INFO = {"NVIDIA H200", 9, 0, 132, 62914560, 150754820096LL, 13000, 13, 0,
                                         4580.5, 4260.25, 0.53};
static const at_device_info RTX_INFO = {"NVIDIA GeForce RTX 4070", 8, 9, 46, 37748736, 12878086144LL, 12080, 12, 8,
                                        482.125, 450.7, 0.6};

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
    k.nvrtc_version = 13000;
    at_sha256_hex("space", 5, k.space_sha);
    at_nvrtc_common_options(dt, k.cc, k.options, sizeof k.options);
    strcpy(k.tuner_version, AT_TUNER_VERSION);
    return k;
}

/* A generated-kernel winner with a fake cubin (dry contexts never load it). */
static void put_kernel_smem(at_cache *c, const at_key *k, const char *strategy, const char *kernel, const char *tpl,
                            const char *params, unsigned gx, unsigned gy, unsigned bx, double us, unsigned smem)
{
    at_winner w;
    unsigned char blob[64];
    memset(&w, 0, sizeof w);
    snprintf(w.strategy, sizeof w.strategy, "%s", strategy);
    snprintf(w.kernel, sizeof w.kernel, "%s", kernel);
    snprintf(w.template_name, sizeof w.template_name, "%s", tpl);
    snprintf(w.params, sizeof w.params, "%s", params);
    w.us = us;
    w.baseline_us = 2 * us;
    w.speedup = 2.0;
    w.grid[0] = gx, w.grid[1] = gy, w.grid[2] = 1;
    w.block[0] = bx, w.block[1] = w.block[2] = 1;
    w.smem = smem;
    for (size_t i = 0; i < sizeof blob; i++)
        blob[i] = (unsigned char)(i * 7 + strlen(k->shape));
    w.cubin = blob;
    w.cubin_size = sizeof blob;
    CHECK_EQ_INT(at_cache_put_winner(c, k, &w), AT_OK);
}

static void put_kernel(at_cache *c, const at_key *k, const char *strategy, const char *kernel, const char *tpl,
                       const char *params, unsigned gx, unsigned gy, unsigned bx, double us)
{
    put_kernel_smem(c, k, strategy, kernel, tpl, params, gx, gy, bx, us, 0);
}

/* A stored baseline answer (no kernel won): "cublas" for a GEMV, "unfused"
** for a fused op ([UNFUSED_WINNER] tuner/op_fused.c writes it). */
static void put_answer(at_cache *c, const at_key *k, const char *strategy, const char *params, double us)
{
    at_winner w;
    memset(&w, 0, sizeof w);
    snprintf(w.strategy, sizeof w.strategy, "%s", strategy);
    snprintf(w.params, sizeof w.params, "%s", params);
    w.us = w.baseline_us = us;
    w.speedup = 1.0;
    CHECK_EQ_INT(at_cache_put_winner(c, k, &w), AT_OK);
}
#define put_baseline(c, k) put_answer((c), (k), "cublas", "cublasGemmEx", 4.9)
#define put_unfused(c, k) put_answer((c), (k), "unfused", "atk unfused sequence", 6.1)

#define SPLITK_8192 "TP_WARPS=16 TP_WPR=2 TP_ROWS=4 TP_VEC=8 TP_UNROLL=2 TP_CACHE=2 TP_PDL=1"
#define WARPROW_2048 "TP_WARPS=16 TP_ROWS=1 TP_VEC=8 TP_UNROLL=4 TP_CACHE=1 TP_PDL=0"

/* An empty cache at path (a file left there removed) that knows the H200;
** NULL when it cannot be opened (a failed CHECK). */
static at_cache *new_h200_cache(const char *path)
{
    at_cache *c = NULL;
    unlink(path);
    CHECK_EQ_INT(at_cache_open(path, &c), AT_OK);
    if (c)
        at_cache_put_device(c, &H200_INFO);
    return c;
}

/* The fixture: an H200 with GEMV and norm winners (one baseline, one whose
** stored grid disagrees with the runtime's geometry rule), an RTX 4070. */
static void build_cache(const char *path)
{
    at_cache *c = new_h200_cache(path);
    if (!c)
        return;
    at_cache_put_device(c, &RTX_INFO);
    at_key k = key_for(&H200_INFO, "gemv", "1x2048x8192", AT_BF16);
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 256, 1, 512, 7.9);
    k = key_for(&H200_INFO, "gemv", "1x2048x2048", AT_BF16);
    put_kernel(c, &k, "warp_row", "gemv_warp_row", "gemv/gemv_warp_row.cu", WARPROW_2048, 128, 1, 512, 2.8);
    k = key_for(&H200_INFO, "gemv", "1x2048x32", AT_BF16);
    put_baseline(c, &k);
    k = key_for(&H200_INFO, "gemv", "1x6144x2048", AT_BF16); /* grid 7: not the rule's 64 */
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 7, 1, 512, 6.3);
    k = key_for(&H200_INFO, "gemv", "1x2048x8192", AT_FP16);
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 256, 1, 512, 7.9);
    k = key_for(&H200_INFO, "rmsnorm", "1x2048", AT_BF16);
    put_kernel(c, &k, "block_row", "norm_block_row", "norm/norm_block_row.cu",
               "TP_THREADS=256 TP_OP=0 TP_WFP32=0 TP_VEC=8 TP_REGS=1 TP_ITEMS=1 TP_PDL=1", 1, 1, 256, 1.7);
    k = key_for(&H200_INFO, "add_rmsnorm", "4x2048", AT_BF16);
    put_kernel(c, &k, "warp_rows", "norm_warp_rows", "norm/norm_warp_rows.cu",
               "TP_THREADS_PER_ROW=32 TP_ROWS_PER_BLOCK=4 TP_OP=1 TP_WFP32=0 TP_VEC=8 TP_REGS=1 TP_ITEMS=8 TP_PDL=0",
               1, 1, 128, 2.1);
    k = key_for(&RTX_INFO, "gemv", "1x2048x8192", AT_BF16);
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 256, 1, 512, 70.0);
    at_cache_close(c);
}

static atk_ctx *open_dry(const char *path, unsigned flags)
{
    atk_ctx *ctx = NULL;
    int rc = atk_open_dry(path, NULL, &H200, flags, &ctx);
    CHECK_EQ_INT(rc, ATK_OK);
    if (rc != ATK_OK)
        fprintf(stderr, "  atk_open_dry: %s\n", atk_errmsg(NULL));
    return ctx;
}

static atk_choice explain(atk_ctx *ctx, int op, int dtype, int64_t M, int64_t K, int64_t N)
{
    atk_choice ch;
    memset(&ch, 0, sizeof ch);
    CHECK_EQ_INT(atk_explain(ctx, op, dtype, M, K, N, &ch), ATK_OK);
    return ch;
}

/* ------------------------------------------------------------------ key */

static void row_from_key(const at_key *k, atk_row *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->op, sizeof r->op, "%s", k->op);
    snprintf(r->dtype, sizeof r->dtype, "%s", at_dtype_name(k->dtype));
    snprintf(r->shape, sizeof r->shape, "%s", k->shape);
    snprintf(r->device, sizeof r->device, "%s", k->device);
    r->cc = k->cc, r->sms = k->sms, r->driver_version = k->driver_version, r->nvrtc_version = k->nvrtc_version;
    snprintf(r->space_sha, sizeof r->space_sha, "%s", k->space_sha);
    snprintf(r->options, sizeof r->options, "%s", k->options);
    snprintf(r->tuner_version, sizeof r->tuner_version, "%s", k->tuner_version);
}

static void test_key_digest_matches_tuner(void)
{
    const char *devices[] = {"NVIDIA H200", "odd;name=with\\escapes", ""};
    for (int i = 0; i < 3; i++) {
        at_key k = key_for(&H200_INFO, i == 1 ? "add_rmsnorm" : "gemv", i == 1 ? "4x2048" : "1x2048x8192",
                           i == 2 ? AT_FP16 : AT_BF16);
        snprintf(k.device, sizeof k.device, "%s", devices[i]);
        if (i == 1)
            strcpy(k.options, "a=b;c\\d");
        atk_row r;
        char want[65], got[65], ts[4096], rs[4096];
        row_from_key(&k, &r);
        at_key_digest(&k, want);
        atk__key_digest(&r, got);
        at_key_string(&k, ts, sizeof ts);
        atk__key_string(&r, rs, sizeof rs);
        CHECK(!strcmp(ts, rs));
        CHECK(!strcmp(want, got));
    }
}

/* [CACHE_KEY] atk's adapter on a known row gives the digest pinned in
** tests/test_cache.c (test_key_pinned). */
static void test_key_digest_pinned(void)
{
    atk_row r;
    char hex[65];
    memset(&r, 0, sizeof r);
    strcpy(r.op, "gemv");
    strcpy(r.dtype, "bf16");
    strcpy(r.shape, "1x2048x8192");
    strcpy(r.device, "NVIDIA H200");
    r.cc = 90;
    r.sms = 132;
    r.driver_version = 13000;
    r.nvrtc_version = 13000;
    at_sha256_hex("spec", 4, r.space_sha);
    strcpy(r.options, "-std=c++17 --use_fast_math");
    strcpy(r.tuner_version, "0.1.0");
    atk__key_digest(&r, hex);
    CHECK(strcmp(hex, "b4da6993a11a179f88e3386b49261ee8f3693b2aa1d00ce3d685496143fe355d") == 0);
}

/* [LAUNCH_GEOMETRY] atk's grid/block rules equal the specs' grid and block
** functions: every live candidate of search/gemv.lua and the norm specs, on
** a few shapes, recomputes to what the spec says (so its winner may serve
** other shapes), and on a second shape to what the spec says there. */
static void check_spec(const char *path, const char *op, const char *s1, const char *s2)
{
    at_spec *spec = NULL;
    at_candidate *c1 = NULL, *c2 = NULL;
    int n1 = 0, n2 = 0, rank = strcmp(op, "gemv") ? 2 : 3, live = 0, agree = 0, other = 0;
    at_problem p1 = {.op = op, .dtype = AT_BF16, .arch = 90, .sms = 132}, p2 = p1;
    CHECK_EQ_INT(at_spec_load_op(path, op, &spec), AT_OK);
    CHECK_EQ_INT(at_shape_parse(s1, rank, &p1.shape), AT_OK);
    CHECK_EQ_INT(at_shape_parse(s2, rank, &p2.shape), AT_OK);
    if (!spec || at_spec_expand(spec, &p1, &c1, &n1) != AT_OK || at_spec_expand(spec, &p2, &c2, &n2) != AT_OK) {
        CHECK(0);
        goto done;
    }
    /* the second shape's candidates by strategy and parameters: a spec cuts
    ** per shape before crossing, so the two lists differ */
    char (*keys2)[300] = calloc((size_t)(n2 ? n2 : 1), sizeof *keys2);
    if (!keys2) {
        CHECK(0);
        goto done;
    }
    for (int j = 0; j < n2; j++) {
        int k = snprintf(keys2[j], sizeof keys2[j], "%d ", c2[j].strategy);
        at_candidate_params_string(&c2[j], keys2[j] + k, sizeof keys2[j] - (size_t)k);
    }
    for (int i = 0; i < n1; i++) {
        if (c1[i].pruned_by[0])
            continue;
        atk_row r;
        atk_entry e;
        char why[256];
        memset(&r, 0, sizeof r);
        snprintf(r.op, sizeof r.op, "%s", op);
        strcpy(r.dtype, "bf16");
        snprintf(r.shape, sizeof r.shape, "%s", s1);
        snprintf(r.strategy, sizeof r.strategy, "%s", at_spec_strategy_name(spec, c1[i].strategy));
        snprintf(r.kernel, sizeof r.kernel, "%s", at_spec_strategy_kernel(spec, c1[i].strategy));
        at_candidate_params_string(&c1[i], r.params, sizeof r.params);
        memcpy(r.grid, c1[i].grid, sizeof r.grid);
        memcpy(r.block, c1[i].block, sizeof r.block);
        r.smem = c1[i].smem;
        r.cubin_size = 1;
        int ok = atk__entry_init(&e, &r, why, sizeof why);
        if (ok && e.strategy == ATK_S_UNKNOWN) { /* a kernel atk has no rule for: exact hits only, by design */
            other++;
            continue;
        }
        live++;
        if (!ok || !(e.inferable || e.batch)) /* every live candidate may serve another shape */
            continue;
        unsigned g[3], b[3];
        char key[300];
        int k = snprintf(key, sizeof key, "%d ", c1[i].strategy), j;
        at_candidate_params_string(&c1[i], key + k, sizeof key - (size_t)k);
        for (j = 0; j < n2 && strcmp(keys2[j], key); j++)
            ;
        if (j < n2 && !c2[j].pruned_by[0] &&
            (!atk__entry_geometry(&e, (int)p2.shape.M, (int)p2.shape.K, (int)p2.shape.N, g, b) ||
             memcmp(g, c2[j].grid, sizeof g) || memcmp(b, c2[j].block, sizeof b)))
            continue;
        agree++;
    }
    free(keys2);
    printf("  %s: %d live candidates on %s of strategies atk infers with, geometry agrees for %d (%d of "
           "other strategies: exact hits only)\n",
           path, live, s1, agree, other);
    CHECK(live > 0);
    CHECK_EQ_INT(agree, live);
done:
    free(c1);
    free(c2);
    at_spec_free(spec);
}

static void test_geometry_matches_specs(void)
{
    check_spec("search/gemv.lua", "gemv", "1x2048x8192", "3x2056x5000");
    check_spec("search/gemv.lua", "gemv", "1x6144x32", "16x6144x2048");
    check_spec("search/gemv.lua", "gemv", "8x2048x5120", "3x2048x5120"); /* multi_token, mma, mma_bulk */
    check_spec("search/gemv.lua", "gemv", "16x2048x32", "5x2048x32");
    check_spec("search/norm.lua", "rmsnorm", "1x2048", "512x2048");
    check_spec("search/norm.lua", "add_rmsnorm", "16x4096", "4x4096");
    check_spec("search/norm.lua", "gemma_rmsnorm", "4x2560", "128x2560");
    check_spec("search/norm.lua", "add_gemma_rmsnorm", "1x8192", "4096x8192");
}

/* --------------------------------------------------------------- lookup */

static void test_exact(void)
{
    char db[128];
    build_cache(tpath(db, sizeof db, "exact.db"));
    atk_ctx *ctx = open_dry(db, 0);
    if (!ctx)
        return;
    atk_info in;
    CHECK_EQ_INT(atk_get_info(ctx, &in), ATK_OK);
    CHECK_EQ_INT(in.rows, 8);
    CHECK_EQ_INT(in.for_this_gpu, 7);
    CHECK_EQ_INT(in.loaded, 7);
    CHECK_EQ_INT(in.failed, 0);
    CHECK(!in.all_fallback && in.dry);
    CHECK_STR_HAS(atk_report(ctx), "8 entries in the table, 7 for this GPU, 7 loaded");
    atk_choice ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 8192);
    CHECK_EQ_INT(ch.path, ATK_PATH_TUNED);
    CHECK(!strcmp(ch.strategy, "splitk") && !strcmp(ch.kernel, "gemv_splitk") && !strcmp(ch.params, SPLITK_8192));
    CHECK(ch.grid[0] == 256 && ch.grid[1] == 1 && ch.block[0] == 512 && ch.pdl == 1);
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 32); /* the baseline won: cuBLAS, tuned */
    CHECK_EQ_INT(ch.path, ATK_PATH_TUNED);
    CHECK(!strcmp(ch.strategy, "cublas") && !strcmp(ch.kernel, ""));
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 6144, 2048); /* stored grid used as stored */
    CHECK(ch.path == ATK_PATH_TUNED && ch.grid[0] == 7);
    ch = explain(ctx, ATK_OP_RMSNORM, ATK_BF16, 1, 2048, 99); /* N ignored for norms */
    CHECK(ch.path == ATK_PATH_TUNED && !strcmp(ch.kernel, "norm_block_row") && ch.pdl == 1);
    ch = explain(ctx, ATK_OP_GEMV, ATK_FP16, 1, 2048, 8192);
    CHECK_EQ_INT(ch.path, ATK_PATH_TUNED);
    atk_close(ctx);
}

static void test_inferred_and_fallback(void)
{
    char db[128];
    build_cache(tpath(db, sizeof db, "infer.db"));
    atk_ctx *ctx = open_dry(db, 0);
    if (!ctx)
        return;
    /* nearest by log2 distance: N 7000 is near 8192 (splitk, block_n 32) */
    atk_choice ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 7000);
    CHECK_EQ_INT(ch.path, ATK_PATH_INFERRED);
    CHECK(!strcmp(ch.from, "1x2048x8192") && !strcmp(ch.kernel, "gemv_splitk"));
    CHECK(ch.grid[0] == 219 && ch.grid[1] == 1 && ch.grid[2] == 1 && ch.block[0] == 512 && ch.pdl == 1);
    /* M > 1 with only M=1 (splitk) tuned: the M=1 kernel would read the
    ** weights once per token, so cuBLAS serves it */
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 4, 2048, 8192);
    CHECK(ch.path == ATK_PATH_FALLBACK && !strcmp(ch.strategy, "cublas") && ch.bucket == 0);
    CHECK_STR_HAS(ch.reason, "no kernel reads the weights once at M=4 (largest tuned M here: 1)");
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 1500); /* near 2048: warp_row, block_n 16 */
    CHECK(ch.path == ATK_PATH_INFERRED && !strcmp(ch.from, "1x2048x2048") && ch.grid[0] == 94 && ch.pdl == 0);
    /* K not a multiple of TP_VEC=8: no tuned kernel is valid -> cuBLAS */
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2050, 8192);
    CHECK(ch.path == ATK_PATH_FALLBACK && !strcmp(ch.strategy, "cublas"));
    /* M past grid.y's 65535: fallback */
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 70000, 2048, 8192);
    CHECK_EQ_INT(ch.path, ATK_PATH_FALLBACK);
    /* the entry whose stored grid the rule does not reproduce serves only its
    ** own shape: 1x6144x2000 comes from 1x2048x2048 instead */
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 6144, 2000);
    CHECK(ch.path == ATK_PATH_INFERRED && !strcmp(ch.from, "1x2048x2048"));
    /* dtypes never mix: fp16 1x2048x2048 borrows fp16's 1x2048x8192 */
    ch = explain(ctx, ATK_OP_GEMV, ATK_FP16, 1, 2048, 2048);
    CHECK(ch.path == ATK_PATH_INFERRED && !strcmp(ch.from, "1x2048x8192"));
    /* a baseline winner is never borrowed: 1x2048x40 is near 1x2048x32 (cuBLAS)
    ** but comes from a generated kernel (the nearest valid one) */
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 40);
    CHECK(ch.path == ATK_PATH_INFERRED && !strcmp(ch.from, "1x2048x2048"));
    /* norms */
    /* norms: within T=1, another H; T above every tuned T falls back */
    ch = explain(ctx, ATK_OP_RMSNORM, ATK_BF16, 1, 4096, 0);
    CHECK(ch.path == ATK_PATH_INFERRED && !strcmp(ch.from, "1x2048") && ch.grid[0] == 1 && ch.block[0] == 256);
    CHECK(ch.bucket == 1 && strstr(ch.reason, "inferred: block_row of 1x2048") != NULL);
    ch = explain(ctx, ATK_OP_RMSNORM, ATK_BF16, 16, 4096, 0);
    CHECK(ch.path == ATK_PATH_FALLBACK && !strcmp(ch.kernel, "norm_naive"));
    ch = explain(ctx, ATK_OP_ADD_RMSNORM, ATK_BF16, 9, 2048, 0);
    CHECK(ch.path == ATK_PATH_FALLBACK && ch.grid[0] == 9 && ch.block[0] == 256);
    CHECK_STR_HAS(ch.reason, "at T=9 (largest tuned T here: 4)");
    /* T=3 of H=2048: the T=4 kernel (warp_rows, 4 rows a block), one row masked */
    ch = explain(ctx, ATK_OP_ADD_RMSNORM, ATK_BF16, 3, 2048, 0);
    CHECK(ch.path == ATK_PATH_BUCKET && ch.bucket == 4 && !strcmp(ch.from, "4x2048") && ch.grid[0] == 1 &&
          ch.block[0] == 128);
    CHECK_STR_HAS(ch.reason, "bucket T=4 (warp_rows, 1 row masked)");
    ch = explain(ctx, ATK_OP_RMSNORM, ATK_BF16, 3, 2047, 0); /* H % 8 != 0 */
    CHECK(ch.path == ATK_PATH_FALLBACK && !strcmp(ch.kernel, "norm_naive") && ch.grid[0] == 3 &&
          ch.block[0] == 256);
    ch = explain(ctx, ATK_OP_GEMMA_RMSNORM, ATK_BF16, 1, 2048, 0); /* nothing tuned for gemma */
    CHECK_EQ_INT(ch.path, ATK_PATH_FALLBACK);
    ch = explain(ctx, ATK_OP_RMSNORM, ATK_FP16, 1, 2048, 0);
    CHECK_EQ_INT(ch.path, ATK_PATH_FALLBACK);
    /* asked twice: the memo gives the same answer */
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 7000);
    CHECK(ch.path == ATK_PATH_INFERRED && ch.grid[0] == 219);
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2050, 8192);
    CHECK_EQ_INT(ch.path, ATK_PATH_FALLBACK);
    atk_close(ctx);

    ctx = open_dry(db, ATK_NO_INFER);
    if (ctx) {
        CHECK_EQ_INT(explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 7000).path, ATK_PATH_FALLBACK);
        CHECK_EQ_INT(explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 8192).path, ATK_PATH_TUNED);
    }
    atk_close(ctx);
}

static void test_strict_and_stats(void)
{
    char db[128];
    int dummy;
    void *p = &dummy;
    atk_op_stats s;
    build_cache(tpath(db, sizeof db, "strict.db"));
    atk_ctx *ctx = open_dry(db, ATK_STRICT);
    if (!ctx)
        return;
    CHECK_EQ_INT(atk_gemv(ctx, NULL, ATK_BF16, 1, 2048, 8192, p, p, p), ATK_OK);
    CHECK_EQ_INT(atk_gemv(ctx, NULL, ATK_BF16, 1, 2048, 32, p, p, p), ATK_OK); /* tuned: baseline */
    CHECK_EQ_INT(atk_gemv(ctx, NULL, ATK_BF16, 1, 2048, 7000, p, p, p), ATK_ERR_MISS);
    CHECK_STR_HAS(atk_errmsg(ctx), "gemv bf16 1x2048x7000: no tuned entry (strict mode)");
    CHECK_EQ_INT(atk_rmsnorm(ctx, NULL, ATK_BF16, 1, 2048, p, p, p, 1e-6f), ATK_OK);
    CHECK_STR_HAS(atk_errmsg(ctx), ""); /* a success clears it */
    CHECK(!atk_errmsg(ctx)[0]);
    CHECK_EQ_INT(atk_rmsnorm(ctx, NULL, ATK_BF16, 2, 2048, p, p, p, 1e-6f), ATK_ERR_MISS);
    CHECK_STR_HAS(atk_errmsg(ctx), "rmsnorm bf16 2x2048: no tuned entry");
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_GEMV, &s), ATK_OK);
    CHECK(!atk_errmsg(ctx)[0]); /* atk_stats succeeded: the last call's message is "" */
    CHECK(s.calls == 3 && s.tuned == 2 && s.inferred == 0 && s.fallback == 0 && s.missed == 1);
    atk_close(ctx);

    ctx = open_dry(db, 0);
    if (!ctx)
        return;
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(atk_gemv(ctx, NULL, ATK_BF16, 1, 2048, 8192, p, p, p), ATK_OK);
    CHECK_EQ_INT(atk_gemv(ctx, NULL, ATK_BF16, 1, 2048, 7000, p, p, p), ATK_OK);
    CHECK_EQ_INT(atk_gemv(ctx, NULL, ATK_BF16, 1, 2050, 8192, p, p, p), ATK_OK);
    CHECK_EQ_INT(atk_gemv(ctx, NULL, 7, 1, 2048, 8192, p, p, p), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "dtype");
    CHECK_EQ_INT(atk_gemv(ctx, NULL, ATK_BF16, 0, 2048, 8192, p, p, p), ATK_ERR_USAGE);
    CHECK_EQ_INT(atk_add_rmsnorm(ctx, NULL, ATK_BF16, 4, 2048, p, p, p, p, 1e-6f), ATK_OK);
    CHECK_EQ_INT(atk_add_rmsnorm(ctx, NULL, ATK_BF16, 5, 2048, p, p, p, p, 1e-6f), ATK_OK);
    CHECK_EQ_INT(atk_gemma_rmsnorm(ctx, NULL, ATK_BF16, 1, 2048, p, p, p, 1e-6f), ATK_OK);
    CHECK_EQ_INT(atk_add_gemma_rmsnorm(ctx, NULL, ATK_FP16, 1, 2048, p, p, p, p, NAN), ATK_ERR_USAGE);
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_GEMV, &s), ATK_OK);
    CHECK(s.calls == 9 && s.tuned == 5 && s.inferred == 1 && s.fallback == 1 && s.missed == 0 && s.rejected == 2);
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_ADD_RMSNORM, &s), ATK_OK);
    CHECK(s.calls == 2 && s.tuned == 1 && s.inferred == 0 && s.fallback == 1 && s.bucket == 0);
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_GEMMA_RMSNORM, &s), ATK_OK);
    CHECK(s.calls == 1 && s.fallback == 1);
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_ADD_GEMMA_RMSNORM, &s), ATK_OK);
    CHECK(s.calls == 1 && s.rejected == 1);
    CHECK_EQ_INT(atk_stats(ctx, ATK_NOPS, &s), ATK_ERR_USAGE);
    atk_stats_reset(ctx);
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_GEMV, &s), ATK_OK);
    CHECK(s.calls == 0 && s.tuned == 0);
    atk_close(ctx);
}

static void test_api_edges(void)
{
    atk_ctx *ctx = (atk_ctx *)1;
    atk_close(NULL); /* a no-op */
    CHECK_EQ_INT(atk_gemv(NULL, NULL, ATK_BF16, 1, 1, 1, NULL, NULL, NULL), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(NULL), "NULL context");
    CHECK_EQ_INT(atk_open(NULL, 0, 0, &ctx), ATK_ERR_USAGE);
    CHECK(ctx == NULL);
    CHECK_EQ_INT(atk_open_dry("x", NULL, NULL, 0, &ctx), ATK_ERR_USAGE);
    CHECK(!strcmp(atk_errstr(ATK_ERR_MISS), "no tuned kernel for this call (strict mode)"));
    CHECK(!strcmp(atk_errstr(12345), "unknown status"));
    CHECK(!strcmp(atk_op_name(ATK_OP_ADD_GEMMA_RMSNORM), "add_gemma_rmsnorm"));
    CHECK(!strcmp(atk_report(NULL), ""));
    /* without a GPU driver atk_open says so (on a GPU machine it opens) */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        CHECK_EQ_INT(atk_open("/nonexistent.db", 0, 0, &ctx), ATK_ERR_NOGPU);
        CHECK(ctx == NULL);
        CHECK_STR_HAS(atk_errmsg(NULL), "libcuda.so.1");
    } else {
        dlclose(h);
    }
}

/* ------------------------------------------------------- broken tables */

static int sql(const char *db, const char *stmt)
{
    sqlite3 *h = NULL;
    int rc = sqlite3_open(db, &h);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(h, stmt, NULL, NULL, NULL);
    sqlite3_close(h);
    return rc;
}

/* Opens path dry: expects success with everything on fallback and `why` in
** the report; with ATK_STRICT_OPEN, ATK_ERR_TABLE with `why` in errmsg. */
static void expect_fallback(const char *path, const char *why)
{
    atk_ctx *ctx = NULL;
    atk_info in;
    CHECK_EQ_INT(atk_open_dry(path, NULL, &H200, 0, &ctx), ATK_OK);
    if (!ctx)
        return;
    CHECK_EQ_INT(atk_get_info(ctx, &in), ATK_OK);
    CHECK(in.all_fallback && in.loaded == 0);
    CHECK_STR_HAS(atk_report(ctx), why);
    CHECK_STR_HAS(atk_report(ctx), "every call falls back");
    atk_choice ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 8192);
    CHECK_EQ_INT(ch.path, ATK_PATH_FALLBACK);
    atk_close(ctx);
    ctx = (atk_ctx *)1;
    CHECK_EQ_INT(atk_open_dry(path, NULL, &H200, ATK_STRICT_OPEN, &ctx), ATK_ERR_TABLE);
    CHECK(ctx == NULL);
    CHECK_STR_HAS(atk_errmsg(NULL), why);
}

static void test_broken_tables(void)
{
    char db[128], p[128];
    expect_fallback(tpath(p, sizeof p, "missing.db"), "No such file");
    tt_spit(tpath(p, sizeof p, "text.db"), "hello, not a table\n", 19);
    expect_fallback(p, "is not an autotune table (neither SQLite nor JSON)");
    tpath(p, sizeof p, "other.db");
    unlink(p);
    CHECK_EQ_INT(sql(p, "CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('hi');"), SQLITE_OK);
    expect_fallback(p, "is not an autotune cache");
    /* a cache cut in half: SQLite reports corruption, or the rows are gone */
    build_cache(tpath(db, sizeof db, "whole.db"));
    FILE *f = fopen(db, "rb");
    static unsigned char buf[1 << 20];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    CHECK(n > 8192);
    tt_spit(tpath(p, sizeof p, "half.db"), buf, n / 2);
    atk_ctx *ctx = NULL;
    CHECK_EQ_INT(atk_open_dry(p, NULL, &H200, 0, &ctx), ATK_OK); /* never a crash */
    atk_close(ctx);
    /* bytes flipped across the file: whatever survives, atk opens */
    for (size_t i = 4096; i < n; i += 97)
        buf[i] ^= 0x5a;
    tt_spit(tpath(p, sizeof p, "flipped.db"), buf, n);
    ctx = NULL;
    CHECK_EQ_INT(atk_open_dry(p, NULL, &H200, 0, &ctx), ATK_OK);
    atk_close(ctx);
    /* a cache tuned on another GPU only */
    at_cache *c = NULL;
    tpath(p, sizeof p, "rtx.db");
    unlink(p);
    CHECK_EQ_INT(at_cache_open(p, &c), AT_OK);
    if (c) {
        at_key k = key_for(&RTX_INFO, "gemv", "1x2048x8192", AT_BF16);
        put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 256, 1, 512, 70.0);
        at_cache_close(c);
    }
    expect_fallback(p, "nothing tuned for this GPU (1 entries for other GPUs)");
    /* JSON: truncated, another format */
    tt_spit(tpath(p, sizeof p, "bad.json"), "{\"format\": \"autotune-table\", \"version\": 1, \"dev", 46);
    expect_fallback(p, "bad.json");
    tt_spit(tpath(p, sizeof p, "other.json"), "{\"format\": \"something\"}", 23);
    expect_fallback(p, "not an autotune table");
}

/* Damaged rows fall back one by one; the rest of the table still loads. */
static void test_damaged_rows(void)
{
    char db[128];
    build_cache(tpath(db, sizeof db, "damaged.db"));
    CHECK_EQ_INT(sql(db, "UPDATE winners SET cubin = X'00112233' WHERE shape = '1x2048x8192' AND dtype = 'bf16'"
                         " AND device = 'NVIDIA H200'"),
                 SQLITE_OK);
    CHECK_EQ_INT(sql(db, "UPDATE winners SET shape = '1x2048x4096' WHERE shape = '1x2048x2048'"), SQLITE_OK);
    CHECK_EQ_INT(sql(db, "UPDATE winners SET params = 'TP_VEC=eight' WHERE op = 'add_rmsnorm'"), SQLITE_OK);
    atk_ctx *ctx = open_dry(db, 0);
    if (!ctx)
        return;
    atk_info in;
    atk_get_info(ctx, &in);
    CHECK_EQ_INT(in.for_this_gpu, 7);
    CHECK_EQ_INT(in.loaded, 4);
    CHECK_EQ_INT(in.failed, 3);
    const char *rep = atk_report(ctx);
    CHECK_STR_HAS(rep, "gemv bf16 1x2048x8192: cubin does not match its sha256: falls back");
    CHECK_STR_HAS(rep, "gemv bf16 1x2048x4096: key fields do not digest to the stored key_sha");
    CHECK_STR_HAS(rep, "add_rmsnorm bf16 4x2048: params 'TP_VEC=eight' are not TP_NAME=integer pairs");
    /* what is left for bf16 GEMV: cuBLAS's 1x2048x32 (never borrowed) and the
    ** exact-only 1x6144x2048: both shapes fall back */
    CHECK_EQ_INT(explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 2048).path, ATK_PATH_FALLBACK);
    CHECK_EQ_INT(explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 4096).path, ATK_PATH_FALLBACK);
    CHECK_EQ_INT(explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 32).path, ATK_PATH_TUNED);
    CHECK_EQ_INT(explain(ctx, ATK_OP_GEMV, ATK_FP16, 1, 2048, 8192).path, ATK_PATH_TUNED);
    atk_close(ctx);
}

/* A row whose kernel atk knows but whose parameters do not suit its own
** shape (TP_VEC=8 with K or H not a multiple of 8: misaligned vector loads)
** falls back with a reason, instead of being launched on its exact shape. */
static void test_invalid_for_own_shape(void)
{
    char db[128];
    at_cache *c = new_h200_cache(tpath(db, sizeof db, "invalid.db"));
    if (!c)
        return;
    at_key k = key_for(&H200_INFO, "gemv", "1x2050x1024", AT_BF16);
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 32, 1, 512, 3.0);
    k = key_for(&H200_INFO, "rmsnorm", "1x2052", AT_BF16);
    put_kernel(c, &k, "block_row", "norm_block_row", "norm/norm_block_row.cu",
               "TP_THREADS=256 TP_OP=0 TP_WFP32=0 TP_VEC=8 TP_REGS=1 TP_ITEMS=1 TP_PDL=0", 1, 1, 256, 1.0);
    at_cache_close(c);
    atk_ctx *ctx = open_dry(db, 0);
    if (!ctx)
        return;
    atk_info in;
    atk_get_info(ctx, &in);
    CHECK_EQ_INT(in.loaded, 0);
    CHECK_EQ_INT(in.failed, 2);
    CHECK_STR_HAS(atk_report(ctx), "gemv bf16 1x2050x1024: gemv_splitk with");
    CHECK_STR_HAS(atk_report(ctx), "is not valid for its own shape (TP_VEC=8 must divide K");
    CHECK_STR_HAS(atk_report(ctx), "must divide H");
    CHECK_EQ_INT(explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2050, 1024).path, ATK_PATH_FALLBACK);
    CHECK_EQ_INT(explain(ctx, ATK_OP_RMSNORM, ATK_BF16, 1, 2052, 0).path, ATK_PATH_FALLBACK);
    atk_close(ctx);
}

/* Two rows for one problem on this GPU: the one tuned under the present
** driver wins even when the other measured faster. */
static void test_ranking(void)
{
    char db[128];
    at_cache *c = NULL;
    tpath(db, sizeof db, "rank.db");
    unlink(db);
    CHECK_EQ_INT(at_cache_open(db, &c), AT_OK);
    if (!c)
        return;
    at_key k = key_for(&H200_INFO, "gemv", "1x2048x8192", AT_BF16);
    put_kernel(c, &k, "warp_row", "gemv_warp_row", "gemv/gemv_warp_row.cu", WARPROW_2048, 512, 1, 512, 9.0);
    k.driver_version = 12080;
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 256, 1, 512, 7.0);
    at_cache_close(c);
    atk_ctx *ctx = open_dry(db, 0);
    if (ctx) {
        atk_choice ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 8192);
        CHECK(ch.path == ATK_PATH_TUNED && !strcmp(ch.strategy, "warp_row"));
        atk_info in;
        atk_get_info(ctx, &in);
        CHECK(in.for_this_gpu == 2 && in.loaded == 1 && in.failed == 0);
    }
    atk_close(ctx);
    ctx = open_dry(db, ATK_SAME_DRIVER);
    if (ctx)
        CHECK_STR_HAS(atk_report(ctx), "tuned under driver 12080, this is 13000 (ATK_SAME_DRIVER)");
    atk_close(ctx);
}

/* ------------------------------------------------------ JSON and C table */

static void same_answers(atk_ctx *a, atk_ctx *b)
{
    static const int64_t shapes[][4] = {{ATK_OP_GEMV, 1, 2048, 8192}, {ATK_OP_GEMV, 1, 2048, 7000},
                                        {ATK_OP_GEMV, 1, 2048, 32},   {ATK_OP_GEMV, 1, 2050, 8192},
                                        {ATK_OP_RMSNORM, 1, 2048, 0}, {ATK_OP_ADD_RMSNORM, 9, 2048, 0}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        atk_choice x = explain(a, (int)shapes[i][0], ATK_BF16, shapes[i][1], shapes[i][2], shapes[i][3]);
        atk_choice y = explain(b, (int)shapes[i][0], ATK_BF16, shapes[i][1], shapes[i][2], shapes[i][3]);
        CHECK(x.path == y.path && !strcmp(x.strategy, y.strategy) && !strcmp(x.params, y.params) &&
              !memcmp(x.grid, y.grid, sizeof x.grid));
    }
}

static void test_json_table(void)
{
    char db[128], js[128];
    build_cache(tpath(db, sizeof db, "json.db"));
    CHECK_EQ_INT(at_table_export_file(db, NULL, 1, AT_TABLE_JSON, tpath(js, sizeof js, "t.json")), AT_OK);
    atk_ctx *a = open_dry(db, 0), *b = open_dry(js, 0);
    if (a && b) {
        atk_info ia, ib;
        atk_get_info(a, &ia);
        atk_get_info(b, &ib);
        CHECK(ia.loaded == ib.loaded && ia.rows == ib.rows && ib.loaded == 7);
        same_answers(a, b);
    }
    atk_close(a);
    atk_close(b);
}

static int run_cmd(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    static char buf[4096];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

/* The exported C header compiles next to atk.h, links against libatk and
** opens (dry) with the same answers as the cache it came from. */
/* The build's kernels/ folder (libatk.so): beside this executable's tests/. */
static void libdir(char *buf, size_t len)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(buf, len, "%s/../kernels", exe);
}

static void test_c_table(void)
{
    char db[128], hdr[128], prog[128], exe[128], out[128], cmd[16384], lib[4200];
    libdir(lib, sizeof lib);
    build_cache(tpath(db, sizeof db, "c.db"));
    CHECK_EQ_INT(at_table_export_file(db, NULL, 1, AT_TABLE_C, tpath(hdr, sizeof hdr, "tuned_table.h")), AT_OK);
    static const char src[] =
        "#include \"atk.h\"\n#include \"tuned_table.h\"\n#include <stdio.h>\n#include <string.h>\n"
        "int main(void)\n{\n"
        "    atk_gpu_id gpu = {\"NVIDIA H200\", 90, 132, 13000};\n"
        "    atk_ctx *ctx = NULL;\n    atk_info in;\n    atk_choice ch;\n"
        "    const atk_table *t = atk_exported_table();\n"
        "    if (atk_open_dry(NULL, t, &gpu, 0, &ctx) != ATK_OK || atk_get_info(ctx, &in) != ATK_OK)\n"
        "        return 1;\n"
        "    atk_explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 7000, &ch);\n"
        "    int src = t->entries[0].source;\n"
        "    printf(\"loaded %zu of %zu path %d %s grid %u src %s %zu\\n\", in.loaded, in.rows, ch.path,\n"
        "           ch.kernel, ch.grid[0], src >= 0 ? t->sources[src].name : \"-\", t->nsources);\n"
        "    atk_close(ctx);\n    return 0;\n}\n";
    tt_spit(tpath(prog, sizeof prog, "engine.c"), src, sizeof src - 1);
    snprintf(cmd, sizeof cmd,
             "%s %s -std=c11 -Wall -Wextra -Wpedantic -Werror -I%s -I%s %s -o %s -L%s -latk -Wl,-rpath,%s "
             "-Wl,-rpath,%s && %s > %s",
             ATK_CC, ATK_CFLAGS, "kernels", tmpdir, prog, tpath(exe, sizeof exe, "engine"), lib, lib,
             ATK_CUDA_LIBDIR, exe, tpath(out, sizeof out, "engine.out"));
    CHECK_EQ_INT(run_cmd(cmd), 0);
    const char *text = slurp(out);
    CHECK_STR_HAS(text, "loaded 7 of 8 path 2 gemv_splitk grid 219 src gemv/gemv_splitk.cu");
}

/* ------------------------------------------------------------- buckets */

#define MT2_2048 "TP_WARPS=8 TP_WPR=8 TP_ROWS=1 TP_TOKENS=2 TP_VEC=8 TP_UNROLL=1 TP_CACHE=1 TP_PDL=1"
#define MMA_NT1 "TP_WARPS=4 TP_WPR=4 TP_KSPLIT=1 TP_MT=1 TP_NT=1 TP_VEC=8 TP_UNROLL=4 TP_STAGES=2 TP_CACHE=1 TP_PDL=1"
#define MMA_NT2 "TP_WARPS=4 TP_WPR=4 TP_KSPLIT=1 TP_MT=1 TP_NT=2 TP_VEC=8 TP_UNROLL=2 TP_STAGES=2 TP_CACHE=1 TP_PDL=1"

/* 2048x8192 tuned at M = 1 (splitk), 2 (multi_token), 4, 8 (mma), 16 (mma,
** two token tiles); 6144x2048 at M = 1 and 8 only, its M=8 won by cuBLAS;
** 2048x2048 at M = 4 (multi_token, 4 tokens: valid across K and N);
** 2048x5120 at M = 2 (splitk: an M=1 strategy tuned at M=2). */
static void build_bucket_cache(const char *path)
{
    at_cache *c = new_h200_cache(path);
    if (!c)
        return;
    at_key k = key_for(&H200_INFO, "gemv", "1x2048x8192", AT_BF16);
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 256, 1, 512, 7.9);
    k = key_for(&H200_INFO, "gemv", "2x2048x8192", AT_BF16);
    put_kernel(c, &k, "multi_token", "gemv_multi_token", "gemv/gemv_multi_token.cu", MT2_2048, 8192, 1, 256, 8.2);
    const char *mma_m[] = {"4x2048x8192", "8x2048x8192"};
    for (int i = 0; i < 2; i++) {
        k = key_for(&H200_INFO, "gemv", mma_m[i], AT_BF16);
        put_kernel(c, &k, "mma", "gemv_mma", "gemv/gemv_mma.cu", MMA_NT1, 512, 1, 128, 8.3 + i);
    }
    k = key_for(&H200_INFO, "gemv", "16x2048x8192", AT_BF16);
    put_kernel(c, &k, "mma", "gemv_mma", "gemv/gemv_mma.cu", MMA_NT2, 512, 1, 128, 9.3);
    k = key_for(&H200_INFO, "gemv", "1x6144x2048", AT_BF16);
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 64, 1, 512, 6.3);
    k = key_for(&H200_INFO, "gemv", "8x6144x2048", AT_BF16);
    put_baseline(c, &k);
    k = key_for(&H200_INFO, "gemv", "4x2048x2048", AT_BF16);
    put_kernel(c, &k, "multi_token", "gemv_multi_token", "gemv/gemv_multi_token.cu",
               "TP_WARPS=4 TP_WPR=1 TP_ROWS=2 TP_TOKENS=4 TP_VEC=8 TP_UNROLL=1 TP_CACHE=1 TP_PDL=1", 256, 1, 128,
               3.0);
    k = key_for(&H200_INFO, "gemv", "2x2048x5120", AT_BF16);
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 160, 2, 512, 6.1);
    at_cache_close(c);
}

static void test_buckets(void)
{
    char db[128];
    build_bucket_cache(tpath(db, sizeof db, "buckets.db"));
    atk_ctx *ctx = open_dry(db, 0);
    if (!ctx)
        return;
    CHECK_STR_HAS(atk_report(ctx), "buckets gemv bf16 2048x8192: M=1 splitk, M=2 multi_token (serves smaller), "
                                   "M=4 mma (serves smaller), M=8 mma (serves smaller), M=16 mma (serves smaller); "
                                   "above 16: fallback");
    CHECK_STR_HAS(atk_report(ctx), "buckets gemv bf16 6144x2048: M=1 splitk, M=8 cublas; above 8: fallback");
    /* M=3 gets the M=4 kernel, its grid recomputed (one token tile) */
    atk_choice ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 3, 2048, 8192);
    CHECK(ch.path == ATK_PATH_BUCKET && ch.bucket == 4 && !strcmp(ch.from, "4x2048x8192") &&
          !strcmp(ch.kernel, "gemv_mma") && ch.grid[0] == 512 && ch.grid[1] == 1 && ch.block[0] == 128);
    CHECK_STR_HAS(ch.reason, "bucket M=4 (mma, 1 token masked)");
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 5, 2048, 8192);
    CHECK(ch.path == ATK_PATH_BUCKET && ch.bucket == 8);
    CHECK_STR_HAS(ch.reason, "bucket M=8 (mma, 3 tokens masked)");
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 12, 2048, 8192);
    CHECK(ch.path == ATK_PATH_BUCKET && ch.bucket == 16 && ch.grid[1] == 1);
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 16, 2048, 8192);
    CHECK(ch.path == ATK_PATH_TUNED && !strcmp(ch.reason, "tuned"));
    /* above the largest bucket (prefill): cuBLAS */
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 40, 2048, 8192);
    CHECK(ch.path == ATK_PATH_FALLBACK && !strcmp(ch.strategy, "cublas"));
    CHECK_STR_HAS(ch.reason, "no kernel reads the weights once at M=40 (largest tuned M here: 16)");
    /* 6144x2048: between M=1 (splitk) and M=8 (cuBLAS won) nothing reads once */
    for (int m = 2; m <= 9; m++) {
        ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, m, 6144, 2048);
        CHECK_EQ_INT(ch.path, m == 8 ? ATK_PATH_TUNED : ATK_PATH_FALLBACK);
        CHECK(!strcmp(ch.strategy, "cublas"));
    }
    /* an M=1 strategy tuned at M=2 serves M=2 only */
    CHECK_EQ_INT(explain(ctx, ATK_OP_GEMV, ATK_BF16, 2, 2048, 5120).path, ATK_PATH_TUNED);
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 5120); /* M=1: the M=1 bucket, from 8192 */
    CHECK(ch.path == ATK_PATH_INFERRED && !strcmp(ch.from, "1x2048x8192") && ch.bucket == 1);
    /* within one bucket across K, N: M=3 of 2048x3000 is in bucket M=4, where
    ** only the multi_token kernel of 2048x2048 is valid across shapes (mma's
    ** is sized for its own K) */
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 3, 2048, 3000);
    CHECK(ch.path == ATK_PATH_INFERRED && !strcmp(ch.from, "4x2048x2048") && ch.bucket == 4 && ch.grid[0] == 375);
    /* no M > 1 call is ever served by an M=1 strategy it was not tuned at */
    const int kn[][2] = {{2048, 8192}, {6144, 2048}, {2048, 2048}, {2048, 5120}, {2048, 3000}, {4096, 1000}};
    int wrong = 0;
    for (size_t i = 0; i < sizeof kn / sizeof kn[0]; i++)
        for (int m = 2; m <= 64; m++) {
            ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, m, kn[i][0], kn[i][1]);
            if ((!strcmp(ch.strategy, "splitk") || !strcmp(ch.strategy, "warp_row")) &&
                !(ch.path == ATK_PATH_TUNED && m == 2 && kn[i][1] == 5120))
                wrong++, printf("  M=%d %dx%d: %s\n", m, kn[i][0], kn[i][1], ch.reason);
            if (m > 16 && ch.path != ATK_PATH_FALLBACK)
                wrong++, printf("  M=%d %dx%d: %s\n", m, kn[i][0], kn[i][1], ch.reason);
        }
    CHECK_EQ_INT(wrong, 0);
    atk_close(ctx);

    /* the same decisions with the kernels of a JSON export and a compiled C table */
    char js[128];
    CHECK_EQ_INT(at_table_export_file(db, NULL, 1, AT_TABLE_JSON, tpath(js, sizeof js, "buckets.json")), AT_OK);
    ctx = open_dry(js, 0);
    if (ctx) {
        ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 3, 2048, 8192);
        CHECK(ch.path == ATK_PATH_BUCKET && ch.bucket == 4);
    }
    atk_close(ctx);
    /* ATK_NO_INFER forbids other K, N; the buckets of the same K, N serve */
    ctx = open_dry(db, ATK_NO_INFER);
    if (ctx) {
        ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 3, 2048, 8192);
        CHECK(ch.path == ATK_PATH_BUCKET && ch.bucket == 4);
        ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 3, 2048, 3000);
        CHECK(ch.path == ATK_PATH_FALLBACK);
        CHECK_STR_HAS(ch.reason, "ATK_NO_INFER");
    }
    atk_close(ctx);
}

/* A kernel borrowed across K, N at M > 1 takes all M tokens in one token
** group: each group reads the whole weight. The 2048x32 kernel below (two
** tokens a group) was tuned at M = 16 on a weight that stays in L2; at
** 2048x8224 its eight groups would read 33 MB from HBM eight times. Its
** own K, N (measured at that M) still takes it as a bucket. */
static void test_inferred_reads_weights_once(void)
{
    char db[128];
    at_cache *c = new_h200_cache(tpath(db, sizeof db, "once.db"));
    if (!c)
        return;
    at_key k = key_for(&H200_INFO, "gemv", "16x2048x32", AT_BF16);
    put_kernel(c, &k, "multi_token", "gemv_multi_token", "gemv/gemv_multi_token.cu", MT2_2048, 32, 8, 256, 1.5);
    k = key_for(&H200_INFO, "gemv", "2x2048x32", AT_BF16);
    put_kernel(c, &k, "multi_token", "gemv_multi_token", "gemv/gemv_multi_token.cu", MT2_2048, 32, 1, 256, 1.0);
    k = key_for(&H200_INFO, "gemv", "16x2048x8192", AT_BF16);
    put_kernel(c, &k, "mma", "gemv_mma", "gemv/gemv_mma.cu", MMA_NT2, 512, 1, 128, 9.3);
    k = key_for(&H200_INFO, "rmsnorm_gemv", "16x2048x32", AT_BF16);
    put_kernel(c, &k, "multi_token", "gemv_multi_token", "gemv/gemv_multi_token.cu", MT2_2048 " TP_NORM=1", 32, 8,
               256, 1.7);
    at_cache_close(c);
    atk_ctx *ctx = open_dry(db, 0);
    if (!ctx)
        return;
    atk_choice ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 16, 2048, 8224);
    CHECK(ch.path == ATK_PATH_FALLBACK && !strcmp(ch.strategy, "cublas"));
    CHECK_STR_HAS(ch.reason, "this K, N is not tuned, and no kernel of another takes M=16 in one token group");
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 3, 2048, 8224); /* bucket M=16: 2 groups */
    CHECK(ch.path == ATK_PATH_FALLBACK && !strcmp(ch.strategy, "cublas"));
    ch = explain(ctx, ATK_OP_RMSNORM_GEMV, ATK_BF16, 16, 2048, 8224);
    CHECK(ch.path == ATK_PATH_FALLBACK && !strcmp(ch.strategy, "unfused"));
    /* one group: M = 2 in the M=2 bucket */
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 2, 2048, 8224);
    CHECK(ch.path == ATK_PATH_INFERRED && !strcmp(ch.from, "2x2048x32") && ch.grid[0] == 8224 && ch.grid[1] == 1);
    /* its own K, N: the M=16 kernel serves M = 9 as a bucket, 5 groups */
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 9, 2048, 32);
    CHECK(ch.path == ATK_PATH_BUCKET && ch.bucket == 16 && ch.grid[1] == 5);
    atk_close(ctx);
}

/* ----------------------------------------------------------- overrides */

/* A validation row of the H200 for call shape `shape`, naming the entry
** tuned at `chosen_shape` (its key digest) as the one measured. */
static void put_validation(at_cache *c, const char *shape, const char *chosen_shape, const char *verdict,
                           double us, double base_us)
{
    at_validation v;
    memset(&v, 0, sizeof v);
    snprintf(v.device, sizeof v.device, "%s", H200_INFO.name);
    v.cc = 10 * H200_INFO.cc_major + H200_INFO.cc_minor;
    v.sms = H200_INFO.sms;
    snprintf(v.op, sizeof v.op, "gemv");
    v.dtype = AT_BF16;
    snprintf(v.shape, sizeof v.shape, "%s", shape);
    snprintf(v.path, sizeof v.path, "bucket");
    if (chosen_shape) {
        at_key k = key_for(&H200_INFO, "gemv", chosen_shape, AT_BF16);
        at_key_digest(&k, v.chosen);
    } else {
        memset(v.chosen, 'f', 64); /* an entry that no longer exists */
    }
    snprintf(v.strategy, sizeof v.strategy, "mma");
    snprintf(v.verdict, sizeof v.verdict, "%s", verdict);
    v.us = us, v.base_us = base_us;
    CHECK_EQ_INT(at_cache_put_validation(c, &v), AT_OK);
}

/* What `autotune validate` stores changes the runtime's choice at exactly
** the call shapes it names, while the entry it measured still serves them;
** a stale row is ignored; ATK_NO_OVERRIDES sees the table as tuned; a JSON
** export carries the rows. */
static void test_overrides(void)
{
    char db[128], js[128];
    at_cache *c = NULL;
    build_bucket_cache(tpath(db, sizeof db, "overrides.db"));
    CHECK_EQ_INT(at_cache_open(db, &c), AT_OK);
    if (!c)
        return;
    put_validation(c, "3x2048x8192", "4x2048x8192", "slower", 9.5, 8.7);  /* bucket M=4 lost at M=3 */
    put_validation(c, "16x2048x8192", "16x2048x8192", "wrong", 9.3, 9.9); /* a tuned entry, wrong */
    put_validation(c, "5x2048x8192", "8x2048x8192", "ok", 8.4, 9.0);      /* kept: no override */
    put_validation(c, "6x2048x8192", NULL, "slower", 9.9, 9.0);           /* stale: ignored */
    put_validation(c, "7x2048x8192", "4x2048x8192", "slower", 9.9, 9.0);  /* M=7 is served by M=8: stale */
    at_cache_close(c);

    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            CHECK_EQ_INT(at_table_export_file(db, NULL, 1, AT_TABLE_JSON, tpath(js, sizeof js, "overrides.json")),
                         AT_OK);
        atk_ctx *ctx = open_dry(pass ? js : db, 0);
        if (!ctx)
            return;
        atk_choice ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 3, 2048, 8192);
        CHECK(ch.path == ATK_PATH_FALLBACK && !strcmp(ch.strategy, "cublas"));
        CHECK_STR_HAS(ch.reason, "validated: cuBLAS faster at M=3 (8.70 vs 9.50 us for mma)");
        ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 16, 2048, 8192);
        CHECK(ch.path == ATK_PATH_FALLBACK && !strcmp(ch.strategy, "cublas"));
        CHECK_STR_HAS(ch.reason, "validated: mma was wrong at M=16; cuBLAS serves it");
        /* the neighbours keep their buckets: an override names one call shape */
        CHECK_EQ_INT(explain(ctx, ATK_OP_GEMV, ATK_BF16, 4, 2048, 8192).path, ATK_PATH_TUNED);
        CHECK_EQ_INT(explain(ctx, ATK_OP_GEMV, ATK_BF16, 2, 2048, 8192).path, ATK_PATH_TUNED);
        for (int m = 5; m <= 7; m++) {
            ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, m, 2048, 8192);
            CHECK(ch.path == ATK_PATH_BUCKET && ch.bucket == 8);
        }
        ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 12, 2048, 8192); /* its bucket was overridden, not it */
        CHECK(ch.path == ATK_PATH_BUCKET && ch.bucket == 16);
        CHECK_STR_HAS(atk_report(ctx), "2 validation overrides");
        CHECK_STR_HAS(atk_report(ctx), "6x2048x8192: validation override is stale");
        CHECK_STR_HAS(atk_report(ctx), "7x2048x8192: validation override is stale");
        /* a call counts as the fallback it is */
        atk_stats_reset(ctx);
        CHECK_EQ_INT(atk_gemv(ctx, NULL, ATK_BF16, 3, 2048, 8192, (void *)0x1000, (void *)0x1000, (void *)0x1000),
                     ATK_OK);
        atk_op_stats st;
        atk_stats(ctx, ATK_OP_GEMV, &st);
        CHECK(st.fallback == 1 && st.bucket == 0);
        atk_close(ctx);

        ctx = open_dry(pass ? js : db, ATK_NO_OVERRIDES);
        if (ctx) {
            ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 3, 2048, 8192);
            CHECK(ch.path == ATK_PATH_BUCKET && ch.bucket == 4 && strlen(ch.key) == 64);
            at_key k = key_for(&H200_INFO, "gemv", "4x2048x8192", AT_BF16);
            char hex[65];
            at_key_digest(&k, hex);
            CHECK(!strcmp(ch.key, hex)); /* what validate stores as `chosen` */
            CHECK(strstr(atk_report(ctx), "validation override") == NULL);
        }
        atk_close(ctx);
    }
}

/* --------------------------------------------------------------- threads */

typedef struct worker {
    atk_ctx *ctx;
    int id, errors;
    long calls;
} worker;

#define THREADS 8
#define ROUNDS 2000

static void *work(void *arg)
{
    worker *w = arg;
    int dummy;
    void *p = &dummy;
    for (int r = 0; r < ROUNDS; r++) {
        /* tuned, inferred (new shapes: memo inserts race), fallback, norms */
        int n = 1000 + (r * 7 + w->id * 13) % 600;
        if (atk_gemv(w->ctx, NULL, ATK_BF16, 1, 2048, 8192, p, p, p) != ATK_OK ||
            atk_gemv(w->ctx, NULL, ATK_BF16, 1, 2048, n, p, p, p) != ATK_OK ||
            atk_gemv(w->ctx, NULL, ATK_BF16, 1, 2050, n, p, p, p) != ATK_OK ||
            atk_add_rmsnorm(w->ctx, NULL, ATK_BF16, 1 + r % 64, 2048, p, p, p, p, 1e-6f) != ATK_OK)
            w->errors++;
        atk_choice ch;
        if (atk_explain(w->ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, n, &ch) != ATK_OK || ch.path != ATK_PATH_INFERRED ||
            strcmp(ch.from, "1x2048x2048") || ch.grid[0] != (unsigned)((n + 15) / 16))
            w->errors++;
        w->calls += 4;
    }
    return NULL;
}

static void test_threads(void)
{
    char db[128];
    pthread_t t[THREADS];
    worker w[THREADS];
    build_cache(tpath(db, sizeof db, "threads.db"));
    atk_ctx *ctx = open_dry(db, 0);
    if (!ctx)
        return;
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.ctx = ctx, .id = i};
        CHECK_EQ_INT(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    long total = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ_INT(w[i].errors, 0);
        total += w[i].calls;
    }
    atk_op_stats g, n;
    atk_stats(ctx, ATK_OP_GEMV, &g);
    atk_stats(ctx, ATK_OP_ADD_RMSNORM, &n);
    CHECK_EQ_INT((long)(g.calls + n.calls), total);
    CHECK_EQ_INT((long)g.tuned, THREADS * ROUNDS);
    CHECK_EQ_INT((long)g.inferred, THREADS * ROUNDS);
    CHECK_EQ_INT((long)g.fallback, THREADS * ROUNDS);
    /* T = 1 + r % 64 of H=2048, where T=4 is tuned: T 1..3 from its bucket */
    long want_bucket = 0, want_tuned = 0;
    for (int r = 0; r < ROUNDS; r++) {
        want_bucket += 1 + r % 64 < 4;
        want_tuned += 1 + r % 64 == 4;
    }
    CHECK_EQ_INT((long)n.bucket, THREADS * want_bucket);
    CHECK_EQ_INT((long)n.tuned, THREADS * want_tuned);
    CHECK_EQ_INT((long)(n.tuned + n.bucket + n.fallback), THREADS * ROUNDS);
    atk_close(ctx);
}

/* ------------------------------------------------------- lookup cost */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

/* Prints the CPU cost of a dry call (validation, lookup, counting): what
** a launch adds before the driver call. Reported, never asserted. */
static void test_lookup_cost(void)
{
    char db[128];
    int dummy;
    void *p = &dummy;
    build_cache(tpath(db, sizeof db, "cost.db"));
    atk_ctx *ctx = open_dry(db, 0);
    if (!ctx)
        return;
    const int n = 200000;
    const int64_t N[3] = {8192, 7000, 8191};
    const char *what[3] = {"tuned hit", "inferred (memo)", "fallback (memo)"};
    for (int k = 0; k < 3; k++) {
        int rc = ATK_OK;
        int64_t K = k == 2 ? 2050 : 2048;
        double t0 = now_ns();
        for (int i = 0; i < n; i++)
            rc |= atk_gemv(ctx, NULL, ATK_BF16, 1, K, N[k], p, p, p);
        double ns = (now_ns() - t0) / n;
        CHECK_EQ_INT(rc, ATK_OK);
        printf("  lookup: %-16s %6.1f ns per atk_gemv call (dry: no launch)\n", what[k], ns);
    }
    atk_close(ctx);
}

/* The norm tuner stores "the naive kernel won" as strategy naive with the
** norm_naive cubin [NAIVE_WINNER]: atk serves it with its built-in copy (a
** baseline entry, path tuned, no module of its own); an fp32-weight naive
** row is refused like any fp32-weight norm row. */
static void test_naive_winner_is_the_builtin(void)
{
    char db[128];
    at_cache *c = new_h200_cache(tpath(db, sizeof db, "naive.db"));
    if (!c)
        return;
    at_key k = key_for(&H200_INFO, "gemma_rmsnorm", "1x2048", AT_BF16);
    put_kernel(c, &k, "naive", "norm_naive", "baseline/norm_naive.cu", "TP_OP=2 TP_WFP32=0", 1, 1, 256, 1.8);
    k = key_for(&H200_INFO, "rmsnorm", "1x4096", AT_BF16);
    put_kernel(c, &k, "naive", "norm_naive", "baseline/norm_naive.cu", "TP_OP=0 TP_WFP32=1", 1, 1, 256, 1.9);
    at_cache_close(c);
    atk_ctx *ctx = open_dry(db, 0);
    if (!ctx)
        return;
    atk_info in;
    CHECK_EQ_INT(atk_get_info(ctx, &in), ATK_OK);
    CHECK_EQ_INT(in.loaded, 1);
    CHECK_EQ_INT(in.failed, 1);
    atk_choice ch = explain(ctx, ATK_OP_GEMMA_RMSNORM, ATK_BF16, 1, 2048, 0);
    CHECK_EQ_INT(ch.path, ATK_PATH_TUNED);
    CHECK(!strcmp(ch.strategy, "norm_naive") && !strcmp(ch.kernel, "norm_naive") && !strcmp(ch.params, ""));
    CHECK_EQ_INT(explain(ctx, ATK_OP_RMSNORM, ATK_BF16, 1, 4096, 0).path, ATK_PATH_FALLBACK);
    atk_close(ctx);
}

/* gemv_add: its own entries (TP_ADD=1) serve it, exact, as buckets and
** inferred; a row whose TP_ADD does not match its op is refused with the
** reason (a gemv kernel would overwrite the residual); gemv's entries
** never serve gemv_add (fallback: cuBLAS with beta = 1); counters and
** strict mode per op. */
static void test_gemv_add(void)
{
    char db[128];
    int dummy;
    void *p = &dummy;
    at_cache *c = new_h200_cache(tpath(db, sizeof db, "gemv_add.db"));
    if (!c)
        return;
    at_key k = key_for(&H200_INFO, "gemv_add", "1x2048x2048", AT_BF16);
    put_kernel(c, &k, "warp_row", "gemv_warp_row", "gemv/gemv_warp_row.cu", WARPROW_2048 " TP_ADD=1", 128, 1, 512,
               2.9);
    k = key_for(&H200_INFO, "gemv_add", "4x2048x2048", AT_BF16);
    put_kernel(c, &k, "multi_token", "gemv_multi_token", "gemv/gemv_multi_token.cu",
               "TP_WARPS=4 TP_WPR=1 TP_ROWS=2 TP_TOKENS=4 TP_VEC=8 TP_UNROLL=1 TP_CACHE=1 TP_PDL=1 TP_ADD=1", 256, 1,
               128, 3.1);
    k = key_for(&H200_INFO, "gemv_add", "1x2048x8192", AT_BF16); /* a gemv kernel under gemv_add */
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 256, 1, 512, 7.9);
    k = key_for(&H200_INFO, "gemv", "1x6144x2048", AT_BF16);
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 64, 1, 512, 6.3);
    k = key_for(&H200_INFO, "gemv", "1x2048x5120", AT_BF16); /* an add kernel under gemv */
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192 " TP_ADD=1", 160, 1, 512, 6.1);
    k = key_for(&H200_INFO, "gemv_add", "1x2048x32", AT_BF16);
    put_baseline(c, &k);
    at_cache_close(c);

    atk_ctx *ctx = open_dry(db, 0);
    if (!ctx)
        return;
    CHECK(!strcmp(atk_op_name(ATK_OP_GEMV_ADD), "gemv_add"));
    CHECK_STR_HAS(atk_report(ctx), "TP_ADD=0 is not gemv_add's (TP_ADD=1)");
    CHECK_STR_HAS(atk_report(ctx), "TP_ADD=1 is not gemv's (TP_ADD=0)");
    atk_choice ch = explain(ctx, ATK_OP_GEMV_ADD, ATK_BF16, 1, 2048, 2048);
    CHECK_EQ_INT(ch.path, ATK_PATH_TUNED);
    CHECK(!strcmp(ch.strategy, "warp_row"));
    CHECK_STR_HAS(ch.params, "TP_ADD=1");
    CHECK_EQ_INT((int)ch.grid[0], 128);
    ch = explain(ctx, ATK_OP_GEMV_ADD, ATK_BF16, 3, 2048, 2048); /* the M=4 multi_token serves M=3 */
    CHECK_EQ_INT(ch.path, ATK_PATH_BUCKET);
    CHECK(!strcmp(ch.strategy, "multi_token"));
    CHECK_EQ_INT(ch.bucket, 4);
    /* its own row was refused, and at 1x6144x2048 only gemv is tuned: the
    ** nearest gemv_add kernel serves both, never a gemv one */
    ch = explain(ctx, ATK_OP_GEMV_ADD, ATK_BF16, 1, 2048, 8192);
    CHECK_EQ_INT(ch.path, ATK_PATH_INFERRED);
    CHECK(!strcmp(ch.from, "1x2048x2048"));
    ch = explain(ctx, ATK_OP_GEMV_ADD, ATK_BF16, 1, 6144, 2048);
    CHECK_EQ_INT(ch.path, ATK_PATH_INFERRED);
    CHECK(!strcmp(ch.from, "1x2048x2048") && !strcmp(ch.strategy, "warp_row"));
    CHECK_STR_HAS(ch.params, "TP_ADD=1");
    ch = explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 6144, 2048);
    CHECK_EQ_INT(ch.path, ATK_PATH_TUNED);
    ch = explain(ctx, ATK_OP_GEMV_ADD, ATK_BF16, 8, 2048, 2048); /* above every bucket */
    CHECK_EQ_INT(ch.path, ATK_PATH_FALLBACK);
    CHECK(!strcmp(ch.strategy, "cublas") && !ch.kernel[0]);
    ch = explain(ctx, ATK_OP_GEMV_ADD, ATK_BF16, 1, 2048, 32); /* tuned: cuBLAS won */
    CHECK_EQ_INT(ch.path, ATK_PATH_TUNED);
    CHECK(!strcmp(ch.strategy, "cublas"));
    CHECK_STR_HAS(ch.reason, "cuBLAS won");

    atk_op_stats s;
    CHECK_EQ_INT(atk_gemv_add(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, p, p), ATK_OK);
    CHECK_EQ_INT(atk_gemv_add(ctx, NULL, ATK_BF16, 2, 2048, 2048, p, p, p), ATK_OK);
    CHECK_EQ_INT(atk_gemv_add(ctx, NULL, ATK_BF16, 1, 6144, 2048, p, p, p), ATK_OK);
    CHECK_EQ_INT(atk_gemv_add(ctx, NULL, ATK_BF16, 8, 2048, 2048, p, p, p), ATK_OK);
    CHECK_EQ_INT(atk_gemv_add(ctx, NULL, ATK_BF16, 1, 0, 2048, p, p, p), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "atk_gemv_add: M, K and N");
    CHECK_EQ_INT(atk_gemv_add(ctx, NULL, 3, 1, 2048, 2048, p, p, p), ATK_ERR_USAGE);
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_GEMV_ADD, &s), ATK_OK);
    CHECK(s.calls == 6 && s.tuned == 1 && s.bucket == 1 && s.inferred == 1 && s.fallback == 1 && s.rejected == 2);
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_GEMV, &s), ATK_OK);
    CHECK(s.calls == 0); /* gemv_add counts apart */
    atk_close(ctx);

    ctx = open_dry(db, ATK_STRICT);
    if (!ctx)
        return;
    CHECK_EQ_INT(atk_gemv_add(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, p, p), ATK_OK);
    CHECK_EQ_INT(atk_gemv_add(ctx, NULL, ATK_BF16, 1, 6144, 2048, p, p, p), ATK_ERR_MISS);
    CHECK_STR_HAS(atk_errmsg(ctx), "gemv_add bf16 1x6144x2048: no tuned entry (strict mode)");
    atk_close(ctx);
    CHECK_EQ_INT(atk_gemv_add(NULL, NULL, ATK_BF16, 1, 1, 1, NULL, NULL, NULL), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(NULL), "atk_gemv_add: NULL context");
}

#define MT4_2048 "TP_WARPS=4 TP_WPR=1 TP_ROWS=2 TP_TOKENS=4 TP_VEC=8 TP_UNROLL=1 TP_CACHE=1 TP_PDL=1"

/* The five fused ops: their own entries (TP_NORM, TP_SWIGLU as the op's)
** serve them exact, as buckets and inferred; a row whose TP_NORM /
** TP_SWIGLU / TP_ADD does not match its op is refused with the reason; a
** gemv entry never serves a fused op; the stored "unfused" answer and the
** fallback are strategy "unfused"; counters per op (the unfused
** sequence's components count nowhere); strict mode; argument errors name
** the argument; the scratch size; the JSON and CSV exports carry the rows. */
static void build_fused_cache(const char *path)
{
    at_cache *c = new_h200_cache(path);
    if (!c)
        return;
    at_key k = key_for(&H200_INFO, "rmsnorm_gemv", "1x2048x2048", AT_BF16);
    put_kernel(c, &k, "warp_row", "gemv_warp_row", "gemv/gemv_warp_row.cu", WARPROW_2048 " TP_NORM=1 TP_SWIGLU=0",
               128, 1, 512, 3.1);
    k = key_for(&H200_INFO, "rmsnorm_gemv", "4x2048x2048", AT_BF16);
    put_kernel(c, &k, "multi_token", "gemv_multi_token", "gemv/gemv_multi_token.cu", MT4_2048 " TP_NORM=1", 256, 1,
               128, 3.4);
    k = key_for(&H200_INFO, "rmsnorm_gemv", "1x2048x8192", AT_BF16); /* a plain GEMV kernel */
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 256, 1, 512, 7.9);
    k = key_for(&H200_INFO, "rmsnorm_gemv", "1x2048x5120", AT_BF16); /* the Gemma norm under rmsnorm_gemv */
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192 " TP_NORM=2", 160, 1, 512, 6.1);
    k = key_for(&H200_INFO, "gemma_rmsnorm_gemv", "1x2048x2048", AT_BF16); /* TP_NORM=1 under Gemma */
    put_kernel(c, &k, "warp_row", "gemv_warp_row", "gemv/gemv_warp_row.cu", WARPROW_2048 " TP_NORM=1", 128, 1, 512,
               3.1);
    k = key_for(&H200_INFO, "gemma_rmsnorm_gemv", "1x2048x4096", AT_BF16); /* an add epilogue */
    put_kernel(c, &k, "warp_row", "gemv_warp_row", "gemv/gemv_warp_row.cu", WARPROW_2048 " TP_NORM=2 TP_ADD=1", 256,
               1, 512, 4.1);
    k = key_for(&H200_INFO, "gemv_swiglu", "1x2048x6144", AT_BF16);
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192 " TP_SWIGLU=1", 192, 1, 512, 9.0);
    k = key_for(&H200_INFO, "gemv_swiglu", "1x2048x4096", AT_BF16); /* no SwiGLU epilogue */
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192, 128, 1, 512, 6.0);
    k = key_for(&H200_INFO, "rmsnorm_gemv_swiglu", "1x2048x6144", AT_BF16);
    put_unfused(c, &k);
    k = key_for(&H200_INFO, "gemma_rmsnorm_gemv_swiglu", "1x2048x6144", AT_BF16);
    put_kernel(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192 " TP_NORM=2 TP_SWIGLU=1", 192, 1,
               512, 9.5);
    k = key_for(&H200_INFO, "add_rmsnorm_gemv", "1x2048x2048", AT_BF16);
    put_kernel(c, &k, "warp_row", "gemv_warp_row", "gemv/gemv_warp_row.cu", WARPROW_2048 " TP_NORM=1 TP_RES=1", 128,
               1, 512, 3.2);
    k = key_for(&H200_INFO, "add_rmsnorm_gemv", "1x2048x4096", AT_BF16); /* writes no residual */
    put_kernel(c, &k, "warp_row", "gemv_warp_row", "gemv/gemv_warp_row.cu", WARPROW_2048 " TP_NORM=1", 256, 1, 512,
               4.2);
    k = key_for(&H200_INFO, "rmsnorm_gemv", "1x2048x1024", AT_BF16); /* takes two arguments more */
    put_kernel(c, &k, "warp_row", "gemv_warp_row", "gemv/gemv_warp_row.cu", WARPROW_2048 " TP_NORM=1 TP_RES=1", 64, 1,
               512, 2.2);
    k = key_for(&H200_INFO, "add_gemma_rmsnorm_gemv", "128x2048x2048", AT_BF16); /* more token groups than counters */
    put_kernel(c, &k, "multi_token", "gemv_multi_token", "gemv/gemv_multi_token.cu",
               MT4_2048 " TP_NORM=2 TP_RES=1", 256, 32, 128, 30.0);
    /* z staged (TP_RES=2): K * tokens elements of shared memory, stored with the row */
    k = key_for(&H200_INFO, "add_gemma_rmsnorm_gemv", "1x2048x8192", AT_BF16);
    put_kernel_smem(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192 " TP_NORM=2 TP_RES=2", 256, 1,
                    512, 8.5, 4096);
    k = key_for(&H200_INFO, "add_gemma_rmsnorm_gemv", "4x2048x2048", AT_BF16);
    put_kernel_smem(c, &k, "multi_token", "gemv_multi_token", "gemv/gemv_multi_token.cu",
                    MT4_2048 " TP_NORM=2 TP_RES=2", 256, 1, 128, 9.0, 16384);
    k = key_for(&H200_INFO, "add_gemma_rmsnorm_gemv", "1x2048x1024", AT_BF16); /* smem short of its z */
    put_kernel_smem(c, &k, "splitk", "gemv_splitk", "gemv/gemv_splitk.cu", SPLITK_8192 " TP_NORM=2 TP_RES=2", 32, 1,
                    512, 2.5, 2048);
    k = key_for(&H200_INFO, "gemv", "1x2048x2048", AT_BF16); /* gemv's own: never a fused op's */
    put_kernel(c, &k, "warp_row", "gemv_warp_row", "gemv/gemv_warp_row.cu", WARPROW_2048, 128, 1, 512, 2.8);
    at_cache_close(c);
}

static void test_fused(void)
{
    char db[128], js[128], csv[128];
    int dummy[8];
    void *p = dummy, *sc = dummy, *bad_sc = (char *)dummy + 1;
    build_fused_cache(tpath(db, sizeof db, "fused.db"));
    atk_ctx *ctx = open_dry(db, 0);
    if (!ctx)
        return;
    static const char *const names[] = {"rmsnorm_gemv",        "gemma_rmsnorm_gemv",        "gemv_swiglu",
                                        "rmsnorm_gemv_swiglu", "gemma_rmsnorm_gemv_swiglu", "add_rmsnorm_gemv",
                                        "add_gemma_rmsnorm_gemv"};
    for (int i = 0; i < 7; i++)
        CHECK(!strcmp(atk_op_name(ATK_OP_RMSNORM_GEMV + i), names[i]));
    CHECK(!strcmp(atk_op_name(ATK_NOPS), "?"));
    const char *rep = atk_report(ctx);
    CHECK_STR_HAS(rep, "TP_NORM=0 is not rmsnorm_gemv's (TP_NORM=1)");
    CHECK_STR_HAS(rep, "TP_NORM=2 is not rmsnorm_gemv's (TP_NORM=1)");
    CHECK_STR_HAS(rep, "TP_NORM=1 is not gemma_rmsnorm_gemv's (TP_NORM=2)");
    CHECK_STR_HAS(rep, "TP_ADD=1 is not gemma_rmsnorm_gemv's (TP_ADD=0)");
    CHECK_STR_HAS(rep, "TP_SWIGLU=0 is not gemv_swiglu's (TP_SWIGLU=1)");
    CHECK_STR_HAS(rep, "TP_RES=0 is not add_rmsnorm_gemv's (TP_RES=1 or 2)");
    CHECK_STR_HAS(rep, "TP_RES=1 is not rmsnorm_gemv's (TP_RES=0)");
    CHECK_STR_HAS(rep, "a residual-add kernel at M=128: they serve M <= 64");
    CHECK_STR_HAS(rep, "TP_RES=2 stages 4096 B of z at K=2048, but the row's smem is 2048");
    atk_info in;
    atk_get_info(ctx, &in);
    CHECK_EQ_INT((int)in.loaded, 9);
    CHECK_EQ_INT((int)in.failed, 9);

    atk_choice ch = explain(ctx, ATK_OP_RMSNORM_GEMV, ATK_BF16, 1, 2048, 2048);
    CHECK_EQ_INT(ch.path, ATK_PATH_TUNED);
    CHECK(!strcmp(ch.strategy, "warp_row") && !strcmp(ch.kernel, "gemv_warp_row"));
    CHECK_STR_HAS(ch.params, "TP_NORM=1");
    CHECK_EQ_INT((int)ch.grid[0], 128);
    ch = explain(ctx, ATK_OP_RMSNORM_GEMV, ATK_BF16, 3, 2048, 2048); /* multi_token serves smaller M */
    CHECK_EQ_INT(ch.path, ATK_PATH_BUCKET);
    CHECK(!strcmp(ch.strategy, "multi_token"));
    CHECK_EQ_INT(ch.bucket, 4);
    ch = explain(ctx, ATK_OP_RMSNORM_GEMV, ATK_BF16, 1, 2048, 8192); /* its row refused: the nearest fused kernel */
    CHECK_EQ_INT(ch.path, ATK_PATH_INFERRED);
    CHECK(!strcmp(ch.from, "1x2048x2048"));
    CHECK_STR_HAS(ch.params, "TP_NORM=1");
    ch = explain(ctx, ATK_OP_RMSNORM_GEMV, ATK_BF16, 8, 2048, 2048); /* above every bucket */
    CHECK_EQ_INT(ch.path, ATK_PATH_FALLBACK);
    CHECK(!strcmp(ch.strategy, "unfused") && !ch.kernel[0] && !ch.params[0]);
    /* Gemma: both its rows refused, and gemv's 1x2048x2048 never serves it */
    ch = explain(ctx, ATK_OP_GEMMA_RMSNORM_GEMV, ATK_BF16, 1, 2048, 2048);
    CHECK_EQ_INT(ch.path, ATK_PATH_FALLBACK);
    CHECK(!strcmp(ch.strategy, "unfused"));
    ch = explain(ctx, ATK_OP_GEMV_SWIGLU, ATK_BF16, 1, 2048, 6144);
    CHECK_EQ_INT(ch.path, ATK_PATH_TUNED);
    CHECK_STR_HAS(ch.params, "TP_SWIGLU=1");
    CHECK_EQ_INT((int)ch.grid[0], 192);
    ch = explain(ctx, ATK_OP_GEMV_SWIGLU, ATK_BF16, 2, 2048, 6144); /* splitk: M=1 only */
    CHECK_EQ_INT(ch.path, ATK_PATH_FALLBACK);
    ch = explain(ctx, ATK_OP_RMSNORM_GEMV_SWIGLU, ATK_BF16, 1, 2048, 6144);
    CHECK_EQ_INT(ch.path, ATK_PATH_TUNED);
    CHECK(!strcmp(ch.strategy, "unfused") && !ch.kernel[0]);
    CHECK_STR_HAS(ch.reason, "the unfused sequence won");
    CHECK(strlen(ch.key) == 64);
    ch = explain(ctx, ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU, ATK_BF16, 1, 2048, 6144);
    CHECK_EQ_INT(ch.path, ATK_PATH_TUNED);
    CHECK_STR_HAS(ch.params, "TP_NORM=2 TP_SWIGLU=1");
    CHECK_EQ_INT(explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 2048).path, ATK_PATH_TUNED);

    /* calls: a planning call (every pointer NULL) and a checked one */
    atk_op_stats s;
    CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, NULL, NULL, NULL, NULL, 1e-6f, NULL), ATK_OK);
    CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 3, 2048, 2048, p, p, p, p, 1e-6f, sc), ATK_OK);
    CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 8, 2048, 2048, p, p, p, p, 1e-6f, sc), ATK_OK);
    CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 8192, p, p, p, p, 1e-6f, sc), ATK_OK);
    CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, p, p, p, 1e-6f, NULL), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "atk_rmsnorm_gemv: NULL scratch");
    CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, p, p, p, 1e-6f, bad_sc), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "scratch must be 16-byte aligned");
    CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, NULL, p, p, 1e-6f, sc), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "atk_rmsnorm_gemv: NULL w");
    CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, p, NULL, p, 1e-6f, sc), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "NULL W");
    CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, p, p, NULL, 1e-6f, sc), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "NULL y");
    CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 0, p, p, p, p, 1e-6f, sc), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "M, K and N must lie in 1..INT_MAX");
    CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, p, p, p, NAN, sc), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "eps");
    CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, 3, 1, 2048, 2048, p, p, p, p, 1e-6f, sc), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "dtype");
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_RMSNORM_GEMV, &s), ATK_OK);
    CHECK(s.calls == 12 && s.tuned == 1 && s.bucket == 1 && s.inferred == 1 && s.fallback == 1 && s.rejected == 8);

    CHECK_EQ_INT(atk_gemv_swiglu(ctx, NULL, ATK_BF16, 1, 2048, 6144, p, p, p, p, sc), ATK_OK);
    CHECK_EQ_INT(atk_gemv_swiglu(ctx, NULL, ATK_BF16, 1, 2048, 6144, p, p, NULL, p, sc), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "atk_gemv_swiglu: NULL Wu");
    CHECK_EQ_INT(atk_gemv_swiglu(ctx, NULL, ATK_BF16, 1, 2048, 6144, p, NULL, p, p, sc), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "atk_gemv_swiglu: NULL Wg");
    CHECK_EQ_INT(atk_rmsnorm_gemv_swiglu(ctx, NULL, ATK_BF16, 1, 2048, 6144, p, p, p, p, p, 1e-6f, sc), ATK_OK);
    CHECK_EQ_INT(atk_rmsnorm_gemv_swiglu(ctx, NULL, ATK_BF16, 1, 2048, 6144, NULL, p, p, p, p, 1e-6f, sc),
                 ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "atk_rmsnorm_gemv_swiglu: NULL x");
    CHECK_EQ_INT(atk_gemma_rmsnorm_gemv(ctx, NULL, ATK_FP16, 1, 2048, 2048, p, p, p, p, 1e-6f, sc), ATK_OK);
    CHECK_EQ_INT(atk_gemma_rmsnorm_gemv_swiglu(ctx, NULL, ATK_BF16, 1, 2048, 6144, p, p, p, p, p, 1e-6f, sc),
                 ATK_OK);
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_GEMV_SWIGLU, &s), ATK_OK);
    CHECK(s.calls == 3 && s.tuned == 1 && s.rejected == 2);
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_RMSNORM_GEMV_SWIGLU, &s), ATK_OK);
    CHECK(s.calls == 2 && s.tuned == 1 && s.rejected == 1);
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_GEMMA_RMSNORM_GEMV, &s), ATK_OK);
    CHECK(s.calls == 1 && s.fallback == 1);
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU, &s), ATK_OK);
    CHECK(s.calls == 1 && s.tuned == 1);
    /* the residual-add forms: the residual is checked too, and is never x */
    ch = explain(ctx, ATK_OP_ADD_RMSNORM_GEMV, ATK_BF16, 1, 2048, 2048);
    CHECK_EQ_INT(ch.path, ATK_PATH_TUNED);
    CHECK_STR_HAS(ch.params, "TP_NORM=1 TP_RES=1");
    CHECK_EQ_INT(explain(ctx, ATK_OP_ADD_RMSNORM_GEMV, ATK_BF16, 1, 2048, 4096).path, ATK_PATH_INFERRED);
    CHECK_EQ_INT(explain(ctx, ATK_OP_ADD_GEMMA_RMSNORM_GEMV, ATK_BF16, 100, 2048, 2048).path, ATK_PATH_FALLBACK);
    /* z staged: the shared memory follows K (and the block's tokens), not M */
    ch = explain(ctx, ATK_OP_ADD_GEMMA_RMSNORM_GEMV, ATK_BF16, 1, 2048, 8192);
    CHECK(ch.path == ATK_PATH_TUNED && ch.smem == 4096);
    ch = explain(ctx, ATK_OP_ADD_GEMMA_RMSNORM_GEMV, ATK_BF16, 1, 1024, 5120);
    CHECK(ch.path == ATK_PATH_INFERRED && !strcmp(ch.from, "1x2048x8192") && ch.smem == 2048 && ch.grid[0] == 160);
    ch = explain(ctx, ATK_OP_ADD_GEMMA_RMSNORM_GEMV, ATK_BF16, 1, 23552, 8192); /* 46 KiB: still fits */
    CHECK(ch.path == ATK_PATH_INFERRED && ch.smem == 47104);
    CHECK_EQ_INT(explain(ctx, ATK_OP_ADD_GEMMA_RMSNORM_GEMV, ATK_BF16, 1, 23560, 8192).path, ATK_PATH_FALLBACK);
    ch = explain(ctx, ATK_OP_ADD_GEMMA_RMSNORM_GEMV, ATK_BF16, 3, 2048, 2048); /* the bucket: 4 tokens' rows */
    CHECK(ch.path == ATK_PATH_BUCKET && ch.bucket == 4 && ch.smem == 16384);
    void *q = dummy + 4;
    CHECK_EQ_INT(atk_add_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, NULL, NULL, NULL, NULL, NULL, 1e-6f, NULL),
                 ATK_OK);
    CHECK_EQ_INT(atk_add_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, q, p, p, p, 1e-6f, sc), ATK_OK);
    CHECK_EQ_INT(atk_add_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, NULL, p, p, p, 1e-6f, sc),
                 ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "atk_add_rmsnorm_gemv: NULL residual");
    CHECK_EQ_INT(atk_add_gemma_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, p, p, p, q, 1e-6f, sc),
                 ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "atk_add_gemma_rmsnorm_gemv: residual is x");
    CHECK_EQ_INT(atk_add_gemma_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, q, p, p, p, NAN, sc),
                 ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(ctx), "eps");
    CHECK_EQ_INT(atk_stats(ctx, ATK_OP_ADD_RMSNORM_GEMV, &s), ATK_OK);
    CHECK(s.calls == 3 && s.tuned == 2 && s.rejected == 1);
    for (int op = ATK_OP_GEMV; op <= ATK_OP_GEMV_ADD; op++) { /* the unfused components count nowhere */
        CHECK_EQ_INT(atk_stats(ctx, op, &s), ATK_OK);
        CHECK(s.calls == 0);
    }
    CHECK_EQ_INT(atk_gemv_swiglu(NULL, NULL, ATK_BF16, 1, 1, 1, p, p, p, p, sc), ATK_ERR_USAGE);
    CHECK_STR_HAS(atk_errmsg(NULL), "atk_gemv_swiglu: NULL context");

    /* scratch: the counters, the normalized x, then g and u, each rounded up to 256 bytes */
    CHECK(atk_fused_scratch_bytes(ATK_OP_RMSNORM_GEMV, ATK_BF16, 3, 2048, 2048) == 256 + 12288);
    CHECK(atk_fused_scratch_bytes(ATK_OP_GEMMA_RMSNORM_GEMV, ATK_FP16, 1, 100, 7) == 256 + 256);
    CHECK(atk_fused_scratch_bytes(ATK_OP_GEMV_SWIGLU, ATK_BF16, 1, 2048, 6144) == 256 + 24576);
    CHECK(atk_fused_scratch_bytes(ATK_OP_RMSNORM_GEMV_SWIGLU, ATK_BF16, 1, 100, 10) == 256 + 768);
    CHECK(atk_fused_scratch_bytes(ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU, ATK_BF16, 2, 1096, 1000) ==
          256 + 4608 + 2 * 4096);
    CHECK(atk_fused_scratch_bytes(ATK_OP_ADD_RMSNORM_GEMV, ATK_BF16, 3, 2048, 2048) == 256 + 12288);
    CHECK(atk_fused_scratch_bytes(ATK_OP_GEMV, ATK_BF16, 1, 2048, 2048) == 0);
    CHECK(atk_fused_scratch_bytes(ATK_OP_RMSNORM_GEMV, 3, 1, 2048, 2048) == 0);
    CHECK(atk_fused_scratch_bytes(ATK_OP_RMSNORM_GEMV, ATK_BF16, 0, 2048, 2048) == 0);
    CHECK(atk_fused_scratch_bytes(ATK_NOPS, ATK_BF16, 1, 2048, 2048) == 0);
    atk_close(ctx);

    ctx = open_dry(db, ATK_STRICT);
    if (ctx) {
        CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, p, p, p, 1e-6f, sc), ATK_OK);
        CHECK_EQ_INT(atk_rmsnorm_gemv_swiglu(ctx, NULL, ATK_BF16, 1, 2048, 6144, p, p, p, p, p, 1e-6f, sc), ATK_OK);
        CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 3, 2048, 2048, p, p, p, p, 1e-6f, sc), ATK_ERR_MISS);
        CHECK_STR_HAS(atk_errmsg(ctx), "rmsnorm_gemv bf16 3x2048x2048: no tuned entry (strict mode)");
        atk_close(ctx);
    }

    /* ATK_UNFUSED: no fused entry loads; the norm and GEMV entries do */
    ctx = open_dry(db, ATK_UNFUSED);
    if (ctx) {
        CHECK_STR_HAS(atk_report(ctx), "8 fused-op entries not loaded (ATK_UNFUSED)");
        CHECK_EQ_INT(explain(ctx, ATK_OP_RMSNORM_GEMV, ATK_BF16, 1, 2048, 2048).path, ATK_PATH_FALLBACK);
        CHECK(!strcmp(explain(ctx, ATK_OP_GEMV_SWIGLU, ATK_BF16, 1, 2048, 6144).strategy, "unfused"));
        CHECK_EQ_INT(explain(ctx, ATK_OP_GEMV, ATK_BF16, 1, 2048, 2048).path, ATK_PATH_TUNED);
        CHECK_EQ_INT(atk_rmsnorm_gemv(ctx, NULL, ATK_BF16, 1, 2048, 2048, p, p, p, p, 1e-6f, sc), ATK_OK);
        CHECK_EQ_INT(atk_stats(ctx, ATK_OP_RMSNORM_GEMV, &s), ATK_OK);
        CHECK(s.calls == 1 && s.fallback == 1);
        atk_close(ctx);
    }

    /* the exports carry the fused rows: JSON serves the same, CSV lists them */
    CHECK_EQ_INT(at_table_export_file(db, NULL, 1, AT_TABLE_JSON, tpath(js, sizeof js, "fused.json")), AT_OK);
    atk_ctx *a = open_dry(db, 0), *b = open_dry(js, 0);
    if (a && b) {
        for (int op = ATK_OP_RMSNORM_GEMV; op < ATK_NOPS; op++)
            for (int M = 1; M <= 5; M += 2) {
                atk_choice ca = explain(a, op, ATK_BF16, M, 2048, 6144), cb = explain(b, op, ATK_BF16, M, 2048, 6144);
                CHECK(ca.path == cb.path && !strcmp(ca.strategy, cb.strategy) && !strcmp(ca.key, cb.key));
                ca = explain(a, op, ATK_BF16, M, 2048, 2048), cb = explain(b, op, ATK_BF16, M, 2048, 2048);
                CHECK(ca.path == cb.path && !strcmp(ca.strategy, cb.strategy) && !strcmp(ca.key, cb.key));
            }
        CHECK_STR_HAS(atk_report(b), "TP_SWIGLU=0 is not gemv_swiglu's (TP_SWIGLU=1)");
    }
    atk_close(a);
    atk_close(b);
    CHECK_EQ_INT(at_table_export_file(db, NULL, 1, AT_TABLE_CSV, tpath(csv, sizeof csv, "fused.csv")), AT_OK);
    FILE *f = fopen(csv, "rb");
    static char text[1 << 16];
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    text[n] = '\0';
    for (int i = 0; i < 5; i++) {
        char row[64];
        snprintf(row, sizeof row, ",%s,bf16,", names[i]);
        CHECK_STR_HAS(text, row);
    }
    CHECK_STR_HAS(text, ",rmsnorm_gemv_swiglu,bf16,1x2048x6144,");
    CHECK_STR_HAS(text, ",unfused,,,atk unfused sequence,");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_atk.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    TT_RUN(test_key_digest_matches_tuner);
    TT_RUN(test_key_digest_pinned);
    TT_RUN(test_geometry_matches_specs);
    TT_RUN(test_exact);
    TT_RUN(test_inferred_and_fallback);
    TT_RUN(test_strict_and_stats);
    TT_RUN(test_api_edges);
    TT_RUN(test_broken_tables);
    TT_RUN(test_damaged_rows);
    TT_RUN(test_invalid_for_own_shape);
    TT_RUN(test_ranking);
    TT_RUN(test_naive_winner_is_the_builtin);
    TT_RUN(test_json_table);
    TT_RUN(test_c_table);
    TT_RUN(test_buckets);
    TT_RUN(test_inferred_reads_weights_once);
    TT_RUN(test_overrides);
    TT_RUN(test_threads);
    TT_RUN(test_lookup_cost);
    TT_RUN(test_gemv_add);
    TT_RUN(test_fused);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return TT_DONE();
}
