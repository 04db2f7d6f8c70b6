/*
** test_gpu_skinny.c — the small-batch strategies (multi_token, mma, mma_bulk) on a
** GPU (label gpu; skips visibly without one): every live candidate of the
** M > 1 space is correct against the fp64 reference through the real
** pipeline (at_search_run, --force, a temporary cache; a few timed) on awkward shapes:
** K and N not multiples of any tile, narrow vectors, M = 2, 3, 5, 8, 16
** and 17 (more tokens than one block holds), bf16 and fp16.
*/
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autotune.h"
#include "tinytest.h"
#include "gpu_isolated.h"

static char db_path[256];

/* Tunes shape with --force into the temporary cache; every compiled
** candidate must be correct, and only the M > 1 strategies may be live. */
static void all_correct(const char *shape, at_dtype dtype)
{
    /* every compiled candidate is verified before any is timed; timing a
    ** few at random keeps the test's device minutes for the verification */
    at_search_opts o = {.op = "gemv", .dtype = dtype, .spec_path = "search/gemv.lua", .templates_root = "templates",
                        .db_path = db_path, .reps = 5, .force = 1, .strategy = "random", .budget = 4};
    at_search_result res;
    memset(&res, 0, sizeof res); /* freeable whatever happens below */
    int rc = at_shape_parse(shape, 3, &o.shape);
    if (rc == AT_OK)
        rc = at_search_run(&o, &res);
    if (rc != AT_OK)
        fprintf(stderr, "  %s: %s\n", shape, at_errmsg());
    CHECK_EQ_INT(rc, AT_OK);
    CHECK(res.ncompiled > 0);
    CHECK_EQ_INT(res.ncompile_failed, 0);
    CHECK_EQ_INT(res.nwrong, 0);
    CHECK_EQ_INT(res.ncrashed, 0);
    CHECK_EQ_INT(res.ncorrect + res.nspills_rejected, res.ncompiled); /* spilling ones are not run */
    CHECK(res.base_us > 0);
    int mt = 0, mma = 0, bulk = 0;
    for (int i = 0; i < res.nrows; i++) {
        const at_trial *t = &res.rows[i].trial;
        if (t->state == AT_TRIAL_PRUNED)
            continue;
        if (strcmp(t->strategy, "multi_token") == 0)
            mt++;
        else if (strcmp(t->strategy, "mma") == 0)
            mma++;
        else if (strcmp(t->strategy, "mma_bulk") == 0)
            bulk++;
        else
            CHECK(!"an M=1 strategy is live at M > 1");
        if (t->state == AT_TRIAL_WRONG || t->state == AT_TRIAL_CRASHED)
            fprintf(stderr, "  %s: %s %s: %s\n", at_trial_state_name(t->state), t->strategy, t->params, t->reason);
    }
    CHECK(mma > 0);
    CHECK(bulk > 0 || o.shape.K % 8 != 0); /* the H200 is sm_90: mma_bulk is live wherever rows are 16-byte aligned */
    printf("  %s %s: %d correct of %d compiled (multi_token %d, mma %d, mma_bulk %d); winner %s %s %.2f us vs cuBLAS "
           "%.2f us\n",
           shape, at_dtype_name(dtype), res.ncorrect, res.ncompiled, mt, mma, bulk, res.winner.strategy,
           res.winner.params, res.winner.us, res.base_us);
    at_search_result_free(&res);
}

/* K = 2056: a multiple of 8, not of the 32-element mma step nor of any
** unrolled chunk; N = 1000: not a multiple of 16 nor of any block_n. */
static void every_candidate_correct_m2_m3(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    all_correct("2x2056x1000", AT_BF16);
    all_correct("2x2056x1000", AT_FP16);
    all_correct("3x2056x1000", AT_BF16);
    all_correct("3x2056x1000", AT_FP16);
}

static void every_candidate_correct_m5_m8(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    all_correct("5x2056x1000", AT_BF16);
    all_correct("5x2056x1000", AT_FP16);
    all_correct("8x2056x1000", AT_BF16);
    all_correct("8x2056x1000", AT_FP16);
}

static void every_candidate_correct_m16_m17(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    all_correct("16x2056x1000", AT_BF16);
    all_correct("16x2056x1000", AT_FP16);
    all_correct("17x2056x300", AT_BF16); /* two blocks along y */
}

static void every_candidate_correct_narrow_vectors(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    all_correct("16x2052x100", AT_BF16); /* TP_VEC = 4 */
    all_correct("3x2050x77", AT_FP16);   /* TP_VEC = 2 */
    all_correct("5x2051x333", AT_BF16);  /* TP_VEC = 1 */
}

static void every_candidate_correct_few_rows(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    all_correct("4x6144x32", AT_BF16); /* N = 32: two row tiles, long K */
    all_correct("16x2048x40", AT_FP16);
}

int main(void)
{
    snprintf(db_path, sizeof db_path, "/tmp/at_test_gpu_skinny_%d.db", (int)getpid());
    TT_RUN_ISOLATED(every_candidate_correct_m2_m3);
    TT_RUN_ISOLATED(every_candidate_correct_m5_m8);
    TT_RUN_ISOLATED(every_candidate_correct_m16_m17);
    TT_RUN_ISOLATED(every_candidate_correct_narrow_vectors);
    TT_RUN_ISOLATED(every_candidate_correct_few_rows);
    remove(db_path);
    return TT_DONE();
}
