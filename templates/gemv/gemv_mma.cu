/*
** gemv/gemv_mma.cu — y[m,n] = sum_k x[m,k] * W[n,k] for a few tokens (M =
** 2..16) on tensor cores, reading each weight once for all of them.
** "Swap AB": each mma.sync.m16n8k16 multiplies 16 rows of W (the MMA's M
** side) by 8 tokens of x (its N side; tokens past M are zeros, never
** read), fp32 accumulate. Operands come straight from global memory in
** k-groups (common/mma.cuh: the k axis is permuted so each thread's piece
** of a row is contiguous). A warp owns TP_MT tiles of 16 rows and TP_NT
** tiles of 8 tokens; TP_WPR warps split each row group's K, meeting in
** shared memory. With TP_KSPLIT > 1 (sm_90+) a cluster of TP_KSPLIT blocks
** shares each row group's K as well, meeting in the first block's shared
** memory, for shapes with too few row tiles to fill the GPU. Grid:
** (ceil(N / block_n) * TP_KSPLIT, ceil(M / (8*TP_NT))). Any K, N
** (K % TP_VEC == 0) and any M. sm_80+. tests/test_gpu_skinny.c checks
** every candidate of the spec on a GPU.
**
** Parameters (legal values):
**   TP_WARPS   warps per block: 1, 2, 4, 8, 16 (a multiple of TP_WPR)
**   TP_WPR     warps per row group (split of K): 1, 2, 4, 8, 16
**   TP_MT      16-row tiles per warp: 1, 2, 4   block_n = TP_WARPS/TP_WPR*16*TP_MT
**   TP_NT      8-token tiles per block: 1 (M <= 8), 2 (M <= 16); more
**              tokens take more blocks along y
**   TP_VEC     elements per load: 1, 2, 4, 8 (8 = 16 bytes); must divide K
**   TP_UNROLL  consecutive K steps per warp and chunk (loads in flight):
**              1, 2, 4, 8; a step is 32 elements with TP_VEC = 8, else 16
**   TP_KSPLIT  blocks per cluster splitting K: 1, 2, 4, 8 (> 1: sm_90+)
**   TP_STAGES  chunks in flight per warp: 1 (load, multiply, load the
**              next) or 2 (the next chunk's loads go out before this one
**              is multiplied: twice the registers, no idle round trip)
**   TP_PRE     chunks of weights requested before the PDL wait: 1, or 2
**              with TP_STAGES=2 (the second goes to the second stage's
**              registers, so twice the bytes are in flight while the
**              previous kernel drains; 8x2048x5120 on the H200: the
**              winner 6.31 us, 1.20x its M=1 time, where TP_PRE=1's best
**              took 6.55 us, 1.26x)
**   TP_CACHE   weight cache hint: 0 default, 1 streaming, 2 L2 evict_first
**   TP_L2PF    0, or 1 with TP_VEC = 8 (the default there): a weight load
**              that misses fetches the whole 128-byte line (.L2::128B,
**              common/vec.cuh), since a warp reads each row in 64-byte
**              pieces. On the H200 (8x2048x5120, timed exhaustively) the
**              three fastest configs each ran 0.11-0.23 us faster with it,
**              so the spec leaves it to this default
**   TP_PDL     1: programmatic dependent launch (sm_90+); the first weight
**              chunk is loaded before waiting on the previous kernel
**   TP_XK      0: activations come from global memory with the weights, a
**              chunk ahead (registers); > 0 (TP_VEC = 8): the block copies
**              the activations of its chunks into shared memory once
**              (cp.async, TP_XK elements per token at most) and reads each
**              fragment there just before its mma, so no activation is
**              held in flight in registers (with TP_STAGES=1 only)
**   TP_ADD     0: y = the sums; 1: y += the sums in place, rounded as
**              the unfused GEMV + add (the gemv_add op; common/dtype.cuh)
**   TP_DTYPE   1 bf16, 2 fp16
**
** Standalone: nvcc -arch=sm_80 -cubin -I templates templates/gemv/gemv_mma.cu
*/
#ifndef TP_VEC
#define TP_VEC 8
#endif
#ifndef TP_L2PF
#define TP_L2PF (TP_VEC == 8) /* before common/vec.cuh reads it */
#endif
#include "common/cluster.cuh"
#include "common/mma.cuh"
#include "common/pdl.cuh"

#ifndef TP_WARPS
#define TP_WARPS 4
#endif
#ifndef TP_WPR
#define TP_WPR 2
#endif
#ifndef TP_MT
#define TP_MT 1
#endif
#ifndef TP_NT
#define TP_NT 1
#endif
#ifndef TP_UNROLL
#define TP_UNROLL 2
#endif
#ifndef TP_STAGES
#define TP_STAGES 1
#endif
#ifndef TP_KSPLIT
#define TP_KSPLIT 1
#endif
#ifndef TP_XK
#define TP_XK 0
#endif
#if TP_XK > 0 && (TP_VEC != 8 || TP_XK % 64 != 0 || TP_STAGES != 1)
#error "TP_XK > 0 takes TP_VEC=8, TP_STAGES=1 and a multiple of 64"
#endif
#if TP_STAGES != 1 && TP_STAGES != 2
#error "TP_STAGES must be 1 or 2"
#endif
#ifndef TP_PRE
#define TP_PRE 1
#endif
#if TP_PRE != 1 && !(TP_PRE == 2 && TP_STAGES == 2)
#error "TP_PRE is 1, or 2 with TP_STAGES=2"
#endif
#if TP_WARPS % TP_WPR != 0
#error "TP_WARPS must be a multiple of TP_WPR"
#endif
#define GROUPS (TP_WARPS / TP_WPR)
#define NACC (TP_MT * TP_NT * 4) /* accumulators per thread */

#if TP_KSPLIT > 1
#define AT_MMA_CLUSTER __cluster_dims__(TP_KSPLIT, 1, 1)
#else
#define AT_MMA_CLUSTER
#endif

extern "C" __global__ void __launch_bounds__(TP_WARPS * 32) AT_MMA_CLUSTER
gemv_mma(const at_elem *__restrict__ x, const at_elem *__restrict__ W, at_elem *__restrict__ y, int M,
         int K, int N)
{
#if TP_WPR > 1
    __shared__ float part[GROUPS][TP_WPR - 1][NACC][32]; /* [..][reg][lane]: no bank conflicts */
#endif
#if TP_KSPLIT > 1
    __shared__ float cpart[TP_KSPLIT - 1][GROUPS][NACC][32]; /* block 0's: the other blocks' sums */
    const int rank = (int)at_cluster_rank(); /* blockIdx.x % TP_KSPLIT */
#else
    const int rank = 0;
#endif
#if TP_XK > 0
    /* the block's activations, its chunks in order (local chunk i*TP_WPR + w
    ** is chunk i*nslices + rank*TP_WPR + w); 64 bytes of pad per token put
    ** the eight lanes of a 16-byte read phase in distinct banks */
    __shared__ __align__(16) uint4 xs[8 * TP_NT][TP_XK / 8 + 4];
#endif
    const int lane = (int)(threadIdx.x & 31u);
    const int warp = (int)(threadIdx.x >> 5);
    const int group = warp / TP_WPR, slice = warp % TP_WPR;
    const int g = lane >> 2, t = lane & 3;
    const long long row0 = ((long long)(blockIdx.x / TP_KSPLIT) * GROUPS + group) * (16 * TP_MT);
    const int kslice = rank * TP_WPR + slice, nslices = TP_KSPLIT * TP_WPR; /* this warp's share of K */
    const int tok0 = (int)blockIdx.y * (8 * TP_NT);
    const bool live = row0 < N; /* warp-uniform; a dead warp still reaches the barrier */

    /* Rows g and g+8 of each tile, clamped: tail rows load, never store. */
    const at_elem *wr[TP_MT][2];
#pragma unroll
    for (int mt = 0; mt < TP_MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            long long row = row0 + mt * 16 + h * 8 + g;
            wr[mt][h] = W + (row < N ? row : N - 1) * (long long)K;
        }
    /* B column g of each token tile is token tok0 + nt*8 + g; past M: zeros. */
    const at_elem *xr[TP_NT];
    bool xok[TP_NT];
#pragma unroll
    for (int nt = 0; nt < TP_NT; nt++) {
        const int tok = tok0 + nt * 8 + g;
        xok[nt] = tok < M;
        xr[nt] = x + (long long)(xok[nt] ? tok : 0) * K;
    }
    const unsigned long long pol = at_evict_first_policy();

    float acc[TP_MT][TP_NT][4];
#pragma unroll
    for (int mt = 0; mt < TP_MT; mt++)
#pragma unroll
        for (int nt = 0; nt < TP_NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[mt][nt][i] = 0.0f;

    /* K in steps of AT_MMA_KSTEP; chunk c = steps c*U .. c*U+U-1 (consecutive,
    ** so a warp reads 64*U contiguous bytes of each row with TP_VEC = 8);
    ** K slice s (of the cluster's TP_KSPLIT * TP_WPR warps per row group)
    ** takes chunks s, s + nslices, ... then the leftover steps. */
    const int kt = t * AT_MMA_G; /* this thread's k-group within a step */
    const int nfull = K / AT_MMA_KSTEP, nsteps = (K + AT_MMA_KSTEP - 1) / AT_MMA_KSTEP;
    const int nchunks = nfull / TP_UNROLL;
    int c = kslice;
#define LOAD_W_CHUNK(wb, cc)                                                                       \
    _Pragma("unroll") for (int u = 0; u < TP_UNROLL; u++)                                          \
        _Pragma("unroll") for (int mt = 0; mt < TP_MT; mt++)                                       \
            _Pragma("unroll") for (int h = 0; h < 2; h++)                                          \
                wb[u][mt][h] = at_kgroup_load_w<false>(                                            \
                    wr[mt][h] + ((cc) * TP_UNROLL + u) * AT_MMA_KSTEP + kt, 0, pol)
#define LOAD_X_CHUNK(xb, cc)                                                                       \
    _Pragma("unroll") for (int u = 0; u < TP_UNROLL; u++)                                          \
        _Pragma("unroll") for (int nt = 0; nt < TP_NT; nt++)                                       \
            xb[u][nt] = at_kgroup_load_x<false>(xr[nt] + ((cc) * TP_UNROLL + u) * AT_MMA_KSTEP + kt, 0, \
                                                xok[nt])
#define MMA_CHUNK(wb, xb)                                                                          \
    _Pragma("unroll") for (int u = 0; u < TP_UNROLL; u++) at_mma_tiles(acc, wb[u], xb[u])
    at_kgroup wv[TP_UNROLL][TP_MT][2];
    if (live && c < nchunks) /* weights depend on no earlier kernel: start streaming them now */
        LOAD_W_CHUNK(wv, c);
#if TP_STAGES == 2
    at_kgroup wn[TP_UNROLL][TP_MT][2]; /* the next chunk's weights */
#if TP_PRE == 2
    if (live && c + nslices < nchunks) /* and the second chunk's too */
        LOAD_W_CHUNK(wn, c + nslices);
#endif
#endif
    at_pdl_wait();
    at_pdl_trigger();
#if TP_XK > 0
    {
        /* every thread of the block copies 16-byte pieces of the block's
        ** activations (tokens past M are not copied: their fragments are
        ** zeros, below), then all wait for them */
        const int per_chunk = 4 * TP_UNROLL; /* 16-byte pieces of a token's chunk */
        const int nlocal = (nchunks + nslices - 1) / nslices * TP_WPR;
        const int total = 8 * TP_NT * nlocal * per_chunk;
        for (int q = (int)threadIdx.x; q < total; q += TP_WARPS * 32) {
            const int tl = q / (nlocal * per_chunk), r = q % (nlocal * per_chunk);
            const int cl = r / per_chunk, piece = r % per_chunk;
            const int cg = cl / TP_WPR * nslices + rank * TP_WPR + cl % TP_WPR;
            if (cg < nchunks && tok0 + tl < M)
                at_cp_async16(&xs[tl][cl * per_chunk + piece],
                              x + (long long)(tok0 + tl) * K + (long long)cg * TP_UNROLL * AT_MMA_KSTEP + piece * 8);
        }
        at_cp_async_commit();
        at_cp_async_wait<0>();
        __syncthreads();
    }
#endif
    if (live) {
#if TP_XK > 0
        /* one chunk in flight, as TP_STAGES=1 below, but the activations
        ** come from shared memory at the mma */
        int cl = slice; /* local chunk of chunk c */
        while (c < nchunks) {
            const int cn = c + nslices;
#pragma unroll
            for (int u = 0; u < TP_UNROLL; u++) {
                at_kgroup xk[TP_NT];
#pragma unroll
                for (int nt = 0; nt < TP_NT; nt++) {
                    xk[nt] = at_kgroup_of(xs[nt * 8 + g][(cl * TP_UNROLL + u) * 4 + t]);
                    if (!xok[nt])
                        xk[nt] = at_kgroup_zero();
                }
                at_mma_tiles(acc, wv[u], xk);
            }
            if (cn < nchunks)
                LOAD_W_CHUNK(wv, cn);
            c = cn;
            cl += TP_WPR;
        }
#elif TP_STAGES == 1
        /* one chunk in flight: load x, multiply, then fetch the next chunk */
        while (c < nchunks) {
            at_kgroup xv[TP_UNROLL][TP_NT];
            LOAD_X_CHUNK(xv, c);
            MMA_CHUNK(wv, xv);
            c += nslices;
            if (c < nchunks)
                LOAD_W_CHUNK(wv, c);
        }
#else
        /* two chunks in flight: the next chunk's weights and x are requested
        ** before this chunk is multiplied, so a warp never waits idle on a
        ** full round trip between chunks */
        at_kgroup xv[TP_UNROLL][TP_NT];
        if (c < nchunks)
            LOAD_X_CHUNK(xv, c);
        bool wn_loaded = TP_PRE == 2; /* the first wn came before the wait */
        while (c < nchunks) {
            const int cn = c + nslices;
            at_kgroup xn[TP_UNROLL][TP_NT];
            if (cn < nchunks) {
                if (!wn_loaded)
                    LOAD_W_CHUNK(wn, cn);
                LOAD_X_CHUNK(xn, cn);
            }
            wn_loaded = false;
            MMA_CHUNK(wv, xv);
            if (cn < nchunks) {
#pragma unroll
                for (int u = 0; u < TP_UNROLL; u++) {
#pragma unroll
                    for (int mt = 0; mt < TP_MT; mt++)
                        wv[u][mt][0] = wn[u][mt][0], wv[u][mt][1] = wn[u][mt][1];
#pragma unroll
                    for (int nt = 0; nt < TP_NT; nt++)
                        xv[u][nt] = xn[u][nt];
                }
            }
            c = cn;
        }
#endif
        /* leftover steps, one at a time; the last may be partial (K tail) */
        for (int s = nchunks * TP_UNROLL + kslice; s < nsteps; s += nslices) {
            const int k = s * AT_MMA_KSTEP + kt, left = K - k;
            at_kgroup w1[TP_MT][2], x1[TP_NT];
#pragma unroll
            for (int mt = 0; mt < TP_MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    w1[mt][h] = at_kgroup_load_w<true>(wr[mt][h] + k, left, pol);
#pragma unroll
            for (int nt = 0; nt < TP_NT; nt++)
                x1[nt] = at_kgroup_load_x<true>(xr[nt] + k, left, xok[nt]);
            at_mma_tiles(acc, w1, x1);
        }
    }
#undef LOAD_W_CHUNK
#undef LOAD_X_CHUNK
#undef MMA_CHUNK

#if TP_WPR > 1
    /* slices 1.. hand their accumulators to slice 0 of their group, which
    ** adds them in slice order */
    if (slice > 0)
        at_mma_put_partials(&part[group][slice - 1][0][0], acc, lane);
    __syncthreads();
    if (slice == 0)
        at_mma_add_partials(acc, &part[group][0][0][0], TP_WPR - 1, NACC * 32, lane);
#endif
#if TP_KSPLIT > 1
    /* blocks 1.. of the cluster hand their block's sums to block 0, which
    ** adds them in rank order; every thread of the cluster meets at the
    ** barrier, so none may return before it */
    if (slice == 0 && rank > 0) {
#pragma unroll
        for (int mt = 0; mt < TP_MT; mt++)
#pragma unroll
            for (int nt = 0; nt < TP_NT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    at_cluster_store(&cpart[rank - 1][group][(mt * TP_NT + nt) * 4 + i][lane], 0u, acc[mt][nt][i]);
    }
    at_cluster_sync();
    if (rank > 0)
        return;
    if (slice == 0)
        at_mma_add_partials(acc, &cpart[0][group][0][0], TP_KSPLIT - 1, GROUPS * NACC * 32, lane);
#endif
    if (slice > 0 || !live)
        return;
    at_mma_store(y, acc, row0, tok0, M, N, lane);
}
