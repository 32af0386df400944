#!/bin/bash
# Device diagnostic (2026-12-04): bf16 distributed attention segfaults on the
# CUDA build (attn-check --dtype bf16, test_dist_attention Bf16*). Builds
# burst, runs attn-check bf16 across kernel choices, head dims and masks, and
# takes a host backtrace with cuda-gdb (no gdb on the GPU machine).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/diag}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/diag.log") 2>&1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_PROC_BIND=false BURST_JOBS=$(nproc)
t0=$(date +%s)
scripts/bootstrap.sh --cuda --from .offline >/tmp/boot.log 2>&1 || { tail -20 /tmp/boot.log; exit 1; }
scripts/build.sh --cuda --deps-include "$(pwd)/.offline/include" -DBURST_ENABLE_NCCL=ON --target burst >/tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
b=build-cuda/burst
run() { echo "== $*"; timeout 60 "$@" 2>&1 | grep -E "max rel|PASS|FAIL|rror|Segm|signal" | head -8; }
for env in "X=1" "BURST_FA_FORWARD=mma BURST_FA_BACKWARD=mma" "BURST_FA_FORWARD=wgmma BURST_FA_BACKWARD=wgmma"; do
  for hd in 64 32; do for mask in full causal; do
    run env $env mpiexec -n 1 $b attn-check --dtype bf16 --method burst --seq 256 --heads 4 --kv-heads 2 --head-dim $hd --mask $mask --layout contiguous
  done; done
done
run mpiexec -n 1 $b attn-check --dtype float --method burst --seq 256 --heads 4 --kv-heads 2 --head-dim 64
run mpiexec -n 2 $b attn-check --dtype bf16 --method ulysses --seq 256 --heads 4 --kv-heads 2 --head-dim 64
echo "== cuda-gdb backtrace"
timeout 120 cuda-gdb -batch -ex run -ex bt -ex "info registers rip" --args $b attn-check --dtype bf16 --method burst --seq 256 --heads 4 --kv-heads 2 --head-dim 64 2>&1 | grep -vE "^\[New Thread|^\[Thread|Detaching" | tail -40
echo "done $(( $(date +%s) - t0 )) s"
