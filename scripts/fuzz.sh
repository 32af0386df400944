#!/usr/bin/env bash
# Fuzz the engine's input readers with libFuzzer (clang), outside CI.
#   scripts/fuzz.sh [--seconds N] [--build-only] [HARNESS ...]   (default: all, 120 s each)
# Builds build-fuzz/fuzz_<harness> with ASan + UBSan, runs it on its seed
# corpus (tests/fuzz/corpus/<harness>/, read only; new inputs go to
# build-fuzz/corpus/<harness>/) and writes crashing inputs to
# tests/fuzz/regressions/<harness>/. Commit those: the ctest test
# test_fuzz_<harness> replays the corpus and the regressions on every run.
#
# Harnesses: config, safetensors, tokens; runs and findings: tests/fuzz/README.md.
# Adding a reader: write tests/fuzz/fuzz_<name>.cpp
# (LLVMFuzzerTestOneInput: call the reader, catch burst::Error only), put a
# few valid files in tests/fuzz/corpus/<name>/, add a line to `harness_sources`
# below (the Kokkos-free sources it needs) and a burst_fuzz_replay(<name> ...)
# line in tests/CMakeLists.txt.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build-fuzz
seconds=120
build_only=0
declare -A harness_sources=(
  [config]="src/core/config.cpp src/core/error.cpp"
  [safetensors]="src/io/safetensors.cpp src/core/error.cpp"
  [tokens]="src/data/token_files.cpp src/core/error.cpp"
)
names=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift ;;
    --build-only) build_only=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) [ -n "${harness_sources[$1]:-}" ] || { echo "fuzz: unknown harness '$1' (known: ${!harness_sources[*]})" >&2; exit 2; }
       names+=("$1") ;;
  esac
  shift
done
[ ${#names[@]} -gt 0 ] || names=("${!harness_sources[@]}")

cxx=${CXX_FUZZ:-clang++}
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz: $cxx not found; on Debian: apt-get install clang" >&2
  exit 1
fi
mkdir -p "$build"
for name in "${names[@]}"; do
  bin=$build/fuzz_$name
  srcs=()
  for s in ${harness_sources[$name]}; do srcs+=("$root/$s"); done
  echo "fuzz: building $bin"
  nice -n 19 "$cxx" -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root/src" -I"$root" -DBURST_VERSION='"fuzz"' "$root/tests/fuzz/fuzz_$name.cpp" "${srcs[@]}" -o "$bin"
  [ $build_only = 1 ] && continue
  mkdir -p "$build/corpus/$name" "$root/tests/fuzz/regressions/$name"
  echo "fuzz: running $name for ${seconds}s"
  rc=0
  nice -n 19 "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$root/tests/fuzz/regressions/$name/" "$build/corpus/$name" "$root/tests/fuzz/corpus/$name" || rc=$?
  if [ $rc != 0 ]; then
    echo "fuzz: $name found a failing input (status $rc): see tests/fuzz/regressions/$name/; fix it and commit the input" >&2
    exit $rc
  fi
done
