/*
** devices.h — internal to the tuner: which GPUs a run uses (--devices), and
** a pool of worker processes, one per slot, that a parent feeds work items
** one at a time over pipes. Invariant: the parent never initialises CUDA
** (a process must not fork after cuInit), so it can fork workers and
** restart one whose CUDA context was lost.
*/
#ifndef AT_DEVICES_H
#define AT_DEVICES_H

#include <stddef.h>

#define AT_DEVICES_MAX 64

/* The number of GPUs, counted in a child process so that this process
** stays free of CUDA. 0 (and AT_OK) when there is no driver or no GPU. */
int at_devices_count(int *count);

/* Parses --devices: "all" or a comma-separated list of ordinals ("0,1,3").
** *out (malloc'ed) gets the ordinals in order, *n their count. "all" counts
** the GPUs (at_devices_count); with none it is AT_ERR_NOGPU, unless
** `dry_run`, which then gets one worker for ordinal 0 (a dry run needs no
** GPU). An ordinal listed twice is AT_ERR_USAGE unless `dry_run`: two
** workers timing on one GPU would disturb each other's measurements.
** Anything else malformed is AT_ERR_USAGE naming it. */
int at_devices_parse(const char *text, int dry_run, int **out, int *n);

/* What a work function tells the pool after an item. */
enum {
    AT_POOL_NEXT = 0,    /* ready for another item */
    AT_POOL_RESTART = 1, /* this process is unusable (CUDA context lost): start a fresh one */
    AT_POOL_RETIRE = 2   /* this slot cannot work at all (its GPU is missing): no more items */
};

/* Runs in a worker process: does item `item` as slot `slot` and fills
** result[0..result_size) (zeroed before the call); returns AT_POOL_*.
** `next` is the item the pool has reserved for this slot's next turn, or
** -1: the worker may prepare it (suite_run.c compiles it ahead) while this
** one runs. It is a promise that can break: an idle slot may take another
** slot's reservation, and a stopping pool hands out nothing more. When the
** worker stops it is called once more with item -1 (result NULL) to let
** go of what it prepared; its return value is then ignored. */
typedef int (*at_pool_work_fn)(void *arg, int slot, int item, int next, void *result);
/* Runs in the parent as each item ends: result is the worker's, or NULL
** when the worker died before answering, with `lost` saying how ("worker 1
** (pid 123) ended by signal 11"). Returns nonzero to hand out no further
** item (the busy workers finish theirs), e.g. after a cache error. */
typedef int (*at_pool_done_fn)(void *arg, int slot, int item, const void *result, const char *lost);

/* Starts nslots worker processes (fork, each in its own process group, told
** to stop with SIGINT if this process dies) and hands items 0..nitems-1 out
** in order, each to the next idle worker, so a slow item holds no other
** back. Each item goes out with a reservation of the next free item for
** that worker's next turn; a worker idle with nothing free takes a busy
** one's reservation. A worker that dies or asks to restart is replaced (at most 3
** deaths per slot; then the slot retires). When *interrupt becomes nonzero,
** no further item is handed out and each busy worker is sent one SIGINT;
** the pool waits for their answers. Returns AT_OK when every item was
** handed out or done() asked to stop, AT_ERR_INTERRUPTED when interrupted
** before, AT_ERR_NOGPU when every slot retired first; items never handed
** out get no done() call.
** AT_ERR_IO when no worker can be started. Call it from a single-threaded
** process (threads do not survive fork). */
int at_pool_run(int nslots, int nitems, size_t result_size, at_pool_work_fn work, at_pool_done_fn done, void *arg,
                volatile int *interrupt);

#endif /* AT_DEVICES_H */
