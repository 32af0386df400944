#!/usr/bin/env bash
# Set up a fresh machine and run the main job on its embedded default.
# Today: `burst info` and the GEMM benchmark under mpiexec -n 2, written to
# HDF5 and read back by the analysis script. It grows into the mpiexec
# training run as the training issues land.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
np=${BURST_DEMO_RANKS:-2}
"$here/bootstrap.sh" >/dev/null
build=$("$here/build.sh" | tail -n1)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_PROC_BIND=false
mpiexec -n "$np" "$build/burst" info
out=$root/experiments/results/gemm_host_demo.h5
mpiexec -n "$np" "$build/burst" bench gemm --set 'bench.sizes=[256,512,1024]' --output "$out"
"${BURST_PYTHON:-/usr/bin/python3}" "$root/paper_figs/h5_summary.py" "$out"
