#!/usr/bin/env bash
# Which kernels of the lab's sm_90a files changed their machine code against a git revision: builds each
# file at REV and in the working tree with nvcc, dumps every kernel's SASS with cuobjdump (encodings and
# addresses stripped) and prints, per kernel, identical / changed / new / gone. No GPU needed; it is how
# "the engine's kernels are unchanged" was checked when lab-only variants were added to shared headers.
# Trailing blanks are stripped: cuobjdump pads every line to the dump's longest instruction, so a new
# kernel with a longer one (e.g. an 88-register wgmma) would otherwise mark every kernel changed.
#   tools/sass_diff.sh REV [file.cu ...]   (default: the four flash_{fwd,bwd}_wgmma_d{64,128}.cu)
# cuobjdump and nvdisasm: from PATH, else the nvidia-cuda-cuobjdump / -nvdisasm wheels (PyPI) unpacked under
# ~/.cache/burst/cuobjdump.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rev=${1:?usage: tools/sass_diff.sh REV [file.cu ...]}
shift
files=${*:-flash_fwd_wgmma_d64.cu flash_fwd_wgmma_d128.cu flash_bwd_wgmma_d64.cu flash_bwd_wgmma_d128.cu}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "sass_diff: no nvcc (set NVCC)"; exit 2; }
if ! command -v cuobjdump >/dev/null || ! command -v nvdisasm >/dev/null; then
  # cuobjdump runs nvdisasm for --dump-sass: both wheels
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/burst/cuobjdump
  for tool in cuobjdump nvdisasm; do
    if [ ! -x "$cache/nvidia/cu13/bin/$tool" ]; then
      mkdir -p "$cache/whl"
      python3 -m pip download --no-deps -q "nvidia-cuda-$tool" -d "$cache/whl" \
        || { echo "sass_diff: could not fetch the nvidia-cuda-$tool wheel"; exit 2; }
      python3 -m zipfile -e "$(ls "$cache"/whl/nvidia_cuda_"$tool"-*.whl | head -1)" "$cache"
      chmod +x "$cache/nvidia/cu13/bin/$tool"
    fi
  done
  export PATH=$PATH:$cache/nvidia/cu13/bin
fi
repo=$(git -C "$here" rev-parse --show-toplevel)
sub=${here#"$repo"/}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$repo" archive "$rev" "$sub" | tar x -C "$work" || { echo "sass_diff: no $sub at $rev"; exit 2; }
status=0
for f in $files; do
  for side in old new; do
    src=$here; [ $side = old ] && src=$work/$sub
    (cd "$src" && "$NVCC" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -c "$f" -o "$work/$side.o")
    cuobjdump --dump-sass "$work/$side.o" > "$work/$side.dump" || { echo "sass_diff: cuobjdump failed on $f ($side)"; exit 2; }
    awk -v dir="$work/$side" '
      /Function : / { fn = $3; next }
      fn != "" && /\/\*[0-9a-f]+\*\// { sub(/\/\* 0x[0-9a-f]+ \*\//, ""); sub(/^[ \t]*\/\*[0-9a-f]+\*\//, ""); sub(/[ \t]+$/, ""); print > (dir "_" fn ".sass") }' "$work/$side.dump"
  done
  echo "== $f"
  for p in "$work"/old_*.sass "$work"/new_*.sass; do [ -e "$p" ] || continue; basename "$p" | sed -e 's/^old_//' -e 's/^new_//'; done | sort -u |
  while read -r k; do
    o=$work/old_$k; n=$work/new_$k; name=${k%.sass}
    if [ ! -e "$o" ]; then echo "  new       $name"
    elif [ ! -e "$n" ]; then echo "  gone      $name"
    elif cmp -s "$o" "$n"; then echo "  identical $name ($(wc -l < "$n") instructions)"
    else echo "  CHANGED   $name ($(diff "$o" "$n" | grep -c '^[<>]') lines differ)"; touch "$work/changed"; fi
  done
  rm -f "$work"/old_*.sass "$work"/new_*.sass
done
[ -e "$work/changed" ] && status=1
exit $status
