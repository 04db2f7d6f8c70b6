/*
** common/dtype.cuh — 16-bit element types and the loads the templates share.
** Self-contained (no CUDA headers), so NVRTC needs no include path and every
** template compiles alone under nvcc. TP_DTYPE: 1 = bf16 (default), 2 = fp16.
** Elements travel as raw uint16 bits; all arithmetic is fp32.
*/
#ifndef AT_COMMON_DTYPE_CUH
#define AT_COMMON_DTYPE_CUH

#ifndef TP_DTYPE
#define TP_DTYPE 1
#endif

typedef unsigned short at_elem; /* one bf16 or fp16 value, as bits */

/* Low and high halves of a 32-bit word holding two elements, as floats. */
__device__ __forceinline__ float at_lo(unsigned u)
{
#if TP_DTYPE == 1
    return __uint_as_float(u << 16);
#else
    float f;
    asm("{ .reg .f16 a, b; mov.b32 {a, b}, %1; cvt.f32.f16 %0, a; }" : "=f"(f) : "r"(u));
    return f;
#endif
}

__device__ __forceinline__ float at_hi(unsigned u)
{
#if TP_DTYPE == 1
    return __uint_as_float(u & 0xffff0000u);
#else
    float f;
    asm("{ .reg .f16 a, b; mov.b32 {a, b}, %1; cvt.f32.f16 %0, b; }" : "=f"(f) : "r"(u));
    return f;
#endif
}

__device__ __forceinline__ float at_to_float(at_elem h) { return at_lo((unsigned)h); }

__device__ __forceinline__ at_elem at_from_float(float f)
{
    unsigned short h;
#if TP_DTYPE == 1
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
#endif
    return h;
}

/* Sum over a warp; every lane gets the total. */
__device__ __forceinline__ float at_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

#endif
