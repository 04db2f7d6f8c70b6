/*
** verify.h — host side of the correctness gate (random inputs, fp64
** reference, relative error). Internal to the tuner.
*/
#ifndef AT_VERIFY_H
#define AT_VERIFY_H

#include "autotune.h"

/* Uniform values in [-scale, scale], never zero, rounded to dtype. */
void at_fill_random(at_dtype dtype, uint16_t *buf, size_t n, uint64_t seed, float scale);
/* Uniform fp32 values in [-scale, scale], never zero, not rounded to 16 bits. */
void at_fill_random_f32(float *buf, size_t n, uint64_t seed, float scale);
/* y[m,n] = sum_k x[m,k] W[n,k] in double, on all cores. */
int at_ref_gemv(at_dtype dtype, int64_t M, int64_t K, int64_t N, const uint16_t *x,
                const uint16_t *W, double *y);
/* gemv_add's reference from the GEMV's: ref[i] = rne(residual[i] +
** rne(ref[i])), rounded to dtype as the unfused GEMV and add kernel round
** (the dot through fp32, so a dot within half an fp32 ulp of a 16-bit tie
** may round the other way: far inside the gate's tolerance). */
void at_ref_add(at_dtype dtype, size_t n, const uint16_t *residual, double *ref);
/* ||y - ref|| / ||ref||; INFINITY (and *nonfinite > 0) if y holds NaN/Inf. */
double at_rel_err(at_dtype dtype, const uint16_t *y, const double *ref, size_t n, size_t *nonfinite);

#endif
