#!/bin/bash
# One device call: the flash forward's merging epilogue (the ring forward's
# step, kernels::flash_attention_forward_merge) against a partial + merge
# pass, and the plain forward with and without the merge branch compiled in
# (is the kernel every other call runs unchanged?). Builds the engine (the
# attention and kernel tests run on it), then a second `burst` from a copy of
# the tree whose forward epilogues have the merge branch stripped (the code
# as it was before it), and runs `burst bench kernels` (rows attn_fwd_plain,
# ring_fwd_step_merged, ring_fwd_step_partial) with both binaries at blocks
# of 2K, 8K and 32K queries x keys, alternating, ROUNDS times; then the
# AdamW and sum-of-squares rows on 268M parameters.
#   device tool, repository root, carry [".offline"]: OUT=$OUT experiments/peers/ab_fwd_epilogue.sh
# Options (environment): ROUNDS (2), BLOCKS ("2048 8192 32768"), TEST_CAP
# (150 s for the tests), SKIP_OLD=1 (no second build: the merged and partial
# rows of the one binary only), BUDGET (560 s).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ab_out}
PART=ab_epilogue
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run_$PART.log") 2>&1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 BURST_JOBS=${BURST_JOBS:-$(nproc)}
date -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
t0=$(date +%s)
BUDGET=${BUDGET:-560}
. experiments/peers/device_steps.sh
step "bootstrap" 120 scripts/bootstrap.sh --cuda --from .offline
step "build (everything)" 300 scripts/build.sh --cuda --deps-include "$(pwd)/.offline/include" -DBURST_ENABLE_NCCL=ON
old=/tmp/old_tree
whiches="new old"
if [ "${SKIP_OLD:-0}" = 1 ]; then whiches=new; fi  # the merged / partial rows only (no second build)
rm -rf "$old" && mkdir -p "$old"
if [ "$whiches" != new ]; then
tar --exclude=./build-cuda --exclude=./build-host -cf - . | tar -xf - -C "$old"
python3 - "$old" <<'PY'
import re, sys
for f in ("kernels/cuda/flash_fwd_wgmma.cuh", "kernels/cuda/flash_fwd.cuh"):
    p = sys.argv[1] + "/" + f
    s = open(p).read()
    t = re.sub(r"\n\s*const float lold = p\.merge \? fwd_merge_lse_old\(p, i, h, t\) : -INFINITY;", "", s)
    t = re.sub(r"\n\s*if \(p\.merge && empty\) continue;[^\n]*", "", t)
    t = re.sub(r"\n(\s*)if \(p\.merge\) \{.*?\n\1  continue;\n\1\}", "", t, flags=re.S)
    assert t != s, f
    open(p, "w").write(t)
PY
step "build burst without the merge branch" 200 bash -c "cd '$old' && scripts/build.sh --cuda --deps-include '$old/.offline/include' \
  -DBURST_ENABLE_NCCL=ON --target burst >/dev/null && ls -la build-cuda/burst"
fi
step "attention + kernel tests (the new epilogue on every variant)" ${TEST_CAP:-150} bash -c "cd build-cuda && ctest -j 7 --output-on-failure \
  -R 'test_kernels_attention_cuda|test_kernels_cuda_np1|test_kernels_misc_np1' > '$OUT/tests.log' 2>&1; rc=\$?; tail -n 12 '$OUT/tests.log'; exit \$rc"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for b in ${BLOCKS:-2048 8192 32768}; do
    for which in $whiches; do
      bin=build-cuda/burst; [ $which = old ] && bin=$old/build-cuda/burst
      STEP_TAIL=7 step "round $r block $b $which" 40 "$bin" bench kernels --set bench.attn_block=$b --set bench.adam_params=1024 \
        --set bench.tokens=1024 --output "$OUT/k_${which}_b${b}_r$r.h5"
    done
  done
  if [ "$r" = 1 ]; then
STEP_TAIL=5 step "AdamW and the gradient norm pass (268M fp32 params)" 40 build-cuda/burst bench kernels \
  --set bench.attn_block=0 --set bench.tokens=1024 --output "$OUT/k_adamw.h5"
  fi
done
(cd "$OUT" && tar cf ab_epilogue_h5.tar k_*.h5 && rm -f k_*.h5)
echo "done in $(( $(date +%s) - t0 )) s"
