#!/bin/bash
# The passkey task at 16K-64K tokens on the H200, in one device call: build
# the CUDA engine (a no-op when the machine is still warm from a previous
# call), train stage 2 from the stage-1 checkpoint made on the CPU machine,
# evaluating at 16K, 32K and 64K tokens; then, with the time left, the gpu
# tests of the trainer and the model (the longest ones).
#
# Here (CPU machine), before the call (~5 min on 2 cores):
#   mpiexec -n 4 build-host/burst train --config experiments/configs/passkey_h64_stage1.toml
# Device tool, carry [".offline", "experiments/results/passkey_h64_stage1_ckpt.h5"]:
#   OUT=$OUT experiments/peers/passkey_h200.sh
# CONFIG / CKPT select another pair (the 2026-12-03 run: passkey_h200.toml,
# the 16-wide-head tiny model in float, checkpoint passkey_h200_stage1_ckpt.h5).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/h200_out}
CONFIG=${CONFIG:-experiments/configs/passkey_h64_h200.toml}
CKPT=${CKPT:-experiments/results/passkey_h64_stage1_ckpt.h5}
mkdir -p "$OUT" experiments/results/h200
exec > >(tee -a "$OUT/passkey_h200.log") 2>&1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_PROC_BIND=false
export BURST_JOBS=${BURST_JOBS:-$(nproc)}
date -u
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv
t0=$(date +%s)
[ -f "$CKPT" ] || { echo "no stage-1 checkpoint $CKPT (carry it)"; exit 1; }
scripts/bootstrap.sh --cuda --from .offline >/tmp/bootstrap.log 2>&1 || { echo "BOOTSTRAP FAILED"; tail -30 /tmp/bootstrap.log; exit 1; }
build=$(scripts/build.sh --cuda --deps-include "$(pwd)/.offline/include" -DBURST_ENABLE_NCCL=ON 2>/tmp/build_err.log | tail -n1)
[ -x "$build/burst" ] || { echo "BUILD FAILED"; tail -40 /tmp/build_err.log; exit 1; }
echo "bootstrap + build: $(( $(date +%s) - t0 )) s"
BUDGET=${BUDGET:-570}
left=$(( BUDGET - ($(date +%s) - t0) ))
echo "training with a limit of $left s"
log=$(sed -n 's/^run_log *= *"\(.*\)"/\1/p' "$CONFIG")
# a --set io.run_log=... among the arguments names the log this run writes
prev=""
for a in "$@"; do
  [ "$prev" = "--set" ] && case "$a" in io.run_log=*) log=${a#io.run_log=} ;; esac
  prev=$a
done
timeout "$left" mpiexec -n 1 "$build/burst" train --config "$CONFIG" --set model.init_from="$CKPT" --set io.overwrite=true "$@"
echo "train exit $? after $(( $(date +%s) - t0 )) s"
cp "$log" "$OUT/" 2>/dev/null
left=$(( BUDGET - ($(date +%s) - t0) ))
if [ "$left" -gt 60 ] && [ -z "${NO_TESTS:-}" ]; then
  echo "gpu tests of the trainer and the model (limit $left s)"
  (cd "$build" && timeout "$left" ctest -j 8 --output-on-failure -L gpu -LE long -R 'test_train|test_model' \
     > "$OUT/gpu_tests_train_model.log" 2>&1; echo "ctest exit $?"; grep -E "tests passed|Passed|Failed|Timeout" "$OUT/gpu_tests_train_model.log" | tail -12)
fi
date -u
