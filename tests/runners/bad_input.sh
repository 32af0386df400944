#!/usr/bin/env bash
# The Python runners and report scripts on bad input: ONE line on stderr,
# "<script>: error: <file or argument>: <problem>", exit status 2, no
# traceback, nothing written and nothing replaced. A burst command that fails
# under run_experiment.py: its error line shown, status 1, the earlier results
# file kept and no .tmp left.
#   tests/runners/bad_input.sh PYTHON
set -uo pipefail
py=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'x = [\n' > "$tmp/bad.toml"
printf '[train]\na = 1\n' > "$tmp/noexp.toml"
printf '[experiment]\nkind = "train"\ndescription = "no runs"\n' > "$tmp/exp_noruns.toml"
# HDF5 files of the wrong kind, empty, truncated; results directories holding them
mkdir -p "$tmp/res_empty" "$tmp/res_trunc" "$tmp/res_foreign" "$tmp/res_keep" "$tmp/cmp_empty" "$tmp/cmp_ce" \
         "$tmp/cmp_json" "$tmp/cmp_layer" "$tmp/wr_foreign/calibration" "$tmp/wr_empty/calibration" "$tmp/outfile"
: > "$tmp/res_empty/exp_main.h5"
: > "$tmp/cmp_ce/ce_bf16.h5"
: > "$tmp/wr_empty/calibration/calibration.h5"
printf '{"gemm": [\n' > "$tmp/cmp_json/peers_eager.json"
touch "$tmp/outfile/file"
"$py" - "$tmp" <<'EOF' || { echo "FAIL: cannot make the HDF5 fixtures"; exit 1; }
import sys, h5py
t = sys.argv[1]
for p in ("foreign.h5", "res_foreign/exp_main.h5", "cmp_layer/layer_tiny_float.h5", "wr_foreign/calibration/calibration.h5"):
    with h5py.File(f"{t}/{p}", "w") as f:
        f.attrs["something_else"] = 1
with h5py.File(f"{t}/res_trunc/exp_main.h5", "w") as f:
    f.create_dataset("x", data=list(range(20000)))
d = open(f"{t}/res_trunc/exp_main.h5", "rb").read()
open(f"{t}/res_trunc/exp_main.h5", "wb").write(d[:len(d) // 2])
open(f"{t}/res_keep/exp_smoke.h5", "w").write("earlier results\n")
EOF
# a burst that fails as burst does: its error on stderr, status 2
mkdir -p "$tmp/fakebuild"
printf '#!/bin/sh\necho "error: train.steps = 0 at --set is out of range: must be in [1, 1000000] (fake burst)" >&2\nexit 2\n' \
  > "$tmp/fakebuild/burst"
chmod +x "$tmp/fakebuild/burst"
fail=0
check() {  # check STATUS ONE_LINE REGEX SCRIPT ARGS...
  local want=$1 one=$2 re=$3; shift 3
  local out rc
  out=$("$py" "$@" 2>&1); rc=$?
  if [ $rc -ne "$want" ] || ! grep -qE "$re" <<<"$out" || grep -q Traceback <<<"$out" ||
     { [ "$one" = 1 ] && [ "$(grep -c . <<<"$out")" -ne 1 ]; }; then
    echo "FAIL: $* -> exit $rc (want $want): $out"; fail=1
  else
    echo "ok: $* -> $(tail -n1 <<<"$out")"
  fi
}
expect() {  # expect REGEX SCRIPT ARGS...: bad input, one line "<script>: error: ...", status 2
  local re=$1 script=$2; shift 2
  check 2 1 "^$(basename "$script"): error: .*$re" "$script" "$@"
}
cd "$root"
RE=experiments/runners/run_experiment.py
expect "no experiment config .*exp_nosuch.toml \(experiments: .*main" $RE nosuch
expect "bad.toml: not valid TOML" $RE "$tmp/bad.toml"
expect "noexp.toml: no \[experiment\] table" $RE "$tmp/noexp.toml"
# zero configurations: an error, and the earlier results file is not replaced by an empty one
export BURST_RESULTS=$tmp/res_keep BURST_CPU_CLUSTER=$root/tests/fixtures/cpu_cluster_test.toml
export BURST_CPU_CALIBRATION=$root/experiments/perf_calibration.toml BURST_QUIET_RETRIES=0
expect "--only 'nomatch' matches none of the 1 labels of .*exp_smoke.toml \(burst_np2\)" $RE tests/fixtures/exp_smoke.toml --only nomatch
expect "exp_noruns.toml: no configurations" $RE "$tmp/exp_noruns.toml"
BURST_PROBE_TOL=abc expect "BURST_PROBE_TOL='abc': not a number \(must be a number in \[0.0, 10.0\]\)" $RE tests/fixtures/exp_smoke.toml
BURST_PROBE_TOL=-1 expect "BURST_PROBE_TOL='-1': out of range" $RE tests/fixtures/exp_smoke.toml
# a burst run that fails: its error line, status 1, no traceback, the earlier results kept, no .tmp left
BURST_BUILD="$tmp/fakebuild" check 1 0 "error: train.steps = 0 at --set is out of range.*fake burst" $RE tests/fixtures/exp_smoke.toml
grep -q "earlier results" "$tmp/res_keep/exp_smoke.h5" || { echo "FAIL: exp_smoke.h5 was replaced"; fail=1; }
[ -e "$tmp/res_keep/exp_smoke.h5.tmp" ] && { echo "FAIL: exp_smoke.h5.tmp was left"; fail=1; }
unset BURST_RESULTS BURST_CPU_CLUSTER BURST_CPU_CALIBRATION BURST_QUIET_RETRIES
# calibrate_cpu.py: arguments and environment checked before anything runs
CC=experiments/runners/calibrate_cpu.py
check 2 0 "^calibrate_cpu.py: error: unrecognized arguments: --frobnicate" $CC --frobnicate  # argparse: usage + the error
check 0 0 "BURST_CALIB_SAMPLES" $CC --help
BURST_RESULTS="$tmp/cal" BURST_HOST_CORES=two expect "BURST_HOST_CORES='two': not an integer \(must be an integer in \[1, 4096\]\)" $CC
BURST_RESULTS="$tmp/cal" BURST_HOST_CORES=0 expect "BURST_HOST_CORES='0': out of range" $CC
BURST_RESULTS="$tmp/cal" BURST_CALIB_SAMPLES=0 expect "BURST_CALIB_SAMPLES='0': out of range \(must be an integer in \[1, 100\]\)" $CC
BURST_RESULTS="$tmp/cal" BURST_CALIB_SAMPLES=x expect "BURST_CALIB_SAMPLES='x': not an integer" $CC
# report scripts
ER=paper_figs/experiments_report.py
expect "no such directory: .*none" $ER "$tmp/none" --out "$tmp/figs"
expect "res_empty/exp_main.h5 is not a readable HDF5 file" $ER "$tmp/res_empty" --out "$tmp/figs"
expect "res_trunc/exp_main.h5 is not a readable HDF5 file .*truncated" $ER "$tmp/res_trunc" --out "$tmp/figs"
expect "res_foreign/exp_main.h5' is not an exp_\* results file .*: no attribute 'kind'" $ER "$tmp/res_foreign" --out "$tmp/figs"
expect "--out .*outfile/file: exists and is not a directory" $ER "$tmp/res_foreign" --out "$tmp/outfile/file"
MPLBACKEND=nosuchbackend expect "res_foreign/exp_main.h5' is not an exp_\* results file" $ER "$tmp/res_foreign" --out "$tmp/figs"
SR=paper_figs/simulate_report.py
expect "no such .*output: .*nope.h5" $SR "$tmp/nope.h5" --out "$tmp/sim"
expect "bad.toml is not a readable HDF5 file" $SR "$tmp/bad.toml" --out "$tmp/sim"
expect "foreign.h5' is not a \`burst simulate --table paper\` output: no attribute 'cluster_file'" $SR "$tmp/foreign.h5" --out "$tmp/sim"
MPLBACKEND=nosuchbackend expect "foreign.h5' is not a \`burst simulate" $SR "$tmp/foreign.h5" --out "$tmp/sim"
WR=paper_figs/write_report.py
expect "holds none of calibration/calibration.h5" $WR "$tmp/outfile" --out "$tmp/r.md"
expect "no such directory: .*none" $WR "$tmp/none" --out "$tmp/r.md"
expect "wr_foreign/calibration/calibration.h5' is not a calibration file .*: no attribute 'cluster_toml'" $WR "$tmp/wr_foreign" --out "$tmp/r.md"
expect "wr_empty/calibration/calibration.h5 is not a readable HDF5 file" $WR "$tmp/wr_empty" --out "$tmp/r.md"
expect "--out .*outfile: is a directory" $WR "$tmp/wr_foreign" --out "$tmp/outfile"
expect "no such HDF5 result file" paper_figs/h5_summary.py "$tmp/nope.h5"
CP=experiments/peers/compare.py
check 2 1 "^usage: compare.py DIR" $CP
expect "no such directory: .*none" $CP "$tmp/none"
expect "cmp_empty holds none of .*nothing to compare" $CP "$tmp/cmp_empty"
expect "cmp_ce/ce_bf16.h5 is not a readable HDF5 file" $CP "$tmp/cmp_ce"
expect "cmp_json/peers_eager.json: not valid JSON" $CP "$tmp/cmp_json"
expect "layer_tiny_float.h5' is not a \`burst bench layer\` output: no attribute 'preset'" $CP "$tmp/cmp_layer"
RP=experiments/runners/repredict_attention.py
check 2 0 "^repredict_attention.py: error: the following arguments are required: exp, binary" $RP
expect "foreign.h5' is not an attention-kind exp_\* results file .*: no attribute 'cluster_toml'" $RP "$tmp/foreign.h5" /bin/true
for d in r.md figs sim cal; do [ -e "$tmp/$d" ] && { echo "FAIL: $tmp/$d was written"; fail=1; }; done
[ $fail = 0 ] && echo "bad input ok"
exit $fail
