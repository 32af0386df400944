# Shared by the reliability scripts. The test sets BURST_BIN (the burst
# executable) and BURST_LAUNCH (the launcher for 4 ranks, word-split on
# purpose: "mpiexec -n 4 [flags]").
set -u
: "${BURST_BIN:?}" "${BURST_LAUNCH:?}"
work=$(mktemp -d /tmp/burst_rel.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; [ -f "$work/out" ] && { echo "---- output"; cat "$work/out"; }; exit 1; }

# The tiny passkey run, small enough for ~20 steps a second at 4 ranks.
tiny=(--set train.seq_len=64 --set train.batch=8 --set data.digits=2 --set train.eval_every=0
      --set train.eval_sequences=8 --set train.warmup=5 --set train.log_every=1)

# PIDs of this script's ranks: processes whose command line starts with the
# burst binary and names this script's own work directory.
rank_pids() { pgrep -f "^$BURST_BIN train .*$work/" || true; }

# Wait until the output shows step N done (progress lines: "step      N/").
wait_for_step() {
  local n=$1 deadline=$((SECONDS + 60))
  until grep -Eq "^step +$n/" "$work/out" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "step $n not reached in 60 s"
    kill -0 "$launcher" 2>/dev/null || fail "the run ended before step $n"
    sleep 0.05
  done
}

# The dataset as text, every double with 17 significant digits (exact).
h5_column() { h5dump -d "/log/$2" -m %.17g -y -w 0 "$1" | sed -n '/DATA {/,/}/p'; }
h5_root_attr() { h5dump -a "/$2" -y "$1" | sed -n 's/^ *\([0-9-][0-9]*\) *$/\1/p' | tail -1; }
