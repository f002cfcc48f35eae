"""Message counts of Cartesian process grids: models in a grid covariate of the process count.

A code that decomposes its domain over ``MPI_Dims_create(p, d)`` + ``MPI_Cart_create`` sends, per
halo exchange, one message per pair of neighbouring ranks and direction.  Summed over ranks that is

    nbrs(p) = sum_i 2 (d_i - 1) p / d_i          (dims d_1 >= ... >= d_k of p's grid)

messages -- 48 at p = 16 (4 x 4), 10 at p = 6 (3 x 2), 2 at p = 2 (2 x 1).  It is not a power law
in ``p`` (at p = 6 and 8 the grid is not square), so a PMNF model fitted on p = 1..9 is off at a
square target (the demo measured +5.9 % on MPI_Isend at p = 16) and worse at a grid far from any
measured one.  The count is a *linear* function of the covariate, exact at every measured point;
this module fits PMNF models with ``p`` replaced by a covariate (the other parameters kept:
``800 * nbrs(p) * n`` bytes sent in 100 exchanges of faces of ``n`` doubles) and keeps one only
where the series is free of noise, the plain model misses a measured point, the covariate's model
passes through every one with at least two points to spare (a chance fit of integer data is then
implausible) and, fitted without the largest process count, predicts that one exactly too.

Covariates (of the dims of p's grid; "per rank" ones are the sum over ranks divided by p):

    nbrs(p)      sum_i 2 (d_i - 1) p / d_i    directed neighbour pairs (messages, sum over ranks)
    nbrs(p)/p    sum_i 2 (1 - 1 / d_i)        the same per rank (mean over ranks)
    maxnbrs(p)   sum_i min(d_i - 1, 2)        neighbours of the rank with the most (max over ranks)
    cuts(p)      sum_i (d_i - 1)              cut planes: strong scaling's halo bytes, sum over ranks
    cuts(p)/p    sum_i (d_i - 1) / p          the same per rank
    maxface(p)   sum_i min(d_i - 1, 2) d_i / p  the busiest rank's faces, each a cross-section of the
                                              whole grid over the other dims (strong scaling's halo
                                              bytes of the busiest rank, max over ranks)

The dims are the MPI library's.  MPI_Dims_create's result is implementation-defined ("as close to
each other as possible, using an appropriate divisibility algorithm"); two rules are known here:

* ``greedy`` -- the prime factors of p, largest first, each multiplied into the dimension with the
  smallest product so far (Open MPI's; identical to Open MPI 4.1.4's MPI_Dims_create for every
  p <= 2000 and d = 2, 3: tests/test_fit_grid.py runs that comparison where mpicc exists);
* ``balanced`` -- the factorisation with the smallest spread (largest - smallest dim), then the
  smallest sum of squares (the standard's wording taken literally; 9 x 8 at p = 72 where greedy
  gives 12 x 6).

Which rule the measured runs followed is decided by the dims they recorded (the PMPI library
records MPI_Cart_create's): a rule must reproduce every one.  No file I/O happens here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

import numpy as np

from ..errors import PerfcastError
from .core import FitOptions
from .model import STATUSES, Composite, Model, Quality, point_columns

RULES = ("greedy", "balanced")
#: a covariate's model is exact when no measured mean is further from it than this (relative to the
#: series' largest absolute mean): round-off of a least-squares fit of integer counts
EXACT = 1e-9
#: measured points beyond the model's coefficients (constant included) an exact fit must have
SPARE = 2


def _primes(p: int) -> list[int]:
    out, q = [], 2
    while q * q <= p:
        while p % q == 0:
            out.append(q)
            p //= q
        q += 1
    if p > 1:
        out.append(p)
    return out


def _factorisations(p: int, d: int, hi: int):
    """Every non-increasing tuple of ``d`` factors of ``p``, none above ``hi``."""
    if d == 1:
        if p <= hi:
            yield (p,)
        return
    for f in range(min(p, hi), 0, -1):
        if p % f == 0:
            for rest in _factorisations(p // f, d - 1, f):
                yield (f, *rest)


@functools.lru_cache(maxsize=4096)
def dims_create(p: int, d: int, rule: str = "greedy") -> tuple[int, ...]:
    """The dims ``MPI_Dims_create(p, d)`` gives under ``rule`` (:data:`RULES`), non-increasing."""
    if rule not in RULES:
        raise PerfcastError(f"unknown process-grid rule {rule!r} ({', '.join(RULES)})", where="grid")
    if int(p) != p or p < 1 or int(d) != d or d < 1:
        raise PerfcastError(f"a process grid needs a positive whole number of processes and dimensions, "
                            f"not p={p:g}, d={d:g}", where="grid")
    p, d = int(p), int(d)
    if rule == "greedy":
        dims = [1] * d
        for f in sorted(_primes(p), reverse=True):
            i = min(range(d), key=dims.__getitem__)      # the first of the smallest
            dims[i] *= f
        return tuple(sorted(dims, reverse=True))
    return min(_factorisations(p, d, p), key=lambda t: (t[0] - t[-1], sum(v * v for v in t)))


#: name -> covariate of (dims, p); in the order a tie between exact models is decided
COVARIATES: dict[str, Callable[[tuple[int, ...], int], float]] = {
    "nbrs(p)": lambda dims, p: float(sum(2 * (d - 1) * (p // d) for d in dims)),
    "nbrs(p)/p": lambda dims, p: float(sum(2 * (d - 1) * (p // d) for d in dims)) / p,
    "maxnbrs(p)": lambda dims, p: float(sum(min(d - 1, 2) for d in dims)),
    "cuts(p)": lambda dims, p: float(sum(d - 1 for d in dims)),
    "cuts(p)/p": lambda dims, p: float(sum(d - 1 for d in dims)) / p,
    "maxface(p)": lambda dims, p: float(sum(min(d - 1, 2) * d for d in dims)) / p,
}
MEANING = {
    "nbrs(p)": "neighbour pairs of the process grid (messages per exchange, summed over ranks)",
    "nbrs(p)/p": "neighbour pairs of the process grid per rank",
    "maxnbrs(p)": "neighbours of the rank with the most",
    "cuts(p)": "cut planes of the process grid (sum of dims - 1)",
    "cuts(p)/p": "cut planes of the process grid per rank",
    "maxface(p)": "the busiest rank's halo faces as a share of a whole cross-section (strong scaling)",
}


@dataclass(frozen=True)
class Grid:
    """The process grid of a code: ``ndims`` dimensions from ``MPI_Dims_create`` under ``rule``;
    ``parameter``: the process count's parameter; ``recorded``: the dims measured runs recorded,
    ``((p, dims), ...)``; ``ambiguous``: the rules the records could not tell apart (besides
    ``rule``)."""

    parameter: str
    ndims: int
    rule: str = "greedy"
    recorded: tuple = ()
    ambiguous: tuple[str, ...] = ()

    def dims(self, p: float) -> tuple[int, ...] | None:
        """p's dims, None where p is no positive whole number."""
        if not (p >= 1 and float(p).is_integer()):
            return None
        return dims_create(int(p), self.ndims, self.rule)

    def values(self, name: str, p) -> np.ndarray:
        """The covariate ``name`` at the process counts ``p`` (NaN where p is no whole number)."""
        f = COVARIATES[name]
        x = np.asarray(p, dtype=float).ravel()
        out = np.full(len(x), np.nan)
        for v in np.unique(x[np.isfinite(x)]):
            dims = self.dims(float(v))
            if dims is not None:
                out[x == v] = f(dims, int(v))
        return out.reshape(np.shape(p))

    def describe(self, p: float) -> str:
        dims = self.dims(p)
        return "x".join(map(str, dims)) if dims else "-"

    def to_dict(self) -> dict:
        return {"parameter": self.parameter, "ndims": self.ndims, "rule": self.rule,
                "recorded": [[float(p), list(d)] for p, d in self.recorded],
                "ambiguous": list(self.ambiguous)}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Grid":
        try:
            return cls(str(d["parameter"]), int(d["ndims"]), str(d.get("rule", "greedy")),
                       tuple((float(p), tuple(int(v) for v in dims)) for p, dims in d.get("recorded", ())),
                       tuple(d.get("ambiguous", ())))
        except (KeyError, TypeError, ValueError) as e:
            raise PerfcastError(f"malformed process grid ({type(e).__name__}: {e})", where="grid") from None


def first_difference(grid: Grid, above: float, limit: int = 1 << 20) -> tuple[int, dict] | None:
    """The first process count above ``above`` (up to ``limit``) where a rule of
    ``grid.ambiguous`` gives other dims than ``grid.rule``, with those dims by rule; None when
    there is no other rule or none differs."""
    if not grid.ambiguous:
        return None
    p = int(above) + 1
    while p <= limit:
        own = dims_create(p, grid.ndims, grid.rule)
        other = {r: d for r in grid.ambiguous if (d := dims_create(p, grid.ndims, r)) != own}
        if other:
            return p, other
        p += 1
    return None


def grid_of_records(parameter: str, records: Sequence[tuple[float, Sequence[int]]]) -> tuple[Grid | None, str]:
    """The :class:`Grid` the recorded ``(p, dims)`` of MPI_Cart_create follow, and why not (an empty
    reason with a grid): every record must have the same number of dimensions and the product p,
    and a rule of :data:`RULES` must give every record's dims (dims with a 1 are as good as any:
    ``MPI_Dims_create(2, 2)`` is 2 x 1)."""
    recs = sorted({(float(p), tuple(int(v) for v in dims)) for p, dims in records})
    if not recs:
        return None, "no MPI_Cart_create was recorded"
    nd = {len(d) for _, d in recs}
    if len(nd) != 1:
        return None, f"the runs created process grids of {' and '.join(map(str, sorted(nd)))} dimensions"
    for p, dims in recs:
        if math.prod(dims) != p:
            return None, f"the grid {'x'.join(map(str, dims))} at {parameter}={p:g} is not all processes"
    ndims = nd.pop()
    # one dimension has one grid whatever the rule
    rules = [r for r in (RULES if ndims > 1 else RULES[:1])
             if all(tuple(sorted(d, reverse=True)) == dims_create(int(p), ndims, r) for p, d in recs)]
    if not rules:
        p, d = next((p, d) for p, d in recs if tuple(sorted(d, reverse=True)) != dims_create(int(p), ndims, "greedy"))
        return None, (f"the grid {'x'.join(map(str, d))} recorded at {parameter}={p:g} follows no known "
                      f"MPI_Dims_create rule")
    return Grid(parameter, ndims, rules[0], tuple(recs), tuple(rules[1:])), ""


# ---------------------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GridModel(Composite):
    """A PMNF model whose process-count factor is a covariate of the process grid.

    ``base`` is fitted with ``grid.parameter`` replaced by the covariate ``covariate`` (its
    parameter of that name); every other parameter is the experiment's.  ``single``: the plain
    PMNF model it was preferred to."""

    parameters: tuple[str, ...]
    grid: Grid
    covariate: str
    base: Model
    #: the largest measured value of each parameter (the process count's, not its covariate's)
    upper: tuple[float, ...] | None = None
    single: Model | None = None
    status: str = "ok"
    needed: int = 0
    notes: tuple[str, ...] = ()
    #: ``single`` passes through every measured point too (the data cannot tell the two apart; they
    #: part beyond the measured counts): the interval spans its value as well
    rival: bool = False

    # -- the Model interface ----------------------------------------------------------------------
    @property
    def inner(self) -> Model:
        return self.base

    @property
    def quality(self) -> Quality | None:
        return self.base.quality

    def lead(self) -> dict[str, dict]:
        lead = self.base.lead()
        lead[self.grid.parameter] = lead.pop(self.covariate)
        return {q: lead[q] for q in self.parameters}

    def lead_order(self):
        """The covariate grows like p (per rank: like p^0) -- its order is the process count's."""
        lo = self.base.lead_order()
        lo[self.grid.parameter] = lo.pop(self.covariate)
        return {q: lo[q] for q in self.parameters}

    def _columns(self, X) -> tuple[dict[str, np.ndarray], tuple]:
        """``X`` as columns of the base model's parameters (the covariate for the process count)."""
        cols, shape = point_columns(self.parameters, X)
        cols[self.covariate] = self.grid.values(self.covariate, cols.pop(self.grid.parameter))
        return cols, shape

    def predict(self, X, averaged: bool = False) -> np.ndarray | float:
        """The base model at the covariate of ``X``'s process count (NaN where it is no whole
        number: a process grid has none)."""
        cols, shape = self._columns(X)
        y = np.asarray(self.base.predict(cols, averaged), dtype=float).ravel()
        return float(y[0]) if shape == () else y.reshape(shape)

    def interval(self, X, level: float = 0.9, averaged: bool = False) -> tuple:
        """The base model's interval at the covariate of ``X``, widened to the value under each
        MPI_Dims_create rule the measured grids could not rule out (``grid.ambiguous``)."""
        cols, shape = self._columns(X)
        lo, hi = self.base.interval(cols, level, averaged)
        lo, hi = np.asarray(lo, dtype=float).ravel(), np.asarray(hi, dtype=float).ravel()
        if self.grid.ambiguous:
            p = point_columns(self.parameters, X)[0][self.grid.parameter]
            for rule in self.grid.ambiguous:
                other = dict(cols)
                other[self.covariate] = replace(self.grid, rule=rule).values(self.covariate, p)
                y = np.asarray(self.base.predict(other, averaged), dtype=float).ravel()
                lo, hi = np.fmin(lo, y), np.fmax(hi, y)
        if self.rival and self.single is not None:
            with np.errstate(all="ignore"):
                y = np.asarray(self.single.predict(point_columns(self.parameters, X)[0], averaged),
                               dtype=float).ravel()
            lo, hi = np.fmin(lo, y), np.fmax(hi, y)
        if shape == ():
            return float(lo[0]), float(hi[0])
        return lo.reshape(shape), hi.reshape(shape)

    # -- description ------------------------------------------------------------------------------
    def formula(self, style: str = "plain", digits: int = 4) -> str:
        """The base model's formula, the covariate by its name (``1600 * nbrs(p) * n``)."""
        return self.base.formula(style, digits)

    def definition(self, at: float | None = None) -> str:
        """What the covariate is, in one line (with its value and grid at ``at``)."""
        g = self.grid
        text = (f"{self.covariate}: {MEANING[self.covariate]}; dims = MPI_Dims_create({g.parameter}, {g.ndims}), "
                f"{g.rule} rule")
        if at is not None and g.dims(at):
            text += f"; at {g.parameter}={at:g}: {g.describe(at)}, {self.covariate} = " \
                    f"{float(g.values(self.covariate, [at])[0]):g}"
        return text

    def __str__(self) -> str:
        return self.formula()

    # -- JSON -------------------------------------------------------------------------------------
    def to_dict(self, alternatives: bool = True) -> dict:
        d = {"kind": "grid", "parameters": list(self.parameters), "status": self.status,
             "formula": self.formula(), "covariate": self.covariate, "definition": self.definition(),
             "grid": self.grid.to_dict(), "model": self.base.to_dict(alternatives),
             "constant": float(self.constant), "terms": [t.to_dict() for t in self.terms],
             "quality": None if self.quality is None else self.quality.to_dict(), "lead": self.lead()}
        if self.rival:
            d["plain_exact"] = True
        return self._extras(d)

    @classmethod
    def from_dict(cls, d: Mapping) -> "GridModel":
        try:
            if d.get("kind") != "grid":
                raise PerfcastError("not a process-grid model (kind is not 'grid')", where="kind")
            cov = str(d["covariate"])
            if cov not in COVARIATES:
                raise PerfcastError(f"unknown process-grid covariate {cov!r}", where="covariate")
            status = d.get("status", "ok")
            if status not in STATUSES:
                raise PerfcastError(f"unknown model status {status!r}", where="status")
            single = d.get("single")
            largest = d.get("largest_measured")
            return cls(tuple(d["parameters"]), Grid.from_dict(d["grid"]), cov, Model.from_dict(d["model"]),
                       None if largest is None else tuple(float(v) for v in largest),
                       None if single is None else Model.from_dict(single), status, int(d.get("needed", 0)),
                       tuple(d.get("notes", ())), bool(d.get("plain_exact", False)))
        except (KeyError, TypeError, ValueError) as e:
            raise PerfcastError(f"malformed process-grid model ({type(e).__name__}: {e})") from None


# ---------------------------------------------------------------------------------------------
# fitting
# ---------------------------------------------------------------------------------------------
def _misses(model, X: np.ndarray, parameters: Sequence[str], mean: np.ndarray) -> bool:
    """Whether ``model``'s function (its measured lines' levels aside: :func:`perfcast.fit.lines.function_only`)
    misses a measured mean by more than :data:`EXACT`."""
    from .lines import function_only

    with np.errstate(all="ignore"):
        y = np.asarray(function_only(model).predict({q: X[:, k] for k, q in enumerate(parameters)}), dtype=float)
    scale = max(float(np.max(np.abs(mean))), 1e-300)
    return not bool(np.all(np.abs(y - mean) <= EXACT * scale))


def _fit(X, mean, count, ssd, names, opts, check: bool = True) -> Model:
    """One series' PMNF model (with its measured lines when it has several parameters and the p = 1
    rules when the process count is among ``names``, as :func:`perfcast.fit.fit_series` gives:
    :func:`perfcast.fit.series.fit_one`)."""
    from .series import fit_one

    return fit_one(X, mean, count, ssd, names, opts, check=check, fall=False).model(0)


def fit_grid(X, mean, count, ssd, parameters: Sequence[str], grid: Grid, options: FitOptions | None = None,
             single: Model | None = None) -> GridModel | None:
    """The :class:`GridModel` of one series (points ``X``, n x len(parameters); per-point ``mean``,
    ``count``, ``ssd`` as :func:`perfcast.fit.series_statistics` gives), or None: when the series is
    noisy, no covariate's model passes through every point with :data:`SPARE` points to spare, or
    ``single`` (the plain model, fitted here when None) passes through every point as well and
    agrees with the covariate's beyond them.  Of several exact ones, the one with the fewest terms
    (then :data:`COVARIATES` order).

    Where both pass through every measured point and part beyond them, the data cannot tell them
    apart, and the grid's model is kept: the runs recorded their process grid, and a count that is
    a function of its dims is the mechanism, the plain law a coincidence of the measured counts
    (the busiest rank's halo messages of a 2-D grid, 1, 2, 3, 4 neighbours at p = 2, 4, 8, 16, are
    ``log2(p)`` there -- 6 at p = 64 where the 8 x 8 grid has 4).  Its interval spans the plain
    model's value too (``rival``), and a note says where the two part."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    mean, count, ssd = (np.asarray(a, dtype=float) for a in (mean, count, ssd))
    parameters = tuple(parameters)
    if grid.parameter not in parameters or np.any(ssd != 0) or not np.all(np.isfinite(mean)):
        return None
    k = parameters.index(grid.parameter)
    p = X[:, k]
    if len(np.unique(p)) < 3 or np.ptp(mean) == 0:
        return None
    opts = options or FitOptions()
    if single is None:
        single = _fit(X, mean, count, ssd, parameters, opts)
    plain_exact = single.status == "ok" and not _misses(single, X, parameters, mean)
    keep = p < p.max()
    if len(np.unique(p[keep])) < 3:
        return None
    best = None
    for name in COVARIATES:
        g = grid.values(name, p)
        if not np.all(np.isfinite(g)):
            return None
        Xg = X.copy()
        Xg[:, k] = g
        names = tuple(name if q == grid.parameter else q for q in parameters)
        m = _fit(Xg, mean, count, ssd, names, opts)
        if m.status != "ok" or len(mean) < 1 + len(m.terms) + SPARE or _misses(m, Xg, names, mean):
            continue
        # the check the fit cannot make (a covariate of 0 has no doublings): fitted without the
        # largest process count, the covariate's model must predict it exactly too
        held = _fit(Xg[keep], mean[keep], count[keep], ssd[keep], names, opts, check=False)
        if held.status != "ok" or _misses(held, Xg, names, mean):
            continue
        if best is None or len(m.terms) < len(best[1].terms):
            # exact where it was held out: no extrapolation drift (as an exact plain model's)
            best = (name, replace(m, drift=0.0, drift_dof=0, drift_along=None))
    if best is None:
        return None
    name, m = best
    notes = (f"{name}: {MEANING[name]}, dims = MPI_Dims_create({grid.parameter}, {grid.ndims}) ({grid.rule} rule); "
             f"exact at all {len(mean)} measured points, and at the largest {grid.parameter} when fitted without "
             f"it; the plain model {single.formula()} is not",)
    if plain_exact:
        parting = _parting(m, single, grid, name, X, parameters)
        if parting is None:
            return None      # the same function wherever it was probed: the plain model stays
        at, plain_v, grid_v = parting
        notes = (notes[0].rsplit("; the plain model", 1)[0] + f"; the plain model {single.formula()} passes through "
                 f"every measured point too, but the two part beyond them (first at {grid.parameter}={at:g}: "
                 f"{grid.describe(at)}, {grid_v:.6g} on the grid, {plain_v:.6g} by the plain law): the grid's is "
                 f"used, as the runs recorded their process grid; the interval spans both",)
    differ = first_difference(grid, p.max())
    if differ is not None:
        at, dims = differ
        notes += (f"the measured grids do not tell MPI_Dims_create's {grid.rule} rule from the "
                  + " and ".join(f"{r} one ({'x'.join(map(str, d))})" for r, d in dims.items())
                  + f"; they differ first at {grid.parameter}={at:g} ({grid.describe(at)} here)",)
    return GridModel(parameters, grid, name, m, tuple(float(v) for v in X.max(axis=0)), single, "ok", 0, notes,
                     plain_exact)


#: process counts above the largest measured one where an exact plain model and an exact grid
#: model are compared (every whole count up to this many times the largest)
PROBE = 64


def _parting(m: Model, single: Model, grid: Grid, name: str, X: np.ndarray, parameters: tuple):
    """The first whole process count above the measured ones (up to :data:`PROBE` times the largest;
    the other parameters at their largest measured values) where the covariate ``name``'s model
    ``m`` and the plain ``single`` differ by more than :data:`EXACT`, as (p, plain value, grid
    value); None where they agree at every such count."""
    k = parameters.index(grid.parameter)
    top = int(X[:, k].max())
    ps = np.arange(top + 1, PROBE * max(top, 1) + 1, dtype=float)
    cols = {q: np.full(len(ps), float(X[:, j].max())) for j, q in enumerate(parameters)}
    cols[grid.parameter] = ps
    gcols = dict(cols)
    gcols[name] = grid.values(name, gcols.pop(grid.parameter))
    with np.errstate(all="ignore"):
        plain = np.asarray(single.predict(cols), dtype=float).ravel()
        on_grid = np.asarray(m.predict(gcols), dtype=float).ravel()
    scale = np.maximum(np.maximum(np.abs(plain), np.abs(on_grid)), 1e-300)
    apart = np.flatnonzero(~(np.abs(plain - on_grid) <= EXACT * scale))
    if not len(apart):
        return None
    i = int(apart[0])
    return float(ps[i]), float(plain[i]), float(on_grid[i])


# ---------------------------------------------------------------------------------------------
# experiments
# ---------------------------------------------------------------------------------------------
def experiment_grid(exp) -> tuple[Grid | None, str]:
    """The process grid of a campaign's runs (``meta["campaign"]["runs"][i]["cart"]``, the PMPI
    library's record of MPI_Cart_create): per run the first grid of all its processes, the
    parameter whose value is every such grid's size (the process count), and the rule of
    :func:`grid_of_records`; (None, why) when there is none."""
    runs = ((exp.meta or {}).get("campaign") or {}).get("runs") or ()
    recs = []
    for r in runs:
        whole = [c for c in r.get("cart") or () if c.get("dims") and math.prod(c["dims"]) == c.get("size")]
        if whole and r.get("config"):
            recs.append((r["config"], tuple(int(v) for v in whole[0]["dims"])))
    if not recs:
        return None, "no run recorded an MPI_Cart_create of all its processes"
    counting = [q for q in exp.parameters
                if all(q in cfg and float(cfg[q]) == math.prod(dims) for cfg, dims in recs)
                and len({float(cfg[q]) for cfg, _ in recs}) > 1]
    if len(counting) != 1:
        return None, "no one parameter is the size of every recorded process grid"
    q = counting[0]
    return grid_of_records(q, [(float(cfg[q]), dims) for cfg, dims in recs])


def grid_models(exp, series_models: Sequence, options: FitOptions | None = None, locations: str = "auto",
                statistics=None, grid: Grid | None = None) -> list:
    """Refit with :func:`fit_grid` the series of ``series_models`` (fit.SeriesModel of ``exp``) that
    are free of noise, not times, and whose model is a plain one: a series keeps its model unless a
    grid covariate's passes through every measured point where it does not.  ``grid``: the process
    grid (default: :func:`experiment_grid`); without one the series come back unchanged."""
    from .segmented import _series_arrays
    from .series import SeriesModel, statistics_columns

    items = list(series_models)
    if grid is None:
        grid = experiment_grid(exp)[0]
    if grid is None or grid.parameter not in exp.parameters or not items:
        return items
    kinds = {name: m.kind for name, m in exp.metrics.items()}
    want = [i for i, sm in enumerate(items) if kinds.get(sm.metric) not in (None, "time")]
    if not want:
        return items
    st = statistics if statistics is not None else statistics_columns(exp, locations)
    params = tuple(exp.parameters)
    index, bounds, X, M, C, S = _series_arrays(st, params)
    noisy = np.concatenate([[0], np.cumsum(S != 0)])
    base = options or FitOptions()
    for i, k in zip(want, index.find([(items[i].callpath, items[i].metric) for i in want])):
        if k is None:
            continue
        a, b = bounds[k], bounds[k + 1]
        if noisy[b] != noisy[a] or b - a < 4:
            continue
        sm = items[i]
        if type(sm.model) is not Model:
            continue
        met = exp.metrics[sm.metric]
        m = fit_grid(X[a:b], M[a:b], C[a:b], S[a:b], params, grid, base.for_kind(met.kind, met.exact), sm.model)
        if m is not None:
            items[i] = SeriesModel(sm.callpath, sm.metric, m)
    return items

__all__ = ["RULES", "COVARIATES", "Grid", "GridModel", "dims_create", "fit_grid", "grid_of_records", "experiment_grid",
           "grid_models", "first_difference"]
