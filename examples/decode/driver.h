/*
** driver.h — the CUDA driver API for the decode example, loaded with dlopen
** (driver.c) rather than linked: libcuda.so.1 exists only where a GPU is,
** so `decode --help` and argument errors work on any machine and a missing
** driver is one plain message. Include it after <cuda.h> (model.h does):
** each driver call below is redirected to the loaded entry point, so the
** sources call cuInit(...) as usual. Invariant: no call before
** decode_driver_load() returned 0.
*/
#ifndef DECODE_DRIVER_H
#define DECODE_DRIVER_H

#include <cuda.h>

/* Every driver entry point the example calls; its type and dlsym name come
** from cuda.h's declaration under the name cuda.h maps it to
** (cuMemAlloc -> cuMemAlloc_v2): see driver.c. [DECODE_CU_FUNCS] A call
** of a function not listed here fails to link (no libcuda is linked): add
** it here and to the redirects below. */
#define DECODE_CU_FUNCS(X) \
    X(cuInit) \
    X(cuDeviceGet) \
    X(cuDeviceGetName) \
    X(cuDeviceGetAttribute) \
    X(cuDevicePrimaryCtxRetain) \
    X(cuDevicePrimaryCtxRelease) \
    X(cuCtxSetCurrent) \
    X(cuStreamCreate) \
    X(cuStreamDestroy) \
    X(cuStreamSynchronize) \
    X(cuStreamBeginCapture) \
    X(cuStreamEndCapture) \
    X(cuGraphInstantiate) \
    X(cuGraphLaunch) \
    X(cuGraphDestroy) \
    X(cuGraphExecDestroy) \
    X(cuEventCreate) \
    X(cuEventRecord) \
    X(cuEventSynchronize) \
    X(cuEventElapsedTime) \
    X(cuEventDestroy) \
    X(cuMemAlloc) \
    X(cuMemFree) \
    X(cuMemsetD16Async) \
    X(cuMemsetD32Async) \
    X(cuMemcpyDtoDAsync) \
    X(cuMemcpyDtoHAsync) \
    X(cuModuleLoadData) \
    X(cuModuleGetFunction) \
    X(cuModuleUnload) \
    X(cuLaunchKernel) \
    X(cuLaunchKernelEx) \
    X(cuGetErrorName)

typedef struct decode_driver {
    void *lib;
#define DECODE_CU_FIELD(fn) __typeof__(fn) *fn##_;
    DECODE_CU_FUNCS(DECODE_CU_FIELD)
#undef DECODE_CU_FIELD
} decode_driver;

/* The loaded driver (driver.c). */
extern decode_driver decode_cu;

/* Loads libcuda.so.1 and every entry point once. Returns 0, or 1 with a
** one-line message in err ("cuda: no GPU driver on this machine ..."). */
int decode_driver_load(char *err, size_t errlen);

/* [DECODE_CU_FUNCS] the call sites' names to the loaded entry points (not
** in driver.c, which needs cuda.h's names to find the symbols) */
#ifndef DECODE_DRIVER_IMPL
#undef cuInit
#define cuInit decode_cu.cuInit_
#undef cuDeviceGet
#define cuDeviceGet decode_cu.cuDeviceGet_
#undef cuDeviceGetName
#define cuDeviceGetName decode_cu.cuDeviceGetName_
#undef cuDeviceGetAttribute
#define cuDeviceGetAttribute decode_cu.cuDeviceGetAttribute_
#undef cuDevicePrimaryCtxRetain
#define cuDevicePrimaryCtxRetain decode_cu.cuDevicePrimaryCtxRetain_
#undef cuDevicePrimaryCtxRelease
#define cuDevicePrimaryCtxRelease decode_cu.cuDevicePrimaryCtxRelease_
#undef cuCtxSetCurrent
#define cuCtxSetCurrent decode_cu.cuCtxSetCurrent_
#undef cuStreamCreate
#define cuStreamCreate decode_cu.cuStreamCreate_
#undef cuStreamDestroy
#define cuStreamDestroy decode_cu.cuStreamDestroy_
#undef cuStreamSynchronize
#define cuStreamSynchronize decode_cu.cuStreamSynchronize_
#undef cuStreamBeginCapture
#define cuStreamBeginCapture decode_cu.cuStreamBeginCapture_
#undef cuStreamEndCapture
#define cuStreamEndCapture decode_cu.cuStreamEndCapture_
#undef cuGraphInstantiate
#define cuGraphInstantiate decode_cu.cuGraphInstantiate_
#undef cuGraphLaunch
#define cuGraphLaunch decode_cu.cuGraphLaunch_
#undef cuGraphDestroy
#define cuGraphDestroy decode_cu.cuGraphDestroy_
#undef cuGraphExecDestroy
#define cuGraphExecDestroy decode_cu.cuGraphExecDestroy_
#undef cuEventCreate
#define cuEventCreate decode_cu.cuEventCreate_
#undef cuEventRecord
#define cuEventRecord decode_cu.cuEventRecord_
#undef cuEventSynchronize
#define cuEventSynchronize decode_cu.cuEventSynchronize_
#undef cuEventElapsedTime
#define cuEventElapsedTime decode_cu.cuEventElapsedTime_
#undef cuEventDestroy
#define cuEventDestroy decode_cu.cuEventDestroy_
#undef cuMemAlloc
#define cuMemAlloc decode_cu.cuMemAlloc_
#undef cuMemFree
#define cuMemFree decode_cu.cuMemFree_
#undef cuMemsetD16Async
#define cuMemsetD16Async decode_cu.cuMemsetD16Async_
#undef cuMemsetD32Async
#define cuMemsetD32Async decode_cu.cuMemsetD32Async_
#undef cuMemcpyDtoDAsync
#define cuMemcpyDtoDAsync decode_cu.cuMemcpyDtoDAsync_
#undef cuMemcpyDtoHAsync
#define cuMemcpyDtoHAsync decode_cu.cuMemcpyDtoHAsync_
#undef cuModuleLoadData
#define cuModuleLoadData decode_cu.cuModuleLoadData_
#undef cuModuleGetFunction
#define cuModuleGetFunction decode_cu.cuModuleGetFunction_
#undef cuModuleUnload
#define cuModuleUnload decode_cu.cuModuleUnload_
#undef cuLaunchKernel
#define cuLaunchKernel decode_cu.cuLaunchKernel_
#undef cuLaunchKernelEx
#define cuLaunchKernelEx decode_cu.cuLaunchKernelEx_
#undef cuGetErrorName
#define cuGetErrorName decode_cu.cuGetErrorName_
#endif

#endif
