"""The application's time on the base machine, the quantity a projection scales: which metric, how
its per-rank values are combined, in seconds.

A time metric is a metric whose kind is ``time`` (:attr:`perfcast.experiment.Metric.kind`, set by
every reader: CUBE ``time``, HPCToolkit ``REALTIME``/``CPUTIME (sec)``, Caliper ``time.duration``,
``time.inclusive.duration``, ``sum#time.duration``, ..., Extra-P and tidy ``time``/``runtime``) in a
unit convertible to seconds (:func:`perfcast.analysis.waste.time_factor`: s, sec, ms, us, ns, or no
unit; ``cycles`` is not a time here).  Several candidates: ``metric`` chooses, else the one the
profile views show by default (:func:`perfcast.analysis.views.default_metric`: a known scope, the
exclusive member of an inclusive/exclusive pair, the name ``time``, Caliper's per-rank average
``avg#`` before ``max#``/``sum#``); a metric of unknown scope (flat values, e.g. an Extra-P region
list) only when no other exists: its whole-run timer (one at least as large as every other timer
at every measured point, :func:`perfcast.analysis.views.whole_run_timer`), else the sum over its
callpaths.

The total is the inclusive time of the calling-context tree's topmost callpaths at the point (the
whole program), repetitions averaged.  Values per rank/thread are combined with ``ranks``: ``mean``
(default: one rank's time, what a per-copy benchmark ratio scales), ``max`` (the slowest rank),
``sum`` (CPU time of the whole job) or ``min``.  A metric already combined over ranks in the file
(Caliper ``avg#``/``max#``/``sum#``: :attr:`Metric.aggregate`) is taken as it is; choose another
with ``metric``.

In a dense table (tidy CSV/JSONL/Parquet) a rank lacking the value of a callpath that another rank
of the point has has no whole-program total (its inclusive value above the gap is missing:
:meth:`perfcast.experiment.Experiment._gapped`); the total is combined over the ranks that have
one, as every other reduction over ranks of such a table, never with the absent value as 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..errors import PerfcastError
from ..experiment import LOCATION_COLUMNS, describe_locations

RANKS = ("mean", "max", "sum", "min")
DEFAULT_RANKS = "mean"


@dataclass(frozen=True)
class BaseTime:
    """The application's time at one point: ``seconds`` of ``metric`` (``unit``), ranks combined as
    ``ranks`` says; ``others`` are the other time metrics that could have been chosen."""

    metric: str
    unit: str
    seconds: float
    ranks: str
    others: tuple[str, ...] = ()

    def describe(self) -> str:
        s = f"metric {self.metric}" + (f" [{self.unit}]" if self.unit else "") + f", {self.ranks}"
        if self.others:
            s += f"; other time metrics (--metric): {', '.join(self.others)}"
        return s

    def to_dict(self) -> dict:
        return {"metric": self.metric, "unit": self.unit, "seconds": self.seconds, "ranks": self.ranks,
                "other_time_metrics": list(self.others)}


def time_metrics(exp) -> list[str]:
    """Names of the metrics that are times in a unit convertible to seconds, in the experiment's order."""
    from ..analysis.waste import time_factor

    out = []
    for name, m in exp.metrics.items():
        if m.kind != "time":
            continue
        try:
            time_factor(exp, name)
        except PerfcastError:
            continue
        out.append(name)
    return out


def choose_time_metric(exp, metric: str | None = None) -> str:
    """``metric`` checked to be a time in seconds-like units, or the default (module doc)."""
    from ..analysis.views import default_metric

    times = time_metrics(exp)
    if metric is not None:
        if metric not in exp.metrics:
            raise PerfcastError(f"no metric {metric!r}; time metrics of the experiment: {', '.join(times) or 'none'}",
                                where="--metric")
        if metric not in times:
            m = exp.metrics[metric]
            raise PerfcastError(f"metric {metric!r} is not a time in seconds (kind {m.kind}, unit {m.unit!r}); "
                                f"time metrics: {', '.join(times) or 'none'}", where="--metric")
        return metric
    if not times:
        described = ", ".join(f"{n} [{m.unit}]" if m.unit else n for n, m in exp.metrics.items())
        raise PerfcastError("the experiment has no time metric to project (a metric of kind time in s, sec, ms, us "
                            f"or ns: e.g. time, CPUTIME (sec), avg#inclusive#sum#time.duration); it has: {described}")
    known = [n for n in times if exp.metrics[n].scope != "unknown"]
    if known:
        return default_metric(exp, known)
    return min(times, key=lambda n: n != "time")




def base_time(exp, point: Mapping[str, float] | None = None, metric: str | None = None,
              ranks: str | None = None) -> BaseTime:
    """The application's time at ``point`` in seconds (module doc)."""
    from ..analysis.derived import _Scoped
    from ..analysis.views import combine_location_totals, select_point
    from ..analysis.waste import time_factor

    if ranks is not None and ranks not in RANKS:
        raise PerfcastError(f"ranks reduction {ranks!r}: use one of {', '.join(RANKS)}", where="--ranks")
    name = choose_time_metric(exp, metric)
    m = exp.metrics[name]
    others = tuple(n for n in time_metrics(exp) if n != name)
    try:
        sel, _ = select_point(exp, point)
    except PerfcastError as e:
        raise PerfcastError(str(e), where="--at") from None
    d = sel.data
    d = d[d["metric"] == name]
    if d.empty:
        at = ", ".join(f"{k}={v:g}" for k, v in (point or {}).items())
        raise PerfcastError(f"metric {name!r} has no values" + (f" at {at}" if at else ""), where="--at")
    keys = [c for c in ("rank", "thread") if c in d.columns]
    how = ranks or DEFAULT_RANKS
    flat = ""
    if m.scope == "unknown":
        # flat values (one per region): the program's time is the whole-run timer that holds the
        # others at every measured point (views.whole_run_timer), else their sum over the callpaths
        n_paths = int(d["callpath"].nunique())
        whole = None
        if n_paths > 1:
            from ..analysis.views import whole_run_timer

            # the measured means: locations and repetitions by the one rule (a sparse profile's
            # run that measured the metric but lacks a timer did not run it: a 0)
            every = exp.select(metric=name).aggregate("mean", over=("rep", *LOCATION_COLUMNS))
            whole = whole_run_timer(every.pivot_table(index=list(exp.parameters), columns="callpath", values="value",
                                                      observed=True)) if exp.parameters else \
                whole_run_timer(every.set_index("callpath")[["value"]].T)
        if whole is not None:
            d = d[d["callpath"] == whole]
            flat = (f"; the whole-run timer {whole} (at least each of the other {n_paths - 1} flat timers at every "
                    f"measured point: they run within it), not the sum of the timers, which would count "
                    f"nested time again")
        else:
            flat = (f"; flat metric summed over {n_paths} callpaths (no timer holds all the others at every "
                    f"measured point: taken as not nested)") if n_paths > 1 else ""
        per = d.groupby(["rep", *keys], observed=True)["value"].sum()
    else:
        # each location's whole-program time (inclusive at the topmost callpaths), then combined
        per = _Scoped(sel).totals(name)
        if per.empty:
            from ..experiment import gap_error

            raise gap_error(sel, f"metric {name!r}: no rank/thread has a whole-program total at this point (each "
                            f"lacks a value the table has at another: missing, not 0)", where="--at")
    with_total = per.index.droplevel([n for n in per.index.names if n not in keys]).nunique() if keys else 0
    total = combine_location_totals(per, how)
    if keys:
        said = f"{how} over {describe_locations(sel)}"
        every = sel.data[keys].drop_duplicates().shape[0]
        if with_total < every:
            said += f" ({with_total} of {every} with a whole-program total: the others lack a value, not counted as 0)"
    elif m.aggregate:
        # an explicit --ranks that has nothing to combine here is said once, by the note every command
        # gives (cli._ranks_said: stderr and the JSON's ranks_not_combined), not again in this text
        said = f"{m.aggregate} (combined in the file, {name.split('#', 1)[0]}#)" if "#" in name else \
            f"{m.aggregate} (combined in the file)"
    else:
        said = "one value per run (no per-rank values)"
    return BaseTime(name, m.unit, total * time_factor(exp, name), said + flat, others)


def mpi_region_share(exp, point: Mapping[str, float] | None, metric: str) -> tuple[float | None, list[str]]:
    """For a profile without a PMPI layout: the share of ``metric``'s whole-program time spent in MPI
    regions of the calling-context tree (callpaths ending in ``MPI_*`` or ``PMPI_*``, their inclusive
    time at the topmost of them, summed over ranks, over the time at the roots), and their routine
    names (``MPI_*``).
    ``(None, [])`` when the tree has no MPI region; the share is None when it cannot be split (flat
    timers)."""
    paths = [str(c) for c in exp.callpaths]
    mpi = [c for c in paths if c.rsplit("->", 1)[-1].startswith(("MPI_", "PMPI_"))]
    if not mpi:
        return None, []
    names = sorted({c.rsplit("->", 1)[-1].removeprefix("P") for c in mpi})
    top = [c for c in mpi if not any(f.startswith(("MPI_", "PMPI_")) for f in c.split("->")[:-1])]
    from ..analysis.views import scope_values, select_point

    try:
        sel, _ = select_point(exp, point)
        sv = scope_values(sel, metric, ranks="sum")
    except PerfcastError:
        return None, names
    cp = sv["callpath"].astype(str)
    total = float(sv.loc[cp.isin([str(r) for r in sel.tree.roots()]), "inclusive"].sum())
    part = float(sv.loc[cp.isin(top), "inclusive"].sum())
    return (part / total if total > 0 else None), names
