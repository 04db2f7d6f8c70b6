/*
** nvrtc.c — compiles template variants to cubins with NVRTC, in parallel,
** through an on-disk cache of compiled kernels. The tuner only adds -DTP_*
** options to a template's source; the log and the ptxas resource report
** (registers, spills, shared memory) are kept per job. A compile error is a
** result of the job, never a failure of the run.
*/
#include "autotune.h"

#include <errno.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

int at_nvrtc_version(void)
{
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    return 1000 * major + 10 * minor;
}

void at_nvrtc_common_options(at_dtype dtype, int arch, char *buf, size_t len)
{
    snprintf(buf, len, "--gpu-architecture=sm_%d -std=c++17 -DTP_DTYPE=%d", arch, (int)dtype);
}

/* Splits `text` on spaces into argv-style pointers inside `store`. */
static int split_options(const char *text, char *store, size_t storelen, const char **argv, int max)
{
    int n = 0;
    if (strlen(text) >= storelen)
        return -1;
    strcpy(store, text);
    char *save = NULL;
    for (char *p = strtok_r(store, " ", &save); p; p = strtok_r(NULL, " ", &save)) {
        if (n == max)
            return -1;
        argv[n++] = p;
    }
    return n;
}

/* Reads "Used N registers", "N bytes spill stores" and "N bytes smem" from
** the ptxas -v part of a log. */
static void parse_ptxas(const char *log, at_compile_job *job)
{
    const char *p;
    job->reported = 0;
    if (!log)
        return;
    if ((p = strstr(log, "Used ")) != NULL) {
        job->regs = atoi(p + 5);
        job->reported = 1;
    }
    if ((p = strstr(log, "bytes spill stores")) != NULL) {
        while (p > log && p[-1] == ' ')
            p--;
        while (p > log && p[-1] >= '0' && p[-1] <= '9')
            p--;
        job->spill_bytes = atoi(p);
    }
    if ((p = strstr(log, " bytes smem")) != NULL) {
        while (p > log && p[-1] >= '0' && p[-1] <= '9')
            p--;
        job->smem_bytes = atoi(p);
    }
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The cache name of a job: sha256 over everything that decides the cubin
** (NVRTC version, every option, the source and each header by name). */
static int cubin_key(const at_compile_job *job, const char *all_options, char hex[65])
{
    size_t cap = strlen(all_options) + strlen(job->name) + strlen(job->source) + 64, len = 0;
    int nh = job->tpl ? at_templates_nheaders(job->tpl) : 0;
    for (int i = 0; i < nh; i++)
        cap += strlen(at_templates_header_name(job->tpl, i)) + strlen(at_templates_header_source(job->tpl, i)) + 8;
    char *buf = malloc(cap);
    if (!buf)
        return 0;
    len += (size_t)snprintf(buf + len, cap - len, "nvrtc=%d\n%s\n%s\n%s", at_nvrtc_version(), all_options,
                            job->name, job->source);
    for (int i = 0; i < nh; i++)
        len += (size_t)snprintf(buf + len, cap - len, "\n%s\n%s", at_templates_header_name(job->tpl, i),
                                at_templates_header_source(job->tpl, i));
    at_sha256_hex(buf, len, hex);
    free(buf);
    return 1;
}

/* Reads a whole small file; NULL if absent or unreadable. */
static void *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    long n;
    void *buf = NULL;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && n < (64L << 20) && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) == (size_t)n) {
            ((char *)buf)[n] = '\0';
            *size = (size_t)n;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

/* Writes data to path via a unique temporary file and rename(). */
static void store_file(const char *path, const void *data, size_t size)
{
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.%ld.%lu.tmp", path, (long)getpid(), (unsigned long)pthread_self());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return;
    int ok = fwrite(data, 1, size, f) == size;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0)
        remove(tmp);
}

/* A cubin from the cache: both the cubin and its log must be there, and
** the log must hold the ptxas report (an entry without one, e.g. stored by
** an older build while NVRTC's own cache was on, is compiled again). */
static int cache_load(at_compile_job *job, const char *key)
{
    char path[1100];
    size_t n = 0, m = 0;
    snprintf(path, sizeof path, "%s/%s.cubin", job->cubin_dir, key);
    void *cubin = slurp(path, &n);
    snprintf(path, sizeof path, "%s/%s.log", job->cubin_dir, key);
    char *log = cubin ? slurp(path, &m) : NULL;
    if (!cubin || !log) {
        free(cubin);
        free(log);
        return 0;
    }
    parse_ptxas(log, job);
    if (!job->reported) {
        free(cubin);
        free(log);
        job->regs = job->spill_bytes = job->smem_bytes = 0;
        return 0;
    }
    job->cubin = cubin;
    job->cubin_size = n;
    job->log = log;
    job->ok = 1;
    job->cached = 1;
    return 1;
}

/* NVRTC 12.9 and later keep a compile cache of their own, and a program
** served from it comes back without the ptxas -v report: no registers, no
** spills, so the spill check and the occupancy estimate would see zeros
** (on the H200 every M=1 GEMV candidate did). This file keeps
** its own cache, with the reports, so NVRTC's is turned off. */
static const char *nvrtc_cache_option(void)
{
    return at_nvrtc_version() >= 12090 ? " --no-cache" : "";
}

static void cache_store(const at_compile_job *job, const char *key)
{
    char path[1100];
    mkdir(job->cubin_dir, 0755); /* one level; EEXIST is fine */
    snprintf(path, sizeof path, "%s/%s.log", job->cubin_dir, key);
    store_file(path, job->log ? job->log : "", job->log ? strlen(job->log) : 0);
    snprintf(path, sizeof path, "%s/%s.cubin", job->cubin_dir, key); /* last: its presence means complete */
    store_file(path, job->cubin, job->cubin_size);
}

int at_nvrtc_compile(at_compile_job *job)
{
    nvrtcProgram prog = NULL;
    char common[256], store[1024];
    const char *argv[64];
    const char *hnames[64], *hsrcs[64];
    int argc, nh = job->tpl ? at_templates_nheaders(job->tpl) : 0;
    size_t n = 0;
    nvrtcResult r;
    double t0 = now_seconds();
    int rc = AT_OK;

    char all[1024], key[65];
    int keyed = 0;
    job->ok = 0;
    job->cached = 0;
    job->done = 0;
    if (job->stop && *job->stop) /* interrupted: leave it for the next run */
        return AT_OK;
    job->done = 1;
    at_nvrtc_common_options(job->dtype, job->arch, common, sizeof common);
    snprintf(all, sizeof all, "%s --ptxas-options=-v%s %s", common, nvrtc_cache_option(), job->options);
    if (job->cubin_dir && (keyed = cubin_key(job, all, key)) && cache_load(job, key)) {
        job->seconds = now_seconds() - t0;
        return AT_OK;
    }
    if (nh > 64)
        nh = 64;
    for (int i = 0; i < nh; i++) {
        hnames[i] = at_templates_header_name(job->tpl, i);
        hsrcs[i] = at_templates_header_source(job->tpl, i);
    }
    r = nvrtcCreateProgram(&prog, job->source, job->name, nh, hsrcs, hnames);
    if (r != NVRTC_SUCCESS)
        return at_fail(AT_ERR_NVRTC, "nvrtc: nvrtcCreateProgram(%s): %s", job->name,
                       nvrtcGetErrorString(r));

    argc = split_options(all, store, sizeof store, argv, 64);
    if (argc < 0) {
        nvrtcDestroyProgram(&prog);
        return at_fail(AT_ERR_NVRTC, "nvrtc: too many options for %s", job->name);
    }
    r = nvrtcCompileProgram(prog, argc, argv);

    if (nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 0 && (job->log = malloc(n + 1))) {
        if (nvrtcGetProgramLog(prog, job->log) != NVRTC_SUCCESS)
            job->log[0] = '\0';
        job->log[n] = '\0';
        parse_ptxas(job->log, job);
    }
    if (r == NVRTC_SUCCESS) {
        if (nvrtcGetCUBINSize(prog, &n) == NVRTC_SUCCESS && n > 0 && (job->cubin = malloc(n)) &&
            nvrtcGetCUBIN(prog, job->cubin) == NVRTC_SUCCESS) {
            job->cubin_size = n;
            job->ok = 1;
            if (keyed && job->reported) /* without its report an entry would mislead every later run */
                cache_store(job, key);
        } else if (!job->cubin) {
            rc = at_fail(AT_ERR_NOMEM, "out of memory for a cubin");
        }
    } else if (r != NVRTC_ERROR_COMPILATION) {
        rc = at_fail(AT_ERR_NVRTC, "nvrtc: compiling %s: %s", job->name, nvrtcGetErrorString(r));
    }
    nvrtcDestroyProgram(&prog);
    job->seconds = now_seconds() - t0;
    return rc;
}

void at_compile_job_clear(at_compile_job *job)
{
    free(job->log);
    free(job->cubin);
    job->log = NULL;
    job->cubin = NULL;
    job->cubin_size = 0;
    job->ok = 0;
}

/* ---- the worker pool: each thread takes the next unclaimed job ---- */

typedef struct pool {
    at_compile_job *jobs;
    int n, next, done, rc;
    char msg[512]; /* the failing worker's message (errors are per thread) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} pool;

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = p->rc == AT_OK && p->next < p->n ? p->next++ : -1;
        pthread_mutex_unlock(&p->mu);
        if (i < 0)
            return NULL;
        int rc = at_nvrtc_compile(&p->jobs[i]);
        pthread_mutex_lock(&p->mu);
        p->done++;
        if (rc != AT_OK && p->rc == AT_OK) { /* NVRTC itself broke: stop handing out work */
            p->rc = rc;
            snprintf(p->msg, sizeof p->msg, "%s", at_errmsg());
        }
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

int at_nvrtc_compile_threads(at_compile_job *jobs, int n, int threads,
                             void (*progress)(void *arg, int done, int total), void *arg)
{
    pool p = {.jobs = jobs, .n = n};
    pthread_t tid[256];
    int started = 0;
    if (threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? (int)c : 1;
    }
    if (threads > 256)
        threads = 256;
    if (threads > n)
        threads = n > 0 ? n : 1;
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&tid[started], NULL, worker, &p) == 0)
            started++;
    if (started == 0)
        worker(&p); /* no threads to be had: do it here */
    pthread_mutex_lock(&p.mu);
    while (p.done < p.n && !(p.rc != AT_OK && p.done >= p.next)) {
        pthread_cond_wait(&p.cv, &p.mu);
        if (progress) {
            int d = p.done;
            pthread_mutex_unlock(&p.mu);
            progress(arg, d, n);
            pthread_mutex_lock(&p.mu);
        }
    }
    pthread_mutex_unlock(&p.mu);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    if (p.rc != AT_OK) /* the message was set on a worker thread */
        return at_fail(p.rc, "%s", p.msg);
    return AT_OK;
}
