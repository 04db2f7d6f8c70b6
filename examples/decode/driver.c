/*
** driver.c — loads the CUDA driver (libcuda.so.1) with dlopen for the decode
** example (driver.h): nothing links against it, so the binary starts on a
** machine without a GPU. The same pattern as tuner/gpu.c and
** kernels/atk_driver.c, kept here so the example depends on atk's public
** header only.
*/
#define DECODE_DRIVER_IMPL
#include "driver.h"

#include <dlfcn.h>
#include <stdio.h>

#define DECODE_STR2(x) #x
#define DECODE_STR(x) DECODE_STR2(x)

decode_driver decode_cu;

int decode_driver_load(char *err, size_t errlen)
{
    if (decode_cu.lib)
        return 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen, "cuda: no GPU driver on this machine (libcuda.so.1 not found): decode needs a GPU");
        return 1;
    }
    /* DECODE_STR expands cuda.h's macro first: cuMemAlloc -> "cuMemAlloc_v2" */
#define DECODE_CU_LOAD(fn)                                                                                   \
    if (!(*(void **)&decode_cu.fn##_ = dlsym(lib, DECODE_STR(fn)))) {                                        \
        snprintf(err, errlen, "cuda: the driver library lacks %s (driver too old?)", DECODE_STR(fn));        \
        dlclose(lib);                                                                                        \
        return 1;                                                                                            \
    }
    DECODE_CU_FUNCS(DECODE_CU_LOAD)
#undef DECODE_CU_LOAD
    decode_cu.lib = lib; /* never closed: the process keeps the driver */
    return 0;
}
