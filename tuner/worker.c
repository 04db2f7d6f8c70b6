/*
** worker.c — the GPU worker process of one tuning run and its supervision
** (the protocol is written down in worker.h). Invariant: the pipe has one
** writer, the worker, so end of file means the worker is gone; the
** deadline of a candidate is kept by the parent's clock, never by the
** worker that may be stuck; every worker is reaped before at_worker_run
** returns. tests/test_gpu_faults.c runs it on a GPU; tests/test_worker.c runs fake
** workers.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker.h"

#include "gpu.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HEADER 12              /* int32 type, int32 row, uint32 len */
#define INTERRUPT_GRACE_S 30.0 /* after SIGINT, outside a candidate */
#define REAP_WAIT_S 5.0        /* after end of file, before SIGKILL */
#define KILL_WAIT_S 60.0       /* after SIGKILL */

struct at_worker {
    int fd;
};

static volatile int worker_stop; /* one worker per process: the child's flag */

static void on_stop(int sig)
{
    (void)sig;
    worker_stop = 1; /* no reset: a forwarded SIGINT may follow the terminal's */
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int at_worker_read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t k = read(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

int at_worker_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

void at_worker_send(at_worker *w, int type, int row, const void *data, size_t len)
{
    unsigned char small[HEADER + 4096];
    int32_t t = type, r = row;
    uint32_t n = (uint32_t)len;
    memcpy(small, &t, 4);
    memcpy(small + 4, &r, 4);
    memcpy(small + 8, &n, 4);
    if (len <= sizeof small - HEADER) { /* one write: header and payload */
        if (len)
            memcpy(small + HEADER, data, len);
        if (at_worker_write_all(w->fd, small, HEADER + len) != 0)
            _exit(3); /* the parent is gone: nobody wants the results */
        return;
    }
    if (at_worker_write_all(w->fd, small, HEADER) != 0 || at_worker_write_all(w->fd, data, len) != 0)
        _exit(3);
}

void at_worker_on(at_worker *w, int row, double limit_s)
{
    at_worker_send(w, AT_WMSG_ON, row, &limit_s, sizeof limit_s);
}

void at_worker_off(at_worker *w)
{
    at_worker_send(w, AT_WMSG_OFF, -1, NULL, 0);
}

volatile int *at_worker_stop_flag(at_worker *w)
{
    (void)w;
    return &worker_stop;
}

double at_worker_limit_s(double floor_us, double calls, int graphs, int first)
{
    if (!(floor_us > 0.0))
        floor_us = 1000.0;
    if (!(calls >= 1.0))
        calls = 1.0;
    double s = AT_TIMEOUT_FACTOR * floor_us * calls * 1e-6;
    if (s < AT_TIMEOUT_MIN_S)
        s = AT_TIMEOUT_MIN_S;
    return s + (graphs > 0 ? graphs : 0) * AT_TIMEOUT_GRAPH_S + (first ? AT_TIMEOUT_FIRST_S : 0.0);
}

/* The child's life: never returns. SIGINT and SIGUSR1 are blocked on
** entry (`old` is the mask to restore): one that comes before the handler
** is in place waits for it instead of reaching the parent's handler or
** killing. */
static void child(int fd, pid_t parent, at_worker_body body, void *arg, const sigset_t *old)
{
    struct sigaction sa, prev;
    at_worker w = {.fd = fd};
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the parent dies: so does the worker */
    if (getppid() != parent)          /* it died before prctl */
        _exit(1);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    worker_stop = 0;
    /* an ignored SIGINT (nohup, a background job) stays ignored, as in the parent */
    if (sigaction(SIGINT, NULL, &prev) != 0 || prev.sa_handler != SIG_IGN)
        sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL); /* the parent's "stop" (at_worker_run) */
    signal(SIGPIPE, SIG_IGN);      /* a lost parent: EPIPE, then _exit */
    sigprocmask(SIG_SETMASK, old, NULL);
    body(&w, arg);
    fflush(NULL);
    at_worker_send(&w, AT_WMSG_BYE, -1, NULL, 0);
    _exit(0);
}

static void describe_status(int st, pid_t pid, char *buf, size_t n)
{
    if (WIFSIGNALED(st))
        snprintf(buf, n, "the worker (pid %d) ended by signal %d (%s)", (int)pid, WTERMSIG(st),
                 strsignal(WTERMSIG(st)));
    else if (WIFEXITED(st))
        snprintf(buf, n, "the worker (pid %d) exited with status %d before it finished", (int)pid,
                 WEXITSTATUS(st));
    else
        snprintf(buf, n, "the worker (pid %d) ended", (int)pid);
}

/* Waits for pid after its pipe closed; SIGKILL if it lingers. */
static int reap(pid_t pid, double wait_s)
{
    int st = 0;
    double t0 = now_s();
    for (;;) {
        pid_t k = waitpid(pid, &st, WNOHANG);
        if (k == pid)
            return st;
        if (k < 0 && errno != EINTR)
            return 0;
        if (now_s() - t0 > wait_s) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
            return st;
        }
        usleep(2000);
    }
}

/* Parent side: what one worker's messages and deadlines come to. */
typedef struct sup {
    at_worker_on_msg on_msg;
    void *arg;
    int row, bye;
    double t_on, limit;
    unsigned char *buf;
    size_t have, cap;
} sup;

/* Hands out every complete message in s->buf; -1 on a protocol error. */
static int dispatch(sup *s)
{
    size_t off = 0;
    while (s->have - off >= HEADER) {
        int32_t type, row;
        uint32_t len;
        memcpy(&type, s->buf + off, 4);
        memcpy(&row, s->buf + off + 4, 4);
        memcpy(&len, s->buf + off + 8, 4);
        if (len > AT_WMSG_MAX)
            return -1;
        if (s->have - off < HEADER + (size_t)len) {
            if (HEADER + (size_t)len > s->cap) { /* room for the whole message */
                unsigned char *nb = realloc(s->buf, HEADER + (size_t)len);
                if (!nb)
                    return -1;
                s->buf = nb;
                s->cap = HEADER + (size_t)len;
            }
            break;
        }
        const unsigned char *data = s->buf + off + HEADER;
        if (type == AT_WMSG_ON && len == sizeof(double)) {
            s->row = row;
            memcpy(&s->limit, data, sizeof(double));
            s->t_on = now_s();
        } else if (type == AT_WMSG_OFF) {
            s->row = -1;
        } else if (type == AT_WMSG_BYE) {
            s->bye = 1;
        } else if (type >= AT_WMSG_USER) {
            at_worker_msg m = {.type = type, .row = row, .data = data, .len = len};
            if (s->on_msg)
                s->on_msg(s->arg, &m);
        } else {
            return -1;
        }
        off += HEADER + len;
    }
    if (off) {
        memmove(s->buf, s->buf + off, s->have - off);
        s->have -= off;
    }
    return 0;
}

/* Reads what is there (non-blocking): 1 end of file, 0 more later, -1 error. */
static int drain(int fd, sup *s)
{
    for (;;) {
        if (s->have == s->cap) {
            size_t nc = s->cap ? 2 * s->cap : 65536;
            unsigned char *nb = realloc(s->buf, nc);
            if (!nb)
                return -1;
            s->buf = nb;
            s->cap = nc;
        }
        ssize_t k = read(fd, s->buf + s->have, s->cap - s->have);
        if (k > 0) {
            s->have += (size_t)k;
            if (dispatch(s) != 0)
                return -1;
            continue;
        }
        if (k == 0)
            return 1;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        return -1;
    }
}

int at_worker_run(at_worker_body body, void *body_arg, at_worker_on_msg on_msg, void *msg_arg,
                  volatile int *interrupt, at_worker_outcome *out)
{
    int fd[2], st = 0, eof = 0, killed = 0, interrupted = 0;
    double t_int = 0.0;
    sup s = {.on_msg = on_msg, .arg = msg_arg, .row = -1};
    memset(out, 0, sizeof *out);
    out->row = -1;
    if (pipe2(fd, O_CLOEXEC) != 0)
        return at_fail(AT_ERR_IO, "cannot create a pipe for the GPU worker: %s", strerror(errno));
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGUSR1);
    fflush(NULL);
    sigprocmask(SIG_BLOCK, &block, &old);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        close(fd[0]);
        child(fd[1], parent, body, body_arg, &old);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return at_fail(AT_ERR_IO, "cannot fork the GPU worker: %s", strerror(errno));
    }
    close(fd[1]);
    fcntl(fd[0], F_SETFL, fcntl(fd[0], F_GETFL) | O_NONBLOCK);

    for (;;) {
        double now = now_s();
        if (interrupt && *interrupt && !interrupted) {
            interrupted = 1;
            t_int = now;
            kill(pid, SIGUSR1); /* also when the terminal's SIGINT reached it: both only set its flag */
        }
        if (s.row >= 0 && now - s.t_on > s.limit) {
            kill(pid, SIGKILL);
            killed = 1;
            out->how = AT_WORKER_TIMEOUT;
            snprintf(out->why, sizeof out->why, "ran past its limit of %.2f s (killed after %.2f s)", s.limit,
                     now - s.t_on);
            break;
        }
        if (interrupted && s.row < 0 && now - t_int > INTERRUPT_GRACE_S) {
            kill(pid, SIGKILL);
            killed = 1;
            out->how = AT_WORKER_DIED;
            snprintf(out->why, sizeof out->why, "the worker did not stop within %.0f s of the interrupt",
                     INTERRUPT_GRACE_S);
            break;
        }
        int wait_ms = 200;
        if (s.row >= 0) {
            double left = (s.t_on + s.limit - now) * 1000.0 + 1.0;
            if (left < wait_ms)
                wait_ms = left < 1.0 ? 1 : (int)left;
        }
        struct pollfd p = {.fd = fd[0], .events = POLLIN};
        int ready = poll(&p, 1, wait_ms);
        if (ready < 0 && errno != EINTR) {
            kill(pid, SIGKILL);
            killed = 1;
            out->how = AT_WORKER_DIED;
            snprintf(out->why, sizeof out->why, "poll on the worker's pipe: %s", strerror(errno));
            break;
        }
        if (ready > 0) {
            int d = drain(fd[0], &s);
            if (d < 0) {
                kill(pid, SIGKILL);
                killed = 1;
                out->how = AT_WORKER_DIED;
                snprintf(out->why, sizeof out->why, "the worker broke the protocol (or out of memory)");
                break;
            }
            if (d > 0) {
                eof = 1;
                break;
            }
        }
    }
    close(fd[0]);
    out->row = s.row;
    out->limit_s = s.limit;
    out->elapsed_s = s.row >= 0 ? now_s() - s.t_on : 0.0;
    if (killed) {
        /* bounded: a process the driver holds in an ioctl dies when it
        ** returns; past the wait it is left to die on its own */
        double t0 = now_s();
        while (waitpid(pid, &st, WNOHANG) == 0 && now_s() - t0 < KILL_WAIT_S)
            usleep(2000);
    } else {
        st = reap(pid, REAP_WAIT_S);
        if (eof && s.bye) {
            out->how = AT_WORKER_DONE;
        } else {
            out->how = AT_WORKER_DIED;
            describe_status(st, pid, out->why, sizeof out->why);
        }
    }
    free(s.buf);
    return AT_OK;
}

int at_worker_loop(at_worker_body body, void *body_arg, at_worker_on_msg on_msg, void *msg_arg,
                   at_worker_judge judge, void *judge_arg, volatile int *interrupt, int *nworkers)
{
    int rc = AT_OK, n = 0;
    while (!(interrupt && *interrupt)) {
        at_worker_outcome oc;
        if ((rc = at_worker_run(body, body_arg, on_msg, msg_arg, interrupt, &oc)) != AT_OK)
            break;
        n++;
        if ((rc = judge(judge_arg, &oc)) != AT_WORKER_AGAIN)
            break;
        rc = AT_OK;
    }
    if (nworkers)
        *nworkers = n;
    return rc;
}

/* ------------------------------------------------------------ identity */

typedef struct ident_msg {
    int32_t rc;
    char err[1024];
    at_device_info info;
} ident_msg;

static void ident_body(at_worker *w, void *arg)
{
    ident_msg m;
    at_gpu *g = NULL;
    memset(&m, 0, sizeof m);
    m.rc = at_gpu_open(*(int *)arg, 1, &g);
    if (m.rc == AT_OK)
        m.info = g->info;
    else
        snprintf(m.err, sizeof m.err, "%s", at_errmsg());
    at_worker_send(w, AT_WMSG_USER, -1, &m, sizeof m);
    at_gpu_close(g);
}

static void ident_got(void *arg, const at_worker_msg *m)
{
    ident_msg *dst = arg;
    if (m->len == sizeof *dst) {
        memcpy(dst, m->data, sizeof *dst);
        dst->err[sizeof dst->err - 1] = '\0';
    }
}

/* What a probe found, per GPU ordinal, for the rest of this process: a
** suite asks once per entry, and each probe is a fork and a cuInit (about
** 0.2 s on the H200, most of a warm suite entry). Failures are not kept. */
#define IDENT_MEMO 64
static struct {
    int known;
    at_device_info info;
} ident_memo[IDENT_MEMO];
static pthread_mutex_t ident_mu = PTHREAD_MUTEX_INITIALIZER;

void at_worker_identity_remember(int ordinal, const at_device_info *info)
{
    if (ordinal < 0 || ordinal >= IDENT_MEMO)
        return;
    pthread_mutex_lock(&ident_mu);
    ident_memo[ordinal].info = *info;
    ident_memo[ordinal].known = 1;
    pthread_mutex_unlock(&ident_mu);
}

int at_worker_identity(int ordinal, at_device_info *out)
{
    ident_msg m;
    at_worker_outcome oc;
    int rc, slot = ordinal >= 0 && ordinal < IDENT_MEMO ? ordinal : -1;
    if (slot >= 0) {
        pthread_mutex_lock(&ident_mu);
        int known = ident_memo[slot].known;
        if (known)
            *out = ident_memo[slot].info;
        pthread_mutex_unlock(&ident_mu);
        if (known)
            return AT_OK;
    }
    memset(&m, 0, sizeof m);
    m.rc = -1;
    memset(out, 0, sizeof *out);
    if ((rc = at_worker_run(ident_body, &ordinal, ident_got, &m, NULL, &oc)) != AT_OK)
        return rc;
    if (m.rc == -1)
        return at_fail(AT_ERR_NOGPU,
                       "cuda: the GPU probe process died (%s); this needs a GPU (try --dry-run)", oc.why);
    if (m.rc != AT_OK)
        return at_fail(m.rc, "%s", m.err);
    *out = m.info;
    if (slot >= 0) {
        pthread_mutex_lock(&ident_mu);
        ident_memo[slot].info = m.info;
        ident_memo[slot].known = 1;
        pthread_mutex_unlock(&ident_mu);
    }
    return AT_OK;
}
