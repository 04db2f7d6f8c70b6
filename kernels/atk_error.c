/*
** atk_error.c — the runtime's error messages and status texts. A message is
** kept per thread, with the context it belongs to, so concurrent calls on
** one context never race on it: atk_errmsg(ctx) is the calling thread's last
** failure on ctx. Also the op and dtype names every file shares.
*/
#include "atk_internal.h"

#include <stdio.h>
#include <string.h>

static _Thread_local struct {
    const atk_ctx *ctx;
    char msg[1024];
} last;

int atk__fail(const atk_ctx *ctx, int status, const char *fmt, ...)
{
    char tmp[1024]; /* fmt's arguments may point into last.msg */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(last.msg, tmp, sizeof tmp);
    last.ctx = ctx;
    return status;
}

void atk__clear(const atk_ctx *ctx)
{
    if (last.ctx == ctx)
        last.msg[0] = '\0';
}

const char *atk__lastmsg(void) { return last.msg; }

const char *atk_errmsg(const atk_ctx *ctx) { return last.ctx == ctx ? last.msg : ""; }

const char *atk_errstr(int status)
{
    switch (status) {
    case ATK_OK: return "ok";
    case ATK_ERR_USAGE: return "bad argument";
    case ATK_ERR_NOGPU: return "no usable GPU";
    case ATK_ERR_CUDA: return "CUDA error";
    case ATK_ERR_CUDA_STICKY: return "CUDA context lost (sticky error)";
    case ATK_ERR_NVRTC: return "NVRTC unusable";
    case ATK_ERR_TABLE: return "tuned table unusable";
    case ATK_ERR_IO: return "I/O error";
    case ATK_ERR_NOMEM: return "out of memory";
    case ATK_ERR_MISS: return "no tuned kernel for this call (strict mode)";
    default: return "unknown status";
    }
}

/* [NORM_OP] the spec op names, in enum atk_op order. */
static const char *const op_names[ATK_NOPS] = {"gemv",
                                               "rmsnorm",
                                               "add_rmsnorm",
                                               "gemma_rmsnorm",
                                               "add_gemma_rmsnorm",
                                               "gemv_add",
                                               "rmsnorm_gemv",
                                               "gemma_rmsnorm_gemv",
                                               "gemv_swiglu",
                                               "rmsnorm_gemv_swiglu",
                                               "gemma_rmsnorm_gemv_swiglu",
                                               "add_rmsnorm_gemv",
                                               "add_gemma_rmsnorm_gemv"};

const char *atk_op_name(int op) { return op >= 0 && op < ATK_NOPS ? op_names[op] : "?"; }

int atk__op_parse(const char *name)
{
    for (int i = 0; i < ATK_NOPS; i++)
        if (!strcmp(name, op_names[i]))
            return i;
    return -1;
}

int atk__dtype_parse(const char *name)
{
    if (!strcmp(name, "bf16"))
        return ATK_BF16;
    if (!strcmp(name, "fp16"))
        return ATK_FP16;
    return -1;
}
