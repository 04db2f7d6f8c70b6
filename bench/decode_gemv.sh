#!/usr/bin/env bash
# bench/decode_gemv.sh — tunes the Qwen3.5-2B decode GEMV shapes (M=1) on the
# present GPU and prints, per shape: cuBLAS µs, tuned µs, ratio, % of the
# measured read ceiling, and the best candidate without PDL; then geometric
# means. Speed is reported, never asserted.
# Usage: bench/decode_gemv.sh [AUTOTUNE] [DB] [DTYPE...]
# Env: SHAPES (default: the seven Qwen3.5-2B shapes), BENCH_OUT (JSON folder).
set -uo pipefail
. "$(dirname "$0")/common.sh" # tune_one, gemv_line (BENCH_RESUME=1 keeps finished shapes)
bin=${1:-build/autotune}
db=${2:-/tmp/autotune-bench.db}
shift $(( $# > 2 ? 2 : $# )) || true
dtypes=${*:-bf16 fp16}
shapes=${SHAPES:-1x2048x5120 1x2048x2048 1x2048x8192 1x2048x32 1x2048x12288 1x6144x2048 1x2048x248320}
out=${BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
for dt in $dtypes; do
  for s in $shapes; do
    tune_one "$out/$dt-$s.json" --op gemv --shape "$s" --dtype "$dt" --db "$db" --force
    gemv_line "$out/$dt-$s.json" "$dt" "$s"
  done
done
python3 - "$out" "$shapes" $dtypes <<'PY'
import json, math, sys, os
out, shapes, dtypes = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
for dt in dtypes:
    rows, logs, logs_np = [], [], []
    for s in shapes:
        try:
            d = json.load(open(os.path.join(out, f"{dt}-{s}.json")))
        except (OSError, ValueError) as e:
            print(f"{dt} {s}: no result ({e})"); continue
        if d.get("status", 1) != 0:
            print(f"{dt} {s}: failed: {d.get('error')}"); continue
        dev, w, b, t = d["device"], d["winner"], d["baseline"], d["timing"]
        ceil = dev["read_gbps"]
        pct = 100 * t["bytes"] / (w["us"] * 1e3) / ceil
        np_ = d.get("best_without_pdl") or {}
        np_ratio = max(1.0, np_.get("vs_baseline", 1.0))  # the winner rule: never below cuBLAS
        rows.append((s, t["bytes"] / 2**20, b["us"], w["us"], w["speedup"], pct, np_ratio, w["strategy"], w["params"]))
        logs.append(math.log(w["speedup"])); logs_np.append(math.log(np_ratio))
    if not rows:
        continue
    print(f"\n{dt}: {dev['name']}, read ceiling {ceil/1e3:.2f} TB/s, cold weights, graph replay")
    print(f"  {'shape':<15}{'MiB':>7}{'cuBLAS us':>11}{'tuned us':>10}{'ratio':>8}{'%ceil':>7}{'no-PDL':>8}  winner")
    for s, mib, bu, tu, r, pc, npr, st, pa in rows:
        print(f"  {s:<15}{mib:>7.1f}{bu:>11.2f}{tu:>10.2f}{r:>7.2f}x{pc:>6.0f}%{npr:>7.2f}x  {st} {pa}")
    gm = lambda l: math.exp(sum(l) / len(l))
    print(f"  geometric mean over {len(rows)} shapes: {gm(logs):.2f}x (without PDL: {gm(logs_np):.2f}x)")
PY
