#!/bin/bash
# the TP_PF experiment: retune mode (4)'s M = 1 shapes, then decode old table vs new
DB=$PWD/exp.db; rm -f $DB $DB-wal $DB-shm
A=build-gpu/autotune
$A import cache/tables/qwen3.5-2b-h200-fused.json --db $DB > $OUT/import.txt 2>&1
python3 -c "
import sqlite3; c=sqlite3.connect('$DB')
n=c.execute(\"delete from winners where shape like '1x%' and op in ('gemma_rmsnorm_gemv','gemma_rmsnorm_gemv_swiglu','gemv_add')\").rowcount
c.commit(); print('deleted', n)" >> $OUT/import.txt 2>&1
T0=$(date +%s)
for s in 1x2048x5120 1x2048x8192 1x2048x32 1x2048x248320; do
  $A --op gemma_rmsnorm_gemv --shape $s --db $DB --quiet >> $OUT/tune.txt 2>&1
done
$A --op gemma_rmsnorm_gemv_swiglu --shape 1x2048x6144 --db $DB --quiet >> $OUT/tune.txt 2>&1
$A --op gemv_add --shape 1x2048x2048 --db $DB --quiet >> $OUT/tune.txt 2>&1
$A --op gemv_add --shape 1x6144x2048 --db $DB --quiet >> $OUT/tune.txt 2>&1
echo "tune seconds $(( $(date +%s) - T0 ))" >> $OUT/tune.txt
D=build-gpu/examples/decode/decode
$D --db cache/tables/qwen3.5-2b-h200-fused.json --batch 1 --ops > $OUT/decode_old.txt 2>&1
$D --db $DB --batch 1 --ops > $OUT/decode_new.txt 2>&1
$D --db $DB --batch 1 --no-ops --no-standins > $OUT/decode_new_nostandins.txt 2>&1
python3 -c "
import sqlite3; c=sqlite3.connect('$DB'); c.execute('delete from trials'); c.commit(); c.execute('vacuum')"
gzip -c $DB > $OUT/exp.db.gz
grep -E "^winner|^  -  |^  1 " $OUT/tune.txt
for f in old new; do echo "== $f"; grep -A2 "us/step" $OUT/decode_$f.txt | tail -1; grep -E "^ +1 +[0-9]" $OUT/decode_$f.txt | tail -1; grep -E "norm\+gemv|gemv\+add|sum without|stand-in\)" $OUT/decode_$f.txt; done
grep -A2 "us/step" $OUT/decode_new_nostandins.txt | tail -1
