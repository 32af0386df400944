#!/usr/bin/env bash
# `burst bench attention` with bench.methods under the launcher (BURST_LAUNCH,
# 2 ranks): ring and burst (zigzag, causal) and ulysses at a tiny shape. The
# HDF5 file must hold every dataset of every run, and the bytes each rank
# handed to the transport must equal the schedule's count (and be non-zero).
set -u
: "${BURST_BIN:?}" "${BURST_LAUNCH:?}"
work=$(mktemp -d /tmp/burst_bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; [ -f "$work/out" ] && { echo "---- output"; cat "$work/out"; }; exit 1; }

h5="$work/bench.h5"
# shellcheck disable=SC2086
$BURST_LAUNCH "$BURST_BIN" bench attention --set 'bench.methods=["ring","burst","ulysses"]' --set bench.seq=[32] \
  --set bench.heads=2 --set bench.kv_heads=2 --set bench.head_dim=8 --set bench.repeats=2 --set bench.warmup=1 \
  --output "$h5" >"$work/out" 2>&1 || fail "exit status $?"
grep -q "wrote $h5" "$work/out" || fail "no 'wrote' line"

# Dataset values as one line of numbers.
values() { h5dump -d "$1" -y -w 0 "$h5" | sed -n '/DATA {/,/}/p' | tr -d 'DATA{}\n' | tr ',' ' '; }
runs=(ring/zigzag_causal_auto/S32 burst/zigzag_causal_auto/S32 ulysses/zigzag_causal/S32)
for r in "${runs[@]}"; do
  for d in fwd_s bwd_s total_s compute_s comm_s bytes_sent bytes_analytic bytes_comm_only exposed_s; do
    h5ls "$h5/runs/$r/$d" >/dev/null 2>&1 || fail "dataset runs/$r/$d missing"
  done
  sent=$(values "/runs/$r/bytes_sent"); expect=$(values "/runs/$r/bytes_analytic")
  read -r -a s <<<"$sent"; read -r -a a <<<"$expect"
  [ ${#s[@]} -eq 2 ] || fail "$r: bytes_sent has ${#s[@]} entries, expected 2 ranks"
  for i in 0 1; do
    [ "${s[$i]}" = "${a[$i]}" ] || fail "$r: rank $i sent ${s[$i]} bytes, the schedule says ${a[$i]}"
    [ "${s[$i]}" -gt 0 ] || fail "$r: rank $i sent no bytes"
  done
  h5dump -a "/runs/$r/overlap_ratio" "$h5" >/dev/null 2>&1 || fail "$r: no overlap_ratio attribute"
  h5dump -a "/runs/$r/tflops_per_rank" "$h5" >/dev/null 2>&1 || fail "$r: no tflops_per_rank attribute"
done
# burst's backward moves Q, dO, lse, D and dQ; ring's K, V, dK, dV: at MHA
# with fp32 partials burst sends fewer bytes (ALGORITHMS.md section 3).
read -r -a rb <<<"$(values /runs/ring/zigzag_causal_auto/S32/bytes_sent)"
read -r -a bb <<<"$(values /runs/burst/zigzag_causal_auto/S32/bytes_sent)"
[ "${bb[0]}" -lt "${rb[0]}" ] || fail "burst sent ${bb[0]} bytes, not fewer than ring's ${rb[0]}"
echo "PASS: ${#runs[@]} runs, bytes equal the schedule (ring ${rb[0]}, burst ${bb[0]} per rank)"
