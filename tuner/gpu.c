/*
** gpu.c — loads libcuda.so.1 with dlopen, opens one device's primary context
** and binds cuBLAS to the same context and stream. Every driver call goes
** through at_gpu_check so failures become a status and a one-line message;
** sticky errors (the context is lost) get their own status.
*/
#include "gpu.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT_STR2(x) #x
#define AT_STR(x) AT_STR2(x)

/* Resolves one symbol; `name` is the already-expanded versioned name. */
static int load_sym(void *lib, void **slot, const char *name)
{
    *slot = dlsym(lib, name);
    if (!*slot)
        return at_fail(AT_ERR_NOGPU, "cuda: the driver library lacks %s (driver too old?)", name);
    return AT_OK;
}

static int load_driver(at_driver *d)
{
    int rc = AT_OK;
    d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d->lib)
        return at_fail(AT_ERR_NOGPU,
                       "cuda: no GPU driver on this machine (libcuda.so.1 not found); "
                       "this needs a GPU (try --dry-run)");
    /* AT_STR expands the cuda.h macro first: cuMemAlloc -> "cuMemAlloc_v2" */
#define LOAD(fn) if (rc == AT_OK) rc = load_sym(d->lib, (void **)&d->fn##_, AT_STR(fn))
    LOAD(cuInit);
    LOAD(cuDriverGetVersion);
    LOAD(cuDeviceGetCount);
    LOAD(cuDeviceGet);
    LOAD(cuDeviceGetName);
    LOAD(cuDeviceGetAttribute);
    LOAD(cuDeviceTotalMem);
    LOAD(cuDevicePrimaryCtxRetain);
    LOAD(cuDevicePrimaryCtxRelease);
    LOAD(cuDevicePrimaryCtxReset);
    LOAD(cuCtxSetCurrent);
    LOAD(cuCtxSynchronize);
    LOAD(cuMemGetInfo);
    LOAD(cuMemAlloc);
    LOAD(cuMemFree);
    LOAD(cuMemcpyHtoDAsync);
    LOAD(cuMemcpyDtoHAsync);
    LOAD(cuMemcpyDtoDAsync);
    LOAD(cuMemsetD8Async);
    LOAD(cuMemsetD16Async);
    LOAD(cuModuleLoadData);
    LOAD(cuModuleUnload);
    LOAD(cuModuleGetFunction);
    LOAD(cuFuncGetAttribute);
    LOAD(cuLaunchKernel);
    LOAD(cuLaunchKernelEx);
    LOAD(cuStreamCreate);
    LOAD(cuStreamDestroy);
    LOAD(cuStreamSynchronize);
    LOAD(cuEventCreate);
    LOAD(cuEventDestroy);
    LOAD(cuEventRecord);
    LOAD(cuEventSynchronize);
    LOAD(cuEventElapsedTime);
    LOAD(cuStreamBeginCapture);
    LOAD(cuStreamEndCapture);
    LOAD(cuGraphInstantiate);
    LOAD(cuGraphLaunch);
    LOAD(cuGraphExecDestroy);
    LOAD(cuGraphDestroy);
    LOAD(cuGetErrorName);
    LOAD(cuGetErrorString);
#undef LOAD
    return rc;
}

int at_gpu_is_sticky(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_TIMEOUT: /* cuda.h: the process must be relaunched */
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return 1;
    default:
        return 0;
    }
}

int at_gpu_check(at_gpu *g, CUresult r, const char *what)
{
    const char *name = "?", *text = "?";
    if (r == CUDA_SUCCESS)
        return AT_OK;
    if (g && g->cu.cuGetErrorName_)
        g->cu.cuGetErrorName_(r, &name);
    if (g && g->cu.cuGetErrorString_)
        g->cu.cuGetErrorString_(r, &text);
    if (g && at_gpu_is_sticky(r))
        g->lost = 1;
    return at_fail(at_gpu_is_sticky(r) ? AT_ERR_CUDA_STICKY : AT_ERR_CUDA, "cuda: %s: %s (%s)",
                   what, name ? name : "?", text ? text : "?");
}

int at_gpu_check_blas(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return AT_OK;
    return at_fail(AT_ERR_CUDA, "cublas: %s: status %d", what, (int)s);
}

int at_gpu_alloc(at_gpu *g, CUdeviceptr *p, size_t n)
{
    *p = 0;
    return at_gpu_check(g, g->cu.cuMemAlloc_(p, n), "cuMemAlloc");
}

void at_gpu_free(at_gpu *g, CUdeviceptr p)
{
    if (p)
        g->cu.cuMemFree_(p);
}

static int attr(at_gpu *g, CUdevice_attribute a, int *v)
{
    return at_gpu_check(g, g->cu.cuDeviceGetAttribute_(v, a, g->dev), "cuDeviceGetAttribute");
}

int at_gpu_open(int ordinal, int identity_only, at_gpu **out)
{
    at_gpu *g = calloc(1, sizeof *g);
    int rc, count = 0, l2 = 0;
    size_t total = 0;
    *out = NULL;
    if (!g)
        return at_fail(AT_ERR_NOMEM, "out of memory");
    g->ordinal = ordinal;
    if ((rc = load_driver(&g->cu)) != AT_OK)
        goto fail;
    CUresult r = g->cu.cuInit_(0);
    if (r != CUDA_SUCCESS) {
        rc = at_gpu_check(g, r, "cuInit");
        at_fail(AT_ERR_NOGPU, "%s; this needs a GPU (try --dry-run)", at_errmsg());
        rc = AT_ERR_NOGPU;
        goto fail;
    }
    if ((rc = at_gpu_check(g, g->cu.cuDeviceGetCount_(&count), "cuDeviceGetCount")) != AT_OK)
        goto fail;
    if (ordinal < 0 || ordinal >= count) {
        rc = at_fail(AT_ERR_NOGPU, "cuda: no GPU %d (this machine has %d)", ordinal, count);
        goto fail;
    }
    if ((rc = at_gpu_check(g, g->cu.cuDeviceGet_(&g->dev, ordinal), "cuDeviceGet")) != AT_OK)
        goto fail;

    at_device_info *d = &g->info;
    if ((rc = at_gpu_check(g, g->cu.cuDeviceGetName_(d->name, (int)sizeof d->name, g->dev),
                           "cuDeviceGetName")) != AT_OK ||
        (rc = attr(g, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &d->cc_major)) != AT_OK ||
        (rc = attr(g, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &d->cc_minor)) != AT_OK ||
        (rc = attr(g, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &d->sms)) != AT_OK ||
        (rc = attr(g, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &l2)) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuDeviceTotalMem_(&total, g->dev), "cuDeviceTotalMem")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuDriverGetVersion_(&d->driver_version), "cuDriverGetVersion")) != AT_OK)
        goto fail;
    d->l2_bytes = l2;
    d->mem_bytes = (int64_t)total;
    nvrtcVersion(&d->nvrtc_major, &d->nvrtc_minor);
    if (identity_only) {
        *out = g;
        return AT_OK;
    }

    if ((rc = at_gpu_check(g, g->cu.cuDevicePrimaryCtxRetain_(&g->ctx, g->dev),
                           "cuDevicePrimaryCtxRetain")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuCtxSetCurrent_(g->ctx), "cuCtxSetCurrent")) != AT_OK)
        goto fail;

    if ((rc = at_gpu_check(g, g->cu.cuStreamCreate_(&g->stream, CU_STREAM_NON_BLOCKING),
                           "cuStreamCreate")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuEventCreate_(&g->ev_start, CU_EVENT_DEFAULT), "cuEventCreate")) != AT_OK ||
        (rc = at_gpu_check(g, g->cu.cuEventCreate_(&g->ev_stop, CU_EVENT_DEFAULT), "cuEventCreate")) != AT_OK)
        goto fail;
    /* cuBLAS shares the primary context; an explicit workspace keeps it from
    ** allocating while a graph is being captured. */
    if ((rc = at_gpu_check_blas(cublasCreate(&g->blas), "cublasCreate")) != AT_OK ||
        (rc = at_gpu_check_blas(cublasSetStream(g->blas, g->stream), "cublasSetStream")) != AT_OK ||
        (rc = at_gpu_alloc(g, &g->blas_workspace, 32u << 20)) != AT_OK ||
        (rc = at_gpu_check_blas(cublasSetWorkspace(g->blas, (void *)g->blas_workspace, 32u << 20),
                                "cublasSetWorkspace")) != AT_OK)
        goto fail;
    *out = g;
    return AT_OK;
fail:
    at_gpu_close(g);
    return rc;
}

void at_gpu_close(at_gpu *g)
{
    if (!g)
        return;
    if (g->blas)
        cublasDestroy(g->blas);
    if (g->cu.lib) {
        at_gpu_free(g, g->blas_workspace);
        if (g->ev_start)
            g->cu.cuEventDestroy_(g->ev_start);
        if (g->ev_stop)
            g->cu.cuEventDestroy_(g->ev_stop);
        if (g->stream)
            g->cu.cuStreamDestroy_(g->stream);
        /* a lost context stays broken for every later user in this
        ** process until it is reset (this resets the context, not the GPU) */
        if (g->ctx && g->lost)
            g->cu.cuDevicePrimaryCtxReset_(g->dev);
        else if (g->ctx)
            g->cu.cuDevicePrimaryCtxRelease_(g->dev);
        /* the driver library stays loaded: unloading it under a live
        ** cuBLAS runtime is not safe, and the process ends soon after */
    }
    free(g);
}
