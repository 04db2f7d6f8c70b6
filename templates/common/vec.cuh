/*
** common/vec.cuh — a vector of TP_VEC 16-bit elements (1, 2, 4 or 8: up to a
** 16-byte load), loaded with one of three cache policies, and its dot
** product with another vector in fp32. Addresses must be aligned to the
** vector's size: the specs only allow a TP_VEC that divides K.
**
** Weight cache hint (TP_CACHE): 0 = ld.global.nc (read-only path, default
** caching), 1 = ld.global.cs (streaming: evict-first in L1 and L2),
** 2 = ld.global.nc.L1::no_allocate with an L2 evict_first cache policy.
** TP_L2PF (16-byte loads only): 0 none, 1 = the .L2::128B prefetch size,
** so a miss fetches the whole 128-byte line from memory (for templates that
** read a row in pieces of 64 bytes; .L2::256B measured slower on the H200).
*/
#ifndef AT_COMMON_VEC_CUH
#define AT_COMMON_VEC_CUH

#include "common/dtype.cuh"

#ifndef TP_VEC
#define TP_VEC 8
#endif
#ifndef TP_CACHE
#define TP_CACHE 0
#endif

#ifndef TP_L2PF
#define TP_L2PF 0
#endif

#if TP_VEC != 1 && TP_VEC != 2 && TP_VEC != 4 && TP_VEC != 8
#error "TP_VEC must be 1, 2, 4 or 8"
#endif
#if TP_L2PF == 0
#define AT_L2PF ""
#elif TP_L2PF == 1 && TP_VEC == 8
#define AT_L2PF ".L2::128B"
#else
#error "TP_L2PF must be 0, or 1 with TP_VEC=8"
#endif
#define AT_WORDS (TP_VEC >= 2 ? TP_VEC / 2 : 1) /* 32-bit words per vector */

struct at_vec {
    unsigned w[AT_WORDS];
};

__device__ __forceinline__ unsigned long long at_evict_first_policy(void)
{
    unsigned long long pol = 0;
#if TP_CACHE == 2
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
    return pol;
}

/* Weight load: the policy TP_CACHE names. `pol` from at_evict_first_policy. */
__device__ __forceinline__ at_vec at_load_w(const at_elem *p, unsigned long long pol)
{
    at_vec v;
    (void)pol;
#if TP_VEC == 8
#if TP_CACHE == 0
    asm volatile("ld.global.nc" AT_L2PF ".v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3]) : "l"(p));
#elif TP_CACHE == 1
    asm volatile("ld.global.cs" AT_L2PF ".v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3]) : "l"(p));
#else
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint" AT_L2PF ".v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3]) : "l"(p), "l"(pol));
#endif
#elif TP_VEC == 4
#if TP_CACHE == 0
    asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(v.w[0]), "=r"(v.w[1]) : "l"(p));
#elif TP_CACHE == 1
    asm volatile("ld.global.cs.v2.u32 {%0,%1}, [%2];" : "=r"(v.w[0]), "=r"(v.w[1]) : "l"(p));
#else
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v2.u32 {%0,%1}, [%2], %3;"
                 : "=r"(v.w[0]), "=r"(v.w[1]) : "l"(p), "l"(pol));
#endif
#elif TP_VEC == 2
#if TP_CACHE == 0
    asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v.w[0]) : "l"(p));
#elif TP_CACHE == 1
    asm volatile("ld.global.cs.u32 %0, [%1];" : "=r"(v.w[0]) : "l"(p));
#else
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.u32 %0, [%1], %2;"
                 : "=r"(v.w[0]) : "l"(p), "l"(pol));
#endif
#else
    unsigned short h;
#if TP_CACHE == 1
    asm volatile("ld.global.cs.u16 %0, [%1];" : "=h"(h) : "l"(p));
#else
    asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(h) : "l"(p));
#endif
    v.w[0] = h;
#endif
    return v;
}

/* Coherent load / store of one vector, for data the kernel also writes (a
** norm's residual and y, the fused residual add's res): never the
** read-only path. p is aligned to the vector's size. */
__device__ __forceinline__ at_vec at_ld_vec(const at_elem *p)
{
    at_vec v;
#if TP_VEC == 8
    uint4 t = *reinterpret_cast<const uint4 *>(p);
    v.w[0] = t.x; v.w[1] = t.y; v.w[2] = t.z; v.w[3] = t.w;
#elif TP_VEC == 4
    uint2 t = *reinterpret_cast<const uint2 *>(p);
    v.w[0] = t.x; v.w[1] = t.y;
#elif TP_VEC == 2
    v.w[0] = *reinterpret_cast<const unsigned *>(p);
#else
    v.w[0] = *p;
#endif
    return v;
}

__device__ __forceinline__ void at_st_vec(at_elem *p, const at_vec &v)
{
#if TP_VEC == 8
    uint4 t;
    t.x = v.w[0]; t.y = v.w[1]; t.z = v.w[2]; t.w = v.w[3];
    *reinterpret_cast<uint4 *>(p) = t;
#elif TP_VEC == 4
    uint2 t;
    t.x = v.w[0]; t.y = v.w[1];
    *reinterpret_cast<uint2 *>(p) = t;
#elif TP_VEC == 2
    *reinterpret_cast<unsigned *>(p) = v.w[0];
#else
    *p = (at_elem)v.w[0];
#endif
}

/* Activation load: always the default read-only path (x is reused). */
__device__ __forceinline__ at_vec at_load_x(const at_elem *p)
{
    at_vec v;
#if TP_VEC == 8
    uint4 t = __ldg(reinterpret_cast<const uint4 *>(p));
    v.w[0] = t.x; v.w[1] = t.y; v.w[2] = t.z; v.w[3] = t.w;
#elif TP_VEC == 4
    uint2 t = __ldg(reinterpret_cast<const uint2 *>(p));
    v.w[0] = t.x; v.w[1] = t.y;
#elif TP_VEC == 2
    v.w[0] = __ldg(reinterpret_cast<const unsigned *>(p));
#else
    v.w[0] = __ldg(reinterpret_cast<const unsigned short *>(p));
#endif
    return v;
}

/* acc + dot(a, b) in fp32. */
__device__ __forceinline__ float at_dot(const at_vec &a, const at_vec &b, float acc)
{
#if TP_VEC == 1
    return fmaf(at_lo(a.w[0]), at_lo(b.w[0]), acc);
#else
#pragma unroll
    for (int i = 0; i < AT_WORDS; i++) {
        acc = fmaf(at_lo(a.w[i]), at_lo(b.w[i]), acc);
        acc = fmaf(at_hi(a.w[i]), at_hi(b.w[i]), acc);
    }
    return acc;
#endif
}

#endif
