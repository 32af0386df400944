#!/usr/bin/env bash
# The runners when a run fails, is interrupted, runs twice at once or is re-run
# in part: nothing published is lost or half-written.
# - calibrate_cpu.py that fails or is stopped (SIGTERM): the earlier
#   calibration folder exactly as it was, no staging directory left;
# - run_experiment.py --only: the runs not re-run kept from the earlier file;
# - two run_experiment.py on one experiment: the second exits 2 naming the
#   lock, the first's temporary untouched; SIGTERM / SIGINT to a runner: one
#   line, exit 143 / 130, its temporary removed, no rank left running;
# - a run that stopped early (fewer steps than asked): an error, not a row.
#   tests/runners/robustness.sh PYTHON BUILD_DIR
set -uo pipefail
py=$1
build=$(cd "$2" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
export OMP_NUM_THREADS=1 BURST_QUIET_RETRIES=0 BURST_QUIET_WAIT_S=0
export BURST_CPU_CLUSTER=$root/tests/fixtures/cpu_cluster_test.toml
export BURST_CPU_CALIBRATION=$root/experiments/perf_calibration.toml
RE=experiments/runners/run_experiment.py
CC=experiments/runners/calibrate_cpu.py
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# fake burst builds: one that fails as burst does, one that sleeps (its pid in $tmp/sleep.pid),
# one whose train runs stop after one step of those asked
mkdir -p "$tmp/failbuild" "$tmp/sleepbuild" "$tmp/shortbuild"
printf '#!/bin/sh\necho "error: bench.tokens = 0 is out of range (fake burst)" >&2\nexit 2\n' > "$tmp/failbuild/burst"
printf '#!/bin/sh\necho $$ >> "%s/sleep.pid"\nexec sleep 60\n' "$tmp" > "$tmp/sleepbuild/burst"
printf '#!/bin/sh\nif [ "$1" = train ]; then exec "%s/burst" "$@" --set train.steps=1; fi\nexec "%s/burst" "$@"\n' \
  "$build" "$build" > "$tmp/shortbuild/burst"
chmod +x "$tmp"/*/burst
snapshot() { (cd "$1" && find . -type f | sort | xargs -r md5sum); }
wait_started() {  # until the sleeping fake burst runs (at most 20 s)
  for _ in $(seq 200); do [ -s "$tmp/sleep.pid" ] && return 0; sleep 0.1; done; return 1
}
no_sleepers() {
  local p
  for p in $(cat "$tmp/sleep.pid" 2>/dev/null); do kill -0 "$p" 2>/dev/null && { bad "$1: fake rank $p still running"; kill "$p"; }; done
  rm -f "$tmp/sleep.pid"
}
one_line() {  # one_line WHAT RC WANT_RC REGEX OUTPUT
  if [ "$2" -ne "$3" ] || ! grep -qE "$4" <<<"$5" || grep -q Traceback <<<"$5" || [ "$(grep -c . <<<"$5")" -ne 1 ]; then
    bad "$1 -> exit $2 (want $3): $5"
  else
    echo "ok: $1 -> $5"
  fi
}

# 1. calibrate_cpu.py: a failed and an interrupted calibration leave the earlier one as it was
cal=$tmp/cal/calibration
mkdir -p "$cal"
for f in cpu.toml cpu_calibration.toml calibration.h5 layer_np1_t256_s0.log layer_np1_t256_s0.h5; do echo "earlier $f" > "$cal/$f"; done
before=$(snapshot "$cal")
out=$(BURST_RESULTS=$tmp/cal BURST_BUILD=$tmp/failbuild timeout 60 "$py" $CC 2>&1); rc=$?
{ [ $rc = 1 ] && grep -q "fake burst" <<<"$out" && ! grep -q Traceback <<<"$out"; } || bad "calibrate with a failing burst -> $rc: $out"
[ "$(snapshot "$cal")" = "$before" ] || bad "a failed calibration changed $cal: $(snapshot "$cal")"
BURST_RESULTS=$tmp/cal BURST_BUILD=$tmp/sleepbuild timeout 60 "$py" $CC > "$tmp/cal.out" 2>&1 &
pid=$!
wait_started || bad "calibrate: the fake burst never started"
kill -TERM $pid; wait $pid; rc=$?
one_line "calibrate_cpu.py, SIGTERM" $rc 143 "^calibrate_cpu.py: interrupted \(SIGTERM\); .*calibration was left as it was" \
  "$(grep -v '^waited' "$tmp/cal.out")"
[ "$(snapshot "$cal")" = "$before" ] || bad "an interrupted calibration changed $cal"
ls -d "$tmp"/cal/work/calibration.staging.* 2>/dev/null && bad "a calibration staging directory was left"
no_sleepers calibrate

# 2. --only merges: the runs not re-run stay as they were
res=$tmp/res
mkdir -p "$res"
cp tests/fixtures/exp_smoke.toml "$tmp/exp_two.toml"
printf '\n[[run]]\nlabel = "ring_np2"\nranks = 2\nseq = 128\nset = { "parallel.method" = "ring" }\n' >> "$tmp/exp_two.toml"
table() {  # labels, groups, rows; burst_np2's measured time and date of its group
  "$py" -c "import h5py,sys; f=h5py.File(sys.argv[1]); t=f['table']; l=list(t['label'].asstr()); \
print(l, sorted(f['runs'].keys()), f.attrs['runs'], t['measured_step_s'][l.index('burst_np2')], \
f['runs/00_burst_np2'].attrs['measured_step_s'])" "$res/exp_two.h5"
}
BURST_RESULTS=$res BURST_BUILD=$build timeout 120 "$py" $RE "$tmp/exp_two.toml" >/dev/null 2>&1 || bad "the two-run experiment failed"
full=$(table)
BURST_RESULTS=$res BURST_BUILD=$build timeout 120 "$py" $RE "$tmp/exp_two.toml" --only ring >/dev/null 2>&1 || bad "--only ring failed"
part=$(table)
if [ "$full" = "$part" ] && grep -q "^\['burst_np2', 'ring_np2'\] \['00_burst_np2', '01_ring_np2'\] 2 " <<<"$part"; then
  echo "ok: --only ring kept burst_np2: $part"
else
  bad "--only ring did not keep the other run as it was: before $full, after $part"
fi

# 3 and 10. two runners at once; SIGTERM / SIGINT to a runner
echo "earlier results" > "$res/exp_smoke.h5"
for sig in TERM INT; do
  BURST_RESULTS=$res BURST_BUILD=$tmp/sleepbuild timeout 60 "$py" $RE tests/fixtures/exp_smoke.toml > "$tmp/a.out" 2>&1 &
  pid=$!
  wait_started || bad "run_experiment: the fake burst never started"
  first=$(ls "$res"/exp_smoke.h5.*.tmp 2>/dev/null)
  [ -n "$first" ] || bad "the first runner has no $res/exp_smoke.h5.<pid>.tmp"
  if [ $sig = TERM ]; then
    out=$(BURST_RESULTS=$res BURST_BUILD=$tmp/sleepbuild timeout 60 "$py" $RE tests/fixtures/exp_smoke.toml 2>&1); rc=$?
    one_line "a second runner" $rc 2 "^run_experiment.py: error: .*exp_smoke.h5: another runner is writing it \(pid [0-9]+, .*lock .*exp_smoke.h5.lock" "$out"
    [ -n "$first" ] && [ -e "$first" ] || bad "the second runner removed the first one's temporary"
  fi
  kill -$sig $pid; wait $pid; rc=$?
  want=$([ $sig = TERM ] && echo 143 || echo 130)
  one_line "run_experiment.py, SIG$sig" $rc $want "^run_experiment.py: interrupted \(SIG$sig\); .*exp_smoke.h5 was not written" \
    "$(grep -v '^experiment smoke' "$tmp/a.out")"
  ls "$res"/exp_smoke.h5.*tmp "$res"/exp_smoke.h5.lock 2>/dev/null && bad "SIG$sig: a temporary or the lock was left"
  grep -q "earlier results" "$res/exp_smoke.h5" || bad "SIG$sig: exp_smoke.h5 was replaced"
  no_sleepers "run_experiment SIG$sig"
done

# 9. a run that stopped before the steps asked: an error, the earlier results kept
out=$(BURST_RESULTS=$res BURST_BUILD=$tmp/shortbuild timeout 120 "$py" $RE tests/fixtures/exp_smoke.toml 2>&1); rc=$?
one_line "a run stopped early" $rc 1 "^run_experiment.py: error: run 'burst_np2' stopped early \(1 of 2 steps" \
  "$(grep -v '^experiment smoke' <<<"$out")"
grep -q "earlier results" "$res/exp_smoke.h5" || bad "a short run replaced exp_smoke.h5"

[ $fail = 0 ] && echo "runner robustness ok"
exit $fail
