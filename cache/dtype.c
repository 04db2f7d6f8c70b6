/*
** dtype.c — element types of the tuned ops and their 16-bit conversions.
** Conversions round to nearest even and keep NaN a NaN, so the host side
** (inputs, reference, poison) agrees bit for bit with the device's cvt.rn.
*/
#include "cache.h"

#include <string.h>

int at_dtype_parse(const char *text, at_dtype *out)
{
    if (text && strcmp(text, "bf16") == 0) {
        *out = AT_BF16;
        return AT_OK;
    }
    if (text && strcmp(text, "fp16") == 0) {
        *out = AT_FP16;
        return AT_OK;
    }
    return at_fail(AT_ERR_USAGE, "unknown dtype '%s' (expected bf16 or fp16)", text ? text : "");
}

const char *at_dtype_name(at_dtype d)
{
    return d == AT_FP16 ? "fp16" : d == AT_BF16 ? "bf16" : "?";
}

double at_dtype_tolerance(at_dtype d) { return d == AT_FP16 ? 2e-3 : 1e-2; }

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t at_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and a NaN */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float at_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t at_f32_to_fp16(float f)
{
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (absu >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (absu < 0x38800000u) { /* below the smallest normal: subnormal or 0 */
        if (absu < 0x33000000u)
            return (uint16_t)sign;
        uint32_t e = absu >> 23;
        uint32_t mant = (absu & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t r = absu + 0xfffu + ((absu >> 13) & 1u); /* round mantissa */
    r -= 0x38000000u;                                 /* rebias 127 -> 15 */
    return (uint16_t)(sign | (r >> 13));
}

float at_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0) {
        if (m == 0)
            return bits_f32(sign);
        float v = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
        return sign ? -v : v;
    }
    if (e == 31)
        return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t at_f32_to_half(at_dtype d, float f)
{
    return d == AT_FP16 ? at_f32_to_fp16(f) : at_f32_to_bf16(f);
}

float at_half_to_f32(at_dtype d, uint16_t h)
{
    return d == AT_FP16 ? at_fp16_to_f32(h) : at_bf16_to_f32(h);
}
