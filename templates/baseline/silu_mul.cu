/*
** baseline/silu_mul.cu — SwiGLU's activation as its own kernel, the last
** step of the fused SwiGLU ops' unfused sequence: y[m, i] = rne(silu(g) *
** u) from the ROUNDED 16-bit g = g[m*ld + i] and u = u[m*ld + i] (the
** GEMV's stored output), with the fused epilogue's own at_silu_mul, so both
** round alike. After one GEMV over a concatenated [2N,K] gate|up weight,
** u = g + N and ld = 2N; with two outputs [M, N] each, ld = N. Two users:
** the runtime's fallback (atk_launch.c; built by nvcc into a fatbin per
** TP_DTYPE, kernels/CMakeLists.txt) and the tuner's naive baseline
** (tuner/op_fused.c).
** Launch: grid (ceil(N / 256), min(M, 65535)), block (256); rows beyond
** the grid are strided. Parameters: TP_DTYPE 1 bf16, 2 fp16; TP_PDL
** defaults to 1 on sm_90+ (below: 0): it waits for the GEMV before it with
** griddepcontrol (a no-op when launched without programmatic dependent
** launch) and lets the next kernel launch early; the runtime launches it
** with PDL after a GEMV that was launched with PDL.
** Standalone: nvcc -arch=sm_90 -cubin -I templates templates/baseline/silu_mul.cu
*/
#if !defined(TP_PDL) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TP_PDL 1
#endif
#include "common/gemv_fuse.cuh"
#include "common/pdl.cuh"

extern "C" __global__ void __launch_bounds__(256)
silu_mul(const at_elem *__restrict__ g, const at_elem *__restrict__ u, at_elem *__restrict__ y, int M, int N, int ld)
{
    at_pdl_wait(); /* g and u are the GEMV's output */
    at_pdl_trigger();
    const int i = (int)(blockIdx.x * 256u + threadIdx.x);
    if (i >= N)
        return;
    for (int m = (int)blockIdx.y; m < M; m += (int)gridDim.y) {
        const long long s = (long long)m * ld + i;
        y[(long long)m * N + i] = at_from_float(at_silu_mul(at_to_float(g[s]), at_to_float(u[s])));
    }
}
