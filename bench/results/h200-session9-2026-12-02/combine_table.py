#!/usr/bin/env python3
# combine_table.py — the issue-7 table at build 460ea68 from the two files of
# device call 3 (460ea68_bench_5120.txt: 2048x5120; 460ea68_bench_rest.txt:
# the other six shapes; one run, one cache), each shape against the session-8
# table at 2f843c9 (bench/results/h200-session8-2026-12-01). Prints the 28
# rows, the geometric means and the M=8 vs M=1 target. Usage: python3 combine_table.py
import math, os, re

here = os.path.dirname(os.path.abspath(__file__))
s8 = os.path.join(here, "..", "h200-session8-2026-12-01")
row_re = re.compile(r"\s+(\d+)x(\d+x\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x\s+(\d+)%\s+([\d.]+)x"
                    r"\s+([\d.]+)\s+([\d.]+)x\s+(.*)")


def rows_of(paths):
    rows = {}
    for p in paths:
        for line in open(p):
            m = row_re.match(line)
            if m:
                rows[(m[2], int(m[1]))] = dict(mib=float(m[3]), cub=float(m[4]), tun=float(m[5]), ratio=float(m[6]),
                                               ceil=int(m[7]), m1=float(m[9]), rel=float(m[10]), win=m[11].split())
    return rows


now = rows_of([os.path.join(here, f) for f in ("460ea68_bench_5120.txt", "460ea68_bench_rest.txt")])
old = rows_of([os.path.join(s8, f) for f in ("2f843c9_bench_5120.txt", "2f843c9_bench_rest.txt")])
keep = ("TP_WARPS", "TP_WPR", "TP_KSPLIT", "TP_ROWS", "TP_TOKENS", "TP_MT", "TP_NT", "TP_UNROLL", "TP_STAGES", "TP_XK")
shapes = ["2048x5120", "2048x2048", "2048x8192", "2048x32", "2048x12288", "6144x2048", "2048x248320"]
print("bf16: NVIDIA H200, read ceiling 4.56 TB/s, cold weights, graph replay (build 460ea68; 'was': 2f843c9)")
print("  shape              MiB  cuBLAS us  tuned us  ratio  %ceil  M=1 us   /M=1   was us  winner")
ratios, by_m, worst, within = [], {}, (0.0, ""), 0
for s in shapes:
    for M in (2, 4, 8, 16):
        r, o = now[(s, M)], old.get((s, M))
        w = " ".join(r["win"][:1] + [p for p in r["win"][1:] if p.split("=")[0] in keep and p != "TP_XK=0"])
        print(f"  {f'{M}x{s}':17}{r['mib']:5.1f} {r['cub']:10.2f} {r['tun']:9.2f} {r['ratio']:5.2f}x {r['ceil']:5d}%"
              f" {r['m1']:7.2f} {r['rel']:5.2f}x {o['tun'] if o else float('nan'):8.2f}  {w}")
        ratios.append(math.log(r["ratio"]))
        by_m.setdefault(M, []).append(math.log(r["ratio"]))
        if M == 8:
            worst = max(worst, (r["rel"], f"{M}x{s}"))
            within += r["rel"] <= 1.25
gm = lambda l: math.exp(sum(l) / len(l))
print(f"  geometric mean {gm(ratios):.2f}x over {len(ratios)} ("
      + ", ".join(f"M={m} {gm(l):.2f}x" for m, l in sorted(by_m.items()))
      + f"); below 1.0x: {sum(1 for x in ratios if x < 0)}")
print(f"  M=8 vs M=1: worst {worst[0]:.2f}x ({worst[1]}), within 1.25x on {within} of {len(shapes)}")
faster = sum(1 for k in now if k in old and now[k]["tun"] < old[k]["tun"])
print(f"  tuned time below 2f843c9's on {faster} of {len(now)} rows")
