/*
** test_op.c — the op table without a GPU: every op is found with its rank
** and spec, the host-side hooks (open, key options, copy sizes) on real and
** edited specs, the key telling fp32 Gemma weights apart, and the report
** of a (synthetic) norm run showing both baselines where GEMV shows cuBLAS,
** and the check's verdict every op shares (at_op_verdict); a fused op's
** key folding in its components' winners (at_components_fold_key).
*/
#include "autotune.h"
#include "op.h"
#include "search_run.h"
#include "tinytest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const NORMS[4] = {"rmsnorm", "add_rmsnorm", "gemma_rmsnorm", "add_gemma_rmsnorm"};

static void table_lists_every_op(void)
{
    CHECK(at_op_find("gemv") == &at_op_gemv);
    CHECK_EQ_INT(at_op_gemv.rank, 3);
    CHECK(at_op_find("layernorm") == NULL);
    CHECK(at_op_find(NULL) == NULL);
    int n = 0;
    while (at_op_at(n))
        n++;
    CHECK_EQ_INT(n, 13);
    const at_op *ga = at_op_find("gemv_add");
    CHECK(ga == &at_op_gemv_add);
    if (ga) { /* an MxKxN op whose add kernel (a baseline) is checked and hashed */
        CHECK_EQ_INT(ga->rank, 3);
        CHECK(ga->check_baselines);
        CHECK(ga->extra_templates && strcmp(ga->extra_templates[0], "baseline/norm_add.cu") == 0);
    }
    CHECK(at_op_at(-1) == NULL);
    for (int i = 0; i < 4; i++) {
        const at_op *op = at_op_find(NORMS[i]);
        CHECK(op != NULL);
        if (!op)
            continue;
        CHECK_EQ_INT(op->rank, 2);
        CHECK(strcmp(op->shape_form, "TxH") == 0);
        CHECK(op->check_baselines);
        /* every baseline template the key hashes exists */
        at_templates *tpl = NULL;
        CHECK_EQ_INT(at_templates_open("templates", &tpl), AT_OK);
        for (int k = 0; tpl && op->extra_templates[k]; k++) {
            const char *src = NULL;
            CHECK_EQ_INT(at_templates_source(tpl, op->extra_templates[k], &src), AT_OK);
        }
        at_templates_free(tpl);
    }
}

static const char *const FUSED[7] = {"rmsnorm_gemv",        "gemma_rmsnorm_gemv",        "gemv_swiglu",
                                     "rmsnorm_gemv_swiglu", "gemma_rmsnorm_gemv_swiglu", "add_rmsnorm_gemv",
                                     "add_gemma_rmsnorm_gemv"};

/* The fused ops: MxKxN, their baselines checked, the baseline kernels they
** compile hashed (and present), --eps for those with a norm, and their
** components: the norm at T = M, H = K and the GEMV at M x K x N (2N with
** SwiGLU: one GEMV over the concatenated gate|up weight). */
static void fused_ops_and_their_components(void)
{
    for (int i = 0; i < 7; i++) {
        const at_op *op = at_op_find(FUSED[i]);
        int norm = strstr(FUSED[i], "norm") != NULL, swiglu = strstr(FUSED[i], "swiglu") != NULL;
        CHECK(op != NULL);
        if (!op)
            continue;
        CHECK_EQ_INT(op->rank, 3);
        CHECK(op->check_baselines);
        CHECK_EQ_INT(op->takes_eps, norm);
        CHECK(op->components != NULL);
        at_templates *tpl = NULL;
        int nt = 0;
        CHECK_EQ_INT(at_templates_open("templates", &tpl), AT_OK);
        for (; tpl && op->extra_templates[nt]; nt++) {
            const char *src = NULL;
            CHECK_EQ_INT(at_templates_source(tpl, op->extra_templates[nt], &src), AT_OK);
        }
        at_templates_free(tpl);
        CHECK_EQ_INT(nt, norm + swiglu);
        at_search_opts o = {.op = FUSED[i], .dtype = AT_BF16};
        at_op_component c[AT_OP_MAX_COMPONENTS];
        CHECK_EQ_INT(at_shape_parse("4x2048x6144", 3, &o.shape), AT_OK);
        int n = op->components ? op->components(&o, c, AT_OP_MAX_COMPONENTS) : 0;
        CHECK_EQ_INT(n, norm + 1);
        if (n != norm + 1)
            continue;
        if (norm) {
            const char *want = strstr(FUSED[i], "add_") ? (strstr(FUSED[i], "gemma") ? "add_gemma_rmsnorm" : "add_rmsnorm")
                               : strstr(FUSED[i], "gemma") ? "gemma_rmsnorm"
                                                           : "rmsnorm";
            CHECK(strcmp(c[0].op, want) == 0);
            CHECK(c[0].shape.rank == 2 && c[0].shape.M == 4 && c[0].shape.K == 2048);
        }
        CHECK(strcmp(c[norm].op, "gemv") == 0);
        CHECK(c[norm].shape.rank == 3 && c[norm].shape.M == 4 && c[norm].shape.K == 2048);
        CHECK(c[norm].shape.N == (swiglu ? 2 * 6144 : 6144));
    }
    CHECK(at_op_gemv.components == NULL && at_op_rmsnorm.components == NULL && at_op_gemv_add.components == NULL);
}

static char *slurp_text(const char *path);

/* Opens op `name` on spec `spec_path`, loaded for op `spec_op` (host
** only) for shape; fills res. */
static int open_op_as(const char *name, const char *spec_op, const char *spec_path, const char *shape, double eps,
                      at_search_result *res, char *keyopts, size_t keylen, size_t *copy_bytes)
{
    const at_op *op = at_op_find(name);
    at_spec *sp = NULL;
    at_templates *tpl = NULL;
    void *st = NULL;
    at_search_opts o = {.op = name, .dtype = AT_BF16, .spec_path = spec_path, .eps = eps};
    int rc;
    memset(res, 0, sizeof *res);
    if (!op)
        return -1;
    if ((rc = at_shape_parse(shape, op->rank, &o.shape)) != AT_OK || (rc = at_spec_load_op(spec_path, spec_op, &sp)) != AT_OK ||
        (rc = at_templates_open("templates", &tpl)) != AT_OK)
        goto done;
    at_problem pb = {.op = name, .dtype = AT_BF16, .shape = o.shape, .arch = 90, .sms = 132};
    at_op_env env = {.o = &o, .spec = sp, .tpl = tpl, .pb = &pb};
    if ((rc = op->open(&env, res, &st)) == AT_OK) {
        op->key_options(st, keyopts, keylen);
        *copy_bytes = op->copy_bytes(st);
    }
done:
    if (st)
        op->close(st);
    at_templates_free(tpl);
    at_spec_free(sp);
    return rc;
}

static int open_op(const char *name, const char *spec_path, const char *shape, double eps, at_search_result *res,
                   char *keyopts, size_t keylen, size_t *copy_bytes)
{
    return open_op_as(name, name, spec_path, shape, eps, res, keyopts, keylen, copy_bytes);
}

static void norm_open_names_baselines_and_sizes(void)
{
    for (int i = 0; i < 4; i++) {
        char spec[64], keyopts[64] = "x";
        size_t cb = 0;
        at_search_result res;
        at_spec_default_path(".", NORMS[i], spec, sizeof spec); /* ./search/norm.lua */
        CHECK_EQ_INT(open_op(NORMS[i], spec, "3x2050", 0.0, &res, keyopts, sizeof keyopts, &cb), AT_OK);
        CHECK_EQ_INT(res.nbaselines, 2);
        CHECK(strcmp(res.baselines[0].strategy, "naive") == 0);
        CHECK(strcmp(res.baselines[1].strategy, "unfused") == 0);
        CHECK_STR_HAS(res.baselines[1].what, i & 1 ? "8 kernels: add cast" : "7 kernels: cast sq");
        CHECK(res.eps == (double)1e-6f); /* the default, as the float the kernel gets */
        CHECK(keyopts[0] == '\0');       /* bf16 w: nothing added to the key's options */
        /* one copy: x, y (and residual), 256-byte aligned, and w */
        size_t row = (3 * 2050 * 2 + 255) / 256 * 256, w = (2050 * 2 + 255) / 256 * 256;
        CHECK_EQ_INT(cb, (i & 1 ? 3 : 2) * row + w);
    }
    char keyopts[64];
    size_t cb;
    at_search_result res;
    CHECK_EQ_INT(open_op("rmsnorm", "search/norm.lua", "1x2048", 1e-5, &res, keyopts, sizeof keyopts, &cb), AT_OK);
    CHECK(res.eps == (double)1e-5f);
    CHECK_EQ_INT(open_op("rmsnorm", "search/norm.lua", "1x2048", -1.0, &res, keyopts, sizeof keyopts, &cb),
                 AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "eps");
    CHECK_EQ_INT(open_op("rmsnorm", "search/norm.lua", "1x2048", 2.0, &res, keyopts, sizeof keyopts, &cb),
                 AT_ERR_USAGE);
    /* a spec whose TP_OP is another op's: norm.lua picking add_rmsnorm's */
    char path[64];
    snprintf(path, sizeof path, "/tmp/at_test_op_tpop_%d.lua", (int)getpid());
    char *src = slurp_text("search/norm.lua"), *p = src ? strstr(src, "})[OP]") : NULL;
    FILE *f = p ? fopen(path, "w") : NULL;
    CHECK(f != NULL);
    if (f) {
        fwrite(src, 1, (size_t)(p - src), f);
        fprintf(f, "})[\"add_rmsnorm\"]%s", p + strlen("})[OP]"));
        fclose(f);
        CHECK_EQ_INT(open_op("rmsnorm", path, "1x2048", 0.0, &res, keyopts, sizeof keyopts, &cb), AT_ERR_SPEC);
        CHECK_STR_HAS(at_errmsg(), "TP_OP=1");
        remove(path);
    }
    free(src);
}

static void gemv_open_keeps_the_key_and_cublas(void)
{
    char keyopts[64] = "x";
    size_t cb = 0;
    at_search_result res;
    CHECK_EQ_INT(open_op("gemv", "search/gemv.lua", "1x2048x8192", 0.0, &res, keyopts, sizeof keyopts, &cb), AT_OK);
    CHECK(keyopts[0] == '\0');
    CHECK_EQ_INT(cb, 2048 * 8192 * 2); /* the weights only */
    CHECK_EQ_INT(res.nbaselines, 1);
    CHECK(strcmp(res.baselines[0].strategy, "cublas") == 0);
    CHECK(strcmp(res.baselines[0].label, "cuBLAS") == 0);
}

/* gemv_add: the unfused sequence (baseline 0, the winner rule's yardstick)
** and cuBLAS with beta = 1; the weights are what is rotated; a spec that
** leaves TP_ADD out (gemv.lua loaded as gemv) is refused by name. */
static void gemv_add_open_names_both_baselines(void)
{
    char keyopts[64] = "x";
    size_t cb = 0;
    at_search_result res;
    CHECK_EQ_INT(open_op("gemv_add", "search/gemv.lua", "3x1096x1000", 0.0, &res, keyopts, sizeof keyopts, &cb),
                 AT_OK);
    CHECK(keyopts[0] == '\0');
    CHECK_EQ_INT(cb, 1096 * 1000 * 2);
    CHECK_EQ_INT(res.nbaselines, 2);
    CHECK(strcmp(res.baselines[0].strategy, "cublas") == 0);
    CHECK(strcmp(res.baselines[0].label, "unfused") == 0);
    CHECK_STR_HAS(res.baselines[0].what, "norm_add");
    CHECK(strcmp(res.baselines[1].strategy, "cublas_beta1") == 0);
    CHECK_STR_HAS(res.baselines[1].what, "beta = 1");
    CHECK_EQ_INT(open_op_as("gemv_add", "gemv", "search/gemv.lua", "1x2048x2048", 0.0, &res, keyopts, sizeof keyopts,
                            &cb),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "no TP_ADD=1");
}

/* Each fused op opens on search/gemv.lua with both baselines named (the
** runtime's unfused sequence first: the winner rule's yardstick), one copy
** = the weight block ([2N,K] with SwiGLU) and the norm weight, eps the
** float the kernel gets; gemv.lua loaded as gemv (no TP_NORM / TP_SWIGLU)
** is refused by name. */
static void fused_open_names_both_baselines(void)
{
    for (int i = 0; i < 7; i++) {
        int norm = strstr(FUSED[i], "norm") != NULL, swiglu = strstr(FUSED[i], "swiglu") != NULL;
        char keyopts[64] = "x";
        size_t cb = 0;
        at_search_result res;
        CHECK_EQ_INT(open_op(FUSED[i], "search/gemv.lua", "3x1096x1000", norm ? 1e-5 : 0.0, &res, keyopts,
                             sizeof keyopts, &cb),
                     AT_OK);
        CHECK(keyopts[0] == '\0');
        size_t w = (size_t)(swiglu ? 2 : 1) * 1096 * 1000 * 2;
        CHECK_EQ_INT(cb, norm ? (w + 255) / 256 * 256 + (1096 * 2 + 255) / 256 * 256 : w);
        CHECK_EQ_INT(res.nbaselines, 2);
        CHECK(strcmp(res.baselines[0].strategy, "unfused") == 0);
        CHECK(strcmp(res.baselines[0].label, "unfused") == 0);
        CHECK_STR_HAS(res.baselines[0].what, "atk unfused: ");
        if (swiglu)
            CHECK_STR_HAS(res.baselines[1].what, "silu_mul");
        if (norm)
            CHECK_STR_HAS(res.baselines[1].what, "norm_naive");
        CHECK(res.eps == (norm ? (double)1e-5f : 0.0));
        CHECK_EQ_INT(open_op_as(FUSED[i], "gemv", "search/gemv.lua", "1x2048x2048", 0.0, &res, keyopts,
                                sizeof keyopts, &cb),
                     AT_ERR_SPEC);
        CHECK_STR_HAS(at_errmsg(), "TP_NORM=0 TP_SWIGLU=0");
    }
    char keyopts[64];
    size_t cb;
    at_search_result res;
    CHECK_EQ_INT(open_op("rmsnorm_gemv", "search/gemv.lua", "1x2048x2048", 3.0, &res, keyopts, sizeof keyopts, &cb),
                 AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "eps");
    CHECK_EQ_INT(open_op("gemv_swiglu", "search/gemv.lua", "1x2048x2048", 1e-5, &res, keyopts, sizeof keyopts, &cb),
                 AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "--eps applies to the ops with a norm");
    /* the residual-add forms: their own TP_RES, and one counter per token group */
    CHECK_EQ_INT(open_op_as("add_rmsnorm_gemv", "rmsnorm_gemv", "search/gemv.lua", "1x2048x2048", 0.0, &res, keyopts,
                            sizeof keyopts, &cb),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "has TP_RES=0, but add_rmsnorm_gemv is a residual-add form (TP_RES=1 or 2)");
    CHECK_EQ_INT(open_op("add_gemma_rmsnorm_gemv", "search/gemv.lua", "64x2048x2048", 0.0, &res, keyopts,
                         sizeof keyopts, &cb),
                 AT_OK);
    CHECK_EQ_INT(open_op("add_gemma_rmsnorm_gemv", "search/gemv.lua", "65x2048x2048", 0.0, &res, keyopts,
                         sizeof keyopts, &cb),
                 AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "add_gemma_rmsnorm_gemv at M=65: the residual-add kernels serve M <= 64");
}

static char *slurp_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = calloc(1, (size_t)n + 1)) != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* Writes `path`: the spec at `from` with its "[NORM_OP]" line's fp32-w
** flag set to 1. Returns 0 on success. */
static int write_w32_spec(const char *from, const char *path)
{
    char *src = slurp_text(from), *p = src ? strstr(src, "= 0 -- [NORM_OP]") : NULL;
    FILE *f = p ? fopen(path, "w") : NULL;
    int rc = -1;
    if (f) {
        p[2] = '1';
        rc = fputs(src, f) < 0;
        rc |= fclose(f) != 0;
    }
    free(src);
    return rc;
}

/* fp32 Gemma weights build other kernels: the key's options say so, and
** the key differs from the bf16-w one; a non-Gemma spec with fp32 w is
** refused. */
static void fp32_weights_change_the_key(void)
{
    char path[64], keyopts[64];
    size_t cb = 0, cb16 = 0;
    at_search_result res;
    snprintf(path, sizeof path, "/tmp/at_test_op_w32_%d.lua", (int)getpid());
    CHECK_EQ_INT(write_w32_spec("search/norm.lua", path), 0);
    CHECK_EQ_INT(open_op("add_gemma_rmsnorm", path, "1x2048", 0.0, &res, keyopts, sizeof keyopts, &cb), AT_OK);
    CHECK(strcmp(keyopts, "-DTP_WFP32=1") == 0);
    CHECK_STR_HAS(res.baselines[0].what, "TP_WFP32=1");
    CHECK_EQ_INT(open_op("add_gemma_rmsnorm", "search/norm.lua", "1x2048", 0.0, &res, keyopts,
                         sizeof keyopts, &cb16),
                 AT_OK);
    CHECK_EQ_INT(cb - cb16, 2048 * 2); /* w is twice as wide */

    /* through the pipeline (dry run): the key's options and digest differ */
    at_search_opts o = {.op = "add_gemma_rmsnorm", .dtype = AT_BF16, .spec_path = path,
                        .templates_root = "templates", .arch = 90, .dry_run = 1, .reps = 5};
    at_search_result a, b;
    /* a spec of one candidate keeps this quick */
    char tiny[64];
    snprintf(tiny, sizeof tiny, "/tmp/at_test_op_tiny_%d.lua", (int)getpid());
    FILE *f = fopen(tiny, "w");
    CHECK(f != NULL);
    if (!f)
        goto done;
    fputs("local W = 1 -- [NORM_OP]\n"
          "return { op = 'add_gemma_rmsnorm', strategies = { { name = 'block_row',\n"
          "  template = 'norm/norm_block_row.cu', kernel = 'norm_block_row',\n"
          "  params = { { 'TP_THREADS', {256} }, { 'TP_OP', {3} }, { 'TP_WFP32', {W} }, { 'TP_VEC', {8} },\n"
          "             { 'TP_REGS', {1} }, { 'TP_ITEMS', {1} }, { 'TP_PDL', {0} } },\n"
          "  constraints = {}, grid = function(p, s) return { s.T, 1, 1 } end,\n"
          "  block = function(p, s) return { 256, 1, 1 } end } },\n"
          "  bytes = function(s) return 4 * s.T * s.H * s.elem + s.H * 4 end }\n",
          f);
    fclose(f);
    o.spec_path = tiny;
    CHECK_EQ_INT(at_shape_parse("1x2048", 2, &o.shape), AT_OK);
    CHECK_EQ_INT(at_search_run(&o, &a), AT_OK);
    CHECK_EQ_INT(a.ncompiled, 1);
    CHECK_STR_HAS(a.key.options, "-DTP_DTYPE=1 -DTP_WFP32=1");
    /* the same spec with bf16 w */
    char *src = slurp_text(tiny);
    if (src && (f = fopen(tiny, "w")) != NULL) {
        src[10] = '0'; /* "local W = 1" -> 0 */
        fputs(src, f);
        fclose(f);
    }
    free(src);
    CHECK_EQ_INT(at_search_run(&o, &b), AT_OK);
    CHECK(strstr(b.key.options, "TP_WFP32") == NULL);
    CHECK(strcmp(a.key_sha, b.key_sha) != 0);
    at_search_result_free(&a);
    at_search_result_free(&b);
    remove(tiny);
done:
    /* fp32 w is for Gemma only */
    CHECK_EQ_INT(write_w32_spec("search/norm.lua", path), 0);
    CHECK_EQ_INT(open_op("rmsnorm", path, "1x2048", 0.0, &res, keyopts, sizeof keyopts, &cb), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "Gemma");
    remove(path);
}

/* The table of a norm run: both baselines, their ratios, the winner rule's
** wording; a GEMV run still says cuBLAS. Synthetic numbers, no GPU. */
static void report_shows_both_baselines(void)
{
    at_search_opts o = {.op = "add_rmsnorm", .dtype = AT_BF16};
    at_search_result r;
    at_search_row row;
    char *buf = NULL;
    size_t len = 0;
    CHECK_EQ_INT(at_shape_parse("1x2048", 2, &o.shape), AT_OK);
    memset(&r, 0, sizeof r);
    memset(&row, 0, sizeof row);
    snprintf(r.key.op, sizeof r.key.op, "add_rmsnorm");
    snprintf(r.dev.name, sizeof r.dev.name, "NVIDIA H200");
    r.dev.read_gbps = 4500;
    r.nbaselines = 2;
    snprintf(r.baselines[0].strategy, sizeof r.baselines[0].strategy, "naive");
    snprintf(r.baselines[0].label, sizeof r.baselines[0].label, "naive");
    snprintf(r.baselines[0].what, sizeof r.baselines[0].what, "norm_naive TP_OP=1");
    snprintf(r.baselines[0].json_name, sizeof r.baselines[0].json_name, "norm_naive");
    snprintf(r.baselines[1].strategy, sizeof r.baselines[1].strategy, "unfused");
    snprintf(r.baselines[1].label, sizeof r.baselines[1].label, "unfused");
    snprintf(r.baselines[1].what, sizeof r.baselines[1].what, "8 kernels");
    snprintf(r.baselines[1].json_name, sizeof r.baselines[1].json_name, "unfused");
    r.base_us = r.baselines[0].us = 2.0;
    r.baselines[1].us = 12.0;
    r.eps = 1e-6;
    r.bytes = 20480;
    r.copies = 11000;
    r.groups = 28;
    r.launches = 400;
    r.reps = 7;
    snprintf(row.trial.strategy, sizeof row.trial.strategy, "block_row");
    snprintf(row.trial.params, sizeof row.trial.params, "TP_THREADS=256");
    row.trial.us = 1.0;
    row.ratio = 2.0;
    row.gbps = 20.48;
    r.rows = &row;
    r.nrows = 1;
    snprintf(r.winner.strategy, sizeof r.winner.strategy, "block_row");
    snprintf(r.winner.params, sizeof r.winner.params, "TP_THREADS=256");
    r.winner.us = 1.0;
    r.winner.speedup = 2.0;
    FILE *f = open_memstream(&buf, &len);
    at_report_text(f, &o, &r, 10, "/tmp/x.db");
    fclose(f);
    CHECK_STR_HAS(buf, "vs naive");
    CHECK_STR_HAS(buf, "vs unfused");
    CHECK_STR_HAS(buf, "12.00x"); /* the winner against the unfused chain */
    CHECK_STR_HAS(buf, "6.00x");  /* naive against unfused */
    CHECK_STR_HAS(buf, "cold inputs (11000 copies of x, residual, w, y");
    CHECK_STR_HAS(buf, "28 graphs of 400 launches");
    CHECK_STR_HAS(buf, "residual updated in place");
    CHECK_STR_HAS(buf, "2.00x naive, 12.00x unfused  stored in /tmp/x.db");
    CHECK(strstr(buf, "cuBLAS") == NULL);
    free(buf);
    /* the naive kernel kept: said as such */
    snprintf(r.winner.strategy, sizeof r.winner.strategy, "naive");
    r.winner.us = 2.0;
    f = open_memstream(&buf, &len);
    at_report_text(f, &o, &r, 10, "/tmp/x.db");
    fclose(f);
    CHECK_STR_HAS(buf, "winner  naive (no candidate beat it beyond the noise)");
    free(buf);
    f = open_memstream(&buf, &len);
    at_report_json(f, &o, &r, "/tmp/x.db", 0);
    fclose(f);
    CHECK_STR_HAS(buf, "\"baseline\":{\"name\":\"norm_naive\"");
    CHECK_STR_HAS(buf, "\"eps\":1e-06");
    CHECK_STR_HAS(buf, "\"baselines\":[{\"name\":\"norm_naive\"");
    CHECK_STR_HAS(buf, "{\"name\":\"unfused\",\"strategy\":\"unfused\"");
    free(buf);
    /* GEMV: one baseline, cuBLAS, no norm fields */
    at_search_opts og = {.op = "gemv", .dtype = AT_BF16};
    CHECK_EQ_INT(at_shape_parse("1x2048x2048", 3, &og.shape), AT_OK);
    r.nbaselines = 1;
    snprintf(r.key.op, sizeof r.key.op, "gemv");
    snprintf(r.baselines[0].strategy, sizeof r.baselines[0].strategy, "cublas");
    snprintf(r.baselines[0].label, sizeof r.baselines[0].label, "cuBLAS");
    snprintf(r.baselines[0].what, sizeof r.baselines[0].what, "cublasGemmEx (fp32 compute)");
    snprintf(r.baselines[0].json_name, sizeof r.baselines[0].json_name, "cublasGemmEx");
    r.eps = 0;
    snprintf(r.winner.strategy, sizeof r.winner.strategy, "warp_row");
    r.winner.us = 1.0;
    f = open_memstream(&buf, &len);
    at_report_text(f, &og, &r, 10, "/tmp/x.db");
    at_report_json(f, &og, &r, "/tmp/x.db", 0);
    fclose(f);
    CHECK_STR_HAS(buf, "vs cuBLAS\n");
    CHECK_STR_HAS(buf, "cublasGemmEx (fp32 compute)");
    CHECK_STR_HAS(buf, "2.00x cuBLAS  stored in");
    CHECK_STR_HAS(buf, "timing  cold weights (11000 copies");
    CHECK_STR_HAS(buf, "\"baseline\":{\"name\":\"cublasGemmEx\"");
    CHECK(strstr(buf, "unfused") == NULL && strstr(buf, "\"eps\"") == NULL && strstr(buf, "baselines") == NULL);
    free(buf);
}

/* at_op_verdict on host arrays: within the tolerance nothing is said; a
** NaN output or an error past the tolerance fails with its reason, after
** a guard-zone reason already there. */
static void verdict_says_why_an_output_fails(void)
{
    enum { N = 64 };
    uint16_t y[N];
    double ref[N];
    for (int i = 0; i < N; i++) {
        ref[i] = 1.0 + i / 8.0; /* exact in bf16 */
        y[i] = at_f32_to_bf16((float)ref[i]);
    }
    at_op_check c;
    memset(&c, 0, sizeof c);
    at_op_verdict(&c, AT_BF16, y, ref, N);
    CHECK_EQ_INT(c.wrong, 0);
    CHECK(c.err == 0.0);
    CHECK_EQ_INT((int)c.nonfinite, 0);
    CHECK_EQ_INT((int)strlen(c.reason), 0);

    y[5] = 0xFFFF; /* the poison: NaN */
    memset(&c, 0, sizeof c);
    at_op_verdict(&c, AT_BF16, y, ref, N);
    CHECK_EQ_INT(c.wrong, 1);
    CHECK_EQ_INT((int)c.nonfinite, 1);
    CHECK_STR_HAS(c.reason, "1 outputs NaN/Inf (unwritten or overflow)");
    CHECK(strncmp(c.reason, "; ", 2) != 0);

    y[5] = at_f32_to_bf16((float)ref[5]);
    for (int i = 0; i < N; i++)
        y[i] = at_f32_to_bf16((float)(ref[i] * 1.5)); /* rel. error 0.5 */
    memset(&c, 0, sizeof c);
    snprintf(c.reason, sizeof c.reason, "guard zone after output written");
    c.wrong = 1;
    at_op_verdict(&c, AT_BF16, y, ref, N);
    CHECK_EQ_INT(c.wrong, 1);
    CHECK(c.err > 0.49 && c.err < 0.51);
    CHECK_STR_HAS(c.reason, "guard zone after output written; rel. error 0.5 > ");

    /* a reason that fills the buffer stays terminated */
    memset(&c, 0, sizeof c);
    memset(c.reason, 'x', sizeof c.reason - 1);
    at_op_verdict(&c, AT_BF16, y, ref, N);
    CHECK_EQ_INT(c.wrong, 1);
    CHECK_EQ_INT((int)strlen(c.reason), (int)sizeof c.reason - 1);
}

/* A fused op's answer was measured against its components' winners, so
** they are folded into its key's space digest: the same winners give the
** same digest, any other winner (params, a baseline, another key) or order
** another one, and an op without components keeps its plain digest. */
static void components_fold_into_the_key(void)
{
    static const char space[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    static const char *const idents[] = {
        "rmsnorm 1x2048 aa11 block_row TP_ROWS=1 cc11\ngemv 1x2048x8192 bb22 splitk TP_BK=256 dd22\n",
        "rmsnorm 1x2048 aa11 block_row TP_ROWS=1 cc11\ngemv 1x2048x8192 bb22 splitk TP_BK=512 dd33\n",
        "rmsnorm 1x2048 aa11 block_row TP_ROWS=1 cc11\ngemv 1x2048x8192 bb22 cublas  \n",
        "rmsnorm 1x2048 aa11 block_row TP_ROWS=1 cc11\ngemv 1x2048x8192 ee55 splitk TP_BK=256 dd22\n",
        "gemv 1x2048x8192 bb22 splitk TP_BK=256 dd22\nrmsnorm 1x2048 aa11 block_row TP_ROWS=1 cc11\n",
    };
    enum { N = sizeof idents / sizeof idents[0] };
    char d[N][65], again[65], plain[65], other[65];
    snprintf(plain, sizeof plain, "%s", space);
    CHECK_EQ_INT(at_components_fold_key(plain, ""), AT_OK);
    CHECK(strcmp(plain, space) == 0);
    for (int i = 0; i < N; i++) {
        snprintf(d[i], sizeof d[i], "%s", space);
        CHECK_EQ_INT(at_components_fold_key(d[i], idents[i]), AT_OK);
        CHECK_EQ_INT((int)strlen(d[i]), 64);
        CHECK(strspn(d[i], "0123456789abcdef") == 64);
        CHECK(strcmp(d[i], space) != 0);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(d[i], d[j]) != 0);
    }
    snprintf(again, sizeof again, "%s", space);
    at_components_fold_key(again, idents[0]);
    CHECK(strcmp(again, d[0]) == 0);
    snprintf(other, sizeof other, "%s", "f123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    at_components_fold_key(other, idents[0]);
    CHECK(strcmp(other, d[0]) != 0); /* another spec or template: another key still */
}

int main(void)
{
    TT_RUN(table_lists_every_op);
    TT_RUN(norm_open_names_baselines_and_sizes);
    TT_RUN(gemv_open_keeps_the_key_and_cublas);
    TT_RUN(gemv_add_open_names_both_baselines);
    TT_RUN(fused_ops_and_their_components);
    TT_RUN(fused_open_names_both_baselines);
    TT_RUN(fp32_weights_change_the_key);
    TT_RUN(report_shows_both_baselines);
    TT_RUN(verdict_says_why_an_output_fails);
    TT_RUN(components_fold_into_the_key);
    return TT_DONE();
}
