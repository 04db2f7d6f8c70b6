#!/usr/bin/env bash
# exp1.sh — session 10, device call 1: the default spec at 1x2048x5120 (the
# M=1 reference), then pre_spec.lua (TP_TRIG on every GEMV strategy,
# TP_PRE on mma) exhaustive at 8x and 1x2048x5120, one cache per spec.
# Usage on the device: bench/results/h200-session10-2026-12-02/exp1.sh BUILD
set -uo pipefail
bd=${1:-build-gpu}
here=$(dirname "$0")
out=${OUT:-/tmp/s10out}; mkdir -p "$out" /tmp/s10
echo "== build $(cat "$bd/source_commit.txt")"
run() { # name, args...
  local name=$1; shift
  local t0=$(date +%s)
  timeout 280 "$bd/autotune" --op gemv --quiet "$@" >"$out/$name.txt" 2>&1
  echo "== $name rc $? ($(( $(date +%s) - t0 )) s)"
  grep -E "^winner|^  [1-9] |^  1[0-5] |cublas  |^space|best without" "$out/$name.txt"
}
run ref_m1_5120 --shape 1x2048x5120 --db /tmp/s10/ref.db --force --top 5
S=$here/pre_spec.lua
run pre_m8_5120_exh --shape 8x2048x5120 --spec "$S" --templates templates --db /tmp/s10/pre.db --force --top 60 --effort exhaustive
run pre_m1_5120_exh --shape 1x2048x5120 --spec "$S" --templates templates --db /tmp/s10/pre.db --force --top 40 --effort exhaustive
