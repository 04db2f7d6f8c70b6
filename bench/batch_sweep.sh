#!/usr/bin/env bash
# bench/batch_sweep.sh — a model's decode kernels at every M (T) of a range
# through the runtime (atk), against its fallback (cuBLAS; the naive fused
# norm) in the same process: cold weights, graph replay, interleaved medians
# (`autotune validate`). Tunes the suite's buckets first unless --no-tune,
# validates (storing overrides where the runtime's choice lost), then
# measures the table as served and prints the M x shape table of ratios per
# op with its summary. A benchmark, not a test.
#
# usage: bench/batch_sweep.sh [--db FILE] [--out DIR] [--m LO..HI] [--suite FILE]
#                             [--only OPS] [--no-tune]
#   default suite search/models/qwen3.5-2b.lua, all its ops; M = 1..32
#   env AT_BIN (default build/autotune)
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${AT_BIN:-build/autotune}
db=${XDG_CACHE_HOME:-$HOME/.cache}/autotune/tune.db
out=bench/out
m=1..32
suite=search/models/qwen3.5-2b.lua
only=
tune=1
while [ $# -gt 0 ]; do
  case $1 in
    --db) db=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --m) m=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --no-tune) tune=0; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "batch_sweep.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out" || exit 1
if [ $tune = 1 ]; then
  "$bin" --suite "$suite" ${only:+--only "$only"} --db "$db" --quiet >"$out/suite.txt" 2>&1
  rc=$?
  tail -12 "$out/suite.txt"
  [ $rc = 0 ] || { echo "batch_sweep.sh: the suite failed (exit $rc); see $out/suite.txt" >&2; exit $rc; }
fi
ops=${only:-$(sed -n 's/.*tune("\([a-z_]*\)".*/\1/p' "$suite" | sort -u | tr '\n' ' ')}
for op in ${ops//,/ }; do
  "$bin" validate --db "$db" --op "$op" --m "$m" >"$out/validate-$op.txt"
  rc=$?
  tail -3 "$out/validate-$op.txt"
  [ $rc = 0 ] || { echo "batch_sweep.sh: validate --op $op failed (exit $rc)" >&2; exit $rc; }
  "$bin" validate --db "$db" --op "$op" --m "$m" --served --json >"$out/served-$op.json" || exit $?
  python3 bench/batch_table.py "$out/served-$op.json" | tee "$out/table-$op.md"
done
