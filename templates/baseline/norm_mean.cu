/*
** baseline/norm_mean.cu — unfused chain, step 3 (sq.mean(-1, keepdim=True)):
** ms[t] = sum_h sq[t, h] / H, fp32, one row per block (a tree in shared memory).
** Launch: grid (T), block (256).
** Parameters: none (fp32 in and out).
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/baseline/norm_mean.cu
*/
extern "C" __global__ void __launch_bounds__(256)
norm_mean(const float *__restrict__ sq, float *__restrict__ ms, int T, int H)
{
    __shared__ float part[256];
    const float *row = sq + (long long)blockIdx.x * H;
    float s = 0.0f;
    (void)T;
    for (int h = (int)threadIdx.x; h < H; h += 256)
        s += row[h];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int o = 128; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o)
            part[threadIdx.x] += part[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        ms[blockIdx.x] = part[0] / (float)H;
}
