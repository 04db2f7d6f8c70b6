/*
** main.c — the `autotune` command: argument parsing, finding the templates
** and specs, Ctrl-C, and printing. The only file that calls exit(); every
** exit code is an at_status (listed in --help).
*/
#include "autotune.h"
#include "op.h"
#include "progress.h"
#include "strategy.h"
#include "suite.h"
#include "table.h"
#include "validate.h"

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef AT_SOURCE_DIR
#define AT_SOURCE_DIR "."
#endif

static volatile int interrupt_flag;

static void on_sigint(int sig)
{
    (void)sig;
    interrupt_flag = 1;
    signal(SIGINT, SIG_DFL); /* a second Ctrl-C ends it at once */
}

static void usage(FILE *f)
{
    fputs(
        "usage: autotune --op OP --shape SHAPE [options]\n"
        "       autotune --suite FILE [--only OPS] [--devices LIST|all] [options]\n"
        "\n"
        "Tunes one CUDA kernel for one decode shape on this GPU: expands the op's\n"
        "templates over the search space of its Lua spec, compiles every candidate\n"
        "with NVRTC, rejects wrong ones against an fp64 CPU reference, times the\n"
        "rest against cuBLAS with cold weights in CUDA-graph replay, and stores the\n"
        "winner in a SQLite cache. A rerun answers from the cache.\n"
        "The norm ops are timed against a naive fused kernel (the stored answer\n"
        "unless a tuned one beats it) and the unfused eager chain, on cold inputs.\n"
        "\n"
        "  --op OP          gemv, gemv_add, rmsnorm, add_rmsnorm, gemma_rmsnorm,\n"
        "                   add_gemma_rmsnorm; fused: rmsnorm_gemv,\n"
        "                   gemma_rmsnorm_gemv, gemv_swiglu, rmsnorm_gemv_swiglu,\n"
        "                   gemma_rmsnorm_gemv_swiglu, add_rmsnorm_gemv,\n"
        "                   add_gemma_rmsnorm_gemv\n"
        "  --shape SHAPE    MxKxN for gemv: M tokens, K inputs, N outputs,\n"
        "                   y[M,N] = x[M,K] . W[N,K]^T (W row-major, as nn.Linear);\n"
        "                   gemv_add: residual[M,N] += x . W^T in place (timed\n"
        "                   against cuBLAS + an add kernel and cuBLAS beta = 1)\n"
        "                   fused ops: y = rmsnorm(x) . W^T (K the hidden size),\n"
        "                   y = silu(x . Wg^T) * (x . Wu^T) (N the intermediate\n"
        "                   size), or both; timed against the runtime's unfused\n"
        "                   sequence over the cache (its norm and GEMV are tuned\n"
        "                   first when the cache lacks them) and naive + cuBLAS\n"
        "                   LO..HIxKxN tunes the batch buckets LO, every power of\n"
        "                   two between, and HI: 1..16x2048x8192 is M = 1, 2, 4, 8,\n"
        "                   16. The runtime serves an untuned M from the next larger\n"
        "                   bucket whose kernel reads each weight once (tokens past\n"
        "                   M masked), else cuBLAS; above HI, cuBLAS\n"
        "                   TxH for the norm ops: T tokens, H hidden;\n"
        "                   y = x * rsqrt(mean(x^2) + eps) * w (gemma: * (1 + w));\n"
        "                   add_*: z = x + residual is written back into residual\n"
        "                   and normalized\n"
        "  --dtype T        bf16 (default) or fp16; accumulation is fp32\n"
        "  --eps E          ops with a norm: eps, a number in (0, 1] (default 1e-6)\n"
        "  --spec FILE      search spec (default: search/OP.lua; gemv_add and the fused\n"
        "                   ops: gemv.lua, the norms: norm.lua)\n"
        "  --templates DIR  template folder (default: templates/ beside the specs)\n"
        "  --db FILE        cache (default: $XDG_CACHE_HOME/autotune/tune.db,\n"
        "                   else ~/.cache/autotune/tune.db)\n"
        "  --device N       GPU ordinal (default 0)\n"
        "  --force          retune even if the cache has an answer; retry\n"
        "                   candidates that failed before\n"
        "  --dry-run        no GPU, no cache: expand, prune and compile every\n"
        "                   candidate, report registers, spills, prune reasons\n"
        "  --arch SM        target of --dry-run: sm_90, sm_89, 90 ... (default:\n"
        "                   the present GPU, else sm_90)\n"
        "  --reps N         graph replays per candidate, median of N (default 7, >= 5)\n"
        "  --threads N      compile threads (default: all cores)\n"
        "  --top N          rows of the table to print (default 10; -1 all)\n"
        "  --json           print one JSON document instead of the table\n"
        "  --quiet          no progress lines (on a terminal one live line per phase,\n"
        "                   elsewhere plain lines every few seconds; none with --json)\n"
        "  --effort E       quick, normal (default), patient or exhaustive: how much\n"
        "                   of the space the timing phase measures, and how long\n"
        "  --strategy S     exhaustive, random, anneal or halving (default: the\n"
        "                   --effort's if given, else the spec's search_strategy,\n"
        "                   else the effort's)\n"
        "  --budget N       candidates the strategy may measure (random, anneal; halving:\n"
        "                   the size of its first round; default: the effort's)\n"
        "\n"
        "Suites (a model's ops and shapes in one Lua file, search/models/*.lua):\n"
        "  --suite FILE     tune every entry of FILE, resumably (a rerun answers\n"
        "                   finished entries from the cache), then print a summary\n"
        "                   (--json: one document for the whole suite)\n"
        "  --only OPS       only the entries of these ops (comma-separated)\n"
        "  --devices LIST   GPUs to spread the entries over, one worker each:\n"
        "                   0,1,... or all (default: --device); GPUs of the same\n"
        "                   model share results through the cache\n"
        "  --no-compile-ahead  compile each entry in its turn (default: the next\n"
        "                   entry compiles, at a low priority, while this one is\n"
        "                   on the GPU)\n"
        "  --help, --version\n"
        "\n"
        "Subcommands (autotune SUBCOMMAND --help for their options):\n"
        "  export [--device NAME | --all] --format json|csv|c [-o FILE]\n"
        "                   the tuned winners of one GPU as a portable table\n"
        "  import FILE      bring a JSON table into the cache (faster entry wins)\n"
        "  merge OTHER.db   bring in every winner of another cache (faster wins)\n"
        "  show [--device NAME]  what is tuned, per GPU\n"
        "  prune [--dry-run]  delete the winners the runtime never serves (a shape's\n"
        "                   slower rows under one driver, left by imports and merges)\n"
        "  validate [--db F] [--m LO..HI]  on the GPU, the runtime's choice at every M\n"
        "                   of every tuned shape against its fallback; stores\n"
        "                   overrides where the choice lost\n"
        "\n"
        "Environment: AUTOTUNE_HOME, a folder holding search/ and templates/.\n"
        "\n"
        "Exit codes: 0 ok, 2 bad argument or input, 3 spec error, 4 no GPU,\n"
        "5 CUDA/cuBLAS error, 6 CUDA context lost, 7 NVRTC unusable, 8 cache\n"
        "error, 9 I/O error, 10 out of memory, 11 measurement above the device\n"
        "ceiling (a harness bug), 130 interrupted (what was measured is stored).\n",
        f);
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A folder with both search/ and templates/common: AUTOTUNE_HOME, beside the
** executable (build tree or installed share/autotune), the source tree, or
** the current folder. */
static int find_home(char *buf, size_t len)
{
    char exe[PATH_MAX], cand[6][PATH_MAX + 64], probe[PATH_MAX + 96];
    int n = 0;
    const char *env = getenv("AUTOTUNE_HOME");
    if (env && *env)
        snprintf(cand[n++], sizeof cand[0], "%s", env);
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        snprintf(cand[n++], sizeof cand[0], "%s/..", exe);
        snprintf(cand[n++], sizeof cand[0], "%s/../share/autotune", exe);
    }
    snprintf(cand[n++], sizeof cand[0], "%s", AT_SOURCE_DIR);
    snprintf(cand[n++], sizeof cand[0], ".");
    for (int i = 0; i < n; i++) {
        snprintf(probe, sizeof probe, "%.*s/templates/common", PATH_MAX, cand[i]);
        if (!is_dir(probe))
            continue;
        snprintf(probe, sizeof probe, "%.*s/search", PATH_MAX, cand[i]);
        if (!is_dir(probe))
            continue;
        char real[PATH_MAX];
        snprintf(buf, len, "%.*s", PATH_MAX - 1, realpath(cand[i], real) ? real : cand[i]);
        return AT_OK;
    }
    return at_fail(AT_ERR_USAGE, "cannot find the search/ and templates/ folders; set AUTOTUNE_HOME "
                                 "or pass --spec and --templates");
}

static int parse_int(const char *opt, const char *v, int lo, int hi, int *out)
{
    char *end;
    long x;
    if (!v)
        return at_fail(AT_ERR_USAGE, "%s needs a value", opt);
    x = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < lo || x > hi)
        return at_fail(AT_ERR_USAGE, "%s: '%s' is not a whole number in %d..%d", opt, v, lo, hi);
    *out = (int)x;
    return AT_OK;
}

static int parse_arch(const char *v, int *out)
{
    if (!v)
        return at_fail(AT_ERR_USAGE, "--arch needs a value");
    const char *p = strncmp(v, "sm_", 3) == 0 ? v + 3 : v;
    int rc = parse_int("--arch", p, 50, 200, out);
    if (rc != AT_OK)
        return at_fail(AT_ERR_USAGE, "--arch: '%s' is not an architecture such as sm_90", v);
    return AT_OK;
}

/* "--eps": a finite number in (0, 1] that stays positive as a float. */
static int parse_eps(const char *v, double *out)
{
    char *end;
    double x;
    if (!v)
        return at_fail(AT_ERR_USAGE, "--eps needs a value");
    x = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || !isfinite(x) || !(x > 0.0 && x <= 1.0) || !((float)x > 0.0f))
        return at_fail(AT_ERR_USAGE, "--eps: '%s' is not a number in (0, 1], e.g. 1e-6", v);
    *out = x;
    return AT_OK;
}

/* Dimensions in a shape's text: separators + 1. */
static int shape_dims(const char *text)
{
    int n = 1;
    for (const char *p = text; *p; p++)
        n += *p == 'x' || *p == 'X';
    return n;
}

static int die(int rc, int json)
{
    if (json)
        printf("{\"status\":%d,\"error\":\"%s\"}\n", rc, at_errstr(rc));
    fprintf(stderr, "autotune: %s\n", at_errmsg());
    return rc;
}

/* --suite FILE: the whole-model runner (suite_run.c) with the shared options. */
static int suite_command(at_search_opts *o, const char *suite, const char *only, const char *devices,
                         const char *dtype, int dtype_given, const char *templates, const char *db, int json,
                         int quiet, int no_ahead, int one_shape_options)
{
    char home[PATH_MAX], tpl_buf[PATH_MAX + 64], db_buf[PATH_MAX];
    int rc, home_rc = find_home(home, sizeof home), have_home = home_rc == AT_OK;
    if (one_shape_options)
        return die(at_fail(AT_ERR_USAGE, "--suite takes its ops, shapes and specs from the suite file; "
                                         "drop --op, --shape and --spec (--only OPS filters)"),
                   json);
    if ((rc = at_dtype_parse(dtype, &o->dtype)) != AT_OK)
        return die(rc, json);
    if (o->arch && !o->dry_run)
        return die(at_fail(AT_ERR_USAGE, "--arch applies to --dry-run; a real run tunes for the present GPU"),
                   json);
    if (!templates) {
        if (!have_home)
            return die(at_fail(home_rc, "cannot find the templates/ folder; set AUTOTUNE_HOME or pass --templates"),
                       json);
        snprintf(tpl_buf, sizeof tpl_buf, "%s/templates", home);
        templates = tpl_buf;
    }
    if (!db && !o->dry_run) {
        if ((rc = at_cache_default_path(db_buf, sizeof db_buf)) != AT_OK)
            return die(rc, json);
        db = db_buf;
    }
    o->templates_root = templates;
    o->db_path = db;
    o->progress = !quiet && isatty(2); /* stderr only: --json on stdout is unaffected */
    o->interrupt = &interrupt_flag;
    signal(SIGINT, on_sigint);
    at_suite_cli c = {.base = *o, .dtype_override = dtype_given, .suite_path = suite,
                      .home = have_home ? home : NULL, .only = only, .devices = devices, .json = json,
                      .quiet = quiet, .no_ahead = no_ahead};
    return at_suite_main(&c);
}

/* --shape LO..HIx...: one tune per bucket, in order, each stored as it
** finishes (an interrupt keeps the finished ones); then a line per bucket. */
static int buckets_command(at_search_opts *o, const at_shape *buckets, int n, int top, const char *db, int json)
{
    char shape[64];
    int rc = AT_OK, rcs[AT_SHAPE_MAX_BUCKETS];
    double us[AT_SHAPE_MAX_BUCKETS], base[AT_SHAPE_MAX_BUCKETS];
    char winner[AT_SHAPE_MAX_BUCKETS][96];
    int done = 0;
    if (json)
        fputs("[", stdout);
    for (int i = 0; i < n && !(o->interrupt && *o->interrupt); i++) {
        at_search_result res;
        o->shape = buckets[i];
        rcs[i] = at_search_run(o, &res);
        if (json) {
            if (i)
                fputs(",", stdout);
            at_report_json(stdout, o, &res, db, rcs[i]);
        } else if (rcs[i] == AT_OK || res.nrows > 0 || res.from_cache) {
            at_report_text(stdout, o, &res, top, db);
            fputs("\n", stdout);
        }
        us[i] = res.winner.us, base[i] = res.winner.baseline_us;
        snprintf(winner[i], sizeof winner[i], "%s", res.winner.strategy);
        at_search_result_free(&res);
        done++;
        if (rcs[i] != AT_OK) {
            fprintf(stderr, "autotune: %s\n", at_errmsg());
            if (rc == AT_OK)
                rc = rcs[i];
            if (rcs[i] == AT_ERR_INTERRUPTED || rcs[i] == AT_ERR_CUDA_STICKY || rcs[i] == AT_ERR_NOGPU)
                break;
        }
    }
    if (json) {
        fputs("]\n", stdout);
        return rc;
    }
    if (o->dry_run) {
        printf("buckets %s: %d (dry run, nothing timed)\n", o->op, done);
        return rc;
    }
    printf("buckets %s: %d of %d tuned\n", o->op, done, n);
    for (int i = 0; i < done; i++) {
        at_shape_format(&buckets[i], shape, sizeof shape);
        if (rcs[i] == AT_OK)
            printf("  %-18s %9.2f us  %s %9.2f us  %5.2fx  %s\n", shape, us[i], o->shape.rank == 3 ? "cuBLAS" : "naive",
                   base[i], us[i] > 0 ? base[i] / us[i] : 0.0, winner[i]);
        else
            printf("  %-18s failed: %s\n", shape, at_errstr(rcs[i]));
    }
    printf("  an untuned %s between two buckets is served by the next larger one's kernel when it reads each\n"
           "  weight once (tokens past %s masked), else by the fallback; above the largest: the fallback.\n"
           "  `autotune validate` measures that choice at every %s before a table ships.\n",
           o->shape.rank == 3 ? "M" : "T", o->shape.rank == 3 ? "M" : "T", o->shape.rank == 3 ? "M" : "T");
    return rc;
}

int main(int argc, char **argv)
{
    /* validate: the runtime's choice at every M, on the GPU (validate.c) */
    if (argc > 1 && !strcmp(argv[1], "validate")) {
        char vhome[PATH_MAX];
        int vrc = at_validate_main(argc - 1, argv + 1, find_home(vhome, sizeof vhome) == AT_OK ? vhome : NULL);
        if (vrc != AT_OK)
            fprintf(stderr, "autotune validate: %s\n", at_errmsg());
        return vrc;
    }
    /* export / import / merge / show / prune: tables, in table.c (prune: cache_prune.c) */
    if (argc > 1 && (!strcmp(argv[1], "export") || !strcmp(argv[1], "import") || !strcmp(argv[1], "merge") ||
                     !strcmp(argv[1], "show") || !strcmp(argv[1], "prune")))
        return at_table_main(argc - 1, argv + 1);

    at_search_opts o = {.dtype = AT_BF16, .reps = 7};
    const char *shape_text = NULL, *spec = NULL, *templates = NULL, *db = NULL, *dtype = "bf16";
    char home[PATH_MAX], spec_buf[PATH_MAX + 64], tpl_buf[PATH_MAX + 64], db_buf[PATH_MAX];
    int json = 0, quiet = 0, top = 10, rc, dtype_given = 0, no_ahead = 0;
    const char *suite = NULL, *only = NULL, *devices = NULL; /* --suite and friends */

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        rc = AT_OK;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("autotune %s\n", AT_TUNER_VERSION);
            return 0;
        } else if (!strcmp(a, "--op")) {
            o.op = v;
        } else if (!strcmp(a, "--shape")) {
            shape_text = v;
        } else if (!strcmp(a, "--dtype")) {
            dtype = v;
            dtype_given = 1;
        } else if (!strcmp(a, "--suite")) {
            suite = v;
        } else if (!strcmp(a, "--only")) {
            only = v;
        } else if (!strcmp(a, "--devices")) {
            devices = v;
        } else if (!strcmp(a, "--effort")) {
            at_effort e;
            o.effort = v;
            if (v)
                rc = at_strategy_effort_parse(v, &e);
        } else if (!strcmp(a, "--strategy")) {
            at_strategy_kind k;
            o.strategy = v;
            if (v)
                rc = at_strategy_parse(v, &k);
        } else if (!strcmp(a, "--budget")) {
            rc = parse_int(a, v, 1, 1000000, &o.budget);
        } else if (!strcmp(a, "--spec")) {
            spec = v;
        } else if (!strcmp(a, "--templates")) {
            templates = v;
        } else if (!strcmp(a, "--db")) {
            db = v;
        } else if (!strcmp(a, "--device")) {
            rc = parse_int(a, v, 0, 1023, &o.device);
        } else if (!strcmp(a, "--arch")) {
            rc = parse_arch(v, &o.arch);
        } else if (!strcmp(a, "--eps")) {
            rc = parse_eps(v, &o.eps);
        } else if (!strcmp(a, "--reps")) {
            rc = parse_int(a, v, 5, 1000, &o.reps);
        } else if (!strcmp(a, "--threads")) {
            rc = parse_int(a, v, 0, 256, &o.threads);
        } else if (!strcmp(a, "--top")) {
            rc = parse_int(a, v, -1, 1000000, &top);
        } else {
            takes = 0;
            if (!strcmp(a, "--force"))
                o.force = 1;
            else if (!strcmp(a, "--dry-run"))
                o.dry_run = 1;
            else if (!strcmp(a, "--json"))
                json = 1;
            else if (!strcmp(a, "--quiet"))
                quiet = 1;
            else if (!strcmp(a, "--no-compile-ahead"))
                no_ahead = 1;
            else
                rc = at_fail(AT_ERR_USAGE, "unknown option '%s' (see --help)", a);
        }
        if (rc == AT_OK && takes && !v)
            rc = at_fail(AT_ERR_USAGE, "%s needs a value", a);
        if (rc != AT_OK)
            return die(rc, json);
        i += takes;
    }
    if (suite)
        return suite_command(&o, suite, only, devices, dtype, dtype_given, templates, db, json, quiet, no_ahead,
                             o.op || shape_text || spec);
    if (only || devices || no_ahead)
        return die(at_fail(AT_ERR_USAGE, "%s applies to --suite",
                           only ? "--only" : devices ? "--devices" : "--no-compile-ahead"),
                   json);
    if (!o.op)
        return die(at_fail(AT_ERR_USAGE, "--op is required (see --help)"), json);
    const at_op *op = at_op_find(o.op);
    if (!op) {
        char known[256] = "";
        size_t len = 0;
        for (int i = 0; at_op_at(i) && len < sizeof known; i++)
            len += (size_t)snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", at_op_at(i)->name);
        return die(at_fail(AT_ERR_USAGE, "unknown op '%s' (known: %s)", o.op, known), json);
    }
    if (!shape_text)
        return die(at_fail(AT_ERR_USAGE, "--shape is required, e.g. --shape %s",
                           op->rank == 3 ? "1x2048x8192" : "1x2048"),
                   json);
    if ((rc = at_dtype_parse(dtype, &o.dtype)) != AT_OK)
        return die(rc, json);
    /* a shape of the other family: say which form this op takes */
    if (op->rank == 2 && shape_dims(shape_text) == 3)
        return die(at_fail(AT_ERR_USAGE,
                           "op %s takes a TxH shape (T tokens x H hidden), e.g. 1x2048; '%s' is an MxKxN "
                           "(gemv) shape",
                           o.op, shape_text),
                   json);
    if (op->rank == 3 && shape_dims(shape_text) == 2)
        return die(at_fail(AT_ERR_USAGE,
                           "op %s takes an MxKxN shape, e.g. 1x2048x8192; '%s' is a TxH (norm) shape", o.op,
                           shape_text),
                   json);
    at_shape buckets[AT_SHAPE_MAX_BUCKETS];
    int nbuckets = 0;
    if ((rc = at_shape_buckets(shape_text, op->rank, buckets, AT_SHAPE_MAX_BUCKETS, &nbuckets)) != AT_OK)
        return die(rc, json);
    o.shape = buckets[0];
    if (o.eps != 0.0 && !op->takes_eps)
        return die(at_fail(AT_ERR_USAGE, "--eps applies to the ops with a norm, not %s", o.op), json);
    if (o.arch && !o.dry_run)
        return die(at_fail(AT_ERR_USAGE, "--arch applies to --dry-run; a real run tunes for the present GPU"),
                   json);

    if (!spec || !templates) {
        if ((rc = find_home(home, sizeof home)) != AT_OK)
            return die(rc, json);
        if (!spec) {
            at_spec_default_path(home, o.op, spec_buf, sizeof spec_buf);
            spec = spec_buf;
        }
        if (!templates) {
            snprintf(tpl_buf, sizeof tpl_buf, "%s/templates", home);
            templates = tpl_buf;
        }
    }
    if (!db && !o.dry_run) {
        if ((rc = at_cache_default_path(db_buf, sizeof db_buf)) != AT_OK)
            return die(rc, json);
        db = db_buf;
    }
    o.spec_path = spec;
    o.templates_root = templates;
    o.db_path = db;
    o.progress = at_progress_mode_for(stderr, quiet || json); /* stderr only: stdout's --json is unaffected */
    o.interrupt = &interrupt_flag;
    signal(SIGINT, on_sigint);

    if (nbuckets > 1)
        return buckets_command(&o, buckets, nbuckets, top, db, json);
    at_search_result res;
    rc = at_search_run(&o, &res);
    if (json) {
        at_report_json(stdout, &o, &res, db, rc);
    } else if (rc == AT_OK || res.nrows > 0 || res.from_cache) {
        at_report_text(stdout, &o, &res, top, db);
    }
    if (rc != AT_OK)
        fprintf(stderr, "autotune: %s\n", at_errmsg());
    at_search_result_free(&res);
    return rc;
}
