/*
** atk_open.c — opening and closing a context: the GPU (driver loaded at run
** time), the table read for that GPU, one entry per tuned shape chosen and
** loaded, the lookup index built; atk_open_table here, the file-based opens
** in atk_open_path.c (so a static engine using only compiled tables links
** no SQLite). Invariant: whatever the table holds,
** atk_open either returns a usable context (every call on fallback when
** nothing tuned is usable, with the reason in atk_report) or, for a problem
** with the GPU itself or under ATK_STRICT_OPEN, fails with *out = NULL.
*/
#include "atk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void atk__report(atk_ctx *ctx, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = strlen(line);
    if (ctx->report_len + len + 2 > ctx->report_cap) {
        size_t cap = (ctx->report_cap ? 2 * ctx->report_cap : 1024) + len + 2;
        char *p = realloc(ctx->report, cap);
        if (!p)
            return;
        ctx->report = p;
        ctx->report_cap = cap;
    }
    memcpy(ctx->report + ctx->report_len, line, len);
    ctx->report_len += len;
    ctx->report[ctx->report_len++] = '\n';
    ctx->report[ctx->report_len] = '\0';
}

static atk_ctx *ctx_new(unsigned flags)
{
    atk_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->flags = flags;
    for (int i = 0; i < ATK_NOPS; i++) {
        atk_counters *c = &ctx->count[i];
        atomic_init(&c->calls, 0);
        atomic_init(&c->tuned, 0);
        atomic_init(&c->inferred, 0);
        atomic_init(&c->bucket, 0);
        atomic_init(&c->fallback, 0);
        atomic_init(&c->missed, 0);
        atomic_init(&c->rejected, 0);
    }
    for (int i = 0; i < ATK_BLAS_HANDLES; i++)
        atomic_flag_clear(&ctx->blas[i].busy);
    return ctx;
}

/* The present GPU's identity and primary context (pushed on success). */
static int open_gpu(atk_ctx *ctx, int device)
{
    atk_driver *cu = &ctx->cu;
    atk_info *in = &ctx->info;
    int st, count = 0, major = 0, minor = 0;
    if ((st = atk__driver_load(cu)) != ATK_OK)
        return st;
    CUresult r = cu->cuInit_(0);
    if (r != CUDA_SUCCESS) {
        atk__cuda_check(NULL, cu, r, "cuInit");
        return atk__fail(NULL, ATK_ERR_NOGPU, "%s", atk__lastmsg());
    }
    if ((st = atk__cuda_check(NULL, cu, cu->cuDeviceGetCount_(&count), "cuDeviceGetCount")) != ATK_OK)
        return st;
    if (device < 0 || device >= count)
        return atk__fail(NULL, ATK_ERR_NOGPU, "cuda: no GPU %d (this machine has %d)", device, count);
    if ((st = atk__cuda_check(NULL, cu, cu->cuDeviceGet_(&ctx->dev, device), "cuDeviceGet")) != ATK_OK ||
        (st = atk__cuda_check(NULL, cu, cu->cuDeviceGetName_(in->device, (int)sizeof in->device, ctx->dev),
                              "cuDeviceGetName")) != ATK_OK ||
        (st = atk__cuda_check(NULL, cu,
                              cu->cuDeviceGetAttribute_(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                                        ctx->dev),
                              "cuDeviceGetAttribute")) != ATK_OK ||
        (st = atk__cuda_check(NULL, cu,
                              cu->cuDeviceGetAttribute_(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                                        ctx->dev),
                              "cuDeviceGetAttribute")) != ATK_OK ||
        (st = atk__cuda_check(NULL, cu,
                              cu->cuDeviceGetAttribute_(&in->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                                        ctx->dev),
                              "cuDeviceGetAttribute")) != ATK_OK ||
        (st = atk__cuda_check(NULL, cu, cu->cuDriverGetVersion_(&in->driver_version), "cuDriverGetVersion")) !=
            ATK_OK)
        return st;
    in->cc = 10 * major + minor;
    if (in->cc < 80) /* else the built-in norms' fatbins fail to load with NO_BINARY_FOR_GPU */
        return atk__fail(NULL, ATK_ERR_NOGPU,
                         "atk: GPU %d (%s) is sm_%d; atk needs sm_80 or newer (its kernels use bf16 conversions; the "
                         "built-in norms are built for sm_80..sm_90 and compute_90 PTX)",
                         device, in->device, in->cc);
    if ((st = atk__cuda_check(NULL, cu, cu->cuDevicePrimaryCtxRetain_(&ctx->cuctx, ctx->dev),
                              "cuDevicePrimaryCtxRetain")) != ATK_OK)
        return st;
    return atk__cuda_check(NULL, cu, cu->cuCtxPushCurrent_(ctx->cuctx), "cuCtxPushCurrent");
}

static void pop_ctx(atk_ctx *ctx)
{
    CUcontext c;
    ctx->cu.cuCtxPopCurrent_(&c);
}

int atk__open_common(const char *path, const atk_table *table, atk_reader reader, int device, const atk_gpu_id *dry,
                     unsigned flags, atk_ctx **out)
{
    atk_rows rows = {0};
    atk_sources src = {0};
    atk_ctx *ctx = NULL;
    int st = ATK_OK, pushed = 0;
    if (!out)
        return atk__fail(NULL, ATK_ERR_USAGE, "atk_open: NULL out");
    *out = NULL;
    if (!(ctx = ctx_new(flags)))
        return atk__fail(NULL, ATK_ERR_NOMEM, "atk: out of memory");
    atk_info *in = &ctx->info;
    if (dry) {
        if (!dry->name || !dry->name[0] || dry->cc < 10 || dry->sms < 0) {
            st = atk__fail(NULL, ATK_ERR_USAGE, "atk_open_dry: the GPU needs a name, a cc and an SM count");
            goto fail;
        }
        ctx->dry = in->dry = 1;
        snprintf(in->device, sizeof in->device, "%s", dry->name);
        in->cc = dry->cc;
        in->sms = dry->sms;
        in->driver_version = dry->driver_version;
    } else {
        if ((st = open_gpu(ctx, device)) != ATK_OK)
            goto fail;
        pushed = 1;
        if ((st = atk__fallback_load(ctx)) != ATK_OK || (st = atk__blas_create(ctx)) != ATK_OK)
            goto fail;
    }
    const char *what = path ? path : "the compiled-in table";
    atk__report(ctx, "atk: %s (sm_%d, %d SMs, driver %d)%s, table %s", in->device, in->cc, in->sms,
                in->driver_version, ctx->dry ? " [dry: no GPU is used]" : "", what);
    int rst = reader(path, table, in->device, in->cc, in->sms, &rows);
    if (rst == ATK_ERR_NOMEM) {
        st = rst;
        goto fail;
    }
    if (rst != ATK_OK) {
        char why[1024];
        snprintf(why, sizeof why, "%s", atk__lastmsg());
        atk__rows_free(&rows);
        atk__report(ctx, "  table unusable: %s", why);
        if (flags & ATK_STRICT_OPEN) {
            st = atk__fail(NULL, ATK_ERR_TABLE, "%s", why);
            goto fail;
        }
    }
    src.table = table;
    if (!table)
        src.dir = getenv("ATK_TEMPLATES");
    in->rows = rows.total;
    if ((st = atk__ctx_build(ctx, &rows, &src)) != ATK_OK)
        goto fail;
    if (rst == ATK_OK && in->all_fallback) {
        char why[256];
        if (!in->for_this_gpu)
            snprintf(why, sizeof why, "nothing tuned for this GPU (%zu entries for other GPUs)", in->rows);
        else
            snprintf(why, sizeof why, "none of the %zu entries for this GPU is usable", in->for_this_gpu);
        atk__report(ctx, "  %s", why);
        if (flags & ATK_STRICT_OPEN) {
            st = atk__fail(NULL, ATK_ERR_TABLE, "%s: %s on %s (sm_%d)", what, why, in->device, in->cc);
            goto fail;
        }
    }
    if (in->all_fallback)
        atk__report(ctx, "  every call falls back (cuBLAS for GEMV, the naive fused kernel for norms)");
    atk__rows_free(&rows);
    atk__sources_free(&src);
    if (pushed)
        pop_ctx(ctx);
    *out = ctx;
    atk__clear(NULL);
    return ATK_OK;
fail:
    if (st != ATK_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", atk__lastmsg());
        atk__rows_free(&rows);
        atk__sources_free(&src);
        if (pushed)
            pop_ctx(ctx);
        atk_close(ctx);
        atk__fail(NULL, st, "%s", msg);
    }
    return st;
}

static int read_table(const char *path, const atk_table *t, const char *name, int cc, int sms, atk_rows *rows)
{
    (void)path;
    return atk__read_table(t, name, cc, sms, rows);
}

int atk_open_table(const atk_table *table, int device, unsigned flags, atk_ctx **out)
{
    if (!table) {
        if (out)
            *out = NULL;
        return atk__fail(NULL, ATK_ERR_USAGE, "atk_open_table: NULL table");
    }
    return atk__open_common(NULL, table, read_table, device, NULL, flags, out);
}

void atk_close(atk_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->cu.lib && ctx->cuctx) {
        /* pop only what was pushed: a failed push must not pop the caller's context */
        int pushed = ctx->cu.cuCtxPushCurrent_(ctx->cuctx) == CUDA_SUCCESS;
        atk__blas_destroy(ctx);
        for (size_t i = 0; i < ctx->nentries; i++)
            if (ctx->entries[i].mod)
                ctx->cu.cuModuleUnload_(ctx->entries[i].mod);
        for (int o = 0; o < ATK_NOPS; o++)
            for (int d = 0; d < 2; d++)
                if (ctx->naive_mod[o][d])
                    ctx->cu.cuModuleUnload_(ctx->naive_mod[o][d]);
        for (int d = 0; d < 2; d++)
            if (ctx->silu_mod[d])
                ctx->cu.cuModuleUnload_(ctx->silu_mod[d]);
        if (pushed)
            pop_ctx(ctx);
        ctx->cu.cuDevicePrimaryCtxRelease_(ctx->dev);
    }
    /* the driver library stays loaded: cuBLAS (the CUDA runtime) may still
    ** use it, and unloading it under the runtime is not safe */
    atk__clear(ctx);
    free(ctx->entries);
    free(ctx->index);
    free(ctx->memo);
    free(ctx->report);
    free(ctx);
}
