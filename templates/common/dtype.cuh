/*
** common/dtype.cuh — 16-bit element types and the loads the templates share.
** Self-contained (no CUDA headers), so NVRTC needs no include path and every
** template compiles alone under nvcc. TP_DTYPE: 1 = bf16 (default), 2 = fp16.
** Elements travel as raw uint16 bits; all arithmetic is fp32.
** TP_ADD (the GEMV templates' epilogue, AT_STORE_OUT): 0 (default) stores
** y = rne(acc); 1 stores y = rne(y + rne(acc)), the residual add of the
** gemv_add op, rounded exactly as the unfused GEMV followed by an add kernel.
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

#ifndef TP_ADD
#define TP_ADD 0
#endif

/* Stores one output (dst, an lvalue element of y) from its fp32 sum acc.
** With TP_ADD=1, dst is the residual: it is read where it is written, so
** each output must be stored by exactly one thread (every GEMV template
** stores each output once). A macro, so that with TP_ADD=0 the code is the
** plain store, byte for byte the PTX it was before TP_ADD existed. */
#if TP_ADD
#define AT_STORE_OUT(dst, acc) ((dst) = at_from_float(at_to_float(dst) + at_to_float(at_from_float(acc))))
#else
#define AT_STORE_OUT(dst, acc) ((dst) = at_from_float(acc))
#endif

/* Sum over a warp; every lane gets the total. */
__device__ __forceinline__ float at_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

#endif
