/*
** gemv/gemv_splitk.cu — y[m,n] = sum_k x[m,k] * W[n,k] with K split across
** TP_WPR warps that share each group of TP_ROWS rows; partial sums meet in
** shared memory. More warps per row means more loads in flight for short,
** wide problems (few rows, e.g. N = 32) and fewer serial steps per warp.
** Grid: (ceil(N / (TP_WARPS/TP_WPR*TP_ROWS)), M). fp32 accumulation; any K, N.
**
** Parameters (legal values):
**   TP_WARPS   warps per block: 2, 4, 8, 16 (a multiple of TP_WPR)
**   TP_WPR     warps per row group (split of K): 2, 4, 8, 16
**   TP_ROWS    output rows per row group: 1, 2, 4, 8
**              block_n = TP_WARPS/TP_WPR*TP_ROWS
**   TP_VEC     elements per load: 1, 2, 4, 8; must divide K
**   TP_UNROLL  K steps in flight per row: 1, 2, 4, 8
**              block_k = 32*TP_WPR*TP_VEC*TP_UNROLL
**   TP_CACHE   weight cache hint: 0 default, 1 streaming, 2 L2 evict_first
**   TP_PDL     1: programmatic dependent launch (sm_90+); the first weight
**              chunk is loaded before waiting on the previous kernel
**   TP_ADD     0: y = the sums; 1: y += the sums in place, rounded as
**              the unfused GEMV + add (the gemv_add op; common/dtype.cuh)
**   TP_NORM    0 none; 1, 2: RMSNorm / Gemma RMSNorm of x in the prologue
**   TP_SWIGLU  0 none; 1: y = silu(x.Wg) * (x.Wu) (common/gemv_fuse.cuh)
**   TP_RES     1, 2: the norm's input is x + res, written back into res
**              (2: z staged in K * tokens elements of dynamic shared memory)
**   TP_PF      1: the block's weight tile asked of L2 before the PDL wait
**   TP_DTYPE   1 bf16, 2 fp16
**
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/gemv/gemv_splitk.cu
*/
#include "common/pdl.cuh"
#include "common/vec.cuh"
#include "common/gemv_fuse.cuh"

#ifndef TP_WARPS
#define TP_WARPS 8
#endif
#ifndef TP_WPR
#define TP_WPR 4
#endif
#ifndef TP_ROWS
#define TP_ROWS 2
#endif
#ifndef TP_UNROLL
#define TP_UNROLL 2
#endif
#if TP_WARPS % TP_WPR != 0
#error "TP_WARPS must be a multiple of TP_WPR"
#endif
#define GROUPS (TP_WARPS / TP_WPR)

extern "C" __global__ void __launch_bounds__(TP_WARPS * 32)
gemv_splitk(const at_elem *__restrict__ x, const at_elem *__restrict__ W,
            at_elem *__restrict__ y, int M, int K, int N AT_FUSE_PARAMS)
{
    __shared__ float part[GROUPS][AT_WROWS(TP_ROWS)][TP_WPR];
    const int lane = (int)(threadIdx.x & 31u);
    const int warp = (int)(threadIdx.x >> 5);
    const int group = warp / TP_WPR, slice = warp % TP_WPR;
    const long long row0 = ((long long)blockIdx.x * GROUPS + group) * TP_ROWS;
    (void)M;

    const at_elem *xr = x + (long long)blockIdx.y * K;
    const at_elem *wr[AT_WROWS(TP_ROWS)];
#pragma unroll
    for (int r = 0; r < AT_WROWS(TP_ROWS); r++) {
        long long row = row0 + AT_WROW(r) < N ? row0 + AT_WROW(r) : N - 1; /* clamp: tail rows load, never store */
        wr[r] = AT_WMAT(r) + row * (long long)K;
    }
    const unsigned long long pol = at_evict_first_policy();

    float acc[AT_WROWS(TP_ROWS)];
#pragma unroll
    for (int r = 0; r < AT_WROWS(TP_ROWS); r++)
        acc[r] = 0.0f;

    const int step = 32 * TP_WPR * TP_VEC;
    const int kmain = K - K % (step * TP_UNROLL);
    const bool live = row0 < N; /* a group past N still reaches the barrier below */
    int k = (slice * 32 + lane) * TP_VEC;
    at_vec wv[AT_WROWS(TP_ROWS)][TP_UNROLL];
#define LOAD_W_CHUNK()                                                                             \
    _Pragma("unroll") for (int r = 0; r < AT_WROWS(TP_ROWS); r++)                                  \
        _Pragma("unroll") for (int u = 0; u < TP_UNROLL; u++) wv[r][u] = at_load_w(wr[r] + k + u * step, pol)
    if (live && k < kmain) /* weights depend on no earlier kernel: start streaming them now */
        LOAD_W_CHUNK();
    AT_PREFETCH_TILE((long long)blockIdx.x * GROUPS * TP_ROWS, GROUPS * TP_ROWS);
    at_pdl_wait();
    at_pdl_trigger();
#if TP_NORM
    __shared__ float nss[TP_WARPS], nrs[1];
    AT_RES_STAGE((int)blockIdx.y);
    {
        const at_elem *xs[1] = {xr};
        at_norm_rstd<1>(xs, K, eps, nss, nrs, TP_WARPS AT_RES_ARGS);
    }
    AT_RES_TICKET();
    const float rstd = nrs[0];
#else
    const float rstd = 0.0f;
#endif
    (void)rstd;
#if TP_ADD
    /* the residual this thread will update, read now rather than after the sums */
    float rres = 0.0f;
    if ((int)threadIdx.x < GROUPS * TP_ROWS) {
        const long long rrow = ((long long)blockIdx.x * GROUPS + (int)threadIdx.x / TP_ROWS) * TP_ROWS +
                               (int)threadIdx.x % TP_ROWS;
        if (rrow < N)
            rres = at_to_float(y[(long long)blockIdx.y * N + rrow]);
    }
#endif
    if (live) {
        while (k < kmain) {
            at_vec xv[TP_UNROLL];
#pragma unroll
            for (int u = 0; u < TP_UNROLL; u++)
                xv[u] = AT_LOAD_X(xr + k + u * step, k + u * step, rstd);
#pragma unroll
            for (int r = 0; r < AT_WROWS(TP_ROWS); r++)
#pragma unroll
                for (int u = 0; u < TP_UNROLL; u++)
                    acc[r] = at_dot(wv[r][u], xv[u], acc[r]);
            k += step * TP_UNROLL;
            if (k < kmain)
                LOAD_W_CHUNK();
        }
        for (; k < K; k += step) {
            at_vec xv = AT_LOAD_X(xr + k, k, rstd);
#pragma unroll
            for (int r = 0; r < AT_WROWS(TP_ROWS); r++)
                acc[r] = at_dot(at_load_w(wr[r] + k, pol), xv, acc[r]);
        }
    }
#undef LOAD_W_CHUNK

#pragma unroll
    for (int r = 0; r < AT_WROWS(TP_ROWS); r++) {
        float s = at_warp_sum(acc[r]);
        if (lane == 0)
            part[group][r][slice] = s;
    }
    __syncthreads();
    /* one thread per (group, row) adds the TP_WPR partial sums in order */
    const int t = (int)threadIdx.x;
    if (t < GROUPS * TP_ROWS) {
        const int g = t / TP_ROWS, r = t % TP_ROWS;
        const long long row = ((long long)blockIdx.x * GROUPS + g) * TP_ROWS + r;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < TP_WPR; i++)
            s += part[g][r][i];
#if TP_SWIGLU
        float su = 0.0f;
#pragma unroll
        for (int i = 0; i < TP_WPR; i++)
            su += part[g][TP_ROWS + r][i];
#endif
        if (row < N) {
#if TP_ADD
            AT_STORE_OUT_R(y[(long long)blockIdx.y * N + row], s, rres);
#else
            AT_STORE_FUSED(y[(long long)blockIdx.y * N + row], s, su);
#endif
        }
    }
    AT_RES_ARRIVE((int)blockIdx.y, 1);
}
