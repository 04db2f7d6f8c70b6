#!/usr/bin/env bash
# bench/python_check.sh — the Python side on a GPU machine, in one call:
# installs python/ (no dependencies: the machine's torch), runs the gpu
# tests of the package and of examples/torch_decode, then the torch decode
# benchmark (eager, CUDA graphs, atk.patch + graphs) next to the C engine
# on the same stack and table, the host overhead per call, and a report of
# a cache tuned here. Full logs land in /tmp/autotune-python-check, packed
# into $OUT/python_check.tgz when $OUT is set (a lent machine brings back
# few files). Speed is reported, never asserted.
# Usage: bench/python_check.sh [BUILD_DIR] [STAGE...]
#   tests     pytest -m gpu python/tests, and examples/torch_decode's tests
#   decode    examples/torch_decode/decode.py and examples/decode/decode,
#             --batch $BATCH (default 1,2,4,8,16), the shipped table
#   overhead  decode.py --overhead: host µs per eager call
#   fused     decode.py --fused (mode (f): atk's fused calls from Python) and
#             the C engine's modes 1-4, both on the shipped fused table
#             ($FUSED_TABLE), --batch 1,4,16
#   report    tunes two shapes into a fresh cache, then python -m atk report
#   all       every stage, in that order
# Env: TABLE (default cache/tables/qwen3.5-2b-h200.json), BATCH, FUSED_TABLE
# (default cache/tables/qwen3.5-2b-h200-fused.json).
set -uo pipefail
build=${1:-build}
shift || true
stages=${*:-all}
[ "$stages" = all ] && stages="tests decode overhead fused report"
for stage in $stages; do
  case " tests decode overhead fused report " in
  *" $stage "*) ;;
  *) echo "python_check: unknown stage '$stage' (tests decode overhead fused report all)" >&2; exit 2 ;;
  esac
done
out=/tmp/autotune-python-check
table=${TABLE:-cache/tables/qwen3.5-2b-h200.json}
fused_table=${FUSED_TABLE:-cache/tables/qwen3.5-2b-h200-fused.json}
batch=${BATCH:-1,2,4,8,16}
mkdir -p "$out"
export ATK_LIB=$PWD/$build/kernels/libatk.so
python3 -m pip install -q --no-deps --no-build-isolation ./python >"$out/pip.txt" 2>&1 ||
  { echo "python_check: pip install ./python failed:"; tail -5 "$out/pip.txt"; exit 1; }
echo "== build $(cat "$build/source_commit.txt" 2>/dev/null || echo '?'); $(python3 -c 'import torch; print("torch", torch.__version__)')"
for stage in $stages; do
  t0=$(date +%s)
  case $stage in
  tests)
    python3 -m pytest -q -m gpu -p no:cacheprovider python/tests >"$out/pytest_gpu.txt" 2>&1
    echo "== pytest -m gpu python/tests: exit $? ($(($(date +%s) - t0)) s)"
    tail -3 "$out/pytest_gpu.txt"
    python3 -m pytest -q -p no:cacheprovider examples/torch_decode >"$out/pytest_torch_decode.txt" 2>&1
    echo "== pytest examples/torch_decode: exit $?"
    tail -3 "$out/pytest_torch_decode.txt"
    ;;
  decode)
    python3 examples/torch_decode/decode.py --db "$table" --batch "$batch" \
      --json "$out/torch_decode.json" >"$out/torch_decode.txt" 2>&1
    echo "== torch decode: exit $? ($(($(date +%s) - t0)) s)"
    cat "$out/torch_decode.txt" | tail -40
    "$build/examples/decode/decode" --db "$table" --batch "$batch" \
      --json "$out/c_decode.json" >"$out/c_decode.txt" 2>&1
    echo "== C engine decode: exit $?"
    tail -25 "$out/c_decode.txt"
    ;;
  overhead)
    python3 examples/torch_decode/decode.py --db "$table" --overhead \
      --json "$out/torch_overhead.json" >"$out/torch_overhead.txt" 2>&1
    echo "== overhead: exit $?"
    tail -15 "$out/torch_overhead.txt"
    ;;
  fused)
    python3 examples/torch_decode/decode.py --db "$fused_table" --batch 1,4,16 --fused \
      --json "$out/torch_fused.json" >"$out/torch_fused.txt" 2>&1
    echo "== torch decode --fused: exit $? ($(($(date +%s) - t0)) s)"
    tail -40 "$out/torch_fused.txt"
    "$build/examples/decode/decode" --db "$fused_table" --batch 1,4,16 \
      --json "$out/c_fused.json" >"$out/c_fused.txt" 2>&1
    echo "== C engine decode, modes 1-4: exit $?"
    tail -25 "$out/c_fused.txt"
    ;;
  report)
    db=/tmp/autotune-python-check.db
    rm -f "$db"
    for s in 1x2048x5120 4x2048x2048; do
      "$build/autotune" --op gemv --shape $s --db "$db" --quiet >/dev/null 2>&1 || echo "tune $s: exit $?"
    done
    "$build/autotune" --op add_gemma_rmsnorm --shape 1x2048 --db "$db" --quiet >/dev/null 2>&1 ||
      echo "tune add_gemma_rmsnorm: exit $?"
    python3 -m atk report --db "$db" -o "$out/report.html"
    echo "== report: exit $? ($(($(date +%s) - t0)) s), $(wc -c <"$out/report.html" 2>/dev/null || echo 0) bytes"
    ;;
  esac
done
[ -n "${OUT:-}" ] && tar czf "$OUT/python_check.tgz" -C "$out" .
