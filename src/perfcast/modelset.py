"""One model set behind every output: ``perfcast.model(exp)`` fits every callpath x metric once and
returns a :class:`ModelSet` that ``model``, ``predict``, ``check``, ``report`` and every ``--json``
read from.

>>> import perfcast
>>> exp = perfcast.io.load(["lulesh_weak_scaling_cali"])
>>> ms = perfcast.model(exp, metrics=["avg#inclusive#sum#time.duration"])
>>> ms.predict({"jobsize": 1000})        # tidy rows: value, interval, confidence, the formula
>>> ms.rank({"jobsize": 1000})           # scalability bugs: per-process cost increase up to the target
>>> ms.rank({"jobsize": 1000}, by="growth")  # asymptotic growth first, then the value there
>>> ms.to_frame({"jobsize": 1000})       # one row per series (pandas)

The rules every view shares live here, once:

* **The value is the formula's, times a line factor shown next to it.**  By default the value at
  a point is the selected hypothesis', the function printed next to it; ``averaged=True`` averages
  over the competing hypotheses with their weights (the interval includes them either way).  On a
  measured line of a multi-parameter series whose level the formula does not follow (points equal
  in all parameters but one, e.g. a step of one process count at every problem size), value and
  interval are that value times the line's factor: ``value = formula(point) x factor``, with the
  factor and the line in the prediction's ``line`` (``{"factor": 1.55, "lines": [{"along": "n",
  "at": {"p": 256}, "factor": 1.55}]}``) and a note; the model's ``lines`` in its JSON
  (:mod:`perfcast.fit.lines`).  Every view (predict, rank, model, report) applies the same factor.
* **Times, counts and bytes are not negative.**  Their models never fall below zero as the
  parameters grow (:class:`perfcast.fit.FitOptions` ``nonnegative="auto"``); a value that is still
  negative at a point (a segmented or two-point model below its data) is reported with a note, and
  a negative lower interval bound is clipped at 0 and marked ``clipped`` -- unless the value itself
  is negative: it keeps the model's interval around it (:func:`clip_interval`), so every view
  shows a value inside its interval.
* **Aggregates.**  Each metric carries how its value combines the processes (``aggregates``:
  ``sum over ranks``, ``mean over ranks``, ...): the reader's label (``Metric.aggregate``, e.g.
  Caliper's ``sum#``), else, for per-rank data, the reduction the models were fitted on
  (``locations``); empty when unknown.  Every view shows it; the ranking divides sums over ranks
  by the process count (:mod:`perfcast.analysis.ranking`).
* **Trees.**  For inclusive metrics a child predicted above its parent at the same point is flagged
  (a note, confidence low); neither model is changed.  So is a parent whose children's predictions
  add up to more than its own, for additive metrics combined over the ranks by a sum or a mean
  (:func:`summable_metrics`; a maximum over ranks is not: the children's slowest ranks differ), and
  a parent that holds nothing of its own (measured, it is the sum of its children at every point:
  PMPI's ``MPI`` node) predicted apart from its children's sum.
* **Confidence.**  Each prediction carries ``high``/``medium``/``low`` (:func:`confidence`) from
  the relative width of its interval, which grows with the distance beyond the data and with the
  disagreement of the competing hypotheses, and from the model's own warnings (poor fit, two
  points only, an insufficient model).  A prediction beyond the data in one parameter that rises
  (falls) more steeply than any measured step of its series, by more than one power of that
  parameter (:data:`SLOPE_MARGIN`), is low with a note: the model accelerates where nothing was
  measured (on bench/realdata.py this flags the last 7 of 32 predictions off by more than 50%
  that the interval width missed, and no other prediction).
"""

from __future__ import annotations

from abc import abstractmethod

import math
from dataclasses import dataclass, field, replace
from itertools import repeat
from operator import attrgetter, is_
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

from .errors import PerfcastError
from .experiment import ONE_LOCATION, absent_repetition_is_zero, aggregate_labels, has_ancestor  # noqa: F401  (ONE_LOCATION re-exported)
from .lazy import LazyModule
from .table import Category, Columns, arrow_array, arrow_scalar, column

pd = LazyModule("pandas")   # imported where a DataFrame is made (perfcast.lazy)

#: metric kinds whose values cannot be negative (fit.core.NONNEGATIVE_KINDS)
NONNEGATIVE = ("time", "count", "bytes")
#: said of a time, count or byte value the model predicts below zero (``predict``, ``model --target``)
NEGATIVE_NOTE = "the model predicts a negative value here"
#: how :data:`NEGATIVE_NOTE` goes on beyond the measured range of a parameter, and within it
NEGATIVE_BEYOND = ": it does not extrapolate this far"
NEGATIVE_WITHIN = (", inside the measured range (no measured value is negative): the model does not fit the "
                   "data here")
#: the note of a child predicted above its parent (inclusive metrics, :meth:`ModelSet.predict`)
ABOVE_PARENT = "predicted above its parent"
#: the note of a minimum (mean) over ranks predicted above the mean (maximum) of the same quantity
AGGREGATE_ORDER = "predicted above"
#: the note of a flat timer predicted above its metric's whole-run timer (:attr:`ModelSet.whole_run`)
ABOVE_WHOLE_RUN = "predicted above the whole-run timer"
#: the note of a parent its children's predictions do not add up to (:meth:`ModelSet.predict`)
CHILDREN_SUM = "its children's predictions add up to"
#: the note of a value averaged over the competing hypotheses (``averaged``) that is not the formula's
AVERAGED_NOTE = "value averaged over the competing hypotheses; the formula shown (the selected one) gives"
#: the note of an inclusive child's upper bound lowered to an ancestor's (a part cannot exceed the whole)
CAPPED_NOTE = "upper bound capped at that of"
#: the note of a value whose interval leaves the range of floating-point numbers (none is shown)
HUGE_NOTE = "no interval: its bounds exceed the range of floating-point numbers this far from the data"
#: confidence from the interval's relative half-width (half-width / |value|): up to the first is
#: high, up to the second medium, beyond (or no interval, or a warning) low
CONFIDENCE_LIMITS = (0.10, 0.50)
#: a prediction whose log-log slope beyond the data exceeds the steepest measured slope of its
#: series along that parameter by more than this (one power of the parameter), or falls below the
#: shallowest by more, is low confidence: the model accelerates where no measurement shows it
SLOPE_MARGIN = 1.0


def model(exp, metrics: Sequence[str] | None = None, callpaths: Sequence[str] | None = None, *,
          max_terms: int = 1, negative: bool = False, locations: str = "auto", options=None,
          segmented: bool = True, averaged: bool = False,
          progress: Callable[[int, int], None] | None = None, intervals: bool = True, grid=None) -> "ModelSet":
    """Fit every callpath x metric of ``exp`` (optionally only ``metrics`` and callpath globs
    ``callpaths``) and return the :class:`ModelSet`.  ``segmented``: series no single PMNF function
    follows (poor fits) get a segmented model when the data support a regime change.
    ``intervals=False``: the fit skips its leave-largest-out check (``fit_group(check=False)``),
    whose only product is the extrapolation drift of the intervals -- the same models, formulas
    and values, for outputs that show no interval and no drift (``perfcast model``'s table,
    ``perfcast check``); the set then refuses intervals and model records
    (:attr:`ModelSet.intervals`).  ``grid``: the process grid whose covariates model noise-free
    counts that no PMNF function passes through (:mod:`perfcast.fit.grid`; default: the one the
    runs recorded, ``False``: none)."""
    from .fit import FitOptions, model_experiment
    from .fit.grid import grid_models
    from .fit.series import statistics_columns
    from .fit.segmented import segment_models

    if not exp.parameters:
        raise PerfcastError("the experiment has no parameters (one run): scaling models need runs at "
                            "several points; combine inputs or give --point", where="parameters")
    from .fit.series import _statistics

    opts = options or FitOptions(max_terms=max_terms, negative=negative)
    if metrics:
        metrics = exp.metric_names(metrics)      # names or globs (PAPI_*), as the callpaths take them
    # the whole experiment fitted: one statistics table for the fit, the segmentation and the
    # ModelSet (it is the largest table of the run)
    full = _statistics(exp, locations) if segmented and not metrics and not callpaths else None
    # a callpath filter fits every callpath of the metrics and keeps the matching series (their
    # groups are their metrics' whole: fit.series.model_experiment); their parents left out stay
    # as the context of the tree check, so every kept row is the full run's
    res = model_experiment(exp, list(metrics) if metrics else None, None, opts, locations, progress,
                           statistics=full, check=intervals)
    context: list = []
    if callpaths:
        from .experiment import _present

        sel = exp.select(callpath=list(callpaths), metric=list(metrics) if metrics else None)
        shown = _present(sel.cols["callpath"])
        links = exp.tree.links()
        keep = [sm for sm in res if sm.callpath in shown]
        # every ancestor: the tree check's parents and the upper bounds capped by ancestors
        wanted = set()
        for sm in keep:
            cp = links.get(sm.callpath)
            while cp is not None and (cp, sm.metric) not in wanted:
                wanted.add((cp, sm.metric))
                cp = links.get(cp)
        # the descendants of every kept series: a parent measured as its children's sum may be
        # modelled as the sum of their models, a child as the sum of its own (perfcast.fit.sums),
        # as in the unfiltered run
        for sm in res:
            if sm.callpath not in shown and has_ancestor(sm.callpath, shown, links):
                wanted.add((sm.callpath, sm.metric))
        # and the series the cost ranking's root counts (the full tree's: a filter chooses rows, not
        # the shares): an inclusive metric's topmost callpaths, every series of another metric
        kept_metrics = set(map(_METRIC, keep))
        fitted = {sm.callpath for sm in res}
        root = set()
        for sm in res:
            if sm.metric in kept_metrics and (exp.metrics[sm.metric].scope != "inclusive"
                                              or not has_ancestor(sm.callpath, fitted, links)):
                root.add((sm.callpath, sm.metric))
        context = [sm for sm in res if sm.callpath not in shown
                   and ((sm.callpath, sm.metric) in wanted or (sm.callpath, sm.metric) in root)]
        res = keep
    st = None
    if segmented:
        # one statistics table for the segmentation and the ModelSet (when it can use it)
        if len(exp.parameters) == 1 or len(set(map(_METRIC, res))) == len(exp.metrics):
            st = full[0] if full is not None else statistics_columns(exp, locations)
        full = None
        both = segment_models(exp, res + context, opts, locations, statistics=st)
        res, context = both[:len(res)], both[len(res):]
    if grid is not False:
        # message counts of a code on a Cartesian process grid: modelled in the grid's covariates
        both = grid_models(exp, res + context, opts, locations, statistics=st, grid=grid or None)
        res, context = both[:len(res)], both[len(res):]
    if not context:
        ms = model_set(exp, res, locations, averaged, statistics=st)
        return ms if intervals else replace(ms, intervals=False)
    # one model set of both (the context's measured values and parents as the shown series' are), the
    # context kept beside the series
    both = model_set(exp, res + context, locations, averaged, statistics=st)
    K = len(res)
    allslopes = both.slopes
    res, context = both.series[:K], both.series[K:]
    return replace(both, series=tuple(res), context=tuple(context), intervals=intervals,
                   measured=MeasuredEnds(tuple(res), both.measured.value[:K], both.measured.given[:K]),
                   context_measured=MeasuredEnds(tuple(context), both.measured.value[K:], both.measured.given[K:]),
                   slopes=ObservedSlopes(tuple(res), both.parameters,
                                         lambda: tuple(a[:K] for a in allslopes.arrays(allslopes.series))))


def model_set(exp, series, locations: str = "auto", averaged: bool = False, statistics=None) -> "ModelSet":
    """The :class:`ModelSet` of already fitted ``series`` (SeriesModel) of ``exp``, ``locations``
    reduced as they were fitted.  ``statistics``: ``fit.series_statistics(exp, locations)`` when
    already computed."""
    res = list(series)
    kinds = {name: m.kind for name, m in exp.metrics.items()}
    units = {name: m.unit for name, m in exp.metrics.items()}
    inclusive = tuple(name for name, m in exp.metrics.items() if m.scope == "inclusive")
    links = exp.tree.links()
    cps = set(map(_CALLPATH, res)) if links else ()
    parents = {cp: par for cp in cps if (par := links.get(cp)) is not None}
    procs = _process_parameter(exp)
    # the extremes of the measured points: each parameter's, not a table of the distinct points
    cols = exp.cols
    upper = {p: float(cols[p].max()) for p in exp.parameters}
    lower = {p: (float(cols[p].min()) if procs is None or p == procs else upper[p]) for p in exp.parameters}
    st = _statistics(exp, res, locations, statistics)
    params = tuple(exp.parameters)
    # the measured slopes matter to predictions beyond the data only: computed on first use
    slope_data = st.select(["callpath", "metric", *params, "mean"])
    from .analysis.oversubscription import oversubscription
    from .fit.sums import sum_models

    aggregates = aggregate_labels(exp, locations)
    sum_nodes = _sum_nodes(st, res, parents, summable_metrics(inclusive, kinds, aggregates), params)
    # a parent measured as its children's sum, each child modelled exactly and the parent not: the
    # sum of their models (perfcast.fit.sums)
    res = sum_models(exp, res, sum_nodes, parents, st)
    return ModelSet(params, tuple(res), kinds, units, averaged, parents, inclusive,
                    aggregates, procs, upper, lower,
                    _measured_ends(st, res, lower, upper, absent_repetition_is_zero(exp)),
                    ObservedSlopes(tuple(res), params, lambda: _observed_slopes(slope_data, params, res)),
                    oversubscription(exp, procs), whole_run=_whole_run(exp, st, res),
                    signed=_signed(exp), smallest={p: float(cols[p].min()) for p in exp.parameters},
                    path=_measured_path(exp), sum_nodes=sum_nodes,
                    nested_timers=_nested_timers(exp, st, res, parents, params),
                    one_valued_series=_one_valued_series(st, res, params),
                    unfollowed=unfollowed_parameters(exp))


def summable_metrics(inclusive, kinds: Mapping[str, str], aggregates: Mapping[str, str]) -> frozenset:
    """The metrics whose children add up to at most their parent's value: inclusive, additive
    (times, counts, bytes) and combined over the processes by a sum or a mean, or not at all
    (``aggregates``: :func:`~perfcast.experiment.aggregate_labels`; one location's values add up too).  Not a maximum over ranks: the children's maxima can
    add up to more than the parent's, their slowest ranks differ."""
    return frozenset(m for m in inclusive if kinds.get(m) in ("time", "count", "bytes")
                     and ((aggregates.get(m) or "").split(" ")[0] in ("", "sum", "mean")
                          or (aggregates.get(m) or "").endswith(ONE_LOCATION)))


def check_positive(point: Mapping[str, float], where: str) -> None:
    """A point to predict at or rank for: every value a positive, finite number (a scaling model's
    terms ``x^i log2(x)^j`` hold for x > 0 only: at x = -1 a power law gives a number and a
    logarithm none, neither a prediction).  Else one error naming the parameters."""
    bad = [k for k, v in point.items() if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0)]
    if bad:
        raise PerfcastError(f"{','.join(f'{k}={point[k]:g}' for k in bad)}: a scaling model predicts at positive "
                            f"parameter values only", where=where)


#: how a quantity is combined over the ranks (``Metric.aggregate``) -> the order of the family's members
_ORDERED = {"min over ranks": "min", "mean over ranks": "mean", "max over ranks": "max"}


def aggregate_families(aggregates: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """metric -> (its family, its place in it): metrics that combine one quantity over the ranks as
    a minimum, a mean and a maximum (``aggregates``: :func:`~perfcast.experiment.aggregate_labels`' labels), named alike but
    for the operator in front (Caliper's and Hatchet's ``min#X``, ``avg#X``, ``max#X``: the family
    ``X``).  Only families of two or more."""
    out: dict = {}
    for name, label in aggregates.items():
        op = _ORDERED.get(label or "")
        head, sep, rest = name.partition("#")
        if op is not None and sep and rest and head.lower() in ("min", "avg", "mean", "max"):
            out[name] = (rest, op)
    size: dict = {}
    for rest, _ in out.values():
        size[rest] = size.get(rest, 0) + 1
    return {m: f for m, f in out.items() if size[f[0]] >= 2}


#: relative difference below which a parent's measured mean is the sum of its children's
SUM_TOL = 1e-9


def _sum_nodes(st: Columns, series, parents: Mapping[str, str], summable: frozenset, params) -> frozenset:
    """:attr:`ModelSet.sum_nodes` of ``series`` (statistics ``st``): the series of a ``summable``
    metric with children among ``series`` whose measured mean is the sum of those children's at
    every point it was measured (relative :data:`SUM_TOL`; a child not measured at a point counts 0
    there, so a parent that holds more than its measured children is never one)."""
    out = set()
    for s, mine, total, there in _children_means(st, series, parents, summable, params):
        if there.any() and np.all(np.abs(mine[there] - total[there]) <= SUM_TOL * np.abs(mine[there])):
            out.add((series[s].callpath, series[s].metric))
    return frozenset(out)


def _nested_timers(exp, st: Columns, series, parents: Mapping[str, str], params) -> frozenset:
    """:attr:`ModelSet.nested_timers` of ``series`` (statistics ``st``): the runs of a campaign's
    time metric (:data:`perfcast.experiment.RUN_TIMERS`: the run's wall time ``app`` and the
    timers the application printed, each a child of ``app`` whatever holds what) whose timers'
    measured means add up to more than the run's at some point it was measured: the timers nest
    (CoMD's total > loop > timestep > force), so their sum is no part of the run and bounds nothing."""
    from .experiment import RUN_TIMERS, timers_nest

    timers = frozenset(name for name, m in exp.metrics.items() if m.description == RUN_TIMERS)
    out = set()
    for s, mine, total, there in _children_means(st, series, parents, timers, params):
        if timers_nest(np.where(there, mine, np.nan), np.where(there, total, np.nan), SUM_TOL):
            out.add((series[s].callpath, series[s].metric))
    return frozenset(out)


def _children_means(st: Columns, series, parents: Mapping[str, str], metrics: frozenset, params) -> Iterator[tuple]:
    """(position of a parent in ``series``, its measured means, the sum of its children's, where both
    were measured) for each series of one of ``metrics`` with children among ``series``; one entry
    per distinct measured point, in one order (NaN: the parent not measured there; a child not
    measured at a point adds nothing there)."""
    if not parents or not metrics or not len(st):
        return
    idx = {(sm.callpath, sm.metric): s for s, sm in enumerate(series)}
    kids: dict[int, list[int]] = {}
    for s, sm in enumerate(series):
        par = parents.get(sm.callpath)
        if sm.metric in metrics and par is not None and (par, sm.metric) in idx:
            kids.setdefault(idx[(par, sm.metric)], []).append(s)
    if not kids:
        return
    key, want = _pair_codes(st, series)
    # the means of the series involved, one row each, one column per distinct point (NaN: not measured)
    involved = np.array(sorted(set(kids) | {k for ks in kids.values() for k in ks}), dtype=np.int64)
    pos = {int(s): i for i, s in enumerate(involved.tolist())}
    order = np.argsort(want[involved], kind="stable")
    sorted_keys = want[involved][order]
    at = np.searchsorted(sorted_keys, key).clip(0, max(len(sorted_keys) - 1, 0))
    hit = (sorted_keys[at] == key) & (key >= 0)
    rows = np.flatnonzero(hit)
    coords = np.column_stack([np.asarray(st[p], dtype=float)[rows] for p in params]) if params else np.zeros((len(rows), 0))
    _, point = np.unique(coords, axis=0, return_inverse=True)
    M = np.full((len(involved), int(point.max()) + 1 if len(rows) else 0), np.nan)
    M[order[at[rows]], point.ravel()] = np.asarray(st["mean"], dtype=float)[rows]
    for s, ks in kids.items():
        mine = M[pos[s]]
        # a child absent at a point adds nothing there (PMPI lists the routines a run called)
        sub = M[[pos[k] for k in ks]]
        yield s, mine, np.nansum(sub, axis=0), ~np.isnan(mine) & ~np.all(np.isnan(sub), axis=0)


def unfollowed_parameters(exp) -> tuple[str, ...]:
    """The parameters of ``exp`` measured at several values along which its distinct points hold no
    line of >= 3 values with the others fixed (:func:`perfcast.fit.core.parameter_lines`), unless
    the points lie on one path (a path law follows them, :func:`_measured_path`): no model follows
    such a parameter (each is fitted flat in it, :func:`perfcast.fit.core.no_line_note`), so no
    ranking target goes beyond its measured values by default (:meth:`ModelSet.default_target`)."""
    from .fit.core import parameter_lines

    if not exp.parameters or _measured_path(exp):
        return ()
    X = np.column_stack(list(exp.point_arrays()[0].values()))
    return tuple(q for k, q in enumerate(exp.parameters)
                 if len(np.unique(X[:, k])) > 1 and not parameter_lines(X, k))


def _measured_path(exp) -> tuple:
    """:attr:`ModelSet.path` of ``exp``: its distinct points along one path, when no parameter has a
    line of >= 3 points with the others fixed (:func:`perfcast.fit.path.measured_path`)."""
    from .fit.core import parameter_lines
    from .fit.path import measured_path

    if len(exp.parameters) < 2:
        return ()
    # the distinct points (sorted: neither rule depends on their order)
    X = np.column_stack(list(exp.point_arrays()[0].values()))
    if any(parameter_lines(X, p) for p in range(X.shape[1])):
        return ()
    P = measured_path(X)
    return () if P is None else tuple(tuple(r) for r in P.tolist())


def one_value_note(parameter: str, measured: float, t: Mapping[str, float]) -> str:
    """The note of a prediction at a value of ``parameter`` that was measured at one value only
    (:meth:`ModelSet.one_valued`): no model says how anything changes with it."""
    return (f"{parameter}={t[parameter]:g}: the experiment measured {parameter} at {measured:g} only, so no model "
            f"says how the values change with it: this is the value at {parameter}={measured:g}")


def off_path_note(parameters: Sequence[str], positions: Mapping[str, Mapping[str, float]]) -> str:
    """The note of a prediction off the measured path (:meth:`ModelSet.off_path`)."""
    where = "; ".join(f"{p} alone: " + ",".join(f"{q}={e[q]:.4g}" for q in parameters)
                      for p, e in positions.items())
    return ("off the measured path: the parameters were varied only together, so the data cannot tell which "
            f"one the value follows; the interval holds the path's values where each alone would put it ({where})")


def _signed(exp) -> tuple[str, ...]:
    """The metrics of ``exp`` with a negative measured value."""
    c = exp.cols
    neg = np.asarray(c["value"], dtype=float) < 0
    if not neg.any():
        return ()
    met = c["metric"]
    return tuple(sorted(map(str, met.objects()[np.unique(met.codes[neg])].tolist())))


def _whole_run(exp, st: Columns, series) -> dict:
    """Flat metric (scope unknown) -> its whole-run timer (:func:`perfcast.analysis.views.whole_run_timer`
    of the measured means ``st`` over every callpath of the metric, the one rule ``project`` and
    ``advise`` use), for the metrics of ``series`` that have one."""
    from .analysis.views import whole_run_timer

    out = {}
    for m, wide in flat_timers(exp, st, series):
        whole = whole_run_timer(wide)
        if whole is not None:
            out[m] = str(whole)
    return out


def flat_timers(exp, st: Columns, series) -> Iterator[tuple[str, "Wide | pd.DataFrame"]]:
    """(metric, its measured means: one row per point, one column per callpath) of each flat metric
    (scope unknown) of ``series``, from the statistics ``st``: what a whole-run timer is found in."""
    flat = [m for m in dict.fromkeys(map(_METRIC, series)) if m in exp.metrics and exp.metrics[m].scope == "unknown"]
    if not flat or not len(st) or not exp.parameters:
        return
    met = st["metric"]
    for m in flat:
        d = st.take(np.flatnonzero(met.codes == met.code_of(m))) if met.code_of(m) >= 0 else None
        if d is not None and len(d):
            yield m, _wide_means(d, list(exp.parameters))


def _wide_means(d: Columns, params: list[str]) -> "Wide | pd.DataFrame":
    """``d.pivot_table(index=params, columns="callpath", values="mean", observed=True)`` of
    statistics rows ``d`` (one row per point and callpath): the points sorted, the callpaths in
    category order, NaN where a callpath was not measured.  Placed by integer codes when every
    mean is a number and every (point, callpath) one row, as a :class:`perfcast.analysis.views.Wide`
    (pandas' pivot groups 180k rows for 30k callpaths in ~30 ms); else pandas' pivot itself."""
    from .analysis.views import Wide

    cp = d["callpath"]
    mean = np.asarray(d["mean"], dtype=float)
    coords = [np.asarray(d[p]) for p in params]
    pivot = lambda: d.to_pandas().pivot_table(index=params, columns="callpath", values="mean", observed=True)  # noqa: E731
    if (not isinstance(cp, Category) or np.isnan(mean).any()
            or any(c.dtype.kind != "f" or np.isnan(c).any() for c in coords)):
        return pivot()
    codes = cp.codes
    if (codes < 0).any():
        return pivot()
    # numpy's unique of plain integers hashes them (slow at this size): presence counts and sorts
    present = np.bincount(codes, minlength=cp.n_names) > 0
    taken = np.flatnonzero(present)
    col = (np.cumsum(present) - 1)[codes]
    if len(params) == 1:
        pts, row = np.unique(coords[0], return_inverse=True)
        points = pts.tolist()
    else:
        order = np.lexsort(coords[::-1])
        first = np.zeros(len(order), dtype=bool)
        first[0] = True
        for c in coords:
            first[1:] |= c[order][1:] != c[order][:-1]
        row = np.empty(len(order), dtype=np.int64)
        row[order] = np.cumsum(first) - 1
        points = list(zip(*(c[order][first].tolist() for c in coords)))
    n_cols = len(taken)
    cell = np.sort(np.asarray(row, dtype=np.int64) * n_cols + np.asarray(col, dtype=np.int64))
    if (cell[1:] == cell[:-1]).any():
        return pivot()
    v = np.full((len(points), n_cols), np.nan)
    v[np.asarray(row), np.asarray(col)] = mean
    return Wide(points, cp.objects()[taken].tolist(), v)


def _line_at_target(parameters, lines, target) -> dict | None:
    """The measured lines a model's value at ``target`` lies on, with its factor on the formula's
    value (:func:`perfcast.fit.lines.line_at`); None without ``target`` or on no line."""
    if not lines or target is None or any(p not in target for p in parameters):
        return None
    from .fit.lines import line_at

    return line_at(lines, parameters, target)


def _statistics(exp, series, locations: str, given=None) -> Columns:
    from .fit.series import statistics_columns

    names = sorted(set(map(_METRIC, series)))
    if len(names) == len(exp.metrics):
        return given if given is not None else statistics_columns(exp, locations)
    return statistics_columns(exp.select(metric=names), locations)


def _observed_slopes(st: Columns, params: tuple[str, ...], series: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Per series of ``series`` and parameter, the (shallowest, steepest) log-log slope of its
    measured means between neighbouring values of that parameter, the others fixed (positive means
    and values only): two (S, len(params)) arrays, NaN where the series has no two such neighbours."""
    S = len(series)
    lo_a, hi_a = np.full((S, len(params)), np.nan), np.full((S, len(params)), np.nan)
    if not len(st) or not S:
        return lo_a, hi_a
    # the series of each row of ``st`` as a key (callpath code, metric code), and each series' key
    cp_codes, cp_names = _codes(st["callpath"])
    mt_codes, mt_names = _codes(st["metric"])
    nm = max(len(mt_names), 1)
    row_key = np.where((cp_codes >= 0) & (mt_codes >= 0), cp_codes.astype(np.int64) * nm + mt_codes, -1)
    # the names as a list first: iterating an Arrow-backed index makes a Python object per item slowly
    cp_at = {c: i for i, c in enumerate(map(str, list(np.asarray(cp_names, dtype=object))))}
    mt_at = {m: i for i, m in enumerate(map(str, list(np.asarray(mt_names, dtype=object))))}
    want = np.array([cp_at[sm.callpath] * nm + mt_at[sm.metric] if sm.callpath in cp_at and sm.metric in mt_at
                     else -1 for sm in series], dtype=np.int64)
    nkeys = len(cp_names) * nm
    mean = np.asarray(st["mean"], dtype=float)
    coords = {p: np.asarray(st[p], dtype=float) for p in params}
    for k, p in enumerate(params):
        others = [q for q in params if q != p]
        keep = np.flatnonzero((coords[p] > 0) & (mean > 0) & (row_key >= 0))
        if not len(keep):
            continue
        # rows by series, the other parameters' values, then this one's: neighbours along ``p``
        order = keep[np.lexsort([coords[p][keep]] + [coords[q][keep] for q in reversed(others)] + [row_key[keep]])]
        key = row_key[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = key[1:] != key[:-1]
        for q in others:
            v = coords[q][order]
            first[1:] |= v[1:] != v[:-1]
        lx = np.log(coords[p][order])
        ly = np.log(mean[order])
        dx = np.diff(lx, prepend=np.nan)
        dy = np.diff(ly, prepend=np.nan)
        ok = ~first & (dx > 0)
        if not ok.any():
            continue
        sk, sl = key[ok], dy[ok] / dx[ok]
        # per series: the shallowest and steepest slope (NaN slopes skipped; NaN when all are)
        lo = np.full(nkeys, np.inf)
        hi = np.full(nkeys, -np.inf)
        np.fmin.at(lo, sk, sl)
        np.fmax.at(hi, sk, sl)
        seen = np.zeros(nkeys, dtype=bool)
        seen[sk] = True
        valid = np.zeros(nkeys, dtype=bool)
        valid[sk[~np.isnan(sl)]] = True
        lo[seen & ~valid] = np.nan
        hi[seen & ~valid] = np.nan
        found = want >= 0
        found[found] = seen[want[found]]
        lo_a[found, k] = lo[want[found]]
        hi_a[found, k] = hi[want[found]]
    return lo_a, hi_a


def _codes(col) -> tuple[np.ndarray, Sequence]:
    """(integer code per row, the distinct values) of a statistics column (a :class:`Category`,
    a numpy array or a pandas column): a categorical's own codes and names, else factorized."""
    if not isinstance(col, (Category, np.ndarray)):
        col = column(col)
    if isinstance(col, Category):
        return col.codes, col.objects()
    codes, uniq = pd.factorize(col, use_na_sentinel=True)
    return codes, uniq


def _same_items(items: Sequence, series: Sequence) -> bool:
    """``items`` are the objects of ``series``, in the same order (identity, compared in C)."""
    return len(items) == len(series) and all(map(is_, items, series))


class _ArrayMap(Mapping):
    """A read-only mapping built from arrays on first use (``_map``, in the subclass): the arrays
    are what the model set reads; the mapping is for API users."""

    __slots__ = ()

    @abstractmethod
    def _map(self) -> dict:
        """The mapping, built from the arrays on first use and kept."""

    def __getitem__(self, key):
        return self._map()[key]

    def get(self, key, default=None):
        return self._map().get(key, default)

    def __iter__(self):
        return iter(self._map())

    def __len__(self) -> int:
        return len(self._map())

    def __repr__(self) -> str:
        return repr(self._map())


class ObservedSlopes(_ArrayMap):
    """The measured slopes of each series (:func:`_observed_slopes`), as arrays aligned with the
    series they are computed for, on first use; read as a mapping (callpath, metric) ->
    {parameter: (shallowest, steepest)} (series and parameters without slopes absent)."""

    __slots__ = ("series", "parameters", "_make", "_arrays", "_d")

    def __init__(self, series: tuple, parameters: tuple, make: Callable[[], tuple]):
        self.series, self.parameters, self._make, self._arrays, self._d = series, parameters, make, None, None

    def arrays(self, items: Sequence):
        """(shallowest, steepest), each (S, len(parameters)), for ``items`` when they are the series
        these were computed for, in the same order (else None)."""
        if not _same_items(items, self.series):
            return None
        if self._arrays is None:
            self._arrays = self._make()
            self._make = None
        return self._arrays

    def _map(self) -> dict:
        if self._d is None:
            lo, hi = (a.tolist() for a in self.arrays(self.series))
            d: dict = {}
            for s, sm in enumerate(self.series):
                e = {p: (lo[s][k], hi[s][k]) for k, p in enumerate(self.parameters) if hi[s][k] == hi[s][k]}
                if e:
                    d[(sm.callpath, sm.metric)] = e
            self._d = d
        return self._d


def _measured_ends(st: Columns, series, lower: Mapping[str, float], upper: Mapping[str, float],
                   absent_zero: bool = False) -> "MeasuredEnds":
    """(callpath, metric) -> mean measured value (locations reduced as fitted) at ``lower`` and at
    ``upper``, None where the series has no measurement there: arrays aligned with ``series``
    (:class:`MeasuredEnds`), found by one integer look-up per point (the names as the table's
    codes), not a dict per series.  ``absent_zero`` (a profile that records what each run executed:
    :func:`~perfcast.experiment.absent_repetition_is_zero`): a series without a value at a point
    where its metric was measured did not run there, measured 0 (miniFE's MPI_Irecv at p = 1, one
    rank without neighbours), not unknown."""
    S = len(series)
    value = np.full((S, 2), np.nan)
    given = np.zeros((S, 2), dtype=bool)
    if S and len(st):
        key, want = _pair_codes(st, series)
        for k, pt in enumerate((lower, upper)):
            sel = np.ones(len(st), dtype=bool)
            for p, v in pt.items():
                sel &= np.asarray(st[p], dtype=float) == v
            at = np.nonzero(sel)[0]
            if not len(at):
                continue
            # one statistics row per point and series; else the last of a key, as a dict
            have = key[at]
            uniq, last = np.unique(have[::-1], return_index=True)
            last = len(have) - 1 - last          # the last row of each key, keys sorted
            pos = np.searchsorted(uniq, want).clip(0, max(len(uniq) - 1, 0))
            found = (want >= 0) & (uniq[pos] == want) if len(uniq) else np.zeros(len(want), dtype=bool)
            value[found, k] = np.asarray(st["mean"], dtype=float)[at[last[pos[found]]]]
            given[found, k] = True
            if absent_zero:
                # the series' metric measured at the point, the series not: it did not run there
                met = st["metric"]
                here = {str(x) for x in (met.objects()[np.unique(met.codes[at])].tolist() if isinstance(met, Category)
                                         else pd.unique(np.asarray(met, dtype=object)[at]).tolist())}
                ran = np.fromiter((sm.metric in here for sm in series), dtype=bool, count=S)
                zero = ~found & ran
                value[zero, k] = 0.0
                given[zero, k] = True
    return MeasuredEnds(tuple(series), value, given)


def _one_valued_series(st: Columns, series, params: Sequence[str]) -> dict:
    """(callpath, metric) -> {parameter: its one value} for each series of ``series`` measured at
    one value of a parameter that the statistics ``st`` hold at several (a routine that runs from
    p = 2 on in a campaign at p = 1, 2): its model cannot say how the series changes with it."""
    if not len(st) or not len(series) or not params:
        return {}
    key, want = _pair_codes(st, series)
    uniq, inv = np.unique(key, return_inverse=True)
    inv = np.asarray(inv).ravel()
    pos = np.searchsorted(uniq, want).clip(0, max(len(uniq) - 1, 0))
    found = (want >= 0) & (uniq[pos] == want)
    out: dict = {}
    for p in params:
        x = np.asarray(st[p], dtype=float)
        ok = np.isfinite(x)
        if len(np.unique(x[ok])) < 2:
            continue
        lo = np.full(len(uniq), np.inf)
        hi = np.full(len(uniq), -np.inf)
        np.minimum.at(lo, inv[ok], x[ok])
        np.maximum.at(hi, inv[ok], x[ok])
        for s_ in np.flatnonzero(found & (lo[pos] == hi[pos])).tolist():
            sm = series[s_]
            out.setdefault((sm.callpath, sm.metric), {})[p] = float(lo[pos[s_]])
    return out


def beyond_flat_note(parameter: str, lo: float, hi: float, t: Mapping[str, float]) -> str:
    """The note of a prediction beyond the measured range of ``parameter`` by a model that is flat
    in it because the data hold no line of >= 3 points along it (:func:`perfcast.fit.core.no_line_note`)."""
    return (f"{parameter}={t[parameter]:g}: beyond the measured {parameter} ({lo:g} to {hi:g}), along which the data "
            f"hold no line of >= 3 points: no model says how the value changes with {parameter}")


def beyond_two_level_note(parameter: str, lo: float, hi: float, t: Mapping[str, float]) -> str:
    """The note of a prediction beyond the measured range of ``parameter`` by a model whose law in
    it rests on its two measured values (:func:`perfcast.fit.core.two_level_note`)."""
    return (f"{parameter}={t[parameter]:g}: beyond the measured {parameter} ({lo:g} to {hi:g}); the law along "
            f"{parameter} rests on these two values only")


def one_value_series_note(parameter: str, measured: float, t: Mapping[str, float]) -> str:
    """The note of a prediction at a value of ``parameter`` that the series was measured at one
    value of (:attr:`ModelSet.one_valued_series`)."""
    return (f"{parameter}={t[parameter]:g}: this series was measured at {parameter}={measured:g} only, so its "
            f"model does not say how it changes with {parameter}: this is the value at {parameter}={measured:g}")


_CALLPATH, _METRIC = attrgetter("callpath"), attrgetter("metric")


def _pair_codes(st: Columns, series) -> tuple[np.ndarray, np.ndarray]:
    """The (callpath, metric) names of the rows of ``st`` and of ``series`` as one integer each,
    equal where both names are equal as strings (-1 for a series whose names ``st`` lacks): the
    table's categorical codes, no string per row (a million series: a tenth of the time)."""
    key = np.zeros(len(st), dtype=np.int64)
    want = np.zeros(len(series), dtype=np.int64)
    for c, get in (("callpath", _CALLPATH), ("metric", _METRIC)):
        col = st[c]
        # a categorical's codes themselves (no copy)
        if isinstance(col, Category) and not (col.codes < 0).any():
            names, codes = col.name_list(), col.codes
        else:
            s = pd.Series(col.to_pandas() if isinstance(col, Category) else col)
            codes, names = pd.factorize(s.astype(str).to_numpy())
            names = list(names)
        k = max(len(names), 1)
        key = key * k + codes
        at = {n: i for i, n in enumerate(names)}     # distinct names: a position each
        w = np.fromiter(map(at.get, map(get, series), repeat(-1)), dtype=np.int64, count=len(series))
        want = np.where((want >= 0) & (w >= 0), want * k + w, -1)
    return key, want


class MeasuredEnds(_ArrayMap):
    """The mean measured values of each series at the smallest and the largest measured point, as
    arrays aligned with the series they were computed for (``value``, ``given``: (S, 2), NaN and
    False where not measured); read as a mapping (callpath, metric) -> (lower or None, upper or
    None), built on first use."""

    __slots__ = ("series", "value", "given", "_d")

    def __init__(self, series: tuple, value: np.ndarray, given: np.ndarray):
        self.series, self.value, self.given, self._d = series, value, given, None

    def arrays(self, items: Sequence):
        """(value, given) for ``items`` when they are the series these were computed for, in the
        same order (else None)."""
        if not _same_items(items, self.series):
            return None
        return self.value, self.given

    def _map(self) -> dict:
        if self._d is None:
            v = self.value.tolist()
            g = self.given.tolist()
            self._d = {(sm.callpath, sm.metric): (v[s][0] if g[s][0] else None, v[s][1] if g[s][1] else None)
                       for s, sm in enumerate(self.series)}
        return self._d

    def __bool__(self) -> bool:
        return bool(self.series)    # empty exactly when the map is, without building it


def _process_parameter(exp) -> str | None:
    """The parameter counting processes, only on evidence: the one with a conventional name
    (``p``, ``ranks``, ``jobsize``, ...), else the one whose value equals the number of ranks
    measured at every point.  None otherwise -- the only parameter of a CUBE matrix-multiply set
    is the matrix size, and dividing its counts by it would be silently wrong."""
    from .scaling import PROC_NAMES

    named = [p for p in exp.parameters if p.lower() in PROC_NAMES]
    if len(named) == 1:
        return named[0]
    if "rank" not in exp.cols or not exp.parameters:
        return None
    d = exp.data.dropna(subset=["rank"])
    if d.empty:
        return None
    ranks = d.groupby(list(exp.parameters), observed=True)["rank"].nunique()
    pts = ranks.index.to_frame(index=False)
    counted = [p for p in exp.parameters if pts[p].nunique() > 1
               and np.array_equal(pts[p].to_numpy(float), ranks.to_numpy(float))]
    return counted[0] if len(counted) == 1 else None


def confidence(value: float, lower: float | None, upper: float | None, warnings: Sequence[str]) -> str:
    """``high``, ``medium`` or ``low`` (module docstring; :data:`CONFIDENCE_LIMITS`).  An exact zero
    (value and interval 0: a routine that sends no bytes) is high."""
    nan = float("nan")
    return str(confidences(np.array([value], dtype=float), np.array([nan if lower is None else lower], dtype=float),
                           np.array([nan if upper is None else upper], dtype=float), np.array([bool(warnings)]))[0])


#: values from which an interval's variance (squares of values, and products of designs) may leave
#: the range of floats (1.8e308)
HUGE_VALUE = 1e100


def finite_bounds(lower: np.ndarray, upper: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, ...]:
    """(lower, upper, beyond) with the bounds beyond the range of floats made NaN: no bound (a
    target like p = 1e150, where the variance overflows while the value does not); ``beyond``
    says where (:data:`HUGE_NOTE`): an infinite bound, or none at a value from :data:`HUGE_VALUE`
    on (the overflowed parts of the variance made it NaN)."""
    with np.errstate(invalid="ignore"):
        beyond = np.isinf(lower) | np.isinf(upper) | (
            (np.isnan(lower) | np.isnan(upper)) & np.isfinite(value) & (np.abs(value) >= HUGE_VALUE))
    if not beyond.any():
        return lower, upper, beyond
    return np.where(beyond, np.nan, lower), np.where(beyond, np.nan, upper), beyond


def clip_interval(value, lower, upper, nonneg) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper, clipped) of intervals around ``value`` for metrics that cannot be negative
    (``nonneg``, broadcast): a lower bound below 0 becomes 0 and is marked clipped -- where the
    value itself is not negative.  A negative value (a model past where it extrapolates, said in
    a note) keeps the model's own interval around it, so the value shown always lies in the
    interval shown (clipping that interval would give ``-2.5 [0, 0]``).  NaN bounds stay NaN."""
    value, lo, hi = (np.array(a, dtype=float) for a in (value, lower, upper))
    with np.errstate(invalid="ignore"):
        clipped = np.asarray(nonneg, dtype=bool) & (lo < 0) & (value >= 0)   # False where NaN
    lo[clipped] = 0.0
    return lo, hi, clipped


def confidences(value: np.ndarray, lower: np.ndarray, upper: np.ndarray, doubted: np.ndarray) -> np.ndarray:
    """:func:`confidence` of many values (no interval: NaN; ``doubted``: with warnings)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        rel = (upper - lower) / 2 / np.abs(value)
        out = np.where(rel <= CONFIDENCE_LIMITS[0], "high", np.where(rel <= CONFIDENCE_LIMITS[1], "medium", "low"))
        zero = value == 0
        out = np.where(zero, np.where((lower == 0) & (upper == 0), "high", "low"), out)
    low = doubted | np.isnan(lower) | np.isnan(upper) | ~np.isfinite(value)
    return np.where(low, "low", out)


class _Predicted:
    """:meth:`ModelSet.predict`'s rows as columns (series-major, then point): as dicts
    (:meth:`rows`) or as the JSON text of the dicts (:meth:`json`)."""

    def __init__(self, series, pts, level, value, lower, upper, clipped, conf, formulas, status, segmented,
                 notes, extra, line, units, aggregates, children=None):
        self.series, self.pts, self.level = series, pts, level
        self.value, self.lower, self.upper, self.clipped, self.conf = value, lower, upper, clipped, conf
        self.formulas, self.status, self.segmented, self.notes = formulas, status, segmented, notes
        self.extra, self.line, self.units, self.aggregates = extra, line, units, aggregates
        #: row -> the sum of its children's predictions, where the parent says it
        #: (:meth:`ModelSet._flag_children_sums`): ``children_sum`` in the rows
        self.children = children or {}

    def rows(self) -> list[dict]:
        P = len(self.pts)
        nan_none = lambda a: [None if x != x else x for x in a.tolist()]  # noqa: E731
        v, lo, hi = self.value.tolist(), nan_none(self.lower), nan_none(self.upper)
        clipped, conf = self.clipped.tolist(), self.conf.tolist()
        ats = [dict(t) for t in self.pts]
        out = []
        for s, sm in enumerate(self.series):
            unit, aggregate = self.units.get(sm.metric, ""), self.aggregates.get(sm.metric, "")
            for j in range(P):
                i = s * P + j
                out.append({"callpath": sm.callpath, "metric": sm.metric, "unit": unit, "aggregate": aggregate,
                            "at": dict(ats[j]), "value": v[i], "lower": lo[i], "upper": hi[i],
                            "level": self.level, "clipped": clipped[i], "confidence": conf[i],
                            "formula": self.formulas[s], "status": self.status[s],
                            "segmented": self.segmented[s], "notes": self.notes[s] + self.extra.get(i, [])})
                if i in self.line:
                    out[-1]["line"] = self.line[i]
                if i in self.children:
                    out[-1]["children_sum"] = self.children[i]
        return out

    def at_target(self, i: int) -> dict:
        """Row ``i``'s prediction as the model views with a target show it (``model --target``:
        table, JSON, files): ``value, lower, upper, level, clipped, confidence`` and ``notes``,
        :meth:`rows`' fields of the same row."""
        nan_none = lambda x: None if x != x else x  # noqa: E731
        return {"value": float(self.value[i]), "lower": nan_none(float(self.lower[i])),
                "upper": nan_none(float(self.upper[i])), "level": self.level, "clipped": bool(self.clipped[i]),
                "confidence": str(self.conf[i]), "notes": self.notes_of(i),
                **({"children_sum": self.children[i]} if i in self.children else {})}

    def notes_of(self, i: int) -> list[str]:
        """Row ``i``'s notes: the series' warnings and model notes, then those of the point."""
        return list(self.notes[i // len(self.pts)]) + list(self.extra.get(i, []))

    def json(self, nested: bool = False) -> str:
        """``json_text(rows())``, a column at a time; ``nested``: laid out as the list inside an
        envelope (``json_text(envelope(kind, rows()))`` continues its lines with two spaces)."""
        import functools
        import json

        from .fit.columns import float_texts
        from .output import _json_default, json_text

        S, P = len(self.series), len(self.pts)
        if not S * P:
            return json_text([])
        value, known = self.value, ~np.isnan(self.lower)
        if not (np.isfinite(value).all() and np.isfinite(self.lower[known]).all()
                and np.isfinite(self.upper[~np.isnan(self.upper)]).all()):
            return json_text(self.rows())   # the json module refuses them, as before
        enc = functools.partial(json.dumps, allow_nan=False, default=_json_default)
        enc_str = json.encoder.encode_basestring_ascii
        per_metric = {mt: ', "metric": ' + enc_str(mt) + ', "unit": ' + enc(self.units.get(mt, ""))
                      + ', "aggregate": ' + enc(self.aggregates.get(mt, "")) + ', "at": '
                      for mt in {sm.metric for sm in self.series}}
        obj = lambda t: np.asarray(t, dtype=object)  # noqa: E731
        ser = lambda t: np.repeat(obj(t), P)  # noqa: E731
        sep = ",\n  " if nested else ",\n "
        head = ser([sep + '{"callpath": ' + enc_str(sm.callpath) + per_metric[sm.metric] for sm in self.series])
        at = np.tile(obj([enc(dict(t)) for t in self.pts]), S)
        level = ', "level": ' + enc(self.level) + ', "clipped": '
        model = ser(['", "formula": ' + enc_str(f) + ', "status": ' + enc_str(st) + ', "segmented": '
                     + ("true" if sg else "false") + ', "notes": '
                     for f, st, sg in zip(self.formulas, self.status, self.segmented)])
        texts: dict = {}     # the same notes' text once (a note names a point or a slope: many repeat)
        notes = ser([(texts.get(k) or texts.setdefault(k, enc(n))) if (k := tuple(n)) else "[]" for n in self.notes])
        for i, n in self.extra.items():
            notes[i] = enc(self.notes[i // P] + n)
        tail = np.full(S * P, "}", dtype=object)
        for i, ln in self.line.items():
            tail[i] = ', "line": ' + enc(ln) + "}"
        for i, c in self.children.items():
            tail[i] = tail[i][:-1] + ', "children_sum": ' + enc(c) + "}"
        cols = [head, at, [', "value": '] * (S * P), float_texts(value), [', "lower": '] * (S * P),
                float_texts(self.lower), [', "upper": '] * (S * P), float_texts(self.upper),
                np.where(self.clipped, level + 'true, "confidence": "', level + 'false, "confidence": "').tolist(),
                self.conf, model, notes, tail]
        K = len(cols)
        pieces: list = [None] * (S * P * K)
        for k, c in enumerate(cols):
            pieces[k::K] = c.tolist() if isinstance(c, np.ndarray) else c
        return "[" + "".join(pieces)[len(sep):] + "]\n"


@dataclass(frozen=True)
class ModelSet:
    """Models keyed by (callpath, metric), in tree then metric order."""

    parameters: tuple[str, ...]
    series: tuple = ()
    #: metric -> kind (time, count, bytes, other) and unit
    kinds: Mapping[str, str] = field(default_factory=dict)
    units: Mapping[str, str] = field(default_factory=dict)
    #: values averaged over the competing hypotheses (default: the selected one, the formula shown)
    averaged: bool = False
    #: callpath -> parent callpath in the calling-context tree, and the metrics holding inclusive
    #: values (a child's inclusive value cannot exceed its parent's: such predictions are flagged)
    parents: Mapping[str, str] = field(default_factory=dict)
    inclusive: tuple[str, ...] = ()
    #: metric -> how its value combines the processes ("sum over ranks", ...; "" unknown), the
    #: parameter counting processes (None: unknown) and the largest measured value of each parameter
    aggregates: Mapping[str, str] = field(default_factory=dict)
    procs: str | None = None
    upper: Mapping[str, float] = field(default_factory=dict)
    #: the smallest measured process count (other parameters at their largest) and, per series,
    #: the mean measured values there and at ``upper`` (the ranking's measured growth)
    lower: Mapping[str, float] = field(default_factory=dict)
    measured: Mapping[tuple[str, str], tuple] = field(default_factory=dict)
    #: per series and parameter, the shallowest and steepest measured log-log slope (confidence)
    slopes: Mapping[tuple[str, str], Mapping[str, tuple]] = field(default_factory=dict)
    #: the runs with more ranks than cores (:mod:`perfcast.analysis.oversubscription`), None when
    #: none or nothing shows it: predictions of times fitted on them are noted and of low confidence
    oversubscribed: "Oversubscription | None" = None  # noqa: F821
    #: fitted series outside the set read by the tree checks only: the ancestors of its callpaths
    #: that a callpath filter left out (:func:`model`), so a child is flagged and its upper bound
    #: capped as in the full run
    context: tuple = ()
    #: metric -> its whole-run timer, for flat metrics (scope unknown) with one
    #: (:func:`perfcast.analysis.views.whole_run_timer` of the measured means over every callpath of
    #: the metric): the root of the cost ranking, as of ``project`` and ``advise``
    whole_run: Mapping[str, str] = field(default_factory=dict)
    #: the measured values of ``context`` (:class:`MeasuredEnds`): the cost ranking's root is the full
    #: tree's, counted over ``series`` and ``context``, so a filter chooses rows, not shares
    context_measured: "MeasuredEnds | None" = None
    #: False: fitted without the leave-largest-out check (:func:`model` ``intervals=False``): its
    #: models lack the drift, so intervals (:meth:`predict`) and model records (:meth:`to_dict`,
    #: :meth:`json_chunks`) are refused
    intervals: bool = True
    #: metrics with a negative measured value: whatever their kind, their values can be negative
    #: (:meth:`nonnegative`)
    signed: tuple[str, ...] = ()
    #: each parameter's smallest measured value (with ``upper`` the measured range; empty: unknown)
    smallest: Mapping[str, float] = field(default_factory=dict)
    #: (callpath, metric) of the series that hold nothing of their own: an inclusive, additive
    #: metric whose measured mean equals the sum of its children's at every measured point (PMPI's
    #: ``MPI`` node, the sum of its routines; :func:`_sum_nodes`)
    sum_nodes: frozenset = frozenset()
    #: (callpath, metric) of the runs of a campaign's time metric whose application timers nest: their
    #: measured means add up to more than the run's at some measured point (:func:`_nested_timers`),
    #: so their predictions' sum is no bound on the run's
    nested_timers: frozenset = frozenset()
    #: (callpath, metric) -> {parameter: value} for the series measured at one value of a parameter
    #: the experiment measured at several (miniFE's MPI_Irecv from p = 2 on, p = 1, 2): no model of
    #: the series says how it changes with that parameter (:func:`_one_valued_series`)
    one_valued_series: Mapping[tuple[str, str], Mapping[str, float]] = field(default_factory=dict)
    #: the measured points when the parameters were varied only together along one path
    #: (:mod:`perfcast.fit.path`), sorted along it; empty otherwise.  A prediction off the path has
    #: its interval widened to the values at the path's positions its coordinates name, a note and
    #: confidence low
    path: tuple = ()
    #: the parameters no model follows: the measured points hold no line of >= 3 values along them
    #: (:func:`unfollowed_parameters`); the default ranking target keeps them at their largest value
    unfollowed: tuple[str, ...] = ()

    # -- a mapping of (callpath, metric) -> model ------------------------------------------------
    def __len__(self) -> int:
        return len(self.series)

    def __iter__(self) -> Iterator:
        self._built()
        return iter(self.series)

    def _built(self) -> None:
        """Build the models not built yet (the fit builds them on first use; the views that hand
        out models build them all at once, in the fit's order)."""
        from .fit.series import materialise

        materialise(self.series)

    def keys(self) -> list[tuple[str, str]]:
        return [(sm.callpath, sm.metric) for sm in self.series]

    def _need_intervals(self, what: str) -> None:
        """Refuse ``what`` (intervals or model records) on a set fitted without the check that
        gives the drift (:attr:`intervals`)."""
        if not self.intervals:
            raise PerfcastError(f"{what}: this model set was fitted without its leave-largest-out check "
                                "(perfcast.model(..., intervals=False)): fit it with intervals=True")

    def _index(self) -> dict:
        """(callpath, metric) -> series, built on first lookup (``self`` is frozen: kept in its
        ``__dict__``; a :func:`dataclasses.replace` copy builds its own)."""
        idx = self.__dict__.get("_by_key")
        if idx is None:
            idx = {(sm.callpath, sm.metric): sm for sm in self.series}
            object.__setattr__(self, "_by_key", idx)
        return idx

    def __getitem__(self, key: tuple[str, str]):
        return self.series_of(*key).model

    def series_of(self, callpath: str, metric: str | None = None):
        """The fitted series of ``callpath`` and ``metric`` (``metric`` may be left out when the
        callpath has one); a KeyError naming what exists otherwise."""
        idx = self._index()
        if metric is not None:
            try:
                return idx[(callpath, metric)]
            except KeyError:
                raise KeyError(f"no model of ({callpath!r}, {metric!r})") from None
        found = [sm for (cp, _), sm in idx.items() if cp == callpath]
        if len(found) != 1:
            metrics = sorted(sm.metric for sm in found)
            raise KeyError(f"callpath {callpath!r} has no model" if not found else
                           f"callpath {callpath!r} has models of {len(found)} metrics {metrics}: give the metric")
        return found[0]

    def default_target(self) -> dict[str, float]:
        """The point ranked at when no target is given (``perfcast model``'s default): twice the
        largest measured process count, the other parameters at their largest measured values;
        a process count no model follows (:attr:`unfollowed`) at its largest measured value
        (:func:`perfcast.analysis.ranking.default_target`)."""
        from .analysis.ranking import default_target

        return default_target(self.upper, self.procs, unfollowed=self.unfollowed)

    def target_note(self, target: Mapping[str, float] | None, what: str = "--target") -> str | None:
        """What the ranking at ``target`` (None: :meth:`default_target`) says of the parameters no
        model follows (:func:`perfcast.analysis.ranking.unfollowed_target_note`), or None."""
        from .analysis.ranking import unfollowed_target_note

        if not self.unfollowed or not self.upper:
            return None
        given = target is not None
        return unfollowed_target_note(dict(target) if given else self.default_target(), self.upper,
                                      self.smallest, self.unfollowed, self.procs, given, what)

    def with_averaged(self, averaged: bool = True) -> "ModelSet":
        return replace(self, averaged=averaged)

    def select(self, metrics: Sequence[str] | None = None) -> "ModelSet":
        if metrics is None:
            return self
        return replace(self, series=tuple(sm for sm in self.series if sm.metric in set(metrics)))

    # -- the views -----------------------------------------------------------------------------
    def warnings(self, sm) -> list[str]:
        """Lack-of-fit warnings of a series' model (``sm``: anything with ``model``, a series or a
        :class:`perfcast.analysis.ranking.Ranked` row)."""
        from .analysis.fitcheck import fit_warnings

        return fit_warnings(sm.model)

    def predict(self, points: Mapping[str, float] | Sequence[Mapping[str, float]], level: float = 0.9) -> list[dict]:
        """One row per series and point: ``callpath, metric, unit, at, value, lower, upper, level,
        clipped, confidence, formula, status, segmented, notes`` and, on a measured line with its own
        level, ``line`` (module docstring for the rules)."""
        return self._predicted(points, level).rows()

    def _predicted(self, points, level: float) -> "_Predicted":
        """:meth:`predict`'s rows as columns."""
        pts = [points] if isinstance(points, Mapping) else list(points)
        for t in pts:
            extra = [k for k in t if k not in self.parameters]
            missing = [p for p in self.parameters if p not in t]
            if extra or missing:
                raise PerfcastError(f"point {','.join(f'{k}={v:g}' for k, v in t.items())}: give exactly the "
                                    f"parameters {', '.join(self.parameters)}", where="at")
            check_positive(t, "at")
        from .fit import columns
        from .fit.lines import line_at, line_note

        series = list(self.series)
        parts = columns.split(series)
        value, lower, upper, base, huge = self._batch(pts, level, parts, beyond=True)
        lower, upper, huge = lower.ravel(), upper.ravel(), huge.ravel()
        S, P = value.shape
        bad = ~np.isfinite(value)
        if bad.any():
            # e.g. log2(p) at p <= 0, log2(p)^-1 at p <= 1 (perfcast.fit.terms.factor_values)
            s, j = (int(i) for i in np.argwhere(bad)[0])
            formula = columns.formulas([series[s]])[0]
            m = series[s].model          # on a process grid (perfcast.fit.grid), or a sum of models on one
            grids = [getattr(x, "grid", None) for x in (m, *getattr(m, "parts", ()))]
            grid = next((g for g in grids if g is not None), None)
            why = (f" (a process grid has a whole number of processes {grid.parameter})"
                   if grid is not None and grid.dims(float(pts[j].get(grid.parameter, float("nan")))) is None else "")
            raise PerfcastError(f"{series[s].callpath} / {series[s].metric}: the model {formula} is undefined at "
                                f"{','.join(f'{k}={x:g}' for k, x in pts[j].items())}{why}", where="at")
        texts = columns.formulas(series, digits=self.formula_digits(series, parts, pts), parts=parts)
        warn = self._warnings_at(series, parts)
        lines = columns.lines(series, parts)
        # per series: the model's notes, status and whether it is segmented
        notes_of: list = [()] * S
        status = np.where(columns.status_ok(series, parts), "ok", "insufficient").tolist()
        segmented = [False] * S
        for g, pos, _ in parts[0]:
            if g.notes:
                for s in pos.tolist():
                    notes_of[s] = g.notes
        for s in parts[1]:
            m = series[s].model
            notes_of[s] = tuple(getattr(m, "notes", ()))
            status[s] = m.status
            segmented[s] = bool(getattr(m, "segments", None))
        steep = self._beyond_measured_slopes(series, lines, pts, value, base)
        # the rows (series-major, then point), a column each
        nonneg = np.repeat(self._nonnegative(series), P)
        v = value.ravel()
        negative = nonneg & (v < 0)
        lo, hi, clipped = clip_interval(v, lower, upper, nonneg)
        capped = self._cap_by_ancestors(series, pts, level, v, hi)
        # notes beyond the model's own, in their order: the measured line, negative, clipped, the
        # slope beyond the data; doubts (any: confidence low): warnings, negative, insufficient, slope
        extra: dict = {}
        line: dict = {}
        for s in [s for s in range(S) if lines[s][1]]:
            for j, t in enumerate(pts):
                ln = line_at(lines[s][1], lines[s][0], t)
                if ln is not None:
                    line[s * P + j] = ln
                    extra[s * P + j] = [line_note(ln)]
        inside = [self.measured_range(t) for t in pts]
        for i in np.flatnonzero(huge).tolist():
            extra.setdefault(i, []).append(HUGE_NOTE)
        for i in np.flatnonzero(negative).tolist():
            extra.setdefault(i, []).append(NEGATIVE_NOTE + (NEGATIVE_WITHIN if inside[i % P] else NEGATIVE_BEYOND))
        for i in np.flatnonzero(clipped).tolist():
            extra.setdefault(i, []).append("interval clipped at 0")
        for i, c in capped.items():
            extra.setdefault(i, []).append(f"{CAPPED_NOTE} {c}")
        if self.averaged:
            # the value is the average over the competing hypotheses, the formula shown the selected
            # one: where they differ, the note gives the formula's own value
            with np.errstate(all="ignore"):
                own = columns.values(series, pts, False, parts).ravel()
                differ = ~np.isclose(own, v, rtol=1e-9, atol=0.0) & np.isfinite(own)
            for i in np.flatnonzero(differ).tolist():
                extra.setdefault(i, []).append(f"{AVERAGED_NOTE} {own[i]:.6g}")
        from .fit.core import two_level_parameter

        # a law on two values of a parameter is doubted beyond them (below), not within
        doubted = negative | np.repeat(np.array([any(two_level_parameter(w) is None for w in warn.get(s, ()))
                                                 or (status[s] != "ok" and not segmented[s])
                                                 for s in range(S)], dtype=bool), P)
        if self.oversubscribed is not None:
            # times fitted on runs whose ranks shared cores: not the application's scaling
            from .analysis.oversubscription import AFFECTED_KINDS

            note = self.oversubscribed.fitted_note()
            for s in [s for s in range(S) if self.kinds.get(series[s].metric) in AFFECTED_KINDS]:
                for i in range(s * P, s * P + P):
                    extra.setdefault(i, []).append(note)
                doubted[s * P:s * P + P] = True
        for j, t in enumerate(pts):
            moved = self.one_valued(t)
            for q in moved:
                note = one_value_note(q, self.upper[q], t)
                for s in range(S):
                    extra.setdefault(s * P + j, []).append(note)
                    doubted[s * P + j] = True
            beyond = [q for q in self.parameters if q not in moved and q in t and q in self.smallest
                      and q in self.upper and not self.smallest[q] <= t[q] <= self.upper[q]]
            if beyond:
                from .fit.core import no_line_note, two_level_parameter

                flat = {q: no_line_note(q) for q in beyond}
                for s in range(S):
                    for q in [q for q in beyond if flat[q] in notes_of[s]]:
                        extra.setdefault(s * P + j, []).append(beyond_flat_note(q, self.smallest[q], self.upper[q], t))
                        doubted[s * P + j] = True
                    two = {two_level_parameter(n) for n in notes_of[s]}
                    for q in [q for q in beyond if q in two]:
                        extra.setdefault(s * P + j, []).append(beyond_two_level_note(q, self.smallest[q], self.upper[q], t))
                        doubted[s * P + j] = True
            if self.one_valued_series:
                for s in range(S):
                    for q, only in self.one_valued_series.get((series[s].callpath, series[s].metric), {}).items():
                        if q not in moved and q in t and t[q] != only:
                            extra.setdefault(s * P + j, []).append(one_value_series_note(q, only, t))
                            doubted[s * P + j] = True
            eq = self.off_path(t)
            if eq:
                note = off_path_note(self.parameters, eq)
                for s in range(S):
                    extra.setdefault(s * P + j, []).append(note)
                    doubted[s * P + j] = True
        self._note_exponent_doubt(series, parts, pts, extra)
        for j, st in enumerate(steep):
            for s, note in (st or {}).items():
                if note:
                    extra.setdefault(s * P + j, []).append(note)
                    doubted[s * P + j] = True
        # a clipped interval reaches below zero: wider than the value itself, so low
        conf = np.where(clipped, "low", confidences(v, lo, hi, doubted)).astype(object)
        self._flag_children_above_parents(series, pts, v, extra, conf)
        self._flag_aggregate_order(series, pts, v, extra, conf)
        children: dict = {}
        self._flag_children_sums(series, pts, v, lo, hi, extra, conf, children)
        return _Predicted(series, pts, level, v, lo, hi, clipped, conf, texts, status, segmented,
                          [list(dict.fromkeys(list(warn.get(s, [])) + list(notes_of[s]))) for s in range(S)], extra, line,
                          self.units, self.aggregates, children)

    @staticmethod
    def _note_exponent_doubt(series, parts, pts, extra) -> None:
        """Add to ``extra`` (row -> notes) why the interval of a law no measured point could be held
        out to check (``Model.unchecked_on``) is wide beyond the data: the exponent doubt the fit
        gave it (:func:`perfcast.fit.core.exponent_doubt_note`), along the parameter that drifts
        most at that point."""
        from .fit.core import EXACT_FIT_SMAPE, exponent_doubt_note

        P = len(pts)
        found = []      # (s, parameters, counts, drift per parameter, upper, exact)
        for g, pos, rows in parts[0]:
            if g.unchecked_on is None or g.drift is None or g.upper is None:
                continue
            for s, r in zip(pos.tolist(), rows.tolist()):
                if g.status[r] == 0 and g.drift[r] > 0:
                    found.append((s, g.parameters, g.unchecked_on, (float(g.drift[r]),) * len(g.parameters),
                                  g.upper, bool(g.quality[r, 2] <= EXACT_FIT_SMAPE)))
        for s in parts[1]:
            m = series[s].model
            uo = getattr(m, "unchecked_on", None)
            if uo is None or not m.drift or m.upper is None or m.status != "ok":
                continue
            along = m.drift_along if m.drift_along is not None else (m.drift,) * len(m.parameters)
            q = m.quality
            found.append((s, m.parameters, uo, along, m.upper, q is not None and q.smape <= EXACT_FIT_SMAPE))
        for s, params, counts, along, upper, exact in found:
            for j, t in enumerate(pts):
                # a parameter measured at one value has no exponent to doubt (its own note says so)
                reach = [(along[k] * math.log2(t[p] / upper[k]), k) for k, p in enumerate(params)
                         if p in t and upper[k] > 0 and t[p] > upper[k] and along[k] > 0 and counts[k] >= 2]
                if reach:
                    k = max(reach)[1]
                    extra.setdefault(s * P + j, []).append(exponent_doubt_note(params[k], counts[k], along[k], exact))

    def predicted(self, points: Mapping[str, float] | Sequence[Mapping[str, float]], level: float = 0.9) -> "_Predicted":
        """:meth:`predict`'s rows as columns (series in ``self.series`` order, then point): the one
        place values, bounds and notes at a point are computed; ``model --target`` (table, JSON,
        files) shows these (:meth:`_Predicted.at_target`)."""
        return self._predicted(points, level)

    def one_valued(self, t: Mapping[str, float]) -> list[str]:
        """The parameters that point ``t`` moves away from the one value they were measured at (a
        campaign holding n at 100 says nothing of n = 200: every model is flat in it)."""
        return [p for p in self.parameters if p in self.smallest and p in self.upper
                and self.smallest[p] == self.upper[p] and t[p] != self.upper[p]]

    def measured_range(self, t: Mapping[str, float]) -> bool:
        """Whether point ``t`` lies within the measured range of every parameter (between its
        smallest and largest measured value; False when the range is not known)."""
        return all(p in self.smallest and p in self.upper and self.smallest[p] <= t[p] <= self.upper[p]
                   for p in self.parameters)

    def bounds(self, keys: Sequence[tuple[str, str]], points: Sequence[Mapping[str, float]],
               level: float = 0.9) -> tuple[np.ndarray, ...]:
        """(value, lower, upper, clipped, capped_by) of the series ``keys`` ((callpath, metric), of
        the set or its context) at ``points``, each (len(keys), len(points)), as :meth:`predict`
        gives them: the lower bound of a quantity that cannot be negative clipped at 0
        (``clipped``), an inclusive child's upper bound capped by its ancestors' (``capped_by``:
        the ancestor's callpath, else None) -- the numbers of a report's tables and plots."""
        pool = {(sm.callpath, sm.metric): sm for sm in (*self.series, *self.context)}
        missing = [k for k in keys if tuple(k) not in pool]
        if missing:
            raise PerfcastError(f"no model of {missing[0][0]} / {missing[0][1]}", where="callpath")
        sel = [pool[tuple(k)] for k in keys]
        pts = list(points)
        v, lo, hi, _ = self._batch(pts, level, series=sel)
        v, lo, hi, clipped = v.ravel(), *clip_interval(v.ravel(), lo.ravel(), hi.ravel(),
                                                     np.repeat(self._nonnegative(sel), len(pts)))
        capped_by = np.full(v.shape, None, dtype=object)
        for r, cp in self._cap_by_ancestors(sel, pts, level, v, hi).items():
            capped_by[r] = cp
        shape = (len(sel), len(pts))
        return (v.reshape(shape), lo.reshape(shape), hi.reshape(shape), clipped.reshape(shape),
                capped_by.reshape(shape))

    def nonnegative(self, metric: str) -> bool:
        """Whether ``metric``'s values cannot be negative (its kind is one of :data:`NONNEGATIVE`
        and no measured value is negative): its predictions' lower bounds are clipped at 0 and a
        negative prediction is noted."""
        return self.kinds.get(metric) in NONNEGATIVE and metric not in self.signed

    def _nonnegative(self, series: Sequence) -> np.ndarray:
        of = {mt: self.nonnegative(mt) for mt in set(map(_METRIC, series))}    # the rule once per metric
        return np.array([of[sm.metric] for sm in series], dtype=bool)

    def predict_json(self, points: Mapping[str, float] | Sequence[Mapping[str, float]], level: float = 0.9,
                     nested: bool = False) -> str:
        """``json_text(predict(points, level))`` -- ``perfcast predict --json`` -- written a column
        at a time (:func:`perfcast.fit.columns.float_texts`; no dict per row); ``nested``: laid out
        as the list of ``json_text(envelope("predictions", ...))`` (``predict -o FILE.json``)."""
        return self._predicted(points, level).json(nested)

    def _beyond(self, t: Mapping[str, float]) -> dict | None:
        """The point at the data's edge for a prediction at ``t`` beyond the data in exactly one
        parameter (that parameter at its largest measured value), else None."""
        beyond = [p for p in self.parameters if p in self.upper and t[p] > self.upper[p] > 0]
        return {**t, beyond[0]: self.upper[beyond[0]]} if len(beyond) == 1 else None

    def _batch(self, pts: list, level: float, parts=None, series=None, beyond: bool = False
               ) -> tuple[np.ndarray, ...]:
        """(value, lower, upper, value at :meth:`_beyond`'s edge point or NaN), each (series,
        points): every plain model, built or not, in one batch (:func:`perfcast.fit.columns.predict`,
        :func:`perfcast.fit.model.predict_many`'s rule), others (segmented) one by one.
        ``series``: these instead of the set's.  A point outside a model's domain (log2(p) at p <=
        0) gives NaN, one beyond the range of floats (p = 1e308) infinity -- for the callers to say
        by name (:func:`finite_bounds`), not numpy's RuntimeWarnings with source lines on stderr --
        and a bound beyond that range (the variance, a square, overflows first) NaN: no bound;
        ``beyond``: also where that happened ((series, points) bool)."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            value, lower, upper, base = self._batch_values(pts, level, parts, series)
        lower, upper, huge = finite_bounds(lower, upper, value)
        return (value, lower, upper, base, huge) if beyond else (value, lower, upper, base)

    def _batch_values(self, pts: list, level: float, parts=None, series=None) -> tuple[np.ndarray, ...]:
        from .fit import columns

        self._need_intervals("prediction intervals")
        series = list(self.series if series is None else series)
        edges = [self._beyond(t) for t in pts]
        allp = pts + [e for e in edges if e is not None]
        # off the measured path: the positions on it that the point's coordinates name
        offs = [self.off_path(t) for t in pts]
        off_at = []
        for eq in offs:
            off_at.append(list(range(len(allp), len(allp) + len(eq))))
            allp += list(eq.values())
        where = []
        k = len(pts)
        for e in edges:
            where.append(k if e is not None else -1)
            k += e is not None
        S, P = len(series), len(pts)
        base = np.full((S, P), np.nan)
        edge_cols = [j for j, w in enumerate(where) if w >= 0]
        edge_at = [where[j] for j in edge_cols]
        cols = {p: np.array([float(t[p]) for t in allp]) for p in self.parameters}
        inb, v, lo, hi = columns.predict(series, cols, level, self.averaged, parts=parts)
        value, lower, upper = v[:, :P].copy(), lo[:, :P].copy(), hi[:, :P].copy()
        if edge_cols:
            base[:, edge_cols] = v[:, edge_at]
        for j, at in enumerate(off_at):
            if at:
                lower[:, j] = np.fmin(lower[:, j], np.min(lo[:, at], axis=1))
                upper[:, j] = np.fmax(upper[:, j], np.max(hi[:, at], axis=1))
        built = np.nonzero(~inb)[0].tolist()
        done = self._built_intervals(series, built, pts, level, lower, upper)
        for s in built:
            m = series[s].model
            for j, t in enumerate(pts):
                value[s, j] = float(m.predict(t, averaged=self.averaged))
                if not done[s]:
                    lower[s, j], upper[s, j] = m.interval(t, level, averaged=self.averaged)
                for e in offs[j].values():
                    el, eh = m.interval(e, level, averaged=self.averaged)
                    lower[s, j], upper[s, j] = min(lower[s, j], el), max(upper[s, j], eh)
                if edges[j] is not None:
                    base[s, j] = float(m.predict(edges[j], averaged=self.averaged))
        return value, lower, upper, base

    def _built_intervals(self, series, built: list, pts: list, level: float, lower: np.ndarray,
                         upper: np.ndarray) -> dict:
        """The intervals at ``pts`` of the series ``built`` whose models are built (segmented models
        among them), into ``lower``/``upper``: a :func:`perfcast.fit.model.predict_many` batch per
        point and number of terms -- each model's interval is the one its own ``interval`` gives
        (the same batch width, the same floats), not a batch of one per series (~1 ms each: 6,700
        segmented series took 6 s).  {series: whether done}."""
        from .fit.model import Model, predict_many
        from .fit.segmented import SegmentedModel

        done = dict.fromkeys(built, True)
        for j, t in enumerate(pts):
            groups: dict = {}      # number of terms -> (series, model or segment there)
            for s in built:
                m = series[s].model
                if isinstance(m, SegmentedModel):
                    m = m.plain_segment(float(t[m.parameters[0]]))
                if type(m) is Model and all(p in t for p in m.parameters):
                    groups.setdefault(len(m.terms), []).append((s, m))
                else:
                    done[s] = False     # not batched: its own interval at every point
            for members in groups.values():
                ms = [m for _, m in members]
                cols = {p: np.array([float(t[p])]) for p in {p for m in ms for p in m.parameters}}
                _, lo, hi = predict_many(ms, cols, level, self.averaged)
                rows = [s for s, _ in members]
                lower[rows, j], upper[rows, j] = lo[:, 0], hi[:, 0]
        return done

    def off_path(self, t: Mapping[str, float]) -> dict[str, dict[str, float]]:
        """The positions on the measured :attr:`path` that the coordinates of a point ``t`` off it
        name: {varying parameter: the point on the path at its value of it} (the point if only
        that parameter mattered); empty on the path or without one
        (:func:`perfcast.fit.path.equivalents`)."""
        if not self.path:
            return {}
        from .fit.path import equivalents, varying_parameters

        P = np.array(self.path, dtype=float)
        eq = equivalents(P, [float(t[p]) for p in self.parameters])
        return {self.parameters[q]: dict(zip(self.parameters, (float(v) for v in e)))
                for q, e in zip(varying_parameters(P), eq)}

    def _beyond_measured_slopes(self, series: list, lines: list, pts: list, value: np.ndarray,
                                base: np.ndarray) -> list[dict | None]:
        """Per point of ``pts``, series position -> a note where the prediction ``value`` there,
        beyond the data in one parameter, rises (falls) more steeply in log-log terms than the
        series ever did within the data (:data:`SLOPE_MARGIN`; ``base``: the model's value at the
        data's edge, :meth:`_beyond`); None for points not beyond the data in one parameter.
        ``lines``: :func:`perfcast.fit.columns.lines` of ``series`` (the models' parameters)."""
        out: list = []
        measured = None
        for j, t in enumerate(pts):
            edge = self._beyond(t)
            if edge is None:
                out.append(None)
                continue
            p = next(q for q in self.parameters if edge[q] != t[q])
            if measured is None:
                measured = self._slope_arrays(series)
            k = self.parameters.index(p)
            lo, hi = measured[0][:, k], measured[1][:, k]
            v, v0 = value[:, j], base[:, j]
            with np.errstate(divide="ignore", invalid="ignore"):
                cand = (v > 0) & (v0 > 0) & ~np.isnan(hi)
                slope = np.log(v / v0) / math.log(t[p] / self.upper[p])
            # the slope in numpy's arithmetic, to a hair of the margin: the notes themselves (and
            # the exact test) in math's (:meth:`_slope_note`)
            near = cand & ~((slope <= hi + SLOPE_MARGIN - 1e-9) & (slope >= lo - SLOPE_MARGIN + 1e-9))
            notes = {}
            for s in np.nonzero(near)[0].tolist():
                if p not in lines[s][0]:
                    continue
                n = self._slope_note(p, (float(lo[s]), float(hi[s])), t, float(v[s]), float(v0[s]))
                if n:
                    notes[s] = n
            out.append(notes)
        return out

    def _slope_arrays(self, series: list) -> tuple[np.ndarray, np.ndarray]:
        """:attr:`slopes` of ``series`` as (shallowest, steepest), each (S, parameters), NaN where
        not measured."""
        got = self.slopes.arrays(series) if isinstance(self.slopes, ObservedSlopes) else None
        if got is not None:
            return got
        lo, hi = np.full((len(series), len(self.parameters)), np.nan), np.full((len(series), len(self.parameters)), np.nan)
        for s, sm in enumerate(series):
            for p, (a, b) in (self.slopes.get((sm.callpath, sm.metric)) or {}).items():
                if p in self.parameters:
                    k = self.parameters.index(p)
                    lo[s, k], hi[s, k] = a, b
        return lo, hi

    def _slope_note(self, p: str, measured: tuple, t: Mapping[str, float], value: float, v0: float) -> str | None:
        """The note of a log-log slope from ``v0`` at the data's edge to ``value`` at ``t`` along
        ``p`` outside the measured (shallowest, steepest) ``measured`` by more than :data:`SLOPE_MARGIN`."""
        s = math.log(value / v0) / math.log(t[p] / self.upper[p])
        lo, hi = measured
        if s > hi + SLOPE_MARGIN:
            ref, up = hi, True
        elif s < lo - SLOPE_MARGIN:
            ref, up = lo, False
        else:
            return None
        # the prediction's own direction, then how it compares with the measured steps: a constant
        # past rising data "stays flat", it does not fall (RAJAPerf's Basic_MAT_MAT_SHARED read
        # "falls like ProblemSizeRunParam^0 ..., faster than any measured step (...^1.3)")
        flat = 0.005
        trend = (f"grows like {p}^{s:.2g}" if s >= flat else f"falls like {p}^{s:.2g}" if s <= -flat
                 else "stays flat")
        if (s >= flat and ref >= 0) if up else (s <= -flat and ref <= 0):
            how = f"faster than any measured step ({p}^{ref:.2g})"
        elif (s >= flat and ref > 0) or (s <= -flat and ref < 0):
            how = f"more slowly than any measured step ({p}^{ref:.2g})"
        else:
            how = (f"while every measured step {'fell' if up else 'rose'} ({p}^{ref:.2g} at the "
                   f"{'most' if up else 'least'})")
        return f"{trend} beyond the data, {how}"

    def _cap_by_ancestors(self, series: list, pts: list, level: float, value: np.ndarray,
                          upper: np.ndarray) -> dict[int, str]:
        """Inclusive metrics: a part cannot exceed the whole, so a child's upper bound is at most
        its parent's as shown (itself at most its own parent's), where the child's value lies
        below that bound (else the two models disagree: :meth:`_flag_children_above_parents`).
        ``value``/``upper``: per row (series-major, then point), ``upper`` lowered in place.
        Returns row -> the callpath whose bound it took (the nearest ancestor that set it)."""
        out: dict[int, str] = {}
        if not self.inclusive or not self.parents:
            return out
        P = len(pts)
        items = list(series)
        at = {(sm.callpath, sm.metric): s for s, sm in enumerate(items)}
        vals, his = value, upper
        # ancestors outside ``series`` (a callpath filter's context, a plot's one series): their
        # values and bounds as the full run has them
        pool = {(sm.callpath, sm.metric): sm for sm in (*self.series, *self.context)}
        more: dict = {}
        for sm in items:
            if sm.metric not in self.inclusive:
                continue
            cp = self.parents.get(sm.callpath)
            while cp is not None and (cp, sm.metric) in pool:
                if (cp, sm.metric) not in at:
                    more.setdefault((cp, sm.metric), pool[cp, sm.metric])
                cp = self.parents.get(cp)
        if more:
            ctx = list(more.values())
            v2, _, h2, _ = self._batch(pts, level, series=ctx)
            at.update({(sm.callpath, sm.metric): len(items) + i for i, sm in enumerate(ctx)})
            items += ctx
            vals = np.concatenate([value, v2.ravel()])
            his = np.concatenate([upper, h2.ravel()])
        parent = np.full(len(items), -1, dtype=np.int64)
        for s, sm in enumerate(items):
            if sm.metric in self.inclusive:
                parent[s] = at.get((self.parents.get(sm.callpath), sm.metric), -1)
        depth = np.zeros(len(items), dtype=np.int64)
        for _ in range(len(items)):
            nxt = np.where(parent >= 0, depth[np.maximum(parent, 0)] + 1, 0)
            if np.array_equal(nxt, depth):
                break
            depth = nxt
        # the callpath whose bound each row holds (itself unless lowered)
        source = np.repeat(np.arange(len(items)), P)
        for d in range(1, int(depth.max(initial=0)) + 1):
            kids = np.flatnonzero(depth == d)
            rows = (kids[:, None] * P + np.arange(P)).ravel()
            prow = (parent[kids][:, None] * P + np.arange(P)).ravel()
            c = his[prow]
            with np.errstate(invalid="ignore"):
                lower_it = np.isfinite(c) & (vals[rows] <= c) & (c < his[rows])
            his[rows[lower_it]] = c[lower_it]
            source[rows[lower_it]] = source[prow[lower_it]]
        n = len(series) * P
        if his is not upper:
            upper[:] = his[:n]
        for r in np.flatnonzero(source[:n] != np.repeat(np.arange(len(series)), P)).tolist():
            out[r] = items[source[r]].callpath
        return out

    def formula_digits(self, series: Sequence, parts=None, points: Sequence[Mapping[str, float]] = ()) -> np.ndarray:
        """Per series, the significant digits its formula is printed with, so that evaluated as
        printed it gives the model's value to 4 digits at every corner of the measured range
        (each parameter's smallest and largest measured value) and at ``points``
        (:func:`perfcast.fit.columns.faithful_digits`: terms that cancel need more)."""
        from itertools import product

        from .fit import columns

        known = all(p in self.smallest and p in (self.upper or {}) for p in self.parameters)
        pts = [dict(zip(self.parameters, c)) for c in product(*[(self.smallest[p], self.upper[p])
                                                               for p in self.parameters])] if known else []
        pts += [t for t in points if all(p in t for p in self.parameters)]
        cols = {p: np.array([float(t[p]) for t in pts]) for p in self.parameters} if pts else {}
        return columns.faithful_digits(series, cols, parts)

    def _flag_children_above_parents(self, series: list, pts: list, value: np.ndarray, extra: dict,
                                     conf: np.ndarray) -> None:
        """Inclusive metrics: a child predicted above its parent at the same point contradicts the
        tree; flat metrics with a whole-run timer (:attr:`whole_run`, which holds every other timer
        at every measured point): a timer predicted above it contradicts that.  Both stay as
        modelled (which one is wrong is not known) and the part says so, with confidence low.
        ``value`` and ``conf``: per row (series-major, then point); ``extra``: row -> notes added
        to the model's.  Of equal points the last is compared."""
        def whole_of(sm):
            """(the callpath that holds ``sm``, the note's words) or (None, None)."""
            if sm.metric in self.inclusive:
                return self.parents.get(sm.callpath), ABOVE_PARENT
            w = self.whole_run.get(sm.metric)
            return (w, ABOVE_WHOLE_RUN) if w is not None and w != sm.callpath else (None, None)

        if not (self.inclusive and self.parents) and not self.whole_run:
            return
        P = len(pts)
        last = {tuple(sorted(t.items())): j for j, t in enumerate(pts)}
        at = {(sm.callpath, sm.metric): s for s, sm in enumerate(series)}
        S = len(series)
        names = [sm.callpath for sm in series]
        holders = [whole_of(sm) for sm in series]
        if self.context:
            # holders outside the set (a callpath filter): their values as the full run has them
            wanted = {(h, sm.metric) for (h, _), sm in zip(holders, series) if h is not None} - at.keys()
            ctx = [sm for sm in self.context if (sm.callpath, sm.metric) in wanted]
            if ctx:
                at.update({(sm.callpath, sm.metric): S + i for i, sm in enumerate(ctx)})
                value = np.concatenate([value, self._batch(pts, 0.9, series=ctx)[0].ravel()])
                names += [sm.callpath for sm in ctx]
        for s, sm in enumerate(series):
            holder, words = holders[s]
            ps = at.get((holder, sm.metric))
            if ps is None:
                continue
            for j in last.values():
                r, pr = s * P + j, ps * P + j
                # (a holder predicted below zero says so itself: nothing to compare with)
                if value[pr] >= 0 and value[r] > value[pr] * (1 + 1e-9) + 1e-300:
                    extra.setdefault(r, []).append(f"{words} {names[ps]} "
                                                   f"({value[pr]:.4g}): the two models disagree here")
                    conf[r] = "low"

    def _flag_aggregate_order(self, series: list, pts: list, value: np.ndarray, extra: dict,
                              conf: np.ndarray) -> None:
        """One quantity combined over the ranks in several ways, each its own metric (Caliper's
        ``min#X``, ``avg#X``, ``max#X``: :func:`aggregate_families`): whatever the ranks, their
        minimum is at most their mean, which is at most their maximum.  Models fitted apart can
        cross beyond the data (LULESH's MPI_Comm_split: min 3.99 > mean 2.04 > max 1.69 at jobsize
        5000); where they do, both rows say so, with confidence low (which is wrong is not known).
        Among the series shown.  ``value`` and ``conf``: per row (series-major, then point);
        ``extra``: row -> notes."""
        fam = aggregate_families(self.aggregates)
        if not fam:
            return
        P = len(pts)
        at: dict = {}
        for s, sm in enumerate(series):
            f = fam.get(sm.metric)
            if f is not None:
                at.setdefault((sm.callpath, f[0]), {})[f[1]] = s
        for (cp, _), members in at.items():
            for lo_op, hi_op in (("min", "mean"), ("mean", "max"), ("min", "max")):
                a, b = members.get(lo_op), members.get(hi_op)
                if a is None or b is None:
                    continue
                for j in range(P):
                    ra, rb = a * P + j, b * P + j
                    va, vb = value[ra], value[rb]
                    if va > vb * (1 + 1e-9) + 1e-300 and va > 0:
                        extra.setdefault(ra, []).append(f"{AGGREGATE_ORDER} {series[b].metric} ({vb:.4g}): "
                                                        f"a {lo_op} over ranks cannot exceed their {hi_op}; the two "
                                                        "models disagree here")
                        extra.setdefault(rb, []).append(f"predicted below the {lo_op} over ranks "
                                                        f"{series[a].metric} ({va:.4g}): the two models disagree here")
                        conf[ra] = conf[rb] = "low"

    def _flag_children_sums(self, series: list, pts: list, value: np.ndarray, lower: np.ndarray,
                            upper: np.ndarray, extra: dict, conf: np.ndarray, sums: dict) -> None:
        """Inclusive, additive metrics (:func:`summable_metrics`): the predictions of a parent's
        children (those among ``series``) add up to at most the parent's; where they add up to
        more, or a parent that holds nothing of its own (:attr:`sum_nodes`) is predicted apart
        from its children's sum, the parent says so with the sum, and its confidence is low where
        the sum lies outside its interval (beyond the parent's own uncertainty: RAJAPerf's Basic
        group is predicted 0.9% below its 14 kernels' sum, well inside).  Both stay as modelled
        (which is wrong is not known).  One child alone: :meth:`_flag_children_above_parents`.
        Not a run whose application timers nest (:attr:`nested_timers`): their sum is no bound.
        ``value``, ``lower``, ``upper`` and ``conf``: per row (series-major, then point);
        ``extra``: row -> notes; ``sums``: row -> the children's sum, for the rows that say it."""
        if not self.inclusive or not self.parents:
            return
        summable = summable_metrics(self.inclusive, self.kinds, self.aggregates) - set(self.signed)
        at = {(sm.callpath, sm.metric): s for s, sm in enumerate(series)}
        kids: dict[int, list[int]] = {}
        for s, sm in enumerate(series):
            ps = at.get((self.parents.get(sm.callpath), sm.metric))
            if ps is not None and sm.metric in summable:
                kids.setdefault(ps, []).append(s)
        P = len(pts)
        V = value.reshape(len(series), P)
        for ps, ks in kids.items():
            sm = series[ps]
            if (sm.callpath, sm.metric) in self.nested_timers:
                continue  # timers that hold one another: their sum is no part of the run
            whole = (sm.callpath, sm.metric) in self.sum_nodes
            if len(ks) < 2 and not whole:
                continue
            totals = V[ks].sum(axis=0)
            if whole:
                off = np.abs(totals - V[ps]) > 1e-6 * np.maximum(np.abs(V[ps]), np.abs(totals))
            else:
                off = totals > V[ps] * (1 + 1e-9) + 1e-300
            for j in np.flatnonzero(off).tolist():
                r = ps * P + j
                total, mine = float(totals[j]), float(V[ps, j])
                if whole:
                    rel = f" ({total / mine - 1:+.1%})" if mine else ""
                    said = f"{total:.4g}{rel}: it holds nothing of its own at the measured points"
                else:
                    said = f"{total:.4g}, above its own value"
                inside = bool(lower[r] <= total <= upper[r])
                sums[r] = total
                extra.setdefault(r, []).append(f"{CHILDREN_SUM} {said}" + (", inside its interval" if inside else
                                                                          ": the models disagree here"))
                if not inside:
                    conf[r] = "low"

    def rank(self, target: Mapping[str, float] | None = None, by: str = "cost") -> list:
        """Scalability-bug ranking (:func:`perfcast.analysis.ranking.rank`) of every series, values at
        ``target`` as :meth:`predict` gives them: ``by="cost"`` (default) the per-process cost
        increase from the largest measured point to ``target`` (default: :meth:`default_target`,
        twice the largest process count) as a share of the root's, negligible callpaths last;
        ``by="growth"`` asymptotic growth first."""
        from .analysis.ranking import ranked_rows

        self._built()
        series, order, rc = self._ranking(target, by)
        return ranked_rows(series, order, rc)

    def rank_order(self, target: Mapping[str, float] | None = None, by: str = "cost") -> tuple[list, list, dict]:
        """:meth:`rank` without a model per series: (the series, their positions in rank order, the
        ranking's columns by position: :func:`perfcast.analysis.ranking.rank_order`); the
        :class:`perfcast.analysis.ranking.Ranked` rows of a few of them, their models built only,
        with :func:`perfcast.analysis.ranking.ranked_rows`."""
        return self._ranking(target, by)

    def to_dict(self, target: Mapping[str, float] | None = None, by: str = "cost", level: float = 0.9) -> list[dict]:
        """``perfcast model --json``: one dict per series in rank order (the model, its aggregate,
        its rank, its warnings, with ``target`` its ``value`` there (``at``; ``line`` on a measured
        line) and ``prediction``: :meth:`predict`'s ``value, lower, upper, level, clipped,
        confidence, notes`` at ``target`` (:meth:`_Predicted.at_target`) and, ranked by cost,
        ``ranking``: per-process cost now and at the ranking's point, the increase as a share of
        the root's, whether it is significant)."""
        from .fit.model import to_dicts

        self._need_intervals("model records")
        ranked = self.rank(target, by)
        pr = self._predicted(target, level) if target is not None and ranked else None
        row = {} if pr is None else {(sm.callpath, sm.metric): s for s, sm in enumerate(pr.series)}
        out = []
        for r, md in zip(ranked, to_dicts([r.model for r in ranked], digits=self.formula_digits(ranked))):
            d = {"callpath": r.callpath, "metric": r.metric}
            d.update(md)
            d["unit"] = self.units.get(r.metric, "")
            d["aggregate"] = self.aggregates.get(r.metric, "")
            d["rank"] = r.rank
            if by == "cost":
                d["ranking"] = {"by": by, "from": dict(r.first_at or {}), "at": dict(r.at or {}),
                                "per_process_first": r.per_process_first, "per_process_now": r.per_process_now,
                                "per_process_at": r.per_process, "increase_share": r.increase,
                                "significant": r.significant}
                line = _line_at_target(getattr(r.model, "parameters", ()), getattr(r.model, "lines", ()),
                                       r.at if r.per_process is not None else None)
                if line is not None:
                    d["ranking"]["line"] = line
            d["warnings"] = self.warnings(r)
            if r.predicted is not None:
                d["at"] = dict(target)
                p = pr.at_target(row[r.callpath, r.metric])
                d["value"] = p["value"]
                d["prediction"] = p
                line = _line_at_target(getattr(r.model, "parameters", ()), getattr(r.model, "lines", ()), target)
                if line is not None:
                    d["line"] = line
            out.append(d)
        return out

    def _ranking(self, target, by, series: list | None = None, parts=None):
        """(the series, :func:`perfcast.analysis.ranking.rank_order` of them); ``series``: the list
        of ``self.series`` and ``parts`` its :func:`perfcast.fit.columns.split` when the caller has
        them (a split costs a pass over every series)."""
        from .analysis.ranking import rank_order

        if target is not None:
            check_positive(target, "--target")
        series = list(self.series) if series is None else series
        items, measured = series, self.measured
        if by == "cost" and self.context and self.context_measured is not None:
            # the root over the full tree: the context ranked with the series, its rows dropped
            items = series + list(self.context)
            measured = MeasuredEnds(tuple(items), np.concatenate([self.measured.value, self.context_measured.value]),
                                    np.concatenate([self.measured.given, self.context_measured.given]))
            parts = None
        order, rc = rank_order(items, target, averaged=self.averaged, by=by, procs=self.procs,
                               aggregates=self.aggregates, parents=self.parents, inclusive=self.inclusive,
                               upper=self.upper or None, lower=self.lower or None, measured=measured,
                               kinds=self.kinds, units=self.units, parts=parts, whole_run=self.whole_run,
                               unfollowed=self.unfollowed)
        if len(items) > len(series):
            from .analysis.ranking import restrict

            order, rc = restrict(order, rc, len(series))
        return series, order, rc

    def _warnings_at(self, series: list, parts) -> dict:
        """Position in ``series`` -> :meth:`warnings`, for the series that have any: the pending
        ones found from their groups' quality arrays (a model built, not kept, only where a
        warning fires)."""
        from .analysis.fitcheck import SMAPE_FLOOR, fit_warnings
        from .fit.core import two_level_parameter

        warn: dict = {}
        for g, pos, rows in parts[0]:
            q = g.quality[rows]
            # every limit of fitcheck's rule is at least SMAPE_FLOOR: a superset of the rows it flags
            two = any(two_level_parameter(n) is not None for n in g.notes)
            fire = np.nonzero((g.status[rows] == 0) & ((q[:, 2] > SMAPE_FLOOR) | (q[:, 5] == 2) | two))[0]
            for s, r in zip(pos[fire].tolist(), rows[fire].tolist()):
                w = fit_warnings(g.model(r))
                if w:
                    warn[s] = w
        for s in parts[1]:
            w = self.warnings(series[s])
            if w:
                warn[s] = w
        return warn

    def rank_head(self, target: Mapping[str, float] | None = None, by: str = "cost", limit: int = 0):
        """What the ``model`` table prints: (the first ``limit`` rows of :meth:`rank` (all for 0),
        the number of series, the point ranked at (``cost``; None otherwise), (callpath, metric,
        warning) and (callpath, metric, note) of every series in rank order) -- models built for
        the rows returned only."""
        from .analysis.ranking import ranked_rows
        from .fit import columns

        series = list(self.series)
        parts = columns.split(series)
        _, order, rc = self._ranking(target, by, series, parts)
        head = ranked_rows(series, order if limit == 0 else order[:limit], rc)
        warn = self._warnings_at(series, parts)
        notes: dict = {}
        for g, pos, _ in parts[0]:
            if g.notes:
                for s in pos.tolist():
                    notes[s] = g.notes
        for s in parts[1]:
            n = getattr(series[s].model, "notes", ())
            if n:
                notes[s] = n
        warned = [(series[s].callpath, series[s].metric, w) for s in order if s in warn for w in warn[s]]
        # a note that is also the series' warning (a law on two values of a parameter) is said once
        noted = [(series[s].callpath, series[s].metric, n) for s in order if s in notes for n in notes[s]
                 if n not in warn.get(s, ())]
        return head, len(order), (rc.get("at") if rc["by"] == "cost" else None), warned, noted

    def json_chunks(self, target: Mapping[str, float] | None = None, by: str = "cost",
                    chunk: int = 4096, level: float = 0.9, workers: int = 1, direct: bool = False) -> Iterator[str]:
        """``json_text(to_dict(target, by))`` -- ``perfcast model --json`` -- in pieces of ``chunk``
        records, the same text, built from the fit's arrays (:func:`perfcast.fit.columns.model_json`,
        :func:`perfcast.analysis.ranking.rank_order`; no Model, ranking row or dict per series for
        the series whose models are not built).  Everything that can fail (the ranking, an
        undefined value at ``target``) fails before the first piece.  ``workers``: the records
        after the ranking built by up to that many processes, the later ones' forked
        (:func:`perfcast.output.forked_texts`; the same text); ``direct``: their shares yielded as
        :class:`perfcast.output.ForkedText` for a writer that has them write to its file."""
        import json

        import pyarrow as pa
        from . import arrow_kernels as pc

        from .fit import columns
        from .fit.columns import float_texts
        from .fit.model import to_dicts
        from .output import _json_default, forked_texts, json_text

        self._need_intervals("model records")
        series = list(self.series)
        parts = columns.split(series)
        if not series or not columns.json_ready(series, parts):
            yield json_text(self.to_dict(target, by, level))
            return
        _, order, rc = self._ranking(target, by, series, parts)
        pred = rc["predicted"]
        cost = rc["by"] == "cost"
        nums = [np.asarray([v for v in pred if v is not None], dtype=float)]
        if cost:    # the ranking's columns: NaN for None
            nums += [rc[k][~np.isnan(rc[k])] for k in ("per_process_first", "per_process_now", "per_process",
                                                        "increase")]
        # the prediction at the target: predict's own columns (values, bounds, notes)
        pr = self._predicted(target, level) if target is not None else None
        if pr is not None:
            nums += [pr.value, pr.lower[~np.isnan(pr.lower)], pr.upper[~np.isnan(pr.upper)]]
        if not all(np.isfinite(v).all() for v in nums):
            yield json_text(self.to_dict(target, by, level))   # the json module refuses them, as before
            return
        enc = json.dumps
        enc_str = json.encoder.encode_basestring_ascii       # json.dumps of a str
        S = len(series)

        def texts(values, pre: str = "") -> np.ndarray:
            """Per series: ``pre`` + the JSON number of a value, ``null`` for NaN (else finite: checked)."""
            t = np.array(float_texts(values), dtype=object)
            return pre + t if pre else t

        def text_column(values, pre: str):
            """:func:`texts` as an Arrow string array."""
            return pc.binary_join_element_wise(arrow_scalar(pre), columns.float_text_array(values), arrow_scalar(""))

        per_metric = {mt: ', "unit": ' + enc(self.units.get(mt, "")) + ', "aggregate": '
                      + enc(self.aggregates.get(mt, "")) + ', "rank": ' for mt in {sm.metric for sm in series}}
        metric = {mt: ', "metric": ' + enc(mt) + ", " for mt in per_metric}
        head = None
        if by == "cost" and cost:
            head = (', "ranking": {"by": "cost", "from": ' + enc(dict(rc["first_at"] or {}), allow_nan=False)
                    + ', "at": ' + enc(dict(rc["at"] or {}), allow_nan=False) + ', "per_process_first": ')
            rank_at = dict(rc["at"]) if rc.get("at") else None
        else:
            rank_at = None
        warn = self._warnings_at(series, parts)
        have = np.fromiter((v is not None for v in pred), dtype=bool, count=S)
        at_text = ', "at": ' + enc(dict(target), allow_nan=False) + ', "value": ' if have.any() else ""
        # values on a measured line (the few series with lines): their texts before the first piece
        ln = columns.lines(series, parts) if (target is not None or rank_at) else None
        rank_line, at_line = {}, {}
        for s in ([] if ln is None else [s for s in range(S) if ln[s][1]]):
            line = _line_at_target(*ln[s], rank_at) if rank_at and not np.isnan(rc["per_process"][s]) else None
            if line is not None:
                rank_line[s] = ', "line": ' + enc(line, allow_nan=False) + "}"
            line = _line_at_target(*ln[s], target) if pred[s] is not None else None
            if line is not None:
                at_line[s] = ', "line": ' + enc(line, allow_nan=False)
        rank_of = np.empty(S, dtype=np.int64)    # series -> its position in rank order
        rank_of[np.asarray(order, dtype=np.int64)] = np.arange(S)

        def records(lo: int, hi: int) -> Iterator[str]:
            """The text of the records ranked ``lo`` to ``hi`` (positions in ``order``), ``chunk``
            records a piece: the record's pieces a column each, joined element-wise in C."""
            mine = np.asarray(order[lo:hi], dtype=np.int64)
            sub = [series[s] for s in mine.tolist()]
            n = len(sub)

            def column(text: str, rows: dict, make=None):
                """``text`` for every record, but ``rows`` ({series: its own text, or what ``make``
                makes it from}) for theirs: one string when no record of the piece has its own (a
                column the join repeats)."""
                mine_rows = [(rank_of[s] - lo, v) for s, v in rows.items() if lo <= rank_of[s] < hi]
                if not mine_rows:
                    return text
                c = np.full(n, text, dtype=object)
                for i, v in mine_rows:
                    c[i] = v if make is None else make(v)
                return c

            cols = [np.array([',\n {"callpath": ' + enc_str(sm.callpath) + metric[sm.metric] for sm in sub],
                             dtype=object), None,
                    (next(iter(per_metric.values())) if len(per_metric) == 1
                     else np.array([per_metric[sm.metric] for sm in sub], dtype=object)), None]
            if head is not None:
                ranking = [text_column(rc["per_process_first"][mine], head),
                           text_column(rc["per_process_now"][mine], ', "per_process_now": '),
                           text_column(rc["per_process"][mine], ', "per_process_at": '),
                           text_column(rc["increase"][mine], ', "increase_share": '),
                           np.where(rc["significant"][mine], ', "significant": true',
                                    ', "significant": false').astype(object),
                           column("}", rank_line)]
            elif by == "cost":
                ranking = [', "ranking": {"by": "cost", "from": {}, "at": {}, "per_process_first": '
                           'null, "per_process_now": null, "per_process_at": null, "increase_share": '
                           'null, "significant": true}']
            else:
                ranking = []
            cols += ranking
            cols.append(column(', "warnings": []', warn, lambda w: ', "warnings": ' + enc(w)))
            at = np.flatnonzero(have[mine])
            predicted = np.full(n, "", dtype=object) if len(at) else column("", at_line)
            if len(at):
                sel = mine[at]
                notes = np.array([enc(pr.notes_of(s)) for s in sel.tolist()], dtype=object)
                value = texts(pr.value[sel])
                predicted[at] = (at_text + value + ', "prediction": {"value": ' + value
                                 + texts(pr.lower[sel], ', "lower": ') + texts(pr.upper[sel], ', "upper": ')
                                 + (', "level": ' + enc(level) + ', "clipped": ')
                                 + np.where(pr.clipped[sel], 'true, "confidence": ',
                                            'false, "confidence": ').astype(object)
                                 + np.array([enc_str(c) for c in pr.conf[sel].tolist()], dtype=object)
                                 + ', "notes": ' + notes
                                 + np.array([', "children_sum": ' + enc(pr.children[s]) if s in pr.children else ""
                                             for s in sel.tolist()], dtype=object) + "}")
            if len(at):
                for s, text in at_line.items():
                    if lo <= rank_of[s] < hi:
                        predicted[rank_of[s] - lo] += text
            cols += [predicted, "}"]
            mine_parts = columns.take(parts, S, mine)
            # the formulas in one batch (a pattern's texts at once, not a chunk's share of them each time)
            digits = self.formula_digits(sub, mine_parts)
            formula = np.array(columns.formulas(sub, digits=digits, parts=mine_parts), dtype=object)
            # the columns as Arrow string arrays
            cols = [c if c is None or isinstance(c, str) else columns.text_array(c) for c in cols]
            for a in range(0, n, chunk):
                k = min(chunk, n - a)
                part = sub[a:a + k]
                sub_parts = columns.take(parts, S, mine[a:a + k])
                bodies = columns.model_json_array(part, sub_parts, formula[a:a + k].tolist())
                built = sub_parts[1]
                if built:
                    bodies = bodies.to_pylist()
                    for i, d in zip(built, to_dicts([part[i].model for i in built], digits=digits[a:a + k][built])):
                        bodies[i] = enc(d, allow_nan=False, default=_json_default)[1:-1]
                ranks = pc.cast(arrow_array(np.arange(lo + a + 1, lo + a + k + 1, dtype=np.int64)), pa.string())
                text = columns.joined_text([c if isinstance(c, str) else c.slice(a, k) if c is not None
                                            else (bodies if j == 1 else ranks) for j, c in enumerate(cols)], k)
                # the first piece is complete before anything is written
                yield text if lo + a else "[" + text[3:]

        yield from forked_texts(records, S, workers, direct, chunk)
        yield "]\n"

    def to_frame(self, target: Mapping[str, float] | None = None, level: float = 0.9, by: str = "cost") -> pd.DataFrame:
        """One row per series in rank order: rank, callpath, metric, unit, aggregate, formula,
        status, the model itself (``constant``; ``terms``: a list of {coefficient, factors: {param:
        {exponent, log_exponent}}}, nested columns in Parquet), smape, noise, with ``by="cost"`` the
        ranking's ``increase`` (share of the root) and, with ``target``, the value there with its
        interval (``clipped``: the lower bound was raised to 0, the quantity cannot be negative),
        confidence and notes, as :meth:`predict` gives them."""
        preds = {}
        if target is not None:
            preds = {(r["callpath"], r["metric"]): r for r in self.predict(target, level)}
        # values on a measured line (the formula's times its factor) say so in a ``line`` column
        any_line = any("line" in p for p in preds.values())
        from .fit.model import formulas

        ranked = self.rank(target, by)
        rows = []
        for r, text in zip(ranked, formulas([r.model for r in ranked], digits=self.formula_digits(ranked))):
            m = r.model
            q = getattr(m, "quality", None)
            row = {"rank": r.rank, "callpath": r.callpath, "metric": r.metric,
                   "unit": self.units.get(r.metric, ""), "aggregate": self.aggregates.get(r.metric, ""),
                   "formula": text, "status": m.status,
                   "constant": float(m.constant) if hasattr(m, "terms") else None,
                   "terms": [t.to_dict() for t in m.terms] if hasattr(m, "terms") else None,
                   "smape": None if q is None else q.smape, "noise": None if q is None else q.noise}
            if by == "cost":
                row["increase"] = r.increase
            if target is not None:
                p = preds[(r.callpath, r.metric)]
                row.update(value=p["value"], lower=p["lower"], upper=p["upper"], clipped=p["clipped"],
                           confidence=p["confidence"], notes=p["notes"])
                if any_line:
                    row["line"] = p.get("line")
            rows.append(row)
        return pd.DataFrame(rows)

    def to_pandas(self, target: Mapping[str, float] | None = None, level: float = 0.9, by: str = "cost") -> pd.DataFrame:
        """The notebook view: one row per series in rank order with the columns of :meth:`to_frame`
        (rank, callpath, metric, unit, aggregate, formula, status, constant, terms, smape, noise,
        increase) and the value at ``target`` (default :meth:`default_target`, where the ranking
        looks) with its ``level`` interval and confidence -- ``perfcast model --target T -o X.parquet``
        read back, T that target (without ``--target`` the file has no value columns)."""
        tgt = dict(target) if target is not None else self.default_target()
        return self.to_table(tgt, level, by).to_pandas()

    def _repr_html_(self) -> str:
        """Jupyter's view: the ranking's first rows with model sparklines (:mod:`perfcast.report.notebook`)."""
        from .report.notebook import modelset_html

        return modelset_html(self)

    def plot(self, callpath: str, metric: str | None = None, exp=None, ax=None,
             target: Mapping[str, float] | None = None, level: float = 0.9, locations: str = "auto"):
        """One series' model with its interval and, given ``exp``, the measured means; returns the
        matplotlib Axes (needs ``pip install 'perfcast[plot]'``; :func:`perfcast.report.notebook.plot_series`)."""
        from .report.notebook import plot_series

        return plot_series(self, callpath, metric, exp, ax, target, level, locations)

    def to_table(self, target: Mapping[str, float] | None = None, level: float = 0.9, by: str = "cost"):
        """:meth:`to_frame` as a pyarrow Table, built column by column (``model -o FILE.parquet``):
        the same columns, values and row order as ``pyarrow.Table.from_pandas(to_frame(...))``
        (``terms`` the same nested list of structs), from the fit's arrays (no Model, ranking
        row, dict per row or per term; :mod:`perfcast.fit.columns`)."""
        import pyarrow as pa

        from .fit import columns

        if not self.series:
            return pa.Table.from_pandas(self.to_frame(target, level, by), preserve_index=False)
        series = list(self.series)
        parts = columns.split(series)
        _, order, rc = self._ranking(target, by, series, parts)
        idx = np.asarray(order, dtype=np.int64)
        cols: dict = {"rank": pa.array(np.arange(1, len(order) + 1, dtype=np.int64)),
                      **self.model_columns(series, parts, idx)}
        if by == "cost" and rc["by"] == "cost":
            inc = rc["increase"][idx]
            cols["increase"] = _float_column(inc, np.isnan(inc))
        elif by == "cost":
            cols["increase"] = pa.nulls(len(order))
        if target is not None:
            # :meth:`predict`'s columns (one point: a row per series) in rank order, no dict per row
            pr = self._predicted(target, level)
            for k, v in (("value", pr.value[idx]), ("lower", pr.lower[idx]), ("upper", pr.upper[idx])):
                cols[k] = _float_column(v, np.isnan(v))
            cols["clipped"] = pa.array(pr.clipped[idx], type=pa.bool_())
            cols["confidence"] = pa.array(pr.conf[idx].tolist(), type=pa.large_string())
            # typed as from_pandas types the frame's column of lists
            cols["notes"] = pa.array([pr.notes_of(s) for s in order], from_pandas=True)
            if pr.line:
                cols["line"] = pa.array([pr.line.get(s) for s in order])
        return _arrow_table(cols)

    def model_columns(self, series: list, parts, idx: np.ndarray) -> dict:
        """The columns of :meth:`to_table` that each series' model gives alone (callpath, metric,
        unit, aggregate, formula, status, constant, terms, smape, noise) for the series at ``idx``
        of ``series`` (``self.series`` as a list; ``parts`` its :func:`perfcast.fit.columns.split`),
        in that order: pyarrow arrays."""
        import pyarrow as pa

        from .analysis.ranking import codes
        from .fit import columns

        # arrays taken at ``idx`` (texts per metric taken by the metric's number); the model's
        # columns from the split of the series taken
        at = pa.array(idx)
        metric_no, metrics = codes(list(map(_METRIC, series)))
        by_metric = pa.array(metric_no[idx])
        text = lambda values: pa.array(values, type=pa.large_string())  # noqa: E731  (as _arrow_column)
        cols: dict = {"callpath": text(list(map(_CALLPATH, series))).take(at),
                      "metric": text(metrics).take(by_metric),
                      "unit": text([self.units.get(mt, "") for mt in metrics]).take(by_metric),
                      "aggregate": text([self.aggregates.get(mt, "") for mt in metrics]).take(by_metric)}
        ranked = list(map(series.__getitem__, idx.tolist()))
        parts = columns.take(parts, len(series), idx)
        cols["formula"] = text(columns.formulas(ranked, digits=self.formula_digits(ranked, parts), parts=parts))
        cols["status"] = text(["insufficient", "ok"]).take(pa.array(columns.status_ok(ranked, parts).view(np.int8)))
        has, offsets, coef, kind, factors = columns.terms(ranked, parts)
        const = np.asarray(columns.constants(ranked, parts), dtype=float)
        cols["constant"] = _float_column(const, ~has)
        cols["terms"] = _terms_column(has, offsets, coef, kind, factors)
        smape, s_none, noise, n_none = columns.quality(ranked, parts)
        cols["smape"] = _float_column(smape, s_none)
        cols["noise"] = _float_column(noise, n_none)
        return cols


def _arrow_column(values: list):
    """One column as ``pyarrow.Table.from_pandas`` converts a DataFrame column built from these
    Python values: None (and NaN in a numeric column) null, all-None the null type, strings
    large_string, int64 and double."""
    import pyarrow as pa

    if isinstance(values, pa.Array):
        return values
    if all(v is None for v in values):
        return pa.nulls(len(values))
    kinds = set(map(type, values))
    kinds.discard(type(None))
    if kinds <= {str}:
        return pa.array(values, type=pa.large_string())
    if kinds <= {int} and len(kinds) and None not in values:
        return pa.array(values, type=pa.int64())
    if kinds <= {int, float, np.float64}:
        arr = np.array([np.nan if v is None else v for v in values], dtype=float)
        return pa.array(arr, mask=np.isnan(arr))
    raise TypeError(f"no columnar conversion for {sorted(k.__name__ for k in kinds)}")


def _arrow_table(cols: Mapping[str, list]):
    import pyarrow as pa

    return pa.Table.from_arrays([_arrow_column(v) for v in cols.values()], names=list(cols))


def _float_column(values: np.ndarray, none: np.ndarray):
    """A float column whose entries are None where ``none``: as pandas and pyarrow convert such
    Python values (None and NaN null; only None: the null type)."""
    import pyarrow as pa

    if len(none) and none.all():
        return pa.nulls(len(values))
    v = np.where(none, np.nan, values)
    return pa.array(v, mask=np.isnan(v))


def _terms_column(has: np.ndarray, offsets: np.ndarray, coef: np.ndarray, kind: np.ndarray, factors: list):
    """The ``terms`` column from flat arrays (:func:`perfcast.fit.columns.terms`: rows with terms,
    offsets, coefficients and the kind of each term, the factors of each kind): per row a list of
    structs of ``coefficient`` and ``factors`` (a struct with one field per parameter, in order of
    first use over the rows -- as pyarrow infers it from dicts --, null where the term has no
    factor of that parameter; each a struct of ``exponent`` (text, e.g. "3/2") and
    ``log_exponent``); null for rows without terms."""
    import pyarrow as pa

    from .fit.terms import fraction_str

    mask = None if has.all() else pa.array(~has)
    offs = pa.array(offsets.astype(np.int32))
    params: list = []
    if len(kind):
        uniq, at = np.unique(kind, return_index=True)
        for k in uniq[np.argsort(at, kind="stable")].tolist():
            for p, _, _ in factors[k]:
                if p not in params:
                    params.append(p)
    if not params:   # no terms anywhere: lists of nothing
        return pa.ListArray.from_arrays(offs, pa.nulls(0), mask=mask)
    children = []
    for p in params:
        ex: list = [None] * len(factors)
        lg = np.zeros(len(factors), dtype=np.int64)
        used = np.zeros(len(factors), dtype=bool)
        for k, fs in enumerate(factors):
            for q, i, j in fs:
                if q == p:
                    ex[k], lg[k], used[k] = fraction_str(i), int(j), True
        exs = pa.array(ex, type=pa.string()).take(pa.array(kind))
        children.append(pa.StructArray.from_arrays([exs, pa.array(lg[kind])], ["exponent", "log_exponent"],
                                                   mask=pa.array(~used[kind])))
    element = pa.StructArray.from_arrays([pa.array(coef), pa.StructArray.from_arrays(children, params)],
                                         ["coefficient", "factors"])
    return pa.ListArray.from_arrays(offs, element, mask=mask)


def predictions_frame(rows: Sequence[Mapping], parameters: Sequence[str]) -> pd.DataFrame:
    """:meth:`ModelSet.predict` rows (possibly compared with measurements) as a table: the point's
    coordinates as one column per parameter, the rest as they are."""
    taken = {k for r in rows for k in r}
    name = {p: (f"at_{p}" if p in taken else p) for p in parameters}   # a parameter called "value"
    out = []
    lined = any("line" in r for r in rows)
    for r in rows:
        d = {k: v for k, v in r.items() if k != "at"}
        if lined:
            d["line"] = r.get("line")    # None off the measured lines (the column's cells are dicts)
        d.update({name[p]: r["at"].get(p) for p in parameters})
        out.append(d)
    cols = ["callpath", "metric", *name.values()]
    frame = pd.DataFrame(out)
    return frame[cols + [c for c in frame.columns if c not in cols]] if out else frame


__all__ = ["ModelSet", "model", "model_set", "predictions_frame", "confidence", "NONNEGATIVE", "CONFIDENCE_LIMITS"]
