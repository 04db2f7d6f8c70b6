/*
** model.h — a Qwen3.5-2B-shaped decode stack for the decode example: the
** shapes, the synthetic weights on the GPU, the activations, and one decode
** step of M tokens (M = 1..max_batch, one per sequence of a batch) enqueued
** on a stream in one of four modes, or only some of its ops (for the
** per-op breakdown), the bytes a step must move, and the GPU's read ceiling
** (for the step's physical limit). What is a stand-in is said in README.md.
** Invariant: every activation is [M, width] row-major, allocated for
** max_batch rows.
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
/* The linear layers' two input projections (in_proj_qkvz, in_proj_ba) read
** the same normalized x: the engine stores them as one [QKVZBA, HIDDEN]
** weight (qkvz's rows, then ba's), as engines concatenate q/k/v, so one
** GEMV (one norm+GEMV in mode 4) produces both, [M, QKVZBA] row-major. */
#define QKVZBA (QKVZ + BA)
#define LHEADS 16  /* linear-attention heads of 128 */
#define LDIM 128

/* Ops of a step, for the breakdown (a step enqueues those in its mask).
** Modes 1-3 run K_QKVG..K_SILU_MUL; mode 4 runs the stand-ins and the fused
** kinds K_NORM_QKVG..K_NORM_LM_HEAD instead of the GEMVs, norms and
** SiLU*mul (kind_in_mode says which). The JSON names them in op_kinds, in
** op_us order. */
enum op_kind {
    K_QKVG,     /* gemv 2048 -> 5120   */
    K_ATTN_O,   /* gemv 2048 -> 2048 (attention out and linear-attention out) */
    K_QKVZBA,   /* gemv 2048 -> 8224 (qkvz and ba, one weight) */
    K_GATE_UP,  /* gemv 2048 -> 12288  */
    K_DOWN,     /* gemv 6144 -> 2048   */
    K_LM_HEAD,  /* gemv 2048 -> 248320 */
    K_NORM,     /* the residual add + Gemma RMSNorm (49 per step) */
    K_ATTN,     /* stand-in attention core */
    K_LINEAR,   /* stand-in linear-attention recurrence */
    K_SILU_MUL, /* SiLU(gate) * up */
    /* mode 4: the norm in the GEMV's prologue, SwiGLU and the residual add
    ** in its epilogue */
    K_NORM_QKVG,    /* gemma_rmsnorm_gemv 2048 -> 5120              */
    K_NORM_QKVZBA,  /* gemma_rmsnorm_gemv 2048 -> 8224 (qkvz and ba) */
    K_NORM_SWIGLU,  /* gemma_rmsnorm_gemv_swiglu 2048 -> 2 x 6144 -> 6144 */
    K_ATTN_O_ADD,   /* gemv_add 2048 -> 2048 (residual += out . Wo^T) */
    K_DOWN_ADD,     /* gemv_add 6144 -> 2048 (residual += act . Wd^T) */
    K_NORM_LM_HEAD, /* gemma_rmsnorm_gemv 2048 -> 248320 (final norm + lm_head) */
    K_COUNT
};
#define ALL_OPS ((1u << K_COUNT) - 1u)

/* (1) cuBLAS + the unfused norm chain, (2) cuBLAS + the naive fused norm,
** (3) atk's GEMVs and add+norms, (4) atk's fused ops (the norm, SwiGLU and
** the residual add inside the GEMVs). */
enum mode { MODE_CUBLAS_UNFUSED = 1, MODE_CUBLAS_NAIVE = 2, MODE_ATK = 3, MODE_FUSED = 4 };
#define NMODES 4

/* Whether `mode` enqueues ops of kind k (the stand-ins: every mode). */
int kind_in_mode(enum op_kind k, enum mode mode);
/* The stand-ins (attention core, linear-attention recurrence): listed
** apart in the breakdown and in the step's bytes. */
#define STANDIN_OPS ((1u << K_ATTN) | (1u << K_LINEAR))

/* Which bug mode 4 runs with (DECODE_FAULT, to show that the agreement
** check catches one): none, Wg and Wu swapped, layer norm weights
** swapped (norm2 before attention, norm1 before the MLP), the last layer's
** down-projection add dropped. */
enum fault { FAULT_NONE = 0, FAULT_SWAP_GATE_UP, FAULT_SWAP_NORMS, FAULT_DROP_ADD };

/* The bytes a step of M tokens must move at least: every weight once, the
** activations of the fused dataflow (each GEMV's input read and output
** written once, the residual read and written by each add, the embeddings
** and the logits), and apart, the stand-ins' (the linear-attention states
** read and written, their inputs and outputs). */
typedef struct step_bytes {
    double weights, activations, standins;
} step_bytes;

typedef struct layer {
    int linear; /* 1: linear attention, 0: full attention */
    CUdeviceptr w_in, w_out; /* QKVG or QKVZBA x HIDDEN; HIDDEN x HIDDEN */
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
    CUdeviceptr fused_scratch; /* mode 4: the fused calls' fallback scratch (atk_fused_scratch_bytes) */
    size_t fused_scratch_bytes;
    enum fault fault; /* mode 4 only; FAULT_NONE but for the check's self-test */
    int always_fused; /* mode 4: every boundary through the fused calls, even
                         where atk serves them unfused (DECODE_BOUNDARIES=fused) */
    size_t weight_bytes;
    int pdl; /* sm_90+: the engine's own kernels launch with PDL (model.c launch_own) */
    /* kernels compiled at start with NVRTC */
    CUmodule mods[16];
    int nmods;
    CUfunction k_fill, k_attn, k_linear, k_silu_mul, k_naive;
    CUfunction k_add, k_cast_f32, k_square, k_mean, k_rsqrt, k_mul_rows, k_mul_weight, k_cast_back;
    CUfunction k_read[2]; /* the tuner's streaming-read kernel, unrolled 4 and 8 */
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
/* The bytes a step of M tokens must move (M may be a trace's mean). */
void model_step_bytes(const model *m, double M, step_bytes *b);
/* The GPU's streaming-read ceiling in GB/s (1e9), measured as the tuner
** does (tuner/bench.c at_bench_ceilings): the best of unroll 4 and 8 at
** 1..8 blocks of 512 per SM (sms multiprocessors) over the lm_head weight
** (1 GB, far above any L2), 4 reads per graph, best of 5 replays. */
int model_read_ceiling(model *m, int sms, double *gbps);

/* "cuda: WHAT: NAME" on failure (printed), then returns nonzero. */
int cu_check(CUresult r, const char *what);

#endif
