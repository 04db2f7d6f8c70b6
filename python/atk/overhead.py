"""Host-side cost of one call: how long the Python thread spends per
t.gemv / torch.ops.atk.gemv / raw ctypes call, against torch.matmul on the
same shape. Times a loop of n calls with no synchronization inside (the
GPU runs behind; a kernel shorter than the host cost keeps the loop
host-bound), so each figure is host microseconds per call, not kernel time.

    python -m atk.overhead cache/tables/qwen3.5-2b-h200.json            # on the GPU
    python -m atk.overhead cache/tables/qwen3.5-2b-h200.json --dry      # no GPU: meta tensors

On a dry table tensors are meta and nothing launches: the figures are the
Python checks + ctypes + the C library's choice, and matmul's dispatch."""

import argparse
import json
import time


def measure(table, n=1000, M=1, K=2048, N=2048, dtype=None):
    """Returns {"device", "shape", "path", "n", and µs per call for
    "ctypes_us" (atk_gemv through ctypes, no checks), "table_gemv_us"
    (t.gemv, output allocated), "table_gemv_out_us" (t.gemv with out=),
    "op_gemv_us" (torch.ops.atk.gemv; None on a dry table, whose meta
    tensors reach only the fake kernel), "matmul_us" (torch.matmul(x, W.t()))
    and "matmul_out_us"}. The calls add to the table's counters."""
    import torch

    from . import _lib
    from . import ops  # noqa: F401
    from .table import _raw_stream

    dtype = dtype or torch.bfloat16
    if table.dry:
        dev = torch.device("meta")
        x = torch.empty(M, K, dtype=dtype, device=dev)
        W = torch.empty(N, K, dtype=dtype, device=dev)

        def sync():
            pass
    else:
        dev = torch.device("cuda", table.device)
        x = torch.randn(M, K, dtype=dtype, device=dev)
        W = torch.randn(N, K, dtype=dtype, device=dev) * K ** -0.5

        def sync():
            torch.cuda.synchronize(dev)
    y = torch.empty(M, N, dtype=dtype, device=dev)
    Wt = W.t()

    def timed(fn):
        for _ in range(min(n, 50)):  # warm: cuBLAS handles, caches, first launches
            fn()
        sync()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        t1 = time.perf_counter_ns()
        sync()
        return (t1 - t0) / n / 1e3

    ctx = table._c()
    raw = table._f_gemv
    code = _lib.BF16 if dtype == torch.bfloat16 else _lib.FP16
    stream = None if table.dry else _raw_stream(table.device)
    xp, wp, yp = x.data_ptr(), W.data_ptr(), y.data_ptr()
    h = table.handle
    gemv = torch.ops.atk.gemv
    res = {
        "device": str(dev) if table.dry else torch.cuda.get_device_name(dev),
        "shape": f"{M}x{K}x{N}",
        "dtype": str(dtype).replace("torch.", ""),
        "path": table.explain("gemv", dtype, M, K, N).path,
        "n": n,
    }
    with torch.inference_mode():
        res["ctypes_us"] = timed(lambda: raw(ctx, stream, code, M, K, N, xp, wp, yp))
        res["table_gemv_us"] = timed(lambda: table.gemv(x, W))
        res["table_gemv_out_us"] = timed(lambda: table.gemv(x, W, out=y))
        res["op_gemv_us"] = None if table.dry else timed(lambda: gemv(x, W, h))
        res["matmul_us"] = timed(lambda: torch.matmul(x, Wt))
        res["matmul_out_us"] = timed(lambda: torch.matmul(x, Wt, out=y))
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m atk.overhead", description=__doc__.split("\n\n")[0])
    ap.add_argument("table")
    ap.add_argument("--dry", action="store_true", help="no GPU: an H200 dry table and meta tensors")
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--shape", default="1x2048x2048", help="MxKxN (default 1x2048x2048)")
    ap.add_argument("--device", type=int, default=None)
    a = ap.parse_args(argv)
    M, K, N = (int(v) for v in a.shape.split("x"))
    from .table import open as open_table, open_dry
    t = open_dry(a.table) if a.dry else open_table(a.table, a.device)
    with t:
        print(json.dumps(measure(t, a.n, M, K, N), indent=1))


if __name__ == "__main__":
    main()
