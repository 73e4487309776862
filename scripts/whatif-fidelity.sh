#!/usr/bin/env bash
# The what-if simulator against real runs (BENCHMARKS.md, "What-if simulation"): records
# Cholesky n=4096 under eager, ws, lws, prio and dmda, R runs each (interleaved), then
# simulates every policy from the first run of each policy on the `this-machine` platform
# and compares with the real runs' medians (makespan: first submission to last end; energy:
# the simulated meter's package + DRAM over the same window).
#
#   scripts/whatif-fidelity.sh [RUNS=3] [DIR=/tmp/whatif-fidelity]
#
# RECORD=0 replays the recordings already in DIR (another build's simulator on the same
# runs). Needs a release build (`cargo build --release`) and python3.
set -euo pipefail
runs=${1:-3}
dir=${2:-/tmp/whatif-fidelity}
tw=${TASKWATT:-target/release/taskwatt}
mkdir -p "$dir"
[ "${RECORD:-1}" = 0 ] && runs=0
# dmda needs calibrated performance models: two runs first.
for i in $(seq 1 $((runs > 0 ? 2 : 0))); do
  "$tw" run cholesky --n 4096 --workers 2 --sched dmda --meter sim --no-energy \
    --perfmodel-dir "$dir/pm" >/dev/null
done
for r in $(seq 1 "$runs"); do
  for p in eager ws lws prio dmda; do
    "$tw" run cholesky --n 4096 --workers 2 --sched "$p" --meter sim --no-report \
      --perfmodel-dir "$dir/pm" --trace "$dir/real-$p-$r.twt" >/dev/null
  done
done
python3 - "$tw" "$dir" <<'PY'
import glob, json, statistics, subprocess, sys
tw, d = sys.argv[1], sys.argv[2]
pols = ["eager", "ws", "lws", "prio", "dmda"]
def sim(trace, policies):
    out = subprocess.run([tw, "simulate", trace, "--platform", "this-machine", "--sched",
                          ",".join(policies), "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)
real = {}
for p in pols:
    figs = [sim(f, [p])["recorded"]["figures"] for f in sorted(glob.glob(f"{d}/real-{p}-*.twt"))]
    ms = [f["makespan_s"] for f in figs]; es = [f["total_j"] for f in figs]
    real[p] = (statistics.median(ms), statistics.median(es))
    print(f"real {p:6}: makespan median {real[p][0]:.4f} s ({', '.join('%.4f' % x for x in ms)}), "
          f"energy median {real[p][1]:.2f} J")
worst = [0.0, 0.0]
for src in sorted(glob.glob(f"{d}/real-*-1.twt")):
    row = []
    for r in sim(src, pols)["runs"]:
        p, m, e = r["policy"], r["figures"]["makespan_s"], r["figures"]["total_j"]
        em, ee = 100 * (m - real[p][0]) / real[p][0], 100 * (e - real[p][1]) / real[p][1]
        worst = [max(worst[0], abs(em)), max(worst[1], abs(ee))]
        row.append(f"{p} {em:+.1f}%/{ee:+.1f}%")
    print(f"from {src.rsplit('/', 1)[-1]:16} (makespan/energy error): " + "; ".join(row))
print(f"worst |error| over every source and policy: makespan {worst[0]:.2f} %, energy {worst[1]:.2f} %")
PY
