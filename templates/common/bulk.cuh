/*
** common/bulk.cuh — bulk copies global -> shared memory done by the copy
** engine (Hopper's TMA, sm_90+, PTX 8.0), in their 1-D form: no tensor map,
** just a contiguous run of bytes (a multiple of 16, both ends 16-byte
** aligned). A copy completes on an mbarrier in shared memory: one thread
** arms the barrier with the bytes the phase expects (at_mbar_expect), the
** copies count them down, and every thread that needs the data waits for
** the phase to flip (at_mbar_wait). The bytes in flight hold no registers,
** and a single thread can request a block's whole tile at once.
*/
#ifndef AT_COMMON_BULK_CUH
#define AT_COMMON_BULK_CUH

__device__ __forceinline__ unsigned at_smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

/* One thread, before anyone uses the barrier: `count` arrivals per phase.
** The fence makes the initialised barrier visible to the copy engine. */
__device__ __forceinline__ void at_mbar_init(unsigned long long *bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(at_smem_addr(bar)), "r"(count) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* Arrives once on the barrier and adds `bytes` to what its current phase
** waits for (the copies that follow count them down). */
__device__ __forceinline__ void at_mbar_expect(unsigned long long *bar, unsigned bytes)
{
    unsigned long long state;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;"
                 : "=l"(state)
                 : "r"(at_smem_addr(bar)), "r"(bytes)
                 : "memory");
    (void)state;
}

/* Waits until the phase of parity `parity` (0 for the barrier's first
** phase, 1 for its second, ...) has completed: its data is in shared memory. */
__device__ __forceinline__ void at_mbar_wait(unsigned long long *bar, unsigned parity)
{
    const unsigned a = at_smem_addr(bar);
    unsigned done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(a), "r"(parity)
                     : "memory");
    } while (!done);
}

/* Orders this thread's earlier shared-memory accesses (and those a barrier
** made visible to it) before later copy-engine writes, so a refill cannot
** overwrite data still being read. */
__device__ __forceinline__ void at_fence_proxy_async(void) { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

/* Copies `bytes` from global `src` to this block's shared `dst`, counted
** on `bar`. With an L2 policy (createpolicy) the lines are marked by it. */
__device__ __forceinline__ void at_bulk_load(void *dst, const void *src, unsigned bytes, unsigned long long *bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(at_smem_addr(dst)), "l"(src), "r"(bytes), "r"(at_smem_addr(bar))
                 : "memory");
}

__device__ __forceinline__ void at_bulk_load_hint(void *dst, const void *src, unsigned bytes,
                                                  unsigned long long *bar, unsigned long long pol)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
                 "[%0], [%1], %2, [%3], %4;"
                 ::"r"(at_smem_addr(dst)), "l"(src), "r"(bytes), "r"(at_smem_addr(bar)), "l"(pol)
                 : "memory");
}

#endif
