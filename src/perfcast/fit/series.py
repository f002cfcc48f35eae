"""From an Experiment to models: one per callpath x metric series (no file I/O).

Per-location values (``rank``/``thread`` columns) are first reduced to one value per point,
repetition and callpath.  ``locations="auto"`` sums counts and bytes over locations (the total
work of the run) and averages times and other metrics (the time of a typical rank; use ``max``
for the critical path).  Repetitions are kept: each series is summarised per point by mean,
count and the sum of squared deviations, and the fitter uses all three.  A sparse profile's
repetition that measured a metric but lacks the callpath counts as a 0 value of it
(:func:`perfcast.experiment.absent_repetition_is_zero`, the rule the views use too).

Series measured on the same point set are fitted together in one batch; an experiment whose
callpaths were measured on different point sets is split into as many batches.
"""

from __future__ import annotations

import gc
import operator
from collections import deque
from contextlib import contextmanager
from dataclasses import replace
from itertools import repeat
from typing import Callable, Sequence

import numpy as np

from ..errors import PerfcastError
from ..experiment import (Experiment, absent_repetition_is_zero, aggregate_labels, fill_absent_points,
                          fill_absent_repetitions, location_reduction, reduce_over_locations)
from ..scaling import decreasing
from .core import (ASYMPTOTIC, CLAMPED, FitOptions, GroupFit, apply_zero_rule, fit_group, parameter_lines,
                   zero_rule_sets)
from .model import Model
from ..lazy import LazyModule
from ..table import Category, Columns, column, factorize

pd = LazyModule("pandas")   # imported where a DataFrame is made (perfcast.lazy)

LOCATION_REDUCTIONS = ("auto", "sum", "mean", "max", "min", "median")


class SeriesModel:
    """The model of one callpath x metric series (immutable).  The fit's series hold their row of
    a :class:`GroupFit` until ``model`` is first read: columnar consumers
    (:mod:`perfcast.fit.columns`) read the group's arrays instead of building a Model per series."""

    __slots__ = ("callpath", "metric", "_model", "_group", "_row")

    def __init__(self, callpath: str, metric: str, model: Model | None = None, *, group: GroupFit | None = None,
                 row: int = -1):
        if model is None and group is None:
            raise TypeError("SeriesModel needs a model or a group row")
        for k, v in (("callpath", callpath), ("metric", metric), ("_model", model), ("_group", group), ("_row", row)):
            object.__setattr__(self, k, v)

    @property
    def model(self) -> Model:
        m = self._model
        if m is None:
            m = self._group.model(self._row)
            object.__setattr__(self, "_model", m)
            object.__setattr__(self, "_group", None)
        return m

    def pending(self) -> tuple | None:
        """(group, row) while the model is not built, else None."""
        return None if self._model is not None else (self._group, self._row)

    def __setattr__(self, name, value):
        raise AttributeError(f"SeriesModel is immutable (cannot set {name!r})")

    def __eq__(self, other) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.callpath, self.metric, self.model) == (other.callpath, other.metric, other.model)

    def __hash__(self) -> int:
        return hash((self.callpath, self.metric, self.model))

    def __repr__(self) -> str:
        return f"SeriesModel(callpath={self.callpath!r}, metric={self.metric!r}, model={self.model!r})"

    def __reduce__(self):
        return (SeriesModel, (self.callpath, self.metric, self.model))

    def to_dict(self, alternatives: bool = False) -> dict:
        return {"callpath": self.callpath, "metric": self.metric, **self.model.to_dict(alternatives)}


_NEW = object.__new__
_SET = tuple(getattr(SeriesModel, k).__set__ for k in SeriesModel.__slots__)


@contextmanager
def _gc_paused():
    """The cyclic garbage collector paused: while a million small immutable objects without
    reference cycles are made, its passes over the whole heap would cost more than making them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _pending_series(callpaths: list, metrics: list, groups: list, rows: list) -> list[SeriesModel]:
    """``SeriesModel(cp, mt, group=g, row=r)`` for each tuple of the lists, without a call of
    ``__init__`` per series: the objects made, then each slot set over all of them, by C-level
    maps (no Python loop; a million series: a fifth of the time)."""
    with _gc_paused():
        out = list(map(_NEW, repeat(SeriesModel, len(callpaths))))
        for setter, values in zip(_SET, (callpaths, metrics, repeat(None), groups, rows)):
            deque(map(setter, out, values), maxlen=0)
    return out


_MODEL, _GROUP, _ROW = (operator.attrgetter(k) for k in ("_model", "_group", "_row"))


def pending_rows(series: Sequence) -> tuple[list[tuple[GroupFit, np.ndarray, np.ndarray]], list[int]] | None:
    """When every item of ``series`` is a :class:`SeriesModel`: what
    :func:`perfcast.fit.columns.split` gives (the groups of the series whose model is not built,
    in order of first appearance, the positions of each in ascending order and their rows in the
    group; the positions of the others), read by C-level attribute getters instead of a Python
    loop (one getter per attribute: a getter of the three makes and transposes a tuple per series,
    several times slower); else None."""
    S = len(series)
    if not S or set(map(type, series)) != {SeriesModel}:
        return None
    models = list(map(_MODEL, series))
    groups = list(map(_GROUP, series))
    rows = np.fromiter(map(_ROW, series), dtype=np.int64, count=S)
    others: list[int] = []
    at = None
    if models.count(None) != S:
        built = np.fromiter(map(operator.is_not, models, repeat(None)), dtype=bool, count=S)
        others = np.flatnonzero(built).tolist()
        at = np.flatnonzero(~built)
        if not len(at):
            return [], others
        groups = [groups[i] for i in at.tolist()]
        rows = rows[at]
    n = len(groups)
    gid, first, inv = np.unique(np.fromiter(map(id, groups), dtype=np.uint64, count=n), return_index=True,
                                return_inverse=True)
    inv = np.asarray(inv).ravel()
    pos_all = np.arange(n, dtype=np.int64) if at is None else at.astype(np.int64)
    if len(gid) == 1:
        return [(groups[0], pos_all, rows)], others
    order = np.argsort(inv, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(inv, minlength=len(gid)))])
    out = []
    for u in np.argsort(first, kind="stable").tolist():
        sel = order[bounds[u]:bounds[u + 1]]
        out.append((groups[int(first[u])], pos_all[sel], rows[sel]))
    return out, others


def materialise(series: Sequence[SeriesModel]) -> None:
    """Build the models of ``series`` not built yet, group by group in row order (the fit's
    sequential fast path), with the cyclic garbage collector paused (thousands of small immutable
    objects, no reference cycles: its passes over the whole heap would cost more than building)."""
    todo: dict = {}
    for sm in series:
        src = sm.pending() if isinstance(sm, SeriesModel) else None
        if src is not None:
            todo.setdefault(id(src[0]), []).append((src[1], sm))
    if not todo:
        return
    with _gc_paused():
        for pairs in todo.values():
            pairs.sort(key=lambda r: r[0])
            for _, sm in pairs:
                sm.model


def _check_locations(locations: str) -> None:
    if locations not in LOCATION_REDUCTIONS:
        raise PerfcastError(f"unknown location reduction {locations!r}; use one of "
                            f"{', '.join(LOCATION_REDUCTIONS)}", where="locations")


def _reduce_locations(exp: Experiment, locations: str) -> pd.DataFrame:
    _check_locations(locations)
    if not exp.has_locations:
        return exp.data
    frames = []
    for name, m in exp.metrics.items():
        how = location_reduction(m) if locations == "auto" else locations
        sub = exp.data[exp.data["metric"] == name]
        if len(sub) == 0:
            continue
        # a sparse profile's absent location counts as 0, as in every view (reduce_over_locations)
        frames.append(reduce_over_locations(exp, sub, how))
    return pd.concat(frames, ignore_index=True)


def _reduced(exp: Experiment, locations: str, points: bool = True) -> Columns:
    """The values the statistics are taken of: ``exp``'s locations reduced (:func:`_reduce_locations`)
    and, in a sparse profile, a 0 for a repetition that lacks a callpath
    (:func:`perfcast.experiment.fill_absent_repetitions`) -- the experiment's own columns when
    neither applies (no pandas: an Extra-P text file's)."""
    _check_locations(locations)
    if not exp.has_locations and not absent_repetition_is_zero(exp):
        return exp.cols
    # and a 0 at a point where no run executed a callpath its metric's collector could see
    # (:func:`perfcast.experiment.fill_absent_points`)
    d = fill_absent_repetitions(exp, _reduce_locations(exp, locations))
    return Columns.from_pandas(fill_absent_points(exp, d) if points else d)


def series_statistics(exp: Experiment, locations: str = "auto", absent_points: bool = True) -> pd.DataFrame:
    """Per (point, callpath, metric): ``mean``, ``count`` (repetitions) and ``ssd`` (sum of squared
    deviations from the mean).  ``absent_points=False``: without the 0s of callpaths no run of a
    point executed (:func:`perfcast.experiment.fill_absent_points`; validation marks those itself,
    ``ran`` false)."""
    return _statistics(exp, locations, absent_points)[0].to_pandas()


def statistics_columns(exp: Experiment, locations: str = "auto") -> Columns:
    """:func:`series_statistics` as :class:`perfcast.table.Columns` (what the model path reads)."""
    return _statistics(exp, locations)[0]


def _statistics(exp: Experiment, locations: str, points: bool = True):
    """:func:`statistics_columns` plus, per value row of the reduced data, its row in the
    statistics, its repetition number and the values themselves."""
    # a sparse profile's repetition that measured the metric but lacks the callpath is a 0, as in
    # every view (experiment.reduce_over_repetitions); a dense table's or a listed one's is missing
    d = _reduced(exp, locations, points)
    keys = [*exp.parameters, "callpath", "metric"]
    # one integer key (the rows numbered by first appearance, as groupby(keys, sort=False) numbers
    # them) instead of grouping by the parameter floats and categoricals: same groups, same order,
    # same pandas aggregation of each
    runs = _runs(d, keys, ids=False)
    first = runs[1] if runs is not None else None
    col = d["value"]
    moments = _run_moments(col, first) if first is not None else None
    st = Columns({k: d[k] for k in keys}).take(first) if first is not None else None
    if moments is not None:
        # runs in order (the group numbers sorted) and no NaN: the numbers pandas' groupby gives,
        # in numpy over the runs (no grouper of the value rows' size)
        gid, rep = _run_numbers(first, len(d))
        mean, count, var = moments
    else:
        if first is not None:
            gid = np.repeat(np.arange(len(first), dtype=np.int64), np.diff(first, append=len(d)))
        else:
            gid, first = _factorize_rows(d, keys)
            st = Columns({k: d[k] for k in keys}).take(first)
        grouped = pd.Series(col, copy=False).groupby(gid, sort=True)
        mean = grouped.mean().to_numpy()
        count = grouped.count().to_numpy()
        var = grouped.var(ddof=0).to_numpy()
        # the repetition number: the position in the group (its rows one run: from the run's start)
        if runs is not None:
            rep = np.arange(len(d), dtype=np.int64)
            rep -= np.repeat(first, np.diff(first, append=len(d)))
        else:
            rep = grouped.cumcount().to_numpy()
    with np.errstate(over="ignore"):  # values too large to model: fit_experiment says which
        ssd = np.nan_to_num(var) * count
    st = st.with_columns(mean=mean, count=count, ssd=ssd)
    # the rows' statistics rows and repetition numbers live as long as the fit (the repetitions
    # are placed by them): the narrowest integers, not 8 bytes each (a million series: 150 MB, not 480)
    return st, _narrow(gid), _narrow(rep), np.asarray(col, dtype=float)


def _narrow(a: np.ndarray) -> np.ndarray:
    """``a`` (non-negative integers) in the narrowest unsigned type holding its values."""
    return a.astype(np.min_scalar_type(int(a.max()) if len(a) else 0), copy=False)


#: the longest run :func:`_run_moments` takes (one vectorised step per repetition); longer ones
#: go through pandas' groupby
RUN_STEPS = 64


def _run_moments(values: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Per run of ``values`` (runs starting at ``starts``, the first at 0, none empty): the mean,
    the count and the variance (ddof 0) that ``Series.groupby(run number).mean() / .count() /
    .var(ddof=0)`` give, with the same floating-point operations in the same order: the mean as
    pandas takes it for sorted group numbers without NaN (``np.add.reduceat`` over the runs
    divided by their lengths), the variance by Welford's update value by value in row order (as
    pandas' ``group_var``: ``mean += (x - old) / k``, ``m2 += (x - mean) * (x - old)``, then
    ``m2 / k``), a step per repetition over all runs at once.  None (use pandas) when the values
    are not float64, hold a NaN (pandas skips it: other sums) or a run is longer than
    :data:`RUN_STEPS`.  The mean is pandas 3.1's (pandas 2.x sums a group with Kahan's
    compensation, which can differ in the last bit): these runs' statistics no longer depend on
    the pandas installed."""
    n = len(values)
    if values.dtype != np.float64 or not len(starts) or np.isnan(values).any():
        return None
    sizes = np.diff(starts, append=n)
    L = int(sizes.max())
    if L > RUN_STEPS:
        return None
    k = sizes.astype(np.float64)
    # values too large to model (rejected after the statistics: fit_experiment names them) overflow
    # the sums and squares: inf as in pandas, without numpy's RuntimeWarnings before that one-line
    # error (pandas' own reduceat printed one)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.add.reduceat(values, starts) / k, sizes, _welford(values, starts, sizes, L) / k


def _welford(values: np.ndarray, starts: np.ndarray, sizes: np.ndarray, L: int) -> np.ndarray:
    """The sums of squared deviations of :func:`_run_moments` (runs of at most ``L`` values)."""
    G = len(starts)
    equal = int(sizes.min()) == L
    run_mean = np.zeros(G)
    m2 = np.zeros(G)
    if equal:
        # every run L values: a step per column of the (G, L) values, in two reused buffers
        grid = values.reshape(G, L)
        d, t = np.empty(G), np.empty(G)
        for r in range(L):
            x = grid[:, r]
            np.subtract(x, run_mean, out=d)            # x - old
            np.divide(d, float(r + 1), out=t)
            run_mean += t                              # new = old + (x - old) / k
            np.subtract(x, run_mean, out=t)
            t *= d                                     # (x - new) * (x - old)
            m2 += t
        return m2
    for r in range(L):
        at = np.flatnonzero(sizes > r)
        x, old = values[starts[at] + r], run_mean[at]
        d = x - old
        new = old + d / float(r + 1)
        run_mean[at] = new
        m2[at] += (x - new) * d
    return m2


def _run_numbers(starts: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For ``n`` rows in runs starting at ``starts`` (the first at 0): each row's run number and
    its position in its run, each in the narrowest unsigned type (:func:`_narrow`'s), without
    8-byte arrays of the rows' size."""
    G = len(starts)
    sizes = np.diff(starts, append=n)
    L = int(sizes.max()) if G else 0
    ids = np.arange(G, dtype=np.min_scalar_type(max(G - 1, 0)))
    if G and int(sizes.min()) == L:
        return np.repeat(ids, L), np.tile(np.arange(L, dtype=np.min_scalar_type(L - 1)), G)
    gid = np.repeat(ids, sizes)
    rep = np.arange(n, dtype=np.int64)
    rep -= np.repeat(starts, sizes)
    return gid, _narrow(rep)


def _key_column(df, c: str):
    """Column ``c`` of ``df`` (a :class:`Columns` or a DataFrame) as a numpy array or a
    :class:`Category` (a categorical column's codes and names, not copied)."""
    return df[c] if isinstance(df, Columns) else column(df[c])


def _runs(df, cols: list[str], ids: bool = True) -> tuple[np.ndarray | None, np.ndarray] | None:
    """:func:`_factorize_rows` for data whose rows of each distinct ``cols`` row are contiguous
    (a reader's order: a series' points and repetitions together), by comparing neighbours
    instead of hashing every row; None when some distinct row is split over several runs (or a
    key is missing or not a number or category): then :func:`_factorize_rows` numbers them.
    ``ids=False``: the runs' first rows only (None for the rows' numbers).  ``df``: a
    :class:`Columns` or a DataFrame."""
    n = len(df)
    if n == 0:
        return None
    change = np.zeros(n, dtype=bool)
    change[0] = True
    arrays = []
    for c in cols:
        col = _key_column(df, c)
        if isinstance(col, Category):
            a, k = col.codes, col.n_names   # the codes themselves (.cat.codes copies)
            if a.min() < 0:
                return None
        else:
            a, k = col, None
            if a.dtype.kind not in "iuf" or (a.dtype.kind == "f" and np.isnan(a).any()):
                return None
        change[1:] |= a[1:] != a[:-1]
        arrays.append((a, k))
    starts = np.flatnonzero(change)
    # each distinct row in one run: the runs' keys, combined into one integer, are distinct
    key = np.zeros(len(starts), dtype=np.int64)
    space = 1
    for a, k in arrays:
        a = a[starts]
        if k is None:
            a, uniq = factorize(a)
            k = len(uniq)
        k = max(k, 1)
        if space * k >= 2 ** 62:
            return None
        key = key * k + a
        space *= k
    if space <= 8 * len(starts) + 1024:
        if np.bincount(key, minlength=space).max() > 1:
            return None
    elif len(np.unique(key)) != len(key):
        return None
    if not ids:
        return None, starts.astype(np.int64)
    # each row's run number: the runs' numbers repeated over their lengths (a cumulative sum of
    # ``change`` less one makes two arrays of the rows' size, the second in a pass of its own)
    ids_ = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(starts, append=n))
    return ids_, starts.astype(np.int64)


def _factorize_rows(df, cols: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Number the distinct rows of ``df[cols]`` in order of first appearance (what factorizing a
    MultiIndex of them gives, without building tuples): the number of each row and the first row
    of each number.  Categorical columns by their codes, others by their values.  ``df``: a
    :class:`Columns` or a DataFrame."""
    ids = np.zeros(len(df), dtype=np.int64)
    n = 1
    for c in cols:
        col = _key_column(df, c)
        if isinstance(col, Category):
            codes, k = col.codes.astype(np.int64), col.n_names
            if len(codes) and codes.min() < 0:
                codes, uniq = pd.factorize(pd.Series(col.to_pandas()).astype(str).to_numpy())
                k = len(uniq)
        else:
            codes, uniq = factorize(col)
            k = len(uniq)
        # pairs (number so far, code) renumbered at every step: stays below len(df) * k
        ids, uniq = factorize(ids * max(k, 1) + codes)
        n = len(uniq)
    first = np.full(n, len(df), dtype=np.int64)
    np.minimum.at(first, ids, np.arange(len(df), dtype=np.int64))
    return ids.astype(np.int64), first


def model_experiment(exp: Experiment, metric: str | Sequence[str] | None = None,
                     callpath: str | Sequence[str] | None = None, options: FitOptions | None = None,
                     locations: str = "auto",
                     progress: Callable[[int, int], None] | None = None, *,
                     statistics: tuple | None = None, check: bool = True) -> list[SeriesModel]:
    """Model every callpath x metric series of ``exp`` (optionally filtered by metric name(s) and
    callpath glob(s)); results in tree order, then metric order.  ``statistics``: ``_statistics(exp,
    locations)`` when already computed (used when the whole of ``exp`` is fitted in one part);
    ``check`` as :func:`perfcast.fit.core.fit_group`'s.

    A series' model and interval do not depend on the filter: its group (:func:`group_parts`) is
    its metric's series on its points, so a metric filter selects before fitting, while a callpath
    filter fits every callpath of the selected metrics and keeps the matching series."""
    shown = None
    if callpath is not None:
        shown = exp.select(callpath=callpath, metric=metric)   # the error of an empty selection first
    if metric is not None:
        exp = exp.select(metric=metric)
    # one point: every parameter at one value (its extremes equal; no table of the distinct points)
    d = exp.cols
    if exp.parameters and len(d) and all(d[p].min() == d[p].max() for p in exp.parameters):
        at = ", ".join(f"{p}={float(d[p][0]):g}" for p in exp.parameters)
        raise PerfcastError(f"one measured point ({at}): a scaling model needs at least 2 points that differ "
                            "in one parameter (a law through them, with a wide interval), 3 or more per "
                            "parameter to choose its form", where="points")
    # metrics fitted under different options (the non-negativity of times/counts/bytes,
    # FitOptions.for_kind) are fitted apart
    opts = options or FitOptions()
    parts: dict[FitOptions, list[str]] = {}
    for name, met in exp.metrics.items():
        parts.setdefault(opts.for_kind(met.kind, met.exact), []).append(name)
    groups, done = [], 0
    cps, mts, gnum, grow = [], [], [], []
    for o, names in parts.items():
        sub = exp if len(parts) == 1 else exp.select(metric=names)
        prog = None if progress is None else (lambda k, total, off=done: progress(off + k, off + total))
        g, c, m, gi, r = _fit_series(sub, o, locations, prog, statistics=statistics if sub is exp else None,
                                     check=check)
        cps.extend(c)
        mts.extend(m)
        gnum.append(gi + len(groups))
        grow.append(r)
        groups.extend(g)
        done += len(c)      # the part's series: its progress total
    if shown is not None:
        # the fit of the whole metrics, filtered
        from ..experiment import _present

        have = _present(shown.cols["callpath"])
        keep = np.fromiter((cp in have for cp in cps), dtype=bool, count=len(cps))
        at = np.concatenate(gnum), np.concatenate(grow)
        cps = np.asarray(cps, dtype=object)[keep].tolist()
        mts = np.asarray(mts, dtype=object)[keep].tolist()
        gnum, grow = [at[0][keep]], [at[1][keep]]
        exp = shown
    return ordered_series(exp, cps, mts, groups, gnum, grow)


def ordered_series(exp: Experiment, cps: list, mts: list, groups: list, gnum: list, grow: list,
                   metric_order: Sequence[str] | None = None) -> list[SeriesModel]:
    """The fitted series (callpaths, metrics, group arrays ``gnum`` and rows ``grow`` of each)
    as pending :class:`SeriesModel`, in tree order, then metric order (``metric_order``, default
    the experiment's)."""
    # tree order, then metric order; series of callpaths outside the tree last, in fitting order
    order = {p: i for i, p in enumerate(exp.tree.preorder())}
    cpos = np.fromiter(map(order.get, cps, repeat(len(order))), dtype=np.int64, count=len(cps))
    morder = {m: i for i, m in enumerate(exp.metrics if metric_order is None else metric_order)}
    mcode = {m: morder.get(m, len(morder)) for m in set(mts)}
    mpos = np.fromiter(map(mcode.__getitem__, mts), dtype=np.int64, count=len(mts))
    perm = np.lexsort((mpos, cpos))      # stable: ties (outside the tree) in fitting order
    gnum = np.concatenate(gnum)[perm].tolist() if gnum else []
    grow = np.concatenate(grow)[perm].tolist() if grow else []
    # the models are built on first use (SeriesModel.model, materialise); columnar views read the
    # groups' arrays (perfcast.fit.columns)
    return _pending_series(np.asarray(cps, dtype=object)[perm].tolist(), np.asarray(mts, dtype=object)[perm].tolist(),
                           list(map(groups.__getitem__, gnum)), grow)


# the fit squares values and raises parameters to powers (and multiplies terms of several
# parameters): beyond these magnitudes float64 overflows and the models come out NaN ...
MAX_VALUE = 1e100
MAX_COORDINATE = 1e50
# ... and below this one (other than 0) the squares underflow to 0
MIN_VALUE = 1e-100


def _check_magnitudes(exp: Experiment, st: Columns, row_of: np.ndarray, values: np.ndarray,
                      params: list[str]) -> None:
    sources = exp.meta.get("sources") or []
    path = sources[0] if len(sources) == 1 else None
    for p in params:
        big = np.abs(np.asarray(st[p], dtype=float)) > MAX_COORDINATE
        if big.any():
            v = float(np.asarray(st[p], dtype=float)[np.argmax(big)])
            raise PerfcastError(f"parameter value {p}={v:g} is too large to model (the fit takes values "
                                f"up to {MAX_COORDINATE:g})", path, f"parameter {p}")
    bad = out_of_range(values)
    if bad is not None:
        i, what = bad
        r = np.array([int(row_of[i])])
        where = ", ".join([f"callpath {_strings(st['callpath'], r)[0]}", f"metric {_strings(st['metric'], r)[0]}",
                           *(f"{p}={float(st[p][r[0]]):g}" for p in params)])
        raise PerfcastError(f"value {values[i]:g} is {what}", path, where)


def out_of_range(values: np.ndarray) -> tuple[int, str] | None:
    """The first of ``values`` the fit cannot take (not finite, or beyond ``MAX_VALUE`` or,
    other than 0, below ``MIN_VALUE`` in magnitude) and what is wrong with it; None if all can."""
    a = np.abs(values)
    with np.errstate(invalid="ignore"):
        for bad, what in ((~np.isfinite(a), "not a measurement (the fit takes finite values)"),
                          (a > MAX_VALUE, f"too large to model (the fit takes values up to {MAX_VALUE:g})"),
                          ((a < MIN_VALUE) & (a > 0), f"too small to model (the fit takes 0 and values from "
                                                      f"{MIN_VALUE:g} on: rescale the metric)")):
            if bad.any():
                return int(np.argmax(bad)), what
    return None


def _with_lines(gf: GroupFit, X: np.ndarray, mean: np.ndarray) -> GroupFit:
    """``gf`` with the measured lines whose level differs from each series' model
    (:func:`perfcast.fit.lines.line_effects`, against the selected hypothesis' values at the
    measured points ``X``; ``mean`` the measured means, one row per series of ``gf``)."""
    from .lines import line_effects
    from .model import term_cache, values_of

    ok = np.flatnonzero(gf.status == 0)
    if not len(ok):
        return gf
    cols = {p: X[:, k] for k, p in enumerate(gf.parameters)}
    fitted = np.full(mean.shape, np.nan)
    with np.errstate(all="ignore"):
        _, D, coef = gf.hypotheses_design(ok, np.zeros(len(ok), dtype=np.int64), len(X), term_cache(cols))
        fitted[ok] = values_of(D, coef)
    eff = line_effects(X, mean, fitted)
    if not any(eff):
        return gf
    return replace(gf, lines=tuple(eff))


def fit_one(X: np.ndarray, mean: np.ndarray, count: np.ndarray, ssd: np.ndarray, parameters: Sequence[str],
            options: FitOptions | None = None, *, check: bool = True, summed: bool = False,
            fall: bool = True) -> GroupFit:
    """The fit of one series (``mean``, ``count``, ``ssd`` (n,) at the points ``X`` (n, m)) as an
    experiment's fit makes it: the p = 1 rules (:func:`perfcast.fit.core.zero_rule_sets`; ``summed``:
    the series is a sum over ranks), negative exponents for a series that falls with a parameter
    (:func:`falling`; ``fall``), measured lines with their own level.  The one path of
    :func:`perfcast.fit.fit_series`, :mod:`perfcast.fit.grid` and :mod:`perfcast.fit.segmented`."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    mean, count, ssd = (np.asarray(a, dtype=float).reshape(1, -1) for a in (mean, count, ssd))
    params = tuple(parameters)
    opts = (options or FitOptions()).for_kind(None)
    [(_, cols, rule)] = zero_rule_sets(X, mean, count, ssd, params, opts, summed)
    X, mean, count, ssd = X[cols], mean[:, cols], count[:, cols], ssd[:, cols]
    dec = falling(opts, X, mean, params) if fall else None
    if dec is not None and dec[0][0]:
        gf = fit_group(X, mean, count, ssd, params, dec[1], check=check)
        gf = replace(gf, notes=gf.notes + dec[2])
    else:
        gf = fit_group(X, mean, count, ssd, params, options, check=check)
    gf = apply_zero_rule(gf, rule)
    if X.shape[1] >= 2:
        gf = _with_lines(gf, X, mean)
    return gf


def fit_experiment(exp: Experiment, options: FitOptions | None = None, locations: str = "auto",
                   progress: Callable[[int, int], None] | None = None, *, statistics: tuple | None = None
                   ) -> tuple[list[GroupFit], dict[tuple[str, str], tuple[int, int]]]:
    """Batched fits of all series: the list of :class:`GroupFit` (one per point set) and, per
    (callpath, metric), (group number, row in the group).  ``statistics``: ``_statistics(exp,
    locations)`` when already computed."""
    groups, cps, mts, gnum, grow = _fit_series(exp, options, locations, progress, statistics=statistics)
    return groups, {(cp, mt): (g, r) for cp, mt, g, r in zip(cps, mts, gnum.tolist(), grow.tolist())}


def _fit_series(exp: Experiment, options: FitOptions | None, locations: str,
                progress: Callable[[int, int], None] | None, *, statistics: tuple | None = None,
                shapes: Callable | None = None, check: bool = True, reps_width: dict | None = None,
                use_reps: dict | None = None) -> tuple:
    """:func:`fit_experiment` as lists and arrays: the groups and, per fitted series in the order
    of the groups' rows, its callpath, metric, group number and row in the group.

    A part of a larger experiment (:mod:`perfcast.pipeline`, the streamed model run) fits its
    series as the whole would: ``shapes(key)`` gives the noise shape of the whole group of that
    :func:`group_parts` key, ``reps_width``/``use_reps`` (metric name -> value) the whole's
    repetition width of each metric and whether its repetitions are kept; ``check`` as
    :func:`perfcast.fit.core.fit_group`'s."""
    groups: list[GroupFit] = []
    members: list[np.ndarray] = []
    done = [0]
    S = None

    def prog(k, total):
        if progress is not None:
            progress(done[0] + k, S)

    parts, cps, mts = group_parts(exp, options, locations, statistics=statistics, reps_width=reps_width,
                                  use_reps=use_reps)
    S = len(cps)
    params = list(exp.parameters)
    for key, rows, X, o, note, mean, count, ssd, reps in parts:
        gf = fit_group(X, mean, count, ssd, params, o, prog, reps, check=check,
                       shape=None if shapes is None else shapes(key))
        note, rule = _zero_rule_of(note)
        if note:
            gf = replace(gf, notes=gf.notes + note)
        gf = apply_zero_rule(gf, rule)
        if len(params) >= 2:
            gf = _with_lines(gf, X, mean)
        done[0] += len(rows)
        members.append(rows)
        groups.append(gf)
    at = np.concatenate(members) if members else np.zeros(0, dtype=np.int64)
    sizes = [len(r) for r in members]
    gnum = np.repeat(np.arange(len(members), dtype=np.int64), sizes)
    grow = np.concatenate([np.arange(k, dtype=np.int64) for k in sizes]) if members else np.zeros(0, dtype=np.int64)
    at = at.tolist()
    return groups, [cps[r] for r in at], [mts[r] for r in at], gnum, grow


def group_parts(exp: Experiment, options: FitOptions | None, locations: str, *, statistics: tuple | None = None,
                reps_width: dict | None = None, use_reps: dict | None = None):
    """The groups :func:`fit_experiment` fits, one option part of ``exp`` (its metrics of one
    :meth:`FitOptions.for_kind`) at a time: ([(key, rows, X, options, note, mean, count, ssd,
    reps)], callpaths, metrics) -- ``rows`` the group's series (of one metric; numbers into the
    callpath and metric lists), ``X`` its points, ``key`` what names the group in any part of the
    experiment (its options, metric, points and note), mean/count/ssd (rows, points) and the
    repetitions (rows, points, R; None when not kept)."""
    opts = options or FitOptions()
    split: dict[FitOptions, list[str]] = {}
    for name, met in exp.metrics.items():
        split.setdefault(opts.for_kind(met.kind, met.exact), []).append(name)
    out, cps, mts = [], [], []
    for o, names in split.items():
        sub = exp if len(split) == 1 else exp.select(metric=names)
        parts, c, m = _group_parts(sub, o, locations, statistics if sub is exp else None, reps_width, use_reps)
        out += [(key, rows + len(cps), *rest) for key, rows, *rest in parts]
        cps += c
        mts += m
    return out, cps, mts


def _group_parts(exp: Experiment, opts: FitOptions, locations: str, statistics, reps_width, use_reps):
    st, row_of, rep_of, values = statistics if statistics is not None else _statistics(exp, locations)
    params = list(exp.parameters)
    _check_magnitudes(exp, st, row_of, values, params)
    labels: list = []

    def summed(metric: str) -> bool:
        # a sum over ranks (the p = 1 rule's line through 0: zero_rule_sets), read when asked
        if not labels:
            labels.append(aggregate_labels(exp, locations))
        return str(labels[0].get(metric, "")).startswith("sum over")

    # the statistics rows of a series together (a reader's order): numbered by runs, no hashing
    sid, first = _runs(st, ["callpath", "metric"]) or _factorize_rows(st, ["callpath", "metric"])
    if params:
        pid, pfirst = _factorize_rows(st, params)
        coords = np.column_stack([np.asarray(st[p], dtype=float)[pfirst] for p in params])
        # the points in coordinate order (not the order the series first name them): a group's
        # points, and so its fit, do not depend on which other series are fitted with it
        order = np.lexsort(coords.T[::-1])
        if np.any(order != np.arange(len(order))):
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order))
            pid, coords = rank[pid], coords[order]
    else:
        pid = np.zeros(len(st), dtype=np.int64)
        coords = np.zeros((1, 0))
    S, P = len(first), len(coords)
    cps = _strings(st["callpath"], first)
    mts = _strings(st["metric"], first)
    # each statistics row's cell of the (S, P) arrays, as one flat index (not a (row, column)
    # pair per array written)
    cell = sid * P + pid
    mean, count, ssd = (_scattered(st[c], cell, S * P).reshape(S, P) for c in ("mean", "count", "ssd"))
    mid = _codes(st["metric"], first)
    M = int(mid.max()) + 1 if len(mid) else 1
    reps_of = _metric_reps(st, sid, pid, cell, mid, M, mts, first, row_of, rep_of, values, reps_width, use_reps)
    present = count > 0
    sigs, inverse = _point_sets(present)
    # a group is one metric's series measured on one point set: what a series' interval shares
    # with other series (the pooled drift, its growth, the noise shape) comes from its own
    # metric, whichever other metrics are fitted with it (--metric gives the same results)
    gid, ginv = np.unique(inverse * M + mid, return_inverse=True)
    ginv = np.asarray(ginv).ravel()
    members = np.split(np.argsort(ginv, kind="stable"), np.cumsum(np.bincount(ginv, minlength=len(gid)))[:-1])
    out = []
    for code, rows_all in zip(gid.tolist(), members):
        sig = sigs[code // M]
        cols = np.nonzero(sig)[0]
        X = coords[cols]
        # series that do not run at p = 1 are fitted from the next process count on, 0 below it, and
        # those that run at p = 1 only on its points, 0 beyond (:func:`perfcast.fit.core.zero_rule_sets`);
        # series that fall with a parameter (strong scaling) are fitted apart (:func:`falling`)
        sets = [(rows_all[r], cols[c], rule) for r, c, rule in
                zero_rule_sets(X, _part(mean, rows_all, cols), _part(count, rows_all, cols), _part(ssd, rows_all, cols),
                               params, opts, summed(mts[int(rows_all[0])]))]
        parts = []
        for rows_s, cols_s, start in sets:
            fall = falling(opts, coords[cols_s], _part(mean, rows_s, cols_s), params) if len(rows_s) else None
            if fall is not None:
                dec, fo, note = fall
                parts += [(rows_s[~dec], opts, (), cols_s, start), (rows_s[dec], fo, note, cols_s, start)]
            else:
                parts.append((rows_s, opts, (), cols_s, start))
        for rows, o, note, cols, start in parts:
            if not len(rows):
                continue
            X = coords[cols]
            if start:
                note = note + ((ZERO_RULE, start),)      # read by _fit_series (:func:`_zero_rule_of`)
            key = (o, mts[int(rows[0])], tuple(map(tuple, X.tolist())), note)
            reps, loc, pm = reps_of[code % M]
            out.append((key, rows, X, o, note, _part(mean, rows, cols), _part(count, rows, cols),
                        _part(ssd, rows, cols),
                        None if reps is None else _part(reps, loc[rows], np.searchsorted(pm, cols))))
    return out, cps, mts


#: the marker of a part's note entry ``(ZERO_RULE, rule)``: its series' fit gets ``rule``
#: (:func:`perfcast.fit.core.zero_rule_sets`, :func:`perfcast.fit.core.apply_zero_rule`)
ZERO_RULE = "zero rule"


def _zero_rule_of(note: tuple) -> tuple[tuple, tuple]:
    """(the note's texts, the rule of its :data:`ZERO_RULE` entry or ``()``)."""
    rule = [n[1] for n in note if isinstance(n, tuple) and n[:1] == (ZERO_RULE,)]
    return tuple(n for n in note if not isinstance(n, tuple)), (rule[0] if rule else ())


def _part(a: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``a[np.ix_(rows, cols)]``; ``a`` itself when that is all of it in order (one group of every
    series on every point: the fit reads its arrays, and no other group has them), not a copy
    (a million series: 240 MB of repetitions)."""
    S, P = a.shape[:2]
    if (len(rows) == S and len(cols) == P and (S == 0 or (rows[0] == 0 and rows[-1] == S - 1))
            and np.array_equal(rows, np.arange(S)) and np.array_equal(cols, np.arange(P))):
        return a
    return a[np.ix_(rows, cols)]


def falling(opts: FitOptions, X: np.ndarray, mean: np.ndarray, params) -> tuple | None:
    """The series of ``mean`` (S, n; at the points ``X``) that fall with a parameter, when they are
    to be fitted apart: (which (S,), their options, their note), or None (none falls, negative
    exponents already searched, or fewer than 3 points).

    Such series (strong scaling: cost per rank ~ 1/p) get negative exponents in their search, and
    say so; the others keep the growing space.  A falling time, count or size has a serial part
    >= 0: a constant that comes out negative is refitted through the origin
    (FitOptions.nonnegative "clamped"; its terms keep the asymptotic rule).  Under the asymptotic
    rule alone, 1e9 / p counts at p = 1..16 with 2% noise were modelled as ``9.8e8 - 5.8e8
    p^(-1/3) log2(p)`` (417x too high at p = 1024) in 9 of 20 draws, their constant drawn below
    zero having ruled ``c + b / p`` out (bench/README.md "Falling series")."""
    if opts.negative or len(X) < 3:
        return None
    dec = decreasing(X, mean, [parameter_lines(X, p) for p in range(X.shape[1])])
    if not dec.any():
        return None
    note = ("falls with " + " or ".join(params) + " (as a cost per rank does under strong scaling): "
            "negative exponents searched too",)
    fo = replace(opts, negative=True)
    if opts.nonnegative == ASYMPTOTIC:
        fo = replace(fo, nonnegative=CLAMPED)
    return dec, fo, note


def _metric_reps(st, sid, pid, cell, mid, M, mts, first, row_of, rep_of, values, reps_width, use_reps) -> list:
    """Per metric code: (its raw repetitions (series, points, R), NaN-padded, or None; each
    series' row in them; the points' numbers of their columns).  The noise shape is estimated
    from them, so each metric's come from its own values alone: R its largest repetition count,
    and kept unless the padding would more than double the memory of its values (very uneven
    repetition counts).  ``reps_width`` / ``use_reps``: metric name -> the whole experiment's
    (:mod:`perfcast.pipeline`, fitting a part)."""
    S, P = len(first), int(pid.max()) + 1 if len(pid) else 0
    count = st["count"]

    def build(rows, vals, series, points):
        """``rows`` / ``vals`` / ``series``: the metric's statistics rows, values and series
        (None: all of them, one metric)."""
        Sm, Pm = S if series is None else len(series), len(points)
        nv = len(values) if vals is None else len(vals)
        name = mts[0 if series is None else int(series[0])] if Sm else None
        R = int((count if rows is None else count[rows]).max()) if Sm else 0
        if reps_width is not None and name in reps_width:
            R = reps_width[name]
        keep = R >= 2 and (Sm * Pm * R <= 2 * nv if use_reps is None else use_reps.get(name, False))
        if not keep:
            return None, None, points
        if series is None and nv == S * P * R and _in_cell_order(cell, row_of, rep_of, R):
            # the values already lie as the (S, P, R) cells (a reader's order: each series' points
            # in order, each point's R repetitions): a read-only view of them (the fit only reads
            # its repetitions; a write would raise, not change the values), no copy and no index
            # of the values' size
            reps = values.reshape(S, P, R).view()
            reps.flags.writeable = False
            return reps, np.arange(S, dtype=np.int64), points
        loc = np.arange(S, dtype=np.int64)
        if series is not None:
            loc = np.full(S, -1, dtype=np.int64)
            loc[series] = np.arange(Sm, dtype=np.int64)
        r = row_of if vals is None else row_of[vals]
        if series is None:
            at = cell[r]        # one metric: its cells are the (S, P) arrays'
        else:
            at = loc[sid[r]]
            at *= Pm
            at += np.searchsorted(points, pid[r])
        at *= R
        at += rep_of if vals is None else rep_of[vals]
        return _scattered(values if vals is None else values[vals], at, Sm * Pm * R, np.nan).reshape(Sm, Pm, R), \
            loc, points

    if M == 1:
        return [build(None, None, None, np.arange(P, dtype=np.int64))]
    # the values of each metric together, its statistics rows and series
    by_value, by_row, by_series = (_positions(codes, M) for codes in (mid[sid[row_of]], mid[sid], mid))
    return [build(by_row[m], by_value[m], by_series[m], np.unique(pid[by_row[m]])) for m in range(M)]


def _in_cell_order(cell: np.ndarray, row_of: np.ndarray, rep_of: np.ndarray, R: int) -> bool:
    """Whether value ``i`` of the rows' statistics rows ``row_of`` and repetitions ``rep_of`` is
    cell ``i`` of the (S, P, R) repetitions: the statistics rows' cells ``cell`` are 0, 1, 2, ...
    and every row holds R values, its repetitions 0 .. R-1 in turn."""
    n = len(row_of)
    if R < 1 or n != len(cell) * R or not np.array_equal(cell, np.arange(len(cell))):
        return False
    grid = row_of.reshape(-1, R)
    return bool(np.array_equal(grid[:, 0], np.arange(len(cell))) and (grid == grid[:, :1]).all()
                and (rep_of.reshape(-1, R) == np.arange(R, dtype=rep_of.dtype)).all())


def _positions(codes: np.ndarray, M: int) -> list[np.ndarray]:
    """The positions of each code ``0 .. M-1`` in ``codes``, ascending: a comparison per code
    for a few codes (30M values: 30 ms each), one stable sort for many (1.5-3 s)."""
    if M <= 16:
        return [np.flatnonzero(codes == m) for m in range(M)]
    return np.split(np.argsort(codes, kind="stable"), np.cumsum(np.bincount(codes, minlength=M))[:-1])


def _scattered(values: np.ndarray, at: np.ndarray, n: int, fill: float = 0.0) -> np.ndarray:
    """A flat float array of ``n`` cells, ``fill`` but for ``values`` at ``at``."""
    out = np.full(n, fill)
    out[at] = values
    return out


def _point_sets(present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(present, axis=0, return_inverse=True)`` (the distinct rows of a boolean (S, P)
    array in lexicographic order, and the number of each row's), by one integer per row when P
    allows (the first column its most significant bit)."""
    S, P = present.shape
    if P > 62 or S == 0:
        sigs, inverse = np.unique(present, axis=0, return_inverse=True)
        return sigs, np.asarray(inverse).ravel()
    code = present.astype(np.int64) @ (np.int64(1) << np.arange(P - 1, -1, -1, dtype=np.int64))
    uniq, inverse = np.unique(code, return_inverse=True)
    sigs = ((uniq[:, None] >> np.arange(P - 1, -1, -1, dtype=np.int64)) & 1).astype(bool)
    return sigs, np.asarray(inverse).ravel()


def _codes(col, rows: np.ndarray) -> np.ndarray:
    """An integer per row of ``rows`` numbering the distinct values of ``col`` (a numpy array, a
    :class:`Category` or a pandas column) there."""
    if not isinstance(col, (Category, np.ndarray)):
        col = column(col)
    if isinstance(col, Category):
        codes = col.codes[rows]
        if not len(codes) or codes.min() >= 0:
            return codes.astype(np.int64)
        return pd.factorize(col.to_pandas().astype(str).to_numpy()[rows])[0].astype(np.int64)
    return factorize(col[rows])[0].astype(np.int64)


def factorize_names(col) -> tuple[np.ndarray, list[str]]:
    """``pd.factorize`` of a categorical column (a :class:`Category` or a pandas column): each
    row's number among the names in order of first appearance (-1 for a missing value) and those
    names."""
    if not isinstance(col, Category):
        col = column(col)
        if not isinstance(col, Category):
            codes, uniq = pd.factorize(col)
            return codes, list(uniq)
    codes = col.codes
    ok = codes >= 0
    out = np.full(len(codes), -1, dtype=np.int64)
    num, first = factorize(codes[ok] if not ok.all() else codes)
    out[ok] = num
    return out, col.objects()[first].tolist() if len(first) else []


def _strings(col, rows: np.ndarray) -> list[str]:
    """``col.astype(str)`` at ``rows`` (a categorical converted at those rows only); ``col`` a
    numpy array, a :class:`Category` or a pandas column."""
    if not isinstance(col, (Category, np.ndarray)):
        col = column(col)
    if isinstance(col, Category):
        codes = col.codes[rows]
        if not len(codes) or codes.min() >= 0:
            return col.strings(rows)
        return pd.Series(col.to_pandas()).astype(str).to_numpy()[rows].tolist()
    return pd.Series(col).astype(str).to_numpy()[rows].tolist()
