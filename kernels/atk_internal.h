/*
** atk_internal.h — the body of atk_ctx and what the runtime's files share:
** rows read from a table, entries ready to launch, the driver table, the
** lookup index. Invariant: after atk_open returns, nothing in a context
** changes except the atomic counters and the claimed memo slots.
*/
#ifndef ATK_INTERNAL_H
#define ATK_INTERNAL_H

#include "atk.h"

#include <cublas_v2.h>
#include <cuda.h>
#include <stdarg.h>
#include <stdatomic.h>

#if defined(__GNUC__)
#define ATK_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ATK_PRINTF(a, b)
#endif

/* ---------------------------------------------------------------- errors */

/* Records "message" for (ctx, this thread) and returns status. */
int atk__fail(const atk_ctx *ctx, int status, const char *fmt, ...) ATK_PRINTF(3, 4);
/* Clears this thread's message for ctx (a call on ctx succeeded). */
void atk__clear(const atk_ctx *ctx);
/* The thread's last message, whatever ctx it was for. */
const char *atk__lastmsg(void);

/* ---------------------------------------------------------------- driver */

typedef struct atk_driver {
    void *lib;
#define ATK_CU_FN(name) __typeof__(name) *name##_
    ATK_CU_FN(cuInit);
    ATK_CU_FN(cuDriverGetVersion);
    ATK_CU_FN(cuDeviceGetCount);
    ATK_CU_FN(cuDeviceGet);
    ATK_CU_FN(cuDeviceGetName);
    ATK_CU_FN(cuDeviceGetAttribute);
    ATK_CU_FN(cuDevicePrimaryCtxRetain);
    ATK_CU_FN(cuDevicePrimaryCtxRelease);
    ATK_CU_FN(cuCtxGetCurrent);
    ATK_CU_FN(cuCtxPushCurrent);
    ATK_CU_FN(cuCtxPopCurrent);
    ATK_CU_FN(cuMemAlloc);
    ATK_CU_FN(cuMemFree);
    ATK_CU_FN(cuModuleLoadData);
    ATK_CU_FN(cuModuleUnload);
    ATK_CU_FN(cuModuleGetFunction);
    ATK_CU_FN(cuFuncSetAttribute);
    ATK_CU_FN(cuLaunchKernel);
    ATK_CU_FN(cuLaunchKernelEx);
    ATK_CU_FN(cuGetErrorName);
    ATK_CU_FN(cuGetErrorString);
#undef ATK_CU_FN
} atk_driver;

/* dlopen's libcuda.so.1 and resolves the entry points (ATK_ERR_NOGPU with a
** plain reason when there is no driver). */
int atk__driver_load(atk_driver *d);
/* CUresult -> ATK_OK / ATK_ERR_CUDA / ATK_ERR_CUDA_STICKY, message "cuda: what: NAME (text)". */
int atk__cuda_check(const atk_ctx *ctx, const atk_driver *d, CUresult r, const char *what);

/* ------------------------------------------------------------------ rows */

/* One winner as a table holds it: the key fields [CACHE_KEY] and what the
** runtime needs of the winner. Strings are copied in; cubin and source are
** borrowed (from the C table) or owned (cubin_owned). */
typedef struct atk_row {
    char key_sha[65];
    char op[32], dtype[24], shape[64], device[128];
    int cc, sms, driver_version, nvrtc_version;
    char space_sha[65], options[160], tuner_version[16];
    char strategy[48], kernel[48], template_name[128], params[256];
    double us;
    unsigned grid[3], block[3], smem;
    const unsigned char *cubin;
    size_t cubin_size;
    char cubin_sha[65];
    int cubin_owned;
    const char *source; /* template text (C table), or NULL */
} atk_row;

/* A growable list of rows, plus what the reader learned about the file. */
typedef struct atk_rows {
    atk_row *v;
    size_t n, cap;
    size_t total; /* rows of every GPU in the table */
    struct atk_override *ov; /* validation overrides for this GPU (malloc'ed) */
    size_t nov, ovcap;
} atk_rows;

/* A fresh zeroed override at the end of rows->ov (NULL when out of memory). */
struct atk_override *atk__overrides_push(atk_rows *rows);
/* A fresh zeroed row at the end of *rows (NULL when out of memory). */
atk_row *atk__rows_push(atk_rows *rows);
void atk__rows_free(atk_rows *rows);

/* Readers. Each fills rows for the GPU (name, cc, sms) and counts every row
** in rows->total; a table that cannot be used is ATK_ERR_TABLE / ATK_ERR_IO
** with a reason (for the report), never a crash. */
int atk__read_sqlite(const char *path, const char *name, int cc, int sms, atk_rows *rows);
int atk__read_json(const char *path, const char *name, int cc, int sms, atk_rows *rows);
int atk__read_table(const atk_table *t, const char *name, int cc, int sms, atk_rows *rows);

/* [CACHE_KEY] The tuner's key text and digest, rebuilt from a row's fields
** by the cache module's code (cache/key.c at_key_text_string). */
void atk__key_string(const atk_row *r, char *buf, size_t len);
void atk__key_digest(const atk_row *r, char hex[65]);
void atk__sha256_hex(const void *data, size_t len, char hex[65]);

/* --------------------------------------------------------------- entries */

enum atk_strategy_id {
    ATK_S_UNKNOWN = 0, /* a kernel this runtime does not know: exact hits only */
    ATK_S_BASELINE,    /* the tuned answer is the baseline (cuBLAS / naive norm) */
    ATK_S_GEMV_WARP_ROW, /* M=1 strategies: one block row per token */
    ATK_S_GEMV_SPLITK,
    ATK_S_GEMV_MULTI_TOKEN, /* batch strategies: each weight read once per token group (grid.y) */
    ATK_S_GEMV_MMA,
    ATK_S_GEMV_MMA_BULK,
    ATK_S_NORM_WARP_ROWS,
    ATK_S_NORM_BLOCK_ROW,
    ATK_S_NORM_SPLIT_ROW
};

/* The TP_* values a strategy's geometry and validity read (0 when absent). */
typedef struct atk_params {
    int vec, warps, rows, wpr, tpr, rpb, threads, split, pdl, op, wfp32, dtype;
    int tokens, mt, nt, ksplit; /* multi_token, mma, mma_bulk */
    int add;                    /* TP_ADD: the GEMV epilogue adds into y (gemv_add) */
    int norm, swiglu, res;      /* TP_NORM (1 RMSNorm, 2 Gemma), TP_SWIGLU, TP_RES: the fused ops */
} atk_params;

/* One loaded answer for (op, dtype, shape). */
typedef struct atk_entry {
    int op, dtype;
    int M, K, N; /* norms: M = T, K = H, N = 0 */
    int strategy;
    int inferable; /* geometry recomputes to the stored one: may serve other shapes */
    int batch;     /* a kernel that reads each weight once per token group
                      (grid.y), not per token: may serve a smaller M of its
                      own K, N (the tuned M's time bounds it) */
    int overridden; /* validation measured this answer losing at its own shape:
                       an exact call falls back (it may still serve as a bucket) */
    int synthetic;  /* not tuned: a validation override at a shape of its own */
    double val_us, val_base_us; /* the override's measurement (atk, fallback) */
    int val_wrong;              /* the override's verdict: wrong, not slower */
    atk_params p;
    unsigned grid[3], block[3], smem;
    int pdl, recompiled;
    CUmodule mod;
    CUfunction fn; /* NULL for the baseline (and in dry contexts) */
    char strategy_name[48], kernel[48], params[256], shape[64];
    char key_sha[65]; /* the row's key digest (validation overrides name it) */
} atk_entry;

/* Parses a row's strategy and params into e (no GPU work). Returns 0 when
** the row cannot be an entry (unknown op/dtype, bad shape), with why[]. */
int atk__entry_init(atk_entry *e, const atk_row *r, char *why, size_t len);
/* Launch geometry of e's kernel for another shape (M, K, N); 0 when e's
** kernel is not valid for it. [LAUNCH_GEOMETRY] mirrors search/gemv.lua and the norm specs. */
int atk__entry_geometry(const atk_entry *e, int M, int K, int N, unsigned grid[3], unsigned block[3]);
/* Dynamic shared memory of e's kernel at K: a TP_RES=2 kernel stages K *
** tokens elements of z (search/gemv.lua's staged_smem); every other kernel
** keeps its stored size (sized for its own K: such a kernel is never
** inferred for another). */
unsigned atk__entry_smem(const atk_entry *e, int K);
/* Bytes of one element of the fused ops' activations (bf16 and fp16, the
** only dtypes atk takes): staged z, the unfused sequence's scratch. */
#define ATK_ELEM_BYTES 2u

/* ------------------------------------------------------------ the context */

#define ATK_BLAS_HANDLES 4
#define ATK_BLAS_WORKSPACE (32u << 20)
#define ATK_MEMO_SLOTS 4096

/* A memo of decisions for shapes that are not tuned exactly. */
typedef struct atk_memo_slot {
    atomic_uint state; /* 0 free, 1 being written, 2 ready (never rewritten) */
    int op, dtype, M, K, N;
    int entry;         /* index of the serving entry, -1: fallback */
    int path;          /* enum atk_path */
} atk_memo_slot;

/* What `autotune validate` measured at one call shape and found losing:
** the runtime's choice there (the entry with key digest `chosen`, "" for
** the fallback itself) ran at `us` where the fallback ran at `base_us`.
** Applied at open only while the choice is still the same entry, so a
** retuned table never inherits a stale verdict. [VALIDATION_FORMAT] */
typedef struct atk_override {
    int op, dtype, M, K, N;
    char chosen[65];
    double us, base_us;
    int wrong; /* the choice failed the correctness check (else it was slower) */
} atk_override;

/* "MxKxN" (rank 3) or "TxH" (rank 2), canonical only: 1 and d[], else 0. */
int atk__parse_shape(const char *text, int rank, int d[3]);
/* A stored validation row of GPU (name, cc, sms) into rows->ov when its
** verdict makes it an override ("slower", "wrong"); other rows, rows of
** another GPU and rows that do not parse are skipped. ATK_OK or NOMEM. */
int atk__override_row(atk_rows *rows, const char *name, int cc, int sms, const char *device, int dcc, int dsms,
                      const char *op, const char *dtype, const char *shape, const char *chosen,
                      const char *verdict, double us, double base_us);
/* The validations table of an autotune SQLite cache (absent: none). */
int atk__read_sqlite_overrides(const char *path, const char *name, int cc, int sms, atk_rows *rows);

/* One cuBLAS handle. Its workspace is only ever used on one stream, the
** one it is bound to (first come), so two streams never share workspace
** memory; a call on another stream runs on it without workspace. */
typedef struct atk_blas {
    atomic_flag busy;
    atomic_uintptr_t bound; /* the stream owning the workspace; 0 unbound (set once) */
    int has_bound;          /* bound is set (written once, under busy) */
    cublasHandle_t h;
    CUstream stream;        /* the stream last set on h (only under busy) */
    int stream_set, ws_set; /* whether stream / our workspace are set on h */
    CUdeviceptr workspace;
} atk_blas;

typedef struct atk_counters {
    atomic_uint_fast64_t calls, tuned, inferred, fallback, missed, rejected, bucket;
} atk_counters;

struct atk_ctx {
    unsigned flags;
    int dry;
    atk_info info;
    atk_driver cu;
    CUdevice dev;
    CUcontext cuctx; /* the primary context, retained */
    atk_entry *entries;
    size_t nentries;
    int32_t *index; /* open addressing over entries; -1 empty */
    size_t index_mask;
    atk_memo_slot *memo;
    CUmodule naive_mod[ATK_NOPS][2];
    CUfunction naive_fn[ATK_NOPS][2]; /* [op][dtype-1]; the GEMV ops' unused */
    CUmodule silu_mod[2];
    CUfunction silu_fn[2]; /* [dtype-1]: the fused ops' unfused SiLU-mul (templates/baseline/silu_mul.cu) */
    atk_blas blas[ATK_BLAS_HANDLES];
    atk_counters count[ATK_NOPS];
    char *report;
    size_t report_len, report_cap;
};

/* Appends a formatted line to ctx->report (ignored when out of memory). */
void atk__report(atk_ctx *ctx, const char *fmt, ...) ATK_PRINTF(2, 3);

/* Where NVRTC gets a template and the shared headers when a cubin must be
** rebuilt: the sources embedded in a compiled table, or a templates folder
** (ATK_TEMPLATES) whose common/ headers are read on first need. */
typedef struct atk_sources {
    const atk_table *table;
    const char *dir;
    int dir_read;
    char **names, **texts; /* the folder's common/ headers */
    int n;
} atk_sources;
void atk__sources_free(atk_sources *s);

/* Builds the context from rows (all open paths): checks each row (key
** digest, cubin sha256, strategy), picks one entry per shape, loads its
** module (unless dry), builds the index and the memo. */
int atk__ctx_build(atk_ctx *ctx, atk_rows *rows, atk_sources *src);

/* Reads the rows of a table (a file at path, or a compiled table) for the
** GPU (name, cc, sms). */
typedef int (*atk_reader)(const char *path, const atk_table *t, const char *name, int cc, int sms, atk_rows *rows);
/* atk_open, atk_open_table and atk_open_dry: one body (atk_open.c). */
int atk__open_common(const char *path, const atk_table *table, atk_reader reader, int device, const atk_gpu_id *dry,
                     unsigned flags, atk_ctx **out);

/* Loads the cubin of e from r (recompiling when allowed); 0 on success. */
int atk__entry_load(atk_ctx *ctx, atk_entry *e, const atk_row *r, atk_sources *src, char *why,
                    size_t len);
/* Loads the embedded naive fused norms (all ops, both dtypes) and the
** SiLU-mul kernel of the fused ops' unfused sequence. */
int atk__fallback_load(atk_ctx *ctx);
/* Creates the cuBLAS handles with their workspaces. */
int atk__blas_create(atk_ctx *ctx);
void atk__blas_destroy(atk_ctx *ctx);

/* The decision for a call: entry index >= 0, or -1; *path. An entry may be
** returned with path FALLBACK (a validation override: the entry says why);
** the caller launches the fallback whenever *path is FALLBACK or the entry
** is the baseline. */
int atk__lookup(atk_ctx *ctx, int op, int dtype, int M, int K, int N, int *path);
int atk__index_build(atk_ctx *ctx);
/* The rule without the memo or the overrides (validation compares with it). */
int atk__decide(const atk_ctx *ctx, int op, int dtype, int M, int K, int N, int *path);
/* Applies validation overrides (after the index is built): marks or adds
** entries, rebuilds the index; reports what was applied and what was stale. */
int atk__overrides_apply(atk_ctx *ctx, const atk_override *ov, size_t n);
/* The report's lines listing, per shape, the tuned buckets and their kernels. */
void atk__report_buckets(atk_ctx *ctx);

/* NVRTC: compiles source (with headers) with `options` plus -D for each
** "TP_X=v" of params; *cubin malloc'ed. */
int atk__nvrtc_compile(const char *name, const char *source, atk_sources *src, const char *options,
                       const char *params, void **cubin, size_t *size, char *why, size_t len);

/* The GEMV ops (gemv, gemv_add and the fused decode ops): MxKxN shapes,
** the GEMV templates; the others are the norms (TxH). */
static inline int atk__is_gemv(int op)
{
    return op == ATK_OP_GEMV || op == ATK_OP_GEMV_ADD || (op >= ATK_OP_RMSNORM_GEMV && op < ATK_NOPS);
}

/* The fused decode ops (rmsnorm_gemv ... add_gemma_rmsnorm_gemv): their
** fallback is the unfused sequence, not cuBLAS. */
static inline int atk__is_fused(int op)
{
    return op >= ATK_OP_RMSNORM_GEMV && op < ATK_NOPS;
}

/* A fused op's TP_NORM (0 none, 1 RMSNorm, 2 Gemma), TP_SWIGLU (0, 1) and
** TP_RES (0; 1 for the residual-add forms, whose kernels are TP_RES=1 or 2);
** 0 for every other op. [FUSED_OPS]
** search/gemv.lua sets the same values. */
static inline int atk__fused_norm(int op)
{
    return op == ATK_OP_RMSNORM_GEMV || op == ATK_OP_RMSNORM_GEMV_SWIGLU || op == ATK_OP_ADD_RMSNORM_GEMV ? 1
           : op == ATK_OP_GEMMA_RMSNORM_GEMV || op == ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU ||
                   op == ATK_OP_ADD_GEMMA_RMSNORM_GEMV
               ? 2
               : 0;
}

static inline int atk__fused_res(int op)
{
    return op == ATK_OP_ADD_RMSNORM_GEMV || op == ATK_OP_ADD_GEMMA_RMSNORM_GEMV;
}

/* The most token groups (gridDim.y) a residual-add kernel may have: one
** counter each in the scratch's ATK_FUSED_COUNTER_BYTES. */
#define ATK_FUSED_MAX_GROUPS (ATK_FUSED_COUNTER_BYTES / 4)

static inline int atk__fused_swiglu(int op)
{
    return op == ATK_OP_GEMV_SWIGLU || op == ATK_OP_RMSNORM_GEMV_SWIGLU || op == ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU;
}

/* op name <-> enum atk_op; dtype name <-> enum atk_dtype (-1 if unknown). */
int atk__op_parse(const char *name);
int atk__dtype_parse(const char *name);

#endif /* ATK_INTERNAL_H */
