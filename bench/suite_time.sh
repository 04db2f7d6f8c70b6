#!/usr/bin/env bash
# bench/suite_time.sh — the wall time of a whole-model suite on the present
# GPU: the Qwen3.5-2B M=1 GEMVs and its norms (the entries of
# search/models/qwen3.5-2b.lua at one token for the GEMVs, every T for the
# norms) from a cold cache (a fresh folder: no db, no compiled kernels), then
# the same command again on the warm cache. Prints both times and the
# suite's own summary table. Speed is reported, never asserted.
# Usage: bench/suite_time.sh [AUTOTUNE] [WORK_DIR] [DTYPE]
# Env: SUITE_FLAGS, more options for both runs (e.g. --no-compile-ahead).
set -uo pipefail
bin=${1:-build/autotune}
work=${2:-/tmp/autotune-suite-time}
dt=${3:-bf16}
rm -rf "$work"
mkdir -p "$work"
# the model's own suite file with its token counts cut to M=1: one list of
# shapes, search/models/qwen3.5-2b.lua's
model="$(dirname "$0")/../search/models/qwen3.5-2b.lua"
suite="$work/qwen3.5-2b-m1.lua"
sed -e 's/^local M = {[^}]*}/local M = {1}/' -e 's/name = "qwen3.5-2b"/name = "qwen3.5-2b-m1"/' "$model" >"$suite"
if ! grep -q '^local M = {1} ' "$suite" || ! grep -q 'name = "qwen3.5-2b-m1"' "$suite"; then
  echo "suite_time: $model no longer has the 'local M = {...}' and name lines this script rewrites" >&2
  exit 2
fi
flags=${SUITE_FLAGS:-}
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), suite $suite${flags:+, flags $flags}"
now() { date +%s.%N; }
t0=$(now)
# shellcheck disable=SC2086
"$bin" --suite "$suite" --dtype "$dt" --db "$work/tune.db" --quiet $flags >"$work/cold.txt" 2>&1
rc_cold=$?
t1=$(now)
# shellcheck disable=SC2086
"$bin" --suite "$suite" --dtype "$dt" --db "$work/tune.db" --quiet $flags >"$work/warm.txt" 2>&1
rc_warm=$?
t2=$(now)
cat "$work/cold.txt"
python3 -c 'import sys
t0, t1, t2 = map(float, sys.argv[1:4])
print("\nsuite qwen3.5-2b-m1 (%s%s): cold cache %.1f s (exit %s; target <= 180 s), warm rerun %.2f s (exit %s; target <= 2 s)"
      % (sys.argv[6], sys.argv[7] and ", " + sys.argv[7], t1 - t0, sys.argv[4], t2 - t1, sys.argv[5]))' \
  "$t0" "$t1" "$t2" "$rc_cold" "$rc_warm" "$dt" "$flags"
grep -E "from_cache|cache yes|entries" "$work/warm.txt" | tail -3
