"""Scalability-bug ranking: which callpaths will cost the most as the program scales.

Two orders (``by``):

* ``cost`` (default) -- **per-process cost growth, weighted by cost.**  Each series is ranked by
  its per-process cost *increase* from the smallest measured process count to the target --
  measured up to the largest run, predicted beyond it -- as a share of the per-process cost of the
  tree's root(s) at the target (same metric)::

      key = ((C_measured(largest) - C_measured(smallest)) + (C_model(target) - C_model(largest)))
            / C_root(target)

  (the measured part finds growth that a poorly fitting model flattens: LULESH's MPI_Allreduce,
  7.9 -> 16.4 s per process, has a constant model)

  so a routine of 26 microseconds growing like ``p^2`` ranks below an ``MPI_Allreduce`` of seconds
  growing like ``log p``.  The root at the target is at least every series' own value there (the
  whole holds each part, even where the root's model falls below a callee's), so a growth is at
  most about 100% of it; a *decrease* can go beyond -100%, when the root itself shrank: it is a
  share of the root at the target, not at the start (Extra-P's single_parameter main
  PAPI_L3_TCM: 39 -> 12 misses from x = 1 to 2000, the root 16.6 at the target, -163%).
  Without a process parameter "per-process" is the value as measured (:func:`cost_heading`).  Without a target the target is :data:`DEFAULT_FACTOR` times the largest
  measured process count (the process parameter: :func:`perfcast.analysis.scaling_loss.process_parameter`;
  when none is known, every parameter scaled by that factor).  Ties are broken by growth order.
  Callpaths whose per-process cost stays below :data:`NEGLIGIBLE` of the root's, at the largest
  measured point and at the target, are *negligible* and rank after all significant ones (among
  themselves in the same order).
* ``growth`` -- **asymptotic growth first** (SC13): a model's growth key is its per-parameter lead
  orders, largest first (so ``p^2`` outranks ``p log p`` outranks ``p``, and a model growing in two
  parameters outranks one growing in one at the same order); ties are broken by the value
  predicted at ``target`` (when given), then by the constant.

**Per-process cost.**  A metric aggregated as a sum over the ranks (``Metric.aggregate`` ``"sum over
ranks"``: Caliper's ``sum#...``, or per-rank counts summed by the modeller) grows with the process
count by construction -- under weak scaling it is the constant per-rank cost times p -- so its
values are divided by the process count before they are compared; means, maxima and minima over
ranks, and per-rank values, are per-process already.  Where a quantity (same kind and unit) comes
as a mean over ranks too, that mean is preferred: the quantity's other aggregates over ranks
(Caliper's ``sum#``/``max#``/``min#`` beside ``avg#``) rank after the significant per-process ones.  The root of each metric is the sum of the
topmost modelled callpaths for inclusive metrics; for a flat timer list (scope unknown) its
whole-run timer when it has one (a timer at least as large as every other at every measured point,
:func:`perfcast.analysis.views.whole_run_timer`: the one rule ``project`` and ``advise`` use, e.g.
Relearn's ``main()``: the sum would count the time nested in it again); the sum of all callpaths
otherwise (negative predictions count as 0).

Series without a usable model rank last: status not ``ok`` (in the ``cost`` order a segmented
model whose last regime has too few points still counts: it predicts that regime's mean).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Mapping

import numpy as np

from ..errors import PerfcastError
from ..fit.model import Model, term_signature
from ..experiment import has_ancestor

#: ``cost`` order: a callpath below this share of the root's per-process cost (at the largest
#: measured point and at the target) is negligible and ranks after the significant ones
NEGLIGIBLE = 1e-3
#: ``cost`` order without a target: the largest measured process count times this
DEFAULT_FACTOR = 2.0
BY = ("cost", "growth")


@dataclass(frozen=True)
class Ranked:
    rank: int
    callpath: str
    metric: str
    model: object
    growth: tuple
    #: the model's value at the given target (None without one)
    predicted: float | None
    #: ``cost`` order: per-process cost at the largest measured point and at the ranking's target,
    #: the increase between them as a share of the root's per-process cost at the target, and the
    #: point ranked at (the given target or the default one)
    per_process_now: float | None = None
    per_process: float | None = None
    increase: float | None = None
    significant: bool = True
    at: Mapping[str, float] | None = None
    #: ``cost`` order: per-process cost at the smallest measured process count (``first_at``)
    per_process_first: float | None = None
    first_at: Mapping[str, float] | None = None


def growth_key(model) -> tuple:
    orders = sorted((tuple(o) for o in model.lead_order().values()), reverse=True)
    return tuple(orders)


def growth_keys(models) -> list[tuple]:
    """:func:`growth_key` of many models, computed once per distinct set of terms."""
    cache: dict = {}
    out = []
    for m in models:
        if type(m) is not Model:
            out.append(growth_key(m))
            continue
        sig = term_signature(m)
        key = cache.get(sig)
        if key is None:
            key = cache[sig] = growth_key(m)
        out.append(key)
    return out


def is_sum_over_ranks(aggregate: str | None) -> bool:
    return bool(aggregate) and aggregate.startswith("sum over")


def cost_words(procs: str | None) -> str:
    """The ``cost`` order's quantity: "per-process cost" with a process parameter ``procs``, else
    "cost" (one run's values as measured: there is no process count to divide by)."""
    return "per-process cost" if procs is not None else "cost"


def cost_heading(procs: str | None, first_at: Mapping[str, float], at: Mapping[str, float]) -> str:
    """What the ``cost`` order ranks by, in words (``perfcast model``'s heading, the notebook's):
    per-process only when there is a process parameter ``procs``."""
    pt = lambda p: ",".join(f"{k}={v:g}" for k, v in p.items())  # noqa: E731
    cost = cost_words(procs)
    return (f"by {cost} increase from {pt(first_at)} to {pt(at)} (share of the root's {cost} at {pt(at)}"
            + ("" if procs is not None else "; no process-count parameter: costs as measured") + ")")


def default_target(upper: Mapping[str, float], procs: str | None, factor: float = DEFAULT_FACTOR,
                   unfollowed: Iterable[str] = ()) -> dict:
    """``factor`` times the largest measured process count (every parameter when ``procs`` is None),
    the other parameters at their largest measured values.  A parameter in ``unfollowed`` (the
    measured points hold no line of >= 3 values along it: no model can follow it,
    :func:`perfcast.modelset.unfollowed_parameters`) stays at its largest measured value: an increase
    beyond it would be no model's (:func:`unfollowed_target_note` says so)."""
    skip = set(unfollowed)
    return {p: (v * factor if (procs is None or p == procs) and p not in skip else v) for p, v in upper.items()}


def unfollowed_target_note(target: Mapping[str, float], upper: Mapping[str, float],
                           smallest: Mapping[str, float], unfollowed: Iterable[str], procs: str | None,
                           given: bool, what: str = "--target") -> str | None:
    """What the ranking's heading says when its target meets a parameter no model follows
    (``unfollowed``): given (``--target``) beyond its measured range, the part of the increase
    beyond is no model's; by default (:func:`default_target`), the target stays at its largest
    measured value.  None when neither applies.  ``what``: the given target's name in the note (the
    report's default target is one too: it names it)."""
    skip = [q for q in unfollowed if q in upper]
    if given:
        beyond = [q for q in skip if q in target and not smallest.get(q, upper[q]) <= target[q] <= upper[q]]
        if not beyond:
            return None
        return (f"{what} lies beyond the measured {', '.join(f'{q} ({smallest.get(q, upper[q]):g} to {upper[q]:g})' for q in beyond)}, "
                f"along which the measured points hold no line of >= 3 values: no law in {' or '.join(beyond)} "
                f"can be checked there (at most one power through two values), so the increase beyond the largest "
                f"measured value rests on no checked model")
    held = [q for q in skip if procs is None or q == procs]
    if not held:
        return None
    return (f"ranked at the largest measured {', '.join(f'{q}={upper[q]:g}' for q in held)}, not beyond: the measured "
            f"points hold no line of >= 3 values along {' or '.join(held)}, so no law in it can be checked beyond "
            f"them (at most one power through two values)")


def rank(series_models: Iterable, target: Mapping[str, float] | None = None, averaged: bool = False, *,
         by: str = "growth", procs: str | None = None, aggregates: Mapping[str, str] | None = None,
         parents: Mapping[str, str] | None = None, inclusive: Iterable[str] = (),
         upper: Mapping[str, float] | None = None, lower: Mapping[str, float] | None = None,
         measured: Mapping[tuple, tuple] | None = None, negligible: float = NEGLIGIBLE,
         kinds: Mapping[str, str] | None = None, units: Mapping[str, str] | None = None,
         whole_run: Mapping[str, str] | None = None) -> list[Ranked]:
    """Rank objects with ``callpath``, ``metric``, ``model`` (e.g. fit.SeriesModel) ``by`` ``cost``
    or ``growth`` (module docstring).

    The value at ``target`` is the selected hypothesis' prediction (``averaged=True``: averaged over
    the competing hypotheses), as in ``perfcast predict``.  ``cost`` also takes the process
    parameter ``procs``, metric -> ``aggregates`` label, the tree's ``parents`` (callpath -> parent)
    and ``inclusive`` metrics (to find the root), ``upper``, the largest measured value of each
    parameter (default: the models' own), ``lower``, the smallest measured process count, and
    ``measured``: (callpath, metric) -> mean measured values at ``lower`` and ``upper`` (None, or
    missing: the model's values there), metric -> ``kinds`` and ``units`` (the same quantity),
    ``whole_run``: flat metric -> its whole-run timer (the root)."""
    items = list(series_models)
    order, c = rank_order(items, target, averaged, by=by, procs=procs, aggregates=aggregates, parents=parents,
                          inclusive=inclusive, upper=upper, lower=lower, measured=measured, negligible=negligible,
                          kinds=kinds, units=units, whole_run=whole_run)
    return ranked_rows(items, order, c)


def ranked_rows(items: list, order: list, c: dict, start: int = 0) -> list[Ranked]:
    """:class:`Ranked` rows of the positions ``order`` (a slice of :func:`rank_order`'s order
    starting at rank ``start + 1``; its columns ``c``): the models of these series only are built."""
    code, table = c["growth"]
    key = [table[k] for k in code[order].tolist()] if len(order) else []
    pred = c["predicted"]
    if c["by"] == "growth":
        return [Ranked(start + i + 1, items[s].callpath, items[s].metric, items[s].model, key[i], pred[s])
                for i, s in enumerate(order)]
    tgt, low = c["at"], c["first_at"]
    # the columns' values of these rows as Python floats, None for unknown (NaN)
    first, now, at, inc = ([None if v != v else v for v in c[k][order].tolist()] if len(order) else []
                           for k in ("per_process_first", "per_process_now", "per_process", "increase"))
    sig = c["significant"][order].tolist() if len(order) else []
    return [Ranked(start + i + 1, items[s].callpath, items[s].metric, items[s].model, key[i], pred[s],
                   now[i], at[i], inc[i], sig[i], tgt, first[i], dict(low))
            for i, s in enumerate(order)]


def rank_order(items: list, target: Mapping[str, float] | None = None, averaged: bool = False, *,
               by: str = "growth", procs: str | None = None, aggregates: Mapping[str, str] | None = None,
               parents: Mapping[str, str] | None = None, inclusive: Iterable[str] = (),
               upper: Mapping[str, float] | None = None, lower: Mapping[str, float] | None = None,
               measured: Mapping[tuple, tuple] | None = None, negligible: float = NEGLIGIBLE,
               kinds: Mapping[str, str] | None = None, units: Mapping[str, str] | None = None,
               parts=None, whole_run: Mapping[str, str] | None = None,
               unfollowed: Iterable[str] = ()) -> tuple[list, dict]:
    """:func:`rank` without a :class:`Ranked` object (or a model) per series: (the positions of
    ``items`` in rank order, columns by position: ``growth`` (an array of codes and the table of
    growth keys they index), ``predicted`` (a list: value at ``target`` or None), with ``by``
    ``cost`` also ``per_process_first``, ``per_process_now``, ``per_process``, ``increase`` (float
    arrays, NaN: unknown), ``significant`` (a boolean array), and the points ``at`` and
    ``first_at``).  The models' values, growth keys, statuses and constants come from
    :mod:`perfcast.fit.columns` (the fit's arrays for models not built); ``parts``:
    :func:`perfcast.fit.columns.split` of ``items`` when the caller has it; ``unfollowed``: the
    parameters no model follows, which the default target keeps at their largest measured value
    (:func:`default_target`)."""
    from ..fit import columns

    if by not in BY:
        raise PerfcastError(f"ranking order {by!r}: use {' or '.join(BY)}", where="--by")
    S = len(items)
    parts = parts or columns.split(items)
    preds: list = [None] * S
    if target is not None:
        known = list(dict.fromkeys(p for sm in items for p in _parameters(sm)))
        unknown = [k for k in target if k not in known]
        if unknown:   # were ignored: `--target p=64,n=8,q=5` ranked at p=64,n=8 without a word
            raise PerfcastError(f"unknown parameter(s) {', '.join(unknown)}; the experiment has: "
                                f"{', '.join(known)}", where="--target")
        for sm in items:
            missing = [p for p in _parameters(sm) if p not in target]
            if missing:
                raise PerfcastError(f"lacks parameter(s) {', '.join(missing)}", where="--target")
    # ``cost``: the models' values at the smallest and the largest measured point and at the target,
    # the last the values at ``target`` when given -- one batch
    points = _cost_points(items, target, procs, upper, lower, unfollowed) if by == "cost" else None
    batch = points if points is not None else [target] if target is not None else []
    # a target beyond the range of floats (p = 1e308) gives infinity or NaN, refused below by name,
    # not numpy's RuntimeWarning with a source line on stderr
    with np.errstate(over="ignore", invalid="ignore"):
        vals = columns.values(items, batch, averaged, parts) if batch else None
    if target is not None:
        undefined = np.flatnonzero(~np.isfinite(vals[:, -1]))
        if len(undefined):   # e.g. log2(p)^-1 at p <= 1 (perfcast.fit.terms.factor_values): the first
            sm = items[int(undefined[0])]
            m = sm.model
            raise PerfcastError(f"{sm.callpath} / {sm.metric}: the model {m.formula()} is undefined at the "
                                f"target {','.join(f'{p}={target[p]:g}' for p in m.parameters)}", where="target")
        preds = vals[:, -1].tolist()
    if points is not None:
        return _cost_order(items, points, vals, preds, procs, aggregates or {}, parents or {}, set(inclusive),
                           measured or {}, negligible, kinds or {}, units or {}, parts, whole_run or {})
    ok = columns.status_ok(items, parts)
    code, distinct = columns.growth_codes(items, parts)
    code = np.where(ok, code, -1)              # no usable model: the key (), below every other
    consts = np.asarray(columns.constants(items, parts), dtype=float)
    pv = vals[:, -1] if target is not None else np.full(S, ninf)
    order = _descending([ok, code, pv, consts])
    return order, {"by": "growth", "growth": _growth(code, distinct), "predicted": preds}


ninf = float("-inf")


def restrict(order: list, c: dict, n: int) -> tuple[list, dict]:
    """:func:`rank_order`'s ``order`` and columns ``c`` of its first ``n`` items only (the others
    ranked beside them, e.g. counted in the root only): the order of the rest dropped, each column
    cut to the first ``n`` positions."""
    out = dict(c)
    code, table = c["growth"]
    out["growth"] = (code[:n], table)
    out["predicted"] = c["predicted"][:n]
    for k in ("per_process_first", "per_process_now", "per_process", "increase", "significant"):
        if k in c:
            out[k] = c[k][:n]
    return [s for s in order if s < n], out


def _growth(code: np.ndarray, distinct: list) -> tuple[np.ndarray, list]:
    """The ``growth`` column: the codes and the table of keys they index (code -1: the key ())."""
    return code, distinct + [()]


def codes(values: list) -> tuple[np.ndarray, list]:
    """(the number of each value, the distinct values in order of first appearance): one
    dictionary look-up per value, in C."""
    distinct = list(dict.fromkeys(values))
    number = {v: i for i, v in enumerate(distinct)}
    return np.fromiter(map(number.__getitem__, values), dtype=np.int64, count=len(values)), distinct


def _descending(keys: list, array: bool = False) -> list:
    """Positions ordered by the tuples of ``keys`` (arrays, most significant first) descending,
    ties in their order: what ``sorted(range(S), key=tuples, reverse=True)`` gives (booleans and
    integers as such, floats without NaN); ``array``: as an integer array."""
    cols = []
    for k in reversed(keys):
        k = np.asarray(k)
        cols.append(~k if k.dtype == bool else -k)
    if array:
        return np.lexsort(cols) if cols and len(cols[0]) else np.zeros(0, dtype=np.int64)
    return np.lexsort(cols).tolist() if cols and len(cols[0]) else []


def _parameters(sm) -> tuple:
    pend = getattr(sm, "pending", None)
    src = pend() if pend is not None else None
    return src[0].parameters if src is not None else sm.model.parameters


def _cost_points(items, target, procs, upper, lower, unfollowed=()) -> tuple[dict, dict, dict] | None:
    """The points the ``cost`` order compares: (the smallest measured process count, the largest
    measured point, the target -- given, or the default one), None when nothing is known about the
    measured range (then the growth order)."""
    if upper is None:
        upper = {}
        for sm in items:
            for p, u in zip(sm.model.parameters, getattr(sm.model, "upper", None) or ()):
                upper[p] = max(upper.get(p, u), u)
    if target is None and not upper:
        return None
    tgt = dict(target) if target is not None else default_target(upper, procs, unfollowed=unfollowed)
    up = {**tgt, **upper}
    low = {**up, **(lower or {})}
    return low, up, tgt


def _cost_order(items, points, vals, preds, procs, aggregates, parents, inclusive, measured, negligible, kinds,
                units, parts, whole_run):
    """The ``cost`` order of ``items`` from the models' values ``vals`` (S, 3) at ``points`` (the
    smallest measured process count, the largest measured point, the target)."""
    mc, metrics, c_low, c_up, c_t, mod_up, ok, code, distinct = cost_values(items, points, vals, procs, aggregates,
                                                                           measured, parts)
    top = np.ones(len(items), dtype=bool)
    if S := len(items):
        for m, metric in enumerate(metrics):
            if metric in inclusive:
                rows = np.flatnonzero(mc == m).tolist()
                cps = {items[s].callpath for s in rows}
                for s in rows:
                    top[s] = not has_ancestor(items[s].callpath, cps, parents)
            elif metric in whole_run:
                # a flat timer list with a whole-run timer: the root is that timer, not the sum
                rows = np.flatnonzero(mc == m)
                whole = np.array([items[s].callpath == whole_run[metric] for s in rows.tolist()], dtype=bool)
                if whole.any():
                    top[rows] = whole
    return cost_order(mc, metrics, c_low, c_up, c_t, mod_up, ok, code, distinct, top, preds, points, aggregates,
                      negligible, kinds, units)


def cost_values(items, points, vals, procs, aggregates, measured, parts) -> tuple:
    """What the ``cost`` order needs of each series, each from its own model and measurements:
    (metric codes, the metrics they number, per-process cost at the smallest measured process
    count, at the largest measured point (measured), at the target, the model's at the largest
    measured point, usable, growth codes, the growth keys they number) -- :func:`cost_order` ranks
    them; the series of a larger set computed in parts and concatenated (the codes renumbered)
    give the order of the whole (:mod:`perfcast.pipeline`)."""
    from ..fit import columns

    low, up, tgt = points
    # per process: one array operation per quantity, NaN standing for "unknown"
    S = len(items)
    arrays = measured.arrays(items) if hasattr(measured, "arrays") else None
    if arrays is not None:
        meas, given = arrays                 # measured at low and up, and whether measured there at all
    else:
        meas = np.full((S, 2), np.nan)          # measured at low and up (NaN: as measured, not finite)
        given = np.zeros((S, 2), dtype=bool)     # measured there at all (else the model's value)
        for s, sm in enumerate(items):
            for k, v in enumerate(measured.get((sm.callpath, sm.metric), (None, None))):
                if v is not None:
                    meas[s, k], given[s, k] = v, True
    mc, metrics = codes(list(map(_metric, items)))
    summed = np.array([is_sum_over_ranks(aggregates.get(m)) for m in metrics], dtype=bool)[mc] if S else \
        np.zeros(0, dtype=bool)

    def per_process(v: np.ndarray, pt: Mapping[str, float]) -> np.ndarray:
        """Values at ``pt`` per process (sums over ranks divided by the process count), NaN where
        not finite."""
        v = np.where(np.isfinite(v), v, np.nan)
        if procs is not None and pt.get(procs, 0) > 0:
            v = np.where(summed, v / pt[procs], v)
        return v

    mod_up = per_process(vals[:, 1], up)
    c_low = per_process(np.where(given[:, 0], meas[:, 0], vals[:, 0]), low)
    c_up = per_process(np.where(given[:, 1], meas[:, 1], vals[:, 1]), up)
    c_t = per_process(vals[:, 2], tgt)
    # a segmented model predicts (counts as usable whatever its status)
    seg = np.zeros(S, dtype=bool)
    for s in parts[1]:
        seg[s] = bool(getattr(items[s].model, "segments", None))   # a segmented model predicts
    ok = columns.status_ok(items, parts) | seg
    code, distinct = columns.growth_codes(items, parts)
    return mc, metrics, c_low, c_up, c_t, mod_up, ok, code, distinct


def cost_order(mc, metrics, c_low, c_up, c_t, mod_up, ok, code, distinct, top, preds, points, aggregates,
               negligible, kinds, units, array: bool = False) -> tuple[list, dict]:
    """The ``cost`` order (:func:`rank_order`) from :func:`cost_values` of every series (``top``:
    the series counted in their metric's root: the topmost callpaths of an inclusive metric, all
    others); ``array``: the order as an array, not a list."""
    low, up, tgt = points
    S = len(mc)
    # the root's per-process cost per metric: topmost callpaths (inclusive) or all of them (summed
    # in order, as Python's sum: the same digits whatever the batch)
    ct0 = np.maximum(np.nan_to_num(c_t, nan=0.0), 0.0)
    cu0 = np.maximum(np.nan_to_num(c_up, nan=0.0), 0.0)
    root_of = np.zeros(S)
    if S:
        grouped = np.argsort(mc, kind="stable")
        cut = np.flatnonzero(np.diff(mc[grouped])) + 1
        for rows in np.split(grouped, cut):
            rows_top = rows[top[rows]]
            # Python's sum of the floats (not numpy's pairwise one): the same digits as ever
            at_t = sum(ct0[rows_top].tolist())
            at_up = sum(cu0[rows_top].tolist())
            # the whole holds each of its parts: at the target not below any series' own value there
            # (a root whose model falls below a callee's gave shares above 100%: main's max_time, a
            # flat poor fit, under init_mat's x^(3/4) log2(x)^2 in Extra-P's single_parameter set)
            at_t = max(at_t, float(ct0[rows].max()))
            root_of[rows] = at_t if at_t > 0 else at_up
    with np.errstate(invalid="ignore", divide="ignore"):
        inc = np.where(root_of > 0, ((c_up - c_low) + (c_t - mod_up)) / root_of, np.nan)
        big = np.fmax(np.fmax(np.abs(c_low), np.abs(c_up)), np.abs(c_t))
        significant = ~np.isnan(big) & (root_of > 0) & (big / root_of >= negligible)

    # with a mean over ranks of the same quantity (kind and unit) at hand, the other aggregates over
    # ranks (sum, max, min) come second
    quantity = lambda metric: (kinds.get(metric), units.get(metric))  # noqa: E731
    means = {quantity(m) for m in metrics if _is_mean(aggregates.get(m))}
    code = np.where(ok, code, -1)
    preferred = np.array([not ((agg := aggregates.get(m) or "") and not _is_mean(agg) and quantity(m) in means)
                          for m in metrics], dtype=bool)[mc] if S else np.zeros(0, dtype=bool)
    order = _descending([ok, significant, preferred, np.where(np.isnan(inc), ninf, inc), code,
                         np.where(np.isnan(c_t), ninf, c_t)], array)
    return order, {"by": "cost", "growth": _growth(code, distinct), "predicted": preds, "per_process_first": c_low,
                   "per_process_now": c_up, "per_process": c_t, "increase": inc, "significant": significant,
                   "at": tgt, "first_at": low}


_metric = operator.attrgetter("metric")


def _is_mean(aggregate: str | None) -> bool:
    return bool(aggregate) and aggregate.startswith("mean over")


def growth_str(key: tuple, parameters) -> str:
    return ", ".join(f"({i}, {j})" for i, j in key) if key else "-"


__all__ = ["Ranked", "cost_heading", "cost_words", "rank", "rank_order", "ranked_rows", "restrict", "growth_key", "growth_keys", "default_target", "unfollowed_target_note", "is_sum_over_ranks", "NEGLIGIBLE",
           "DEFAULT_FACTOR", "BY", "Fraction"]
