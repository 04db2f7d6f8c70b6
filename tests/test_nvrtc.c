/*
** test_nvrtc.c — compilation without a GPU: every candidate of the default
** GEMV space compiles for sm_89 and sm_90 (bf16 and fp16, and on shapes
** whose K forces narrower vectors), with ptxas resource use read back; a
** template that does not compile becomes a recorded compile-fail result;
** the compiling happens in a child process, never in the caller's.
*/
#include "autotune.h"
#include "tinytest.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

static const char TINY_KERNEL[] =
    "extern \"C\" __global__ void k(float *y) { y[threadIdx.x] = 2.0f * TP_A; }\n";

static at_compile_job tiny_job(int a)
{
    at_compile_job j;
    memset(&j, 0, sizeof j);
    j.name = "tiny.cu";
    j.source = TINY_KERNEL;
    snprintf(j.options, sizeof j.options, "-DTP_A=%d", a);
    j.arch = 90;
    j.dtype = AT_BF16;
    return j;
}

/* Whether NVRTC's builtins library (loaded by the first compile) is mapped
** into this process. */
static int nvrtc_builtins_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, "nvrtc-builtins") != NULL;
    if (f)
        fclose(f);
    return found;
}

/* at_nvrtc_compile_all compiles in a child: the results (cubin, log,
** registers) come back, and NVRTC never ran here, which is what keeps
** the GPU workers forked later able to cuInit (seen on the H200). Must run
** before anything else in this program compiles in-process. */
static void compile_all_runs_nvrtc_in_a_child(void)
{
    at_compile_job jobs[3] = {tiny_job(1), tiny_job(2), tiny_job(3)};
    CHECK(!nvrtc_builtins_mapped());
    CHECK_EQ_INT(at_nvrtc_compile_all(jobs, 3, 2, NULL, NULL), AT_OK);
    for (int i = 0; i < 3; i++) {
        CHECK(jobs[i].done && jobs[i].ok && !jobs[i].cached);
        CHECK(jobs[i].cubin != NULL && jobs[i].cubin_size > 0);
        CHECK(jobs[i].log != NULL && jobs[i].regs > 0);
    }
    CHECK(!nvrtc_builtins_mapped());
    /* the probe can see an in-process compile: do one in a child of ours */
    pid_t pid = fork();
    if (pid == 0) {
        at_compile_job j = tiny_job(4);
        int ok = at_nvrtc_compile_threads(&j, 1, 1, NULL, NULL) == AT_OK && j.ok;
        _exit(ok && nvrtc_builtins_mapped() ? 0 : 1);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    for (int i = 0; i < 3; i++)
        at_compile_job_clear(&jobs[i]);
}

/* A stop flag already set: no job runs, each comes back not done; a flag
** left clear compiles all. */
static void compile_all_honours_the_stop_flag(void)
{
    volatile int stop = 1;
    at_compile_job jobs[2] = {tiny_job(5), tiny_job(6)};
    jobs[0].stop = jobs[1].stop = &stop;
    CHECK_EQ_INT(at_nvrtc_compile_all(jobs, 2, 2, NULL, NULL), AT_OK);
    CHECK(!jobs[0].done && !jobs[1].done && !jobs[0].ok && !jobs[1].ok);
    stop = 0;
    CHECK_EQ_INT(at_nvrtc_compile_all(jobs, 2, 2, NULL, NULL), AT_OK);
    CHECK(jobs[0].done && jobs[0].ok && jobs[1].done && jobs[1].ok);
    for (int i = 0; i < 2; i++)
        at_compile_job_clear(&jobs[i]);
}

/* Compiled rows with TP_PDL=0 whose TP_PDL=1 twin (same strategy, same
** other parameters) compiled too. */
static int pdl_twins(const at_search_result *res)
{
    int n = 0;
    for (int i = 0; i < res->nrows; i++) {
        const at_trial *a = &res->rows[i].trial;
        const char *p = strstr(a->params, "TP_PDL=0");
        if (a->state == AT_TRIAL_PRUNED || a->regs <= 0 || !p)
            continue;
        char twin[sizeof a->params];
        snprintf(twin, sizeof twin, "%s", a->params);
        twin[p - a->params + 7] = '1';
        for (int j = 0; j < res->nrows; j++) {
            const at_trial *b = &res->rows[j].trial;
            if (b->state != AT_TRIAL_PRUNED && b->regs > 0 && strcmp(b->strategy, a->strategy) == 0 &&
                strcmp(b->params, twin) == 0) {
                n++;
                break;
            }
        }
    }
    return n;
}

/* Every live candidate compiled, none failed, registers reported; on
** sm_90+ a TP_PDL=0 candidate shares its TP_PDL=1 twin's program (search.c
** [PDL_LAUNCH]), before sm_90 every candidate is a program of its own. */
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
    int twins = pdl_twins(&res);
    CHECK_EQ_INT(res.nprograms, arch >= 90 ? res.ncompiled - twins : res.ncompiled);
    if (arch >= 90)
        CHECK(twins > 0);
    printf("  %s %s sm_%d: %d candidates, %d pruned, %d compiled (%d programs), %d spill, %.1f s\n", shape,
           at_dtype_name(dtype), arch, res.ncand, res.npruned, res.ncompiled, res.nprograms, res.nspills,
           res.t_compile);
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
** byte; a cache entry missing its log, or whose log lacks the ptxas report
** (as NVRTC 12.9+ gives for a program it served from its own cache), is
** compiled again and stored whole; another option is another entry. */
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
    at_compile_job b = a, c = a, d = a, e = a, f = a;
    CHECK_EQ_INT(at_nvrtc_compile(&a), AT_OK);
    CHECK(a.ok && !a.cached && a.regs > 0 && a.reported);
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
    /* empty every .log: the cubins are there, their reports are not */
    snprintf(cmd, sizeof cmd, "for f in %s/*.log; do : > \"$f\"; done", dir);
    CHECK(system(cmd) == 0);
    CHECK_EQ_INT(at_nvrtc_compile(&e), AT_OK);
    CHECK(e.ok && !e.cached && e.reported);
    CHECK_EQ_INT(e.regs, a.regs);
    CHECK_EQ_INT(at_nvrtc_compile(&f), AT_OK); /* the entry was stored again, whole */
    CHECK(f.ok && f.cached && f.reported);
    CHECK_EQ_INT(f.regs, a.regs);
    at_compile_job_clear(&e);
    at_compile_job_clear(&f);
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
    TT_RUN(compile_all_runs_nvrtc_in_a_child); /* first: nothing compiled here yet */
    TT_RUN(compile_all_honours_the_stop_flag);
    TT_RUN(template_escape_refused);
    TT_RUN(cubin_cache_hits_and_misses);
    TT_RUN(compile_failure_is_a_result);
    TT_RUN(default_space_compiles_sm90);
    TT_RUN(default_space_compiles_sm89);
    TT_RUN(fp16_space_compiles_sm90);
    TT_RUN(narrow_vectors_compile);
    return TT_DONE();
}
