#!/usr/bin/env bash
# bench/gpu_check.sh — everything that needs the GPU, by stage, for a lent
# machine whose minutes are few: run `tests` first (every gpu-labelled test
# executable, each in full to $OUT), then the benchmarks in as many calls as
# the time allows. Each stage prints a short summary; the full logs land in
# $OUT (or /tmp/autotune-gpu-check). Speed is reported, never asserted.
# Usage: bench/gpu_check.sh [BUILD_DIR] [STAGE...]
#   tests   every build/tests/test_*gpu* executable (GEMV + norm correctness,
#           skinny M>1, faulting candidates, atk, suites); ~5-8 min on an H200
#   gemv    bench/decode_gemv.sh, M=1, bf16 (7 shapes)
#   norm    bench/decode_norm.sh, bf16 (4 ops x 12 shapes)
#   skinny  bench/decode_skinny.sh, M in {2,4,8,16}, bf16 (reuses gemv's M=1)
#   engine  bench/atk_check.sh (atk tests + the decode engine on the gemv db;
#           tunes the GEMVs and the engine's norm first on a fresh machine)
#   strategies  bench/strategies.sh: halving, random, anneal vs exhaustive, M=1
#   suite   bench/suite_time.sh: the Qwen3.5-2B M=1 suite cold, then warm
#   all     every stage above, in that order
# Env: DTYPES (gemv and skinny stages; default bf16, e.g. "bf16 fp16");
#      GPU_TESTS (tests stage: only these executables, e.g. "test_gpu_faults").
# Example (device tool): bench/gpu_check.sh build-gpu tests
set -uo pipefail
build=${1:-build}
shift || true
stages=${*:-tests}
[ "$stages" = all ] && stages="tests gemv norm skinny engine strategies suite"
dtypes=${DTYPES:-bf16}
for stage in $stages; do # a typo should not cost a machine's minutes first
  case " tests gemv norm skinny engine strategies suite " in
  *" $stage "*) ;;
  *) echo "gpu_check: unknown stage '$stage' (tests gemv norm skinny engine strategies suite all)" >&2
     exit 2 ;;
  esac
done
out=${OUT:-/tmp/autotune-gpu-check}
# the per-shape JSON stays on the machine ($OUT brings back at most 8 files)
work=/tmp/autotune-gpu-check
db=${GPU_CHECK_DB:-$work/bench.db}
mkdir -p "$out" "$work"
# a second call on the same warm machine goes on where the first stopped
export BENCH_RESUME=${BENCH_RESUME:-1}
# the build's own stamp first: the machine's copy of .git may be older
echo "== build $(cat "$build/source_commit.txt" 2>/dev/null || echo '?'), tree $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
for stage in $stages; do
  t0=$(date +%s)
  case $stage in
  tests)
    for t in "$build"/tests/test_*gpu*; do
      [ -x "$t" ] || continue
      name=$(basename "$t")
      case " ${GPU_TESTS:-$name} " in *" $name "*) ;; *) continue ;; esac
      "$t" >"$out/$name.txt" 2>&1
      echo "== $name exit $? ($(($(date +%s) - t0)) s so far)"
      grep -E "FAIL|CHECK failed|passed, " "$out/$name.txt"
    done
    ;;
  gemv)
    BENCH_OUT="$work/gemv" bench/decode_gemv.sh "$build/autotune" "$db" $dtypes 2>&1 | tee "$out/bench_gemv.txt" ;;
  norm)
    BENCH_OUT="$work/norm" bench/decode_norm.sh "$build/autotune" "$db" bf16 2>&1 | tee "$out/bench_norm.txt" ;;
  skinny)
    BENCH_OUT="$work/skinny" bench/decode_skinny.sh "$build/autotune" "$db" $dtypes 2>&1 | tee "$out/bench_skinny.txt" ;;
  engine)
    # the engine needs tuned GEMVs and its norm in $db: a fresh machine has none
    if [ ! -f "$db" ]; then
      echo "== engine: no $db on this machine: tuning the GEMVs and the engine's norm first"
      BENCH_OUT="$work/gemv" bench/decode_gemv.sh "$build/autotune" "$db" bf16 2>&1 | tee "$out/bench_gemv.txt"
      OPS=add_gemma_rmsnorm TS=1 HS=2048 BENCH_OUT="$work/norm" \
        bench/decode_norm.sh "$build/autotune" "$db" bf16 2>&1 | tee "$out/bench_norm.txt"
    fi
    OUT="$work/engine" bench/atk_check.sh "$build" "$db" 2>&1 | tee "$out/engine.txt" ;;
  strategies)
    bench/strategies.sh "$build/autotune" "$work/strategies" bf16 2>&1 | tee "$out/bench_strategies.txt" ;;
  suite)
    bench/suite_time.sh "$build/autotune" "$work/suite" bf16 2>&1 | tee "$out/bench_suite.txt" ;;
  *)
    echo "gpu_check: unknown stage '$stage' (tests gemv norm skinny engine strategies suite all)" >&2
    exit 2 ;;
  esac
  echo "== stage $stage: $(($(date +%s) - t0)) s"
done
