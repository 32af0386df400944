#!/usr/bin/env bash
# Run one paper experiment at this machine's scale (experiments/configs/exp_<name>.toml)
# and write experiments/results/exp_<name>.h5 with the model's prediction of each run.
#   scripts/run_experiment.sh <main|ablation|scaling|attention|sparse|memory|calibrate>
# Needs the host build (scripts/build.sh; BURST_BUILD=dir to point elsewhere) and, except for
# `calibrate`, this machine's cluster description (scripts/run_experiment.sh calibrate).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[ $# -eq 1 ] || { echo "usage: $0 <main|ablation|scaling|attention|sparse|memory|calibrate>" >&2; exit 2; }
py=/usr/bin/python3
if [ "$1" = calibrate ]; then exec "$py" experiments/runners/calibrate_cpu.py; fi
[ -f "experiments/configs/exp_$1.toml" ] || { echo "no experiments/configs/exp_$1.toml" >&2; exit 2; }
exec "$py" experiments/runners/run_experiment.py "$1"
