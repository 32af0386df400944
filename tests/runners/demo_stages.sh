#!/usr/bin/env bash
# scripts/demo.sh in a scratch copy of the repository, with fake bootstrap, build and mpiexec:
# an unknown stage name is refused (one line, status 2) before anything runs; a stage that fails
# or is interrupted keeps the earlier run log and checkpoint; a stage that succeeds replaces them.
#   tests/runners/demo_stages.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/scripts" "$tmp/experiments/results" "$tmp/bin" "$tmp/build"
cp "$root/scripts/demo.sh" "$tmp/scripts/"
printf '#!/bin/sh\necho ran >> "%s/ran"\n' "$tmp" > "$tmp/scripts/bootstrap.sh"
printf '#!/bin/sh\necho ran >> "%s/ran"\necho "%s/build"\n' "$tmp" "$tmp" > "$tmp/scripts/build.sh"
# fake mpiexec: `info` succeeds; `train` writes "new" over the stage's log and checkpoint, then exits $FAKE_RC
cat > "$tmp/bin/mpiexec" <<'EOF'
#!/bin/sh
case " $* " in *" train "*) ;; *) exit 0 ;; esac
case " $* " in
  *passkey_tiny.toml*window4*) echo new > experiments/results/passkey_tiny_window4_log.h5 ;;
  *passkey_tiny.toml*) echo new > experiments/results/passkey_tiny_log.h5; echo new > experiments/results/passkey_tiny_ckpt.h5 ;;
esac
exit "${FAKE_RC:-0}"
EOF
chmod +x "$tmp"/scripts/*.sh "$tmp/bin/mpiexec"
export PATH="$tmp/bin:$PATH" BURST_PYTHON=true
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cd "$tmp"
res=experiments/results
echo committed > $res/passkey_tiny_log.h5; echo committed > $res/passkey_tiny_ckpt.h5

out=$(BURST_DEMO_STAGES="1 bogus" timeout 20 bash scripts/demo.sh 2>&1); rc=$?
if [ $rc != 2 ] || [ "$(grep -c . <<<"$out")" != 1 ] || ! grep -q "^demo.sh: unknown stage 'bogus'" <<<"$out" || [ -e ran ]; then
  bad "an unknown stage -> exit $rc: $out$([ -e ran ] && echo ' (and the build ran first)')"
else
  echo "ok: unknown stage -> $out"
fi
grep -q committed $res/passkey_tiny_log.h5 || bad "an unknown stage retrained stage 1 over its log"

out=$(BURST_DEMO_STAGES="1" FAKE_RC=1 timeout 20 bash scripts/demo.sh 2>&1); rc=$?
[ $rc != 0 ] || bad "a failed stage -> exit 0"
grep -q committed $res/passkey_tiny_log.h5 && grep -q committed $res/passkey_tiny_ckpt.h5 || bad "a failed stage replaced the earlier log / checkpoint"
out=$(BURST_DEMO_STAGES="control" FAKE_RC=130 timeout 20 bash scripts/demo.sh 2>&1); rc=$?
[ -e $res/passkey_tiny_window4_log.h5 ] && bad "a failed stage left a partial log where there was none"
ls $res | grep -q tmp && bad "a temporary was left in $res: $(ls $res)"
out=$(BURST_DEMO_STAGES="1" timeout 20 bash scripts/demo.sh 2>&1); rc=$?
[ $rc = 0 ] && grep -q new $res/passkey_tiny_log.h5 && grep -q new $res/passkey_tiny_ckpt.h5 || bad "a stage that succeeded -> exit $rc, log $(cat $res/passkey_tiny_log.h5): $out"
[ $fail = 0 ] && echo "demo stages ok"
exit $fail
