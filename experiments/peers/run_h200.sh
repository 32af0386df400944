#!/bin/bash
# One device call for issue 6: build the CUDA engine there, run the new GPU
# kernel tests, our benchmarks (GEMM through cuBLASLt at the LLaMA shapes,
# the fused LM head + cross-entropy) and the PyTorch peers on the same shapes
# in the same run, then print the side-by-side ratios last.
#
# Here (CPU machine), once:   scripts/bootstrap.sh --fetch-only .offline
# Then the device tool, from the repository root, carry [".offline"]:
#   PART=1 OUT=$OUT experiments/peers/run_h200.sh   build, kernel tests, benches, peers gemm+ce+kernels (~7 min)
#   PART=2 OUT=$OUT experiments/peers/run_h200.sh   every gpu test, peers sdpa + LLaMA block (eager, compile)
#   PART=4 OUT=$OUT experiments/peers/run_h200.sh   the wgmma forward in the engine: every gpu test, the block with
#                                                   the wgmma / mma.sync forward side by side, bench step 1B, torch block
#   PART=6 OUT=$OUT experiments/peers/run_h200.sh   the TMA flash kernels in the engine: torch block, build, the
#                                                   block TMA / cp.async side by side, bench step 1B 32K-128K,
#                                                   every gpu test but test_train / test_model
#                                                   (WGMMA_LAYERS=0 skips the cp.async-kernel rows;
#                                                   TESTS_RE / TESTS_CAP narrow the gpu tests)
#   PART=3 OUT=$OUT experiments/peers/run_h200.sh   the bf16 LLaMA block through the engine (`burst bench layer`,
#                                                   1B and 7B at 32K) beside the torch block (eager, compile),
#                                                   the gpu tests of that code; every step logged, a failing step
#                                                   does not stop the next, the whole call kept under ~9 min
#   PART=9 OUT=$OUT PASSKEY_ARGS=... ...            the untimed call: every gpu test beside the passkey stage 2
#   PART=10 OUT=$OUT experiments/peers/run_h200.sh  the timed call: lab backward variants, torch block and kernels,
#                                                   bench kernels / layer / step / gemm (beta 0, 1), ncu of the blocks
#   PART=14 OUT=$OUT BUDGET=590 experiments/peers/run_h200.sh   PART 12 + 13 trimmed into one call
#   PART=15 OUT=$OUT experiments/peers/run_h200.sh  the lab's variants 12 in the engine, A/B (BURST_FA_* = tma12):
#                                                    tests, the block and the 1B step both ways, the torch block
#   PART=16 OUT=$OUT BUDGET=590 [AB128=1] [AB64=1] [LONG=0]  build, the four longest gpu tests (not with LONG=0); with AB128=1 the
#                                                    d128 forward's 176-column default (variant 17) against the 128 x 128 variant 10
#                                                    (BURST_FA_FORWARD = tma128); with AB64=1 the d128 backward's 80-row default
#                                                    (variant 14) against the 64-row variant 11 (BURST_FA_BACKWARD = tma64)
#   PART=17 OUT=$OUT BUDGET=590 [STEP_TOKENS=[...]]  the figures of record on the defaults: build, the four longest gpu tests,
#                                                    every attention test, the torch block (eager, compile), the engine's block
#                                                    at 1B and 7B, the 1B step (32K and 128K), compare.py's ratios
#   PART=19 OUT=$OUT BUDGET=340 [STEP_TOKENS=[...]]  the figures of record in a short call: build, the 1B step, the torch block,
#                                                    the engine's blocks, compare.py, bench kernels, the changed code's gpu tests
#   PART=20 OUT=$OUT BUDGET=560                      the cuBLASLt algorithm choice: the lab survey (gemm_algos: every
#                                                    candidate of the block's 21 GEMM shapes alone, then the sequence with
#                                                    each choice), build, bench gemm / the blocks / the 1B step at 32K with
#                                                    BURST_GEMM_TUNE 0 and 1 alternating, the GEMM gpu tests
#   PART=18 OUT=$OUT BUDGET=590                      build, bench kernels (the LSE merges, the ring forward's step merged in
#                                                    the epilogue / as a partial), the tests of the merges, the uncounted
#                                                    attention calls and the ring packets, the 1B step at 32K
#   PART=21 OUT=$OUT BUDGET=560                      the launch in sections of heads (2026-12-07): the lab's A/B of the TMA
#                                                    kernels against the same launched head by head, cuDNN in the same rounds
#   PART=22 OUT=$OUT BUDGET=560                      build, the kernels' tests (attention ctests, the ring over MPI staging),
#                                                    bench kernels' ring step
#   PART=23 OUT=$OUT BUDGET=560 (after 22, warm)     the figures of record: the 1B step, the torch block, the blocks, compare.py,
#                                                    the lab's rates of the defaults at 4K and 32K beside cuDNN
#   PART=24 OUT=$OUT BUDGET=585                      PART 22 and 23 in one call (~520 s)
#   PART=28 OUT=$OUT BUDGET=500 [ROUNDS=5]           the block beside torch eager in alternating rounds (build burst, ~6 min)
#   PART=25 OUT=$OUT BUDGET=300                      the lab alone: the defaults and the sections' A/B beside cuDNN, 2K-32K
#                                                    (FWD= BWD= SIZES= narrow it; 79 s for 10,17 / 14 at 4K, 32K: LAB_SOME)
#   PART=27 OUT=$OUT BUDGET=585                      build, the kernels' tests, the lab's default rates at 4K / 32K (~420 s)
#   PART=26 OUT=$OUT BUDGET=300                      the lab alone: the cp.async / mma.sync kernels in sections of heads, A/B, 2K-8K
#                                                    (59 s with ROUNDS=2)
#   PART=12 then PART=13 (same warm machine)         the timed call (whole build, bench kernels, the block with
#                                                   the CUDA / portable RoPE, the 1B step, gemm beta 1), then every gpu test
#                                                   (after the torch block when the card is not an H200)
# (PART=2 rebuilds unless the machine is still warm from PART=1.)
# Copy what comes back under $OUT into experiments/results/h200/ (at most 6
# files per part: the device tool returns 8).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/h200_out}
PART=${PART:-1}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run_part$PART.log") 2>&1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_PROC_BIND=false
export BURST_JOBS=${BURST_JOBS:-$(nproc)} PYTHONUNBUFFERED=1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used --format=csv
t0=$(date +%s)
# The budget (BUDGET, default 530 s) and `step NAME CAP CMD...`: device_steps.sh.
. experiments/peers/device_steps.sh
. experiments/peers/pack.sh  # pack_dir
# layer32k NOTE CAP FILE [VAR=VALUE ...]: `burst bench layer` of preset $m
# (the caller's loop variable), bf16, 32K tokens, 5 repeats after 1 warmup,
# into $OUT/FILE, with the environment given; a step named after NOTE.
layer32k() {
  local note=$1 cap=$2 file=$3; shift 3
  step "burst bench layer $m bf16 32K$note" "$cap" env "$@" "$build/burst" bench layer --set bench.preset=$m \
    --set bench.tokens=32768 --set bench.dtype=bf16 --set bench.repeats=5 --set bench.warmup=1 --output "$OUT/$file"
}
# gemm_llama BETA CAP: `burst bench gemm` at the LLaMA shapes, bf16 -> fp32,
# C = A B (beta 0) or C += A B (beta 1, as the weight gradients), into $OUT.
gemm_llama() {
  step "bench gemm LLaMA shapes bf16 -> fp32, beta $1" "$2" "$build/burst" bench gemm --set bench.dtype=bf16 \
    --set bench.out_dtype=float --set bench.beta="$1" --set bench.squares=false --set bench.llama=true \
    --set bench.repeats=5 --output "$OUT/gemm_llama_f32out_beta$1.h5"
}
# build_everything [BUILD_CAP [BOOT_CAP]]: Kokkos CUDA from .offline, then the
# whole engine and its tests into build-cuda (two steps, caps 300 / 120 s by
# default); sets $build.
build_everything() {
  step "bootstrap (Kokkos CUDA from .offline)" "${2:-120}" scripts/bootstrap.sh --cuda --from .offline
  step "build (everything)" "${1:-300}" scripts/build.sh --cuda --deps-include "$(pwd)/.offline/include" -DBURST_ENABLE_NCCL=ON
  build=$(pwd)/build-cuda
}
# step_1b TOKENS CAP [NOTE FILE [VAR=VALUE ...]]: `burst bench step` of the
# 1B preset, bf16, whole, at TOKENS (a TOML array), 2 repeats after 1 warmup,
# into $OUT/FILE (default step_1B_bf16.h5), with the environment given.
step_1b() {
  local tokens=$1 cap=$2 note=${3:-" (the embedding_backward phase: v3, sorted, against v1's 15.7 ms)"}
  local file=${4:-step_1B_bf16.h5}
  shift $(( $# < 4 ? $# : 4 ))
  step "burst bench step 1B bf16 whole, tokens $tokens$note" "$cap" env "$@" \
    "$build/burst" bench step --set bench.preset=1B --set "bench.tokens=$tokens" --set bench.dtype=bf16 \
    --set bench.activation=whole --set bench.repeats=2 --set bench.warmup=1 --output "$OUT/$file"
}
# part_done [h5]: the part's end: with h5, its .h5 files into $OUT/partN_h5.tar;
# the time it took; exit 0.
part_done() {
  [ "${1:-}" = h5 ] && (cd "$OUT" && ls *.h5 >/dev/null 2>&1 && tar cf "part${PART}_h5.tar" *.h5 && rm -f *.h5)
  # A lab A/B cut by its step's cap never packed its directory, whose nested
  # files the device tool does not return (the 2026-12-07 15:04 call lost
  # ab7's first timing round that way): packed here, as ab_h200.sh would.
  local d
  for d in "$OUT"/ab*/; do
    [ -d "$d" ] && [ ! -f "$d/pack.tgz" ] && pack_dir "${d%/}" pack.tgz ab.log
  done
  echo "PART $PART done in $(( $(date +%s) - t0 )) s"
  date -u
  exit 0
}
# torch_block CAP: the torch LLaMA block (eager, compile) at 1B and 7B, 32K,
# on this card (the peer of the calls' `bench layer`), into $OUT/peers_block.json.
torch_block() {
  step "torch LLaMA block (eager, compile) 1B and 7B at 32K (the peer on this same card)" "$1" \
    python3 experiments/peers/peers.py "$OUT" --only block --tokens 32768
}
# gpu_tests JOBS: every gpu test (label gpu, not long) in the time left, the
# log in $OUT/gpu_tests.log.
gpu_tests() {
  step "every gpu test" $(( $(left) - 10 )) bash -c "cd '$build' && ctest -j $1 --output-on-failure -L gpu -LE long \
    > '$OUT/gpu_tests.log' 2>&1; rc=\$?; tail -n 30 '$OUT/gpu_tests.log'; exit \$rc"
}
# kernel_tests CAP: the flash kernels' tests (every attention kernel ctest:
# each variant, every mask kind, GQA, the merging epilogue; the ring family
# over MPI staging at 2 and 4 ranks; test_kernels_cuda), log in $OUT.
kernel_tests() {
  step "tests of the kernels (attention ctests, the ring over MPI staging, kernels_cuda)" "$1" bash -c "cd '$build' && ctest -j 6 \
    --output-on-failure -R 'test_kernels_cuda_np1|test_kernels_attention_cuda|test_dist_attention_np[24]' \
    > '$OUT/tests_kernels.log' 2>&1; rc=\$?; tail -n 20 '$OUT/tests_kernels.log'; exit \$rc"
}
# ncu_block M: Nsight Compute's duration and DRAM bytes of every kernel of one
# block of preset M, forward + backward at 32K (the NVTX range block_fwd_bwd of
# bench layer's first timed round), summarised by ncu_kernels_summary.py.
ncu_block() {
  local m=$1 csv=$OUT/ncu_layer_$1.csv
  step "ncu: every kernel of one $m block fwd + bwd, 32K" 80 ncu --clock-control none --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --nvtx --nvtx-include "block_fwd_bwd/" \
    --log-file "$csv" "$build/burst" bench layer --set bench.preset=$m --set bench.tokens=32768 \
    --set bench.dtype=bf16 --set bench.repeats=1 --set bench.warmup=0 --set bench.check_tokens=0 \
    --set bench.phases=false --output "$OUT/layer_${m}_ncu.h5"
  python3 experiments/peers/ncu_kernels_summary.py "$csv" > "$OUT/ncu_layer_${m}_summary.txt" 2>&1
  head -n 30 "$OUT/ncu_layer_${m}_summary.txt"
  gzip -f "$csv"
}
if [ "$PART" = 21 ]; then
  # The TMA flash kernels launched in sections of heads, tile-major inside
  # (flash_common.cuh's launch_tile_head; 2026-12-07): the lab's A/B against
  # the same kernels launched head by head, forward 17 / 20 and 10 / 21,
  # backward 14 / 16, with cuDNN in the same rounds, 2K-32K (full and
  # causal; the order matters under a causal mask), then ncu's cycles at
  # S (4K). No engine build beside it (a loaded host delays the launches of
  # the 2K-4K kernels); PART 22 builds.
  step "lab A/B: sections of heads (17, 10; backward 14) vs head by head (20, 21; 16), cuDNN in the same rounds" 420 \
    env PACK=1 OUT="$OUT/ab6" FWD="${FWD:-17,20,10,21}" BWD="${BWD:-14,16}" PEERS=1 ROUNDS="${ROUNDS:-3}" \
    SIZES="${SIZES:-2048,4096,8192,16384,32768}" S="${S:-4096}" NCU=1 experiments/kernels/flash_attn/ab_h200.sh
  part_done
fi
if [ "$PART" = 22 ]; then
  # The engine on the 2026-12-07 kernels (the merge compiled out of the plain
  # forward, the launch in sections of heads): the whole build, then the
  # tests of that code (every attention kernel ctest: each variant, every
  # mask kind, GQA, the merging epilogue; the ring family over MPI staging
  # at 2 and 4 ranks; test_kernels_cuda), bench kernels' ring step.
  build_everything
  if [ -x "$build/burst" ]; then
    kernel_tests 220
    step "bench kernels (ring_fwd_step merged / partial, attn_fwd_plain; 2K block)" 40 "$build/burst" bench kernels \
      --set bench.adam_params=1024 --output "$OUT/kernels_bf16.h5"
  fi
  part_done h5
fi
if [ "$PART" = 23 ]; then
  # Right after PART 22 on the same warm machine (build-cuda kept; built again
  # if not): the figures of record on the current kernels: the 1B step, the
  # torch block, the engine's blocks, compare.py.
  build=$(pwd)/build-cuda
  [ -x "$build/burst" ] || build_everything
  if [ -x "$build/burst" ]; then
    step_1b "${STEP_TOKENS:-[32768,131072]}" 60 " (default kernels)"
    torch_block 90
    for m in 1B 7B; do layer32k " (default kernels)" 30 "layer_${m}_bf16.h5"; done
    step "compare.py (ours against the peers on this card)" 30 python3 experiments/peers/compare.py "$OUT"
  fi
  # The lab's rates of the defaults on this card beside cuDNN (the model's
  # attention curve: calibrate_h200_engine.py --attention 4096:...,32768:...).
  step "lab: forward 10 / 17, backward 14 at 4K and 32K, cuDNN in the same rounds" 250 \
    env PACK=1 OUT="$OUT/ab7" FWD=10,17 BWD=14 PEERS=1 ROUNDS=3 SIZES=4096,32768 NCU=0 \
    experiments/kernels/flash_attn/ab_h200.sh
  part_done h5
fi
if [ "$PART" = 25 ]; then
  # The lab alone (~200 s; no engine build): the defaults' rates beside cuDNN
  # on this card at 2K-32K (the model's attention curve: 4K and 32K) and the
  # sections against head by head at the ring's block sizes (forward 10 / 21,
  # backward 14 / 16), with the lab's check of every listed variant.
  step "lab: forward 10 / 17 / 21, backward 14 / 16 at 2K-32K, cuDNN in the same rounds" 300 \
    env PACK=1 OUT="$OUT/ab7" FWD="${FWD:-10,17,21}" BWD="${BWD:-14,16}" PEERS=1 ROUNDS="${ROUNDS:-3}" \
    SIZES="${SIZES:-2048,4096,8192,32768}" NCU=0 experiments/kernels/flash_attn/ab_h200.sh
  part_done
fi
if [ "$PART" = 26 ]; then
  # The cp.async / mma.sync kernels launched in sections of heads too
  # (launch_tile_sections, 2026-12-07): the lab's A/B against the same
  # kernels launched head by head, forward 3 / 22 (mma.sync) and 4 / 23
  # (cp.async wgmma), backward 2 / 17 and 6 / 18, with cuDNN in the same
  # rounds and the lab's check of each, 2K-8K (the sizes where the order
  # matters), no engine build.
  step "lab A/B: the fallback kernels in sections of heads (3, 4; backward 2, 6) vs head by head (22, 23; 17, 18)" 300 \
    env PACK=1 OUT="$OUT/ab8" FWD="${FWD:-3,22,4,23}" BWD="${BWD:-2,17,6,18}" PEERS=1 ROUNDS="${ROUNDS:-3}" \
    SIZES="${SIZES:-2048,4096,8192}" NCU=0 experiments/kernels/flash_attn/ab_h200.sh
  part_done
fi
if [ "$PART" = 27 ]; then
  # What changed since the last figures of record, by priority (~520 s): the
  # build and the kernels' tests (the TMA kernels' launch in sections, the
  # fallback kernels' launch_tile_sections, MoreTilesThanOneGridHolds), then
  # the lab's rates of the defaults beside cuDNN at 4K and 32K (the model's
  # attention curve; the lab's own build and check take ~125 s of the 250).
  # The step and the 32K blocks launch head by head as before (more than 16
  # waves): not rerun. The fallback kernels' A/B is PART 26. (The 2026-12-07
  # 15:04 call of this part, on an H100, ran out of its caps: the kernels'
  # tests took 162 s with the first MoreTilesThanOneGridHolds, which copied
  # ~537M values to the host, and the ab7 step had 170 s.)
  build_everything
  if [ -x "$build/burst" ]; then
    kernel_tests 200
  fi
  step "lab: forward 10 / 17, backward 14 at 4K and 32K, cuDNN in the same rounds" 250 \
    env PACK=1 OUT="$OUT/ab7" FWD=10,17 BWD=14 PEERS=1 ROUNDS=3 SIZES=4096,32768 NCU=0 \
    experiments/kernels/flash_attn/ab_h200.sh
  part_done h5
fi
if [ "$PART" = 28 ]; then
  # The block beside torch in alternating rounds (ROUNDS, default 5): odd
  # rounds torch first, even rounds ours first, so that neither side always
  # runs on the hotter card (PART 24, 2026-12-07 20:00: the blocks' phases
  # alone matched another H200's within 2%, the whole blocks ran 3.5%
  # slower, torch eager 1.1-1.4%). Each round's files in $OUT/rN (the card's
  # SM clock, power and temperature before each side in clocks.csv), the
  # ratios per round and their median by block_rounds.py; torch.compile in
  # round 1 only. Only `burst` is built (~2 min).
  step "bootstrap (Kokkos CUDA from .offline)" 120 scripts/bootstrap.sh --cuda --from .offline
  step "build (burst)" 240 scripts/build.sh --cuda --deps-include "$(pwd)/.offline/include" -DBURST_ENABLE_NCCL=ON --target burst
  build=$(pwd)/build-cuda
  if [ -x "$build/burst" ]; then
    clocks() { echo "$1,$(nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader | head -n 1)" >> "$OUT/clocks.csv"; }
    # ours / theirs: round $r's side
    ours() { clocks "r$r burst"; for m in 1B 7B; do layer32k " (round $r)" 30 "r$r/layer_${m}_bf16.h5"; done; }
    theirs() {
      clocks "r$r torch"
      step "torch LLaMA block 1B and 7B at 32K (round $r)" 90 python3 experiments/peers/peers.py "$OUT/r$r" --only block \
        --tokens 32768 $([ "$r" -gt 1 ] && echo --no-compile)
    }
    echo "when,sm_clock,power,temperature" > "$OUT/clocks.csv"
    for r in $(seq 1 "${ROUNDS:-5}"); do
      mkdir -p "$OUT/r$r"
      if [ $((r % 2)) = 1 ]; then theirs; ours; else ours; theirs; fi
      [ "$(left)" -lt 60 ] && break
    done
    clocks end
    step "block_rounds.py (the ratios per round, their median)" 20 python3 experiments/peers/block_rounds.py "$OUT"
    (cd "$OUT" && tar cf part28_rounds.tar r[0-9]* && rm -rf r[0-9]*)
  fi
  part_done
fi
if [ "$PART" = 24 ]; then
  # PART 22 and 23 in one call (~520 s; for a budget that holds one), by
  # priority: the build and the kernels' tests (correctness of the engine on
  # the new launch order), the lab's rates of the defaults beside cuDNN at 4K
  # and 32K (the model's attention curve), then the figures of record in
  # what is left (the 32K-128K step and blocks launch as before).
  build_everything
  if [ -x "$build/burst" ]; then
    kernel_tests 200
  fi
  step "lab: forward 10 / 17, backward 14 at 4K and 32K, cuDNN in the same rounds" 250 \
    env PACK=1 OUT="$OUT/ab7" FWD=10,17 BWD=14 PEERS=1 ROUNDS=3 SIZES=4096,32768 NCU=0 \
    experiments/kernels/flash_attn/ab_h200.sh
  if [ -x "$build/burst" ]; then
    step_1b "${STEP_TOKENS:-[32768,131072]}" 60 " (default kernels)"
    torch_block 60
    for m in 1B 7B; do layer32k " (default kernels)" 30 "layer_${m}_bf16.h5"; done
    step "compare.py (ours against the peers on this card)" 20 python3 experiments/peers/compare.py "$OUT"
  fi
  part_done h5
fi
if [ "$PART" = 20 ]; then
  # Does the choice of cuBLASLt algorithm matter for the block's GEMMs (the
  # engine takes the heuristic's first; the 7B block's GEMM phase runs at
  # ~680-700 TFLOP/s against 764-823 per shape in `bench gemm`)? First the
  # lab survey (no engine build needed), then the engine with
  # BURST_GEMM_TUNE=0 / 1 alternating on the same card.
  step "gemm_algos survey (block GEMM shapes 1B and 7B, 32K: every candidate alone, then the sequence)" 150 \
    env OUT="$OUT/gemm_algos" experiments/kernels/gemm_algos/run.sh --rounds 8
  build_everything
  if [ -x "$build/burst" ]; then
    # Most informative first (a short budget cuts the end): one round of the
    # blocks and the step each way, the tests, then bench gemm and round 2.
    ab_round() {
      local r=$1 t
      for t in 0 1; do
        for m in 1B 7B; do layer32k " BURST_GEMM_TUNE=$t (round $r)" 30 "layer_${m}_bf16_tune${t}_r$r.h5" BURST_GEMM_TUNE=$t; done
      done
      for t in 0 1; do step_1b '[32768]' 40 " BURST_GEMM_TUNE=$t (round $r)" "step_1B_bf16_tune${t}_r$r.h5" BURST_GEMM_TUNE=$t; done
    }
    ab_round 1
    step "GEMM gpu tests (the tuned choice computes the same GEMM)" 60 "$build/tests/test_kernels_cuda" --gtest_filter='GemmCuda.*'
    for t in 0 1; do
      step "bench gemm LLaMA shapes bf16 -> bf16, BURST_GEMM_TUNE=$t" 40 env BURST_GEMM_TUNE=$t "$build/burst" bench gemm \
        --set bench.dtype=bf16 --set bench.squares=false --set bench.llama=true --set bench.repeats=5 \
        --output "$OUT/gemm_llama_tune$t.h5"
    done
    ab_round 2
  fi
  part_done h5
fi
if [ "$PART" = 18 ]; then
  # The 2026-12-06 engine changes on a GPU (one warm card, ~9 min): the whole
  # build; `bench kernels` (the CUDA LSE merge beside the portable one; the
  # ring forward's step merged in the forward's epilogue beside a partial +
  # merge, at 2K and 8K blocks); the tests of that code: test_kernels_cuda
  # (LseMergeCuda), every attention ctest (the merging epilogue on each
  # kernel variant, the uncounted calls), the ring family over MPI staging
  # at 2 and 4 ranks (bf16, d 64: the merge in the ring; the packet fills
  # on the compute stream) and test_seq_parallel; then the 1B step at 32K
  # (the plain forward's epilogue gained a branch: the step must not move).
  build_everything
  if [ -x "$build/burst" ]; then
    step "bench kernels (lse_merge rows; ring_fwd_step merged / partial, 2K block)" 60 "$build/burst" bench kernels \
      --output "$OUT/kernels_bf16.h5"
    step "bench kernels (ring_fwd_step at an 8K block)" 60 "$build/burst" bench kernels --set bench.attn_block=8192 \
      --set bench.adam_params=1024 --output "$OUT/kernels_bf16_block8k.h5"
    step "tests of the new code (merges, uncounted calls, ring packets)" 240 bash -c "cd '$build' && ctest -j 6 \
      --output-on-failure -R 'test_kernels_cuda_np1|test_kernels_attention_cuda|test_dist_attention_np[24]|test_seq_parallel' \
      > '$OUT/tests_new.log' 2>&1; rc=\$?; tail -n 20 '$OUT/tests_new.log'; exit \$rc"
    step_1b '[32768]' 40 " (default kernels)"
  fi
  part_done h5
fi
if [ "$PART" = 19 ]; then
  # The figures of record in a short call (~330 s; for a session whose device
  # time is mostly spent): the whole build; the 1B step at STEP_TOKENS
  # (default 32K and 128K: the last layer no longer recomputed, sum_squares
  # v2 in the optimizer phase); the torch block and the engine's blocks on
  # this card; compare.py; `bench kernels` (sum_squares_fp32 on 268M
  # floats); then the GPU tests of the changed code in the time left
  # (test_model: the policies' recompute and the last layer; test_kernels_misc:
  # SumSquaresEveryElementOnce).
  build_everything
  if [ -x "$build/burst" ]; then
    step_1b "${STEP_TOKENS:-[32768,131072]}" 60 " (default kernels)"
    torch_block 90
    for m in 1B 7B; do layer32k " (default kernels)" 30 "layer_${m}_bf16.h5"; done
    step "compare.py (ours against the peers on this card)" 30 python3 experiments/peers/compare.py "$OUT"
    step "bench kernels (sum_squares_fp32, adamw on 268M params)" 60 "$build/burst" bench kernels \
      --output "$OUT/kernels_bf16.h5"
    step "gpu tests of the changed code (the policies' recompute, sum_squares, the memory model)" $(( $(left) - 5 )) \
      bash -c "cd '$build' && { ./tests/test_model --gtest_filter='Model.Recomputing*' && ctest -j 4 \
      --output-on-failure -L gpu -R 'test_kernels_misc|test_memory_model'; } > '$OUT/tests_changed.log' 2>&1; \
      rc=\$?; tail -n 12 '$OUT/tests_changed.log'; exit \$rc"
  fi
  part_done h5
fi
if [ "$PART" = 17 ]; then
  # The figures of record on the engine's defaults (forward variant 17,
  # backward variant 14 at head dim 128) in one call: the whole build, the
  # four longest gpu tests, every attention kernel test (each A/B choice),
  # the torch block on this card, the engine's block at 1B and 7B, the 1B
  # step at STEP_TOKENS (default 32K and 128K), then compare.py's
  # side-by-side ratios.
  build_everything
  if [ -x "$build/burst" ]; then
    step "the four longest gpu tests (test_model, test_train)" 330 bash -c "cd '$build' && ctest -j 4 \
      --output-on-failure -L gpu -R 'test_model|test_train' > '$OUT/gpu_long.log' 2>&1; rc=\$?; tail -n 12 '$OUT/gpu_long.log'; exit \$rc"
    step "every attention kernel test" 150 bash -c "cd '$build' && ctest -j 4 --output-on-failure \
      -R 'test_kernels_attention_cuda' > '$OUT/tests_attention.log' 2>&1; rc=\$?; tail -n 12 '$OUT/tests_attention.log'; exit \$rc"
    torch_block 90
    for m in 1B 7B; do layer32k " (default kernels)" 30 "layer_${m}_bf16.h5"; done
    step_1b "${STEP_TOKENS:-[32768,131072]}" 60 " (default kernels)"
    step "compare.py (ours against the peers on this card)" 30 python3 experiments/peers/compare.py "$OUT"
  fi
  part_done h5
fi
if [ "$PART" = 16 ]; then
  # The whole build, the four longest gpu tests (test_model, test_train: the
  # ones PART 6 leaves out; LONG=0 skips them) on this card, then, with
  # AB128=1, the d128 forward in the engine A/B on one card: the default
  # (lab variant 17, 128 x 176 tiles) against variant 10 (BURST_FA_FORWARD =
  # tma128): its attention tests, the 1B block and the 1B step at 32K both
  # ways (alternating); AB64=1 the same for the d128 backward: the default
  # (variant 14, 80-row tiles) against the 64-row variant 11
  # (BURST_FA_BACKWARD = tma64).
  build_everything
  if [ -x "$build/burst" ]; then
    [ "${LONG:-1}" = 1 ] && step "the four longest gpu tests (test_model, test_train)" 330 bash -c "cd '$build' && ctest -j 4 \
      --output-on-failure -L gpu -R 'test_model|test_train' > '$OUT/gpu_long.log' 2>&1; rc=\$?; tail -n 12 '$OUT/gpu_long.log'; exit \$rc"
    if [ "${AB128:-0}" = 1 ]; then
      step "attention tests on forward variant 10 (tma128)" 100 bash -c "cd '$build' && ctest --output-on-failure \
        -R 'test_kernels_attention_cuda_tma128' > '$OUT/tests_tma128.log' 2>&1; rc=\$?; tail -n 8 '$OUT/tests_tma128.log'; exit \$rc"
      m=1B
      layer32k " (default: forward 17, backward 14)" 30 "layer_1B_bf16.h5"
      layer32k " (forward variant 10)" 30 "layer_1B_bf16_tma128.h5" BURST_FA_FORWARD=tma128
      step_1b '[32768]' 40 " (default kernels)"
      step_1b '[32768]' 40 " (forward variant 10)" step_1B_bf16_tma128.h5 BURST_FA_FORWARD=tma128
    fi
    if [ "${AB64:-0}" = 1 ]; then
      # The d128 backward: the default (lab variant 14, 80 x 128 tiles, dQ transposed) against variant 11 (64 rows).
      step "attention tests on backward variant 11 (tma64)" 100 bash -c "cd '$build' && ctest --output-on-failure \
        -R 'test_kernels_attention_cuda_tma64' > '$OUT/tests_tma64.log' 2>&1; rc=\$?; tail -n 8 '$OUT/tests_tma64.log'; exit \$rc"
      m=1B
      [ "${AB128:-0}" = 1 ] || layer32k " (default: forward 17, backward 14)" 30 "layer_1B_bf16.h5"
      layer32k " (backward variant 11)" 30 "layer_1B_bf16_tma64.h5" BURST_FA_BACKWARD=tma64
      [ "${AB128:-0}" = 1 ] || step_1b '[32768]' 40 " (default kernels)"
      step_1b '[32768]' 40 " (backward variant 11)" step_1B_bf16_tma64.h5 BURST_FA_BACKWARD=tma64
    fi
  fi
  part_done h5
fi
if [ "$PART" = 15 ]; then
  # The lab's variants 12 in the engine, A/B on one card (BURST_FA_FORWARD /
  # BURST_FA_BACKWARD = tma12 against the default tma), after the lab run has
  # checked and timed them: the whole build, the attention tests on variants
  # 12, the block at 1B and 7B both ways (alternating), the 1B step at 32K
  # both ways, the torch block on the same card.
  build_everything
  if [ -x "$build/burst" ]; then
    step "attention tests on variants 12 (tma12)" 150 bash -c "cd '$build' && ctest --output-on-failure \
      -R 'test_kernels_attention_cuda_tma12' > '$OUT/tests_tma12.log' 2>&1; rc=\$?; tail -n 15 '$OUT/tests_tma12.log'; exit \$rc"
    for m in 1B 7B; do
      layer32k " (default kernels)" 30 "layer_${m}_bf16.h5"
      layer32k " (variants 12)" 30 "layer_${m}_bf16_tma12.h5" BURST_FA_FORWARD=tma12 BURST_FA_BACKWARD=tma12
    done
    step_1b '[32768]' 40 " (default kernels)"
    step_1b '[32768]' 40 " (variants 12)" step_1B_bf16_tma12.h5 BURST_FA_FORWARD=tma12 BURST_FA_BACKWARD=tma12
    torch_block 90
  fi
  part_done h5
fi
if [ "$PART" = 14 ]; then
  # PART 12 + 13 in one call (when the device budget holds only one): the
  # whole build, bench kernels, the block at 1B and 7B (engine defaults), the
  # 1B step at 32K (its embedding_backward phase), the torch block on the
  # same card, then every gpu test in the time left.
  build_everything
  if [ -x "$build/burst" ]; then
    step "burst bench kernels (RMSNorm backward + residual)" 30 "$build/burst" bench kernels --output "$OUT/kernels_bf16.h5"
    for m in 1B 7B; do layer32k " (RMSNorm backward + residual)" 30 "layer_${m}_bf16.h5"; done
    step_1b '[32768]' 40
    torch_block 90
    gpu_tests 16
  fi
  part_done h5
fi
if [ "$PART" = 12 ]; then
  # The timed call of a two-call pair (PART 13 right after, on the same warm
  # machine): the whole build (PART 13's tests need it), bench kernels with
  # the CUDA RoPE, the block with backward variant 11 and the CUDA RoPE (and
  # the portable RoPE side by side), SM clocks sampled, bench gemm beta 1.
  build_everything
  if [ -x "$build/burst" ]; then
    step "burst bench kernels (RoPE v4, RMSNorm v2)" 30 "$build/burst" bench kernels \
      --output "$OUT/kernels_bf16.h5"
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 20 \
      > "$OUT/clocks_layer.csv" 2>&1 &
    smi=$!
    for m in 1B 7B; do
      layer32k " (default kernels, RoPE v4)" 30 "layer_${m}_bf16.h5" BURST_ROPE_CUDA=1
      layer32k " (default kernels, portable RoPE)" 30 "layer_${m}_bf16_roperef.h5" BURST_ROPE_CUDA=0
    done
    kill "$smi" 2>/dev/null
    awk -F', ' '{gsub(/ MHz/,"",$2); gsub(/ W/,"",$3); if ($2+0 > 0) {n++; c+=$2; if ($2<mn||mn==0) mn=$2; p+=$3}}
      END {if (n) printf "SM clock over the block runs: mean %.0f MHz, min %d MHz, mean power %.0f W (%d samples)\n", c/n, mn, p/n, n}' \
      "$OUT/clocks_layer.csv"
    gzip -f "$OUT/clocks_layer.csv"
    step_1b '[32768,131072]' 60
    gemm_llama 1 90
  fi
  part_done h5
fi
if [ "$PART" = 13 ]; then
  # Right after PART 12 on the same warm machine (its build-cuda kept): the
  # torch block on the idle GPU (so PART 12's block has its peer on the same
  # card and the same day: clocks and power limits differ card to card),
  # then every gpu test, the trainer's and the model's included.
  build=$(pwd)/build-cuda
  torch_block 150
  [ -x "$build/burst" ] || build_everything  # PART 12's build was not kept
  gpu_tests 12
  part_done
fi
if [ "$PART" = 9 ]; then
  # The calls' untimed work together: the whole build, every gpu test
  # (ctest -j 8, in the background: the trainer's and the model's take ~300 s)
  # beside the passkey stage 2 (its throughput is then not a clean figure; its
  # accuracy is what this run is for). Passkey arguments: PASSKEY_ARGS.
  build_everything 240
  if [ -x "$build/burst" ]; then
    (cd "$build" && timeout --kill-after=10 $(( $(left) - 20 )) ctest -j 8 --output-on-failure -L gpu -LE long \
      > "$OUT/gpu_tests.log" 2>&1; echo "ctest exit $? at t = $(( $(date +%s) - t0 )) s" >> "$OUT/gpu_tests.log") &
    tests=$!
    # shellcheck disable=SC2086
    NO_TESTS=1 BUDGET=$(( $(left) - 25 )) OUT="$OUT" experiments/peers/passkey_h200.sh ${PASSKEY_ARGS:-} > /dev/null 2>&1
    echo "== passkey done at t = $(( $(date +%s) - t0 )) s"; grep -E "eval|accuracy|exit|tokens/s" "$OUT/passkey_h200.log" | tail -n 20
    wait "$tests"
    grep -E "tests passed|Failed|Timeout|\*\*\*|ctest exit" "$OUT/gpu_tests.log" | tail -n 20
  fi
  part_done
fi
if [ "$PART" = 10 ]; then
  # The timed call, each measurement alone on the GPU, in order of worth: the
  # lab backward variants 9, 10, 11 beside torch's SDPA (MAIN=0 WGMMA=0); the
  # torch block and memory-bound kernels; bench kernels (RMSNorm v2); the
  # engine's block (v7) and 1B step; bench gemm beta 0 / 1;
  # ncu of every kernel of one 1B and one 7B block; ncu --set full of the lab
  # backward variants 10 and 11 (the dQ staging's bank conflicts).
  step "bootstrap (Kokkos CUDA from .offline)" 120 scripts/bootstrap.sh --cuda --from .offline
  step "build (burst)" 240 scripts/build.sh --cuda --deps-include "$(pwd)/.offline/include" -DBURST_ENABLE_NCCL=ON \
    --target burst
  build=$(pwd)/build-cuda
  step "lab: backward variants 9, 10, 11 and torch SDPA" 200 env MAIN=0 WGMMA=0 OUT="$OUT/lab" \
    experiments/kernels/flash_attn/run_h200.sh
  tail -n 16 "$OUT/lab/run.log"
  step "torch LLaMA block (eager, compile) 1B and 7B at 32K, memory-bound kernels" 150 \
    python3 experiments/peers/peers.py "$OUT" --only block,kernels --tokens 32768
  if [ -x "$build/burst" ]; then
    step "burst bench kernels (RMSNorm v2, SwiGLU, RoPE, AdamW)" 40 \
      "$build/burst" bench kernels --output "$OUT/kernels_bf16.h5"
    for m in 1B 7B; do layer32k " (v7)" 40 "layer_${m}_bf16.h5"; done
    step "burst bench step 1B bf16 whole, 32K / 64K / 128K tokens" 90 "$build/burst" bench step --set bench.preset=1B \
      --set 'bench.tokens=[32768,65536,131072]' --set bench.dtype=bf16 --set bench.activation=whole \
      --set bench.repeats=2 --set bench.warmup=1 --output "$OUT/step_1B_bf16.h5"
    gemm_llama 0 60
    gemm_llama 1 90
    for m in 1B 7B; do ncu_block $m; done
  fi
  l=$(left)
  if [ "$l" -gt 60 ]; then
    step "lab profile: backward variants 10, 11 (ncu --set full)" $(( l - 10 )) env VARS=10,11 CUDNN=0 \
      OUT="$OUT/prof" experiments/kernels/flash_attn/profile_h200.sh
  fi
  if python3 -c "import h5py" 2>/dev/null; then python3 experiments/peers/compare.py "$OUT"; fi
  (cd "$OUT" && tar cf /tmp/part10.tar --exclude=run_part10.log . && mv /tmp/part10.tar . && \
    find . -mindepth 1 -not -name part10.tar -not -name run_part10.log -delete)
  part_done
fi
if [ "$PART" = 6 ]; then
  # The TMA flash kernels (the lab's forward and backward variant 7) in the
  # engine, bf16 distributed attention and bf16 training: the torch block
  # first (idle machine), the whole build, the block with the TMA and the
  # cp.async wgmma kernels side by side, the 1B step at 32K-128K, then every
  # gpu test but the trainer's and the model's (PART 7 / the passkey call
  # runs those: they take ~250 s each under ctest -j).
  torch_block 150
  build_everything 240
  if [ -x "$build/burst" ]; then
    for m in 1B 7B; do
      [ "${WGMMA_LAYERS:-1}" = 1 ] && \
        layer32k ", cp.async wgmma kernels" 60 "layer_${m}_bf16_wgmma.h5" BURST_FA_FORWARD=wgmma BURST_FA_BACKWARD=wgmma
      layer32k " (TMA kernels)" 60 "layer_${m}_bf16.h5"
    done
    step "burst bench step 1B bf16 whole, 32K / 64K / 128K tokens" 100 "$build/burst" bench step --set bench.preset=1B \
      --set 'bench.tokens=[32768,65536,131072]' --set bench.dtype=bf16 --set bench.activation=whole \
      --set bench.repeats=2 --set bench.warmup=1 --output "$OUT/step_1B_bf16.h5"
    # TESTS_RE (a ctest -R regex) narrows the gpu tests, TESTS_CAP their time limit
    step "gpu tests but test_train / test_model${TESTS_RE:+ matching $TESTS_RE}" "${TESTS_CAP:-300}" bash -c "cd '$build' && \
      ctest -j 16 --output-on-failure -L gpu -LE long -E 'test_train|test_model' ${TESTS_RE:+-R '$TESTS_RE'} \
      > '$OUT/gpu_tests.log' 2>&1; rc=\$?; tail -n 25 '$OUT/gpu_tests.log'; exit \$rc"
  else
    echo "== no $build/burst: the engine steps are skipped (see $OUT/part6_steps.log)"
  fi
  if python3 -c "import h5py" 2>/dev/null; then python3 experiments/peers/compare.py "$OUT"
  else echo "(no h5py here: run experiments/peers/compare.py on the fetched folder)"; fi
  part_done h5
fi
if [ "$PART" = 5 ]; then
  # The wgmma backward through the engine (short: what the session's device
  # time left allows): the attention GPU tests, the block and the 1B step.
  step "bootstrap (Kokkos CUDA from .offline)" 120 scripts/bootstrap.sh --cuda --from .offline
  step "build (burst, test_kernels_attention_cuda)" 200 scripts/build.sh --cuda --deps-include "$(pwd)/.offline/include" \
    -DBURST_ENABLE_NCCL=ON --target burst --target test_kernels_attention_cuda
  build=$(pwd)/build-cuda
  if [ -x "$build/burst" ]; then
    step "gpu test: the CUDA attention kernels (wgmma forward and backward) vs fp64" 60 \
      env BURST_POISON=1 mpiexec -n 1 "$build/tests/test_kernels_attention_cuda"
    for m in 1B 7B; do
      layer32k " (wgmma forward and backward)" 40 "layer_${m}_bf16.h5"
    done
    step "burst bench step 1B bf16 whole, 32K tokens" 40 "$build/burst" bench step --set bench.preset=1B \
      --set 'bench.tokens=[32768]' --set bench.dtype=bf16 --set bench.activation=whole \
      --set bench.repeats=2 --set bench.warmup=1 --output "$OUT/step_1B_bf16.h5"
  fi
  echo "PART 5 done in $(( $(date +%s) - t0 )) s"
  exit 0
fi
if [ "$PART" = 4 ]; then
  # The wgmma forward through the engine: the whole CUDA build and every gpu
  # test (the forward now runs on it by default), the block with the wgmma
  # and with the mma.sync forward side by side (BURST_FA_FORWARD=mma), the
  # 1B training step, and the torch block in the same call.
  torch_block 150
  build_everything 330 240
  if [ -x "$build/burst" ]; then
    for m in 1B 7B; do
      layer32k ", mma.sync forward" 90 "layer_${m}_bf16_mmafwd.h5" BURST_FA_FORWARD=mma
      layer32k " (wgmma forward)" 90 "layer_${m}_bf16.h5"
    done
    step "burst bench step 1B bf16 whole, 32K / 64K tokens" 90 "$build/burst" bench step --set bench.preset=1B \
      --set 'bench.tokens=[32768,65536]' --set bench.dtype=bf16 --set bench.activation=whole \
      --set bench.repeats=2 --set bench.warmup=1 --output "$OUT/step_1B_bf16.h5"
    step "every gpu test" 300 bash -c "cd '$build' && ctest -j 8 --output-on-failure -L gpu -LE long > '$OUT/gpu_tests.log' 2>&1; rc=\$?; tail -n 25 '$OUT/gpu_tests.log'; exit \$rc"
  else
    echo "== no $build/burst: the engine steps are skipped (see $OUT/part4_steps.log)"
  fi
  if python3 -c "import h5py" 2>/dev/null; then python3 experiments/peers/compare.py "$OUT"
  else echo "(no h5py here: run experiments/peers/compare.py on the fetched folder)"; fi
  part_done h5
fi
if [ "$PART" = 3 ]; then
  # 1. the torch peer first, on an idle machine: it needs no build, so a
  #    failing build still leaves its numbers (peers_block_kernels.json)
  #    (+ the memory-bound kernels: the fused SwiGLU's peer.)
  step "torch LLaMA block (eager, compile) 1B and 7B at 32K, memory-bound kernels" 220 \
    python3 experiments/peers/peers.py "$OUT" --only block,kernels --tokens 32768
  # 2. Kokkos (CUDA) and the engine: only the targets used below.
  step "bootstrap (Kokkos CUDA from .offline)" 240 scripts/bootstrap.sh --cuda --from .offline
  step "build (burst, test_kernels_cuda, test_model, test_kernels_misc)" 330 \
    scripts/build.sh --cuda --deps-include "$(pwd)/.offline/include" -DBURST_ENABLE_NCCL=ON \
    --target burst --target test_kernels_cuda --target test_model --target test_kernels_misc
  build=$(pwd)/build-cuda
  if [ -x "$build/burst" ]; then
    # 3. the block through the engine, bf16, checked against a double block at 256 tokens first.
    #    Each shape twice in the same call: with Kokkos' cudaMalloc / cudaFree
    #    (KOKKOS_CUDA_MALLOC_ASYNC=0) and with the stream-ordered pool
    #    (cmake/patches/kokkos-05, the default), so the allocator's share of
    #    the block is a ratio measured side by side.
    for m in 1B 7B; do
      layer32k ", cudaMalloc" 120 "layer_${m}_bf16_cudamalloc.h5" KOKKOS_CUDA_MALLOC_ASYNC=0
      layer32k "" 120 "layer_${m}_bf16.h5"
    done
    step "burst bench step 1B bf16 whole, 32K / 64K / 128K tokens" 150 "$build/burst" bench step --set bench.preset=1B \
      --set 'bench.tokens=[32768,65536,131072]' --set bench.dtype=bf16 --set bench.activation=whole \
      --set bench.repeats=2 --set bench.warmup=1 --output "$OUT/step_1B_bf16.h5"
    step "burst bench kernels (the fused SwiGLU, RMSNorm, RoPE, AdamW)" 60 \
      "$build/burst" bench kernels --output "$OUT/kernels_bf16.h5"
    # 4. the gpu tests of what this part changed (the block's finite-difference
    #    test runs on the host build: it takes minutes on the GPU).
    step "gpu tests: elementwise / rowsum / RMSNorm / GEMM kernels, the bench's CLI" 150 \
      bash -c "cd '$build' && ctest --output-on-failure -R 'test_kernels_cuda_np1|test_kernels_misc_np1|cli_bench_layer'"
    step "gpu tests: the bf16 / float block against double (test_model Block.*)" 120 \
      env BURST_POISON=1 mpiexec -n 1 "$build/tests/test_model" '--gtest_filter=Block.*:-Block.ApiGradientsMatchFiniteDifferences'
  else
    echo "== no $build/burst: the engine steps are skipped (see $OUT/part3_steps.log)"
  fi
  if python3 -c "import h5py" 2>/dev/null; then python3 experiments/peers/compare.py "$OUT"
  else echo "(no h5py here: run experiments/peers/compare.py on the fetched folder)"; fi
  # The device tool returns at most 8 files: the HDF5 results travel as one tar.
  part_done h5
fi
scripts/bootstrap.sh --cuda --from .offline >/tmp/bootstrap.log 2>&1 || { echo "BOOTSTRAP FAILED"; tail -30 /tmp/bootstrap.log; exit 1; }
echo "bootstrap: $(( $(date +%s) - t0 )) s"
build=$(scripts/build.sh --cuda --deps-include "$(pwd)/.offline/include" -DBURST_ENABLE_NCCL=ON 2>/tmp/build_err.log | tail -n1)
[ -x "$build/burst" ] || { echo "BUILD FAILED"; tail -40 /tmp/build_err.log; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s ($build)"

if [ "$PART" = 1 ]; then
  (cd "$build" && ctest --output-on-failure -R 'test_kernels_cuda|test_kernels_attention_cuda|test_kernels_gemm|test_kernels_misc' 2>&1) \
    | tee "$OUT/kernel_tests.log" | tail -25
  echo "tests: $(( $(date +%s) - t0 )) s"
  "$build/burst" bench gemm --set bench.dtype=bf16 --set 'bench.sizes=[8192]' --set bench.llama=true \
    --set bench.repeats=5 --set bench.warmup=1 --output "$OUT/gemm_bf16.h5"
  "$build/burst" bench gemm --set bench.dtype=bf16 --set bench.out_dtype=float --set 'bench.sizes=[8192]' \
    --set 'bench.shapes=["NT:32768x4096x4096","NT:32768x11008x4096","TN:4096x4096x32768"]' \
    --set bench.repeats=10 --output "$OUT/gemm_bf16_f32out.h5" | tail -8
  "$build/burst" bench ce --set 'bench.chunks=[1024,2048,4096,8192,32768]' --set bench.repeats=5 \
    --output "$OUT/ce_bf16.h5"
  "$build/burst" bench kernels --output "$OUT/kernels_bf16.h5"
  echo "benches: $(( $(date +%s) - t0 )) s"
  timeout 200 python3 experiments/peers/peers.py "$OUT" --only gemm,ce,kernels 2>&1 | grep -v Warning
else
  (cd "$build" && timeout 330 ctest -j "$BURST_JOBS" --output-on-failure -L gpu -LE long 2>&1) > "$OUT/gpu_tests.log"
  grep -E "tests passed|Failed|\*\*\*" "$OUT/gpu_tests.log" | tail -15
  echo "tests: $(( $(date +%s) - t0 )) s"
  timeout 240 python3 experiments/peers/peers.py "$OUT" --only sdpa,block 2>&1 | grep -v Warning
fi
# h5py is not in the GPU machine's Python: there, the two sides' tables are in
# the log; the ratios come from compare.py on the CPU machine after fetching.
if python3 -c "import h5py" 2>/dev/null; then python3 experiments/peers/compare.py "$OUT"
else echo "(no h5py here: run experiments/peers/compare.py on the fetched folder)"; fi
date -u
