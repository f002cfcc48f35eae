#!/usr/bin/env python
"""`perfcast advise` against fixed grids on synthetic campaigns with known truth (issue 21, a first
part of item 3: no Extra-P GPR advisor, no replayed real grids).

    PYTHONPATH=src .venv/bin/python bench/advisor.py [--seeds 10] [--json out.json]

Each scenario is an application whose whole run ``main`` is the sum of two kernels with known
PMNF laws plus 0.5 s, measured with relative normal noise (3%): ``main->compute`` and
``main->comm``.  A campaign starts from p = 2, 4, 8, 16, 32 with two repetitions each and may spend
``BUDGET`` core-hours more (runs cost their true time x p).  Strategies:

- ``advise``: fit, ask `advise` (default candidates: the doubling continued two steps, and a
  repetition of every measured point), run its first candidate that the budget still buys, repeat;
- ``extend``: the fixed grid continued by doubling (64, 128, ...), one run each, while affordable;
- ``repeat``: more repetitions of the measured grid, largest point first, round robin.

Scored by the relative error of the predicted ``main`` at the target p = 1024 (the selected
hypothesis, as `perfcast predict`), and whether the truth lies in the 90% interval; medians over
seeds.  Deterministic for a given ``--seeds`` (seed k of numpy's default generator per trial).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

NOISE = 0.03
TARGET = 1024.0
#: core-hours beyond the starting grid
BUDGET = 1.5
#: one-parameter scenarios: (compute, comm) of p; the campaign starts at p = 2..32, 2 repetitions
SCENARIOS = {
    "log2-comm": (lambda p, n: 10.0 + 0 * p, lambda p, n: 0.2 + 0.05 * np.log2(p) ** 2),
    "linear-compute": (lambda p, n: 8.0 + 0.001 * p, lambda p, n: 0.1 * np.sqrt(p)),
    "plogp-compute": (lambda p, n: 10.0 * (1 + 0.0005 * p * np.log2(p)), lambda p, n: 0.3 * np.log2(p)),
    "sqrt-comm": (lambda p, n: 6.0 + 0 * p, lambda p, n: 0.02 * p ** 0.75),
    # two parameters: problem size per process n (100 .. 800; the target at n = 800) -- the runs at
    # small n are cheap, the target's n is the largest
    "2d-log-comm": (lambda p, n: 0.01 * n, lambda p, n: 0.002 * np.sqrt(n) * np.log2(p) ** 2),
    "2d-plogp": (lambda p, n: 0.008 * n * (1 + 0.0005 * p * np.log2(p)), lambda p, n: 0.05 * np.log2(p)),
}
PS = [2, 4, 8, 16, 32]
NS = [100, 200, 400, 800]
#: 2-parameter campaigns start with one repetition per point (20 points) and may spend this much more
BUDGET_2D = 6.0
STRATEGIES = {False: ("advise", "extend", "repeat"), True: ("advise", "extend-all-n", "extend-target-n",
                                                         "extend-smallest-n")}


def two_d(name):
    return name.startswith("2d")


def truth(name, p, n=None):
    f, g = SCENARIOS[name]
    return float(f(p, n)), float(g(p, n)), float(f(p, n) + g(p, n) + 0.5)


def run(name, pt, rng):
    c, m, _ = truth(name, *pt)
    c *= 1 + NOISE * rng.standard_normal()
    m *= 1 + NOISE * rng.standard_normal()
    return {"main->compute": c, "main->comm": m, "main": c + m + 0.5 * (1 + NOISE * rng.standard_normal())}


def load(runs, tmp, names):
    from perfcast.io import load as read

    path = Path(tmp) / "exp.csv"
    lines = [",".join(names) + ",rep,callpath,metric,value"]
    reps: dict = {}
    for pt, values in runs:
        r = reps[pt] = reps.get(pt, -1) + 1
        lines += [",".join(f"{v:g}" for v in pt) + f",{r},{cp},time,{v!r}" for cp, v in values.items()]
    path.write_text("\n".join(lines) + "\n")
    return read([path])


def score(name, runs, tmp):
    import perfcast

    names = ["p", "n"] if two_d(name) else ["p"]
    exp = load(runs, tmp, names)
    ms = perfcast.model(exp)
    at = {"p": TARGET, "n": float(NS[-1])} if two_d(name) else {"p": TARGET}
    row = next(r for r in ms.predict(at) if r["callpath"] == "main")
    t = truth(name, *at.values())[2]
    inside = row["lower"] is not None and row["lower"] <= t <= row["upper"]
    return abs(row["value"] / t - 1), inside


def cost(name, pt):
    return truth(name, *pt)[2] * pt[0] / 3600


def campaign(name, strategy, seed, tmp):
    import perfcast
    from perfcast.analysis.advisor import MIN_STEP, advise, request
    from perfcast.errors import PerfcastError
    
    rng = np.random.default_rng(seed)
    if two_d(name):
        names = ["p", "n"]
        runs = [((p, n), run(name, (p, n), rng)) for p in PS for n in NS]
        left = BUDGET_2D
        target = {"p": TARGET, "n": float(NS[-1])}
    else:
        names = ["p"]
        runs = [((p,), run(name, (p,), rng)) for p in PS for _ in range(2)]
        left = BUDGET
        target = {"p": TARGET}
    budget, start = left, len(runs)

    def take(pt):
        nonlocal left
        runs.append((pt, run(name, pt, rng)))
        left -= cost(name, pt)

    if strategy.startswith("extend"):
        # the fixed grid continued by doubling p, at the n values the strategy names
        ns = {"extend": [None], "extend-all-n": NS, "extend-target-n": [NS[-1]], "extend-smallest-n": [NS[0]]}[strategy]
        p = PS[-1] * 2
        while p <= TARGET:
            pts = [(p,) if n is None else (p, n) for n in ns]
            if sum(cost(name, pt) for pt in pts) > left:
                break
            for pt in pts:
                take(pt)
            p *= 2
    elif strategy == "repeat":
        order = PS[::-1]
        k = 0
        while any(cost(name, (p,)) <= left for p in order):
            p = order[k % len(order)]
            k += 1
            if cost(name, (p,)) <= left:
                take((p,))
    else:
        for _ in range(40):
            exp = load(runs, tmp, names)
            ms = perfcast.model(exp)
            try:
                req = request(exp.parameters, exp.data[names].drop_duplicates().to_dict("records"), target)
            except PerfcastError:
                break      # the target's p measured (at some n): nothing left to extrapolate
            adv = advise(ms, exp, req)
            # the plan's rule (advisor.MIN_STEP): a run is worth making when it removes that share of
            # the variance left at the target
            worth = MIN_STEP * adv.uncertainty ** 2
            pick = next((c for c in adv.choices if c.gain > worth
                         and cost(name, tuple(c.at[q] for q in names)) <= left), None)
            if pick is None:
                break
            take(tuple(pick.at[q] for q in names))
    err, inside = score(name, runs, tmp)
    return {"scenario": name, "strategy": strategy, "seed": seed, "error": err, "inside": inside,
            "spent": budget - left, "new": sorted({pt for pt, _ in runs} - {pt for pt, _ in runs[:start]}),
            "runs": len(runs)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--json", default=None)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated (default: all)")
    a = ap.parse_args(argv)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.scenarios.split(","):
            for strategy in STRATEGIES[two_d(name)]:
                for seed in range(a.seeds):
                    out.append(campaign(name, strategy, seed, tmp))
                rows = [r for r in out if r["scenario"] == name and r["strategy"] == strategy]
                e = np.array([r["error"] for r in rows])
                print(f"{name:15s} {strategy:17s} median error {np.median(e):6.1%}  p90 {np.quantile(e, 0.9):6.1%}  "
                      f"inside {sum(r['inside'] for r in rows)}/{len(rows)}  "
                      f"spent {np.mean([r['spent'] for r in rows]):.2f} core-h  new points e.g. {rows[0]['new']}", flush=True)
    for d2 in (False, True):
        for strategy in STRATEGIES[d2]:
            rows = [r for r in out if r["strategy"] == strategy and two_d(r["scenario"]) == d2]
            if not rows:
                continue
            e = np.array([r["error"] for r in rows])
            print(f"{'all 2d' if d2 else 'all 1d':15s} {strategy:17s} median error {np.median(e):6.1%}  "
                  f"p90 {np.quantile(e, 0.9):6.1%}  coverage {np.mean([r['inside'] for r in rows]):.0%}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
