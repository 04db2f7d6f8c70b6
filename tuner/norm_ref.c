/*
** norm_ref.c — the fp64 CPU reference of the RMSNorm family, rounding as
** stated in norm_ref.h. Invariant: z is formed exactly as the GPU forms it
** (an fp32 add of the two widened inputs, then round to nearest even), so it
** is bit-exact; everything after z is fp64 on the same rounded inputs.
*/
#include "norm_ref.h"

#include <math.h>
#include <string.h>

static const char *const op_names[] = {"rmsnorm", "add_rmsnorm", "gemma_rmsnorm", "add_gemma_rmsnorm"};

int at_norm_ref_parse_op(const char *name, at_norm_op *out)
{
    for (int i = 0; name && i < 4; i++)
        if (strcmp(name, op_names[i]) == 0) {
            *out = (at_norm_op)i;
            return AT_OK;
        }
    return at_fail(AT_ERR_USAGE,
                   "unknown norm op '%s' (expected rmsnorm, add_rmsnorm, gemma_rmsnorm or "
                   "add_gemma_rmsnorm)",
                   name ? name : "");
}

const char *at_norm_ref_op_name(at_norm_op op)
{
    return (int)op >= 0 && (int)op < 4 ? op_names[op] : "?";
}

int at_norm_ref_has_residual(at_norm_op op)
{
    return op == AT_NORM_ADD_RMSNORM || op == AT_NORM_ADD_GEMMA_RMSNORM;
}

int at_norm_ref_is_gemma(at_norm_op op)
{
    return op == AT_NORM_GEMMA_RMSNORM || op == AT_NORM_ADD_GEMMA_RMSNORM;
}

int at_norm_ref_run(at_norm_op op, at_dtype dtype, int64_t T, int64_t H, const uint16_t *x,
                    const uint16_t *residual, const void *w, int w_fp32, float eps, double *y_out,
                    uint16_t *z_out)
{
    int add = at_norm_ref_has_residual(op), gemma = at_norm_ref_is_gemma(op);
    if ((int)op < 0 || (int)op > 3)
        return at_fail(AT_ERR_USAGE, "norm reference: op %d is not a norm op", (int)op);
    if (T < 1 || H < 1)
        return at_fail(AT_ERR_USAGE, "norm reference: shape %lldx%lld", (long long)T, (long long)H);
    if (!x || !w || !y_out || (add && (!residual || !z_out)))
        return at_fail(AT_ERR_USAGE, "norm reference: NULL buffer for %s", op_names[op]);
    if (w_fp32 && !gemma)
        return at_fail(AT_ERR_USAGE, "norm reference: fp32 weights are for the Gemma ops, not %s",
                       op_names[op]);
    const uint16_t *wh = w;
    const float *wf = w;
    for (int64_t t = 0; t < T; t++) {
        const uint16_t *xr = x + t * H;
        double ss = 0.0;
        if (add) { /* z first, the whole row: z_out may be residual itself */
            const uint16_t *rr = residual + t * H;
            uint16_t *zr = z_out + t * H;
            for (int64_t h = 0; h < H; h++) {
                float sum =
                    at_half_to_f32(dtype, xr[h]) + at_half_to_f32(dtype, rr[h]); /* fp32, as the GPU */
                zr[h] = at_f32_to_half(dtype, sum);
            }
            xr = zr; /* the norm reads the rounded z */
        }
        for (int64_t h = 0; h < H; h++) {
            double v = (double)at_half_to_f32(dtype, xr[h]);
            ss += v * v;
        }
        double r = 1.0 / sqrt(ss / (double)H + (double)eps);
        for (int64_t h = 0; h < H; h++) {
            double wv = w_fp32 ? (double)wf[h] : (double)at_half_to_f32(dtype, wh[h]);
            double factor = gemma ? 1.0 + wv : wv;
            y_out[t * H + h] = (double)at_half_to_f32(dtype, xr[h]) * r * factor;
        }
    }
    return AT_OK;
}
