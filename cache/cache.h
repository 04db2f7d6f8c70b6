/*
** cache.h — the cache module (cache/, library atcache): the SQLite store of
** tuned winners and trials, the cache key and its digest, the exported table
** formats, and the vocabulary they are written in (status codes and the
** per-thread message, shapes, dtypes, SHA-256). The tuner (tuner/autotune.h
** includes this header) and the runtime library (kernels/, atk) both build
** on it, so the key text and the schema exist once ([CACHE_KEY]).
**
** Every fallible function returns an at_status; data comes back through
** out-parameters; at_errmsg() is the last failure's message on this thread.
*/
#ifndef AT_CACHE_H
#define AT_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Part of every key: a new tuner version never reuses an old answer. */
#define AT_TUNER_VERSION "0.1.0"
/* Strategy and parameter names in trials and winners (and specs). */
#define AT_NAME_LEN 48

/* Status codes double as the CLI's exit codes (documented in --help). */
typedef enum at_status {
    AT_OK = 0,
    AT_ERR_USAGE = 2,       /* bad argument, shape, op, dtype, option      */
    AT_ERR_SPEC = 3,        /* spec unreadable, Lua error, empty space     */
    AT_ERR_NOGPU = 4,       /* needs a GPU and there is none / no driver   */
    AT_ERR_CUDA = 5,        /* CUDA driver / cuBLAS call failed            */
    AT_ERR_CUDA_STICKY = 6, /* context lost (illegal address ...): restart */
    AT_ERR_NVRTC = 7,       /* NVRTC itself unusable (not a compile error) */
    AT_ERR_CACHE = 8,       /* SQLite cache unreadable, unwritable, foreign */
    AT_ERR_IO = 9,          /* file could not be read or written           */
    AT_ERR_NOMEM = 10,      /* host allocation failed                      */
    AT_ERR_HARNESS = 11,    /* a measurement broke the ceiling: our bug    */
    AT_ERR_INTERRUPTED = 130
} at_status;

/* The message of the last failure recorded on this thread ("" if none). */
const char *at_errmsg(void);
/* Fixed text for a status code. */
const char *at_errstr(int status);
/* Records a formatted message for this thread and returns `status`, so a
** caller writes `return at_fail(AT_ERR_IO, "cannot read %s", path);`. */
int at_fail(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---------------------------------------------------------------- shapes */

/* A problem shape. GEMV-like ops: M tokens, K input features, N output
** features (y[M,N] = x[M,K] . W[N,K]^T). Norm ops: T tokens x H hidden,
** stored as M = T, K = H, N = 0, rank = 2. */
typedef struct at_shape {
    int64_t M, K, N;
    int rank; /* 3 for MxKxN, 2 for TxH */
} at_shape;

/* Largest accepted single dimension and element count of one operand. */
#define AT_SHAPE_MAX_DIM 2147483647LL
#define AT_SHAPE_MAX_ELEMS (1LL << 40)

/* Parses "MxKxN" (rank 3) or "TxH" (rank 2). Every dimension must be a
** decimal integer in 1..AT_SHAPE_MAX_DIM and each operand's element count at
** most AT_SHAPE_MAX_ELEMS. Returns AT_OK or AT_ERR_USAGE naming the problem. */
int at_shape_parse(const char *text, int rank, at_shape *out);
/* Writes "MxKxN" / "TxH" into buf (always NUL-terminated). */
void at_shape_format(const at_shape *s, char *buf, size_t len);
/* A shape or a range of batch buckets: "LO..HIxKxN" ("LO..HIxH") is LO,
** every power of two between, and HI, e.g. 1..16x2048x8192 is M = 1, 2, 4,
** 8, 16 and 3..12x2048 is T = 3, 4, 8, 12; a plain shape is one bucket.
** Fills out[0..*n) (at most max). AT_ERR_USAGE naming the problem. */
int at_shape_buckets(const char *text, int rank, at_shape *out, int max, int *n);
/* Buckets one range may name: 1..65535 is 1, the 15 powers of two between,
** 65535. */
#define AT_SHAPE_MAX_BUCKETS 17

/* ---------------------------------------------------------------- dtypes */

typedef enum at_dtype { AT_BF16 = 1, AT_FP16 = 2 } at_dtype;

/* "bf16" / "fp16" -> dtype; AT_ERR_USAGE for anything else. */
int at_dtype_parse(const char *text, at_dtype *out);
const char *at_dtype_name(at_dtype d);
/* Relative-error tolerance of the correctness gate for this dtype. */
double at_dtype_tolerance(at_dtype d);

/* 16-bit float conversions (round to nearest even), used by the reference. */
uint16_t at_f32_to_bf16(float f);
float at_bf16_to_f32(uint16_t h);
uint16_t at_f32_to_fp16(float f);
float at_fp16_to_f32(uint16_t h);
uint16_t at_f32_to_half(at_dtype d, float f);
float at_half_to_f32(at_dtype d, uint16_t h);

/* ---------------------------------------------------------------- sha256 */

/* Lower-case hex SHA-256 of data into hex[65]. */
void at_sha256_hex(const void *data, size_t len, char hex[65]);

/* ---------------------------------------------------------------- cache */

typedef struct at_cache at_cache;

#define AT_SCHEMA_VERSION 1

/* One GPU as the tuner saw it, with its measured ceilings. */
typedef struct at_device_info {
    char name[128];
    int cc_major, cc_minor, sms;
    int64_t l2_bytes, mem_bytes;
    int driver_version;     /* cuDriverGetVersion, e.g. 13000 */
    int nvrtc_major, nvrtc_minor;
    double read_gbps;       /* streaming-read kernel ceiling, GB/s (1e9) */
    double copy_gbps;       /* device-to-device copy, read+write GB/s    */
    double empty_us;        /* empty kernel in graph replay, per launch  */
} at_device_info;

/* Everything that can change a tuning answer. [CACHE_KEY] The runtime
** library rebuilds the key from a table row's fields with at_key_text_*
** (key.c), the one implementation of the text and its digest. */
typedef struct at_key {
    char op[32]; /* the longest op name, gemma_rmsnorm_gemv_swiglu, has 25 characters */
    at_dtype dtype;
    char shape[64];     /* at_shape_format */
    char device[128];
    int cc;             /* 10*major+minor */
    int sms;
    int driver_version;
    int nvrtc_version;  /* 1000*major+10*minor */
    char space_sha[65]; /* sha256 of the spec and every template it names (a fused op: and its
                           components' winners, tuner/components.c) */
    char options[160];  /* compile options common to all candidates */
    char tuner_version[16];
} at_key;

/* The canonical text of a key ("v1;op=gemv;dtype=bf16;...", always
** NUL-terminated, truncated to len) and its lower-case hex sha256. */
void at_key_string(const at_key *k, char *buf, size_t len);
void at_key_digest(const at_key *k, char hex[65]);

/* A key as a stored row holds it: the same fields, the dtype as the text a
** row stores (at_key_string's: "bf16", or "#<n>" for a value with no name).
** Strings are borrowed and read up to the size of the matching at_key field
** (a longer one is cut there, as at_key_string would cut it). */
typedef struct at_key_text {
    const char *op, *dtype, *shape, *device;
    int cc, sms, driver_version, nvrtc_version;
    const char *space_sha, *options, *tuner_version;
} at_key_text;

/* The same text and digest from a row's fields: for any at_key k,
** at_key_text_digest of k's fields (dtype as its text) equals
** at_key_digest(k). NULL strings read as "". The runtime library (atk)
** checks every row it loads against its stored key_sha with it. */
void at_key_text_string(const at_key_text *t, char *buf, size_t len);
void at_key_text_digest(const at_key_text *t, char hex[65]);
/* The dtype's text in a key: its name when it round-trips through
** at_dtype_parse, else "#<n>", so no value can alias a real dtype's text. */
void at_key_dtype_text(at_dtype d, char out[24]);

typedef enum at_trial_state {
    AT_TRIAL_OK = 0,      /* compiled, correct, timed */
    AT_TRIAL_PRUNED,      /* a named constraint rejected it */
    AT_TRIAL_COMPILE_FAIL,
    AT_TRIAL_WRONG,       /* failed the correctness gate */
    AT_TRIAL_CRASHED,     /* sticky CUDA error */
    AT_TRIAL_TIMEOUT,
    AT_TRIAL_SPILLS       /* compiled, but spilled registers (not timed) */
} at_trial_state;

const char *at_trial_state_name(at_trial_state s);

/* One candidate's result under one key. */
typedef struct at_trial {
    char strategy[AT_NAME_LEN];
    char params[256];   /* at_candidate_params_string */
    at_trial_state state;
    char reason[256];   /* why pruned / compile error / error norm ... */
    double us, us_min, us_max; /* graph replay, per launch (median, spread) */
    double stream_us;   /* back-to-back stream launches, 0 if not measured */
    double rel_err;     /* ||y-ref||/||ref|| from the correctness gate */
    int regs, spill_bytes, smem_bytes;
    double occupancy;   /* at_occupancy's estimate once compiled; 0 unknown */
} at_trial;

/* The stored answer for one key: a generated kernel or the baseline. */
typedef struct at_winner {
    char strategy[AT_NAME_LEN]; /* "cublas" when the baseline won */
    char kernel[AT_NAME_LEN];   /* entry point; "" for the baseline */
    char template_name[128];    /* "gemv/gemv_warp_row.cu"; "" for baseline */
    char params[256];
    double us, us_min, us_max;
    double baseline_us, baseline_min, baseline_max;
    double speedup;             /* baseline_us / us (1.0 for the baseline) */
    double bytes;               /* bytes moved per call */
    unsigned grid[3], block[3], smem;
    void *cubin;                /* malloc'ed blob (NULL for the baseline) */
    size_t cubin_size;
    char cubin_sha[65];
} at_winner;

/* Opens (creating file, parent directories and schema if needed) the cache
** at `path`. A file that is not SQLite, is corrupt, or has a newer schema is
** refused with AT_ERR_CACHE and left untouched. */
int at_cache_open(const char *path, at_cache **out);
void at_cache_close(at_cache *c); /* NULL is a no-op */
/* The default path: $XDG_CACHE_HOME/autotune/tune.db, else
** $HOME/.cache/autotune/tune.db. */
int at_cache_default_path(char *buf, size_t len);

/* Looks the device up by name, cc and sms; fills its ceilings if found. */
int at_cache_get_device(at_cache *c, at_device_info *dev, int *found);
int at_cache_put_device(at_cache *c, const at_device_info *dev);

/* Trials: one row per (key, strategy, params); put replaces. */
int at_cache_put_trial(at_cache *c, const at_key *k, const at_trial *t);
/* Finds a stored trial for this key + strategy + params. */
int at_cache_get_trial(at_cache *c, const at_key *k, const char *strategy,
                       const char *params, at_trial *out, int *found);
/* Winners: one per key; put replaces. get fills *out (cubin malloc'ed;
** free with at_winner_clear). */
int at_cache_put_winner(at_cache *c, const at_key *k, const at_winner *w);
/* A fresh tune's answer: k's winner is put, and every other winner of its
** problem (op, dtype, shape, device, cc, sms) under the same driver, NVRTC
** and options goes: those answered another spec, other templates, other
** component winners or another tuner version, and the runtime, which ranks
** one problem's rows by µs, would otherwise serve a stale one. Rows of other
** drivers or NVRTC versions stay (the runtime ranks those by version), and
** so do trials. Both or neither; *superseded (may be NULL) receives how many
** went. An import keeps put's union instead (cache_table.c). */
int at_cache_replace_winners(at_cache *c, const at_key *k, const at_winner *w, int *superseded);
int at_cache_get_winner(at_cache *c, const at_key *k, at_winner *out, int *found);
void at_winner_clear(at_winner *w);

/* One stored winner as warm start reads it (at_cache_list_winners). */
typedef struct at_winner_ref {
    char shape[64];             /* at_shape_format of the tuned shape */
    char strategy[AT_NAME_LEN]; /* the baseline's name when the baseline won */
    char params[256];
    double us, speedup;
} at_winner_ref;

/* The winners stored for k's device, cc, sms, op and dtype, under any key
** (any shape, driver, spec ...), newest first: up to `max` into out[0..),
** how many into *n. Read-only. */
int at_cache_list_winners(at_cache *c, const at_key *k, at_winner_ref *out, int max, int *n);

/* Many puts in one transaction: begin/commit (commit is cheap to repeat). */
int at_cache_begin(at_cache *c);
int at_cache_commit(at_cache *c);

#endif /* AT_CACHE_H */
