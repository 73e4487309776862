#!/usr/bin/env bash
# The README's main job against the simulated machine's truth (BENCHMARKS.md, "Energy on a
# contended machine"): runs `taskwatt run cholesky --idle-calibration 1s --type-calibration
# auto` N times (each run draws its own simulator seed), then, over every domain of every
# run: how many types with >= 100 tasks are shown as measurements and within 2 % of the
# truth (their power alone), the coverage of the 95 % intervals (base, powers alone, powers
# at the run's occupancy), and the contention fitted against the truth.
#
#   scripts/energy-main-job.sh [RUNS=20] [DIR=/tmp/energy-main-job]
#
# Uses target/debug/taskwatt (the README's build) unless TASKWATT says otherwise; needs
# python3.
set -euo pipefail
runs=${1:-20}
dir=${2:-/tmp/energy-main-job}
tw=${TASKWATT:-target/debug/taskwatt}
mkdir -p "$dir"
for r in $(seq 1 "$runs"); do
  "$tw" run cholesky --idle-calibration 1s --type-calibration auto --no-report \
    --trace "$dir/run-$r.twt" >/dev/null
  printf '.' >&2
done
echo >&2
python3 - "$tw" "$dir" "$runs" <<'PY'
import json, subprocess, sys
tw, d, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
types = shown = within2 = 0
cover = total = 0
z2 = []
worst = []
contention = []
for r in range(1, runs + 1):
    rep = json.loads(subprocess.run([tw, "report", f"{d}/run-{r}.twt", "--json"],
                                    check=True, capture_output=True, text=True).stdout)["report"]
    for dom in rep["domains"]:
        counts = {t["key"]["codelet"] + "@" + (t["key"].get("arch") or ""): t["count"]
                  for t in dom["types"]}
        for row in dom["truth"]["rows"]:
            name = row["name"]
            if name == "contention":
                contention.append((dom["name"], row["estimate_w"], row["truth_w"], row["covered"]))
                continue
            if row["covered"] is not None:
                total += 1
                cover += row["covered"]
            if row["z"] is not None:
                z2.append(row["z"] ** 2)
            if name == "base" or name.endswith(" at run"):
                continue
            if counts.get(name, 0) >= 100:
                types += 1
                ok = row["reliable"] and abs(row["error_pct"]) <= 2.0
                shown += row["reliable"]
                within2 += ok
                if not ok:
                    worst.append(f"run {r} {dom['name']} {name}: {row['error_pct']:+.2f}%"
                                 f"{'' if row['reliable'] else ' (not shown)'}")
print(f"runs {runs}: {types} (domain, type) with >= 100 tasks; {shown} shown as measurements; "
      f"{within2} shown and within 2 % of the truth ({100 * within2 / max(types, 1):.1f} %)")
print(f"95 % intervals cover {cover} of {total} ({100 * cover / max(total, 1):.1f} %); "
      f"mean z^2 {sum(z2) / max(len(z2), 1):.2f}")
for name, est, truth, cov in contention[:6]:
    print(f"  contention {name}: {est:.4f} (truth {truth if truth is None else round(truth, 4)}, "
          f"covered {cov})")
for w in worst:
    print("  off: " + w)
PY
