/*
** baseline/norm_square.cu — unfused chain, step 2 (xf.pow(2)):
** sq[i] = xf[i] * xf[i], fp32.
** Launch: grid (ceil(n / 1024)), block (256); n = T * H; 4 elements per thread.
** Parameters: none (fp32 in and out).
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/baseline/norm_square.cu
*/
extern "C" __global__ void __launch_bounds__(256)
norm_square(const float *__restrict__ xf, float *__restrict__ sq, long long n)
{
    const long long base = (long long)blockIdx.x * 1024 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        long long i = base + k * 256;
        if (i < n)
            sq[i] = xf[i] * xf[i];
    }
}
