#!/usr/bin/env bash
# Set up a fresh machine and run the main job on its embedded default:
# the tiny LLaMA trained on the passkey task under mpiexec (data-parallel
# ranks, one OpenMP thread each), with an HDF5 run log and checkpoint, then
# the same model restricted to a causal attention window of 4 tokens, shorter
# than any key distance the task draws (>= 4), which must stay at chance,
# and a summary of both logs.
#   BURST_DEMO_RANKS=2 (default)   scripts/demo.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
np=${BURST_DEMO_RANKS:-2}
"$here/bootstrap.sh" >/dev/null
build=$("$here/build.sh" | tail -n1)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_PROC_BIND=false
cd "$root"
mpiexec -n "$np" "$build/burst" info
mpiexec -n "$np" "$build/burst" train --config experiments/configs/passkey_tiny.toml
mpiexec -n "$np" "$build/burst" train --config experiments/configs/passkey_tiny.toml \
  --set train.attention_window=4 --set train.steps=500 \
  --set io.run_log=experiments/results/passkey_tiny_window4_log.h5 --set io.checkpoint=
"${BURST_PYTHON:-/usr/bin/python3}" "$root/paper_figs/h5_summary.py" \
  experiments/results/passkey_tiny_log.h5 experiments/results/passkey_tiny_window4_log.h5
