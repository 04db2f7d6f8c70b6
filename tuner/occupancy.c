/*
** occupancy.c — the theoretical occupancy of a compiled candidate, from what
** NVRTC's ptxas report gives without a GPU (registers per thread, static
** shared memory) and the launch shape: resident warps per SM over the most
** an SM holds, as NVIDIA's occupancy calculator computes it (per-warp
** register allocation in units of 256, warps allocated 4 at a time, 1 KiB of
** shared memory reserved per block from sm_80 on, 128-byte shared-memory
** granules). The per-architecture limits are the CUDA programming guide's
** "technical specifications" table. An estimate: it ignores the L1/shared
** carve-out the driver picks and whatever the kernel asks for at launch
** beyond its dynamic shared memory.
*/
#include "autotune.h"

typedef struct sm_limits {
    int arch;          /* 10 * major + minor; the first of a range */
    int max_warps;     /* resident warps per SM */
    int max_blocks;    /* resident blocks per SM */
    int smem_per_sm;   /* shared memory usable by blocks, bytes */
    int smem_reserved; /* per block, taken by the system */
} sm_limits;

/* Ascending; an architecture takes the last row at or below it. */
static const sm_limits LIMITS[] = {
    {70, 64, 32, 98304, 0},      /* Volta */
    {75, 32, 16, 65536, 0},      /* Turing */
    {80, 64, 32, 167936, 1024},  /* A100 */
    {86, 48, 16, 102400, 1024},  /* GA10x */
    {87, 48, 16, 167936, 1024},  /* Orin */
    {89, 48, 24, 102400, 1024},  /* Ada (RTX 4070 ...) */
    {90, 64, 32, 233472, 1024},  /* Hopper */
    {100, 64, 32, 233472, 1024}, /* Blackwell (datacenter) */
    {120, 48, 32, 102400, 1024}, /* Blackwell (RTX) */
};

enum { REGS_PER_SM = 65536, REG_UNIT = 256, WARP_GRANULE = 4, SMEM_GRANULE = 128, MAX_REGS = 255 };

static int round_up(int v, int unit) { return (v + unit - 1) / unit * unit; }

double at_occupancy(int arch, int threads_per_block, int regs, int smem_bytes, int *blocks_per_sm)
{
    const sm_limits *l = &LIMITS[0];
    int blocks = 0;
    if (blocks_per_sm)
        *blocks_per_sm = 0;
    if (arch < LIMITS[0].arch || threads_per_block <= 0 || threads_per_block > 1024 || regs < 0 ||
        regs > MAX_REGS || smem_bytes < 0)
        return 0.0;
    for (size_t i = 0; i < sizeof LIMITS / sizeof LIMITS[0]; i++)
        if (LIMITS[i].arch <= arch)
            l = &LIMITS[i];
    int warps = (threads_per_block + 31) / 32;
    /* by warps and by blocks */
    blocks = l->max_warps / warps;
    if (blocks > l->max_blocks)
        blocks = l->max_blocks;
    /* by registers: each warp holds round_up(regs * 32, 256) of them */
    if (regs > 0) {
        int per_warp = round_up(regs * 32, REG_UNIT);
        int reg_warps = REGS_PER_SM / per_warp / WARP_GRANULE * WARP_GRANULE;
        int by_regs = reg_warps / warps;
        if (by_regs < blocks)
            blocks = by_regs;
    }
    /* by shared memory */
    int smem = round_up(smem_bytes + l->smem_reserved, SMEM_GRANULE);
    if (smem > 0) {
        int by_smem = l->smem_per_sm / smem;
        if (by_smem < blocks)
            blocks = by_smem;
    }
    if (blocks < 0)
        blocks = 0;
    if (blocks_per_sm)
        *blocks_per_sm = blocks;
    return (double)(blocks * warps) / l->max_warps;
}
