#!/bin/bash
# bench/pf_experiment.sh — two template experiments on the GPU machine
# (DEVICE.md), from the repository root with build-gpu carried: TP_PF with
# gemv_add's early residual read (splitk, warp_row), and the mma templates'
# gemv_add epilogue reading every residual value before it stores any.
#   bash bench/pf_experiment.sh tune   # retune mode (4)'s M = 1 shapes and
#                                      # gemv_add at M = 1..16 into a copy of
#                                      # the shipped fused table, then the
#                                      # decode step, shipped table vs new
#   bash bench/pf_experiment.sh test   # every candidate of the changed templates
#                                      # against the fp64 reference (test_gpu)
# Results under $OUT (at most 8 files come back).
set -u
OUT=${OUT:-/tmp/pf_out}; mkdir -p "$OUT"
A=build-gpu/autotune
D=build-gpu/examples/decode/decode
DB=$PWD/exp.db
case "${1:-}" in
tune)
    rm -f "$DB" "$DB-wal" "$DB-shm"
    $A import cache/tables/qwen3.5-2b-h200-fused.json --db "$DB" > "$OUT/import.txt" 2>&1
    # the old M = 1 answers of the changed ops go: the runtime would pick
    # the faster of two rows for one shape
    python3 -c "
import sqlite3; c=sqlite3.connect('$DB')
n=c.execute(\"delete from winners where (shape like '1x%' and op in ('gemma_rmsnorm_gemv','gemma_rmsnorm_gemv_swiglu')) or op = 'gemv_add'\").rowcount
c.commit(); print('deleted', n)" >> "$OUT/import.txt" 2>&1
    T0=$(date +%s)
    for s in 1x2048x5120 1x2048x8192 1x2048x32 1x2048x248320; do
        $A --op gemma_rmsnorm_gemv --shape $s --db "$DB" --quiet >> "$OUT/tune.txt" 2>&1
    done
    $A --op gemma_rmsnorm_gemv_swiglu --shape 1x2048x6144 --db "$DB" --quiet >> "$OUT/tune.txt" 2>&1
    $A --op gemv_add --shape 1..16x2048x2048 --db "$DB" --quiet >> "$OUT/tune.txt" 2>&1
    $A --op gemv_add --shape 1..16x6144x2048 --db "$DB" --quiet >> "$OUT/tune.txt" 2>&1
    echo "tune seconds $(( $(date +%s) - T0 ))" >> "$OUT/tune.txt"
    $D --db cache/tables/qwen3.5-2b-h200-fused.json --batch 1,4,16 --ops > "$OUT/decode_old.txt" 2>&1
    $D --db "$DB" --batch 1,4,16 --ops > "$OUT/decode_new.txt" 2>&1
    $D --db "$DB" --batch 1 --no-ops --no-standins > "$OUT/decode_new_nostandins.txt" 2>&1
    python3 -c "
import sqlite3; c=sqlite3.connect('$DB'); c.execute('delete from trials'); c.commit(); c.execute('vacuum')"
    gzip -c "$DB" > "$OUT/exp.db.gz"
    grep -E "^winner|^  -  " "$OUT/tune.txt"
    for f in old new; do
        echo "== $f"; grep -E "^ +(1|4|16) +[0-9]" "$OUT/decode_$f.txt" | head -6
        grep -E "norm\+gemv|gemv\+add|sum without|stand-in\)" "$OUT/decode_$f.txt"
    done
    grep -E "^ +1 +[0-9]" "$OUT/decode_new_nostandins.txt" | head -1
    ;;
test)
    TT_ONLY="fused_every_candidate_correct gemv_add_every_candidate_correct gate_rejects_planted_bugs" \
        build-gpu/tests/test_gpu > "$OUT/test_gpu.txt" 2>&1
    echo "test_gpu rc=$?" >> "$OUT/test_gpu.txt"
    build-gpu/tests/test_atk_gpu > "$OUT/test_atk_gpu.txt" 2>&1
    echo "test_atk_gpu rc=$?" >> "$OUT/test_atk_gpu.txt"
    tail -3 "$OUT/test_gpu.txt" "$OUT/test_atk_gpu.txt"
    ;;
*)
    echo "usage: bash bench/pf_experiment.sh tune|test" >&2
    exit 2
    ;;
esac
