/*
** test_shape.c — shape and dtype parsing: the accepted forms, every kind of
** bad input with a message that names it, and the 16-bit conversions.
*/
#include "autotune.h"
#include "tinytest.h"

#include <math.h>

static void parses_gemv_shape(void)
{
    at_shape s;
    char buf[64];
    CHECK_EQ_INT(at_shape_parse("1x2048x8192", 3, &s), AT_OK);
    CHECK_EQ_INT(s.M, 1);
    CHECK_EQ_INT(s.K, 2048);
    CHECK_EQ_INT(s.N, 8192);
    at_shape_format(&s, buf, sizeof buf);
    CHECK(strcmp(buf, "1x2048x8192") == 0);
    CHECK_EQ_INT(at_shape_parse("16X6144X2048", 3, &s), AT_OK);
    CHECK_EQ_INT(s.M, 16);
    CHECK_EQ_INT(at_shape_parse("1x2048x248320", 3, &s), AT_OK);
    CHECK_EQ_INT(s.N, 248320);
}

static void parses_norm_shape(void)
{
    at_shape s;
    char buf[64];
    CHECK_EQ_INT(at_shape_parse("4096x2560", 2, &s), AT_OK);
    CHECK_EQ_INT(s.M, 4096);
    CHECK_EQ_INT(s.K, 2560);
    CHECK_EQ_INT(s.rank, 2);
    at_shape_format(&s, buf, sizeof buf);
    CHECK(strcmp(buf, "4096x2560") == 0);
}

static void rejects_bad_shapes(void)
{
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"1x0x8192", "at least 1"},
        {"0x2048x8192", "at least 1"},
        {"abc", "expected a number"},
        {"", "expected MxKxN"},
        {"1x2048", "expected MxKxN"},
        {"1x2048x8192x4", "3 dimensions"},
        {"1x-2048x8192", "positive"},
        {"1x+5x8", "positive"},
        {"1x2048x99999999999", "larger than"},
        {"1x2147483648x1", "larger than"},
        {"1x2147483647x2147483647", "elements"},
        {"1x2048x8192 ", "3 dimensions"},
        {"1 x2048x8192", "expected MxKxN"},
        {"1x2048x8192abc", "3 dimensions"},
        {"1xx8192", "expected a number"},
        {"1.5x2048x8192", "expected MxKxN"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        at_shape s = {7, 7, 7, 3};
        int rc = at_shape_parse(bad[i].text, 3, &s);
        CHECK_EQ_INT(rc, AT_ERR_USAGE);
        CHECK_STR_HAS(at_errmsg(), bad[i].needle);
        CHECK_STR_HAS(at_errmsg(), "bad shape");
        CHECK_EQ_INT(s.M, 7); /* unchanged on error */
    }
    at_shape s;
    CHECK_EQ_INT(at_shape_parse(NULL, 3, &s), AT_ERR_USAGE);
    CHECK_EQ_INT(at_shape_parse("4096x2560x3", 2, &s), AT_ERR_USAGE);
}

static void parses_dtypes(void)
{
    at_dtype d;
    CHECK_EQ_INT(at_dtype_parse("bf16", &d), AT_OK);
    CHECK_EQ_INT(d, AT_BF16);
    CHECK_EQ_INT(at_dtype_parse("fp16", &d), AT_OK);
    CHECK_EQ_INT(d, AT_FP16);
    CHECK_EQ_INT(at_dtype_parse("fp8", &d), AT_ERR_USAGE);
    CHECK_STR_HAS(at_errmsg(), "fp8");
    CHECK(at_dtype_tolerance(AT_BF16) == 1e-2);
    CHECK(at_dtype_tolerance(AT_FP16) == 2e-3);
}

static void converts_16bit_floats(void)
{
    /* exact values */
    CHECK_EQ_INT(at_f32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ_INT(at_f32_to_fp16(1.0f), 0x3c00);
    CHECK_EQ_INT(at_f32_to_fp16(-2.0f), 0xc000);
    CHECK_EQ_INT(at_f32_to_fp16(65504.0f), 0x7bff);
    CHECK_EQ_INT(at_f32_to_fp16(70000.0f), 0x7c00); /* overflow to inf */
    CHECK_EQ_INT(at_f32_to_fp16(5.9604645e-8f), 0x0001); /* smallest subnormal */
    /* round to nearest even: 1 + 2^-8 is a tie in bf16, goes to even (1.0) */
    CHECK_EQ_INT(at_f32_to_bf16(1.00390625f), 0x3f80);
    CHECK_EQ_INT(at_f32_to_bf16(1.01171875f), 0x3f82);
    /* NaN stays NaN */
    CHECK(isnan(at_bf16_to_f32(at_f32_to_bf16(NAN))));
    CHECK(isnan(at_fp16_to_f32(at_f32_to_fp16(NAN))));
    CHECK(isnan(at_bf16_to_f32(0xFFFF)) && isnan(at_fp16_to_f32(0xFFFF))); /* the poison */
    /* every fp16 value round-trips through float */
    int bad = 0;
    for (unsigned h = 0; h < 0x10000; h++) {
        float f = at_fp16_to_f32((uint16_t)h);
        if (!isnan(f) && at_f32_to_fp16(f) != h)
            bad++;
    }
    CHECK_EQ_INT(bad, 0);
    /* relative rounding error bounds */
    for (float v = -3.0f; v < 3.0f; v += 0.0137f) {
        CHECK(fabsf(at_bf16_to_f32(at_f32_to_bf16(v)) - v) <= fabsf(v) * 0.0040f + 1e-30f);
        CHECK(fabsf(at_fp16_to_f32(at_f32_to_fp16(v)) - v) <= fabsf(v) * 0.0005f + 1e-7f);
    }
}

int main(void)
{
    TT_RUN(parses_gemv_shape);
    TT_RUN(parses_norm_shape);
    TT_RUN(rejects_bad_shapes);
    TT_RUN(parses_dtypes);
    TT_RUN(converts_16bit_floats);
    return TT_DONE();
}
