#!/usr/bin/env bash
# expect.sh STATUS REGEX CMD...: run CMD, require exit status STATUS ("!0":
# any failure) and the combined output to match the extended REGEX (newlines
# folded to spaces). EXPECT_WITHIN=S also requires CMD to end within S
# seconds (what a user waits for when a rank dies or stalls);
# EXPECT_ONE_ERROR=1 requires exactly one "burst: error" line (rank 0 speaks
# for all on bad input).
set -u
want=$1; regex=$2; shift 2
start=$(date +%s.%N)
out=$("$@" 2>&1); got=$?
elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')  # awk: bc is not everywhere
flat=$(printf '%s' "$out" | tr '\n' ' ')
ok=1
if [ "$want" = "!0" ]; then
  if [ "$got" = 0 ]; then echo "expected a failure exit status, got 0"; ok=0; fi
elif [ "$got" != "$want" ]; then echo "expected exit status $want, got $got"; ok=0; fi
if ! printf '%s' "$flat" | grep -Eq -- "$regex"; then echo "output does not match: $regex"; ok=0; fi
if [ -n "${EXPECT_ONE_ERROR:-}" ] && [ "$(printf '%s\n' "$out" | grep -c '^burst: error')" != 1 ]; then
  echo "expected the error once (from rank 0), got it $(printf '%s\n' "$out" | grep -c '^burst: error') times"; ok=0
fi
if [ -n "${EXPECT_WITHIN:-}" ] && awk -v e="$elapsed" -v w="$EXPECT_WITHIN" 'BEGIN { exit !(e > w) }'; then
  echo "took ${elapsed}s, more than ${EXPECT_WITHIN}s"; ok=0
fi
if [ $ok = 0 ]; then echo "---- output of: $*"; printf '%s\n' "$out"; exit 1; fi
echo "ok: status $got in ${elapsed}s, output matches"
