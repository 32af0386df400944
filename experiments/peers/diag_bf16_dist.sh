#!/bin/bash
# Device diagnostic (2026-12-04): bf16 distributed attention segfaulted on the
# CUDA build at head dim 64 (jump to address 0 on the host; head dim 32, the
# portable kernel, passed). Builds burst and test_dist_attention, runs
# attn-check bf16 at 1-4 ranks and the Bf16 distributed tests at 1-8 ranks;
# on a crash, the stack words and their symbols through cuda-gdb (no gdb on
# the GPU machine).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/diag}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/diag.log") 2>&1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_PROC_BIND=false BURST_JOBS=$(nproc)
t0=$(date +%s)
scripts/bootstrap.sh --cuda --from .offline >/tmp/boot.log 2>&1 || { tail -20 /tmp/boot.log; exit 1; }
scripts/build.sh --cuda --deps-include "$(pwd)/.offline/include" -DBURST_ENABLE_NCCL=ON --target burst --target test_dist_attention \
  >/tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
b=build-cuda/burst
crash=0
for P in 1 2 4; do
  echo "== attn-check bf16 burst zigzag causal d64, $P ranks"
  timeout 40 mpiexec -n $P $b attn-check --dtype bf16 --method burst --seq 256 --heads 4 --kv-heads 2 --head-dim 64 \
    --layout zigzag --mask causal > /tmp/ac.log 2>&1 || crash=1
  grep -E "max rel|PASS|FAIL|rror|Segm" /tmp/ac.log | head -8
done
if [ $crash = 1 ]; then
  timeout 60 cuda-gdb -batch -ex run -ex 'x/24gx $sp' --args $b attn-check --dtype bf16 --method burst --seq 256 --heads 4 \
    --kv-heads 2 --head-dim 64 2>&1 | grep -E "^0x" > /tmp/stack.txt
  cat /tmp/stack.txt
  for a in $(grep -oE "0x0000[0-9a-f]{12}" /tmp/stack.txt | sort -u | head -40); do
    s=$(timeout 5 cuda-gdb -batch -ex "info symbol $a" $b 2>/dev/null | grep -v "No symbol" | tail -1); [ -n "$s" ] && echo "$a $s"
  done
else
  cd build-cuda
  for P in 1 2 4 8; do
    echo "== test_dist_attention Bf16 at $P ranks"
    BURST_POISON=1 timeout 60 mpiexec -n $P --oversubscribe tests/test_dist_attention --gtest_filter='*Bf16*' 2>&1 | grep -E "OK \]|FAILED|Failure|Segm" | head -5
  done
fi
echo "done $(( $(date +%s) - t0 )) s"
