#!/usr/bin/env bash
# bench/atk_check.sh — the runtime library (atk) and the decode engine on a
# GPU, in one go, from the source root: test_atk (cpu), test_atk_gpu, the
# decode example with no tuned table (every atk call on fallback), then with
# a tuned cache when one exists (bench/gpu_check.sh leaves one in
# /tmp/autotune-gpu-check/bench.db). Nothing here is asserted on speed.
# Usage: bench/atk_check.sh [BUILD_DIR] [DB]
set -uo pipefail
build=${1:-build}
db=${2:-/tmp/autotune-gpu-check/bench.db}
out=${OUT:-/tmp/autotune-atk-check}
mkdir -p "$out"
echo "== commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "== test_atk (cpu)"
"$build/tests/test_atk" >"$out/test_atk.txt" 2>&1
echo "test_atk exit $?"
grep -E "FAIL|passed" "$out/test_atk.txt"
echo "== test_atk_gpu"
"$build/tests/test_atk_gpu" >"$out/test_atk_gpu.txt" 2>&1
echo "test_atk_gpu exit $?"
grep -E "FAIL|CHECK|crashed|rel err|passed|cuda:|cublas:|nvrtc:|atk" "$out/test_atk_gpu.txt"
echo "== decode, no tuned table (atk falls back: cuBLAS + its naive norm)"
rm -f "$out/none.db"
"$build/examples/decode/decode" --db "$out/none.db" --steps 20 >"$out/decode_fallback.txt" 2>&1
echo "decode exit $?"
cat "$out/decode_fallback.txt"
if [ -f "$db" ]; then
  echo "== decode with $db"
  "$build/examples/decode/decode" --db "$db" --steps 100 >"$out/decode.txt" 2>&1
  echo "decode exit $?"
  cat "$out/decode.txt"
else
  echo "== no $db: tune first (bench/decode_gemv.sh $build/autotune $db bf16), then rerun"
fi
