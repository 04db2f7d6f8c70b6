/*
** atk_driver.c — the CUDA driver API, loaded with dlopen at atk_open time:
** libatk has no link-time dependency on libcuda.so.1, so an engine built
** with it starts on a machine without a GPU and atk_open says so plainly.
** The same pattern as tuner/gpu.c, kept separate so atk stays standalone.
*/
#include "atk_internal.h"

#include <dlfcn.h>
#include <stdio.h>

#define ATK_STR2(x) #x
#define ATK_STR(x) ATK_STR2(x)

int atk__driver_load(atk_driver *d)
{
    d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d->lib)
        return atk__fail(NULL, ATK_ERR_NOGPU, "cuda: no GPU driver on this machine (libcuda.so.1 not found)");
    /* ATK_STR expands cuda.h's macro first: cuMemAlloc -> "cuMemAlloc_v2" */
#define LOAD(fn)                                                                                             \
    do {                                                                                                     \
        *(void **)&d->fn##_ = dlsym(d->lib, ATK_STR(fn));                                                    \
        if (!d->fn##_)                                                                                       \
            return atk__fail(NULL, ATK_ERR_NOGPU, "cuda: the driver library lacks %s (driver too old?)",     \
                             ATK_STR(fn));                                                                   \
    } while (0)
    LOAD(cuInit);
    LOAD(cuDriverGetVersion);
    LOAD(cuDeviceGetCount);
    LOAD(cuDeviceGet);
    LOAD(cuDeviceGetName);
    LOAD(cuDeviceGetAttribute);
    LOAD(cuDevicePrimaryCtxRetain);
    LOAD(cuDevicePrimaryCtxRelease);
    LOAD(cuCtxGetCurrent);
    LOAD(cuCtxPushCurrent);
    LOAD(cuCtxPopCurrent);
    LOAD(cuMemAlloc);
    LOAD(cuMemFree);
    LOAD(cuModuleLoadData);
    LOAD(cuModuleUnload);
    LOAD(cuModuleGetFunction);
    LOAD(cuFuncSetAttribute);
    LOAD(cuLaunchKernel);
    LOAD(cuLaunchKernelEx);
    LOAD(cuGetErrorName);
    LOAD(cuGetErrorString);
#undef LOAD
    return ATK_OK;
}

static int is_sticky(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return 1;
    default:
        return 0;
    }
}

int atk__cuda_check(const atk_ctx *ctx, const atk_driver *d, CUresult r, const char *what)
{
    const char *name = NULL, *text = NULL;
    if (r == CUDA_SUCCESS)
        return ATK_OK;
    if (d && d->cuGetErrorName_)
        d->cuGetErrorName_(r, &name);
    if (d && d->cuGetErrorString_)
        d->cuGetErrorString_(r, &text);
    return atk__fail(ctx, is_sticky(r) ? ATK_ERR_CUDA_STICKY : ATK_ERR_CUDA, "cuda: %s: %s (%s)", what,
                     name ? name : "?", text ? text : "?");
}
