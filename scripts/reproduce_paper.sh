#!/usr/bin/env bash
# Reproduce the paper's experiments at the scale of this machine, then at the
# paper's scale through the performance model, and write a report.
#
#   scripts/reproduce_paper.sh [--skip-build]
#
# 1. calibrate: this machine's cluster description from our microbenchmarks
#    (bench gemm, bench attention, bench pingpong, bench collective, a copy,
#    a one-rank step);
# 2. every experiment for real (experiments/configs/exp_*.toml), each with the
#    model's prediction of every run: main, ablation, scaling, attention,
#    sparse, memory -> experiments/results/exp_<name>.h5;
# 3. `burst simulate --table paper` (A800 cluster: section 10 rows, attention
#    only, ablation, 64 GPUs, scaling, memory vs sequence length);
# 4. the figures and tables (paper_figs/), and REPORT.md beside them.
# Results go to experiments/results (BURST_RESULTS to change). Set-up (Kokkos,
# the build) is scripts/build.sh's; it is not part of the timed run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${BURST_BUILD:-$root/build-host}
export BURST_BUILD=$build
res=${BURST_RESULTS:-$root/experiments/results}
export BURST_RESULTS=$res
py=/usr/bin/python3
case "${1:-}" in
  ""|--skip-build) ;;
  *) echo "reproduce_paper.sh: unknown argument '$1' (usage: scripts/reproduce_paper.sh [--skip-build])" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "reproduce_paper.sh: too many arguments (usage: scripts/reproduce_paper.sh [--skip-build])" >&2; exit 2; }
if [ "${1:-}" != --skip-build ]; then
  BURST_JOBS=${BURST_JOBS:-2} scripts/build.sh >/dev/null
fi
[ -x "$build/burst" ] || { echo "reproduce: no $build/burst (run scripts/build.sh)" >&2; exit 1; }
mkdir -p "$res"
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start ))s] $*"; }
log=$res/reproduce.log
# The earlier run's log is kept as reproduce.log.prev, moved there only when this run writes its first line.
rotated=0
run() {
  if [ $rotated = 0 ]; then
    [ -e "$log" ] && mv -f "$log" "$log.prev"
    : > "$log"; rotated=1
  fi
  stamp "$*" | tee -a "$log"; "$@" 2>&1 | tee -a "$log"
}

run "$py" experiments/runners/calibrate_cpu.py
for e in main ablation scaling attention sparse memory; do
  run "$py" experiments/runners/run_experiment.py "$e"
done
run "$build/burst" simulate --table paper --output "$res/simulate_paper.h5"
run "$py" paper_figs/simulate_report.py "$res/simulate_paper.h5" --out "$res/simulate"
run "$py" paper_figs/experiments_report.py "$res" --out "$res/figures"
elapsed=$(( $(date +%s) - start ))
run "$py" paper_figs/write_report.py "$res" --elapsed "$elapsed" --out "$res/REPORT.md"
stamp "done in ${elapsed}s; report: $res/REPORT.md" | tee -a "$log"
