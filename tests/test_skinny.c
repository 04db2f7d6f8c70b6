/*
** test_skinny.c — the small-batch (M = 2..16) GEMV strategies without a GPU
** (label nvrtc): a host emulation of gemv_mma.cu's fragment mapping and a
** port of gemv_multi_token.cu's indexing, each against a plain matmul;
** which strategies search/gemv.lua keeps live at which M, with the M=1
** space unchanged; and every distinct live candidate of the
** M > 1 space compiling for sm_80, sm_89 and sm_90, bf16 and fp16.
*/
#include "autotune.h"
#include "tinytest.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* ------------------------------------------------ mma fragment emulation */

/* One warp's mma.m16n8k16 as the PTX ISA defines its fragments (g = lane
** >> 2, t = lane & 3): a[lane][r] holds A elements (row, col) per the
** layout in templates/common/mma.cuh, two per register (lo, hi). D += A B. */
typedef struct {
    float a[32][4][2], b[32][2][2], d[32][4];
} warp_mma;

static void a_coord(int lane, int reg, int half, int *row, int *col)
{
    int g = lane >> 2, t = lane & 3;
    *row = g + 8 * (reg & 1);
    *col = 2 * t + half + 8 * (reg >> 1);
}

static void b_coord(int lane, int reg, int half, int *row, int *col)
{
    int g = lane >> 2, t = lane & 3;
    *row = 2 * t + half + 8 * reg;
    *col = g;
}

static void d_coord(int lane, int i, int *row, int *col)
{
    int g = lane >> 2, t = lane & 3;
    *row = g + 8 * (i >> 1);
    *col = 2 * t + (i & 1);
}

static void mma_exec(warp_mma *w)
{
    float A[16][16], B[16][8], D[16][8];
    int r, c;
    for (int l = 0; l < 32; l++)
        for (int reg = 0; reg < 4; reg++)
            for (int h = 0; h < 2; h++) {
                a_coord(l, reg, h, &r, &c);
                A[r][c] = w->a[l][reg][h];
            }
    for (int l = 0; l < 32; l++)
        for (int reg = 0; reg < 2; reg++)
            for (int h = 0; h < 2; h++) {
                b_coord(l, reg, h, &r, &c);
                B[r][c] = w->b[l][reg][h];
            }
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++) {
            d_coord(l, i, &r, &c);
            D[r][c] = w->d[l][i];
        }
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++)
            for (int k = 0; k < 16; k++)
                D[i][j] += A[i][k] * B[k][j];
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++) {
            d_coord(l, i, &r, &c);
            w->d[l][i] = D[r][c];
        }
}

/* The layout maps every element of A, B and D to exactly one (lane,
** register, half): a check of the coordinate functions themselves. */
static void fragment_layout_is_a_bijection(void)
{
    int seenA[16][16] = {{0}}, seenB[16][8] = {{0}}, seenD[16][8] = {{0}}, r, c;
    for (int l = 0; l < 32; l++) {
        for (int reg = 0; reg < 4; reg++)
            for (int h = 0; h < 2; h++) {
                a_coord(l, reg, h, &r, &c);
                seenA[r][c]++;
            }
        for (int reg = 0; reg < 2; reg++)
            for (int h = 0; h < 2; h++) {
                b_coord(l, reg, h, &r, &c);
                seenB[r][c]++;
            }
        for (int i = 0; i < 4; i++) {
            d_coord(l, i, &r, &c);
            seenD[r][c]++;
        }
    }
    int bad = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            bad += seenA[i][j] != 1 || (j < 8 && (seenB[i][j] != 1 || seenD[i][j] != 1));
    CHECK_EQ_INT(bad, 0);
}

/* [MMA_PERM] Host copy of at_mma_phys_k (templates/common/mma.cuh). */
static int phys_k(int G, int m, int kk)
{
    const int t = (kk & 7) >> 1, hi = kk >> 3, e = kk & 1;
    return t * G + m * 4 + hi * 2 + e;
}

/* The documented permutation is a bijection of each step's k, and it is
** what at_mma_step's register choice implements: register r, half h of
** lane (g, t) in mma m takes element 4m + 2*(r >> 1) + h of the thread's
** k-group (A: words 2m, 2m+1 of rows g / g+8; B: of token g). */
static void k_permutation_matches_registers(void)
{
    int bad = 0;
    for (int G = 4; G <= 8; G += 4) {
        int seen[32] = {0};
        for (int m = 0; m < G / 4; m++)
            for (int kk = 0; kk < 16; kk++)
                seen[phys_k(G, m, kk)]++;
        for (int k = 0; k < 4 * G; k++)
            bad += seen[k] != 1;
        for (int m = 0; m < G / 4; m++)
            for (int lane = 0; lane < 32; lane++) {
                const int t = lane & 3;
                int r, c;
                for (int reg = 0; reg < 4; reg++)
                    for (int h = 0; h < 2; h++) {
                        a_coord(lane, reg, h, &r, &c);
                        bad += phys_k(G, m, c) != t * G + 4 * m + 2 * (reg >> 1) + h;
                    }
                for (int reg = 0; reg < 2; reg++)
                    for (int h = 0; h < 2; h++) {
                        b_coord(lane, reg, h, &r, &c);
                        bad += phys_k(G, m, r) != t * G + 4 * m + 2 * reg + h;
                    }
            }
    }
    CHECK_EQ_INT(bad, 0);
}

/* A host port of gemv_mma.cu's index arithmetic (the kernel's parameters as
** fields; [MMA_PERM] k-groups as in common/mma.cuh). Elements are small
** integers in float, so every sum is exact and any misplaced element shows. */
typedef struct {
    int warps, wpr, mt, nt, vec, unroll, ksplit; /* ksplit 0 reads as 1 */
} mma_cfg;

/* The AT_MMA_G elements of a k-group at row + k, as at_kgroup_load_w/_x:
** with guard (GUARD), a vector at or past `left` elements is not read;
** without, every vector is. Word i holds elements 2i (lo) and 2i+1 (hi).
** A read past the row's K elements (the kernel's GUARD=false path reading
** into the next row or past the array) counts in *oob. */
static void kgroup(const float *row, int k, int left, int guard, int K, int G, int vec, int ok, float out[8],
                   int *oob)
{
    for (int i = 0; i < G; i++)
        out[i] = 0.0f;
    for (int v = 0; v < G / vec; v++)
        if (ok && (!guard || v * vec < left))
            for (int e = 0; e < vec; e++) {
                const int kk = k + v * vec + e;
                if (kk < 0 || kk >= K)
                    (*oob)++;
                else
                    out[v * vec + e] = row[kk];
            }
}

static void emulate_mma(const mma_cfg *c, int M, int K, int N, const float *x, const float *W, float *y, int *oob)
{
    const int G = c->vec == 8 ? 8 : 4, KSTEP = 4 * G, PER = G / 4;
    const int groups = c->warps / c->wpr, block_n = groups * 16 * c->mt, ks = c->ksplit > 1 ? c->ksplit : 1;
    const int gx = (N + block_n - 1) / block_n, gy = (M + 8 * c->nt - 1) / (8 * c->nt);
    const int nfull = K / KSTEP, nsteps = (K + KSTEP - 1) / KSTEP, nchunks = nfull / c->unroll;
    const int nslices = ks * c->wpr;
    /* acc[rank][warp][mt][nt] as one warp's D fragments; a cluster's
    ** blocks are emulated together (rank = blockIdx.x % TP_KSPLIT) */
    const int nacc = c->mt * c->nt * 4, npart = groups * (c->wpr - 1) * nacc * 32;
    const int ncpart = (ks - 1) * groups * nacc * 32;
    warp_mma *acc = calloc((size_t)(ks * c->warps * c->mt * c->nt), sizeof *acc);
    float *part = malloc(sizeof(float) * (size_t)(npart + 1));
    float *cpart = malloc(sizeof(float) * (size_t)(ncpart + 1));
    float *bsum = malloc(sizeof(float) * (size_t)(ks * groups * nacc * 32)); /* each block's slice-0 sums */
    for (int bx = 0; bx < gx; bx++)
        for (int by = 0; by < gy; by++) {
            memset(acc, 0, (size_t)(ks * c->warps * c->mt * c->nt) * sizeof *acc);
            for (int rank = 0; rank < ks; rank++)
            for (int warp = 0; warp < c->warps; warp++) {
                const int group = warp / c->wpr, slice = warp % c->wpr, kslice = rank * c->wpr + slice;
                const long long row0 = ((long long)bx * groups + group) * 16 * c->mt;
                if (row0 >= N)
                    continue;
                /* every step this warp takes, in the kernel's order */
                /* (main loop: at_kgroup_load_*<false>, leftover: <true>) */
                int steps[4096], guarded[4096], ns = 0;
                for (int ch = kslice; ch < nchunks; ch += nslices)
                    for (int u = 0; u < c->unroll; u++) {
                        guarded[ns] = 0;
                        steps[ns++] = ch * c->unroll + u;
                    }
                for (int s = nchunks * c->unroll + kslice; s < nsteps; s += nslices) {
                    guarded[ns] = 1;
                    steps[ns++] = s;
                }
                for (int si = 0; si < ns; si++)
                    for (int m = 0; m < PER; m++)
                        for (int mt = 0; mt < c->mt; mt++)
                            for (int nt = 0; nt < c->nt; nt++) {
                                warp_mma *wm = &acc[((rank * c->warps + warp) * c->mt + mt) * c->nt + nt];
                                for (int lane = 0; lane < 32; lane++) {
                                    const int g = lane >> 2, t = lane & 3;
                                    const int k = steps[si] * KSTEP + t * G, left = K - k;
                                    float lo[8], hi[8], xg[8];
                                    long long rl = row0 + mt * 16 + g, rh = rl + 8;
                                    rl = rl < N ? rl : N - 1;
                                    rh = rh < N ? rh : N - 1;
                                    const int gd = guarded[si];
                                    kgroup(W + rl * K, k, left, gd, K, G, c->vec, 1, lo, oob);
                                    kgroup(W + rh * K, k, left, gd, K, G, c->vec, 1, hi, oob);
                                    const int tok = by * 8 * c->nt + nt * 8 + g;
                                    kgroup(x + (long long)(tok < M ? tok : 0) * K, k, left, gd, K, G, c->vec,
                                           tok < M, xg, oob);
                                    /* at_mma_step: a0 = lo.w[2m], a1 = hi.w[2m], a2 = lo.w[2m+1],
                                    ** a3 = hi.w[2m+1], b0 = x.w[2m], b1 = x.w[2m+1] */
                                    for (int h = 0; h < 2; h++) {
                                        wm->a[lane][0][h] = lo[4 * m + h];
                                        wm->a[lane][1][h] = hi[4 * m + h];
                                        wm->a[lane][2][h] = lo[4 * m + 2 + h];
                                        wm->a[lane][3][h] = hi[4 * m + 2 + h];
                                        wm->b[lane][0][h] = xg[4 * m + h];
                                        wm->b[lane][1][h] = xg[4 * m + 2 + h];
                                    }
                                }
                                mma_exec(wm);
                            }
            }
            /* per block: slices 1.. write part[group][slice-1][(mt*TP_NT+nt)*4+i][lane]
            ** (dead warps too), __syncthreads, slice 0 adds them in slice order:
            ** the kernel's indices into an array of its declared size (an index
            ** outside it counts in *oob, an unwritten slot is a NaN) */
            for (int rank = 0; rank < ks; rank++) {
                for (int i = 0; i < npart; i++)
                    part[i] = NAN;
                for (int warp = 0; warp < c->warps; warp++) {
                    const int group = warp / c->wpr, slice = warp % c->wpr;
                    if (slice == 0)
                        continue;
                    for (int mt = 0; mt < c->mt; mt++)
                        for (int nt = 0; nt < c->nt; nt++)
                            for (int i = 0; i < 4; i++)
                                for (int lane = 0; lane < 32; lane++) {
                                    const int at =
                                        ((group * (c->wpr - 1) + slice - 1) * nacc + (mt * c->nt + nt) * 4 + i) * 32 +
                                        lane;
                                    if (at < 0 || at >= npart)
                                        (*oob)++;
                                    else
                                        part[at] = acc[((rank * c->warps + warp) * c->mt + mt) * c->nt + nt].d[lane][i];
                                }
                }
                for (int group = 0; group < groups; group++)
                    for (int mt = 0; mt < c->mt; mt++)
                        for (int nt = 0; nt < c->nt; nt++)
                            for (int lane = 0; lane < 32; lane++)
                                for (int i = 0; i < 4; i++) {
                                    float s = acc[((rank * c->warps + group * c->wpr) * c->mt + mt) * c->nt + nt].d[lane][i];
                                    for (int sl = 0; sl < c->wpr - 1; sl++) {
                                        const int at =
                                            ((group * (c->wpr - 1) + sl) * nacc + (mt * c->nt + nt) * 4 + i) * 32 + lane;
                                        if (at < 0 || at >= npart)
                                            (*oob)++;
                                        else
                                            s += part[at];
                                    }
                                    bsum[((rank * groups + group) * nacc + (mt * c->nt + nt) * 4 + i) * 32 + lane] = s;
                                }
            }
            /* the cluster: blocks 1.. store their slice-0 sums into block 0's
            ** cpart[rank-1][group][(mt*TP_NT+nt)*4+i][lane]; block 0 adds them in
            ** rank order and stores */
            for (int i = 0; i < ncpart; i++)
                cpart[i] = NAN;
            for (int rank = 1; rank < ks; rank++)
                for (int group = 0; group < groups; group++)
                    for (int a = 0; a < nacc; a++)
                        for (int lane = 0; lane < 32; lane++) {
                            const int at = (((rank - 1) * groups + group) * nacc + a) * 32 + lane;
                            if (at < 0 || at >= ncpart)
                                (*oob)++;
                            else
                                cpart[at] = bsum[((rank * groups + group) * nacc + a) * 32 + lane];
                        }
            for (int group = 0; group < groups; group++) {
                const long long row0 = ((long long)bx * groups + group) * 16 * c->mt;
                if (row0 >= N)
                    continue;
                for (int mt = 0; mt < c->mt; mt++)
                    for (int nt = 0; nt < c->nt; nt++)
                        for (int lane = 0; lane < 32; lane++)
                            for (int i = 0; i < 4; i++) {
                                const int a = (mt * c->nt + nt) * 4 + i;
                                float s = bsum[(group * nacc + a) * 32 + lane];
                                for (int r = 0; r < ks - 1; r++) {
                                    const int at = ((r * groups + group) * nacc + a) * 32 + lane;
                                    if (at < 0 || at >= ncpart)
                                        (*oob)++;
                                    else
                                        s += cpart[at];
                                }
                                const int g = lane >> 2, t = lane & 3;
                                const long long n = row0 + mt * 16 + g + (i >> 1) * 8;
                                const int tok = by * 8 * c->nt + nt * 8 + 2 * t + (i & 1);
                                if (n < N && tok < M)
                                    y[(long long)tok * N + n] = s;
                            }
            }
        }
    free(cpart);
    free(bsum);
    free(acc);
    free(part);
}

/* Every configuration on awkward shapes: K not a multiple of the step (nor
** of 16 where TP_VEC allows), N not a multiple of 16, M = 1..16 and 17. */
static void mma_mapping_matches_matmul(void)
{
    static const mma_cfg cfgs[] = {
        {1, 1, 1, 1, 8, 1, 1}, {4, 2, 1, 1, 8, 2, 1}, {4, 4, 2, 1, 8, 1, 1}, {8, 2, 1, 2, 8, 2, 1},
        {2, 1, 2, 2, 4, 2, 1}, {4, 2, 1, 1, 2, 1, 1}, {4, 4, 1, 2, 1, 2, 1}, {8, 8, 2, 1, 8, 4, 1},
        {4, 2, 1, 1, 8, 2, 2}, {4, 4, 2, 1, 8, 1, 4}, {2, 1, 1, 2, 4, 2, 8}, {8, 8, 1, 1, 8, 4, 2},
    };
    static const int Ms[] = {1, 2, 3, 5, 8, 9, 16, 17};
    int mismatches = 0, runs = 0, oob = 0;
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        const mma_cfg *c = &cfgs[ci];
        /* K: a multiple of TP_VEC, not of the step; also one below a step */
        const int Ks[] = {c->vec == 8 ? 328 : 330 / c->vec * c->vec, c->vec == 8 ? 24 : 12, 2 * 32 * c->unroll};
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
                const int M = Ms[mi], K = Ks[ki], N = 77;
                float *x = malloc(sizeof(float) * (size_t)(M * K)), *W = malloc(sizeof(float) * (size_t)(N * K));
                float *y = malloc(sizeof(float) * (size_t)(M * N));
                for (int i = 0; i < M * K; i++)
                    x[i] = (float)((i * 7 + 3) % 5 - 2);
                for (int i = 0; i < N * K; i++)
                    W[i] = (float)((i * 13 + 1) % 7 - 3);
                for (int i = 0; i < M * N; i++)
                    y[i] = 1e30f; /* poison: an output never stored shows */
                emulate_mma(c, M, K, N, x, W, y, &oob);
                for (int m = 0; m < M; m++)
                    for (int n = 0; n < N; n++) {
                        double ref = 0.0;
                        for (int k = 0; k < K; k++)
                            ref += (double)x[m * K + k] * W[n * K + k];
                        if ((double)y[m * N + n] != ref) {
                            if (mismatches++ < 5)
                                fprintf(stderr, "  cfg %zu M=%d K=%d: y[%d][%d] = %g, want %g\n", ci, M, K, m, n,
                                        (double)y[m * N + n], ref);
                        }
                    }
                runs++;
                free(x);
                free(W);
                free(y);
            }
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(oob, 0);
    printf("  %d emulated runs of gemv_mma's mapping, %d mismatches, %d out-of-bounds accesses\n", runs, mismatches, oob);
}

/* A host port of gemv_multi_token.cu's index arithmetic, in the kernel's
** order per lane: each read is checked against its row (K elements) and
** the token it belongs to (< M), the partial sums go through part[] with
** the kernel's indices. Integer-valued floats: every sum is exact. */
typedef struct {
    int warps, wpr, rows, tokens, vec, unroll;
} mt_cfg;

static void emulate_multi_token(const mt_cfg *c, int M, int K, int N, const float *x, const float *W,
                                float *y, int *oob)
{
    const int groups = c->warps / c->wpr, block_n = groups * c->rows, sums = c->tokens * c->rows;
    const int gx = (N + block_n - 1) / block_n, gy = (M + c->tokens - 1) / c->tokens;
    const int step = 32 * c->wpr * c->vec, kmain = K - K % (step * c->unroll);
    float *part = malloc(sizeof(float) * (size_t)(groups * sums * c->wpr));
    float *wsum = malloc(sizeof(float) * (size_t)(c->warps * sums));
    for (int bx = 0; bx < gx; bx++)
        for (int by = 0; by < gy; by++) {
            const int tok0 = by * c->tokens;
            for (int warp = 0; warp < c->warps; warp++) {
                const int group = warp / c->wpr, slice = warp % c->wpr;
                const long long row0 = ((long long)bx * groups + group) * c->rows;
                const int live = row0 < N;
                for (int i = 0; i < sums; i++)
                    wsum[warp * sums + i] = 0.0f; /* at_warp_sum over the 32 lanes */
                for (int lane = 0; lane < 32 && live; lane++) {
                    int k = (slice * 32 + lane) * c->vec;
                    int ks[4096], nk = 0; /* vector starts this lane reads, main loop then tail */
                    for (; k < kmain; k += step * c->unroll)
                        for (int u = 0; u < c->unroll; u++)
                            ks[nk++] = k + u * step;
                    for (; k < K; k += step)
                        ks[nk++] = k;
                    for (int r = 0; r < c->rows; r++) {
                        long long row = row0 + r < N ? row0 + r : N - 1;
                        for (int j = 0; j < c->tokens; j++) {
                            int tok = tok0 + j < M ? tok0 + j : M - 1;
                            for (int q = 0; q < nk; q++)
                                for (int e = 0; e < c->vec; e++) {
                                    const int kk = ks[q] + e;
                                    if (kk >= K || tok >= M || row >= N)
                                        (*oob)++;
                                    else
                                        wsum[warp * sums + j * c->rows + r] +=
                                            W[row * K + kk] * x[(long long)tok * K + kk];
                                }
                        }
                    }
                }
            }
            if (c->wpr == 1) {
                for (int warp = 0; warp < c->warps; warp++) {
                    const long long row0 = ((long long)bx * groups + warp) * c->rows;
                    for (int j = 0; j < c->tokens; j++)
                        for (int r = 0; r < c->rows; r++)
                            if (row0 < N && row0 + r < N && tok0 + j < M)
                                y[(long long)(tok0 + j) * N + row0 + r] = wsum[warp * sums + j * c->rows + r];
                }
                continue;
            }
            for (int i = 0; i < groups * sums * c->wpr; i++)
                part[i] = NAN;
            for (int warp = 0; warp < c->warps; warp++) {
                const int group = warp / c->wpr, slice = warp % c->wpr;
                for (int j = 0; j < c->tokens; j++)
                    for (int r = 0; r < c->rows; r++)
                        part[(group * sums + j * c->rows + r) * c->wpr + slice] =
                            wsum[warp * sums + j * c->rows + r];
            }
            for (int i = 0; i < groups * sums; i++) {
                const int gi = i / sums, j = i % sums / c->rows, r = i % c->rows;
                const long long row = ((long long)bx * groups + gi) * c->rows + r;
                float s = 0.0f;
                for (int w = 0; w < c->wpr; w++)
                    s += part[(gi * sums + i % sums) * c->wpr + w];
                if (row < N && tok0 + j < M)
                    y[(long long)(tok0 + j) * N + row] = s;
            }
        }
    free(part);
    free(wsum);
}

/* multi_token on awkward shapes: K not a multiple of any block_k, N not a
** multiple of block_n, M not a multiple of TP_TOKENS. */
static void multi_token_matches_matmul(void)
{
    static const mt_cfg cfgs[] = {
        {4, 1, 2, 2, 8, 2}, {4, 2, 1, 4, 8, 1}, {8, 4, 4, 4, 4, 2}, {8, 2, 2, 2, 2, 2},
        {4, 4, 1, 2, 1, 1}, {4, 1, 4, 4, 8, 1}, {8, 8, 2, 8, 8, 4},
    };
    static const int Ms[] = {1, 2, 3, 4, 5, 9};
    int mismatches = 0, runs = 0, oob = 0;
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        const mt_cfg *c = &cfgs[ci];
        const int Ks[] = {1000 / c->vec * c->vec + c->vec, 24 / c->vec * c->vec,
                          32 * c->wpr * c->vec * c->unroll};
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
                const int M = Ms[mi], K = Ks[ki], N = 37;
                float *x = malloc(sizeof(float) * (size_t)(M * K)), *W = malloc(sizeof(float) * (size_t)(N * K));
                float *y = malloc(sizeof(float) * (size_t)(M * N));
                for (int i = 0; i < M * K; i++)
                    x[i] = (float)((i * 7 + 3) % 5 - 2);
                for (int i = 0; i < N * K; i++)
                    W[i] = (float)((i * 13 + 1) % 7 - 3);
                for (int i = 0; i < M * N; i++)
                    y[i] = 1e30f;
                emulate_multi_token(c, M, K, N, x, W, y, &oob);
                for (int m = 0; m < M; m++)
                    for (int n = 0; n < N; n++) {
                        double ref = 0.0;
                        for (int k = 0; k < K; k++)
                            ref += (double)x[m * K + k] * W[n * K + k];
                        if ((double)y[m * N + n] != ref && mismatches++ < 5)
                            fprintf(stderr, "  cfg %zu M=%d K=%d: y[%d][%d] = %g, want %g\n", ci, M, K, m, n,
                                    (double)y[m * N + n], ref);
                    }
                runs++;
                free(x);
                free(W);
                free(y);
            }
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(oob, 0);
    printf("  %d emulated runs of gemv_multi_token's indexing, %d mismatches, %d out-of-bounds reads\n", runs,
           mismatches, oob);
}

/* ------------------------------------------------------------ the spec */

static int expand(const char *shape, at_dtype dtype, int arch, at_spec **spec, at_candidate **cands, int *n)
{
    at_problem pb = {.op = "gemv", .dtype = dtype, .arch = arch};
    int rc = at_shape_parse(shape, 3, &pb.shape);
    if (rc == AT_OK && !*spec)
        rc = at_spec_load("search/gemv.lua", spec);
    if (rc == AT_OK)
        rc = at_spec_expand(*spec, &pb, cands, n);
    if (rc != AT_OK)
        fprintf(stderr, "  %s: %s\n", shape, at_errmsg());
    return rc;
}

/* sha256 over the live candidates of the M=1 strategies, in order: name,
** params, grid and block of each. */
static void live_digest(const char *shape, int arch, char hex[65], int *nlive)
{
    at_spec *spec = NULL;
    at_candidate *c = NULL;
    int n = 0;
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    hex[0] = '\0';
    *nlive = 0;
    CHECK_EQ_INT(expand(shape, AT_BF16, arch, &spec, &c, &n), AT_OK);
    for (int i = 0; i < n && buf; i++) {
        const char *name = at_spec_strategy_name(spec, c[i].strategy);
        if (c[i].pruned_by[0] || (strcmp(name, "warp_row") != 0 && strcmp(name, "splitk") != 0))
            continue;
        char params[256];
        at_candidate_params_string(&c[i], params, sizeof params);
        if (len + 512 > cap && !(buf = realloc(buf, cap *= 2)))
            break;
        len += (size_t)snprintf(buf + len, cap - len, "%s %s %u,%u,%u %u,%u,%u\n", name, params, c[i].grid[0],
                                c[i].grid[1], c[i].grid[2], c[i].block[0], c[i].block[1], c[i].block[2]);
        (*nlive)++;
    }
    if (buf)
        at_sha256_hex(buf, len, hex);
    free(buf);
    free(c);
    at_spec_free(spec);
}

/* The M=1 space (measured on the H200) is exactly what it was before the
** M > 1 strategies: same live candidates, same order, same launch shapes.
** The digests were taken from search/gemv.lua at commit b0cbfad. */
static void m1_space_unchanged(void)
{
    static const struct {
        const char *shape;
        int arch, live;
        const char *sha;
    } cases[] = {
        {"1x2048x8192", 90, 750, "793def632526c6dd120755586c4b4015d08b090bd04638033ff3ddab1ee1417d"},
        {"1x2050x77", 89, 456, "21e460b1b8ff6a62937f66ea5ea514f10c4fcdf0a3c4e982fe98178521d0c804"},
        {"1x6144x32", 90, 816, "7f46a7982a5992f57ea81b677ceed36ce9fbda8f169c51d27f0fe6d5aa70be1a"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char hex[65];
        int n;
        live_digest(cases[i].shape, cases[i].arch, hex, &n);
        CHECK_EQ_INT(n, cases[i].live);
        CHECK(strcmp(hex, cases[i].sha) == 0);
    }
}

/* Live candidates per strategy at shape/arch/dtype into live[5] (warp_row,
** splitk, multi_token, mma, mma_bulk); every pruned one names its constraint. */
static void live_counts_dtype(const char *shape, int arch, at_dtype dtype, int live[5])
{
    static const char *const names[5] = {"warp_row", "splitk", "multi_token", "mma", "mma_bulk"};
    at_spec *spec = NULL;
    at_candidate *c = NULL;
    int n = 0;
    memset(live, 0, 5 * sizeof *live);
    CHECK_EQ_INT(expand(shape, dtype, arch, &spec, &c, &n), AT_OK);
    for (int i = 0; i < n; i++) {
        const char *name = at_spec_strategy_name(spec, c[i].strategy);
        if (c[i].pruned_by[0]) { /* the M > 1 strategies say why (the M=1 ones stay as measured) */
            if (strcmp(name, "multi_token") == 0 || strncmp(name, "mma", 3) == 0)
                CHECK(c[i].prune_reason[0] != '\0');
            continue;
        }
        for (int s = 0; s < 5; s++)
            if (strcmp(name, names[s]) == 0)
                live[s]++;
    }
    free(c);
    at_spec_free(spec);
}

static void live_counts(const char *shape, int arch, int live[5]) { live_counts_dtype(shape, arch, AT_BF16, live); }

/* M=1: only the measured strategies; M = 2..8: multi_token and mma; M > 8:
** mma alone (sm_80+), with multi_token too where the weights are tiny (at
** most 2 MiB: 16x2048x32, 16x2050x77); mma_bulk beside mma on sm_90 where
** K % 8 == 0; at most 1200 live candidates. */
static void strategies_by_m(void)
{
    static const struct {
        const char *shape;
        int arch;
        int mt, mma, bulk; /* expect multi_token / mma / mma_bulk live */
    } cases[] = {
        {"2x2048x8192", 90, 1, 1, 1},   {"3x2048x5120", 80, 1, 1, 0},    {"4x2048x2048", 89, 1, 1, 0},
        {"5x2048x8192", 90, 1, 1, 1},   {"8x2048x12288", 89, 1, 1, 0},   {"9x6144x2048", 90, 0, 1, 1},
        {"16x2048x32", 90, 1, 1, 1},    {"16x2048x248320", 80, 0, 1, 0}, {"17x2048x8192", 90, 0, 1, 1},
        {"3x2051x333", 90, 1, 1, 0},    {"16x2050x77", 89, 1, 1, 0},     {"4x2052x100", 75, 0, 0, 0},
        {"4x2052x100", 90, 1, 1, 0}, /* K % 8 == 4: rows not 16-byte aligned for a bulk copy */
    };
    int live[5];
    live_counts("1x2048x8192", 90, live);
    CHECK(live[0] > 0 && live[1] > 0);
    CHECK_EQ_INT(live[2] + live[3] + live[4], 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        live_counts(cases[i].shape, cases[i].arch, live);
        printf("  %s sm_%d: multi_token %d, mma %d, mma_bulk %d live\n", cases[i].shape, cases[i].arch, live[2],
               live[3], live[4]);
        CHECK_EQ_INT(live[0] + live[1], 0);
        CHECK_EQ_INT(live[2] > 0, cases[i].mt);
        CHECK_EQ_INT(live[3] > 0, cases[i].mma);
        CHECK_EQ_INT(live[4] > 0, cases[i].bulk);
        CHECK(live[2] + live[3] + live[4] <= 1200);
    }
    /* sm_75: no bf16 store (cvt.rn.bf16.f32 is sm_80+), so bf16 prunes
    ** multi_token there (above); fp16 keeps it, mma needs sm_80 either way */
    live_counts_dtype("4x2052x100", 75, AT_FP16, live);
    CHECK(live[2] > 0);
    CHECK_EQ_INT(live[3], 0);
}

/* TP_PRE=2 (gemv_mma: the second chunk's weights before the PDL wait) is
** searched wherever TP_STAGES=2 with TP_PDL=1 is live (sm_90+) and
** nowhere else: its #error forbids TP_STAGES=1, so the spec must prune
** those by name, and without the wait it would be the TP_PRE=1 kernel. */
static void pre_takes_two_stages(void)
{
    static const struct {
        const char *shape;
        int arch;
    } cases[] = {{"8x2048x5120", 90}, {"2x2048x8192", 80}, {"16x2050x77", 89}, {"4x6144x32", 90}, {"3x2051x333", 90}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        at_spec *spec = NULL;
        at_candidate *c = NULL;
        int n = 0, pre1_s2 = 0, pre2 = 0, by_name = 0, by_pdl = 0, twins = 0;
        CHECK_EQ_INT(expand(cases[i].shape, AT_BF16, cases[i].arch, &spec, &c, &n), AT_OK);
        for (int j = 0; j < n; j++) {
            if (strcmp(at_spec_strategy_name(spec, c[j].strategy), "mma") != 0)
                continue;
            const long long pre = at_candidate_param(&c[j], "TP_PRE", 0);
            const long long stages = at_candidate_param(&c[j], "TP_STAGES", 0);
            const long long pdl = at_candidate_param(&c[j], "TP_PDL", 0);
            CHECK(pre == 1 || pre == 2);
            if (pre == 2 && stages == 1) {
                CHECK(c[j].pruned_by[0] != '\0');
                by_name += strcmp(c[j].pruned_by, "pre_needs_stages") == 0;
            }
            if (pre == 2 && pdl == 0) {
                CHECK(c[j].pruned_by[0] != '\0');
                by_pdl += strcmp(c[j].pruned_by, "pre_needs_pdl") == 0;
            }
            if (c[j].pruned_by[0] || stages != 2 || pdl != 1)
                continue;
            if (pre == 2) {
                pre2++;
                continue;
            }
            pre1_s2++;
            /* its TP_PRE=2 twin: the same parameters but TP_PRE, also live */
            char want[256], have[256];
            at_candidate_params_string(&c[j], want, sizeof want);
            for (int k = 0; k < n; k++) {
                if (k == j || c[k].strategy != c[j].strategy || c[k].pruned_by[0] ||
                    at_candidate_param(&c[k], "TP_PRE", 0) != 2)
                    continue;
                at_candidate_params_string(&c[k], have, sizeof have);
                char *p = strstr(have, "TP_PRE=2");
                if (p) {
                    p[7] = '1';
                    twins += strcmp(have, want) == 0;
                }
            }
        }
        printf("  %s sm_%d: mma TP_STAGES=2 TP_PDL=1 live: %d TP_PRE=1, %d TP_PRE=2 (%d twins); pruned as "
               "pre_needs_stages %d, pre_needs_pdl %d\n",
               cases[i].shape, cases[i].arch, pre1_s2, pre2, twins, by_name, by_pdl);
        if (cases[i].arch >= 90) {
            CHECK(pre1_s2 > 0);
            CHECK(by_pdl > 0);
        } else {
            CHECK_EQ_INT(pre1_s2, 0); /* no TP_PDL=1 before sm_90 */
        }
        CHECK_EQ_INT(pre2, pre1_s2);
        CHECK_EQ_INT(twins, pre1_s2);
        CHECK(by_name > 0);
        free(c);
        at_spec_free(spec);
    }
}

/* ------------------------------------------------------- compilation */

typedef struct {
    int strategy;
    char options[512];
} distinct_cand;

/* Adds the live M > 1 candidates of `shape` to list[*n] unless already
** there (the compile depends on M only through pruning; on sm_90 a TP_PDL pair is one build). */
static void add_distinct(const char *shape, int arch, distinct_cand *list, int *n, int cap, at_spec **spec)
{
    at_candidate *c = NULL;
    int nc = 0;
    CHECK_EQ_INT(expand(shape, AT_BF16, arch, spec, &c, &nc), AT_OK);
    for (int i = 0; i < nc; i++) {
        if (c[i].pruned_by[0])
            continue;
        distinct_cand d = {.strategy = c[i].strategy};
        at_candidate_compile_options(&c[i], arch, d.options, sizeof d.options); /* as the tuner compiles it */
        int dup = 0;
        for (int j = 0; j < *n && !dup; j++)
            dup = list[j].strategy == d.strategy && strcmp(list[j].options, d.options) == 0;
        if (!dup && *n < cap)
            list[(*n)++] = d;
    }
    free(c);
}

/* Compiles the distinct live candidates of `shapes` (M > 1) for arch and
** dtype: none fails, every one reports its registers. */
static void compile_distinct(const char *const *shapes, int nshapes, int arch, at_dtype dtype)
{
    enum { CAP = 4096 };
    distinct_cand *list = calloc(CAP, sizeof *list);
    at_compile_job *jobs = NULL;
    at_templates *tpl = NULL;
    at_spec *spec = NULL;
    int n = 0;
    for (int i = 0; i < nshapes; i++)
        add_distinct(shapes[i], arch, list, &n, CAP, &spec);
    CHECK(n > 0 && n < CAP);
    CHECK_EQ_INT(at_templates_open("templates", &tpl), AT_OK);
    jobs = calloc((size_t)n, sizeof *jobs);
    int nstrat[5] = {0};
    for (int i = 0; i < n && tpl && spec; i++) {
        const char *src = NULL;
        const char *name = at_spec_strategy_template(spec, list[i].strategy);
        CHECK_EQ_INT(at_templates_source(tpl, name, &src), AT_OK);
        CHECK(strcmp(at_spec_strategy_name(spec, list[i].strategy), "warp_row") != 0 &&
              strcmp(at_spec_strategy_name(spec, list[i].strategy), "splitk") != 0);
        jobs[i] = (at_compile_job){.tpl = tpl, .name = name, .source = src, .arch = arch, .dtype = dtype};
        memcpy(jobs[i].options, list[i].options, sizeof jobs[i].options);
        if (list[i].strategy < 5)
            nstrat[list[i].strategy]++;
    }
    double t = 0.0;
    int failed = 0, noregs = 0, spills = 0, maxregs = 0;
    CHECK_EQ_INT(at_nvrtc_compile_all(jobs, n, 0, NULL, NULL), AT_OK);
    for (int i = 0; i < n; i++) {
        if (!jobs[i].ok) {
            if (failed++ < 3)
                fprintf(stderr, "  compile failed: %s %s\n%s\n", jobs[i].name, jobs[i].options,
                        jobs[i].log ? jobs[i].log : "");
        } else if (jobs[i].regs <= 0) {
            noregs++;
        }
        spills += jobs[i].spill_bytes > 0;
        if (jobs[i].regs > maxregs)
            maxregs = jobs[i].regs;
        t += jobs[i].seconds;
        at_compile_job_clear(&jobs[i]);
    }
    CHECK_EQ_INT(failed, 0);
    CHECK_EQ_INT(noregs, 0);
    printf("  sm_%d %s: %d distinct (multi_token %d, mma %d, mma_bulk %d), %d failed, %d spill, max %d registers, "
           "%.1f s\n",
           arch, at_dtype_name(dtype), n, nstrat[2], nstrat[3], nstrat[4], failed, spills, maxregs, t);
    free(jobs);
    free(list);
    at_templates_free(tpl);
    at_spec_free(spec);
}

/* M = 2 (TP_TOKENS=2), 4 (TP_TOKENS=4), 8 (TP_TOKENS=8) and 16 (TP_NT=2)
** together hold every distinct live candidate at K = 2048 (TP_VEC = 8). */
static const char *const wide[] = {"2x2048x8192", "4x2048x8192", "8x2048x8192", "16x2048x8192"};

static void compiles_sm90_bf16(void) { compile_distinct(wide, 4, 90, AT_BF16); }
static void compiles_sm90_fp16(void) { compile_distinct(wide, 4, 90, AT_FP16); }
static void compiles_sm89_bf16(void) { compile_distinct(wide, 4, 89, AT_BF16); }
static void compiles_sm89_fp16(void) { compile_distinct(wide, 4, 89, AT_FP16); }
static void compiles_sm80_bf16(void) { compile_distinct(wide, 4, 80, AT_BF16); }
static void compiles_sm80_fp16(void) { compile_distinct(wide, 4, 80, AT_FP16); }

/* K that forces narrower vectors (other k-group code), one M and one
** arch/dtype each, as test_nvrtc.c does for M=1. */
static void narrow_vectors_compile(void)
{
    static const char *const v4[] = {"16x2052x100"}; /* TP_VEC = 4 (mma, TP_NT=2) */
    static const char *const v2[] = {"3x2050x77"};   /* TP_VEC = 2 (both) */
    static const char *const v1[] = {"2x2051x333"};  /* TP_VEC = 1 (both) */
    compile_distinct(v4, 1, 89, AT_BF16);
    compile_distinct(v2, 1, 89, AT_FP16);
    compile_distinct(v1, 1, 80, AT_BF16);
}

int main(void)
{
    TT_RUN(fragment_layout_is_a_bijection);
    TT_RUN(k_permutation_matches_registers);
    TT_RUN(mma_mapping_matches_matmul);
    TT_RUN(multi_token_matches_matmul);
    TT_RUN(m1_space_unchanged);
    TT_RUN(strategies_by_m);
    TT_RUN(pre_takes_two_stages);
    TT_RUN(compiles_sm90_bf16);
    TT_RUN(compiles_sm90_fp16);
    TT_RUN(compiles_sm89_bf16);
    TT_RUN(compiles_sm89_fp16);
    TT_RUN(compiles_sm80_bf16);
    TT_RUN(compiles_sm80_fp16);
    TT_RUN(narrow_vectors_compile);
    return TT_DONE();
}
