#!/usr/bin/env bash
# kill -9 at a random step and --resume: the resumed run's loss trace (the
# run log) equals an uninterrupted run's bit for bit.
. "$(dirname "$0")/lib.sh"
# 60 steps, the kill in the first 25: the run must still be going when the
# kill lands (a tiny step takes ~50 ms, and the checkpoint is written every step).
steps=60
cfg=("${tiny[@]}" --set train.steps=$steps --set io.checkpoint_every=1)
mkdir -p "$work/ref" "$work/run"
$BURST_LAUNCH "$BURST_BIN" train "${cfg[@]}" --set io.run_log="$work/ref.h5" --set io.checkpoint="$work/ref/ck.h5" \
  > "$work/out" 2>&1 || fail "the reference run failed"

k=$((3 + RANDOM % 22))
echo "killing every rank with SIGKILL after step $k was logged (RANDOM picked it; rerun to vary)"
# A fresh output file before the launch: the background job truncates it
# only once it starts, and until then wait_for_step would read the reference
# run's lines (seen in CI: "no rank processes found").
rm -f "$work/out" && : >"$work/out"
$BURST_LAUNCH "$BURST_BIN" train "${cfg[@]}" --set io.run_log="$work/run.h5" --set io.checkpoint="$work/run/ck.h5" \
  > "$work/out" 2>&1 &
launcher=$!
wait_for_step "$k"
pids=$(rank_pids)
[ -n "$pids" ] || fail "no rank processes found"
kill -KILL $pids
wait "$launcher" && fail "the killed run exited 0"
echo "killed at: $(grep -E '^step' "$work/out" | tail -1)"

$BURST_LAUNCH "$BURST_BIN" train "${cfg[@]}" --set io.run_log="$work/run.h5" --set io.checkpoint="$work/run/ck.h5" --resume \
  > "$work/out" 2>&1 || fail "the resumed run failed"
grep -E "resumed from checkpoint" "$work/out" || fail "the run did not resume from a checkpoint"
for col in step loss grad_norm; do
  a=$(h5_column "$work/ref.h5" $col) b=$(h5_column "$work/run.h5" $col)
  [ -n "$a" ] || fail "no /log/$col in the reference log"
  [ "$a" = "$b" ] || fail "/log/$col differs: uninterrupted $a resumed $b"
done
echo "ok: loss trace of $steps steps identical after kill -9 at step $k and --resume"
