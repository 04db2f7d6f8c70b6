#!/usr/bin/env bash
# bench/gpu_check.sh — everything that needs the GPU, in one go (as run on the
# lent H200): the gpu-labelled tests, one tune shown in full, then the decode
# benchmark. Usage: bench/gpu_check.sh [BUILD_DIR] [DTYPES...]
set -uo pipefail
build=${1:-build}
shift || true
dtypes=${*:-bf16 fp16}
out=${OUT:-/tmp/autotune-gpu-check}
mkdir -p "$out"
echo "== commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
echo "== gpu tests"
"$build/tests/test_gpu" >"$out/test_gpu.txt" 2>&1
echo "test_gpu exit $?"
grep -E "FAIL|CHECK|wrong|crashed|correct of|passed" "$out/test_gpu.txt"
echo "== one tune, in full"
"$build/autotune" --op gemv --shape 1x2048x8192 --db "$out/check.db" --force --quiet --top 8 2>&1 | tee "$out/gemv_1x2048x8192.txt"
echo "== decode benchmark"
bench/decode_gemv.sh "$build/autotune" "$out/bench.db" $dtypes 2>&1 | tee "$out/bench.txt"
