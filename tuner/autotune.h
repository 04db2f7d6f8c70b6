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

/* Status codes, messages, shapes, dtypes, SHA-256, the cache and its key:
** the cache module (cache/cache.h), shared with the runtime library. */
#include "cache.h"

/* ----------------------------------------------------------------- specs */

/* A search spec: a sandboxed Lua file that returns one table (see
** search/gemv.lua for the format). Opaque; owns its Lua state. */
typedef struct at_spec at_spec;

#define AT_MAX_PARAMS 16

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
/* The same with the op named: the chunk gets it as `...`, so one spec may
** serve several ops. */
int at_spec_load_op(const char *path, const char *op, at_spec **out);
/* The spec of op under home: <home>/search/<op>.lua, or the file its family
** shares (gemv_add: search/gemv.lua; the four norms: search/norm.lua). */
void at_spec_default_path(const char *home, const char *op, char *buf, size_t len);
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

/* Expands, per strategy, the cartesian product of its parameters, in the
** order the spec lists them, and evaluates the named constraints: those of
** scope "shape" first (a failing one rules the strategy out uncrossed),
** those of one parameter's scope next (they cut its values before the
** crossing), then the rest per candidate; live
** candidates also get grid/block/smem. *out is malloc'ed (caller frees).
** A constraint that errors, runs past the instruction limit (of one call,
** or of the whole expansion: "instruction limit exceeded (whole
** expansion)") or returns a wrong type fails the whole call with
** AT_ERR_SPEC ("path:line: ..."). */
int at_spec_expand(at_spec *spec, const at_problem *pb, at_candidate **out, int *count);
/* After at_spec_expand: what it crossed per strategy and what its shape and
** one-parameter constraints cut before crossing ("warp_row 480, splitk 864;
** not crossed: mma ruled out by mma_m: M=1 ..."). */
void at_spec_space_text(const at_spec *spec, char *buf, size_t len);
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
    char space_text[384]; /* at_spec_space_text: per strategy, and what was not crossed */
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
    int nsuperseded;     /* earlier answers of this problem the stored one replaced
                            (at_cache_replace_winners) */
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
