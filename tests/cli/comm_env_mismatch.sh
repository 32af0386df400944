#!/usr/bin/env bash
# BURST_COMM set differently on two ranks (one of them not even a valid
# value): every rank stops with status 2 and a message, none waits for the
# other.   comm_env_mismatch.sh MPIEXEC BURST
set -u
mpiexec=$1 burst=$2
# MPICH's Hydra passes one variable to one executable with -env, Open MPI with -x.
if "$mpiexec" --version 2>&1 | grep -qi hydra; then envflag() { echo "-env $1 $2"; }; else envflag() { echo "-x $1=$2"; }; fi
args=(bench attention --set 'bench.seq=[16]' --set 'bench.methods=["ring"]' --set bench.head_dim=8 --output /tmp/burst_comm_env_$$.h5)
check() {  # the two ranks' values, the message expected
  local out rc
  out=$(timeout 60 "$mpiexec" -n 1 $(envflag BURST_COMM "$1") "$burst" "${args[@]}" : -n 1 $(envflag BURST_COMM "$2") "$burst" "${args[@]}" 2>&1)
  rc=$?
  rm -f /tmp/burst_comm_env_$$.h5
  [ $rc = 2 ] || { echo "FAIL: BURST_COMM $1 / $2: status $rc, expected 2 (124 = a hang)"; echo "$out"; exit 1; }
  echo "$out" | grep -q "$3" || { echo "FAIL: BURST_COMM $1 / $2: no '$3' in"; echo "$out"; exit 1; }
  echo "ok: BURST_COMM $1 / $2: status 2, '$3'"
}
check mpi garbage "BURST_COMM is not auto, mpi or nccl on another rank"
check mpi auto "BURST_COMM differs between the ranks"
