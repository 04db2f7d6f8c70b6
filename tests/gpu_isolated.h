/*
** gpu_isolated.h — what every gpu-labelled test program shares: whether a
** GPU is usable (asked in a child process), and TT_RUN_ISOLATED, which runs
** one test in a forked child. A candidate that kills its CUDA context must
** not take the later tests with it, and the parent never initialises CUDA (a
** process must not fork after cuInit). Include after tinytest.h.
*/
#ifndef AT_GPU_ISOLATED_H
#define AT_GPU_ISOLATED_H

#include <dlfcn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

/* In the child: the driver loads, initialises and sees a device. */
static int child_says_gpu(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*init)(unsigned) = h ? (int (*)(unsigned))dlsym(h, "cuInit") : NULL;
    int (*count)(int *) = h ? (int (*)(int *))dlsym(h, "cuDeviceGetCount") : NULL;
    int n = 0;
    return init && count && init(0) == 0 && count(&n) == 0 && n > 0;
}

/* 1 when a GPU is usable; asked once, in a child, so this process stays
** free of CUDA. */
static int gpu_present(void)
{
    static int cached = -1;
    if (cached < 0) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0)
            _exit(child_says_gpu() ? 0 : 1);
        int st = 0;
        cached = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    return cached;
}

/* TT_RUN in a child: exit 0 passed, 1 failed, 2 skipped. */
#define TT_RUN_ISOLATED(fn)                                                                                  \
    do {                                                                                                     \
        if (!tt_selected(#fn))                                                                               \
            break;                                                                                           \
        fflush(NULL);                                                                                        \
        pid_t pid = fork();                                                                                  \
        if (pid == 0) {                                                                                      \
            tt_cur_failed = tt_cur_skipped = 0;                                                              \
            fn();                                                                                            \
            fflush(NULL);                                                                                    \
            _exit(tt_cur_failed ? 1 : tt_cur_skipped ? 2 : 0);                                               \
        }                                                                                                    \
        int st = 0, code = 1;                                                                                \
        if (pid > 0 && waitpid(pid, &st, 0) == pid)                                                          \
            code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;                                                      \
        if (code == 0) {                                                                                     \
            printf("  ok   %s\n", #fn);                                                                      \
            tt_passed++;                                                                                     \
        } else if (code == 2) {                                                                              \
            tt_skipped++;                                                                                    \
        } else {                                                                                             \
            printf("  FAIL %s%s\n", #fn, WIFSIGNALED(st) ? " (crashed)" : "");                               \
            tt_failed++;                                                                                     \
        }                                                                                                    \
    } while (0)

#endif
