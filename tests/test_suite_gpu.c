/*
** test_suite_gpu.c — suites on a real GPU (label gpu; skips visibly without
** one): a suite tunes every entry, a rerun answers all of them from the
** cache, a suite interrupted after its first entry continues from there,
** and the second entry compiles while the first is on the GPU.
*/
#include <stdlib.h>
#include <unistd.h>

#include "autotune.h"
#include "cli_run.h"
#include "devices.h"
#include "tinytest.h"

static char suite_path[128], db_path[128];

static int gpu_count(void)
{
    int n = 0;
    return at_devices_count(&n) == AT_OK ? n : 0;
}

static void write_suite(void)
{
    FILE *f = fopen(suite_path, "w");
    if (!f)
        return;
    fputs("return { name = 'gpu-test', entries = {\n"
          "  tune('gemv', {'1x2048x2048', '2x2048x2048', '1x2048x5120'}),\n"
          "} }\n",
          f);
    fclose(f);
}

static const char *count_of(const char *json, const char *key)
{
    const char *p = strstr(json, "\"summary\":");
    return p ? strstr(p, key) : NULL;
}

static void suite_tunes_then_answers_from_cache(void)
{
    static cli_out o;
    char args[512];
    if (gpu_count() == 0)
        TT_SKIP("no GPU");
    snprintf(args, sizeof args, "--suite %s --db %s --json --quiet --force", suite_path, db_path);
    cli_run(args, &o);
    if (o.code != 0)
        fprintf(stderr, "  first run: code %d: %s\n", o.code, o.err);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(count_of(o.out, "\"ok\":3"), "\"ok\":3,\"from_cache\":0");
    CHECK(strstr(o.out, "\"pct_ceiling\":null") == NULL); /* every entry timed */
    printf("%s", o.out);
    snprintf(args, sizeof args, "--suite %s --db %s --json --quiet --devices all", suite_path, db_path);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(count_of(o.out, "\"ok\":3"), "\"ok\":3,\"from_cache\":3");
    snprintf(args, sizeof args, "--suite %s --db %s", suite_path, db_path);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "done    3 of 3 ok (3 from the cache)");
    printf("%s", o.out);
}

/* Ctrl-C (SIGINT to the parent, forwarded to the busy worker) after the
** first entry: exit 130; the rerun answers that entry from the cache and
** tunes the rest. */
static void interrupted_suite_continues(void)
{
    static cli_out o;
    char cmd[8192], err[160], out[160];
    if (gpu_count() == 0)
        TT_SKIP("no GPU");
    snprintf(err, sizeof err, "/tmp/at_suite_gpu_err.%d", (int)getpid());
    snprintf(out, sizeof out, "/tmp/at_suite_gpu_out.%d", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "%s --suite %s --db %s --force >%s 2>%s </dev/null & pid=$!; "
             "for i in $(seq 600); do grep -q '\\[1/3\\]' %s && break; sleep 0.2; done; "
             "kill -INT $pid; wait $pid",
             cli_bin(), suite_path, db_path, out, err, err);
    int st = system(cmd);
    o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    slurp(out, o.out, sizeof o.out);
    slurp(err, o.err, sizeof o.err);
    remove(out);
    remove(err);
    CHECK_EQ_INT(o.code, 130);
    CHECK_STR_HAS(o.err, "interrupted");
    char args[512];
    snprintf(args, sizeof args, "--suite %s --db %s --json --quiet", suite_path, db_path);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    const char *first = strstr(o.out, "\"shape\":\"1x2048x2048\"");
    CHECK(first != NULL);
    if (first)
        CHECK_STR_HAS(first, "\"from_cache\":true");
}

/* `"key":N` in the entry whose dtype is `dtype`; -1 when absent */
static int entry_int(const char *json, const char *dtype, const char *key)
{
    char want[32], k[40];
    int v = -1;
    snprintf(want, sizeof want, "\"dtype\":\"%s\"", dtype);
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *e = strstr(json, want), *p = e ? strstr(e, k) : NULL;
    if (p && sscanf(p + strlen(k), "%d", &v) != 1)
        v = -1;
    return v;
}

/* Two entries with no kernel in common (bf16, then fp16): with compile-ahead
** the fp16 entry finds every kernel it compiles in the cubin cache, put there
** while the bf16 entry was on the GPU; with --no-compile-ahead, none. */
static void next_entry_compiles_ahead(void)
{
    static cli_out o;
    char dir[96], path[160], cwd[512], cmd[256], args[512];
    if (gpu_count() == 0)
        TT_SKIP("no GPU");
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    for (int ahead = 1; ahead >= 0; ahead--) {
        snprintf(dir, sizeof dir, "/tmp/at_suite_ahead_%d_%d", (int)getpid(), ahead);
        snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
        CHECK_EQ_INT(system(cmd), 0);
        snprintf(path, sizeof path, "%s/s.lua", dir);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        if (!f)
            return;
        fprintf(f,
                "local spec = '%s/tests/fixtures/spec_good.lua'\n"
                "return { name = 'ahead', entries = {\n"
                "  tune('gemv', '1x2048x2048', {spec = spec, dtype = 'bf16'}),\n"
                "  tune('gemv', '1x2048x2048', {spec = spec, dtype = 'fp16'}),\n"
                "} }\n",
                cwd);
        fclose(f);
        snprintf(args, sizeof args, "--suite %s --db %s/tune.db --json --quiet%s", path, dir,
                 ahead ? "" : " --no-compile-ahead");
        cli_run(args, &o);
        if (o.code != 0)
            fprintf(stderr, "  code %d: %s\n", o.code, o.err);
        CHECK_EQ_INT(o.code, 0);
        CHECK_STR_HAS(count_of(o.out, "\"ok\":2"), "\"ok\":2,\"from_cache\":0");
        int first = entry_int(o.out, "bf16", "compile_cached");
        int compiled = entry_int(o.out, "fp16", "compiled"), cached = entry_int(o.out, "fp16", "compile_cached");
        printf("  compile-ahead %s: bf16 %d cached; fp16 %d compiled, %d of them cached\n", ahead ? "on" : "off",
               first, compiled, cached);
        CHECK_EQ_INT(first, 0); /* a fresh folder */
        CHECK(compiled >= 5);
        CHECK_EQ_INT(cached, ahead ? compiled : 0);
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK_EQ_INT(system(cmd), 0);
    }
}

int main(void)
{
    char dir[96], cmd[160];
    snprintf(dir, sizeof dir, "/tmp/at_suite_gpu_%d", (int)getpid());
    snprintf(suite_path, sizeof suite_path, "%s/s.lua", dir);
    snprintf(db_path, sizeof db_path, "%s/tune.db", dir); /* cubins go beside it */
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    if (system(cmd) == 0)
        write_suite();
    TT_RUN(suite_tunes_then_answers_from_cache);
    TT_RUN(interrupted_suite_continues);
    TT_RUN(next_entry_compiles_ahead);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "  could not remove %s\n", dir);
    return TT_DONE();
}
