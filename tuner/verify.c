/*
** verify.c — the correctness gate's host side: random inputs (never zeros),
** the fp64 CPU reference, and the relative error ||y - ref|| / ||ref||.
** The reference reads the same rounded 16-bit inputs the GPU reads, so the
** only difference measured is the kernel's own arithmetic and output rounding.
*/
#include "verify.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* splitmix64: small, fast, good enough for test data */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void at_fill_random(at_dtype dtype, uint16_t *buf, size_t n, uint64_t seed, float scale)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        /* uniform in [-scale, scale], never exactly zero */
        double u = (double)(next_u64(&s) >> 11) * (1.0 / 9007199254740992.0);
        float v = (float)((2.0 * u - 1.0) * scale);
        if (v == 0.0f)
            v = scale * 0.5f;
        buf[i] = at_f32_to_half(dtype, v);
    }
}

void at_fill_random_f32(float *buf, size_t n, uint64_t seed, float scale)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        double u = (double)(next_u64(&s) >> 11) * (1.0 / 9007199254740992.0);
        float v = (float)((2.0 * u - 1.0) * scale);
        buf[i] = v != 0.0f ? v : scale * 0.5f;
    }
}

typedef struct ref_job {
    at_dtype dtype;
    int64_t M, K, N, n0, n1;
    const float *x; /* M x K, already widened */
    const uint16_t *W;
    double *y;
} ref_job;

static void *ref_rows(void *arg)
{
    ref_job *j = arg;
    float *w = malloc((size_t)j->K * sizeof *w);
    if (!w)
        return arg; /* non-NULL: failure */
    for (int64_t n = j->n0; n < j->n1; n++) {
        const uint16_t *wr = j->W + n * j->K;
        for (int64_t k = 0; k < j->K; k++)
            w[k] = at_half_to_f32(j->dtype, wr[k]);
        for (int64_t m = 0; m < j->M; m++) {
            const float *xr = j->x + m * j->K;
            double acc = 0.0;
            for (int64_t k = 0; k < j->K; k++)
                acc += (double)xr[k] * (double)w[k];
            j->y[m * j->N + n] = acc;
        }
    }
    free(w);
    return NULL;
}

int at_ref_gemv(at_dtype dtype, int64_t M, int64_t K, int64_t N, const uint16_t *x,
                const uint16_t *W, double *y)
{
    enum { MAXT = 64 };
    ref_job jobs[MAXT];
    pthread_t tid[MAXT];
    int started[MAXT] = {0};
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = nc < 1 ? 1 : nc > MAXT ? MAXT : (int)nc, rc = AT_OK;
    float *xf = malloc((size_t)(M * K) * sizeof *xf);
    if (!xf)
        return at_fail(AT_ERR_NOMEM, "out of memory for the reference");
    for (int64_t i = 0; i < M * K; i++)
        xf[i] = at_half_to_f32(dtype, x[i]);
    if (nt > N)
        nt = (int)N;
    for (int t = 0; t < nt; t++) {
        jobs[t] = (ref_job){dtype, M, K, N, N * t / nt, N * (t + 1) / nt, xf, W, y};
        started[t] = pthread_create(&tid[t], NULL, ref_rows, &jobs[t]) == 0;
        if (!started[t] && ref_rows(&jobs[t]) != NULL)
            rc = at_fail(AT_ERR_NOMEM, "out of memory for the reference");
    }
    for (int t = 0; t < nt; t++) {
        void *ret = NULL;
        if (started[t] && (pthread_join(tid[t], &ret), ret != NULL))
            rc = at_fail(AT_ERR_NOMEM, "out of memory for the reference");
    }
    free(xf);
    return rc;
}

void at_ref_add(at_dtype dtype, size_t n, const uint16_t *residual, double *ref)
{
    for (size_t i = 0; i < n; i++) {
        float dot = at_half_to_f32(dtype, at_f32_to_half(dtype, (float)ref[i]));
        float sum = at_half_to_f32(dtype, residual[i]) + dot; /* the fp32 add of the add kernel */
        ref[i] = (double)at_half_to_f32(dtype, at_f32_to_half(dtype, sum));
    }
}

double at_rel_err(at_dtype dtype, const uint16_t *y, const double *ref, size_t n, size_t *nonfinite)
{
    double num = 0.0, den = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double v = (double)at_half_to_f32(dtype, y[i]);
        if (!isfinite(v)) {
            bad++;
            continue;
        }
        num += (v - ref[i]) * (v - ref[i]);
        den += ref[i] * ref[i];
    }
    if (nonfinite)
        *nonfinite = bad;
    if (bad)
        return INFINITY;
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}
