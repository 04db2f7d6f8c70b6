/*
** worker.h — one tuning run surviving its candidates: the GPU work runs in
** a forked worker process that tells its parent over a pipe which
** candidate it is on; the parent, which never initialises CUDA, notices
** when the worker dies or runs past the candidate's deadline (SIGKILL) and
** says which candidate was to blame. Internal to the tuner. Ran on the
** H200 (tests/test_gpu_faults.c); the logic is also tested with fake
** workers (tests/test_worker.c).
*/
#ifndef AT_WORKER_H
#define AT_WORKER_H

#include "autotune.h"

#include <stddef.h>
#include <stdint.h>

/* The protocol (worker -> parent only; the parent's state reaches a fresh
** worker through fork):
**   every message is a header {int32 type, int32 row, uint32 len} and `len`
**   payload bytes, written by the worker's one thread with blocking writes;
**   the parent reads non-blocking under poll and reassembles messages.
**   AT_WMSG_ON  row, payload double limit_s: "candidate `row` runs now and
**               must be done (next message) within limit_s". The parent
**               starts its own clock on receipt; past the limit it SIGKILLs
**               the worker and reports AT_WORKER_TIMEOUT for that row.
**   AT_WMSG_OFF no payload: no candidate in flight (no deadline).
**   AT_WMSG_BYE sent by worker.c when the body returned: a clean end.
**   types >= AT_WMSG_USER are the caller's, handed to on_msg in order.
** A worker that ends without BYE died (signal, exit, lost pipe): the
** candidate in flight (the last ON without OFF), if any, is blamed. */
enum { AT_WMSG_ON = 1, AT_WMSG_OFF = 2, AT_WMSG_BYE = 3, AT_WMSG_USER = 16 };

#define AT_WMSG_MAX (256u << 20) /* larger payloads are a protocol error */

/* The worker's end: its pipe and its stop flag. Opaque. */
typedef struct at_worker at_worker;

typedef struct at_worker_msg {
    int type, row;
    const void *data; /* valid during the on_msg call */
    size_t len;
} at_worker_msg;

typedef enum at_worker_how {
    AT_WORKER_DONE = 0, /* the body returned (BYE received) */
    AT_WORKER_DIED,     /* it ended without BYE: signal, exit, broken protocol */
    AT_WORKER_TIMEOUT   /* a candidate ran past its limit: killed by the parent */
} at_worker_how;

/* How one worker's life ended. */
typedef struct at_worker_outcome {
    at_worker_how how;
    int row;          /* candidate in flight at the end, -1 for none */
    double limit_s;   /* that candidate's limit */
    double elapsed_s; /* how long it had run when the worker ended */
    char why[192];    /* DIED/TIMEOUT: "ended by signal 11 (Segmentation fault)" */
} at_worker_outcome;

/* Runs in the worker process; the worker exits when it returns. */
typedef void (*at_worker_body)(at_worker *w, void *arg);
/* Runs in the parent for every message of type >= AT_WMSG_USER. */
typedef void (*at_worker_on_msg)(void *arg, const at_worker_msg *m);

/* Forks one worker (fflush(NULL) first) that runs body(w, body_arg) and
** exits, and supervises it until it is gone: its messages go to on_msg in
** order; a candidate past its limit gets the worker SIGKILLed; when
** *interrupt (may be NULL) becomes nonzero the worker is sent SIGUSR1 (its
** stop flag is set, as by a SIGINT from the terminal; it should finish
** soon) and, if it is not gone 30 s later outside a candidate (or past its
** candidate's limit), SIGKILL. The worker stays in the
** caller's process group (a terminal's Ctrl-C reaches both) and is killed
** if the parent dies (PR_SET_PDEATHSIG). The process must not have
** initialised CUDA. Returns AT_OK with *out filled, or AT_ERR_IO when no
** pipe or process could be made. The worker is always reaped on return. */
int at_worker_run(at_worker_body body, void *body_arg, at_worker_on_msg on_msg, void *msg_arg,
                  volatile int *interrupt, at_worker_outcome *out);

/* What a judge makes of one worker's end (at_worker_loop). */
#define AT_WORKER_AGAIN (-1) /* the candidate in flight is recorded: start a fresh worker */
/* Called in the parent after each worker with how it ended: returns AT_OK
** (the run is over), AT_WORKER_AGAIN, or another status to fail with. */
typedef int (*at_worker_judge)(void *arg, const at_worker_outcome *oc);

/* Runs workers (at_worker_run) one after another until the judge says the
** run is over: a fresh worker is forked from the parent as it is then, so
** it inherits whatever the judge recorded (what to skip). Before each new
** worker, a set *interrupt ends the loop with AT_OK. *nworkers (may be
** NULL) gets how many ran. Returns AT_OK, the judge's status, or
** AT_ERR_IO (no pipe or process). */
int at_worker_loop(at_worker_body body, void *body_arg, at_worker_on_msg on_msg, void *msg_arg,
                   at_worker_judge judge, void *judge_arg, volatile int *interrupt, int *nworkers);

/* Worker side: sends one message (blocking). A parent that is gone ends
** the worker (_exit). */
void at_worker_send(at_worker *w, int type, int row, const void *data, size_t len);
/* Writes all n bytes to fd, retrying short writes and EINTR: 0, or -1 on
** an error (a closed pipe: EPIPE). Also used by devices.c's pool pipes
** and compile_proc.c. */
int at_worker_write_all(int fd, const void *p, size_t n);
/* Reads all n bytes from a blocking fd, retrying short reads and EINTR: 0,
** or -1 at end of file or an error (devices.c, compile_proc.c). */
int at_worker_read_all(int fd, void *p, size_t n);
/* Worker side: candidate `row` starts a step that must end within limit_s. */
void at_worker_on(at_worker *w, int row, double limit_s);
/* Worker side: the step is over (no deadline until the next on). */
void at_worker_off(at_worker *w);
/* Worker side: set (asynchronously) when the worker was sent SIGINT (unless
** the parent ignored SIGINT) or the parent's stop (SIGUSR1). */
volatile int *at_worker_stop_flag(at_worker *w);

/* The deadline rule (DESIGN: a timeout derived from the roofline). One
** step of a candidate makes `calls` calls of contestants (candidate and
** the baselines interleaved with it), each allowed AT_TIMEOUT_FACTOR x
** floor_us (the roofline floor of one call: bytes / read ceiling, plus an
** empty kernel's time); the step gets at least AT_TIMEOUT_MIN_S, plus
** AT_TIMEOUT_GRAPH_S per CUDA graph it captures and instantiates, plus
** AT_TIMEOUT_FIRST_S when it holds the first launch of a module in this
** worker (lazy module loading). floor_us <= 0 (no ceiling known) counts
** as 1 ms. */
#define AT_TIMEOUT_FACTOR 50.0
#define AT_TIMEOUT_MIN_S 0.1
#define AT_TIMEOUT_GRAPH_S 0.25
#define AT_TIMEOUT_FIRST_S 2.0
double at_worker_limit_s(double floor_us, double calls, int graphs, int first);

/* The GPU's identity (at_gpu_open identity_only: name, cc, SMs, L2,
** driver) read in a short-lived child, so this process stays free of CUDA
** and may fork workers later. Fails as at_gpu_open does (AT_ERR_NOGPU
** with its message). A success is kept for the rest of the process. */
int at_worker_identity(int ordinal, at_device_info *out);
/* Puts `info` in that memo for `ordinal` as if a probe had found it: tests
** give a compile-only run a GPU's identity on a machine without one. */
void at_worker_identity_remember(int ordinal, const at_device_info *info);

#endif
