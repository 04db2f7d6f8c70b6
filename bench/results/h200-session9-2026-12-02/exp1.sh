#!/usr/bin/env bash
# exp1.sh — session 9, device call 1: the default spec at 1x and 8x2048x5120
# (the reference, one db), then prefetch_spec.lua (TP_PREFETCH, mma TP_CACHE=2)
# on the same and nearby shapes, each in its own db beside the first (one
# cubin cache). Usage on the device: bench/results/h200-session9-2026-12-02/exp1.sh BUILD
set -uo pipefail
b=${1:-build-gpu}/autotune
here=$(dirname "$0")
d=/tmp/s9; mkdir -p "$d"
out=${OUT:-/tmp/s9out}; mkdir -p "$out"
echo "== build $(cat "${1:-build-gpu}/source_commit.txt")"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
run() { # name, args...
  local name=$1; shift
  local t0=$(date +%s)
  timeout 240 "$b" --op gemv --quiet "$@" >"$out/$name.txt" 2>&1
  echo "== $name rc $? ($(( $(date +%s) - t0 )) s)"
  grep -E "^winner|^  1 |^  2 |^  3 |cublas  " "$out/$name.txt"
}
run ref_m1_5120 --shape 1x2048x5120 --db "$d/ref.db" --force --top 5
run ref_m8_5120 --shape 8x2048x5120 --db "$d/ref.db" --force --top 10
S=$here/prefetch_spec.lua
run exp_m8_5120 --shape 8x2048x5120 --spec "$S" --templates templates --db "$d/exp.db" --force --top 60
run exp_m1_5120 --shape 1x2048x5120 --spec "$S" --templates templates --db "$d/exp.db" --force --top 30
run exp_m4_5120 --shape 4x2048x5120 --spec "$S" --templates templates --db "$d/exp.db" --force --top 20
run exp_m2_5120 --shape 2x2048x5120 --spec "$S" --templates templates --db "$d/exp.db" --force --top 20
run exp_m8_8192 --shape 8x2048x8192 --spec "$S" --templates templates --db "$d/exp.db" --force --top 20
run exp_m8_6144 --shape 8x6144x2048 --spec "$S" --templates templates --db "$d/exp.db" --force --top 20
