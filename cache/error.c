/*
** error.c — the per-thread "last error" message and the fixed status texts.
** Every failing path calls at_fail(), which formats the message once and
** returns the status, so errors stay one line at the call site.
*/
#include "cache.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *at_errmsg(void) { return last_error; }

int at_fail(int status, const char *fmt, ...)
{
    char msg[sizeof last_error]; /* the arguments may be at_errmsg() itself */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_error, msg, sizeof msg);
    return status;
}

const char *at_errstr(int status)
{
    switch (status) {
    case AT_OK: return "ok";
    case AT_ERR_USAGE: return "bad argument";
    case AT_ERR_SPEC: return "search spec error";
    case AT_ERR_NOGPU: return "no usable GPU";
    case AT_ERR_CUDA: return "CUDA error";
    case AT_ERR_CUDA_STICKY: return "CUDA context lost (sticky error)";
    case AT_ERR_NVRTC: return "NVRTC unusable";
    case AT_ERR_CACHE: return "cache error";
    case AT_ERR_IO: return "I/O error";
    case AT_ERR_NOMEM: return "out of memory";
    case AT_ERR_HARNESS: return "measurement above the device ceiling (harness bug)";
    case AT_ERR_INTERRUPTED: return "interrupted";
    default: return "unknown status";
    }
}
