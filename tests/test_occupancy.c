/*
** test_occupancy.c — at_occupancy against figures worked by hand from
** NVIDIA's occupancy calculator rules: each limit (warps, blocks, registers,
** shared memory) binding in turn, per architecture, and bad inputs.
*/
#include "autotune.h"
#include "tinytest.h"

#include <math.h>

static void check(int arch, int threads, int regs, int smem, double want, int want_blocks)
{
    int blocks = -1;
    double occ = at_occupancy(arch, threads, regs, smem, &blocks);
    if (fabs(occ - want) > 1e-9 || blocks != want_blocks)
        fprintf(stderr, "  sm_%d %d threads %d regs %d B: %.4f (%d blocks), want %.4f (%d)\n", arch, threads,
                regs, smem, occ, blocks, want, want_blocks);
    CHECK(fabs(occ - want) <= 1e-9);
    CHECK_EQ_INT(blocks, want_blocks);
}

static void each_limit_binds(void)
{
    /* sm_90: 64 warps, 32 blocks, 64 Ki registers, 228 KiB shared */
    check(90, 256, 32, 0, 1.0, 8);       /* warps: 8 blocks of 8 warps */
    check(90, 32, 16, 0, 0.5, 32);       /* blocks: 32 one-warp blocks = 32 of 64 warps */
    check(90, 256, 128, 0, 0.25, 2);     /* registers: 4096 a warp, 16 warps */
    check(90, 1024, 64, 0, 0.5, 1);      /* registers: 2048 a warp, 32 warps, one block */
    check(90, 256, 40, 0, 0.75, 6);      /* 1280 a warp -> 51 warps, 48 in fours: 6 blocks */
    check(90, 128, 32, 102400, 0.125, 2); /* shared: (100 KiB + 1 KiB) twice in 228 KiB */
    check(90, 96, 32, 0, 63.0 / 64, 21); /* 3 warps: 21 blocks */
    /* sm_89 (Ada): 48 warps, 24 blocks, 100 KiB shared */
    check(89, 64, 16, 0, 1.0, 24);
    check(89, 256, 32, 0, 1.0, 6);
    check(89, 128, 32, 51200, 4.0 / 48, 1); /* 50 KiB + 1 KiB: one block */
    /* sm_86: 16 blocks */
    check(86, 64, 16, 0, 32.0 / 48, 16);
    /* sm_80: 164 KiB shared */
    check(80, 128, 32, 65536, 8.0 / 64, 2);
    /* sm_75: 32 warps */
    check(75, 1024, 32, 0, 1.0, 1);
    /* a newer architecture takes the last row at or below it */
    check(91, 256, 32, 0, 1.0, 8);
}

static void impossible_inputs_give_zero(void)
{
    check(60, 256, 32, 0, 0.0, 0);      /* older than sm_70 */
    check(90, 0, 32, 0, 0.0, 0);
    check(90, 2048, 32, 0, 0.0, 0);     /* more than 1024 threads a block */
    check(90, 256, 300, 0, 0.0, 0);     /* more than 255 registers */
    check(90, 256, 32, 300000, 0.0, 0); /* more shared memory than an SM has */
    check(75, 1024, 128, 0, 0.0, 0);    /* registers for no block at all */
}

int main(void)
{
    TT_RUN(each_limit_binds);
    TT_RUN(impossible_inputs_give_zero);
    return TT_DONE();
}
