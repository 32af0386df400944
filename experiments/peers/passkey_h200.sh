#!/bin/bash
# The passkey task at 16K-64K tokens on the H200, in one device call:
# build the CUDA engine, then train stage 2 (experiments/configs/
# passkey_h200.toml) from the stage-1 checkpoint made on the CPU machine,
# evaluating at 16K, 32K and 64K tokens.
#
# Here (CPU machine), before the call:
#   mpiexec -n 4 build-host/burst train --config experiments/configs/passkey_tiny.toml \
#     --set data.random_positions=65536 --set io.run_log=experiments/results/passkey_h200_stage1_log.h5 \
#     --set io.checkpoint=experiments/results/passkey_h200_stage1_ckpt.h5
# Device tool, carry [".offline", "experiments/results/passkey_h200_stage1_ckpt.h5"]:
#   OUT=$OUT experiments/peers/passkey_h200.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/h200_out}
mkdir -p "$OUT" experiments/results/h200
exec > >(tee -a "$OUT/passkey_h200.log") 2>&1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_PROC_BIND=false
export BURST_JOBS=${BURST_JOBS:-$(nproc)}
date -u
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv
t0=$(date +%s)
[ -f experiments/results/passkey_h200_stage1_ckpt.h5 ] || { echo "no stage-1 checkpoint (carry it)"; exit 1; }
scripts/bootstrap.sh --cuda --from .offline >/tmp/bootstrap.log 2>&1 || { echo "BOOTSTRAP FAILED"; tail -30 /tmp/bootstrap.log; exit 1; }
build=$(scripts/build.sh --cuda --deps-include "$(pwd)/.offline/include" -DBURST_ENABLE_NCCL=ON --target burst 2>/tmp/build_err.log | tail -n1)
[ -x "$build/burst" ] || { echo "BUILD FAILED"; tail -40 /tmp/build_err.log; exit 1; }
echo "bootstrap + build: $(( $(date +%s) - t0 )) s"
left=$(( ${BUDGET:-560} - ($(date +%s) - t0) ))
echo "training with a limit of $left s"
timeout "$left" mpiexec -n 1 "$build/burst" train --config experiments/configs/passkey_h200.toml "$@"
echo "train exit $? after $(( $(date +%s) - t0 )) s"
cp experiments/results/h200/passkey_h200_log.h5 "$OUT/" 2>/dev/null
date -u
