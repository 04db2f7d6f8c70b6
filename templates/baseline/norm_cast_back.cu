/*
** baseline/norm_cast_back.cu — unfused chain, step 7 (.type_as(x)):
** y[i] = rne(yw[i]) in the element dtype; the chain's only rounding of y.
** Launch: grid (ceil(n / 1024)), block (256); n = T * H; 4 elements per thread.
** Parameters: TP_DTYPE 1 bf16, 2 fp16.
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/baseline/norm_cast_back.cu
*/
#include "common/dtype.cuh"

extern "C" __global__ void __launch_bounds__(256)
norm_cast_back(const float *__restrict__ yw, at_elem *__restrict__ y, long long n)
{
    const long long base = (long long)blockIdx.x * 1024 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        long long i = base + k * 256;
        if (i < n)
            y[i] = at_from_float(yw[i]);
    }
}
