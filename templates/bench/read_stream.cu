/*
** bench/read_stream.cu — the device's read-bandwidth ceiling and an empty
** kernel. read_stream reads n 16-byte words once each (grid-stride, several
** loads in flight per thread) and writes one word only if the XOR of all of
** them is a value the caller never plants, so no load can be optimised away.
** Standalone: nvcc -arch=sm_90 -cubin templates/bench/read_stream.cu
*/
#ifndef TP_UNROLL
#define TP_UNROLL 4
#endif

extern "C" __global__ void read_stream(const uint4 *__restrict__ src, long long n,
                                       unsigned *__restrict__ sink)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned acc = 0;
    for (; i + (TP_UNROLL - 1) * stride < n; i += TP_UNROLL * stride) {
        uint4 v[TP_UNROLL];
#pragma unroll
        for (int u = 0; u < TP_UNROLL; u++)
            asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                         : "l"(src + i + u * stride));
#pragma unroll
        for (int u = 0; u < TP_UNROLL; u++)
            acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n; i += stride) {
        uint4 v = src[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) /* never planted in the buffer's fill pattern */
        sink[0] = acc;
}

extern "C" __global__ void empty_kernel(void) {}
