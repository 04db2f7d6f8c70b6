#!/usr/bin/env bash
# bench/table_experiment.sh — a change to the kernel templates measured where
# it counts, in calls that fit a lent GPU machine (DEVICE.md: 600 s a call).
# The shipped fused table is copied into $EXP_DB once; the entries listed in
# ENTRIES are retuned there under this tree's templates (each retune replaces
# the stale row of its shape, so the runtime serves the new answer); then the
# decode engine runs on the shipped table and on the copy, in the same call.
#   tune     retunes entry after entry until all are done or BUDGET seconds
#            are spent; the tuner is stopped with SIGINT, which keeps every
#            measured candidate, and a rerun goes on where it stopped (a
#            finished entry answers from the cache). Prints what is left.
#            Packs $EXP_DB into $OUT/exp.db.gz, for a next call on a fresh
#            machine: gunzip it to $EXP_DB first.
#   decode   examples/decode (modes 1-4, --ops) at B = $BATCH on the shipped
#            table and on $EXP_DB, and torch_decode --fused on $EXP_DB
#   test     test_gpu's every-candidate and planted-bug tests, test_atk_gpu
# Usage: bench/table_experiment.sh BUILD_DIR tune|decode|test
# Env: EXP_DB (default ./exp.db), BASE (default the shipped fused table),
#      ENTRIES ("op shape" per line; default: the fused ops at M = 1 and
#      gemv_add at M = 1..16, what mode 4 calls at B = 1), BUDGET (seconds,
#      default 480), BATCH (default 1,4,16), OUT (default /tmp/table-experiment),
#      TUNE_ARGS (more autotune options for the tune stage, e.g. "--top 40").
# Speed is reported, never asserted; the full logs land in $OUT.
set -uo pipefail
build=${1:-}
stage=${2:-}
if [ -z "$build" ] || [ ! -x "$build/autotune" ]; then
  echo "table_experiment: no $build/autotune (usage: bench/table_experiment.sh BUILD_DIR tune|decode|test)" >&2
  exit 2
fi
case "$stage" in
tune | decode | test) ;;
*) echo "table_experiment: unknown stage '$stage' (tune, decode, test)" >&2; exit 2 ;;
esac
out=${OUT:-/tmp/table-experiment}
db=${EXP_DB:-$PWD/exp.db}
base=${BASE:-cache/tables/qwen3.5-2b-h200-fused.json}
budget=${BUDGET:-480}
batch=${BATCH:-1,4,16}
read -r -a tune_args <<<"${TUNE_ARGS:-}"
entries=${ENTRIES:-"gemma_rmsnorm_gemv 1x2048x5120
gemma_rmsnorm_gemv 1x2048x8192
gemma_rmsnorm_gemv 1x2048x32
gemma_rmsnorm_gemv 1x2048x248320
gemma_rmsnorm_gemv_swiglu 1x2048x6144
gemv_add 1..16x2048x2048
gemv_add 1..16x6144x2048"}
mkdir -p "$out"
echo "== build $(cat "$build/source_commit.txt" 2>/dev/null || echo '?'), tree $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $stage"

case $stage in
tune)
  if [ ! -f "$db" ]; then
    "$build/autotune" import "$base" --db "$db" >>"$out/tune.txt" 2>&1 ||
      { echo "table_experiment: import of $base failed:"; tail -3 "$out/tune.txt"; exit 1; }
    echo "== $db: a copy of $base"
  fi
  t0=$(date +%s)
  left=0
  while read -r op shape; do
    [ -n "$op" ] || continue
    spent=$(($(date +%s) - t0))
    if [ "$left" -gt 0 ] || [ "$spent" -ge "$budget" ]; then
      echo "left: $op $shape"
      left=$((left + 1))
      continue
    fi
    echo "== $op $shape ($spent s spent)" >>"$out/tune.txt"
    timeout -s INT -k 30 $((budget - spent)) "$build/autotune" --op "$op" --shape "$shape" --db "$db" --quiet \
      "${tune_args[@]}" >>"$out/tune.txt" 2>&1
    rc=$?
    if [ "$rc" = 0 ]; then
      echo "done: $op $shape ($(($(date +%s) - t0)) s spent)"
    else
      echo "stopped: $op $shape (exit $rc; a rerun goes on from what it stored)"
      left=1
      [ "$rc" = 4 ] && { echo "table_experiment: no GPU here"; exit 1; }
    fi
  done <<<"$entries"
  "$build/autotune" prune --db "$db" | tail -1
  python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("PRAGMA wal_checkpoint(TRUNCATE)")' "$db"
  gzip -c "$db" >"$out/exp.db.gz"
  echo "== $left entries left; $db packed into $out/exp.db.gz ($(wc -c <"$out/exp.db.gz") bytes)"
  grep -E "^winner" "$out/tune.txt" | tail -20
  ;;
decode)
  [ -f "$db" ] || { echo "table_experiment: no $db: run the tune stage first" >&2; exit 2; }
  for which in base exp; do
    t=$base
    [ "$which" = exp ] && t=$db
    "$build/examples/decode/decode" --db "$t" --batch "$batch" --ops >"$out/decode_$which.txt" 2>&1
    echo "== decode on the $which table ($t): exit $?"
    grep -E "^ +[0-9]+ +[0-9]" "$out/decode_$which.txt" | head -8
    grep -E "loaded|hidden state: \(4\)|norm\+gemv|gemv\+add|sum without|stand-in\)" "$out/decode_$which.txt" |
      head -16
  done
  ATK_LIB=$PWD/$build/kernels/libatk.so PYTHONPATH=$PWD/python python3 examples/torch_decode/decode.py \
    --db "$db" --batch "$batch" --fused >"$out/torch_exp.txt" 2>&1
  echo "== torch_decode --fused on the exp table: exit $?"
  tail -25 "$out/torch_exp.txt"
  ;;
test)
  TT_ONLY="fused_every_candidate_correct gemv_add_every_candidate_correct gate_rejects_planted_bugs" \
    "$build/tests/test_gpu" >"$out/test_gpu.txt" 2>&1
  echo "== test_gpu (candidates): exit $?"
  grep -E "FAIL|CHECK failed|passed, " "$out/test_gpu.txt"
  "$build/tests/test_atk_gpu" >"$out/test_atk_gpu.txt" 2>&1
  echo "== test_atk_gpu: exit $?"
  grep -E "FAIL|CHECK failed|passed, " "$out/test_atk_gpu.txt"
  ;;
esac
