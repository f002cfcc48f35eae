"""The Experiment: the one currency of perfcast.

An Experiment is

* ``parameters`` -- names of the varied quantities (``p``, ``n``, ...), in order;
* a calling-context tree (:class:`CallTree`) of callpaths with explicit parent links;
* ``metrics`` -- :class:`Metric` with unit, kind and the meaning of its values on the tree;
* ``data`` -- one tidy long :class:`pandas.DataFrame`, a row per measured value, with columns

  ``<one float column per parameter>, rep, callpath, metric, value[, rank[, thread]]``

  a parameter column is float32 when every value in it is exactly a float32, float64 otherwise
  (:func:`coordinate_dtype`: the width is storage, the values are the float64 ones);

  ``rep`` numbers the repetitions of a point (0, 1, ...; a signed integer column, int64 unless the
  source handed over a narrower one); ``rank``/``thread`` are present when
  the source kept per-location values (an absent column means the value is already a total);
* ``meta`` -- a JSON-serialisable dict (sources, per-point metadata such as Adiak records).

Points are the distinct parameter coordinates found in ``data``.  Experiments are treated as
immutable: every operation returns a new one.  The value table is the experiment's own copy, unless
a reader hands its freshly built columns over (``owned=True``: no copy of a table that can be
several hundred MB).
"""

from __future__ import annotations

import bisect
import copy
import fnmatch
import math
from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from . import arrow_kernels as pc
from .errors import PerfcastError
from .lazy import LazyModule
from .table import Category, Columns, arrow_array, column, distinct_sorted, pandas_object
from .text import SEP  # noqa: F401  (the callpath separator, re-exported: it lives where the terminal reads it)

sp = LazyModule("scipy.sparse")   # imported where a sparse matrix is made (perfcast.lazy)
pd = LazyModule("pandas")   # the value table as a DataFrame: made when asked for (Experiment.data)

#: Column names with a fixed meaning; parameters may not use them.
RESERVED = ("rep", "callpath", "metric", "value", "rank", "thread")
LOCATION_COLUMNS = ("rank", "thread")
KINDS = ("time", "count", "bytes", "other")
SCOPES = ("inclusive", "exclusive", "unknown")
#: the description of ``perfcast collect``'s ``time`` metric: the run's wall time on the root and the
#: application's own timers beside it -- run-level values (rank 0), which may overlap (a loop total
#: holding the other timers), not times of the profiled functions even where a timer is named like one
RUN_TIMERS = "wall time of the run (app) and application-reported timers"
AGGREGATES = ("mean", "median", "min", "max", "sum", "std", "count")


def timers_nest(mine, children, tol: float = 1e-9) -> bool:
    """The one rule for a run whose application timers nest (:data:`RUN_TIMERS`: the campaign stores
    each timer under the run, not which holds which): ``children`` (the sum of the run's timers per
    point, NaN where none was measured) exceeds ``mine`` (the run's, NaN where not measured) by more
    than the relative ``tol`` at some point where both were measured.  Timers inside a run that do not
    overlap add up to less than it wherever they are measured, so one point where they add up to more
    shows that some hold others.  CoMD's total > loop > timestep > force add up to more than the run
    at every point; HPCCG's Total holds its DDOT, WAXPBY and SPARSEMV, which add up to more than the
    run from n = 28 on (bench/data/hpccg-n), where the run's start-up no longer outweighs the doubly
    counted parts -- at every point their sum is no part of the run (no bound on it,
    :attr:`perfcast.modelset.ModelSet.nested_timers`) and no timer's own time is known (the run's
    exclusive time is no time: :func:`perfcast.analysis.views.no_exclusive`)."""
    mine, children = np.asarray(mine, dtype=float), np.asarray(children, dtype=float)
    there = ~np.isnan(mine) & ~np.isnan(children)
    return bool(there.any() and np.any(children[there] > mine[there] * (1 + tol)))

_TIME_UNITS = {"s", "sec", "secs", "second", "seconds", "ms", "us", "usec", "ns", "nsec", "cycles"}
_BYTE_UNITS = {"b", "byte", "bytes", "kb", "mb", "gb", "kib", "mib", "gib"}


def guess_kind(name: str, unit: str = "") -> str:
    """Best guess of a metric's kind from its name and unit (readers may override)."""
    u, n = unit.strip().lower(), name.strip().lower()
    if u in _TIME_UNITS or n in {"time", "min_time", "max_time", "walltime", "runtime"} or "time" in n:
        return "time"
    if u in _BYTE_UNITS or "bytes" in n:
        return "bytes"
    if u in {"#", "occ", "count", "counts", "visits", "calls"} or n.startswith("papi_") or n in {
        "visits", "calls", "count", "instructions", "cycles"}:
        return "count"
    return "other"


def location_reduction(metric: "Metric") -> str:
    """How ``reduce_locations("auto")`` combines a metric's per-rank/thread values: counts and bytes
    are summed (the total work of the run), times and other metrics averaged (a typical location)."""
    return "sum" if metric.kind in ("count", "bytes") else "mean"


#: the end of the aggregate label of a metric held by one location only (:func:`_single_location`)
ONE_LOCATION = " only"


def aggregate_labels(exp: "Experiment", locations: str = "auto") -> dict[str, str]:
    """metric -> how its value combines the processes once the locations are reduced by
    ``locations`` (``auto``: :func:`location_reduction`; else one of :data:`AGGREGATES`): the
    reader's label (``Metric.aggregate``) where it has one, ``rank 0 only`` (:func:`_single_location`)
    where every value is at one location -- nothing was combined, whatever ``locations`` says (a
    campaign's wall time and timers: rank 0) --, else ``sum over ranks``, ``mean over threads``,
    ``max over locations`` (ranks and threads), ...; ``""`` for a metric without locations and label.
    The one rule for the label ``perfcast model`` shows beside a metric and ``perfcast export`` notes."""
    out = {}
    where = [c for c in LOCATION_COLUMNS if c in exp.cols]
    over = "ranks" if where == ["rank"] else "threads" if where == ["thread"] else "locations"
    single = _single_location(exp, where) if where else {}
    for name, m in exp.metrics.items():
        label = m.aggregate
        if not label and where:
            label = single.get(name) or \
                f"{location_reduction(m) if locations == 'auto' else locations} over {over}"
        out[name] = label
    return out


def _single_location(exp: "Experiment", where: list[str]) -> dict[str, str]:
    """metric -> ``"rank 0 only"`` (``"thread 2 only"``, ``"rank 0, thread 1 only"``) for each metric
    whose values are all at one and the same location: no reduction over the locations happened."""
    d = exp.data
    cols = [c for c in where if c in d.columns]
    if not cols:
        return {}
    d = d[["metric", *cols]].dropna(subset=cols)
    if d.empty:
        return {}
    first = d.groupby("metric", observed=True)[cols].agg(["nunique", "first"])
    out = {}
    for name, row in first.iterrows():
        if all(int(row[(c, "nunique")]) == 1 for c in cols):
            out[str(name)] = ", ".join(f"{c} {_loc(row[(c, 'first')])}" for c in cols) + ONE_LOCATION
    return out


def _loc(v) -> str:
    f = float(v)
    return str(int(f)) if f.is_integer() else str(v)



def has_ancestor(cp: str, cps, parents: Mapping[str, str]) -> bool:
    """Some ancestor of ``cp`` (``parents``: child -> parent links) is among ``cps``: ``cp`` is not
    topmost among them (the one rule the cost ranking's root and the model set's context use)."""
    seen = set()
    par = parents.get(cp)
    while par is not None and par not in seen:
        if par in cps:
            return True
        seen.add(par)
        par = parents.get(par)
    return False


def absent_location_is_missing(exp: "Experiment") -> bool:
    """The one rule for a callpath without a value at a location (rank/thread) that measured the
    metric at the same point and repetition.

    Dense inputs (tidy CSV/JSON Lines/Parquet tables: ``meta["locations"] == "dense"``) hold a value
    for every location that ran a callpath, so one they lack is missing: rank reductions combine the
    locations present and :func:`location_gaps` says which lack a value.  Sparse profiles (Caliper,
    HPCToolkit, CUBE, ...) record only what a location ran: an absence means "did not run", a zero
    (:func:`reduce_over_locations`, the one reduction over locations of the model path, the views
    and :meth:`Experiment.reduce_locations`)."""
    return exp.meta.get("locations") == "dense"


def describe_locations(exp: "Experiment") -> str:
    """``4 ranks``, ``8 locations (4 rank(s) x 2 threads)`` or ``1 rank`` for ``exp``'s data: what a
    reduction over the locations combines (``project``'s base time, the views' headings)."""
    d = exp.data
    nr = int(d["rank"].nunique()) if "rank" in d.columns else 1
    nt = int(d["thread"].nunique()) if "thread" in d.columns else 1
    if nt > 1:
        n = int(d[[c for c in ("rank", "thread") if c in d.columns]].drop_duplicates().shape[0])
        return f"{n} locations ({nr} rank(s) x {nt} threads)"
    return f"{nr} rank{'s' if nr != 1 else ''}"


def reduce_over_locations(exp: "Experiment", data: pd.DataFrame, how: str, sort: bool = False,
                          counts: pd.Series | None = None) -> pd.DataFrame:
    """The one rule for combining a callpath's per-location values of ``exp`` (rows ``data`` of it
    or values computed from them, with their location columns) into one value per group of the
    other columns (``how``: one of :data:`AGGREGATES`; groups in order of first appearance, or
    sorted with ``sort``).

    In a dense experiment (:func:`absent_location_is_missing`) the values present are combined.
    In a sparse profile a location that measured the metric at the same point and repetition but
    holds no value of the callpath did not run it: it counts as a 0.  That is what the formats
    say and what their peer tools do: CUBE stores a value per location for every listed cnode and
    0 for every unlisted one, and Extra-P 4.2.5 averages all locations of a CUBE file (weak
    scaling); Hatchet's Caliper readers add a 0 row for every rank that lacks a node before
    averaging over ranks.  So a per-rank mean of an I/O region run by rank 0 alone is rank 0's
    time divided by every rank of the run, and a child's mean never exceeds its parent's.
    ``counts``: the number of locations per run (the group columns other than ``callpath``, e.g.
    point, ``rep`` and ``metric``; index named by them, as :func:`run_locations` gives) when the
    caller has them or ``data`` lacks the metric column."""
    if how not in AGGREGATES:
        raise PerfcastError(f"unknown aggregate {how!r}; use one of {', '.join(AGGREGATES)}")
    loc = [c for c in LOCATION_COLUMNS if c in data.columns]
    keys = [c for c in data.columns if c not in (*loc, "value")]
    g = data.groupby(keys, observed=True, sort=sort)["value"]
    out = g.agg(how).reset_index()
    if how == "std":
        out["value"] = out["value"].fillna(0.0)
    if not loc or absent_location_is_missing(exp) or how == "sum" or len(out) == 0:
        return out
    if counts is None:
        counts = run_locations(exp, data)
    run = list(counts.index.names)
    size = g.size().to_numpy()
    n = out[run].merge(counts.rename("_n").reset_index(), on=run, how="left")["_n"].to_numpy()
    gap = np.flatnonzero(size < n)
    if len(gap) == 0:
        return out
    if how in ("mean", "max", "min"):
        vals = out["value"].to_numpy(dtype=float).copy()
        if how == "mean":
            vals[gap] = g.sum().to_numpy(dtype=float)[gap] / n[gap]
        else:
            vals[gap] = (np.maximum if how == "max" else np.minimum)(vals[gap], 0.0)
        out["value"] = vals
        return out
    # median, std, count: the gapped groups' values with their zeros, combined again
    gid = g.ngroup().to_numpy()
    is_gap = np.zeros(len(out), dtype=bool)
    is_gap[gap] = True
    rows = is_gap[gid]
    zeros = np.repeat(gap, (n[gap] - size[gap]).astype(np.int64))
    ids = np.concatenate([gid[rows], zeros])
    vals = np.concatenate([data["value"].to_numpy(dtype=float)[rows], np.zeros(len(zeros))])
    redo = pd.Series(vals).groupby(ids).agg(how)
    if how == "std":
        redo = redo.fillna(0.0)
    v = out["value"].to_numpy(dtype=float).copy()
    v[redo.index.to_numpy()] = redo.to_numpy(dtype=float)
    out["value"] = v
    return out


#: ``meta["repetitions"]`` of formats that list each callpath's repetitions as a value list of its
#: own (Extra-P text/JSON/JSON Lines/Talpas/saved experiments, Extra-P 3, summary CSV): a shorter
#: list is fewer measurements of that callpath, not a run that did not execute it
LISTED_REPETITIONS = "listed"


def absent_repetition_is_zero(exp: "Experiment") -> bool:
    """The one rule for a callpath without a value in a repetition (run) of a point where that
    repetition measured the metric (some callpath has a value of it there), consistent with the
    location rule (:func:`absent_location_is_missing`):

    * sparse profiles (Caliper, CUBE, HPCToolkit, TAU, ...; one repetition is one run's profile,
      which records only what the run executed): the run did not execute the callpath, a 0 (True);
    * dense tidy tables: the value is missing; repetitions are combined over the ones present and
      :func:`repetition_gaps` says which lack one (False);
    * formats whose repetitions are each callpath's own value list (:data:`LISTED_REPETITIONS`):
      a shorter list is fewer measurements, combined over the values listed (False).

    :func:`reduce_over_repetitions` / :func:`fill_absent_repetitions` apply it (the model path and
    the views)."""
    return not absent_location_is_missing(exp) and exp.meta.get("repetitions") != LISTED_REPETITIONS


def _run_keys(exp: "Experiment", data: pd.DataFrame) -> list[str]:
    return [c for c in (*exp.parameters, "metric") if c in data.columns]


def fill_absent_repetitions(exp: "Experiment", data: pd.DataFrame) -> pd.DataFrame:
    """``data`` (rows of ``exp`` reduced to one value per point, repetition, callpath[, metric]: no
    location columns) with, in a sparse profile (:func:`absent_repetition_is_zero`), a 0 row for
    every repetition of a point that has values of the metric but none of a callpath present at
    that point in another repetition; otherwise ``data`` itself."""
    if (not absent_repetition_is_zero(exp) or "rep" not in data.columns or len(data) == 0
            or any(c in data.columns for c in LOCATION_COLUMNS)):
        return data
    rep = data["rep"].to_numpy()
    if rep.min() == rep.max():
        return data
    run = _run_keys(exp, data)
    reps = data[[*run, "rep"]].drop_duplicates()
    cps = data[[*run, "callpath"]].drop_duplicates()
    full = cps.merge(reps, on=run) if run else cps.merge(reps, how="cross")
    keys = [*run, "callpath", "rep"]
    have = data[keys].drop_duplicates()
    if len(full) == len(have):
        return data
    return _with_zeros(data, full, have, keys, "repetitions")


def _with_zeros(data: pd.DataFrame, full: pd.DataFrame, have: pd.DataFrame, keys: list, what: str) -> pd.DataFrame:
    """``data`` and a 0 row for every row of ``full`` whose ``keys`` ``have`` lacks (the rows
    :func:`fill_absent_repetitions` and :func:`fill_absent_points` add); ``what`` names them in the
    error when ``data`` has a column that is not a key."""
    absent = full.merge(have.assign(_have=True), on=keys, how="left")
    absent = absent[absent["_have"].isna()].drop(columns="_have")
    if len(absent) == 0:
        return data
    absent = absent.assign(value=0.0)
    for c in data.columns:
        if c not in absent.columns:
            raise PerfcastError(f"cannot fill absent {what}: column {c!r} is not a key")
    return pd.concat([data, absent[list(data.columns)].astype(data.dtypes.to_dict())], ignore_index=True)


def fill_absent_points(exp: "Experiment", data: pd.DataFrame) -> pd.DataFrame:
    """``data`` (as :func:`fill_absent_repetitions` takes it: one value per point, repetition,
    callpath[, metric]) with, in a sparse profile (:func:`absent_repetition_is_zero`), 0 rows where
    the process count (the one parameter named as one, :data:`perfcast.scaling.PROC_NAMES`) says a
    routine need not run, for callpaths the metric's collector could see (:func:`covered`):

    * at p = 1: a 0 row for every repetition of a point at p = 1 that measured the metric (some
      callpath has a value of it there) for each callpath the metric has elsewhere but not at that
      point: a routine no run at p = 1 executed (miniFE's MPI_Irecv, no neighbour to receive from)
      measured 0 there, not missing -- its model was fitted from p = 2 on and predicted 379 calls at
      p = 1;
    * beyond p = 1: a 0 row for every repetition of every point at p > 1 that measured the metric
      for each callpath present at p = 1 and at no point beyond it (it runs at p = 1 only: Open
      MPI's ``mca_coll_self_allreduce_intra``, 714 Ir at p = 1 in CoMD's cachegrind profiles, was
      predicted 714 at p = 16 where 0 was measured), when the metric's absence means "did not run":
      the metric is exact (:attr:`Metric.exact`: a simulator's counts) or its collector recorded
      what it could see (:data:`COVERAGE`: perfcast collect's timers, PMPI and cachegrind), one rule
      (:func:`absent_means_not_run`).  In a sampled profile (no such record) a routine absent beyond
      p = 1 may have been too short to be sampled there, and it stays missing; so does a metric
      derived from one.

    Both regimes are the fit's (:func:`perfcast.fit.core.zero_rule_sets`); a callpath absent at
    other points is fitted on the points that have it, as before (a 0 there would be taken for a
    point on its law: main->solve absent at p = 4 of p = 4..32).  Outside the coverage the value
    stays missing; a dense table's absence is missing (:func:`repetition_gaps`).  The model path
    applies it (:func:`perfcast.fit.series.statistics_columns`)."""
    from .scaling import PROC_NAMES

    if (not absent_repetition_is_zero(exp) or len(data) == 0 or "metric" not in data.columns
            or any(c in data.columns for c in LOCATION_COLUMNS)):
        return data
    run = _run_keys(exp, data)
    procs = [c for c in run if c != "metric" and str(c).lower() in PROC_NAMES]
    if len(procs) != 1:
        return data
    rkeys = [*run, "rep"] if "rep" in data.columns else run
    runs = data[rkeys].drop_duplicates()
    one = runs[procs[0]].to_numpy(dtype=float) == 1
    if not one.any():
        return data
    cps = data[["metric", "callpath"]].drop_duplicates()
    ok = np.ones(len(cps), dtype=bool)
    for m in cps["metric"].unique():
        sel = (cps["metric"] == m).to_numpy()
        ok[sel] = covered(exp, str(m), cps["callpath"].to_numpy()[sel])
    cps = cps[ok]
    have = data[[*run, "callpath"]].drop_duplicates()
    at1 = have[procs[0]].to_numpy(dtype=float) == 1
    # the points at p = 1 (with the metric) per callpath: a callpath at every one of them has no gap
    per = have[at1].groupby(["metric", "callpath"], observed=True, sort=False).size().rename("_n").reset_index()
    per = cps.merge(per, on=["metric", "callpath"], how="left").fillna({"_n": 0})
    npts = runs[one][run].drop_duplicates().groupby("metric", observed=True, sort=False).size().rename("_N").reset_index()
    gap = per.merge(npts, on="metric").query("_n < _N")[["metric", "callpath"]]
    full = [cps.merge(gap, on=["metric", "callpath"]).merge(runs[one], on="metric")]
    # callpaths at p = 1 only, of metrics whose absence means "did not run"
    sure = [m for m in cps["metric"].unique() if absent_means_not_run(exp, str(m))]
    if sure and (~one).any():
        beyond = have[~at1][["metric", "callpath"]].drop_duplicates().assign(_b=True)
        only = cps[cps["metric"].isin(sure)].merge(have[at1][["metric", "callpath"]].drop_duplicates(),
                                                   on=["metric", "callpath"])
        only = only.merge(beyond, on=["metric", "callpath"], how="left")
        only = only[only["_b"].isna()].drop(columns="_b")
        if len(only):
            full.append(only.merge(runs[~one], on="metric"))
    full = pd.concat(full, ignore_index=True) if len(full) > 1 else full[0]
    if len(full) == 0:
        return data
    return _with_zeros(data, full, have, [*run, "callpath"], "points")


def reduce_over_repetitions(exp: "Experiment", data: pd.DataFrame, how: str = "mean") -> pd.DataFrame:
    """The one rule for combining the repetitions of a point: ``data`` (one value per point,
    repetition, callpath[, metric], locations already reduced: :func:`reduce_over_locations`) to one
    value per point, callpath[, metric] with ``how`` (one of :data:`AGGREGATES`).  In a sparse
    profile a repetition that measured the metric but lacks the callpath counts as a 0
    (:func:`absent_repetition_is_zero`, :func:`fill_absent_repetitions`); in a dense table and
    in listed repetitions the values present are combined."""
    if how not in AGGREGATES:
        raise PerfcastError(f"unknown aggregate {how!r}; use one of {', '.join(AGGREGATES)}")
    d = fill_absent_repetitions(exp, data)
    by = [c for c in d.columns if c not in ("rep", "value")]
    out = d.groupby(by, observed=True, sort=False)["value"].agg(how).reset_index()
    if how == "std":
        out["value"] = out["value"].fillna(0.0)
    return out


def repetition_gaps(exp: "Experiment", metric: str | None = None) -> list[dict]:
    """Per metric and callpath of a dense experiment (:func:`absent_location_is_missing`) that lacks
    values in some repetitions of a point where other callpaths have values of the metric:
    ``missing`` (repetitions without a value, summed over points), ``expected`` (the repetitions
    that measured the metric at those points), ``points`` and ``files`` as :func:`location_gaps`.
    Empty for sparse profiles (absence is a 0 there) and listed repetitions (a shorter list)."""
    if not absent_location_is_missing(exp) or "rep" not in exp.data.columns:
        return []
    d = exp.data if metric is None else exp.data[exp.data["metric"] == metric]
    if len(d) == 0:
        return []
    rep = d["rep"].to_numpy()
    if rep.min() == rep.max():
        return []
    run = [*exp.parameters, "metric"]
    n = d[[*run, "rep"]].drop_duplicates().groupby(run, observed=True, sort=False).size().rename("expected")
    have = d[[*run, "callpath", "rep"]].drop_duplicates().groupby([*run, "callpath"], observed=True,
                                                                   sort=False).size().rename("have").reset_index()
    have = have.merge(n.reset_index(), on=run, how="left")
    have["missing"] = have["expected"] - have["have"]
    gaps = have[have["missing"] > 0]
    if gaps.empty:
        return []
    out = gaps.groupby(["metric", "callpath"], observed=True, sort=False).agg(
        missing=("missing", "sum"), expected=("expected", "sum"), points=("missing", "size")).reset_index()
    out = out.sort_values(["missing", "metric", "callpath"], ascending=[False, True, True])
    at = {k: g for k, g in gaps.groupby(["metric", "callpath"], observed=True, sort=False)}
    return [{"metric": str(r.metric), "callpath": str(r.callpath), "missing": int(r.missing),
             "expected": int(r.expected), "points": int(r.points),
             "files": sources_at(exp, at[(r.metric, r.callpath)][[*exp.parameters]] if exp.parameters else None)}
            for r in out.itertuples(index=False)]


def repetition_gaps_warning(gaps: list[dict], shown: int = 3) -> str | None:
    """One line saying which callpaths/metrics lacked values in some repetitions (:func:`repetition_gaps`)."""
    return _gaps_warning(gaps, "repetition", "averaged over the repetitions present", shown)


def with_absent_zeros(exp: "Experiment") -> pd.DataFrame:
    """``exp``'s value table (a copy) with a 0 row for every location that a sparse profile's
    callpath lacks in a run (point, repetition, metric) where that location measured the metric
    (:func:`reduce_over_locations`), and for every run of a point that measured the metric but
    lacks a callpath the point has in another run (:func:`absent_repetition_is_zero`: a 0 at each
    location of that run); a dense experiment's table or one without such gaps as it is."""
    d = exp.data
    loc = [c for c in LOCATION_COLUMNS if c in d.columns]
    if absent_location_is_missing(exp) or len(d) == 0:
        return d.copy()
    if not loc:
        return fill_absent_repetitions(exp, d).copy()
    run = [c for c in (*exp.parameters, "rep", "metric") if c in d.columns]
    keys = [*run, "callpath", *loc]
    locs = d[[*run, *loc]].drop_duplicates()
    # a callpath belongs to every run of its point (repetitions a profile lacks are 0) or, where
    # an absent repetition is not a 0 (listed repetitions combined with profiles), to its own run
    at = [c for c in run if c != "rep"] if absent_repetition_is_zero(exp) else run
    cps = d[[*at, "callpath"]].drop_duplicates()
    full = cps.merge(locs, on=at)
    if len(full) == len(d):
        return d.copy()
    have = d[keys].assign(_have=True)
    absent = full.merge(have, on=keys, how="left")
    absent = absent[absent["_have"].isna()].drop(columns="_have")
    absent["value"] = 0.0
    out = pd.concat([d, absent[list(d.columns)].astype(d.dtypes.to_dict())], ignore_index=True)
    return out


def values_per_run(exp: "Experiment", metric: str) -> str | None:
    """What one value of ``metric`` is when ``exp`` holds one value of it per run, so that a
    reduction over ranks (``--ranks``) combines nothing: ``"mean over ranks in the file"`` (the
    reader's :attr:`Metric.aggregate`: Caliper ``avg#``), ``"no per-rank values"`` (no rank/thread
    column), ``"at one rank/thread only"`` (every run holds the metric at one location: a campaign's
    wall time, taken on rank 0).  None when some run holds the metric at several locations.  The one
    rule of :func:`ranks_not_combined` and the views' heading (``combined``)."""
    if not exp.has_locations:
        m = exp.metrics[metric]
        return f"{m.aggregate} in the file" if m.aggregate else NO_RANKS
    d = exp.data
    d = d[d["metric"] == metric]
    if len(d) and int(run_locations(exp, d).max()) <= 1:
        return "at one rank/thread only"
    return None


#: :func:`values_per_run` of a metric of an input without rank/thread columns and no aggregate
NO_RANKS = "no per-rank values"


def ranks_not_combined(exp: "Experiment", metrics: Iterable[str] | None = None) -> list[dict]:
    """The metrics of ``exp`` (``metrics`` when given) whose values ``--ranks`` cannot combine:
    ``[{"metric", "holds"}]`` (``holds``: :func:`values_per_run`), in ``metrics``' order.  A command
    given ``--ranks`` explicitly says them (:func:`ranks_not_combined_note`) instead of ignoring it."""
    names = list(exp.metrics) if metrics is None else [m for m in dict.fromkeys(metrics) if m in exp.metrics]
    out = []
    for m in names:
        holds = values_per_run(exp, m)
        if holds is not None:
            out.append({"metric": m, "holds": holds})
    return out


def ranks_not_combined_note(items: list[dict], ranks: str, shown: int = 3) -> str | None:
    """The one-line note of :func:`ranks_not_combined`'s ``items`` for ``--ranks ranks``."""
    if not items:
        return None
    some = "; ".join(f"{i['metric']} holds one value per run ({i['holds']})" for i in items[:shown])
    more = f"; and {len(items) - shown} more metric(s) likewise" if len(items) > shown else ""
    return f"--ranks {ranks}: {some}{more}, so nothing is combined over ranks"


#: ``meta["coverage"]``: per group of metrics, the callpaths their collector could see -- written where
#: inputs measured by different collectors are merged (:func:`combine`, a campaign's runs); a metric in
#: no group was measured wherever the experiment has callpaths (every single-tool profile)
COVERAGE = "coverage"


def metric_coverage(exp: "Experiment", metric: str) -> frozenset[str] | None:
    """The callpaths ``metric``'s collector could see (:data:`COVERAGE`), or None: all of them (no
    record, e.g. a store written before the record existed: then today's sparse rule holds)."""
    for g in exp.meta.get(COVERAGE) or ():
        if metric in g.get("metrics", ()):
            return frozenset(g.get("callpaths", ()))
    return None


def _derivation(exp: "Experiment", metric: str) -> dict | None:
    """The record :mod:`perfcast.analysis.derived` keeps of a derived ``metric`` (``meta["derived"]``), or None."""
    derived = exp.meta.get("derived")
    d = derived.get(metric) if isinstance(derived, dict) else None
    return d if isinstance(d, dict) else None


def absent_means_not_run(exp: "Experiment", metric: str) -> bool:
    """Whether ``metric``'s absence at a point that measured it means the callpath did not run
    there (:func:`fill_absent_points` beyond p = 1): the metric is exact (:attr:`Metric.exact`: a
    simulator's counts) or its collector recorded what it could see (:data:`COVERAGE`: perfcast
    collect's timers, PMPI, cachegrind).  A derived metric inherits a coverage record from its
    covered operands (:mod:`perfcast.analysis.derived`) whatever the others are, so its own says
    nothing: its absence means "did not run" when every operand's does (it is as sure as its least
    sure operand).  ``Ir / samples``, where perf's cpu-clock sampled nothing beyond p = 1 (too
    short to be sampled, not "did not run": x / 0, no value), was 0 beyond p = 1 because ``Ir`` has
    a record.  A sampled metric (:attr:`Metric.sampled`) is never sure, whatever its record says: a
    campaign or ``combine`` records the tree of perf's input as its coverage, and a routine sampled
    at p = 1 only (one sample of a short routine) was 0 beyond p = 1.  A derived metric of a store
    that did not record its operands: not sure."""
    d = _derivation(exp, metric)
    if d is not None:
        ops = d.get("operands")
        return (isinstance(ops, list) and len(ops) > 0
                and all(o != metric and absent_means_not_run(exp, str(o)) for o in ops))
    m = exp.metrics.get(metric)
    if m is not None and m.sampled:
        return False
    return bool(m is not None and m.exact) or metric_coverage(exp, metric) is not None


def covered(exp: "Experiment", metric: str, callpaths) -> np.ndarray:
    """Per callpath of ``callpaths``: could ``metric``'s collector see it?  The one rule of an absent
    value across metrics: within its collector's coverage an absent value is a 0 (a sparse profile
    omits the zeros of what its tool measured: :mod:`perfcast.analysis.derived`); outside it the value
    is *missing* -- cachegrind's ``Ir`` at a campaign's ``app->halo`` timer, which only the timing
    collector saw, is no 0 instructions (derived ``Ir/time`` was 0 there, ``waste`` said 0 % efficiency)."""
    cps = np.asarray(callpaths, dtype=object)
    cov = metric_coverage(exp, metric)
    if cov is None:
        return np.ones(len(cps), dtype=bool)
    return np.fromiter((str(c) in cov for c in cps), dtype=bool, count=len(cps))


def coverage_record(seen: Mapping[str, set], everywhere: Iterable[str]) -> list[dict] | None:
    """:data:`COVERAGE`'s value from ``seen`` (metric -> the callpaths its collector(s) saw) and the
    merged experiment's callpaths ``everywhere``: metrics seeing every callpath are left out, the others
    grouped by their callpath sets; None when every metric sees everything (nothing to record)."""
    every = set(everywhere)
    groups: dict[frozenset, list[str]] = {}
    for m, cps in seen.items():
        cps = frozenset(cps) & every
        if cps != every:
            groups.setdefault(cps, []).append(m)
    if not groups:
        return None
    return [{"metrics": ms, "callpaths": sorted(cps)} for cps, ms in groups.items()]


#: where a tidy table (a DataFrame of :meth:`Experiment.to_pandas`) carries the coverage record:
#: ``df.attrs[TABLE_ATTRS][COVERAGE]`` -- kept by pandas' Parquet writer (``PANDAS_ATTRS``), read
#: back by :meth:`Experiment.from_pandas` and the tidy Parquet reader; a CSV has no place for it
TABLE_ATTRS = "perfcast"


def coverage_from_attrs(attrs, where=None) -> list[dict] | None:
    """The :data:`COVERAGE` record a tidy table's attributes carry (:data:`TABLE_ATTRS`), checked
    to be its shape (a list of ``{"metrics": [names], "callpaths": [callpaths]}``), or None when it
    carries none; a malformed one is an error naming ``where`` (the file)."""
    rec = attrs.get(TABLE_ATTRS) if isinstance(attrs, Mapping) else None
    cov = rec.get(COVERAGE) if isinstance(rec, Mapping) else None
    if cov is None:
        return None
    ok = isinstance(cov, list) and all(
        isinstance(g, Mapping) and all(isinstance(g.get(k), list) and all(isinstance(x, str) for x in g[k])
                                       for k in ("metrics", "callpaths")) for g in cov)
    if not ok:
        raise PerfcastError(f"the table's {TABLE_ATTRS}.{COVERAGE} attribute is not a list of "
                            f"{{metrics: [...], callpaths: [...]}}", where)
    return [{"metrics": list(g["metrics"]), "callpaths": list(g["callpaths"])} for g in cov]


def not_measured_rows(exp: "Experiment", df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (``exp``'s tidy table) with the coverage record written as rows: for each metric with a
    record (:func:`metric_coverage`) and each callpath of the tree its collector never saw, a row with
    an empty value (NaN: an empty cell in CSV, null in JSON Lines) at each point where the metric has
    values (the repetition and location of the point's first row of the metric).  The one format of
    "not measured" in a tidy table (README, tidy): read back by :func:`split_not_measured` (the tidy
    readers, :meth:`Experiment.from_pandas`), so a CSV or JSON Lines export keeps the record, where an
    absence within the coverage stays a 0 and one outside it missing."""
    if not exp.meta.get(COVERAGE) or not len(df):
        return df
    params = [c for c in exp.parameters if c in df.columns]
    paths = exp.tree.paths
    parts = []
    metric_col = df["metric"].astype(str)
    for m in exp.metrics:
        cov = metric_coverage(exp, m)
        if cov is None:
            continue
        outside = [p for p in paths if p not in cov]
        rows = df[(metric_col == m).to_numpy()]
        if not outside or not len(rows):
            continue
        first = rows.drop_duplicates(params) if params else rows.iloc[:1]
        rep = first.loc[first.index.repeat(len(outside))].reset_index(drop=True)
        rep["callpath"] = np.tile(np.asarray(outside, dtype=object), len(first))
        rep["value"] = np.nan
        parts.append(rep)
    if not parts:
        return df
    cps = list(dict.fromkeys([*map(str, df["callpath"].astype(str).unique()), *paths]))
    out = pd.concat([df.astype({"callpath": str, "metric": str}),
                     *[x.astype({"callpath": str, "metric": str}) for x in parts]], ignore_index=True)
    out["callpath"] = pd.Categorical(out["callpath"], categories=sorted(cps))
    out["metric"] = pd.Categorical(out["metric"], categories=sorted(map(str, df["metric"].astype(str).unique())))
    return out


def split_not_measured(df: pd.DataFrame, where=None) -> tuple[pd.DataFrame, dict[str, set[str]], np.ndarray]:
    """A tidy table's rows with an empty value (:func:`not_measured_rows`) split off: (the table
    without them, metric -> the callpaths those rows say its collector never saw, the positions of the
    rows in ``df``).  A metric and callpath with both such a row and a value is an error at
    ``where(i)`` (the file and place of row ``i``: PerfcastError's arguments), never read as one or
    the other."""
    empty = df["value"].isna().to_numpy()
    if not empty.any():
        return df, {}, np.zeros(0, dtype=np.int64)
    pos = np.flatnonzero(empty)
    marks = df.iloc[pos]
    names = pd.DataFrame({"callpath": marks["callpath"].astype(str).str.strip().to_numpy(),
                          "metric": marks["metric"].astype(str).str.strip().to_numpy()})
    kept = df.iloc[np.flatnonzero(~empty)]
    have = set(zip(kept["callpath"].astype(str).str.strip(), kept["metric"].astype(str).str.strip()))
    out: dict[str, set[str]] = {}
    for i, (c, m) in enumerate(zip(names["callpath"], names["metric"])):
        if not c or not m or c == "nan" or m == "nan":
            raise PerfcastError(f"empty {'callpath' if not c or c == 'nan' else 'metric'} in a row without a value",
                                *(where(int(pos[i])) if where else ()))
        if (c, m) in have:
            raise PerfcastError(f"metric {m!r} at {c!r}: an empty value (not measured: its collector never saw "
                                f"the callpath) beside measured values of it", *(where(int(pos[i])) if where else ()))
        out.setdefault(m, set()).add(c)
    return kept, out, pos


def coverage_from_not_measured(unseen: Mapping[str, set], paths: Iterable[str], metrics: Iterable[str]) -> list[dict] | None:
    """:data:`COVERAGE`'s record of a tidy table from :func:`split_not_measured`'s ``unseen`` (metric ->
    the callpaths not measured), the table's callpaths ``paths`` and its ``metrics``: every metric saw
    every callpath but those (:func:`coverage_record`); None when nothing was marked."""
    if not unseen:
        return None
    every = set(paths)
    return coverage_record({m: every - set(unseen.get(m, ())) for m in metrics}, every)


def seen_callpaths(exp: "Experiment") -> dict[str, set]:
    """Per metric of ``exp``, the callpaths its collector could see: the metric's own record
    (:func:`metric_coverage`), else every callpath of ``exp``'s tree (one input, one collector)."""
    every = None
    out = {}
    for m in exp.metrics:
        cov = metric_coverage(exp, m)
        if cov is None:
            every = set(exp.tree.paths) if every is None else every
            cov = every
        out[m] = set(cov)
    return out


def run_locations(exp: "Experiment", data: pd.DataFrame | None = None) -> pd.Series:
    """The number of locations (ranks/threads) of each run of ``data`` (default ``exp.data``):
    per point, repetition and metric, those that hold some value of the metric -- a location that
    never recorded a metric there (wall time taken once per run while counters come from every
    rank) is not counted (:func:`reduce_over_locations`)."""
    d = exp.data if data is None else data
    loc = [c for c in LOCATION_COLUMNS if c in d.columns]
    run = [c for c in (*exp.parameters, "rep", "metric") if c in d.columns]
    if len(loc) == 1:
        return d.groupby(run, observed=True, sort=False)[loc[0]].nunique()
    return d[[*run, *loc]].drop_duplicates().groupby(run, observed=True, sort=False).size()


def location_gaps(exp: "Experiment", metric: str | None = None) -> list[dict]:
    """Per metric and callpath of a dense experiment (:func:`absent_location_is_missing`) that lacks
    values at some locations: ``missing`` (location values absent, summed over points and
    repetitions), ``expected`` (the locations that measured the metric at those points and
    repetitions, summed likewise), ``points`` (how many points lack one) and ``files`` (the files
    holding those points, where known: :func:`sources_at`).  Empty for sparse
    experiments (absence is a zero there) and for values without locations.  Largest gaps first."""
    if not absent_location_is_missing(exp) or not exp.has_locations:
        return []
    d = exp.data if metric is None else exp.data[exp.data["metric"] == metric]
    if len(d) == 0:
        return []
    keys = [*exp.parameters, *(["rep"] if "rep" in d.columns else []), "metric"]
    loc = [c for c in LOCATION_COLUMNS if c in d.columns]
    locs = d[[*keys, *loc]].drop_duplicates().groupby(keys, observed=True, sort=False).size().rename("expected")
    have = d.groupby([*keys, "callpath"], observed=True, sort=False).size().rename("have").reset_index()
    have = have.merge(locs.reset_index(), on=keys, how="left")
    have["missing"] = have["expected"] - have["have"]
    gaps = have[have["missing"] > 0]
    if gaps.empty:
        return []
    point_keys = [*exp.parameters, "metric", "callpath"]
    per_point = gaps.groupby(point_keys, observed=True, sort=False).size().reset_index()
    out = gaps.groupby(["metric", "callpath"], observed=True, sort=False)[["missing", "expected"]].sum()
    out["points"] = per_point.groupby(["metric", "callpath"], observed=True, sort=False).size()
    out = out.reset_index().sort_values(["missing", "metric", "callpath"], ascending=[False, True, True])
    # the files holding the gapped points, where known (sources_at)
    at = {k: g for k, g in per_point.groupby(["metric", "callpath"], observed=True, sort=False)}
    return [{"metric": str(r.metric), "callpath": str(r.callpath), "missing": int(r.missing),
             "expected": int(r.expected), "points": int(r.points),
             "files": sources_at(exp, at[(r.metric, r.callpath)])} for r in out.itertuples(index=False)]


def location_gaps_warning(gaps: list[dict], shown: int = 3) -> str | None:
    """One line saying which callpaths/metrics lacked values at some locations (:func:`location_gaps`)."""
    return _gaps_warning(gaps, "rank/thread", "reduced over the ranks present", shown)


def _gaps_warning(gaps: list[dict], what: str, how: str, shown: int) -> str | None:
    """The one-line warning of :func:`location_gaps_warning` and :func:`repetition_gaps_warning`:
    ``what`` the values absent, ``how`` they were combined instead."""
    if not gaps:
        return None
    n = sum(g["missing"] for g in gaps)
    some = "; ".join(f"{g['callpath']} {g['metric']}: {g['missing']} of {g['expected']}" + _in_files(g.get("files"))
                     for g in gaps[:shown])
    more = f"; and {len(gaps) - shown} more" if len(gaps) > shown else ""
    return (f"{n} {what} value(s) absent from the table for {len(gaps)} callpath/metric series "
            f"({some}{more}): {how}, not counted as 0")


def _in_files(files, shown: int = 2) -> str:
    """`` in FILE`` / `` in A, B and 3 more`` for a message, or nothing when no file is known."""
    if not files:
        return ""
    more = f" and {len(files) - shown} more" if len(files) > shown else ""
    return " in " + ", ".join(files[:shown]) + more


@dataclass(frozen=True)
class Metric:
    """A measured quantity.

    ``scope`` says what a value attached to a callpath means: ``inclusive`` (the callpath and
    everything it calls), ``exclusive`` (the callpath's own cost) or ``unknown`` (a flat
    measurement, e.g. one value per Extra-P region).

    ``aggregate`` says how a value combines the processes when the input holds one value per run
    rather than per rank: ``"sum over ranks"``, ``"max over ranks"``, ``"min over ranks"``,
    ``"mean over ranks"`` (Caliper's cross-process ``sum#``/``max#``/``min#``/``avg#``), or empty
    when the reader has no such information (per-rank values, or a format without it).  A sum over
    ranks grows with the process count by construction (constant per-rank cost times p).

    ``exact`` says the values carry no measurement noise: a rerun of the same configuration gives
    the same number (a cache simulator's instruction counts).  Set by the readers of such tools
    (:mod:`perfcast.io.cachegrind`) and kept by the store; the fit then weighs such a series for
    the model's error alone (:attr:`perfcast.fit.FitOptions.exact`).

    ``sampled`` says the values come from statistical sampling (perf's samples, HPCToolkit's
    metrics): a callpath without a value at a point may have run too briefly to be sampled there,
    so its absence is no evidence that it did not run (:func:`absent_means_not_run`).  Set by the
    readers of such tools and kept by the store.
    """

    name: str
    unit: str = ""
    kind: str = "other"
    scope: str = "unknown"
    description: str = ""
    aggregate: str = ""
    exact: bool = False
    sampled: bool = False

    def __post_init__(self):
        if not self.name:
            raise PerfcastError("metric with an empty name")
        if self.kind not in KINDS:
            raise PerfcastError(f"metric {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.scope not in SCOPES:
            raise PerfcastError(f"metric {self.name!r}: scope {self.scope!r} is not one of {', '.join(SCOPES)}")

    @classmethod
    def guess(cls, name: str, unit: str = "", scope: str = "unknown", description: str = "") -> "Metric":
        return cls(name, unit, guess_kind(name, unit), scope, description)

    def to_dict(self) -> dict:
        d = {"name": self.name, "unit": self.unit, "kind": self.kind, "scope": self.scope,
             "description": self.description}
        if self.aggregate:
            d["aggregate"] = self.aggregate
        if self.exact:
            d["exact"] = True
        if self.sampled:
            d["sampled"] = True
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "Metric":
        return cls(d["name"], d.get("unit", ""), d.get("kind", "other"), d.get("scope", "unknown"),
                   d.get("description", ""), str(d.get("aggregate") or ""), d.get("exact") is True,
                   d.get("sampled") is True)


#: what a frame of a calling-context tree can be (:class:`Frame`)
FRAME_KINDS = ("procedure", "loop", "statement")


@dataclass(frozen=True)
class Frame:
    """What a frame is, as its reader knows it (:meth:`CallTree.frame`): ``kind`` one of
    :data:`FRAME_KINDS`; for a procedure, ``procedure`` -- its name, without what tells its calling
    contexts apart in the tree (a call-site suffix) -- ``where`` -- the file and/or load
    module, so that procedures of equal names in different modules stay apart ("" unknown) -- and
    ``site`` -- the call site this calling context of the procedure was called from, ``FILE:LINE``
    in the caller ("" unknown; HPCToolkit's ``<C>`` nodes).  ``where`` is what the procedure is
    (views group by it), ``site`` only where this context of it comes from."""

    kind: str
    procedure: str | None = None
    where: str = ""
    site: str = ""

    def __str__(self) -> str:
        return (self.kind + (f" {self.procedure}" if self.procedure else "") + (f" ({self.where})" if self.where else "")
                + (f" called at {self.site}" if self.site else ""))


class CallTree:
    """Calling-context tree: callpath ids (display strings) with explicit parent links.

    A callpath id is the frames joined by :data:`SEP`; the parent link is stored explicitly, so a
    frame name containing the separator does not confuse the tree.  The tree may be a forest.
    Order of insertion is kept (it is the order the source listed the callpaths in).

    A reader that knows what a frame is records it (:meth:`add`'s ``kind``, :meth:`frame`): a
    ``procedure`` (with the procedure's own name -- a frame may be named after its call site -- and
    ``where``, the file or load module that tells procedures of equal names apart), or a ``loop`` or
    ``statement`` of the procedure it sits in (the nearest procedure frame above it).  Frames
    without a kind are what their name says (Caliper regions, CUBE and cachegrind functions):
    views group those by name.
    """

    __slots__ = ("_par", "_name", "_children", "_sorted", "_order", "_lookups", "_kind")

    # Storage: ``_par`` holds every callpath; ``_name`` only the names that are not the path itself
    # (a root named as its path, the common flat case, costs no entry) and ``_children`` only the
    # callpaths that have children (a flat tree of 800,000 regions: one dict, not three dicts and
    # 800,000 empty lists).
    #
    # A flat forest made by :meth:`from_paths` (every callpath a root named as itself: Extra-P
    # regions, tidy files) holds no Python object per callpath: ``_sorted`` has the distinct paths
    # sorted, as one numpy string array (16 bytes a short path instead of ~125 for a string and its
    # dict entry: 80 MB less at 800,000 regions), ``_order`` their insertion order (positions in
    # ``_sorted``), and ``_par`` is None.  A lookup is a bisection of ``_sorted``; the dict is made
    # (:meth:`_materialise`) only when the tree is changed or after so many lookups that the
    # bisections would cost more than building it (:meth:`_has`).

    def __init__(self, nodes: Iterable[tuple[str, str | None, str]] = ()):
        """``nodes``: (path, parent_path_or_None, frame_name); parents must come before children."""
        self._par: dict[str, str | None] | None = {}
        self._name: dict[str, str] = {}
        self._children: dict[str, list[str]] = {}
        self._sorted: np.ndarray | None = None
        self._order: np.ndarray | None = None
        self._lookups = 0
        self._kind: dict[str, Frame] = {}
        for path, parent, name in nodes:
            self.add(path, parent, name)

    @property
    def _parent(self) -> dict[str, str | None]:
        """callpath -> parent (None for a root), every callpath in insertion order."""
        if self._par is None:
            self._materialise()
        return self._par

    def _materialise(self) -> None:
        """A flat tree's arrays as the dict (before a change, or when lookups got many)."""
        self._par = dict.fromkeys(self._flat_paths())  # set before the arrays go (_has reads both)
        self._sorted = self._order = None

    def _flat_paths(self, start: int = 0, stop: int | None = None) -> list[str]:
        """The paths ``start:stop`` of a flat tree, in insertion order."""
        return self._sorted[self._order[start:stop]].tolist()

    def _has(self, path) -> bool:
        s = self._sorted
        if s is None:
            return path in self._parent
        self._lookups += 1
        if self._lookups > len(s) // 8 + 1024:  # bisections now cost what the dict does
            return path in self._parent
        if not isinstance(path, str):
            return False
        i = bisect.bisect_left(s, path)
        return i < len(s) and s[i] == path

    def _check(self, path) -> None:
        """KeyError for a callpath not in the tree (as the dict lookup gives)."""
        if not self._has(path):
            raise KeyError(path)

    def missing(self, paths) -> list[str]:
        """The paths (an Index or a sequence of strings) that are not in the tree, in their order.
        A flat tree compares two sorted arrays when ``paths`` are its own paths (what a reader
        gives: no string per path), else searches them as a block."""
        if self._par is not None:
            known = self._par
            out: list[str] = []
            for i in range(0, len(paths), _BLOCK):  # a block at a time as one list (not all at once)
                out += [c for c in _as_list(paths[i:i + _BLOCK]) if c not in known]
            return out
        s = self._sorted
        if len(paths) == len(s) and all(  # the tree's own paths, sorted (an experiment's categories)
                (_string_array(paths[i:i + _BLOCK]) == s[i:i + _BLOCK]).all() for i in range(0, len(s), _BLOCK)):
            return []
        q = _string_array(paths)
        pos = np.searchsorted(s, q).clip(0, max(len(s) - 1, 0))
        bad = np.ones(len(q), dtype=bool) if not len(s) else s[pos] != q
        return q[bad].tolist()

    # -- construction -------------------------------------------------------------------------
    def add(self, path: str, parent: str | None = None, name: str | None = None,
            kind: "Frame | None" = None) -> str:
        """Add ``path`` under ``parent`` (None: a root) with frame ``name`` (default: the last frame
        of the path) and, when the reader knows it, what the frame is (:class:`Frame`)."""
        if self._par is None:
            self._materialise()
        if kind is not None:
            self._set_kind(path, kind)
        if path in self._parent:
            if self._parent[path] != parent:
                raise PerfcastError(f"callpath {path!r} given two parents ({self._parent[path]!r}, {parent!r})")
            return path
        if parent is not None and parent not in self._parent:
            raise PerfcastError(f"callpath {path!r}: parent {parent!r} is not in the tree")
        self._parent[path] = parent
        if name is None:
            name = path.rsplit(SEP, 1)[-1]
        if name != path:
            self._name[path] = name
        if parent is not None:
            kids = self._children.get(parent)
            if kids is None:
                self._children[parent] = [path]
            else:
                kids.append(path)
        return path

    def _set_kind(self, path: str, kind: "Frame") -> None:
        if kind.kind not in FRAME_KINDS:
            raise PerfcastError(f"callpath {path!r}: frame kind {kind.kind!r} is not one of {', '.join(FRAME_KINDS)}")
        had = self._kind.get(path)
        if had is not None and had != kind:
            raise PerfcastError(f"callpath {path!r} given two frame kinds ({had}, {kind})")
        self._kind[path] = kind

    def frame(self, path: str) -> "Frame | None":
        """What the frame at ``path`` is, when its reader recorded it (None: a name only)."""
        return self._kind.get(path)

    @property
    def has_kinds(self) -> bool:
        """Whether any frame's kind is recorded."""
        return bool(self._kind)

    def kinds(self) -> dict[str, "Frame"]:
        """callpath -> :class:`Frame` of the frames whose kind is recorded."""
        return dict(self._kind)

    def add_frames(self, frames: Sequence[str]) -> str:
        """Add a callpath given as its frames (root first), creating missing ancestors."""
        parent = None
        path = ""
        for i, frame in enumerate(frames):
            path = frame if i == 0 else path + SEP + frame
            self.add(path, parent, frame)
            parent = path
        if not frames:
            raise PerfcastError("empty callpath")
        return path

    @classmethod
    def from_paths(cls, paths: Iterable[str]) -> "CallTree":
        """Build from ``a->b->c`` strings, splitting on :data:`SEP` (ancestors are created)."""
        tree = cls()
        a = _string_array(paths)
        if len(a) and np.strings.find(a, SEP).max() >= 0:
            for p in a.tolist():
                if p not in tree._parent:
                    tree.add_frames(p.split(SEP))
            return tree
        # a flat tree (roots only): the distinct paths sorted, and their first occurrences in order
        order = np.argsort(a, kind="stable")    # stable: of equal paths the first occurrence first
        s = a[order]
        del a
        keep = np.ones(len(s), dtype=bool)
        keep[1:] = s[1:] != s[:-1]
        if keep.all():
            tree._order = np.empty(len(s), dtype=np.intp)
            tree._order[order] = np.arange(len(s))
        else:
            s, order = s[keep], order[keep]
            tree._order = np.argsort(order, kind="stable")
        tree._sorted, tree._par = s, None
        return tree

    # -- queries ------------------------------------------------------------------------------
    def __contains__(self, path: str) -> bool:
        return self._has(path)

    def __len__(self) -> int:
        return len(self._par) if self._par is not None else len(self._order)

    def __iter__(self):
        if self._par is not None:
            return iter(self._par)
        return (p for i in range(0, len(self._order), _BLOCK) for p in self._flat_paths(i, i + _BLOCK))

    @property
    def paths(self) -> list[str]:
        return list(self._par) if self._par is not None else self._flat_paths()

    def parent(self, path: str) -> str | None:
        if self._par is None:
            self._check(path)
            return None
        return self._par[path]

    def links(self) -> dict[str, str]:
        """callpath -> parent of every callpath that has one (empty for a flat forest)."""
        if not self._children:
            return {}
        return {p: par for p, par in self._parent.items() if par is not None}

    def name(self, path: str) -> str:
        name = self._name.get(path)
        if name is None:
            self._check(path)
            return path
        return name

    def children(self, path: str) -> list[str]:
        self._check(path)
        return list(self._children.get(path, ()))

    def iter_roots(self) -> Iterator[str]:
        """The roots in insertion order, one at a time (a flat tree of 800,000 regions: no list of
        them all for a caller that takes the first few)."""
        if self._par is None:
            return iter(self)
        return (p for p, par in self._par.items() if par is None)

    def roots(self) -> list[str]:
        return self.paths if self._par is None else list(self.iter_roots())

    def depth(self, path: str) -> int:
        if self._par is None:
            self._check(path)
            return 0
        d = 0
        while (path := self._parent[path]) is not None:
            d += 1
        return d

    def ancestors(self, path: str) -> list[str]:
        if self._par is None:
            self._check(path)
            return []
        out = []
        while (path := self._parent[path]) is not None:
            out.append(path)
        return out

    def walk(self) -> Iterator[tuple[str, str | None, str, int]]:
        """(path, parent, name, depth) of every callpath in preorder, one at a time (no lookup
        per callpath: a flat tree yields its paths as roots)."""
        if self._par is None:
            return ((p, None, p, 0) for p in self)
        return self._walk()

    def _walk(self) -> Iterator[tuple[str, str | None, str, int]]:
        children, name = self._children, self._name.get
        for r in self.iter_roots():
            stack = [(r, None, 0)]
            while stack:
                p, par, d = stack.pop()
                yield p, par, name(p, p), d
                kids = children.get(p)
                if kids:
                    stack.extend((k, p, d + 1) for k in reversed(kids))

    def descendants(self, path: str) -> list[str]:
        self._check(path)
        children = self._children
        out, stack = [], list(reversed(children.get(path, ())))
        while stack:
            p = stack.pop()
            out.append(p)
            kids = children.get(p)
            if kids:
                stack.extend(reversed(kids))
        return out

    def preorder(self) -> list[str]:
        if not self._children:   # a flat forest: every callpath a root, in insertion order
            return self.paths
        out = []
        children = self._children
        for r in self.roots():
            out.append(r)
            if r in children:
                out.extend(self.descendants(r))
        return out

    def subset(self, keep: Iterable[str]) -> "CallTree":
        """The tree restricted to ``keep`` and their ancestors."""
        wanted = set()
        for p in keep:
            if p in self:
                wanted.add(p)
                wanted.update(self.ancestors(p))
        if self._par is None:
            return CallTree.from_paths([p for p in self if p in wanted])
        tree = CallTree((p, self._parent[p], self.name(p)) for p in self._parent if p in wanted)
        tree._kind = {p: k for p, k in self._kind.items() if p in wanted}
        return tree

    def merged(self, other: "CallTree") -> "CallTree":
        tree = CallTree(self.to_records())
        for path, parent, name in other.to_records():
            tree.add(path, parent, name)
        # a frame's kind where the inputs agree on it: a procedure placed in different files or
        # modules (two readers, two builds) keeps its name without a place; different kinds, or a
        # kind one input lacks, leave the frame a name only
        mine, theirs = self._kind, other._kind
        for path in dict.fromkeys([*mine, *theirs]):
            a, b = mine.get(path), theirs.get(path)
            if path not in other or path not in self:   # a frame of one input only
                tree._kind[path] = a or b
            elif a == b:
                tree._kind[path] = a
            elif a is not None and b is not None and (a.kind, a.procedure) == (b.kind, b.procedure):
                tree._kind[path] = Frame(a.kind, a.procedure, a.where if a.where == b.where else "",
                                         a.site if a.site == b.site else "")
        return tree

    def to_records(self) -> list[tuple[str, str | None, str]]:
        if self._par is None:
            return [(p, None, p) for p in self]
        name = self._name.get
        return [(p, par, name(p, p)) for p, par in self._parent.items()]

    def __eq__(self, other) -> bool:
        if not isinstance(other, CallTree):
            return False
        if self._par is None and other._par is None:  # two flat trees: the same paths
            return len(self._sorted) == len(other._sorted) and bool((self._sorted == other._sorted).all())
        return self._parent == other._parent and self._name == other._name and self._kind == other._kind

    def __repr__(self) -> str:
        return f"CallTree({len(self)} callpaths, {sum(1 for _ in self.iter_roots())} roots)"

    def accumulate(self, order: Sequence[str], values: np.ndarray) -> np.ndarray:
        """Subtree sums: ``values[:, j]`` belongs to ``order[j]``; returns for every callpath the
        sum over itself and its descendants (within ``order``), column by column.

        Linear in the tree size: children are added into their parents one depth level at a time,
        deepest first (one vectorised step per level).
        """
        if self._par is None:  # a flat forest: every callpath its own subtree
            missing = self.missing(list(order))
            if missing:
                raise KeyError(missing[0])
            return np.array(values, dtype=float, copy=True)
        index = {p: i for i, p in enumerate(order)}
        parent = np.array([index.get(self._parent[p], -1) if self._parent[p] is not None else -1
                           for p in order], dtype=np.int64)
        depth = np.zeros(len(order), dtype=np.int64)
        for i, p in enumerate(order):  # parents precede children in preorder
            depth[i] = depth[parent[i]] + 1 if parent[i] >= 0 else 0
        out = np.array(values, dtype=float, copy=True)
        cols = out.T  # a view: one row per callpath
        for d in range(int(depth.max(initial=0)), 0, -1):
            nodes = np.flatnonzero((depth == d) & (parent >= 0))
            np.add.at(cols, parent[nodes], cols[nodes])
        return out


#: strings handled at a time where a list of them all would be large (64k: ~4 MB of str objects)
_BLOCK = 1 << 16


def _as_list(block) -> list:
    if hasattr(block, "to_pylist"):  # an arrow array
        return block.to_pylist()
    return block.tolist() if hasattr(block, "tolist") else list(block)


def _string_array(paths) -> np.ndarray:
    """``paths`` (a list, an Index, an arrow array, any iterable of strings) as a numpy
    StringDType array, converted a block at a time (no list of them all as Python strings)."""
    if isinstance(paths, np.ndarray) and isinstance(paths.dtype, np.dtypes.StringDType):
        return paths
    if pandas_object(paths, "Series"):
        paths = paths.array
    elif not isinstance(paths, (list, tuple, np.ndarray)) and not hasattr(paths, "to_pylist") \
            and not pandas_object(paths, "Index", "api.extensions.ExtensionArray"):
        paths = list(paths)  # a dict, a set, a generator
    out = np.empty(len(paths), dtype=np.dtypes.StringDType())
    for i in range(0, len(paths), _BLOCK):
        out[i:i + _BLOCK] = [str(p) for p in _as_list(paths[i:i + _BLOCK])]
    return out


def _used_codes(codes: np.ndarray, n: int) -> np.ndarray:
    """Which of the categories 0..n-1 the codes use (-1, a missing value, uses none), a block of
    rows at a time (np.bincount would first copy narrow codes of millions of rows to int64)."""
    used = np.zeros(n, dtype=bool)
    step = 1 << 20
    for i in range(0, len(codes), step):
        block = codes[i:i + step]
        used[block[block >= 0]] = True
    return used


def _present(col: "pd.Series | Category") -> set[str]:
    """The names a categorical column's rows use (no string per row: a report selected 500k rows of
    10k callpaths by converting every row to a string, 1.2 s)."""
    cat = col if isinstance(col, Category) else column(col)
    return set(cat.objects()[_used_codes(cat.codes, cat.n_names)].tolist())


def coordinate_dtype(values: np.ndarray) -> np.dtype:
    """The dtype a parameter column is stored in: float32 when every value is exactly a float32
    (float64 -> float32 -> float64 gives the same number: whole numbers up to 2**24, halves,
    quarters, ... -- the coordinates of nearly every experiment), else float64.

    Why: the parameter column is as long as the value table (a row per value), and 8 bytes a row
    of it were a third of the Extra-P text reader's peak (152 MB at 20 M values; issue 17, item
    2); the distinct coordinates are few and exact in float32.  No value changes: float32 widens
    to float64 exactly (``to_numpy(float)``, arithmetic with a float64 array or a numpy float64
    scalar), and a column holding any value float32 cannot represent stays float64.  What does
    change is arithmetic on the column with a Python float: numpy computes that in float32
    (``0.5 * data["p"]``); code that computes with coordinates takes them as float64 first, as
    the fit does (``to_numpy(float)``), and compares them with a target as float64
    (``col == np.float64(v)``: a float32 comparison would round the target onto a coordinate).
    Decided here alone, from the values alone, so every reader and format gives the same column.
    Checked a block at a time (no float32 copy of the whole column)."""
    values = np.asarray(values)
    if values.dtype == np.float32:
        return np.dtype(np.float32)
    step = 1 << 20
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(0, len(values), step):
            block = values[i:i + step].astype(np.float64, copy=False)
            # float32 == float64 compares in float64 (exact); NaN never equals: stays float64
            if not (block.astype(np.float32) == block).all():
                return np.dtype(np.float64)
    return np.dtype(np.float32)


def coordinates(values: np.ndarray) -> np.ndarray:
    """``values`` (float) as a parameter column of :func:`coordinate_dtype` (``values`` itself
    when it already is)."""
    dtype = coordinate_dtype(values)
    return values if values.dtype == dtype else values.astype(dtype)


def _numeric(src: np.ndarray, what: str) -> np.ndarray:
    """A value table's number column: float32 as it is (a parameter's exact width,
    :func:`coordinate_dtype`), other numbers as float64; PerfcastError(``what``) for an entry that
    is not a number."""
    if src.dtype == np.float32:
        return src
    if src.dtype.kind in "biuf":
        return src.astype("float64", copy=False)
    try:
        return pd.to_numeric(src, errors="raise").astype("float64", copy=False)
    except (ValueError, TypeError) as e:
        raise PerfcastError(f"{what} ({e})") from None


def _repetitions(src: np.ndarray) -> np.ndarray:
    """The ``rep`` column: a signed integer column kept at its width (a reader's int8
    repetitions: 1 byte a value, not 8); anything else as int64."""
    return src if src.dtype.kind == "i" else src.astype("int64")


def _check_finite(values: np.ndarray, what: str):
    """PerfcastError naming the count of NaN/inf in ``values``; a block of rows at a time (two
    boolean columns of 20 M rows were 40 MB at the read's peak)."""
    step = 1 << 20
    bad = sum(int(np.count_nonzero(~np.isfinite(values[i:i + step]))) for i in range(0, len(values), step))
    if bad:
        raise PerfcastError(f"{what} holds {bad} non-finite value(s) (NaN or inf)")


class Experiment:
    """Parameters, points, repetitions, calling-context tree, metrics and a tidy value table."""

    def __init__(self, parameters: Sequence[str], data: "pd.DataFrame | Columns", metrics: Iterable[Metric] | Mapping,
                 tree: CallTree | None = None, meta: Mapping | None = None, *, validate: bool = True,
                 owned: bool = False):
        """``data``: the tidy value table (module docstring), a DataFrame or its :class:`Columns`
        (a reader's: the DataFrame is then made when :attr:`data` is first read)."""
        self.parameters: tuple[str, ...] = tuple(str(p) for p in parameters)
        if isinstance(metrics, Mapping):
            metrics = metrics.values()
        self.metrics: dict[str, Metric] = {m.name: m for m in metrics}
        self.meta: dict = dict(meta or {})
        if isinstance(data, Columns):
            self._cols, self._data = self._normalise_columns(data, owned), None
        else:
            self._data, self._cols = self._normalise(data, owned), None
        if tree is None:
            tree = CallTree.from_paths(self.cols["callpath"].names)
        self.tree = tree
        if validate:
            self.validate()

    @property
    def data(self) -> "pd.DataFrame":
        """The tidy value table (module docstring), a DataFrame: made from the columns on first
        use when the experiment was built from them (imports pandas)."""
        if self._data is None:
            self._data = self._cols.to_pandas()
        return self._data

    @property
    def cols(self) -> Columns:
        """The value table's columns (:class:`perfcast.table.Columns`: numpy arrays, callpath
        and metric as codes into their names), without pandas when the experiment was built
        from columns; those of :attr:`data` (no copy) otherwise."""
        if self._cols is None:
            self._cols = Columns.from_pandas(self._data)
        return self._cols

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if state.get("_data") is not None:
            state["_cols"] = None    # made again from the frame (pickled once, not twice)
        return state

    # -- construction and checks ------------------------------------------------------------
    def _check_columns(self, have) -> None:
        """The parameter names' rules and the columns every value table has."""
        for p in self.parameters:
            if p in RESERVED:
                raise PerfcastError(f"parameter name {p!r} is reserved (reserved: {', '.join(RESERVED)})")
        if len(set(self.parameters)) != len(self.parameters):
            raise PerfcastError(f"parameter names repeat: {', '.join(self.parameters)}")
        missing = [c for c in (*self.parameters, "callpath", "metric", "value") if c not in have]
        if missing:
            raise PerfcastError(f"value table lacks column(s) {', '.join(missing)}")

    def _normalise_columns(self, data: Columns, owned: bool = False) -> Columns:
        """:meth:`_normalise` of a :class:`Columns` (numeric numpy columns; callpath and metric
        :class:`Category` columns of strings), without pandas."""
        self._check_columns(data)
        n = len(data)
        cols: dict[str, object] = {}

        def own(arr: np.ndarray, src) -> np.ndarray:
            return arr if owned or not np.may_share_memory(arr, src) else arr.copy()

        for p in self.parameters:
            src = data[p]
            cols[p] = own(coordinates(_numeric(src, f"parameter {p!r} has a non-numeric value")), src)
        cols["rep"] = own(_repetitions(data["rep"]), data["rep"]) if "rep" in data else np.zeros(n, dtype="int64")
        for c in ("callpath", "metric"):
            cat = data[c]
            if not isinstance(cat, Category):
                raise PerfcastError(f"column {c!r} of a value table's columns is not a category column")
            codes = cat.codes
            used = _used_codes(codes, cat.n_names)
            if len(codes) and codes.min() >= 0 and used.all():
                cols[c] = Category(own(codes, codes), cat.names)
            else:    # the unused names dropped, the others in their order (as remove_unused_categories)
                remap = np.cumsum(used) - 1
                new = np.where(codes >= 0, remap[np.clip(codes, 0, None)], -1).astype(codes.dtype)
                names = cat.names
                keep = np.flatnonzero(used)
                names = (pc.take(names, arrow_array(keep)) if hasattr(names, "to_pylist") else names.take(keep)
                         if hasattr(names, "take") else [names[i] for i in keep.tolist()])
                cols[c] = Category(new, names)
        src = data["value"]
        cols["value"] = own(_numeric(src, "column 'value' has a non-numeric entry").astype("float64", copy=False), src)
        for c in LOCATION_COLUMNS:
            if c in data:
                src = data[c]
                cols[c] = own(src.astype("int64", copy=False), src)
        return Columns(cols)

    def _normalise(self, data: pd.DataFrame, owned: bool = False) -> pd.DataFrame:
        self._check_columns(data.columns)
        n = len(data)
        cols: dict[str, object] = {}

        def own(arr: np.ndarray, src) -> np.ndarray:
            # the table never shares memory with the caller's frame (unless it was handed over)
            return arr if owned or not np.may_share_memory(arr, src) else arr.copy()

        for p in self.parameters:
            src = data[p].to_numpy()
            col = _numeric(src, f"parameter {p!r} has a non-numeric value")
            cols[p] = own(coordinates(col), src)  # float32 when exact (coordinate_dtype)
            del col
        if "rep" in data.columns:
            src = data["rep"].to_numpy()
            cols["rep"] = own(_repetitions(src), src)
        else:
            cols["rep"] = np.zeros(n, dtype="int64")
        for c in ("callpath", "metric"):
            col = data[c]
            # inferred_type: one C pass (not a Python loop over maybe a million categories)
            if isinstance(col.dtype, pd.CategoricalDtype) and col.cat.categories.inferred_type in ("string", "empty"):
                cat = col.array
                codes = cat.codes
                if len(codes) and codes.min() >= 0 and _used_codes(codes, len(cat.categories)).all():
                    # every category used: kept as it is (remove_unused_categories sorts the codes)
                    cols[c] = pd.Categorical.from_codes(own(codes, codes), dtype=cat.dtype,
                                                        validate=False) if not owned else cat
                else:
                    cols[c] = pd.Categorical(cat).remove_unused_categories()
            else:
                cols[c] = pd.Categorical(col.astype(str).to_numpy())
        src = data["value"].to_numpy()
        cols["value"] = own(_numeric(src, "column 'value' has a non-numeric entry").astype("float64", copy=False), src)
        for c in LOCATION_COLUMNS:
            if c in data.columns:
                src = data[c].to_numpy()
                cols[c] = own(src.astype("int64", copy=False), src)
        return pd.DataFrame(cols, index=pd.RangeIndex(n), copy=False)

    def validate(self) -> "Experiment":
        c = self.cols
        if len(c) == 0:
            raise PerfcastError("the experiment is empty (no values)")
        for p in self.parameters:
            _check_finite(c[p], f"parameter {p!r}")
        _check_finite(c["value"], "the value column")
        met = c["metric"]
        undeclared = set(met.name_list()) - set(self.metrics)
        if undeclared:
            raise PerfcastError(f"values for undeclared metric(s): {', '.join(sorted(undeclared))}")
        unknown = self.tree.missing(c["callpath"].names)
        if unknown:
            raise PerfcastError(f"values for callpath(s) not in the call tree: {', '.join(unknown[:5])}")
        for name, m in self.metrics.items():
            if m.kind in ("count", "bytes"):
                code = met.code_of(name)
                neg = (met.codes == code) & (c["value"] < 0)
                if code >= 0 and neg.any():
                    d = self.data
                    row = d[neg].iloc[0]
                    raise PerfcastError(
                        f"metric {name!r} counts {m.kind} but has {int(neg.sum())} negative value(s), "
                        f"e.g. {row['value']} at callpath {row['callpath']!r}, point {self._point_str(row)}")
        return self

    def _point_str(self, row) -> str:
        return "(" + ", ".join(f"{p}={_fmt_num(row[p])}" for p in self.parameters) + ")"

    @classmethod
    def from_pandas(cls, df: pd.DataFrame, parameters: Sequence[str] | None = None,
                    metrics: Iterable[Metric] | None = None, tree: CallTree | None = None,
                    meta: Mapping | None = None) -> "Experiment":
        """Build from a tidy frame; parameters default to every non-reserved column.

        The frame means what a tidy CSV of it means (perfcast.io.tidy): a rank or repetition it
        lacks is missing, not a zero (``meta["locations"] = "dense"``,
        :func:`absent_location_is_missing`), unless ``meta`` says otherwise: ``{"locations":
        "sparse"}`` for a profile that records only what each rank ran (absent = did not run = 0,
        as the Caliper/CUBE/HPCToolkit readers build it)."""
        if parameters is None:
            parameters = [c for c in df.columns if c not in RESERVED]
        attrs = getattr(df, "attrs", None)
        # rows with an empty value: the coverage record of a table written by to_pandas (not_measured_rows)
        df, unseen, _ = split_not_measured(df)
        if unseen and tree is None:
            tree = CallTree.from_paths(list(dict.fromkeys([*map(str, pd.unique(df["callpath"].astype(str))),
                                                           *sorted(c for cs in unseen.values() for c in cs)])))
        if metrics is None:
            metrics = [Metric.guess(str(m)) for m in pd.unique(df["metric"].astype(str))]
        meta = dict(meta or {})
        meta.setdefault("locations", "dense")
        if COVERAGE not in meta:   # the record a table of to_pandas carries (Parquet keeps it too)
            cov = coverage_from_attrs(attrs) or coverage_from_not_measured(
                unseen, tree.paths if tree is not None else map(str, pd.unique(df["callpath"].astype(str))),
                [m.name for m in metrics])
            if cov:
                meta[COVERAGE] = cov
        return cls(parameters, df, metrics, tree, meta)

    def to_pandas(self) -> pd.DataFrame:
        """The tidy value table, a copy.  A sparse profile's absent locations (those that measured a
        metric at a point and repetition but hold no value of a callpath: a 0 there,
        :func:`reduce_over_locations`) and absent repetitions (:func:`absent_repetition_is_zero`)
        are written as explicit 0 rows, so that the table means the same when read back as a tidy
        table, where an absent rank or repetition is missing (:func:`absent_location_is_missing`).
        The coverage record (:data:`COVERAGE`: a metric absent at a callpath its collector never saw
        is missing, not 0) goes with it as rows with an empty value (:func:`not_measured_rows`), which
        ``df.to_csv`` and ``df.to_json(orient="records", lines=True)`` keep and the tidy readers and
        :meth:`from_pandas` read back as the record, and in ``df.attrs`` (:data:`TABLE_ATTRS`), which
        a Parquet file written by ``df.to_parquet`` keeps too."""
        df = not_measured_rows(self, with_absent_zeros(self))
        cov = self.meta.get(COVERAGE)
        df.attrs = {TABLE_ATTRS: {COVERAGE: copy.deepcopy(cov)}} if cov else {}
        return df

    @classmethod
    def from_thicket(cls, tk, parameters: Sequence[str] | None = None) -> "Experiment":
        """From a Thicket object in memory, parameters from its metadata (:func:`perfcast.io.from_thicket`)."""
        from .io.thicket import from_thicket

        return from_thicket(tk, parameters)

    def to_thicket(self):
        """A Thicket: one profile per (point, repetition) (:func:`perfcast.io.to_thicket`; needs
        ``perfcast[thicket]``)."""
        from .io.thicket import to_thicket

        return to_thicket(self)

    def replace(self, **changes) -> "Experiment":
        """A copy with some of parameters/data/metrics/tree/meta replaced (validated)."""
        args = dict(parameters=self.parameters, data=self.data, metrics=self.metrics,
                    tree=self.tree, meta=copy.deepcopy(self.meta))
        args.update(changes)
        return Experiment(**args)

    # -- descriptive --------------------------------------------------------------------------
    @property
    def callpaths(self) -> list[str]:
        """Callpaths that carry values, in tree order."""
        present = _present(self.cols["callpath"])         # O(n), no sort
        return [p for p in self.tree.preorder() if p in present]

    def metric_names(self, patterns: str | Sequence[str]) -> list[str]:
        """The metrics named by ``patterns`` (names, or globs such as ``avg#inclusive*`` and
        ``PAPI_*``), in the experiment's metric order; a pattern that names no metric is an error
        listing them.  A name that is a metric is that metric even where it holds glob characters."""
        pats = [patterns] if isinstance(patterns, str) else list(patterns)
        names = list(self.metrics)
        hit = set()
        for pat in pats:
            found = [pat] if pat in self.metrics else (
                [n for n in names if fnmatch.fnmatchcase(n, pat)] if any(ch in pat for ch in "*?[") else [])
            if not found:
                raise PerfcastError(f"no metric {'matches ' if any(ch in pat for ch in '*?[') else ''}{pat!r}; "
                                    f"the experiment has: {', '.join(names)}")
            hit.update(found)
        return [n for n in names if n in hit]

    @property
    def has_locations(self) -> bool:
        """Values per rank and/or thread (a ``rank`` or a ``thread`` column; :data:`LOCATION_COLUMNS`)."""
        return any(c in self.cols for c in LOCATION_COLUMNS)

    def points(self) -> pd.DataFrame:
        """Distinct coordinates, sorted, one column per parameter."""
        if not self.parameters:
            return pd.DataFrame(index=pd.RangeIndex(1))
        return self._point_repetitions(reps=False)[0]

    def repetitions(self) -> pd.DataFrame:
        """Repetitions per point (the number of distinct ``rep`` values)."""
        keys = list(self.parameters)
        if not keys:
            return pd.DataFrame({"repetitions": [self.data["rep"].nunique()]})
        coords, reps = self._point_repetitions()
        coords["repetitions"] = reps
        return coords

    def _point_repetitions(self, reps: bool = True) -> tuple[pd.DataFrame, np.ndarray | None]:
        """The distinct coordinates (sorted, float columns, as :meth:`points`) and, with ``reps``,
        the number of distinct ``rep`` values at each (int64): :meth:`point_arrays` as a frame."""
        coords, count = self.point_arrays(reps)
        return pd.DataFrame(coords, index=pd.RangeIndex(len(next(iter(coords.values()))))), count

    def point_arrays(self, reps: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        """The distinct coordinates, sorted, as a float64 array per parameter (an experiment with
        parameters), and with ``reps`` the number of distinct ``rep`` values at each (int64).

        Without a copy of the table: the sorted distinct values of each parameter and of ``rep``
        number every row's (point, rep) in one integer, mixed radix in sorted order, marked a block
        of rows at a time in a boolean array of all combinations.  When that array would be larger
        than the table has rows (many parameters of many values each), the pandas group-by does it
        instead.
        """
        c = self.cols
        keys = list(self.parameters)
        uniq = [distinct_sorted(c[p]) for p in keys]
        cols = [c[p] for p in keys]
        if reps:
            uniq.append(distinct_sorted(c["rep"]))
            cols.append(c["rep"])
        sizes = [len(u) for u in uniq]
        n = len(c)
        if math.prod(sizes) > max(1 << 24, n):
            d = self.data
            if not reps:
                g = d[keys].drop_duplicates().sort_values(keys).reset_index(drop=True)
                return {p: g[p].to_numpy(np.float64) for p in keys}, None
            g = (d.groupby(keys, observed=True)["rep"].nunique().rename("repetitions").reset_index()
                 .sort_values(keys).reset_index(drop=True))
            return {p: g[p].to_numpy(np.float64) for p in keys}, g["repetitions"].to_numpy(np.int64)
        seen = np.zeros(math.prod(sizes), dtype=bool)
        step = 1 << 18
        for i in range(0, n, step):
            key = np.zeros(min(step, n - i), dtype=np.int64)
            for u, col in zip(uniq, cols):
                if len(u) == 1:
                    continue  # key *= 1, += 0
                key *= len(u)
                if u.dtype.kind == "i" and u[0] == 0 and u[-1] == len(u) - 1:
                    key += col[i:i + step]  # 0, 1, ..., k-1 (repetitions): the value is its rank
                else:
                    key += np.searchsorted(u, col[i:i + step])
            seen[key] = True
        seen = seen.reshape(-1, sizes[-1] if reps else 1)
        count = seen.sum(axis=1)
        at = np.flatnonzero(count)
        idx = np.unravel_index(at, sizes[:len(keys)])
        coords = {p: u[j].astype(np.float64) for p, u, j in zip(keys, uniq, idx)}  # float64 whatever the column's width
        return coords, count[at].astype(np.int64) if reps else None

    def summary(self, callpaths: bool = True) -> dict:
        """A JSON-ready description (what ``perfcast show --json`` prints); ``callpaths=False``
        leaves out the per-callpath list (a dict per callpath: 0.5 GB for 800,000 of them)."""
        pts = self.repetitions()
        points = [{**{p: _json_num(r[p]) for p in self.parameters}, "repetitions": int(r["repetitions"])}
                  for _, r in pts.iterrows()]
        for pt, n in zip(points, self._point_location_counts(pts)):
            if n:
                pt["locations"] = n
        reps = self._metric_repetitions()
        return {
            "parameters": list(self.parameters),
            "points": points,
            "n_points": len(points),
            "metrics": [{**m.to_dict(), **({"repetitions": reps[m.name]} if reps and m.name in reps else {})}
                        for m in self.metrics.values()],
            "callpaths": list(self.callpath_records()) if callpaths else None,
            "n_callpaths": len(self.tree),
            "n_values": int(len(self.data)),
            "locations": {c: int(self.data[c].nunique()) for c in LOCATION_COLUMNS if c in self.data.columns},
            "meta": self.meta,
        }

    def _point_location_counts(self, pts: pd.DataFrame) -> list[dict]:
        """Per point of ``pts`` (as :meth:`repetitions` gives them), the distinct ranks (and threads)
        that hold values there: ``{"rank": 4}`` (the keys of the summary's ``locations``); nothing
        without location columns.  The summary's ``locations`` are the whole experiment's (16 ranks
        over p = 1 .. 16 is 1 rank at p = 1)."""
        d = self.data
        loc = [c for c in LOCATION_COLUMNS if c in d.columns]
        if not loc:
            return [{} for _ in range(len(pts))]
        keys = list(self.parameters)
        if not keys:
            return [{c: int(d[c].nunique()) for c in loc}]
        g = d.groupby(keys, observed=True)[loc].nunique()
        g.index = g.index.map(lambda k: tuple(float(x) for x in (k if isinstance(k, tuple) else (k,))))
        return [{c: int(g.at[tuple(float(r[p]) for p in keys), c]) for c in loc} for _, r in pts.iterrows()]

    def _metric_repetitions(self) -> dict:
        """{metric: repetitions per point} when the metrics were not all measured the same number of
        times (a campaign's cachegrind counts once, its times three times; the points' count is the
        largest): an int when equal at every point, else [fewest, most]; {} when all agree."""
        d = self.data
        if d.empty:
            return {}
        g = d.groupby(["metric", *self.parameters], observed=True)["rep"].nunique()
        if not self.parameters:
            if g.nunique() <= 1:
                return {}
        else:
            # metrics measured as often as each other at every point (however that varies over the points)
            # say nothing: the points' count is theirs
            wide = g.unstack("metric")
            if (wide.nunique(axis=1, dropna=False) <= 1).all():
                return {}
        by = g.groupby(level="metric", observed=True).agg(["min", "max"])
        return {str(m): (int(r["min"]) if r["min"] == r["max"] else [int(r["min"]), int(r["max"])])
                for m, r in by.iterrows()}

    def callpath_records(self) -> Iterator[dict]:
        """The summary's per-callpath dicts in tree order, one at a time (``show --json`` writes
        them as they come: a list of 800,000 dicts is 0.5 GB)."""
        cat = self.data["callpath"].array
        used = _used_codes(cat.codes, len(cat.categories))
        if len(self.tree) == len(cat.categories) and not self.tree.missing(cat.categories):
            # the tree's callpaths are the categories (a reader's flat tree): those without values
            # are the unused categories (usually none), not a set of all 800,000 used names (90 MB)
            idle = set(cat.categories[~used].tolist())

            def has(p: str) -> bool:
                return p not in idle
        else:
            has = set(cat.categories[used].tolist()).__contains__
        for p, parent, name, depth in self.tree.walk():
            yield {"path": p, "name": name, "parent": parent, "depth": depth, "has_values": has(p)}

    def __repr__(self) -> str:
        return (f"Experiment(parameters={list(self.parameters)}, points={len(self.points())}, "
                f"callpaths={len(self.tree)}, metrics={list(self.metrics)}, values={len(self.data)})")

    def equals(self, other: "Experiment") -> bool:
        """Same parameters, metrics, tree, meta and values (row order ignored)."""
        if not isinstance(other, Experiment):
            return False
        if (self.parameters != other.parameters or self.metrics != other.metrics or self.tree != other.tree
                or self.meta != other.meta or list(self.data.columns) != list(other.data.columns)):
            return False
        a, b = _canonical(self.data), _canonical(other.data)
        return a.equals(b)

    __eq__ = equals
    __hash__ = None  # mutable-looking container; not hashable

    # -- selection ----------------------------------------------------------------------------
    def select(self, callpath: str | Sequence[str] | None = None, metric: str | Sequence[str] | None = None,
               *, literal: bool = False, **coords) -> "Experiment":
        """Rows matching callpath glob(s), metric name(s) and parameter values (a value or a list);
        a callpath's own name is that callpath even where it holds glob characters (``a[0]`` is
        itself when there is such a callpath); ``literal``: the callpaths are names, not globs."""
        mask = self._selection(callpath, metric, literal, coords)
        if coords and not mask.any():
            # name the value no run has ("the selection is empty" for view --at jobsize=28)
            for p, v in coords.items():
                vals = {float(x) for x in ([v] if np.isscalar(v) else v)}
                have = distinct_sorted(self.cols[p])
                if not vals & {float(x) for x in have}:
                    shown = ", ".join(f"{float(x):g}" for x in have[:12]) + (" ..." if len(have) > 12 else "")
                    raise PerfcastError(f"no run with {p}={','.join(f'{x:g}' for x in sorted(vals))}; "
                                        f"measured {p}: {shown}")
            if callpath is None and metric is None:
                raise PerfcastError("no run at " + ", ".join(f"{p}={v if not np.isscalar(v) else f'{float(v):g}'}"
                                                             for p, v in coords.items()) +
                                    " (each value is measured, not together)")
        return self._selected(mask)

    def _selection(self, callpath, metric, literal: bool, coords: Mapping) -> np.ndarray:
        """The rows :meth:`select` keeps, as a boolean mask (on the columns: no pandas)."""
        d = self.cols
        mask = np.ones(len(d), dtype=bool)
        if callpath is not None:
            pats = [callpath] if isinstance(callpath, str) else list(callpath)
            cp = d["callpath"]
            cats = cp.objects()
            # names without wildcards match themselves: a set lookup, not len(pats) fnmatch calls per
            # callpath (the report selected 10,000 names out of 10,000 callpaths: 10^8 calls); a name that
            # is a callpath is that callpath even where it holds glob characters, as metric_names takes
            # metrics (LULESH's "app->[unknown]", "...) [clone .constprop.0]" copied from `view` were
            # "the selection is empty")
            named = set(cats) if not literal and any(ch in pat for pat in pats for ch in "*?[") else set()
            exact = {pat for pat in pats if literal or pat in named or not any(ch in pat for ch in "*?[")}
            globs = [pat for pat in pats if pat not in exact]
            if globs:
                hit = np.array([c in exact or any(fnmatch.fnmatchcase(c, pat) for pat in globs) for c in cats],
                               dtype=bool)
            else:       # names only: one hashed look-up of every name (a table's 50 of 30,000)
                hit = np.fromiter(map(exact.__contains__, cats), dtype=bool, count=len(cats))
            if len(cats) and not hit.any():
                raise PerfcastError(f"the selection is empty: no callpath matches {', '.join(map(repr, pats))}")
            mask &= hit[cp.codes] & (cp.codes >= 0)
        if metric is not None:
            met = d["metric"]
            wanted = set(self.metric_names(metric))
            hit = np.fromiter(map(wanted.__contains__, met.objects()), dtype=bool, count=met.n_names)
            mask &= hit[met.codes] & (met.codes >= 0)
        for p, v in coords.items():
            if p not in self.parameters:
                raise PerfcastError(f"no parameter {p!r}; the experiment has: {', '.join(self.parameters)}")
            vals = [v] if np.isscalar(v) else list(v)
            mask &= np.isin(d[p], np.array([float(x) for x in vals], dtype=np.float64))
        return mask

    def _selected(self, mask: np.ndarray) -> "Experiment":
        """The experiment of the rows ``mask`` (:meth:`select`'s)."""
        rows = np.flatnonzero(mask)
        if len(rows) == 0:
            raise PerfcastError("the selection is empty")
        sub = self.cols.take(rows)
        used = _present(sub["metric"])
        keep_paths = _present(sub["callpath"])
        return Experiment(self.parameters, sub, [m for n, m in self.metrics.items() if n in used],
                          self.tree.subset(keep_paths), copy.deepcopy(self.meta), owned=True)

    def aggregate(self, how: str = "mean", over: Sequence[str] = ("rep",)) -> pd.DataFrame:
        """Reduce ``over`` some of rep/rank/thread with mean/median/min/max/sum/std/count.

        Returns a tidy frame without the reduced columns (``value`` holds the statistic).
        """
        return _aggregate(self.data, how, over, self)

    def reduce_locations(self, how: str = "sum") -> "Experiment":
        """Collapse per-rank/thread values into one value per point, repetition and callpath.

        ``how``: one of :data:`AGGREGATES` for every metric, or ``"auto"``: per metric,
        :func:`location_reduction` (counts and bytes summed, times and other metrics averaged)."""
        if not self.has_locations:  # a thread column alone too
            return self
        if how != "auto":
            df = _aggregate(self.data, how, LOCATION_COLUMNS, self)
        else:
            hows = {name: location_reduction(m) for name, m in self.metrics.items()}
            parts = []
            for h in sorted(set(hows.values())):
                rows = self.data["metric"].isin([n for n, x in hows.items() if x == h]).to_numpy()
                if rows.any():
                    parts.append(_aggregate(self.data[rows], h, LOCATION_COLUMNS, self))
            df = pd.concat(parts, ignore_index=True)
        meta = copy.deepcopy(self.meta)
        meta.setdefault("history", []).append(f"locations reduced by {how}")
        return Experiment(self.parameters, df, self.metrics, self.tree, meta)

    # -- tree arithmetic ----------------------------------------------------------------------
    def to_inclusive(self, metric: str, name: str | None = None) -> "Experiment":
        """Exclusive -> inclusive: each callpath gets the sum over its subtree.

        The result replaces ``metric`` (or is added as ``name``) with scope ``inclusive``.
        """
        return self._convert(metric, "inclusive", name)

    def to_exclusive(self, metric: str, name: str | None = None) -> "Experiment":
        """Inclusive -> exclusive: each callpath minus the inclusive values of its children.

        In a dense experiment (:func:`absent_location_is_missing`) a converted value is missing at a
        location that lacks one of the values it is made of (:meth:`_gapped`)."""
        return self._convert(metric, "exclusive", name)

    def _gapped(self, groups: pd.MultiIndex, group_cols: list[str], present) -> np.ndarray | None:
        """Groups x callpaths matrix (1 = missing) of a dense experiment's location gaps, or None.

        The one rule for values computed at a location from others at that location (a scope
        conversion: inclusive = the subtree's exclusive values, exclusive = inclusive minus the
        children's inclusive values; so also a location's whole-program total): in a dense table
        (:func:`absent_location_is_missing`) a callpath absent at a location while another location
        of the same point and repetition has it is missing there, not 0, so a value computed from
        it is missing there too, and reductions over ranks use the locations that have it.  A child
        taken as 0 would inflate the parent's exclusive value by the child's time and shrink the
        location's inclusive values and total by it.  ``present``: groups x callpaths, 1 where a
        value is stored; None when nothing is missing (sparse profiles: absence is 0).  Repetitions
        likewise (:func:`absent_repetition_is_zero`): a callpath that a repetition of a dense
        table lacks while another repetition of the point has it is missing in that repetition, so
        the ancestors' inclusive values there are too (combined over the repetitions that have them).
        """
        loc = [c for c in LOCATION_COLUMNS if c in group_cols]
        if not (loc or "rep" in group_cols) or not absent_location_is_missing(self):
            return None
        same = [i for i, c in enumerate(group_cols) if c not in loc and c != "rep"]   # the point
        if same:
            sid, _ = pd.factorize(pd.MultiIndex.from_arrays([groups.get_level_values(i) for i in same]))
        else:
            sid = np.zeros(len(groups), dtype=np.int64)
        # S[s, g] = 1 for the groups (locations, repetitions) g of point s
        S = sp.csr_matrix((np.ones(len(groups)), (sid, np.arange(len(groups)))), shape=(int(sid.max()) + 1, len(groups)))
        some = ((S @ present) > 0).astype(float).tocsr()   # callpaths some location/repetition of the point has
        gaps = sp.csr_matrix(some[sid] - (present > 0).astype(float)) > 0
        return gaps.astype(float).tocsr() if gaps.nnz else None

    def _convert(self, metric: str, target: str, name: str | None) -> "Experiment":
        if metric not in self.metrics:
            raise PerfcastError(f"no metric {metric!r}; the experiment has: {', '.join(self.metrics)}")
        m = self.metrics[metric]
        source = "exclusive" if target == "inclusive" else "inclusive"
        if m.scope != source:
            raise PerfcastError(f"metric {metric!r} has scope {m.scope!r}; converting to {target} "
                                f"needs {source} values")
        d = self.data[self.data["metric"] == metric]
        order = self.tree.preorder()
        index = {p: i for i, p in enumerate(order)}
        group_cols = [c for c in d.columns if c not in ("callpath", "metric", "value")]
        if group_cols:
            gid, groups = pd.factorize(pd.MultiIndex.from_frame(d[group_cols]))
        else:
            gid, groups = np.zeros(len(d), dtype=np.int64), pd.MultiIndex.from_tuples([()])
        cp = np.array([index[c] for c in d["callpath"].astype(str)], dtype=np.int64)
        shape = (len(groups), len(order))
        vals = sp.csr_matrix((d["value"].to_numpy(), (gid, cp)), shape=shape)
        present = sp.csr_matrix((np.ones(len(d)), (gid, cp)), shape=shape)
        gaps = self._gapped(groups, group_cols, present)
        if target == "inclusive":
            # dense subtree sums, a block of groups at a time to bound memory
            step = max(1, 20_000_000 // max(1, len(order)))
            rows_r, rows_c, rows_v = [], [], []
            for g0 in range(0, len(groups), step):
                block = slice(g0, min(g0 + step, len(groups)))
                inc = self.tree.accumulate(order, vals[block].toarray())
                has = self.tree.accumulate(order, present[block].toarray()) > 0
                if gaps is not None:   # a subtree with a missing value has no sum at that location
                    has &= self.tree.accumulate(order, gaps[block].toarray()) == 0
                r, c = np.nonzero(has)
                rows_r.append(r + g0)
                rows_c.append(c)
                rows_v.append(inc[r, c])
            r, c, new_vals = np.concatenate(rows_r), np.concatenate(rows_c), np.concatenate(rows_v)
        else:
            # exclusive(i) = inclusive(i) - sum over children; children matrix C[i, j] = 1 if parent(j) = i
            rows = [index[self.tree.parent(p)] for p in order if self.tree.parent(p) is not None]
            cols = [index[p] for p in order if self.tree.parent(p) is not None]
            C = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(order), len(order)))
            out = sp.csr_matrix(vals - vals @ C.T)
            has = sp.coo_matrix(present > 0)
            r, c = has.row, has.col
            if gaps is not None:   # a child missing at the location: the parent's exclusive value is too
                ok = np.asarray((gaps @ C.T)[r, c]).ravel() == 0
                r, c = r[ok], c[ok]
            new_vals = np.asarray(out[r, c]).ravel()
            # tiny negative residues from floating-point subtraction of equal sums
            scale = np.abs(np.asarray(vals[r, c]).ravel())
            new_vals = np.where(np.abs(new_vals) <= 1e-12 * np.maximum(scale, 1.0), 0.0, new_vals)
        new = pd.DataFrame({col: np.asarray(groups.get_level_values(i))[r] for i, col in enumerate(group_cols)})
        new["callpath"] = [order[i] for i in c]
        new_name = name or metric
        new["metric"] = new_name
        new["value"] = new_vals
        rest = self.data[self.data["metric"] != metric] if name is None else self.data
        rest = rest.astype({"callpath": str, "metric": str})
        data = pd.concat([rest, new[rest.columns]], ignore_index=True)
        metrics = dict(self.metrics)
        if name is None:
            del metrics[metric]
        metrics[new_name] = replace(m, name=new_name, scope=target)
        return Experiment(self.parameters, data, metrics.values(), self.tree, copy.deepcopy(self.meta))


def _aggregate(data: pd.DataFrame, how: str, over: Sequence[str], exp: "Experiment | None" = None) -> pd.DataFrame:
    """:meth:`Experiment.aggregate` of a value table (or some of its rows of ``exp``).  Over the
    location columns of a sparse profile's rows, by :func:`reduce_over_locations` (an absent
    location is a 0), then over ``rep`` if asked, by :func:`reduce_over_repetitions` once the
    locations are reduced (a sparse profile's run that measured the metric but lacks the callpath
    is a 0); per location over ``rep`` (of ``exp.data``) with the zeros of :func:`with_absent_zeros`."""
    if how not in AGGREGATES:
        raise PerfcastError(f"unknown aggregate {how!r}; use one of {', '.join(AGGREGATES)}")
    over = [c for c in over if c in data.columns]
    bad = [c for c in over if c not in ("rep", *LOCATION_COLUMNS)]
    if bad:
        raise PerfcastError(f"can only aggregate over rep, rank, thread (not {', '.join(bad)})")
    loc = [c for c in LOCATION_COLUMNS if c in data.columns]
    if (exp is not None and loc and "rep" in over and not set(loc) <= set(over) and data is exp.data
            and absent_repetition_is_zero(exp)):
        # per location over the repetitions: a location of a run that measured the metric but
        # lacks the callpath did not run it there, a 0 (with_absent_zeros)
        data = with_absent_zeros(exp)
    if exp is not None and loc and set(loc) <= set(over) and not absent_location_is_missing(exp):
        data = reduce_over_locations(exp, data, how, sort=True)
        over = [c for c in over if c not in loc]
        if not over:
            return data
    if exp is not None and over == ["rep"] and not any(c in data.columns for c in LOCATION_COLUMNS):
        # one value per run: repetitions by the one rule (a sparse profile's absent one is a 0)
        out = reduce_over_repetitions(exp, data, how)
        keys = [c for c in out.columns if c != "value"]
        return out.sort_values(keys, kind="stable").reset_index(drop=True)
    keys = [c for c in data.columns if c not in (*over, "value")]
    out = data.groupby(keys, observed=True, sort=True)["value"].agg(how).reset_index()
    if how == "std":
        out["value"] = out["value"].fillna(0.0)
    return out


def _canonical(df: pd.DataFrame) -> pd.DataFrame:
    # rep's and the parameters' widths are storage, not content
    d = df.astype({"callpath": str, "metric": str, "rep": "int64",
                   **{c: "float64" for c in df.columns if df[c].dtype == np.float32}})
    return d.sort_values(list(d.columns)).reset_index(drop=True)


def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _json_num(x):
    x = float(x)
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


#: points of combined inputs up to which ``meta["point_sources"]`` records which file holds which
#: point (more: the files are named only when there is one)
POINT_SOURCES_MAX = 10_000


def _point_sources(experiments: Sequence[Experiment], sources: Sequence[str | None], params) -> list | None:
    """``[*coordinates, file]`` per point of each input read from one file (an input combined from
    several keeps its own record), so that a message about a point can name its file
    (:func:`sources_at`); None when none is known or there would be more than
    :data:`POINT_SOURCES_MAX`."""
    rows: list = []
    for e, src in zip(experiments, sources):
        own = e.meta.get("point_sources")
        if own:
            rows.extend(own)
            continue
        s = e.meta.get("sources") or ([src] if src else [])
        if len(s) != 1 or set(e.parameters) != set(params):
            continue
        pts = e.points()
        if len(rows) + len(pts) > POINT_SOURCES_MAX:
            return None
        if not params:
            rows.append([str(s[0])])
            continue
        cols = [pts[p].to_numpy(dtype=float) for p in params]
        rows.extend([*map(float, c), str(s[0])] for c in zip(*cols))
    return rows if 0 < len(rows) <= POINT_SOURCES_MAX else None


def gap_error(exp: "Experiment", message: str, points: pd.DataFrame | None = None,
              where: str | None = None) -> PerfcastError:
    """An error about missing values of ``exp`` at ``points`` (None: its one point), naming the
    file that holds them (:func:`sources_at`): as the error's file when it is one, in the message
    when several."""
    files = sources_at(exp, exp.points() if points is None and exp.parameters else points)
    if len(files) == 1:
        return PerfcastError(message, files[0], where)
    return PerfcastError(message + _in_files(files, shown=3), None, where)


def sources_at(exp: "Experiment", points: pd.DataFrame | None = None) -> list[str]:
    """The files that hold ``points`` (rows with a column per parameter; None: any point) of
    ``exp``, where known: the experiment's one source, else the files recorded per point when
    inputs were combined (:func:`combine`); empty when unknown.  For messages about a point's
    values (a rank's gap), which name the file as every input error does."""
    srcs = [str(x) for x in exp.meta.get("sources") or []]
    if len(srcs) == 1:
        return srcs
    ps = exp.meta.get("point_sources")
    if not ps:
        return []
    if points is None or not exp.parameters:
        return list(dict.fromkeys(r[-1] for r in ps))
    want = {tuple(float(x) for x in r) for r in points[list(exp.parameters)].itertuples(index=False)}
    return list(dict.fromkeys(r[-1] for r in ps if tuple(r[:-1]) in want))


def overlap(data: pd.DataFrame, params: Sequence[str], name, src: str = "_src") -> tuple[int, list[str]]:
    """What merging inputs as repetitions of shared points did: the number of points (coordinates)
    held by more than one input -- their runs became further repetitions, as repetitions of a
    campaign should -- and warnings about an input holding exactly the same values as an earlier one
    at a point (the same runs given twice, e.g. a stored experiment and the file it was imported
    from, or one .cali file under two names: they would count twice).  Values that are all
    integers (visits, counts) repeat exactly in real reruns and are not warned about.  ``data``:
    the inputs' rows with their input number in column ``src``; ``name(coordinates, input)``: the
    input's name for the message (:func:`combine`: the input given; Caliper: the run's file)."""
    keys = list(params)
    if not keys:
        per = data[src].nunique()
        return (1 if per > 1 else 0), []
    src_per = data.groupby(keys, observed=True, sort=False)[src].nunique()
    shared = int((src_per > 1).sum())
    if not shared:
        return 0, []
    # a multiset of rows per (input, point), compared across inputs by an order-free sum of row
    # hashes and the row count (the repetition number left out)
    cols = [c for c in ("callpath", "metric", *LOCATION_COLUMNS, "value") if c in data.columns and c != src]
    # (a categorical column hashes by its values, as a column of strings does: no copy as strings)
    h = pd.util.hash_pandas_object(data[cols], index=False)
    h = h.to_numpy(np.uint64)
    v = data["value"].to_numpy(dtype=float)
    # the hash's two 32-bit halves summed apart: exact sums in 64 bits for any row count below 2^32
    sig = pd.DataFrame({**{k: data[k] for k in keys}, "_src": data[src].to_numpy(), "_hi": h >> np.uint64(32),
                        "_lo": h & np.uint64(0xFFFFFFFF), "_frac": v != np.round(v)})
    g = sig.groupby([*keys, "_src"], observed=True, sort=False).agg(
        _n=("_hi", "size"), _hi=("_hi", "sum"), _lo=("_lo", "sum"), _frac=("_frac", "any")).reset_index()
    g = g[g["_frac"]]
    same = [*keys, "_n", "_hi", "_lo"]
    dup = g.duplicated(same, keep=False)
    pairs: dict[tuple[str, str], int] = {}
    for _, grp in g[dup].groupby(same, observed=True, sort=False):
        coord = tuple(float(grp[k].iloc[0]) for k in keys)
        srcs = sorted(grp["_src"].tolist())
        first = name(coord, srcs[0])
        for later in srcs[1:]:
            pair = (first, name(coord, later))
            pairs[pair] = pairs.get(pair, 0) + 1
    return shared, [f"{b} holds exactly the values of {a} at {n} point(s) (the same runs given twice?): they "
                    f"are merged as further repetitions and count twice" for (a, b), n in pairs.items()]


def combine(experiments: Sequence[Experiment], sources: Sequence[str] | None = None) -> Experiment:
    """Merge experiments that share parameters into one.

    Values at a coordinate already present become further repetitions (never collapsed).
    Metrics must agree in unit/kind/scope; trees are merged.
    """
    if not experiments:
        raise PerfcastError("nothing to combine")
    sources = list(sources) if sources is not None else [None] * len(experiments)
    first = experiments[0]
    params = first.parameters
    metrics = dict(first.metrics)
    tree = first.tree
    frames = [first.data.astype({"callpath": str, "metric": str})]
    meta = {"sources": []}
    for e, src in zip(experiments, sources):
        meta["sources"].extend(e.meta.get("sources", [src] if src else []))
    warnings = [w for e in experiments for w in e.meta.get("warnings", [])]
    summaries = [e.meta.get("summary") for e in experiments]
    if any(summaries):
        # per-point statistics of summary inputs (io/summary.py, io/extrap.py archives): their rows
        # concatenate when the inputs share the layout; otherwise they cannot be kept together
        s0 = summaries[0]
        if all(s and s.get("columns") == s0.get("columns") and s.get("statistic") == s0.get("statistic")
               for s in summaries):
            meta["summary"] = {**s0, "rows": [r for s in summaries for r in s.get("rows", [])]}
        else:
            warnings.append("the inputs' summary statistics have different layouts (or some inputs have none): "
                            "they are not kept in the combined experiment")
    if warnings:
        meta["warnings"] = list(dict.fromkeys(warnings))
    if all(absent_location_is_missing(e) for e in experiments):
        meta["locations"] = "dense"
    if any(e.meta.get("repetitions") == LISTED_REPETITIONS for e in experiments):
        # a listed input's shorter value list is fewer measurements: no repetition becomes a 0
        # (absent_repetition_is_zero), not even of the profiles combined with it
        meta["repetitions"] = LISTED_REPETITIONS
    ps = _point_sources(experiments, sources, params)
    if ps:
        meta["point_sources"] = ps
    for e, src in zip(experiments[1:], sources[1:]):
        if set(e.parameters) != set(params):
            raise PerfcastError(
                f"parameters differ between inputs: {', '.join(params) or '(none)'} vs "
                f"{', '.join(e.parameters) or '(none)'}; name the parameter values of each input", src)
        for n, m in e.metrics.items():
            if n in metrics and metrics[n] != m:
                a, b = metrics[n].to_dict(), m.to_dict()
                diff = "; ".join(f"{k} {a.get(k, '')!r} vs {b.get(k, '')!r}" for k in dict.fromkeys([*a, *b])
                                 if a.get(k, "") != b.get(k, ""))
                raise PerfcastError(f"metric {n!r} differs between inputs ({diff}); the inputs must describe "
                                    "it alike", src)
            metrics.setdefault(n, m)
        try:
            tree = tree.merged(e.tree)
        except PerfcastError as err:
            raise err.at(src) from None
        frames.append(e.data.astype({"callpath": str, "metric": str}))
    cols = set().union(*(f.columns for f in frames))
    for c in LOCATION_COLUMNS:
        if c in cols and not all(c in f.columns for f in frames):
            raise PerfcastError("some inputs hold per-rank values and others totals; reduce them first")
    data = pd.concat([f.assign(_src=i) for i, f in enumerate(frames)], ignore_index=True)
    names = [s or f"input {i + 1}" for i, s in enumerate(sources)]
    shared, twins = overlap(data, params, lambda _, i: names[i])
    meta["combined"] = {"inputs": len(experiments), "points_in_several_inputs": shared}
    if twins:
        warnings = meta.setdefault("warnings", [])
        warnings.extend(twins)
    # repetitions: the (input, rep) pairs at one coordinate/callpath/metric/location, numbered in
    # input order -- values at equal coordinates from different inputs are never collapsed
    keys = [*params, "callpath", "metric", *[c for c in LOCATION_COLUMNS if c in data.columns]]
    order = data["_src"].to_numpy(np.int64) * (int(data["rep"].max()) + 1) + data["rep"].to_numpy(np.int64)
    data["rep"] = (data.assign(_k=order).groupby(keys, observed=True, sort=False)["_k"]
                   .rank(method="dense").to_numpy(np.int64) - 1)
    # which callpaths each metric's input(s) could see: an input's metric absent where only another
    # input's tree reaches is missing there, not a 0 (metric_coverage)
    names = set(first.metrics)
    if any(e.meta.get(COVERAGE) for e in experiments) or any(set(e.metrics) != names for e in experiments):
        seen: dict[str, set] = {}
        for e in experiments:
            for m, cps in seen_callpaths(e).items():
                seen.setdefault(m, set()).update(cps)
        cov = coverage_record(seen, tree.paths)
        if cov:
            meta[COVERAGE] = cov
    return Experiment(params, data.drop(columns="_src"), metrics.values(), tree, meta)
