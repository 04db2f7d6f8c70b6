/*
** tinytest.h — the smallest test framework that does the job.
** CHECK(cond) records a failure with file:line and goes on; a test program
** calls TT_RUN(fn) for each test and returns TT_DONE(), which prints the
** line "N passed, N failed" (", N skipped" when any) that ctest and CI read.
** TT_SKIP("why") inside a test marks it skipped (visibly) and returns.
** TT_ONLY="name1 name2" in the environment runs only the tests named (the
** others are listed as skipped), to spend a lent GPU's minutes on a few.
*/
#ifndef TINYTEST_H
#define TINYTEST_H
#include <stdio.h>
#include <string.h>

/* Tests name their fixtures relative to the source root (templates/,
** search/, tests/fixtures/). AT_TEST_SOURCE_DIR (tests/CMakeLists.txt) is
** that root: every test changes into it before main, so it finds them when
** run from anywhere. Where the folder is not there (a build carried to
** another machine), the test stays where it was started (ctest starts it in
** the source root). */
#ifdef AT_TEST_SOURCE_DIR
#include <unistd.h>
__attribute__((constructor)) static void tt_chdir_source(void)
{
    if (chdir(AT_TEST_SOURCE_DIR) != 0) {
        /* stay in the working directory */
    }
}
#endif

static int tt_passed, tt_failed, tt_skipped, tt_cur_failed, tt_cur_skipped;

#include <stdlib.h>
/* 1 when TT_ONLY is unset or names `name` (space-separated words). */
static int tt_selected(const char *name)
{
    const char *only = getenv("TT_ONLY");
    size_t n = strlen(name);
    if (!only || !*only)
        return 1;
    for (const char *p = strstr(only, name); p; p = strstr(p + 1, name))
        if ((p == only || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' '))
            return 1;
    printf("  SKIP %s: not in TT_ONLY\n", name);
    tt_skipped++;
    return 0;
}

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                \
            tt_cur_failed++;                                               \
        }                                                                  \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                 \
    do {                                                                   \
        long long tt_a = (long long)(a), tt_b = (long long)(b);            \
        if (tt_a != tt_b) {                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld vs %lld)\n", \
                    __FILE__, __LINE__, #a, #b, tt_a, tt_b);               \
            tt_cur_failed++;                                               \
        }                                                                  \
    } while (0)

#define CHECK_STR_HAS(hay, needle)                                         \
    do {                                                                   \
        const char *tt_h = (hay);                                          \
        if (!tt_h || !strstr(tt_h, (needle))) {                            \
            fprintf(stderr, "%s:%d: CHECK failed: \"%s\" contains \"%s\"\n", \
                    __FILE__, __LINE__, tt_h ? tt_h : "(null)", (needle)); \
            tt_cur_failed++;                                               \
        }                                                                  \
    } while (0)

#define TT_SKIP(why)                                                       \
    do {                                                                   \
        printf("  SKIP %s: %s\n", __func__, (why));                        \
        tt_cur_skipped = 1;                                                \
        return;                                                            \
    } while (0)

#define TT_RUN(fn)                                                         \
    do {                                                                   \
        if (!tt_selected(#fn))                                             \
            break;                                                         \
        tt_cur_failed = 0;                                                 \
        tt_cur_skipped = 0;                                                \
        fn();                                                              \
        if (tt_cur_failed) {                                               \
            printf("  FAIL %s\n", #fn);                                    \
            tt_failed++;                                                   \
        } else if (tt_cur_skipped) {                                       \
            tt_skipped++;                                                  \
        } else {                                                           \
            printf("  ok   %s\n", #fn);                                    \
            tt_passed++;                                                   \
        }                                                                  \
        fflush(stdout); /* progress shows even when a later test hangs */   \
    } while (0)

static inline int tt_done(void)
{
    (void)tt_cur_failed;
    (void)tt_cur_skipped;
    if (tt_skipped)
        printf("%d passed, %d failed, %d skipped\n", tt_passed, tt_failed, tt_skipped);
    else
        printf("%d passed, %d failed\n", tt_passed, tt_failed);
    return tt_failed ? 1 : 0;
}
#define TT_DONE() tt_done()

#endif
