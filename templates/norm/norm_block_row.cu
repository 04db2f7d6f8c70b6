/*
** norm/norm_block_row.cu — the RMSNorm family (TP_OP), one row per block of
** TP_THREADS threads: each warp sums its part of the row, the warps' sums
** meet in shared memory (a fixed order, so every thread gets the same total).
** Suits long rows and few tokens. Grid (T), block (TP_THREADS).
**
** Parameters (legal values):
**   TP_OP       0 rmsnorm, 1 add_rmsnorm, 2 gemma_rmsnorm, 3 add_gemma_rmsnorm
**   TP_THREADS  64, 128, 256, 512, 1024
**   TP_VEC      1, 2, 4, 8 elements per load (8 = 16 bytes); must divide H
**   TP_REGS     1: keep up to TP_ITEMS vectors per thread in registers; 0: re-read x / z
**   TP_ITEMS    1..16 vectors per thread held (TP_REGS=1); threads re-read past that
**   TP_PDL      1: programmatic dependent launch (sm_90+): w loads before the wait
**   TP_WFP32    1: w is fp32 (Gemma); 0: w is the element dtype
**   TP_DTYPE    1 bf16, 2 fp16
**
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/norm/norm_block_row.cu
*/
#include "common/norm.cuh"

#ifndef TP_THREADS
#define TP_THREADS 256
#endif
#ifndef TP_REGS
#define TP_REGS 1
#endif
#ifndef TP_ITEMS
#define TP_ITEMS 4
#endif
#if TP_THREADS % 32 != 0 || TP_THREADS < 32 || TP_THREADS > 1024
#error "TP_THREADS must be a multiple of 32 in 32..1024"
#endif

extern "C" __global__ void __launch_bounds__(TP_THREADS, 1)
norm_block_row(const at_elem *__restrict__ x, at_elem *__restrict__ residual, const void *__restrict__ w,
               at_elem *__restrict__ y, int T, int H, float eps)
{
    __shared__ float part[TP_THREADS / 32];
    const long long off = (long long)blockIdx.x * H;
    at_norm_slice<TP_THREADS, TP_REGS ? TP_ITEMS : 0> s;
    (void)T;
    s.xr = x + off;
    s.rr = residual + off; /* only the add ops touch it */
    s.yr = y + off;
    s.w = w;
    s.first = (int)threadIdx.x;
    s.vend = H / TP_VEC;

    s.load_w();
    at_pdl_wait();
    at_pdl_trigger();
    float ss = at_block_sum<TP_THREADS / 32>(s.pass1(), part);
    s.pass2(at_norm_scale(ss, H, eps));
}
