"""Series that change regime, through the CLI: is their path as fast as the smooth series' path?

bench/cli_scale.py's inputs are smooth laws; none of their series is a poor fit, so none goes
through the segmented models (:mod:`perfcast.fit.segmented`), whose pieces were fitted one series
at a time (3,000 series with 2,000 poor fits: `predict --json` 25.7 s against 0.2 s smooth).  This
script writes Extra-P text files of N series on p = 4..128 (6 points, 5 repetitions) where a share
of the series step between two levels (3 + k below the step, 30 + k above, 1% noise) and another
share zigzag (no law fits them: poor fits that stay single models), the rest smooth ``10 + p/2``
with 10% noise, and times ``perfcast COMMAND`` on each size in a subprocess (wall time),
the smooth-only file of the same size beside it.  Printed per command and size: the times, ms per
series, the ratio mixed / smooth and the growth exponent from the previous size.

    .venv/bin/python bench/segmented_scale.py                       # 3k, 20k; predict --json
    .venv/bin/python bench/segmented_scale.py --sizes 1000,10000 --commands predict,json --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
POINTS = (4, 8, 16, 32, 64, 128)
COMMANDS = {
    "predict": ["predict", "{file}", "--at", "p=512", "--json"],
    "json": ["model", "{file}", "--json"],
    "model": ["model", "{file}"],
}


def write(path: Path, count: int, steps: float, zigzags: float, seed: int = 5) -> None:
    """``count`` series: the first ``steps`` share step, the next ``zigzags`` share zigzag, the rest
    are smooth (module docstring)."""
    rng = np.random.default_rng(seed)
    n_step, n_zig = int(round(count * steps)), int(round(count * zigzags))
    with open(path, "w") as f:
        f.write("PARAMETER p\nPOINTS " + " ".join(f"( {p} )" for p in POINTS) + "\nMETRIC time\n")
        for i in range(count):
            f.write(f"REGION r{i}\n")
            for k, p in enumerate(POINTS):
                if i < n_step:
                    level = 3.0 + i % 50 if p < 32 else 30.0 + i % 50
                    v = level * rng.uniform(0.99, 1.01, 5)
                elif i < n_step + n_zig:
                    v = (10.0 if k % 2 else 50.0 + i % 7) * rng.uniform(0.99, 1.01, 5)
                else:
                    v = (10 + 0.5 * p) * rng.uniform(0.9, 1.1, 5)
                f.write("DATA " + " ".join(f"{x:.6g}" for x in v) + "\n")


def run(argv: list[str]) -> dict:
    """Wall time and exit status of one command (stdout discarded, stderr's last line kept)."""
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return {"wall_s": time.perf_counter() - t0, "exit": proc.returncode,
            "err": proc.stderr.decode(errors="replace").strip().splitlines()[-1:]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="3000,20000")
    ap.add_argument("--commands", default="predict")
    ap.add_argument("--steps", type=float, default=1 / 3, help="share of series that step (default 1/3)")
    ap.add_argument("--zigzags", type=float, default=1 / 3, help="share of series that zigzag (default 1/3)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    sizes = [int(s) for s in a.sizes.split(",") if s.strip()]
    commands = [c.strip() for c in a.commands.split(",") if c.strip()]
    for c in commands:
        if c not in COMMANDS:
            ap.error(f"unknown command {c!r} (one of {', '.join(COMMANDS)})")
    OUT.mkdir(exist_ok=True)
    py = sys.executable
    pkg = subprocess.run([py, "-c", "import os, perfcast; print(os.path.dirname(perfcast.__file__))"],
                         capture_output=True, text=True).stdout.strip()
    if pkg:
        subprocess.run([py, "-m", "compileall", "-q", pkg], capture_output=True)
    print(f"bench/segmented_scale.py {time.strftime('%Y-%m-%d %H:%M:%S')} perfcast {pkg}, load "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; steps {a.steps:.2f}, zigzags {a.zigzags:.2f}", flush=True)
    rows = []
    print(f"| {'command':14s} | {'series':>6s} | {'mixed s':>8s} | {'smooth s':>8s} | {'ms/series':>9s} | "
          f"{'mixed/smooth':>12s} | {'growth':>6s} |")
    print("|" + "|".join("-" * w for w in (16, 8, 10, 10, 11, 14, 8)) + "|")
    for cmd in commands:
        prev = None
        for n in sizes:
            files = {}
            for kind, (st, zz) in (("mixed", (a.steps, a.zigzags)), ("smooth", (0.0, 0.0))):
                path = OUT / f"seg-{kind}-{n}-{st:.3f}-{zz:.3f}.txt"
                if not path.exists():
                    write(path, n, st, zz)
                files[kind] = path
            res = {}
            for kind, path in files.items():
                argv_ = [py, "-m", "perfcast", *[x.format(file=path) for x in COMMANDS[cmd]]]
                res[kind] = run(argv_)
                if res[kind]["exit"] not in (0, 1):
                    print(f"  {cmd} {kind} {n}: exit {res[kind]['exit']}: {res[kind]['err']}")
            mixed, smooth = res["mixed"]["wall_s"], res["smooth"]["wall_s"]
            growth = math.log(mixed / prev[1]) / math.log(n / prev[0]) if prev else float("nan")
            row = {"command": cmd, "series": n, "mixed_s": mixed, "smooth_s": smooth, "ms_per_series": 1000 * mixed / n,
                   "ratio": mixed / smooth, "growth": growth}
            rows.append(row)
            print(f"| {cmd:14s} | {n:6d} | {mixed:8.2f} | {smooth:8.2f} | {row['ms_per_series']:9.3f} | "
                  f"{row['ratio']:12.1f} | {growth:6.2f} |", flush=True)
            prev = (n, mixed)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
