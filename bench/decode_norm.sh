#!/usr/bin/env bash
# bench/decode_norm.sh — tunes the RMSNorm family on the decode shapes
# T in {1, 16, 128, 4096} x H in {2048, 4096, 8192} on the present GPU and
# prints, per op and shape: the unfused chain's µs, the naive fused kernel's,
# the tuned winner's, the winner against both, % of the measured read
# ceiling (bytes = inputs read once + outputs written once) and the winner.
# Graph replay, cold inputs; speed is reported, never asserted. Its H200
# output: bench/results/2026-12-01-ebfd2ad/bench_norm.txt.
# Usage: bench/decode_norm.sh [AUTOTUNE] [DB] [DTYPE...]
# Env: OPS (default: all four), TS, HS (the shape lists), BENCH_OUT (JSON folder).
set -uo pipefail
. "$(dirname "$0")/common.sh" # tune_one (BENCH_RESUME=1 keeps finished shapes)
bin=${1:-build/autotune}
db=${2:-/tmp/autotune-bench-norm.db}
shift $(( $# > 2 ? 2 : $# )) || true
dtypes=${*:-bf16}
ops=${OPS:-rmsnorm add_rmsnorm gemma_rmsnorm add_gemma_rmsnorm}
ts=${TS:-1 16 128 4096}
hs=${HS:-2048 4096 8192}
out=${BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), results in $out"
for dt in $dtypes; do
  for op in $ops; do
    for t in $ts; do
      for h in $hs; do
        s=${t}x${h}
        tune_one "$out/$dt-$op-$s.json" --op "$op" --shape "$s" --dtype "$dt" --db "$db" --force
        # one line as soon as each shape is done, so a run cut short still reports
        python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); w = d["winner"]; b = {x["strategy"]: x for x in d["baselines"]}
print("tuned %s %s %s: unfused %.2f us, naive %.2f us, tuned %.2f us (%s), %.0f s" % (sys.argv[2], sys.argv[3],
      sys.argv[4], b["unfused"]["us"], b["naive"]["us"], w["us"], w["strategy"], d["timing"]["total_s"]))' \
          "$out/$dt-$op-$s.json" "$dt" "$op" "$s" 2>/dev/null || echo "tuned $dt $op $s: exit $rc"
      done
    done
  done
done
python3 - "$out" "$ops" "$ts" "$hs" $dtypes <<'PY'
import json, math, sys, os
out, ops, ts, hs, dtypes = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5:]
for dt in dtypes:
    for op in ops:
        rows = []
        for t in ts:
            for h in hs:
                s = f"{t}x{h}"
                try:
                    d = json.load(open(os.path.join(out, f"{dt}-{op}-{s}.json")))
                except (OSError, ValueError) as e:
                    print(f"{dt} {op} {s}: no result ({e})"); continue
                if d.get("status", 1) != 0:
                    print(f"{dt} {op} {s}: failed: {d.get('error')}"); continue
                dev, w, tm = d["device"], d["winner"], d["timing"]
                b = {x["strategy"]: x for x in d["baselines"]}
                un, nv = b["unfused"]["us"], b["naive"]["us"]
                pct = 100 * tm["bytes"] / (w["us"] * 1e3) / dev["read_gbps"]
                npd = d.get("best_without_pdl") or {}
                rows.append((s, tm["bytes"] / 2**10, un, nv, w["us"], un / w["us"], nv / w["us"], pct,
                             npd.get("us", float("nan")), w["strategy"], w["params"]))
        if not rows:
            continue
        print(f"\n{dt} {op}: {dev['name']}, read ceiling {dev['read_gbps']/1e3:.2f} TB/s, cold inputs, graph replay")
        print(f"  {'shape':<11}{'KiB':>9}{'unfused':>9}{'naive':>8}{'tuned':>8}{'vs unf':>8}{'vs naive':>9}"
              f"{'%ceil':>7}{'no-PDL':>8}  winner")
        for s, kib, un, nv, tu, ru, rn, pc, npu, st, pa in rows:
            print(f"  {s:<11}{kib:>9.0f}{un:>9.2f}{nv:>8.2f}{tu:>8.2f}{ru:>7.2f}x{rn:>8.2f}x{pc:>6.0f}%{npu:>8.2f}  {st} {pa}")
        gm = lambda l: math.exp(sum(map(math.log, l)) / len(l))
        print(f"  geometric mean over {len(rows)} shapes: {gm([r[5] for r in rows]):.2f}x the unfused chain, "
              f"{gm([r[6] for r in rows]):.2f}x the naive fused kernel")
PY
