/*
** compile_proc.c — at_nvrtc_compile_all: the NVRTC compile of a batch of
** jobs, run in a child process that sends every job's result back over a
** pipe. The tuner's own process never runs NVRTC: on the H200 (CUDA 13.0,
** driver 580) a process that had compiled with NVRTC forked GPU workers
** whose cuInit failed, while one that had only read cubins from the cache
** forked working ones. The child compiles on threads as before
** (at_nvrtc_compile_threads); a stop flag set in this process reaches it
** through a shared page, so jobs not started yet come back not done.
**
** The stream: progress records while compiling, then one result record per
** job (its fields, then its log and cubin bytes), then an end record with
** the status and message of the batch.
*/
#include "autotune.h"
#include "worker.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

enum { REC_PROGRESS = 1, REC_JOB = 2, REC_END = 3 };

typedef struct rec {
    int32_t type, index;         /* index: the job, or the done count */
    int32_t done, ok, cached, reported, regs, spill_bytes, smem_bytes;
    int32_t rc;                  /* REC_END */
    double seconds;
    uint64_t log_len, cubin_len; /* bytes that follow (REC_JOB); message (REC_END) */
} rec;

typedef struct child_ctx {
    int fd;
    int failed; /* a write failed: the parent is gone or broke the pipe */
} child_ctx;

static void send_rec(child_ctx *c, const rec *r, const void *a, size_t na, const void *b, size_t nb)
{
    if (c->failed)
        return;
    if (at_worker_write_all(c->fd, r, sizeof *r) != 0 || (na && at_worker_write_all(c->fd, a, na) != 0) ||
        (nb && at_worker_write_all(c->fd, b, nb) != 0))
        c->failed = 1;
}

static void child_progress(void *arg, int done, int total)
{
    rec r = {.type = REC_PROGRESS, .index = done};
    (void)total;
    send_rec(arg, &r, NULL, 0, NULL, 0);
}

static void child(int fd, pid_t parent, at_compile_job *jobs, int n, int threads, int with_progress,
                  volatile int *shared_stop)
{
    child_ctx c = {.fd = fd};
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    for (int i = 0; i < n; i++)
        if (jobs[i].stop) /* the parent's flag, as the shared page mirrors it */
            jobs[i].stop = shared_stop;
    int rc = at_nvrtc_compile_threads(jobs, n, threads, with_progress ? child_progress : NULL, &c);
    for (int i = 0; i < n; i++) {
        at_compile_job *j = &jobs[i];
        size_t nl = j->log ? strlen(j->log) : 0;
        rec r = {.type = REC_JOB, .index = i, .done = j->done, .ok = j->ok, .cached = j->cached,
                 .reported = j->reported, .regs = j->regs, .spill_bytes = j->spill_bytes, .smem_bytes = j->smem_bytes,
                 .seconds = j->seconds, .log_len = nl, .cubin_len = j->cubin ? j->cubin_size : 0};
        send_rec(&c, &r, j->log, nl, j->cubin, r.cubin_len);
    }
    const char *msg = rc == AT_OK ? "" : at_errmsg();
    rec e = {.type = REC_END, .rc = rc, .log_len = strlen(msg)};
    send_rec(&c, &e, msg, e.log_len, NULL, 0);
    _exit(c.failed ? 1 : 0);
}

/* Waits until the next record can be read, mirroring *stop into the
** shared page meanwhile (the child compiles for a long time between
** records; a record itself is written in one go). 0, or -1 on an error. */
static int wait_record(int fd, volatile int *stop, volatile int *shared_stop)
{
    for (;;) {
        if (stop && *stop)
            *shared_stop = 1;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int ready = poll(&pf, 1, 200);
        if (ready > 0)
            return 0; /* data, or the end of the pipe: the read says which */
        if (ready < 0 && errno != EINTR)
            return -1;
    }
}

/* A job's result from the child into jobs[i]. */
static int read_job(int fd, const rec *r, at_compile_job *jobs, int n)
{
    if (r->index < 0 || r->index >= n || r->log_len > ((uint64_t)1 << 32) || r->cubin_len > ((uint64_t)1 << 32))
        return at_fail(AT_ERR_NVRTC, "nvrtc: the compile process sent a malformed record");
    at_compile_job *j = &jobs[r->index];
    char *log = malloc(r->log_len + 1);
    void *cubin = r->cubin_len ? malloc(r->cubin_len) : NULL;
    if (!log || (r->cubin_len && !cubin)) {
        free(log);
        free(cubin);
        return at_fail(AT_ERR_NOMEM, "out of memory for a compiled kernel");
    }
    if (at_worker_read_all(fd, log, r->log_len) != 0 ||
        (r->cubin_len && at_worker_read_all(fd, cubin, r->cubin_len) != 0)) {
        free(log);
        free(cubin);
        return at_fail(AT_ERR_NVRTC, "nvrtc: the compile process ended mid-record");
    }
    log[r->log_len] = '\0';
    at_compile_job_clear(j);
    j->done = r->done;
    j->ok = r->ok;
    j->cached = r->cached;
    j->reported = r->reported;
    j->regs = r->regs;
    j->spill_bytes = r->spill_bytes;
    j->smem_bytes = r->smem_bytes;
    j->seconds = r->seconds;
    j->log = log;
    j->cubin = cubin;
    j->cubin_size = r->cubin_len;
    return AT_OK;
}

int at_nvrtc_compile_all(at_compile_job *jobs, int n, int threads,
                         void (*progress)(void *arg, int done, int total), void *arg)
{
    int fd[2], rc = AT_OK, ended = 0, st = 0;
    volatile int *stop = NULL;
    for (int i = 0; i < n && !stop; i++)
        stop = jobs[i].stop;
    for (int i = 0; i < n; i++) { /* a job not reported back stays not done */
        jobs[i].done = jobs[i].ok = jobs[i].cached = 0;
    }
    if (n <= 0)
        return AT_OK;
    volatile int *shared_stop = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared_stop == MAP_FAILED)
        return at_fail(AT_ERR_NOMEM, "cannot map a page for the compile process: %s", strerror(errno));
    *shared_stop = stop ? *stop : 0;
    if (pipe(fd) != 0) {
        munmap((void *)shared_stop, sizeof(int));
        return at_fail(AT_ERR_IO, "cannot create a pipe for the compile process: %s", strerror(errno));
    }
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        close(fd[0]);
        child(fd[1], parent, jobs, n, threads, progress != NULL, shared_stop);
    }
    close(fd[1]);
    if (pid < 0) {
        close(fd[0]);
        munmap((void *)shared_stop, sizeof(int));
        return at_fail(AT_ERR_IO, "cannot fork the compile process: %s", strerror(errno));
    }
    while (rc == AT_OK && !ended) {
        rec r;
        if (wait_record(fd[0], stop, shared_stop) != 0 || at_worker_read_all(fd[0], &r, sizeof r) != 0) {
            rc = at_fail(AT_ERR_NVRTC, "nvrtc: the compile process ended early");
            break;
        }
        if (r.type == REC_PROGRESS) {
            if (progress)
                progress(arg, r.index, n);
        } else if (r.type == REC_JOB) {
            rc = read_job(fd[0], &r, jobs, n);
        } else if (r.type == REC_END && r.log_len < 4096) {
            char msg[4096];
            ended = 1;
            if (at_worker_read_all(fd[0], msg, r.log_len) != 0)
                rc = at_fail(AT_ERR_NVRTC, "nvrtc: the compile process ended mid-record");
            else if (r.rc != AT_OK) {
                msg[r.log_len] = '\0';
                rc = at_fail(r.rc, "%s", msg);
            }
        } else {
            rc = at_fail(AT_ERR_NVRTC, "nvrtc: the compile process sent a malformed record");
        }
    }
    close(fd[0]);
    if (!ended)
        kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (rc == AT_OK && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        rc = at_fail(AT_ERR_NVRTC, "nvrtc: the compile process %s %d",
                     WIFSIGNALED(st) ? "died of signal" : "exited with", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    munmap((void *)shared_stop, sizeof(int));
    return rc;
}
