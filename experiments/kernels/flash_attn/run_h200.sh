#!/bin/bash
# One device call: build with nvcc there (ptxas report kept), check
# correctness against the fp64 GPU reference, time every variant, time torch's
# FLASH and cuDNN SDPA on the same shapes, print the side-by-side table last.
#   OUT=dir [SIZES=4096,8192,16384,32768] [REPS_MS=300] [CHECK=1] experiments/kernels/flash_attn/run_h200.sh
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/fa_out}
BUILD=${BUILD:-/tmp/fa_build}
mkdir -p "$OUT" "$BUILD"
LOG=$OUT/run.log
exec > >(tee -a "$LOG") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used --format=csv
nvcc --version | tail -1
FLAGS="-O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -lineinfo"
t0=$(date +%s)
pids=()
SRCS="flash_attn bench_attn flash_fwd_d64 flash_fwd_d128 flash_bwd_d64 flash_bwd_d128"
for f in $SRCS; do
  nvcc $FLAGS -c $f.cu -o "$BUILD/$f.o" > "$BUILD/$f.ptxas" 2>&1 &
  pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
for f in $SRCS; do echo "=== $f.cu"; cat "$BUILD/$f.ptxas"; done > "$OUT/ptxas.txt"
if [ $fail -ne 0 ]; then echo "BUILD FAILED"; grep -B2 -A5 error "$OUT/ptxas.txt" | head -50; exit 1; fi
nvcc -gencode=arch=compute_90,code=sm_90 $(for f in $SRCS; do echo "$BUILD/$f.o"; done) -o "$BUILD/bench_attn" || { echo "LINK FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
grep -A2 "Compiling entry function '_ZN8burst_fa3dev16flash_" "$OUT/ptxas.txt" | grep -E "Compiling|spill|Used" \
  | sed -e 's/ptxas info    : //' -e "s/Compiling entry function '_ZN8burst_fa3dev16//" | paste - - - | cut -c1-200
SIZES=${SIZES:-4096,8192,16384,32768}; REPS_MS=${REPS_MS:-300}
MODE="--time"; [ "${CHECK:-1}" = 1 ] && MODE="--check --time"
for f in flash_fwd_d128 flash_bwd_d128; do
  echo "$f.o SASS: HMMA $(cuobjdump --dump-sass "$BUILD/$f.o" | grep -c HMMA), LDSM $(cuobjdump --dump-sass "$BUILD/$f.o" | grep -c LDSM), local LDL/STL $(cuobjdump --dump-sass "$BUILD/$f.o" | grep -cE 'LDL|STL')"
done
"$BUILD/bench_attn" --out "$OUT" $MODE --gqa-time --sizes "$SIZES" --reps-ms "$REPS_MS"
rc=$?
echo "bench_attn exit $rc"
PYTHONUNBUFFERED=1 python3 peers_sdpa.py "$OUT" --gqa-time --sizes "$SIZES" --reps-ms "$REPS_MS" 2>&1 | grep -v Warning
python3 summarize.py "$OUT"
date -u
