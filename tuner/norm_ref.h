/*
** norm_ref.h — the fp64 CPU reference of the RMSNorm family (TxH: T tokens,
** H hidden; bf16/fp16 elements), the yardstick of the correctness gate.
**
** Rounding, implemented exactly so by the templates and by this reference:
**   rmsnorm            y = rne( x * r * w ),         r = 1 / sqrt(sum(x^2) / H + eps)
**   add_rmsnorm        z = rne( float(x) + float(residual) );  residual := z
**                      y = rne( z * r * w ),         r from the rounded z
**   gemma_rmsnorm      y = rne( x * r * (1 + w) )
**   add_gemma_rmsnorm  z and residual as add_rmsnorm; y = rne( z * r * (1 + w) )
** - The residual stream is stored in the element dtype: z is rounded once
**   (round to nearest even) from the fp32 sum of the two 16-bit inputs, and
**   the norm is computed from that rounded z, as an engine that stores z
**   and reads it back. z is bit-exact: the kernels must match it exactly.
** - The sum of squares, the mean, eps, the rsqrt and both multiplies are in
**   fp32 on the GPU (fp64 here); the normalized value x * r is NOT rounded
**   to the element dtype before the weight multiply.
** - y is rounded once, at the end, to nearest even. This reference returns
**   y before that rounding (double), for the relative-error gate.
** - w is the element dtype, except that the Gemma ops may take fp32 w
**   (TP_WFP32=1). eps is a float, the value the kernel receives.
*/
#ifndef AT_NORM_REF_H
#define AT_NORM_REF_H

#include "autotune.h"

/* The four ops; the values are the templates' TP_OP. [NORM_OP] */
typedef enum at_norm_op {
    AT_NORM_RMSNORM = 0,
    AT_NORM_ADD_RMSNORM = 1,
    AT_NORM_GEMMA_RMSNORM = 2,
    AT_NORM_ADD_GEMMA_RMSNORM = 3
} at_norm_op;

/* "rmsnorm", "add_rmsnorm", "gemma_rmsnorm", "add_gemma_rmsnorm" -> op.
** Returns AT_OK, or AT_ERR_USAGE (message set) for any other name. */
int at_norm_ref_parse_op(const char *name, at_norm_op *out);
/* The op's name ("?" for a value outside the enum). */
const char *at_norm_ref_op_name(at_norm_op op);
/* 1 for the add_ ops (they read residual and write z into it), else 0. */
int at_norm_ref_has_residual(at_norm_op op);
/* 1 for the Gemma ops (scale by 1 + w; w may be fp32), else 0. */
int at_norm_ref_is_gemma(at_norm_op op);

/* Computes op on x[T*H] (row-major, 16-bit values of `dtype`).
** residual: T*H 16-bit values, read by the add ops only (NULL otherwise).
** w: H weights, uint16_t of `dtype`, or float when w_fp32 (Gemma ops only).
** y_out: T*H doubles, y before its final rounding.
** z_out: T*H 16-bit values, the rounded residual z (add ops only; NULL
**   otherwise); it may be the residual array itself (updated in place).
** Returns AT_OK; AT_ERR_USAGE for a bad op, dimension, NULL buffer, or
** w_fp32 with a non-Gemma op. Single-threaded; allocates nothing. */
int at_norm_ref_run(at_norm_op op, at_dtype dtype, int64_t T, int64_t H, const uint16_t *x,
                    const uint16_t *residual, const void *w, int w_fp32, float eps, double *y_out,
                    uint16_t *z_out);

#endif
