/*
** test_fused_ref.c — the fp64 reference of the fused decode ops (cpu): the
** normalized x is rounded to the dtype before the GEMV reads it, Gemma
** scales by 1 + w, SwiGLU rounds g and u before silu(g) * u, the combined
** op is its two halves in sequence, no fusion is a plain GEMV, and bad
** arguments are refused by name.
*/
#include "autotune.h"
#include "fused_ref.h"
#include "tinytest.h"
#include "verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint16_t bf(float f)
{
    return at_f32_to_half(AT_BF16, f);
}

/* x = (1, 1, 1, 7): r = 1/sqrt(13 + eps) and x * r = 0.27735..., which bf16
** rounds to 0.27734375. W = the 4x4 identity, so y is xn itself: the
** reference must hand the GEMV the rounded value. */
static void norm_output_is_rounded_before_the_gemv(void)
{
    uint16_t x[4] = {bf(1), bf(1), bf(1), bf(7)}, w[4], W[16], xn[4];
    double y[4];
    for (int k = 0; k < 4; k++)
        w[k] = bf(1.0f);
    for (int i = 0; i < 16; i++)
        W[i] = bf(i % 5 == 0 ? 1.0f : 0.0f);
    CHECK_EQ_INT(at_fused_ref_norm(AT_FUSED_NORM_RMS, AT_BF16, 1, 4, x, w, 1e-6f, xn), AT_OK);
    CHECK(at_half_to_f32(AT_BF16, xn[0]) == 0.27734375f);
    CHECK_EQ_INT(at_fused_ref_run(AT_FUSED_NORM_RMS, 0, AT_BF16, 1, 4, 4, x, w, W, 1e-6f, y), AT_OK);
    double unrounded = 1.0 / sqrt(13.0 + 1e-6);
    CHECK(y[0] == 0.27734375);
    CHECK(fabs(y[0] - unrounded) > 1e-6); /* not the unrounded 0.27735 */
    for (int k = 0; k < 4; k++)
        CHECK(y[k] == (double)at_half_to_f32(AT_BF16, xn[k]));
}

/* Gemma scales by 1 + w: w = 0 is rmsnorm with w = 1, and w = 0.5 is
** rmsnorm with w = 1.5. */
static void gemma_scales_by_one_plus_w(void)
{
    enum { M = 2, K = 40 };
    uint16_t x[M * K], w0[K], w1[K], wh[K], w15[K], a[M * K], b[M * K];
    at_fill_random(AT_BF16, x, M * K, 11, 1.0f);
    for (int k = 0; k < K; k++) {
        w0[k] = bf(0.0f);
        w1[k] = bf(1.0f);
        wh[k] = at_f32_to_half(AT_FP16, 0.5f); /* the second pair in fp16 */
        w15[k] = at_f32_to_half(AT_FP16, 1.5f);
    }
    CHECK_EQ_INT(at_fused_ref_norm(AT_FUSED_NORM_GEMMA, AT_BF16, M, K, x, w0, 1e-5f, a), AT_OK);
    CHECK_EQ_INT(at_fused_ref_norm(AT_FUSED_NORM_RMS, AT_BF16, M, K, x, w1, 1e-5f, b), AT_OK);
    CHECK(memcmp(a, b, sizeof a) == 0);
    at_fill_random(AT_FP16, x, M * K, 12, 1.0f);
    CHECK_EQ_INT(at_fused_ref_norm(AT_FUSED_NORM_GEMMA, AT_FP16, M, K, x, wh, 1e-5f, a), AT_OK);
    CHECK_EQ_INT(at_fused_ref_norm(AT_FUSED_NORM_RMS, AT_FP16, M, K, x, w15, 1e-5f, b), AT_OK);
    CHECK(memcmp(a, b, sizeof a) == 0);
}

/* x = (1, 1/256), Wg = (1, 1), Wu = (2, 2): g = 1 + 2^-8 and u = 2 + 2^-7
** are both bf16 ties that round to even (1 and 2), so y = silu(1) * 2. */
static void swiglu_rounds_g_and_u_first(void)
{
    uint16_t x[2] = {bf(1.0f), bf(1.0f / 256)}, W[4] = {bf(1), bf(1), bf(2), bf(2)};
    double y;
    CHECK_EQ_INT(at_fused_ref_run(AT_FUSED_NORM_NONE, 1, AT_BF16, 1, 2, 1, x, NULL, W, 0.0f, &y), AT_OK);
    double want = 1.0 / (1.0 + exp(-1.0)) * 2.0; /* 1.46211715726 */
    CHECK(fabs(y - want) < 1e-12);
    double unrounded = 1.00390625 / (1.0 + exp(-1.00390625)) * 2.0078125;
    CHECK(fabs(y - unrounded) > 1e-3);
}

/* norm + SwiGLU is the norm, then SwiGLU on the rounded xn; no fusion at
** all is the GEMV's reference. */
static void combined_op_is_its_halves_in_sequence(void)
{
    enum { M = 3, K = 64, N = 5 };
    uint16_t x[M * K], w[K], W[2 * N * K], xn[M * K];
    double a[M * N], b[M * N], g[M * N];
    for (int d = 0; d < 2; d++) {
        at_dtype dt = d ? AT_FP16 : AT_BF16;
        at_fill_random(dt, x, M * K, 1 + (uint64_t)d, 1.0f);
        at_fill_random(dt, w, K, 2, 1.0f);
        at_fill_random(dt, W, 2 * N * K, 3, 1.0f);
        for (int norm = 1; norm <= 2; norm++) {
            CHECK_EQ_INT(at_fused_ref_run(norm, 1, dt, M, K, N, x, w, W, 1e-6f, a), AT_OK);
            CHECK_EQ_INT(at_fused_ref_norm(norm, dt, M, K, x, w, 1e-6f, xn), AT_OK);
            CHECK_EQ_INT(at_fused_ref_run(AT_FUSED_NORM_NONE, 1, dt, M, K, N, xn, NULL, W, 1e-6f, b), AT_OK);
            CHECK(memcmp(a, b, sizeof a) == 0);
            /* and the norm alone is the GEMV of xn */
            CHECK_EQ_INT(at_fused_ref_run(norm, 0, dt, M, K, N, x, w, W, 1e-6f, a), AT_OK);
            CHECK_EQ_INT(at_ref_gemv(dt, M, K, N, xn, W, g), AT_OK);
            CHECK(memcmp(a, g, sizeof a) == 0);
        }
        CHECK_EQ_INT(at_fused_ref_run(AT_FUSED_NORM_NONE, 0, dt, M, K, N, x, NULL, W, 0.0f, a), AT_OK);
        CHECK_EQ_INT(at_ref_gemv(dt, M, K, N, x, W, g), AT_OK);
        CHECK(memcmp(a, g, sizeof a) == 0);
    }
}

static void bad_arguments_are_refused(void)
{
    uint16_t x[4] = {bf(1), bf(2), bf(3), bf(4)}, w[2] = {bf(1), bf(1)}, W[8] = {0};
    double y[4];
    CHECK_EQ_INT(at_fused_ref_run(3, 0, AT_BF16, 1, 2, 2, x, w, W, 1e-6f, y), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "norm 3");
    CHECK_EQ_INT(at_fused_ref_run(0, 2, AT_BF16, 1, 2, 2, x, w, W, 1e-6f, y), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "swiglu 2");
    CHECK_EQ_INT(at_fused_ref_run(1, 0, AT_BF16, 0, 2, 2, x, w, W, 1e-6f, y), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "shape 0x2x2");
    CHECK_EQ_INT(at_fused_ref_run(1, 0, AT_BF16, 1, 2, 2, x, NULL, W, 1e-6f, y), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "NULL");
    CHECK_EQ_INT(at_fused_ref_norm(0, AT_BF16, 1, 2, x, w, 1e-6f, x), AT_ERR_USAGE);
    /* without the norm, w is not read and may be NULL */
    CHECK_EQ_INT(at_fused_ref_run(0, 0, AT_BF16, 2, 2, 2, x, NULL, W, 0.0f, y), AT_OK);
}

int main(void)
{
    TT_RUN(norm_output_is_rounded_before_the_gemv);
    TT_RUN(gemma_scales_by_one_plus_w);
    TT_RUN(swiglu_rounds_g_and_u_first);
    TT_RUN(combined_op_is_its_halves_in_sequence);
    TT_RUN(bad_arguments_are_refused);
    return TT_DONE();
}
