#!/usr/bin/env bash
# A bench that fails, is refused part way or is stopped leaves the earlier
# output at --output as it was (written under "<output>.tmp", renamed when
# complete), and the next run to that path works.
#   bench_output_kept.sh BURST WORKDIR
set -u
burst=$1 work=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
cd "$work" || fail "cannot enter $work"
sum() { md5sum "$1" | cut -d' ' -f1; }
step=(bench step --set bench.preset=tiny --set bench.warmup=0)
"$burst" "${step[@]}" --set "bench.tokens=[16]" --set bench.repeats=1 --output s.h5 > out1 2>&1 || { cat out1; fail "the first step bench failed"; }
before=$(sum s.h5)
# Stopped part way (a run of minutes, ended by SIGTERM after 4 s).
timeout -s TERM 4 "$burst" "${step[@]}" --set "bench.tokens=[16,8192]" --set bench.repeats=1000 --output s.h5 > out2 2>&1
rc=$?
[ $rc = 124 ] || { cat out2; fail "the long run was not stopped by the time limit (exit $rc)"; }
[ "$(sum s.h5)" = "$before" ] || fail "the stopped run changed the earlier output"
"$burst" "${step[@]}" --set "bench.tokens=[16]" --set bench.repeats=1 --output s.h5 > out3 2>&1 || { cat out3; fail "the rerun after the stop failed"; }
[ ! -e s.h5.tmp ] || fail "the rerun left the stopped run's temporary"
/usr/bin/python3 -c "import h5py, sys; f = h5py.File('s.h5', 'r'); b = f.attrs['benchmark']; sys.exit(0 if (b.decode() if isinstance(b, bytes) else b) == 'step' else 1)" ||
  fail "the rerun's output is not a step bench's"
# Every case skipped (Ulysses on 3 ranks over 2 heads): exit 2, the earlier file kept.
att=(bench attention --set bench.heads=2 --set bench.kv_heads=2 --set bench.head_dim=8 --set "bench.seq=[64]" --set bench.repeats=1)
mpiexec -n 3 "$burst" "${att[@]}" --set 'bench.methods=["ring"]' --output a.h5 > out4 2>&1 || { cat out4; fail "the ring bench failed"; }
before=$(sum a.h5)
mpiexec -n 3 "$burst" "${att[@]}" --set 'bench.methods=["ulysses"]' --output a.h5 > out5 2>&1
rc=$?
[ $rc = 2 ] || { cat out5; fail "the all-skipped bench exited $rc, not 2"; }
grep -q "every one of the 1 cases was skipped" out5 || { cat out5; fail "no message naming the skipped cases"; }
[ -e a.h5 ] || fail "the all-skipped bench removed the earlier output"
[ "$(sum a.h5)" = "$before" ] || fail "the all-skipped bench changed the earlier output"
[ ! -e a.h5.tmp ] || fail "the all-skipped bench left its temporary"
# A link as --output: the file it leads to is replaced, the link stays; a
# link to a missing directory is refused before any work.
mkdir -p elsewhere && ln -s elsewhere/g.h5 link.h5 || fail "cannot make the link"
gemm=(bench gemm --set "bench.sizes=[8]" --set bench.repeats=1)
"$burst" "${gemm[@]}" --output link.h5 > out6 2>&1 || { cat out6; fail "the gemm bench through a link failed"; }
"$burst" "${gemm[@]}" --output link.h5 > out7 2>&1 || { cat out7; fail "the gemm bench replacing through a link failed"; }
[ -L link.h5 ] || fail "the output replaced the link itself"
[ -f elsewhere/g.h5 ] || fail "no output where the link leads"
ln -s /nonexistent/g.h5 dangling.h5 || fail "cannot make the dangling link"
"$burst" "${gemm[@]}" --output dangling.h5 > out8 2>&1
rc=$?
[ $rc = 2 ] || { cat out8; fail "the dangling link exited $rc, not 2"; }
grep -q "the link 'dangling.h5'.*'/nonexistent/g.h5': the directory '/nonexistent' does not exist" out8 ||
  { cat out8; fail "the refusal does not name the link and its directory"; }
# An empty --output is refused (the commands read "" as "not given": the default path).
"$burst" "${gemm[@]}" --output "" > out9 2>&1
rc=$?
[ $rc = 2 ] || { cat out9; fail "an empty --output exited $rc, not 2"; }
grep -q -- "--output is empty: give the file to write" out9 || { cat out9; fail "no message naming the empty --output"; }
echo "bench output kept"
