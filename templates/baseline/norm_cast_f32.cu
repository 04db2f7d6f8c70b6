/*
** baseline/norm_cast_f32.cu — unfused chain, step 1 (x.float()):
** xf[i] = float(x[i]); x is the input (for the add_ ops, residual after step 0).
** Launch: grid (ceil(n / 1024)), block (256); n = T * H; 4 elements per thread.
** Parameters: TP_DTYPE 1 bf16, 2 fp16.
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/baseline/norm_cast_f32.cu
*/
#include "common/dtype.cuh"

extern "C" __global__ void __launch_bounds__(256)
norm_cast_f32(const at_elem *__restrict__ x, float *__restrict__ xf, long long n)
{
    const long long base = (long long)blockIdx.x * 1024 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        long long i = base + k * 256;
        if (i < n)
            xf[i] = at_to_float(x[i]);
    }
}
