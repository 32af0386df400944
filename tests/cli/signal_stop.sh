#!/usr/bin/env bash
# signal_stop.sh TARGET SIGNAL: SIGINT/SIGTERM to the launcher ("launcher")
# or to one rank only ("rank"): every rank finishes the same step, a
# checkpoint of that step is written, the run exits 0, and --resume goes on
# from there.
. "$(dirname "$0")/lib.sh"
target=$1 sig=$2
mkdir -p "$work/ck"
cfg=("${tiny[@]}" --set train.steps=400 --set io.run_log="$work/log.h5" --set io.checkpoint="$work/ck/ck.h5")
$BURST_LAUNCH "$BURST_BIN" train "${cfg[@]}" > "$work/out" 2>&1 &
launcher=$!
wait_for_step 3
if [ "$target" = rank ]; then
  pid=$(rank_pids | tail -1)  # one rank, not rank 0's printing one necessarily
  [ -n "$pid" ] || fail "no rank processes found"
  kill -"$sig" "$pid"
else
  kill -"$sig" "$launcher"
fi
wait "$launcher"; rc=$?
[ $rc = 0 ] || fail "exit status $rc after SIG$sig, expected 0"
line=$(grep -E "^SIG$sig received: stopped after step [0-9]+ of 400; checkpoint '.*' written; continue with --resume" "$work/out") ||
  fail "no stop message"
n=$(echo "$line" | sed -E 's/.*after step ([0-9]+) .*/\1/')
[ "$n" -lt 400 ] || fail "the run was not stopped early"
[ "$(h5_root_attr "$work/ck/ck.h5" step)" = "$n" ] || fail "the checkpoint is not that of step $n"
rows=$(h5dump -a /log/rows -y "$work/log.h5" | sed -n 's/^ *\([0-9][0-9]*\) *$/\1/p' | tail -1)
[ "$rows" = "$n" ] || fail "the run log has $rows rows, expected $n"
$BURST_LAUNCH "$BURST_BIN" train "${cfg[@]}" --set train.stop_after=2 --resume > "$work/out" 2>&1 || fail "resume failed"
grep -q "resumed from checkpoint '.*' at step $n" "$work/out" || fail "did not resume at step $n"
echo "ok: SIG$sig to the $target: stopped after step $n with a checkpoint, exit 0, resumed"
