/*
** fused_ref.h — the fp64 CPU reference of the fused decode ops (MxKxN: M
** tokens, K hidden, N outputs; bf16/fp16 elements), the yardstick of their
** correctness gate. Rounding, as the fused kernels and the unfused sequence
** both round (kernels/atk.h, "fused decode ops"):
**   norm (TP_NORM 1; Gemma 2: (1 + w)):
**       r = 1 / sqrt(sum(x^2) / K + eps) per row, xn = rne((x * r) * w):
**       the normalized x is ROUNDED to the element dtype, as atk_rmsnorm's
**       output is before the GEMV reads it (computed in fp64 here, fp32 on
**       the GPU, so one element in many may round the other way)
**   GEMV: y = xn . W^T (fp64 dots of the rounded xn)
**   residual add (TP_RES 1): z = rne(x + residual) (at_fused_ref_add), and
**       the norm and GEMV above run on z; z is written back (bit-exact)
**   SwiGLU (TP_SWIGLU 1): g = rne(xn . Wg^T), u = rne(xn . Wu^T), both
**       rounded to the dtype as the GEMV's output is; y = silu(g) * u in fp64,
**       silu(v) = v / (1 + exp(-v))
** y is returned before its final rounding (double), for the relative-error
** gate. W holds N rows (2N with SwiGLU: Wg then Wu, the [2N,K] block).
*/
#ifndef AT_FUSED_REF_H
#define AT_FUSED_REF_H

#include "autotune.h"

/* The norm of a fused op: the templates' TP_NORM. */
enum { AT_FUSED_NORM_NONE = 0, AT_FUSED_NORM_RMS = 1, AT_FUSED_NORM_GEMMA = 2 };

/* The residual-add forms' first step: z_out[n] = rne(float(x) + float(res))
** in fp32, as atk_add_rmsnorm rounds the residual stream (tuner/norm_ref.h);
** z is bit-exact. z_out may be res. AT_ERR_USAGE for a NULL buffer. */
int at_fused_ref_add(at_dtype dtype, size_t n, const uint16_t *x, const uint16_t *res, uint16_t *z_out);

/* xn_out[M*K] = rne((x * r) * f), f = w (norm 1) or 1 + w (norm 2), r per
** row as above; x, w (K values) and xn_out 16-bit values of dtype. Returns
** AT_OK, or AT_ERR_USAGE for a bad norm, dimension or a NULL buffer. */
int at_fused_ref_norm(int norm, at_dtype dtype, int64_t M, int64_t K, const uint16_t *x, const uint16_t *w,
                      float eps, uint16_t *xn_out);

/* The whole op: y_out[M*N] (double, before the final rounding) from x[M*K],
** w[K] (read only when norm > 0; may be NULL otherwise), W[(swiglu ? 2N :
** N) * K] row-major. Allocates its scratch (AT_ERR_NOMEM); AT_ERR_USAGE for
** a bad norm, swiglu, dimension or NULL buffer. The dots use all cores. */
int at_fused_ref_run(int norm, int swiglu, at_dtype dtype, int64_t M, int64_t K, int64_t N, const uint16_t *x,
                     const uint16_t *w, const uint16_t *W, float eps, double *y_out);

#endif
