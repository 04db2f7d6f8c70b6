/*
** test_gpu.c — what only a GPU can show (label gpu; skips visibly without
** one): every candidate of the default GEMV space is correct on awkward
** shapes (K and N not multiples of any tile, narrow vectors, M > 1, fp16);
** the gate rejects planted bugs; an end-to-end tune, its cached rerun and
** --force through the CLI; an unwritable cache is a clean error. The same
** for the RMSNorm family: every candidate of each op (and both baselines)
** correct on awkward TxH shapes, odd H, the residual output z checked,
** fp32 Gemma weights; planted bugs (z not written) rejected; a CLI tune.
** The fused ops: every candidate and both baselines correct at awkward
** shapes, and a tune that tunes the components first, whose answer is
** retuned once a component's winner changes.
** All of it, the norm tests and the strategy tests at the end (each
** strategy tunes and stores a winner, exhaustive measures every correct
** candidate, warm start) included.
*/
#include <dlfcn.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autotune.h"
#include "cli_run.h"
#include "tinytest.h"
#include "gpu_isolated.h"

static char db_path[256];

static int tune_op(const char *op, const char *shape, at_dtype dtype, const char *spec, const char *tpl,
                   int verify_only, at_search_result *res)
{
    at_search_opts o = {.op = op, .dtype = dtype, .spec_path = spec, .templates_root = tpl,
                        .db_path = db_path, .reps = 5, .force = 1, .verify_only = verify_only};
    int rc = at_shape_parse(shape, strstr(op, "gemv") ? 3 : 2, &o.shape);
    if (rc == AT_OK)
        rc = at_search_run(&o, res);
    if (rc != AT_OK)
        fprintf(stderr, "  %s: %s\n", shape, at_errmsg());
    return rc;
}

static int tune(const char *shape, at_dtype dtype, const char *spec, const char *tpl, at_search_result *res)
{
    return tune_op("gemv", shape, dtype, spec, tpl, 0, res);
}

static void all_correct(const char *shape, at_dtype dtype)
{
    at_search_result res;
    int rc = tune(shape, dtype, "search/gemv.lua", "templates", &res);
    CHECK_EQ_INT(rc, AT_OK);
    CHECK(res.ncompiled > 0);
    CHECK_EQ_INT(res.ncompile_failed, 0);
    CHECK_EQ_INT(res.nwrong, 0);
    CHECK_EQ_INT(res.ncrashed, 0);
    CHECK_EQ_INT(res.ncorrect + res.nspills_rejected, res.ncompiled); /* spilling ones are not run */
    CHECK(res.winner.strategy[0] != '\0');
    CHECK(res.base_us > 0);
    for (int i = 0; i < res.nrows; i++)
        if (res.rows[i].trial.state == AT_TRIAL_WRONG || res.rows[i].trial.state == AT_TRIAL_CRASHED)
            fprintf(stderr, "  %s: %s %s: %s\n", at_trial_state_name(res.rows[i].trial.state), res.rows[i].trial.strategy, res.rows[i].trial.params,
                    res.rows[i].trial.reason);
    printf("  %s %s: %d correct of %d compiled; winner %s %s %.2f us vs cuBLAS %.2f us\n", shape,
           at_dtype_name(dtype), res.ncorrect, res.ncompiled, res.winner.strategy, res.winner.params,
           res.winner.us, res.base_us);
    at_search_result_free(&res);
}

/* gemv_add: every candidate (and both baselines: the op checks them) runs
** through the tuner's check on the restored residual with guard zones:
** none compile-fails, none wrong, none crashes. No timing (verify only). */
static void gemv_add_all_correct(const char *shape, at_dtype dtype)
{
    at_search_result res;
    int rc = tune_op("gemv_add", shape, dtype, "search/gemv.lua", "templates", 1, &res);
    CHECK_EQ_INT(rc, AT_OK);
    if (rc != AT_OK)
        return;
    CHECK(res.ncompiled > 0);
    CHECK_EQ_INT(res.ncompile_failed, 0);
    CHECK_EQ_INT(res.nwrong, 0);
    CHECK_EQ_INT(res.ncrashed, 0);
    CHECK_EQ_INT(res.ncorrect + res.nspills_rejected, res.ncompiled);
    for (int i = 0; i < res.nrows; i++)
        if (res.rows[i].trial.state == AT_TRIAL_WRONG || res.rows[i].trial.state == AT_TRIAL_CRASHED)
            fprintf(stderr, "  %s: %s %s: %s\n", at_trial_state_name(res.rows[i].trial.state),
                    res.rows[i].trial.strategy, res.rows[i].trial.params, res.rows[i].trial.reason);
    printf("  gemv_add %s %s: %d correct of %d compiled\n", shape, at_dtype_name(dtype), res.ncorrect,
           res.ncompiled);
    at_search_result_free(&res);
}

static void gemv_add_every_candidate_correct(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    gemv_add_all_correct("1x1096x1000", AT_BF16);
    gemv_add_all_correct("3x1096x1000", AT_BF16);
    gemv_add_all_correct("3x1096x1000", AT_FP16);
    gemv_add_all_correct("12x1096x1000", AT_BF16); /* the tensor-core forms' two token tiles, one part-empty */
}

/* The fused ops: every candidate (and both baselines: the runtime's unfused
** sequence over this test's cache, and naive norm + cuBLAS + silu_mul) runs
** through the op's check (y poisoned with NaN, guard zones armed) at
** awkward shapes: M = 1 and 3, K = 2056 and 1000 (no tile multiple), N = 200
** and 37 (the residual-add forms: the residual must hold z bit for bit and
** the counters must be zero again). Verify only: no timing, and the
** components are not tuned. */
static void fused_all_correct(const char *op, const char *shape, at_dtype dtype)
{
    at_search_result res;
    int rc = tune_op(op, shape, dtype, "search/gemv.lua", "templates", 1, &res);
    CHECK_EQ_INT(rc, AT_OK);
    if (rc != AT_OK)
        return;
    CHECK(res.ncompiled > 0);
    CHECK_EQ_INT(res.ncompile_failed, 0);
    CHECK_EQ_INT(res.nwrong, 0);
    CHECK_EQ_INT(res.ncrashed, 0);
    CHECK_EQ_INT(res.ncorrect + res.nspills_rejected, res.ncompiled);
    for (int i = 0; i < res.nrows; i++)
        if (res.rows[i].trial.state == AT_TRIAL_WRONG || res.rows[i].trial.state == AT_TRIAL_CRASHED)
            fprintf(stderr, "  %s %s: %s %s: %s\n", op, at_trial_state_name(res.rows[i].trial.state),
                    res.rows[i].trial.strategy, res.rows[i].trial.params, res.rows[i].trial.reason);
    printf("  %s %s %s: %d correct of %d compiled\n", op, shape, at_dtype_name(dtype), res.ncorrect, res.ncompiled);
    at_search_result_free(&res);
}

static void fused_every_candidate_correct(void)
{
    static const char *const ops[] = {"rmsnorm_gemv",        "gemma_rmsnorm_gemv",        "gemv_swiglu",
                                      "rmsnorm_gemv_swiglu", "gemma_rmsnorm_gemv_swiglu", "add_rmsnorm_gemv",
                                      "add_gemma_rmsnorm_gemv"};
    if (!gpu_present())
        TT_SKIP("no GPU");
    for (int i = 0; i < 7; i++) {
        fused_all_correct(ops[i], "1x2056x200", AT_BF16);
        fused_all_correct(ops[i], "3x1000x37", AT_BF16);
    }
    fused_all_correct("gemma_rmsnorm_gemv_swiglu", "3x2056x200", AT_FP16);
    fused_all_correct("rmsnorm_gemv", "1x1000x37", AT_FP16);
    /* the residual-add forms: z written back bit for bit and the counters
    ** left zero, at M = 5 and 16 too (multi_token's token groups, the last
    ** one part-empty at 5), and fp16 */
    fused_all_correct("add_rmsnorm_gemv", "5x2056x200", AT_BF16);
    fused_all_correct("add_gemma_rmsnorm_gemv", "16x1000x37", AT_BF16);
    fused_all_correct("add_gemma_rmsnorm_gemv", "3x2056x200", AT_FP16);
}

/* autotune on rmsnorm_gemv_swiglu 2x1024x1024 (quick) with `more` options;
** it must exit 0. */
static void tune_fused_2x1024x1024(cli_out *o, const char *more)
{
    char args[512];
    snprintf(args, sizeof args, "--op rmsnorm_gemv_swiglu --shape 2x1024x1024 --effort quick --db %s --quiet %s",
             db_path, more);
    cli_run(args, o);
    if (o->code != 0)
        fprintf(stderr, "  %s", o->err);
    CHECK_EQ_INT(o->code, 0);
}

/* A fused op tuned for real: its components (rmsnorm 2x1024, gemv
** 2x1024x2048: the SwiGLU GEMV over 2N) are tuned first and named in
** baseline 0's description; a rerun answers from the cache; the stored
** answer is a fused kernel or "unfused", found by a compile-ahead as well;
** a component's other winner makes it a miss (the components' winners are
** in its key), and the retune's answer replaces the stale one. */
static void fused_tunes_its_components_first(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    char args[512];
    static cli_out o;
    tune_fused_2x1024x1024(&o, "--json");
    CHECK_STR_HAS(o.out, "\"from_cache\":false");
    CHECK_STR_HAS(o.out, "\"baseline\":{\"name\":\"atk_unfused\"");
    CHECK_STR_HAS(o.out, "[tuned first: rmsnorm=");
    CHECK_STR_HAS(o.out, " gemv=");
    CHECK_STR_HAS(o.out, "\"eps\":1e-06");
    printf("%.600s\n", o.out);
    /* the components are in the cache now */
    snprintf(args, sizeof args, "--op gemv --shape 2x1024x2048 --db %s --json --quiet", db_path);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "\"from_cache\":true");
    snprintf(args, sizeof args, "--op rmsnorm --shape 2x1024 --db %s --json --quiet", db_path);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "\"from_cache\":true");
    tune_fused_2x1024x1024(&o, "");
    CHECK_STR_HAS(o.out, "cached");
    printf("%s", o.out);
    /* a suite's compile-ahead of this entry looks the components up too and
    ** so finds the answer: nothing to compile */
    at_search_opts ahead = {.op = "rmsnorm_gemv_swiglu", .dtype = AT_BF16, .spec_path = "search/gemv.lua",
                            .templates_root = "templates", .db_path = db_path, .reps = 5, .compile_only = 1};
    at_search_result res;
    CHECK_EQ_INT(at_shape_parse("2x1024x1024", 3, &ahead.shape), AT_OK);
    CHECK_EQ_INT(at_search_run(&ahead, &res), AT_OK);
    CHECK_EQ_INT(res.from_cache, 1);
    CHECK_EQ_INT(res.ncompiled, 0);
    at_search_result_free(&res);
    /* the answer holds against those components only: the GEMV component
    ** edited to a cuBLAS answer (as a retune to another winner leaves it),
    ** the fused op's answer is not found and is retuned against it, then
    ** found again */
    sqlite3 *h = NULL;
    CHECK(sqlite3_open(db_path, &h) == SQLITE_OK);
    CHECK(sqlite3_exec(h,
                       "UPDATE winners SET strategy = 'cublas', kernel = '', template_name = '', params = "
                       "'cublasGemmEx', cubin = NULL, cubin_sha = '', grid_x = 0, grid_y = 0, grid_z = 0, "
                       "block_x = 0, block_y = 0, block_z = 0, smem = 0 WHERE op = 'gemv' AND shape = "
                       "'2x1024x2048' AND strategy <> 'cublas'",
                       NULL, NULL, NULL) == SQLITE_OK);
    if (sqlite3_changes(h) != 1)
        fprintf(stderr, "  the gemv component 2x1024x2048 was already answered by cuBLAS: nothing to change\n");
    CHECK_EQ_INT(sqlite3_changes(h), 1);
    sqlite3_close(h);
    tune_fused_2x1024x1024(&o, "--json");
    CHECK_STR_HAS(o.out, "\"from_cache\":false");
    CHECK_STR_HAS(o.out, " gemv=cublas]");
    CHECK_STR_HAS(o.out, "\"superseded\":1"); /* the stale answer is gone: the runtime cannot serve it */
    tune_fused_2x1024x1024(&o, "--json");
    CHECK_STR_HAS(o.out, "\"from_cache\":true");
}

static void every_candidate_correct_1x2056x5000(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    all_correct("1x2056x5000", AT_BF16);
}

static void every_candidate_correct_1x6144x32(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    all_correct("1x6144x32", AT_BF16);
}

static void every_candidate_correct_narrow_vectors(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    all_correct("1x2050x77", AT_FP16);  /* TP_VEC = 2 */
    all_correct("1x2051x333", AT_BF16); /* TP_VEC = 1 */
}

static void every_candidate_correct_fp16_and_m3(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    all_correct("1x2056x5000", AT_FP16);
    all_correct("3x2056x1000", AT_BF16);
}

static void gate_rejects_planted_bugs(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    at_search_result res;
    int rc = tune("1x1000x300", AT_BF16, "tests/fixtures/spec_wrong_kernels.lua", "tests/fixtures/templates",
                  &res);
    CHECK_EQ_INT(rc, AT_OK);
    CHECK_EQ_INT(res.ncompiled, 4);
    CHECK_EQ_INT(res.ncorrect, 1);
    CHECK_EQ_INT(res.nwrong, 3);
    for (int i = 0; i < res.nrows; i++) {
        const at_trial *t = &res.rows[i].trial;
        if (strstr(t->params, "TP_BUG=0"))
            CHECK_EQ_INT(t->state, AT_TRIAL_OK);
        else
            CHECK_EQ_INT(t->state, AT_TRIAL_WRONG);
        if (strstr(t->params, "TP_BUG=2"))
            CHECK_STR_HAS(t->reason, "NaN"); /* the poison showed through */
    }
    CHECK(strstr(res.winner.params, "TP_BUG=1") == NULL);
    at_search_result_free(&res);
}

static void end_to_end_then_cached_then_forced(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    char args[512];
    static cli_out o;
    snprintf(args, sizeof args, "--op gemv --shape 1x2048x2048 --db %s --json --quiet", db_path);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "\"from_cache\":false");
    CHECK_STR_HAS(o.out, "\"winner\":{\"strategy\":");
    CHECK_STR_HAS(o.out, "\"read_gbps\":");
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "\"from_cache\":true");
    snprintf(args, sizeof args, "--op gemv --shape 1x2048x2048 --db %s --quiet", db_path);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "cached");
    CHECK_STR_HAS(o.out, "winner");
    snprintf(args, sizeof args, "--op gemv --shape 1x2048x2048 --db %s --force --quiet", db_path);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "vs cuBLAS");
    CHECK_STR_HAS(o.out, "stored in");
}

static void unwritable_cache_is_a_clean_error(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    static cli_out o;
    cli_run("--op gemv --shape 1x256x256 --db /proc/no/such/tune.db --quiet", &o);
    CHECK_EQ_INT(o.code, 8);
    CHECK_STR_HAS(o.err, "/proc/no/such/tune.db");
    FILE *f = fopen("/tmp/at_not_sqlite.db", "w");
    if (f) {
        fputs("this is not a database\n", f);
        fclose(f);
    }
    cli_run("--op gemv --shape 1x256x256 --db /tmp/at_not_sqlite.db --quiet", &o);
    CHECK_EQ_INT(o.code, 8);
    char buf[64] = "";
    f = fopen("/tmp/at_not_sqlite.db", "r");
    if (f) {
        CHECK(fgets(buf, sizeof buf, f) != NULL);
        fclose(f);
    }
    CHECK(strcmp(buf, "this is not a database\n") == 0); /* untouched */
    remove("/tmp/at_not_sqlite.db");
}

/* ------------------------------------------------------------ norms */

/* Every candidate of `op` (spec `spec`) and both baselines pass the gate
** on shape (TxH): y against the fp64 reference, z bit for bit (add ops).
** Verification only (no timing): the CLI test below times. */
static void norm_all_correct(const char *op, const char *spec, const char *shape, at_dtype dtype)
{
    at_search_result res;
    int rc = tune_op(op, shape, dtype, spec, "templates", 1, &res);
    CHECK_EQ_INT(rc, AT_OK); /* a wrong baseline is AT_ERR_HARNESS here */
    CHECK(res.ncompiled > 0);
    CHECK_EQ_INT(res.ncompile_failed, 0);
    CHECK_EQ_INT(res.nwrong, 0);
    CHECK_EQ_INT(res.ncrashed, 0);
    CHECK_EQ_INT(res.ncorrect + res.nspills_rejected, res.ncompiled); /* spilling ones are not run */
    int strat[3] = {0, 0, 0};
    for (int i = 0; i < res.nrows; i++) {
        const at_trial *t = &res.rows[i].trial;
        if (t->state == AT_TRIAL_WRONG || t->state == AT_TRIAL_CRASHED)
            fprintf(stderr, "  %s %s: %s %s %s: %s\n", op, shape, at_trial_state_name(t->state), t->strategy,
                    t->params, t->reason);
        if (t->state == AT_TRIAL_OK)
            strat[res.rows[i].cand.strategy % 3]++;
    }
    printf("  %-17s %-9s %s: %d correct of %d compiled (warp_rows %d, block_row %d, split_row %d), "
           "%d copies in %d graph(s)\n",
           op, shape, at_dtype_name(dtype), res.ncorrect, res.ncompiled, strat[0], strat[1], strat[2], res.copies,
           res.groups);
    at_search_result_free(&res);
}

static void norm_rmsnorm_every_candidate_correct(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    norm_all_correct("rmsnorm", "search/norm.lua", "1x2048", AT_BF16);
    norm_all_correct("rmsnorm", "search/norm.lua", "3x2050", AT_BF16); /* TP_VEC = 2 */
    norm_all_correct("rmsnorm", "search/norm.lua", "4096x8192", AT_BF16);
    norm_all_correct("rmsnorm", "search/norm.lua", "16x2560", AT_FP16);
}

static void norm_add_rmsnorm_every_candidate_correct(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    norm_all_correct("add_rmsnorm", "search/norm.lua", "1x8192", AT_BF16);
    norm_all_correct("add_rmsnorm", "search/norm.lua", "3x2050", AT_BF16);
    norm_all_correct("add_rmsnorm", "search/norm.lua", "5x2051", AT_FP16); /* TP_VEC = 1 */
    norm_all_correct("add_rmsnorm", "search/norm.lua", "4096x4096", AT_BF16);
}

static void norm_gemma_rmsnorm_every_candidate_correct(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    norm_all_correct("gemma_rmsnorm", "search/norm.lua", "16x4096", AT_BF16);
    norm_all_correct("gemma_rmsnorm", "search/norm.lua", "1x2560", AT_FP16);
    norm_all_correct("gemma_rmsnorm", "search/norm.lua", "3x2050", AT_BF16);
}

static void norm_add_gemma_rmsnorm_every_candidate_correct(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    norm_all_correct("add_gemma_rmsnorm", "search/norm.lua", "3x2050", AT_BF16);
    norm_all_correct("add_gemma_rmsnorm", "search/norm.lua", "1x2048", AT_FP16);
    norm_all_correct("add_gemma_rmsnorm", "search/norm.lua", "4096x2048", AT_BF16);
}

/* The Gemma ops with fp32 weights (the norm spec with TP_WFP32 = 1 on its [NORM_OP] line). */
static void norm_gemma_fp32_weights_correct(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    static const char *const ops[2] = {"gemma_rmsnorm", "add_gemma_rmsnorm"};
    for (int i = 0; i < 2; i++) {
        char from[64], path[64], buf[1 << 16];
        snprintf(from, sizeof from, "search/norm.lua");
        snprintf(path, sizeof path, "/tmp/at_gpu_w32_%d.lua", (int)getpid());
        FILE *f = fopen(from, "rb");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = '\0';
        char *p = strstr(buf, "= 0 -- [NORM_OP]");
        CHECK(p != NULL);
        if (!p || !(f = fopen(path, "w")))
            continue;
        p[2] = '1';
        fputs(buf, f);
        fclose(f);
        norm_all_correct(ops[i], path, "3x2050", AT_BF16);
        norm_all_correct(ops[i], path, "1x8192", AT_BF16);
        remove(path);
    }
}

/* Planted bugs: two leave y right but skip (part of) the residual write z;
** only the z check catches them. The winner is never one of them. */
static void norm_gate_rejects_planted_bugs(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    at_search_result res;
    int rc = tune_op("add_rmsnorm", "5x1000", AT_BF16, "tests/fixtures/spec_norm_bugs.lua", "tests/fixtures/templates", 0,
                     &res);
    CHECK_EQ_INT(rc, AT_OK);
    CHECK_EQ_INT(res.ncompiled, 5);
    CHECK_EQ_INT(res.ncorrect, 1);
    CHECK_EQ_INT(res.nwrong, 4);
    for (int i = 0; i < res.nrows; i++) {
        const at_trial *t = &res.rows[i].trial;
        printf("  %s: %s %s\n", t->params, at_trial_state_name(t->state), t->reason);
        if (strstr(t->params, "TP_BUG=0"))
            CHECK_EQ_INT(t->state, AT_TRIAL_OK);
        else
            CHECK_EQ_INT(t->state, AT_TRIAL_WRONG);
        if (strstr(t->params, "TP_BUG=1") || strstr(t->params, "TP_BUG=4")) {
            CHECK_STR_HAS(t->reason, "residual output z wrong");
            CHECK(strstr(t->reason, "rel. error") == NULL); /* y itself was right */
        }
        if (strstr(t->params, "TP_BUG=4")) /* one element a row: <= 5 (z may equal r by chance) */
            CHECK(strstr(t->reason, "at 5 of 5000 ") || strstr(t->reason, "at 4 of 5000 ") ||
                  strstr(t->reason, "at 3 of 5000 "));
        if (strstr(t->params, "TP_BUG=2"))
            CHECK_STR_HAS(t->reason, "NaN"); /* the poison showed through */
        if (strstr(t->params, "TP_BUG=3"))
            CHECK_STR_HAS(t->reason, "rel. error");
    }
    CHECK(res.winner.strategy[0] != '\0');
    CHECK(strstr(res.winner.params, "TP_BUG=0") != NULL || strcmp(res.winner.strategy, "naive") == 0);
    CHECK(res.nbaselines == 2 && res.baselines[0].us > 0 && res.baselines[1].us > 0);
    at_search_result_free(&res);
}

static void norm_end_to_end_then_cached_then_forced(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    char args[512];
    static cli_out o;
    snprintf(args, sizeof args, "--op add_rmsnorm --shape 1x2048 --db %s --json --quiet", db_path);
    cli_run(args, &o);
    if (o.code != 0)
        fprintf(stderr, "  %s", o.err);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "\"from_cache\":false");
    CHECK_STR_HAS(o.out, "\"winner\":{\"strategy\":");
    CHECK_STR_HAS(o.out, "\"baseline\":{\"name\":\"norm_naive\"");
    CHECK_STR_HAS(o.out, "{\"name\":\"unfused\"");
    CHECK_STR_HAS(o.out, "\"eps\":1e-06");
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "\"from_cache\":true");
    snprintf(args, sizeof args, "--op add_rmsnorm --shape 1x2048 --db %s --quiet", db_path);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "cached");
    CHECK_STR_HAS(o.out, "naive");
    snprintf(args, sizeof args, "--op add_rmsnorm --shape 1x2048 --db %s --force --quiet", db_path);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "vs naive");
    CHECK_STR_HAS(o.out, "vs unfused");
    CHECK_STR_HAS(o.out, "cold inputs");
    CHECK_STR_HAS(o.out, "stored in");
    printf("%s", o.out);
    /* a bigger shape, another op, fp16: the table prints */
    snprintf(args, sizeof args, "--op gemma_rmsnorm --shape 128x4096 --dtype fp16 --db %s --quiet", db_path);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "vs unfused");
}

/* --- issue 5: the timing phase's strategies. Short: 1x2048x2048, a small
** budget. --- */

static int tune_with(const char *shape, const char *strategy, int budget, at_search_result *res)
{
    at_search_opts o = {.op = "gemv", .dtype = AT_BF16, .spec_path = "search/gemv.lua",
                        .templates_root = "templates", .db_path = db_path, .reps = 5, .force = 1,
                        .strategy = strategy, .budget = budget};
    int rc = at_shape_parse(shape, 3, &o.shape);
    if (rc == AT_OK)
        rc = at_search_run(&o, res);
    if (rc != AT_OK)
        fprintf(stderr, "  %s %s: %s\n", shape, strategy ? strategy : "(default)", at_errmsg());
    return rc;
}

/* The winner of res's key as the cache has it now. */
static int stored_winner(const at_search_result *res)
{
    at_cache *c = NULL;
    at_winner w;
    int found = 0;
    memset(&w, 0, sizeof w);
    if (at_cache_open(db_path, &c) == AT_OK)
        at_cache_get_winner(c, &res->key, &w, &found);
    at_winner_clear(&w);
    at_cache_close(c);
    return found;
}

static void each_strategy_tunes_and_stores_a_winner(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    const char *kinds[] = {"exhaustive", "random", "anneal", "halving"};
    for (int k = 0; k < 4; k++) {
        at_search_result res;
        int rc = tune_with("1x2048x2048", kinds[k], 24, &res);
        CHECK_EQ_INT(rc, AT_OK);
        CHECK(strcmp(res.search, kinds[k]) == 0);
        CHECK(res.winner.strategy[0] != '\0');
        CHECK(stored_winner(&res));
        CHECK(res.nmeasured > 0 && res.nmeasured + res.nnot_measured <= res.ncorrect);
        CHECK(res.nfinal > 0);
        if (k == 1 || k == 2) /* random, anneal: the budget is what they measure */
            CHECK(res.nmeasured <= (res.nwarm > 24 ? res.nwarm : 24));
        if (k == 3) /* halving: the budget is its first round */
            CHECK(res.nmeasured <= (res.nwarm > 24 ? res.nwarm : 24));
        for (int i = 0; i < res.nrows; i++) /* not measured: ok, no time, said so */
            if (res.rows[i].trial.state == AT_TRIAL_OK && res.rows[i].reps == 0)
                CHECK_STR_HAS(res.rows[i].trial.reason, "not measured");
        printf("  %-10s measured %d of %d, %lld replays, %d warm seeds, winner %s %s %.2f us (cuBLAS %.2f), "
               "timing %.1f s\n",
               kinds[k], res.nmeasured, res.ncorrect, res.cost_reps, res.nwarm, res.winner.strategy,
               res.winner.params, res.winner.us, res.base_us, res.t_time);
        at_search_result_free(&res);
    }
}

/* --strategy exhaustive measures every correct candidate, as the timing
** phase did before strategies: the same count, each at full replays. */
static void exhaustive_measures_every_correct_candidate(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    at_search_result res;
    int rc = tune_with("1x2048x2048", "exhaustive", 0, &res);
    CHECK_EQ_INT(rc, AT_OK);
    CHECK(res.ncorrect > 0);
    CHECK_EQ_INT(res.nmeasured, res.ncorrect);
    CHECK_EQ_INT(res.nnot_measured, 0);
    CHECK_EQ_INT(res.cost_reps, (long long)res.ncorrect * res.full_reps);
    for (int i = 0; i < res.nrows; i++)
        if (res.rows[i].trial.state == AT_TRIAL_OK)
            CHECK(res.rows[i].reps == res.full_reps || (res.rows[i].final && res.rows[i].reps == res.final_reps));
    printf("  exhaustive: %d correct, %d measured, %d spill (not timed), timing %.1f s, total %.1f s\n",
           res.ncorrect, res.nmeasured, res.nspills_rejected, res.t_time, res.t_total);
    at_search_result_free(&res);
    static cli_out o;
    char args[512];
    snprintf(args, sizeof args, "--op gemv --shape 1x2048x2048 --db %s --force --strategy exhaustive --json", db_path);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "\"not_measured\":0");
    CHECK_STR_HAS(o.out, "\"other_s\":");
}

/* Halving screens with short graphs (search_gpu.c SCREEN_US) built once per
** candidate and kept across its rungs: one capture per candidate, plus the
** last rung's and the final round's full graphs and the baselines'. */
static void halving_screens_with_short_kept_graphs(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    at_search_result res;
    CHECK_EQ_INT(tune_with("1x2048x2048", "halving", 0, &res), AT_OK);
    CHECK(res.screen_launches > 0 && res.screen_launches < res.launches);
    CHECK_EQ_INT(res.launches % res.screen_launches, 0); /* whole passes over the copies */
    CHECK_EQ_INT(res.screen_launches % res.copies, 0);
    CHECK(res.nmeasured > 100);
    int full = 0, screened = 0;
    for (int i = 0; i < res.nrows; i++) {
        const at_search_row *row = &res.rows[i];
        if (row->trial.state != AT_TRIAL_OK || row->reps == 0)
            continue;
        if (row->reps < res.full_reps) {
            screened++;
            CHECK_STR_HAS(row->trial.reason, "screened");
        } else {
            full++;
        }
    }
    CHECK(screened > 0 && full > 0);
    /* captures: a short graph per measured candidate, a full one for each
    ** candidate timed at full reps (last rung, final round), the baselines' */
    CHECK(res.ngraphs <= res.nmeasured + 2 * full + res.nbaselines + 1);
    printf("  halving: %d measured, %d at full reps, %d graphs (%.2f s), screening %d launches of %d, timing "
           "%.1f s\n",
           res.nmeasured, full, res.ngraphs, res.t_graph, res.screen_launches, res.launches, res.t_time);
    at_search_result_free(&res);
}

/* A shape next to a tuned one starts from that one's winner. */
static void warm_start_seeds_from_a_tuned_neighbour(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    at_search_result a, b;
    CHECK_EQ_INT(tune_with("1x2048x2048", NULL, 0, &a), AT_OK);
    CHECK_EQ_INT(tune_with("1x2048x4096", "anneal", 8, &b), AT_OK);
    printf("  1x2048x2048 won by %s %s; 1x2048x4096: %d warm seeds from %d shapes\n", a.winner.strategy,
           a.winner.params, b.nwarm, b.nwarm_shapes);
    if (strcmp(a.winner.strategy, "cublas") != 0) {
        int in_space = 0; /* the neighbour's winner is a live, correct candidate here */
        for (int i = 0; i < b.nrows; i++)
            in_space |= strcmp(b.rows[i].trial.strategy, a.winner.strategy) == 0 &&
                        strcmp(b.rows[i].trial.params, a.winner.params) == 0 &&
                        b.rows[i].trial.state == AT_TRIAL_OK;
        if (in_space)
            CHECK(b.nwarm >= 1);
    }
    at_search_result_free(&a);
    at_search_result_free(&b);
}

int main(void)
{
    snprintf(db_path, sizeof db_path, "/tmp/at_test_gpu_%d.db", (int)getpid());
    TT_RUN_ISOLATED(gate_rejects_planted_bugs);
    TT_RUN_ISOLATED(every_candidate_correct_1x2056x5000);
    TT_RUN_ISOLATED(every_candidate_correct_1x6144x32);
    TT_RUN_ISOLATED(every_candidate_correct_narrow_vectors);
    TT_RUN_ISOLATED(every_candidate_correct_fp16_and_m3);
    TT_RUN_ISOLATED(gemv_add_every_candidate_correct);
    TT_RUN_ISOLATED(fused_every_candidate_correct);
    TT_RUN_ISOLATED(fused_tunes_its_components_first);
    TT_RUN_ISOLATED(end_to_end_then_cached_then_forced);
    TT_RUN_ISOLATED(unwritable_cache_is_a_clean_error);
    TT_RUN_ISOLATED(norm_gate_rejects_planted_bugs);
    TT_RUN_ISOLATED(norm_rmsnorm_every_candidate_correct);
    TT_RUN_ISOLATED(norm_add_rmsnorm_every_candidate_correct);
    TT_RUN_ISOLATED(norm_gemma_rmsnorm_every_candidate_correct);
    TT_RUN_ISOLATED(norm_add_gemma_rmsnorm_every_candidate_correct);
    TT_RUN_ISOLATED(norm_gemma_fp32_weights_correct);
    TT_RUN_ISOLATED(norm_end_to_end_then_cached_then_forced);
    TT_RUN_ISOLATED(each_strategy_tunes_and_stores_a_winner);
    TT_RUN_ISOLATED(exhaustive_measures_every_correct_candidate);
    TT_RUN_ISOLATED(halving_screens_with_short_kept_graphs);
    TT_RUN_ISOLATED(warm_start_seeds_from_a_tuned_neighbour);
    return TT_DONE();
}
