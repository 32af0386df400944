#!/usr/bin/env bash
# Install what a fresh machine lacks, idempotently, and print the Kokkos prefix.
#
#   scripts/bootstrap.sh                 host: Debian packages + Kokkos (OpenMP+Serial)
#                                        + Kokkos Kernels (OpenBLAS TPL) into the cache
#   scripts/bootstrap.sh --cuda          also/instead the CUDA backend (sm_90, patched)
#   scripts/bootstrap.sh --fetch-only D  put every source the GPU machine needs into D
#                                        (Kokkos, Kokkos Kernels, header-only deps)
#   scripts/bootstrap.sh --from D --cuda build from D, reaching no package registry
#   scripts/bootstrap.sh --print-prefix [--cuda]   print the install prefix and exit
#
# Cache: ${BURST_CACHE:-~/.cache/burst}/kokkos-<version>-<backend>-<patch hash>.
# Kokkos' own source is never committed: it comes from Debian's `trilinos`
# source package (13.2.0 carries Kokkos 3.4.01), fetched through a private
# sources.list so the system's apt configuration is left untouched.
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

backend=host
fetch_only=""
from=""
print_prefix=0
no_apt=0
jobs=${BURST_JOBS:-$(nproc)}
while [ $# -gt 0 ]; do
  case "$1" in
    --cuda) backend=cuda ;;
    --host) backend=host ;;
    --fetch-only) fetch_only=${2:?--fetch-only needs a directory}; shift ;;
    --from) from=${2:?--from needs a directory}; shift ;;
    --print-prefix) print_prefix=1 ;;
    --no-apt) no_apt=1 ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "bootstrap: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

prefix=$(burst_kokkos_prefix "$backend")
if [ "$print_prefix" = 1 ]; then echo "$prefix"; exit 0; fi

log() { echo "[bootstrap] $*" >&2; }

# ---------------------------------------------------------------- packages
host_packages=(build-essential cmake ninja-build pkg-config git xz-utils patch
  mpich libmpich-dev libhdf5-dev hdf5-tools libopenblas-dev libgtest-dev
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev
  python3-h5py python3-numpy python3-matplotlib)
header_only_packages=(libcli11-dev libtomlplusplus-dev nlohmann-json3-dev)

apt_updated=0
apt_update_once() {
  if [ "$apt_updated" = 0 ]; then
    log "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    apt_updated=1
  fi
}

install_packages() {
  local missing=()
  for p in "${host_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then log "Debian packages present"; return; fi
  if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null; then
    echo "bootstrap: missing packages (${missing[*]}) and not root to install them" >&2; exit 1
  fi
  local SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  apt_updated=0
  log "installing ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# A private apt configuration holding deb-src lines for the mirrors the
# system already uses; nothing under /etc/apt is changed.
private_apt() {
  local dir=$BURST_CACHE_DIR/apt
  mkdir -p "$dir/lists/partial" "$dir/archives/partial"
  local list=$dir/sources.list
  : >"$list"
  local f uri suite signed
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' "$f" | head -n1)
    signed=$(sed -n 's/^Signed-By:[[:space:]]*//p' "$f" | head -n1)
    for suite in $(sed -n 's/^Suites:[[:space:]]*//p' "$f" | head -n1); do
      [ "$suite" = bookworm ] || continue
      echo "deb-src [signed-by=$signed] $uri $suite main" >>"$list"
    done
  done
  if [ -f /etc/apt/sources.list ]; then
    awk '$1=="deb" && $3=="bookworm" {$1="deb-src"; print $1, $2, $3, "main"}' /etc/apt/sources.list >>"$list"
  fi
  if [ ! -s "$list" ]; then
    echo "bootstrap: found no bookworm mirror in /etc/apt to fetch the trilinos source from" >&2; exit 1
  fi
  APT_PRIVATE=(-o "Dir::Etc::sourcelist=$list" -o "Dir::Etc::sourceparts=-"
    -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache::Archives=$dir/archives" -o APT::Sandbox::User=root)
  apt-get "${APT_PRIVATE[@]}" update -qq >&2
}

# Kokkos and Kokkos Kernels sources, pristine, under $BURST_CACHE_DIR/src.
fetch_kokkos_source() {
  local src=$BURST_CACHE_DIR/src/kokkos-$BURST_KOKKOS_VERSION
  if [ -f "$src/kokkos/CMakeLists.txt" ] && [ -f "$src/kokkos-kernels/CMakeLists.txt" ]; then
    echo "$src"; return
  fi
  private_apt
  local dl=$BURST_CACHE_DIR/dl
  mkdir -p "$dl"
  log "downloading the trilinos $BURST_TRILINOS_VERSION source package (about 166 MB)"
  (cd "$dl" && apt-get "${APT_PRIVATE[@]}" source --download-only -qq trilinos >&2)
  local tarball
  tarball=$(ls "$dl"/trilinos_"$BURST_TRILINOS_VERSION"*.orig.tar.* 2>/dev/null | head -n1)
  [ -n "$tarball" ] || { echo "bootstrap: the trilinos orig tarball did not arrive in $dl" >&2; exit 1; }
  local tmp=$BURST_CACHE_DIR/src/.extract.$$
  rm -rf "$tmp"; mkdir -p "$tmp"
  log "extracting packages/kokkos and packages/kokkos-kernels"
  tar -xf "$tarball" -C "$tmp" --wildcards '*/packages/kokkos/*' '*/packages/kokkos-kernels/*'
  local top
  top=$(ls -d "$tmp"/*/packages | head -n1)
  rm -rf "$src"; mkdir -p "$src"
  mv "$top/kokkos" "$src/kokkos"
  mv "$top/kokkos-kernels" "$src/kokkos-kernels"
  rm -rf "$tmp" "$dl"
  grep -q "3.4.01\|Kokkos_VERSION_PATCH 01\|VERSION_PATCH 1" "$src/kokkos/CMakeLists.txt" ||
    log "warning: $src/kokkos does not look like Kokkos $BURST_KOKKOS_VERSION"
  echo "$src"
}

# Header-only dependencies, unpacked from their Debian packages into DIR/include.
fetch_header_only() {
  local out=$1 tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -qq "${header_only_packages[@]}" >&2)
  mkdir -p "$out/root"
  for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$out/root"; done
  rm -rf "$tmp"
  rm -rf "$out/include"; mv "$out/root/usr/include" "$out/include"; rm -rf "$out/root"
}

# Copy the pristine source and apply cmake/patches/*.patch.
patched_source() {
  local pristine=$1 dst=$2
  rm -rf "$dst"; mkdir -p "$dst"
  cp -a "$pristine/kokkos" "$pristine/kokkos-kernels" "$dst/"
  local p
  for p in "$root"/cmake/patches/kokkos-*.patch; do
    [ -f "$p" ] || continue
    log "patch $(basename "$p")"
    patch -s -d "$dst/kokkos" -p1 <"$p"
  done
}

build_kokkos() {
  local src=$1 build=$BURST_CACHE_DIR/build/$(basename "$prefix")
  rm -rf "$build"; mkdir -p "$build"
  local common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix"
    -DCMAKE_CXX_STANDARD=17 -DKokkos_CXX_STANDARD=17 -DCMAKE_POSITION_INDEPENDENT_CODE=ON
    -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON -DKokkos_ENABLE_TESTS=OFF
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5)  # Kokkos 3.4 asks for an old CMake; CMake 4 needs this
  if [ "$backend" = cuda ]; then
    local nvcc
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    [ -x "$nvcc" ] || { echo "bootstrap: --cuda needs nvcc (not found on PATH or in /usr/local/cuda)" >&2; exit 1; }
    export CUDA_ROOT=${CUDA_ROOT:-$(dirname "$(dirname "$nvcc")")}
    export PATH=$CUDA_ROOT/bin:$PATH
    log "configuring Kokkos $BURST_KOKKOS_VERSION (CUDA sm_90 + OpenMP + Serial)"
    cmake -S "$src/kokkos" -B "$build/kokkos" "${common[@]}" \
      -DCMAKE_CXX_COMPILER="$src/kokkos/bin/nvcc_wrapper" \
      -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_CUDA_LAMBDA=ON \
      -DKokkos_ENABLE_CUDA_CONSTEXPR=ON -DKokkos_ARCH_HOPPER90=ON >&2
  else
    log "configuring Kokkos $BURST_KOKKOS_VERSION (OpenMP + Serial)"
    cmake -S "$src/kokkos" -B "$build/kokkos" "${common[@]}" -DKokkos_ARCH_NATIVE=OFF >&2
  fi
  cmake --build "$build/kokkos" -j "$jobs" >&2
  cmake --install "$build/kokkos" >/dev/null

  if [ "$backend" = host ]; then
    # Kokkos Kernels with the OpenBLAS TPL. No scalar ETI: the engine's
    # GEMMs reach OpenBLAS through the TPL specialisations, and the few other
    # Kokkos Kernels templates it uses are instantiated in its own sources,
    # which keeps this step to about a minute instead of many.
    local libdir
    libdir=$(dirname "$(find /usr/lib /usr/lib64 -name 'libopenblas.so' 2>/dev/null | head -n1)")
    log "configuring Kokkos Kernels $BURST_KOKKOS_VERSION (OpenBLAS TPL in $libdir)"
    cmake -S "$src/kokkos-kernels" -B "$build/kokkos-kernels" -G Ninja \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" -DKokkos_ROOT="$prefix" \
      -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
      -DCMAKE_CXX_STANDARD=17 -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
      -DKokkosKernels_ENABLE_TPL_BLAS=ON -DBLAS_LIBRARIES=openblas -DBLAS_LIBRARY_DIRS="$libdir" \
      -DKokkosKernels_INST_DOUBLE=OFF -DKokkosKernels_INST_FLOAT=OFF \
      -DKokkosKernels_INST_COMPLEX_DOUBLE=OFF -DKokkosKernels_INST_COMPLEX_FLOAT=OFF \
      -DKokkosKernels_INST_ORDINAL_INT=OFF -DKokkosKernels_INST_OFFSET_SIZE_T=OFF \
      -DKokkosKernels_INST_OFFSET_INT=OFF -DKokkosKernels_ENABLE_TESTS=OFF \
      -DKokkosKernels_ENABLE_EXAMPLES=OFF >&2
    cmake --build "$build/kokkos-kernels" -j "$jobs" >&2
    cmake --install "$build/kokkos-kernels" >/dev/null
  fi
  rm -rf "$build"
}

# ------------------------------------------------------------------- main
if [ -n "$fetch_only" ]; then
  [ "$no_apt" = 1 ] || install_packages
  mkdir -p "$fetch_only"
  fetch_only=$(cd "$fetch_only" && pwd)
  src=$(fetch_kokkos_source)
  rm -rf "$fetch_only/kokkos" "$fetch_only/kokkos-kernels"
  cp -a "$src/kokkos" "$src/kokkos-kernels" "$fetch_only/"
  fetch_header_only "$fetch_only"
  echo "$BURST_KOKKOS_VERSION" >"$fetch_only/VERSION"
  log "sources for an offline build are in $fetch_only ($(du -sh "$fetch_only" | cut -f1))"
  exit 0
fi

if [ -f "$prefix/.complete" ]; then
  log "Kokkos $BURST_KOKKOS_VERSION ($backend) already in $prefix"
  [ -n "$from" ] || [ "$no_apt" = 1 ] || install_packages
  echo "$prefix"; exit 0
fi

# One build per cache entry at a time: two bootstraps (two checkouts, or a
# test run beside a build) once raced in the same build directory.
mkdir -p "$BURST_CACHE_DIR"
exec 9>"$BURST_CACHE_DIR/$(basename "$prefix").lock"
flock 9
if [ -f "$prefix/.complete" ]; then
  log "Kokkos $BURST_KOKKOS_VERSION ($backend) was built meanwhile in $prefix"
  echo "$prefix"; exit 0
fi

if [ -n "$from" ]; then
  from=$(cd "$from" && pwd)
  [ -f "$from/kokkos/CMakeLists.txt" ] || { echo "bootstrap: $from/kokkos holds no Kokkos source (make it with --fetch-only)" >&2; exit 1; }
  pristine=$from
else
  [ "$no_apt" = 1 ] || install_packages
  pristine=$(fetch_kokkos_source)
fi
work=$BURST_CACHE_DIR/build/src-$(basename "$prefix")
patched_source "$pristine" "$work"
start=$(date +%s)
build_kokkos "$work"
rm -rf "$work"
touch "$prefix/.complete"
log "built Kokkos ($backend) into $prefix in $(( $(date +%s) - start )) s"
echo "$prefix"
