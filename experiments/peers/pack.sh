# pack_dir DIR ARCHIVE KEEP...: everything under DIR but the files named KEEP
# (and ARCHIVE itself) into DIR/ARCHIVE (tar.gz), the packed files removed.
# Sourced by the device-call scripts (experiments/peers/run_multi_gpu.sh, the
# lab's run_h200.sh and profile_h200.sh): the device tool returns only a few
# files per call, so a call's results come back as one archive beside its
# console log (a lab run's files were lost to that limit on 2026-12-05).
pack_dir() {
  local dir=$1 archive=$2 ex=() keep=()
  shift 2
  for k in "$archive" "$@"; do ex+=(--exclude="$k"); keep+=(-not -name "$k"); done
  (cd "$dir" && tar czf "/tmp/pack.$$.tgz" "${ex[@]}" . 2>/dev/null && mv "/tmp/pack.$$.tgz" "$archive" &&
    find . -mindepth 1 "${keep[@]}" -delete && echo "packed $dir into $archive")
}
