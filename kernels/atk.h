/*
** atk.h — the autotune runtime: the small C library an inference engine links
** to launch the kernels the tuner chose. Open a tuned table once (atk_open:
** an autotune SQLite cache or a JSON export; atk_open_table: a C header made
** by `autotune export --format c`), then call atk_gemv / atk_rmsnorm / ...
** per step. Every call returns an int status (ATK_OK = 0); atk_errmsg(ctx)
** says what failed. The header needs no CUDA header: streams and device
** pointers are passed as the types below.
**
**     atk_ctx *ctx;
**     if (atk_open("tune.db", 0, 0, &ctx) != ATK_OK) { ...atk_errmsg(NULL)... }
**     puts(atk_report(ctx));                 // what was loaded, what falls back and why
**     atk_gemv(ctx, stream, ATK_BF16, 1, 2048, 8192, x, W, y);   // in a graph capture too
**     atk_close(ctx);
**
** Pitfall: a context belongs to one GPU (the `device` ordinal given to
** atk_open) and launches in that GPU's primary context, the one the CUDA
** runtime uses (cudaSetDevice): pass only streams and memory of that
** context. An engine that made its own context with cuCtxCreate must not
** pass its streams or allocations to atk.
*/
#ifndef ATK_H
#define ATK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ATK_API __attribute__((visibility("default")))
#else
#define ATK_API
#endif

#define ATK_VERSION "0.4.0"

/* An opened table for one GPU: immutable after atk_open, so any number of
** threads may call into one context at once. */
typedef struct atk_ctx atk_ctx;

/* A CUDA stream: a CUstream or a cudaStream_t (both are this pointer type);
** NULL is the legacy default stream. */
typedef struct CUstream_st *atk_stream;

/* Status codes (the same numbers as the tuner's at_status where they mean
** the same thing). */
enum atk_status {
    ATK_OK = 0,
    ATK_ERR_USAGE = 2,       /* bad argument (NULL ctx, dimension, dtype ...)   */
    ATK_ERR_NOGPU = 4,       /* no driver, no such GPU, a GPU older than sm_80  */
    ATK_ERR_CUDA = 5,        /* a CUDA driver or cuBLAS call failed             */
    ATK_ERR_CUDA_STICKY = 6, /* the CUDA context is lost: restart the process   */
    ATK_ERR_NVRTC = 7,       /* NVRTC itself unusable                           */
    ATK_ERR_TABLE = 8,       /* table missing, corrupt, foreign (strict open)   */
    ATK_ERR_IO = 9,          /* a file could not be read                        */
    ATK_ERR_NOMEM = 10,      /* host allocation failed (atk_open only)          */
    ATK_ERR_MISS = 12        /* ATK_STRICT: no tuned kernel for this call       */
};

/* Element types (the tuner's at_dtype and the templates' TP_DTYPE). */
enum atk_dtype { ATK_BF16 = 1, ATK_FP16 = 2 };

/* The ops, as named in the tuner's specs and caches. */
enum atk_op {
    ATK_OP_GEMV = 0,
    ATK_OP_RMSNORM = 1,
    ATK_OP_ADD_RMSNORM = 2,
    ATK_OP_GEMMA_RMSNORM = 3,
    ATK_OP_ADD_GEMMA_RMSNORM = 4,
    ATK_OP_GEMV_ADD = 5, /* residual += x . W^T in place (atk_gemv_add) */
    ATK_OP_RMSNORM_GEMV = 6,              /* y = W . rmsnorm(x): the norm in the GEMV's prologue */
    ATK_OP_GEMMA_RMSNORM_GEMV = 7,        /* the same with the Gemma factor (1 + w)            */
    ATK_OP_GEMV_SWIGLU = 8,               /* y = silu(x . Wg^T) * (x . Wu^T) in one kernel     */
    ATK_OP_RMSNORM_GEMV_SWIGLU = 9,       /* the norm in the prologue, SwiGLU in the epilogue  */
    ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU = 10, /* the same with the Gemma factor                  */
    ATK_OP_ADD_RMSNORM_GEMV = 11,         /* residual += x, then y = W . rmsnorm(residual)     */
    ATK_OP_ADD_GEMMA_RMSNORM_GEMV = 12,   /* the same with the Gemma factor (1 + w)            */
    ATK_NOPS = 13
};

/* Flags of atk_open / atk_open_table (or-ed). */
enum atk_flags {
    ATK_STRICT_OPEN = 1u << 0, /* a table that is missing, unreadable, corrupt,
                                  foreign, or has nothing usable for this GPU
                                  fails atk_open (ATK_ERR_TABLE) instead of
                                  opening with every call on fallback       */
    ATK_STRICT = 1u << 1,      /* a call without an exact tuned entry fails with
                                  ATK_ERR_MISS and launches nothing (tests)   */
    ATK_NO_INFER = 1u << 2,    /* never borrow another K, N's kernel (a larger
                                  tuned M of the same K, N still serves)      */
    ATK_NO_NVRTC = 1u << 3,    /* never recompile a cubin that does not load  */
    ATK_SAME_DRIVER = 1u << 4, /* only entries tuned under the present driver */
    ATK_NO_OVERRIDES = 1u << 5, /* ignore validation overrides: the table as
                                  tuned (what `autotune validate` measures) */
    ATK_UNFUSED = 1u << 6      /* load no fused-op entry: every fused call runs
                                  its unfused sequence over the tuned norm and
                                  GEMV entries (path FALLBACK; the yardstick
                                  the tuner and validate time a fused kernel
                                  against) */
};

/* How a call was (or would be) served. The dispatch rule, in order:
**   1. a validation override for exactly this call (autotune validate
**      measured the runtime's choice losing to the fallback): FALLBACK;
**   2. the exact shape is tuned: TUNED (its answer may be the baseline);
**   3. the smallest tuned M' > M of the same K, N (T' > T of the same H for
**      norms) whose kernel reads each weight once per group of tokens (GEMV:
**      multi_token, mma, mma_bulk; every norm kernel), the rows past M
**      masked: BUCKET. The M=1 strategies (splitk, warp_row) never serve
**      M > 1 unless tuned at that M;
**   4. within one bucket (the smallest tuned M' >= M of any shape), the
**      nearest other K, N whose kernel is valid there (at M > 1 one that
**      takes all M tokens in one token group: each group reads the whole
**      weight): INFERRED;
**   5. otherwise FALLBACK: cuBLAS (GEMV; gemv_add: cublasGemmEx with
**      beta = 1) or the built-in naive fused norm.
** M above every tuned bucket (prefill) therefore falls back unless tuned. */
enum atk_path {
    ATK_PATH_TUNED = 1,    /* the exact shape is tuned (its answer may be the baseline) */
    ATK_PATH_INFERRED = 2, /* the kernel of the nearest tuned shape valid for this one */
    ATK_PATH_FALLBACK = 3, /* cuBLAS (GEMV) or the built-in naive fused norm          */
    ATK_PATH_BUCKET = 4    /* the kernel tuned at a larger M of the same K, N         */
};

/* ------------------------------------------------------------- exported C
** The layout `autotune export --format c` writes. [TABLE_FORMAT] The same
** text is in cache/table.c (C_TYPES): change both together; the guard name
** carries the layout version, so a header of another layout fails to
** compile against this one instead of being misread. */
#ifndef ATK_TABLE_TYPES_V2
#define ATK_TABLE_TYPES_V2
/* [TABLE_FORMAT] layout 2: version 1 of the table plus embedded sources. */
typedef struct atk_table_device {
    const char *name;
    int cc_major, cc_minor, sms;
    long long l2_bytes, mem_bytes;
    int driver_version, nvrtc_major, nvrtc_minor;
    double read_gbps, copy_gbps, empty_us; /* -1.0: not measured */
} atk_table_device;

typedef struct atk_table_entry {
    int device; /* index into atk_table.devices */
    const char *op, *dtype, *shape;
    int driver_version, nvrtc_version;
    const char *space_sha, *options, *tuner_version;
    const char *key_sha; /* at_key_digest of the key: these fields + the device's */
    const char *strategy, *kernel, *template_name, *params;
    unsigned grid[3], block[3], smem;
    double us, us_min, us_max, baseline_us, baseline_min, baseline_max, speedup, bytes;
    const unsigned char *cubin; /* NULL when the baseline (cuBLAS) won */
    size_t cubin_size;
    const char *cubin_sha256; /* "" without a cubin */
    int source; /* index into atk_table.sources of template_name, -1 if not embedded */
} atk_table_entry;

/* A source file for NVRTC: a template ("gemv/gemv_splitk.cu") or a shared
** header ("common/vec.cuh"), as found in the templates folder at export. */
typedef struct atk_table_source {
    const char *name;
    const char *text;
    const char *sha256; /* of text */
} atk_table_source;

typedef struct atk_table {
    int version; /* the table format version (1, as in JSON) */
    const atk_table_device *devices;
    size_t ndevices;
    const atk_table_entry *entries;
    size_t nentries;
    const atk_table_source *sources; /* templates, then every common/ header */
    size_t nsources;
} atk_table;
#endif

/* ------------------------------------------------------------------ open */

/* Opens the tuned table at `path` (an autotune SQLite cache, or a JSON file
** from `autotune export --format json`) for GPU `device` (a CUDA ordinal)
** and loads, once, every winner tuned for this GPU (same name, compute
** capability and SM count): each cubin's sha256 is checked, then it is
** loaded; one that does not load (e.g. built by a newer NVRTC than this
** driver takes) is recompiled with NVRTC from its template source when the
** source is at hand (ATK_TEMPLATES, a templates/ folder, names the source
** for caches and JSON tables), else that entry falls back. Also loads the
** built-in fallback norms and creates cuBLAS handles. Returns ATK_OK and
** *out, the context (free with atk_close). A missing, unreadable, corrupt or
** foreign table is not an error: the context opens with every call on
** fallback, and atk_report(ctx) says why (unless ATK_STRICT_OPEN). Errors:
** ATK_ERR_NOGPU (no driver / no such device / older than sm_80), ATK_ERR_CUDA, ATK_ERR_NOMEM,
** ATK_ERR_TABLE (strict open only); then *out is NULL and atk_errmsg(NULL)
** on this thread says why. The driver (libcuda.so.1) is loaded at run time. */
ATK_API int atk_open(const char *path, int device, unsigned flags, atk_ctx **out);

/* The same for a table compiled into the engine: `table` is what
** atk_exported_table() of the generated header returns (static storage:
** it must outlive the context; nothing is copied but the lookup index).
** No SQLite is used. */
ATK_API int atk_open_table(const atk_table *table, int device, unsigned flags, atk_ctx **out);

/* The GPU an atk_open_dry context pretends to be. */
typedef struct atk_gpu_id {
    const char *name;   /* "NVIDIA H200" */
    int cc;             /* 10*major + minor, e.g. 90 */
    int sms;            /* multiprocessors */
    int driver_version; /* cuDriverGetVersion, e.g. 13000 */
} atk_gpu_id;

/* A context that touches no GPU: it reads `path` (or `table` when path is
** NULL) for the GPU described by *gpu, checks every cubin's sha256 (a cubin
** is taken to load), and then every atk_* call chooses and counts exactly
** as a real context would, and returns ATK_OK (or ATK_ERR_MISS) without
** launching or reading any pointer. For tests and for planning which
** kernels an engine would get on a given GPU. */
ATK_API int atk_open_dry(const char *path, const atk_table *table, const atk_gpu_id *gpu, unsigned flags,
                         atk_ctx **out);

/* Unloads every module, frees the cuBLAS handles and the context. No call
** on ctx may be in flight. NULL is a no-op. */
ATK_API void atk_close(atk_ctx *ctx);

/* ----------------------------------------------------------------- calls
** Launch path (every call): no allocation, no synchronization, no
** module loading, no NVRTC; safe inside CUDA graph capture and from many
** threads at once (the context is immutable; counters are atomic). atk's
** own kernels are loaded at atk_open; a GEMV that falls back to cuBLAS runs
** cublasGemmEx, which may initialise itself and (lazily) load the kernel it
** picks on its first call for a shape: run one eager step, synchronized,
** before capturing (as examples/decode does). The
** calling thread need not have the context current (it is pushed and popped
** when it is not). Pointers are device pointers of the context's GPU; 16-bit
** elements of `dtype`, rows contiguous. Return ATK_OK once the kernel is
** enqueued on `stream`; ATK_ERR_USAGE for a bad argument; ATK_ERR_MISS in
** strict mode; ATK_ERR_CUDA / ATK_ERR_CUDA_STICKY when the launch fails. */

/* y[M,N] = x[M,K] . W[N,K]^T (W row-major [N,K], the nn.Linear layout);
** fp32 accumulation. M, K, N in 1..INT_MAX. */
ATK_API int atk_gemv(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N,
                     const void *x, const void *W, void *y);

/* residual[M,N] += x[M,K] . W[N,K]^T in place: residual = rne(residual +
** rne(acc)), acc the fp32 dot, exactly as atk_gemv into a scratch y and
** then an add kernel round it (a tuned kernel: the add in its epilogue, one
** launch, no scratch). The same dispatch rule as atk_gemv over the tuned
** gemv_add entries (the gemv entries never serve it). The fallback is one
** cublasGemmEx with beta = 1, which rounds once: rne(acc + residual), so
** it may differ from the unfused path in the last bit of some outputs.
** residual must not overlap x or W. M, K, N in 1..INT_MAX. */
ATK_API int atk_gemv_add(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N,
                         const void *x, const void *W, void *residual);

/* ------------------------------------------------------ fused decode ops
** One kernel where an engine would run two or three: the RMSNorm of x in
** the GEMV's prologue (every block normalizes the few KiB of x it needs
** itself) and SwiGLU in its epilogue (the gate and up rows are read side by
** side; the intermediate never leaves the chip). Rounding is the unfused
** sequence's, so a fused call differs from it only in summation order:
**   norm:   xn = rne((x * r) * w), r = 1/sqrt(sum(x^2)/K + eps) per row of x
**           (Gemma: (1 + w)), exactly as atk_rmsnorm rounds its output;
**           y  = rne(xn . W^T)
**   SwiGLU: g = rne(xn . Wg^T), u = rne(xn . Wu^T) (xn = x without a norm);
**           y = rne(silu(g) * u), silu(v) = v / (1 + exp(-v)) in fp32
** Shapes: x[M,K], w[K], W/Wg/Wu [N,K] row-major, y[M,N]; for SwiGLU N is
** the intermediate size. Checkpoints that store gate_proj and up_proj
** concatenated as one [2N,K] weight pass Wg = W and Wu = W + N*K.
** The same dispatch rule as atk_gemv over the op's own tuned entries. When
** no fused kernel serves a call (or the tuner found none faster than the
** unfused sequence: the stored answer is then "unfused"), the call runs the
** unfused sequence with atk's own calls: atk_rmsnorm / atk_gemma_rmsnorm
** into scratch, atk_gemv (one call over 2N rows when Wu == Wg + N*K, else
** two), and a SiLU-mul kernel. `scratch` must hold
** atk_fused_scratch_bytes(op, dtype, M, K, N) bytes, 16-byte aligned, not
** overlapping the other buffers; it is passed always (a call may fall
** back at any M) and is never read by a fused kernel but the add forms'
** (their counters, below: zero the scratch once when it is allocated).
** y must not overlap x, w or the weights. M, K, N in 1..INT_MAX.
** Graph-safe as every call.
** A fused call counts once, in its own op's atk_stats (the unfused
** sequence's norm and GEMV count nowhere); ATK_STRICT applies to the fused
** call (a stored "unfused" answer is TUNED), not to its components. A dry
** context checks a fused call's pointers (NULL, scratch alignment) unless
** every one is NULL (a planning call). ATK_UNFUSED at open: no fused
** kernel, every fused call runs the unfused sequence. */
ATK_API int atk_rmsnorm_gemv(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N,
                             const void *x, const void *w, const void *W, void *y, float eps, void *scratch);
ATK_API int atk_gemma_rmsnorm_gemv(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N,
                                   const void *x, const void *w, const void *W, void *y, float eps, void *scratch);
ATK_API int atk_gemv_swiglu(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N,
                            const void *x, const void *Wg, const void *Wu, void *y, void *scratch);
ATK_API int atk_rmsnorm_gemv_swiglu(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N,
                                    const void *x, const void *w, const void *Wg, const void *Wu, void *y,
                                    float eps, void *scratch);
ATK_API int atk_gemma_rmsnorm_gemv_swiglu(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K,
                                          int64_t N, const void *x, const void *w, const void *Wg, const void *Wu,
                                          void *y, float eps, void *scratch);
/* The residual-add forms: z = rne(x + residual) is written back into
** residual in place (as atk_add_rmsnorm writes it, bit for bit), and y =
** W . rne(norm(z) * w) (Gemma: (1 + w)), the norm computed from the rounded
** z. x is what the residual stream gains (an attention or MLP output).
** Every block of a fused kernel reads all of x and residual, so the block
** that finishes last writes z back: the kernel keeps a counter per token
** group in the first ATK_FUSED_COUNTER_BYTES bytes of `scratch`, which must
** be ZERO before the first call (cudaMemset once when it is allocated);
** every call leaves them zero. The fused kernels serve M <= 64 (one counter
** per token group); a larger M runs the unfused sequence, atk_add_rmsnorm /
** atk_add_gemma_rmsnorm (the residual in place, the normalized z into
** scratch) and atk_gemv. residual must not overlap x, w, W or y; a scratch
** may serve several fused calls one after another (not at once). */
ATK_API int atk_add_rmsnorm_gemv(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K, int64_t N,
                                 const void *x, void *residual, const void *w, const void *W, void *y, float eps,
                                 void *scratch);
ATK_API int atk_add_gemma_rmsnorm_gemv(atk_ctx *ctx, atk_stream stream, int dtype, int64_t M, int64_t K,
                                       int64_t N, const void *x, void *residual, const void *w, const void *W,
                                       void *y, float eps, void *scratch);
/* The counters at the start of every fused op's scratch (the add forms'). */
#define ATK_FUSED_COUNTER_BYTES 256
/* Bytes of scratch a fused call of `op` needs: ATK_FUSED_COUNTER_BYTES,
** then its unfused fallback's normalized x, then g and u, each rounded up
** to 256 bytes; 0 for an op that is not fused or a bad argument. */
ATK_API size_t atk_fused_scratch_bytes(int op, int dtype, int64_t M, int64_t K, int64_t N);

/* y[T,H] = rne(x * r * w), r = 1/sqrt(sum(x^2)/H + eps) per row; w[H] of
** dtype. Rounding as stated in the tuner's tuner/norm_ref.h. */
ATK_API int atk_rmsnorm(atk_ctx *ctx, atk_stream stream, int dtype, int64_t T, int64_t H, const void *x,
                        const void *w, void *y, float eps);
/* z = rne(x + residual) is written back into residual[T,H]; y = rne(z * r * w)
** with r from the rounded z. */
ATK_API int atk_add_rmsnorm(atk_ctx *ctx, atk_stream stream, int dtype, int64_t T, int64_t H, const void *x,
                            void *residual, const void *w, void *y, float eps);
/* Gemma: the weight factor is (1 + w); w[H] of dtype (fp32 Gemma weights
** are not supported by this API). */
ATK_API int atk_gemma_rmsnorm(atk_ctx *ctx, atk_stream stream, int dtype, int64_t T, int64_t H,
                              const void *x, const void *w, void *y, float eps);
ATK_API int atk_add_gemma_rmsnorm(atk_ctx *ctx, atk_stream stream, int dtype, int64_t T, int64_t H,
                                  const void *x, void *residual, const void *w, void *y, float eps);

/* What a call of `op` on this shape gets, without launching or counting.
** Norm ops: M = T, K = H, N ignored. Strings point into the context. */
typedef struct atk_choice {
    int path;              /* enum atk_path */
    const char *strategy;  /* "splitk", "warp_row", "cublas", "norm_naive" ... */
    const char *kernel;    /* entry point; "" for cuBLAS */
    const char *params;    /* "TP_WARPS=8 ..." ; "" for a fallback */
    const char *from;      /* the tuned shape the kernel comes from ("1x2048x8192"); "" for fallback */
    unsigned grid[3], block[3], smem;
    int pdl;               /* launched with programmatic stream serialization */
    int recompiled;        /* the cubin was rebuilt with NVRTC at open */
    int bucket;            /* BUCKET / INFERRED: the tuned M (T) that serves this call; else 0 */
    char reason[160];      /* why, in words: "tuned", "bucket M=8 (mma, 3 tokens masked)",
                              "validated: cuBLAS faster at M=12 (9.10 vs 8.70 us)",
                              "fallback: no kernel reads the weights once at M=40" */
    const char *key;       /* key digest of the table entry behind the choice (the tuned
                              kernel, or the tuned shape whose answer is the fallback);
                              "" when no entry is involved */
} atk_choice;

/* Fills *out for op/dtype/shape as a call would be served, without
** ATK_STRICT (a strict call refuses anything but path TUNED) and with
** pointers aligned to 16 bytes (a call demotes a kernel whose vector loads
** its pointers do not suit to fallback). Returns ATK_OK, or ATK_ERR_USAGE
** for a NULL ctx or out, an unknown op or dtype, or a dimension outside
** 1..INT_MAX (N is not checked for the norms). */
ATK_API int atk_explain(atk_ctx *ctx, int op, int dtype, int64_t M, int64_t K, int64_t N, atk_choice *out);

/* ------------------------------------------------------------ statistics */

/* Per op, since open or the last reset. calls = tuned + bucket + inferred
** + fallback + missed + rejected (bad arguments). */
typedef struct atk_op_stats {
    uint64_t calls;
    uint64_t tuned;    /* exact shape tuned */
    uint64_t inferred; /* a nearby tuned shape's kernel */
    uint64_t fallback; /* cuBLAS / naive fused norm */
    uint64_t missed;   /* refused in strict mode */
    uint64_t rejected; /* ATK_ERR_USAGE */
    uint64_t bucket;   /* the kernel of a larger tuned M of the same K, N */
} atk_op_stats;

/* Copies op's counters (a snapshot; concurrent calls may move them). */
ATK_API int atk_stats(const atk_ctx *ctx, int op, atk_op_stats *out);
/* Zeroes every counter. */
ATK_API void atk_stats_reset(atk_ctx *ctx);

/* What atk_open found. */
typedef struct atk_info {
    char device[128];
    int cc, sms, driver_version;
    int dry;               /* atk_open_dry */
    size_t rows;           /* entries in the table, all GPUs */
    size_t for_this_gpu;   /* of them, tuned for this GPU */
    size_t loaded;         /* usable entries (one per op, dtype, shape) */
    size_t recompiled;     /* of loaded, rebuilt with NVRTC */
    size_t failed;         /* for this GPU but unusable (cubin, key, load): on fallback */
    int all_fallback;      /* nothing tuned is usable: every call falls back */
} atk_info;

ATK_API int atk_get_info(const atk_ctx *ctx, atk_info *out);
/* Lines saying where the table came from, what was loaded, and each
** entry or whole table that fell back and why. Owned by ctx. */
ATK_API const char *atk_report(const atk_ctx *ctx);

/* "gemv", "rmsnorm", ..., "gemv_add"; "?" outside enum atk_op. */
ATK_API const char *atk_op_name(int op);

/* ---------------------------------------------------------------- errors */

/* The message of the last failed call this thread made on ctx (or of the
** last failed atk_open* on this thread when ctx is NULL); "" if that call
** succeeded or the thread's last failure was on another context. Messages
** name their library ("cuda: ...", "sqlite: ...", "nvrtc: ..."). */
ATK_API const char *atk_errmsg(const atk_ctx *ctx);
/* Fixed text for a status code. */
ATK_API const char *atk_errstr(int status);

#ifdef __cplusplus
}
#endif

#endif /* ATK_H */
