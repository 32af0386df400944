"""Shared pieces of the experiment runners: running `burst` under mpiexec,
reading run logs, asking the performance model (`burst simulate`) for the
prediction of each real run, and writing one HDF5 file per experiment.

Every run is real: `mpiexec -n P build-host/burst train|bench ...` with one
OpenMP thread per rank. The prediction of each run comes from src/perf (the
same library as the paper-scale tables) with the cluster description of this
machine that calibrate_cpu.py measured earlier in the same script run.
"""
import datetime
import resource
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib

import h5py
import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CONFIGS = os.path.join(ROOT, "experiments", "configs")
sys.path.insert(0, os.path.join(ROOT, "paper_figs"))
from burst_h5 import InputError, die, open_h5, prog, require  # noqa: E402,F401  (one-line errors, status 2)


class CommandFailed(RuntimeError):
    """A command the runners ran (burst under mpiexec, burst simulate) exited non-zero or timed out:
    the command, its status and the last lines of its output (its log)."""

    def __init__(self, cmd, status, output, log_path=None):
        self.cmd, self.status, self.log_path = cmd, status, log_path
        self.lines = [x for x in output.splitlines() if x.strip() and not x.startswith(("# run_measured", "$ "))][-8:]
        where = f" (log {log_path})" if log_path else ""
        super().__init__(f"command failed ({status}){where}: {' '.join(shlex.quote(c) for c in cmd)}\n" + "\n".join(self.lines))

    def report(self):
        """Print the failure without a traceback: one line naming the command and status, then the last lines
        of its output (the burst error line is the last of them)."""
        where = f"; its log {self.log_path} ends with:" if self.log_path else "; its output ends with:"
        print(f"{prog()}: error: `{' '.join(shlex.quote(c) for c in self.cmd)}` failed ({self.status}){where}",
              file=sys.stderr)
        for x in self.lines:
            print(f"  {x}", file=sys.stderr)
        sys.stderr.flush()


class Interrupted(BaseException):
    """SIGTERM / SIGINT to a runner (handle_signals): the command running is stopped (its process group),
    the runner's own temporaries removed, one line, exit 128 + the signal's number."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum

    def exit(self, what=""):
        """One line naming the signal (and what was kept), exit 130 (SIGINT) / 143 (SIGTERM)."""
        name = signal.Signals(self.signum).name
        print(f"{prog()}: interrupted ({name}){'; ' + what if what else ''}", file=sys.stderr, flush=True)
        sys.exit(128 + self.signum)


def _raise_interrupted(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the clean-up is not interrupted again
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise Interrupted(signum)


def handle_signals():
    """SIGTERM and SIGINT raise Interrupted (the main code removes its temporaries and calls .exit())."""
    signal.signal(signal.SIGTERM, _raise_interrupted)
    signal.signal(signal.SIGINT, _raise_interrupted)


def require_mpiexec():
    """mpiexec on PATH, else one line (status 2) before any work."""
    if shutil.which("mpiexec") is None:
        die("mpiexec is not on PATH: install MPI (MPICH or Open MPI) or add its bin directory to PATH")


def build_dir():
    return os.environ.get("BURST_BUILD", os.path.join(ROOT, "build-host"))


def burst_bin():
    b = os.path.join(build_dir(), "burst")
    if not os.path.exists(b):
        die(f"no {b}: build first (scripts/build.sh)")
    return b


def _make_dir(d, what):
    """os.makedirs(d) of a directory the runner writes to, checked to be writable; else one line (status 2)."""
    if os.path.exists(d) and not os.path.isdir(d):
        die(f"{what} {d}: exists and is not a directory")
    try:
        os.makedirs(d, exist_ok=True)
    except OSError as e:
        die(f"{what} {d}: cannot create the directory: {e.strerror or e}")
    if not os.access(d, os.W_OK | os.X_OK):
        die(f"{what} {d}: not writable")
    return d


def results_dir():
    if "BURST_RESULTS" in os.environ:
        return _make_dir(os.environ["BURST_RESULTS"], "BURST_RESULTS")
    return _make_dir(os.path.join(ROOT, "experiments", "results"), "the results directory")


def work_dir(name):
    return _make_dir(os.path.join(results_dir(), "work", name), "the work directory")


def cpu_cluster_paths():
    """The cluster and calibration TOML of this machine (calibrate_cpu.py)."""
    d = os.path.join(results_dir(), "calibration")
    c = os.environ.get("BURST_CPU_CLUSTER", os.path.join(d, "cpu.toml"))
    k = os.environ.get("BURST_CPU_CALIBRATION", os.path.join(d, "cpu_calibration.toml"))
    if not (os.path.exists(c) and os.path.exists(k)):
        die(f"no {c} / {k}: run experiments/runners/calibrate_cpu.py first")
    return c, k


def env_for(gpus_per_node=0):
    e = dict(os.environ)
    e["OMP_NUM_THREADS"] = "1"
    e["OMP_PROC_BIND"] = "false"
    e.pop("OMP_PLACES", None)
    if gpus_per_node:
        e["BURST_GPUS_PER_NODE"] = str(gpus_per_node)
    else:
        e.pop("BURST_GPUS_PER_NODE", None)
    return e


last_cpu_share = float("nan")
last_foreign_cores = float("nan")  # CPU (cores) that processes other than this run used during it
last_attempts = 0                   # runs of the last command (1 + quiet retries)
call_log = []                       # one dict per command run (every attempt): log, wall, share, foreign, steal

def _env_number(name, default, kind, lo, hi):
    """The number in environment variable `name` (else `default`), of type kind (int or float) in [lo, hi];
    anything else exits with one line naming the variable, the value and the allowed range (status 2)."""
    raw = os.environ.get(name, default)
    what = "an integer" if kind is int else "a number"
    try:
        v = kind(raw)
    except ValueError:
        die(f"{name}={raw!r}: not {what} (must be {what} in [{lo}, {hi}])")
    if not lo <= v <= hi:  # nan fails this too
        die(f"{name}={raw!r}: out of range (must be {what} in [{lo}, {hi}])")
    return v


# A run is retaken when other processes used more than this fraction of the
# machine's cores during it (BURST_FOREIGN_MAX), at most BURST_QUIET_RETRIES
# more times (0 = never).
FOREIGN_MAX = _env_number("BURST_FOREIGN_MAX", "0.10", float, 0.0, 1.0)
QUIET_RETRIES = _env_number("BURST_QUIET_RETRIES", "2", int, 0, 100)
QUIET_WAIT_S = _env_number("BURST_QUIET_WAIT_S", "60", float, 0.0, 3600.0)
# all retakes and waits of one script together stop after this many seconds
QUIET_BUDGET_S = _env_number("BURST_QUIET_BUDGET_S", "600", float, 0.0, 86400.0)
quiet_spent_s = 0.0


def _cpus():
    """The CPUs this process may run on (its affinity), and their count: the machine the accounting covers."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = list(range(os.cpu_count() or 1))
    return cpus, len(cpus)


CPUS, NCPU = _cpus()


def physical_cores(cpus=None):
    """The physical cores behind the CPUs this process may run on (SMT siblings
    counted once: the distinct sibling sets of sysfs' thread_siblings_list,
    which stay distinct across dies where core_id repeats); the CPU count where
    sysfs does not say. MPICH's `-bind-to core` places ranks on these."""
    cpus = list(cpus if cpus is not None else CPUS)
    seen = set()
    for c in cpus:
        try:
            with open(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list") as f:
                seen.add(f.read().strip())
        except OSError:
            return len(cpus)
    return len(seen) or 1


def host_cores():
    """The cores a run's ranks share (host.cores): BURST_HOST_CORES if set,
    else the physical cores when the ranks are bound one per core (binding()
    "core": on an SMT machine two logical CPUs are one core there), else the
    CPUs this process may use."""
    if "BURST_HOST_CORES" in os.environ:
        return _env_number("BURST_HOST_CORES", None, int, 1, 4096)
    return physical_cores() if binding() == "core" else NCPU


def host_cpu_seconds():
    """(busy, steal) CPU seconds since boot of the CPUs this process may run on,
    from /proc/stat's per-CPU lines (busy = user + nice + system + irq + softirq
    + steal; guest time is inside user); (nan, nan) where there is no /proc/stat."""
    busy = steal = 0.0
    want = {f"cpu{c}" for c in CPUS}
    seen = 0
    try:
        with open("/proc/stat") as f:
            for line in f:
                parts = line.split()
                if not parts or parts[0] not in want:
                    continue
                v = [int(x) for x in parts[1:]]
                st = v[7] if len(v) > 7 else 0
                busy += v[0] + v[1] + v[2] + v[5] + v[6] + st
                steal += st
                seen += 1
    except (OSError, ValueError):
        return float("nan"), float("nan")
    if seen == 0:
        return float("nan"), float("nan")
    hz = os.sysconf("SC_CLK_TCK")
    return busy / hz, steal / hz


def own_cpu_seconds():
    """CPU seconds of this process and its waited-for descendants (the ranks)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class ForeignMeter:
    """The CPU that processes other than this one and its waited-for children
    used since the meter started: /proc/stat's busy time of our CPUs less our
    own (getrusage), per second of wall, in cores; steal (the hypervisor's)
    counts as foreign and is also given alone. nan without /proc/stat."""

    def __init__(self):
        self.t0, self.own0 = time.time(), own_cpu_seconds()
        self.busy0, self.steal0 = host_cpu_seconds()

    def read(self):
        """(foreign cores, steal cores, wall seconds) since the start."""
        busy, steal = host_cpu_seconds()
        wall = max(time.time() - self.t0, 1e-9)
        return max(0.0, (busy - self.busy0) - (own_cpu_seconds() - self.own0)) / wall, (steal - self.steal0) / wall, wall


def wait_for_quiet(limit_s=None, interval_s=1.0):
    """Wait (at most limit_s) until other processes use at most FOREIGN_MAX of
    the cores over one interval; returns the seconds waited."""
    limit_s = QUIET_WAIT_S if limit_s is None else limit_s
    t0 = time.time()
    while time.time() - t0 < limit_s:
        m = ForeignMeter()
        time.sleep(interval_s)
        foreign = m.read()[0]
        if not (foreign == foreign) or foreign / NCPU <= FOREIGN_MAX:
            break
    return time.time() - t0


def kill_group(p, grace_s=5.0):
    """Stop the process group of Popen p (mpiexec and its ranks): SIGTERM, then SIGKILL after grace_s."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            break
        try:
            p.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue


def run_group(cmd, stdout, env=None, timeout=None):
    """Run cmd in its own process group (stdout + stderr to the open file stdout); returns its status. On a
    timeout or any exception (an interrupt of the runner) the whole group is stopped first: no orphaned ranks."""
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        return p.wait(timeout=timeout)
    except BaseException:
        kill_group(p)
        raise


def run_measured(cmd, log_path, env=None, timeout=900, retries=None):
    """Run cmd (stdout + stderr to log_path) and account the machine's CPU
    during it: our own (this process and the command's processes, from
    getrusage) and the foreign rest (/proc/stat's busy time less ours, steal
    included), in cores. When the foreign part exceeds FOREIGN_MAX of the
    cores, wait for a quiet second (at most QUIET_WAIT_S) and run the command
    again, at most `retries` more times (QUIET_RETRIES): the command rewrites
    its own outputs, so what is kept is the last attempt's. Every attempt is
    appended to call_log, and its output and accounting to the log file (a
    retake after the earlier attempts). Returns (wall seconds, CPU seconds of
    the command's processes, foreign cores); raises CommandFailed with the
    log's tail when the command fails (never retaken)."""
    retries = max(0, QUIET_RETRIES if retries is None else int(retries))
    global last_foreign_cores, last_attempts, quiet_spent_s
    last_attempts = 0
    for attempt in range(retries + 1):
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        meter = ForeignMeter()
        with open(log_path, "w" if attempt == 0 else "a") as f:
            f.write(("" if attempt == 0 else f"# run_measured: retake {attempt} of the command\n")
                    + "$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
            f.flush()
            try:
                rc = run_group(cmd, stdout=f, env=env, timeout=timeout)
            except subprocess.TimeoutExpired:
                f.flush()
                raise CommandFailed(cmd, f"timed out after {timeout} s", open(log_path, errors="replace").read()[-3000:],
                                    log_path) from None
        if rc != 0:
            raise CommandFailed(cmd, rc, open(log_path, errors="replace").read()[-3000:], log_path)
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        foreign, steal, wall = meter.read()
        cpu = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
        last_attempts = attempt + 1
        last_foreign_cores = foreign
        quiet = not (foreign > FOREIGN_MAX * NCPU)
        call_log.append(dict(log=os.path.basename(log_path), attempt=attempt, wall_s=wall, cpu_s=cpu,
                             foreign_cores=foreign, steal_cores=steal, quiet=quiet))
        with open(log_path, "a") as f:
            f.write(f"# run_measured: attempt {attempt + 1}, wall {wall:.3f} s, CPU of the command {cpu:.3f} s, "
                    f"other processes {foreign:.2f} cores (steal {steal:.2f}) of {NCPU}\n")
        if quiet or attempt == retries or quiet_spent_s >= QUIET_BUDGET_S:
            break
        waited = wait_for_quiet()
        quiet_spent_s += waited + wall
        print(f"  [quiet] {os.path.basename(log_path)}: other processes used {foreign:.2f} of {NCPU} cores; "
              f"waited {waited:.0f} s, running it again ({attempt + 2} of {retries + 1})", flush=True)
    return wall, cpu, foreign


BIND = os.environ.get("BURST_MPI_BIND", "core")
if BIND not in ("core", "none"):
    die(f"BURST_MPI_BIND={BIND!r}: expected core or none")
_flavour = None


def mpi_flavour():
    """'openmpi' or 'mpich' (hydra), from `mpiexec --version`, asked once."""
    global _flavour
    if _flavour is None:
        v = subprocess.run(["mpiexec", "--version"], capture_output=True, text=True).stdout
        _flavour = "openmpi" if ("Open MPI" in v or "OpenRTE" in v) else "mpich"
    return _flavour


def binding():
    """How mpiexec places the ranks: "core" (MPICH, BURST_MPI_BIND=core: rank r
    on core r mod cores) or "none" (Open MPI's own default, or unbound); the
    cluster description says the same (host.binding)."""
    return "core" if mpi_flavour() == "mpich" and BIND == "core" else "none"


def mpiexec(n, args, log_path, gpus_per_node=0, timeout=900, retries=None):
    """Run `mpiexec -n n burst args...` through run_measured (stdout+stderr to
    log_path; a retake when other processes loaded the machine). Returns wall seconds."""
    cmd = ["mpiexec", "-n", str(n)]
    if mpi_flavour() == "openmpi" and n > os.cpu_count():
        cmd.append("--oversubscribe")  # MPICH's hydra accepts any n; Open MPI needs this
    if binding() == "core":
        # MPICH: ranks bound to the cores round-robin (rank r on core r mod
        # cores). Unbound, the kernel placed 4 ranks on 2 cores as it liked, and
        # whether two ranks that talk shared a core changed from run to run: a
        # 2-rank all-to-all waited 0.6-2.5 ms per call across cores and 2.5-6.6 ms
        # on one core, and unbound runs of the same case drew from both (NOTES,
        # "Waits that fit the cores, pinned ranks"). BURST_MPI_BIND=none
        # launches them unbound.
        cmd += ["-bind-to", "core"]
    cmd += [burst_bin()] + args
    wall, cpu, _ = run_measured(cmd, log_path, env=env_for(gpus_per_node), timeout=timeout, retries=retries)
    global last_cpu_share
    # CPU seconds the ranks got per second of wall per rank (polling and
    # yielding waits count as CPU): 1 = every rank had a core; lower = the machine was
    # shared with other jobs or P exceeded the cores.
    last_cpu_share = cpu / wall / n
    return wall


# The machine's speed now, in the calibration's own terms: `burst bench layer` of
# the experiments' block (exp_model.json widths, float) at 512 tokens on one rank,
# CPU clock, median of 5 -- the calibration's one-rank point at that size
# (calibrate_cpu.py stores its median as calibration.h5 attribute probe_fwd_bwd_s).
PROBE_TOKENS = 512


def _exp_block():
    """The widths of the experiments' model (experiments/configs/exp_model.json), one block."""
    with open(os.path.join(CONFIGS, "exp_model.json")) as f:
        m = json.load(f)
    return dict(hidden=m["hidden_size"], heads=m["num_attention_heads"], kv_heads=m["num_key_value_heads"],
                head_dim=m["head_dim"], ffn=m["intermediate_size"], layers=m["num_hidden_layers"])


EXP_BLOCK = _exp_block()


def block_gemm_flops_fwd(tokens, hidden, heads, kv_heads, head_dim, ffn):
    """Forward GEMM FLOPs of one SwiGLU block (q, k, v, o, gate, up, down) at `tokens` tokens:
    perf::ModelShape::gemm_flops_per_token x tokens."""
    q, kv = heads * head_dim, kv_heads * head_dim
    return 2.0 * tokens * (hidden * q + 2 * hidden * kv + q * hidden + 3 * hidden * ffn)


def block_bench_args(tokens, repeats=5):
    """`burst bench layer` of the experiments' block (float, CPU clock, no check) at `tokens` tokens:
    calibrate_cpu.py's block points and the speed probe."""
    b = EXP_BLOCK  # bench layer's block has no layer count
    return ["bench", "layer", "--set", "bench.preset=\"custom\"", "--set", f"bench.hidden={b['hidden']}", "--set",
            f"bench.heads={b['heads']}", "--set", f"bench.kv_heads={b['kv_heads']}", "--set", f"bench.head_dim={b['head_dim']}",
            "--set", f"bench.ffn={b['ffn']}", "--set", f"bench.tokens={tokens}", "--set", "bench.dtype=\"float\"", "--set",
            f"bench.repeats={repeats}", "--set", "bench.check_tokens=0", "--set", "bench.clock=\"cpu\""]


PROBE_ARGS = block_bench_args(PROBE_TOKENS)


def speed_probe(workdir):
    """CPU seconds of one block fwd + bwd of the probe (above) now."""
    h5 = os.path.join(workdir, "probe.h5")
    mpiexec(1, PROBE_ARGS + ["--output", h5], os.path.join(workdir, "probe.log"), retries=0)
    with h5py.File(h5, "r") as f:
        return float(f.attrs["median_fwd_bwd_s"])


def probe_reference():
    """The calibration's probe time (calibration.h5 probe_fwd_bwd_s), or nan when there is none."""
    path = os.path.join(results_dir(), "calibration", "calibration.h5")
    if "BURST_CPU_CLUSTER" in os.environ or not os.path.exists(path):
        return float("nan")  # a fixture cluster (tests): no calibration of this machine to compare with
    with open_h5(path, "calibration file") as f:
        return float(f.attrs.get("probe_fwd_bwd_s", float("nan")))


def simulate(args, out_h5, cluster=None, calibration=None):
    """`burst simulate ... --output out_h5` with this machine's cluster (or `cluster`, and `calibration`);
    returns its stdout."""
    c, k = (cluster, calibration) if cluster and calibration else cpu_cluster_paths()
    c = cluster or c
    cmd = [burst_bin(), "simulate", "--cluster", c, "--calibration", k, "--output", out_h5] + args
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise CommandFailed(cmd, r.returncode, r.stdout + "\n" + r.stderr)
    return r.stdout


def cluster_without_waits(work):
    """This machine's cluster with the collective-wait constants set to 0: the
    model as it was before them, for the same runs (a comparison column)."""
    import re
    c, _ = cpu_cluster_paths()
    text = open(c).read()
    text = re.sub(r"(?m)^(collective_wait_ms|collective_wait_fit_ms|collective_wait_follow_ms|nap_wait_ms) = .*$",
                  r"\1 = 0   # zeroed: the model without collective waits", text)
    # The all-gather method's local work per rank count holds its follow
    # calls' waits above the cores: keep only its first value (the fewest
    # ranks, measured within the cores), as one number for every P.
    text = re.sub(r"(?m)^allgather_local_ranks = .*\n", "", text)
    text = re.sub(r"(?m)^allgather_local_ns_per_byte = \[\s*([0-9.eE+-]+)[^\n]*$",
                  r"allgather_local_ns_per_byte = \1   # the fewest ranks' value only: the model without collective waits", text)
    out = os.path.join(work, "cpu_without_waits.toml")
    with open(out, "w") as f:
        f.write(text)
    return out


def load_config(name):
    """An experiment's TOML (a name: experiments/configs/exp_<name>.toml, or a path); exits with one line
    naming the file and the problem when it is missing or not TOML."""
    path = name if name.endswith(".toml") else os.path.join(CONFIGS, f"exp_{name}.toml")
    if not os.path.exists(path):
        known = sorted(os.path.basename(p)[4:-5] for p in os.listdir(CONFIGS) if p.startswith("exp_") and p.endswith(".toml"))
        die(f"no experiment config {path} (experiments: {', '.join(known)}, or a path to a .toml)")
    try:
        with open(path, "rb") as f:
            cfg = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        die(f"{path}: not valid TOML: {e}")
    except UnicodeDecodeError as e:
        die(f"{path}: not valid TOML: not UTF-8 text (byte {e.start}: {e.reason})")
    except OSError as e:
        die(f"{path}: cannot read it: {e.strerror or e}")
    if "experiment" not in cfg:
        die(f"{path}: no [experiment] table (kind, description)")
    return path, cfg


def flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ",".join(toml_value(x) for x in v) + "]"
    return str(v)


def set_args(keys):
    out = []
    for k, v in keys.items():
        out += ["--set", f"{k}={toml_value(v)}"]
    return out


def write_attrs(g, d):
    for k, v in d.items():
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            v = json.dumps(v)
        g.attrs[k] = v


def machine_attrs():
    return {
        "host": socket.gethostname(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpu_count": os.cpu_count(),
        "omp_num_threads": 1,
        "load_average_at_start": json.dumps(os.getloadavg()),
    }


def rel_err(pred, meas):
    return (pred - meas) / meas if meas > 0 else float("nan")
