#!/usr/bin/env bash
# exp4.sh — session 10, device call 4: the issue-7 table again on the final
# spec (eb9d267's, with TP_PRE=2 TP_PDL=0 pruned as pre_needs_pdl): the
# seven Qwen3.5-2B shapes at M = 1, 2, 4, 8, 16, one cache, 2048x5120 first.
# Usage: exp4.sh BUILD
set -uo pipefail
bd=${1:-build-gpu}
out=${OUT:-/tmp/s10out}; mkdir -p "$out" /tmp/s10
echo "== build $(cat "$bd/source_commit.txt")"
t0=$(date +%s)
SHAPES=2048x5120 M1_FORCE=1 BENCH_OUT=/tmp/s10/sk4 timeout 150 bench/decode_skinny.sh "$bd/autotune" /tmp/s10/b4.db >"$out/bench_5120.txt" 2>&1
echo "== bench 5120 rc $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^bf16:/,$p' "$out/bench_5120.txt"
SHAPES="2048x2048 2048x8192 2048x32 2048x12288 6144x2048 2048x248320" M1_FORCE=1 BENCH_OUT=/tmp/s10/sk4 \
  timeout $(( 585 - ($(date +%s) - t0) )) bench/decode_skinny.sh "$bd/autotune" /tmp/s10/b4.db >"$out/bench_rest.txt" 2>&1
echo "== bench rest rc $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^bf16:/,$p' "$out/bench_rest.txt"
