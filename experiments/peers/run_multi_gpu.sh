#!/bin/bash
# Issue 8's runs on one machine of 2-8 GPUs (device kinds nvidia-h200-x2/x4/x8),
# one device call per part (each within the tool's 10 minutes), carry
# [".offline"] (scripts/bootstrap.sh --fetch-only .offline, here, once):
#   PART=check OUT=$OUT experiments/peers/run_multi_gpu.sh   build; attn-check bf16 over NCCL: every method x
#        causal / document x GQA 1 / 4 at 2, 4 and 8 GPUs (those the machine has), and the emulated 2 nodes x 4
#        double ring (BURST_GPUS_PER_NODE=4) for the ring family, USP and LoongTrain (~5 min)
#   PART=short OUT=$OUT ...   attention throughput per GPU at 2K-8K tokens per GPU: every method (bf16, 32 x 128,
#        MHA, causal zigzag), `burst bench attention` (total, compute-only, comm-only: the overlap), torch's
#        context_parallel on the same shapes, the model's prediction of each case
#   PART=long OUT=$OUT ...    the same at 16K-128K tokens per GPU (burst, ring, usp, loongtrain; torch CP)
#   PART=e2e BUDGET=585 OUT=$OUT ...   the paper's 7B at 1M tokens on 8 GPUs: burst, whole, fused loss, ZeRO-3,
#        bf16, one step (~5 min: the model predicts 313 s), with the model's prediction
#   PART=e2e METHOD=usp OUT=$OUT ...   the same for a baseline (the strongest that fits, by `burst simulate`)
# NCCL_NVLS_ENABLE=0 in every part (KINDS.md: NVLink multicast stays off). Each part's files come back
# as OUT/part_PART.tgz beside its console log (experiments/peers/compare_multi_gpu.py: untar them first).
# GPUS (default: nvidia-smi's count) caps the rank counts; BUILD=dir uses an
# existing build instead of bootstrapping and building (BUILD=build-host runs
# the flow on a CPU machine at toy sizes: CPU=1; add COMM=nccl-sim to run it
# through the NCCL backend over the host build's simulated NCCL). On a machine still warm from
# the previous part, BUILD=build-cuda skips the bootstrap and the build (each
# part otherwise rebuilds: ~2 min of the call, too much for e2e's step).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/multi_gpu_out}
PART=${PART:-check}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run_part$PART.log") 2>&1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_PROC_BIND=false NCCL_NVLS_ENABLE=0
export BURST_JOBS=${BURST_JOBS:-$(nproc)} PYTHONUNBUFFERED=1
date -u
# Every part's files but its console log go into OUT/part_PART.tgz when the
# script exits, however it exits: the device tool returns only a few files
# per call (a lab run's were lost to that limit on 2026-12-05).
. experiments/peers/pack.sh
trap 'pack_dir "$OUT" "part_$PART.tgz" "part_*.tgz" "run_part*.log"' EXIT
CPU=${CPU:-0}
if [ "$CPU" = 1 ]; then
  GPUS=${GPUS:-4}
  export BURST_COMM=${COMM:-mpi} OMP_NUM_THREADS=1  # COMM=nccl-sim: the NCCL backend's code over the simulated NCCL
else
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv
  nvidia-smi topo -m 2>/dev/null | head -12
  GPUS=${GPUS:-$(nvidia-smi -L | wc -l)}
  export BURST_COMM=nccl  # an error, not a silent fallback to MPI staging, if NCCL cannot serve a group
fi
t0=$(date +%s)
. experiments/peers/device_steps.sh
MPI="mpiexec"  # MPICH here; Open MPI on the GPU machines (no binding: one rank per GPU, OpenMP threads free)
mpiexec --version 2>&1 | grep -q "Open MPI" && MPI="mpiexec --oversubscribe --bind-to none"

build=${BUILD:-}
if [ -z "$build" ]; then
  step "bootstrap (Kokkos CUDA from .offline)" 120 scripts/bootstrap.sh --cuda --from .offline
  step "build (burst)" 240 scripts/build.sh --cuda --deps-include "$(pwd)/.offline/include" -DBURST_ENABLE_NCCL=ON --target burst
  build=build-cuda
fi
bin=$(pwd)/$build/burst
[ -x "$bin" ] || { echo "no $bin: stopping"; exit 1; }
ranks=()
for P in 2 4 8; do [ "$P" -le "$GPUS" ] && ranks+=("$P"); done
[ ${#ranks[@]} -gt 0 ] || { echo "fewer than 2 GPUs ($GPUS): nothing to run"; exit 1; }
PMAX=${ranks[-1]}
methods="ring burst loongtrain ulysses usp allgather"
cluster=experiments/clusters/h200_engine.toml  # predictions are those of H200 nodes (also with CPU=1)
calib=experiments/perf_calibration_h200_engine.toml  # this engine's block constants (calibrate_h200_engine.py)

if [ "$PART" = check ]; then
  # Sizes: 4096 tokens, 8 heads x 128 (GQA 4: 2 kv heads) on the GPU; toys on a CPU.
  S=${SEQ:-4096}; n=8; d=128
  [ "$CPU" = 1 ] && S=${SEQ:-256} d=64
  docs="$((S / 2)),$((S / 4 + 3)),$((S / 8 - 3)),$((S / 8))"  # 4 documents, one boundary off the tiles
  pass=0; fail=0; failed=()
  check() {  # check NAME ENV... -- ARGS...
    local name=$1; shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local l; l=$(left)
    if [ "$l" -lt 20 ]; then echo "SKIPPED $name (budget)"; failed+=("$name(skipped)"); fail=$((fail + 1)); return; fi
    env "${envs[@]}" timeout $(( l < 120 ? l : 120 )) $MPI "$@" >"$OUT/check.tmp" 2>&1
    local rc=$?
    if [ $rc = 0 ]; then
      pass=$((pass + 1)); echo "PASS $name (o, dq: $(grep -E 'max rel error (o|dq) ' "$OUT/check.tmp" | awk '{print $5}' | tr '\n' ' '))"
    else  # a refusal by the engine's validation (exit 2) is a failure too: every case here is meant to run
      fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name (exit $rc)"; tail -n 8 "$OUT/check.tmp"
    fi
    { echo "== $name: $*"; cat "$OUT/check.tmp"; } >>"$OUT/check_all.log"
  }
  for P in "${ranks[@]}"; do
    for m in $methods; do
      for mk in causal document; do
        for kv in $n $((n / 4)); do
          lay=zigzag; [ $mk = document ] && lay=document
          extra=(); [ $mk = document ] && extra=(--doc-lengths "$docs")
          [ $m = usp ] && extra+=(--hp 2)
          [ $m = loongtrain ] && extra+=(--inner 2)
          check "np$P $m $mk gqa$((n / kv))" BURST_GPUS_PER_NODE="$P" -- -n "$P" "$bin" attn-check --dtype bf16 --method $m \
            --seq "$S" --heads $n --kv-heads $kv --head-dim $d --layout $lay --mask $mk ${extra[@]+"${extra[@]}"}
        done
      done
    done
  done
  if [ "$PMAX" = 8 ]; then  # two emulated nodes of 4: the double ring and the hierarchical methods across them
    for m in ring burst usp loongtrain; do
      for mk in causal document; do
        lay=zigzag; [ $mk = document ] && lay=document
        extra=(--ring double); [ $m = usp ] && extra+=(--hp 4); [ $m = loongtrain ] && extra=(--inner 4)
        [ $mk = document ] && extra+=(--doc-lengths "$docs")
        check "np8 2x4 $m $mk" BURST_GPUS_PER_NODE=4 -- -n 8 "$bin" attn-check --dtype bf16 --method $m --seq "$S" \
          --heads $n --kv-heads $((n / 4)) --head-dim $d --layout $lay --mask $mk ${extra[@]+"${extra[@]}"}
      done
    done
  fi
  rm -f "$OUT/check.tmp"
  echo "attn-check bf16 over ${BURST_COMM}: $pass passed, $fail failed ${failed[*]:-}"
  echo "PART check done in $(( $(date +%s) - t0 )) s"
  exit $(( fail > 0 ))
fi

# bench NAME PER_GPU_LIST METHODS REPEATS CAP: `burst bench attention` in bf16 at PMAX ranks, 32 x 128 MHA
# (toys on a CPU), causal zigzag, auto rings; then the model's prediction of every case into OUT/predict_NAME.log.
bench() {
  local name=$1 per=$2 ms=$3 reps=$4 cap=$5
  local n=32 d=128 seqs="" meth=""
  [ "$CPU" = 1 ] && n=4 d=64
  for t in $per; do seqs="$seqs${seqs:+,}$((t * PMAX))"; done
  for m in $ms; do meth="$meth${meth:+,}\"$m\""; done
  step "burst bench attention $name ($PMAX ranks, per GPU: $per)" "$cap" $MPI -n "$PMAX" "$bin" bench attention \
    --set "bench.methods=[$meth]" --set bench.dtype=bf16 --set "bench.seq=[$seqs]" --set bench.heads=$n \
    --set bench.kv_heads=$n --set bench.head_dim=$d --set bench.repeats="$reps" --set bench.warmup=1 \
    --set bench.hp=$((PMAX < 8 ? PMAX : 8)) --output "$OUT/attention_${name}_np$PMAX.h5"
  for m in $ms; do
    for t in $per; do
      echo "== predict $m $((t * PMAX)) tokens on $PMAX" >>"$OUT/predict_$name.log"
      "$bin" simulate --cluster $cluster --calibration $calib --attention-only --model 7B --method "$m" --seq $((t * PMAX)) --gpus "$PMAX" \
        >>"$OUT/predict_$name.log" 2>&1 || echo "(simulate failed)" >>"$OUT/predict_$name.log"
    done
  done
}
torch_cp() {  # torch_cp PER_GPU_LIST CAP
  if [ "$CPU" = 1 ]; then echo "== torch context_parallel: not on a CPU machine"; return 0; fi
  step "torch context_parallel (cuDNN SDPA), per GPU: $1" "$2" torchrun --standalone --nproc-per-node "$PMAX" \
    experiments/peers/torch_cp.py "$OUT" --per-gpu "$(echo "$1" | tr ' ' ',')" --heads 32 --kv-heads 32 --head-dim 128
}

if [ "$PART" = short ] || [ "$PART" = long ]; then
  if [ "$PART" = short ]; then  # every method; torch CP at the same sizes
    per="2048 4096 8192"; [ "$CPU" = 1 ] && per="64 128"
    peer_per=$per ms=$methods reps=3 cap=330
  else  # the ring family and USP (Ulysses / all-gather hold S x heads or all K,V); torch CP at 16K, 32K
    per="16384 32768 65536 131072"; [ "$CPU" = 1 ] && per="256"
    peer_per="16384 32768" ms="burst ring usp loongtrain" reps=1 cap=360
  fi
  torch_cp "$peer_per" 150
  bench "$PART" "$per" "$ms" "$reps" "$cap"
  echo "PART $PART done in $(( $(date +%s) - t0 )) s"
  exit 0
fi
if [ "$PART" = e2e ]; then
  M=${METHOD:-burst}
  cfg=experiments/configs/multi_gpu_7b_1m.toml
  sets=(--set parallel.method="$M" --set parallel.cp="$PMAX" --set io.run_log="$OUT/e2e_${M}_np$PMAX.h5" --set io.overwrite=true)
  [ "$CPU" = 1 ] && sets+=(--set model.preset=tiny --set train.seq_len=1024 --set train.dtype=float --set train.eval_seq_lens=[256])
  "$bin" simulate --cluster $cluster --calibration $calib --model 7B --seq 1M --gpus "$PMAX" --method "$M" --policy whole --zero 3 \
    > "$OUT/predict_e2e_$M.log" 2>&1; tail -n 6 "$OUT/predict_e2e_$M.log"
  STEP_TAIL=60 step "burst train 7B, 1M tokens, $M, $PMAX GPUs, 1 step" 560 $MPI -n "$PMAX" "$bin" train --config "$cfg" "${sets[@]}"
  echo "PART e2e done in $(( $(date +%s) - t0 )) s"
  exit 0
fi
echo "unknown PART=$PART (check, short, long, e2e)"
exit 2
