"""Report size and time for a big experiment (issue #8: 10,000 callpaths in <= 10 s and <= 20 MB).

A synthetic calling-context tree (fan-out 10, four levels below main: 10,000 leaves plus their
ancestors), p = 8..128 (5 points) x 3 repetitions, exclusive time with a few hidden scalability
bugs among the leaves (p log p, p^(3/2)) and noise.  The whole `perfcast report` path is timed
(fitting every callpath, ranking, plots, scaling loss, HTML) and the file size measured.

    .venv/bin/python bench/report_scale.py [--callpaths 10000] [--out report.html]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.experiment import CallTree, Experiment, Metric
from perfcast.report.html import ReportOptions, write_report

LIMIT_S = 10.0
LIMIT_MB = 20.0


def make(n_leaves: int, seed: int = 0) -> Experiment:
    rng = np.random.default_rng(seed)
    tree = CallTree()
    tree.add("main")
    leaves = []
    fan = 10
    levels = max(1, int(np.ceil(np.log(n_leaves) / np.log(fan))))
    frontier = ["main"]
    for lev in range(levels):
        nxt = []
        for parent in frontier:
            for k in range(fan):
                if lev == levels - 1 and len(leaves) >= n_leaves:
                    break
                path = tree.add(f"{parent}->f{lev}_{k}", parent, f"f{lev}_{k}")
                nxt.append(path)
                if lev == levels - 1:
                    leaves.append(path)
        frontier = nxt
    ps = np.array([8, 16, 32, 64, 128], dtype=float)
    base = rng.lognormal(-6, 1.0, len(leaves))
    growth = np.zeros(len(leaves))
    bugs = rng.choice(len(leaves), 5, replace=False)
    growth[bugs[:3]] = 1.0   # p log p
    growth[bugs[3:]] = 1.5   # p^(3/2)
    rows_cp, rows_p, rows_rep, rows_v = [], [], [], []
    for p in ps:
        scale = np.where(growth == 1.0, p * np.log2(p) / 24, np.where(growth == 1.5, (p / 8) ** 1.5, 1.0))
        for rep in range(3):
            v = base * scale * (1 + 0.03 * rng.standard_normal(len(leaves)))
            rows_cp += leaves
            rows_p.append(np.full(len(leaves), p))
            rows_rep.append(np.full(len(leaves), rep))
            rows_v.append(np.abs(v))
    df = pd.DataFrame({"p": np.concatenate(rows_p), "rep": np.concatenate(rows_rep),
                       "callpath": pd.Categorical(rows_cp), "metric": "time", "value": np.concatenate(rows_v)})
    return Experiment(["p"], df, [Metric("time", "s", "time", "exclusive")], tree, {"sources": ["synthetic"]})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--callpaths", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    exp = make(a.callpaths)
    out = a.out or Path(tempfile.mkdtemp()) / "report_scale.html"
    t0 = time.perf_counter()
    rep = write_report(exp, out, ReportOptions(target={"p": 1024}))
    dt = time.perf_counter() - t0
    mb = out.stat().st_size / 1e6
    print(f"{len(exp.tree)} callpaths ({a.callpaths} leaves), {len(exp.data)} values: report in {dt:.2f} s, "
          f"{mb:.2f} MB -> {out}")
    print(f"  ranked rows {len(rep.kernels)}, other kernels {rep.other['count'] if rep.other else 0}, "
          f"plots {len(rep.plots)}, scaling-loss rows {len(rep.scaling_loss['rows']) if rep.scaling_loss else 0}")
    print(f"  top 5: " + "; ".join(f"{k['name']} {k['order']}" for k in rep.kernels[:5]))
    ok = dt <= LIMIT_S and mb <= LIMIT_MB
    print(f"  limits: {LIMIT_S:.0f} s, {LIMIT_MB:.0f} MB -> {'ok' if ok else 'EXCEEDED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
