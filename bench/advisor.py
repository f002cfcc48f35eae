#!/usr/bin/env python
"""Which run next (issue 21, item 3): `perfcast advise` against fixed grids and against Extra-P
4.2.5's own measurement point advisor (GPR mode), on synthetic oracles with known truth and on real
grids replayed as oracles.

    PYTHONPATH=src PERFCAST_SHARED_DATA=/work/shared/data .venv/bin/python bench/advisor.py \
        [--seeds 10] [--oracles ...] [--strategies ...] [--no-extrap] [--budgeted] [--json out.json]

**Oracles.**  Each is a grid of points a strategy may "run" (and only those), the cost of a run (its
whole-run time x processes, core-hours), a start design every strategy begins from, the *full grid*
(every grid point with the oracle's repetitions) and held-out larger points where predictions are
scored.

- synthetic, one parameter (``log2-comm``, ``linear-compute``, ``plogp-compute``, ``sqrt-comm``):
  the whole run ``main`` = 0.5 s + ``main->compute`` + ``main->comm`` with known PMNF laws of p, 3%
  relative normal noise; grid p = 2, 4, ..., 512; start p = 2..32 x 2 repetitions; full grid every
  p x 2 repetitions; held out: the target p = 1024.  A run costs its true time x p.
- synthetic, two parameters (``2d-log-comm``, ``2d-plogp``): also n = 100, 200, 400, 800 (the
  per-process size; runs at small n are cheap); start p = 2..32 x every n once; full grid every
  point once; held out: p = 1024, n = 800.
- ``relearn`` (replayed): Relearn's timers on p = 32..512 x n = 5000..9000, 2 repetitions
  (/work/shared/data/extrap/text/mpa/relearn_data.txt); grid p <= 256 (20 points), held out: the 5
  points at p = 512, the advisor's target p = 512, n = 9000; start p = 32, 64, 128 x n = 5000, 7000,
  9000 once; full grid 20 points x 2 repetitions; the whole run is ``main()``.
- ``hpccg-n`` (replayed): HPCCG measured on this machine (bench/data/hpccg-n, p = 2, time of the
  whole run ``app`` and HPCCG's own timers, 3 repetitions per n), grid n = 16..32, held out n = 40;
  start n = 16, 20, 24 once; full grid 5 x 3.
A replayed run at a point returns the values of one of that point's recorded repetitions (all
callpaths of one run together; a seed permutes the order in which repetitions come back) and costs
the point's measured mean time x p; a point can be run at most as often as it was recorded.
Synthetic values are drawn per (seed, point, k-th run there): every strategy sees the same value for
the same run.  Not included: the LULESH ensemble (thicket/lulesh_user_ensemble.json) has at most
2 problem sizes at any (jobsize, threads) and 3 jobsizes at any (size, threads), so no grid with a
held-out larger point and a line to extrapolate along (bench/realdata.py's docstring lists its
points); LULESH's weak scaling set has one run at each of 5 sizes (nothing to choose between).

**Strategies** (each a sequence of runs after the start, up to the full grid's cost):

- ``advise``: fit (perfcast.model), ask `advise` (candidates: every grid point, new or repeated),
  run its best-ranked candidate that removes >= MIN_STEP of the variance left and is affordable,
  repeat; it stops when none does.
- ``extrap-gpr``: Extra-P 4.2.5's MeasurementPointAdvisor (extrap.mpa, in its own venv
  bench/.venv-extrap, driven by a helper process: never imported here): the runs so far in
  Extra-P's text format, modelled by its ModelGenerator, its advisor asked with the grid's values
  as the parameter value series (its "manual" series), the whole-run callpath selected and the
  budget left; it answers in its base mode (complete lines of points), add mode (the cheapest point
  off the lines) or GPR mode (sklearn GaussianProcessRegressor, cost^2 / variance^2); its
  suggestions are run in order while affordable, then it is asked again.  Its ``min_points`` (5
  points per line before it leaves base mode) is lowered to the grid's number of values where a
  parameter has fewer (Relearn: 4 values of p, synthetic 2-D: 4 of n): with 5 it never leaves
  base mode on those grids.
- fixed grids: ``extend`` (the grid's new points in increasing p, at every value of the other
  parameter, one run each, then the missing repetitions, largest first), ``extend-target-n`` /
  ``extend-smallest-n`` (two parameters: new p at the target's n / the smallest n first), ``fill``
  (one parameter: every repetition of a new point before the next).  Each ends at the full grid.

**Scoring.**  Every strategy's runs are modelled by perfcast (the CLI's defaults: `perfcast
predict`'s selected hypothesis; the same modeller for all, so only the choice of runs differs) at
the cost levels LEVELS (fractions of the full grid's cost, start included): the runs whose
cumulative cost fits.  Error = |predicted / true - 1| of the whole run at the held-out points
(synthetic: the generating formula; replayed: the measured mean there); inside = the truth lies in
the 90% prediction interval. ``--budgeted``: each level is instead a campaign with that level's
budget (``campaign``): the advisor plans with it, a fixed grid runs each point of its order that
still fits (``affordable``), Extra-P's advisor is asked with each level's budget. Per oracle and level: the median
error over seeds x held-out points, coverage; "reach" = the smallest level where a strategy's median
error is at most the full grid's.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

NOISE = 0.03
#: cost levels: fractions of the full grid's cost (start included)
LEVELS = (0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)
#: the level of the "equal cost" headline
HEADLINE = 0.3
SCENARIOS = {
    "log2-comm": (lambda p, n: 10.0 + 0 * p, lambda p, n: 0.2 + 0.05 * np.log2(p) ** 2),
    "linear-compute": (lambda p, n: 8.0 + 0.001 * p, lambda p, n: 0.1 * np.sqrt(p)),
    "plogp-compute": (lambda p, n: 10.0 * (1 + 0.0005 * p * np.log2(p)), lambda p, n: 0.3 * np.log2(p)),
    "sqrt-comm": (lambda p, n: 6.0 + 0 * p, lambda p, n: 0.02 * p ** 0.75),
    "2d-log-comm": (lambda p, n: 0.01 * n, lambda p, n: 0.002 * np.sqrt(n) * np.log2(p) ** 2),
    "2d-plogp": (lambda p, n: 0.008 * n * (1 + 0.0005 * p * np.log2(p)), lambda p, n: 0.05 * np.log2(p)),
}
PS = [2, 4, 8, 16, 32, 64, 128, 256, 512]
NS = [100, 200, 400, 800]
TARGET = 1024.0

EXTRAP_HELPER = r'''
import json, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
from extrap.fileio.file_reader.text_file_reader import TextFileReader
from extrap.modelers.model_generator import ModelGenerator
from extrap.mpa.measurement_point_advisor import MeasurementPointAdvisor
from extrap.mpa.util import identify_selection_mode
for line in sys.stdin:
    req = json.loads(line)
    try:
        np.random.seed(req["seed"])          # sklearn's optimizer restarts draw from numpy's global state
        exp = TextFileReader().read_experiment(req["path"])
        mg = ModelGenerator(exp)
        mg.model_all()
        cp = next(c for c in exp.callpaths if c.name == req["callpath"])
        metric = exp.metrics[0]
        procs = req["procs"]
        adv = MeasurementPointAdvisor(0, 0 if procs is None else procs, exp, True, req["series"],
                                      procs is None, req["processes"], mg)
        adv.min_points = req["min_points"]
        adv.budget = adv.calculate_current_cost([cp], metric) + req["left"]
        pts, _ = adv.suggest_points([cp], metric)
        out = {"mode": identify_selection_mode(exp, adv.min_points), "points": [list(map(float, p.as_tuple())) for p in pts]}
    except Exception as e:  # reported, the strategy stops
        out = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(out), flush=True)
'''


# -- oracles ----------------------------------------------------------------------------------------
class Oracle:
    """A grid a strategy may run points of; subclasses give values, costs and truths."""

    name: str
    params: tuple
    root: str
    procs: int | None                # index of the process-count parameter
    processes: float = 1.0           # processes of a run without that parameter
    grid: list                       # allowed points
    reps: dict                       # point -> repetitions in the full grid
    cap: dict                        # point -> most runs allowed there
    start: list                      # runs (points) of the start design
    target: dict                     # the advisor's target
    held: list                       # held-out points scored

    def cost(self, pt) -> float:
        raise NotImplementedError

    def experiment(self, runs, seed, tmp):
        raise NotImplementedError

    def truth(self, pt) -> float:
        raise NotImplementedError

    def full(self):
        return [pt for pt in self.grid for _ in range(self.reps[pt])]


class Synthetic(Oracle):
    def __init__(self, name):
        self.name = name
        two = name.startswith("2d")
        self.params = ("p", "n") if two else ("p",)
        self.root, self.procs = "main", 0
        self.grid = [(p, n) for p in PS for n in NS] if two else [(p,) for p in PS]
        self.reps = {pt: 1 if two else 2 for pt in self.grid}
        self.cap = {pt: 5 for pt in self.grid}
        self.start = [pt for pt in self.grid if pt[0] <= 32 for _ in range(self.reps[pt])]
        self.target = {"p": TARGET, "n": float(NS[-1])} if two else {"p": TARGET}
        self.held = [tuple(self.target.values())]

    def _parts(self, pt):
        f, g = SCENARIOS[self.name]
        p, n = pt[0], (pt[1] if len(pt) > 1 else None)
        return float(f(p, n)), float(g(p, n))

    def truth(self, pt):
        c, m = self._parts(pt)
        return c + m + 0.5

    def cost(self, pt):
        return self.truth(pt) * pt[0] / 3600

    def value(self, pt, k, seed):
        rng = np.random.default_rng([seed, *(int(v) for v in pt), k])
        c, m = self._parts(pt)
        c *= 1 + NOISE * rng.standard_normal()
        m *= 1 + NOISE * rng.standard_normal()
        return {"main->compute": c, "main->comm": m, "main": c + m + 0.5 * (1 + NOISE * rng.standard_normal())}

    def experiment(self, runs, seed, tmp):
        from perfcast.io import load

        path = Path(tmp) / "exp.csv"
        lines = [",".join(self.params) + ",rep,callpath,metric,value"]
        seen: dict = {}
        for pt in runs:
            k = seen[pt] = seen.get(pt, -1) + 1
            lines += [",".join(f"{v:g}" for v in pt) + f",{k},{cp},time,{v!r}"
                      for cp, v in self.value(pt, k, seed).items()]
        path.write_text("\n".join(lines) + "\n")
        return load([path])

    def table(self, runs, seed):
        """{callpath: {point: [values]}} of ``runs`` (for Extra-P's text format)."""
        out: dict = {}
        seen: dict = {}
        for pt in runs:
            k = seen[pt] = seen.get(pt, -1) + 1
            for cp, v in self.value(pt, k, seed).items():
                out.setdefault(cp, {}).setdefault(pt, []).append(v)
        return out


class Replay(Oracle):
    """A real experiment replayed: ``exp`` reduced to one metric (values per rank reduced)."""

    def __init__(self, name, exp, root, held_param, held_value, start, target, procs, processes=1.0):
        self.name, self.root = name, root
        self.params = tuple(exp.parameters)
        self.procs, self.processes = procs, processes
        k = self.params.index(held_param)
        data = exp.data
        self.base = exp
        self.rows: dict = {}
        for key, g in data.groupby([*self.params, "rep"], observed=True, sort=True):
            pt = tuple(float(v) for v in key[:-1])
            self.rows.setdefault(pt, []).append(g.drop(columns=["rep"]))
        allpts = sorted(self.rows)
        self.grid = [pt for pt in allpts if pt[k] < held_value]
        self.held = [pt for pt in allpts if pt[k] == held_value]
        self.reps = {pt: len(self.rows[pt]) for pt in self.grid}
        self.cap = dict(self.reps)
        self.start = list(start)
        self.target = dict(target)
        # the whole run's measured mean at each point: the truth at held-out points, the cost elsewhere
        self._time = {pt: float(np.mean([f.loc[f["callpath"] == root, "value"].sum() for f in frames]))
                      for pt, frames in self.rows.items()}

    def truth(self, pt):
        return self._time[pt]

    def cost(self, pt):
        p = pt[self.procs] if self.procs is not None else self.processes
        return self._time[pt] * p / 3600

    def _order(self, pt, seed):
        r = len(self.rows[pt])
        rng = np.random.default_rng([seed, *(int(v) for v in pt)])
        return rng.permutation(r)

    def experiment(self, runs, seed, tmp):
        import pandas as pd

        seen: dict = {}
        frames = []
        for pt in runs:
            k = seen[pt] = seen.get(pt, -1) + 1
            f = self.rows[pt][self._order(pt, seed)[k % len(self.rows[pt])]].copy()
            f["rep"] = k
            frames.append(f)
        return self.base.replace(data=pd.concat(frames, ignore_index=True))

    def table(self, runs, seed):
        out: dict = {}
        seen: dict = {}
        for pt in runs:
            k = seen[pt] = seen.get(pt, -1) + 1
            f = self.rows[pt][self._order(pt, seed)[k % len(self.rows[pt])]]
            for cp, v in zip(f["callpath"].astype(str), f["value"].astype(float)):
                out.setdefault(cp, {}).setdefault(pt, []).append(v)
        return out


def relearn():
    from perfcast import io
    from perfcast.shared_data import shared_data_dir

    exp = io.load([Path(shared_data_dir()) / "extrap" / "text" / "mpa" / "relearn_data.txt"])
    start = [(p, n) for p in (32.0, 64.0, 128.0) for n in (5000.0, 7000.0, 9000.0)]
    return Replay("relearn", exp, "main()", "p", 512.0, start, {"p": 512.0, "n": 9000.0}, procs=0)


def hpccg_n():
    from realdata import HPCCG_TIMERS, _campaign

    exp = _campaign("hpccg-n", "time", HPCCG_TIMERS)
    if "rank" in exp.data.columns:
        exp = exp.replace(data=exp.data.drop(columns=["rank"]))
    start = [(16.0,), (20.0,), (24.0,)]
    return Replay("hpccg-n", exp, "app", "n", 40.0, start, {"n": 40.0}, procs=None, processes=2.0)


ORACLES = {**{k: (lambda k=k: Synthetic(k)) for k in SCENARIOS}, "relearn": relearn, "hpccg-n": hpccg_n}


# -- strategies ---------------------------------------------------------------------------------------
def fixed(o: Oracle, kind: str) -> list:
    """The runs after the start, in the order of fixed grid ``kind``, up to the full grid."""
    have: dict = {}
    for pt in o.start:
        have[pt] = have.get(pt, 0) + 1
    new = [pt for pt in o.grid if pt not in have]
    two = len(o.params) > 1
    if two:
        nt = o.target.get(o.params[1])
        nmin = min(pt[1] for pt in o.grid)
        key = {"extend": lambda pt: (pt[0], pt[1]),
               "extend-target-n": lambda pt: (pt[1] != nt, pt[0], pt[1]),
               "extend-smallest-n": lambda pt: (pt[1] != nmin, pt[0], pt[1])}[kind]
    else:
        key = lambda pt: pt  # noqa: E731
    seq = []
    if kind == "fill":
        for pt in sorted(new, key=key):
            seq += [pt] * o.reps[pt]
        have.update({pt: o.reps[pt] for pt in new})
    else:
        seq = sorted(new, key=key)
        have.update({pt: 1 for pt in new})
    for pt in sorted(o.grid, key=lambda pt: tuple(-v for v in pt)):
        seq += [pt] * (o.reps[pt] - have.get(pt, 0))
    return seq


def take_while_affordable(o, runs, spent, budget, pts):
    for pt in pts:
        if spent + o.cost(pt) > budget * (1 + 1e-12):
            break
        runs.append(pt)
        spent += o.cost(pt)
    return spent


def strategy_advise(o: Oracle, seed, tmp, budget, log, cache=None):
    """The advisor's campaign within ``budget``: at each step its best-ranked candidate that removes
    more than ``Advice.worth``, may still run there and is affordable.
    ``cache``: {runs: the advice} shared by campaigns of one (oracle, seed) with different budgets
    (the fit and the ranking depend on the runs only, so they share every step before the budget binds)."""
    import perfcast
    from perfcast.analysis.advisor import Request, advise, request
    from perfcast.errors import PerfcastError

    runs = list(o.start)
    spent = sum(o.cost(pt) for pt in runs)
    values = {q: sorted({pt[k] for pt in o.grid}) for k, q in enumerate(o.params)}
    gridset = set(o.grid)
    cache = {} if cache is None else cache
    for _ in range(200):
        key = tuple(runs)
        if key not in cache:
            exp = o.experiment(runs, seed, tmp)
            ms = perfcast.model(exp)
            measured = sorted(set(runs))
            try:
                req = request(o.params, [dict(zip(o.params, pt)) for pt in measured], o.target, [values])
            except PerfcastError:
                # every grid point measured: `request` refuses (a user gave no new point); the
                # repetitions are still candidates, so the same request without new points
                req = request(o.params, [dict(zip(o.params, pt)) for pt in measured], o.target)
                req = Request(req.parameters, req.target, (), req.repeat, req.measured)
            try:
                cache[key] = (None, advise(ms, exp, req))
            except PerfcastError as e:          # the advisor refuses (e.g. no fitted model of the whole run)
                cache[key] = (str(e), None)
        err, adv = cache[key]
        if err:
            log.append(err)
            break
        # MIN_STEP of the variance left that runs can remove (Advice.worth: above the floor, the drift at the
        # nearest distance any candidate reaches, affordable or not; bench/README.md "Budget-aware floor")
        worth = adv.worth
        counts = {pt: runs.count(pt) for pt in set(runs)}
        ok = [pt for pt in (tuple(float(c.at[q]) for q in o.params) for c in adv.choices if c.gain > worth)
              if pt in gridset and counts.get(pt, 0) < o.cap[pt]]
        pick = next((pt for pt in ok if spent + o.cost(pt) <= budget * (1 + 1e-9)), None)
        if pick is None:
            break
        runs.append(pick)
        spent += o.cost(pick)
    return runs


def affordable(o: Oracle, runs, limit):
    """A fixed grid run within the budget ``limit``: the start, then each point of its order that
    still fits (one too expensive is skipped, cheaper ones after it still run)."""
    out, spent = [], 0.0
    for k, pt in enumerate(runs):
        c = o.cost(pt)
        if k >= len(o.start) and spent + c > limit * (1 + 1e-9):
            continue
        out.append(pt)
        spent += c
    return out, spent


class ExtraP:
    """Extra-P's advisor in its own venv, one helper process for the whole benchmark."""

    def __init__(self, tmp):
        from vs_extrap import ensure_extrap

        py = ensure_extrap()
        helper = Path(tmp) / "_advisor_helper.py"
        helper.write_text(EXTRAP_HELPER)
        self.proc = subprocess.Popen([str(py), str(helper)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.calls, self.seconds = 0, 0.0

    def ask(self, req: dict) -> dict:
        t0 = time.perf_counter()
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        self.calls += 1
        self.seconds += time.perf_counter() - t0
        if not line:
            raise RuntimeError("Extra-P helper died")
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def write_extrap_text(path, o: Oracle, table: dict):
    pts = sorted({pt for by in table.values() for pt in by})
    lines = [f"PARAMETER {q}" for q in o.params] + [""]
    lines += [f"POINTS ( {' '.join(f'{v:g}' for v in pt)} )" for pt in pts] + ["", "METRIC time", ""]
    names = {}
    for cp, by in table.items():
        if set(by) != set(pts):
            continue
        rn = "root" if cp == o.root else f"r{len(names)}"
        names[rn] = cp
        lines.append(f"REGION {rn}")
        lines += ["DATA " + " ".join(repr(v) for v in by[pt]) for pt in pts]
        lines.append("")
    path.write_text("\n".join(lines))


def strategy_extrap(o: Oracle, seed, tmp, budget, log, xp: ExtraP):
    runs = list(o.start)
    spent = sum(o.cost(pt) for pt in runs)
    gridset = set(o.grid)
    series = [",".join(f"{v:g}" for v in sorted({pt[k] for pt in o.grid})) for k in range(len(o.params))]
    min_points = min(5, *(len({pt[k] for pt in o.grid}) for k in range(len(o.params))))
    path = Path(tmp) / "extrap.txt"
    for _ in range(60):
        write_extrap_text(path, o, o.table(runs, seed))
        left = (budget - spent) * 3600
        ans = xp.ask({"path": str(path), "callpath": "root", "procs": o.procs, "processes": o.processes,
                      "series": series, "min_points": min_points, "left": left, "seed": seed})
        if "error" in ans:
            log.append(f"Extra-P: {ans['error']}")
            break
        log.append(f"{ans['mode']}:{len(ans['points'])}")
        took = 0
        for pt in (tuple(float(v) for v in p) for p in ans["points"]):
            if pt not in gridset or runs.count(pt) >= o.cap[pt]:
                continue
            if spent + o.cost(pt) > budget:
                break
            runs.append(pt)
            spent += o.cost(pt)
            took += 1
        if not took:
            break
    return runs


# -- scoring --------------------------------------------------------------------------------------------
def score(o: Oracle, runs, seed, tmp):
    import perfcast

    exp = o.experiment(runs, seed, tmp)
    ms = perfcast.model(exp)
    at = [dict(zip(o.params, pt)) for pt in o.held]
    out = []
    for r in ms.predict(at):
        if r["callpath"] != o.root:
            continue
        pt = tuple(float(r["at"][q]) for q in o.params)
        t = o.truth(pt)
        inside = r["lower"] is not None and r["lower"] <= t <= r["upper"]
        out.append((abs(r["value"] / t - 1), bool(inside)))
    return out


def prefix(o, runs, limit):
    """The runs (start first) whose cumulative cost fits ``limit``."""
    out, spent = [], 0.0
    for pt in runs:
        c = o.cost(pt)
        if spent + c > limit * (1 + 1e-9):
            break
        out.append(pt)
        spent += c
    return out, spent


def campaign(o: Oracle, strategy, seed, tmp, xp=None, budgeted=False):
    """One strategy's campaign on ``o``, scored at the cost levels.  Default: its sequence within
    the full grid's cost, scored at each level on the prefix that fits.  ``budgeted``: a campaign
    per level with that level's budget -- the advisor plans with it (the run it would have bought
    next may be unaffordable: it buys its best affordable one), Extra-P's advisor is asked with the
    budget left as always, a fixed grid runs each point of its order that still fits."""
    full_cost = sum(o.cost(pt) for pt in o.full())
    budget = full_cost
    log: list = []
    t0 = time.perf_counter()
    cache: dict = {}
    if strategy == "advise":
        runs = strategy_advise(o, seed, tmp, budget, log, cache)
    elif strategy == "extrap-gpr":
        runs = strategy_extrap(o, seed, tmp, budget, log, xp)
    elif strategy == "full":
        runs = list(o.start) + fixed(o, "extend")
    else:
        runs = list(o.start) + fixed(o, strategy)
    levels = {}
    start_cost = sum(o.cost(pt) for pt in o.start)
    scored: dict = {}
    for f in ([1.0] if strategy == "full" else LEVELS):
        if f * full_cost < start_cost:
            continue
        if not budgeted:
            sub, spent = prefix(o, runs, f * full_cost)
        elif strategy == "advise":
            sub = strategy_advise(o, seed, tmp, f * full_cost, [], cache)
            spent = sum(o.cost(pt) for pt in sub)
        elif strategy == "extrap-gpr":
            sub = strategy_extrap(o, seed, tmp, f * full_cost, [], xp)
            spent = sum(o.cost(pt) for pt in sub)
        else:
            sub, spent = affordable(o, runs, f * full_cost)
        key = tuple(sub)
        if key not in scored:
            scored[key] = score(o, sub, seed, tmp)
        s = scored[key]
        levels[f] = {"spent": spent / full_cost, "runs": len(sub), "errors": [e for e, _ in s],
                     "inside": [i for _, i in s]}
    wall = time.perf_counter() - t0
    new = sorted(set(runs) - set(o.start))
    return {"oracle": o.name, "strategy": strategy, "seed": seed, "levels": levels, "log": log,
            "wall": wall, "runs": len(runs), "spent": sum(o.cost(pt) for pt in runs) / full_cost,
            "new": [list(pt) for pt in new[:12]], "full_cost": full_cost, "start_cost": start_cost / full_cost,
            "budgeted": bool(budgeted)}


# -- summary --------------------------------------------------------------------------------------------
def summarize(rows, oracles, strategies):
    """Per oracle (and per group): strategy -> level -> (median error, coverage, n); full grid."""
    out = {}
    for name in oracles:
        rs = [r for r in rows if r["oracle"] == name]
        if not rs:
            continue
        out[name] = _summ(rs, strategies)
    groups = {"synthetic 1-param": [k for k in oracles if k in SCENARIOS and not k.startswith("2d")],
              "synthetic 2-param": [k for k in oracles if k.startswith("2d")],
              }
    for g, names in groups.items():
        rs = [r for r in rows if r["oracle"] in names]
        if rs and len(names) > 1:
            out[g] = _summ(rs, strategies)
    return out


def _summ(rs, strategies):
    s = {}
    for st in strategies + ["full"]:
        by = [r for r in rs if r["strategy"] == st]
        if not by:
            continue
        lv = {}
        for f in sorted({f for r in by for f in r["levels"]}):
            errs = [e for r in by if f in r["levels"] for e in r["levels"][f]["errors"]]
            ins = [i for r in by if f in r["levels"] for i in r["levels"][f]["inside"]]
            sp = [r["levels"][f]["spent"] for r in by if f in r["levels"]]
            lv[f] = {"median": float(np.median(errs)), "p90": float(np.quantile(errs, 0.9)),
                     "coverage": float(np.mean(ins)), "n": len(errs), "spent": float(np.mean(sp))}
        s[st] = lv
    if "full" in s:
        e_full = s["full"][1.0]["median"]
        for st, lv in s.items():
            if st == "full":
                continue
            reach = [f for f in sorted(lv) if lv[f]["median"] <= e_full * (1 + 1e-9)]
            lv["reach"] = reach[0] if reach else None
    return s


def print_summary(summ, strategies, headline):
    fixed_names = [st for st in strategies if st not in ("advise", "extrap-gpr")]
    for name, s in summ.items():
        full = s.get("full", {}).get(1.0)
        print(f"\n== {name}" + (f"   full grid: median error {full['median']:.1%}, coverage {full['coverage']:.0%}"
                                  if full else ""))
        levels = sorted({f for st in s if st != "full" for f in s[st] if f != "reach"})
        print("  level  " + "".join(f"{st:>24s}" for st in strategies if st in s))
        for f in levels:
            cells = []
            for st in strategies:
                if st not in s:
                    continue
                c = s[st].get(f)
                cells.append(f"{c['median']:7.1%} cov {c['coverage']:4.0%} ({c['spent']:.2f})" if c else " " * 24)
            print(f"  {f:5.2f}  " + "".join(f"{c:>24s}" for c in cells))
        reach = [("%.2f" % s[st]["reach"]) if s[st].get("reach") else ">1" for st in strategies if st in s]
        print("  reach  " + "".join(f"{r:>24s}" for r in reach))
        if "advise" in s and headline in s["advise"] and any(st in s for st in fixed_names):
            a = s["advise"][headline]["median"]
            best = min((s[st][headline]["median"], st) for st in fixed_names if st in s and headline in s[st])
            g = s.get("extrap-gpr", {}).get(headline)
            print(f"  at {headline:.0%} of the full grid's cost: advise {a:.1%} vs best fixed {best[0]:.1%} ({best[1]}) "
                  f"ratio {a / best[0] if best[0] else float('nan'):.2f}"
                  + (f"; Extra-P GPR {g['median']:.1%}" if g else ""))


def markdown(summ, strategies, headline):
    """The README's table: per oracle, at ``headline`` of the full grid's cost, the median error of
    advise, the best fixed grid and Extra-P's GPR advisor; coverage along the way (all levels
    pooled); the smallest level reaching the full grid's median error."""
    fixed_names = [st for st in strategies if st not in ("advise", "extrap-gpr")]
    out = [f"| oracle | full grid: error, coverage | advise at {headline:.0%} | best fixed at {headline:.0%} | "
           f"Extra-P GPR at {headline:.0%} | advise / best fixed | coverage along the way: advise, best fixed, GPR | "
           f"reach: advise, fixed grids (best), GPR |", "|" + "---|" * 8]

    def cov(lv):
        c = [v["coverage"] for f, v in lv.items() if f != "reach"]
        return f"{np.mean(c):.0%}" if c else "-"

    for name, s in summ.items():
        if "advise" not in s or headline not in s["advise"]:
            continue
        fx = [(s[st][headline]["median"], st) for st in fixed_names if st in s and headline in s[st]]
        best = min(fx) if fx else (float("nan"), "-")
        g = s.get("extrap-gpr", {})
        a = s["advise"][headline]
        full = s["full"][1.0]
        reach = lambda st: "-" if st not in s else (f"{s[st]['reach']:.2f}" if s[st].get("reach") else ">1")  # noqa: E731
        fixed_reach = [s[st]["reach"] for st in fixed_names if st in s and s[st].get("reach")]
        gcell = f"{g[headline]['median']:.1%}" if headline in g else "-"
        out.append(f"| {name} | {full['median']:.1%}, {full['coverage']:.0%} | {a['median']:.1%} (cov {a['coverage']:.0%}) | "
                   f"{best[0]:.1%} ({best[1]}) | {gcell} |")
        out[-1] += (f" {a['median'] / best[0]:.2f} | {cov(s['advise'])}, {cov(s[best[1]]) if best[1] in s else '-'}, "
                    f"{cov(g) if g else '-'} | {reach('advise')}, {f'{min(fixed_reach):.2f}' if fixed_reach else '>1'}, {reach('extrap-gpr')} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--oracles", default=",".join(ORACLES), help="comma-separated (default: all)")
    ap.add_argument("--strategies", default=None, help="comma-separated (default: all that apply)")
    ap.add_argument("--no-extrap", action="store_true", help="leave Extra-P's advisor out")
    ap.add_argument("--headline", type=float, default=HEADLINE, help="the equal-cost level reported")
    ap.add_argument("--budgeted", action="store_true",
                    help="simulate each cost level as a campaign with that budget")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    rows = []
    names = a.oracles.split(",")
    all_strats = set()
    with tempfile.TemporaryDirectory() as tmp:
        xp = None
        try:
            for name in names:
                o = ORACLES[name]()
                two = len(o.params) > 1
                strats = ["advise"] + ([] if a.no_extrap else ["extrap-gpr"]) + (
                    ["extend", "extend-target-n", "extend-smallest-n"] if two else ["extend", "fill"])
                if a.strategies:
                    strats = [s for s in strats if s in a.strategies.split(",")]
                if "extrap-gpr" in strats and xp is None:
                    xp = ExtraP(tmp)
                all_strats.update(strats)
                for st in strats + ["full"]:
                    t0 = time.perf_counter()
                    for seed in range(a.seeds):
                        rows.append(campaign(o, st, seed, tmp, xp, a.budgeted))
                    rs = [r for r in rows if r["oracle"] == name and r["strategy"] == st]
                    print(f"{name:15s} {st:18s} {time.perf_counter() - t0:6.1f} s  runs {np.mean([r['runs'] for r in rs]):.1f}"
                          f"  spent {np.mean([r['spent'] for r in rs]):.2f} of full  e.g. {rs[0]['new'][:6]}"
                          f"  {rs[0]['log'][:6] if st == 'extrap-gpr' else ''}", flush=True)
        finally:
            if xp is not None:
                xp.close()
    order = [s for s in ("advise", "extrap-gpr", "extend", "fill", "extend-target-n", "extend-smallest-n")
             if s in all_strats]
    summ = summarize(rows, names, order)
    print_summary(summ, order, a.headline)
    print()
    print(markdown(summ, order, a.headline))
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "summary": {k: {st: {str(f): c for f, c in lv.items()}
                                                                            for st, lv in s.items()}
                                                                        for k, s in summ.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
