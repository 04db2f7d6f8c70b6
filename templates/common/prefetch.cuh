/*
** common/prefetch.cuh — asks the L2 for a block's weight rows before the
** block waits on the previous kernel (TP_PREFETCH), so its whole share of
** W is on its way from memory while the previous kernel drains, holding
** neither registers nor shared memory. A prefetch is only a hint: results
** never depend on it, and a kernel's own loads then hit L2 (or join a
** fetch in flight). The weights still come from memory once per launch,
** so cold-weight timing stays honest.
**
**   TP_PREFETCH 0: none; 1: one bulk prefetch per row (cp.async.bulk.
**               prefetch.L2, sm_90+, 16-byte aligned rows: K % 8 == 0,
**               else nothing is prefetched); 2: one prefetch.global.L2 per
**               128-byte line (sm_80+, any K)
*/
#ifndef AT_COMMON_PREFETCH_CUH
#define AT_COMMON_PREFETCH_CUH

#include "common/dtype.cuh"

#ifndef TP_PREFETCH
#define TP_PREFETCH 0
#endif
#if TP_PREFETCH < 0 || TP_PREFETCH > 2
#error "TP_PREFETCH must be 0, 1 or 2"
#endif
#if TP_PREFETCH == 1 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "TP_PREFETCH=1 (bulk prefetch) needs sm_90"
#endif

/* Rows first, first + stride, ... (fewer than `count` of them, below N) of
** W[N][K], whole, shared among `nthreads` threads of which this is `tid`.
** Every thread may call it; those with nothing to do return at once. */
__device__ __forceinline__ void at_prefetch_rows(const at_elem *W, long long first, int count, int stride,
                                                 int K, int N, int tid, int nthreads)
{
#if TP_PREFETCH == 1
    /* one thread per row; a row is 2K bytes, 16-byte aligned when K % 8 == 0 */
    if ((K & 7) != 0)
        return;
    for (int i = tid; i < count; i += nthreads) {
        const long long row = first + (long long)i * stride;
        if (row >= N)
            break;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(W + row * K),
                     "r"((unsigned)K * (unsigned)sizeof(at_elem))
                     : "memory");
    }
#elif TP_PREFETCH == 2
    /* one thread per 128-byte line; a row's last line is named by its last
    ** element, so an unaligned row loses nothing */
    const int bytes = K * (int)sizeof(at_elem), lines = (bytes + 127) / 128 + 1;
    for (int q = tid; q < count * lines; q += nthreads) {
        const int i = q / lines, j = q % lines;
        const long long row = first + (long long)i * stride;
        if (row >= N)
            break;
        const char *p = (const char *)(W + row * K) + (j * 128 < bytes ? j * 128 : bytes - 1);
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p) : "memory");
    }
#else
    (void)W, (void)first, (void)count, (void)stride, (void)K, (void)N, (void)tid, (void)nthreads;
#endif
}

#endif
