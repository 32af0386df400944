#!/usr/bin/env bash
# Configure and build against the bootstrap's Kokkos.
#   scripts/build.sh [--cuda] [--build-dir DIR] [--deps-include DIR] [--target T]... [extra cmake args]
# --target (repeatable): build only these targets (default: all).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
backend=host
build=""
extra=()
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir|--deps-include|--target)
      [ $# -ge 2 ] || { echo "build.sh: $1 needs a value (usage: scripts/build.sh [--cuda] [--build-dir DIR] [--deps-include DIR] [--target T]...)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --cuda) backend=cuda ;;
    --build-dir) build=$2; shift ;;
    --deps-include) extra+=("-DBURST_DEPS_INCLUDE=$2"); shift ;;
    --target) targets+=(--target "$2"); shift ;;
    *) extra+=("$1") ;;
  esac
  shift
done
prefix=$("$here/bootstrap.sh" --print-prefix $([ "$backend" = cuda ] && echo --cuda))
[ -f "$prefix/.complete" ] || { echo "build: Kokkos ($backend) is not built yet: run scripts/bootstrap.sh $([ "$backend" = cuda ] && echo --cuda)" >&2; exit 1; }
build=${build:-$root/build-$backend}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
if [ "$backend" = cuda ]; then
  # The host compiler stays CMAKE_CXX_COMPILER; Kokkos' launcher sends every
  # target that links Kokkos through nvcc_wrapper.
  extra=(-DBURST_ENABLE_CUDA=ON -DKokkos_NVCC_WRAPPER="$prefix/bin/nvcc_wrapper" "${extra[@]}")
  export NVCC_WRAPPER_DEFAULT_COMPILER=${NVCC_WRAPPER_DEFAULT_COMPILER:-g++}
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${gen[@]}" -DKokkos_ROOT="$prefix" -DCMAKE_PREFIX_PATH="$prefix" "${extra[@]}"
elif [ ${#extra[@]} -gt 0 ]; then
  cmake "$build" "${extra[@]}"
fi
cmake --build "$build" -j "${BURST_JOBS:-$(nproc)}" "${targets[@]}"
echo "$build"
