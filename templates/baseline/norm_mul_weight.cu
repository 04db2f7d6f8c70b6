/*
** baseline/norm_mul_weight.cu — unfused chain, step 6 (xn * w, or for Gemma
** xn * (1 + w.float()) as one kernel): yw[i] = xn[i] * w[i % H] or
** xn[i] * (1 + w[i % H]), fp32. A real eager Gemma adds one or two kernels
** over H here (w.float(), 1 + w); this chain counts the multiply only.
** Launch: grid (ceil(n / 1024)), block (256); n = T * H; 4 elements per thread.
** Parameters: TP_OP 0..3 (2, 3: Gemma, 1 + w); TP_WFP32 1: w fp32, 0: element
** dtype; TP_DTYPE 1 bf16, 2 fp16.
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/baseline/norm_mul_weight.cu
*/
#include "common/dtype.cuh"

#ifndef TP_OP
#define TP_OP 0
#endif
#ifndef TP_WFP32
#define TP_WFP32 0
#endif

extern "C" __global__ void __launch_bounds__(256)
norm_mul_weight(const float *__restrict__ xn, const void *__restrict__ w, float *__restrict__ yw, long long n,
                int H)
{
    const long long base = (long long)blockIdx.x * 1024 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        long long i = base + k * 256;
        if (i < n) {
            long long h = i % H;
#if TP_WFP32
            float f = static_cast<const float *>(w)[h];
#else
            float f = at_to_float(static_cast<const at_elem *>(w)[h]);
#endif
#if TP_OP >= 2
            f = 1.0f + f;
#endif
            yw[i] = xn[i] * f;
        }
    }
}
