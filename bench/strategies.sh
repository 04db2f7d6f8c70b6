#!/usr/bin/env bash
# bench/strategies.sh — each search strategy against exhaustive on the
# Qwen3.5-2B M=1 decode GEMVs, on the present GPU: per shape and strategy
# the winner's µs, its ratio to exhaustive's best, the timing phase's wall
# time (verify + time) and the whole run's, each as a share of exhaustive's.
# Every strategy tunes into its own cache (no strategy seeds another's, but
# each is warm-started by the shapes it tuned before, as in a suite); the
# caches share one folder, so they share the compiled-kernel cache: the
# first run of a shape (exhaustive) compiles, the others read cubins.
# Speed is reported, never asserted.
# Usage: bench/strategies.sh [AUTOTUNE] [WORK_DIR] [DTYPE]
# Env: SHAPES (default: the seven Qwen3.5-2B M=1 shapes), BUDGET (random and
# anneal: candidates screened; default 370, half of the ~740-candidate
# space; each then re-times its 4 fastest at full reps).
set -uo pipefail
. "$(dirname "$0")/common.sh" # tune_one (BENCH_RESUME=1 keeps finished shapes)
bin=${1:-build/autotune}
work=${2:-/tmp/autotune-strategies}
dt=${3:-bf16}
budget=${BUDGET:-370}
shapes=${SHAPES:-1x2048x5120 1x2048x2048 1x2048x8192 1x2048x32 1x2048x12288 1x6144x2048 1x2048x248320}
mkdir -p "$work"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), results in $work"
for s in $shapes; do
  for st in exhaustive halving random anneal; do
    f="$work/$dt-$s-$st.json"
    extra=""
    case $st in random | anneal) extra="--budget $budget" ;; esac
    # shellcheck disable=SC2086
    tune_one "$f" --op gemv --shape "$s" --dtype "$dt" --db "$work/$st.db" --force --strategy "$st" $extra
    [ "$kept" = 1 ] || echo "tuned $s $st: exit $rc"
  done
done
python3 - "$work" "$dt" "$shapes" <<'PY'
import json, math, os, sys
work, dt, shapes = sys.argv[1], sys.argv[2], sys.argv[3].split()
strategies = ["exhaustive", "halving", "random", "anneal"]
def load(s, st):
    try:
        d = json.load(open(os.path.join(work, f"{dt}-{s}-{st}.json")))
    except (OSError, ValueError):
        return None
    return d if d.get("status", 1) == 0 else None
print(f"\n{dt}: each strategy against exhaustive (us: the stored winner; search = verify + time s)")
print(f"  {'shape':16} {'strategy':10} {'measured':>8} {'us':>8} {'vs exh':>7} {'search s':>8} {'share':>6} {'total s':>8} {'share':>6} {'graphs':>6} {'graph s':>7}")
summary = {st: {"worst": 0.0, "search": [], "total": []} for st in strategies[1:]}
for s in shapes:
    ex = load(s, "exhaustive")
    if not ex:
        print(f"  {s:16} exhaustive: no result"); continue
    def us_of(d):  # the winner's time; cuBLAS when it won
        return d["winner"]["us"]
    ex_us = us_of(ex)
    ex_search = ex["timing"]["verify_s"] + ex["timing"]["time_s"]
    ex_total = ex["timing"]["total_s"]
    for st in strategies:
        d = load(s, st)
        if not d:
            print(f"  {s:16} {st:10} no result"); continue
        t = d["timing"]; search = t["verify_s"] + t["time_s"]
        r = us_of(d) / ex_us
        print(f"  {s:16} {st:10} {d['search']['measured']:8d} {us_of(d):8.2f} {r:6.3f}x {search:8.1f} "
              f"{search / ex_search:6.0%} {t['total_s']:8.1f} {t['total_s'] / ex_total:6.0%} "
              f"{t.get('graphs', 0):6d} {t['graph_s']:7.2f}")
        if st != "exhaustive":
            m = summary[st]
            m["worst"] = max(m["worst"], r - 1.0)
            m["search"].append(search / ex_search)
            m["total"].append(t["total_s"] / ex_total)
print("\n  strategy   worst us vs exhaustive   mean search share   mean total share   (target: within 3%, <= 30% wall)")
for st, m in summary.items():
    if m["search"]:
        print(f"  {st:10} {m['worst'] * 100:+20.1f}%   {sum(m['search']) / len(m['search']):17.0%}"
              f"   {sum(m['total']) / len(m['total']):16.0%}")
PY
