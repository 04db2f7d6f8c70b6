/*
** bench.h — timing on the GPU: CUDA-graph replay of calls over rotating
** copies of the data (what one call is, is the op's: op.h), stream
** back-to-back timing, and the device ceilings. Internal to the tuner.
*/
#ifndef AT_BENCH_H
#define AT_BENCH_H

#include "gpu.h"

/* Enqueues one call of a contestant on copy `copy` of the rotated data, on
** g->stream (inside a capture too). `arg` is the caller's. */
typedef int (*at_enqueue_fn)(void *arg, int copy);

/* A captured graph of `launches` calls on copies first, first+1, ...
** (modulo `copies`). */
typedef struct at_graph {
    CUgraphExec exec;
    int launches;
} at_graph;

int at_graph_build(at_gpu *g, at_enqueue_fn fn, void *arg, int first, int copies, int launches,
                   at_graph *out);
/* One replay: µs per launch. */
int at_graph_time(at_gpu *g, at_graph *gr, double *us);
void at_graph_free(at_gpu *g, at_graph *gr);

/* Back-to-back calls on the stream (no graph): one warm-up call per copy,
** then `launches` timed calls cycling over the copies: µs per call. */
int at_stream_time(at_gpu *g, at_enqueue_fn fn, void *arg, int copies, int launches, double *us);

/* Measures the read ceiling (a streaming-read kernel over a buffer of
** several times L2), the device-to-device copy bandwidth and an empty
** kernel's time in graph replay, into g->info. */
int at_bench_ceilings(at_gpu *g);

/* Median, min and max of v[0..n) (v is sorted in place). */
void at_stats(double *v, int n, double *median, double *min, double *max);
/* The p-th percentile (0..1) of sorted v[0..n), interpolated between
** neighbours (p = 0.5: the median as at_stats gives it). */
double at_percentile(const double *v, int n, double p);

#endif
