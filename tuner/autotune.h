/*
** autotune.h — the tuner library that the `autotune` CLI is built on.
**
** Every fallible function returns an at_status; data comes back through
** out-parameters. The message of the last failure on this thread is
** at_errmsg(); it always names the library it came from ("nvrtc: ...",
** "sqlite: ...", "cuda: ...", "search/gemv.lua:12: ..."). Only main.c exits.
*/
#ifndef AUTOTUNE_H
#define AUTOTUNE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define AT_TUNER_VERSION "0.1.0"

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

/* ----------------------------------------------------------------- specs */

/* A search spec: a sandboxed Lua file that returns one table (see
** search/gemv.lua for the format). Opaque; owns its Lua state. */
typedef struct at_spec at_spec;

#define AT_MAX_PARAMS 16
#define AT_NAME_LEN 48

typedef struct at_param {
    char name[AT_NAME_LEN]; /* "TP_VEC" */
    int64_t value;
} at_param;

/* What a spec's functions see as `shape`. */
typedef struct at_problem {
    const char *op; /* "gemv" */
    at_dtype dtype;
    at_shape shape;
    int arch; /* compute capability as 10*major+minor, e.g. 90 */
    int sms;  /* multiprocessors (0 when unknown, e.g. --dry-run) */
} at_problem;

/* One point of the search space. */
typedef struct at_candidate {
    int strategy; /* index into the spec's strategies */
    int nparams;
    at_param params[AT_MAX_PARAMS];
    char pruned_by[AT_NAME_LEN]; /* first failing constraint; "" if live */
    char prune_reason[128];      /* string a constraint returned, or ""  */
    unsigned grid[3], block[3];  /* live candidates only                 */
    unsigned smem;               /* dynamic shared memory bytes          */
} at_candidate;

/* Loads and runs the spec at `path` (at most 128 KiB) in a sandbox (no io,
** os, require, dofile, loadfile, debug, package, metatables, next/pairs or
** string patterns; load() takes text only; a memory limit, and instruction
** limits per call into Lua and for the whole entry point that also count
** the C work of library functions). A space over the candidate cap is
** refused here. Errors read "path:line: message". The caller owns *out and
** frees it with at_spec_free. */
int at_spec_load(const char *path, at_spec **out);
/* Same, from a string; `chunkname` is used in messages (e.g. "fixture"). */
int at_spec_load_string(const char *source, const char *chunkname, at_spec **out);
void at_spec_free(at_spec *spec); /* NULL is a no-op */

const char *at_spec_op(const at_spec *spec);
/* The spec's search_strategy field ("exhaustive", "random", "anneal" or
** "halving", checked at load): how the timing phase searches the space
** unless --strategy overrides it; NULL when the spec does not say. */
const char *at_spec_search_strategy(const at_spec *spec);
/* The spec's allow_spills field (a boolean, checked at load): 1 when
** candidates that spill registers may still be timed; 0 (the default) when
** they are rejected after compiling (state "spills"). */
int at_spec_allow_spills(const at_spec *spec);
/* min_occupancy = 0.25: a compiled candidate whose estimated occupancy
** (at_occupancy) is below it is not verified or timed; 0 when not set. */
double at_spec_min_occupancy(const at_spec *spec);
/* The theoretical occupancy (resident warps per SM / the most an SM holds,
** 0..1) of a kernel with this block size, registers per thread and shared
** memory per block (static + dynamic) on sm_<arch>, and the resident blocks
** per SM; 0 for an unknown architecture (< sm_70) or impossible inputs. */
double at_occupancy(int arch, int threads_per_block, int regs, int smem_bytes, int *blocks_per_sm);
/* Lower-case hex sha256 of the spec's source text, as loaded. */
const char *at_spec_sha256(const at_spec *spec);
int at_spec_nstrategies(const at_spec *spec);
const char *at_spec_strategy_name(const at_spec *spec, int i);
const char *at_spec_strategy_template(const at_spec *spec, int i); /* "gemv/gemv_warp_row.cu" */
const char *at_spec_strategy_kernel(const at_spec *spec, int i);   /* "gemv_warp_row" */

/* Expands the full cartesian product of every strategy's parameters, in the
** order the spec lists them, and evaluates the named constraints; live
** candidates also get grid/block/smem. *out is malloc'ed (caller frees).
** A constraint that errors, runs past the instruction limit (of one call,
** or of the whole expansion: "instruction limit exceeded (whole
** expansion)") or returns a wrong type fails the whole call with
** AT_ERR_SPEC ("path:line: ..."). */
int at_spec_expand(at_spec *spec, const at_problem *pb, at_candidate **out, int *count);
/* Bytes the op moves for this problem (the spec's bytes(shape)). */
int at_spec_bytes(at_spec *spec, const at_problem *pb, double *bytes);

/* "TP_A=1 TP_B=2" (in candidate order) into buf. */
void at_candidate_params_string(const at_candidate *c, char *buf, size_t len);
/* Value of a named parameter, or `fallback` when the candidate lacks it. */
int64_t at_candidate_param(const at_candidate *c, const char *name, int64_t fallback);
/* The -D options ("-DTP_A=1 -DTP_B=2") the tuner compiles c with for
** sm_<arch>: its parameters, except that from sm_90 on TP_PDL is always 1
** (a TP_PDL=0 candidate is the same build launched without the attribute:
** search.c [PDL_LAUNCH]), so candidates with equal options share a compile. */
void at_candidate_compile_options(const at_candidate *c, int arch, char *buf, size_t cap);

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
** library reads the same fields: change both together. */
typedef struct at_key {
    char op[24];
    at_dtype dtype;
    char shape[64];     /* at_shape_format */
    char device[128];
    int cc;             /* 10*major+minor */
    int sms;
    int driver_version;
    int nvrtc_version;  /* 1000*major+10*minor */
    char space_sha[65]; /* sha256 of the spec and every template it names */
    char options[160];  /* compile options common to all candidates */
    char tuner_version[16];
} at_key;

/* The canonical text of a key ("op=gemv;dtype=bf16;...") and its sha256. */
void at_key_string(const at_key *k, char *buf, size_t len);
void at_key_digest(const at_key *k, char hex[65]);

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

/* ------------------------------------------------------------- templates */

/* The template folder: kernel sources by relative name, plus the shared
** headers under common/ handed to NVRTC by name. Opaque. */
typedef struct at_templates at_templates;

/* Opens the folder `root` and reads every common/ *.cuh header. */
int at_templates_open(const char *root, at_templates **out);
void at_templates_free(at_templates *t); /* NULL is a no-op */
/* Source of template `name` ("gemv/gemv_warp_row.cu"), read once and kept.
** A name that is absolute, contains "..", or is not a plain relative path is
** refused with AT_ERR_SPEC (it would leave the templates folder). */
int at_templates_source(at_templates *t, const char *name, const char **source);
/* The shared headers: count, names ("common/vec.cuh") and sources. */
int at_templates_nheaders(const at_templates *t);
const char *at_templates_header_name(const at_templates *t, int i);
const char *at_templates_header_source(const at_templates *t, int i);
const char *at_templates_root(const at_templates *t);

/* ----------------------------------------------------------------- nvrtc */

/* One compilation. Inputs are borrowed; outputs are owned by the job and
** freed by at_compile_job_clear. A compile error is a result (ok = 0 and
** the log), not a failure of at_nvrtc_compile. */
typedef struct at_compile_job {
    const at_templates *tpl;
    const char *name;         /* template name, for messages and #line */
    const char *source;
    char options[512];        /* "-DTP_A=1 -DTP_B=2" (space-separated) */
    int arch;                 /* 90 -> sm_90 */
    at_dtype dtype;
    const char *cubin_dir;    /* compiled-kernel cache folder, or NULL */
    volatile int *stop;       /* if set and nonzero when the job starts: skipped */
    int done;                 /* the job ran (compiled or failed) */
    int ok;
    int cached;               /* the cubin came from cubin_dir */
    char *log;                /* compile log incl. ptxas -v lines */
    void *cubin;
    size_t cubin_size;
    int regs, spill_bytes, smem_bytes;
    int reported;             /* the log held ptxas's resource report (regs etc. are known) */
    double seconds;
} at_compile_job;

/* NVRTC's version as 1000*major + 10*minor. */
int at_nvrtc_version(void);
/* The options every candidate shares, part of the cache key. */
void at_nvrtc_common_options(at_dtype dtype, int arch, char *buf, size_t len);
/* Compiles one job (thread-safe). AT_ERR_NVRTC only when NVRTC itself fails.
** With job->cubin_dir, a cubin compiled before from the same source, headers,
** options, architecture and NVRTC version is read from there instead
** (job->cached = 1), and a fresh one is stored there (written to a temporary
** file and renamed, so a reader never sees half a cubin). Compile failures
** are not cached. A cache folder that cannot be used is ignored. */
int at_nvrtc_compile(at_compile_job *job);
/* Compiles jobs[0..n) on `threads` threads (0 = all cores) in a child
** process (compile_proc.c): NVRTC never runs in the caller's process, since
** a process that ran NVRTC forks GPU workers whose cuInit fails (seen on
** the H200, CUDA 13.0, driver 580). `progress`, if not NULL, is called from
** the calling thread as jobs finish. */
int at_nvrtc_compile_all(at_compile_job *jobs, int n, int threads,
                         void (*progress)(void *arg, int done, int total), void *arg);
/* The same in this process (the child's half of at_nvrtc_compile_all). */
int at_nvrtc_compile_threads(at_compile_job *jobs, int n, int threads,
                             void (*progress)(void *arg, int done, int total), void *arg);
void at_compile_job_clear(at_compile_job *job);

/* ---------------------------------------------------------------- search */

/* What `autotune --op ... --shape ...` asks for. */
typedef struct at_search_opts {
    const char *op;             /* must equal the spec's op */
    at_dtype dtype;
    at_shape shape;
    const char *spec_path;      /* search/<op>.lua */
    const char *templates_root; /* templates/ */
    const char *db_path;        /* SQLite cache; NULL with dry_run */
    int device;                 /* GPU ordinal */
    int arch;                   /* dry run target (0: present GPU, else 90) */
    int dry_run;                /* expand + compile only; no GPU, no cache */
    int force;                  /* ignore cached winners and failed trials */
    int reps;                   /* replays per candidate (median of), >= 5 */
    int threads;                /* compile threads, 0 = all cores */
    int progress;               /* progress on stderr: an at_progress_mode (progress.h):
                                   0 none, 1 live line (a terminal), 2 plain lines */
    volatile int *interrupt;    /* set asynchronously (SIGINT): stop soon */
    /* The timing phase's search (strategy.h), from --effort, --strategy and
    ** --budget; validated by the CLI; chosen by at_strategy_choose. */
    const char *effort;   /* "quick" | "normal" | "patient" | "exhaustive"; NULL: not
                             given ("normal") */
    const char *strategy; /* "exhaustive" | "random" | "anneal" | "halving"; NULL: the
                             effort's if one was given, else the spec's
                             search_strategy, else the effort's (normal: halving) */
    int budget;           /* > 0: replaces the effort's budget; 0: the effort's */
    double eps;                 /* norm ops: added to mean(x^2); 0 = 1e-6 */
    int verify_only;            /* stop after the correctness gate (tests): no timing, no winner */
    /* Compiling ahead (suite_run.c: the next entry compiles while this one
    ** is on the GPU). */
    int compile_only;           /* compile into the cubin cache and stop: nothing timed,
                                   nothing stored, nothing reported */
    void (*before_gpu)(void *arg); /* called once the candidates are compiled, as the GPU
                                   phases begin, from a process that may fork; NULL: none */
    void *before_gpu_arg;
} at_search_opts;

/* One candidate as the run saw it. */
typedef struct at_search_row {
    at_candidate cand;
    at_trial trial;      /* state, reason, µs, registers ... */
    double gbps;         /* bytes / graph µs */
    double ratio;        /* baseline µs / µs */
    int final;           /* re-timed in the final round */
    int reps;            /* replays behind trial.us (0: not timed; issue 5) */
} at_search_row;

/* One baseline contestant as the run timed it. Baseline 0 is the one the
** winner rule compares with (cuBLAS for gemv, the naive fused kernel for the
** norms); the others are shown beside it (the unfused chain). */
#define AT_MAX_BASELINES 4
typedef struct at_search_baseline {
    char strategy[AT_NAME_LEN]; /* "cublas", "naive", "unfused" */
    char label[24];             /* table column: "vs cuBLAS" */
    char what[128];             /* params column */
    char json_name[AT_NAME_LEN];/* "cublasGemmEx", "norm_naive" */
    double us, us_min, us_max, stream_us, gbps;
} at_search_baseline;

typedef struct at_search_result {
    at_device_info dev;
    int arch;
    at_key key;
    char key_sha[65];
    int from_cache;      /* answered from a stored winner */
    int dry_run;
    int interrupted;
    int harness_errors;  /* measurements above the read ceiling */
    int ncand, npruned, ncompiled, ncompile_failed, nspills, ncorrect, nwrong, ncrashed, nskipped;
    int ncompile_cached; /* of ncompiled, read from the compiled-kernel cache */
    int nunreported;     /* of ncompiled, without ptxas's resource report (spills unknown) */
    int nprograms;       /* NVRTC programs behind ncompiled (rows may share one: search.c [PDL_LAUNCH]) */
    at_search_row *rows; /* timed rows first, fastest first; then the rest */
    int nrows;
    double bytes;        /* moved per call */
    int copies;          /* weight copies rotated */
    double working_set_mib;
    int launches;        /* launches per graph replay */
    int reps;
    at_winner winner;    /* stored answer (cubin owned) */
    double base_us, base_min, base_max, base_stream_us;
    double t_compile, t_verify, t_time, t_total; /* seconds */
    double t_setup; /* of the GPU part before verify: context, cuBLAS, copies */
    double t_graph; /* of t_time: capturing and uploading the timed graphs */
    /* added with the op table (issue 3) */
    int nbaselines;      /* baselines[0] mirrors base_us ... */
    at_search_baseline baselines[AT_MAX_BASELINES];
    int groups;          /* graphs the copies are split over (1: one graph holds them all) */
    double eps;          /* norm ops: the eps used; 0 for other ops */
    /* added with the timing-phase strategies (issue 5) */
    char search[16];        /* the strategy the timing phase ran: "halving" ... */
    char search_from[16];   /* where it came from: "--strategy", "--effort", "spec", "default" */
    char effort[16];        /* the effort level behind its settings ("normal" when not given) */
    int budget;             /* the strategy's budget (0: the whole space) */
    int full_reps;          /* replays of a full-precision measurement */
    int nmeasured;          /* correct candidates the strategy timed */
    int nnot_measured;      /* correct candidates it left untimed (not stored) */
    int nwarm, nwarm_shapes; /* warm-start seeds found, from how many tuned shapes */
    int nfinal, final_reps; /* finalists re-timed, and their replays */
    long long cost_reps;    /* replays the strategy spent (each also replays baseline 0) */
    int spills_allowed;     /* the spec's allow_spills: spilling candidates are timed */
    int nspills_rejected;   /* candidates not timed because they spill */
    double min_occupancy;   /* the spec's min_occupancy (0: none) */
    int noccupancy_rejected; /* compiled, not timed: below min_occupancy */
    /* added with crash isolation (issue 6) */
    int ntimeout;        /* candidates that ran past their time limit (state timeout) */
    /* added with screening graphs (issue 5) */
    int screen_launches; /* launches per screening replay (== launches: no shorter graph) */
    int ngraphs;         /* graphs captured while timing (t_graph is their cost) */
} at_search_result;

/* Runs the whole pipeline: spec -> candidates -> NVRTC -> correctness gate
** -> timing against cuBLAS (the search strategy chosen from o and the spec,
** seeded with the winners of the nearest tuned shapes) -> cache. Fills *res (free with
** at_search_result_free) also when it fails part-way or is interrupted, so
** the caller can print what was measured. The GPU work runs in forked
** worker processes (a candidate that faults or hangs is recorded crashed /
** timeout and the run goes on): the calling process must not have
** initialised CUDA, and this one never does. */
int at_search_run(const at_search_opts *o, at_search_result *res);
void at_search_result_free(at_search_result *res);

/* ---------------------------------------------------------------- report */

/* The constraints that pruned candidates of res, first seen first, and how
** many each pruned: returns how many names (at most max) were filled in. */
int at_report_prune_counts(const at_search_result *res, const char **names, int *counts, int max);
/* The human table (top `top` timed rows; all rows with top < 0) to f. */
void at_report_text(FILE *f, const at_search_opts *o, const at_search_result *res, int top,
                    const char *db_path);
/* The same as one JSON document. */
void at_report_json(FILE *f, const at_search_opts *o, const at_search_result *res, const char *db_path,
                    int status);

#endif /* AUTOTUNE_H */
