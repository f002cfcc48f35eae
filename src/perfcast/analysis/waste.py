"""Waste and efficiency metrics (HPCToolkit, seed 003 §2): rank scopes by aggregate loss.

Given a *work* metric W (e.g. floating-point operations, bytes moved), a *resource* metric R that
the work consumed (cycles, or time) and the peak rate r of work per unit of resource:

* potential work ``P = R * r`` (what the scope could have done at peak),
* waste ``= P - W`` (operations or bytes not done; what sorting should use),
* efficiency ``= 100 * W / P`` percent (the companion: how hard the scope is to improve).

FP waste: W = FP operations, R = cycles, r = peak operations per cycle.  Bandwidth waste: W =
bytes, R = time, r = peak bandwidth in bytes per second (a time metric in ms/us/ns is converted to
seconds first).  Costs are inclusive and exclusive per scope of one point, reduced as in
:mod:`perfcast.analysis.views` (locations summed by default, repetitions averaged); efficiency is
computed from the reduced sums (the ratio of totals, not a mean of ratios).  Rows are ranked by
exclusive waste (where the loss is incurred; inclusive waste is given too) and carry their share
of the total waste.  A scope with no resource use has no defined efficiency (None).

Where waste is not defined the row says why (``status_exclusive``/``status_inclusive``) and its
waste is None, never a negative number: ``no resource`` (work counted in a scope where the resource
was not measured, e.g. functions with instruction counts beside a campaign's timers, or below zero
in the scope's own: its children's exceed it, timers that nest), ``no work``
(the work metric's collector never saw the scope, :func:`perfcast.experiment.covered`: a campaign's
timer beside cachegrind's functions -- its efficiency is unknown, None, not 0 %) and ``above
peak`` (the work done exceeds the potential: the rate achieved is above the peak given, so the
peak is too low for this work metric there; its efficiency above 100 % is kept and a note says
it).  Exclusive shares are of ``waste_attributed``, the sum of the exclusive wastes that are
defined (they add up to 100 %); inclusive shares are of the whole program's ``total_waste``
(potential minus all the work, that of the scopes left out included), so the root's is 100 %.
A whole-run timer among a parent's leaf timers (:func:`_whole_run_timers`) is no scope of its own.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ..errors import PerfcastError
from ..experiment import Experiment, covered
from .views import profile, select_point, whole_program_total

__all__ = ["waste", "time_factor", "TIME_FACTORS"]

#: seconds per unit of a time metric
TIME_FACTORS = {"s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0, "ms": 1e-3, "msec": 1e-3,
                "us": 1e-6, "usec": 1e-6, "µs": 1e-6, "ns": 1e-9, "nsec": 1e-9}


def time_factor(exp: Experiment, metric: str) -> float:
    """Seconds per unit of ``metric`` (error for a unit that is not a time unit)."""
    unit = exp.metrics[metric].unit.strip().lower()
    if unit == "":
        return 1.0  # time metrics without a unit are seconds (Score-P, Caliper, HPCToolkit)
    if unit not in TIME_FACTORS:
        raise PerfcastError(f"metric {metric!r} has unit {exp.metrics[metric].unit!r}, not a time unit "
                            f"({', '.join(sorted(TIME_FACTORS))})")
    return TIME_FACTORS[unit]


def _whole_run_timers(exp: Experiment, work: str, resource: str) -> list[str]:
    """The resource metric's whole-run timers: of the leaf children of one parent that have values
    of ``resource`` but none of ``work`` (timers, not functions that did work: a campaign's
    ``app->total`` beside ``app->spmv``, ...), the one that holds all the others at every measured
    point (:func:`perfcast.analysis.views.whole_run_timer`, the rule ``project`` and ``advise``
    apply to flat timers).  Its time is its siblings' and the rest: as a scope of its own its
    potential would count theirs again."""
    from ..experiment import LOCATION_COLUMNS
    from .views import whole_run_timer

    d = exp.data
    have_r = set(d.loc[d["metric"] == resource, "callpath"].astype(str))
    have_w = set(d.loc[d["metric"] == work, "callpath"].astype(str))
    tree = exp.tree
    groups: dict = {}
    for p in have_r:
        if not any(q in have_r for q in tree.descendants(p)):
            groups.setdefault(tree.parent(p), []).append(p)
    out = []
    for parent, kids in groups.items():
        timers = [k for k in kids if k not in have_w]
        if parent is None or len(kids) < 2 or not timers:
            continue
        means = exp.select(callpath=kids, metric=resource, literal=True).aggregate(
            "mean", over=[c for c in ("rep", *LOCATION_COLUMNS) if c in d.columns])
        wide = (means.pivot_table(index=list(exp.parameters), columns="callpath", values="value", observed=True)
                if exp.parameters else means.set_index("callpath")[["value"]].T)
        whole = whole_run_timer(wide)
        if whole is not None and whole in timers:
            out.append(str(whole))
    return sorted(out)


def waste(exp: Experiment, work: str, resource: str, peak: float, at: Mapping[str, float] | None = None,
          ranks: str = "sum", label: str = "waste", resource_factor: float = 1.0, threshold: float = 0.0) -> dict:
    """Waste and efficiency per callpath (see module doc).  ``resource_factor`` converts the
    resource metric's unit to the unit ``peak`` is per (e.g. ms -> s).  Rows whose inclusive waste
    is below ``threshold`` percent of the total waste are left out."""
    if not (isinstance(peak, (int, float)) and np.isfinite(peak) and peak > 0):
        raise PerfcastError(f"peak rate {peak!r}: must be a positive number")
    for m in (work, resource):
        if m not in exp.metrics:
            raise PerfcastError(f"no metric {m!r}; the experiment has: {', '.join(exp.metrics)}")
    notes: list[str] = []
    whole = _whole_run_timers(exp, work, resource)
    if whole:
        d = exp.data
        exp = exp.replace(data=d[~((d["metric"] == resource) & d["callpath"].isin(whole))].reset_index(drop=True))
        notes.append(f"{', '.join(whole)}: a timer with no {work} that holds each of its sibling timers at every "
                     f"measured point (a whole-run timer, as project and advise take one): its {resource} is "
                     f"theirs and the rest of its parent's, so it is no scope of its own (its potential would "
                     f"count theirs again); its parent's exclusive {resource} is the parent's minus the other timers")
    exp, point = select_point(exp, at)
    w = profile(exp, work, None, ranks).table
    r = profile(exp, resource, None, ranks).table
    timed = set(r.index)
    # a scope whose own resource is not known (views.no_exclusive: a run whose timers nest, and its
    # timers) has no exclusive waste: not the 0 the join's fill would make of it
    unknown = set(r.index[r["exclusive"].isna()])
    # a campaign's timers are no functions (kernels.run_timers): a function of a timer's name (cachegrind's
    # `timestep` beside CoMD's timer `timestep`, both app->timestep) did its own work, the timer timed all it
    # holds -- neither scope pairs the two (the function's inclusive work is not measured either: its callees
    # are not below it), so below the run no waste is computed there; the run itself pairs whole with whole
    from .kernels import run_timers

    unlike = ({p for p in timed & set(w.index) if exp.tree.depth(p) > 0}
              if run_timers(exp, resource) and not run_timers(exp, work) else set())
    both = w.add_suffix("_w").join(r.add_suffix("_r"), how="outer").fillna(0.0)
    order = [p for p in exp.tree.preorder() if p in both.index]
    # a scope the work metric's collector never saw (a campaign's timer beside cachegrind's functions)
    # has no work measured, not 0 work: its efficiency is unknown (was 0 %), not a number
    workless = [p for p in order if p not in w.index]
    unseen = {p for p, c in zip(workless, covered(exp, work, workless)) if not c}
    both = both.loc[order]
    rate = peak * resource_factor
    for scope in ("inclusive", "exclusive"):
        both[f"potential_{scope}"] = both[f"{scope}_r"] * rate
        both[f"waste_{scope}"] = both[f"potential_{scope}"] - both[f"{scope}_w"]
    # the totals by the one rule for a run's total (views.whole_program_total: each rank's whole
    # program, then over the ranks), not the sum of each root's own rank reduction
    total_work = whole_program_total(exp, work, ranks) if len(w) else 0.0
    total_pot = (whole_program_total(exp, resource, ranks) if len(r) else 0.0) * rate
    total_waste = total_pot - total_work
    rows = []
    for path, b in both.iterrows():
        row = {"path": path, "name": exp.tree.name(path), "depth": exp.tree.depth(path)}
        for scope in ("exclusive", "inclusive"):
            pot, done = float(b[f"potential_{scope}"]), float(b[f"{scope}_w"])
            status = ("no work" if path in unseen else "not comparable" if path in unlike else
                      "no resource" if scope == "exclusive" and path in unknown else _status(pot, done, path in timed))
            row[f"work_{scope}"] = None if path in unseen else done
            if status == "not comparable" or (status == "no resource" and scope == "exclusive" and path in unknown):
                pot = math.nan   # no potential of a scope that pairs nothing, or whose own resource is not known
            row[f"potential_{scope}"] = None if math.isnan(pot) else pot
            row[f"status_{scope}"] = status
            row[f"waste_{scope}"] = pot - done if status == "ok" else None
            row[f"efficiency_{scope}"] = 100.0 * done / pot if pot > 0 and path not in unseen else None
        row["_unknown"] = path in unknown
        rows.append(row)
    # shares: the exclusive ones of the exclusive waste where it is defined (they add up to 100 %),
    # the inclusive ones of the whole program's total waste (the root's inclusive waste)
    attributed = math.fsum(x["waste_exclusive"] for x in rows if x["waste_exclusive"] is not None)
    for row in rows:
        row["waste_exclusive_share"] = (100.0 * row["waste_exclusive"] / attributed
                                        if row["waste_exclusive"] is not None and attributed else None)
        row["waste_inclusive_share"] = (100.0 * row["waste_inclusive"] / total_waste
                                        if row["waste_inclusive"] is not None and total_waste else None)
    notes += _undefined_notes(rows, work, resource, peak, attributed, total_waste)
    for row in rows:
        del row["_unknown"]
    warnings = _rank_mismatch(exp, work, resource, ranks)
    if threshold:
        rows = [x for x in rows if x["waste_inclusive_share"] is not None
                and abs(x["waste_inclusive_share"]) >= threshold]
    # ranked by exclusive waste; then the scopes above the peak (by efficiency), then those without resource
    rows.sort(key=lambda x: (STATUSES.index(x["status_exclusive"]), -(x["waste_exclusive"] or 0.0),
                             -(x["efficiency_exclusive"] or 0.0)))
    return {"label": label, "work": work, "resource": resource, "peak": float(peak),
            "resource_factor": float(resource_factor), "point": point, "ranks": ranks,
            "total_work": total_work, "total_potential": total_pot, "total_waste": total_waste,
            "waste_attributed": attributed,
            "shares_of": {"exclusive": "waste_attributed: the exclusive waste of the scopes where it is defined",
                          "inclusive": "total_waste: the whole program's"},
            "whole_run_timers": whole,
            "efficiency": 100.0 * total_work / total_pot if total_pot > 0 else None, "rows": rows,
            "notes": notes, "warnings": warnings}


#: a scope's status: waste defined ("ok"), no resource measured or left at it, work above the peak, or
#: no work measured (the work metric's collector never saw the scope: experiment.covered)
STATUSES = ("ok", "above peak", "no resource", "no work", "not comparable")


def _status(potential: float, work: float, timed: bool) -> str:
    """``ok`` when the scope's waste is defined: it used some of the resource (else ``no resource``:
    not measured there, or none left in the scope's own) and did at most the potential work (else
    ``above peak``: the rate achieved exceeds the peak given, so the peak is too low for this work
    metric there and potential minus work is no waste).  A resource below zero (its children's
    inclusive values exceed the scope's own: a campaign's timers that nest, CoMD's loop > force under
    app) is none left: ``no resource``, never a negative waste."""
    if timed and potential < 0:
        return "no resource"  # its children's exceed its own (timers that nest): less than none left
    if not timed or potential <= 0:
        return "no resource" if work != 0 or not timed else "ok"
    return "above peak" if work > potential * (1 + 1e-12) else "ok"


def _undefined_notes(rows, work, resource, peak, attributed, total_waste) -> list[str]:
    """One line each for the scopes without a defined waste, and what the shares are of."""
    out = []
    above = [x for x in rows if x["status_exclusive"] == "above peak" or x["status_inclusive"] == "above peak"]
    if above:
        def eff(x):
            return max(x["efficiency_exclusive"] or 0.0, x["efficiency_inclusive"] or 0.0)
        worst = max(above, key=eff)
        out.append(f"{len(above)} scope(s) did {work} faster than the peak {peak:.4g} given (e.g. {worst['path']}: "
                   f"{eff(worst) / 100 * peak:.4g}, efficiency {eff(worst):.1f}%): the peak is too low for "
                   f"{work} there; their waste is not meaningful (shown as above peak, left out of the shares)")
    below = [x for x in rows if x["status_exclusive"] == "no resource" and (x["_unknown"] or x["potential_exclusive"] < 0)]
    if below:
        out.append(f"{len(below)} scope(s) whose exclusive {resource} is below zero or not known (e.g. "
                   f"{below[0]['path']}: its children's {resource} exceeds its own -- timers that nest, each stored "
                   f"as a child): no {resource} of their own, waste undefined there, left out of the shares")
    none = [x for x in rows if x["status_exclusive"] == "no resource" and x not in below]
    if none:
        w = math.fsum(x["work_exclusive"] for x in none)
        out.append(f"{len(none)} scope(s) with {work} but no {resource} of their own measured (e.g. "
                   f"{none[0]['path']}): waste undefined there (no {resource} measured), left out of the shares; "
                   f"their {w:.4g} {work} is in the inclusive values and the total")
    unlike = [x for x in rows if x["status_exclusive"] == "not comparable"]
    if unlike:
        out.append(f"{len(unlike)} scope(s) where the {resource} is an application timer's and the {work} a "
                   f"function's of the same name (e.g. {unlike[0]['path']}): a timer holds all it times, the "
                   f"function's {work} is its own (its callees' are not below it), so neither the exclusive nor the "
                   f"inclusive values pair like with like: no waste there (not comparable), left out of the shares; "
                   f"the run's whole {resource} and {work} are compared at its root")
    unseen = [x for x in rows if x["status_exclusive"] == "no work"]
    if unseen:
        out.append(f"{len(unseen)} scope(s) where {work} was not measured (its collector never saw them, e.g. "
                   f"{unseen[0]['path']}): their efficiency is unknown, not 0 %; left out of the shares")
    if above or below or none or unseen or unlike:
        out.append(f"exclusive shares are of {attributed:.4g}, the exclusive waste of the scopes where it is "
                   f"defined; inclusive shares are of the total waste {total_waste:.4g} (the whole program: "
                   f"potential minus all the {work}, including that of the scopes left out)")
    return out


def _rank_mismatch(exp: Experiment, work: str, resource: str, ranks: str) -> list[str]:
    """A warning when the work and the resource are held by different ranks/threads at the point and
    summed over them: the potential is then of other ranks' resource than the work's."""
    from ..experiment import LOCATION_COLUMNS

    d = exp.data
    loc = [c for c in LOCATION_COLUMNS if c in d.columns]
    if not loc or ranks != "sum":
        return []
    held = {m: set(map(tuple, d.loc[d["metric"] == m, loc].dropna().drop_duplicates().to_numpy().tolist()))
            for m in (work, resource)}
    if held[work] == held[resource]:
        return []
    n_w, n_r = len(held[work]), len(held[resource])
    return [f"{resource} is held by {n_r} rank(s)/thread(s), {work} by {n_w} (different ones): summed over "
            f"them, the potential is of {n_r} location(s)' {resource} against {n_w} location(s)' {work}, so "
            f"efficiencies and wastes compare different ranks; --ranks mean compares one rank's average each"]
