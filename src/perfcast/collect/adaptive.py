"""Adaptive campaigns: measure where the advisor says, until the prediction at a target is certain enough.

``perfcast collect --adaptive --target p=64 --budget 2 [--until 10%] -P p=1,2,...`` (issue 21,
item 2)::

    res = run_adaptive(spec, "app.perfcast", {"p": 64}, budget=2.0, until=0.10)

The campaign's grid (``-P``) is the set of points it may run.  It

1. runs the **start design** (:func:`start_design`): every parameter at its smallest grid value,
   and along each parameter with three or more values its second and third smallest, the others at
   their smallest -- one line of three points per parameter, what a first fit needs (a model along
   a parameter needs a line of >= 3 points with the others fixed, :mod:`perfcast.fit.core`);
   these points follow the campaign's repetition rule (``--reps``, ``--cv``);
2. fits the time metrics (:func:`perfcast.modelset.model`) and computes the 90% prediction
   interval of the **total** at the target: the whole-run time the advisor costs runs by (its
   ``root`` callpaths of the time metric; for a campaign, the run's wall time ``app``); its
   **relative width** is ``(upper - lower) / value``;
3. stops when that width is at most ``until`` at this fit and at the :data:`UNTIL_FITS` - 1 fits
   before it (each one run apart; module docstring, "Stopping on a narrow interval"); else asks the advisor
   (:func:`perfcast.analysis.advisor.advise`) with the rest of the grid as candidates (and every
   measured point for one more repetition) for its greedy plan within the budget left (``advise
   --budget``: best uncertainty reduction per core-hour first, the advisor's cost -- predicted for
   a new point, measured for a repetition) and makes **one run**, the plan's first step; then back
   to 2;
4. stops when the budget left affords none of the useful candidates (``budget``); when no
   affordable run removes the advisor's ``MIN_STEP`` (5%) of the uncertainty left at the target, so
   its plan is empty (``exhausted``: spending the rest on runs that change nothing the models know
   of would not bring the width down -- typically the extrapolation from the grid's largest values
   to the target dominates, and only a grid reaching closer to the target helps); when no candidate
   reduces the uncertainty at all (``exhausted``); when a chosen run failed the campaign's
   ``max_failures`` times (``failed``); or when the advisor has nothing to rank (``no-advice``: no
   series with a single fitted function matters at the target; its message is the reason).

**Cost** of a run: its measured wall time x processes (the process-count parameter, as the advisor
and :class:`perfcast.modelset.ModelSet` find it; without one, one process), in core-hours; every
journaled run counts, failed ones too.  The budget covers the whole campaign, the start design
included.  A run's cost is known only once one has run: before anything is run a fresh campaign
runs one **probe**, the start design's cheapest point (every parameter at its smallest value), once;
when that run alone costs more than the budget, the campaign stops with the error "budget below
one run's cost" (the probe stays in the journal; a rerun with a larger budget uses it).  Before
the rest of the start design, its cost is bounded from below by the probe's time x each point's
processes; a budget below that bound is refused the same way, nothing more run.  A resumed campaign
checks its budget against its cheapest measured run before running anything.

The budget is a limit, not a target (:func:`_budget_limits`): every run may use at most what is
left of it when it starts -- its share among the runs started together, in proportion to their
expected costs -- and is killed there at once (SIGKILL to its process group: its result is
discarded anyway, and ``mpirun`` takes a second to end after SIGTERM; status ``timeout``, the budget
named in its reason; the probe too); runs whose expected cost exceeds what is left are not
started.  So a campaign spends at most its budget, plus the hundredths of a second a kill takes.
A chosen run is *expected* to cost the advisor's price of it: the campaign's whole-run series is
``app``, the run's wall time, so a repetition is priced at what the point's runs cost (on the
jacobi demo campaign, journaled costs / prices 1.000-1.003) and a new point at that series' model
there (from a start design whose time is mostly start-up, 4x too low at n = 512: then the run is
stopped at the budget rather than overspend it).  Other runs (the start design's) are expected to
cost the cheapest run so far per process.  A campaign that collects more than times (``--collect
time,cachegrind``, ``perf``) runs each other collector once at every point, and those runs are
slower: each is expected to take ``alpha + beta t`` for a plain run of ``t`` seconds, fitted on the
campaign's own runs (:meth:`~perfcast.collect.campaign.Campaign.mode_cost`: the tool's start-up and
its slowdown on the application's work; cachegrind's slowdown 50x until measured), and the advisor
prices a new point at its plain run plus those (``Request.collector_runs``); a repetition runs the
plain command only.

**Stopping on a narrow interval.**  The width is itself an estimate: a campaign that stops at the
first fit whose interval is narrow enough stops, more often than not, on one that came out narrow
by chance (optional stopping).  On bench/until_stops.py's 160 campaigns (bench/advisor.py's
synthetic and replayed oracles, 20 seeds; the advisor's runs, the full grid's cost as budget), the
interval the campaign stopped on covered the truth at the target in 64-68% of the stops (``--until``
20%, 30%, 50%), its median error 4.4-8.5%; requiring the width at :data:`UNTIL_FITS` = 3
consecutive fits (one run apart) gave 85-88% and 3.6-3.9%, for 54-61% of the full grid's cost
instead of 26-50% (two fits: 72-80%, 3.7-7.0%).  On the replayed real grids (Relearn, HPCCG)
no interval came within 50%, so neither rule stopped there.

**What the interval does not know** (:func:`beyond_the_runs`).  The interval at the target comes from
the runs: their fits, their noise and the calibrated extrapolation drift.  A change of behaviour
between the largest measured point and the target that the runs do not show -- the working set
outgrowing a cache level -- is not in it: make demo's old target, jacobi at n = 1024 points per rank
(48 MiB for two ranks on a 32 MiB L3, every measured n <= 512 within it), took 1.35x more time per
point than at n = 512, and in four of five demos it was measured 31-40% above the prediction,
outside its 90% interval (18-74% wide).  perfcast knows no application's footprint, so every stop
with an interval at a target beyond the runs says so, naming the largest measured values and the
last-level cache of the campaign's machine record (``caveat``, ``measured_max`` in the result and in
``--json``).

**Journal.**  Every decision is a record in the campaign's ``journal.jsonl`` next to the runs
(``type: "adaptive"``): ``design`` (the start design and why), ``choose`` (the point, new run or
repetition, the successful runs wanted there afterwards, the advisor's one-line reason, its cost
estimate, the interval and the budget spent when it was chosen) and ``stop`` (why).  Rerunning the
same command resumes: the chosen points are read back from the journal, what an interrupted step
had not finished is run, nothing journaled is run again, and the loop goes on from the journal's
measurements.  A rerun with a larger budget or a smaller ``until`` continues a stopped campaign.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from ..analysis.advisor import LEVEL, total_interval
from ..errors import PerfcastError
from .campaign import Campaign, CampaignSpec, check_output, check_program, config_key, fmt_value

#: the default relative width of the 90% interval of the total at the target
UNTIL = 0.10
#: values along a parameter the start design measures (a line of >= 3 points: what a fit needs)
LINE = 3
STOPS = ("until", "budget", "exhausted", "failed", "no-advice")
#: how the time limit a budget sets begins its why (and so the reason of a run it stopped)
BUDGET_LIMIT = "the budget"
#: consecutive fits (one run apart) whose interval must be within ``until`` before the campaign
#: stops on it (module docstring, "Stopping on a narrow interval")
UNTIL_FITS = 3


def parse_until(text) -> float:
    """``10%`` -> 0.1, ``0.1`` -> 0.1: a relative width above 0."""
    s = str(text).strip()
    m = re.fullmatch(r"([0-9.eE+-]+)\s*(%?)", s)
    try:
        v = float(m.group(1)) / (100.0 if m.group(2) else 1.0) if m else float("nan")
    except ValueError:
        v = float("nan")
    if not (math.isfinite(v) and v > 0):
        raise PerfcastError(f"{text!r}: give the interval's relative width, e.g. 10% or 0.1 (above 0)",
                            where="--until")
    return v


def _fmt(point: Mapping[str, float]) -> str:
    return ",".join(f"{k}={fmt_value(v)}" for k, v in point.items())


def start_design(parameters: Mapping[str, list[float]]) -> list[dict]:
    """The start design of a grid (module docstring): the corner of the smallest values first,
    then per parameter with >= :data:`LINE` values its next ``LINE - 1`` values."""
    vals = {q: sorted(set(float(v) for v in vs)) for q, vs in parameters.items()}
    corner = {q: vs[0] for q, vs in vals.items()}
    out = [dict(corner)]
    for q, vs in vals.items():
        if len(vs) >= LINE:
            out += [{**corner, q: v} for v in vs[1:LINE]]
    return out


def check(spec: CampaignSpec, target: Mapping[str, float], budget: float, until: float) -> tuple[dict, list[dict]]:
    """Check an adaptive campaign before anything is run: the full target point and the start
    design.  Bad input raises a one-line :class:`PerfcastError`: a target parameter the grid does
    not have or holds at one value, a parameter with two values (a model needs three), a target
    inside the grid's range, no grid value beyond the start design's, a budget or width not above 0."""
    from ..analysis.advisor import request

    grid = {q: sorted(set(vs)) for q, vs in spec.parameters.items()}
    unknown = [k for k in target if k not in grid]
    if unknown:
        raise PerfcastError(f"unknown parameter {unknown[0]!r}; the campaign's parameters are {', '.join(grid)}",
                            where="--target")
    tgt = {q: float(target.get(q, grid[q][-1])) for q in grid}
    for q, vs in grid.items():
        if len(vs) == 1 and tgt[q] != vs[0]:
            raise PerfcastError(f"{_fmt(tgt)}: the campaign cannot vary {q} (its grid holds it at {fmt_value(vs[0])}), "
                                f"so no model says how it scales; give {q} {LINE} or more values, or keep "
                                f"{q}={fmt_value(vs[0])}", where="--target")
        if len(vs) == 2:
            raise PerfcastError(f"{q}={','.join(fmt_value(v) for v in vs)}: a model along {q} needs {LINE} values; "
                                f"give one value to hold it or {LINE} or more to vary it", where="-P")
    top = {q: vs[-1] for q, vs in grid.items()}
    if not any(tgt[q] > top[q] for q in grid):
        raise PerfcastError(f"{_fmt(tgt)} is inside the range the campaign can measure ({_fmt(top)}): measure it "
                            f"directly, or give a target beyond the grid", where="--target")
    if not (isinstance(budget, (int, float)) and math.isfinite(budget) and budget > 0):
        raise PerfcastError(f"{budget!r} core-hours: a budget must be above 0", where="--budget")
    if not (math.isfinite(until) and until > 0):
        raise PerfcastError(f"{until!r}: the interval's relative width must be above 0", where="--until")
    design = start_design(grid)
    if not any(len(vs) > LINE for vs in grid.values()):
        varied = {q: vs for q, vs in grid.items() if len(vs) >= LINE}
        q0 = next(iter(varied))
        raise PerfcastError(f"no candidate beyond the start design "
                            f"({', '.join(f'{q}<={fmt_value(vs[LINE - 1])}' for q, vs in varied.items())}): give a "
                            f"parameter more than {LINE} values, e.g. -P {q0}=...,{fmt_value(2 * varied[q0][-1])}",
                            where="-P")
    # the advisor's own checks, on the start design as if measured (nothing is run yet)
    request(tuple(grid), design, tgt, [grid])
    return tgt, design


@dataclass
class AdaptiveResult:
    output: str
    campaign: str
    target: dict
    budget: float
    until: float
    design: list                  # the start design's points
    steps: list                   # the choose records, in order
    stop: str                     # one of STOPS
    why: str                      # the stop's one line
    spent: float                  # core-hours, every journaled run
    runs: int                     # journaled runs
    value: float | None = None    # the total at the target, its interval, relative width
    lower: float | None = None
    upper: float | None = None
    width: float | None = None
    procs: str | None = None
    measured_max: dict | None = None  # the largest measured value of each parameter
    caveat: str | None = None         # what the interval cannot know (:func:`beyond_the_runs`)
    experiment: object = field(default=None, repr=False)

    def summary(self) -> dict:
        return {"output": self.output, "campaign": self.campaign, "target": dict(self.target), "budget": self.budget,
                "until": self.until, "level": LEVEL, "design": self.design, "stop": self.stop, "why": self.why,
                "spent": self.spent, "runs": self.runs, "points": len(self.experiment.points()) if self.experiment
                is not None else None, "value": self.value, "lower": self.lower, "upper": self.upper,
                "width": self.width, "procs": self.procs, "measured_max": self.measured_max, "caveat": self.caveat}


def beyond_the_runs(exp, target: Mapping[str, float]) -> tuple[dict, str | None]:
    """The largest measured value of each parameter, and what an interval at ``target`` beyond them
    cannot know: it comes from the runs' fits, their noise and the calibrated extrapolation drift,
    so a change of behaviour between the largest measured point and the target that the runs do not
    show (a working set outgrowing a cache level: the campaign's machine record names the last one)
    is not in it.  No footprint model: perfcast does not know the application's working set, so it
    says this whenever the target lies beyond the runs, not only when a cache is outgrown."""
    from .machine import last_level

    pts = exp.points()
    top = {q: float(pts[q].max()) for q in pts.columns if q in target}
    out = {q: v for q, v in top.items() if float(target[q]) > v}
    if not out:
        return top, None
    llc = last_level(((exp.meta.get("campaign") or {}).get("machine") or {}).get("caches") or [])
    cache = (f" (this machine's last-level cache: L{llc['level']}, {llc['size'] / 2**20:g} MiB per instance)"
             if llc else "")
    return top, (f"the interval comes from the runs measured up to {_fmt(out)}: a change of the machine's behaviour "
                 f"between them and {_fmt({q: target[q] for q in out})} that they do not show, such as the working set "
                 f"outgrowing a cache{cache}, is not in it")


def run_cost(record: dict, procs: str | None) -> float:
    """Core-hours of one journaled run: wall time x processes (module docstring)."""
    return float(record.get("wall") or 0.0) * _nprocs(record["config"], procs) / 3600.0


def _runs(records: list[dict]) -> list[dict]:
    seen, out = set(), []
    for r in records:
        if r.get("type") == "run" and r["id"] not in seen:
            seen.add(r["id"])
            out.append(r)
    return out


def _procs(camp: Campaign) -> str | None:
    """The process-count parameter: as the models find it once a run succeeded; before, the one
    with a conventional name (``p``, ``ranks``, ...), if exactly one has."""
    from ..modelset import _process_parameter
    from ..scaling import PROC_NAMES

    if any(r["status"] == "ok" for r in _runs(camp.records)):
        return _process_parameter(camp.experiment())
    named = [q for q in camp.spec.parameters if q.lower() in PROC_NAMES]
    return named[0] if len(named) == 1 else None


def _spent(camp: Campaign, procs: str | None) -> float:
    """Core-hours of every journaled run (failed and stopped ones too)."""
    return sum(run_cost(r, procs) for r in _runs(camp.records))


def _budget_limits(camp: Campaign, budget: float, estimate: Mapping[str, float]):
    """The campaign's :attr:`~perfcast.collect.campaign.Campaign.round_limits` for ``budget``: the
    core-hours left when a round starts are shared among its runs in proportion to each one's
    expected cost (``estimate``: config key -> core-hours of a plain run; a point without one counts
    as the cheapest plain run so far per process x its processes; a run of another collector, e.g.
    cachegrind, as :meth:`Campaign.mode_cost` says for that plain run), and a run may use
    its share's wall time (share x 3600 / processes seconds) before it is stopped; a round whose
    expected cost exceeds what is left is held back whole.  Before a plain run has succeeded (the
    probe) the costs are unknown: the runs share equally, and nothing is held back (an assumed
    slowdown would starve the plain run, whose cost the probe is there to learn).
    So the runs never spend more than the budget (but for the hundredths of a second killing a run
    takes)."""
    def limits(todo: list[tuple[dict, str]]) -> list[tuple[float, str]]:
        procs = _procs(camp)
        left = budget - _spent(camp, procs)
        per_proc = _per_proc(camp, procs)
        known = per_proc > 0 or all(config_key(c) in estimate for c, _ in todo)
        costs = _mode_costs(camp)
        est = [_mode_hours(costs, m, estimate.get(config_key(c), per_proc * _nprocs(c, procs)), _nprocs(c, procs))
               if known else 1.0 for c, m in todo]
        total = sum(est)
        out = []
        for (c, _), e in zip(todo, est):
            if left <= 0 or (known and total > left):
                out.append((0.0, f"{BUDGET_LIMIT}: {max(left, 0.0):.3g} core-hours left, the round's runs are "
                                 f"expected to cost {total:.3g}"))
                continue
            share = left * (e / total if total > 0 else 1.0 / len(todo))
            out.append((share * 3600.0 / _nprocs(c, procs),
                        f"{BUDGET_LIMIT}: this run's share of the {left:.3g} core-hours left of --budget {budget:g} "
                        f"is {share:.3g}"))
        return out

    return limits


def _per_proc(camp: Campaign, procs: str | None) -> float:
    """Core-hours per process of the cheapest successful plain run so far (0 before one)."""
    return min((run_cost(r, procs) / _nprocs(r["config"], procs) for r in _runs(camp.records)
                if r["status"] == "ok" and r["mode"] == "main" and r.get("wall")), default=0.0)


def _mode_costs(camp: Campaign) -> dict:
    """Each mode's :meth:`Campaign.mode_cost` from the journal as it is now (one pass per mode)."""
    return {m: camp.mode_cost(m) for m in camp.sel.modes}


def _mode_hours(costs: dict, mode: str, plain: float, nprocs: float) -> float:
    """Core-hours of a run of ``mode`` where a plain run costs ``plain`` core-hours on ``nprocs``
    processes (``costs``: :func:`_mode_costs`)."""
    return costs[mode].seconds(plain * 3600.0 / nprocs) * nprocs / 3600.0


def _collector_runs(camp: Campaign) -> tuple:
    """The other collectors' runs a new point takes (repetitions run the plain command only), for
    the advisor's :attr:`~perfcast.analysis.advisor.Request.collector_runs`."""
    return tuple(c.seconds for m, c in _mode_costs(camp).items() if m != "main")


def _hit_budget(records: list[dict]) -> dict | None:
    """The campaign's last run when the budget stopped it, else None."""
    last = _runs(records)[-1:]
    return last[0] if last and last[0]["status"] == "timeout" and BUDGET_LIMIT in (last[0]["reason"] or "") else None


def _stopped(camp: Campaign) -> str:
    """``; <point> was stopped at the budget`` when the campaign's last run was."""
    last = _hit_budget(camp.records)
    if last is not None:
        return f"; the last run, {_fmt(last['config'])}, was stopped when it reached the budget"
    return ""


def _nprocs(config: Mapping[str, float], procs: str | None) -> float:
    return float(config.get(procs, 1.0)) if procs else 1.0


def _chosen(camp: Campaign) -> list[dict]:
    """The journal's choose records, in order."""
    return [r for r in camp.records if r.get("type") == "adaptive" and r.get("event") == "choose"]


def _stop(camp: Campaign, record: dict) -> None:
    """Journal why the campaign stopped, unless its last decision was this same stop (a rerun of a
    stopped campaign that still stops there)."""
    last = [r for r in camp.records if r.get("type") == "adaptive" and r.get("event") != "start"]
    rec = {"type": "adaptive", "event": "stop", **record}
    if not (last and last[-1].get("event") == "stop"
            and all(last[-1].get(k) == rec.get(k) for k in ("reason", "spent", "width"))):
        camp.note(rec)


def _request(spec: CampaignSpec, exp, tgt: dict, collector_runs: tuple = ()):
    """The advisor's request: the grid points not measured yet as new points, every measured point
    for one more repetition (checked by :func:`check` before the campaign began; built here, since
    once the grid's largest values are measured no candidate lies beyond them, which
    :func:`perfcast.analysis.advisor.request` refuses)."""
    import itertools

    from ..analysis.advisor import Request

    params = tuple(spec.parameters)
    measured_pts = sorted({tuple(float(p[q]) for q in params) for p in exp.points().to_dict("records")})
    grid = sorted(set(itertools.product(*(sorted(set(spec.parameters[q])) for q in params))) - set(measured_pts))
    measured = {q: sorted({t[k] for t in measured_pts}) for k, q in enumerate(params)}
    return Request(params, dict(tgt), tuple(grid), tuple(measured_pts), measured, None, collector_runs)


def _caveat(exp, target: Mapping[str, float], value) -> str:
    """``; <what the interval cannot know>`` for a stop line (:func:`beyond_the_runs`), or '' (also
    when there is no interval: ``value`` None or NaN)."""
    caveat = beyond_the_runs(exp, target)[1] if value is not None and math.isfinite(value) else None
    return f"; {caveat}" if caveat else ""


def run_adaptive(spec: CampaignSpec, output: str | Path, target: Mapping[str, float], budget: float,
                 until: float = UNTIL, progress=None, log: Callable[[str], None] | None = None,
                 say: Callable[[str], None] | None = None, launcher=None, force: bool = False) -> AdaptiveResult:
    """Run (or resume) an adaptive campaign (module docstring) and store its experiment at
    ``output``.  ``say`` gets one line per decision (progress), ``log`` the campaign's warnings."""
    from ..analysis.advisor import MIN_STEP, advise, metrics_needed
    from ..modelset import model

    say = say or (lambda text: None)
    out = check_output(output, force)   # an existing output: this campaign's (resumed), or --force
    check_program(spec)
    tgt, design = check(spec, target, budget, until)
    params = list(spec.parameters)
    camp = Campaign(spec, out, progress, log, launcher)
    with camp.session():
        # the journal's decisions: the points chosen so far, the runs wanted there, their expected cost
        chosen = _chosen(camp)
        points = [dict(c) for c in design]
        keys = {config_key(c) for c in points}
        at_least: dict[str, int] = {}
        estimate: dict[str, float] = {}
        camp.round_limits = _budget_limits(camp, budget, estimate)
        for r in chosen:
            k = config_key(r["at"])
            at_least[k] = max(at_least.get(k, 0), int(r["at_least"]))
            if r.get("run_estimate") or r.get("cost_estimate"):
                estimate[k] = float(r.get("run_estimate") or r["cost_estimate"])
            if k not in keys:
                keys.add(k)
                points.append({q: float(r["at"][q]) for q in params})
        ok_runs = [r for r in _runs(camp.records) if r["status"] == "ok" and r["mode"] == "main"]
        if ok_runs:
            procs = _procs(camp)
            cheapest = min(ok_runs, key=lambda r: run_cost(r, procs))
            if run_cost(cheapest, procs) > budget:
                raise PerfcastError(f"{budget:g} core-hours is below one run's cost: the cheapest run so far, "
                                    f"{_fmt(cheapest['config'])}, took {run_cost(cheapest, procs):.3g} core-hours",
                                    where="--budget")
        camp.note({"type": "adaptive", "event": "start", "target": tgt, "budget": budget, "until": until,
                   "level": LEVEL})
        if not any(r.get("type") == "adaptive" and r.get("event") == "design" for r in camp.records):
            camp.note({"type": "adaptive", "event": "design", "points": design,
                       "why": f"a first fit: every parameter at its smallest value and, along each parameter with "
                              f"{LINE} or more values, its next {LINE - 1} (a line of {LINE} points), each run by "
                              f"the repetition rule ({spec.reps_min}..{spec.reps_max} runs, cv {spec.cv:g})"})
            say(f"adaptive: start design {len(design)} point(s): " + "; ".join(_fmt(c) for c in design))
        if not ok_runs:
            # the probe: one run of the cheapest point, to learn what a run costs
            corner = design[0]
            camp.points, camp.at_least = [corner], {config_key(corner): 1}
            camp.execute()
            plain = [r for r in _runs(camp.records) if r["mode"] == "main"]
            ok_runs = [r for r in plain if r["status"] == "ok"]
            killed = [r for r in plain if r["status"] == "timeout" and BUDGET_LIMIT in (r["reason"] or "")]
            if not ok_runs and killed:
                raise PerfcastError(f"{budget:g} core-hours is below one run's cost: {_fmt(corner)} was stopped "
                                    f"after {killed[-1]['wall']:.3g} s, when it had spent its share of the budget "
                                    f"(kept in the journal; rerun with a larger --budget)", where="--budget")
            if not ok_runs:
                if not any(r["status"] == "ok" for r in _runs(camp.records)):
                    camp.points, camp.at_least = points, at_least
                    camp.write()  # raises "no run succeeded" with the first failure's reason
                # another collector's run succeeded, the plain one did not
                raise PerfcastError(f"the plain run of {_fmt(corner)} failed: "
                                    f"{plain[-1]['reason'] if plain else 'not run'}")
            procs = _procs(camp)
            cost = run_cost(ok_runs[0], procs)
            if cost > budget:
                raise PerfcastError(f"{budget:g} core-hours is below one run's cost: {_fmt(corner)} took "
                                    f"{cost:.3g} core-hours (kept in the journal; rerun with a larger --budget)",
                                    where="--budget")
        procs = _procs(camp)
        camp.points, camp.at_least = points, at_least
        # the start design's cost, bounded below by the cheapest plain run's time per process (and
        # each other collector's run as Campaign.mode_cost says for such a plain run)
        per_proc = _per_proc(camp, procs)
        costs = _mode_costs(camp)
        need = sum(camp._needs(c, m) * _mode_hours(costs, m, per_proc * _nprocs(c, procs), _nprocs(c, procs))
                   for c in design for m in camp.sel.modes)
        spent = _spent(camp, procs)
        if need > 0 and spent + need > budget:
            raise PerfcastError(f"{budget:g} core-hours is below what the start design still needs: at least "
                                f"{need:.3g} core-hours more ({spent:.3g} spent)", where="--budget")
        camp.execute()

        step = len(chosen)
        while True:
            exp = camp.experiment()
            procs = _procs(camp)
            spent = _spent(camp, procs)
            ms = model(exp, metrics_needed(exp, None))
            req = _request(spec, exp, tgt, _collector_runs(camp))
            try:
                adv = advise(ms, exp, req)
            except PerfcastError as e:
                # the models give the advisor nothing to rank (e.g. no series with a single fitted
                # function that matters at the target): the campaign stops with what it has
                why = f"the advisor cannot rank the candidates: {e.message}"
                _stop(camp, {"reason": "no-advice", "why": why, "spent": spent})
                say(f"adaptive: stop (no-advice): {why}")
                stop, value = "no-advice", None
                lower = upper = None
                width = math.inf
                break
            # the advisor's total at the target and its interval (total_interval's, computed once;
            # a bound it has not: NaN, as total_interval gives it)
            value, lower, upper = (math.nan if v is None else v for v in (adv.value, adv.lower, adv.upper))
            width = (upper - lower) / abs(value) if value and math.isfinite(upper - lower) else math.inf
            state = {"value": value, "lower": lower, "upper": upper, "width": width if math.isfinite(width) else None,
                     "spent": spent}
            left = budget - spent
            useful = [c for c in adv.choices if c.gain > 0]
            affordable = [c for c in useful if c.cost <= left]
            # the widths of this fit and of the UNTIL_FITS - 1 before it: the journal's choose
            # records (each made on a fit, then a run)
            recent = [width] + [c.get("width") for c in reversed(_chosen(camp))][:UNTIL_FITS - 1]
            within = sum(1 for _ in itertools.takewhile(lambda w: w is not None and w <= until, recent))
            plan = []
            if within < UNTIL_FITS and affordable:
                # the advisor's greedy plan within what is left: its first step is the run to make
                plan = advise(ms, exp, dataclasses.replace(req, budget=left)).plan
            if within >= UNTIL_FITS:
                stop, why = "until", (f"the {LEVEL:.0%} interval of the total at the target is {width:.1%} of its "
                                      f"value ({lower:.4g}..{upper:.4g} around {value:.4g}), within {until:.1%} "
                                      f"at this fit and the {UNTIL_FITS - 1} before it")
            elif not useful:
                stop, why = "exhausted", (f"no candidate reduces the uncertainty the models know of; the interval is "
                                          f"{width:.1%} wide")
            elif not affordable:
                cheap = min(useful, key=lambda c: c.cost)
                stop, why = "budget", (f"{spent:.3g} of {budget:g} core-hours spent: what is left buys no useful run "
                                       f"(the cheapest, {_fmt(cheap.at)}, ~{cheap.cost:.3g}); the interval "
                                       f"is {width:.1%} wide{_stopped(camp)}")
            elif not plan:
                stop, why = "exhausted", (f"no run the {max(left, 0.0):.3g} core-hours left afford removes "
                                          f"{MIN_STEP:.0%} of the uncertainty left at the target (the advisor's plan "
                                          f"is empty); the interval is {width:.1%} wide")
            else:
                stop = None
            if stop is not None:
                _stop(camp, {"reason": stop, "why": why, **state})
                say(f"adaptive: stop ({stop}): {why}{_caveat(exp, tgt, value)}")
                break
            # the first step of the advisor's plan within the budget left
            first = plan[0]
            ch = next(c for c in adv.choices if c.kind == first["kind"] and c.at == first["at"])
            at = {q: float(ch.at[q]) for q in params}
            k = config_key(at)
            ok = sum(1 for r in _runs(camp.records) if r["key"] == k and r["mode"] == "main" and r["status"] == "ok")
            at_least[k] = ok + 1
            if k not in keys:
                keys.add(k)
                points.append(at)
            step += 1
            estimate[k] = ch.run_seconds * ch.processes / 3600.0
            camp.note({"type": "adaptive", "event": "choose", "step": step, "at": at, "kind": ch.kind,
                       "at_least": ok + 1, "reason": ch.reason, "cost_estimate": ch.cost,
                       "run_estimate": estimate[k], **state})
            status = (f"interval {width:.1%} > {until:.1%}" if within == 0 else
                      f"interval {width:.1%} <= {until:.1%} at {within} of {UNTIL_FITS} consecutive fits")
            say(f"adaptive: step {step}: {status}, {spent:.3g} of {budget:g} core-h spent; run {ch.reason}")
            before = len(_runs(camp.records))
            camp.execute()
            if len(_runs(camp.records)) == before and camp.held:
                stop, why = "budget", (f"{_spent(camp, procs):.3g} of {budget:g} core-hours spent: {_fmt(at)} is "
                                       f"held back ({camp.held[0][2]})")
                _stop(camp, {"reason": stop, "why": why, **state})
                say(f"adaptive: stop ({stop}): {why}{_caveat(exp, tgt, value)}")
                break
            if len(_runs(camp.records)) == before:
                stop, why = "failed", f"{_fmt(at)} has failed {spec.max_failures} time(s): given up"
                _stop(camp, {"reason": stop, "why": why, **state})
                say(f"adaptive: stop ({stop}): {why}{_caveat(exp, tgt, value)}")
                break
        steps = _chosen(camp)
        # the fits' experiment (a stop after a failed or held-back run added no run to it)
        top, caveat = beyond_the_runs(exp, tgt)
        if value is None or not math.isfinite(value):
            caveat = None   # no interval at the target
        res = AdaptiveResult(str(out), str(camp.dir), tgt, float(budget), float(until), design, steps, stop, why,
                             spent, len(_runs(camp.records)), value, lower, upper,
                             width if math.isfinite(width) else None, procs, top, caveat)
        res.experiment = camp.write({"adaptive": res.summary()})
        return res


__all__ = ["run_adaptive", "check", "start_design", "beyond_the_runs", "parse_until", "total_interval", "run_cost",
           "AdaptiveResult", "UNTIL", "LEVEL"]
