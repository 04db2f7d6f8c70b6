/*
** common/mma.cuh — the tensor-core pieces of the skinny-GEMM template
** (gemv_mma.cu): one warp-wide mma.sync.m16n8k16 (bf16/fp16 in, fp32
** accumulate; sm_80+) and the per-thread "k-groups" its operands are
** loaded in. The fragment mapping is checked on the host by
** tests/test_skinny.c, which emulates one warp, and ran correct on the H200.
**
** Fragment layout (PTX ISA, mma.m16n8k16 with .bf16/.f16; g = lane >> 2,
** t = lane & 3; "lo" is the lower 16 bits of a .b32 register):
**   A 16x16 (row-major): a0 = A[g][2t, 2t+1]     a1 = A[g+8][2t, 2t+1]
**                        a2 = A[g][2t+8, 2t+9]   a3 = A[g+8][2t+8, 2t+9]
**   B 16x8 (col-major):  b0 = B[2t, 2t+1][g]     b1 = B[2t+8, 2t+9][g]
**   C/D 16x8 fp32:       c0, c1 = C[g][2t, 2t+1] c2, c3 = C[g+8][2t, 2t+1]
** The sum over k does not care in which order k is visited, so the k axis
** is permuted: the logical columns {2t, 2t+1, 2t+8, 2t+9} of one mma are
** four *consecutive* physical k of thread t (at_mma_phys_k below). A thread
** then fills a0/a2 (and a1/a3, b0/b1) from one contiguous 8-byte piece of
** its row, so operands come straight from global memory with the same
** 16-byte vector loads as the GEMV templates, no shared memory, no
** ldmatrix. A and B use the same permutation, so D is exact.
**
** A k-group is AT_MMA_G consecutive elements of one row held by one thread
** (8 with TP_VEC = 8: one 16-byte load, two mmas; else 4: one mma), and a
** step is the AT_MMA_KSTEP = 4 * AT_MMA_G elements the four threads t of a
** quad cover together. Loads take the TP_CACHE policy of common/vec.cuh.
*/
#ifndef AT_COMMON_MMA_CUH
#define AT_COMMON_MMA_CUH

#include "common/dtype.cuh"
#include "common/vec.cuh"

#define AT_MMA_G (TP_VEC == 8 ? 8 : 4) /* elements of one row per thread per step */
#define AT_MMA_KSTEP (4 * AT_MMA_G)    /* elements of K per step; [MMA_KSTEP] gemv.lua */
#define AT_MMA_PER_STEP (AT_MMA_G / 4) /* mmas per step                           */
#define AT_MMA_LOADS (AT_MMA_G / TP_VEC) /* vector loads per k-group              */

/* [MMA_PERM] Physical k (0..AT_MMA_KSTEP-1, within a step) of logical
** column kk (0..15) of mma number m (0..AT_MMA_PER_STEP-1). Documents the
** mapping the loads below implement; tests/test_skinny.c holds a host copy
** and checks it against the registers at_mma_step passes. */
__device__ __forceinline__ int at_mma_phys_k(int m, int kk)
{
    const int t = (kk & 7) >> 1, hi = kk >> 3, e = kk & 1;
    return t * AT_MMA_G + m * 4 + hi * 2 + e;
}

/* AT_MMA_G elements as AT_MMA_G / 2 words; word 2m is (lo, hi) = physical
** k 4m, 4m+1 (logical 2t, 2t+1 of mma m), word 2m+1 is 4m+2, 4m+3 (2t+8, 2t+9). */
struct at_kgroup {
    unsigned w[AT_MMA_G / 2];
};

__device__ __forceinline__ at_kgroup at_kgroup_zero(void)
{
    at_kgroup f;
#pragma unroll
    for (int i = 0; i < AT_MMA_G / 2; i++)
        f.w[i] = 0u;
    return f;
}

/* Puts vector i (0..AT_MMA_LOADS-1) of a k-group in place. */
__device__ __forceinline__ void at_kgroup_put(at_kgroup &f, int i, const at_vec &v)
{
#if TP_VEC == 1
    if (i & 1)
        f.w[i >> 1] |= v.w[0] << 16;
    else
        f.w[i >> 1] = v.w[0] & 0xffffu;
#else
#pragma unroll
    for (int j = 0; j < AT_WORDS; j++)
        f.w[i * AT_WORDS + j] = v.w[j];
#endif
}

/* Weights p[0 .. AT_MMA_G). With GUARD, a vector at or past `left`
** elements is not read and counts as zero (the K tail; p + left is the end
** of the row). p is aligned to TP_VEC elements. */
template <bool GUARD>
__device__ __forceinline__ at_kgroup at_kgroup_load_w(const at_elem *p, int left, unsigned long long pol)
{
    at_kgroup f = at_kgroup_zero();
#pragma unroll
    for (int i = 0; i < AT_MMA_LOADS; i++)
        if (!GUARD || i * TP_VEC < left)
            at_kgroup_put(f, i, at_load_w(p + i * TP_VEC, pol));
    return f;
}

/* Activations: the same, and nothing is read for a token past M (ok = 0). */
template <bool GUARD>
__device__ __forceinline__ at_kgroup at_kgroup_load_x(const at_elem *p, int left, bool ok)
{
    at_kgroup f = at_kgroup_zero();
#pragma unroll
    for (int i = 0; i < AT_MMA_LOADS; i++)
        if (ok && (!GUARD || i * TP_VEC < left))
            at_kgroup_put(f, i, at_load_x(p + i * TP_VEC));
    return f;
}

/* Asynchronous 16-byte copy global -> shared (cp.async, sm_80+; .cg
** bypasses L1), for gemv_mma.cu's TP_XK activations: both ends 16-byte
** aligned. A commit closes this thread's group of copies; wait<N> returns
** once at most N of its groups are still in flight. */
__device__ __forceinline__ void at_cp_async16(void *smem, const void *g)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
}

__device__ __forceinline__ void at_cp_async_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void at_cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* d += A * B for one m16n8k16 tile, fp32 accumulate; every lane of the warp
** must execute it (mma.sync.aligned). Register names as in the header. */
__device__ __forceinline__ void at_mma16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                            unsigned b0, unsigned b1)
{
#if TP_DTYPE == 1 /* not volatile: no side effects, so the compiler may schedule it */
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

/* Mma m of a step: rows g (lo) and g+8 (hi) of a 16-row weight tile
** against the 8 tokens of one x tile, all three as k-groups. */
__device__ __forceinline__ void at_mma_step(float (&d)[4], const at_kgroup &lo, const at_kgroup &hi,
                                            const at_kgroup &xg, int m)
{
    at_mma16816(d, lo.w[2 * m], hi.w[2 * m], lo.w[2 * m + 1], hi.w[2 * m + 1], xg.w[2 * m], xg.w[2 * m + 1]);
}

/* A k-group from one 16-byte read of shared memory (TP_VEC = 8). */
#if TP_VEC == 8
__device__ __forceinline__ at_kgroup at_kgroup_of(uint4 q)
{
    at_kgroup f;
    f.w[0] = q.x, f.w[1] = q.y, f.w[2] = q.z, f.w[3] = q.w;
    return f;
}
#endif

/* The pieces both MMA templates build a warp's tile from: acc[mt][nt] is
** the 16x8 accumulator of row tile mt and token tile nt. */

/* One K step: every MMA of the warp's tiles, w[mt] the weights of row tile
** mt (rows g and g+8), xk[nt] the tokens of token tile nt. */
template <int MT, int NT>
__device__ __forceinline__ void at_mma_tiles(float (&acc)[MT][NT][4], const at_kgroup (&w)[MT][2],
                                             const at_kgroup (&xk)[NT])
{
#pragma unroll
    for (int m = 0; m < AT_MMA_PER_STEP; m++)
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                at_mma_step(acc[mt][nt], w[mt][0], w[mt][1], xk[nt], m);
}

/* Partial sums in shared memory use the [..][reg][lane] layout (no bank
** conflicts): register r = (mt*NT + nt)*4 + i of `lane` at p[r * 32 + lane]. */
template <int MT, int NT>
__device__ __forceinline__ void at_mma_put_partials(float *p, const float (&acc)[MT][NT][4], int lane)
{
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                p[((mt * NT + nt) * 4 + i) * 32 + lane] = acc[mt][nt][i];
}

/* acc += n sets of partial sums in that layout, in order, set s at p + s * stride. */
template <int MT, int NT>
__device__ __forceinline__ void at_mma_add_partials(float (&acc)[MT][NT][4], const float *p, int n, int stride,
                                                    int lane)
{
#pragma unroll
    for (int s = 0; s < n; s++)
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    acc[mt][nt][i] += p[s * stride + ((mt * NT + nt) * 4 + i) * 32 + lane];
}

/* Stores the tile: D[i][j] = y[tok0 + nt*8 + j][row0 + mt*16 + i]; this
** lane holds i = g, g+8 and j = 2t, 2t+1; rows past N, tokens past M are
** not stored. */
template <int MT, int NT>
__device__ __forceinline__ void at_mma_store(at_elem *y, const float (&acc)[MT][NT][4], long long row0, int tok0,
                                             int M, int N, int lane)
{
    const int g = lane >> 2, t = lane & 3;
#if TP_ADD
    /* y is the residual: every value this lane updates is read first, all
    ** loads in flight together, then stored as AT_STORE_OUT rounds (one
    ** round trip, not one per output: a store may alias a later load for
    ** all the compiler knows) */
    float r[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const long long n = row0 + mt * 16 + g + (i >> 1) * 8;
                const int tok = tok0 + nt * 8 + 2 * t + (i & 1);
                r[mt][nt][i] = n < N && tok < M ? at_to_float(y[(long long)tok * N + n]) : 0.0f;
            }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const long long n = row0 + mt * 16 + g + (i >> 1) * 8;
                const int tok = tok0 + nt * 8 + 2 * t + (i & 1);
                if (n < N && tok < M)
                    y[(long long)tok * N + n] = at_from_float(r[mt][nt][i] + at_to_float(at_from_float(acc[mt][nt][i])));
            }
#else
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const long long n = row0 + mt * 16 + g + (i >> 1) * 8;
                const int tok = tok0 + nt * 8 + 2 * t + (i & 1);
                if (n < N && tok < M)
                    AT_STORE_OUT(y[(long long)tok * N + n], acc[mt][nt][i]);
            }
#endif
}

#endif
