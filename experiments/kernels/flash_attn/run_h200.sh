#!/bin/bash
# One device call: build with nvcc there (ptxas report kept), check
# correctness against the fp64 GPU reference, time every variant, time torch's
# FLASH and cuDNN SDPA on the same shapes, print the side-by-side table last.
#   OUT=dir [SIZES=4096,8192,16384,32768] [REPS_MS=300] [CHECK=1] [WGMMA=1] [BWGMMA=1] [MAIN=1] [PEERS=1]
#       [PACK=1] [WG_FWD=4,7,9,10] [WG_BWD=4,6,7,8,9,10,11 (9,10,11 with MAIN=0)] [LAB_SOME=0]
#       experiments/kernels/flash_attn/run_h200.sh
# The wgmma forward (variants 4, 5; 6 = the settled V-descriptor diagnostic;
# 7 = TMA + warp-specialised ping-pong, flash_fwd_tma_ws.cuh; all in
# flash_fwd_wgmma_d{64,128}.cu; 8, 9 = the trap-free and the overlapped variant 7, flash_fwd_tma_ws.cuh MODE 1, 2; 10 = 9 with 3 K/V stages; 11 = 10 on a persistent grid, flash_fwd_persist.cuh, d128 only; 12 = 10 with the descriptor diet and the sleeping producer, MODE 2 | kFwdDiet; 13 = 11 with 12's diet; 14 = 12 with both rows' softmax interleaved, | kFwdSoftIL; 15 = 14 with a quarter of exp2 on the FMA pipe, | kFwdPolyExp; 16 = 12 without the ping-pong barriers, | kFwdNoPingPong; 17 = 12 with 176-key tiles and 2 stages, d128 only; 18 = 17 without the ping-pong; default 4,7,9,10: variant 4 is the same-call baseline) and the wgmma backward (variants 4, 5, 6; 5 = the
# dS-layout diagnostic; flash_bwd_wgmma_d{64,128}.cu), all built for sm_90a,
# are checked and timed in their own bench_attn processes (OUT/wgmma/,
# OUT/wgmma_bwd/), so that a fault there cannot take the other results with
# it; their time.csv rows are then merged into OUT/time.csv for the table.
# Quick mode (wgmma only + the mma.sync default backward 2 as the same-process
# baseline + peers): MAIN=0.
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/fa_out}
BUILD=${BUILD:-/tmp/fa_build}
mkdir -p "$OUT" "$BUILD"
LOG=$OUT/run.log
# PACK=1: everything under OUT but the console log into OUT/pack.tgz (pack_dir).
. ../../peers/pack.sh
pack_out() {  # console log name
  [ -n "${PACK:-}" ] || return 0
  pack_dir "$OUT" pack.tgz "$1"
}
exec > >(tee -a "$LOG") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used --format=csv
nvcc --version | tail -1
FLAGS="-O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -lineinfo"
FLAGS_90A="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -lineinfo"
# LAB_SOME=1 (ab_h200.sh's default): compile only the variants WG_FWD / WG_BWD list (and forward 0, the
# backward check's start; with MAIN=1 the mma.sync 0-3 the main process times), flash_api.cuh: the build of
# every variant took ~115 s of a call, the d128 wgmma forward's 18 variants most of it.
if [ "${LAB_SOME:-0}" = 1 ]; then
  defs="-DLAB_SOME"
  for v in ${WG_FWD:-4,7,9,10} $([ "${MAIN:-1}" = 1 ] && echo 1,2,3); do
    for x in ${v//,/ }; do [ "$x" -ge 0 ] 2>/dev/null && defs+=" -DLAB_FWD_$x=1"; done
  done
  for v in ${WG_BWD:-$([ "${MAIN:-1}" = 1 ] && echo 4,6,7,8,9,10,11 || echo 9,10,11)} $([ "${MAIN:-1}" = 1 ] && echo 1,2,3); do
    for x in ${v//,/ }; do [ "$x" -ge 0 ] 2>/dev/null && defs+=" -DLAB_BWD_$x=1"; done
  done
  echo "LAB_SOME: $defs"
  FLAGS="$FLAGS $defs"; FLAGS_90A="$FLAGS_90A $defs"
fi
t0=$(date +%s)
pids=()
SRCS="flash_attn bench_attn flash_fwd_d64 flash_fwd_d128 flash_bwd_d64 flash_bwd_d128"
SRCS_90A="flash_fwd_wgmma_d64 flash_fwd_wgmma_d128 flash_bwd_wgmma_d64 flash_bwd_wgmma_d128"  # wgmma / sm_90a only
for f in $SRCS; do
  nvcc $FLAGS -c $f.cu -o "$BUILD/$f.o" > "$BUILD/$f.ptxas" 2>&1 &
  pids+=($!)
done
for f in $SRCS_90A; do
  nvcc $FLAGS_90A -c $f.cu -o "$BUILD/$f.o" > "$BUILD/$f.ptxas" 2>&1 &
  pids+=($!)
done
SRCS="$SRCS $SRCS_90A"
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
for f in $SRCS; do echo "=== $f.cu"; cat "$BUILD/$f.ptxas"; done > "$OUT/ptxas.txt"
if [ $fail -ne 0 ]; then echo "BUILD FAILED"; grep -B2 -A5 error "$OUT/ptxas.txt" | head -50; exit 1; fi
nvcc -gencode=arch=compute_90,code=sm_90 $(for f in $SRCS; do echo "$BUILD/$f.o"; done) -o "$BUILD/bench_attn" || { echo "LINK FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
grep -A3 "Compiling entry function '_ZN8burst_fa3dev[0-9]*flash_" "$OUT/ptxas.txt" | grep -E "Compiling|spill|Used" \
  | sed -e 's/ptxas info    : //' -e "s/Compiling entry function '_ZN8burst_fa3dev[0-9]*//" | paste - - - | cut -c1-200
SIZES=${SIZES:-4096,8192,16384,32768}; REPS_MS=${REPS_MS:-300}
MODE="--time"; [ "${CHECK:-1}" = 1 ] && MODE="--check --time"
for f in flash_fwd_d128 flash_bwd_d128 flash_fwd_wgmma_d64 flash_fwd_wgmma_d128 flash_bwd_wgmma_d64 flash_bwd_wgmma_d128; do
  cuobjdump --dump-sass "$BUILD/$f.o" > "$BUILD/$f.sass" 2>&1
  echo "$f.o SASS: HMMA $(grep -c HMMA "$BUILD/$f.sass"), HGMMA $(grep -c HGMMA "$BUILD/$f.sass"), LDSM $(grep -c LDSM "$BUILD/$f.sass"), local LDL/STL $(grep -cE 'LDL|STL' "$BUILD/$f.sass"), UTMALDG $(grep -c UTMALDG "$BUILD/$f.sass"), SYNCS $(grep -c SYNCS "$BUILD/$f.sass")"
done
# wgmma forward first, in its own process (no backward)
if [ "${WGMMA:-1}" = 1 ]; then
  mkdir -p "$OUT/wgmma"
  timeout 300 "$BUILD/bench_attn" --out "$OUT/wgmma" $MODE --gqa-time --sizes "$SIZES" --reps-ms "$REPS_MS" \
    --fwd-variants "${WG_FWD:-4,7,9,10}" --no-bwd
  echo "bench_attn (wgmma fwd) exit $? (0 ok, 1 check failed, 3 fault, 124 timeout)"
fi
# wgmma backward, in its own process (no forward variant timed; the check's lse
# comes from mma.sync forward 0). diag_nodq rows of variants 4-11 = without the
# dQ atomics (7-11: without the dQ staging + bulk reduce-add) only; the dQ product
# still runs. Default variants: 4,6,7,8,9,10,11 (9,10,11 with MAIN=0: the
# TMA backward of flash_bwd_tma_ws.cuh, 11 = 10 with the dQ staging free of
# bank conflicts, beside its baselines); 4,5,...,11 brings back everything.
if [ "${BWGMMA:-1}" = 1 ]; then
  for f in flash_bwd_wgmma_d64 flash_bwd_wgmma_d128; do
    echo "$f.o SASS: UTMAREDG (bulk tensor reduce, variants 7-11) $(grep -c UTMAREDG "$BUILD/$f.sass"), REDG.E.ADD (atomics, 4-6) $(grep -c 'REDG.E.ADD' "$BUILD/$f.sass"), USETMAXREG (variants 8-11) $(grep -c USETMAXREG "$BUILD/$f.sass"), BPT (trap) $(grep -c BPT "$BUILD/$f.sass")"
  done
  WG_BWD=${WG_BWD:-$([ "${MAIN:-1}" = 1 ] && echo 4,6,7,8,9,10,11 || echo 9,10,11)}
  mkdir -p "$OUT/wgmma_bwd"
  timeout 300 "$BUILD/bench_attn" --out "$OUT/wgmma_bwd" $MODE --gqa-time --sizes "$SIZES" --reps-ms "$REPS_MS" \
    --fwd-variants -1 --bwd-variants "$WG_BWD"
  echo "bench_attn (wgmma bwd) exit $? (0 ok, 1 check failed, 3 fault, 124 timeout)"
  echo "wgmma bwd FAIL lines: $(grep -c "^FAIL.*bwd wgmma" "$OUT/run.log")"
fi
# the mma.sync variants (forward 0-3, every backward) in the main process
if [ "${MAIN:-1}" = 1 ]; then
  "$BUILD/bench_attn" --out "$OUT" $MODE --gqa-time --sizes "$SIZES" --reps-ms "$REPS_MS" --fwd-variants 0,1,2,3 --bwd-variants 0,1,2,3
  echo "bench_attn exit $?"
else
  echo "impl,kernel,sq,sk,n,nkv,d,causal,ms,tflops" > "$OUT/time.csv"
fi
[ -f "$OUT/wgmma/time.csv" ] && tail -n +2 "$OUT/wgmma/time.csv" >> "$OUT/time.csv"
[ -f "$OUT/wgmma_bwd/time.csv" ] && grep -v ",rowsum," "$OUT/wgmma_bwd/time.csv" | tail -n +2 >> "$OUT/time.csv"
if [ "${PEERS:-1}" = 1 ]; then
  PYTHONUNBUFFERED=1 python3 peers_sdpa.py "$OUT" --gqa-time --sizes "$SIZES" --reps-ms "$REPS_MS" 2>&1 | grep -v Warning
fi
python3 summarize.py "$OUT"
date -u
pack_out run.log
