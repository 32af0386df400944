#!/bin/bash
# Shared by the device runners (run_h200.sh, run_multi_gpu.sh): a time budget
# and `step`, which runs one command under a timeout and logs it. Source it
# after setting OUT, PART and t0 (the runner's start, date +%s).
# Budget: the device tool allows 10 min per command; stop starting steps
# that would end after BUDGET seconds (each gets a timeout from what is left).
BUDGET=${BUDGET:-530}
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
# step NAME CAP CMD...: run CMD with a timeout of min(CAP, time left), its
# output appended to $OUT/part${PART}_steps.log and its last lines to this log;
# never fails (the outcome is printed: ok, FAILED (exit n), TIMED OUT).
step() {
  local name=$1 cap=$2 log=part${PART}_steps.log; shift 2
  local l; l=$(left)
  local lim=$(( cap < l ? cap : l ))
  if [ "$lim" -lt 15 ]; then echo "== $name: SKIPPED ($l s left of the ${BUDGET} s budget)"; return 0; fi
  echo "== $name (timeout ${lim} s, t = $(( $(date +%s) - t0 )) s)"
  echo "== $name: $*" >>"$OUT/$log"
  local n0; n0=$(wc -l <"$OUT/$log")
  timeout --kill-after=10 "$lim" "$@" >>"$OUT/$log" 2>&1
  local rc=$?
  tail -n +"$((n0 + 1))" "$OUT/$log" | tail -n "${STEP_TAIL:-30}"
  if [ $rc = 0 ]; then echo "== $name: ok"; elif [ $rc = 124 ] || [ $rc = 137 ]; then echo "== $name: TIMED OUT after ${lim} s"; else echo "== $name: FAILED (exit $rc)"; fi
  return 0
}
