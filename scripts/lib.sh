# Shared by the scripts: versions, cache location, Kokkos prefix.
# shellcheck shell=bash
BURST_KOKKOS_VERSION=3.4.01
BURST_TRILINOS_VERSION=13.2.0
BURST_CACHE_DIR=${BURST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/burst}

# The prefix is keyed by version, backend and a hash of what shapes the
# build (our patches and the bootstrap's build recipe), so a changed patch
# gives a fresh prefix instead of a stale one.
burst_kokkos_prefix() {
  local backend=$1 here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  local key
  local f
  key=$(for f in "$here"/../cmake/patches/kokkos-*.patch "$here/bootstrap.sh"; do
          [ -f "$f" ] || continue
          case "$f" in *bootstrap.sh) sed -n '/^build_kokkos()/,/^}/p' "$f" ;; *) cat "$f" ;; esac
        done | sha256sum | cut -c1-10)
  echo "$BURST_CACHE_DIR/kokkos-$BURST_KOKKOS_VERSION-$backend-$key"
}
