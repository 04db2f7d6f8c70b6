/*
** gpu.h — the CUDA driver API, loaded at run time, and one open GPU.
** libcuda.so.1 exists only where a GPU is, so nothing links against it: the
** tool starts anywhere and at_gpu_open says plainly when no GPU is usable.
** Internal to the tuner (not part of autotune.h's contract).
*/
#ifndef AT_GPU_H
#define AT_GPU_H

#include "autotune.h"

#include <cublas_v2.h>
#include <cuda.h>

/* The driver entry points the tuner uses, resolved with dlsym by the exact
** versioned names cuda.h maps them to. */
typedef struct at_driver {
    void *lib;
#define AT_CU_FN(name) __typeof__(name) *name##_
    AT_CU_FN(cuInit);
    AT_CU_FN(cuDriverGetVersion);
    AT_CU_FN(cuDeviceGetCount);
    AT_CU_FN(cuDeviceGet);
    AT_CU_FN(cuDeviceGetName);
    AT_CU_FN(cuDeviceGetAttribute);
    AT_CU_FN(cuDeviceTotalMem);
    AT_CU_FN(cuDevicePrimaryCtxRetain);
    AT_CU_FN(cuDevicePrimaryCtxRelease);
    AT_CU_FN(cuDevicePrimaryCtxReset);
    AT_CU_FN(cuCtxSetCurrent);
    AT_CU_FN(cuCtxSynchronize);
    AT_CU_FN(cuMemGetInfo);
    AT_CU_FN(cuMemAlloc);
    AT_CU_FN(cuMemFree);
    /* only the stream-ordered forms: the synchronous ones run on the legacy
    ** default stream, which does not order against a non-blocking stream */
    AT_CU_FN(cuMemcpyHtoDAsync);
    AT_CU_FN(cuMemcpyDtoHAsync);
    AT_CU_FN(cuMemcpyDtoDAsync);
    AT_CU_FN(cuMemsetD8Async);
    AT_CU_FN(cuMemsetD16Async);
    AT_CU_FN(cuModuleLoadData);
    AT_CU_FN(cuModuleUnload);
    AT_CU_FN(cuModuleGetFunction);
    AT_CU_FN(cuFuncGetAttribute);
    AT_CU_FN(cuLaunchKernel);
    AT_CU_FN(cuLaunchKernelEx);
    AT_CU_FN(cuStreamCreate);
    AT_CU_FN(cuStreamDestroy);
    AT_CU_FN(cuStreamSynchronize);
    AT_CU_FN(cuEventCreate);
    AT_CU_FN(cuEventDestroy);
    AT_CU_FN(cuEventRecord);
    AT_CU_FN(cuEventSynchronize);
    AT_CU_FN(cuEventElapsedTime);
    AT_CU_FN(cuStreamBeginCapture);
    AT_CU_FN(cuStreamEndCapture);
    AT_CU_FN(cuGraphInstantiate);
    AT_CU_FN(cuGraphLaunch);
    AT_CU_FN(cuGraphExecDestroy);
    AT_CU_FN(cuGraphDestroy);
    AT_CU_FN(cuGetErrorName);
    AT_CU_FN(cuGetErrorString);
#undef AT_CU_FN
} at_driver;

/* One device with its primary context current on the opening thread, a
** stream, a cuBLAS handle bound to that stream, and two timing events. */
typedef struct at_gpu {
    at_driver cu;
    int ordinal;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    CUevent ev_start, ev_stop;
    cublasHandle_t blas;
    CUdeviceptr blas_workspace;
    at_device_info info; /* identity; ceilings filled by at_bench_ceilings */
    int lost;            /* a sticky error happened: the context is unusable */
} at_gpu;

/* Loads the driver, opens device `ordinal` and fills gpu->info's identity
** (name, cc, SMs, L2, memory, driver and NVRTC versions). With `identity_only`
** it stops there: no context, no stream, no cuBLAS (fast; enough to look a
** key up in the cache). AT_ERR_NOGPU with a plain reason when there is no
** driver or no device. Caller frees with at_gpu_close. */
int at_gpu_open(int ordinal, int identity_only, at_gpu **out);
void at_gpu_close(at_gpu *g); /* NULL is a no-op */

/* Turns a CUresult into AT_OK, AT_ERR_CUDA or AT_ERR_CUDA_STICKY with the
** message "cuda: WHAT: NAME (text)". */
int at_gpu_check(at_gpu *g, CUresult r, const char *what);
/* Same for cuBLAS: "cublas: WHAT: status N". */
int at_gpu_check_blas(cublasStatus_t s, const char *what);

/* True when r means the context is gone (illegal address and friends). */
int at_gpu_is_sticky(CUresult r);

/* Allocates n bytes (AT_ERR_CUDA when out of device memory). */
int at_gpu_alloc(at_gpu *g, CUdeviceptr *p, size_t n);
void at_gpu_free(at_gpu *g, CUdeviceptr p); /* 0 is a no-op */

#endif
