/*
** test_cli.c — the command line as a user meets it without a GPU: --help,
** every kind of bad argument gives a one-line message naming it and the
** documented exit code, and --dry-run works with no GPU and no cache.
*/
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autotune.h"
#include "cli_run.h"
#include "tinytest.h"

static int has_gpu_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return h != NULL;
}

static void help_documents_options_and_exit_codes(void)
{
    static cli_out o;
    cli_run("--help", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "--shape");
    CHECK_STR_HAS(o.out, "--dry-run");
    CHECK_STR_HAS(o.out, "--json");
    CHECK_STR_HAS(o.out, "--force");
    CHECK_STR_HAS(o.out, "Exit codes");
    CHECK_STR_HAS(o.out, "add_gemma_rmsnorm"); /* the norm ops, their shape and eps */
    CHECK_STR_HAS(o.out, "TxH");
    CHECK_STR_HAS(o.out, "--eps");
    cli_run("--version", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, AT_TUNER_VERSION);
}

/* Each bad invocation: exit code, message naming the problem, one line. */
static void bad_arguments_exit_2(void)
{
    static const struct {
        const char *args, *needle;
        int code;
    } cases[] = {
        {"", "--op is required", 2},
        {"--op gemv", "--shape is required", 2},
        {"--op conv --shape 1x2x3", "unknown op 'conv'", 2},
        {"--op gemv --shape 1x0x8192", "bad shape '1x0x8192'", 2},
        {"--op gemv --shape abc", "bad shape 'abc'", 2},
        {"--op gemv --shape 1x2048x99999999999", "larger than", 2},
        {"--op gemv --shape 1x2147483647x2147483647", "elements", 2},
        {"--op gemv --shape 1x2048x8192x2", "3 dimensions", 2},
        {"--op gemv --shape 1x2048x8192 --dtype fp8", "unknown dtype 'fp8'", 2},
        {"--op gemv --shape 1x2048x8192 --reps 2", "--reps", 2},
        {"--op gemv --shape 1x2048x8192 --reps x", "--reps", 2},
        {"--op gemv --shape 1x2048x8192 --bogus", "unknown option '--bogus'", 2},
        {"--op gemv --shape", "--shape needs a value", 2},
        {"--op gemv --shape 1x64x64 --dry-run --arch sm_xx", "--arch", 2},
        {"--op gemv --shape 1x64x64 --arch sm_90", "--arch applies to --dry-run", 2},
        {"--op gemv --shape 1x64x64 --dry-run --spec /nonexistent/gemv.lua", "/nonexistent/gemv.lua", 3},
        /* before Ampere no bf16 GEMV compiles: an empty space that says why */
        {"--op gemv --shape 1x2048x2048 --dry-run --arch sm_75", "bf16_needs_sm80", 3},
        /* the norm ops: TxH shapes, eps */
        {"--op rmsnorm", "--shape 1x2048", 2},
        {"--op add_rmsnorm --shape 1x2048x8192", "takes a TxH shape", 2},
        {"--op gemv --shape 1x2048", "takes an MxKxN shape", 2},
        {"--op gemv_add --shape 1x2048", "takes an MxKxN shape", 2},
        {"--op gemv_add --shape 1x2048x2048 --eps 1e-5", "--eps applies to the ops with a norm, not gemv_add", 2},
        {"--op gemv_swiglu --shape 1x2048x6144 --eps 1e-5", "--eps applies to the ops with a norm, not gemv_swiglu", 2},
        {"--op rmsnorm --shape 1x2048x8192x2", "TxH with 2 dimensions", 2},
        {"--op rmsnorm --shape 0x2048", "at least 1", 2},
        {"--op gemma_rmsnorm --shape 1x2048 --eps -1e-6", "--eps: '-1e-6'", 2},
        {"--op gemma_rmsnorm --shape 1x2048 --eps 0", "--eps: '0'", 2},
        {"--op gemma_rmsnorm --shape 1x2048 --eps 2", "--eps: '2'", 2},
        {"--op gemma_rmsnorm --shape 1x2048 --eps abc", "--eps: 'abc'", 2},
        {"--op gemma_rmsnorm --shape 1x2048 --eps nan", "--eps: 'nan'", 2},
        {"--op gemma_rmsnorm --shape 1x2048 --eps 1e-50", "--eps: '1e-50'", 2},
        {"--op rmsnorm --shape 1x2048 --eps", "--eps needs a value", 2},
        {"--op gemv --shape 1x64x64 --eps 1e-6", "--eps applies to the ops with a norm", 2},
        {"--op rmsnorm_gemv --shape 1x2048 --eps 1e-6", "op rmsnorm_gemv takes an MxKxN shape", 2},
        {"--op rmsnorm --shape 1x2048 --dry-run --spec tests/fixtures/spec_good.lua", "not 'rmsnorm'", 2},
        {"--op gemv --shape 1x64x64 --dry-run --spec tests/fixtures/spec_broken_template.lua "
         "--templates /nonexistent", "/nonexistent", 9},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        static cli_out o;
        cli_run(cases[i].args, &o);
        if (o.code != cases[i].code || !strstr(o.err, cases[i].needle))
            fprintf(stderr, "  case '%s': code %d, stderr: %s", cases[i].args, o.code, o.err);
        CHECK_EQ_INT(o.code, cases[i].code);
        CHECK_STR_HAS(o.err, cases[i].needle);
        CHECK_STR_HAS(o.err, "autotune: ");
        char *nl = strchr(o.err, '\n');
        CHECK(nl != NULL && nl[1] == '\0'); /* exactly one line */
    }
}

/* Writes text to path; 0 when it could not (CHECKed). */
static int write_spec(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return 0;
    fputs(text, f);
    fclose(f);
    return 1;
}

static void spec_for_another_op_is_refused(void)
{
    static cli_out o;
    if (!write_spec(
            "/tmp/at_norm_spec.lua",
            "return { op = 'rmsnorm', strategies = { { name = 'a', template = 'gemv/gemv_warp_row.cu',"
            " kernel = 'gemv_warp_row', params = { { 'TP_WARPS', {1} } }, constraints = {},"
            " grid = function(p, s) return {1} end, block = function(p, s) return {32} end } },"
            " bytes = function(s) return 1 end }\n"))
        return;
    cli_run("--op gemv --shape 1x64x64 --dry-run --spec /tmp/at_norm_spec.lua", &o);
    CHECK_EQ_INT(o.code, 2);
    CHECK_STR_HAS(o.err, "not 'gemv'");
    remove("/tmp/at_norm_spec.lua");
}

static void dry_run_needs_no_gpu(void)
{
    static cli_out o;
    cli_run("--op gemv --shape 1x2048x2048 --dry-run --arch sm_90 --quiet", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "candidates");
    CHECK_STR_HAS(o.out, "pruned");
    CHECK_STR_HAS(o.out, "regs");
    CHECK_STR_HAS(o.out, "registers_for_loads"); /* a prune reason by name */
    cli_run("--op gemv --shape 1x64x64 --dry-run --arch 89 --json --spec tests/fixtures/spec_broken_template.lua "
            "--templates tests/fixtures/templates", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "\"dry_run\":true");
    CHECK_STR_HAS(o.out, "\"arch\":89");
    CHECK_STR_HAS(o.out, "\"compiled\":1,\"compile_failed\":1");
    CHECK_STR_HAS(o.out, "\"state\":\"compile-fail\"");
}

/* A norm op through the CLI without a GPU: spec, pruning with reasons,
** every candidate compiled, both baselines named in the JSON. */
static void add_rmsnorm_1x2048_dry_run(void)
{
    static cli_out o;
    cli_run("--op add_rmsnorm --shape 1x2048 --dry-run --arch sm_90 --quiet", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "candidates");
    CHECK_STR_HAS(o.out, "14 compiled (7 NVRTC programs, 0 failed)"); /* sm_90: TP_PDL pairs share one */
    CHECK_STR_HAS(o.out, "widest_vec: H allows TP_VEC=8"); /* a prune reason by name */
    CHECK_STR_HAS(o.out, "block_row");
    CHECK_STR_HAS(o.out, "split_row"); /* sm_90: clusters */
    CHECK_STR_HAS(o.out, "TP_OP=1");
    CHECK_STR_HAS(o.out, "regs");
    cli_run("--op add_rmsnorm --shape 1x2048 --dry-run --arch 89 --eps 1e-5 --json", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "\"op\":\"add_rmsnorm\"");
    CHECK_STR_HAS(o.out, "\"shape\":\"1x2048\"");
    CHECK_STR_HAS(o.out, "\"compile_failed\":0");
    CHECK_STR_HAS(o.out, "\"bytes\":20480"); /* x, residual, y, z of 2048 bf16 + w */
    CHECK_STR_HAS(o.out, "\"eps\":1e-05");
    CHECK_STR_HAS(o.out, "\"baseline\":{\"name\":\"norm_naive\"");
    CHECK_STR_HAS(o.out, "{\"name\":\"unfused\"");
    CHECK_STR_HAS(o.out, "clusters_need_sm90"); /* sm_89: split_row pruned, by name */
}

/* The cache key covers the templates: editing one changes key_sha, so a
** cached answer tuned with the old source is never used. */
static void template_edit_changes_the_cache_key(void)
{
    static cli_out o;
    char dir[] = "/tmp/at_tpl_XXXXXX", cmd[512], args[512], key1[80] = "", key2[80] = "";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(cmd, sizeof cmd, "cp -rL tests/fixtures/templates/. %s/", dir);
    CHECK(system(cmd) == 0);
    snprintf(args, sizeof args,
             "--op gemv --shape 1x64x64 --dry-run --json --spec tests/fixtures/spec_broken_template.lua "
             "--templates %s", dir);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    const char *k = strstr(o.out, "\"key_sha\":\"");
    CHECK(k != NULL);
    if (k)
        snprintf(key1, sizeof key1, "%.64s", k + 11);
    snprintf(cmd, sizeof cmd, "echo '// edited' >> %s/gemv/gemv_broken.cu", dir);
    CHECK(system(cmd) == 0);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 0);
    k = strstr(o.out, "\"key_sha\":\"");
    CHECK(k != NULL);
    if (k)
        snprintf(key2, sizeof key2, "%.64s", k + 11);
    CHECK(strlen(key1) == 64 && strlen(key2) == 64);
    CHECK(strcmp(key1, key2) != 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* Ctrl-C during compilation: a prompt, clean stop with exit 130, the
** candidates compiled so far reported, the rest marked as not compiled. */
static void ctrl_c_stops_cleanly(void)
{
    static cli_out o;
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "%s --op gemv --shape 1x2048x8192 --dry-run --arch sm_90 --threads 1 >/tmp/at_int_out.%d "
             "2>/tmp/at_int_err.%d </dev/null & pid=$!; sleep 3; kill -INT $pid; wait $pid",
             cli_bin(), (int)getpid(), (int)getpid());
    int st = system(cmd);
    o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    snprintf(cmd, sizeof cmd, "/tmp/at_int_out.%d", (int)getpid());
    slurp(cmd, o.out, sizeof o.out);
    remove(cmd);
    snprintf(cmd, sizeof cmd, "/tmp/at_int_err.%d", (int)getpid());
    slurp(cmd, o.err, sizeof o.err);
    remove(cmd);
    CHECK_EQ_INT(o.code, 130);
    CHECK_STR_HAS(o.err, "interrupted");
    CHECK_STR_HAS(o.out, "not compiled: interrupted");
    CHECK_STR_HAS(o.out, "regs"); /* some were compiled before the signal */
}

static void real_run_without_gpu_says_so(void)
{
    if (has_gpu_driver())
        TT_SKIP("a GPU driver is present; covered by test_gpu");
    static cli_out o;
    cli_run("--op gemv --shape 1x2048x8192 --db /tmp/at_cli_nogpu.db", &o);
    CHECK_EQ_INT(o.code, 4);
    CHECK_STR_HAS(o.err, "GPU");
    CHECK(access("/tmp/at_cli_nogpu.db", F_OK) != 0); /* nothing created */
    cli_run("--op gemv --shape 1x2048x8192 --json --db /tmp/at_cli_nogpu.db", &o);
    CHECK_EQ_INT(o.code, 4);
    CHECK_STR_HAS(o.out, "\"status\":4");
    cli_run("--op add_gemma_rmsnorm --shape 1x2048 --db /tmp/at_cli_nogpu.db", &o);
    CHECK_EQ_INT(o.code, 4);
    CHECK_STR_HAS(o.err, "GPU");
    CHECK(access("/tmp/at_cli_nogpu.db", F_OK) != 0);
}

/* The bytes of a file ("" when missing), to show a command changed nothing. */
static long file_digest(const char *path, char hex[65])
{
    static char buf[1 << 20];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    at_sha256_hex(buf, n, hex);
    return (long)n;
}

/* validate: a bad range, a missing cache, a cache with nothing tuned and no
** GPU each get a message naming the problem and a non-zero exit, and leave
** the cache as it was (a missing one is not created). */
static void validate_bad_input_changes_nothing(void)
{
    static cli_out o;
    char dir[] = "/tmp/at_cli_validate.XXXXXX", db[96], empty[96], before[65], after[65];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(db, sizeof db, "%s/tune.db", dir);
    snprintf(empty, sizeof empty, "%s/empty.db", dir);
    at_cache *c = NULL;
    CHECK_EQ_INT(at_cache_open(empty, &c), AT_OK);
    at_cache_close(c);
    CHECK_EQ_INT(at_cache_open(db, &c), AT_OK);
    if (c) {
        at_key k;
        at_winner w;
        memset(&k, 0, sizeof k);
        memset(&w, 0, sizeof w);
        strcpy(k.op, "gemv");
        k.dtype = AT_BF16;
        strcpy(k.shape, "4x2048x8192");
        strcpy(k.device, "NVIDIA H200");
        k.cc = 90, k.sms = 132;
        strcpy(w.strategy, "cublas");
        w.us = w.baseline_us = 9.0, w.speedup = 1.0;
        CHECK_EQ_INT(at_cache_put_winner(c, &k, &w), AT_OK);
        at_cache_close(c);
    }
    long size = file_digest(db, before);

    const char *bad_m[] = {"0..4", "5..3", "1..", "x", "1..70000", "2..3x4"};
    for (size_t i = 0; i < sizeof bad_m / sizeof bad_m[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "validate --db %s --m %s", db, bad_m[i]);
        cli_run(args, &o);
        CHECK_EQ_INT(o.code, 2);
        CHECK_STR_HAS(o.err, "bad --m");
        CHECK_STR_HAS(o.err, bad_m[i]);
    }
    cli_run("validate --db /tmp/at_cli_validate_missing.db", &o);
    CHECK_EQ_INT(o.code, 2);
    CHECK_STR_HAS(o.err, "no cache at /tmp/at_cli_validate_missing.db");
    CHECK(access("/tmp/at_cli_validate_missing.db", F_OK) != 0);
    char args[256];
    snprintf(args, sizeof args, "validate --db %s", empty);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 2);
    CHECK_STR_HAS(o.err, "holds no tuned entry");
    snprintf(args, sizeof args, "validate --db %s --reps 3", db);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 2);
    CHECK_STR_HAS(o.err, "bad --reps '3'");
    snprintf(args, sizeof args, "validate --db %s --op conv2d", db);
    cli_run(args, &o);
    CHECK_EQ_INT(o.code, 2);
    CHECK_STR_HAS(o.err, "bad --op 'conv2d'");
    if (!has_gpu_driver()) {
        snprintf(args, sizeof args, "validate --db %s --m 1..8", db);
        cli_run(args, &o);
        CHECK_EQ_INT(o.code, 4);
        CHECK_STR_HAS(o.err, "validate runs on the GPU");
    }
    CHECK_EQ_INT(file_digest(db, after), size);
    CHECK(!strcmp(before, after));
    cli_run("validate --help", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "--m LO..HI");
}

/* --- issue 5: the timing phase's search, spills, progress, time breakdown --- */

#define SPILL_ARGS "--op gemv --shape 1x64x64 --dry-run --arch 90 --templates tests/fixtures/templates "

/* Not on a terminal (stderr is a file here): plain progress lines, no
** escape codes; nothing with --quiet; nothing with --json, whose stdout
** stays one JSON document. */
static void progress_plain_off_a_terminal(void)
{
    static cli_out o;
    cli_run(SPILL_ARGS "--spec tests/fixtures/spec_spill.lua", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.err, "compile  2/2");
    CHECK(strchr(o.err, '\r') == NULL && strchr(o.err, '\033') == NULL);
    cli_run(SPILL_ARGS "--spec tests/fixtures/spec_spill.lua --quiet", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_EQ_INT((int)strlen(o.err), 0);
    cli_run(SPILL_ARGS "--spec tests/fixtures/spec_spill.lua --json", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK(strstr(o.err, "compile") == NULL);
    CHECK(o.out[0] == '{');
}

/* --json of a dry run says where the time went and what the timing phase
** would do; the text says it too. */
static void dry_run_reports_time_breakdown(void)
{
    static cli_out o;
    cli_run(SPILL_ARGS "--spec tests/fixtures/spec_spill.lua --json", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "\"compile_s\":");
    CHECK_STR_HAS(o.out, "\"verify_s\":");
    CHECK_STR_HAS(o.out, "\"time_s\":");
    CHECK_STR_HAS(o.out, "\"setup_s\":");
    CHECK_STR_HAS(o.out, "\"graph_s\":");
    CHECK_STR_HAS(o.out, "\"other_s\":");
    CHECK_STR_HAS(o.out, "\"total_s\":");
    CHECK_STR_HAS(o.out, "\"search\":{\"strategy\":\"halving\",\"from\":\"default\",\"effort\":\"normal\"");
    cli_run(SPILL_ARGS "--spec tests/fixtures/spec_spill.lua --quiet", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "time    compile ");
    CHECK_STR_HAS(o.out, "other ");
    CHECK_STR_HAS(o.out, "search  halving (default), effort normal");
}

/* --strategy, then --effort's strategy, then the spec's search_strategy,
** then normal's (halving); --budget replaces the effort's budget. */
static void strategy_precedence_through_the_cli(void)
{
    static cli_out o;
    if (!write_spec("/tmp/at_spec_anneal.lua",
                    "return { op = 'gemv', search_strategy = 'anneal', strategies = {"
                    " { name = 'spill', template = 'gemv/gemv_spill.cu', kernel = 'gemv_spill',"
                    " params = { { 'TP_LIVE', {1, 2, 3, 4} } }, constraints = {},"
                    " grid = function(p, s) return {1} end, block = function(p, s) return {1024} end } },"
                    " bytes = function(s) return 1 end }\n"))
        return;
    cli_run(SPILL_ARGS "--spec /tmp/at_spec_anneal.lua --json", &o);
    CHECK_STR_HAS(o.out, "\"strategy\":\"anneal\",\"from\":\"spec\"");
    cli_run(SPILL_ARGS "--spec /tmp/at_spec_anneal.lua --json --effort exhaustive", &o);
    CHECK_STR_HAS(o.out, "\"strategy\":\"exhaustive\",\"from\":\"--effort\",\"effort\":\"exhaustive\"");
    cli_run(SPILL_ARGS "--spec /tmp/at_spec_anneal.lua --json --effort quick --strategy random --budget 2", &o);
    CHECK_STR_HAS(o.out, "\"strategy\":\"random\",\"from\":\"--strategy\",\"effort\":\"quick\",\"budget\":2");
    cli_run(SPILL_ARGS "--spec /tmp/at_spec_anneal.lua --json --effort patient", &o);
    CHECK_STR_HAS(o.out, "\"strategy\":\"halving\",\"from\":\"--effort\",\"effort\":\"patient\"");
    CHECK_STR_HAS(o.out, "\"full_reps\":14,\"final_reps\":42"); /* patient: 2x the replays */
    remove("/tmp/at_spec_anneal.lua");
}

/* --json stays valid JSON whatever a spec's reason text holds: bytes that
** are not UTF-8 are written as U+FFFD. */
static void json_reasons_are_valid_utf8(void)
{
    static cli_out o;
    if (!write_spec("/tmp/at_spec_utf8.lua",
                    "return { op = 'gemv', strategies = {"
                    " { name = 'spill', template = 'gemv/gemv_spill.cu', kernel = 'gemv_spill',"
                    " params = { { 'TP_LIVE', {1, 2} } }, constraints = { { 'odd', function(p, s)"
                    " if p.TP_LIVE == 2 then return 'two \\255 bytes' end return true end } },"
                    " grid = function(p, s) return {1} end, block = function(p, s) return {1024} end } },"
                    " bytes = function(s) return 1 end }\n"))
        return;
    cli_run(SPILL_ARGS "--spec /tmp/at_spec_utf8.lua --json", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "two \xEF\xBF\xBD bytes\"");
    CHECK(strstr(o.out, "\xFF") == NULL);
    remove("/tmp/at_spec_utf8.lua");
}

/* A candidate that spills is compiled and reported, not timed, unless the
** spec says allow_spills = true; a non-boolean allow_spills is a spec error. */
static void spilling_candidates_are_not_timed(void)
{
    static cli_out o;
    cli_run(SPILL_ARGS "--spec tests/fixtures/spec_spill.lua --json", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "\"spills\":1,\"spills_rejected\":1,\"spills_allowed\":false");
    CHECK_STR_HAS(o.out, "\"params\":\"TP_LIVE=64\",\"state\":\"spills\"");
    CHECK_STR_HAS(o.out, "allow_spills = true");
    cli_run(SPILL_ARGS "--spec tests/fixtures/spec_spill.lua --quiet", &o);
    CHECK_STR_HAS(o.out, "1 spill not timed");
    CHECK(system("sed 's/^return {/return { allow_spills = true,/' tests/fixtures/spec_spill.lua "
                 ">/tmp/at_spec_spill_ok.lua") == 0);
    cli_run(SPILL_ARGS "--spec /tmp/at_spec_spill_ok.lua --json", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "\"spills\":1,\"spills_rejected\":0,\"spills_allowed\":true");
    CHECK(strstr(o.out, "\"state\":\"spills\"") == NULL);
    CHECK(system("sed 's/^return {/return { allow_spills = 1,/' tests/fixtures/spec_spill.lua "
                 ">/tmp/at_spec_spill_bad.lua") == 0);
    cli_run(SPILL_ARGS "--spec /tmp/at_spec_spill_bad.lua", &o);
    CHECK_EQ_INT(o.code, 3);
    CHECK_STR_HAS(o.err, "allow_spills must be true or false");
    remove("/tmp/at_spec_spill_ok.lua");
    remove("/tmp/at_spec_spill_bad.lua");
}

/* min_occupancy: a compiled candidate estimated below it is reported
** pruned with the estimate and not timed; every compiled one carries its
** occupancy in --json; a value outside 0..1 is a spec error. */
static void low_occupancy_candidates_are_not_timed(void)
{
    static cli_out o;
    cli_run(SPILL_ARGS "--spec tests/fixtures/spec_occupancy.lua --json", &o);
    CHECK_EQ_INT(o.code, 0);
    CHECK_STR_HAS(o.out, "\"min_occupancy\":0.75,\"occupancy_rejected\":1}");
    CHECK_STR_HAS(o.out, "\"params\":\"TP_LIVE=4 TP_THREADS=32\",\"state\":\"pruned\","
                         "\"reason\":\"min_occupancy: estimated occupancy 0.50 < 0.75");
    CHECK_STR_HAS(o.out, "32 threads");
    CHECK_STR_HAS(o.out, "32 blocks per SM");
    const char *big = strstr(o.out, "\"params\":\"TP_LIVE=4 TP_THREADS=1024\",\"state\":\"ok\"");
    CHECK(big != NULL);
    CHECK(big && strstr(big, "\"occupancy\":1.000") != NULL);
    cli_run(SPILL_ARGS "--spec tests/fixtures/spec_occupancy.lua --quiet", &o);
    CHECK_STR_HAS(o.out, "1 below min_occupancy 0.75");
    CHECK(system("sed 's/min_occupancy = 0.75/min_occupancy = 1.5/' tests/fixtures/spec_occupancy.lua "
                 ">/tmp/at_spec_occ_bad.lua") == 0);
    cli_run(SPILL_ARGS "--spec /tmp/at_spec_occ_bad.lua", &o);
    CHECK_EQ_INT(o.code, 3);
    CHECK_STR_HAS(o.err, "min_occupancy must be a number from 0 to 1 (got 1.5)");
    remove("/tmp/at_spec_occ_bad.lua");
}

int main(void)
{
    TT_RUN(help_documents_options_and_exit_codes);
    TT_RUN(bad_arguments_exit_2);
    TT_RUN(spec_for_another_op_is_refused);
    TT_RUN(dry_run_needs_no_gpu);
    TT_RUN(add_rmsnorm_1x2048_dry_run);
    TT_RUN(template_edit_changes_the_cache_key);
    TT_RUN(ctrl_c_stops_cleanly);
    TT_RUN(real_run_without_gpu_says_so);
    TT_RUN(progress_plain_off_a_terminal);
    TT_RUN(dry_run_reports_time_breakdown);
    TT_RUN(strategy_precedence_through_the_cli);
    TT_RUN(json_reasons_are_valid_utf8);
    TT_RUN(spilling_candidates_are_not_timed);
    TT_RUN(low_occupancy_candidates_are_not_timed);
    TT_RUN(validate_bad_input_changes_nothing);
    return TT_DONE();
}
