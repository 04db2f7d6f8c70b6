/*
** common/gemv_fuse.cuh — what the fused decode ops add to the CUDA-core GEMV
** templates (gemv_warp_row, gemv_splitk, gemv_multi_token): the RMSNorm of
** x in the prologue and SwiGLU in the epilogue. Rounding is the unfused
** sequence's (tuner/norm_ref.h, examples/decode's silu_mul), so a fused
** kernel differs from the norm kernel + GEMV (+ SiLU-mul) only in the order
** of its sums.
**
**   TP_NORM    0 none; 1 rmsnorm, xn = rne((x * r) * w); 2 Gemma,
**              xn = rne((x * r) * (1 + w)); r = rsqrt(sum(x^2) / K + eps)
**              per token, computed by the whole block after the PDL wait
**              (at_norm_rstd), then every x vector the GEMV loads is
**              normalized and rounded on the fly (AT_LOAD_X): the normalized
**              activations never go through memory
**   TP_SWIGLU  0 none; 1: each output n reads two weight rows, Wg[n] (W)
**              and Wu[n]; y = rne(silu(g) * u) with g, u the rounded sums
**              (at_silu_mul): the intermediate never leaves the chip
**   TP_RES     0 none; 1 (with TP_NORM): the residual-add form. The norm's
**              input is z = rne(x + res) (AT_LOAD_X and at_norm_rstd add
**              the residual row on the fly); z is written back into res in
**              place by the warp of each token group that finishes last
**              (at_res_arrive: one counter per token group in cnt, which
**              must be zero at launch and is left zero), since every block
**              reads all of x and res until it is done. 2: the same
**              function, z staged: each block writes the z it computes in
**              the prologue into dynamic shared memory (K * tokens
**              elements, at_zs) and its GEMV loop reads z from there, so
**              its reads of x and res end with the prologue; thread 0 then
**              takes a ticket (one atomic per block, its value waited for
**              only at the end), and warp 0 of the block with the last
**              ticket writes its staged z into res (at_res_write_staged):
**              no second read of x and res, no serial tail
**   TP_PF      0 none; 1: the block asks L2 for its whole weight tile before
**              the PDL wait (at_prefetch_rows), so the weights stream from
**              memory while the block waits on the previous kernel and
**              computes the norm; searched for the fused ops and gemv_add
**
** A fused kernel (TP_NORM > 0 or TP_SWIGLU = 1) takes three parameters
** after the GEMV's six, always the same whatever the op (AT_FUSE_PARAMS):
** Wu (ignored without SwiGLU), nw, the norm weight [K] (ignored without the
** norm), and eps; TP_RES=1 adds two more (AT_RES_PARAMS): res [M,K] and
** cnt, the counters (unsigned, one per gridDim.y). A plain kernel keeps its
** six, its PTX unchanged.
*/
#ifndef AT_COMMON_GEMV_FUSE_CUH
#define AT_COMMON_GEMV_FUSE_CUH

#include "common/vec.cuh"

#ifndef TP_NORM
#define TP_NORM 0
#endif
#ifndef TP_SWIGLU
#define TP_SWIGLU 0
#endif
#if TP_NORM < 0 || TP_NORM > 2
#error "TP_NORM must be 0, 1 or 2"
#endif
#if TP_SWIGLU != 0 && TP_SWIGLU != 1
#error "TP_SWIGLU must be 0 or 1"
#endif
#ifndef TP_RES
#define TP_RES 0
#endif
#if TP_RES < 0 || TP_RES > 2
#error "TP_RES must be 0, 1 or 2"
#endif
#if TP_RES && !TP_NORM
#error "TP_RES (the residual-add form) needs TP_NORM"
#endif
#if (TP_NORM || TP_SWIGLU) && TP_ADD
#error "the fused ops store y: TP_ADD must be 0"
#endif
#ifndef TP_PF
#define TP_PF 0
#endif
#if TP_PF != 0 && TP_PF != 1
#error "TP_PF must be 0 or 1"
#endif

/* TP_PF=1: rows [r0, r0 + n) of w (clamped to N rows), K elements each,
** one contiguous range, asked of L2 by the whole block: one
** prefetch.global.L2 per 128-byte line, no register held, nothing waited
** for. Called before the PDL wait: the first line may start before the
** range but lies in the same line (so the same page) as its first byte,
** and L2 is where every SM's writes meet, so nothing stale can be read. */
__device__ __forceinline__ void at_prefetch_rows(const at_elem *w, long long r0, long long n, int K, int N)
{
#if TP_PF
    if (r0 >= N)
        return;
    if (r0 + n > N)
        n = N - r0;
    const unsigned long long a = (unsigned long long)(w + r0 * K);
    const unsigned long long end = a + (unsigned long long)(n * K) * sizeof(at_elem);
    for (unsigned long long p = (a & ~127ull) + threadIdx.x * 128ull; p < end; p += blockDim.x * 128ull)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
    (void)w, (void)r0, (void)n, (void)K, (void)N;
#endif
}
#if TP_ADD
/* gemv_add's store (AT_STORE_OUT, common/dtype.cuh) with the residual's
** value r read earlier, right after the PDL wait and off the kernel's tail,
** by the thread that stores it: the same rounding. */
#define AT_STORE_OUT_R(dst, acc, r) ((dst) = at_from_float((r) + at_to_float(at_from_float(acc))))
#endif

/* The block's tile of W, and of Wu with SwiGLU. */
#if TP_SWIGLU
#define AT_PREFETCH_TILE(r0, n) (at_prefetch_rows(W, (r0), (n), K, N), at_prefetch_rows(Wu, (r0), (n), K, N))
#else
#define AT_PREFETCH_TILE(r0, n) at_prefetch_rows(W, (r0), (n), K, N)
#endif

#define AT_FUSED (TP_NORM > 0 || TP_SWIGLU)
#if TP_RES
/* res is read by every block and written by the last warp of each token
** group (at_res_arrive), so it is not read through the read-only path */
#define AT_RES_PARAMS , at_elem *res, unsigned *cnt
#else
#define AT_RES_PARAMS
#endif
#if AT_FUSED
#define AT_FUSE_PARAMS , const at_elem *__restrict__ Wu, const at_elem *__restrict__ nw, float eps AT_RES_PARAMS
#else
#define AT_FUSE_PARAMS
#endif

/* Weight rows a thread walks per output row: the gate's and the up's. */
#define AT_WROWS(rows) ((rows) * (1 + TP_SWIGLU))
/* The weight matrix row slot r (of AT_WROWS(TP_ROWS)) reads: W below
** TP_ROWS, Wu above (its row is then r - TP_ROWS). */
#if TP_SWIGLU
#define AT_WMAT(r) ((r) < TP_ROWS ? W : Wu)
#else
#define AT_WMAT(r) W
#endif
#define AT_WROW(r) ((r) % TP_ROWS)

/* SwiGLU of the rounded gate and up values, as a separate SiLU-mul kernel
** computes it from the stored g and u. */
__device__ __forceinline__ float at_silu_mul(float g, float u) { return g / (1.0f + __expf(-g)) * u; }

/* Stores output dst from its sums: the gate's s and, with SwiGLU, the up's
** su (both rounded to the element type first, as stored by the GEMV).
** Without SwiGLU su is dropped unexpanded: it need not be declared. */
#if TP_SWIGLU
#define AT_STORE_FUSED(dst, s, su)                                                                                    \
    ((dst) = at_from_float(at_silu_mul(at_to_float(at_from_float(s)), at_to_float(at_from_float(su)))))
#else
#define AT_STORE_FUSED(dst, s, su) AT_STORE_OUT(dst, s)
#endif

#if TP_RES
/* z = rne(x + r) per element, as the add_rmsnorm kernels round it. */
__device__ __forceinline__ at_vec at_add_vec(const at_vec &x, const at_vec &r)
{
    at_vec o;
#if TP_VEC == 1
    o.w[0] = at_from_float(at_lo(x.w[0]) + at_lo(r.w[0]));
#else
#pragma unroll
    for (int i = 0; i < AT_WORDS; i++) {
        unsigned lo = at_from_float(at_lo(x.w[i]) + at_lo(r.w[i]));
        unsigned hi = at_from_float(at_hi(x.w[i]) + at_hi(r.w[i]));
        o.w[i] = lo | (hi << 16);
    }
#endif
    return o;
}

/* The norm's input at p, a pointer into x: z = rne(x + res) at the same
** offset (x and res are the kernel's parameters). */
#define AT_LOAD_Z(p) at_add_vec(at_load_x(p), at_ld_vec(res + ((p) - x)))
#endif

#if TP_RES == 1
/* at_norm_rstd's extra arguments: x and res, to find res's rows. */
#define AT_RES_ARGS , x, res
#define AT_RES_RSTD_PARAMS , const at_elem *x, const at_elem *res

/* Called once by every warp of the grid when it has read x and res for the
** last time (all 32 lanes, converged): the warp counts itself in its token
** group's counter (gridDim.y groups, tokens [tok0, tok0 + tokens) clamped
** to M), and the warp that counts last, when every other warp of the group
** is done reading, writes z = rne(x + res) over the group's rows of res and
** sets the counter back to zero for the next launch. No fence: what must
** come first is every other warp's reads of x and res, and a warp issues
** its atomic in order after the reduction that consumed every value it
** loaded; x and res are written by no one else, so the last warp's own
** loads cannot see stale data (fences here cost a microsecond of tail). */
__device__ __forceinline__ void at_res_arrive(const at_elem *x, at_elem *res, unsigned *cnt, int K, int M, int tok0,
                                              int tokens)
{
    const int lane = (int)(threadIdx.x & 31u);
    const unsigned total = gridDim.x * (blockDim.x >> 5);
    unsigned last = 0;
    __syncwarp();
    if (lane == 0)
        last = atomicAdd(cnt + blockIdx.y, 1u) == total - 1;
    if (!__shfl_sync(0xffffffffu, last, 0))
        return;
    for (int j = 0; j < tokens && tok0 + j < M; j++) {
        const long long row = (long long)(tok0 + j) * K;
#pragma unroll 4
        for (int k = lane * TP_VEC; k < K; k += 32 * TP_VEC)
            at_st_vec(res + row + k, at_add_vec(at_load_x(x + row + k), at_ld_vec(res + row + k)));
    }
    if (lane == 0)
        cnt[blockIdx.y] = 0;
}
#define AT_RES_ARRIVE(tok0, tokens) at_res_arrive(x, res, cnt, K, M, (tok0), (tokens))
#define AT_RES_STAGE(tok0)
#define AT_RES_TICKET()
#define AT_LOAD_XZ(p) AT_LOAD_Z(p)
#elif TP_RES == 2
/* The block's staged z: `tokens` rows of K elements in dynamic shared
** memory (the spec's smem: K * tokens * sizeof(at_elem)), row j holding
** token tok0 + j (a token past M holds token M - 1's copy, as xr[j] reads
** it); at_zx is x's row of token tok0, so the z of x's element p is at
** at_zs + (p - at_zx) for every p the GEMV loop reads. */
#define AT_RES_STAGE(tok0)                                                                                            \
    extern __shared__ __align__(16) at_elem at_zs[];                                                                  \
    const at_elem *const at_zx = x + (long long)(tok0) * K
/* at_norm_rstd's extra arguments: x and res, to find res's rows, and the
** staging rows it fills. */
#define AT_RES_ARGS , x, res, at_zs
#define AT_RES_RSTD_PARAMS , const at_elem *x, const at_elem *res, at_elem *zs
/* The GEMV loop's z: the staged copy. */
#define AT_LOAD_XZ(p) at_ld_vec(at_zs + ((p) - at_zx))

/* Thread 0's ticket, taken right after at_norm_rstd's last barrier, when
** every thread of the block has read x and res for the last time (the
** loaded values went into the staged rows and the sums before the
** barrier); the other threads hold 0. Nothing waits for the value until
** at_res_write_staged. */
__device__ __forceinline__ unsigned at_res_ticket(unsigned *cnt)
{
    return threadIdx.x == 0 ? atomicAdd(cnt + blockIdx.y, 1u) : 0u;
}
#define AT_RES_TICKET() const unsigned at_tk = at_res_ticket(cnt)

/* Called at the end by every warp that reaches it (warp 0 always does):
** in the token group's block that took the last ticket, when every block
** of the group has read x and res for the last time, warp 0 writes the
** staged z over the group's rows of res (tokens past M skipped) and sets
** the counter back to zero for the next launch. */
__device__ __forceinline__ void at_res_write_staged(const at_elem *zs, at_elem *res, unsigned *cnt, unsigned tk, int K,
                                                    int M, int tok0, int tokens)
{
    if (threadIdx.x >= 32u)
        return;
    const int lane = (int)threadIdx.x;
    if (!__shfl_sync(0xffffffffu, tk == gridDim.x - 1u, 0))
        return;
    for (int j = 0; j < tokens && tok0 + j < M; j++) {
        at_elem *dst = res + (long long)(tok0 + j) * K;
        const at_elem *src = zs + (long long)j * K;
#pragma unroll 4
        for (int k = lane * TP_VEC; k < K; k += 32 * TP_VEC)
            at_st_vec(dst + k, at_ld_vec(src + k));
    }
    if (lane == 0)
        cnt[blockIdx.y] = 0;
}
#define AT_RES_ARRIVE(tok0, tokens) at_res_write_staged(at_zs, res, cnt, at_tk, K, M, (tok0), (tokens))
#else
#define AT_LOAD_Z(p) at_load_x(p)
#define AT_LOAD_XZ(p) at_load_x(p)
#define AT_RES_ARGS
#define AT_RES_RSTD_PARAMS
#define AT_RES_STAGE(tok0)
#define AT_RES_TICKET()
#define AT_RES_ARRIVE(tok0, tokens) ((void)0)
#endif

#if TP_NORM
/* r for `tokens` rows of x (xr[j], K elements each), computed by every
** thread of the block together and left in rs[j] (shared, `tokens` floats)
** for all; ss[] is shared scratch of nwarps * tokens floats. Ends with a
** barrier: every thread of the block must call it. */
template <int T>
__device__ __forceinline__ void at_norm_rstd(const at_elem *const (&xr)[T], int K, float eps, float *ss, float *rs,
                                             int nwarps AT_RES_RSTD_PARAMS)
{
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    float s[T];
#pragma unroll
    for (int j = 0; j < T; j++)
        s[j] = 0.0f;
    for (int k = tid * TP_VEC; k < K; k += nwarps * 32 * TP_VEC) {
#pragma unroll
        for (int j = 0; j < T; j++) {
            at_vec v = AT_LOAD_Z(xr[j] + k);
#if TP_RES == 2
            at_st_vec(zs + j * K + k, v);
#endif
            s[j] = at_dot(v, v, s[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < T; j++) {
        float t = at_warp_sum(s[j]);
        if (lane == 0)
            ss[j * nwarps + warp] = t;
    }
    __syncthreads();
    if (tid < T) {
        float t = 0.0f;
        for (int w = 0; w < nwarps; w++)
            t += ss[tid * nwarps + w];
        rs[tid] = rsqrtf(t / (float)K + eps);
    }
    __syncthreads();
}

/* The normalized, rounded vector: rne((x * r) * w) per element (Gemma:
** (1 + w)), exactly as the norm kernels round their output. */
__device__ __forceinline__ at_vec at_norm_vec(const at_vec &x, const at_vec &w, float r)
{
    at_vec o;
#if TP_VEC == 1
    float f = at_lo(w.w[0]);
#if TP_NORM == 2
    f = 1.0f + f;
#endif
    o.w[0] = at_from_float(at_lo(x.w[0]) * r * f);
#else
#pragma unroll
    for (int i = 0; i < AT_WORDS; i++) {
        float flo = at_lo(w.w[i]), fhi = at_hi(w.w[i]);
#if TP_NORM == 2
        flo = 1.0f + flo;
        fhi = 1.0f + fhi;
#endif
        unsigned lo = at_from_float(at_lo(x.w[i]) * r * flo), hi = at_from_float(at_hi(x.w[i]) * r * fhi);
        o.w[i] = lo | (hi << 16);
    }
#endif
    return o;
}
/* x's vector at element k of a row (p = row + k), normalized with r
** (TP_RES: z's, the residual added first). */
#define AT_LOAD_X(p, k, r) at_norm_vec(AT_LOAD_XZ(p), at_load_x(nw + (k)), (r))
#else
#define AT_LOAD_X(p, k, r) at_load_x(p)
#endif

#endif
