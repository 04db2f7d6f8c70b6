/*
** norm/norm_warp_rows.cu — the RMSNorm family (TP_OP) with TP_THREADS_PER_ROW
** lanes (a sub-warp or a warp) per row and TP_ROWS_PER_BLOCK rows per block:
** the row's sum of squares meets through shuffles only, no shared memory and
** no block barrier; suits many short rows. Grid (ceil(T / TP_ROWS_PER_BLOCK)),
** block (TP_THREADS_PER_ROW * TP_ROWS_PER_BLOCK), a whole number of warps.
**
** Parameters (legal values):
**   TP_OP                0 rmsnorm, 1 add_rmsnorm, 2 gemma_rmsnorm, 3 add_gemma_rmsnorm
**   TP_THREADS_PER_ROW   8, 16, 32
**   TP_ROWS_PER_BLOCK    1..32; TP_THREADS_PER_ROW * TP_ROWS_PER_BLOCK a multiple of 32, <= 1024
**   TP_VEC               1, 2, 4, 8 elements per load (8 = 16 bytes); must divide H
**   TP_REGS              1: keep up to TP_ITEMS vectors per lane in registers; 0: re-read x / z
**   TP_ITEMS             1..16 vectors per lane held (TP_REGS=1); lanes re-read past that
**   TP_PDL               1: programmatic dependent launch (sm_90+): w loads before the wait
**   TP_WFP32             1: w is fp32 (Gemma); 0: w is the element dtype
**   TP_DTYPE             1 bf16, 2 fp16
**
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/norm/norm_warp_rows.cu
*/
#include "common/norm.cuh"

#ifndef TP_THREADS_PER_ROW
#define TP_THREADS_PER_ROW 32
#endif
#ifndef TP_ROWS_PER_BLOCK
#define TP_ROWS_PER_BLOCK 4
#endif
#ifndef TP_REGS
#define TP_REGS 1
#endif
#ifndef TP_ITEMS
#define TP_ITEMS 8
#endif
#if TP_THREADS_PER_ROW != 8 && TP_THREADS_PER_ROW != 16 && TP_THREADS_PER_ROW != 32
#error "TP_THREADS_PER_ROW must be 8, 16 or 32"
#endif
#if (TP_THREADS_PER_ROW * TP_ROWS_PER_BLOCK) % 32 != 0 || TP_THREADS_PER_ROW * TP_ROWS_PER_BLOCK > 1024
#error "a block must be a whole number of warps, at most 1024 threads"
#endif
#define NT TP_THREADS_PER_ROW

extern "C" __global__ void __launch_bounds__(TP_THREADS_PER_ROW * TP_ROWS_PER_BLOCK, 1)
norm_warp_rows(const at_elem *__restrict__ x, at_elem *__restrict__ residual, const void *__restrict__ w,
               at_elem *__restrict__ y, int T, int H, float eps)
{
    const int t = (int)(threadIdx.x % NT);
    const long long row = (long long)blockIdx.x * TP_ROWS_PER_BLOCK + threadIdx.x / NT;
    /* a group past T walks an empty slice but still joins the shuffles */
    const long long off = (row < T ? row : 0) * (long long)H;
    at_norm_slice<NT, TP_REGS ? TP_ITEMS : 0> s;
    s.xr = x + off;
    s.rr = residual + off; /* only the add ops touch it */
    s.yr = y + off;
    s.w = w;
    s.first = t;
    s.vend = row < T ? H / TP_VEC : 0;

    s.load_w();
    at_pdl_wait();
    at_pdl_trigger();
    float ss = at_group_sum<NT>(s.pass1());
    s.pass2(at_norm_scale(ss, H, eps));
}
