#!/usr/bin/env python3
"""examples/torch_decode/decode.py — times the decode of the Qwen3.5-2B-shaped
torch stack (model.py) at batch sizes B in up to six modes: (a) torch eager,
(b) torch + CUDA graphs (one captured step per B), (c) atk.patch(model, table)
+ CUDA graphs, with --compile also (d) torch.compile of the step + CUDA graphs
and (e) atk.patch + torch.compile + CUDA graphs (the atk ops opaque in the
compiled graph, the rest fused by inductor), with --fused also (f) the step
through atk's fused calls (model.forward_fused, the C engine's mode 4) +
CUDA graphs.
Measured as the C engine (examples/decode/decode.c) does: rounds of --steps
steps between one event pair, the modes interleaved, median of --rounds.
Every token row of the final hidden state and of the logits of every mode is
compared with (a)'s: exit 0 when all agree, 1 when one differs (or no GPU,
no atk), 2 on a bad argument. --overhead adds the host cost of one eager
GEMV call through torch and through atk.

usage: python3 examples/torch_decode/decode.py --help
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DB = HERE.parent.parent / "cache" / "tables" / "qwen3.5-2b-h200.json"
MAX_BATCH = 64
TOLERANCE = 5e-2  # relative L2 per token row, as decode.c (bf16 through 24 layers)

# mode key -> label; the order is the order of timing within a round
MODES = {
    "eager": "(a) torch eager",
    "graph": "(b) torch + CUDA graph",
    "atk_graph": "(c) atk.patch + CUDA graph",
    "compile_graph": "(d) torch.compile + CUDA graph",
    "atk_compile_graph": "(e) atk.patch + compile + graph",
    "atk_fused_graph": "(f) atk fused calls + CUDA graph",
}


class Failure(Exception):
    """A run that cannot go on (no GPU, no atk, a CUDA error): message, exit 1."""


# ------------------------------------------------------------------ arguments

def batch_list(text: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]: each 1..MAX_BATCH, distinct."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty list (expected e.g. 1,2,4)")
    out = []
    for item in text.split(","):
        try:
            b = int(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}': '{item}' is not an integer") from None
        if not 1 <= b <= MAX_BATCH:
            raise argparse.ArgumentTypeError(f"'{text}': {b} is out of range 1..{MAX_BATCH}")
        if b in out:
            raise argparse.ArgumentTypeError(f"'{text}': {b} is repeated")
        out.append(b)
    return out


def int_range(lo: int, hi: int):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{v} is out of range {lo}..{hi}")
        return v
    return parse


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"{text} must be a positive number")
    return v


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="decode.py",
        description="Decode of a Qwen3.5-2B-shaped torch stack (synthetic weights, attention stand-ins) timed "
                    "in torch eager, torch + CUDA graphs, atk.patch + CUDA graphs, optionally torch.compile and atk's "
                    "fused calls; "
                    "every mode checked against eager on every token row.",
        epilog="Exit status: 0 every mode agrees with eager, 1 one differs or the run failed (no GPU, no atk, "
               "missing libatk.so), 2 bad argument. Example: ATK_LIB=build-gpu/kernels/libatk.so python3 "
               "examples/torch_decode/decode.py --batch 1,2,4,8,16 --json out.json")
    p.add_argument("--batch", type=batch_list, default=[1], metavar="B[,B...]",
                   help=f"batch sizes (tokens per step, one per sequence), each 1..{MAX_BATCH}, distinct (default 1)")
    p.add_argument("--steps", type=int_range(1, 1_000_000), default=50, metavar="N",
                   help="steps per timing round (default 50)")
    p.add_argument("--rounds", type=int_range(1, 101), default=5, metavar="R",
                   help="timing rounds, modes interleaved within each; the median is reported (default 5)")
    p.add_argument("--db", type=Path, default=DEFAULT_DB, metavar="FILE",
                   help="the atk table (default: the shipped cache/tables/qwen3.5-2b-h200.json)")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON ('-': to stdout, the table to stderr)")
    p.add_argument("--compile", action="store_true", help="also time (d): torch.compile of the step, and (e): the "
                   "same on the atk-patched model, each captured in a CUDA graph (compiles once per batch size "
                   "and mode: minutes)")
    p.add_argument("--no-atk", action="store_true", help="skip (c) (no atk package or libatk.so needed)")
    p.add_argument("--fused", action="store_true",
                   help="also time (f): the step through atk's fused calls (each norm inside the GEMV that "
                        "reads it, SwiGLU inside gate_up, each residual add inside o_proj and down_proj); "
                        "pass a table with fused entries, e.g. --db cache/tables/qwen3.5-2b-h200-fused.json "
                        "(elsewhere the fused calls run atk's unfused sequence)")
    p.add_argument("--no-standins", action="store_true",
                   help="every mode without the attention and recurrence stand-ins and SiLU*mul (a fixed buffer "
                        "is read in their place): the GEMVs and norms alone, as the C engine's --no-standins")
    p.add_argument("--overhead", action="store_true",
                   help="also measure the host cost of one eager GEMV call (1x2048x2048): torch.matmul, "
                        "F.linear, nn.Linear, t.gemv, torch.ops.atk.gemv, patched nn.Linear")
    p.add_argument("--tolerance", type=positive_float, default=TOLERANCE, metavar="E",
                   help=f"largest relative L2 error of a token row against eager (default {TOLERANCE:g})")
    p.add_argument("--device", type=int_range(0, 1023), default=0, metavar="N", help="CUDA ordinal (default 0)")
    p.add_argument("--seed", type=int_range(0, 2**31 - 1), default=1, metavar="S",
                   help="seed of the random weights (default 1)")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parses and checks everything that does not need a GPU; a bad argument
    exits 2 with a message naming it."""
    p = make_parser()
    a = p.parse_args(argv)
    if not a.no_atk and not a.db.is_file():
        p.error(f"--db '{a.db}': no such file (the atk table; pass --no-atk to run the torch modes alone)")
    if a.no_atk and a.overhead:
        p.error("--overhead compares torch with atk: drop --no-atk")
    if a.no_atk and a.fused:
        p.error("--fused runs atk's fused calls: drop --no-atk")
    return a


# ------------------------------------------------------------------ measuring

def time_round(fn, steps: int) -> float:
    """Microseconds per call of fn (which enqueues one step) over `steps`
    calls between one event pair, after 3 untimed calls."""
    import torch
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        fn()
    end.record()
    end.synchronize()
    return 1000.0 * start.elapsed_time(end) / steps


def warm_up(fn, calls: int = 2) -> None:
    """Calls fn on a side stream, as torch's CUDA graph notes advise before a
    capture: cuBLAS initialises and picks its kernels (torch.compile
    compiles) outside the capture."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(calls):
            fn()
    torch.cuda.current_stream().wait_stream(side)


def capture(fn, warmup: int = 2):
    """A CUDA graph of one call of fn, after `warmup` warm-up calls. Returns
    (graph, the outputs it writes on every replay)."""
    import torch
    if warmup:
        warm_up(fn, warmup)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g, out


def row_errors(x, ref) -> dict:
    """x against ref ([M, N] each): the worst row's relative L2 error (NaN or
    inf in x counts as inf), its index, and the max absolute difference."""
    import torch
    a, r = x.double(), ref.double()
    num = (a - r).pow(2).sum(-1)
    den = r.pow(2).sum(-1)
    rel = torch.where(den > 0, (num / den.clamp_min(1e-300)).sqrt(), num.sqrt())
    rel = torch.where(torch.isfinite(a).all(-1), rel, torch.full_like(rel, math.inf))
    rel = torch.nan_to_num(rel, nan=math.inf, posinf=math.inf)
    row = int(rel.argmax())
    diff = (a - r).abs()
    return {"rel_err": float(rel[row]), "row": row,
            "max_abs": float(torch.nan_to_num(diff, nan=math.inf, posinf=math.inf).max())}


def compare(outs, ref, tol: float) -> dict:
    """A mode's (hidden, logits) against eager's, every token row."""
    h, lg = row_errors(outs[0], ref[0]), row_errors(outs[1], ref[1])
    return {"hidden_rel_err": h["rel_err"], "hidden_row": h["row"], "hidden_max_abs": h["max_abs"],
            "logits_rel_err": lg["rel_err"], "logits_row": lg["row"], "logits_max_abs": lg["max_abs"],
            "agree": h["rel_err"] <= tol and lg["rel_err"] <= tol}


def stats_delta(before: dict, after: dict) -> dict:
    """atk's counters of one captured step: after - before, per op, for the
    integer fields (calls, tuned, bucket, inferred, fallback)."""
    out = {}
    for op, a in after.items():
        b = before.get(op, {})
        d = {k: v - b.get(k, 0) for k, v in a.items() if isinstance(v, int) and not isinstance(v, bool)}
        if d.get("calls", 0):
            out[op] = d
    return out


def summarise(samples: list[float]) -> dict:
    return {"median": statistics.median_low(samples), "min": min(samples), "max": max(samples)}


def run_batch(model, B: int, modes: dict, args, table, atk) -> dict:
    """One batch size: eager plus each mode's captured step, timed
    interleaved, then every mode's outputs from zero states against
    eager's."""
    import torch
    steps = {"eager": lambda: model(B)}
    outs = {}
    paths = None
    graphs = {}
    if "graph" in modes:
        graphs["graph"], outs["graph"] = capture(lambda: model(B))
    if "atk_graph" in modes:
        with atk.patch(model, table):
            warm_up(lambda: model(B))
            before = table.stats()
            graphs["atk_graph"], outs["atk_graph"] = capture(lambda: model(B), warmup=0)
            # the capture ran the Python forward once: one step's calls
            paths = stats_delta(before, table.stats())
    if "compile_graph" in modes:
        graphs["compile_graph"], outs["compile_graph"] = capture(lambda: modes["compile_graph"](B))
    if "atk_compile_graph" in modes:
        # traced while patched: the atk ops are opaque custom ops in the
        # compiled graph, the rest (stand-ins, SiLU*mul) is inductor's
        with atk.patch(model, table):
            graphs["atk_compile_graph"], outs["atk_compile_graph"] = capture(
                lambda: modes["atk_compile_graph"](B))
    fused_paths = None
    if "atk_fused_graph" in modes:
        warm_up(lambda: model.forward_fused(B, table))
        before = table.stats()
        graphs["atk_fused_graph"], outs["atk_fused_graph"] = capture(lambda: model.forward_fused(B, table),
                                                                     warmup=0)
        fused_paths = stats_delta(before, table.stats())
    for k, g in graphs.items():
        steps[k] = g.replay
    torch.cuda.synchronize()

    samples = {k: [] for k in steps}
    for _ in range(args.rounds):
        for k, fn in steps.items():
            samples[k].append(time_round(fn, args.steps))

    # agreement: every mode from zero linear-attention states
    model.reset_state()
    ref = tuple(t.clone() for t in model(B))
    checks = {}
    for k, g in graphs.items():
        model.reset_state()
        g.replay()
        o = outs[k]
        if k == "atk_fused_graph":  # (residual, logits): the final norm is inside the lm_head call
            o = (model.hidden_of(o[0]), o[1])
        checks[k] = compare(o, ref, args.tolerance)
    torch.cuda.synchronize()

    res = {"B": B, "modes": {}, "atk_paths": paths, "atk_fused_paths": fused_paths}
    graph_us = statistics.median_low(samples["graph"]) if "graph" in samples else None
    for k in steps:
        t = summarise(samples[k])
        res["modes"][k] = {"us_per_step": t, "tokens_per_s": 1e6 * B / t["median"],
                           "ratio_to_graph": graph_us / t["median"] if graph_us else None,
                           "check": checks.get(k)}
    res["agree"] = all(c["agree"] for c in checks.values())
    del graphs, outs
    return res


def overhead(table, atk, calls: int = 1000, repeats: int = 5) -> dict:
    """Host microseconds per eager call of a 1x2048x2048 bf16 GEMV: wall time
    of `calls` back-to-back calls, not synchronised (the GPU work, ~3 us a
    call, stays behind the host), median of `repeats`; also the wall time
    including the final synchronisation."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    dev = torch.cuda.current_device()
    x = torch.randn(1, 2048, dtype=torch.bfloat16, device=dev)
    lin = nn.Linear(2048, 2048, bias=False, dtype=torch.bfloat16, device=dev)
    W = lin.weight.detach()
    Wt = W.t()
    fns = {"torch.matmul": lambda: torch.matmul(x, Wt), "F.linear": lambda: F.linear(x, W),
           "nn.Linear": lambda: lin(x), "t.gemv": lambda: table.gemv(x, W)}
    try:
        import atk.ops  # noqa: F401  registers torch.ops.atk
        fns["torch.ops.atk.gemv"] = lambda: torch.ops.atk.gemv(x, W, table.handle)
    except Exception as e:  # reported, the rest still measured
        fns["torch.ops.atk.gemv"] = e
    patched = nn.Linear(2048, 2048, bias=False, dtype=torch.bfloat16, device=dev)
    patched.weight.data.copy_(W)
    holder = nn.Sequential(patched)
    res = {"shape": "1x2048x2048", "dtype": "bf16", "calls": calls, "repeats": repeats, "us_per_call": {}}
    with torch.inference_mode(), atk.patch(holder, table):
        fns["nn.Linear (atk.patch)"] = lambda: patched(x)
        for name, fn in fns.items():
            if isinstance(fn, Exception):
                res["us_per_call"][name] = {"error": f"{type(fn).__name__}: {fn}"}
                continue
            try:
                host, wall = [], []
                for _ in range(10):
                    fn()
                torch.cuda.synchronize()
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    for _ in range(calls):
                        fn()
                    t1 = time.perf_counter()
                    torch.cuda.synchronize()
                    t2 = time.perf_counter()
                    host.append(1e6 * (t1 - t0) / calls)
                    wall.append(1e6 * (t2 - t0) / calls)
                res["us_per_call"][name] = {"host": statistics.median(host), "wall": statistics.median(wall)}
            except Exception as e:
                res["us_per_call"][name] = {"error": f"{type(e).__name__}: {e}"}
    # the package's own measurement, where it has one
    try:
        import atk.overhead as ao
        if hasattr(ao, "measure"):
            res["atk_overhead_measure"] = ao.measure(table)
    except ImportError:
        pass
    except Exception as e:
        res["atk_overhead_measure"] = {"error": f"{type(e).__name__}: {e}"}
    return res


# ------------------------------------------------------------------ output

def fmt_err(c: dict | None) -> str:
    if c is None:
        return "reference"
    return (f"hidden rel {c['hidden_rel_err']:.3e} (row {c['hidden_row']}) max abs {c['hidden_max_abs']:.3e}, "
            f"logits rel {c['logits_rel_err']:.3e} (row {c['logits_row']}) max abs {c['logits_max_abs']:.3e}: "
            + ("agree" if c["agree"] else "DIFFER"))


def per_step_calls(model) -> dict:
    """The GEMVs and norms one step calls: what atk could take."""
    import torch.nn as nn
    GemmaRMSNorm = type(model.norm)
    mods = list(model.modules())
    return {"gemv": sum(isinstance(m, nn.Linear) for m in mods),
            "norm": sum(isinstance(m, GemmaRMSNorm) for m in mods)}


def print_report(out, results: list[dict], args, per_step: dict | None = None) -> None:
    print(f"\nper batch size B (B tokens per step; median of {args.rounds} rounds of {args.steps} steps, modes "
          f"interleaved; vs (b) = tokens/s over (b)'s)", file=out)
    print(f"  {'mode':32s} {'B':>4s} {'us/step':>10s} {'tokens/s':>12s} {'vs (b)':>8s}", file=out)
    for r in results:
        for k, m in r["modes"].items():
            ratio = f"{m['ratio_to_graph']:7.2f}x" if m["ratio_to_graph"] else f"{'-':>8s}"
            print(f"  {MODES[k]:32s} {r['B']:4d} {m['us_per_step']['median']:10.1f} {m['tokens_per_s']:12.1f} "
                  f"{ratio}", file=out)
    print(f"\nagreement with (a) on every token row (relative L2 per row, tolerance {args.tolerance:g}):", file=out)
    for r in results:
        for k, m in r["modes"].items():
            if m["check"] is not None:
                print(f"  B={r['B']:<3d} {MODES[k]:32s} {fmt_err(m['check'])}", file=out)
        for key, what in (("atk_paths", "atk calls"), ("atk_fused_paths", "(f)'s atk calls")):
            if r.get(key):
                line = ", ".join(f"{op} " + "/".join(str(d.get(f, 0)) for f in ("calls", "tuned", "bucket",
                                                                                   "inferred", "fallback"))
                                 for op, d in r[key].items())
                print(f"  B={r['B']:<3d} {what} in one captured step (calls/tuned/bucket/inferred/fallback): "
                      f"{line}", file=out)
        if r["atk_paths"] is not None and per_step:
            p = r["atk_paths"]
            norms = sum(d.get("calls", 0) for op, d in p.items() if "rmsnorm" in op)
            print(f"  B={r['B']:<3d} atk took {p.get('gemv', {}).get('calls', 0)} of the step's {per_step['gemv']} "
                  f"GEMVs and {norms} of its {per_step['norm']} norms (the rest ran the modules' torch forward)",
                  file=out)


def print_overhead(out, o: dict) -> None:
    print(f"\nhost overhead of one eager GEMV call ({o['shape']} {o['dtype']}, {o['calls']} back-to-back calls, "
          f"median of {o['repeats']}):", file=out)
    print(f"  {'call':24s} {'host us/call':>13s} {'wall us/call':>13s}", file=out)
    for name, v in o["us_per_call"].items():
        if "error" in v:
            print(f"  {name:24s} failed: {v['error']}", file=out)
        else:
            print(f"  {name:24s} {v['host']:13.2f} {v['wall']:13.2f}", file=out)
    if "atk_overhead_measure" in o:
        print(f"  atk.overhead.measure: {o['atk_overhead_measure']}", file=out)


def jsonable(x):
    """Non-finite floats as null (JSON has no inf)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


# ------------------------------------------------------------------ main

def setup_atk(args, out):
    """The atk package and the table, or Failure with what to do."""
    try:
        import atk
    except ImportError as e:
        raise Failure(f"the atk package is not importable ({e}): install it with "
                      "'python3 -m pip install --no-deps --no-build-isolation ./python', or pass --no-atk") from None
    try:
        table = atk.open(str(args.db), device=args.device)
    except getattr(atk, "LibraryNotFound", ()) as e:
        raise Failure(f"atk: libatk.so not found (set ATK_LIB=build-gpu/kernels/libatk.so): {e}") from None
    except getattr(atk, "AtkError", ()) as e:
        raise Failure(f"atk.open('{args.db}'): {e}") from None
    print(table.report().rstrip(), file=out)
    try:
        if table.info().get("all_fallback"):
            print("decode.py: warning: atk loaded nothing tuned for this GPU: (c) runs on atk's fallbacks",
                  file=sys.stderr)
    except Exception:
        pass
    return atk, table


def run(args, out) -> int:
    import torch
    if not torch.cuda.is_available():
        raise Failure(f"no CUDA GPU visible to torch {torch.__version__} (CUDA {torch.version.cuda}): this "
                      "benchmark needs one")
    if args.device >= torch.cuda.device_count():
        raise Failure(f"--device {args.device}: only {torch.cuda.device_count()} CUDA device(s)")
    torch.cuda.set_device(args.device)
    sys.path.insert(0, str(HERE))
    import model as mdl

    cfg = mdl.Config(max_batch=max(args.batch))
    name = torch.cuda.get_device_name()
    cc = torch.cuda.get_device_capability()
    print(f"decode.py: {name} (sm_{cc[0]}{cc[1]}), torch {torch.__version__}, Qwen3.5-2B-shaped stack, bf16, "
          f"up to {cfg.max_batch} tokens per step", file=out)
    atk = table = None
    if not args.no_atk:
        atk, table = setup_atk(args, out)
    model = mdl.make_model(cfg, dtype=torch.bfloat16, device="cuda", seed=args.seed)
    if args.no_standins:
        model.set_standins(False)
        print("stand-ins off (--no-standins): the GEMVs and norms alone", file=out)
    print(f"weights {model.weight_bytes() / 1e9:.2f} GB (synthetic), table "
          f"{'(none: --no-atk)' if args.no_atk else args.db}", file=out)

    modes = {"eager": None, "graph": None}
    patch_summary = None
    if table is not None:
        modes["atk_graph"] = None
        p = atk.patch(model, table)
        s = p.summary()
        if isinstance(s, dict):
            s = [f"{k}: {v}" for k, v in s.items()]
        patch_summary = s if isinstance(s, str) else "\n".join(map(str, s))
        p.undo()
        print("atk.patch:\n  " + patch_summary.rstrip().replace("\n", "\n  "), file=out)
    if args.compile:
        import torch._dynamo as dynamo
        for knob in ("cache_size_limit", "recompile_limit"):  # one graph per batch size
            if hasattr(dynamo.config, knob):
                setattr(dynamo.config, knob, max(getattr(dynamo.config, knob), 4 * len(args.batch)))
        modes["compile_graph"] = torch.compile(model, dynamic=False, fullgraph=True)
        if table is not None:
            modes["atk_compile_graph"] = torch.compile(model, dynamic=False, fullgraph=True)
    if args.fused:
        modes["atk_fused_graph"] = None

    results = []
    with torch.inference_mode():
        for B in args.batch:
            t0 = time.perf_counter()
            results.append(run_batch(model, B, modes, args, table, atk))
            print(f"  B={B}: done in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    over = overhead(table, atk) if args.overhead else None

    per_step = per_step_calls(model)
    print_report(out, results, args, per_step)
    if over:
        print_overhead(out, over)
    agree = all(r["agree"] for r in results)
    print("\n" + ("ok: every mode agrees with (a)" if agree else "FAIL: a mode differs from (a)"), file=out)
    if args.json:
        doc = {"device": name, "cc": 10 * cc[0] + cc[1], "torch": torch.__version__, "dtype": "bf16",
               "steps": args.steps, "rounds": args.rounds, "tolerance": args.tolerance,
               "db": None if args.no_atk else str(args.db), "atk": table is not None, "patch": patch_summary,
               "weights_gb": model.weight_bytes() / 1e9, "calls_per_step": per_step, "modes": {k: MODES[k] for k in modes},
               "batch": results, "overhead": over, "agree": agree}
        text = json.dumps(jsonable(doc), indent=1) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            with open(args.json, "w") as f:
                f.write(text)
    if table is not None:
        table.close()
    return 0 if agree else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = sys.stderr if args.json == "-" else sys.stdout
    if args.json and args.json != "-":  # fail before minutes of work, not after
        existed = os.path.exists(args.json)
        try:
            with open(args.json, "a"):
                pass
            if not existed:
                os.remove(args.json)
        except OSError as e:
            print(f"decode.py: --json '{args.json}': {e.strerror}", file=sys.stderr)
            return 2
    try:
        return run(args, out)
    except Failure as e:
        print(f"decode.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
