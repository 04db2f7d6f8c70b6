/*
** gemv/gemv_warp_row.cu — y[m,n] = sum_k x[m,k] * W[n,k]; each warp owns
** TP_ROWS consecutive output rows and walks the whole K for them, so no
** shared memory and no block-level synchronisation. Grid: (ceil(N /
** (TP_WARPS*TP_ROWS)), M). fp32 accumulation; any K, N (K % TP_VEC == 0).
**
** Parameters (legal values):
**   TP_WARPS   warps per block: 1, 2, 4, 8, 16          block_n = TP_WARPS*TP_ROWS
**   TP_ROWS    output rows per warp: 1, 2, 4, 8
**   TP_VEC     elements per load: 1, 2, 4, 8 (8 = 16 bytes); must divide K
**   TP_UNROLL  K steps in flight per row: 1, 2, 4, 8     block_k = 32*TP_VEC*TP_UNROLL
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
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/gemv/gemv_warp_row.cu
*/
#include "common/pdl.cuh"
#include "common/vec.cuh"
#include "common/gemv_fuse.cuh"

#ifndef TP_WARPS
#define TP_WARPS 4
#endif
#ifndef TP_ROWS
#define TP_ROWS 2
#endif
#ifndef TP_UNROLL
#define TP_UNROLL 4
#endif

extern "C" __global__ void __launch_bounds__(TP_WARPS * 32)
gemv_warp_row(const at_elem *__restrict__ x, const at_elem *__restrict__ W,
              at_elem *__restrict__ y, int M, int K, int N AT_FUSE_PARAMS)
{
    const int lane = (int)(threadIdx.x & 31u);
    const int warp = (int)(threadIdx.x >> 5);
    const long long row0 = ((long long)blockIdx.x * TP_WARPS + warp) * TP_ROWS;
#if !TP_NORM
    if (row0 >= N)
        return; /* whole warp leaves together; nothing below synchronises */
#endif
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

    const int step = 32 * TP_VEC;
    const int kmain = K - K % (step * TP_UNROLL);
    int k = lane * TP_VEC;
    at_vec wv[AT_WROWS(TP_ROWS)][TP_UNROLL];
#define LOAD_W_CHUNK()                                                                             \
    _Pragma("unroll") for (int r = 0; r < AT_WROWS(TP_ROWS); r++)                                  \
        _Pragma("unroll") for (int u = 0; u < TP_UNROLL; u++) wv[r][u] = at_load_w(wr[r] + k + u * step, pol)
    if (row0 < N && k < kmain) /* weights depend on no earlier kernel: start streaming them now */
        LOAD_W_CHUNK();
    AT_PREFETCH_TILE((long long)blockIdx.x * TP_WARPS * TP_ROWS, TP_WARPS * TP_ROWS);
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
    if (row0 >= N) { /* after the block's barriers; nothing below synchronises */
        AT_RES_ARRIVE((int)blockIdx.y, 1);
        return;
    }
#else
    const float rstd = 0.0f;
#endif
    (void)rstd;
#if TP_ADD
    /* the residual lane r will update (r < TP_ROWS), read now rather than after the sums */
    float rres = 0.0f;
    if (lane < TP_ROWS && row0 + lane < N)
        rres = at_to_float(y[(long long)blockIdx.y * N + row0 + lane]);
#endif
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
#undef LOAD_W_CHUNK
    for (; k < K; k += step) { /* tail: fewer than TP_UNROLL steps left */
        at_vec xv = AT_LOAD_X(xr + k, k, rstd);
#pragma unroll
        for (int r = 0; r < AT_WROWS(TP_ROWS); r++)
            acc[r] = at_dot(at_load_w(wr[r] + k, pol), xv, acc[r]);
    }

#pragma unroll
    for (int r = 0; r < TP_ROWS; r++) {
        float s = at_warp_sum(acc[r]);
#if TP_SWIGLU
        float su = at_warp_sum(acc[TP_ROWS + r]);
#endif
        if (lane == r % 32 && row0 + r < N) {
#if TP_ADD
            AT_STORE_OUT_R(y[(long long)blockIdx.y * N + row0 + r], s, rres);
#else
            AT_STORE_FUSED(y[(long long)blockIdx.y * N + row0 + r], s, su);
#endif
        }
    }
    AT_RES_ARRIVE((int)blockIdx.y, 1);
}
