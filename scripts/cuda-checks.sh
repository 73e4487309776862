#!/bin/bash
# taskwatt's checks on a machine with an NVIDIA GPU (the figures of BENCHMARKS.md, "CUDA on
# an H200"). Run it from a folder that holds it beside the two binaries it runs, built
# where crates.io is reachable:
#   cargo build --release --features cuda
#   cargo test --release -p taskwatt-runtime --features cuda --test cuda --no-run
#   mkdir -p .devbin && cp scripts/cuda-checks.sh .devbin/run.sh
#   cp target/release/taskwatt .devbin/ && cp target/release/deps/cuda-<hash> .devbin/cuda-test
# then run `.devbin/run.sh` there. The log goes to $OUT/log (or ./log), with the transfers
# CSVs and the energy reports beside it. About 2.5 minutes on an H200 with 16 cores before
# the dgemm yardstick, the n = 32768 Cholesky and the graphs 3x the device limit (issue 33),
# which add about a minute (not run yet).
cd "$(dirname "$0")"
OUT=${OUT:-.}
exec > >(tee -a "$OUT/log") 2>&1
T0=$(date +%s)
el() { echo "--- [$(( $(date +%s) - T0 )) s] $*"; }
export TASKWATT_PERFMODEL_DIR=/tmp/pm
LIB=$(find / -xdev -name 'libcublas.so.13*' 2>/dev/null | head -1)
[ -n "$LIB" ] && export LD_LIBRARY_PATH=$(dirname "$LIB"):$LD_LIBRARY_PATH
el cuda tests
./cuda-test --nocapture --test-threads 1 2>&1 | tee /tmp/cuda-test.log
# cuBLAS's own dgemm rate, measured above: the yardstick of the GFlop/s below.
DGEMM=$(sed -n 's/^cuBLAS dgemm n=[0-9]*: \([0-9]*\) GFlop\/s.*/\1/p' /tmp/cuda-test.log | head -1)
ratio() { awk -v g="$1" -v d="$DGEMM" 'BEGIN { if (d > 0) printf "  %.1f %% of cuBLAS dgemm (%s GFlop/s)\n", 100 * g / d, d }'; }
gflops() { tee /dev/stderr | sed -n 's/.*GFlop\/s *\([0-9.]*\).*/\1/p' | head -1; }
W="--workers 15 --gpus 1 --gpu-backend cuda"
G="--n 12288 --tile 2048 $W --sched dmda"
el "gemm f64 calibrate"
./taskwatt run gemm $G --no-energy --no-check | grep -E "makespan|GFlop"
cat /tmp/pm/cuda/bus.json
for mode in register staging pageable; do
  el "gemm f64 $mode"
  TASKWATT_CUDA_STAGING=$mode ./taskwatt run gemm $G --no-energy --trace /tmp/g-$mode.twt | grep -E "makespan|GFlop|check|transfers"
  ./taskwatt export /tmp/g-$mode.twt --format csv -o /tmp/g-$mode.csv >/dev/null; cp /tmp/g-$mode.transfers.csv $OUT/
done
el "gemm f32"
./taskwatt run gemm $G --precision f32 --no-energy --no-check | grep -E "makespan|GFlop"
./taskwatt run gemm $G --precision f32 --no-energy | grep -E "makespan|GFlop|check|transfers"
C="--n 16384 --tile 1024"
el "cholesky calibrate"
./taskwatt run cholesky $C $W --sched dmda --no-energy --no-check | grep -E "makespan|GFlop"
for s in dmda dmdas eager lws prio ws; do
  el "cholesky $s 15+1"
  ./taskwatt run cholesky $C $W --sched $s --no-energy | grep -E "makespan|GFlop|check|transfers"
done
el "cholesky n=32768 f64 dmda, against cuBLAS dgemm (issue 33's bar: 50 % or more)"
ratio "$(./taskwatt run cholesky --n 32768 --tile 2048 $W --sched dmda --no-energy --no-check 2>&1 | grep -E "makespan|GFlop" | gflops)"
el "cholesky f32 dmda"
./taskwatt run cholesky $C $W --sched dmda --precision f32 --no-energy --no-check | grep -E "GFlop"
./taskwatt run cholesky $C $W --sched dmda --precision f32 --no-energy | grep -E "makespan|GFlop|check|transfers"
el "cholesky CPU only 16 lws"
./taskwatt run cholesky $C --workers 16 --sched lws --no-energy | grep -E "makespan|GFlop|check"
el "cholesky energy: 5 iterations, NVML; each GPU type calibrated alone (the isolation reference)"
./taskwatt run cholesky $C $W --sched dmda --iterations 5 --idle-calibration 2s --type-calibration 4s --trace /tmp/ce.twt > $OUT/cholesky-energy.txt; grep -E "makespan|GFlop|check|energy|gpu" $OUT/cholesky-energy.txt | head -30
grep -A8 "measured alone" $OUT/cholesky-energy.txt
el "gemm energy: 3 iterations, NVML"
./taskwatt run gemm --n 16384 --tile 2048 $W --sched dmda --iterations 3 --idle-calibration 2s > $OUT/gemm-energy.txt; grep -E "makespan|GFlop|check|gpu" $OUT/gemm-energy.txt | head -30
el "a graph 3x the device limit: Cholesky f64 2 GiB on 683 MiB, GEMM 3.4 GiB on 1152 MiB"
for s in dmda eager lws; do
  ./taskwatt run cholesky $C $W --sched $s --gpu-memory-limit 683MiB --no-energy | grep -E "makespan|GFlop|check|transfers|evictions"
done
./taskwatt run gemm $G --gpu-memory-limit 1152MiB --no-energy | grep -E "makespan|GFlop|check|transfers|evictions"
el "perf models"
./taskwatt perfmodel show --dir /tmp/pm/cuda
el done
