/*
** test_gemv_fused.c — the fused decode ops' kernels without a GPU: the
** distinct live candidates of search/gemv.lua loaded for each fused op
** (TP_NORM, TP_SWIGLU in warp_row, splitk, multi_token) compile with NVRTC
** for sm_80, sm_89 and sm_90 on the Qwen3.5-2B shapes they serve, at M = 1
** and at the bucket M = 8: after a norm 2048 -> 5120 (attn qkv+gate),
** 2048 -> 8192 (linear-attn in_proj_qkvz), 2048 -> 32 (in_proj_ba),
** 2048 -> 248320 (lm_head); SwiGLU 2048 -> 6144 (the MLP's gate_up).
** "Distinct": the options the tuner compiles with the parameters folded
** that shape only the weight stream and the main loop (cache hint, unroll,
** PDL, prefetch; as test_gemv_add folds them), and TP_NORM 2 folded into
** 1 (Gemma's 1 + w is one add in the same code). So each arch compiles
** four groups: norm (rmsnorm_gemv, gemma_rmsnorm_gemv), SwiGLU
** (gemv_swiglu), both (the two norm + SwiGLU ops), and the residual-add
** forms (add_rmsnorm_gemv, add_gemma_rmsnorm_gemv: TP_RES, on the shapes
** after attention: 2048 -> 12288 gate_up and 2048 -> 5120); the counts are
** printed.
*/
#include "autotune.h"
#include "tinytest.h"
#include "distinct_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The parameters that shape only the weight stream and the main loop, and
** TP_NORM (Gemma's 1 + w is one add in the same code). */
static const char *const folded[] = {"TP_CACHE", "TP_UNROLL", "TP_STAGES", "TP_PRE",  "TP_XK", "TP_KC",
                                     "TP_DEPTH", "TP_PDL",    "TP_L2PF",   "TP_NORM", NULL};

/* Adds op's live candidates at shape for arch to list[*n] unless there. */
static void add_distinct(const char *op, const char *shape, int arch, distinct_cand *list, int *n, int cap,
                         int *nlive, int *staged)
{
    at_problem pb = {.op = op, .dtype = AT_BF16, .arch = arch, .sms = 132};
    at_spec *spec = NULL;
    at_candidate *c = NULL;
    int nc = 0, norm = strstr(op, "norm") != NULL, swiglu = strstr(op, "swiglu") != NULL;
    CHECK_EQ_INT(at_spec_load_op("search/gemv.lua", op, &spec), AT_OK);
    CHECK_EQ_INT(at_shape_parse(shape, 3, &pb.shape), AT_OK);
    if (!spec)
        return;
    CHECK_EQ_INT(at_spec_expand(spec, &pb, &c, &nc), AT_OK);
    for (int i = 0; i < nc; i++) {
        if (c[i].pruned_by[0])
            continue;
        (*nlive)++;
        distinct_cand d = {.strategy = c[i].strategy};
        at_candidate_compile_options(&c[i], arch, d.options, sizeof d.options);
        if (norm)
            CHECK_STR_HAS(d.options, strstr(op, "gemma") ? "-DTP_NORM=2" : "-DTP_NORM=1");
        if (swiglu)
            CHECK_STR_HAS(d.options, "-DTP_SWIGLU=1");
        if (!strncmp(op, "add_", 4)) {
            CHECK(strstr(d.options, "-DTP_RES=1") || strstr(d.options, "-DTP_RES=2"));
            *staged += strstr(d.options, "-DTP_RES=2") != NULL;
        } else
            CHECK(strstr(d.options, "TP_RES") == NULL);
        dk_fold(d.options, folded, d.folded, sizeof d.folded);
        dk_add(list, n, cap, &d);
    }
    free(c);
    at_spec_free(spec);
}

static void compile_for(int arch, at_dtype dtype)
{
    enum { CAP = 8192 };
    static const char *const ops[] = {"rmsnorm_gemv",           "gemma_rmsnorm_gemv",  "gemv_swiglu",
                                      "rmsnorm_gemv_swiglu",    "gemma_rmsnorm_gemv_swiglu", "add_rmsnorm_gemv",
                                      "add_gemma_rmsnorm_gemv"};
    static const char *const norm_shapes[] = {"1x2048x5120", "8x2048x5120", "1x2048x8192",  "8x2048x8192",
                                              "1x2048x32",   "8x2048x32",   "1x2048x248320", "8x2048x248320"};
    static const char *const swiglu_shapes[] = {"1x2048x6144", "8x2048x6144"};
    /* the residual-add forms: after attention, into the MLP's gate_up, and into attn qkv+gate */
    static const char *const res_shapes[] = {"1x2048x12288", "8x2048x12288", "1x2048x5120", "8x2048x5120"};
    distinct_cand *list = calloc(CAP, sizeof *list);
    at_spec *spec = NULL;
    at_templates *tpl = NULL;
    int n = 0, nlive = 0, staged = 0, per[8] = {0};
    CHECK(list != NULL);
    CHECK_EQ_INT(at_spec_load_op("search/gemv.lua", "rmsnorm_gemv", &spec), AT_OK); /* template names */
    CHECK_EQ_INT(at_templates_open("templates", &tpl), AT_OK);
    if (!list || !spec || !tpl)
        goto done;
    for (int o = 0; o < 7; o++) {
        int swiglu = strstr(ops[o], "swiglu") != NULL, res = strncmp(ops[o], "add_", 4) == 0;
        const char *const *shapes = res ? res_shapes : swiglu ? swiglu_shapes : norm_shapes;
        int ns = res ? 4 : swiglu ? 2 : 8;
        for (int i = 0; i < ns; i++)
            add_distinct(ops[o], shapes[i], arch, list, &n, CAP, &nlive, &staged);
    }
    CHECK(n > 0 && n < CAP);
    double t = dk_compile(spec, tpl, list, n, arch, dtype, per);
    /* the three CUDA-core strategies are compiled; the mma ones never live */
    CHECK(per[0] > 0 && per[1] > 0 && per[2] > 0);
    CHECK(per[3] == 0 && per[4] == 0);
    CHECK(staged > 0); /* the residual-add forms' TP_RES=2 (staged z) candidates are among them */
    printf("  sm_%d %s: %d live (%d staged-z), %d distinct kernels compiled (warp_row %d, splitk %d, multi_token %d), "
           "%.1f s\n",
           arch, at_dtype_name(dtype), nlive, staged, n, per[0], per[1], per[2], t);
done:
    free(list);
    at_templates_free(tpl);
    at_spec_free(spec);
}

static void compiles_sm90_bf16(void) { compile_for(90, AT_BF16); }
static void compiles_sm89_fp16(void) { compile_for(89, AT_FP16); }
static void compiles_sm80_bf16(void) { compile_for(80, AT_BF16); }

int main(void)
{
    TT_RUN(compiles_sm90_bf16);
    TT_RUN(compiles_sm89_fp16);
    TT_RUN(compiles_sm80_bf16);
    return TT_DONE();
}
