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
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..errors import PerfcastError
from ..experiment import Experiment
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
    exp, point = select_point(exp, at)
    w = profile(exp, work, None, ranks).table
    r = profile(exp, resource, None, ranks).table
    both = w.add_suffix("_w").join(r.add_suffix("_r"), how="outer").fillna(0.0)
    order = [p for p in exp.tree.preorder() if p in both.index]
    both = both.loc[order]
    rate = peak * resource_factor
    rows = []
    for scope in ("inclusive", "exclusive"):
        both[f"potential_{scope}"] = both[f"{scope}_r"] * rate
        both[f"waste_{scope}"] = both[f"potential_{scope}"] - both[f"{scope}_w"]
    # the totals by the one rule for a run's total (views.whole_program_total: each rank's whole
    # program, then over the ranks), not the sum of each root's own rank reduction
    total_work = whole_program_total(exp, work, ranks) if len(w) else 0.0
    total_pot = (whole_program_total(exp, resource, ranks) if len(r) else 0.0) * rate
    total_waste = total_pot - total_work
    for path, b in both.iterrows():
        row = {"path": path, "name": exp.tree.name(path), "depth": exp.tree.depth(path)}
        for scope in ("exclusive", "inclusive"):
            pot = float(b[f"potential_{scope}"])
            row[f"work_{scope}"] = float(b[f"{scope}_w"])
            row[f"potential_{scope}"] = pot
            row[f"waste_{scope}"] = float(b[f"waste_{scope}"])
            row[f"efficiency_{scope}"] = 100.0 * float(b[f"{scope}_w"]) / pot if pot > 0 else None
            row[f"waste_{scope}_share"] = (100.0 * row[f"waste_{scope}"] / total_waste) if total_waste else None
        rows.append(row)
    if threshold:
        rows = [x for x in rows if x["waste_inclusive_share"] is not None
                and abs(x["waste_inclusive_share"]) >= threshold]
    rows.sort(key=lambda x: -x["waste_exclusive"])
    return {"label": label, "work": work, "resource": resource, "peak": float(peak),
            "resource_factor": float(resource_factor), "point": point, "ranks": ranks,
            "total_work": total_work, "total_potential": total_pot, "total_waste": total_waste,
            "efficiency": 100.0 * total_work / total_pot if total_pot > 0 else None, "rows": rows}
