/*
** validate.c — `autotune validate`: before a table ships, every tuned
** (op, dtype, K, N) of this GPU is called through the runtime library's own
** choice (atk_explain / atk_gemv ...) at every M of a range, checked against
** the fp64 reference with the output poisoned, and timed against the
** runtime's fallback (cuBLAS; the naive fused norm; for the fused decode
** ops their unfused sequence over the tuned norm and GEMV, ATK_UNFUSED)
** the way the tuner times:
** cold data rotated over >= 3x L2, CUDA-graph replay, the two interleaved in
** one process, medians with the spread. Every cell is stored as it is
** measured (an interrupt keeps the finished ones); where the choice lost
** beyond the noise, or was wrong, the stored row is an override: atk_open
** then serves that call shape by the fallback (kernels/atk_override.c).
**
** The choice is measured as the table stands without overrides
** (ATK_NO_OVERRIDES), so validating again re-measures, and keeps or
** drops, every override. --served measures what the runtime serves with
** the overrides applied and stores nothing: the shipped table's benchmark.
*/
#include "autotune.h"
#include "bench.h"
#include "cache_validation.h"
#include "json.h"
#include "op.h"
#include "validate.h"

#include "atk.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIN_LAUNCHES 24 /* per graph replay: launch overhead amortized */
#define MAX_SHAPES 256  /* distinct (op, dtype, K, N) of one GPU */

static volatile int stop_flag;
static void on_sigint(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void usage(FILE *f)
{
    fputs("usage: autotune validate [--db FILE] [--m LO..HI] [--op OP] [--reps N] [--device N] [--served]\n"
          "                         [--json]\n"
          "\n"
          "On the GPU, calls every (op, dtype, K, N) tuned for this GPU in the cache\n"
          "through the runtime library's own choice at every M (T for the norms) in\n"
          "LO..HI (default 1..32), checks the result against the fp64 reference and\n"
          "times it against the runtime's fallback (cuBLAS; the naive fused norm; the\n"
          "fused ops' unfused sequence over the tuned norm and GEMV):\n"
          "cold weights, graph replay, interleaved medians. Each cell is stored in the\n"
          "cache as it is measured. Where the choice lost beyond the noise or was\n"
          "wrong, the stored row is an override: the runtime then falls back at that\n"
          "call shape. atk_explain says so; `autotune export` carries the rows.\n"
          "\n"
          "  --db FILE     the cache (default: $XDG_CACHE_HOME/autotune/tune.db)\n"
          "  --m LO..HI    batch sizes, every one of them (or one M)\n"
          "  --op OP       only this op (gemv, rmsnorm, ...)\n"
          "  --reps N      interleaved replays per cell, median of (5..1000, default 9)\n"
          "  --device N    GPU ordinal (default 0)\n"
          "  --served      measure the runtime as it serves now, the stored overrides\n"
          "                applied, and store nothing (a benchmark of the shipped table)\n"
          "  --json        one JSON object on stdout instead of the table\n"
          "\n"
          "Exit status: 0 when every cell is kept or overridden; 11 when a figure broke\n"
          "the read ceiling (a harness bug); 130 when interrupted; else the error's.\n",
          f);
}

/* "LO..HI" or "M". */
static int parse_m_range(const char *v, int *lo, int *hi)
{
    char *end;
    long a, b;
    if (!v)
        return at_fail(AT_ERR_USAGE, "--m needs a value, e.g. 1..32");
    errno = 0;
    a = strtol(v, &end, 10);
    if (end != v && !strncmp(end, "..", 2)) {
        const char *q = end + 2;
        b = strtol(q, &end, 10);
        if (end == q)
            b = -1;
    } else {
        b = a;
    }
    if (errno || end == v || *end || a < 1 || b < a || b > 65535)
        return at_fail(AT_ERR_USAGE, "bad --m '%s': LO..HI with 1 <= LO <= HI <= 65535, e.g. 1..32", v);
    *lo = (int)a, *hi = (int)b;
    return AT_OK;
}

/* ------------------------------------------------------------ the calls */

/* One contestant: a call of the runtime library on the op's data. */
typedef struct rt_call {
    atk_ctx *ctx;
    int op, dtype;
    at_gpu *g;
} rt_call;

static int rt_enqueue(void *arg, const at_op_call_args *a)
{
    rt_call *c = arg;
    atk_stream s = (atk_stream)c->g->stream;
    const void *x = (const void *)a->x, *w = (const void *)a->W;
    void *y = (void *)a->y, *r = (void *)a->residual, *sc = (void *)a->scratch;
    const void *wu = (const void *)a->Wu, *nw = (const void *)a->nw;
    int rc;
    switch (c->op) {
    case ATK_OP_GEMV:
        rc = atk_gemv(c->ctx, s, c->dtype, a->M, a->K, a->N, x, w, y);
        break;
    case ATK_OP_RMSNORM:
        rc = atk_rmsnorm(c->ctx, s, c->dtype, a->M, a->K, x, w, y, a->eps);
        break;
    case ATK_OP_ADD_RMSNORM:
        rc = atk_add_rmsnorm(c->ctx, s, c->dtype, a->M, a->K, x, r, w, y, a->eps);
        break;
    case ATK_OP_GEMMA_RMSNORM:
        rc = atk_gemma_rmsnorm(c->ctx, s, c->dtype, a->M, a->K, x, w, y, a->eps);
        break;
    case ATK_OP_ADD_GEMMA_RMSNORM:
        rc = atk_add_gemma_rmsnorm(c->ctx, s, c->dtype, a->M, a->K, x, r, w, y, a->eps);
        break;
    case ATK_OP_GEMV_ADD: /* the op's y is the residual, added into in place */
        rc = atk_gemv_add(c->ctx, s, c->dtype, a->M, a->K, a->N, x, w, r);
        break;
    case ATK_OP_RMSNORM_GEMV: /* the fused ops: W is the GEMV weight (Wg), nw the norm's */
        rc = atk_rmsnorm_gemv(c->ctx, s, c->dtype, a->M, a->K, a->N, x, nw, w, y, a->eps, sc);
        break;
    case ATK_OP_GEMMA_RMSNORM_GEMV:
        rc = atk_gemma_rmsnorm_gemv(c->ctx, s, c->dtype, a->M, a->K, a->N, x, nw, w, y, a->eps, sc);
        break;
    case ATK_OP_GEMV_SWIGLU:
        rc = atk_gemv_swiglu(c->ctx, s, c->dtype, a->M, a->K, a->N, x, w, wu, y, sc);
        break;
    case ATK_OP_RMSNORM_GEMV_SWIGLU:
        rc = atk_rmsnorm_gemv_swiglu(c->ctx, s, c->dtype, a->M, a->K, a->N, x, nw, w, wu, y, a->eps, sc);
        break;
    case ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU:
        rc = atk_gemma_rmsnorm_gemv_swiglu(c->ctx, s, c->dtype, a->M, a->K, a->N, x, nw, w, wu, y, a->eps, sc);
        break;
    case ATK_OP_ADD_RMSNORM_GEMV: /* the residual-add forms: r updated in place */
        rc = atk_add_rmsnorm_gemv(c->ctx, s, c->dtype, a->M, a->K, a->N, x, r, nw, w, y, a->eps, sc);
        break;
    case ATK_OP_ADD_GEMMA_RMSNORM_GEMV:
        rc = atk_add_gemma_rmsnorm_gemv(c->ctx, s, c->dtype, a->M, a->K, a->N, x, r, nw, w, y, a->eps, sc);
        break;
    default:
        return at_fail(AT_ERR_USAGE, "op %d", c->op);
    }
    if (rc == ATK_OK)
        return AT_OK;
    return at_fail(rc == ATK_ERR_CUDA_STICKY ? AT_ERR_CUDA_STICKY : rc == ATK_ERR_USAGE ? AT_ERR_USAGE : AT_ERR_CUDA,
                   "atk: %s", atk_errmsg(c->ctx));
}

/* at_graph_build's callback: the op enqueues the contestant on copy c. */
typedef struct contest {
    const at_op *op;
    void *state;
    at_contestant c;
} contest;

static int contest_enqueue(void *arg, int copy)
{
    contest *t = arg;
    return t->op->enqueue(t->state, &t->c, copy);
}

/* --------------------------------------------------------- one problem */

typedef struct shape_group {
    char op[32];
    at_dtype dtype;
    int64_t K, N; /* norms: K = H, N = 0 */
} shape_group;

typedef struct vctx {
    at_gpu *g;
    atk_ctx *rt, *fb, *unf; /* the table; nothing tuned; the table ATK_UNFUSED */
    at_cache *cache;
    at_spec *spec[ATK_NOPS];
    at_templates *tpl;
    const char *home;
    const char *db; /* the cache path: the fused ops' unfused baseline opens the runtime on it */
    int reps;
    int json;
    int cells, kept, fallback, overridden, wrong, harness;
    double log_ratio_sum; /* over kept cells that are not the fallback */
    int nratio;
    double min_ratio;
    FILE *out;
} vctx;

static int op_index(const char *name)
{
    for (int i = 0; i < ATK_NOPS; i++)
        if (!strcmp(atk_op_name(i), name))
            return i;
    return -1;
}

static const char *path_name(int path)
{
    switch (path) {
    case ATK_PATH_TUNED:
        return "tuned";
    case ATK_PATH_BUCKET:
        return "bucket";
    case ATK_PATH_INFERRED:
        return "inferred";
    default:
        return "fallback";
    }
}

/* Loads (once) the spec the op's search used: the norm ops read w's type
** from it. */
static int spec_for(vctx *v, int opi, const char *op, at_spec **out)
{
    char path[4200];
    int rc;
    if (!v->spec[opi]) {
        if (!v->home)
            return at_fail(AT_ERR_USAGE, "cannot find the search/ folder; set AUTOTUNE_HOME");
        at_spec_default_path(v->home, op, path, sizeof path);
        if ((rc = at_spec_load_op(path, op, &v->spec[opi])) != AT_OK)
            return rc;
    }
    *out = v->spec[opi];
    return AT_OK;
}

/* Measures one cell: the choice at M and the fallback, both through atk. */
static int one_cell(vctx *v, const shape_group *sg, int M, at_validation *row)
{
    int opi = op_index(sg->op), atk_dtype = sg->dtype == AT_FP16 ? ATK_FP16 : ATK_BF16, rc;
    const at_op *op = at_op_find(sg->op);
    at_search_opts o = {.op = sg->op, .dtype = sg->dtype, .reps = v->reps, .threads = 0, .db_path = v->db};
    at_search_result res;
    void *state = NULL;
    atk_choice ch;
    at_graph ga = {0}, gb = {0};
    double *ta = NULL, *tb = NULL;

    memset(row, 0, sizeof *row);
    memset(&res, 0, sizeof res);
    if (opi < 0 || !op)
        return at_fail(AT_ERR_CACHE, "the cache names an unknown op '%s'", sg->op);
    o.shape.rank = op->rank;
    o.shape.M = M, o.shape.K = sg->K, o.shape.N = op->rank == 3 ? sg->N : 0;
    if (atk_explain(v->rt, opi, atk_dtype, M, sg->K, op->rank == 3 ? sg->N : 1, &ch) != ATK_OK)
        return at_fail(AT_ERR_USAGE, "atk_explain: %s", atk_errmsg(v->rt));

    /* the row's identity */
    snprintf(row->device, sizeof row->device, "%s", v->g->info.name);
    row->cc = 10 * v->g->info.cc_major + v->g->info.cc_minor;
    row->sms = v->g->info.sms;
    snprintf(row->op, sizeof row->op, "%s", sg->op);
    row->dtype = sg->dtype;
    at_shape_format(&o.shape, row->shape, sizeof row->shape);
    snprintf(row->path, sizeof row->path, "%s", path_name(ch.path));
    snprintf(row->chosen, sizeof row->chosen, "%s", ch.path == ATK_PATH_FALLBACK ? "" : ch.key);
    snprintf(row->strategy, sizeof row->strategy, "%s", ch.strategy);
    snprintf(row->from, sizeof row->from, "%s", ch.from);
    row->bucket = ch.bucket;
    snprintf(row->reason, sizeof row->reason, "%s", ch.reason);

    /* the op's data: fresh random inputs, the fp64 reference, cold copies */
    at_problem pb = {.op = sg->op, .dtype = sg->dtype, .shape = o.shape, .arch = row->cc, .sms = row->sms};
    at_op_env env = {.o = &o, .tpl = v->tpl, .pb = &pb};
    if ((rc = spec_for(v, opi, sg->op, &env.spec)) != AT_OK || (rc = op->open(&env, &res, &state)) != AT_OK)
        goto done;
    size_t bytes = op->copy_bytes(state);
    int64_t l2 = v->g->info.l2_bytes > 0 ? v->g->info.l2_bytes : (64 << 20);
    int64_t c64 = (3 * l2 + (int64_t)bytes - 1) / (int64_t)(bytes ? bytes : 1);
    int copies = c64 > op->max_copies ? op->max_copies : (int)c64;
    if (copies < 2)
        copies = 2;
    int launches = copies >= MIN_LAUNCHES ? copies : (MIN_LAUNCHES + copies - 1) / copies * copies;
    if ((rc = op->setup(state, v->g, copies)) != AT_OK)
        goto done;

    rt_call ca = {.ctx = v->rt, .op = opi, .dtype = atk_dtype, .g = v->g};
    /* a fused op's fallback is its unfused sequence over the tuned norm and
    ** GEMV: what the runtime runs when validation overrides the fused kernel */
    rt_call cb = {.ctx = opi >= ATK_OP_RMSNORM_GEMV ? v->unf : v->fb, .op = opi, .dtype = atk_dtype, .g = v->g};
    contest A = {.op = op, .state = state, .c = {.baseline = -1, .call = rt_enqueue, .call_arg = &ca}};
    contest B = {.op = op, .state = state, .c = {.baseline = -1, .call = rt_enqueue, .call_arg = &cb}};

    /* correct first: the choice, then the fallback (an eager call each,
    ** which also lets cuBLAS load what it picks before the capture) */
    at_op_check ck;
    if ((rc = op->check(state, &A.c, &ck)) != AT_OK)
        goto done;
    row->err = ck.err;
    if (ck.wrong) {
        snprintf(row->verdict, sizeof row->verdict, "wrong");
        snprintf(row->reason, sizeof row->reason, "wrong: %s", ck.reason);
    }
    at_op_check ckb;
    if ((rc = op->check(state, &B.c, &ckb)) != AT_OK)
        goto done;
    if (ckb.wrong) {
        rc = at_fail(AT_ERR_HARNESS, "%s %s: the fallback itself fails the check: %s", sg->op, row->shape,
                     ckb.reason);
        goto done;
    }

    /* timing: both graphs over the same copies, replays interleaved */
    if (!(ta = calloc((size_t)v->reps, sizeof *ta)) || !(tb = calloc((size_t)v->reps, sizeof *tb))) {
        rc = at_fail(AT_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = at_graph_build(v->g, contest_enqueue, &A, 0, copies, launches, &ga)) != AT_OK ||
        (rc = at_graph_build(v->g, contest_enqueue, &B, 0, copies, launches, &gb)) != AT_OK)
        goto done;
    double warm;
    if ((rc = at_graph_time(v->g, &ga, &warm)) != AT_OK || (rc = at_graph_time(v->g, &gb, &warm)) != AT_OK)
        goto done;
    for (int i = 0; i < v->reps && rc == AT_OK; i++) {
        /* alternate which goes first; a failing replay's own status is kept */
        at_graph *g1 = i & 1 ? &gb : &ga, *g2 = i & 1 ? &ga : &gb;
        double *t1 = i & 1 ? &tb[i] : &ta[i], *t2 = i & 1 ? &ta[i] : &tb[i];
        if ((rc = at_graph_time(v->g, g1, t1)) == AT_OK)
            rc = at_graph_time(v->g, g2, t2);
    }
    if (rc != AT_OK)
        goto done;
    at_stats(ta, v->reps, &row->us, &row->us_min, &row->us_max); /* sorts */
    at_stats(tb, v->reps, &row->base_us, &row->base_min, &row->base_max);
    double noise_a = 0.5 * (at_percentile(ta, v->reps, 0.9) - at_percentile(ta, v->reps, 0.1));
    double noise_b = 0.5 * (at_percentile(tb, v->reps, 0.9) - at_percentile(tb, v->reps, 0.1));
    row->noise = noise_a > noise_b ? noise_a : noise_b;

    /* the ceiling: a figure above it is a harness bug, not a win */
    double gbps_a = (double)bytes / (row->us_min * 1e3), gbps_b = (double)bytes / (row->base_min * 1e3);
    if (v->g->info.read_gbps > 0 &&
        (gbps_a > 1.05 * v->g->info.read_gbps || gbps_b > 1.05 * v->g->info.read_gbps)) {
        v->harness++;
        snprintf(row->verdict, sizeof row->verdict, "harness");
        snprintf(row->reason, sizeof row->reason, "%.0f GB/s above the read ceiling of %.0f GB/s: a harness bug",
                 gbps_a > gbps_b ? gbps_a : gbps_b, v->g->info.read_gbps);
    } else if (!row->verdict[0]) {
        if (ch.path == ATK_PATH_FALLBACK)
            snprintf(row->verdict, sizeof row->verdict, "fallback");
        else if (row->us - row->base_us > row->noise) {
            snprintf(row->verdict, sizeof row->verdict, "slower");
            snprintf(row->reason, sizeof row->reason, "validated: %s faster at %s=%d (%.2f vs %.2f us)",
                     opi >= ATK_OP_RMSNORM_GEMV ? "the unfused sequence"
                     : op->rank == 3            ? "cuBLAS"
                                                : "the naive norm",
                     op->rank == 3 ? "M" : "T", M, row->base_us, row->us);
        } else {
            snprintf(row->verdict, sizeof row->verdict, "ok");
        }
    }
done:
    at_graph_free(v->g, &ga);
    at_graph_free(v->g, &gb);
    free(ta);
    free(tb);
    if (state)
        op->close(state);
    return rc;
}

/* ----------------------------------------------------------- reporting */

static void print_row(vctx *v, const at_validation *r, int first)
{
    double ratio = r->us > 0 ? r->base_us / r->us : 0.0;
    int norm = strstr(r->op, "norm") != NULL && strstr(r->op, "gemv") == NULL; /* T rows, not M tokens */
    char path[32];
    if (v->json) {
        fprintf(v->out, "%s\n    {\"op\": ", first ? "" : ",");
        at_json_write_string(v->out, r->op);
        fprintf(v->out, ", \"dtype\": \"%s\", \"shape\": \"%s\", \"path\": \"%s\", \"bucket\": %d, \"strategy\": ",
                at_dtype_name(r->dtype), r->shape, r->path, r->bucket);
        at_json_write_string(v->out, r->strategy);
        fprintf(v->out, ", \"from\": ");
        at_json_write_string(v->out, r->from);
        fprintf(v->out,
                ", \"us\": %.4f, \"us_min\": %.4f, \"us_max\": %.4f, \"baseline_us\": %.4f, \"baseline_min\": %.4f,"
                " \"baseline_max\": %.4f, \"noise_us\": %.4f, \"ratio\": %.4f, \"rel_err\": %.3g, \"verdict\": \"%s\","
                " \"reason\": ",
                r->us, r->us_min, r->us_max, r->base_us, r->base_min, r->base_max, r->noise, ratio, r->err,
                r->verdict);
        at_json_write_string(v->out, r->reason);
        fputc('}', v->out);
        return;
    }
    if (r->bucket && strcmp(r->path, "tuned"))
        snprintf(path, sizeof path, "%s %s=%d", r->path, norm ? "T" : "M", r->bucket);
    else
        snprintf(path, sizeof path, "%s", r->path);
    fprintf(v->out, "%-18s %-5s %-18s %-16s %-12s %9.2f %9.2f %6.2fx  %s\n", r->op, at_dtype_name(r->dtype),
            r->shape, path, r->strategy, r->us, r->base_us, ratio,
            !strcmp(r->verdict, "slower") ? "override: fallback (slower beyond noise)"
            : !strcmp(r->verdict, "wrong") ? "override: fallback (WRONG)"
                                           : r->verdict);
}

static void tally(vctx *v, const at_validation *r)
{
    double ratio = r->us > 0 ? r->base_us / r->us : 0.0;
    v->cells++;
    if (!strcmp(r->verdict, "ok")) {
        v->kept++;
        v->log_ratio_sum += log(ratio);
        v->nratio++;
        if (ratio < v->min_ratio)
            v->min_ratio = ratio;
    } else if (!strcmp(r->verdict, "fallback")) {
        v->fallback++;
    } else if (!strcmp(r->verdict, "slower")) {
        v->overridden++;
    } else if (!strcmp(r->verdict, "wrong")) {
        v->wrong++;
    }
}

static int cmp_group(const void *a, const void *b)
{
    const shape_group *x = a, *y = b;
    int c = strcmp(x->op, y->op);
    if (c)
        return c;
    if (x->dtype != y->dtype)
        return x->dtype < y->dtype ? -1 : 1;
    if (x->K != y->K)
        return x->K < y->K ? -1 : 1;
    return (x->N > y->N) - (x->N < y->N);
}

/* The distinct (op, dtype, K, N) of the winners of this GPU. */
static int groups_of(const at_tuned_shape *t, int n, const char *only, shape_group *out, int max, int *ng)
{
    *ng = 0;
    for (int i = 0; i < n; i++) {
        at_shape s;
        const at_op *op = at_op_find(t[i].op);
        if (!op || (only && strcmp(only, t[i].op)) || at_shape_parse(t[i].shape, op->rank, &s) != AT_OK)
            continue;
        int64_t N = op->rank == 3 ? s.N : 0, j;
        for (j = 0; j < *ng; j++)
            if (!strcmp(out[j].op, t[i].op) && out[j].dtype == t[i].dtype && out[j].K == s.K && out[j].N == N)
                break;
        if (j < *ng)
            continue;
        if (*ng == max)
            return at_fail(AT_ERR_USAGE, "more than %d tuned (op, dtype, K, N) for this GPU; pass --op", max);
        shape_group *g = &out[(*ng)++];
        snprintf(g->op, sizeof g->op, "%s", t[i].op);
        g->dtype = t[i].dtype, g->K = s.K, g->N = N;
    }
    qsort(out, (size_t)*ng, sizeof *out, cmp_group);
    return AT_OK;
}

int at_validate_main(int argc, char **argv, const char *home)
{
    const char *db = NULL, *only = NULL;
    char db_buf[4096];
    int mlo = 1, mhi = 32, reps = 9, device = 0, json = 0, served = 0, rc;
    vctx v = {.home = home, .min_ratio = INFINITY, .out = stdout};
    at_tuned_shape *tuned = NULL;
    shape_group *groups = NULL;
    int ntuned = 0, ng = 0;
    atk_table empty = {.version = 1};

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        } else if (!strcmp(a, "--served")) {
            served = 1;
            continue;
        }
        if (!strcmp(a, "--db")) {
            if (!val || !*val)
                return at_fail(AT_ERR_USAGE, "--db needs a file");
            db = val;
        } else if (!strcmp(a, "--m")) {
            if ((rc = parse_m_range(val, &mlo, &mhi)) != AT_OK)
                return rc;
        } else if (!strcmp(a, "--op")) {
            if (!val || !at_op_find(val))
                return at_fail(AT_ERR_USAGE, "bad --op '%s': gemv, gemv_add, rmsnorm, add_rmsnorm, gemma_rmsnorm, "
                                             "add_gemma_rmsnorm or a fused op (rmsnorm_gemv, gemv_swiglu, ...)",
                               val ? val : "");
            only = val;
        } else if (!strcmp(a, "--reps") || !strcmp(a, "--device")) {
            char *end;
            long x = val ? strtol(val, &end, 10) : 0;
            int is_reps = !strcmp(a, "--reps");
            if (!val || *end || end == val || x < (is_reps ? 5 : 0) || x > (is_reps ? 1000 : 64))
                return at_fail(AT_ERR_USAGE, "bad %s '%s': %s", a, val ? val : "",
                               is_reps ? "5..1000 replays" : "a GPU ordinal 0..64");
            *(is_reps ? &reps : &device) = (int)x;
        } else {
            return at_fail(AT_ERR_USAGE, "validate: unknown option '%s' (see autotune validate --help)", a);
        }
        i++;
    }
    if (!db) {
        if ((rc = at_cache_default_path(db_buf, sizeof db_buf)) != AT_OK)
            return rc;
        db = db_buf;
    }
    /* a missing cache is not created: validate reads what was tuned */
    struct stat st;
    if (stat(db, &st) != 0)
        return at_fail(AT_ERR_USAGE, "no cache at %s: tune first (autotune --op gemv --shape 1..16x2048x8192)", db);
    if ((rc = at_cache_open(db, &v.cache)) != AT_OK)
        return rc;
    if ((rc = at_cache_list_tuned(v.cache, NULL, 0, 0, &tuned, &ntuned)) != AT_OK)
        goto done;
    if (ntuned == 0) {
        rc = at_fail(AT_ERR_USAGE, "%s holds no tuned entry: nothing to validate (tune first)", db);
        goto done;
    }
    if ((rc = at_gpu_open(device, 0, &v.g)) != AT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", at_errmsg());
        rc = at_fail(rc, "validate runs on the GPU: %s", msg);
        goto done;
    }
    free(tuned);
    tuned = NULL;
    int cc = 10 * v.g->info.cc_major + v.g->info.cc_minor;
    if ((rc = at_cache_list_tuned(v.cache, v.g->info.name, cc, v.g->info.sms, &tuned, &ntuned)) != AT_OK)
        goto done;
    if (!(groups = calloc(MAX_SHAPES, sizeof *groups))) {
        rc = at_fail(AT_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = groups_of(tuned, ntuned, only, groups, MAX_SHAPES, &ng)) != AT_OK)
        goto done;
    if (ng == 0) {
        rc = at_fail(AT_ERR_USAGE, "%s holds nothing%s%s tuned for %s (sm_%d, %d SMs)", db, only ? " of op " : "",
                     only ? only : "", v.g->info.name, cc, v.g->info.sms);
        goto done;
    }
    if ((rc = at_bench_ceilings(v.g)) != AT_OK)
        goto done;
    if (home) {
        char tpl[4200];
        snprintf(tpl, sizeof tpl, "%s/templates", home);
        if ((rc = at_templates_open(tpl, &v.tpl)) != AT_OK)
            goto done;
    }
    /* the runtime as an engine opens the table, without the overrides the
    ** last validation stored; and a context with nothing tuned: the fallback */
    if (atk_open(db, device, served ? 0 : ATK_NO_OVERRIDES, &v.rt) != ATK_OK ||
        atk_open_table(&empty, device, 0, &v.fb) != ATK_OK ||
        atk_open(db, device, ATK_UNFUSED | (served ? 0 : ATK_NO_OVERRIDES), &v.unf) != ATK_OK) {
        rc = at_fail(AT_ERR_CUDA, "atk_open: %s", atk_errmsg(NULL));
        goto done;
    }
    v.reps = reps;
    v.db = db;
    v.json = json;
    signal(SIGINT, on_sigint);

    if (json)
        fprintf(v.out, "{\n  \"device\": \"%s\", \"cc\": %d, \"sms\": %d, \"served\": %s, \"db\": ",
                v.g->info.name, cc, v.g->info.sms, served ? "true" : "false");
    else
        fprintf(v.out,
                "validate %s (sm_%d, %d SMs), %s: %d shapes x %s = %d..%d through the runtime, against its "
                "fallback; cold data (>= 3x L2), graph replay, median of %d interleaved replays\n\n"
                "%-18s %-5s %-18s %-16s %-12s %9s %9s %7s  %s\n",
                v.g->info.name, cc, v.g->info.sms, db, ng, "M", mlo, mhi, reps, "op", "dtype", "shape", "path",
                "kernel", "atk us", "base us", "ratio", "verdict");
    if (json) {
        at_json_write_string(v.out, db);
        fprintf(v.out, ", \"m\": [%d, %d], \"reps\": %d, \"read_gbps\": %.1f,\n  \"cells\": [", mlo, mhi, reps,
                v.g->info.read_gbps);
    }
    int first = 1, tty = isatty(2);
    for (int gi = 0; gi < ng && rc == AT_OK && !stop_flag; gi++) {
        for (int M = mlo; M <= mhi && rc == AT_OK && !stop_flag; M++) {
            at_validation row;
            if (tty)
                fprintf(stderr, "\r  validating %s %lldx%lld %s=%d (%d of %d shapes) ", groups[gi].op,
                        (long long)groups[gi].K, (long long)groups[gi].N, groups[gi].N ? "M" : "T", M, gi + 1, ng);
            if ((rc = one_cell(&v, &groups[gi], M, &row)) != AT_OK)
                break;
            if (tty)
                fputs("\r\033[K", stderr);
            if (!served && (rc = at_cache_put_validation(v.cache, &row)) != AT_OK)
                break;
            tally(&v, &row);
            print_row(&v, &row, first);
            first = 0;
            fflush(v.out);
        }
        if (!json && rc == AT_OK)
            fputc('\n', v.out);
    }
    if (stop_flag && rc == AT_OK)
        rc = at_fail(AT_ERR_INTERRUPTED, "interrupted: the %d cells measured are stored", v.cells);
    if (rc == AT_OK && v.harness)
        rc = at_fail(AT_ERR_HARNESS, "%d cells broke the read ceiling: a harness bug; stored as such, not as overrides",
                     v.harness);
    double gm = v.nratio ? exp(v.log_ratio_sum / v.nratio) : 0.0;
    if (json) {
        fprintf(v.out,
                "\n  ],\n  \"summary\": {\"cells\": %d, \"kept\": %d, \"fallback\": %d, \"overridden\": %d,"
                " \"wrong\": %d, \"harness\": %d, \"kept_geomean\": %.4f, \"kept_min\": %.4f, \"status\": %d}\n}\n",
                v.cells, v.kept, v.fallback, v.overridden, v.wrong, v.harness, gm,
                v.nratio ? v.min_ratio : 0.0, rc);
    } else if (v.cells) {
        fprintf(v.out,
                "%d calls: %d served by a tuned kernel (geomean %.2fx over the fallback, min %.2fx), %d already on "
                "the fallback, %d overridden (slower beyond the noise), %d overridden as WRONG\n",
                v.cells, v.kept, gm, v.nratio ? v.min_ratio : 0.0, v.fallback, v.overridden, v.wrong);
        if (served)
            fprintf(v.out, "as served (stored overrides applied); nothing stored\n");
        else
            fprintf(v.out, "stored in %s: the runtime falls back at the %d overridden call shapes\n", db,
                    v.overridden + v.wrong);
    }
done:
    atk_close(v.rt);
    atk_close(v.fb);
    atk_close(v.unf);
    at_templates_free(v.tpl);
    for (int i = 0; i < ATK_NOPS; i++)
        at_spec_free(v.spec[i]);
    at_gpu_close(v.g);
    at_cache_close(v.cache);
    free(tuned);
    free(groups);
    return rc;
}
