/*
** baseline/norm_mul_rows.cu — unfused chain, step 5 (xf * rs, broadcast over
** the row): xn[i] = xf[i] * rs[i / H], fp32 (not rounded to the element dtype).
** Launch: grid (ceil(n / 1024)), block (256); n = T * H; 4 elements per thread.
** Parameters: none (fp32 in and out).
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/baseline/norm_mul_rows.cu
*/
extern "C" __global__ void __launch_bounds__(256)
norm_mul_rows(const float *__restrict__ xf, const float *__restrict__ rs, float *__restrict__ xn, long long n,
              int H)
{
    const long long base = (long long)blockIdx.x * 1024 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        long long i = base + k * 256;
        if (i < n)
            xn[i] = xf[i] * rs[i / H];
    }
}
