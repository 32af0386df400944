#!/bin/bash
# One device call: an A/B of lab variants that survives a card whose clocks drift from row to row. Build and
# check (run_h200.sh, its timing trimmed to one round), then ROUNDS rounds of timing (bench_attn --rounds:
# each round times every listed variant once in turn; tools/ab_summary.py takes the medians), then the
# elapsed cycles and tensor-pipe activity of each variant under ncu (SpeedOfLight section only: a few
# passes), full and causal, at S x S.
#   OUT=dir [PACK=1] [SIZES=16384,32768] [ROUNDS=4] [S=16384] [FWD=12,17] [BWD=12,13,14,15] [NCU=1] [PEERS=0] [LAB_SOME=1]
#       experiments/kernels/flash_attn/ab_h200.sh
# FWD= / BWD= (empty) skip that direction. The first variant of each list is the base of the ratios.
# LAB_SOME=1 (the default here) compiles only the listed variants (run_h200.sh, flash_api.cuh); 0 builds all.
# PEERS=1: each round also times torch's cuDNN SDPA (peers_sdpa.py) on the same shapes, right after our
# variants, so "ours against cuDNN" is a median over rounds too (rows "fwd torch cuDNN", "bwd torch cuDNN").
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/fa_ab}
BUILD=${BUILD:-/tmp/fa_build}
SIZES=${SIZES:-16384,32768}; ROUNDS=${ROUNDS:-4}; S=${S:-16384}
FWD=${FWD-12,17}; BWD=${BWD-12,13,14,15}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/ab.log") 2>&1
. ../../peers/pack.sh
t0=$(date +%s)
# build + check of the listed variants (+ one timing round, kept in OUT/check/)
PACK= OUT="$OUT/check" BUILD="$BUILD" SIZES=4096 REPS_MS=50 MAIN=0 PEERS=0 LAB_SOME="${LAB_SOME:-1}" \
  WGMMA=$([ -n "$FWD" ] && echo 1 || echo 0) WG_FWD="${FWD:--1}" BWGMMA=$([ -n "$BWD" ] && echo 1 || echo 0) WG_BWD="${BWD:--1}" \
  ./run_h200.sh > "$OUT/check.log" 2>&1
grep -E "^CHECK|BUILD FAILED|LINK FAILED|exit [0-9]" "$OUT/check.log"
[ -x "$BUILD/bench_attn" ] || { echo "no bench_attn"; exit 1; }
echo "build + check: $(( $(date +%s) - t0 )) s"
mkdir -p "$OUT/rounds"
BENCH=("$BUILD/bench_attn" --time --sizes "$SIZES" --reps-ms 150 --no-diag --fwd-variants "${FWD:--1}" --bwd-variants "${BWD:--1}")
[ -n "$BWD" ] || BENCH+=(--no-bwd)
if [ "${PEERS:-0}" = 1 ]; then
  echo "impl,kernel,sq,sk,n,nkv,d,causal,ms,tflops" > "$OUT/rounds/time.csv"
  for r in $(seq "$ROUNDS"); do
    mkdir -p "$OUT/rounds/r$r"
    timeout 200 "${BENCH[@]}" --out "$OUT/rounds/r$r" > "$OUT/rounds/r$r/run.log" 2>&1 || echo "round $r: bench_attn exit $?"
    tail -n +2 "$OUT/rounds/r$r/time.csv" >> "$OUT/rounds/time.csv"
    PYTHONUNBUFFERED=1 timeout 200 python3 peers_sdpa.py "$OUT/rounds/r$r" --sizes "$SIZES" --reps-ms 150 > "$OUT/rounds/r$r/peers.log" 2>&1 \
      || echo "round $r: peers exit $?"
    [ -f "$OUT/rounds/r$r/peers.csv" ] && awk -F, 'BEGIN { OFS = "," } NR > 1 && $1 == "torch_cudnn" { $2 = $2 " torch cuDNN"; print }' \
      "$OUT/rounds/r$r/peers.csv" >> "$OUT/rounds/time.csv"
  done
else
  timeout 300 "${BENCH[@]}" --out "$OUT/rounds" --rounds "$ROUNDS" > "$OUT/rounds/run.log" 2>&1
fi
echo "rounds exit $? ($(( $(date +%s) - t0 )) s)"
python3 tools/ab_summary.py "$OUT/rounds/time.csv" | tee "$OUT/rounds/summary.txt"
if [ "${NCU:-1}" = 1 ]; then
  NCU_CMD="ncu --clock-control none --section SpeedOfLight --print-details all"
  for mk in full causal; do
    for v in ${BWD//,/ }; do
      timeout 60 $NCU_CMD -k regex:"flash_bwd_(tma_ws|wgmma)_kernel" -c 1 "$BUILD/bench_attn" --time --sizes "$S" --masks "$mk" \
        --reps-ms 1 --fwd-variants -1 --bwd-variants "$v" --no-diag > "$OUT/ncu_bwd_v${v}_$mk.txt" 2>&1
      echo "ncu bwd v$v $mk: $(grep -m1 'Elapsed Cycles' "$OUT/ncu_bwd_v${v}_$mk.txt" | awk '{print $NF}') cycles, tensor pipe" \
        "$(grep -m1 'Pipe Tensor Cycles Active' "$OUT/ncu_bwd_v${v}_$mk.txt" | awk '{print $NF}')%"
    done
    for v in ${FWD//,/ }; do
      timeout 60 $NCU_CMD -k regex:"flash_fwd_(tma_ws|wgmma|persist)_kernel" -c 1 "$BUILD/bench_attn" --time --sizes "$S" \
        --masks "$mk" --reps-ms 1 --fwd-variants "$v" --no-bwd --no-diag > "$OUT/ncu_fwd_v${v}_$mk.txt" 2>&1
      echo "ncu fwd v$v $mk: $(grep -m1 'Elapsed Cycles' "$OUT/ncu_fwd_v${v}_$mk.txt" | awk '{print $NF}') cycles, tensor pipe" \
        "$(grep -m1 'Pipe Tensor Cycles Active' "$OUT/ncu_fwd_v${v}_$mk.txt" | awk '{print $NF}')%"
    done
  done
fi
echo "ab_h200.sh done in $(( $(date +%s) - t0 )) s"
[ -n "${PACK:-}" ] && pack_dir "$OUT" pack.tgz ab.log
exit 0
