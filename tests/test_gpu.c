/*
** test_gpu.c — what only a GPU can show (label gpu; skips visibly without
** one): every candidate of the default GEMV space is correct on awkward
** shapes (K and N not multiples of any tile, narrow vectors, M > 1, fp16);
** the gate rejects planted bugs; an end-to-end tune, its cached rerun and
** --force through the CLI; an unwritable cache is a clean error. The same
** for the RMSNorm family: every candidate of each op (and both baselines)
** correct on awkward TxH shapes, odd H, the residual output z checked,
** fp32 Gemma weights; planted bugs (z not written) rejected; a CLI tune.
** The norm tests were written without a GPU and have not run on one yet.
*/
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autotune.h"
#include "cli_run.h"
#include "tinytest.h"

/* Each test runs in a child process: a candidate that kills its CUDA
** context must not take the later tests with it, and the parent never
** initialises CUDA (a process must not fork after cuInit). */
static int child_says_gpu(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*init)(unsigned) = h ? (int (*)(unsigned))dlsym(h, "cuInit") : NULL;
    int (*count)(int *) = h ? (int (*)(int *))dlsym(h, "cuDeviceGetCount") : NULL;
    int n = 0;
    return init && count && init(0) == 0 && count(&n) == 0 && n > 0;
}

static int gpu_present(void)
{
    static int cached = -1;
    if (cached < 0) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0)
            _exit(child_says_gpu() ? 0 : 1);
        int st = 0;
        cached = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    return cached;
}

/* TT_RUN in a child: exit 0 passed, 1 failed, 2 skipped. */
#define TT_RUN_ISOLATED(fn)                                                                        \
    do {                                                                                           \
        fflush(NULL);                                                                              \
        pid_t pid = fork();                                                                        \
        if (pid == 0) {                                                                            \
            tt_cur_failed = tt_cur_skipped = 0;                                                    \
            fn();                                                                                  \
            fflush(NULL);                                                                          \
            _exit(tt_cur_failed ? 1 : tt_cur_skipped ? 2 : 0);                                     \
        }                                                                                          \
        int st = 0, code = 1;                                                                      \
        if (pid > 0 && waitpid(pid, &st, 0) == pid)                                                \
            code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;                                            \
        if (code == 0) {                                                                           \
            printf("  ok   %s\n", #fn);                                                            \
            tt_passed++;                                                                           \
        } else if (code == 2) {                                                                    \
            tt_skipped++;                                                                          \
        } else {                                                                                   \
            printf("  FAIL %s%s\n", #fn, WIFSIGNALED(st) ? " (crashed)" : "");                     \
            tt_failed++;                                                                           \
        }                                                                                          \
    } while (0)

static char db_path[256];

static int tune_op(const char *op, const char *shape, at_dtype dtype, const char *spec, const char *tpl,
                   int verify_only, at_search_result *res)
{
    at_search_opts o = {.op = op, .dtype = dtype, .spec_path = spec, .templates_root = tpl,
                        .db_path = db_path, .reps = 5, .force = 1, .verify_only = verify_only};
    int rc = at_shape_parse(shape, strcmp(op, "gemv") == 0 ? 3 : 2, &o.shape);
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
    CHECK_EQ_INT(res.ncorrect, res.ncompiled);
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
    CHECK_EQ_INT(res.ncorrect, res.ncompiled);
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
    norm_all_correct("rmsnorm", "search/rmsnorm.lua", "1x2048", AT_BF16);
    norm_all_correct("rmsnorm", "search/rmsnorm.lua", "3x2050", AT_BF16); /* TP_VEC = 2 */
    norm_all_correct("rmsnorm", "search/rmsnorm.lua", "4096x8192", AT_BF16);
    norm_all_correct("rmsnorm", "search/rmsnorm.lua", "16x2560", AT_FP16);
}

static void norm_add_rmsnorm_every_candidate_correct(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    norm_all_correct("add_rmsnorm", "search/add_rmsnorm.lua", "1x8192", AT_BF16);
    norm_all_correct("add_rmsnorm", "search/add_rmsnorm.lua", "3x2050", AT_BF16);
    norm_all_correct("add_rmsnorm", "search/add_rmsnorm.lua", "5x2051", AT_FP16); /* TP_VEC = 1 */
    norm_all_correct("add_rmsnorm", "search/add_rmsnorm.lua", "4096x4096", AT_BF16);
}

static void norm_gemma_rmsnorm_every_candidate_correct(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    norm_all_correct("gemma_rmsnorm", "search/gemma_rmsnorm.lua", "16x4096", AT_BF16);
    norm_all_correct("gemma_rmsnorm", "search/gemma_rmsnorm.lua", "1x2560", AT_FP16);
    norm_all_correct("gemma_rmsnorm", "search/gemma_rmsnorm.lua", "3x2050", AT_BF16);
}

static void norm_add_gemma_rmsnorm_every_candidate_correct(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    norm_all_correct("add_gemma_rmsnorm", "search/add_gemma_rmsnorm.lua", "3x2050", AT_BF16);
    norm_all_correct("add_gemma_rmsnorm", "search/add_gemma_rmsnorm.lua", "1x2048", AT_FP16);
    norm_all_correct("add_gemma_rmsnorm", "search/add_gemma_rmsnorm.lua", "4096x2048", AT_BF16);
}

/* The Gemma specs with fp32 weights (TP_WFP32 = 1 on their [NORM_OP] line). */
static void norm_gemma_fp32_weights_correct(void)
{
    if (!gpu_present())
        TT_SKIP("no GPU");
    static const char *const ops[2] = {"gemma_rmsnorm", "add_gemma_rmsnorm"};
    for (int i = 0; i < 2; i++) {
        char from[64], path[64], buf[1 << 16];
        snprintf(from, sizeof from, "search/%s.lua", ops[i]);
        snprintf(path, sizeof path, "/tmp/at_gpu_w32_%d.lua", (int)getpid());
        FILE *f = fopen(from, "rb");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = '\0';
        char *p = strstr(buf, ", 0 -- [NORM_OP]");
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

int main(void)
{
    snprintf(db_path, sizeof db_path, "/tmp/at_test_gpu_%d.db", (int)getpid());
    TT_RUN_ISOLATED(gate_rejects_planted_bugs);
    TT_RUN_ISOLATED(every_candidate_correct_1x2056x5000);
    TT_RUN_ISOLATED(every_candidate_correct_1x6144x32);
    TT_RUN_ISOLATED(every_candidate_correct_narrow_vectors);
    TT_RUN_ISOLATED(every_candidate_correct_fp16_and_m3);
    TT_RUN_ISOLATED(end_to_end_then_cached_then_forced);
    TT_RUN_ISOLATED(unwritable_cache_is_a_clean_error);
    TT_RUN_ISOLATED(norm_gate_rejects_planted_bugs);
    TT_RUN_ISOLATED(norm_rmsnorm_every_candidate_correct);
    TT_RUN_ISOLATED(norm_add_rmsnorm_every_candidate_correct);
    TT_RUN_ISOLATED(norm_gemma_rmsnorm_every_candidate_correct);
    TT_RUN_ISOLATED(norm_add_gemma_rmsnorm_every_candidate_correct);
    TT_RUN_ISOLATED(norm_gemma_fp32_weights_correct);
    TT_RUN_ISOLATED(norm_end_to_end_then_cached_then_forced);
    return TT_DONE();
}
