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
for st in $stages; do  # every stage name checked before anything runs
  case "$st" in
    1|2|control) ;;
    *) echo "demo.sh: unknown stage '$st' in BURST_DEMO_STAGES='$stages' (1, 2, control)" >&2; exit 2 ;;
  esac
done
"$here/bootstrap.sh" >/dev/null
build=$("$here/build.sh" | tail -n1)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_PROC_BIND=false
cd "$root"
res=experiments/results
# A stage's earlier run log and checkpoint are copied aside first and put back when the stage fails or
# is interrupted (Ctrl-C): a committed full log is never replaced by a partial one.
inflight=""  # the running stage's backup directory
restore() {
  [ -n "$inflight" ] || return 0
  local f
  for f in "${outputs[@]}"; do
    if [ -e "$inflight/$f.absent" ]; then rm -f "$res/$f"; elif [ -e "$inflight/$f" ]; then mv -f "$inflight/$f" "$res/$f"; fi
  done
  rm -rf "$inflight"
  echo "demo.sh: the stage did not finish; its earlier outputs (${outputs[*]}) were kept" >&2
}
trap restore EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# stage OUTPUTS ARGS...: `mpiexec -n 4 burst train ARGS`, OUTPUTS (files under experiments/results) kept on failure
stage() {
  read -r -a outputs <<<"$1"; shift
  local bk=$res/demo_stage.$$.tmp f
  rm -rf "$bk"; mkdir -p "$bk"
  for f in "${outputs[@]}"; do
    if [ -e "$res/$f" ]; then cp -p "$res/$f" "$bk/$f"; else : > "$bk/$f.absent"; fi
  done
  inflight=$bk
  mpiexec -n 4 "$build/burst" train "$@"
  inflight=""
  rm -rf "$bk"
  logs+=("$res/${outputs[0]}")
}
mpiexec -n 4 "$build/burst" info
logs=()
for st in $stages; do
  case "$st" in
    1) stage "passkey_tiny_log.h5 passkey_tiny_ckpt.h5" --config experiments/configs/passkey_tiny.toml --set io.overwrite=true ;;
    2) stage "passkey_long_log.h5 passkey_long_ckpt.h5" --config experiments/configs/passkey_long.toml --set io.overwrite=true ;;
    control) stage "passkey_tiny_window4_log.h5" --config experiments/configs/passkey_tiny.toml \
               --set train.attention_window=4 --set train.steps=500 \
               --set io.run_log=experiments/results/passkey_tiny_window4_log.h5 --set io.checkpoint= --set io.overwrite=true ;;
  esac
done
"${BURST_PYTHON:-/usr/bin/python3}" "$root/paper_figs/h5_summary.py" "${logs[@]}"
