#!/usr/bin/env bash
# Distributed Cholesky, taskwatt-mpi against StarPU-MPI, interleaved (BENCHMARKS.md,
# "Many nodes"): n = 4096, tiles of 256 (16 x 16), single precision (StarPU's example is
# f32), RANKS (2) ranks x 1 CPU worker on this machine, block-cyclic over a grid (taskwatt) or
# StarPU's own distribution of its example.
#
#   benches/cholesky_mpi_vs_starpu.sh [RUNS=5]
#   RANKS=4 benches/cholesky_mpi_vs_starpu.sh 9    # 4 ranks (oversubscribed on 2 cores)
#
# Needs `cargo build --release --features mpi` (or `mpi,blas` for the same OpenBLAS
# kernels as StarPU; TASKWATT= names the binary) and Debian's StarPU-MPI example
# (`apt-get install libstarpu-dev starpu-examples`: mpi_cholesky_distributed, StarPU
# 1.3.10 on Open MPI 4.1.4, OpenBLAS kernels). STARPU_MPI_NOBIND=1 as ../shared/PEERS.md
# says (MPI_Init hangs otherwise on 2 cores).
#
# A fair comparison (issue 34):
# - each StarPU rank's worker on its own core: STARPU_WORKERS_CPUID is the rank (StarPU 1.3
#   puts every rank's worker on CPU 0 otherwise); taskwatt's ranks get one core each from
#   mpirun's binding;
# - Debian's OpenBLAS picks its SSE3 "Prescott" kernels on AVX-512 Xeons: on a CPU with
#   AVX-512, OPENBLAS_CORETYPE=SkylakeX for both sides (OPENBLAS_CORETYPE= overrides);
# - the timed regions: StarPU's "Computation time" (its first task's submission to the end
#   of its last) against taskwatt's largest rank's first submission to its last task and
#   message.
set -euo pipefail
runs=${1:-5}
tw=${TASKWATT:-target/release/taskwatt}
sp=${STARPU_MPI_CHOLESKY:-/usr/lib/x86_64-linux-gnu/starpu/mpi/mpi_cholesky_distributed}
n=4096
nb=256
export STARPU_MPI_NOBIND=1 STARPU_NCPU=1 OPENBLAS_NUM_THREADS=1
export STARPU_HOME=${STARPU_HOME:-/tmp/starpu-home}
if [[ -z ${OPENBLAS_CORETYPE+x} ]] && grep -qw avx512f /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=SkylakeX
fi
echo "OpenBLAS kernels: ${OPENBLAS_CORETYPE:-its own choice}; taskwatt: $("$tw" --version)"
unset STARPU_SCHED
ranks=${RANKS:-2}
cores=$(nproc)
mpi=(mpirun --allow-run-as-root -np "$ranks")
# More ranks than cores: both sides share them alike (mpirun then binds no rank).
[[ $ranks -gt $cores ]] && mpi+=(--oversubscribe)
echo "$ranks ranks x 1 worker on $cores cores"
# Each StarPU rank's worker on the core of its rank (modulo the cores).
pinned=(sh -c 'STARPU_WORKERS_CPUID=$((OMPI_COMM_WORLD_RANK % $(nproc))) exec "$0" "$@"')
flops=$(python3 -c "print($n**3/3)")
starpu=() taskwatt=()
for r in $(seq 1 "$runs"); do
  ms=$("${mpi[@]}" "${pinned[@]}" "$sp" -size $n -nblocks $((n / nb)) 2>/dev/null |
    sed -n 's/^Computation time (in ms): //p' | head -1)
  starpu+=("$ms")
  out=$("${mpi[@]}" "$tw" run cholesky --mpi --n $n --tile $nb --workers 1 --precision f32 \
    --sched lws --json 2>/dev/null)
  s=$(python3 -c "
import json, sys
print(max(json.loads(l)['outcome']['makespan_s'] for l in sys.stdin if l.startswith('{')) * 1e3)" <<<"$out")
  taskwatt+=("$s")
  echo "run $r: StarPU-MPI $ms ms, taskwatt-mpi $s ms"
done
kernels=$("$tw" run cholesky --n 256 --tile 128 --workers 1 --no-energy --no-perfmodel 2>/dev/null |
  sed -n 's/.*, kernels //p' | head -1)
python3 - "$flops" "${starpu[*]}" "${taskwatt[*]}" "$kernels" <<'PY'
import statistics, sys
flops = float(sys.argv[1])
pairs = list(zip(sys.argv[2].split(), sys.argv[3].split()))
for name, v in (("StarPU-MPI 1.3.10 mpi_cholesky_distributed (OpenBLAS)", sys.argv[2]),
                (f"taskwatt-mpi (lws, {sys.argv[4]} kernels)", sys.argv[3])):
    ms = [float(x) for x in v.split()]
    m = statistics.median(ms)
    print(f"{name}: median {m:.1f} ms ({flops / m / 1e6:.1f} GFlop/s) over {', '.join('%.1f' % x for x in ms)}")
ratios = [float(s) / float(t) for s, t in pairs]
wins = sum(r > 1 for r in ratios)
print(f"StarPU / taskwatt, pair by pair: median {statistics.median(ratios):.2f} "
      f"({min(ratios):.2f} to {max(ratios):.2f}); taskwatt faster in {wins} of {len(ratios)}")
PY
