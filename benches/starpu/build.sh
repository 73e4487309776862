#!/usr/bin/env bash
# Builds taskbench-starpu (Task Bench's graphs on Debian's StarPU 1.3) into
# target/starpu/taskbench-starpu. Not part of CI: it needs libstarpu-dev.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists starpu-1.3; then
    echo "libstarpu-dev not found: apt-get install libstarpu-dev pkg-config" >&2
    exit 1
fi

# -march=native gives AVX2 + FMA where the CPU has them (compute_bound's 16 ymm FMA
# chains); CFLAGS may override it, e.g. CFLAGS="-O3 -mavx2 -mfma" for another host.
CFLAGS="${CFLAGS:--O3 -march=native}"
mkdir -p target/starpu
# shellcheck disable=SC2086 # CFLAGS and pkg-config output are word lists
cc $CFLAGS -std=gnu11 -Wall -Wextra $(pkg-config --cflags starpu-1.3) \
    benches/starpu/taskbench_starpu.c -o target/starpu/taskbench-starpu \
    $(pkg-config --libs starpu-1.3)
echo "target/starpu/taskbench-starpu"
