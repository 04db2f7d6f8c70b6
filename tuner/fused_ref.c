/*
** fused_ref.c — the fp64 CPU reference of the fused decode ops, rounding as
** stated in fused_ref.h. Invariant: every value the GPU stores in 16 bits
** between the steps (xn; g and u) is rounded to the dtype here too, so the
** reference is the unfused sequence's answer, not an unrounded ideal.
*/
#include "fused_ref.h"
#include "verify.h"

#include <math.h>
#include <stdlib.h>

/* A double rounded to the dtype: through fp32, whose rounding is exact for
** every value that is not within half an fp32 ulp of a 16-bit tie. */
static uint16_t round_to(at_dtype dtype, double v)
{
    return at_f32_to_half(dtype, (float)v);
}

int at_fused_ref_add(at_dtype dtype, size_t n, const uint16_t *x, const uint16_t *res, uint16_t *z_out)
{
    if (!x || !res || !z_out)
        return at_fail(AT_ERR_USAGE, "fused reference: NULL buffer for the residual add");
    for (size_t i = 0; i < n; i++)
        z_out[i] = at_f32_to_half(dtype, at_half_to_f32(dtype, x[i]) + at_half_to_f32(dtype, res[i]));
    return AT_OK;
}

int at_fused_ref_norm(int norm, at_dtype dtype, int64_t M, int64_t K, const uint16_t *x, const uint16_t *w,
                      float eps, uint16_t *xn_out)
{
    if (norm != AT_FUSED_NORM_RMS && norm != AT_FUSED_NORM_GEMMA)
        return at_fail(AT_ERR_USAGE, "fused reference: norm %d (1 rmsnorm, 2 gemma)", norm);
    if (M < 1 || K < 1)
        return at_fail(AT_ERR_USAGE, "fused reference: shape %lldx%lld", (long long)M, (long long)K);
    if (!x || !w || !xn_out)
        return at_fail(AT_ERR_USAGE, "fused reference: NULL buffer for the norm");
    for (int64_t m = 0; m < M; m++) {
        const uint16_t *xr = x + m * K;
        double ss = 0.0;
        for (int64_t k = 0; k < K; k++) {
            double v = (double)at_half_to_f32(dtype, xr[k]);
            ss += v * v;
        }
        double r = 1.0 / sqrt(ss / (double)K + (double)eps);
        for (int64_t k = 0; k < K; k++) {
            double wv = (double)at_half_to_f32(dtype, w[k]);
            double f = norm == AT_FUSED_NORM_GEMMA ? 1.0 + wv : wv;
            xn_out[m * K + k] = round_to(dtype, (double)at_half_to_f32(dtype, xr[k]) * r * f);
        }
    }
    return AT_OK;
}

int at_fused_ref_run(int norm, int swiglu, at_dtype dtype, int64_t M, int64_t K, int64_t N, const uint16_t *x,
                     const uint16_t *w, const uint16_t *W, float eps, double *y_out)
{
    uint16_t *xn = NULL;
    double *dots = NULL;
    int rc;
    if (norm < AT_FUSED_NORM_NONE || norm > AT_FUSED_NORM_GEMMA || (swiglu != 0 && swiglu != 1))
        return at_fail(AT_ERR_USAGE, "fused reference: norm %d, swiglu %d (norm 0..2, swiglu 0 or 1)", norm, swiglu);
    if (M < 1 || K < 1 || N < 1)
        return at_fail(AT_ERR_USAGE, "fused reference: shape %lldx%lldx%lld", (long long)M, (long long)K,
                       (long long)N);
    if (!x || !W || !y_out || (norm && !w))
        return at_fail(AT_ERR_USAGE, "fused reference: NULL buffer");
    int64_t rows = swiglu ? 2 * N : N;
    if (norm) {
        if (!(xn = malloc((size_t)(M * K) * sizeof *xn)))
            return at_fail(AT_ERR_NOMEM, "out of host memory for the reference's normalized x");
        if ((rc = at_fused_ref_norm(norm, dtype, M, K, x, w, eps, xn)) != AT_OK)
            goto done;
    }
    const uint16_t *in = norm ? xn : x;
    if (!swiglu) { /* y = xn . W^T, straight into y_out */
        rc = at_ref_gemv(dtype, M, K, N, in, W, y_out);
        goto done;
    }
    if (!(dots = malloc((size_t)(M * rows) * sizeof *dots))) {
        rc = at_fail(AT_ERR_NOMEM, "out of host memory for the reference's g and u");
        goto done;
    }
    if ((rc = at_ref_gemv(dtype, M, K, rows, in, W, dots)) != AT_OK)
        goto done;
    for (int64_t m = 0; m < M; m++)
        for (int64_t j = 0; j < N; j++) {
            /* g and u as the GEMV stores them; silu in fp64 on those values */
            double g = (double)at_half_to_f32(dtype, round_to(dtype, dots[m * rows + j]));
            double u = (double)at_half_to_f32(dtype, round_to(dtype, dots[m * rows + N + j]));
            y_out[m * N + j] = g / (1.0 + exp(-g)) * u;
        }
done:
    free(xn);
    free(dots);
    return rc;
}
