#!/usr/bin/env bash
# Bad input that only one rank of two has: that rank says what and which
# rank, and the job ends with a failure status, never a hang or silence
# (rank 0, which speaks for all when every rank has the error, is the healthy
# one here).   one_rank_fails.sh MPIEXEC BURST
#  - before the runtime (CLI11 checks a file of --config or --input): the
#    start-up handshake, at once;
#  - in the runtime (the environment of one rank): the agreement on a
#    collective error times out (10 s) and that rank aborts the job.
set -u
mpiexec=$1 burst=$2
work=$(mktemp -d /tmp/burst_one_rank.XXXXXX)
trap 'rm -rf "$work"' EXIT
# MPICH's Hydra passes one variable to one executable with -env, Open MPI with -x.
if "$mpiexec" --version 2>&1 | grep -qi hydra; then envflag() { echo "-env $1 $2"; }; else envflag() { echo "-x $1=$2"; }; fi
train=(train --set train.steps=1 --set train.eval_sequences=2 --set train.batch=2 --set parallel.cp=2)
check() {  # name, seconds allowed, regex, then the MPMD command line after mpiexec
  local name=$1 within=$2 regex=$3 out rc start elapsed
  shift 3
  start=$SECONDS
  out=$(timeout 90 "$mpiexec" "$@" 2>&1)
  rc=$?
  elapsed=$((SECONDS - start))
  [ $rc != 0 ] && [ $rc != 124 ] || { echo "FAIL: $name: status $rc (124 = a hang)"; echo "$out"; exit 1; }
  [ $elapsed -le "$within" ] || { echo "FAIL: $name: took ${elapsed}s, more than ${within}s"; echo "$out"; exit 1; }
  printf '%s' "$out" | tr '\n' ' ' | grep -Eq -- "$regex" || { echo "FAIL: $name: no '$regex' in"; echo "$out"; exit 1; }
  echo "ok: $name: status $rc in ${elapsed}s, '$regex'"
}
: > "$work/run.toml"
check "--config missing on rank 1" 30 "burst: error \\(rank 1\\): --config: File does not exist: /nonexistent/run.toml" \
  -n 1 "$burst" "${train[@]}" --config "$work/run.toml" : -n 1 "$burst" "${train[@]}" --config /nonexistent/run.toml
"$burst" attn-check --seq 32 --output "$work/in.h5" > "$work/make_input.txt" 2>&1 || { cat "$work/make_input.txt"; exit 1; }
check "--input missing on rank 1" 30 "burst: error \\(rank 1\\): --input: File does not exist: /nonexistent/in.h5" \
  -n 1 "$burst" attn-check --seq 32 --input "$work/in.h5" : -n 1 "$burst" attn-check --seq 32 --input /nonexistent/in.h5
check "BURST_GPUS_PER_NODE bad on rank 1" 60 \
  "burst: error \\(rank 1\\): BURST_GPUS_PER_NODE = 'abc' must be a positive integer \\(not every rank stopped on this error" \
  -n 1 "$burst" "${train[@]}" : -n 1 $(envflag BURST_GPUS_PER_NODE abc) "$burst" "${train[@]}"
# simulate never starts MPI (it waited for ever in a handshake the simulate ranks never join); launched as
# several processes, each refuses at once, saying so (every one of them wrote --output).
check "simulate: two processes" 30 "burst: error \\(rank 1\\): burst simulate runs in one process .*one of 2 processes" \
  -n 1 "$burst" simulate --seq 1M : -n 1 "$burst" simulate --seq 1G
