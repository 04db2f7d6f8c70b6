/*
** op.c — the op table (one line per op) and the one kernel launch every op
** shares. Adding an op: write tuner/op_<name>.c against op.h, list it here
** and in main.c's help.
*/
#include "op.h"

#include <string.h>

static const at_op *const table[] = {&at_op_gemv,          &at_op_rmsnorm,           &at_op_add_rmsnorm,
                                     &at_op_gemma_rmsnorm, &at_op_add_gemma_rmsnorm, &at_op_gemv_add,
                                     NULL};

const at_op *at_op_find(const char *name)
{
    for (int i = 0; name && table[i]; i++)
        if (strcmp(table[i]->name, name) == 0)
            return table[i];
    return NULL;
}

const at_op *at_op_at(int i)
{
    return i >= 0 && i < (int)(sizeof table / sizeof table[0]) ? table[i] : NULL;
}

int at_op_launch(at_gpu *g, const at_op_kernel *k, void **args)
{
    if (k->pdl) {
        /* may start while the previous kernel drains; the kernel waits
        ** (griddepcontrol.wait) before it reads activations or writes outputs */
        CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};
        attr.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig cfg = {.gridDimX = k->grid[0], .gridDimY = k->grid[1], .gridDimZ = k->grid[2],
                              .blockDimX = k->block[0], .blockDimY = k->block[1], .blockDimZ = k->block[2],
                              .sharedMemBytes = k->smem, .hStream = g->stream, .attrs = &attr, .numAttrs = 1};
        return at_gpu_check(g, g->cu.cuLaunchKernelEx_(&cfg, k->fn, args, NULL), "cuLaunchKernelEx");
    }
    return at_gpu_check(g,
                        g->cu.cuLaunchKernel_(k->fn, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1],
                                              k->block[2], k->smem, g->stream, args, NULL),
                        "cuLaunchKernel");
}
