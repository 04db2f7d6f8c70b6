/*
** atk_silu_mul.cu — the runtime's built-in SiLU-mul, the last step of a
** fused SwiGLU op's unfused sequence (atk_launch.c): y[m, i] =
** rne(silu(g) * u) from the ROUNDED 16-bit g = g[m*ld + i] and u = u[m*ld +
** i], silu(v) = v / (1 + exp(-v)) in fp32: the expression of the fused
** kernels' epilogue, so the fallback rounds as they do. With the GEMV's
** [M, 2N] output of a concatenated gate_up weight, u = g + N and ld = 2N;
** with two outputs [M, N] each, ld = N. Built by nvcc into a fatbin per
** TP_DTYPE (kernels/CMakeLists.txt), loaded at atk_open.
** Launch: grid (cdiv(N, 256), min(M, 65535)), block (256); rows beyond the
** grid are strided.
** Standalone: nvcc -arch=sm_90 -cubin -I templates kernels/atk_silu_mul.cu
*/
#include "common/dtype.cuh"

/* [SILU_MUL] the same expression as at_silu_mul in templates/common/gemv_fuse.cuh */
__device__ __forceinline__ float atk_silu_mul_f(float g, float u) { return g / (1.0f + __expf(-g)) * u; }

extern "C" __global__ void __launch_bounds__(256)
silu_mul(const at_elem *__restrict__ g, const at_elem *__restrict__ u, at_elem *__restrict__ y, int M, int N, int ld)
{
    const int i = (int)(blockIdx.x * 256u + threadIdx.x);
    if (i >= N)
        return;
    for (int m = (int)blockIdx.y; m < M; m += (int)gridDim.y) {
        const long long s = (long long)m * ld + i;
        y[(long long)m * N + i] = at_from_float(atk_silu_mul_f(at_to_float(g[s]), at_to_float(u[s])));
    }
}
