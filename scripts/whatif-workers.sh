#!/usr/bin/env bash
# The what-if simulator on other worker counts (issue 31's first bar): records each app R
# times on 1 worker and on 2 (interleaved, with idle and type calibration, so that the
# recording carries its contention laws and the machine's wander), replays every 1-worker
# recording on 2 workers (`this-machine`) and every 2-worker one on 1 worker (a one-core
# copy of it), and compares the replays' makespan and energy with the real runs' medians,
# saying whether the replay's 95 % interval holds the median.
#
#   scripts/whatif-workers.sh [RUNS=3] [DIR=/tmp/whatif-workers] [APPS="cholesky gemm stencil"]
#
# RUN_ARGS adds arguments to every `taskwatt run` (e.g. RUN_ARGS="--steps 80" for a longer
# stencil, whose default 20 steps last 0.15 to 0.3 s here and spread widely). RECORD=0
# replays the recordings already in DIR (another build's simulator on the same runs).
#
# Needs a release build (`cargo build --release`) and python3. Meaningful only on a quiet
# machine: the script prints how far the real runs of one configuration spread, and a
# spread wider than the bar (5 %) means the machine cannot check it.
set -euo pipefail
runs=${1:-3}
dir=${2:-/tmp/whatif-workers}
apps=${3:-cholesky gemm stencil}
tw=${TASKWATT:-target/release/taskwatt}
mkdir -p "$dir"
sed 's/^cores_per_package = 2/cores_per_package = 1/; s/^name = .*/name = "this machine, one core"/' \
  whatif/platforms/this-machine.toml > "$dir/one-core.toml"
[ "${RECORD:-1}" = 0 ] && runs=0
for r in $(seq 1 "$runs"); do
  for app in $apps; do
    for w in 1 2; do
      # shellcheck disable=SC2086 # RUN_ARGS is split into arguments on purpose.
      "$tw" run "$app" --workers "$w" ${RUN_ARGS:-} --idle-calibration 1s --type-calibration auto \
        --no-report --no-perfmodel --trace "$dir/$app-w$w-$r.twt" >/dev/null
      echo "recorded $app on $w worker(s), run $r" >&2
    done
  done
done
python3 - "$tw" "$dir" "$apps" <<'PY'
import glob, json, statistics, subprocess, sys
tw, d, apps = sys.argv[1], sys.argv[2], sys.argv[3].split()
def sim(trace, platform):
    out = subprocess.run([tw, "simulate", trace, "--platform", platform, "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)
worst = [0.0, 0.0]
covered = [0, 0, 0]
for app in apps:
    real = {}
    for w in (1, 2):
        figs = [sim(f, "this-machine")["recorded"]["figures"]
                for f in sorted(glob.glob(f"{d}/{app}-w{w}-*.twt"))]
        ms = [f["makespan_s"] for f in figs]; es = [f["total_j"] for f in figs]
        real[w] = (statistics.median(ms), statistics.median(es))
        spread = 100 * (max(ms) - min(ms)) / statistics.median(ms)
        print(f"{app} real on {w} worker(s): makespan median {real[w][0]:.4f} s "
              f"({', '.join('%.4f' % x for x in ms)}; spread {spread:.1f} %), "
              f"energy median {real[w][1]:.2f} J")
    for src_w, dst_w, platform in ((1, 2, "this-machine"), (2, 1, f"{d}/one-core.toml")):
        for src in sorted(glob.glob(f"{d}/{app}-w{src_w}-*.twt")):
            r = sim(src, platform)["runs"][0]
            m, e = r["figures"]["makespan_s"], r["figures"]["total_j"]
            lo, hi = r["makespan_ci_s"]; elo, ehi = r["energy_ci_j"]
            em = 100 * (m - real[dst_w][0]) / real[dst_w][0]
            ee = 100 * (e - real[dst_w][1]) / real[dst_w][1]
            worst = [max(worst[0], abs(em)), max(worst[1], abs(ee))]
            cm = lo <= real[dst_w][0] <= hi; ce = elo <= real[dst_w][1] <= ehi
            covered[0] += cm; covered[1] += ce; covered[2] += 1
            print(f"  {src.rsplit('/', 1)[-1]:18} on {dst_w}: makespan {m:.4f} s ({em:+.1f} %, "
                  f"95 % {lo:.4f}-{hi:.4f} {'holds' if cm else 'misses'} the median), "
                  f"energy {e:.2f} J ({ee:+.1f} %, {'holds' if ce else 'misses'})")
print(f"worst |error|: makespan {worst[0]:.2f} %, energy {worst[1]:.2f} %; intervals hold the "
      f"median: makespan {covered[0]}/{covered[2]}, energy {covered[1]}/{covered[2]}")
PY
