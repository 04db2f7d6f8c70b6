/*
** norm/norm_split_row.cu — the RMSNorm family (TP_OP) with one row split over
** a thread-block cluster of TP_SPLIT blocks (sm_90+): each block sums its
** slice, the blocks read each other's sums through distributed shared memory
** (a fixed order: every block gets the same total). Few long rows then use
** TP_SPLIT times as many SMs. Grid (TP_SPLIT, T), block (TP_THREADS); the
** cluster shape is compiled in (__cluster_dims__), a plain launch suffices.
**
** Parameters (legal values):
**   TP_OP       0 rmsnorm, 1 add_rmsnorm, 2 gemma_rmsnorm, 3 add_gemma_rmsnorm
**   TP_SPLIT    2, 4, 8 blocks per row (the cluster size; 8 is the portable maximum)
**   TP_THREADS  32, 64, 128, 256, 512, 1024 per block
**   TP_VEC      1, 2, 4, 8 elements per load (8 = 16 bytes); must divide H
**   TP_REGS     1: keep up to TP_ITEMS vectors per thread in registers; 0: re-read x / z
**   TP_ITEMS    1..16 vectors per thread held (TP_REGS=1); threads re-read past that
**   TP_PDL      1: programmatic dependent launch: w loads before the wait
**   TP_WFP32    1: w is fp32 (Gemma); 0: w is the element dtype
**   TP_DTYPE    1 bf16, 2 fp16
**
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/norm/norm_split_row.cu
*/
#include "common/cluster.cuh"
#include "common/norm.cuh"

#ifndef TP_SPLIT
#define TP_SPLIT 4
#endif
#ifndef TP_THREADS
#define TP_THREADS 128
#endif
#ifndef TP_REGS
#define TP_REGS 1
#endif
#ifndef TP_ITEMS
#define TP_ITEMS 4
#endif
#if TP_SPLIT != 2 && TP_SPLIT != 4 && TP_SPLIT != 8
#error "TP_SPLIT must be 2, 4 or 8"
#endif
#if TP_THREADS % 32 != 0 || TP_THREADS < 32 || TP_THREADS > 1024
#error "TP_THREADS must be a multiple of 32 in 32..1024"
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "norm_split_row needs thread-block clusters (sm_90+)"
#endif

extern "C" __global__ void __cluster_dims__(TP_SPLIT, 1, 1) __launch_bounds__(TP_THREADS, 1)
norm_split_row(const at_elem *__restrict__ x, at_elem *__restrict__ residual, const void *__restrict__ w,
               at_elem *__restrict__ y, int T, int H, float eps)
{
    __shared__ float part[TP_THREADS / 32];
    __shared__ float slice_sum; /* read by every block of the cluster */
    const long long off = (long long)blockIdx.y * H;
    const int nvec = H / TP_VEC, per = (nvec + TP_SPLIT - 1) / TP_SPLIT;
    const unsigned rank = at_cluster_rank(); /* == blockIdx.x: grid.x is TP_SPLIT */
    const int vbeg = (int)rank * per;
    at_norm_slice<TP_THREADS, TP_REGS ? TP_ITEMS : 0> s;
    (void)T;
    s.xr = x + off;
    s.rr = residual + off; /* only the add ops touch it */
    s.yr = y + off;
    s.w = w;
    s.first = vbeg + (int)threadIdx.x;
    s.vend = vbeg + per < nvec ? vbeg + per : nvec;

    s.load_w();
    at_pdl_wait();
    at_pdl_trigger();
    float ss = at_block_sum<TP_THREADS / 32>(s.pass1(), part);
    if (threadIdx.x == 0)
        slice_sum = ss;
    at_cluster_arrive();
    at_cluster_wait();
    /* lanes 0..TP_SPLIT-1 of each warp fetch one block's sum; the warp adds them */
    const unsigned lane = threadIdx.x & 31u;
    float total = lane < TP_SPLIT ? at_cluster_load(&slice_sum, lane) : 0.0f;
    total = at_warp_sum(total);
    at_cluster_arrive(); /* this block has read the others' slice_sum ... */
    s.pass2(at_norm_scale(total, H, eps));
    at_cluster_wait(); /* ... and none leaves while another may still read its own */
}
