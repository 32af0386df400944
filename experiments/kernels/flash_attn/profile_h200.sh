#!/bin/bash
# One device call: Nsight Compute profiles (hardware counters, `--set full`,
# clocks left alone) of our wgmma backward variants and of cuDNN's SDPA
# backward on the same shape, as text, to see where the backward's time goes
# (tensor-pipe activity, shared-memory traffic, warp stall reasons).
#   OUT=dir [PACK=1] [S=16384] [MASKS=full] [VARS=11] [FWD_VARS=] [CUDNN=1] experiments/kernels/flash_attn/profile_h200.sh
# VARS: backward variants, FWD_VARS: forward variants (none by default),
# MASKS: full and / or causal (one report per variant and mask: ncu_{bwd,fwd}_v<V>[_causal].txt),
# CUDNN=0 skips the cuDNN backward profile (full mask only).
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/fa_prof}
BUILD=${BUILD:-/tmp/fa_build}
S=${S:-16384}
VARS=${VARS-11}  # VARS= (empty) profiles no backward
mkdir -p "$OUT"
exec > >(tee -a "$OUT/profile.log") 2>&1
# PACK=1: everything under OUT but the console log into OUT/pack.tgz (pack_dir).
. ../../peers/pack.sh
pack_out() {  # console log name
  [ -n "${PACK:-}" ] || return 0
  pack_dir "$OUT" pack.tgz "$1"
}
# build only (run_h200.sh with every run switched off)
PACK= WGMMA=0 BWGMMA=0 MAIN=0 PEERS=0 OUT="$OUT/build" BUILD="$BUILD" ./run_h200.sh > "$OUT/build.log" 2>&1
[ -x "$BUILD/bench_attn" ] || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
NCU="ncu --clock-control none --set full --import-source no"
# report -> the details page with every section's tables (stall reasons included) and the per-SASS source page
show() {  # report name
  ncu -i "$OUT/$1.ncu-rep" --page details --print-details all > "$OUT/ncu_$1.txt" 2>&1
  ncu -i "$OUT/$1.ncu-rep" --page source --print-source sass --csv 2>&1 | gzip > "$OUT/ncu_$1_sass.csv.gz"
  rm -f "$OUT/$1.ncu-rep"
  echo "ncu $1: $(wc -l < "$OUT/ncu_$1.txt") lines, sass page $(stat -c %s "$OUT/ncu_$1_sass.csv.gz") bytes gz"
}
MASKS=${MASKS:-full}
for mk in ${MASKS//,/ }; do
  sfx=$([ "$mk" = full ] || echo "_$mk")
  for v in ${VARS:+${VARS//,/ }}; do
    # the first launch of the variant's backward kernel: this mask, S x S, 32 x 128
    timeout 200 $NCU -o "$OUT/bwd_v$v$sfx" -k regex:"flash_bwd_(tma_ws|wgmma)_kernel" -c 1 "$BUILD/bench_attn" --time --sizes "$S" \
      --masks "$mk" --reps-ms 1 --fwd-variants -1 --bwd-variants "$v" --no-diag > "$OUT/ncu_run_v$v$sfx.log" 2>&1
    echo "ncu ours variant $v ($mk) exit $?"; show "bwd_v$v$sfx"
  done
  for v in ${FWD_VARS:+${FWD_VARS//,/ }}; do
    timeout 200 $NCU -o "$OUT/fwd_v$v$sfx" -k regex:"flash_fwd_(tma_ws|wgmma|persist)_kernel" -c 1 "$BUILD/bench_attn" --time --sizes "$S" \
      --masks "$mk" --reps-ms 1 --fwd-variants "$v" --no-bwd --no-diag > "$OUT/ncu_run_fwd_v$v$sfx.log" 2>&1
    echo "ncu ours forward variant $v ($mk) exit $?"; show "fwd_v$v$sfx"
  done
done
[ "${CUDNN:-1}" = 1 ] || { pack_out profile.log; exit 0; }
# cuDNN: its forward and backward kernels (the first launch of each, in the warm-up; the backward runs on
# autograd's thread, so an NVTX range of the main thread would miss it): by name
timeout 200 $NCU -o "$OUT/cudnn" -k regex:"(?i)sdpa.*(fprop|bprop)" -c 2 python3 tools/cudnn_bwd_once.py "$S" \
  > "$OUT/ncu_run_cudnn.log" 2>&1
echo "ncu cudnn exit $?"; show cudnn
grep -E "^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Shared Memory Config|Block Size|Grid Size" \
  "$OUT"/ncu_*.txt | head -80
pack_out profile.log
