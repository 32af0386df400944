#!/usr/bin/env bash
# Ranks started with different arguments or different --config contents:
# status 2 and one message naming the first rank that differs, before any
# work (it once ended in a raw MPI error, status 17). One file under two
# paths is the same command.   ranks_differ.sh MPIEXEC BURST
set -u
mpiexec=$1 burst=$2
work=$(mktemp -d /tmp/burst_differ.XXXXXX)
trap 'rm -rf "$work"' EXIT
msg="the ranks were started with different arguments or configuration files \\(rank 1 differs from rank 0\\); every rank must run the same command"
check() {  # name, status wanted, regex ("" for none), then the MPMD command line after mpiexec
  local name=$1 want=$2 regex=$3 out rc
  shift 3
  out=$(timeout 90 "$mpiexec" "$@" 2>&1)
  rc=$?
  [ $rc = "$want" ] || { echo "FAIL: $name: status $rc, expected $want (124 = a hang)"; echo "$out"; exit 1; }
  if [ -n "$regex" ]; then
    printf '%s' "$out" | tr '\n' ' ' | grep -Eq -- "$regex" || { echo "FAIL: $name: no '$regex' in"; echo "$out"; exit 1; }
    [ "$(printf '%s\n' "$out" | grep -c '^burst: error')" = 1 ] || { echo "FAIL: $name: not one error line"; echo "$out"; exit 1; }
  fi
  echo "ok: $name: status $rc"
}
check "attn-check --seq 32 / 64" 2 "^burst: error: $msg" \
  -n 1 "$burst" attn-check --seq 32 : -n 1 "$burst" attn-check --seq 64
train=(train --set train.steps=1 --set train.eval_sequences=2 --set train.batch=2 --set parallel.cp=2)
printf '[train]\nseq_len = 64\n' > "$work/a.toml"
printf '[train]\nseq_len = 128\n' > "$work/b.toml"
cp "$work/a.toml" "$work/a_copy.toml"
check "train --config with other contents" 2 "^burst: error: $msg" \
  -n 1 "$burst" "${train[@]}" --config "$work/a.toml" : -n 1 "$burst" "${train[@]}" --config "$work/b.toml"
check "train --config, the same contents at two paths" 0 "" \
  -n 1 "$burst" "${train[@]}" --config "$work/a.toml" : -n 1 "$burst" "${train[@]}" "--config=$work/a_copy.toml"
