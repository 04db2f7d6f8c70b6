#!/usr/bin/env python3
# bench/skinny_table.py — joins the tables that bench/decode_skinny.sh printed
# (one run split over several files, e.g. one device call per group of
# shapes) into the issue-7 table: each row's cuBLAS and tuned µs, ratio, % of
# the read ceiling, the M=1 time and the ratio to it, optionally an earlier
# run's tuned µs for the same row ("was"); then the geometric means and the
# M=8 vs M=1 target, reported, never asserted.
# Usage: bench/skinny_table.py FILE... [--was FILE...] [--label TEXT] [--was-label TEXT]
import argparse
import math
import re
import sys

ROW = re.compile(r"\s+(\d+)x(\d+x\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x\s+(\d+)%\s+([\d.]+)x"
                 r"\s+([\d.]+)\s+([\d.]+)x\s+(.*)")
HEAD = re.compile(r"^(\w+): (.*), read ceiling ([\d.]+) TB/s")
# the parameters that vary between winners (the rest are the same on every mma row)
KEEP = ("TP_WARPS", "TP_WPR", "TP_KSPLIT", "TP_ROWS", "TP_TOKENS", "TP_MT", "TP_NT", "TP_UNROLL", "TP_STAGES",
        "TP_PRE", "TP_XK", "TP_KC", "TP_DEPTH")


def read_rows(paths):
    """(KxN, M) -> row, in file order; and the first header line's device."""
    rows, head = {}, None
    for p in paths:
        try:
            f = open(p)
        except OSError as e:
            sys.exit(f"skinny_table: cannot read {p}: {e.strerror}")
        with f:
            for line in f:
                h = HEAD.match(line)
                if h and not head:
                    head = h
                m = ROW.match(line)
                if m:
                    rows[(m[2], int(m[1]))] = dict(mib=float(m[3]), cub=float(m[4]), tun=float(m[5]),
                                                   ratio=float(m[6]), ceil=int(m[7]), m1=float(m[9]),
                                                   rel=float(m[10]), win=m[11].split())
    return rows, head


def short(win):
    kept = [p for p in win[1:] if p.split("=")[0] in KEEP and p not in ("TP_XK=0", "TP_PRE=1")]
    return " ".join(win[:1] + kept)


def main():
    ap = argparse.ArgumentParser(description="Join bench/decode_skinny.sh tables into the issue-7 table.")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--was", nargs="*", default=[], help="an earlier run's files, for its tuned us per row")
    ap.add_argument("--label", default="", help="what the table ran on (e.g. the build)")
    ap.add_argument("--was-label", default="earlier", help="the earlier run's name")
    a = ap.parse_args()
    now, head = read_rows(a.files)
    if not now:
        sys.exit("skinny_table: no table rows in " + " ".join(a.files))
    old, _ = read_rows(a.was) if a.was else ({}, None)
    gm = lambda logs: math.exp(sum(logs) / len(logs))
    dev = f"{head[2]}, read ceiling {head[3]} TB/s" if head else "device unknown"
    print(f"{head[1] if head else 'bf16'}: {dev}, cold weights, graph replay"
          + (f" ({a.label}" + (f"; 'was': {a.was_label})" if old else ")") if a.label else ""))
    print("  shape              MiB  cuBLAS us  tuned us  ratio  %ceil  M=1 us   /M=1" + ("   was us" if old else "")
          + "  winner")
    logs, by_m, m8 = [], {}, []
    for (shape, m), r in now.items():
        was = f" {old[(shape, m)]['tun']:8.2f}" if (shape, m) in old else (f" {'-':>8}" if old else "")
        print(f"  {f'{m}x{shape}':17}{r['mib']:5.1f} {r['cub']:10.2f} {r['tun']:9.2f} {r['ratio']:5.2f}x"
              f" {r['ceil']:5d}% {r['m1']:7.2f} {r['rel']:5.2f}x{was}  {short(r['win'])}")
        logs.append(math.log(r["ratio"]))
        by_m.setdefault(m, []).append(math.log(r["ratio"]))
        if m == 8:
            m8.append((r["rel"], f"{m}x{shape}"))
    print(f"  geometric mean {gm(logs):.2f}x over {len(logs)} ("
          + ", ".join(f"M={m} {gm(l):.2f}x" for m, l in sorted(by_m.items()))
          + f"); below 1.0x: {sum(1 for x in logs if x < 0)}")
    if m8:
        worst = max(m8)
        print(f"  M=8 vs M=1: worst {worst[0]:.2f}x ({worst[1]}), within 1.25x on"
              f" {sum(1 for rel, _ in m8 if rel <= 1.25)} of {len(m8)}")
    if old:
        both = [k for k in now if k in old]
        print(f"  tuned time below {a.was_label}'s on {sum(1 for k in both if now[k]['tun'] < old[k]['tun'])}"
              f" of {len(both)} rows")


if __name__ == "__main__":
    main()
