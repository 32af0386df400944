#!/usr/bin/env bash
# expect.sh STATUS REGEX CMD...: run CMD, require exit status STATUS and the
# combined output to match the extended REGEX (newlines folded to spaces).
set -u
want=$1; regex=$2; shift 2
out=$("$@" 2>&1); got=$?
flat=$(printf '%s' "$out" | tr '\n' ' ')
ok=1
if [ "$got" != "$want" ]; then echo "expected exit status $want, got $got"; ok=0; fi
if ! printf '%s' "$flat" | grep -Eq -- "$regex"; then echo "output does not match: $regex"; ok=0; fi
if [ $ok = 0 ]; then echo "---- output of: $*"; printf '%s\n' "$out"; exit 1; fi
echo "ok: status $got, output matches"
