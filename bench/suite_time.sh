#!/usr/bin/env bash
# bench/suite_time.sh — the wall time of a whole-model suite on the present
# GPU: the Qwen3.5-2B M=1 GEMVs and its norms (the entries of
# search/models/qwen3.5-2b.lua at one token for the GEMVs, every T for the
# norms) from a cold cache (a fresh folder: no db, no compiled kernels), then
# the same command again on the warm cache. Prints both times and the
# suite's own summary table. Speed is reported, never asserted.
# Usage: bench/suite_time.sh [AUTOTUNE] [WORK_DIR] [DTYPE]
set -uo pipefail
bin=${1:-build/autotune}
work=${2:-/tmp/autotune-suite-time}
dt=${3:-bf16}
rm -rf "$work"
mkdir -p "$work"
suite="$work/qwen3.5-2b-m1.lua"
cat >"$suite" <<'LUA'
-- the M=1 decode GEMVs and the norms of search/models/qwen3.5-2b.lua
local T = {1, 2, 4, 8, 16, 128, 512, 4096}
local function each_t(h)
  local t = {}
  for i, rows in ipairs(T) do t[i] = rows .. "x" .. h end
  return t
end
return {
  name = "qwen3.5-2b-m1",
  entries = {
    tune("gemv", {"1x2048x5120", "1x2048x2048", "1x2048x8192", "1x2048x32",
                  "1x2048x12288", "1x6144x2048", "1x2048x248320"}, "M=1 decode GEMVs"),
    tune("gemma_rmsnorm", each_t(2048), "input norm of layer 0, final norm"),
    tune("add_gemma_rmsnorm", each_t(2048), "residual add + norm"),
  },
}
LUA
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), suite $suite"
now() { date +%s.%N; }
t0=$(now)
"$bin" --suite "$suite" --dtype "$dt" --db "$work/tune.db" --quiet >"$work/cold.txt" 2>&1
rc_cold=$?
t1=$(now)
"$bin" --suite "$suite" --dtype "$dt" --db "$work/tune.db" --quiet >"$work/warm.txt" 2>&1
rc_warm=$?
t2=$(now)
cat "$work/cold.txt"
python3 -c 'import sys
t0, t1, t2 = map(float, sys.argv[1:4])
print("\nsuite qwen3.5-2b-m1 (%s): cold cache %.1f s (exit %s; target <= 180 s), warm rerun %.2f s (exit %s; target <= 2 s)"
      % (sys.argv[6], t1 - t0, sys.argv[4], t2 - t1, sys.argv[5]))' "$t0" "$t1" "$t2" "$rc_cold" "$rc_warm" "$dt"
grep -E "from_cache|cache yes|entries" "$work/warm.txt" | tail -3
