/*
** baseline/norm_add.cu — unfused chain, step 0 of the add_ ops (their own
** kernel, before the norm chain): residual[i] = rne(x[i] + residual[i]), the
** fp32 sum rounded to the element dtype; the chain then reads residual (= z).
** Launch: grid (ceil(n / 1024)), block (256); n = T * H; 4 elements per thread.
** Parameters: TP_DTYPE 1 bf16, 2 fp16.
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/baseline/norm_add.cu
*/
#include "common/dtype.cuh"

extern "C" __global__ void __launch_bounds__(256)
norm_add(const at_elem *__restrict__ x, at_elem *__restrict__ residual, long long n)
{
    const long long base = (long long)blockIdx.x * 1024 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        long long i = base + k * 256;
        if (i < n)
            residual[i] = at_from_float(at_to_float(x[i]) + at_to_float(residual[i]));
    }
}
