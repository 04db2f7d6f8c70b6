#!/usr/bin/env bash
# exp2.sh — session 10, device call 2: the issue-7 table's first shape on
# the live spec (search/gemv.lua with TP_PRE on mma): 2048x5120 at M = 1, 2,
# 4, 8, 16 in one cache, its M=8 candidate list, then tests/test_gpu_skinny
# (every candidate correct on awkward shapes). Usage: exp2.sh BUILD
set -uo pipefail
bd=${1:-build-gpu}
out=${OUT:-/tmp/s10out}; mkdir -p "$out" /tmp/s10
echo "== build $(cat "$bd/source_commit.txt")"
t0=$(date +%s)
SHAPES=2048x5120 M1_FORCE=1 BENCH_OUT=/tmp/s10/sk timeout 170 bench/decode_skinny.sh "$bd/autotune" /tmp/s10/b.db >"$out/bench_5120.txt" 2>&1
echo "== bench 5120 rc $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^bf16:/,$p' "$out/bench_5120.txt"
timeout 30 "$bd/autotune" --op gemv --shape 8x2048x5120 --db /tmp/s10/b.db --force --top 30 --quiet >"$out/m8_5120_top.txt" 2>&1
grep -E "^  [1-5] |cublas  " "$out/m8_5120_top.txt"
timeout 330 "$bd/tests/test_gpu_skinny" >"$out/test_gpu_skinny.txt" 2>&1
echo "== test_gpu_skinny rc $? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|CHECK failed|passed, |correct of" "$out/test_gpu_skinny.txt"
