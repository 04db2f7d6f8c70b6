/*
** baseline/silu_mul.cu — SwiGLU's activation as its own kernel, after one
** GEMV over the concatenated [2N,K] gate|up weight: act[m,j] = rne(silu(g) *
** u), g = gu[m, j], u = gu[m, N + j] (gu: M rows of 2N, the GEMV's rounded
** output). The unfused baselines of the fused SwiGLU ops run it; it uses
** the fused epilogue's own at_silu_mul, so both round alike.
** Launch: grid (ceil(n / 1024)), block (256); n = M * N; 4 elements per thread.
** Parameters: TP_DTYPE 1 bf16, 2 fp16.
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/baseline/silu_mul.cu
*/
#include "common/dtype.cuh"
#include "common/gemv_fuse.cuh"

extern "C" __global__ void __launch_bounds__(256)
silu_mul(const at_elem *__restrict__ gu, at_elem *__restrict__ act, long long n, int N)
{
    const long long base = (long long)blockIdx.x * 1024 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        long long i = base + k * 256;
        if (i < n) {
            long long m = i / N, j = i - m * N;
            const at_elem *row = gu + m * 2 * N;
            act[i] = at_from_float(at_silu_mul(at_to_float(row[j]), at_to_float(row[N + j])));
        }
    }
}
