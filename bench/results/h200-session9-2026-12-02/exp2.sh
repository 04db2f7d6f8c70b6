#!/usr/bin/env bash
# exp2.sh — session 9, device call 2: the default spec at 1x2048x5120
# (halving, the M=1 reference) and at 8x2048x5120 with --effort exhaustive
# (every candidate at full replays: does the screening hide a faster one?),
# then wide_spec.lua (the opened mma space, TP_L2PF) exhaustive at 8x and 1x.
# Usage on the device: bench/results/h200-session9-2026-12-02/exp2.sh BUILD
set -uo pipefail
b=${1:-build-gpu}/autotune
here=$(dirname "$0")
d=/tmp/s9; mkdir -p "$d"
out=${OUT:-/tmp/s9out}; mkdir -p "$out"
echo "== build $(cat "${1:-build-gpu}/source_commit.txt")"
run() { # name, args...
  local name=$1; shift
  local t0=$(date +%s)
  timeout 300 "$b" --op gemv --quiet "$@" >"$out/$name.txt" 2>&1
  echo "== $name rc $? ($(( $(date +%s) - t0 )) s)"
  grep -E "^winner|^  [1-5] |cublas  |^space|best without" "$out/$name.txt"
}
run ref_m1_5120 --shape 1x2048x5120 --db "$d/ref.db" --force --top 5
run ref_m8_5120_exh --shape 8x2048x5120 --db "$d/ref.db" --force --top 30 --effort exhaustive
S=$here/wide_spec.lua
run wide_m8_5120_exh --shape 8x2048x5120 --spec "$S" --templates templates --db "$d/wide.db" --force --top 60 --effort exhaustive
run wide_m1_5120_exh --shape 1x2048x5120 --spec "$S" --templates templates --db "$d/wide.db" --force --top 30 --effort exhaustive
