#!/usr/bin/env bash
# bench/batch_sweep.sh — the Qwen3.5-2B GEMVs at every M of a range through
# the runtime (atk), against cuBLAS in the same process: cold weights, graph
# replay, interleaved medians (`autotune validate`). Tunes the suite's
# buckets first unless --no-tune, validates (storing overrides where the
# runtime's choice lost), then measures the table as served and prints the
# M x shape table of ratios with its summary. A benchmark, not a test.
#
# usage: bench/batch_sweep.sh [--db FILE] [--out DIR] [--m LO..HI] [--no-tune]
#   env AT_BIN (default build/autotune)
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${AT_BIN:-build/autotune}
db=${XDG_CACHE_HOME:-$HOME/.cache}/autotune/tune.db
out=bench/out
m=1..32
tune=1
while [ $# -gt 0 ]; do
  case $1 in
    --db) db=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --m) m=$2; shift 2 ;;
    --no-tune) tune=0; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "batch_sweep.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out" || exit 1
if [ $tune = 1 ]; then
  "$bin" --suite search/models/qwen3.5-2b.lua --only gemv --db "$db" --quiet >"$out/suite.txt" 2>&1
  rc=$?
  tail -12 "$out/suite.txt"
  [ $rc = 0 ] || { echo "batch_sweep.sh: the suite failed (exit $rc); see $out/suite.txt" >&2; exit $rc; }
fi
"$bin" validate --db "$db" --op gemv --m "$m" >"$out/validate.txt"
rc=$?
tail -3 "$out/validate.txt"
[ $rc = 0 ] || { echo "batch_sweep.sh: validate failed (exit $rc)" >&2; exit $rc; }
"$bin" validate --db "$db" --op gemv --m "$m" --served --json >"$out/served.json" || exit $?
python3 bench/batch_table.py "$out/served.json" | tee "$out/table.md"
