/*
** model.h — a Qwen3.5-2B-shaped decode stack for the decode example: the
** shapes, the synthetic weights on the GPU, the activations, and one decode
** step of M tokens (M = 1..max_batch, one per sequence of a batch) enqueued
** on a stream in one of three modes, or only some of its ops (for the
** per-op breakdown). What is a stand-in is said in README.md. Invariant:
** every activation is [M, width] row-major, allocated for max_batch rows.
*/
#ifndef DECODE_MODEL_H
#define DECODE_MODEL_H

#include <cublas_v2.h>
#include <cuda.h>
#include <stddef.h>

#include "atk.h"
#include "driver.h" /* after cuda.h: the driver calls go through dlopen */

/* Qwen3.5-2B: hidden 2048, 24 layers (18 linear-attention and 6
** full-attention, 3:1 as Qwen3-Next), intermediate 6144, vocab 248320. */
#define HIDDEN 2048
#define LAYERS 24
#define INTER 6144
#define VOCAB 248320
#define QKVG 5120  /* full attention: q, k, v and the output gate */
#define QKVZ 8192  /* linear attention: q, k, v, z */
#define BA 32      /* linear attention: beta and decay per head */
#define LHEADS 16  /* linear-attention heads of 128 */
#define LDIM 128

/* Ops of a step, for the breakdown (a step enqueues those in its mask). */
enum op_kind {
    K_QKVG,     /* gemv 2048 -> 5120   */
    K_ATTN_O,   /* gemv 2048 -> 2048 (attention out and linear-attention out) */
    K_QKVZ,     /* gemv 2048 -> 8192   */
    K_BA,       /* gemv 2048 -> 32     */
    K_GATE_UP,  /* gemv 2048 -> 12288  */
    K_DOWN,     /* gemv 6144 -> 2048   */
    K_LM_HEAD,  /* gemv 2048 -> 248320 */
    K_NORM,     /* the residual add + Gemma RMSNorm (49 per step) */
    K_ATTN,     /* stand-in attention core */
    K_LINEAR,   /* stand-in linear-attention recurrence */
    K_SILU_MUL, /* SiLU(gate) * up */
    K_COUNT
};
#define ALL_OPS ((1u << K_COUNT) - 1u)

enum mode { MODE_CUBLAS_UNFUSED = 1, MODE_CUBLAS_NAIVE = 2, MODE_ATK = 3 };

typedef struct layer {
    int linear; /* 1: linear attention, 0: full attention */
    CUdeviceptr w_in, w_out; /* QKVG or QKVZ x HIDDEN; HIDDEN x HIDDEN */
    CUdeviceptr w_ba;        /* BA x HIDDEN (linear only) */
    CUdeviceptr w_gate_up, w_down;
    CUdeviceptr norm1, norm2; /* HIDDEN (Gemma: scaled by 1 + w) */
    CUdeviceptr state;        /* max_batch x LHEADS x LDIM x LDIM fp32 (linear only): one per sequence */
} layer;

typedef struct model {
    CUcontext ctx;
    CUstream stream;
    cublasHandle_t blas;
    CUdeviceptr blas_ws;
    atk_ctx *atk;
    int max_batch; /* rows every activation buffer holds */
    layer layers[LAYERS];
    CUdeviceptr w_lm, norm_final, embed; /* embed: max_batch x HIDDEN, a token per row */
    /* activations, max_batch rows each (bf16 unless said) */
    CUdeviceptr delta, residual, normed, big, act, out, logits;
    CUdeviceptr f_x, f_sq, f_ms, f_rs, f_xn, f_yw; /* fp32 scratch of the unfused chain */
    size_t weight_bytes;
    /* kernels compiled at start with NVRTC */
    CUmodule mods[16];
    int nmods;
    CUfunction k_fill, k_attn, k_linear, k_silu_mul, k_naive;
    CUfunction k_add, k_cast_f32, k_square, k_mean, k_rsqrt, k_mul_rows, k_mul_weight, k_cast_back;
} model;

/* Compiles the kernels (templates from `templates`), allocates and fills the
** weights (>= 2 GB) and buffers for steps of up to max_batch tokens
** (1..64; the linear-attention states take 18 MB per token) on the current
** context's GPU. On failure what was allocated stays for model_free. */
int model_init(model *m, const char *templates, int arch, int max_batch);
/* Frees what model_init allocated (a partly initialised model too). */
void model_free(model *m);
/* Enqueues one decode step of M tokens (1..max_batch; ops in `mask`) on
** m->stream: x is [M, HIDDEN] through every GEMV and norm; the attention
** stand-ins run per token, token t on sequence slot t's state. Returns
** nonzero (printed) on a failed launch or an M out of range. */
int model_step(model *m, enum mode mode, unsigned mask, int M);
/* Zeroes the linear-attention states of every slot (before a compared run). */
int model_reset_state(model *m);

/* "cuda: WHAT: NAME" on failure (printed), then returns nonzero. */
int cu_check(CUresult r, const char *what);

#endif
