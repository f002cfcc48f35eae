#!/usr/bin/env python
"""Weights for exact measurements (issue 16): exact series (no measurement noise, one run per
point) generated from PMNF functions with MORE terms than the fitted model may use (perfcast's
default: one term + constant), so the only error is misspecification; fitted on x = 4..64 through
the user's path (perfcast.model, ModelSet.predict), predicted at 2x and 4x beyond the data (128,
256) and compared with the generating formula.

    .venv/bin/python bench/exact_weights.py [--series 300] [--seed 1]

Weight variants (bench/README.md "Exact measurements"):
  today     the metric not marked exact: single runs weighed by the "mixed" noise model
            (relative part plus an equal absolute part at the series' median, NOREP_ABS)
  relative  FitOptions(noise="relative"), not marked: weights 1 / mean^2
  equal     marked exact, every mean weighed alike (Extra-P's rule; fit.core.exact_scale replaced
            by ones for this run only)
  exact     marked exact (Metric.exact): fit.core.exact_scale -- a mean's scale is the larger of
            its own and the value at the largest x (growing series: equal weights; falling:
            relative)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import perfcast  # noqa: E402
from perfcast.experiment import CallTree, Experiment, Metric  # noqa: E402
from perfcast.fit import FitOptions  # noqa: E402
from perfcast.fit import core  # noqa: E402

TRAIN = np.array([4.0, 8.0, 16.0, 32.0, 64.0])
TARGETS = (128.0, 256.0)
L = np.log2


def families(rng, S):
    """name -> (formula text, function of x giving (S, len(x)) values)."""
    u = lambda lo, hi: 10 ** rng.uniform(lo, hi, S)[:, None]  # noqa: E731
    c1, a1, b1 = u(2, 4), u(-1, 1), u(0, 2)
    c2, a2, b2 = u(2, 4), u(0, 2), u(0, 2)
    a3, b3, c3 = u(4, 6), u(1, 3), u(1, 3)
    a4, b4 = u(4, 6), u(1, 3)
    return {
        "c + a x^2 + b x log2 x": lambda x: c1 + a1 * x ** 2 + b1 * x * L(x),
        "c + a x log2 x + b x^(1/2)": lambda x: c2 + a2 * x * L(x) + b2 * x ** 0.5,
        "a / x + b + c log2 x": lambda x: a3 / x + b3 + c3 * L(x),
        "a / x + b x^(1/2)": lambda x: a4 / x + b4 * x ** 0.5,
    }


def experiment(Y, exact):
    S = len(Y)
    cps = [f"app->s{i}" for i in range(S)]
    df = pd.DataFrame({"x": np.tile(TRAIN, S), "rep": 0, "callpath": np.repeat(cps, len(TRAIN)),
                       "metric": "Ir", "value": Y.reshape(-1)})
    tree = CallTree([("app", None, "app")] + [(cp, "app", cp[5:]) for cp in cps])
    return Experiment(["x"], df, [Metric("Ir", "#", "count", "exclusive", exact=exact)], tree)


def run(Y, variant):
    exact = variant in ("equal", "exact")
    opts = FitOptions(noise="relative") if variant == "relative" else None
    saved = core.exact_scale
    if variant == "equal":
        core.exact_scale = lambda f, count, X: np.ones_like(f)
    try:
        ms = perfcast.model(experiment(Y, exact), options=opts)
        rows = ms.predict([{"x": t} for t in TARGETS])
    finally:
        core.exact_scale = saved
    out = np.full((len(Y), len(TARGETS)), np.nan)
    for r in rows:
        out[int(r["callpath"][6:]), TARGETS.index(r["at"]["x"])] = r["value"]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    variants = ("today", "relative", "equal", "exact")
    print(f"{args.series} exact series per family, x = 4..64, one-term models; |pred - truth| / truth, "
          f"median / p90 (%), at 2x (x = 128) and 4x (x = 256)\n")
    print("| family | " + " | ".join(variants) + " |")
    print("|---|" + "---|" * len(variants))
    pooled = {v: [] for v in variants}
    for name, f in families(rng, args.series).items():
        Y = f(TRAIN[None, :])
        truth = np.hstack([f(np.array([[t]])) for t in TARGETS])
        cells = []
        for v in variants:
            err = np.abs(run(Y, v) - truth) / truth * 100
            pooled[v].append(err)
            cells.append(" ; ".join(f"{np.median(err[:, j]):.2f} / {np.quantile(err[:, j], 0.9):.2f}"
                                    for j in range(len(TARGETS))))
        print(f"| {name} | " + " | ".join(cells) + " |")
    cells = []
    for v in variants:
        err = np.vstack(pooled[v])
        cells.append(" ; ".join(f"{np.median(err[:, j]):.2f} / {np.quantile(err[:, j], 0.9):.2f}"
                                for j in range(len(TARGETS))))
    print("| all | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
