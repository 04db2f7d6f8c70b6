/*
** gemv/gemv_mma_bulk.cu — y[m,n] = sum_k x[m,k] * W[n,k] for a few tokens
** (M = 2..16) on tensor cores, with the weights brought into shared memory
** by the copy engine (sm_90+). The MMA is gemv_mma.cu's ("swap AB":
** mma.sync.m16n8k16, 16 rows of W on the MMA's M side, 8 tokens on its N
** side, the k axis permuted as common/mma.cuh explains), but a block's
** weights do not pass through registers: at the start one warp asks for
** its first TP_DEPTH chunks (TP_KC elements of each of its 16*TP_MT rows,
** one 1-D bulk copy per row, common/bulk.cuh), before waiting on the
** previous kernel, so the whole ring is in flight at once and costs no
** registers. Each chunk completes on its own mbarrier; the block's warps
** split the chunk's K steps, read their fragments from shared memory, and
** once all are done with a chunk (a block barrier) the ring slot is asked
** for again with the chunk TP_DEPTH further on. Activations come from
** global memory (L2), the next chunk's requested before this one is
** multiplied. The warps' sums meet in shared memory; with TP_KSPLIT > 1 a
** cluster of blocks splits K into runs of whole chunks and meets in the
** first block's shared memory, as in gemv_mma.cu.
** Grid: (ceil(N / (16*TP_MT)) * TP_KSPLIT, ceil(M / (8*TP_NT))). Any N, any
** M, K % 8 == 0 (16-byte rows). sm_90+. Every candidate ran correct on the
** H200 at builds 28a2c05 and 2f843c9 (tests/test_gpu_skinny.c).
**
** Parameters (legal values):
**   TP_WARPS   warps per block, all splitting each chunk's K: 1, 2, 4, 8
**   TP_MT      16-row tiles per block: 1, 2
**   TP_NT      8-token tiles per block: 1 (M <= 8), 2 (M <= 16)
**   TP_KC      K elements per chunk: a multiple of 64 and of 32*TP_WARPS
**   TP_DEPTH   chunks in shared memory (the ring): 1 .. 4
**   TP_KSPLIT  blocks per cluster splitting K: 1, 2, 4, 8
**   TP_CACHE   weight cache hint: 0 default, 2 L2 evict_first
**   TP_PDL     1: programmatic dependent launch
**   TP_ADD     0: y = the sums; 1: y += the sums in place, rounded as
**              the unfused GEMV + add (the gemv_add op; common/dtype.cuh)
**   TP_DTYPE   1 bf16, 2 fp16
** (TP_VEC is 8: every fragment is one 16-byte read.)
**
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/gemv/gemv_mma_bulk.cu
*/
#ifndef TP_VEC
#define TP_VEC 8
#endif
#include "common/bulk.cuh"
#include "common/cluster.cuh"
#include "common/mma.cuh"
#include "common/pdl.cuh"

#ifndef TP_WARPS
#define TP_WARPS 4
#endif
#ifndef TP_MT
#define TP_MT 1
#endif
#ifndef TP_NT
#define TP_NT 1
#endif
#ifndef TP_KC
#define TP_KC 256
#endif
#ifndef TP_DEPTH
#define TP_DEPTH 2
#endif
#ifndef TP_KSPLIT
#define TP_KSPLIT 1
#endif
#if TP_VEC != 8
#error "gemv_mma_bulk reads 16-byte fragments: TP_VEC must be 8"
#endif
#if TP_KC % 64 != 0 || TP_KC % (32 * TP_WARPS) != 0
#error "TP_KC must be a multiple of 64 and of 32 * TP_WARPS"
#endif
#if TP_DEPTH < 1 || TP_DEPTH > 4
#error "TP_DEPTH must be 1 .. 4"
#endif
#define ROWS (16 * TP_MT)              /* weight rows per block */
#define ROWQ (TP_KC / 8 + 4)           /* 16-byte words per row in the ring: a chunk, then 64 bytes of pad */
#define SPW (TP_KC / 32 / TP_WARPS)    /* K steps (32 elements) of a chunk per warp */
#define NACC (TP_MT * TP_NT * 4)       /* accumulators per thread */

/* The pad makes a row 64 bytes longer than a multiple of 128, so the eight
** lanes of one 16-byte read phase (rows g, g+1; quads t = 0..3) hit
** distinct banks. */

#if TP_KSPLIT > 1
#define AT_BULK_CLUSTER __cluster_dims__(TP_KSPLIT, 1, 1)
#else
#define AT_BULK_CLUSTER
#endif

/* Warp 0: arms `bar` for a chunk of `len` elements of every row, then lane
** r < ROWS copies row r's piece (wrow: that row, clamped to N - 1, at the
** chunk's first k) into its ring slot. */
static __device__ __forceinline__ void request_chunk(uint4 (&slot)[ROWS][ROWQ], unsigned long long *bar,
                                                     const at_elem *wrow, int len, int lane,
                                                     unsigned long long pol)
{
    at_fence_proxy_async(); /* the block barrier before made every read of this slot visible here */
    if (lane == 0)
        at_mbar_expect(bar, (unsigned)(ROWS * len * (int)sizeof(at_elem)));
    __syncwarp();
    (void)pol;
    if (lane < ROWS) {
#if TP_CACHE == 2
        at_bulk_load_hint(&slot[lane][0], wrow, (unsigned)(len * (int)sizeof(at_elem)), bar, pol);
#else
        at_bulk_load(&slot[lane][0], wrow, (unsigned)(len * (int)sizeof(at_elem)), bar);
#endif
    }
}

extern "C" __global__ void __launch_bounds__(TP_WARPS * 32) AT_BULK_CLUSTER
gemv_mma_bulk(const at_elem *__restrict__ x, const at_elem *__restrict__ W, at_elem *__restrict__ y, int M,
              int K, int N)
{
    __shared__ __align__(128) uint4 ring[TP_DEPTH][ROWS][ROWQ];
    __shared__ __align__(8) unsigned long long full[TP_DEPTH];
#if TP_WARPS > 1
    __shared__ float part[TP_WARPS - 1][NACC][32]; /* [..][reg][lane]: no bank conflicts */
#endif
#if TP_KSPLIT > 1
    __shared__ float cpart[TP_KSPLIT - 1][NACC][32]; /* block 0's: the other blocks' sums */
    const int rank = (int)at_cluster_rank();
#else
    const int rank = 0;
#endif
    const int lane = (int)(threadIdx.x & 31u);
    const int warp = (int)(threadIdx.x >> 5);
    const int g = lane >> 2, t = lane & 3;
    const long long row0 = (long long)(blockIdx.x / TP_KSPLIT) * ROWS; /* < N: the grid has no empty block */
    const int tok0 = (int)blockIdx.y * (8 * TP_NT);
    /* this block's chunks: the cluster's blocks take equal runs of whole
    ** chunks, c0 .. c0 + nch - 1; only the last chunk of K may be short */
    const int nck = (K + TP_KC - 1) / TP_KC, cpr = (nck + TP_KSPLIT - 1) / TP_KSPLIT;
    const int c0 = rank * cpr;
    const int nch = min(nck, c0 + cpr) - c0 > 0 ? min(nck, c0 + cpr) - c0 : 0;
    const unsigned long long pol = at_evict_first_policy();
    const long long myrow = row0 + (lane < ROWS ? lane : 0);
    const at_elem *wrow = W + (myrow < N ? myrow : N - 1) * (long long)K; /* warp 0's copy source */

    /* weights depend on no earlier kernel: the ring is requested before the wait */
    if (warp == 0) {
        if (lane == 0)
#pragma unroll
            for (int s = 0; s < TP_DEPTH; s++)
                at_mbar_init(&full[s], 1);
        __syncwarp();
#pragma unroll
        for (int s = 0; s < TP_DEPTH; s++)
            if (s < nch) {
                const int kc = (c0 + s) * TP_KC;
                request_chunk(ring[s], &full[s], wrow + kc, min(TP_KC, K - kc), lane, pol);
            }
    }
    __syncthreads(); /* every warp sees the initialised barriers */
    at_pdl_wait();
    at_pdl_trigger();

    /* B column g of each token tile is token tok0 + nt*8 + g; past M: zeros. */
    const at_elem *xr[TP_NT];
    bool xok[TP_NT];
#pragma unroll
    for (int nt = 0; nt < TP_NT; nt++) {
        const int tok = tok0 + nt * 8 + g;
        xok[nt] = tok < M;
        xr[nt] = x + (long long)(xok[nt] ? tok : 0) * K;
    }
    float acc[TP_MT][TP_NT][4];
#pragma unroll
    for (int mt = 0; mt < TP_MT; mt++)
#pragma unroll
        for (int nt = 0; nt < TP_NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[mt][nt][i] = 0.0f;

    /* step u of this warp in chunk j is chunk step warp*SPW + u; this
    ** thread's k-group in it starts at kt (K tail: nothing at or past K) */
    const int kt = t * AT_MMA_G;
#define LOAD_X_CHUNK(xb, j)                                                                        \
    _Pragma("unroll") for (int u = 0; u < SPW; u++)                                                \
        _Pragma("unroll") for (int nt = 0; nt < TP_NT; nt++) {                                     \
            const int k = (c0 + (j)) * TP_KC + (warp * SPW + u) * AT_MMA_KSTEP + kt;              \
            xb[u][nt] = at_kgroup_load_x<true>(xr[nt] + k, K - k, xok[nt]);                        \
        }
    at_kgroup xv[SPW][TP_NT];
    if (nch > 0)
        LOAD_X_CHUNK(xv, 0);
    for (int j = 0; j < nch; j++) {
        const int st = j % TP_DEPTH;
        const int len = min(TP_KC, K - (c0 + j) * TP_KC);
        at_kgroup xn[SPW][TP_NT];
        if (j + 1 < nch)
            LOAD_X_CHUNK(xn, j + 1);
        at_mbar_wait(&full[st], (unsigned)(j / TP_DEPTH) & 1u);
#pragma unroll
        for (int u = 0; u < SPW; u++) {
            const int s = warp * SPW + u, k = s * AT_MMA_KSTEP + kt;
            if (s * AT_MMA_KSTEP < len) { /* warp-uniform: a short chunk's missing steps are skipped */
                at_kgroup w[TP_MT][2];
#pragma unroll
                for (int mt = 0; mt < TP_MT; mt++)
#pragma unroll
                    for (int h = 0; h < 2; h++)
                        w[mt][h] = k < len ? at_kgroup_of(ring[st][mt * 16 + h * 8 + g][s * 4 + t]) : at_kgroup_zero();
                at_mma_tiles(acc, w, xv[u]);
            }
        }
        if (j + 1 < nch)
#pragma unroll
            for (int u = 0; u < SPW; u++)
#pragma unroll
                for (int nt = 0; nt < TP_NT; nt++)
                    xv[u][nt] = xn[u][nt];
        if (j + TP_DEPTH < nch) { /* every warp is done with slot st: ask for chunk j + TP_DEPTH there */
            __syncthreads();
            if (warp == 0) {
                const int kc = (c0 + j + TP_DEPTH) * TP_KC;
                request_chunk(ring[st], &full[st], wrow + kc, min(TP_KC, K - kc), lane, pol);
            }
        }
    }
#undef LOAD_X_CHUNK

#if TP_WARPS > 1
    /* warps 1.. hand their sums to warp 0, which adds them in warp order */
    if (warp > 0)
        at_mma_put_partials(&part[warp - 1][0][0], acc, lane);
    __syncthreads();
    if (warp == 0)
        at_mma_add_partials(acc, &part[0][0][0], TP_WARPS - 1, NACC * 32, lane);
#endif
#if TP_KSPLIT > 1
    /* blocks 1.. of the cluster hand their sums to block 0, which adds them
    ** in rank order; every thread of the cluster meets at the barrier */
    if (warp == 0 && rank > 0)
#pragma unroll
        for (int r = 0; r < NACC; r++)
            at_cluster_store(&cpart[rank - 1][r][lane], 0u, acc[r / (TP_NT * 4)][(r / 4) % TP_NT][r % 4]);
    at_cluster_sync();
    if (rank > 0)
        return;
    if (warp == 0)
        at_mma_add_partials(acc, &cpart[0][0][0], TP_KSPLIT - 1, NACC * 32, lane);
#endif
    if (warp > 0)
        return;
    at_mma_store(y, acc, row0, tok0, M, N, lane);
}
