#!/usr/bin/env bash
# Set up a fresh machine and run the test suite.
#
#   scripts/test.sh               host build: bootstrap, build, ctest (all but the `long` label),
#                                 then compile and link the CUDA build when nvcc is present
#                                 (there is no GPU here: compile only, so the GPU path never rots)
#   scripts/test.sh --long        also the `long` label (full matrices)
#   scripts/test.sh --cuda        on a GPU machine: CUDA build and its tests (label gpu)
#   scripts/test.sh --cuda --from DIR   the same, offline, from `bootstrap.sh --fetch-only DIR`
#   scripts/test.sh --no-cuda-compile   skip the CUDA compile check
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
mode=host; long=0; cuda_compile=auto; from=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cuda) mode=cuda ;;
    --long) long=1 ;;
    --from) [ $# -ge 2 ] || { echo "test.sh: --from needs a directory (usage: scripts/test.sh --cuda --from DIR)" >&2; exit 2; }
            from=$2; shift ;;
    --no-cuda-compile) cuda_compile=0 ;;
    *) echo "test.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
jobs=${BURST_JOBS:-$(nproc)}
t0=$(date +%s)

if [ "$mode" = cuda ]; then
  boot=(--cuda); deps=()
  if [ -n "$from" ]; then boot+=(--from "$from"); deps=(--deps-include "$(cd "$from" && pwd)/include"); fi
  "$here/bootstrap.sh" "${boot[@]}" >/dev/null
  build=$("$here/build.sh" --cuda "${deps[@]}" -DBURST_ENABLE_NCCL=ON | tail -n1)
  cd "$build"
  ctest -j "$jobs" --output-on-failure -L gpu $([ $long = 1 ] || echo -LE long)
  echo "test.sh: CUDA tests done in $(( $(date +%s) - t0 )) s"
  exit 0
fi

"$here/bootstrap.sh" >/dev/null
build=$("$here/build.sh" | tail -n1)
(cd "$build" && ctest -j "$jobs" --output-on-failure $([ $long = 1 ] || echo -LE long))
echo "test.sh: host tests done in $(( $(date +%s) - t0 )) s"

[ -x /usr/local/cuda/bin/nvcc ] && export PATH=$PATH:/usr/local/cuda/bin
if [ "$cuda_compile" != 0 ] && command -v nvcc >/dev/null 2>&1; then
  t1=$(date +%s)
  "$here/bootstrap.sh" --cuda --no-apt >/dev/null
  "$here/build.sh" --cuda -DBURST_ENABLE_NCCL=ON >/dev/null
  echo "test.sh: CUDA build compiled and linked in $(( $(date +%s) - t1 )) s (not run: no GPU here)"
fi
