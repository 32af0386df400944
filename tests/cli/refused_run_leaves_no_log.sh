#!/usr/bin/env bash
# A run refused after its run log was opened (bad input found when a length's
# attention is set up: here the `half` policy and an evaluation length that
# does not split into 2 x cp stripes) exits 2 naming the setting, and leaves
# no run log: the corrected rerun then starts without io.overwrite. A resumed
# run's log is kept whatever happens.
#   refused_run_leaves_no_log.sh BURST WORKDIR   (4 ranks)
set -u
burst=$1 work=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
cd "$work" || fail "cannot enter $work"
base=(--set train.steps=2 --set train.batch=1 --set train.seq_len=64 --set parallel.cp=4 --set train.activation=half
      --set train.eval_sequences=1 --set data.digits=2 --set io.run_log=run.h5)
mpiexec -n 4 "$burst" train "${base[@]}" --set "train.eval_seq_lens=[60]" > out1 2>&1
rc=$?
[ $rc = 2 ] || { cat out1; fail "the refused run exited $rc, not 2"; }
grep -q "at 60 tokens (train.eval_seq_lens): train.activation = half needs the sequence (60 tokens)" out1 ||
  { cat out1; fail "the error does not name the setting and the length"; }
[ ! -e run.h5 ] || fail "the refused run left a run log"
mpiexec -n 4 "$burst" train "${base[@]}" --set io.checkpoint=ck.h5 > out2 2>&1 || { cat out2; fail "the corrected rerun failed"; }
[ -e run.h5 ] || fail "the corrected run wrote no run log"
# Resumed, then refused at the same late point: the earlier run's log stays.
rows() { /usr/bin/python3 -c "import h5py; print(int(h5py.File('run.h5', 'r')['log'].attrs['rows']))"; }
before=$(rows) || fail "cannot read the run log's rows"
mpiexec -n 4 "$burst" train "${base[@]}" --set io.checkpoint=ck.h5 --set train.steps=3 --set "train.eval_seq_lens=[60]" \
  --resume > out3 2>&1
rc=$?
[ $rc = 2 ] || { cat out3; fail "the refused resume exited $rc, not 2"; }
[ -e run.h5 ] || fail "a refused resume removed the earlier run's log"
[ "$(rows)" = "$before" ] || fail "a refused resume changed the earlier run's rows: $before -> $(rows)"
echo "refused run ok ($before rows kept)"
