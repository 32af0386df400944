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
# badly typed, misspelled or incomplete configs: one line naming the key, before anything runs
cfgs=$tmp/cfgs; mkdir -p "$cfgs"
smoke_body=$(sed -n '/^\[train\]/,$p' tests/fixtures/exp_smoke.toml)
bad_cfg() {  # bad_cfg NAME REGEX TOML...: the config exp_NAME.toml refused with REGEX
  local name=$1 re=$2; shift 2
  printf '%s\n' "$@" > "$cfgs/exp_$name.toml"
  expect "exp_$name.toml: $re" $RE "$cfgs/exp_$name.toml"
}
exp_hdr='[experiment]
kind = "train"'
bad_cfg exp_int "experiment = 1: must be a table" 'experiment = 1'
bad_cfg train_int "train = 3: must be a table" 'train = 3' "$exp_hdr" '[[run]]' 'label = "a"' 'ranks = 2' 'seq = 128'
bad_cfg ranks_str "\[\[run\]\] number 1 ranks = 'two': must be an integer >= 1" "$exp_hdr" '[[run]]' 'label = "a"' 'ranks = "two"' 'seq = 128'
bad_cfg gpn_str ".*gpus_per_node = 'x': must be an integer >= 0" "$exp_hdr" '[[run]]' 'label = "a"' 'ranks = 2' 'seq = 128' 'gpus_per_node = "x"'
bad_cfg set_int ".*set = 5: must be a table" "$exp_hdr" '[[run]]' 'label = "a"' 'ranks = 2' 'seq = 128' 'set = 5'
bad_cfg seq_scalar "\[matrix\] seq = 128: must be a non-empty list" "$exp_hdr" '[matrix]' 'method = ["burst"]' 'seq = 128' 'ranks = [2]'
bad_cfg method_str "\[matrix\] method = 'burst': must be a non-empty list" "$exp_hdr" '[matrix]' 'method = "burst"' 'seq = [128]' 'ranks = [2]'
bad_cfg methods_int "\[methods\] burst = 3: must be a table" "$exp_hdr" '[matrix]' 'method = ["burst"]' 'seq = [128]' 'ranks = [2]' '[methods]' 'burst = 3'
bad_cfg no_seq "run 'a' has no sequence length: give it seq = N \(or train.seq_len in \[train\]\)" "$exp_hdr" '[[run]]' 'label = "a"' 'ranks = 2'
bad_cfg rnaks "\[\[run\]\] number 1: unknown key 'rnaks'; did you mean 'ranks'\?" "$exp_hdr" '[[run]]' 'label = "a"' 'ranks = 2' 'seq = 128' 'rnaks = 4'
bad_cfg lable "\[\[run\]\] number 1: unknown key 'lable'; did you mean 'label'\?" "$exp_hdr" '[[run]]' 'label = "a"' 'lable = "b"' 'ranks = 2' 'seq = 128'
bad_cfg matrx "the config: unknown key 'matrx'; did you mean 'matrix'\?" "$exp_hdr" '[matrx]' 'method = ["burst"]'
bad_cfg gpns ".*unknown key 'gpus_per_nodes'; did you mean 'gpus_per_node'\?" "$exp_hdr" '[[run]]' 'label = "a"' 'ranks = 2' 'seq = 128' 'gpus_per_nodes = 2'
printf '[experiment]\ndescription = "caf\xe9"\n' > "$cfgs/exp_latin1.toml"
expect "exp_latin1.toml: not valid TOML: not UTF-8 text" $RE "$cfgs/exp_latin1.toml"
# the results location checked before any work; mpiexec on PATH
: > "$tmp/resfile"
BURST_RESULTS=$tmp/resfile expect "BURST_RESULTS .*resfile: exists and is not a directory" $RE tests/fixtures/exp_smoke.toml
mkdir -p "$tmp/res_dir/exp_smoke.h5"
BURST_RESULTS=$tmp/res_dir expect "res_dir/exp_smoke.h5: is a directory, not a results file; nothing was run" $RE tests/fixtures/exp_smoke.toml
mkdir -p "$tmp/nompi"
out=$(PATH=$tmp/nompi BURST_RESULTS=$tmp/res_nompi "$py" $RE tests/fixtures/exp_smoke.toml 2>&1); rc=$?
if [ $rc = 2 ] && [ "$(grep -c . <<<"$out")" = 1 ] && grep -q "^run_experiment.py: error: mpiexec is not on PATH" <<<"$out"; then
  echo "ok: no mpiexec -> $out"
else
  echo "FAIL: no mpiexec on PATH -> exit $rc: $out"; fail=1
fi
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
BR=experiments/peers/block_rounds.py
mkdir -p "$tmp/br_none" "$tmp/br_nojson/r1" "$tmp/br_badjson/r1" "$tmp/br_layer/r1"
printf '{"block": 3}\n' > "$tmp/br_badjson/r1/peers_block.json"
cp "$tmp/cmp_layer/layer_tiny_float.h5" "$tmp/br_layer/r1/"
printf '{"block": []}\n' > "$tmp/br_layer/r1/peers_block.json"
check 2 1 "^usage: block_rounds.py DIR" $BR
expect "no such directory: .*none" $BR "$tmp/none"
expect "br_none holds no round directories r1/, r2/" $BR "$tmp/br_none"
expect "br_nojson/r1: no peers_block.json" $BR "$tmp/br_nojson"
expect "br_badjson/r1/peers_block.json: no 'block' list" $BR "$tmp/br_badjson"
expect "layer_tiny_float.h5' is not a \`burst bench layer\` output: no attribute 'preset'" $BR "$tmp/br_layer"
RP=experiments/runners/repredict_attention.py
check 2 0 "^repredict_attention.py: error: the following arguments are required: exp, binary" $RP
expect "foreign.h5' is not an attention-kind exp_\* results file .*: no attribute 'cluster_toml'" $RP "$tmp/foreign.h5" /bin/true
# malformed results files: one line naming the file and what is wrong; a copied file refused; bytes vs str
"$py" - "$tmp" "$root" <<'PYEOF' || { echo "FAIL: cannot make the malformed-file fixtures"; exit 1; }
import sys, shutil, os, h5py, numpy as np
t, root = sys.argv[1], sys.argv[2]
def copy(src, dst):
    os.makedirs(os.path.dirname(f"{t}/{dst}"), exist_ok=True)
    shutil.copy(f"{root}/experiments/results/{src}", f"{t}/{dst}")
    return h5py.File(f"{t}/{dst}", "r+")
copy("exp_ablation.h5", "mal_copy/exp_main.h5").close()
with copy("exp_ablation.h5", "mal_zero/exp_ablation.h5") as f:
    for k in list(f["table"].keys()):
        d = f["table"][k]; dt = d.dtype; del f["table"][k]; f["table"].create_dataset(k, shape=(0,), dtype=dt)
with copy("exp_ablation.h5", "mal_uneven/exp_ablation.h5") as f:
    v = f["table/error"][:-1]; del f["table/error"]; f["table/error"] = v
with copy("exp_ablation.h5", "mal_dset/exp_ablation.h5") as f:
    del f["table"]; f["table"] = np.zeros(3)
with copy("exp_ablation.h5", "mal_ranks/exp_ablation.h5") as f:
    n = len(f["table/ranks"]); del f["table/ranks"]; f["table/ranks"] = np.array(["two"] * n, dtype=h5py.string_dtype())
with copy("exp_ablation.h5", "ok_bytes/exp_ablation.h5") as f:  # fixed-length bytes, no probe_after: drawn
    f.attrs["kind"] = np.bytes_(b"train"); del f["table/probe_after"]
    lab = [x.encode() for x in f["table/label"].asstr()]; del f["table/label"]; f["table/label"] = np.array(lab, dtype="S")
with copy("simulate_paper.h5", "sim_tgs.h5") as f:
    g = f["end_to_end"]; row = list(g.keys())[0]; fw = list(g[row].keys())[0]; del g[row][fw].attrs["tokens_per_s_per_gpu"]
with copy("simulate_paper.h5", "sim_attn.h5") as f:
    for k in list(f["attention_only"].keys()): del f["attention_only"][k]
with copy("simulate_paper.h5", "sim_fw.h5") as f:
    g = f["end_to_end"]; row = list(g.keys())[0]; fw = list(g[row].keys())[0]; g[row].move(fw, "NoSuchFramework")
for name, drop in (("log_norows.h5", "rows"), ("log_noacc.h5", "eval_accuracy")):
    with h5py.File(f"{t}/{name}", "w") as f:
        g = f.create_group("log"); g.attrs["rows"] = 2
        for c in ("step", "loss", "eval_loss", "eval_accuracy"): g[c] = np.array([0.0, 1.0])
        if drop == "rows": del g.attrs["rows"]
        else: del g[drop]
PYEOF
expect "mal_copy/exp_main.h5' holds experiment 'ablation', not 'main' as its name says" $ER "$tmp/mal_copy" --out "$tmp/figs"
expect "mal_zero/exp_ablation.h5' holds no runs \(an empty table\)" $ER "$tmp/mal_zero" --out "$tmp/figs"
expect "mal_uneven/exp_ablation.h5': the table's columns differ in length" $ER "$tmp/mal_uneven" --out "$tmp/figs"
expect "mal_dset/exp_ablation.h5' is not an exp_\* results file .*: 'table' is a Dataset, not a group" $ER "$tmp/mal_dset" --out "$tmp/figs"
expect "mal_ranks/exp_ablation.h5': table/ranks holds object values, not numbers" $ER "$tmp/mal_ranks" --out "$tmp/figs"
check 0 0 "wrote .*figs_ok/experiments_tables.md and 2 figures" $ER "$tmp/ok_bytes" --out "$tmp/figs_ok"
touch "$tmp/figs_ok/exp_stale.png"
check 0 0 "and 2 figures" $ER "$tmp/ok_bytes" --out "$tmp/figs_ok"
expect "sim_tgs.h5' is not a well-formed .*: missing .*tokens_per_s_per_gpu" $SR "$tmp/sim_tgs.h5" --out "$tmp/sim"
expect "sim_attn.h5' is not a well-formed .*: attention_only: an empty group" $SR "$tmp/sim_attn.h5" --out "$tmp/sim"
expect "sim_fw.h5' is not a well-formed .*: unknown framework 'NoSuchFramework'" $SR "$tmp/sim_fw.h5" --out "$tmp/sim"
check 2 0 "h5_summary.py: error: .*log_norows.h5: 'log' is not a run log \(no attribute 'rows'" paper_figs/h5_summary.py "$tmp/log_norows.h5"
check 2 0 "h5_summary.py: error: .*log_noacc.h5: the run log has no column 'log/eval_accuracy'" paper_figs/h5_summary.py "$tmp/log_noacc.h5"
check 0 0 "wrote" $WR "$root/experiments/results" --out "$tmp/r_noelapsed.md"
grep -q "wall time was not measured" "$tmp/r_noelapsed.md" 2>/dev/null && ! grep -q "nan s" "$tmp/r_noelapsed.md" ||
  { echo "FAIL: write_report.py without --elapsed: $(grep -o 'ran for.*' "$tmp/r_noelapsed.md")"; fail=1; }
# the shell scripts: an option without its value is one usage line (status 2), before anything runs
shcheck() {  # shcheck REGEX SCRIPT ARGS...
  local re=$1 out rc; shift
  out=$(timeout 20 bash "$@" 2>&1); rc=$?
  if [ $rc != 2 ] || [ "$(grep -c . <<<"$out")" != 1 ] || ! grep -qE "$re" <<<"$out"; then
    echo "FAIL: $* -> exit $rc: $out"; fail=1
  else
    echo "ok: $* -> $out"
  fi
}
shcheck "^test.sh: --from needs a directory" scripts/test.sh --cuda --from
shcheck "^build.sh: --build-dir needs a value" scripts/build.sh --build-dir
shcheck "^build.sh: --target needs a value" scripts/build.sh --target
# reproduce_paper.sh keeps the earlier reproduce.log (as reproduce.log.prev) when the new run starts writing
mkdir -p "$tmp/repro"
echo "earlier reproduce log" > "$tmp/repro/reproduce.log"
BURST_BUILD="$tmp/fakebuild" BURST_RESULTS="$tmp/repro" BURST_QUIET_WAIT_S=0 timeout 60 bash scripts/reproduce_paper.sh --skip-build >/dev/null 2>&1
grep -q "earlier reproduce log" "$tmp/repro/reproduce.log.prev" 2>/dev/null && grep -q "calibrate_cpu.py" "$tmp/repro/reproduce.log" ||
  { echo "FAIL: reproduce_paper.sh lost the earlier reproduce.log"; fail=1; }
for d in r.md figs sim cal; do [ -e "$tmp/$d" ] && { echo "FAIL: $tmp/$d was written"; fail=1; }; done
[ $fail = 0 ] && echo "bad input ok"
exit $fail
