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
