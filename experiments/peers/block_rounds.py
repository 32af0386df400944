#!/usr/bin/env python3
"""The LLaMA block beside torch in alternating rounds: per-round ratios and their median.

  block_rounds.py DIR    DIR holds r1/, r2/, ... each with layer_<preset>_bf16.h5 (`burst bench layer`)
                         and peers_block.json (experiments/peers/peers.py --only block) of one round
                         (run_h200.sh PART 28: odd rounds torch first, even rounds ours first).

Prints, per preset and torch mode, each round's torch / burst ratio of the forward + backward time
(> 1: burst is faster; the issue's target is >= 1.1 against eager) and the median over the rounds
of the ratio and of each side's time; writes DIR/block_rounds.json with the same numbers.
"""
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "paper_figs"))
from burst_h5 import die, open_h5, require  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import load_peers  # noqa: E402

USAGE = "usage: block_rounds.py DIR   (DIR holds r1/, r2/, ... with layer_*_bf16.h5 and peers_block.json)"


def round_dirs(d):
    rs = []
    for p in glob.glob(os.path.join(d, "r*")):
        m = re.fullmatch(r"r(\d+)", os.path.basename(p))
        if m and os.path.isdir(p):
            rs.append((int(m.group(1)), p))
    return [p for _, p in sorted(rs)]


def load_round(p):
    """{(preset, mode): (torch_ms, burst_ms)} of one round directory."""
    ours = {}
    for f5 in sorted(glob.glob(os.path.join(p, "layer_*.h5"))):
        with open_h5(f5, "benchmark file") as f:
            require(f, f5, "a `burst bench layer` output", attrs=("preset", "tokens", "median_fwd_bwd_s"))
            preset = f.attrs["preset"]
            preset = preset.decode() if isinstance(preset, bytes) else str(preset)
            ours[(preset, int(f.attrs["tokens"]))] = float(f.attrs["median_fwd_bwd_s"]) * 1e3
    pj = os.path.join(p, "peers_block.json")
    if not os.path.exists(pj):
        die(f"{p}: no peers_block.json (the torch block of this round)")
    rows = load_peers(p).get("block")  # compare.py's reader: bad JSON exits in one line
    if not isinstance(rows, list):
        die(f"{pj}: no 'block' list (experiments/peers/peers.py --only block writes one)")
    out = {}
    for r in rows:
        if not isinstance(r, dict) or "ms" not in r:
            continue
        try:
            key, ms = (str(r.get("model")), int(r.get("tokens", 0))), float(r["ms"])
        except (TypeError, ValueError):
            die(f"{pj}: a block row with a non-numeric 'tokens' or 'ms': {r}")
        if key in ours:
            if not ms > 0:
                die(f"{pj}: block {key[0]} {r.get('mode')}: 'ms' must be > 0, got {ms}")
            out[(key[0], str(r.get("mode")))] = (ms, ours[key])
    return out


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        helping = len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help")
        print(__doc__ if helping else USAGE, file=sys.stdout if helping else sys.stderr)
        sys.exit(0 if helping else 2)
    d = sys.argv[1]
    if not os.path.isdir(d):
        die(f"no such directory: {d}" if not os.path.exists(d) else f"{d} is not a directory")
    rounds = round_dirs(d)
    if not rounds:
        die(f"{d} holds no round directories r1/, r2/, ...")
    per = {}
    for i, p in enumerate(rounds):
        for k, v in load_round(p).items():
            per.setdefault(k, []).append((os.path.basename(p), *v))
    if not per:
        die(f"{d}: no round has both a burst block and the torch block of the same preset and tokens")
    res = {}
    print(f"{'block, torch mode':20s} {'rounds: torch / burst':52s} {'median ratio':>12s} {'torch ms':>9s} {'burst ms':>9s}")
    for (preset, mode), xs in sorted(per.items()):
        ratios = [t / b for _, t, b in xs]
        med = statistics.median(ratios)
        tm, bm = statistics.median(t for _, t, _ in xs), statistics.median(b for _, _, b in xs)
        cells = " ".join(f"{n} {t / b:.3f}" for n, t, b in xs)
        print(f"{preset + ' ' + mode:20s} {cells:52s} {med:12.3f} {tm:9.3f} {bm:9.3f}")
        res[f"{preset}_{mode}"] = dict(rounds=[dict(round=n, torch_ms=t, burst_ms=b, ratio=t / b) for n, t, b in xs],
                                       median_ratio=med, median_torch_ms=tm, median_burst_ms=bm)
    with open(os.path.join(d, "block_rounds.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    print(f"wrote {os.path.join(d, 'block_rounds.json')}")


if __name__ == "__main__":
    main()
