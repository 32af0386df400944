#!/usr/bin/env bash
# Build and run the cuBLASLt algorithm survey (gemm_algos.cu) on the GPU
# machine: OUT=dir experiments/kernels/gemm_algos/run.sh [gemm_algos args...]
# Writes $OUT/gemm_algos.csv (the program's output), $OUT/gemm_algos_clocks.csv
# (nvidia-smi every 200 ms while it runs) and $OUT/gemm_algos_summary.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/gemm_algos_out}
mkdir -p "$OUT"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$nvcc" -O2 -std=c++17 -arch=sm_90 "$here/gemm_algos.cu" -lcublasLt -o "$OUT/gemm_algos.bin"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/gemm_algos_clocks.csv" &
smi=$!
rc=0
"$OUT/gemm_algos.bin" "$@" > "$OUT/gemm_algos.csv" || rc=$?
kill $smi 2>/dev/null || true
rm -f "$OUT/gemm_algos.bin"
python3 "$here/summarize.py" "$OUT/gemm_algos.csv" | tee "$OUT/gemm_algos_summary.txt"
exit $rc
