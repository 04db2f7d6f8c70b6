/*
** bench.h — launching and timing on the GPU: one GEMV launch (a generated
** kernel or cuBLAS), CUDA-graph replay over rotating weight copies, stream
** back-to-back timing, and the device ceilings. Internal to the tuner.
*/
#ifndef AT_BENCH_H
#define AT_BENCH_H

#include "gpu.h"

/* One GEMV contestant: a loaded kernel, or cuBLAS when fn is NULL. */
typedef struct at_launch {
    CUfunction fn;
    unsigned grid[3], block[3], smem;
    int pdl; /* launch with programmatic stream serialization (TP_PDL=1) */
    at_dtype dtype;
    int M, K, N;
    CUdeviceptr x, y;
} at_launch;

/* Enqueues one y = x . W^T on g->stream. */
int at_launch_gemv(at_gpu *g, const at_launch *l, CUdeviceptr W);

/* A captured graph of `launches` launches cycling over the weight copies. */
typedef struct at_graph {
    CUgraphExec exec;
    int launches;
} at_graph;

int at_graph_build(at_gpu *g, const at_launch *l, const CUdeviceptr *W, int copies, int launches,
                   at_graph *out);
/* One replay: µs per launch. */
int at_graph_time(at_gpu *g, at_graph *gr, double *us);
void at_graph_free(at_gpu *g, at_graph *gr);

/* Back-to-back launches on the stream (no graph): µs per launch. */
int at_stream_time(at_gpu *g, const at_launch *l, const CUdeviceptr *W, int copies, int launches,
                   double *us);

/* Measures the read ceiling (a streaming-read kernel over a buffer of
** several times L2), the device-to-device copy bandwidth and an empty
** kernel's time in graph replay, into g->info. */
int at_bench_ceilings(at_gpu *g);

/* Median, min and max of v[0..n) (v is reordered). */
void at_stats(double *v, int n, double *median, double *min, double *max);

#endif
