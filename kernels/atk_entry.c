/*
** atk_entry.c — what a loaded winner is to the runtime: its op, dtype and
** shape parsed from the key, its strategy recognised by kernel name, its
** TP_* parameters, and the launch geometry of its kernel for any shape.
** [LAUNCH_GEOMETRY] The grid/block rules below copy search/gemv.lua and
** search/<norm op>.lua (their grid and block functions): change both
** together. An entry whose stored geometry does not recompute is used for
** its own shape only, so a drifted copy cannot launch a wrong grid.
*/
#include "atk_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A decimal in 1..INT_MAX, no sign, no leading zero; advances *s. */
static int parse_dim(const char **s, int *out)
{
    const char *p = *s;
    long long v = 0;
    if (*p < '1' || *p > '9')
        return 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v > INT_MAX)
            return 0;
    }
    *out = (int)v;
    *s = p;
    return 1;
}

int atk__parse_shape(const char *text, int rank, int d[3])
{
    const char *p = text;
    d[2] = 0;
    for (int i = 0; i < rank; i++) {
        if (i && *p++ != 'x')
            return 0;
        if (!parse_dim(&p, &d[i]))
            return 0;
    }
    return *p == '\0';
}

/* "TP_A=1 TP_B=2": the values atk reads; others are ignored. */
static int parse_params(const char *text, atk_params *p)
{
    static const struct {
        const char *name;
        size_t off;
    } known[] = {
        {"TP_VEC", offsetof(atk_params, vec)},
        {"TP_WARPS", offsetof(atk_params, warps)},
        {"TP_ROWS", offsetof(atk_params, rows)},
        {"TP_WPR", offsetof(atk_params, wpr)},
        {"TP_THREADS_PER_ROW", offsetof(atk_params, tpr)},
        {"TP_ROWS_PER_BLOCK", offsetof(atk_params, rpb)},
        {"TP_THREADS", offsetof(atk_params, threads)},
        {"TP_SPLIT", offsetof(atk_params, split)},
        {"TP_PDL", offsetof(atk_params, pdl)},
        {"TP_OP", offsetof(atk_params, op)},
        {"TP_WFP32", offsetof(atk_params, wfp32)},
        {"TP_DTYPE", offsetof(atk_params, dtype)},
        {"TP_TOKENS", offsetof(atk_params, tokens)},
        {"TP_MT", offsetof(atk_params, mt)},
        {"TP_NT", offsetof(atk_params, nt)},
        {"TP_KSPLIT", offsetof(atk_params, ksplit)},
        {"TP_ADD", offsetof(atk_params, add)},
        {"TP_NORM", offsetof(atk_params, norm)},
        {"TP_SWIGLU", offsetof(atk_params, swiglu)},
        {"TP_RES", offsetof(atk_params, res)},
    };
    memset(p, 0, sizeof *p);
    for (const char *s = text; *s;) {
        while (*s == ' ')
            s++;
        if (!*s)
            break;
        const char *eq = strchr(s, '='), *end = strchr(s, ' ');
        if (!end)
            end = s + strlen(s);
        if (!eq || eq > end)
            return 0;
        char *num_end;
        long v = strtol(eq + 1, &num_end, 10);
        if (num_end != end || v < INT_MIN || v > INT_MAX)
            return 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if ((size_t)(eq - s) == strlen(known[i].name) && !strncmp(s, known[i].name, (size_t)(eq - s)))
                *(int *)((char *)p + known[i].off) = (int)v;
        s = end;
    }
    return 1;
}

static int cdiv(int a, int b) { return (int)(((long long)a + b - 1) / b); }

/* search/gemv.lua's staged_z_fits: the staged z within 46 KiB */
#define ATK_STAGED_MAX (46u * 1024u)

unsigned atk__entry_smem(const atk_entry *e, int K)
{
    if (e->p.res != 2)
        return e->smem;
    long long b = (long long)K * (e->strategy == ATK_S_GEMV_MULTI_TOKEN ? e->p.tokens : 1) * ATK_ELEM_BYTES;
    return b > 0 && b <= ATK_STAGED_MAX ? (unsigned)b : 0;
}

int atk__entry_geometry(const atk_entry *e, int M, int K, int N, unsigned grid[3], unsigned block[3])
{
    const atk_params *p = &e->p;
    int bn, threads, ks = p->ksplit > 0 ? p->ksplit : 1;
    if (M < 1 || K < 1 || p->vec < 1 || K % p->vec != 0) /* vec_divides_k / vec_divides_h */
        return 0;
    if (p->res == 2 && !atk__entry_smem(e, K)) /* staged_z_fits */
        return 0;
    switch (e->strategy) {
    case ATK_S_GEMV_MULTI_TOKEN: /* grid {cdiv(N, W/WPR*R), cdiv(M, TOKENS), 1}, block {32 W} */
        if (N < 1 || p->warps < 1 || p->rows < 1 || p->tokens < 1 || p->wpr < 1 || p->warps % p->wpr ||
            cdiv(M, p->tokens) > 65535)
            return 0;
        bn = p->warps / p->wpr * p->rows;
        grid[0] = (unsigned)cdiv(N, bn), grid[1] = (unsigned)cdiv(M, p->tokens), grid[2] = 1;
        block[0] = 32u * (unsigned)p->warps, block[1] = block[2] = 1;
        return 1;
    case ATK_S_GEMV_MMA:      /* grid {cdiv(N, W/WPR*16*MT) * KSPLIT, cdiv(M, 8 NT), 1}, block {32 W} */
    case ATK_S_GEMV_MMA_BULK: /* grid {cdiv(N, 16*MT) * KSPLIT, cdiv(M, 8 NT), 1}, block {32 W} */
        if (N < 1 || p->warps < 1 || p->mt < 1 || p->nt < 1 || cdiv(M, 8 * p->nt) > 65535)
            return 0;
        if (e->strategy == ATK_S_GEMV_MMA && (p->wpr < 1 || p->warps % p->wpr))
            return 0;
        if (e->strategy == ATK_S_GEMV_MMA_BULK && K % 8)
            return 0;
        bn = e->strategy == ATK_S_GEMV_MMA ? p->warps / p->wpr * 16 * p->mt : 16 * p->mt;
        if ((long long)cdiv(N, bn) * ks > INT_MAX)
            return 0;
        grid[0] = (unsigned)(cdiv(N, bn) * ks), grid[1] = (unsigned)cdiv(M, 8 * p->nt), grid[2] = 1;
        block[0] = 32u * (unsigned)p->warps, block[1] = block[2] = 1;
        return 1;
    case ATK_S_GEMV_WARP_ROW: /* grid {cdiv(N, W*R), M, 1}, block {32 W} */
    case ATK_S_GEMV_SPLITK:   /* grid {cdiv(N, W/WPR*R), M, 1}, block {32 W} */
        if (N < 1 || M > 65535 || p->warps < 1 || p->rows < 1)
            return 0;
        if (e->strategy == ATK_S_GEMV_SPLITK && (p->wpr < 1 || p->warps % p->wpr))
            return 0;
        bn = e->strategy == ATK_S_GEMV_SPLITK ? p->warps / p->wpr * p->rows : p->warps * p->rows;
        grid[0] = (unsigned)cdiv(N, bn), grid[1] = (unsigned)M, grid[2] = 1;
        block[0] = 32u * (unsigned)p->warps, block[1] = block[2] = 1;
        return 1;
    case ATK_S_NORM_WARP_ROWS: /* grid {cdiv(T, RPB)}, block {TPR * RPB} */
        if (p->tpr < 1 || p->rpb < 1 || (threads = p->tpr * p->rpb) > 1024 || threads % 32)
            return 0;
        grid[0] = (unsigned)cdiv(M, p->rpb), grid[1] = grid[2] = 1;
        block[0] = (unsigned)threads, block[1] = block[2] = 1;
        return 1;
    case ATK_S_NORM_BLOCK_ROW: /* grid {T}, block {THREADS} */
        if (p->threads < 32 || p->threads > 1024)
            return 0;
        grid[0] = (unsigned)M, grid[1] = grid[2] = 1;
        block[0] = (unsigned)p->threads, block[1] = block[2] = 1;
        return 1;
    case ATK_S_NORM_SPLIT_ROW: /* grid {SPLIT, T}, block {THREADS} */
        if (p->split < 1 || M > 65535 || p->threads < 32 || p->threads > 1024)
            return 0;
        grid[0] = (unsigned)p->split, grid[1] = (unsigned)M, grid[2] = 1;
        block[0] = (unsigned)p->threads, block[1] = block[2] = 1;
        return 1;
    default:
        return 0;
    }
}

int atk__entry_init(atk_entry *e, const atk_row *r, char *why, size_t len)
{
    static const struct {
        const char *kernel;
        int strategy, gemv;
    } kernels[] = {
        {"gemv_warp_row", ATK_S_GEMV_WARP_ROW, 1},   {"gemv_splitk", ATK_S_GEMV_SPLITK, 1},
        {"gemv_multi_token", ATK_S_GEMV_MULTI_TOKEN, 1}, {"gemv_mma", ATK_S_GEMV_MMA, 1},
        {"gemv_mma_bulk", ATK_S_GEMV_MMA_BULK, 1},
        {"norm_warp_rows", ATK_S_NORM_WARP_ROWS, 0}, {"norm_block_row", ATK_S_NORM_BLOCK_ROW, 0},
        {"norm_split_row", ATK_S_NORM_SPLIT_ROW, 0},
    };
    int d[3];
    memset(e, 0, sizeof *e);
    if ((e->op = atk__op_parse(r->op)) < 0) {
        snprintf(why, len, "op '%s' is not one atk launches", r->op);
        return 0;
    }
    if ((e->dtype = atk__dtype_parse(r->dtype)) < 0) {
        snprintf(why, len, "dtype '%s' is not one atk launches", r->dtype);
        return 0;
    }
    if (!atk__parse_shape(r->shape, atk__is_gemv(e->op) ? 3 : 2, d)) {
        snprintf(why, len, "shape '%s' is not a canonical %s", r->shape, atk__is_gemv(e->op) ? "MxKxN" : "TxH");
        return 0;
    }
    e->M = d[0], e->K = d[1], e->N = d[2];
    snprintf(e->strategy_name, sizeof e->strategy_name, "%s", r->strategy);
    snprintf(e->kernel, sizeof e->kernel, "%s", r->kernel);
    snprintf(e->params, sizeof e->params, "%s", r->params);
    snprintf(e->shape, sizeof e->shape, "%s", r->shape);
    snprintf(e->key_sha, sizeof e->key_sha, "%s", r->key_sha);
    memcpy(e->grid, r->grid, sizeof e->grid);
    memcpy(e->block, r->block, sizeof e->block);
    e->smem = r->smem;
    /* the baseline won: launch it. For norms the tuner stores that answer
    ** as strategy "naive" with the norm_naive cubin, the same source as
    ** atk's built-in fallback, so the built-in one serves it (no second
    ** module; fp32-weight rows are refused below). [NAIVE_WINNER]
    ** tuner/op_norm.c writes it. A fused op's baseline answer is strategy
    ** "unfused" (params "atk unfused sequence", no kernel): the runtime's
    ** own unfused sequence serves it. [UNFUSED_WINNER] tuner/op_fused.c. */
    if ((!r->kernel[0] && !r->cubin_size) ||
        (!atk__is_gemv(e->op) && !strcmp(r->strategy, "naive") && !strstr(r->params, "TP_WFP32=1")) ||
        (atk__is_fused(e->op) && !strcmp(r->strategy, "unfused"))) {
        e->strategy = ATK_S_BASELINE;
        e->pdl = 0;
        return 1;
    }
    if (!parse_params(r->params, &e->p)) {
        snprintf(why, len, "params '%s' are not TP_NAME=integer pairs", r->params);
        return 0;
    }
    e->pdl = e->p.pdl != 0;
    if (!r->kernel[0] || !r->cubin_size) {
        snprintf(why, len, "%s without %s", r->kernel[0] ? "a kernel" : "a cubin",
                 r->kernel[0] ? "a cubin" : "an entry point");
        return 0;
    }
    if (!r->grid[0] || !r->grid[1] || !r->grid[2] || !r->block[0] || !r->block[1] || !r->block[2]) {
        snprintf(why, len, "launch shape has a zero dimension");
        return 0;
    }
    e->strategy = ATK_S_UNKNOWN;
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (!strcmp(r->kernel, kernels[i].kernel) && kernels[i].gemv == (atk__is_gemv(e->op)))
            e->strategy = kernels[i].strategy;
    /* a gemv_add kernel adds into the residual, a gemv kernel overwrites y:
    ** one launched for the other would corrupt the engine's state */
    if (atk__is_gemv(e->op) && e->p.add != (e->op == ATK_OP_GEMV_ADD)) {
        snprintf(why, len, "TP_ADD=%d is not %s's (TP_ADD=%d)", e->p.add, atk_op_name(e->op),
                 e->op == ATK_OP_GEMV_ADD);
        return 0;
    }
    /* the fused forms take 9 arguments (11 with TP_RES) and compute another
    ** function: a kernel launched for an op whose TP_NORM / TP_SWIGLU /
    ** TP_RES differ would read its arguments wrongly */
    if (atk__is_gemv(e->op) && e->p.norm != atk__fused_norm(e->op)) {
        snprintf(why, len, "TP_NORM=%d is not %s's (TP_NORM=%d)", e->p.norm, atk_op_name(e->op),
                 atk__fused_norm(e->op));
        return 0;
    }
    if (atk__is_gemv(e->op) && e->p.swiglu != atk__fused_swiglu(e->op)) {
        snprintf(why, len, "TP_SWIGLU=%d is not %s's (TP_SWIGLU=%d)", e->p.swiglu, atk_op_name(e->op),
                 atk__fused_swiglu(e->op));
        return 0;
    }
    if (atk__is_gemv(e->op) && (e->p.res != 0) != atk__fused_res(e->op)) { /* 1 and 2: the same arguments */
        snprintf(why, len, "TP_RES=%d is not %s's (%s)", e->p.res, atk_op_name(e->op),
                 atk__fused_res(e->op) ? "TP_RES=1 or 2" : "TP_RES=0");
        return 0;
    }
    if (e->p.res && e->M > ATK_FUSED_MAX_GROUPS) { /* it serves M <= its own: one counter per token group */
        snprintf(why, len, "a residual-add kernel at M=%lld: they serve M <= %d (the scratch's counters)",
                 (long long)e->M, ATK_FUSED_MAX_GROUPS);
        return 0;
    }
    if (!atk__is_gemv(e->op) && e->p.wfp32) {
        snprintf(why, len, "fp32 norm weights (TP_WFP32=1): atk's norm calls take weights of the element dtype");
        return 0;
    }
    if (!atk__is_gemv(e->op) && e->strategy != ATK_S_UNKNOWN && e->p.op != e->op - 1) {
        snprintf(why, len, "TP_OP=%d is not %s", e->p.op, atk_op_name(e->op));
        return 0;
    }
    unsigned g[3], b[3];
    /* a kernel atk knows must be valid for its own shape (TP_VEC divides K
    ** or H, ...): the tuner never stores one that is not, and launching it
    ** would read misaligned vectors (a sticky error) */
    if (e->strategy != ATK_S_UNKNOWN && !atk__entry_geometry(e, e->M, e->K, e->N, g, b)) {
        snprintf(why, len, "%s with %s is not valid for its own shape (TP_VEC=%d must divide %s; warps, rows, "
                 "threads in range; a staged z within %u B)", r->kernel, r->params, e->p.vec,
                 atk__is_gemv(e->op) ? "K" : "H", ATK_STAGED_MAX);
        return 0;
    }
    /* a staged kernel launched with less shared memory than its z reads
    ** past it (a sticky error): the row must hold its K's size */
    if (e->p.res == 2 && e->smem != atk__entry_smem(e, e->K)) {
        snprintf(why, len, "TP_RES=2 stages %u B of z at K=%lld, but the row's smem is %u", atk__entry_smem(e, e->K),
                 (long long)e->K, e->smem);
        return 0;
    }
    int recomputes = e->strategy != ATK_S_UNKNOWN && !memcmp(g, e->grid, sizeof g) && !memcmp(b, e->block, sizeof b) &&
                     atk__entry_smem(e, e->K) == e->smem;
    /* a batch kernel serves smaller M of its own K, N: only the grid's y
    ** (token groups) changes, and its tokens past M are masked. Across K
    ** and N only the strategies whose validity rule above is complete (the
    ** M=1 ones, multi_token and the norms): mma's TP_XK, TP_KSPLIT and
    ** mma_bulk's ring are sized for their own K. */
    e->batch = recomputes && (!atk__is_gemv(e->op) || e->strategy == ATK_S_GEMV_MULTI_TOKEN ||
                              e->strategy == ATK_S_GEMV_MMA || e->strategy == ATK_S_GEMV_MMA_BULK);
    e->inferable = recomputes && (e->smem == 0 || e->p.res == 2) && e->strategy != ATK_S_GEMV_MMA &&
                   e->strategy != ATK_S_GEMV_MMA_BULK;
    return 1;
}
