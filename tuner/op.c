/*
** op.c — the op table (one line per op) and what every op shares: the
** kernel launch, the compile-and-load of an op's own baseline kernels, the
** check's verdict. Adding an op: write tuner/op_<name>.c against op.h, list it here
** and in main.c's help.
*/
#include "op.h"
#include "verify.h"

#include <stdio.h>
#include <string.h>

static const at_op *const table[] = {&at_op_gemv,
                                     &at_op_rmsnorm,
                                     &at_op_add_rmsnorm,
                                     &at_op_gemma_rmsnorm,
                                     &at_op_add_gemma_rmsnorm,
                                     &at_op_gemv_add,
                                     &at_op_rmsnorm_gemv,
                                     &at_op_gemma_rmsnorm_gemv,
                                     &at_op_gemv_swiglu,
                                     &at_op_rmsnorm_gemv_swiglu,
                                     &at_op_gemma_rmsnorm_gemv_swiglu,
                                     &at_op_add_rmsnorm_gemv,
                                     &at_op_add_gemma_rmsnorm_gemv,
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

int at_op_compile_load(at_gpu *g, at_templates *tpl, int arch, at_dtype dtype, const char *cubin_dir, int threads,
                       at_compile_job *jobs, const char *const *entries, int n, CUmodule *mods, CUfunction *fns)
{
    int rc;
    for (int i = 0; i < n; i++) {
        at_compile_job *j = &jobs[i];
        if ((rc = at_templates_source(tpl, j->name, &j->source)) != AT_OK)
            return rc;
        j->tpl = tpl;
        j->arch = arch;
        j->dtype = dtype;
        j->cubin_dir = cubin_dir;
    }
    if ((rc = at_nvrtc_compile_all(jobs, n, threads, NULL, NULL)) != AT_OK)
        return rc;
    for (int i = 0; i < n; i++) {
        at_compile_job *j = &jobs[i];
        if (!j->ok)
            return at_fail(AT_ERR_NVRTC, "nvrtc: the baseline %s does not compile%s%s%s:\n%s", j->name,
                           j->options[0] ? " (" : "", j->options, j->options[0] ? ")" : "", j->log ? j->log : "");
        if ((rc = at_gpu_check(g, g->cu.cuModuleLoadData_(&mods[i], j->cubin), "cuModuleLoadData")) != AT_OK ||
            (rc = at_gpu_check(g, g->cu.cuModuleGetFunction_(&fns[i], mods[i], entries[i]), "cuModuleGetFunction")) !=
                AT_OK)
            return rc;
    }
    return AT_OK;
}

int at_op_replicate(at_gpu *g, CUdeviceptr base, size_t stride, int copies)
{
    int rc;
    for (int have = 1; have < copies; have *= 2) {
        int n = have < copies - have ? have : copies - have;
        if ((rc = at_gpu_check(g,
                               g->cu.cuMemcpyDtoDAsync_(base + (CUdeviceptr)(stride * (size_t)have), base,
                                                        stride * (size_t)n, g->stream),
                               "cuMemcpyDtoDAsync")) != AT_OK)
            return rc;
    }
    return AT_OK;
}

void at_op_verdict(at_op_check *out, at_dtype dtype, const uint16_t *y, const double *ref, size_t n)
{
    double tol = at_dtype_tolerance(dtype);
    out->err = at_rel_err(dtype, y, ref, n, &out->nonfinite);
    if (out->nonfinite || !(out->err <= tol)) {
        size_t len = strnlen(out->reason, sizeof out->reason - 1);
        const char *sep = len ? "; " : "";
        out->wrong = 1;
        if (out->nonfinite)
            snprintf(out->reason + len, sizeof out->reason - len, "%s%zu outputs NaN/Inf (unwritten or overflow)",
                     sep, out->nonfinite);
        else
            snprintf(out->reason + len, sizeof out->reason - len, "%srel. error %.3g > %.0e", sep, out->err, tol);
    }
}
