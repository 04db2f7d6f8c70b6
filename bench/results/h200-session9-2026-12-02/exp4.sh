#!/usr/bin/env bash
# exp4.sh — session 9, device call 4: 1x2048x5120 (default spec, the M=1
# reference) and ksplit_spec.lua at 8x2048x5120, exhaustive, one cache.
set -uo pipefail
bd=${1:-build-gpu}
out=${OUT:-/tmp/s9out}; mkdir -p "$out" /tmp/s9
echo "== build $(cat "$bd/source_commit.txt")"
"$bd/autotune" --op gemv --quiet --shape 1x2048x5120 --db /tmp/s9/k.db --force --top 5 >"$out/ref_m1_5120.txt" 2>&1
grep -E "^  [1-3] |cublas  " "$out/ref_m1_5120.txt"
timeout 300 "$bd/autotune" --op gemv --quiet --shape 8x2048x5120 --spec bench/results/h200-session9-2026-12-02/ksplit_spec.lua \
  --templates templates --db /tmp/s9/k.db --force --top 40 --effort exhaustive >"$out/ksplit_m8_5120_exh.txt" 2>&1
echo "== rc $?"; grep -E "^space|^  [0-9] |^  1[0-9] |cublas  |^winner" "$out/ksplit_m8_5120_exh.txt"
