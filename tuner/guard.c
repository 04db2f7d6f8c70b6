/*
** guard.c — guard zones around an op's output buffers for the correctness
** check (op.h): a pattern before and after the output, re-armed before
** each check and compared after it. A candidate that writes past its
** output without faulting is `wrong`, never timed. Ran on the H200.
*/
#include "op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int at_guarded_alloc(at_gpu *g, at_guarded *b, size_t n)
{
    int rc;
    memset(b, 0, sizeof *b);
    if (!(b->host = malloc(2 * AT_GUARD_BYTES)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    if ((rc = at_gpu_alloc(g, &b->alloc, n + 2 * AT_GUARD_BYTES)) != AT_OK)
        return rc;
    b->p = b->alloc + AT_GUARD_BYTES;
    b->n = n;
    return AT_OK;
}

void at_guarded_free(at_gpu *g, at_guarded *b)
{
    if (g)
        at_gpu_free(g, b->alloc);
    free(b->host);
    memset(b, 0, sizeof *b);
}

int at_guarded_arm(at_gpu *g, at_guarded *b)
{
    int rc;
    if ((rc = at_gpu_check(g, g->cu.cuMemsetD8Async_(b->alloc, AT_GUARD_PATTERN, AT_GUARD_BYTES, g->stream),
                           "cuMemsetD8Async")) != AT_OK)
        return rc;
    return at_gpu_check(g, g->cu.cuMemsetD8Async_(b->p + b->n, AT_GUARD_PATTERN, AT_GUARD_BYTES, g->stream),
                        "cuMemsetD8Async");
}

int at_guarded_fetch(at_gpu *g, at_guarded *b)
{
    int rc;
    if ((rc = at_gpu_check(g, g->cu.cuMemcpyDtoHAsync_(b->host, b->alloc, AT_GUARD_BYTES, g->stream),
                           "cuMemcpyDtoHAsync")) != AT_OK)
        return rc;
    return at_gpu_check(
        g, g->cu.cuMemcpyDtoHAsync_(b->host + AT_GUARD_BYTES, b->p + b->n, AT_GUARD_BYTES, g->stream),
        "cuMemcpyDtoHAsync");
}

int at_guarded_verdict(const at_guarded *b, const char *what, char *reason, size_t n)
{
    size_t before = 0, past = 0, len;
    for (size_t i = 0; i < AT_GUARD_BYTES; i++) /* the farthest changed byte before p */
        if (b->host[i] != AT_GUARD_PATTERN) {
            before = AT_GUARD_BYTES - i;
            break;
        }
    for (size_t i = AT_GUARD_BYTES; i-- > 0;) /* and past p + n */
        if (b->host[AT_GUARD_BYTES + i] != AT_GUARD_PATTERN) {
            past = i + 1;
            break;
        }
    if (!before && !past)
        return 0;
    len = strlen(reason);
    if (len + 1 >= n)
        return 1;
    if (before && past)
        snprintf(reason + len, n - len, "%swrote %zu bytes before and %zu bytes past the %s", len ? "; " : "",
                 before, past, what);
    else
        snprintf(reason + len, n - len, "%swrote %zu bytes %s the %s", len ? "; " : "",
                 before ? before : past, before ? "before" : "past", what);
    return 1;
}
