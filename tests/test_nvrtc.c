/*
** test_nvrtc.c — compilation without a GPU: every candidate of the default
** GEMV space compiles for sm_89 and sm_90 (bf16 and fp16, and on shapes
** whose K forces narrower vectors), with ptxas resource use read back; a
** template that does not compile becomes a recorded compile-fail result.
*/
#include "autotune.h"
#include "tinytest.h"

#include <stdlib.h>

static int dry_run(const char *shape, at_dtype dtype, int arch, const char *spec, const char *tpl,
                   at_search_result *res)
{
    at_search_opts o = {.op = "gemv", .dtype = dtype, .spec_path = spec, .templates_root = tpl,
                        .arch = arch, .dry_run = 1, .reps = 7};
    int rc = at_shape_parse(shape, 3, &o.shape);
    if (rc != AT_OK)
        return rc;
    return at_search_run(&o, res);
}

/* Every live candidate compiled, none failed, registers reported. */
static void check_space(const char *shape, at_dtype dtype, int arch)
{
    at_search_result res;
    int rc = dry_run(shape, dtype, arch, "search/gemv.lua", "templates", &res);
    if (rc != AT_OK)
        fprintf(stderr, "  %s sm_%d: %s\n", shape, arch, at_errmsg());
    CHECK_EQ_INT(rc, AT_OK);
    CHECK(res.ncand > 0);
    CHECK(res.ncompiled > 0);
    CHECK_EQ_INT(res.ncompile_failed, 0);
    CHECK_EQ_INT(res.ncompiled + res.npruned, res.ncand);
    CHECK_EQ_INT(res.arch, arch);
    int with_regs = 0;
    for (int i = 0; i < res.nrows; i++) {
        const at_trial *t = &res.rows[i].trial;
        if (t->state == AT_TRIAL_PRUNED)
            CHECK(t->reason[0] != '\0'); /* every pruned candidate says why */
        else if (t->regs > 0)
            with_regs++;
    }
    CHECK_EQ_INT(with_regs, res.ncompiled);
    printf("  %s %s sm_%d: %d candidates, %d pruned, %d compiled, %d spill, %.1f s\n", shape,
           at_dtype_name(dtype), arch, res.ncand, res.npruned, res.ncompiled, res.nspills, res.t_compile);
    at_search_result_free(&res);
}

static void default_space_compiles_sm90(void) { check_space("1x2048x8192", AT_BF16, 90); }
static void default_space_compiles_sm89(void) { check_space("1x2048x8192", AT_BF16, 89); }
static void fp16_space_compiles_sm90(void) { check_space("1x2048x8192", AT_FP16, 90); }
static void narrow_vectors_compile(void)
{
    check_space("1x2050x77", AT_BF16, 90); /* K % 4 = 2: TP_VEC = 2 */
    check_space("1x2051x33", AT_FP16, 89); /* odd K: TP_VEC = 1 */
}

static void compile_failure_is_a_result(void)
{
    at_search_result res;
    int rc = dry_run("1x64x64", AT_BF16, 90, "tests/fixtures/spec_broken_template.lua",
                     "tests/fixtures/templates", &res);
    CHECK_EQ_INT(rc, AT_OK);
    CHECK_EQ_INT(res.ncand, 2);
    CHECK_EQ_INT(res.ncompiled, 1);
    CHECK_EQ_INT(res.ncompile_failed, 1);
    int found = 0;
    for (int i = 0; i < res.nrows; i++)
        if (res.rows[i].trial.state == AT_TRIAL_COMPILE_FAIL) {
            found++;
            CHECK_STR_HAS(res.rows[i].trial.params, "TP_BREAK=1");
            CHECK_STR_HAS(res.rows[i].trial.reason, "error");
        }
    CHECK_EQ_INT(found, 1);
    at_search_result_free(&res);
}

/* A second compile of the same job comes from the cubin cache, byte for
** byte; a cache entry missing its log is compiled again; another option is
** another entry. */
static void cubin_cache_hits_and_misses(void)
{
    char dir[] = "/tmp/at_cubins_XXXXXX";
    at_templates *t = NULL;
    const char *src = NULL;
    CHECK(mkdtemp(dir) != NULL);
    CHECK_EQ_INT(at_templates_open("templates", &t), AT_OK);
    CHECK_EQ_INT(at_templates_source(t, "gemv/gemv_warp_row.cu", &src), AT_OK);
    at_compile_job a = {.tpl = t, .name = "gemv/gemv_warp_row.cu", .source = src, .arch = 90,
                        .dtype = AT_BF16, .cubin_dir = dir};
    snprintf(a.options, sizeof a.options, "-DTP_WARPS=4 -DTP_ROWS=2");
    at_compile_job b = a, c = a, d = a;
    CHECK_EQ_INT(at_nvrtc_compile(&a), AT_OK);
    CHECK(a.ok && !a.cached && a.regs > 0);
    CHECK_EQ_INT(at_nvrtc_compile(&b), AT_OK);
    CHECK(b.ok && b.cached);
    CHECK_EQ_INT(b.regs, a.regs); /* ptxas report kept with the cubin */
    CHECK(b.cubin_size == a.cubin_size && memcmp(a.cubin, b.cubin, a.cubin_size) == 0);
    snprintf(c.options, sizeof c.options, "-DTP_WARPS=8 -DTP_ROWS=2");
    CHECK_EQ_INT(at_nvrtc_compile(&c), AT_OK);
    CHECK(c.ok && !c.cached);
    /* remove every .log: entries without one are incomplete, so recompile */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -f %s/*.log", dir);
    CHECK(system(cmd) == 0);
    CHECK_EQ_INT(at_nvrtc_compile(&d), AT_OK);
    CHECK(d.ok && !d.cached);
    at_compile_job_clear(&a);
    at_compile_job_clear(&b);
    at_compile_job_clear(&c);
    at_compile_job_clear(&d);
    at_templates_free(t);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

static void template_escape_refused(void)
{
    at_templates *t = NULL;
    const char *src = NULL;
    CHECK_EQ_INT(at_templates_open("templates", &t), AT_OK);
    CHECK_EQ_INT(at_templates_source(t, "../CMakeLists.txt", &src), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "leaves the templates folder");
    CHECK_EQ_INT(at_templates_source(t, "/etc/passwd", &src), AT_ERR_SPEC);
    CHECK_EQ_INT(at_templates_source(t, "gemv/../../x.cu", &src), AT_ERR_SPEC);
    CHECK(src == NULL);
    CHECK_EQ_INT(at_templates_source(t, "gemv/gemv_warp_row.cu", &src), AT_OK);
    CHECK_STR_HAS(src, "gemv_warp_row");
    CHECK(at_templates_nheaders(t) >= 2);
    at_templates_free(t);
}

int main(void)
{
    TT_RUN(template_escape_refused);
    TT_RUN(cubin_cache_hits_and_misses);
    TT_RUN(compile_failure_is_a_result);
    TT_RUN(default_space_compiles_sm90);
    TT_RUN(default_space_compiles_sm89);
    TT_RUN(fp16_space_compiles_sm90);
    TT_RUN(narrow_vectors_compile);
    return TT_DONE();
}
