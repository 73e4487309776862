#!/usr/bin/env bash
# Distributed Cholesky, taskwatt-mpi against StarPU-MPI, interleaved (BENCHMARKS.md,
# "Many nodes"): n = 4096, tiles of 256 (16 x 16), single precision (StarPU's example is
# f32), 2 ranks x 1 CPU worker on this machine, block-cyclic over a 1 x 2 (taskwatt) or
# 2 x 1 (StarPU) grid of ranks.
#
#   benches/cholesky_mpi_vs_starpu.sh [RUNS=5]
#
# Needs `cargo build --release --features mpi` and Debian's StarPU-MPI example
# (`apt-get install libstarpu-dev starpu-examples`: mpi_cholesky_distributed, StarPU
# 1.3.10 on Open MPI 4.1.4, OpenBLAS kernels). STARPU_MPI_NOBIND=1 as ../shared/PEERS.md
# says (MPI_Init hangs otherwise on 2 cores).
set -euo pipefail
runs=${1:-5}
tw=${TASKWATT:-target/release/taskwatt}
sp=${STARPU_MPI_CHOLESKY:-/usr/lib/x86_64-linux-gnu/starpu/mpi/mpi_cholesky_distributed}
n=4096
nb=256
export STARPU_MPI_NOBIND=1 STARPU_NCPU=1 OPENBLAS_NUM_THREADS=1
export STARPU_HOME=${STARPU_HOME:-/tmp/starpu-home}
unset STARPU_SCHED
mpi=(mpirun --allow-run-as-root -np 2)
flops=$(python3 -c "print($n**3/3)")
starpu=() taskwatt=()
for r in $(seq 1 "$runs"); do
  ms=$("${mpi[@]}" "$sp" -size $n -nblocks $((n / nb)) 2>/dev/null |
    sed -n 's/^Computation time (in ms): //p' | head -1)
  starpu+=("$ms")
  s=$("${mpi[@]}" "$tw" run cholesky --mpi --n $n --tile $nb --workers 1 --precision f32 \
    --sched lws --json 2>/dev/null | python3 -c "
import json, sys
print(max(json.loads(l)['outcome']['makespan_s'] for l in sys.stdin if l.startswith('{')) * 1e3)")
  taskwatt+=("$s")
  echo "run $r: StarPU-MPI $ms ms, taskwatt-mpi $s ms"
done
python3 - "$flops" "${starpu[*]}" "${taskwatt[*]}" <<'PY'
import statistics, sys
flops = float(sys.argv[1])
for name, v in (("StarPU-MPI 1.3.10 mpi_cholesky_distributed", sys.argv[2]), ("taskwatt-mpi (lws, pure-Rust f32 kernels)", sys.argv[3])):
    ms = [float(x) for x in v.split()]
    m = statistics.median(ms)
    print(f"{name}: median {m:.1f} ms ({flops / m / 1e6:.1f} GFlop/s) over {', '.join('%.1f' % x for x in ms)}")
PY
