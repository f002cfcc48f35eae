#!/usr/bin/env python
"""Two-term laws whose second term is negative but outgrown by the first (bench/README.md
"Outgrown terms"): noise-free counts such as the messages of an all-to-all, ``p^2 - p``, the faces
of a square process grid, ``4p - 4 p^(1/2)``, or ``n log2(n) - n`` -- each non-negative from the
smallest measured x on.  Generated exactly, fitted through the user's path (perfcast.model with
``max_terms=2``, `perfcast model --terms 2`; the metric a count, so the asymptotic sign rule
applies), predicted at 4x and 16x the largest x and compared with the generating formula.

    .venv/bin/python bench/outgrown.py [--series 200] [--seed 1]
    PYTHONPATH=/tmp/old/src .venv/bin/python bench/outgrown.py     # another tree, side by side

Per family and variant: the share of series whose model has the generating terms, and the median /
p90 of |pred - truth| / truth at 4x and at 16x.  Variants: "exact" (the metric marked exact, one
run per point: cachegrind), "agree" (3 repetitions that agree: PMPI's counts), "noisy" (3
repetitions with +-1% uniform noise: the per-term rule still applies there, so this row shows what
the noisy path does and must not move).  The last family (positive terms) is the control.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

import perfcast
from perfcast.experiment import CallTree, Experiment, Metric

X = np.array([1.0, 2, 4, 8, 16, 32])
TARGETS = (128.0, 512.0)
L = np.log2


def families(rng, S):
    """name -> (generating terms {(exponent, log exponent)}, function of x (S, n) -> values)."""
    u = lambda lo, hi: 10 ** rng.uniform(lo, hi, S)[:, None]  # noqa: E731
    r = lambda: rng.uniform(0.3, 1.0, S)[:, None]             # noqa: E731  the negative term's share at x = 1 or 2
    a1, r1 = u(0, 3), r()
    a2, r2, c2 = u(1, 3), r(), u(0, 2)
    # constants that keep the law >= 0 from x = 1 on: its lowest value there (x^2 log2 x - 2 r x^2
    # dips to -r 2^(4r) x ... at x = 2^(2r - 1 / ln 2)), plus a margin
    grid = np.geomspace(1, 2 ** 12, 4000)[None, :]
    a3, r3 = u(0, 2), r()
    c3 = a3 * np.maximum(0, -np.min(grid * L(grid) - r3 * grid, axis=1, keepdims=True)) + u(0, 2)
    a4, r4 = u(0, 2), r()
    c4 = a4 * np.maximum(0, -np.min(grid ** 2 * L(grid) - 2 * r4 * grid ** 2, axis=1, keepdims=True)) + u(0, 2)
    a5, b5, c5 = u(0, 2), u(0, 2), u(2, 4)
    return {
        "a (x^2 - r x): pairs of an all-to-all": ({(2, 0), (1, 0)}, lambda x: a1 * (x * x - r1 * x)),
        "c + a (x - r x^(1/2)): faces of a square grid": ({(1, 0), (0.5, 0)}, lambda x: c2 + a2 * (x - r2 * x ** 0.5)),
        "c + a (x log2 x - r x)": ({(1, 1), (1, 0)}, lambda x: c3 + a3 * (x * L(x) - r3 * x)),
        "c + a (x^2 log2 x - 2 r x^2)": ({(2, 1), (2, 0)}, lambda x: c4 + a4 * (x * x * L(x) - 2 * r4 * x * x)),
        "control: c + a x^(3/2) + b log2 x": ({(1.5, 0), (0, 1)}, lambda x: c5 + a5 * x ** 1.5 + b5 * L(x)),
    }


def experiment(Y, variant, rng):
    S, n = Y.shape
    reps = 1 if variant == "exact" else 3
    vals = np.repeat(Y[:, :, None], reps, axis=2)
    if variant == "noisy":
        vals = vals * (1 + rng.uniform(-0.01, 0.01, vals.shape))
    cps = [f"app->s{i}" for i in range(S)]
    df = pd.DataFrame({"x": np.tile(np.repeat(X, reps), S), "rep": np.tile(np.arange(reps), S * n),
                       "callpath": np.repeat(cps, n * reps), "metric": "Ir", "value": vals.reshape(-1)})
    tree = CallTree([("app", None, "app")] + [(cp, "app", cp[5:]) for cp in cps])
    return Experiment(["x"], df, [Metric("Ir", "#", "count", "exclusive", exact=variant == "exact")], tree)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"perfcast {perfcast.__file__}")
    print(f"{args.series} series per family, x = 1..32, perfcast.model(max_terms=2); generating terms "
          f"recovered; |pred - truth| / truth median / p90 (%) at x = 128 (4x) ; 512 (16x)\n")
    print("| family | variant | terms recovered | 4x | 16x |")
    print("|---|---|---|---|---|")
    for name, (want, f) in families(rng, args.series).items():
        Y = f(X[None, :])
        truth = np.hstack([f(np.array([[t]])) for t in TARGETS])
        for variant in ("exact", "agree", "noisy"):
            ms = perfcast.model(experiment(Y, variant, rng), max_terms=2)
            pred = np.full(truth.shape, np.nan)
            for row in ms.predict([{"x": t} for t in TARGETS]):
                pred[int(row["callpath"][6:]), TARGETS.index(row["at"]["x"])] = row["value"]
            got = [ms[(f"app->s{i}", "Ir")] for i in range(len(Y))]
            hit = np.mean([{(float(t.factors[0][1]), t.factors[0][2]) for t in getattr(m, "terms", ())} == want
                           for m in got])
            err = np.abs(pred - truth) / truth * 100
            cells = [f"{np.median(err[:, j]):.2f} / {np.quantile(err[:, j], 0.9):.2f}" for j in range(len(TARGETS))]
            print(f"| {name} | {variant} | {100 * hit:.0f}% | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
