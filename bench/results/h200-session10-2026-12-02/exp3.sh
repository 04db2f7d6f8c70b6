#!/usr/bin/env bash
# exp3.sh — session 10, device call 3: the other six Qwen3.5-2B shapes of
# the issue-7 table (M = 1, 2, 4, 8, 16 each, one cache), the build of
# exp2.sh. Usage: exp3.sh BUILD
set -uo pipefail
bd=${1:-build-gpu}
out=${OUT:-/tmp/s10out}; mkdir -p "$out" /tmp/s10
echo "== build $(cat "$bd/source_commit.txt")"
t0=$(date +%s)
SHAPES="2048x2048 2048x8192 2048x32 2048x12288 6144x2048 2048x248320" M1_FORCE=1 BENCH_OUT=/tmp/s10/sk \
  timeout 570 bench/decode_skinny.sh "$bd/autotune" /tmp/s10/b.db >"$out/bench_rest.txt" 2>&1
echo "== bench rest rc $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^bf16:/,$p' "$out/bench_rest.txt"
