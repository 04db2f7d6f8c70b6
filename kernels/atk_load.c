/*
** atk_load.c — everything atk_open loads onto the GPU: each entry's cubin
** (rebuilt with NVRTC from its template when it does not load and the
** source is at hand), the built-in naive fused norms and the fused ops'
** SiLU-mul (fatbins embedded at build time), and the cuBLAS handles with their workspaces. After this
** nothing is loaded or allocated again until atk_close.
*/
#include "atk_internal.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Generated at build time from templates/baseline/norm_naive.cu (see
** kernels/CMakeLists.txt): [TP_OP][TP_DTYPE-1], sm_80..sm_90 + PTX. */
extern const unsigned char *const atk__naive_fatbin[4][2];
/* The same from templates/baseline/silu_mul.cu: [TP_DTYPE-1]. */
extern const unsigned char *const atk__silu_fatbin[2];

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (16L << 20) && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1))) {
        if (fread(buf, 1, (size_t)n, f) == (size_t)n)
            buf[n] = '\0';
        else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

void atk__sources_free(atk_sources *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->names[i]);
        free(s->texts[i]);
    }
    free(s->names);
    free(s->texts);
    s->names = s->texts = NULL;
    s->n = 0;
}

/* The folder's common/ *.cuh headers, once. */
static void read_dir_headers(atk_sources *s)
{
    char path[4096];
    struct dirent *de;
    DIR *d;
    s->dir_read = 1;
    snprintf(path, sizeof path, "%s/common", s->dir);
    if (!(d = opendir(path)))
        return;
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 4, ".cuh") || s->n >= 64)
            continue;
        char **nn = realloc(s->names, (size_t)(s->n + 1) * sizeof *nn);
        if (!nn)
            break;
        s->names = nn;
        char **tt = realloc(s->texts, (size_t)(s->n + 1) * sizeof *tt);
        if (!tt)
            break;
        s->texts = tt;
        snprintf(path, sizeof path, "%s/common/%s", s->dir, de->d_name);
        char *text = slurp(path), *name = malloc(n + 8);
        if (!text || !name) {
            free(text);
            free(name);
            continue;
        }
        snprintf(name, n + 8, "common/%s", de->d_name);
        s->names[s->n] = name;
        s->texts[s->n] = text;
        s->n++;
    }
    closedir(d);
}

/* A plain relative template name (no "..", not absolute). */
static int safe_name(const char *name)
{
    return name[0] && name[0] != '/' && !strstr(name, "..");
}

/* The template source for r, owned by *own when read from the folder. */
static const char *find_source(const atk_row *r, atk_sources *s, char **own)
{
    char path[4096];
    *own = NULL;
    if (r->source)
        return r->source;
    if (!s->dir || !safe_name(r->template_name))
        return NULL;
    snprintf(path, sizeof path, "%s/%s", s->dir, r->template_name);
    return *own = slurp(path);
}

/* Loads a cubin and finds e's kernel; 0 with why[] on failure. A borrowed
** image (a compiled table's byte array, 1-byte aligned) that is not 16-byte
** aligned is loaded from an aligned copy: the driver reads ELF headers out
** of it, and nothing documents that it accepts any alignment (defensive). */
static int load_image(atk_ctx *ctx, atk_entry *e, const void *image, size_t size, char *why, size_t len)
{
    atk_driver *cu = &ctx->cu;
    void *copy = NULL;
    if ((uintptr_t)image % 16u) {
        if (!(copy = malloc(size))) {
            snprintf(why, len, "atk: out of memory (copying a cubin of %zu bytes)", size);
            return 0;
        }
        memcpy(copy, image, size);
        image = copy;
    }
    CUresult r = cu->cuModuleLoadData_(&e->mod, image);
    if (r == CUDA_SUCCESS)
        r = cu->cuModuleGetFunction_(&e->fn, e->mod, e->kernel);
    if (r == CUDA_SUCCESS && e->smem > 48u * 1024)
        r = cu->cuFuncSetAttribute_(e->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)e->smem);
    /* the image is freed only after cuModuleGetFunction: with lazy loading
    ** (the default since CUDA 12.2) that is when the kernel is loaded */
    free(copy);
    if (r == CUDA_SUCCESS)
        return 1;
    atk__cuda_check(NULL, cu, r, "loading the cubin");
    snprintf(why, len, "%s", atk__lastmsg());
    if (e->mod)
        cu->cuModuleUnload_(e->mod);
    e->mod = NULL;
    e->fn = NULL;
    return 0;
}

int atk__entry_load(atk_ctx *ctx, atk_entry *e, const atk_row *r, atk_sources *src, char *why, size_t len)
{
    char first[512], *own = NULL;
    void *cubin = NULL;
    size_t size = 0;
    int ok = 0;
    if (ctx->dry || e->strategy == ATK_S_BASELINE)
        return 1; /* dry: the sha256 was checked; baseline: nothing to load */
    if (load_image(ctx, e, r->cubin, r->cubin_size, first, sizeof first))
        return 1;
    if (ctx->flags & ATK_NO_NVRTC) {
        snprintf(why, len, "%s (ATK_NO_NVRTC: not recompiled)", first);
        return 0;
    }
    if (src->dir && !src->dir_read)
        read_dir_headers(src);
    const char *text = find_source(r, src, &own);
    if (!text) {
        snprintf(why, len, "%s; no template source for %s to recompile from", first,
                 r->template_name[0] ? r->template_name : "it");
        goto done;
    }
    if (!atk__nvrtc_compile(r->template_name, text, src, r->options, r->params, &cubin, &size, why, len))
        goto done;
    if (!(ok = load_image(ctx, e, cubin, size, why, len)))
        goto done;
    e->recompiled = 1;
done:
    free(own);
    free(cubin);
    return ok;
}

int atk__fallback_load(atk_ctx *ctx)
{
    int st;
    for (int op = ATK_OP_RMSNORM; op <= ATK_OP_ADD_GEMMA_RMSNORM; op++) /* the norms */
        for (int d = 0; d < 2; d++) {
            if ((st = atk__cuda_check(NULL, &ctx->cu,
                                      ctx->cu.cuModuleLoadData_(&ctx->naive_mod[op][d], atk__naive_fatbin[op - 1][d]),
                                      "loading the built-in norm_naive")) != ATK_OK ||
                (st = atk__cuda_check(NULL, &ctx->cu,
                                      ctx->cu.cuModuleGetFunction_(&ctx->naive_fn[op][d], ctx->naive_mod[op][d],
                                                                   "norm_naive"),
                                      "cuModuleGetFunction(norm_naive)")) != ATK_OK)
                return st;
        }
    for (int d = 0; d < 2; d++)
        if ((st = atk__cuda_check(NULL, &ctx->cu, ctx->cu.cuModuleLoadData_(&ctx->silu_mod[d], atk__silu_fatbin[d]),
                                  "loading the built-in silu_mul")) != ATK_OK ||
            (st = atk__cuda_check(NULL, &ctx->cu, ctx->cu.cuModuleGetFunction_(&ctx->silu_fn[d], ctx->silu_mod[d],
                                                                                 "silu_mul"),
                                  "cuModuleGetFunction(silu_mul)")) != ATK_OK)
            return st;
    return ATK_OK;
}

int atk__blas_create(atk_ctx *ctx)
{
    for (int i = 0; i < ATK_BLAS_HANDLES; i++) {
        atk_blas *b = &ctx->blas[i];
        cublasStatus_t s = cublasCreate(&b->h);
        if (s != CUBLAS_STATUS_SUCCESS) {
            b->h = NULL;
            return atk__fail(NULL, ATK_ERR_CUDA, "cublas: cublasCreate: status %d", (int)s);
        }
        int st = atk__cuda_check(NULL, &ctx->cu, ctx->cu.cuMemAlloc_(&b->workspace, ATK_BLAS_WORKSPACE),
                                 "cuMemAlloc (cuBLAS workspace)");
        if (st != ATK_OK)
            return st;
        b->stream = NULL;
        b->stream_set = b->ws_set = b->has_bound = 0;
        atomic_init(&b->bound, (uintptr_t)0);
    }
    return ATK_OK;
}

void atk__blas_destroy(atk_ctx *ctx)
{
    for (int i = 0; i < ATK_BLAS_HANDLES; i++) {
        atk_blas *b = &ctx->blas[i];
        if (b->h)
            cublasDestroy(b->h);
        if (b->workspace)
            ctx->cu.cuMemFree_(b->workspace);
        b->h = NULL;
        b->workspace = 0;
    }
}
