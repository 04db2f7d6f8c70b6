#!/usr/bin/env bash
# bench/decode_gemv.sh — tunes the Qwen3.5-2B decode GEMV shapes (M=1) on the
# present GPU and prints, per shape: cuBLAS µs, tuned µs, ratio, % of the
# measured read ceiling; then the geometric mean. Speed is reported, never
# asserted. Usage: bench/decode_gemv.sh [AUTOTUNE] [DB] [DTYPE...]
set -euo pipefail
bin=${1:-build/autotune}
db=${2:-/tmp/autotune-bench.db}
shift $(( $# > 2 ? 2 : $# )) || true
dtypes=${*:-bf16 fp16}
shapes="1x2048x5120 1x2048x2048 1x2048x8192 1x2048x32 1x2048x12288 1x6144x2048 1x2048x248320"
out=$(mktemp -d)
for dt in $dtypes; do
  for s in $shapes; do
    "$bin" --op gemv --shape "$s" --dtype "$dt" --db "$db" --force --json --quiet >"$out/$dt-$s.json" || true
  done
done
python3 - "$out" $dtypes <<'PY'
import json, math, sys, glob, os
out, dtypes = sys.argv[1], sys.argv[2:]
shapes = "1x2048x5120 1x2048x2048 1x2048x8192 1x2048x32 1x2048x12288 1x6144x2048 1x2048x248320".split()
for dt in dtypes:
    rows, logs = [], []
    for s in shapes:
        try:
            d = json.load(open(os.path.join(out, f"{dt}-{s}.json")))
        except (OSError, ValueError) as e:
            print(f"{dt} {s}: no result ({e})"); continue
        if d.get("status", 1) != 0:
            print(f"{dt} {s}: failed: {d.get('error')}"); continue
        dev, w, b, t = d["device"], d["winner"], d["baseline"], d["timing"]
        ceil = dev["read_gbps"]
        gbps = t["bytes"] / (w["us"] * 1e3)
        rows.append((s, b["us"], w["us"], w["speedup"], 100 * gbps / ceil, t["bytes"] / 2**20, w["strategy"], w["params"]))
        logs.append(math.log(w["speedup"]))
    if not rows:
        continue
    print(f"\n{dt}: {dev['name']}, read ceiling {ceil/1e3:.2f} TB/s, cold weights, graph replay")
    print(f"  {'shape':<15}{'MiB':>7}{'cuBLAS us':>11}{'tuned us':>10}{'ratio':>8}{'%ceil':>7}  winner")
    for s, bu, tu, r, pc, mib, st, pa in rows:
        print(f"  {s:<15}{mib:>7.1f}{bu:>11.2f}{tu:>10.2f}{r:>7.2f}x{pc:>6.0f}%  {st} {pa}")
    if logs:
        print(f"  geometric mean speedup {math.exp(sum(logs)/len(logs)):.2f}x over {len(logs)} shapes")
PY
