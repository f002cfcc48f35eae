"""Calling-context views of one profile: top-down tree, bottom-up callers, flat, hot path.

Every view starts from :func:`profile`: the inclusive and exclusive cost of each callpath for one
metric at one point.  How the raw values are reduced (documented here, used everywhere):

* inclusive/exclusive values are formed per point, repetition and location first (a metric known
  in one scope is converted with ``Experiment.to_inclusive``/``to_exclusive``; a metric ``X`` with
  a partner ``X (inc)`` uses the partner), so a max over ranks is the max of each rank's own
  inclusive cost;
* in a dense table (tidy CSV/JSONL/Parquet) a value converted at a location from values the
  location lacks is missing there, not computed with a 0 (:meth:`Experiment._gapped`: a rank without
  a child's value has no exclusive value of the parent, nor inclusive values above the gap), so
  the reductions below use the locations that have it;
* locations (rank/thread) are then reduced with ``ranks`` (default ``sum``: the cost over the whole
  run, as hpcviewer and the CUBE browser show it), repetitions with the mean;
* repetitions a sparse profile's run lacks are 0 there, a dense table's are missing
  (:func:`perfcast.experiment.reduce_over_repetitions`);
* percentages are of the whole program's total (:func:`whole_program_total`: each location's
  root(s) summed, then reduced over the locations with ``ranks``).

Bottom-up and flat views group calling contexts by procedure.  A frame is a procedure when its
reader says so (:meth:`perfcast.experiment.CallTree.frame`: HPCToolkit records procedures with
their file and load module, and its loops and statements) and, without a recorded kind, the frame
name is the procedure (Caliper regions, CUBE/cachegrind functions).  The flat view puts a loop or
statement into the procedure it sits in (the nearest procedure frame above it, as HPCToolkit's
own flat view nests load module -> file -> procedure -> loop -> statement), and tells procedures
of one name in different files/modules apart (:func:`procedures`, one rule for both views).  The
bottom-up view has the same rows, and a row's callers are procedures too: the one a calling
context of it was called from (a call from a loop or line of g is a call from g), as HPCToolkit's
Callers View.  A procedure's exclusive cost is the sum over all its contexts (its own frames' and
those of its loops and statements); its inclusive cost sums only the contexts that have no
ancestor of the same procedure, so recursion is not counted twice.  With
``ranks`` max or min these sums are formed per location first and then combined over the
locations (:func:`_grouped`), as the total is: a procedure's max over ranks is the largest of the
ranks' own times in it, never above the largest rank's total (summing each context's max could be).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, NamedTuple

import math

import numpy as np

from ..errors import PerfcastError
from ..experiment import (LOCATION_COLUMNS, Experiment, absent_location_is_missing, describe_locations, gap_error,
                          location_gaps,
                          location_gaps_warning, reduce_over_locations, reduce_over_repetitions,
                          repetition_gaps, repetition_gaps_warning, run_locations)
from .derived import _Scoped, partner, refuse_non_additive, topmost
from ..lazy import LazyModule

pd = LazyModule("pandas")   # imported where a DataFrame is made (perfcast.lazy)

__all__ = ["Profile", "profile", "top_down", "bottom_up", "flat", "hot_path", "select_point", "RANK_REDUCTIONS",
           "SORT_KEYS"]

RANK_REDUCTIONS = ("sum", "mean", "max", "min")
SORT_KEYS = ("inclusive", "exclusive", "name", "tree")


@dataclass
class Profile:
    """Costs of one metric at one point: ``table`` indexed by callpath (tree preorder) with columns
    ``inclusive`` and ``exclusive``; ``total`` is the whole program's (:func:`whole_program_total`)."""

    exp: Experiment
    metric: str
    point: dict
    ranks: str
    table: pd.DataFrame
    total: float
    #: callpaths whose exclusive value is not known (NaN in ``table``: :func:`no_exclusive`)
    no_exclusive: frozenset = frozenset()

    def pct(self, x) -> float:
        """``x`` as a percentage of the total (NaN when the total is 0)."""
        return 100.0 * float(x) / self.total if self.total else math.nan


def default_metric(exp: Experiment, among: Iterable[str] | None = None) -> str:
    """The first time metric with a known scope (else the first metric with a known scope); ``among``
    restricts the choice to those metric names (e.g. the time metrics in seconds a projection can use)."""
    names = None if among is None else set(among)
    known = [m for m in exp.metrics.values() if m.scope != "unknown" and (names is None or m.name in names)]
    if not known:
        raise PerfcastError("no metric has inclusive or exclusive values (all scopes unknown): this needs a "
                            "calling-context profile (a tidy table declares it in a scope column)")
    # prefer a metric's exclusive member of a pair, the name "time", per-process averages
    def rank(m):
        paired_inc = m.scope == "inclusive" and partner(exp, m.name, "exclusive") is not None
        return (m.kind != "time", paired_inc, m.name != "time", not m.name.startswith("avg#"))

    return min(known, key=rank).name


def select_point(exp: Experiment, at: Mapping[str, float] | None = None) -> tuple[Experiment, dict]:
    """Restrict to one point (``at`` may fix some parameters); error listing points when ambiguous."""
    at = dict(at or {})
    if at:
        exp = exp.select(**at)
    pts = exp.points()
    if len(pts) > 1:
        listing = "; ".join(", ".join(f"{k}={_num(v)}" for k, v in r.items()) for r in pts.head(8).to_dict("records"))
        more = " ..." if len(pts) > 8 else ""
        raise PerfcastError(f"the experiment holds {len(pts)} points ({listing}{more}); choose one with "
                            f"--at NAME=VALUE")
    point = {k: float(v) for k, v in pts.iloc[0].to_dict().items()} if exp.parameters else {}
    return exp, point


def _num(v) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() else f"{v:g}"


def scope_values(exp: Experiment, metric: str, ranks: str = "sum", reps: str = "mean",
                 unknown: frozenset | None = None) -> pd.DataFrame:
    """Inclusive and exclusive values of ``metric`` per point and callpath (locations reduced with
    ``ranks``, repetitions with ``reps``): columns parameters..., callpath, inclusive, exclusive.
    The exclusive value of a callpath whose own value is not known (``unknown``; by default
    :func:`no_exclusive` of these values: a run whose application timers nest, and its timers) is
    NaN, never the negative difference of nested timers."""
    out = _scope_values(exp, metric, ranks, reps)
    unknown = no_exclusive(exp, metric, out) if unknown is None else unknown
    if unknown:
        out.loc[out["callpath"].astype(str).isin(unknown), "exclusive"] = np.nan
    return out


def no_exclusive(exp: Experiment, metric: str, values: pd.DataFrame | None = None, ranks: str = "sum") -> frozenset:
    """The callpaths whose exclusive ``metric`` is not known: of a campaign's time
    (:data:`~perfcast.experiment.RUN_TIMERS`), a run whose timers' inclusive values add up to more
    than its own at some point of ``values`` (:func:`~perfcast.experiment.timers_nest`, the rule
    :attr:`perfcast.modelset.ModelSet.nested_timers` follows; ``values``: :func:`scope_values`'
    columns, by default those of every point of ``exp`` with ``ranks``) and each of those timers: the
    store does not say which timer holds which (CoMD's total > loop > timestep > force), so neither the
    run's time outside the timers nor any timer's own time is known.  Empty for any other metric."""
    from ..experiment import RUN_TIMERS, timers_nest

    m = exp.metrics.get(metric)
    if m is None or m.description != RUN_TIMERS or m.scope == "unknown":
        return frozenset()
    if values is None:
        values = _scope_values(exp, metric, ranks)
    if not len(values):
        return frozenset()
    keys = [k for k in exp.parameters if k in values.columns]
    v = values.assign(callpath=values["callpath"].astype(str))
    wide = (v.pivot_table(index=keys, columns="callpath", values="inclusive", aggfunc="first", observed=True)
            if keys else v.set_index("callpath")[["inclusive"]].T)
    present = set(wide.columns)
    out: set[str] = set()
    for parent in present:
        kids = _valued_children(exp.tree, parent, present) if parent in exp.tree else []
        if kids and timers_nest(wide[parent].to_numpy(float), wide[kids].sum(axis=1, min_count=1).to_numpy(float)):
            out.update([parent, *kids])
    return frozenset(out)


def _scope_values(exp: Experiment, metric: str, ranks: str = "sum", reps: str = "mean") -> pd.DataFrame:
    """:func:`scope_values` as the scopes convert (a parent's exclusive value its inclusive minus its
    children's, whatever they are)."""
    if metric not in exp.metrics:
        raise PerfcastError(f"no metric {metric!r}; the experiment has: {', '.join(exp.metrics)}")
    if ranks not in RANK_REDUCTIONS:
        raise PerfcastError(f"ranks reduction {ranks!r}: use one of {', '.join(RANK_REDUCTIONS)}")
    m = exp.metrics[metric]
    if m.scope == "unknown":
        raise PerfcastError(f"metric {metric!r} has scope 'unknown' (flat values); this needs inclusive or "
                            f"exclusive values on a calling-context tree")
    # a derived ratio (CPI, a rate, a share) neither sums over ranks nor converts between scopes
    refuse_non_additive(exp, metric, "its inclusive and exclusive costs, sums over ranks and shares of the total")
    sc = _Scoped(exp)
    keys = list(exp.parameters)
    loc = [c for c in LOCATION_COLUMNS if c in exp.data.columns]
    # locations by the one rule (reduce_over_locations): in a sparse profile a callpath missing at
    # a location that measured this metric is a 0 there, so a mean divides by the locations of the
    # point/repetition that have values of *this* metric; a rank that did not record the metric at
    # all (wall time taken once per run while counters come from every rank) is missing, never a
    # zero.  In a dense table (absent_location_is_missing) a location without the callpath is
    # missing: the mean is over the locations present (n_loc None).  Repetitions by the one rule
    # too (reduce_over_repetitions): in a sparse profile a repetition of the point that has values
    # of this metric but not of the callpath is a 0; in a dense table or listed repetitions the
    # repetitions present are combined
    n_loc = _run_locations(exp, metric)
    out = None
    for scope in ("inclusive", "exclusive"):
        v = _reduce(exp, sc.values(metric, scope), ranks, n_loc, reps).rename(columns={"value": scope})
        out = v if out is None else out.merge(v, on=[*keys, "callpath"], how="outer")
    if n_loc is None and loc:
        # dense: a value converted at a location is missing where a value it is made of is
        # (Experiment._gapped); missing at every location of a point, it has no value to show
        hole = out[out[["inclusive", "exclusive"]].isna().any(axis=1)]
        if len(hole):
            r = hole.iloc[0]
            at = ", ".join(f"{k}={_num(r[k])}" for k in keys)
            raise gap_error(exp, f"metric {metric!r}: every rank/thread" + (f" at {at}" if at else "") +
                            f" lacks a value in the subtree of {r['callpath']} (absent from the table: "
                            f"missing, not 0), so its inclusive/exclusive {metric} there is unknown",
                            hole.iloc[:1][keys] if keys else None)
    return out.fillna({"inclusive": 0.0, "exclusive": 0.0})


def _run_locations(exp: Experiment, metric: str) -> pd.Series | None:
    """Locations per run of ``metric`` for :func:`reduce_over_locations` (None: dense, or none)."""
    loc = [c for c in LOCATION_COLUMNS if c in exp.data.columns]
    if absent_location_is_missing(exp) or not loc:
        return None
    return run_locations(exp, exp.data[exp.data["metric"] == metric]).droplevel("metric")


def _reduce(exp: Experiment, v: pd.DataFrame, ranks: str, n_loc, reps: str = "mean") -> pd.DataFrame:
    """Per-location values ``v`` (keys, callpath, value) to one value per point and callpath: over
    the locations with ``ranks``, then over the repetitions with ``reps`` (module doc)."""
    if any(c in v.columns for c in LOCATION_COLUMNS):
        v = reduce_over_locations(exp, v, ranks, counts=n_loc)
    return reduce_over_repetitions(exp, v[[*exp.parameters, "rep", "callpath", "value"]], reps)


def _grouped(prof: "Profile", scope: str, groups: Mapping[str, list]) -> dict:
    """{group: value} of ``prof``'s metric in ``scope``: per location the sum over the callpaths of
    each group (``groups``: callpath -> the groups it belongs to), then combined over the locations
    with ``prof.ranks`` and over the repetitions (:func:`_reduce`).  A procedure's max over ranks
    is the largest of the ranks' own times in it, not the sum of each context's largest."""
    pairs = [(c, i) for c, gs in groups.items() for i, _ in enumerate(gs)]
    if not pairs:
        return {}
    labels = [g for gs in groups.values() for g in gs]
    v = _Scoped(prof.exp).values(prof.metric, scope)
    link = pd.DataFrame({"callpath": [c for c, _ in pairs], "_g": range(len(pairs))})
    v = v.merge(link, on="callpath")
    v["callpath"] = v["_g"].map(dict(enumerate(labels)))
    cols = [c for c in v.columns if c not in ("value", "_g")]
    v = v.groupby(cols, observed=True, sort=False)["value"].sum().reset_index()
    r = _reduce(prof.exp, v, prof.ranks, _run_locations(prof.exp, prof.metric))
    return dict(zip(r["callpath"], r["value"].astype(float)))


#: location reductions a sum over calling contexts does not commute with (views group per location)
_NONADDITIVE = ("max", "min")


def whole_program_total(exp: Experiment, metric: str, ranks: str) -> float:
    """The whole program's value of the scoped ``metric`` at the one point of ``exp``: each
    location's total (the inclusive values of the topmost callpaths at that location,
    :meth:`perfcast.analysis.derived._Scoped.totals`), combined over the locations with ``ranks``
    (:func:`combine_location_totals`).  The one rule for a run's total (``project``'s base time,
    ``scaling-loss``'s totals): with several topmost callpaths run by different ranks, the per-rank
    whole-program time, not the sum of each root's own rank reduction."""
    per = _Scoped(exp).totals(metric)
    if per.empty:
        raise gap_error(exp, f"metric {metric!r}: no rank/thread has a whole-program total" +
                        "".join(f" at {k}={_num(v)}" for k, v in _one_point(exp).items()) +
                        " (each lacks a value the table has at another: missing, not 0)")
    return combine_location_totals(per, ranks)


def _one_point(exp: Experiment) -> dict:
    """The coordinates of ``exp``'s point when it has exactly one, else nothing."""
    pts = exp.points() if exp.parameters else None
    return {k: float(v) for k, v in pts.iloc[0].items()} if pts is not None and len(pts) == 1 else {}


def combine_location_totals(per: pd.Series, ranks: str) -> float:
    """Per-location whole-program totals (index levels ``rep`` and, when per location, ``rank``/
    ``thread``) combined: over the locations of each repetition with ``ranks``, then the mean over
    the repetitions."""
    loc = [c for c in LOCATION_COLUMNS if c in (per.index.names or [])]
    per = per.groupby(level="rep").agg(ranks) if loc else per.groupby(level="rep").sum()
    return float(per.mean())


def tree_total(exp: Experiment, table: pd.DataFrame) -> float:
    """Sum of the inclusive cost of the topmost callpaths present in ``table`` (index callpath)."""
    present = set(table.index)
    top = topmost(exp.tree, present)
    return float(table.loc[top, "inclusive"].sum())


class Wide(NamedTuple):
    """A flat metric's measured means without pandas: ``points`` (the sorted points: a value of
    the one parameter, or a tuple of the parameters' values), ``callpaths`` (the timers' names) and
    ``values`` (points x callpaths, NaN where not measured) -- what a pivot table of them holds
    (:func:`perfcast.modelset.flat_timers`)."""

    points: list
    callpaths: list
    values: np.ndarray


def whole_run_timer(wide: "pd.DataFrame | Wide") -> str | None:
    """Of flat timers (scope unknown: names that do not say what nests in what), the one that holds
    all the others: at least as large as every other timer at every measured point (``wide``: one
    row per point, one column per callpath, mean values, a DataFrame or a :class:`Wide`), e.g.
    Relearn's ``main()`` over its ``Simulation loop``; else None.  Such a timer is the whole run:
    the sum of the timers would count the time nested in it again.  The one rule for what a flat
    experiment's whole run is (``advise``'s cost, ``project``'s base time)."""
    return whole_run_of([timer_extremes(wide)])


def timer_extremes(wide: "pd.DataFrame | Wide") -> tuple:
    """What :func:`whole_run_of` needs of some of a flat metric's timers (``wide`` as in
    :func:`whole_run_timer`), so the whole-run timer of timers read in parts is the one of all of
    them: (the points as a list, the largest and the second largest value at each (duplicates
    counted; -inf: none), the number of timers, the timers that hold all the others of ``wide``
    with their values)."""
    if isinstance(wide, Wide):
        points, names, v = wide.points, wide.callpaths, np.asarray(wide.values, dtype=float)
    else:
        points, names, v = wide.index.tolist(), wide.columns, wide.to_numpy(dtype=float)
    s = np.sort(np.where(np.isnan(v), -np.inf, v), axis=1)
    C = v.shape[1]
    first = s[:, -1] if C else np.full(len(v), -np.inf)
    second = s[:, -2] if C > 1 else np.full(len(v), -np.inf)
    holds = np.flatnonzero(_holding(v, first[:, None], second[:, None], alone=True))
    return points, first, second, C, {names[j]: v[:, j] for j in holds.tolist()}


def _holding(v, first, second, alone: bool = False):
    """Which columns of ``v`` (points x timers, NaN: not measured) are measured at every point and
    at least the largest of the others there (``first``, ``second``: the two largest values of all;
    a point where no other timer is measured holds nothing, unless ``alone``: of a part of the timers)."""
    others = np.where(v == first, second, first)
    above = v >= others * (1 - 1e-9)
    return ~np.isnan(v).any(axis=0) & (above if alone else above & (others > -np.inf)).all(axis=0)


def whole_run_of(parts: list) -> str | None:
    """:func:`whole_run_timer` of the timers of every part (:func:`timer_extremes` of each): the
    first (in name order, as a pivot table's columns) that holds all the others at every point."""
    if sum(p[3] for p in parts) < 2:
        return None
    index = list(parts[0][0])
    if len(parts) > 1:   # the points of all parts, sorted (as the union of their indexes)
        index = sorted(set(index).union(*(p[0] for p in parts[1:])))
    at = {pt: i for i, pt in enumerate(index)}

    def aligned(p, values, fill):
        pos = np.fromiter((at[pt] for pt in p[0]), dtype=np.int64, count=len(p[0]))
        out = np.full(len(index), fill)
        out[pos] = values
        return out

    # the two largest values of all the timers at each point
    tops = np.sort(np.stack([a for p in parts for a in (aligned(p, p[1], -np.inf), aligned(p, p[2], -np.inf))],
                            axis=1), axis=1)
    first, second = tops[:, -1:], tops[:, -2:-1]
    found = [name for p in parts for name, val in p[4].items()
             if _holding(aligned(p, val, np.nan)[:, None], first, second)[0]]
    return min(found) if found else None


def profile(exp: Experiment, metric: str | None = None, at: Mapping[str, float] | None = None,
            ranks: str = "sum") -> Profile:
    """Inclusive/exclusive costs per callpath of ``metric`` at one point (see module doc)."""
    metric = metric or default_metric(exp)
    if metric not in exp.metrics:
        raise PerfcastError(f"no metric {metric!r}; the experiment has: {', '.join(exp.metrics)}")
    # whose own value is unknown: by the whole campaign's points, as the models judge (ModelSet.nested_timers)
    unknown = no_exclusive(exp, metric, ranks=ranks)
    exp, point = select_point(exp, at)
    v = scope_values(exp, metric, ranks, unknown=unknown).set_index("callpath")[["inclusive", "exclusive"]]
    order = [p for p in exp.tree.preorder() if p in v.index]
    table = v.loc[order]
    # the total: the one rule for a run's total (each rank's whole program, then over the ranks),
    # not the sum of each root's own rank reduction (several roots run by different ranks)
    return Profile(exp, metric, point, ranks, table, whole_program_total(exp, metric, ranks) if len(table) else 0.0,
                   frozenset(unknown) & set(map(str, table.index)))


# -- top-down -------------------------------------------------------------------------------------
def _sorted_children(prof: Profile, kids: list[str], sort: str) -> list[str]:
    if sort not in SORT_KEYS:
        raise PerfcastError(f"sort key {sort!r}: use one of {', '.join(SORT_KEYS)}")
    if sort == "tree":
        return kids
    if sort == "name":
        return sorted(kids, key=lambda p: prof.exp.tree.name(p))
    col = prof.table[sort]
    return sorted(kids, key=lambda p: -col.get(p, 0.0))


def top_down(prof: Profile, threshold: float = 0.0, sort: str = "inclusive", depth: int | None = None) -> dict:
    """The calling-context tree with inclusive/exclusive cost and % of total per node.

    Nodes whose inclusive cost is below ``threshold`` percent of the total are hidden with their
    subtrees (counted in ``hidden``).  Returns ``{"nodes": [...], "hidden": n, ...}`` with nodes in
    display order (each with ``depth``)."""
    tree, t = prof.exp.tree, prof.table
    I, E = t["inclusive"].to_dict(), t["exclusive"].to_dict()
    present = set(t.index)
    nodes, hidden = [], 0
    roots = topmost(tree, present)

    def kids_of(p):
        return _valued_children(tree, p, present)

    def n_below(p):
        return 1 + sum(1 for q in tree.descendants(p) if q in present)

    # iterative depth-first walk (calling-context trees can be deeper than Python's recursion limit)
    stack = [(r, 0) for r in reversed(_sorted_children(prof, roots, sort))]
    while stack:
        p, d = stack.pop()
        inc = float(I[p])
        if (threshold and abs(prof.pct(inc)) < threshold) or (depth is not None and d > depth):
            hidden += n_below(p)
            continue
        exc = float(E[p])
        nodes.append({"path": p, "name": tree.name(p), "depth": d, "inclusive": inc, "exclusive": _f(exc),
                      "inclusive_pct": _f(prof.pct(inc)), "exclusive_pct": _f(prof.pct(exc))})
        stack.extend((c, d + 1) for c in reversed(_sorted_children(prof, kids_of(p), sort)))
    return {"view": "top-down", **_head(prof), "nodes": nodes, "hidden": hidden}


def _valued_children(tree, p: str, present: set) -> list[str]:
    """Children of ``p`` with values; a child without values is skipped through to its valued
    descendants."""
    out, stack = [], list(reversed(tree.children(p)))
    while stack:
        c = stack.pop()
        if c in present:
            out.append(c)
        else:
            stack.extend(reversed(tree.children(c)))
    return out


def combined_in_file(exp: Experiment, metric: str) -> str | None:
    """Without per-rank values ``--ranks`` combines nothing: what one value of ``metric`` is instead
    (Caliper avg#: "mean over ranks in the file"); None when the experiment has per-rank values."""
    from ..experiment import NO_RANKS, values_per_run

    if exp.has_locations:
        return None
    holds = values_per_run(exp, metric)
    return "one value per run" if holds == NO_RANKS else holds


def _f(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def _head(prof: Profile) -> dict:
    m = prof.exp.metrics[prof.metric]
    combined = combined_in_file(prof.exp, prof.metric)
    gaps = location_gaps(prof.exp, prof.metric)
    said = location_gaps_warning(gaps)
    rgaps = repetition_gaps(prof.exp, prof.metric)
    rsaid = repetition_gaps_warning(rgaps)
    fewer = _fewer_locations(prof) if gaps else []
    return {"metric": prof.metric, "unit": m.unit, "point": prof.point, "ranks": prof.ranks, "combined": combined,
            **({} if combined else {"over": _over(prof)}),
            **({"fewer_ranks": fewer} if fewer else {}),
            "total": prof.total, "missing_ranks": gaps, **({"missing_repetitions": rgaps} if rgaps else {}),
            "warnings": _negative_exclusive(prof, m) + _unknown_exclusive(prof, m) + ([said] if said else [])
            + ([rsaid] if rsaid else [])
            + _unbalanced(prof, fewer),
            "flat": flat_profile(prof)}


def flat_profile(prof: Profile) -> str | None:
    """What the view says of a flat profile -- a metric its reader knows has no callers (cachegrind's
    counts, per function: :data:`perfcast.io.cachegrind.DESCRIPTIONS`, the metric named and described
    as that reader makes it) with every callpath holding it at the point a root or a root's child
    (``app->function``) --: a function's inclusive value is its own code's only, equal to its
    exclusive, not that of the functions it calls, which sit beside it.  None otherwise (a calling-
    context tree, or a two-level tree no reader said was flat)."""
    from ..io.cachegrind import DESCRIPTIONS

    m = prof.exp.metrics[prof.metric]
    if not m.description or m.description != DESCRIPTIONS.get(prof.metric):
        return None
    tree = prof.exp.tree
    depth1 = [str(p) for p in prof.table.index if tree.parent(str(p)) is not None]
    if not depth1 or any(tree.parent(tree.parent(p)) is not None for p in depth1):
        return None
    roots = sorted({tree.parent(p) for p in depth1})
    return (f"flat profile: cachegrind records no callers, so its {prof.metric} is counted per function, each "
            f"directly below {' or '.join(roots)}: a function's inclusive {prof.metric} is its own code's only, "
            f"equal to its exclusive, not that of the functions it calls (they are listed beside it)")


def _over(prof: Profile) -> str:
    """The locations the metric's values are reduced over at the point: those holding the metric, not
    every rank of the run (a campaign's wall time is one rank's while its counters are every rank's:
    "ranks sum over 4 ranks" said of one rank's value)."""
    held = describe_locations(prof.exp.select(metric=prof.metric))
    run = describe_locations(prof.exp)
    return held if held == run else f"{held} (of {run} in the run: the others hold no {prof.metric})"


def _fewer_locations(prof: Profile) -> list[dict]:
    """The scopes whose values are reduced over fewer ranks/threads than hold the metric at the point
    (a dense table: missing at the others, so the reduction used the locations present; a parent's
    exclusive value and the inclusive values above a gap are missing where the gap is):
    ``{"path", "scope", "locations", "of"}`` in tree order."""
    exp = prof.exp
    loc = [c for c in LOCATION_COLUMNS if c in exp.data.columns]
    if not loc or not absent_location_is_missing(exp):
        return []
    d = exp.data
    of = int(d.loc[d["metric"] == prof.metric, loc].drop_duplicates().shape[0])
    sc = _Scoped(exp)
    out = []
    counts = {}
    for scope in ("inclusive", "exclusive"):
        v = sc.values(prof.metric, scope).dropna(subset=["value"])
        counts[scope] = v[[*loc, "callpath"]].drop_duplicates().groupby("callpath", observed=True).size()
    for p in prof.table.index:
        for scope in ("inclusive", "exclusive"):
            n = int(counts[scope].get(p, 0))
            if n < of:
                out.append({"path": p, "scope": scope, "locations": n, "of": of})
    return out


def _unbalanced(prof: Profile, fewer: list[dict]) -> list[str]:
    """Said when the exclusive values do not add up to the total because some are reduced over
    fewer ranks than others (:func:`_fewer_locations`; a sum or mean over ranks, which adds up
    along the tree when every value is over the same ranks)."""
    if not fewer or prof.ranks not in ("sum", "mean") or not prof.total or prof.no_exclusive:
        return []
    added = math.fsum(float(x) for x in prof.table["exclusive"])
    if abs(added - prof.total) <= 1e-9 * abs(prof.total):
        return []
    which = ", ".join(f"{f['path']} ({f['scope']}: {f['locations']} of {f['of']})" for f in fewer[:6])
    more = f" and {len(fewer) - 6} more" if len(fewer) > 6 else ""
    return [f"the exclusive {prof.metric} values add up to {added:.6g}, {100 * added / prof.total:.1f}% of the total "
            f"{prof.total:.6g}, not 100%: {which}{more} are {prof.ranks}s over fewer ranks than the others "
            f"(missing at the rest, not 0), so the columns and their percentages do not add up"
            + ("; --ranks mean reduces each over the ranks that hold it" if prof.ranks == "sum" else "")]


def _negative_exclusive(prof: Profile, m) -> list[str]:
    """A time, count or byte cost whose exclusive value is below zero: its children's inclusive values
    exceed its own.  Said, with why when the metric tells (a max or min over ranks does not add up along
    the tree: Caliper max#/min#), instead of printing negative costs as if they were measured."""
    if m.kind not in ("time", "count", "bytes"):
        return []
    t = prof.table
    neg = t[t["exclusive"] < -1e-9 * t["inclusive"].abs().clip(lower=1e-300)]
    if neg.empty:
        return []
    worst = neg["exclusive"].idxmin()
    why = ("a maximum or minimum over ranks does not add up along the calling tree, so its exclusive values "
           "are no costs (the mean or sum over ranks does)" if m.aggregate.startswith(("max", "min")) else
           "the children's inclusive values exceed their parent's: " + negative_exclusive_cause(m))
    return [f"{len(neg)} scope(s) with a negative exclusive {prof.metric} (e.g. {worst}: "
            f"{float(neg.at[worst, 'exclusive']):.4g}): {why}"]


def _unknown_exclusive(prof: Profile, m) -> list[str]:
    """Said of the scopes whose exclusive value is not known (:func:`no_exclusive`): shown as n/a."""
    if not prof.no_exclusive:
        return []
    t = prof.table
    runs = [p for p in t.index if p in prof.no_exclusive and prof.exp.tree.parent(p) not in prof.no_exclusive]
    return [f"the exclusive {prof.metric} of {', '.join(runs)} and its {len(prof.no_exclusive) - len(runs)} timer(s) "
            f"is not known (n/a): {negative_exclusive_cause(m)}, and they add up to more than the run at some "
            f"measured point, so neither the run's time outside them nor any timer's own time is known; their "
            f"inclusive values are measured"]


def negative_exclusive_cause(m) -> str:
    """Why a scope of metric ``m`` (a :class:`~perfcast.experiment.Metric`, summed or averaged over the
    ranks) can have children whose inclusive values exceed its own: a campaign's time
    (:data:`~perfcast.experiment.RUN_TIMERS`) stores every timer the application printed under the
    run, not which holds which, so timers that nest (CoMD's loop > timestep > force) add up to more
    than the run; any other profile's tree is not consistent."""
    from ..experiment import RUN_TIMERS

    if m.description == RUN_TIMERS:
        return ("the application's timers nest (the campaign stores each timer it printed under the run, not which "
                "holds which)")
    return "the profile's tree is not consistent"


# -- bottom-up and flat ---------------------------------------------------------------------------
def outermost(tree, key: Mapping | None = None) -> dict[str, bool]:
    """Callpath -> True when no ancestor has the same frame name (one pass over the tree), or the
    same ``key[callpath]`` when given (:func:`procedure_keys`)."""
    out: dict[str, bool] = {}
    on_path: dict = {}
    for r in tree.roots():
        stack = [(r, False)]
        while stack:
            p, leaving = stack.pop()
            name = tree.name(p) if key is None else key[p]
            if leaving:
                on_path[name] -= 1
                continue
            out[p] = not on_path.get(name)
            on_path[name] = on_path.get(name, 0) + 1
            stack.append((p, True))
            stack.extend((c, False) for c in reversed(tree.children(p)))
    return out




def procedure_keys(tree) -> dict[str, tuple]:
    """Callpath -> the procedure its cost belongs to in a flat or bottom-up view: ``(name, where)``
    of a frame recorded as a procedure (:class:`perfcast.experiment.Frame`), the key of the nearest
    procedure above a loop or statement, and ``(frame name, None)`` for a frame without a recorded
    kind (or a loop/statement with no procedure above it)."""
    return procedures(tree)[0]


def procedures(tree) -> tuple[dict[str, tuple], dict[str, str]]:
    """``(key, entry)``: :func:`procedure_keys`' key of each callpath, and the callpath of the frame
    at which that procedure's calling context begins (the procedure frame a loop or statement sits
    in; the callpath itself for a procedure frame, a frame without kind or a loop/statement with no
    procedure above it).  An entry's parent is where the procedure was called from: its caller is
    that parent's procedure (a call from a loop or a line of g is a call from g)."""
    key: dict[str, tuple] = {}
    entry: dict[str, str] = {}
    for p, parent, name, _ in tree.walk():
        fr = tree.frame(p)
        if fr is None:
            key[p], entry[p] = (name, None), p
        elif fr.kind == "procedure":
            key[p], entry[p] = (fr.procedure or name, fr.where), p
        elif parent is not None and key[parent][1] is not None:
            key[p], entry[p] = key[parent], entry[parent]
        else:
            key[p], entry[p] = (name, None), p
    return key, entry


def _procedure_names(keys: Iterable[tuple]) -> dict[tuple, str]:
    """Row names of procedure keys: the name, and its file/module where two procedures share it."""
    keys = list(dict.fromkeys(keys))
    count: dict[str, int] = {}
    for n, _ in keys:
        count[n] = count.get(n, 0) + 1
    out, seen = {}, set()
    for k in keys:
        name = f"{k[0]} ({k[1]})" if count[k[0]] > 1 and k[1] else k[0]
        n, i = name, 1
        while n in seen:     # still equal (a frame without kind named like a procedure): numbered
            i += 1
            n = f"{name} #{i}"
        seen.add(n)
        out[k] = n
    return out


def flat(prof: Profile, threshold: float = 0.0, sort: str = "exclusive") -> dict:
    """Costs of each procedure aggregated over all its calling contexts (loops and statements in
    the procedure they sit in: :func:`procedure_keys`)."""
    tree, t = prof.exp.tree, prof.table
    rows = []
    key = procedure_keys(tree)
    outer = outermost(tree, key)
    inst: dict[tuple, list[str]] = {}
    for p in t.index:
        inst.setdefault(key[p], []).append(p)
    label = _procedure_names(inst)
    per_rank = prof.ranks in _NONADDITIVE
    if per_rank:
        exc_of = _grouped(prof, "exclusive", {c: [label[k]] for k, cs in inst.items() for c in cs})
        inc_of = _grouped(prof, "inclusive", {c: [label[k]] for k, cs in inst.items() for c in cs if outer[c]})
    for k, ctxs in inst.items():
        name = label[k]
        if per_rank:
            exc, inc = exc_of.get(name, 0.0), inc_of.get(name, 0.0)
        else:
            exc = float(t.loc[ctxs, "exclusive"].sum(skipna=False))
            inc = float(t.loc[[c for c in ctxs if outer[c]], "inclusive"].sum())
        if prof.no_exclusive.intersection(ctxs):
            exc = math.nan  # a context's own value is not known (no_exclusive)
        # calling contexts: the procedure's own frames (its loops' and statements' are inside them)
        frames = [c for c in ctxs if (fr := tree.frame(c)) is None or fr.kind == "procedure"]
        rows.append({"name": name, **({"where": k[1]} if k[1] else {}), "inclusive": inc, "exclusive": _f(exc),
                     "inclusive_pct": _f(prof.pct(inc)), "exclusive_pct": _f(prof.pct(exc)),
                     "contexts": len(frames or ctxs)})
    return {"view": "flat", **_head(prof), "rows": _sort_rows(rows, threshold, sort, prof)}


def _sort_rows(rows, threshold, sort, prof, key_thr="inclusive"):
    if sort not in SORT_KEYS:
        raise PerfcastError(f"sort key {sort!r}: use one of {', '.join(SORT_KEYS)}")
    if threshold:
        rows = [r for r in rows if abs(prof.pct(r[key_thr])) >= threshold]
    if sort == "name":
        return sorted(rows, key=lambda r: r["name"])
    if sort == "tree":
        return rows
    return sorted(rows, key=lambda r: _desc(r[sort]))


def _desc(x) -> float:
    """Sort key, largest first; a value not known (None) last."""
    return math.inf if x is None else -x


def bottom_up(prof: Profile, threshold: float = 0.0, sort: str = "exclusive", depth: int | None = None) -> dict:
    """Callers view: each procedure with its costs over all contexts, expandable upward.

    Procedures are the flat view's (:func:`procedures`: a loop's or statement's cost is its
    procedure's, procedures of one name in different files/modules apart), and so are the callers:
    the caller of a calling context of f is the procedure the call comes from (a call from a loop or
    line of g is a call from g), as HPCToolkit's Callers View shows procedure frames.  ``callers``
    of a procedure f nest the chains of calling procedures: the entry f <- g holds the costs of the
    contexts of f called from g, f <- g <- h those called from g called from h, and so on up to
    ``depth`` levels (all when None).  Inclusive costs count outermost contexts only (recursion
    once); ``contexts`` counts f's calling contexts (its procedure frames).  Each caller entry has
    ``call_sites``: the lines ``FILE:LINE`` of the caller that make the calls it holds, when the
    reader recorded them (:attr:`perfcast.experiment.Frame.site`; empty when unknown).  With
    ``ranks`` max or min an entry is the largest (smallest) rank's own sum, so the callers of an
    entry may add up to more (less) than it: ``callers_note`` says so when they do."""
    tree, t = prof.exp.tree, prof.table
    I, E = t["inclusive"].to_dict(), t["exclusive"].to_dict()
    key, entry = procedures(tree)
    outer = outermost(tree, key)
    # each callpath's chain of procedures: its own, its caller's, the caller's caller, ...
    walks: dict[str, list] = {}
    sites: dict[str, list] = {}   # callpath -> the call site of each link of its chain ("" unknown)
    for c in t.index:
        ks, a = [key[c]], tree.parent(entry[c])
        ss = [_site(tree, entry[c])]
        while a is not None and (depth is None or len(ks) <= depth):
            ks.append(key[a])
            ss.append(_site(tree, entry[a]))
            a = tree.parent(entry[a])
        walks[c], sites[c] = ks, ss
    # row names: the flat view's (its rows' keys first), then the callers' not among them
    label = _procedure_names([*(key[c] for c in t.index), *(k for ks in walks.values() for k in ks[1:])])
    out = []
    chains: dict = {}          # callpath -> the entries (name, caller, caller's caller, ...) it adds to
    nodes: dict = {}           # entry -> its row
    seen: dict = {}            # entry -> the calling contexts (entry frames) counted in it

    def new(k, caller=False):
        return {"name": label[k], **({"where": k[1]} if k[1] else {}), "inclusive": 0.0, "exclusive": 0.0,
                "contexts": 0, **({"call_sites": {}} if caller else {}), "callers": {}}

    for c in t.index:
        exc = float(E[c])
        inc = float(I[c]) if outer[c] else 0.0
        ks = walks[c]
        chain = tuple(label[k] for k in ks)
        chains[c] = [chain[:i + 1] for i in range(len(chain))]
        if chain[:1] not in nodes:
            nodes[chain[:1]] = top = new(ks[0])
            out.append(top)
        node = nodes[chain[:1]]
        for i, ch in enumerate(chains[c]):
            if i:
                node = node["callers"].get(ch[-1]) or node["callers"].setdefault(ch[-1], new(ks[i], True))
                nodes[ch] = node
                if sites[c][i - 1]:   # the line of this caller that calls the callee below it
                    node["call_sites"][sites[c][i - 1]] = None
            node["inclusive"] += inc
            node["exclusive"] += exc
            if entry[c] not in seen.setdefault(ch, set()):
                seen[ch].add(entry[c])
                node["contexts"] += 1
    if prof.ranks in _NONADDITIVE:
        # per location first (as flat): each entry's max/min over ranks of the ranks' own sums
        exc_of = _grouped(prof, "exclusive", chains)
        inc_of = _grouped(prof, "inclusive", {c: ks for c, ks in chains.items() if outer[c]})
        for k, node in nodes.items():
            node["exclusive"], node["inclusive"] = exc_of.get(k, 0.0), inc_of.get(k, 0.0)
        for c in prof.no_exclusive:   # a context's own value is not known (no_exclusive)
            for ch in chains.get(c, ()):
                nodes[ch]["exclusive"] = math.nan

    def order(r):
        return (_desc(r[sort]), r["name"]) if sort in ("inclusive", "exclusive") else r["name"]

    # children before parents, without recursion (caller chains are as deep as the tree)
    for top in out:
        todo, order_ = [top], []
        while todo:
            node = todo.pop()
            order_.append(node)
            todo.extend(node["callers"].values())
        for node in reversed(order_):
            node["inclusive_pct"] = _f(prof.pct(node["inclusive"]))
            node["exclusive_pct"] = _f(prof.pct(node["exclusive"]))
            node["exclusive"] = _f(node["exclusive"])
            node["callers"] = sorted(node["callers"].values(), key=order)
            if "call_sites" in node:
                node["call_sites"] = sorted(node["call_sites"], key=_site_order)

    note = _callers_note(prof, out)
    return {"view": "bottom-up", **_head(prof), **({"callers_note": note} if note else {}),
            "rows": _sort_rows(out, threshold, sort, prof)}


def _callers_note(prof: Profile, rows: list[dict]) -> str | None:
    """With ``ranks`` max (min) each caller entry is the largest (smallest) rank's own sum in it,
    possibly another rank's than its row's: the entries of a procedure's callers can add up to more
    (less) than the procedure's row.  Said when it happens (None otherwise), with the first such row."""
    if prof.ranks not in _NONADDITIVE:
        return None
    worse = (lambda a, b: a > b * (1 + 1e-9) + 1e-300) if prof.ranks == "max" else (lambda a, b: a < b * (1 - 1e-9))
    n, first, todo = 0, None, [((r["name"],), r) for r in rows]
    while todo:
        chain, r = todo.pop()
        for scope in ("exclusive", "inclusive"):
            if r["callers"] and worse(math.fsum(c[scope] for c in r["callers"]), r[scope]):
                n += 1
                if first is None or chain < first[0]:
                    first = (chain, scope)
                break
        todo.extend(((*chain, c["name"]), c) for c in r["callers"])
    if not n:
        return None
    more, which = ("more", "largest") if prof.ranks == "max" else ("less", "smallest")
    return (f"--ranks {prof.ranks}: each caller entry is the {which} rank's own sum in it, not necessarily the rank "
            f"of the entry above it, so the callers of {n} entr{'y' if n == 1 else 'ies'} add up to {more} than the "
            f"entry (e.g. the {first[1]} of {' <- '.join(first[0])}); --ranks sum or mean add up")


def _site(tree, path: str) -> str:
    """The call site a calling context was called from (:attr:`perfcast.experiment.Frame.site`; "" unknown)."""
    fr = tree.frame(path)
    return fr.site if fr is not None else ""


def _site_order(site: str) -> tuple:
    """Call sites ``FILE:LINE`` by file, then line number (10 after 9)."""
    file, _, line = site.rpartition(":")
    return (file, int(line), "") if line.isdigit() else (site, -1, site)


# -- hot path -------------------------------------------------------------------------------------
def hot_path(prof: Profile, start: str | None = None, fraction: float = 0.5) -> dict:
    """From ``start`` (default: the costliest root), follow the child with the largest inclusive
    cost while it holds at least ``fraction`` of its parent's inclusive cost (hpcviewer's rule,
    default 50 %).  The last node is where the cost concentrates."""
    tree, t = prof.exp.tree, prof.table
    I, E = t["inclusive"].to_dict(), t["exclusive"].to_dict()
    if not 0 < fraction <= 1:
        raise PerfcastError(f"hot-path fraction {fraction}: must be in (0, 1]")
    present = set(t.index)
    if start is None:
        roots = topmost(tree, present)
        start = max(roots, key=lambda p: I[p])
    elif start not in present:
        hits = [p for p in t.index if tree.name(p) == start]
        if len(hits) == 1:
            start = hits[0]
        else:
            what = f"names {len(hits)} calling contexts" if hits else "is not a callpath with values"
            raise PerfcastError(f"hot path start {start!r} {what}; give the full callpath (a->b->c)")
    path = [start]
    while True:
        cur = path[-1]
        kids = _valued_children(tree, cur, present)
        if not kids:
            break
        best = max(kids, key=lambda c: I[c])
        if I[best] < fraction * I[cur] or I[cur] <= 0:
            break
        path.append(best)
    nodes = [{"path": p, "name": tree.name(p), "inclusive": float(I[p]),
              "exclusive": _f(E[p]), "inclusive_pct": _f(prof.pct(I[p])),
              "exclusive_pct": _f(prof.pct(E[p]))} for p in path]
    return {"view": "hot-path", **_head(prof), "fraction": fraction, "nodes": nodes}
