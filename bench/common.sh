# bench/common.sh — what the bench scripts share; sourced, not run.
# tune_one FILE ARGS...: runs `$bin ARGS --json --quiet` into FILE and sets
# rc to its exit status, unless BENCH_RESUME is set and FILE already holds a
# complete result of an earlier call on this machine (then rc=0, and
# kept=1). Needs $bin.
tune_one() {
  local f=$1
  shift
  kept=0
  if [ -n "${BENCH_RESUME:-}" ] && python3 -c 'import json, sys
sys.exit(json.load(open(sys.argv[1])).get("status", 1))' "$f" 2>/dev/null; then
    rc=0
    kept=1
    return
  fi
  "$bin" "$@" --json --quiet >"$f"
  rc=$?
}

# gemv_line FILE DTYPE SHAPE: one line for a tuned GEMV as soon as it is
# done (so a run cut short still reports), or its exit status ($rc).
gemv_line() {
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); w, b = d["winner"], d["baseline"]
t, sp = d["timing"], d["space"]
print("tuned %s %s: cuBLAS %.2f us, tuned %.2f us, %.2fx, %s %s (%.1f s: compile %.1f [%d programs, %d of %d cubins cached], gpu setup %.1f, verify %.1f, timing %.1f [graphs %.1f], other %.1f)"
      % (sys.argv[2], sys.argv[3], b["us"], w["us"], w["speedup"], w["strategy"], w["params"], t["total_s"],
         t["compile_s"], sp.get("programs", sp["compiled"]), sp["compile_cached"], sp["compiled"],
         t.get("setup_s", 0), t["verify_s"], t["time_s"], t.get("graph_s", 0), t["other_s"]))' \
    "$1" "$2" "$3" 2>/dev/null || echo "tuned $2 $3: exit $rc"
}
