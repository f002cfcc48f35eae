#!/usr/bin/env python
"""Coverage of perfcast's 90% prediction intervals on the LULESH split's design, with known truths:
one run per point at jobsize 27, 64, 125, 216, a new run predicted at 343 (0.67 doublings beyond),
series drawn from a known law times (1 + noise), so coverage over many draws is ground truth
(bench/README.md "What makes the LULESH intervals wide").

    .venv/bin/python bench/interval_design_sim.py [--groups 15] [--seed 1]

Each group is ``S`` = 40 series fitted together (perfcast.fit.core.fit_group, as the modeller fits
one metric's callpaths: the leave-largest-out drift is pooled over the group); ``run`` adds a
relative effect common to every series of a run (one draw per jobsize, the held-out run's too), as
LULESH's callpaths share their run.  Printed per (law, noise, run effect): coverage of the new
observation at 343 and median relative half-width of the interval as perfcast gives it and with
the drift part left out (perfcast.fit.model.PredictBatch.variance_parts; the t quantile then at the
noise's degrees of freedom), the median relative error, and half-width / median error.
"""

from __future__ import annotations

import argparse

import numpy as np

LAWS = {
    "10": lambda x: 10.0 + 0.0 * x,
    "2 + 0.5 log2(x)": lambda x: 2.0 + 0.5 * np.log2(x),
    "1 + 0.05 x^(1/2)": lambda x: 1.0 + 0.05 * np.sqrt(x),
}
CASES = [(law, noise, run) for law in LAWS for noise, run in ((0.03, 0.0), (0.12, 0.0), (0.03, 0.10))]
X = np.array([27.0, 64.0, 125.0, 216.0])
TARGET = 343.0
S = 40


def simulate(law: str, noise: float, run: float, groups: int, rng) -> dict:
    from perfcast.fit.core import fit_group
    from perfcast.fit.model import PredictBatch
    from perfcast.fit.special import t_quantile

    f = LAWS[law]
    cols = {"jobsize": np.array([TARGET])}
    cov, cov_nd, half, half_nd, err = [], [], [], [], []
    for _ in range(groups):
        r = rng.standard_normal(len(X) + 1)
        mean = f(X)[None, :] * (1 + noise * rng.standard_normal((S, len(X))) + run * r[None, :len(X)])
        truth = f(TARGET) * (1 + noise * rng.standard_normal(S) + run * r[-1])
        g = fit_group(X, mean, np.ones_like(mean), np.zeros_like(mean), ("jobsize",))
        models = [g.model(s) for s in range(S)]
        b = PredictBatch(S, 1, 1 + max(len(m.terms) for m in models), cols)
        b.add_models(np.arange(S), models)
        p = b.variance_parts(0.9, False)
        c = p["centre"][:, 0]
        var = sum(p[k][:, 0] for k in ("coef", "noise", "alternatives"))
        h = p["q"][:, 0] * np.sqrt(var + p["drift"][:, 0])
        h_nd = t_quantile(b.dof, 0.95) * np.sqrt(var)
        ok = p["ok"]
        cov += (np.abs(truth - c) <= h)[ok].tolist()
        cov_nd += (np.abs(truth - c) <= h_nd)[ok].tolist()
        half += (h / np.abs(c))[ok].tolist()
        half_nd += (h_nd / np.abs(c))[ok].tolist()
        err += (np.abs(c - truth) / np.abs(truth))[ok].tolist()
    return {"n": len(cov), "coverage": float(np.mean(cov)), "width": float(np.median(half)),
            "coverage_no_drift": float(np.mean(cov_nd)), "width_no_drift": float(np.median(half_nd)),
            "err": float(np.median(err))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=15, help="groups of 40 series per case")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print("| law | noise | run effect | n | coverage | width | coverage without drift | width without drift | median err | width / err |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for law, noise, run in CASES:
        r = simulate(law, noise, run, args.groups, rng)
        print(f"| {law} | {noise:.0%} | {run:.0%} | {r['n']} | {r['coverage']:.1%} | {r['width']:.0%} | "
              f"{r['coverage_no_drift']:.1%} | {r['width_no_drift']:.0%} | {r['err']:.1%} | {r['width'] / r['err']:.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
