/*
** test_worker.c — crash isolation without a GPU (label cpu): fake worker
** bodies that send messages, exit, die by a signal, hang inside or
** outside a candidate, or wait for an interrupt, run under at_worker_run;
** a restart loop (at_worker_loop) over fake candidates, some of which kill
** their worker, survives and skips what was decided; the timeout rule;
** the guard-zone verdict (guard.c) on host buffers.
*/
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "op.h"
#include "tinytest.h"
#include "worker.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------- messages */

typedef struct seen {
    int n, types[16], rows[16];
    size_t lens[16];
    int intact; /* every payload held the bytes the body sent */
} seen;

static void record(void *arg, const at_worker_msg *m)
{
    seen *s = arg;
    if (s->n < 16) {
        s->types[s->n] = m->type;
        s->rows[s->n] = m->row;
        s->lens[s->n] = m->len;
        s->n++;
    }
    const unsigned char *d = m->data;
    for (size_t i = 0; i < m->len; i++)
        if (d[i] != (unsigned char)(i * 7 + (size_t)m->row))
            s->intact = 0;
}

static void send_pattern(at_worker *w, int type, int row, size_t len)
{
    unsigned char *b = malloc(len ? len : 1);
    for (size_t i = 0; i < len; i++)
        b[i] = (unsigned char)(i * 7 + (size_t)row);
    at_worker_send(w, type, row, b, len);
    free(b);
}

static void body_talks(at_worker *w, void *arg)
{
    (void)arg;
    send_pattern(w, AT_WMSG_USER, 0, 10);
    at_worker_on(w, 4, 5.0);
    send_pattern(w, AT_WMSG_USER + 1, 4, 3u << 20); /* larger than a pipe's buffer */
    at_worker_off(w);
    send_pattern(w, AT_WMSG_USER, 9, 0);
}

static void messages_arrive_in_order_and_intact(void)
{
    seen s = {.intact = 1};
    at_worker_outcome oc;
    CHECK_EQ_INT(at_worker_run(body_talks, NULL, record, &s, NULL, &oc), AT_OK);
    CHECK_EQ_INT(oc.how, AT_WORKER_DONE);
    CHECK_EQ_INT(oc.row, -1);
    CHECK_EQ_INT(s.n, 3); /* ON/OFF/BYE are the supervisor's, not the caller's */
    CHECK_EQ_INT(s.types[0], AT_WMSG_USER);
    CHECK_EQ_INT(s.types[1], AT_WMSG_USER + 1);
    CHECK_EQ_INT(s.rows[1], 4);
    CHECK_EQ_INT(s.lens[1], 3u << 20);
    CHECK_EQ_INT(s.rows[2], 9);
    CHECK_EQ_INT(s.lens[2], 0);
    CHECK(s.intact);
}

/* ---------------------------------------------------------------- deaths */

static void body_exits_in_candidate(at_worker *w, void *arg)
{
    (void)arg;
    at_worker_on(w, 3, 30.0);
    _exit(7);
}

static void exit_in_a_candidate_blames_it(void)
{
    at_worker_outcome oc;
    CHECK_EQ_INT(at_worker_run(body_exits_in_candidate, NULL, NULL, NULL, NULL, &oc), AT_OK);
    CHECK_EQ_INT(oc.how, AT_WORKER_DIED);
    CHECK_EQ_INT(oc.row, 3);
    CHECK_STR_HAS(oc.why, "exited with status 7");
}

static void body_killed_in_candidate(at_worker *w, void *arg)
{
    (void)arg;
    at_worker_on(w, 2, 30.0);
    kill(getpid(), SIGKILL); /* what the kernel's OOM killer or a driver abort looks like */
    pause();
}

static void signal_in_a_candidate_blames_it(void)
{
    at_worker_outcome oc;
    CHECK_EQ_INT(at_worker_run(body_killed_in_candidate, NULL, NULL, NULL, NULL, &oc), AT_OK);
    CHECK_EQ_INT(oc.how, AT_WORKER_DIED);
    CHECK_EQ_INT(oc.row, 2);
    CHECK_STR_HAS(oc.why, "signal 9");
}

static void body_exits_between(at_worker *w, void *arg)
{
    (void)arg;
    at_worker_on(w, 1, 30.0);
    at_worker_off(w);
    _exit(2);
}

static void death_outside_a_candidate_blames_none(void)
{
    at_worker_outcome oc;
    CHECK_EQ_INT(at_worker_run(body_exits_between, NULL, NULL, NULL, NULL, &oc), AT_OK);
    CHECK_EQ_INT(oc.how, AT_WORKER_DIED);
    CHECK_EQ_INT(oc.row, -1);
}

/* -------------------------------------------------------------- deadlines */

static void body_hangs(at_worker *w, void *arg)
{
    (void)arg;
    at_worker_on(w, 5, 0.3);
    for (;;)
        pause(); /* a kernel that never ends: only SIGKILL helps */
}

static void hang_past_the_limit_is_killed(void)
{
    at_worker_outcome oc;
    double t0 = now_s();
    CHECK_EQ_INT(at_worker_run(body_hangs, NULL, NULL, NULL, NULL, &oc), AT_OK);
    double took = now_s() - t0;
    CHECK_EQ_INT(oc.how, AT_WORKER_TIMEOUT);
    CHECK_EQ_INT(oc.row, 5);
    CHECK(oc.limit_s == 0.3);
    CHECK(oc.elapsed_s >= 0.3); /* never killed before its limit */
    CHECK(took < 30.0);         /* and killed: the test would hang otherwise */
    CHECK_STR_HAS(oc.why, "ran past its limit of 0.30 s");
}

static void body_slow_outside(at_worker *w, void *arg)
{
    (void)arg;
    at_worker_on(w, 1, 0.1);
    at_worker_off(w);
    usleep(400 * 1000); /* setup, compiling baselines: no deadline */
    send_pattern(w, AT_WMSG_USER, 1, 4);
}

static void no_deadline_outside_a_candidate(void)
{
    seen s = {.intact = 1};
    at_worker_outcome oc;
    CHECK_EQ_INT(at_worker_run(body_slow_outside, NULL, record, &s, NULL, &oc), AT_OK);
    CHECK_EQ_INT(oc.how, AT_WORKER_DONE);
    CHECK_EQ_INT(s.n, 1);
}

/* -------------------------------------------------------------- interrupt */

static volatile int flag;

static void body_waits_for_stop(at_worker *w, void *arg)
{
    (void)arg;
    send_pattern(w, AT_WMSG_USER, 0, 1);
    for (int i = 0; i < 2000 && !*at_worker_stop_flag(w); i++)
        usleep(10 * 1000);
    send_pattern(w, AT_WMSG_USER + 2, *at_worker_stop_flag(w) ? 1 : 0, 0);
}

static int stop_row;
static void note_stop(void *arg, const at_worker_msg *m)
{
    (void)arg;
    if (m->type == AT_WMSG_USER)
        flag = 1; /* as the parent's SIGINT handler would */
    if (m->type == AT_WMSG_USER + 2)
        stop_row = m->row;
}

static void interrupt_sets_the_worker_flag(void)
{
    at_worker_outcome oc;
    double t0 = now_s();
    flag = 0;
    stop_row = -1;
    CHECK_EQ_INT(at_worker_run(body_waits_for_stop, NULL, note_stop, NULL, &flag, &oc), AT_OK);
    CHECK_EQ_INT(oc.how, AT_WORKER_DONE);
    CHECK_EQ_INT(stop_row, 1); /* it stopped because of the flag, not the 20 s cap */
    CHECK(now_s() - t0 < 15.0);
    flag = 0;
}

/* --------------------------------------------------------- restart loop */

/* Fake candidates: 'o' ok, 'c' crashes its worker, 'h' hangs, 'x' exits. */
static const char kinds[] = "ocohoxo";
#define NK ((int)sizeof kinds - 1)
typedef struct fake {
    char decided[NK]; /* the parent's: 'O' done ok, 'C' crashed, 'T' timeout */
    int attempts[NK]; /* the parent's count of ON messages per row */
    int stray;        /* a decided row was started again */
} fake;

static void fake_body(at_worker *w, void *arg)
{
    fake *f = arg; /* the parent's state as it was at fork */
    for (int i = 0; i < NK; i++) {
        if (f->decided[i])
            continue; /* decided before: never run again */
        at_worker_on(w, i, 0.3);
        if (kinds[i] == 'c')
            kill(getpid(), SIGKILL);
        if (kinds[i] == 'h')
            for (;;)
                pause();
        if (kinds[i] == 'x')
            _exit(1);
        at_worker_send(w, AT_WMSG_USER, i, NULL, 0); /* its result */
        at_worker_off(w);
    }
}

static void fake_msg(void *arg, const at_worker_msg *m)
{
    fake *f = arg;
    if (m->row >= 0 && m->row < NK) {
        if (f->decided[m->row])
            f->stray++;
        f->decided[m->row] = 'O';
    }
}

static int fake_judge(void *arg, const at_worker_outcome *oc)
{
    fake *f = arg;
    if (oc->how == AT_WORKER_DONE)
        return AT_OK;
    if (oc->row < 0 || oc->row >= NK)
        return at_fail(AT_ERR_CUDA, "lost outside a candidate: %s", oc->why);
    if (f->decided[oc->row])
        f->stray++;
    f->decided[oc->row] = oc->how == AT_WORKER_TIMEOUT ? 'T' : 'C';
    f->attempts[oc->row]++;
    return AT_WORKER_AGAIN;
}

static void restart_loop_survives_and_skips(void)
{
    fake f;
    int n = 0;
    memset(&f, 0, sizeof f);
    CHECK_EQ_INT(at_worker_loop(fake_body, &f, fake_msg, &f, fake_judge, &f, NULL, &n), AT_OK);
    CHECK_EQ_INT(n, 4); /* three lost workers and the one that finished */
    CHECK(memcmp(f.decided, "OCOTOCO", NK) == 0);
    CHECK_EQ_INT(f.stray, 0);
    for (int i = 0; i < NK; i++)
        CHECK(f.attempts[i] <= 1);
}

static int judge_fails(void *arg, const at_worker_outcome *oc)
{
    (void)arg;
    return oc->how == AT_WORKER_DONE ? AT_OK : at_fail(AT_ERR_CUDA, "lost: %s", oc->why);
}

static void restart_loop_returns_the_judges_failure(void)
{
    int n = 0;
    CHECK_EQ_INT(at_worker_loop(body_exits_between, NULL, NULL, NULL, judge_fails, NULL, NULL, &n),
                 AT_ERR_CUDA);
    CHECK_EQ_INT(n, 1);
    CHECK_STR_HAS(at_errmsg(), "exited with status 2");
}

static void restart_loop_stops_when_interrupted(void)
{
    int n = 5;
    volatile int set = 1;
    CHECK_EQ_INT(at_worker_loop(fake_body, NULL, NULL, NULL, judge_fails, NULL, &set, &n), AT_OK);
    CHECK_EQ_INT(n, 0);
}

/* ------------------------------------------------------- protocol, probe */

static void body_garbles(at_worker *w, void *arg)
{
    (void)arg;
    char junk[3] = {1, 2, 3};
    at_worker_send(w, AT_WMSG_ON, 1, junk, sizeof junk); /* ON must carry one double */
    pause();
}

static void broken_protocol_ends_the_worker(void)
{
    at_worker_outcome oc;
    CHECK_EQ_INT(at_worker_run(body_garbles, NULL, NULL, NULL, NULL, &oc), AT_OK);
    CHECK_EQ_INT(oc.how, AT_WORKER_DIED);
    CHECK_STR_HAS(oc.why, "protocol");
}

/* The identity probe runs in a child: here (no GPU, maybe no driver) a
** clean AT_ERR_NOGPU; on a GPU machine the device's name. */
static void identity_from_a_child(void)
{
    at_device_info d;
    int rc = at_worker_identity(0, &d);
    if (rc == AT_OK) {
        CHECK(d.name[0] != '\0');
        CHECK(d.cc_major >= 7);
        printf("    GPU 0: %s (sm_%d%d)\n", d.name, d.cc_major, d.cc_minor);
    } else {
        CHECK_EQ_INT(rc, AT_ERR_NOGPU);
        CHECK_STR_HAS(at_errmsg(), "GPU");
    }
    CHECK_EQ_INT(at_worker_identity(1000, &d), AT_ERR_NOGPU); /* no such GPU anywhere */
}

/* ------------------------------------------------------------ the rules */

static void timeout_rule(void)
{
    /* tiny calls: the minimum */
    CHECK(at_worker_limit_s(2.0, 10, 0, 0) == AT_TIMEOUT_MIN_S);
    /* 50 x 1000 µs x 100 calls = 5 s */
    double v = at_worker_limit_s(1000.0, 100, 0, 0);
    CHECK(v > 4.999 && v < 5.001);
    /* per captured graph, and the first launch of a module */
    v = at_worker_limit_s(1000.0, 100, 2, 1);
    CHECK(v > 5.0 + 2 * AT_TIMEOUT_GRAPH_S + AT_TIMEOUT_FIRST_S - 1e-6 &&
          v < 5.0 + 2 * AT_TIMEOUT_GRAPH_S + AT_TIMEOUT_FIRST_S + 1e-6);
    /* no ceiling known: 1 ms a call */
    v = at_worker_limit_s(0.0, 1000, 0, 0);
    CHECK(v > 49.999 && v < 50.001);
    /* never below the minimum, whatever the input */
    CHECK(at_worker_limit_s(-5.0, -1, -3, 0) >= AT_TIMEOUT_MIN_S);
}

/* Which CUDA errors end the context (the worker must die, the candidate in
** flight is blamed) and which are one candidate's refused launch. */
static void sticky_errors(void)
{
    CHECK(at_gpu_is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS));
    CHECK(at_gpu_is_sticky(CUDA_ERROR_LAUNCH_FAILED));
    CHECK(at_gpu_is_sticky(CUDA_ERROR_LAUNCH_TIMEOUT)); /* cuda.h: the process must be relaunched */
    CHECK(!at_gpu_is_sticky(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES));
    CHECK(!at_gpu_is_sticky(CUDA_ERROR_INVALID_CLUSTER_SIZE));
    CHECK(!at_gpu_is_sticky(CUDA_ERROR_INVALID_VALUE));
}

static void guard_verdicts(void)
{
    at_guarded b = {.n = 100};
    char reason[256] = "";
    b.host = malloc(2 * AT_GUARD_BYTES);
    memset(b.host, AT_GUARD_PATTERN, 2 * AT_GUARD_BYTES);
    CHECK_EQ_INT(at_guarded_verdict(&b, "output", reason, sizeof reason), 0);
    CHECK_EQ_INT(strlen(reason), 0);
    /* 4 bf16 elements past the end: bytes 0..7 of the zone after */
    memset(b.host + AT_GUARD_BYTES, 0x3f, 8);
    CHECK_EQ_INT(at_guarded_verdict(&b, "output", reason, sizeof reason), 1);
    CHECK_STR_HAS(reason, "wrote 8 bytes past the output");
    /* and 2 bytes just before the start, appended after "; " */
    memset(b.host + AT_GUARD_BYTES - 2, 0, 2);
    reason[0] = '\0';
    snprintf(reason, sizeof reason, "first");
    CHECK_EQ_INT(at_guarded_verdict(&b, "residual", reason, sizeof reason), 1);
    CHECK_STR_HAS(reason, "first; wrote 2 bytes before and 8 bytes past the residual");
    /* one changed byte far out counts as far as it is */
    memset(b.host, AT_GUARD_PATTERN, 2 * AT_GUARD_BYTES);
    b.host[2 * AT_GUARD_BYTES - 1] = 0;
    reason[0] = '\0';
    CHECK_EQ_INT(at_guarded_verdict(&b, "output", reason, sizeof reason), 1);
    CHECK_STR_HAS(reason, "wrote 4096 bytes past the output");
    free(b.host);
}

int main(void)
{
    TT_RUN(messages_arrive_in_order_and_intact);
    TT_RUN(exit_in_a_candidate_blames_it);
    TT_RUN(signal_in_a_candidate_blames_it);
    TT_RUN(death_outside_a_candidate_blames_none);
    TT_RUN(hang_past_the_limit_is_killed);
    TT_RUN(no_deadline_outside_a_candidate);
    TT_RUN(interrupt_sets_the_worker_flag);
    TT_RUN(restart_loop_survives_and_skips);
    TT_RUN(restart_loop_returns_the_judges_failure);
    TT_RUN(restart_loop_stops_when_interrupted);
    TT_RUN(broken_protocol_ends_the_worker);
    TT_RUN(identity_from_a_child);
    TT_RUN(timeout_rule);
    TT_RUN(guard_verdicts);
    TT_RUN(sticky_errors);
    return TT_DONE();
}
