#!/usr/bin/env python3
"""bench/batch_table.py — the table of `autotune validate --json`: one row per
M, one column per shape (K x N), each cell the fallback's time over the
runtime's (cuBLAS for gemv, the naive fused norm for the norms) (>1: the runtime is faster), then a summary line per range: the
smallest cell, the geometric mean, cells below 0.97x, and the paths taken.

usage: batch_table.py VALIDATE.json
"""
import json
import math
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    doc = json.load(open(sys.argv[1]))
    cells = doc["cells"]
    shapes, rows = [], {}
    for c in cells:
        dims = c["shape"].split("x")
        m, kn = int(dims[0]), "x".join(dims[1:])  # MxKxN -> KxN; TxH -> H
        if kn not in shapes:
            shapes.append(kn)
        rows.setdefault(m, {})[kn] = c
    op = cells[0]["op"] if cells else "?"
    print("%s on %s, %s: fallback us / runtime us per call (cold weights, graph replay); "
          "path: t tuned, b bucket, i inferred, f fallback" % (op, doc["device"], "as served" if doc.get("served") else "as tuned"))
    print()
    print("| %s | " % ("M" if op == "gemv" else "T") + " | ".join(shapes) + " |")
    print("|---|" + "---|" * len(shapes))
    for m in sorted(rows):
        out = []
        for kn in shapes:
            c = rows[m].get(kn)
            out.append("" if c is None else "%.2fx %s" % (c["ratio"], c["path"][0]))
        print("| %d | %s |" % (m, " | ".join(out)))
    print()
    for lo, hi in ((1, 16), (1, max(rows))):
        r = [c["ratio"] for m in rows if lo <= m <= hi for c in rows[m].values() if c["ratio"] > 0]
        if not r:
            continue
        paths = {}
        for m in rows:
            if lo <= m <= hi:
                for c in rows[m].values():
                    paths[c["path"]] = paths.get(c["path"], 0) + 1
        gm = math.exp(sum(math.log(x) for x in r) / len(r))
        print("M = %d..%d: %d cells, min %.2fx, geomean %.2fx, %d below 0.97x; %s"
              % (lo, hi, len(r), min(r), gm, sum(1 for x in r if x < 0.97),
                 ", ".join("%s %d" % kv for kv in sorted(paths.items()))))


if __name__ == "__main__":
    main()
