/*
** baseline/norm_naive.cu — the naive fused kernel of the RMSNorm family
** (TP_OP), untuned: one 256-thread block per row, one element per thread per
** step, a shared-memory tree for the sum of squares, a second pass that
** re-reads x (or the z it stored). Same signature, rounding and buffers as
** the tuned kernels. Launch: grid (T), block (256).
** Parameters: TP_OP 0 rmsnorm, 1 add_rmsnorm, 2 gemma_rmsnorm, 3 add_gemma_rmsnorm;
** TP_WFP32 1: w fp32 (Gemma), 0: element dtype; TP_DTYPE 1 bf16, 2 fp16.
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/baseline/norm_naive.cu
*/
#include "common/dtype.cuh"

#ifndef TP_OP
#define TP_OP 0
#endif
#ifndef TP_WFP32
#define TP_WFP32 0
#endif

extern "C" __global__ void __launch_bounds__(256)
norm_naive(const at_elem *__restrict__ x, at_elem *__restrict__ residual, const void *__restrict__ w,
           at_elem *__restrict__ y, int T, int H, float eps)
{
    __shared__ float part[256];
    const long long off = (long long)blockIdx.x * H;
    float ss = 0.0f;
    (void)T;
    for (int h = (int)threadIdx.x; h < H; h += 256) {
#if TP_OP == 1 || TP_OP == 3
        at_elem z = at_from_float(at_to_float(x[off + h]) + at_to_float(residual[off + h]));
        residual[off + h] = z;
        float v = at_to_float(z);
#else
        float v = at_to_float(x[off + h]);
#endif
        ss += v * v;
    }
    part[threadIdx.x] = ss;
    __syncthreads();
    for (int o = 128; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o)
            part[threadIdx.x] += part[threadIdx.x + o];
        __syncthreads();
    }
    const float r = rsqrtf(part[0] / (float)H + eps);
    for (int h = (int)threadIdx.x; h < H; h += 256) {
#if TP_OP == 1 || TP_OP == 3
        float v = at_to_float(residual[off + h]); /* the z this thread stored */
#else
        float v = at_to_float(x[off + h]);
#endif
#if TP_WFP32
        float f = static_cast<const float *>(w)[h];
#else
        float f = at_to_float(static_cast<const at_elem *>(w)[h]);
#endif
#if TP_OP >= 2
        f = 1.0f + f;
#endif
        y[off + h] = at_from_float(v * r * f);
    }
}
