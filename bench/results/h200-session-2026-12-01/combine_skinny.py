#!/usr/bin/env python3
# combine_skinny.py — the M = 2..16 table of the README from two device runs
# in this folder: 5703e8b_bench_skinny.txt (all 28 shapes), with the rows of
# 95e7692_bench_skinny_n32.txt (2048x32 at M = 4, 8, 16, the only rows whose
# space 95e7692 changed) in their place; winners cut to the parameters that
# vary. Usage: python3 combine_skinny.py  (prints the table)
import math, os, re

here = os.path.dirname(os.path.abspath(__file__))
row_re = re.compile(r"\s+(\d+)x(\d+x\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x\s+(\d+)%\s+([\d.]+)x"
                    r"\s+([\d.]+)\s+([\d.]+)x\s+(.*)")
rows = {}
for name, build in (("5703e8b_bench_skinny.txt", "5703e8b"), ("95e7692_bench_skinny_n32.txt", "95e7692")):
    for line in open(os.path.join(here, name)):
        m = row_re.match(line)
        if m:
            rows[(m[2], int(m[1]))] = dict(mib=float(m[3]), cub=float(m[4]), tun=float(m[5]), ratio=float(m[6]),
                                           ceil=int(m[7]), m1=float(m[9]), rel=float(m[10]), win=m[11].split(),
                                           build=build)
keep = ("TP_WARPS", "TP_WPR", "TP_KSPLIT", "TP_ROWS", "TP_TOKENS", "TP_MT", "TP_NT", "TP_UNROLL", "TP_STAGES")
shapes = ["2048x5120", "2048x2048", "2048x8192", "2048x32", "2048x12288", "6144x2048", "2048x248320"]
print("bf16: NVIDIA H200, read ceiling 4.66-4.67 TB/s (two runs), cold weights, graph replay")
print("  shape             MiB  cuBLAS us  tuned us  ratio  %ceil  M=1 us   /M=1  build    winner")
ratios, worst, within = [], 0.0, 0
for s in shapes:
    for M in (2, 4, 8, 16):
        r = rows[(s, M)]
        w = " ".join(r["win"][:1] + [p for p in r["win"][1:] if p.split("=")[0] in keep])
        print(f"  {f'{M}x{s}':16} {r['mib']:5.1f} {r['cub']:10.2f} {r['tun']:9.2f} {r['ratio']:5.2f}x {r['ceil']:5d}%"
              f" {r['m1']:7.2f} {r['rel']:5.2f}x  {r['build']}  {w}")
        ratios.append(r["ratio"])
        if M == 8:
            worst = max(worst, r["rel"])
            within += r["rel"] <= 1.25
g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
print(f"  all: geometric mean {g:.2f}x over {len(ratios)} (target >= 1.2x); below 1.0x: {sum(x < 1.0 for x in ratios)}")
print(f"  M=8 vs M=1 tuned time: worst {worst:.2f}x (target <= 1.25x), within target {within} of 7")
