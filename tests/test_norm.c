/*
** test_norm.c — the RMSNorm family without a GPU: the fp64 reference on
** hand-computed cases (values and z's rounding), add_* == norm of the z it
** returns, the one spec of the four ops (told its op, sane launch shapes, named
** pruning), every candidate compiling with NVRTC for sm_89 and sm_90
** through at_search_run's dry run (as the CLI), and every baseline kernel
** compiling alone.
*/
#include "autotune.h"
#include "norm_ref.h"
#include "tinytest.h"
#include "verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOPS 4
static const char *const OPS[NOPS] = {"rmsnorm", "add_rmsnorm", "gemma_rmsnorm", "add_gemma_rmsnorm"};
#define NORM_SPEC "search/norm.lua" /* one spec, told the op */

static int near(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fabs(b) + 1e-300;
}

/* ------------------------------------------------------------ reference */

/* 16-bit values of floats that are exact in both dtypes. */
static void halves(at_dtype d, const float *f, uint16_t *h, int n)
{
    for (int i = 0; i < n; i++)
        h[i] = at_f32_to_half(d, f[i]);
}

static void ref_rmsnorm_by_hand(void)
{
    for (int di = 0; di < 2; di++) {
        at_dtype d = di ? AT_FP16 : AT_BF16;
        /* row 0: squares 1, eps 3 -> r = 1/sqrt(1 + 3) = 0.5; row 1: 2s, eps 3 -> r = 1/sqrt(4 + 3) */
        const float xf[8] = {1, -1, 1, -1, 2, 2, 2, 2}, wf[4] = {1, 2, -4, 0.5f};
        uint16_t x[8], w[4];
        double y[8];
        halves(d, xf, x, 8);
        halves(d, wf, w, 4);
        CHECK_EQ_INT(at_norm_ref_run(AT_NORM_RMSNORM, d, 2, 4, x, NULL, w, 0, 3.0f, y, NULL), AT_OK);
        const double want0[4] = {0.5, -1, -2, -0.25};
        for (int i = 0; i < 4; i++) {
            CHECK(y[i] == want0[i]);
            CHECK(near(y[4 + i], 2.0 / sqrt(7.0) * wf[i], 1e-15));
        }
        /* 3-4-5: mean 12.5, eps 0 */
        const float x2f[2] = {3, 4}, w2f[2] = {1, -2};
        uint16_t x2[2], w2[2];
        halves(d, x2f, x2, 2);
        halves(d, w2f, w2, 2);
        CHECK_EQ_INT(at_norm_ref_run(AT_NORM_RMSNORM, d, 1, 2, x2, NULL, w2, 0, 0.0f, y, NULL), AT_OK);
        CHECK(near(y[0], 3.0 / sqrt(12.5), 1e-15));
        CHECK(near(y[1], -8.0 / sqrt(12.5), 1e-15));
    }
}

static void ref_gemma_by_hand(void)
{
    const float xf[4] = {1, -1, 1, -1}, wf[4] = {0, 1, -0.5f, 3}; /* 1 + w = 1, 2, 0.5, 4 */
    const double want[4] = {0.5, -1, 0.25, -2};
    uint16_t x[4], w[4];
    double y[4];
    halves(AT_BF16, xf, x, 4);
    halves(AT_BF16, wf, w, 4);
    CHECK_EQ_INT(at_norm_ref_run(AT_NORM_GEMMA_RMSNORM, AT_BF16, 1, 4, x, NULL, w, 0, 3.0f, y, NULL), AT_OK);
    for (int i = 0; i < 4; i++)
        CHECK(y[i] == want[i]);
    /* fp32 w is used as is: 0.1f is not a bf16 value */
    const float w32[4] = {0.1f, 1, -0.5f, 3};
    CHECK_EQ_INT(at_norm_ref_run(AT_NORM_GEMMA_RMSNORM, AT_BF16, 1, 4, x, NULL, w32, 1, 3.0f, y, NULL),
                 AT_OK);
    CHECK(y[0] == 0.5 * (1.0 + (double)0.1f));
    CHECK(y[0] != 0.5 * (1.0 + (double)at_bf16_to_f32(at_f32_to_bf16(0.1f))));
    for (int i = 1; i < 4; i++)
        CHECK(y[i] == want[i]);
}

/* z rounds to nearest even, and y is computed from the rounded z. */
static void ref_add_rounds_z(void)
{
    /* bf16 (8 significant bits): 1 + 2^-8 ties to 1.0 (even); (1 + 2^-7) + 2^-8 ties to 1 + 2^-6 */
    const uint16_t xb[2] = {0x3F80, 0x3F81}, rb[2] = {0x3B80, 0x3B80}, zb[2] = {0x3F80, 0x3F82};
    /* fp16 (11 bits): 1 + 2^-11 ties to 1.0; (1 + 2^-10) + 2^-11 ties to 1 + 2^-9 */
    const uint16_t xh[2] = {0x3C00, 0x3C01}, rh[2] = {0x1000, 0x1000}, zh[2] = {0x3C00, 0x3C02};
    for (int di = 0; di < 2; di++) {
        at_dtype d = di ? AT_FP16 : AT_BF16;
        const uint16_t *x = di ? xh : xb, *res = di ? rh : rb, *zwant = di ? zh : zb;
        const float onef[2] = {1, 1};
        uint16_t w[2], z[2] = {0, 0}, inplace[2];
        double y[2];
        halves(d, onef, w, 2);
        for (int op = AT_NORM_ADD_RMSNORM; op <= AT_NORM_ADD_GEMMA_RMSNORM; op += 2) {
            CHECK_EQ_INT(at_norm_ref_run((at_norm_op)op, d, 1, 2, x, res, w, 0, 0.0f, y, z), AT_OK);
            CHECK_EQ_INT(z[0], zwant[0]);
            CHECK_EQ_INT(z[1], zwant[1]);
            double z0 = at_half_to_f32(d, zwant[0]), z1 = at_half_to_f32(d, zwant[1]);
            double r = 1.0 / sqrt((z0 * z0 + z1 * z1) / 2.0), f = op == AT_NORM_ADD_GEMMA_RMSNORM ? 2.0 : 1.0;
            CHECK(near(y[1], z1 * r * f, 1e-15));
            /* the unrounded sum would give a visibly different y */
            double u1 = (double)at_half_to_f32(d, x[1]) + (double)at_half_to_f32(d, res[1]);
            double ru = 1.0 / sqrt((z0 * z0 + u1 * u1) / 2.0);
            CHECK(!near(y[1], u1 * ru * f, 1e-4));
            /* residual updated in place gives the same z */
            memcpy(inplace, res, sizeof inplace);
            CHECK_EQ_INT(at_norm_ref_run((at_norm_op)op, d, 1, 2, x, inplace, w, 0, 0.0f, y, inplace), AT_OK);
            CHECK(memcmp(inplace, zwant, sizeof inplace) == 0);
        }
    }
}

static void ref_rejects_misuse(void)
{
    uint16_t x[2] = {0x3F80, 0x3F80}, w[2] = {0x3F80, 0x3F80};
    double y[2];
    at_norm_op op;
    for (int i = 0; i < NOPS; i++) {
        CHECK_EQ_INT(at_norm_ref_parse_op(OPS[i], &op), AT_OK);
        CHECK_EQ_INT(op, i);
        CHECK(strcmp(at_norm_ref_op_name(op), OPS[i]) == 0);
        CHECK_EQ_INT(at_norm_ref_has_residual(op), i == 1 || i == 3);
        CHECK_EQ_INT(at_norm_ref_is_gemma(op), i >= 2);
    }
    CHECK_EQ_INT(at_norm_ref_parse_op("layernorm", &op), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "layernorm");
    CHECK_EQ_INT(at_norm_ref_run(AT_NORM_RMSNORM, AT_BF16, 1, 2, x, NULL, w, 1, 1e-6f, y, NULL),
                 AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "fp32 weights");
    CHECK_EQ_INT(at_norm_ref_run(AT_NORM_ADD_RMSNORM, AT_BF16, 1, 2, x, NULL, w, 0, 1e-6f, y, NULL),
                 AT_ERR_USAGE);
    CHECK_EQ_INT(at_norm_ref_run(AT_NORM_RMSNORM, AT_BF16, 0, 2, x, NULL, w, 0, 1e-6f, y, NULL),
                 AT_ERR_USAGE);
    CHECK_EQ_INT(at_norm_ref_run((at_norm_op)7, AT_BF16, 1, 2, x, NULL, w, 0, 1e-6f, y, NULL), AT_ERR_USAGE);
}

/* add_X's y is X applied to the z that add_X returns, bit for bit; z is the
** rounded fp32 sum. Awkward shape (H = 2050), both dtypes, fp32 Gemma w. */
static void add_is_norm_of_its_z(void)
{
    enum { T = 3, H = 2050, N = T * H };
    uint16_t *x = malloc(N * 2), *res = malloc(N * 2), *z = malloc(N * 2), *w = malloc(H * 2);
    float *w32 = malloc(H * sizeof(float));
    double *ya = malloc(N * sizeof(double)), *yp = malloc(N * sizeof(double));
    CHECK(x && res && z && w && w32 && ya && yp);
    if (!x || !res || !z || !w || !w32 || !ya || !yp)
        goto done;
    for (int di = 0; di < 2; di++) {
        at_dtype d = di ? AT_FP16 : AT_BF16;
        at_fill_random(d, x, N, 11 + (uint64_t)di, 1.0f);
        at_fill_random(d, res, N, 23 + (uint64_t)di, 4.0f);
        at_fill_random(d, w, H, 37 + (uint64_t)di, 1.0f);
        for (int h = 0; h < H; h++)
            w32[h] = at_half_to_f32(d, w[h]) + 1e-3f * (float)(h % 7); /* not 16-bit values */
        for (int k = 0; k < 3; k++) {
            at_norm_op add = k == 0 ? AT_NORM_ADD_RMSNORM : AT_NORM_ADD_GEMMA_RMSNORM;
            at_norm_op plain = k == 0 ? AT_NORM_RMSNORM : AT_NORM_GEMMA_RMSNORM;
            int f32 = k == 2;
            const void *wp = f32 ? (const void *)w32 : (const void *)w;
            CHECK_EQ_INT(at_norm_ref_run(add, d, T, H, x, res, wp, f32, 1e-6f, ya, z), AT_OK);
            CHECK_EQ_INT(at_norm_ref_run(plain, d, T, H, z, NULL, wp, f32, 1e-6f, yp, NULL), AT_OK);
            CHECK(memcmp(ya, yp, N * sizeof(double)) == 0);
            int zbad = 0, nonfinite = 0;
            for (int i = 0; i < N; i++) {
                zbad += z[i] != at_f32_to_half(d, at_half_to_f32(d, x[i]) + at_half_to_f32(d, res[i]));
                nonfinite += !isfinite(ya[i]);
            }
            CHECK_EQ_INT(zbad, 0);
            CHECK_EQ_INT(nonfinite, 0);
        }
    }
done:
    free(x);
    free(res);
    free(z);
    free(w);
    free(w32);
    free(ya);
    free(yp);
}

/* ---------------------------------------------------------------- specs */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) == (size_t)n)
            buf[n] = '\0';
        else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

/* One spec serves the four ops: loaded for each, it names that op and sets
** the template's TP_OP to it; loaded for no op or another op, it refuses
** with a message naming the ops it serves. */
static void one_spec_serves_four_ops(void)
{
    for (int i = 0; i < NOPS; i++) {
        at_spec *sp = NULL;
        at_candidate *c = NULL;
        int n = 0;
        at_problem pb = {OPS[i], AT_BF16, {0, 0, 0, 0}, 90, 0};
        CHECK_EQ_INT(at_shape_parse("1x2048", 2, &pb.shape), AT_OK);
        CHECK_EQ_INT(at_spec_load_op(NORM_SPEC, OPS[i], &sp), AT_OK);
        if (!sp)
            continue;
        CHECK(strcmp(at_spec_op(sp), OPS[i]) == 0);
        CHECK_EQ_INT(at_spec_expand(sp, &pb, &c, &n), AT_OK);
        CHECK(n > 0);
        for (int k = 0; k < n; k++)
            CHECK_EQ_INT((int)at_candidate_param(&c[k], "TP_OP", -1), i);
        free(c);
        at_spec_free(sp);
    }
    const char *bad[] = {NULL, "gemv", "rms"};
    for (int i = 0; i < 3; i++) {
        at_spec *sp = NULL;
        CHECK_EQ_INT(at_spec_load_op(NORM_SPEC, bad[i], &sp), AT_ERR_SPEC);
        CHECK(sp == NULL);
        CHECK_STR_HAS(at_errmsg(), "add_gemma_rmsnorm");
        CHECK_STR_HAS(at_errmsg(), bad[i] ? bad[i] : "no op");
    }
}

static long long cdiv(long long a, long long b)
{
    return (a + b - 1) / b;
}

/* Vectors per thread the candidate's layout gives one thread of a row. */
static long long vectors_per_thread(const at_candidate *c, const char *strategy, long long nvec)
{
    if (strcmp(strategy, "warp_rows") == 0)
        return cdiv(nvec, at_candidate_param(c, "TP_THREADS_PER_ROW", 1));
    return cdiv(cdiv(nvec, at_candidate_param(c, "TP_SPLIT", 1)), at_candidate_param(c, "TP_THREADS", 1));
}

/* One spec on one problem, Lua only: launch shapes cover the rows, vectors
** align, a register-held row fits its TP_ITEMS, PDL and clusters only on
** sm_90, bytes as documented. Returns the number of live candidates. */
static int check_expansion(int op, at_dtype d, const char *shape, int arch, int verbose)
{
    at_spec *sp = NULL;
    at_candidate *c = NULL;
    int n = 0, live = 0, per[3] = {0, 0, 0};
    at_problem pb = {OPS[op], d, {0, 0, 0, 0}, arch, 0};
    CHECK_EQ_INT(at_shape_parse(shape, 2, &pb.shape), AT_OK);
    CHECK_EQ_INT(at_spec_load_op(NORM_SPEC, OPS[op], &sp), AT_OK);
    if (!sp)
        return 0;
    int rc = at_spec_expand(sp, &pb, &c, &n);
    if (rc != AT_OK)
        fprintf(stderr, "  %s %s: %s\n", OPS[op], shape, at_errmsg());
    CHECK_EQ_INT(rc, AT_OK);
    long long T = pb.shape.M, H = pb.shape.K;
    for (int i = 0; i < n; i++) {
        const at_candidate *k = &c[i];
        const char *st = at_spec_strategy_name(sp, k->strategy);
        CHECK_EQ_INT(at_candidate_param(k, "TP_OP", -1), op);
        CHECK_EQ_INT(at_candidate_param(k, "TP_WFP32", -1), 0);
        if (k->pruned_by[0])
            continue;
        live++;
        CHECK(k->strategy >= 0 && k->strategy < 3);
        per[k->strategy % 3]++;
        long long vec = at_candidate_param(k, "TP_VEC", 0);
        long long block = (long long)k->block[0] * k->block[1] * k->block[2];
        CHECK(H % vec == 0);
        CHECK(block % 32 == 0 && block <= 1024);
        CHECK(arch >= 90 || at_candidate_param(k, "TP_PDL", 0) == 0);
        if (at_candidate_param(k, "TP_REGS", -1) == 1) /* a held row is held whole: no re-read */
            CHECK(at_candidate_param(k, "TP_ITEMS", 0) >= vectors_per_thread(k, st, H / vec));
        else
            CHECK_EQ_INT(at_candidate_param(k, "TP_ITEMS", 0), 1);
        if (strcmp(st, "warp_rows") == 0) {
            long long rpb = at_candidate_param(k, "TP_ROWS_PER_BLOCK", 0);
            CHECK_EQ_INT(block, at_candidate_param(k, "TP_THREADS_PER_ROW", 0) * rpb);
            CHECK_EQ_INT(k->grid[0], cdiv(T, rpb));
        } else if (strcmp(st, "block_row") == 0) {
            CHECK_EQ_INT(block, at_candidate_param(k, "TP_THREADS", 0));
            CHECK_EQ_INT(k->grid[0], T);
        } else {
            CHECK(strcmp(st, "split_row") == 0);
            CHECK(arch >= 90);
            CHECK_EQ_INT(k->grid[0], at_candidate_param(k, "TP_SPLIT", 0));
            CHECK_EQ_INT(k->grid[1], T);
        }
        CHECK_EQ_INT(k->smem, 0);
    }
    double bytes = 0;
    CHECK_EQ_INT(at_spec_bytes(sp, &pb, &bytes), AT_OK);
    CHECK(bytes == (double)(((op & 1) ? 4 : 2) * T * H * 2 + H * 2));
    CHECK(live > 0);
    if (verbose)
        printf("  %-17s %-9s %s sm_%d: %4d candidates, %2d live (warp_rows %d, block_row %d, split_row %d)\n",
               OPS[op], shape, at_dtype_name(d), arch, n, live, per[0], per[1], per[2]);
    free(c);
    at_spec_free(sp);
    return live;
}

static const char *const SHAPES[] = {"1x2048", "4096x2560", "3x2050"};
#define NSHAPES 3
/* Lua-only shapes besides: decode sizes, an odd H (TP_VEC = 1), tiny H. */
static const char *const MORE_SHAPES[] = {"1x8192", "16x4096",  "512x2048", "4096x8192",
                                          "5x2051", "4096x128", "1x64"};
#define NMORE 7

static void spec_spaces_are_sane(void)
{
    for (int op = 0; op < NOPS; op++)
        for (int a = 0; a < 2; a++)
            for (int di = 0; di < 2; di++) {
                for (int s = 0; s < NSHAPES; s++)
                    check_expansion(op, di ? AT_FP16 : AT_BF16, SHAPES[s], a ? 90 : 89, di == 0);
                for (int s = 0; s < NMORE; s++)
                    check_expansion(op, di ? AT_FP16 : AT_BF16, MORE_SHAPES[s], a ? 90 : 89, 0);
            }
}

/* -------------------------------------------------------------- compile */

/* at_search_run's dry run for op on the spec at `spec` (TxH shape):
** expand, prune, compile every live candidate, as the CLI does. */
static int dry_run_spec(int op, const char *spec, at_dtype d, const char *shape, int arch, at_search_result *res)
{
    at_search_opts o = {.op = OPS[op],
                        .dtype = d,
                        .spec_path = spec,
                        .templates_root = "templates",
                        .arch = arch,
                        .dry_run = 1,
                        .reps = 7};
    int rc = at_shape_parse(shape, 2, &o.shape);
    if (rc != AT_OK) {
        memset(res, 0, sizeof *res);
        return rc;
    }
    return at_search_run(&o, res);
}

static int dry_run(int op, at_dtype d, const char *shape, int arch, at_search_result *res)
{
    return dry_run_spec(op, NORM_SPEC, d, shape, arch, res);
}

/* Every live candidate compiled, none failed, none spilled, every pruned
** candidate says why. Returns the number compiled. */
static int check_result(const char *what, const char *shape, int arch, int rc, at_search_result *res)
{
    if (rc != AT_OK)
        fprintf(stderr, "  %s %s sm_%d: %s\n", what, shape, arch, at_errmsg());
    CHECK_EQ_INT(rc, AT_OK);
    CHECK(res->ncand > 0);
    CHECK(res->ncompiled > 0);
    CHECK_EQ_INT(res->ncompile_failed, 0);
    CHECK_EQ_INT(res->ncompiled + res->npruned, res->ncand);
    CHECK_EQ_INT(res->nspills, 0);
    CHECK_EQ_INT(res->arch, arch);
    for (int i = 0; i < res->nrows; i++) {
        const at_trial *t = &res->rows[i].trial;
        if (t->state == AT_TRIAL_PRUNED)
            CHECK(t->reason[0] != '\0');
        else if (t->state == AT_TRIAL_COMPILE_FAIL)
            fprintf(stderr, "  %s %s sm_%d: %s %s: %s\n", what, shape, arch, t->strategy, t->params,
                    t->reason);
        else if (t->spill_bytes > 0)
            fprintf(stderr, "  %s %s sm_%d: %s %s spills %d bytes\n", what, shape, arch, t->strategy,
                    t->params, t->spill_bytes);
    }
    printf("  %-17s %-9s sm_%d: %4d candidates, %4d pruned, %2d compiled, %.1f s of compiling\n", what, shape,
           arch, res->ncand, res->npruned, res->ncompiled, res->t_compile);
    return res->ncompiled;
}

static int total_compiled;

static void compile_op(int op)
{
    for (int a = 0; a < 2; a++)
        for (int s = 0; s < NSHAPES; s++) {
            at_search_result res;
            int rc = dry_run(op, AT_BF16, SHAPES[s], a ? 90 : 89, &res);
            total_compiled += check_result(OPS[op], SHAPES[s], a ? 90 : 89, rc, &res);
            at_search_result_free(&res);
        }
}

static void rmsnorm_compiles(void)
{
    compile_op(0);
}
static void add_rmsnorm_compiles(void)
{
    compile_op(1);
}
static void gemma_rmsnorm_compiles(void)
{
    compile_op(2);
}
static void add_gemma_rmsnorm_compiles(void)
{
    compile_op(3);
}

/* fp16 elements: the same code paths with the other conversions. */
static void fp16_compiles(void)
{
    for (int op = 0; op < NOPS; op++) {
        at_search_result res;
        int rc = dry_run(op, AT_FP16, "1x2048", 90, &res);
        total_compiled += check_result(OPS[op], "1x2048", 90, rc, &res);
        at_search_result_free(&res);
    }
}

/* The Gemma ops on the spec with TP_WFP32 = 1 (fp32 weights): same space, fp32
** loads, fp32 w in the bytes, and the key's options say so. */
static void gemma_fp32_weights_compile(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/at_test_norm_w32_%d.lua", (int)getpid());
    for (int op = 2; op < NOPS; op++) {
        char *src = slurp(NORM_SPEC), *p = src ? strstr(src, "= 0 -- [NORM_OP]") : NULL;
        FILE *f = NULL;
        CHECK(p != NULL);
        if (p) {
            p[2] = '1';
            f = fopen(path, "w");
        }
        CHECK(f != NULL);
        if (f) {
            fputs(src, f);
            fclose(f);
        }
        free(src);
        if (!f)
            continue;
        for (int a = 0; a < 2; a++) {
            const char *shape = a ? "3x2050" : "1x2048";
            at_shape sh;
            at_search_result res;
            CHECK_EQ_INT(at_shape_parse(shape, 2, &sh), AT_OK);
            int rc = dry_run_spec(op, path, AT_BF16, shape, a ? 90 : 89, &res);
            double bytes = res.bytes;
            char what[48];
            snprintf(what, sizeof what, "%s w32", OPS[op]);
            total_compiled += check_result(what, shape, a ? 90 : 89, rc, &res);
            CHECK(bytes == (double)(((op & 1) ? 4 : 2) * sh.M * sh.K * 2 + sh.K * 4));
            CHECK_STR_HAS(res.key.options, "-DTP_WFP32=1");
            for (int i = 0; i < res.nrows; i++)
                CHECK_STR_HAS(res.rows[i].trial.params, "TP_WFP32=1");
            at_search_result_free(&res);
        }
    }
    remove(path);
}

/* Every baseline file compiles alone (NVRTC, no -D but the ones listed). */
static void baselines_compile(void)
{
    static const char *const files[] = {"norm_add",        "norm_cast_f32",  "norm_square",
                                        "norm_mean",       "norm_rsqrt_eps", "norm_mul_rows",
                                        "norm_mul_weight", "norm_cast_back", "norm_naive"};
    /* the op-dependent kernels take every op and weight dtype; the rest one variant */
    static const char *const variants[] = {"-DTP_OP=0",
                                           "-DTP_OP=1",
                                           "-DTP_OP=2",
                                           "-DTP_OP=3",
                                           "-DTP_OP=2 -DTP_WFP32=1",
                                           "-DTP_OP=3 -DTP_WFP32=1"};
    enum { NF = sizeof files / sizeof files[0], NV = sizeof variants / sizeof variants[0] };
    at_templates *tpl = NULL;
    at_compile_job jobs[NF * NV * 4];
    char names[NF][64];
    int nj = 0;
    memset(jobs, 0, sizeof jobs);
    CHECK_EQ_INT(at_templates_open("templates", &tpl), AT_OK);
    if (!tpl)
        return;
    for (int f = 0; f < NF; f++) {
        const char *src = NULL;
        int opdep = strcmp(files[f], "norm_naive") == 0 || strcmp(files[f], "norm_mul_weight") == 0;
        snprintf(names[f], sizeof names[f], "baseline/%s.cu", files[f]);
        CHECK_EQ_INT(at_templates_source(tpl, names[f], &src), AT_OK);
        if (!src)
            continue;
        CHECK_STR_HAS(src, files[f]); /* the entry is named after the file */
        for (int a = 0; a < 2; a++)
            for (int di = 0; di < 2; di++)
                for (int v = 0; v < (opdep ? NV : 1); v++) {
                    at_compile_job *j = &jobs[nj++];
                    j->tpl = tpl;
                    j->name = names[f];
                    j->source = src;
                    j->arch = a ? 90 : 89;
                    j->dtype = di ? AT_FP16 : AT_BF16;
                    snprintf(j->options, sizeof j->options, "%s", opdep ? variants[v] : "");
                }
    }
    CHECK_EQ_INT(at_nvrtc_compile_all(jobs, nj, 0, NULL, NULL), AT_OK);
    int ok = 0;
    for (int i = 0; i < nj; i++) {
        if (!jobs[i].ok)
            fprintf(stderr, "  %s sm_%d %s: %s\n", jobs[i].name, jobs[i].arch, jobs[i].options,
                    jobs[i].log ? jobs[i].log : "(no log)");
        ok += jobs[i].ok;
        CHECK(jobs[i].ok);
        CHECK_EQ_INT(jobs[i].spill_bytes, 0);
        at_compile_job_clear(&jobs[i]);
    }
    total_compiled += ok;
    printf("  baselines: %d of %d compiled (%d files, sm_89 and sm_90, bf16 and fp16)\n", ok, nj, (int)NF);
    at_templates_free(tpl);
}

int main(void)
{
    TT_RUN(ref_rmsnorm_by_hand);
    TT_RUN(ref_gemma_by_hand);
    TT_RUN(ref_add_rounds_z);
    TT_RUN(ref_rejects_misuse);
    TT_RUN(add_is_norm_of_its_z);
    TT_RUN(one_spec_serves_four_ops);
    TT_RUN(spec_spaces_are_sane);
    TT_RUN(baselines_compile);
    TT_RUN(rmsnorm_compiles);
    TT_RUN(add_rmsnorm_compiles);
    TT_RUN(gemma_rmsnorm_compiles);
    TT_RUN(add_gemma_rmsnorm_compiles);
    TT_RUN(fp16_compiles);
    TT_RUN(gemma_fp32_weights_compile);
    printf("  %d compilations in all\n", total_compiled);
    return TT_DONE();
}
