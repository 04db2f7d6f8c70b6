#!/usr/bin/env bash
# fuzz/run.sh SECONDS — builds the libFuzzer harnesses (clang) and their
# plain replay drivers (gcc + ASan/UBSan) into build-fuzz/, replays the seed
# corpora and fuzz/regressions/, then fuzzes each harness for SECONDS on a
# copy of its corpus. Exits non-zero on any crash, leak, timeout or OOM.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-}
if ! [[ "$secs" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: fuzz/run.sh SECONDS   (fuzzing time per harness)" >&2
  exit 2
fi

out=build-fuzz
harnesses=(shape spec table cache)
# cache/ (the cache module, its schema header generated into $out/gen) and tuner/
inc=(-Icache -I"$out/gen" -Ituner -I/usr/include/lua5.4 -I/usr/local/cuda/include)
# A 2 s wall-clock backstop in the sandbox (20 s in the tool): inputs that
# run to it cost the fuzzer little and stay well under -timeout.
cflags=(-std=c11 -g -O1 -fno-omit-frame-pointer -D_GNU_SOURCE -Wall -Wextra -DAT_SANDBOX_TIME_LIMIT_S=2.0)
cache_srcs=$(echo cache/*.c) # the whole cache module, as cache/CMakeLists.txt globs it
declare -A srcs=(
  [shape]="cache/shape.c cache/dtype.c cache/error.c"
  [spec]="tuner/spec.c tuner/sandbox.c cache/sha256.c cache/error.c"
  [table]="$cache_srcs"
  [cache]="$cache_srcs"
)
declare -A libs=([shape]="" [spec]="-llua5.4 -lm" [table]="-lsqlite3 -lm" [cache]="-lsqlite3 -lm")
# libFuzzer flags; a spec input may legitimately run 50M Lua instructions per call
fuzz_flags=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
# spec inputs range from microseconds to seconds (instruction limit): favour fast ones
declare -A extra=([shape]="" [spec]="-dict=fuzz/spec.dict -entropic_scale_per_exec_time=1"
  [table]="-dict=fuzz/table.dict" [cache]="")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
t0=$(date +%s)
mkdir -p "$out/gen"
# the cache schema as a C string (as the CMake build makes it)
cmake -DIN=cache/schema.sql -DOUT="$out/gen/at_schema_sql.h" -P cmake/at_embed_sql.cmake

# ---- the toolchain: clang with its libFuzzer runtime
if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz: clang not found; libFuzzer needs clang with compiler-rt (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 3
fi
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$out/probe.c"
if ! clang -fsanitize=fuzzer,address,undefined "$out/probe.c" -o "$out/probe" 2>"$out/probe.log"; then
  echo "fuzz: clang's libFuzzer runtime (libclang_rt.fuzzer) is missing or unusable:" >&2
  sed 's/^/  /' "$out/probe.log" >&2
  echo "fuzz: install compiler-rt for $(clang --version | head -1) (Debian: apt-get install libclang-rt-NN-dev)" >&2
  exit 3
fi

# ---- build: one fuzzer (clang) and one replay driver (gcc) per harness
for h in "${harnesses[@]}"; do
  # shellcheck disable=SC2086 # srcs/libs are word lists
  clang "${cflags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    "${inc[@]}" "fuzz/fuzz_$h.c" ${srcs[$h]} ${libs[$h]} -o "$out/fuzz_$h"
  # shellcheck disable=SC2086
  gcc "${cflags[@]}" -fsanitize=address,undefined -fno-sanitize-recover=all \
    "${inc[@]}" fuzz/replay.c "fuzz/fuzz_$h.c" ${srcs[$h]} ${libs[$h]} -o "$out/replay_$h"
done
echo "fuzz: built in $(($(date +%s) - t0)) s"

# The seeds of a harness: its corpus, its regressions, and for the spec
# loader the project's own specs and spec fixtures, read where they live (no
# copies to drift out of date).
seeds() {
  local f
  for f in "fuzz/corpus/$1"/* "fuzz/regressions/$1"/*; do
    [ -f "$f" ] && echo "$f"
  done
  if [ "$1" = spec ]; then
    for f in search/*.lua tests/fixtures/spec_*.lua; do
      [ -f "$f" ] && echo "$f"
    done
  fi
  return 0
}

# ---- replay: every seed and every saved regression, no libFuzzer; a
# failure is reported at the end, after fuzzing
failed=0
for h in "${harnesses[@]}"; do
  mapfile -t inputs < <(seeds "$h")
  if ! "$out/replay_$h" "${inputs[@]}" >"$out/replay_$h.log" 2>&1; then
    echo "replay_$h: FAILED on a committed input (log: $out/replay_$h.log):"
    tail -n 20 "$out/replay_$h.log" | sed 's/^/  /'
    failed=1
  else
    echo "replay_$h: ${#inputs[@]} seed + regression inputs pass"
  fi
done

# ---- fuzz: each harness on a fresh copy of its corpus; both at once on 2+ cores
run_one() {
  local h=$1
  local dir="$out/$h"
  rm -rf "$dir"
  mkdir -p "$dir/corpus"
  local f i=0
  while read -r f; do # flat names: two seeds may share a basename
    cp "$f" "$dir/corpus/$((i++))_$(basename "$f")"
  done < <(seeds "$h")
  # shellcheck disable=SC2086
  "$out/fuzz_$h" "${fuzz_flags[@]}" ${extra[$h]} -max_total_time="$secs" \
    -artifact_prefix="$dir/" "$dir/corpus" >"$dir/fuzz.log" 2>&1
}
pids=()
for h in "${harnesses[@]}"; do
  if [ "$(nproc)" -ge 2 ]; then
    run_one "$h" & pids+=($!)
  else
    run_one "$h" || true
  fi
done
for p in "${pids[@]}"; do wait "$p" || true; done

# ---- report
for h in "${harnesses[@]}"; do
  dir="$out/$h"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/fuzz.log" | tail -1)
  found=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \) | sort)
  if [ -n "$found" ]; then
    failed=1
    for f in $found; do
      echo "fuzz_$h: ${execs:-?} executions, FOUND $(basename "$f" | cut -d- -f1): $f (log: $dir/fuzz.log)"
    done
  elif [ -z "$execs" ]; then
    failed=1
    echo "fuzz_$h: did not finish (no final stats; log: $dir/fuzz.log)"
  else
    echo "fuzz_$h: $execs executions in ${secs} s, no crash (corpus grew to $(find "$dir/corpus" -type f | wc -l) inputs)"
  fi
done
echo "fuzz: total $(($(date +%s) - t0)) s"
if [ "$failed" -ne 0 ]; then
  echo "fuzz: replay an input with: $out/replay_<harness> FILE; save it under fuzz/regressions/<harness>/" >&2
fi
exit "$failed"
