/*
** devices.c — --devices parsing, counting GPUs from a child process, and
** the worker pool: the parent writes an item number (and the item it
** reserves for that worker's next turn) down each worker's command pipe
** and reads a fixed-size answer back from its result pipe.
** Invariant: each result pipe has exactly one writer (its worker), so an
** end of file there means that worker is gone, and its item is reported
** lost, never silently dropped or handed out twice.
*/
#include "devices.h"

#include "autotune.h"
#include "worker.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_DEATHS 3

/* ---------------------------------------------------------------- devices */

static int probe_count(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*init)(unsigned) = h ? (int (*)(unsigned))dlsym(h, "cuInit") : NULL;
    int (*count)(int *) = h ? (int (*)(int *))dlsym(h, "cuDeviceGetCount") : NULL;
    int n = 0;
    if (!init || !count || init(0) != 0 || count(&n) != 0)
        return 0;
    return n;
}

int at_devices_count(int *count)
{
    int fd[2], n = 0;
    *count = 0;
    if (pipe(fd) != 0)
        return at_fail(AT_ERR_IO, "cannot create a pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return at_fail(AT_ERR_IO, "cannot fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fd[0]);
        n = probe_count();
        ssize_t w = write(fd[1], &n, sizeof n);
        _exit(w == (ssize_t)sizeof n ? 0 : 1);
    }
    close(fd[1]);
    ssize_t k = read(fd[0], &n, sizeof n);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    *count = k == (ssize_t)sizeof n && n > 0 ? n : 0;
    return AT_OK;
}

int at_devices_parse(const char *text, int dry_run, int **out, int *n)
{
    int *d = NULL, k = 0, rc;
    *out = NULL;
    *n = 0;
    if (!text || !*text)
        return at_fail(AT_ERR_USAGE, "--devices needs a value: a list such as 0,1 or 'all'");
    if (!(d = malloc(AT_DEVICES_MAX * sizeof *d)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    if (strcmp(text, "all") == 0) {
        int count = 0;
        if ((rc = at_devices_count(&count)) != AT_OK)
            goto fail;
        if (count == 0 && !dry_run) {
            rc = at_fail(AT_ERR_NOGPU, "--devices all: no GPU on this machine; this needs a GPU (try --dry-run)");
            goto fail;
        }
        k = count == 0 ? 1 : count > AT_DEVICES_MAX ? AT_DEVICES_MAX : count;
        for (int i = 0; i < k; i++)
            d[i] = count == 0 ? 0 : i;
    } else {
        const char *p = text;
        for (;;) {
            char *end;
            long v = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
            if (v < 0 || v > 1023 || (*end != ',' && *end != '\0')) {
                rc = at_fail(AT_ERR_USAGE, "--devices: '%s' is not 'all' or a list of GPU ordinals such as 0,1",
                             text);
                goto fail;
            }
            if (k == AT_DEVICES_MAX) {
                rc = at_fail(AT_ERR_USAGE, "--devices: more than %d entries", AT_DEVICES_MAX);
                goto fail;
            }
            for (int i = 0; i < k && !dry_run; i++)
                if (d[i] == (int)v) {
                    rc = at_fail(AT_ERR_USAGE,
                                 "--devices: GPU %ld is listed twice (two workers timing on one GPU disturb "
                                 "each other; allowed with --dry-run)",
                                 v);
                    goto fail;
                }
            d[k++] = (int)v;
            if (*end == '\0')
                break;
            p = end + 1;
        }
    }
    *out = d;
    *n = k;
    return AT_OK;
fail:
    free(d);
    return rc;
}

/* ------------------------------------------------------------------- pool */

typedef struct slot {
    pid_t pid;    /* 0: no process */
    int cmd, res; /* the parent's ends: write items, read answers; -1 closed */
    int item;     /* in flight, or -1 */
    int next;     /* reserved for this slot's next turn, or -1 */
    int deaths;
    int retired;
} slot;

typedef struct pool {
    slot s[AT_DEVICES_MAX];
    int n;
    size_t result_size;
    at_pool_work_fn work;
    at_pool_done_fn done;
    void *arg;
    unsigned char *buf; /* header + result */
    unsigned char *taken; /* [nitems]: 1 once handed out or reserved */
    int nitems, handed;
} pool;

typedef struct answer {
    int32_t disposition, item;
} answer;

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* The worker's life: items in, answers out, until told to stop. */
static void worker_main(pool *pl, int me, int cmd, int res, pid_t parent)
{
    for (int i = 0; i < pl->n; i++) /* the other workers' pipes are not ours */
        if (i != me) {
            close_fd(&pl->s[i].cmd);
            close_fd(&pl->s[i].res);
        }
    setpgid(0, 0); /* a terminal's Ctrl-C reaches the parent only; it forwards one */
    prctl(PR_SET_PDEATHSIG, SIGINT);
    if (getppid() != parent) /* the parent died before prctl */
        _exit(1);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGTTOU, SIG_IGN); /* out of the foreground group, it may still write progress to the terminal */
    for (;;) {
        int32_t v[2]; /* the item, and the one reserved for the next turn */
        if (at_worker_read_all(cmd, v, sizeof v) != 0 || v[0] < 0)
            break;
        answer a = {.item = v[0]};
        memset(pl->buf, 0, sizeof a + pl->result_size);
        a.disposition = pl->work(pl->arg, me, v[0], v[1], pl->buf + sizeof a);
        memcpy(pl->buf, &a, sizeof a);
        fflush(NULL);
        if (at_worker_write_all(res, pl->buf, sizeof a + pl->result_size) != 0 || a.disposition != AT_POOL_NEXT)
            break;
    }
    pl->work(pl->arg, me, -1, -1, NULL); /* the end: it lets go of what it prepared */
    fflush(NULL);
    _exit(0);
}

static int spawn(pool *pl, int i)
{
    int cmd[2], res[2];
    slot *s = &pl->s[i];
    if (pipe(cmd) != 0)
        return at_fail(AT_ERR_IO, "cannot create a pipe: %s", strerror(errno));
    if (pipe(res) != 0) {
        close(cmd[0]);
        close(cmd[1]);
        return at_fail(AT_ERR_IO, "cannot create a pipe: %s", strerror(errno));
    }
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        close(cmd[0]);
        close(cmd[1]);
        close(res[0]);
        close(res[1]);
        return at_fail(AT_ERR_IO, "cannot fork a worker: %s", strerror(errno));
    }
    if (pid == 0) {
        close(cmd[1]);
        close(res[0]);
        worker_main(pl, i, cmd[0], res[1], parent);
    }
    close(cmd[0]);
    close(res[1]);
    s->pid = pid;
    s->cmd = cmd[1];
    s->res = res[0];
    s->item = -1;
    return AT_OK;
}

/* Ends slot i's process: closes its pipes (a waiting worker then exits)
** and reaps it; the text of how it ended goes to why. */
static void reap(pool *pl, int i, char *why, size_t n)
{
    slot *s = &pl->s[i];
    int st = 0;
    close_fd(&s->cmd);
    close_fd(&s->res);
    if (s->pid > 0 && waitpid(s->pid, &st, 0) == s->pid && why) {
        if (WIFSIGNALED(st))
            snprintf(why, n, "worker %d (pid %d) ended by signal %d", i, (int)s->pid, WTERMSIG(st));
        else
            snprintf(why, n, "worker %d (pid %d) exited with status %d before answering", i, (int)s->pid,
                     WEXITSTATUS(st));
    }
    s->pid = 0;
    s->item = -1;
}

/* The first item neither handed out nor reserved, taken; -1 when none. */
static int take_free(pool *pl)
{
    for (int k = 0; k < pl->nitems; k++)
        if (!pl->taken[k]) {
            pl->taken[k] = 1;
            return k;
        }
    return -1;
}

/* Slot i's next item: its reservation, else the first free item, else a
** busy slot's reservation (an idle slot takes work from a busy one rather
** than wait); -1 when there is none. */
static int pick(pool *pl, int i)
{
    slot *s = &pl->s[i];
    int v = s->next;
    if (v >= 0) {
        s->next = -1;
        return v;
    }
    if ((v = take_free(pl)) >= 0)
        return v;
    for (int j = 0; j < pl->n; j++)
        if (j != i && pl->s[j].next >= 0 && pl->s[j].item >= 0) {
            v = pl->s[j].next;
            pl->s[j].next = -1;
            return v;
        }
    return -1;
}

/* Whether pick() would find an item for an idle slot. */
static int work_left(const pool *pl)
{
    for (int k = 0; k < pl->nitems; k++)
        if (!pl->taken[k])
            return 1;
    for (int j = 0; j < pl->n; j++)
        if (pl->s[j].next >= 0)
            return 1;
    return 0;
}

/* Slot i works no more; its reservation goes back. */
static void retire(pool *pl, int i)
{
    slot *s = &pl->s[i];
    s->retired = 1;
    if (s->next >= 0)
        pl->taken[s->next] = 0;
    s->next = -1;
}

/* Gives slot i item `item`, reserving the first free item for its next
** turn; 0 when its worker is gone (the item is then slot i's reservation). */
static int hand_out(pool *pl, int i, int item)
{
    int32_t v[2] = {item, take_free(pl)};
    if (at_worker_write_all(pl->s[i].cmd, v, sizeof v) != 0) {
        if (v[1] >= 0)
            pl->taken[v[1]] = 0;
        pl->s[i].next = item;
        return 0;
    }
    pl->s[i].item = item;
    pl->s[i].next = v[1];
    pl->handed++;
    return 1;
}

int at_pool_run(int nslots, int nitems, size_t result_size, at_pool_work_fn work, at_pool_done_fn done, void *arg,
                volatile int *interrupt)
{
    pool pl = {.n = nslots, .result_size = result_size, .work = work, .done = done, .arg = arg,
               .nitems = nitems};
    int rc = AT_OK, stopping = 0, asked = 0, signalled = 0, started = 0;
    char why[160];
    if (nslots < 1 || nslots > AT_DEVICES_MAX || nitems < 0 || !work || !done)
        return at_fail(AT_ERR_USAGE, "at_pool_run: bad arguments");
    pl.buf = malloc(sizeof(answer) + result_size);
    pl.taken = calloc((size_t)nitems + 1, 1);
    if (!pl.buf || !pl.taken) {
        free(pl.buf);
        free(pl.taken);
        return at_fail(AT_ERR_NOMEM, "out of memory");
    }
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN); /* a dead worker's pipe: EPIPE, not death */
    for (int i = 0; i < nslots; i++)
        pl.s[i] = (slot){.cmd = -1, .res = -1, .item = -1, .next = -1};
    for (int i = 0; i < nslots && i < nitems; i++) {
        if (spawn(&pl, i) == AT_OK)
            started++;
        else
            retire(&pl, i);
    }
    if (nitems > 0 && started == 0) {
        rc = AT_ERR_IO; /* spawn's message stands */
        goto done;
    }

    for (;;) {
        if (interrupt && *interrupt && !signalled) {
            stopping = signalled = 1;
            for (int i = 0; i < nslots; i++)
                if (pl.s[i].pid > 0 && pl.s[i].item >= 0)
                    kill(pl.s[i].pid, SIGINT);
        }
        /* feed idle workers, starting replacements; stop the ones not needed.
        ** A slot that retires gives its reservation back, which a slot fed
        ** earlier in the pass may take: so pass again until nothing changes */
        for (int again = 1; again;) {
            again = 0;
            for (int i = 0; i < nslots; i++) {
                slot *s = &pl.s[i];
                if (!s->retired && s->item < 0 && s->pid > 0 && (stopping || !work_left(&pl)))
                    reap(&pl, i, NULL, 0);
                while (!s->retired && s->item < 0 && !stopping && work_left(&pl)) {
                    if (s->pid == 0 && (s->deaths >= MAX_DEATHS || spawn(&pl, i) != AT_OK)) {
                        retire(&pl, i);
                        again = 1;
                        break;
                    }
                    int item = pick(&pl, i);
                    if (item < 0) /* what is left is reserved by idle slots: theirs to take */
                        break;
                    if (hand_out(&pl, i, item)) {
                        again = 1;
                        break;
                    }
                    reap(&pl, i, NULL, 0); /* it died while idle; the item stays its reservation */
                    s->deaths++;
                }
            }
        }
        struct pollfd pfd[AT_DEVICES_MAX];
        int map[AT_DEVICES_MAX], np = 0;
        for (int i = 0; i < nslots; i++)
            if (pl.s[i].item >= 0) {
                pfd[np] = (struct pollfd){.fd = pl.s[i].res, .events = POLLIN};
                map[np++] = i;
            }
        if (np == 0) /* nothing in flight: done, stopped, or no worker left */
            break;
        int ready = poll(pfd, (nfds_t)np, 200);
        if (ready < 0 && errno != EINTR) {
            rc = at_fail(AT_ERR_IO, "poll: %s", strerror(errno));
            break;
        }
        for (int k = 0; ready > 0 && k < np; k++) {
            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int i = map[k], item = pl.s[i].item;
            answer a;
            if (at_worker_read_all(pl.s[i].res, pl.buf, sizeof a + result_size) == 0) {
                memcpy(&a, pl.buf, sizeof a);
                pl.s[i].item = -1;
                if (done(arg, i, item, pl.buf + sizeof a, NULL))
                    stopping = asked = 1;
                if (a.disposition != AT_POOL_NEXT)
                    reap(&pl, i, NULL, 0);
                if (a.disposition == AT_POOL_RETIRE)
                    retire(&pl, i);
            } else {
                why[0] = '\0';
                reap(&pl, i, why, sizeof why);
                if (done(arg, i, item, NULL, why[0] ? why : "the worker ended before answering"))
                    stopping = asked = 1;
                pl.s[i].deaths++;
            }
        }
    }
    if (rc == AT_OK && pl.handed < nitems && (signalled || !asked))
        rc = signalled ? at_fail(AT_ERR_INTERRUPTED, "interrupted: %d item(s) not started", nitems - pl.handed)
                       : at_fail(AT_ERR_NOGPU, "no worker left to run %d more item(s)", nitems - pl.handed);
done:
    for (int i = 0; i < nslots; i++)
        if (pl.s[i].pid > 0)
            reap(&pl, i, NULL, 0);
    signal(SIGPIPE, old_pipe);
    free(pl.buf);
    free(pl.taken);
    return rc;
}
