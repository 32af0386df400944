#!/usr/bin/env bash
# Set up a fresh machine and run the main job on its embedded default, under
# `mpiexec -n 4` with one OpenMP thread per rank:
#   stage 1  the tiny LLaMA on the passkey task at 128 tokens: 4 data-parallel
#            replicas, `whole` checkpointing, fused LM head, PoSE-spread
#            training positions (experiments/configs/passkey_tiny.toml)
#   stage 2  that model trained on 4096-token sequences over 4 sequence-
#            parallel ranks with burst attention and `whole` checkpointing,
#            evaluated at 2048 and 4096 tokens
#            (experiments/configs/passkey_long.toml)
#   control  stage 1 with attention restricted to a 4-token window, shorter
#            than any key distance the task draws (>= 4): it must stay at chance
# Each writes an HDF5 run log and a checkpoint under experiments/results/;
# a summary of the logs ends the job.
#   BURST_DEMO_STAGES="1 2 control" (default: all three)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
stages=${BURST_DEMO_STAGES:-"1 2 control"}
"$here/bootstrap.sh" >/dev/null
build=$("$here/build.sh" | tail -n1)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_PROC_BIND=false
cd "$root"
mpiexec -n 4 "$build/burst" info
logs=()
for st in $stages; do
  case "$st" in
    1) mpiexec -n 4 "$build/burst" train --config experiments/configs/passkey_tiny.toml --set io.overwrite=true
       logs+=(experiments/results/passkey_tiny_log.h5) ;;
    2) mpiexec -n 4 "$build/burst" train --config experiments/configs/passkey_long.toml --set io.overwrite=true
       logs+=(experiments/results/passkey_long_log.h5) ;;
    control) mpiexec -n 4 "$build/burst" train --config experiments/configs/passkey_tiny.toml \
               --set train.attention_window=4 --set train.steps=500 \
               --set io.run_log=experiments/results/passkey_tiny_window4_log.h5 --set io.checkpoint= --set io.overwrite=true
       logs+=(experiments/results/passkey_tiny_window4_log.h5) ;;
    *) echo "demo.sh: unknown stage '$st' (1, 2, control)" >&2; exit 2 ;;
  esac
done
"${BURST_PYTHON:-/usr/bin/python3}" "$root/paper_figs/h5_summary.py" "${logs[@]}"
