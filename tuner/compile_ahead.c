/*
** compile_ahead.c — compiling a suite's next entry while this one is on
** the GPU. at_compile_ahead_start forks a child that runs the next entry's
** search with compile_only set: its spec, its candidates, NVRTC into the
** cubin cache beside the database, and nothing else (no trial stored, no
** GPU, nothing printed). When that entry's turn comes its compile phase
** finds every cubin there. The child runs under SCHED_IDLE, so the GPU
** worker (fp64 reference, module loads, graph captures, launches) never
** waits for a core: on the H200 at nice 10 the GPU phases ran 5-8% longer
** with a compile beside them.
** Invariant: at most one child per process; at_compile_ahead_wait reaps it
** before the next entry starts, so two compiles never share the cores, and
** an interrupt reaches it (it stops its compile; what it wrote is whole,
** nvrtc.c writes each cubin by rename).
*/
#include "suite.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define AHEAD_NICE 19 /* the fallback: about 1.5% of a core where the GPU worker (nice 0) runs */

static pid_t ahead_pid;         /* this process's child, 0: none */
static volatile int ahead_stop; /* the child's interrupt flag */

static void on_stop(int sig)
{
    (void)sig;
    ahead_stop = 1;
}

static void child(const at_search_opts *next, pid_t parent)
{
    at_search_opts so = *next;
    at_search_result res;
    struct sigaction sa;
    prctl(PR_SET_PDEATHSIG, SIGINT); /* the worker ends: stop compiling */
    if (getppid() != parent)
        _exit(0);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    ahead_stop = 0;
    sigaction(SIGINT, &sa, NULL);
    int fd = open("/dev/null", O_WRONLY); /* its warnings are the real run's to print */
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    /* SCHED_IDLE: only cycles nothing else wants (threads and the compile
    ** child inherit it); where refused, the weakest nice */
    struct sched_param none = {0};
    if (sched_setscheduler(0, SCHED_IDLE, &none) != 0)
        (void)setpriority(PRIO_PROCESS, 0, AHEAD_NICE); /* not lowered: still correct, only less polite */
    so.compile_only = 1;
    so.progress = 0;
    so.before_gpu = NULL;
    so.interrupt = &ahead_stop;
    at_search_run(&so, &res); /* its outcome is the real run's to find out */
    _exit(0);
}

int at_compile_ahead_start(const at_search_opts *next)
{
    if (ahead_pid > 0 || next->dry_run)
        return 0;
    if (next->interrupt && *next->interrupt)
        return 0;
    fflush(NULL); /* nothing buffered is written twice */
    pid_t parent = getpid(), pid = fork();
    if (pid == 0)
        child(next, parent);
    if (pid < 0)
        return 0; /* no compile ahead: the entry compiles in its turn */
    ahead_pid = pid;
    return 1;
}

int at_compile_ahead_wait(volatile int *interrupt)
{
    int st = 0, told = 0;
    if (ahead_pid <= 0)
        return 0;
    for (;;) {
        pid_t k = waitpid(ahead_pid, &st, WNOHANG);
        if (k == ahead_pid || (k < 0 && errno != EINTR))
            break;
        if (interrupt && *interrupt && !told) {
            kill(ahead_pid, SIGINT);
            told = 1;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ahead_pid = 0;
    return 1;
}
