/*
** common/pdl.cuh — programmatic dependent launch (Hopper, sm_90+). With
** TP_PDL=1 the tuner launches the kernel with programmatic stream
** serialization, so it may start while the previous kernel in the stream is
** still draining. Everything before at_pdl_wait() must touch only data no
** earlier kernel writes (the weights); activations are read and outputs
** written only after it. With TP_PDL=0 both calls compile to nothing; on
** sm_90+ the tuner builds every candidate with TP_PDL=1 and launches the
** TP_PDL=0 ones without the attribute, where both instructions are no-ops
** (tuner/search.c [PDL_LAUNCH]).
*/
#ifndef AT_COMMON_PDL_CUH
#define AT_COMMON_PDL_CUH

#ifndef TP_PDL
#define TP_PDL 0
#endif

/* Waits until every earlier kernel in the stream has finished and its
** writes are visible. */
__device__ __forceinline__ void at_pdl_wait(void)
{
#if TP_PDL
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Lets the next kernel in the stream launch now (it still waits for this
** one to finish before it reads what this one writes). */
__device__ __forceinline__ void at_pdl_trigger(void)
{
#if TP_PDL
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

#endif
