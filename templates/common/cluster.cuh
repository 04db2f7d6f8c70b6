/*
** common/cluster.cuh — thread block clusters (Hopper, sm_90+): the few
** PTX pieces a template needs to let the blocks of one cluster meet in the
** shared memory of its first block (distributed shared memory). A kernel
** that uses them declares __cluster_dims__, so a plain launch forms the
** clusters; the spec prunes such candidates below sm_90.
*/
#ifndef AT_COMMON_CLUSTER_CUH
#define AT_COMMON_CLUSTER_CUH

/* This block's rank within its cluster, 0 .. cluster size - 1. */
__device__ __forceinline__ unsigned at_cluster_rank(void)
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

/* Stores v at p (a __shared__ address of this block's layout) in the
** shared memory of block `rank` of the cluster. */
__device__ __forceinline__ void at_cluster_store(float *p, unsigned rank, float v)
{
    unsigned local = (unsigned)__cvta_generic_to_shared(p), remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
}

/* The float at p (a __shared__ address of this block's layout) in the
** shared memory of block `rank` of the cluster. */
__device__ __forceinline__ float at_cluster_load(const float *p, unsigned rank)
{
    unsigned local = (unsigned)__cvta_generic_to_shared(p), remote;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
    return v;
}

/* The two halves of a cluster barrier, for work between them: every thread
** of every block arrives (release: its earlier stores are published), then
** waits (acquire) until all have arrived. */
__device__ __forceinline__ void at_cluster_arrive(void) { asm volatile("barrier.cluster.arrive;" ::: "memory"); }
__device__ __forceinline__ void at_cluster_wait(void) { asm volatile("barrier.cluster.wait;" ::: "memory"); }

/* Every thread of every block of the cluster: stores made before it (to
** any block's shared memory) are visible to every block after it. */
__device__ __forceinline__ void at_cluster_sync(void)
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

#endif
