/*
** gemv/gemv_multi_token.cu — y[m,n] = sum_k x[m,k] * W[n,k] for a few
** tokens on CUDA cores: each thread keeps TP_TOKENS tokens' partial sums
** for its TP_ROWS rows, so every weight vector is loaded once and used
** TP_TOKENS times (meant for M = 2..8). TP_WPR warps split each row group's
** K (1: a warp walks all of K, no shared memory); partial sums meet in
** shared memory. Grid: (ceil(N / block_n), ceil(M / TP_TOKENS)); a block's
** tokens past M read token M-1 and store nothing. fp32 accumulation; any
** K, N (K % TP_VEC == 0) and any M (several token groups along y for
** tiny weights); tests/test_gpu_skinny.c checks every candidate on a GPU.
**
** Parameters (legal values):
**   TP_WARPS   warps per block: 1, 2, 4, 8, 16 (a multiple of TP_WPR)
**   TP_WPR     warps per row group (split of K): 1, 2, 4, 8, 16
**   TP_ROWS    output rows per row group: 1, 2, 4, 8
**              block_n = TP_WARPS/TP_WPR*TP_ROWS
**   TP_TOKENS  tokens per block: 1..8 (partial sums per thread: TP_TOKENS*TP_ROWS)
**   TP_VEC     elements per load: 1, 2, 4, 8 (8 = 16 bytes); must divide K
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
**   TP_DTYPE   1 bf16, 2 fp16
**
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/gemv/gemv_multi_token.cu
*/
#include "common/pdl.cuh"
#include "common/vec.cuh"
#include "common/gemv_fuse.cuh"

#ifndef TP_WARPS
#define TP_WARPS 4
#endif
#ifndef TP_WPR
#define TP_WPR 1
#endif
#ifndef TP_ROWS
#define TP_ROWS 2
#endif
#ifndef TP_TOKENS
#define TP_TOKENS 2
#endif
#ifndef TP_UNROLL
#define TP_UNROLL 2
#endif
#if TP_WARPS % TP_WPR != 0
#error "TP_WARPS must be a multiple of TP_WPR"
#endif
#if TP_TOKENS < 1 || TP_TOKENS > 8
#error "TP_TOKENS must be 1..8"
#endif
#define GROUPS (TP_WARPS / TP_WPR)
#define WROWS AT_WROWS(TP_ROWS)   /* weight rows per row group: SwiGLU's gate and up */
#define SUMS (TP_TOKENS * WROWS)  /* partial sums per thread */

extern "C" __global__ void __launch_bounds__(TP_WARPS * 32)
gemv_multi_token(const at_elem *__restrict__ x, const at_elem *__restrict__ W, at_elem *__restrict__ y,
                 int M, int K, int N AT_FUSE_PARAMS)
{
#if TP_WPR > 1
    __shared__ float part[GROUPS][SUMS][TP_WPR];
#endif
    const int lane = (int)(threadIdx.x & 31u);
    const int warp = (int)(threadIdx.x >> 5);
    const int group = warp / TP_WPR, slice = warp % TP_WPR;
    const long long row0 = ((long long)blockIdx.x * GROUPS + group) * TP_ROWS;
    const int tok0 = (int)blockIdx.y * TP_TOKENS;
    const bool live = row0 < N; /* warp-uniform; a dead warp still reaches the barrier */

    const at_elem *wr[WROWS];
#pragma unroll
    for (int r = 0; r < WROWS; r++) {
        long long row = row0 + AT_WROW(r) < N ? row0 + AT_WROW(r) : N - 1; /* clamp: tail rows load, never store */
        wr[r] = AT_WMAT(r) + row * (long long)K;
    }
    const at_elem *xr[TP_TOKENS];
#pragma unroll
    for (int j = 0; j < TP_TOKENS; j++) {
        int tok = tok0 + j < M ? tok0 + j : M - 1; /* clamp: tail tokens load, never store */
        xr[j] = x + (long long)tok * K;
    }
    const unsigned long long pol = at_evict_first_policy();

    float acc[TP_TOKENS][WROWS];
#pragma unroll
    for (int j = 0; j < TP_TOKENS; j++)
#pragma unroll
        for (int r = 0; r < WROWS; r++)
            acc[j][r] = 0.0f;

    const int step = 32 * TP_WPR * TP_VEC;
    const int kmain = K - K % (step * TP_UNROLL);
    int k = (slice * 32 + lane) * TP_VEC;
    at_vec wv[WROWS][TP_UNROLL];
#define LOAD_W_CHUNK()                                                                             \
    _Pragma("unroll") for (int r = 0; r < WROWS; r++)                                              \
        _Pragma("unroll") for (int u = 0; u < TP_UNROLL; u++) wv[r][u] = at_load_w(wr[r] + k + u * step, pol)
    if (live && k < kmain) /* weights depend on no earlier kernel: start streaming them now */
        LOAD_W_CHUNK();
    at_pdl_wait();
    at_pdl_trigger();
#if TP_NORM
    __shared__ float nss[TP_WARPS * TP_TOKENS], nrs[TP_TOKENS];
    AT_RES_STAGE(tok0);
    at_norm_rstd<TP_TOKENS>(xr, K, eps, nss, nrs, TP_WARPS AT_RES_ARGS);
    AT_RES_TICKET();
    float rstd[TP_TOKENS];
#pragma unroll
    for (int j = 0; j < TP_TOKENS; j++)
        rstd[j] = nrs[j];
#define RSTD(j) rstd[j]
#else
#define RSTD(j) 0.0f
#endif
    if (live) {
        while (k < kmain) {
            at_vec xv[TP_TOKENS][TP_UNROLL];
#pragma unroll
            for (int j = 0; j < TP_TOKENS; j++)
#pragma unroll
                for (int u = 0; u < TP_UNROLL; u++)
                    xv[j][u] = AT_LOAD_X(xr[j] + k + u * step, k + u * step, RSTD(j));
#pragma unroll
            for (int j = 0; j < TP_TOKENS; j++)
#pragma unroll
                for (int r = 0; r < WROWS; r++)
#pragma unroll
                    for (int u = 0; u < TP_UNROLL; u++)
                        acc[j][r] = at_dot(wv[r][u], xv[j][u], acc[j][r]);
            k += step * TP_UNROLL;
            if (k < kmain)
                LOAD_W_CHUNK();
        }
        for (; k < K; k += step) { /* tail: fewer than TP_UNROLL steps left */
            at_vec w1[WROWS];
#pragma unroll
            for (int r = 0; r < WROWS; r++)
                w1[r] = at_load_w(wr[r] + k, pol);
#pragma unroll
            for (int j = 0; j < TP_TOKENS; j++) {
                at_vec xv = AT_LOAD_X(xr[j] + k, k, RSTD(j));
#pragma unroll
                for (int r = 0; r < WROWS; r++)
                    acc[j][r] = at_dot(w1[r], xv, acc[j][r]);
            }
        }
    }
#undef LOAD_W_CHUNK
#undef RSTD

#if TP_WPR == 1
    /* lane (j*TP_ROWS + r) % 32 stores output (j, r) */
#pragma unroll
    for (int j = 0; j < TP_TOKENS; j++)
#pragma unroll
        for (int r = 0; r < TP_ROWS; r++) {
            float s = at_warp_sum(acc[j][r]);
#if TP_SWIGLU
            float su = at_warp_sum(acc[j][TP_ROWS + r]);
#endif
            if (live && lane == (j * TP_ROWS + r) % 32 && row0 + r < N && tok0 + j < M)
                AT_STORE_FUSED(y[(long long)(tok0 + j) * N + row0 + r], s, su);
        }
#else
#pragma unroll
    for (int j = 0; j < TP_TOKENS; j++)
#pragma unroll
        for (int r = 0; r < WROWS; r++) {
            float s = at_warp_sum(acc[j][r]);
            if (lane == 0)
                part[group][j * WROWS + r][slice] = s;
        }
    __syncthreads();
    /* one thread per (group, output) adds the TP_WPR partial sums in order */
#define OUTS (TP_TOKENS * TP_ROWS) /* outputs per row group */
    for (int i = (int)threadIdx.x; i < GROUPS * OUTS; i += TP_WARPS * 32) {
        const int gi = i / OUTS, j = i % OUTS / TP_ROWS, r = i % TP_ROWS;
        const long long row = ((long long)blockIdx.x * GROUPS + gi) * TP_ROWS + r;
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < TP_WPR; w++)
            s += part[gi][TP_SWIGLU ? j * WROWS + r : i % OUTS][w];
#if TP_SWIGLU
        float su = 0.0f;
#pragma unroll
        for (int w = 0; w < TP_WPR; w++)
            su += part[gi][j * WROWS + TP_ROWS + r][w];
#endif
        if (row < N && tok0 + j < M)
            AT_STORE_FUSED(y[(long long)(tok0 + j) * N + row], s, su);
    }
#endif
    AT_RES_ARRIVE(tok0, TP_TOKENS);
}
