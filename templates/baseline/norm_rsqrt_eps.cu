/*
** baseline/norm_rsqrt_eps.cu — unfused chain, step 4 (torch.rsqrt(ms + eps)):
** rs[t] = rsqrt(ms[t] + eps), fp32, one value per row.
** Launch: grid (ceil(T / 1024)), block (256); n = T; 4 elements per thread.
** Parameters: none (fp32 in and out).
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/baseline/norm_rsqrt_eps.cu
*/
extern "C" __global__ void __launch_bounds__(256)
norm_rsqrt_eps(const float *__restrict__ ms, float *__restrict__ rs, long long n, float eps)
{
    const long long base = (long long)blockIdx.x * 1024 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        long long i = base + k * 256;
        if (i < n)
            rs[i] = rsqrtf(ms[i] + eps);
    }
}
