#!/usr/bin/env bash
# Tiled Cholesky, n=4096, 16x16 tiles of 256, on 2 CPU workers: StarPU's cholesky_implicit
# (Debian's starpu-examples, linked to the system BLAS; single precision: sgemm/ssyrk/strsm)
# beside taskwatt with the system BLAS (--features blas) and with its pure-Rust kernels,
# each in f64 and in f32 (--precision f32, the like-for-like comparison), interleaved in
# one run.
#
# OpenBLAS reads OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE from the environment for StarPU and
# taskwatt-blas alike; to measure without them: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE
# benches/cholesky_vs_starpu.sh 3
#
# Set-up (not part of CI): apt-get install starpu-examples libopenblas0-pthread
# Usage: benches/cholesky_vs_starpu.sh [repeats]   (prints one line per run, then medians)
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-5}
starpu=/usr/lib/x86_64-linux-gnu/starpu/examples/cholesky_implicit
[ -x "$starpu" ] || { echo "no $starpu: apt-get install starpu-examples" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
cargo build --release -q
cp target/release/taskwatt target/release/taskwatt-pure
cargo build --release -q --features blas
cp target/release/taskwatt target/release/taskwatt-blas
tw() { "$1" run cholesky --n 4096 --tile 256 --workers 2 --sched lws --no-energy --precision "$2" --json | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["gflops"],1))'; }
sp() { STARPU_SILENT=1 STARPU_SCHED=lws STARPU_NCPU=2 STARPU_NCUDA=0 STARPU_NOPENCL=0 "$starpu" -size 4096 -nblocks 16 2>/dev/null | awk '/^4096/ {print $3}'; }
systems="starpu taskwatt-blas taskwatt-blas-f32 taskwatt-pure taskwatt-pure-f32"
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-(unset)} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE-(unset)}"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A all
for r in $(seq 1 "$reps"); do
  for sys in $systems; do
    case $sys in
      starpu) g=$(sp) ;;
      taskwatt-blas) g=$(tw target/release/taskwatt-blas f64) ;;
      taskwatt-blas-f32) g=$(tw target/release/taskwatt-blas f32) ;;
      taskwatt-pure) g=$(tw target/release/taskwatt-pure f64) ;;
      taskwatt-pure-f32) g=$(tw target/release/taskwatt-pure f32) ;;
    esac
    echo "run $r $sys $g GFlop/s"
    all[$sys]="${all[$sys]:-} $g"
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
for sys in $systems; do
  echo "$sys median $(echo ${all[$sys]} | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') GFlop/s over $reps runs"
done
