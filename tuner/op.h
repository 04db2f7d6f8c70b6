/*
** op.h — the op table: everything the pipeline (search.c) needs to know
** about one op, in one place (ggml's idea). An op says its shape rank, what
** it reads and writes, how to fill inputs and compute the fp64 reference,
** how to launch a candidate or one of its baselines on copy c of the
** rotated data, and how to check an output. search.c stays op-independent:
** compile, verify, time, final round, winner rule, cache. Internal.
*/
#ifndef AT_OP_H
#define AT_OP_H

#include "gpu.h"

/* A loaded candidate kernel with its launch shape. */
typedef struct at_op_kernel {
    CUfunction fn;
    unsigned grid[3], block[3], smem;
    int pdl; /* launch with programmatic stream serialization (TP_PDL=1) */
} at_op_kernel;

/* The device pointers and shape of one call on one copy of the rotated
** data, handed to a contestant that is a call (norm ops: K = H, N = 0; W is
** the norm weight w; residual is 0 for the ops without one). The fused
** decode ops (op_fused.c): W is the GEMV weight (Wg for SwiGLU), Wu the up
** weight (0 without SwiGLU), nw the norm weight w (0 without a norm),
** residual the residual stream of the add forms (updated in place), scratch
** atk_fused_scratch_bytes bytes (16-byte aligned, its counters zero); 0 for
** the others. */
typedef struct at_op_call_args {
    CUdeviceptr x, W, y, residual;
    int64_t M, K, N;
    float eps;
    CUdeviceptr Wu, nw, scratch;
} at_op_call_args;

/* Enqueues the call on the GPU's stream (inside a capture too). */
typedef int (*at_op_call_fn)(void *arg, const at_op_call_args *a);

/* Who runs: a candidate (baseline < 0, kernel set), baseline `baseline`,
** or, when `call` is set, a call of someone else's code on the op's data
** (autotune validate: the runtime library's choice and its fallback). */
typedef struct at_contestant {
    int baseline;
    at_op_kernel kernel;
    at_op_call_fn call;
    void *call_arg;
} at_contestant;

/* What the pipeline hands an op when it opens it (all borrowed). */
typedef struct at_op_env {
    const at_search_opts *o;
    at_spec *spec;
    at_templates *tpl;
    const at_problem *pb;  /* op, dtype, shape, arch, sms */
    const char *cubin_dir; /* compiled-kernel cache, or NULL */
} at_op_env;

/* One correctness check's outcome. */
typedef struct at_op_check {
    double err;       /* ||y - ref|| / ||ref|| */
    size_t nonfinite; /* NaN/Inf outputs */
    int wrong;        /* failed the gate */
    char reason[256]; /* why, when wrong */
} at_op_check;

/* One op (and shape) another op's baseline is built from. */
typedef struct at_op_component {
    const char *op; /* "rmsnorm", "gemv" ... */
    at_shape shape;
} at_op_component;
#define AT_OP_MAX_COMPONENTS 4

typedef struct at_op {
    const char *name;  /* "gemv", "rmsnorm", ... (--op) */
    int rank;          /* 3: MxKxN, 2: TxH */
    const char *shape_form; /* "MxKxN" / "TxH" for messages */
    int max_copies;    /* most copies of the rotated data */
    const char *copy_what; /* what is rotated, for messages: "weights" */
    /* templates besides the spec's whose text changes the answer (the
    ** baselines we compile), NULL-terminated; hashed into the key. */
    const char *const *extra_templates;
    int check_baselines; /* verify the baselines too (our own kernels) */
    int takes_eps;       /* reads --eps (the norms and the fused ops with a norm) */
    /* Fused ops: the ops and shapes baseline 0 runs (the unfused sequence
    ** over the cache), which the pipeline tunes, or finds in the cache,
    ** before this op's own search (components.c). Fills up to `max` of
    ** them and returns how many; NULL for an op without components. */
    int (*components)(const at_search_opts *o, at_op_component *out, int max);

    /* Host only, cheap (the cache lookup follows): validates the options
    ** for this op, reads what it needs from the spec, and fills the
    ** baselines' names into res (res->nbaselines, strategy, label, what,
    ** json_name). *state is the op's, freed by close. */
    int (*open)(const at_op_env *env, at_search_result *res, void **state);
    /* Compile options this op adds to the key's options ("" for none). */
    void (*key_options)(void *state, char *buf, size_t len);
    /* Bytes of one copy of the rotated data. */
    size_t (*copy_bytes)(void *state);
    /* With a GPU: fresh random inputs, the fp64 reference, `copies` copies
    ** of the rotated data on the device, the baselines compiled and loaded. */
    int (*setup)(void *state, at_gpu *g, int copies);
    /* Runs c once on copy 0 with its outputs poisoned and inputs restored,
    ** and compares with the reference. A CUDA failure is the return code;
    ** a wrong answer is out->wrong. */
    int (*check)(void *state, const at_contestant *c, at_op_check *out);
    /* Enqueues one call of c on copy `copy` on the GPU's stream (also
    ** inside a graph capture: no synchronous call). */
    int (*enqueue)(void *state, const at_contestant *c, int copy);
    /* Fills w's identity (strategy, kernel, template, params, launch shape,
    ** cubin) when baseline 0 is the stored answer. */
    int (*baseline_winner)(void *state, at_winner *w);
    /* Frees host and device memory (the GPU is still open); NULL is a no-op. */
    void (*close)(void *state);
} at_op;

/* The op named `name`, or NULL. */
const at_op *at_op_find(const char *name);
/* The i-th op of the table (NULL past the end), for --help and messages. */
const at_op *at_op_at(int i);

/* The ops (op_gemv.c, op_norm.c, op_fused.c). */
extern const at_op at_op_gemv, at_op_gemv_add;
extern const at_op at_op_rmsnorm, at_op_add_rmsnorm, at_op_gemma_rmsnorm, at_op_add_gemma_rmsnorm;
extern const at_op at_op_rmsnorm_gemv, at_op_gemma_rmsnorm_gemv, at_op_gemv_swiglu, at_op_rmsnorm_gemv_swiglu,
    at_op_gemma_rmsnorm_gemv_swiglu, at_op_add_rmsnorm_gemv, at_op_add_gemma_rmsnorm_gemv;

/* The elementwise kernels of templates/baseline/ (norm_add.cu, the unfused
** norm chain): 256 threads a block, 4 elements a thread. */
#define AT_ELTWISE_THREADS 256u
#define AT_ELTWISE_PER_BLOCK 1024LL

/* Shared by the ops' checks: the gate's verdict on n outputs y (dtype)
** against the fp64 reference ref, after any guard-zone verdict already in
** out: out->err and out->nonfinite set; when an output is NaN/Inf or the
** relative error is above the dtype's tolerance, out->wrong is set and
** "K outputs NaN/Inf (unwritten or overflow)" or "rel. error E > TOL" is
** appended to out->reason ("; " first when it holds a reason already). */
void at_op_verdict(at_op_check *out, at_dtype dtype, const uint16_t *y, const double *ref, size_t n);

/* Shared by the ops: one kernel launch on g->stream (PDL when asked). */
int at_op_launch(at_gpu *g, const at_op_kernel *k, void **args);

/* Shared by the ops: compiles an op's own baseline kernels (NVRTC, on
** `threads` threads, through the compiled-kernel cache when cubin_dir is
** set) and loads them. jobs[i].name is the template ("baseline/norm_add.cu")
** and jobs[i].options its -D options, set by the caller; the rest of each
** job is filled here (the caller clears them with at_compile_job_clear,
** after the modules are unloaded or not). entries[i] is the kernel's entry
** point; mods[i] and fns[i] receive the module and function. Returns
** AT_OK, AT_ERR_NVRTC (message with the log) when one does not compile, or
** the CUDA error of the load. */
int at_op_compile_load(at_gpu *g, at_templates *tpl, int arch, at_dtype dtype, const char *cubin_dir, int threads,
                       at_compile_job *jobs, const char *const *entries, int n, CUmodule *mods, CUfunction *fns);

/* Fills copies 1.. of a block of `copies` copies `stride` bytes apart from
** copy 0, by doubling: log2(copies) device copies enqueued on g->stream. */
int at_op_replicate(at_gpu *g, CUdeviceptr base, size_t stride, int copies);

/* Guard zones (guard.c): an output buffer of n bytes with AT_GUARD_BYTES
** before and after it, filled with AT_GUARD_PATTERN before a correctness
** check and compared after it, so a candidate that writes out of bounds
** without faulting is caught. p = alloc + AT_GUARD_BYTES keeps the
** allocation's 256-byte alignment; the zone after starts right at p + n. */
#define AT_GUARD_BYTES 4096
#define AT_GUARD_PATTERN 0xA5
typedef struct at_guarded {
    CUdeviceptr alloc, p; /* the allocation; the output itself */
    size_t n;
    unsigned char *host;  /* 2 * AT_GUARD_BYTES: the zones as read back */
} at_guarded;
/* Allocates the buffer and its zones (device) and the host copy. */
int at_guarded_alloc(at_gpu *g, at_guarded *b, size_t n);
void at_guarded_free(at_gpu *g, at_guarded *b); /* zeroed or freed: no-op */
/* Enqueues the pattern into both zones on g->stream. */
int at_guarded_arm(at_gpu *g, at_guarded *b);
/* Enqueues the copy of both zones to b->host (valid after a stream sync). */
int at_guarded_fetch(at_gpu *g, at_guarded *b);
/* After the sync: 0 when both zones are intact, else 1 with "wrote N bytes
** past the output" (N: how far past p + n the farthest changed byte is;
** "before", counted back from p; both when both) appended to reason[0..n)
** after "; " when reason is not empty. `what` names the buffer ("output",
** "residual"). */
int at_guarded_verdict(const at_guarded *b, const char *what, char *reason, size_t n);

#endif
