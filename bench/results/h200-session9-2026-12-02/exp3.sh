#!/usr/bin/env bash
# exp3.sh — session 9, device call 3: the issue-7 table on the final spec
# (search/gemv.lua with TP_L2PF=1 on mma's 16-byte loads): 2048x5120 first
# (M = 1, 2, 4, 8, 16, one cache), its M=8 candidate list, then
# tests/test_gpu_skinny (every candidate correct on awkward shapes), then
# the other six Qwen3.5-2B shapes. Usage: exp3.sh BUILD
set -uo pipefail
bd=${1:-build-gpu}
out=${OUT:-/tmp/s9out}; mkdir -p "$out" /tmp/s9
echo "== build $(cat "$bd/source_commit.txt")"
t0=$(date +%s)
SHAPES=2048x5120 M1_FORCE=1 BENCH_OUT=/tmp/s9/sk timeout 150 bench/decode_skinny.sh "$bd/autotune" /tmp/s9/b.db >"$out/bench_5120.txt" 2>&1
echo "== bench 5120 rc $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^bf16:/,$p' "$out/bench_5120.txt"
timeout 30 "$bd/autotune" --op gemv --shape 8x2048x5120 --db /tmp/s9/b.db --force --top 30 --quiet >"$out/m8_5120_top.txt" 2>&1
grep -E "^  [1-5] |cublas  " "$out/m8_5120_top.txt"
timeout 200 "$bd/tests/test_gpu_skinny" >"$out/test_gpu_skinny.txt" 2>&1
echo "== test_gpu_skinny rc $? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|CHECK failed|passed, " "$out/test_gpu_skinny.txt"
SHAPES="2048x2048 2048x8192 2048x32 2048x12288 6144x2048 2048x248320" M1_FORCE=1 BENCH_OUT=/tmp/s9/sk \
  timeout $(( 560 - ($(date +%s) - t0) )) bench/decode_skinny.sh "$bd/autotune" /tmp/s9/b.db >"$out/bench_rest.txt" 2>&1
echo "== bench rest rc $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^bf16:/,$p' "$out/bench_rest.txt"
