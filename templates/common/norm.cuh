/*
** common/norm.cuh — what the RMSNorm templates share: the op switch, vector
** loads and stores of rows, the weight factor, group/block sums, and one
** row slice's two passes (sum of squares, then scale and store). Rounding
** (tuner/norm_ref.h states it): z = rne(x + residual) is stored and the norm
** reads the rounded z; fp32 math; y is rounded once, at the end.
**
** TP_OP      0 rmsnorm, 1 add_rmsnorm, 2 gemma_rmsnorm, 3 add_gemma_rmsnorm
**            [NORM_OP] the values of at_norm_op in tuner/norm_ref.h
** TP_WFP32   1: w is fp32 (Gemma weights kept in fp32); 0: w is the element dtype
** TP_VEC     elements per vector: 1, 2, 4, 8 (8 = 16-byte loads); divides H
*/
#ifndef AT_COMMON_NORM_CUH
#define AT_COMMON_NORM_CUH

#include "common/dtype.cuh"
#include "common/pdl.cuh"
#include "common/vec.cuh"

#ifndef TP_OP
#define TP_OP 0
#endif
#ifndef TP_WFP32
#define TP_WFP32 0
#endif
#if TP_OP < 0 || TP_OP > 3
#error "TP_OP must be 0 (rmsnorm), 1 (add_rmsnorm), 2 (gemma_rmsnorm) or 3 (add_gemma_rmsnorm)"
#endif
#define AT_NORM_ADD (TP_OP == 1 || TP_OP == 3) /* reads residual, writes z into it */
#define AT_NORM_GEMMA (TP_OP >= 2)             /* scales by (1 + w) */

/* Element i (0..TP_VEC-1, a constant after unrolling) of a vector, as float. */
__device__ __forceinline__ float at_vget(const at_vec &v, int i)
{
#if TP_VEC == 1
    (void)i;
    return at_lo(v.w[0]);
#else
    return (i & 1) ? at_hi(v.w[i >> 1]) : at_lo(v.w[i >> 1]);
#endif
}

/* Rounds TP_VEC floats to the element dtype (nearest even) into a vector. */
__device__ __forceinline__ at_vec at_vpack(const float (&f)[TP_VEC])
{
    at_vec v;
#if TP_VEC == 1
    v.w[0] = at_from_float(f[0]);
#else
#pragma unroll
    for (int i = 0; i < AT_WORDS; i++) {
#if TP_DTYPE == 1
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(v.w[i]) : "f"(f[2 * i + 1]), "f"(f[2 * i]));
#else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(v.w[i]) : "f"(f[2 * i + 1]), "f"(f[2 * i]));
#endif
    }
#endif
    return v;
}

/* TP_VEC weights: packed 16-bit, or fp32 with TP_WFP32 (two 16-byte loads
** for TP_VEC = 8). The weights depend on no earlier kernel: they may be
** loaded before at_pdl_wait(). */
struct at_norm_w {
#if TP_WFP32
    float f[TP_VEC];
#else
    at_vec v;
#endif
};

__device__ __forceinline__ at_norm_w at_norm_load_w(const void *w, int col)
{
    at_norm_w r;
#if TP_WFP32
    const float *p = static_cast<const float *>(w) + col;
#if TP_VEC >= 4
#pragma unroll
    for (int i = 0; i < TP_VEC; i += 4) {
        float4 t = __ldg(reinterpret_cast<const float4 *>(p + i));
        r.f[i] = t.x; r.f[i + 1] = t.y; r.f[i + 2] = t.z; r.f[i + 3] = t.w;
    }
#elif TP_VEC == 2
    float2 t = __ldg(reinterpret_cast<const float2 *>(p));
    r.f[0] = t.x; r.f[1] = t.y;
#else
    r.f[0] = __ldg(p);
#endif
#else
    r.v = at_load_w(static_cast<const at_elem *>(w) + col, 0ull);
#endif
    return r;
}

/* The factor element i of y is scaled by: w, or (1 + w) for Gemma. */
__device__ __forceinline__ float at_norm_wfactor(const at_norm_w &w, int i)
{
#if TP_WFP32
    float f = w.f[i];
#else
    float f = at_vget(w.v, i);
#endif
#if AT_NORM_GEMMA
    return 1.0f + f;
#else
    return f;
#endif
}

/* Sum over groups of G lanes (G = 1, 2, 4, 8, 16 or 32, aligned within the
** warp); every lane of a group gets its group's total. All 32 lanes of the
** warp must call it. */
template <int G>
__device__ __forceinline__ float at_group_sum(float v)
{
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum over a block of WARPS whole warps; every thread gets the total, added
** in a fixed order. part[] is WARPS floats of shared memory; call once per
** kernel (a second call would need a barrier before reusing part). */
template <int WARPS>
__device__ __forceinline__ float at_block_sum(float v, float *part)
{
    v = at_warp_sum(v);
    if (WARPS == 1)
        return v;
    if ((threadIdx.x & 31u) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < WARPS; i++)
        s += part[i];
    return s;
}

/* For the add ops: z = rne(x + residual), one vector. */
__device__ __forceinline__ at_vec at_norm_add(const at_vec &x, const at_vec &r)
{
    float f[TP_VEC];
#pragma unroll
    for (int i = 0; i < TP_VEC; i++)
        f[i] = at_vget(x, i) + at_vget(r, i);
    return at_vpack(f);
}

__device__ __forceinline__ float at_norm_sumsq(const at_vec &v, float acc)
{
#pragma unroll
    for (int i = 0; i < TP_VEC; i++) {
        float f = at_vget(v, i);
        acc = fmaf(f, f, acc);
    }
    return acc;
}

/* y for one vector: rne((z * r) * factor) per element; r = rsqrt(mean + eps). */
__device__ __forceinline__ void at_norm_out(at_elem *yr, int col, const at_vec &z, const at_norm_w &w,
                                            float r)
{
    float f[TP_VEC];
#pragma unroll
    for (int i = 0; i < TP_VEC; i++)
        f[i] = at_vget(z, i) * r * at_norm_wfactor(w, i);
    at_st_vec(yr + col, at_vpack(f));
}

#define AT_NORM_UNROLL 4 /* vectors in flight per thread past the register items */

/* One row slice [first's slice, vend) (in vectors) walked by NT threads,
** thread t taking vectors first, first + NT, ... The first ITEMS of them
** stay in registers (with their weights, loaded before the PDL wait); any
** beyond are handled AT_NORM_UNROLL at a time and re-read in pass 2 (x
** again, or the rounded z this same thread stored into residual), so every
** H is correct whatever ITEMS is. Loads come first, all of them, on an
** index clamped into the row (vector 0 is always valid); only stores are
** guarded, so no load waits behind a branch or a store.
** Usage: s.load_w(); at_pdl_wait(); ss = s.pass1(); <reduce ss>; s.pass2(r). */
template <int NT, int ITEMS>
struct at_norm_slice {
    enum { N = ITEMS > 0 ? ITEMS : 1 }; /* no zero-length arrays */
    const at_elem *xr;
    at_elem *rr, *yr;
    const void *w;
    int first, vend; /* first vector of this thread, end of the slice */
    at_vec z[N];     /* x, or the rounded z, packed: 16 bits per element */
    at_norm_w wv[N];

    __device__ __forceinline__ static int clamp(int v, int end) { return v < end ? v : 0; }

    __device__ __forceinline__ void load_w()
    {
#pragma unroll
        for (int i = 0; i < ITEMS; i++)
            wv[i] = at_norm_load_w(w, clamp(first + i * NT, vend) * TP_VEC);
    }

    /* U vectors from v on: values into z[] (z stored for the add ops), the
    ** sum of squares of those inside the slice into ss. */
    template <int U>
    __device__ __forceinline__ float input(at_vec (&zz)[U], int v, float ss)
    {
        at_vec xv[U];
#if AT_NORM_ADD
        at_vec rv[U];
#endif
#pragma unroll
        for (int i = 0; i < U; i++) {
            int c = clamp(v + i * NT, vend) * TP_VEC;
            xv[i] = at_load_x(xr + c);
#if AT_NORM_ADD
            rv[i] = at_ld_vec(rr + c);
#endif
        }
#pragma unroll
        for (int i = 0; i < U; i++) {
            const bool in = v + i * NT < vend;
#if AT_NORM_ADD
            zz[i] = at_norm_add(xv[i], rv[i]);
            if (in)
                at_st_vec(rr + (v + i * NT) * TP_VEC, zz[i]);
#else
            zz[i] = xv[i];
#endif
            if (in)
                ss = at_norm_sumsq(zz[i], ss);
        }
        return ss;
    }

    /* Sum of squares of this thread's values (the rounded z for add ops). */
    __device__ __forceinline__ float pass1()
    {
        float ss = 0.0f;
        if (ITEMS > 0)
            ss = input<N>(z, first, ss);
        int v = first + ITEMS * NT;
        for (; v + (AT_NORM_UNROLL - 1) * NT < vend; v += AT_NORM_UNROLL * NT) {
            at_vec t[AT_NORM_UNROLL];
            ss = input<AT_NORM_UNROLL>(t, v, ss);
        }
        for (; v < vend; v += NT) {
            at_vec t[1];
            ss = input<1>(t, v, ss);
        }
        return ss;
    }

    /* U vectors from v on, re-read: y = z * r * factor. */
    template <int U>
    __device__ __forceinline__ void output_reread(int v, float r)
    {
        at_vec zv[U];
        at_norm_w ww[U];
#pragma unroll
        for (int i = 0; i < U; i++) {
            int c = clamp(v + i * NT, vend) * TP_VEC;
#if AT_NORM_ADD
            zv[i] = at_ld_vec(rr + c);
#else
            zv[i] = at_load_x(xr + c);
#endif
            ww[i] = at_norm_load_w(w, c);
        }
#pragma unroll
        for (int i = 0; i < U; i++)
            if (v + i * NT < vend)
                at_norm_out(yr, (v + i * NT) * TP_VEC, zv[i], ww[i], r);
    }

    __device__ __forceinline__ void pass2(float r)
    {
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            int v = first + i * NT;
            if (v < vend)
                at_norm_out(yr, v * TP_VEC, z[i], wv[i], r);
        }
        int v = first + ITEMS * NT;
        for (; v + (AT_NORM_UNROLL - 1) * NT < vend; v += AT_NORM_UNROLL * NT)
            output_reread<AT_NORM_UNROLL>(v, r);
        for (; v < vend; v += NT)
            output_reread<1>(v, r);
    }
};

/* 1 / sqrt(mean of squares + eps), from a row's sum of squares. */
__device__ __forceinline__ float at_norm_scale(float ss, int H, float eps)
{
    return rsqrtf(ss / (float)H + eps);
}

#endif
