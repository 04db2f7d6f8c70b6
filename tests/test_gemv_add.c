/*
** test_gemv_add.c — the gemv_add op's kernels without a GPU: the distinct
** live candidates of search/gemv.lua loaded for gemv_add (TP_ADD=1, the
** residual add in every GEMV template's epilogue) compile with NVRTC for
** sm_80, sm_89 and sm_90 at an awkward K and N (1096 x 1000) for M = 1
** (warp_row, splitk) and M = 3 (multi_token, mma; mma_bulk on sm_90).
** "Distinct" as far as TP_ADD is concerned: the options the tuner compiles
** (at_candidate_compile_options) with the parameters folded that shape only
** the weight stream and the main loop (cache hint, unroll, stages, chunk
** sizes, activations in shared memory, PDL), not the reductions and stores
** the epilogue sits in (warps, rows, tokens, tiles, K splits, vector width
** stay). With TP_ADD=0 the templates' PTX is byte for byte what it was
** before TP_ADD, and test_nvrtc / test_skinny compile every gemv candidate;
** folding keeps this test at minutes, not tens of minutes, on a CI machine.
*/
#include "autotune.h"
#include "tinytest.h"
#include "distinct_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The parameters that shape only the weight stream and the main loop. */
static const char *const folded[] = {"TP_CACHE", "TP_UNROLL", "TP_STAGES", "TP_PRE", "TP_XK",
                                     "TP_KC",    "TP_DEPTH",  "TP_PDL",    "TP_L2PF", NULL};

/* Adds the live candidates of shape for arch to list[*n] unless there. */
static void add_distinct(at_spec *spec, const char *shape, int arch, distinct_cand *list, int *n, int cap,
                         int *nlive)
{
    at_problem pb = {.op = "gemv_add", .dtype = AT_BF16, .arch = arch, .sms = 132};
    at_candidate *c = NULL;
    int nc = 0;
    CHECK_EQ_INT(at_shape_parse(shape, 3, &pb.shape), AT_OK);
    CHECK_EQ_INT(at_spec_expand(spec, &pb, &c, &nc), AT_OK);
    for (int i = 0; i < nc; i++) {
        if (c[i].pruned_by[0])
            continue;
        (*nlive)++;
        distinct_cand d = {.strategy = c[i].strategy};
        at_candidate_compile_options(&c[i], arch, d.options, sizeof d.options);
        CHECK_STR_HAS(d.options, "-DTP_ADD=1");
        dk_fold(d.options, folded, d.folded, sizeof d.folded);
        dk_add(list, n, cap, &d);
    }
    free(c);
}

static void compile_for(int arch, at_dtype dtype)
{
    enum { CAP = 4096 };
    static const char *const shapes[] = {"1x1096x1000", "3x1096x1000"};
    distinct_cand *list = calloc(CAP, sizeof *list);
    at_spec *spec = NULL;
    at_templates *tpl = NULL;
    int n = 0, nlive = 0, per[8] = {0};
    CHECK(list != NULL);
    CHECK_EQ_INT(at_spec_load_op("search/gemv.lua", "gemv_add", &spec), AT_OK);
    CHECK_EQ_INT(at_templates_open("templates", &tpl), AT_OK);
    if (!list || !spec || !tpl)
        goto done;
    for (int i = 0; i < 2; i++)
        add_distinct(spec, shapes[i], arch, list, &n, CAP, &nlive);
    CHECK(n > 0 && n < CAP);
    double t = dk_compile(spec, tpl, list, n, arch, dtype, per);
    /* every strategy live at these shapes on this arch is compiled */
    CHECK(per[0] > 0 && per[1] > 0 && per[2] > 0 && per[3] > 0);
    CHECK(arch >= 90 ? per[4] > 0 : per[4] == 0);
    printf("  sm_%d %s: %d live, %d distinct (warp_row %d, splitk %d, multi_token %d, mma %d, mma_bulk %d), "
           "%.1f s\n",
           arch, at_dtype_name(dtype), nlive, n, per[0], per[1], per[2], per[3], per[4], t);
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
