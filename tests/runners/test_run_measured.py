#!/usr/bin/python3
"""experiments/runners/common.py run_measured: the CPU of the command's own
processes is not counted as other processes' load, a busy process outside
the command is, and a loaded run is retaken (at most `retries` more times),
each attempt logged; run_experiment.Probe keeps the run's own accounting
(not the probe's) and retakes a run the probes find off the calibration's
speed. Run serially (ctest RUN_SERIAL): other tests' CPU is other processes'
load."""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "runners"))
import common as C  # noqa: E402

SPIN = [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass"]


def main():
    cores = os.cpu_count()
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "quiet.log")
        # 1. the command itself burns 1.5 CPU-s: all of it is ours (beyond what other processes used anyway,
        #    measured over a second before it: this machine may be busy with something else)
        C.call_log.clear()
        C.QUIET_WAIT_S = 0.5  # should this machine be loaded after all: do not wait long for quiet
        meter = C.ForeignMeter()
        time.sleep(1.0)
        background = meter.read()[0]
        wall, cpu, foreign = C.run_measured(SPIN, log, retries=2)
        assert cpu >= 1.4, f"the command's own CPU not accounted: {cpu:.3f} s"
        assert foreign < background + 0.5, \
            f"the command's own CPU counted as other processes': {foreign:.2f} cores (background {background:.2f})"
        print(f"quiet: wall {wall:.2f} s, own CPU {cpu:.2f} s, other {foreign:.2f} cores (background {background:.2f}), "
              f"attempts {C.last_attempts}")
        # 2. a busy process that is not the command's, over the whole run: foreign >= ~1 core / cores, retaken
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            C.call_log.clear()
            C.FOREIGN_MAX = 0.25 / cores   # a quarter of a core
            C.QUIET_WAIT_S = 0.5           # the hog never stops: do not wait long for quiet
            wall, cpu, foreign = C.run_measured(SPIN, os.path.join(d, "loud.log"), retries=2)
        finally:
            hog.kill()
            hog.wait()
        assert foreign > 0.5, f"a busy process beside the command not seen: {foreign:.2f} cores"
        assert C.last_attempts == 3, f"a loaded run must be retaken twice: {C.last_attempts} attempts"
        assert [c["attempt"] for c in C.call_log] == [0, 1, 2] and not any(c["quiet"] for c in C.call_log), C.call_log
        text = open(os.path.join(d, "loud.log")).read()
        assert "retake 1" in text and "retake 2" in text and text.count("# run_measured: attempt") == 3, text
        print(f"loaded: other {foreign:.2f} cores, attempts {C.last_attempts}")
        # 3. a failing command raises with its log's tail, and is not retaken
        C.call_log.clear()
        try:
            C.run_measured([sys.executable, "-c", "import sys; print('bad input: x'); sys.exit(3)"], os.path.join(d, "bad.log"))
        except RuntimeError as e:
            assert "bad input: x" in str(e) and "(3)" in str(e), str(e)
            assert C.call_log == [], C.call_log  # not retaken (nor logged as a measured attempt)
        else:
            raise AssertionError("a failing command did not raise")
        # 4. Probe: the run's accounting survives the probe after it; a run off the calibration's speed is retaken
        import run_experiment as R
        R.PROBE_PAUSE_S = 0.0
        speeds = iter([1.0, 1.0])  # probe before, probe after: on the calibration's speed
        C.probe_reference = lambda: 2.0

        def fake_probe(wd):
            C.last_cpu_share, C.last_foreign_cores, C.last_attempts = 9.0, 9.0, 9  # what a real probe's mpiexec does
            return 2.0 * next(speeds)

        def fake_run():
            C.last_cpu_share, C.last_foreign_cores, C.last_attempts = 0.5, 0.01, 1
            return "out"
        C.speed_probe = fake_probe
        p = R.Probe(d)
        assert p.run(fake_run) == "out" and p.retakes == 0, p.fields()
        assert (C.last_cpu_share, C.last_foreign_cores, C.last_attempts) == (0.5, 0.01, 1), "the probe's accounting leaked"
        speeds = iter([1.0, 1.3, 1.0, 1.0])  # slow after the first attempt, on speed for the second
        p = R.Probe(d)
        assert p.run(fake_run) == "out" and p.retakes == 1 and p.fields()["probe_after"] == 1.0, p.fields()
    print("run_measured ok")


if __name__ == "__main__":
    main()
