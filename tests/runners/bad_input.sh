#!/usr/bin/env bash
# The Python runners and report scripts on bad input: one line naming the
# problem, exit status 1, no traceback, nothing written.
#   tests/runners/bad_input.sh PYTHON
set -uo pipefail
py=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'x = [\n' > "$tmp/bad.toml"
printf '[train]\na = 1\n' > "$tmp/noexp.toml"
fail=0
expect() {  # expect REGEX SCRIPT ARGS...
  local re=$1; shift
  local out rc
  out=$("$py" "$@" 2>&1); rc=$?
  if [ $rc -ne 1 ] || ! grep -qE "$re" <<<"$out" || grep -q Traceback <<<"$out"; then
    echo "FAIL: $* -> exit $rc: $out"; fail=1
  else
    echo "ok: $* -> $(tail -n1 <<<"$out")"
  fi
}
cd "$root"
expect "no experiment config .*exp_nosuch.toml \(experiments: .*main" experiments/runners/run_experiment.py nosuch
expect "bad.toml: not valid TOML" experiments/runners/run_experiment.py "$tmp/bad.toml"
expect "noexp.toml: no \[experiment\] table" experiments/runners/run_experiment.py "$tmp/noexp.toml"
expect "holds none of calibration/calibration.h5" paper_figs/write_report.py "$tmp/none" --out "$tmp/r.md"
expect "no exp_\*.h5 in" paper_figs/experiments_report.py "$tmp/none" --out "$tmp/figs"
expect "no such .*output: .*nope.h5" paper_figs/simulate_report.py "$tmp/nope.h5" --out "$tmp/sim"
expect "is not a readable HDF5 file" paper_figs/simulate_report.py "$tmp/bad.toml" --out "$tmp/sim"
expect "no such HDF5 result file" paper_figs/h5_summary.py "$tmp/nope.h5"
for d in r.md figs sim; do [ -e "$tmp/$d" ] && { echo "FAIL: $tmp/$d was written"; fail=1; }; done
[ $fail = 0 ] && echo "bad input ok"
exit $fail
