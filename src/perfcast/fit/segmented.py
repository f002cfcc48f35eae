"""Segmented PMNF models: two regimes separated by one change point (single parameter, no file I/O).

Real scaling data can switch regimes between two measured scales -- an MPI library changing its
collective algorithm, a working set leaving a cache level -- and no single PMNF function follows
that.  :func:`fit_segmented` tries every change point, fits each side with the ordinary modeller
(:func:`perfcast.fit.fit_group`, as :func:`perfcast.fit.fit_series`) and keeps the segmentation only
when a criterion on the same data prefers it to the single model.

Statistical model (the one of :mod:`perfcast.fit.core`): one observation is ``f(x) (1 + e)`` with
relative noise; the deviance of a candidate is ``SS_pe + sum_i w_i (mean_i - f(x_i))^2`` with
``w_i = r_i / mean_i^2`` (relative least squares over every repetition, ``SS_pe`` the relative
within-point sum of squares, the same for every candidate) and the criterion is the BIC of the
profile likelihood of the N observations,

    N log(deviance / N + NOISE_FLOOR^2) + k log N + 2 log(hypotheses searched)

with ``k`` the free parameters: the coefficients of each piece plus one for the change location,
minus one when both pieces pass through a shared measured point (continuity at that point); the
search term is ``2 log H`` for each one-term piece (``H`` hypotheses, as in the modeller) and
``2 log C`` for the ``C`` change points tried (a uniform prior over them).  The repetition noise
enters through ``SS_pe``: with precise repetitions a systematic misfit of the single model costs a
lot of likelihood, with noisy ones it does not.  ``NOISE_FLOOR`` (1 % relative) is a prior on
measurement precision: fits closer to the data than that are not told apart (without it, a piece
that happens to pass through its few points exactly would be worth an unbounded likelihood on
series without repetitions).  For the same reason a segmentation must leave one residual degree
of freedom counting each searched exponent as a parameter: on 5 points, two 3-point pieces sharing
the middle point pass through any data and are never proposed.  The criterion of the selected
model is ``quality.criterion`` (comparable between the single model and segmentations of one
series, not with the modeller's own criterion).

Candidates: the points are sorted by the parameter; a change *between* two neighbouring measured
values ``x_i < x_(i+1)`` splits them into a first regime ``x <= x_i`` and a last regime
``x >= x_(i+1)``; a change *at* a measured value ``x_i`` makes that point part of both regimes
(both pieces are fitted through it, as in ``p^2`` up to ``p = 6``, then ``30 + p``).  Every regime
needs :data:`MIN_POINTS` points (what a one-term PMNF fit needs); the last regime may have only
:data:`MIN_LAST` points: the candidate is then scored with that regime at its level (the mean of its
points, one coefficient), and the model extends it by the one-term law through its two points
(:func:`perfcast.fit.core.fit_group`'s two-point model, with its wide interval), never by their mean;
a note says the regime's form is unchecked and where to measure more.  A single point beyond a
step is never taken for a new regime (it cannot be told from an outlier).

A fast pass scores every candidate with one-term fits done in closed form over the hypothesis
space; the best :data:`REFIT` candidates are then fitted with the modeller and scored on the
fitted pieces, against the single model scored the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..errors import PerfcastError
from .core import FitOptions, apply_zero_rule, fit_group, noise_scale, smape_percent, zero_rule_sets
from .model import STATUSES, Composite, Model, Quality
from .special import t_quantile
from .terms import block_values

#: points a modelled regime needs (a one-term PMNF fit: constant + coefficient + one residual)
MIN_POINTS = 3
#: points of a last regime too few to choose its form: the law through them extends it
MIN_LAST = 2
#: candidates of the fast pass that are fitted with the full modeller
REFIT = 2
#: candidates whose fast-pass score exceeds the single model's by more than this are not refitted
#: (the fast pass scores the best one-term pieces, a bound on the fitted ones but for the shared
#: point, counted in both pieces there)
MARGIN = 6.0
#: relative noise floor of the likelihood (1 %): fits closer than this are not told apart
NOISE_FLOOR = 0.01


# ---------------------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SegmentedModel(Composite):
    """Two PMNF regimes of one parameter, separated by one change point.

    ``segments[0]`` holds for ``x <= change[0]``, ``segments[1]`` for ``x >= change[1]``;
    ``change`` is the pair of measured values that bracket the change (equal when the change
    happens at a measured value that belongs to both regimes).  Between the two, predictions switch
    at ``cut`` (where the two pieces cross, else the geometric midpoint).  Beyond the measured data
    the LAST segment is used: the largest-scale regime is the one that continues, so extrapolation
    (and ``lead_order``, ``constant``, ``terms``) follow it; below the data the first one.

    With ``status == "insufficient"`` (models saved before the last regime of two points was
    extended by the law through them) the last regime is the mean of its points (a constant, no
    interval), as an insufficient :class:`Model` is.
    """

    parameters: tuple[str, ...]
    segments: tuple[Model, Model]
    change: tuple[float, float]
    cut: float
    #: measured (first, last) value of the parameter in each segment
    ranges: tuple[tuple[float, float], tuple[float, float]]
    quality: Quality | None = None
    status: str = "ok"
    needed: int = 0
    notes: tuple[str, ...] = ()
    #: the single PMNF model the segmentation was preferred to (None: not kept)
    single: Model | None = None

    # -- the Model interface that follows the last regime ---------------------------------------
    @property
    def last(self) -> Model:
        return self.segments[-1]

    inner = last

    @property
    def upper(self):
        return self.last.upper

    @property
    def shared(self) -> bool:
        """The change happens at a measured value that belongs to both regimes."""
        return self.change[0] == self.change[1]

    def lead(self) -> dict[str, dict]:
        return self.last.lead()

    def lead_order(self):
        return self.last.lead_order()

    def doublings(self, X):
        return self.last.doublings(X)

    # -- evaluation -----------------------------------------------------------------------------
    def _x(self, X) -> tuple[np.ndarray, tuple]:
        p = self.parameters[0]
        if isinstance(X, Mapping):
            if p not in X:
                raise PerfcastError(f"no value for parameter {p}", where="at")
            a = np.asarray(X[p], dtype=float)
        else:
            a = np.asarray(X, dtype=float)
            if a.ndim == 2 and a.shape[1] == 1:
                a = a[:, 0]
            elif a.ndim > 1:
                raise PerfcastError(f"expected values of the one parameter {p}, got an array of shape {a.shape}",
                                    where="at")
        return a.ravel(), a.shape

    def two_point_law(self) -> tuple[float, float] | None:
        """The measured (first, last) value of a last regime of :data:`MIN_LAST` points extended
        by the one-term law through them (not a plateau: a level, no term), else None."""
        last = self.last
        q = last.quality
        if self.status != "ok" or not last.terms or q is None or int(q.n_points) != MIN_LAST:
            return None
        return self.ranges[1]

    def plain_segment(self, x: float) -> Model | None:
        """The segment whose own interval is this model's at ``x`` (a value of the parameter), or
        None where :meth:`interval` widens it: between the measured values that bracket the
        change, and between the two points of a :meth:`two_point_law` (for batched callers)."""
        if not self.shared and self.change[0] < x < self.change[1]:
            return None
        if x > self.cut and (law := self.two_point_law()) is not None and law[0] < x < law[1]:
            return None
        return self.segments[int(x > self.cut)]

    def segment_of(self, X) -> np.ndarray | int:
        """Index of the segment used at ``X`` (0: first regime, 1: last regime)."""
        x, shape = self._x(X)
        s = (x > self.cut).astype(int)
        return int(s[0]) if shape == () else s.reshape(shape)

    def predict(self, X, averaged: bool = False) -> np.ndarray | float:
        """Value of the segment containing ``X`` (the last one beyond the data); a mapping
        {param: values}, an array or a scalar.  ``averaged`` is passed to the segment's model."""
        x, shape = self._x(X)
        out = np.empty(len(x))
        first = x <= self.cut
        for seg, mask in ((self.segments[0], first), (self.segments[1], ~first)):
            if mask.any():
                out[mask] = np.asarray(seg.predict(x[mask], averaged=averaged), dtype=float)
        return float(out[0]) if shape == () else out.reshape(shape)

    def interval(self, X, level: float = 0.9, averaged: bool = False) -> tuple:
        """(lower, upper) prediction interval of the segment containing ``X`` (NaN in an
        insufficient last regime), widened where that segment's own interval does not say what is
        unknown: between the measured values that bracket the change (both regimes' intervals:
        the change may happen anywhere there) and between the two points of a
        :meth:`two_point_law` (the shape between them)."""
        if not 0 < level < 1:
            raise PerfcastError(f"interval level must be between 0 and 1, not {level}", where="level")
        x, shape = self._x(X)
        lo, hi = np.full(len(x), np.nan), np.full(len(x), np.nan)
        first = x <= self.cut
        for seg, mask in ((self.segments[0], first), (self.segments[1], ~first)):
            if mask.any():
                a, b = seg.interval(x[mask], level, averaged=averaged)
                lo[mask], hi[mask] = a, b
        law = self.two_point_law()
        if law is not None:
            # between the two points of the law: what the law cannot know is the shape between
            # them (they pin its two coefficients); the drift of its exponent counted from the
            # nearer point as a bridge, d1 d2 / (d1 + d2) doublings (0 at both points)
            x0, x1 = law
            inner = ~first & (x > x0) & (x < x1)
            if inner.any():
                last, xi = self.last, x[inner]
                d1, d2 = np.log2(xi / x0), np.log2(x1 / xi)
                v = np.asarray(last.predict(xi, averaged=averaged), dtype=float)
                half = (t_quantile(float(last.drift_dof), 0.5 + level / 2) * last.drift
                        * (d1 * d2 / (d1 + d2)) ** last.growth * np.abs(v))
                own = (hi[inner] - lo[inner]) / 2
                half = np.sqrt(own ** 2 + half ** 2)
                lo[inner], hi[inner] = v - half, v + half
        if not self.shared:
            # between the measured values that bracket the change, where it happens is not
            # known: the truth may follow either regime there, and the interval spans both
            # (NaN where either regime has none)
            gap = (x > self.change[0]) & (x < self.change[1])
            if gap.any():
                for seg in self.segments:
                    a, b = seg.interval(x[gap], level, averaged=averaged)
                    lo[gap], hi[gap] = np.minimum(lo[gap], a), np.maximum(hi[gap], b)
        if shape == ():
            return float(lo[0]), float(hi[0])
        return lo.reshape(shape), hi.reshape(shape)

    # -- description ----------------------------------------------------------------------------
    def formula(self, style: str = "plain", digits: int = 4) -> str:
        """``plain``: ``p <= 6: p^2 | p >= 6: 30 + p``; ``python``: ``(A) if p <= cut else (B)``;
        ``latex``: a ``cases`` environment.  An insufficient last regime shows the mean of its
        points (and, in plain, how many points it has)."""
        if style not in ("plain", "python", "latex"):
            raise PerfcastError(f"unknown formula style {style!r} (plain, python, latex)", where="style")
        p = self.parameters[0]
        a, b = (s.formula(style, digits) for s in self.segments)
        lo, hi = (_loc(v) for v in self.change)
        if style == "python":
            return f"({a}) if {p} <= {self.cut!r} else ({b})"
        if style == "latex":
            return (f"\\begin{{cases}} {a} & {p} \\le {lo} \\\\ {b} & {p} \\ge {hi} \\end{{cases}}")
        if self.last.status != "ok":
            n = self._last_points()
            b = f"{b} (mean of {n} point{'s' if n != 1 else ''}, too few for a model)"
        return f"{p} <= {lo}: {a} | {p} >= {hi}: {b}"

    def _last_points(self) -> int:
        q = self.last.quality
        return int(q.n_points) if q is not None else 0

    def __str__(self) -> str:
        return self.formula()

    # -- JSON -----------------------------------------------------------------------------------
    def to_dict(self, alternatives: bool = True) -> dict:
        d = {
            "kind": "segmented",
            "parameters": list(self.parameters),
            "status": self.status,
            "formula": self.formula(),
            "change": {"parameter": self.parameters[0], "lower": float(self.change[0]),
                       "upper": float(self.change[1]), "shared": self.shared, "cut": float(self.cut)},
            "segments": [{"range": [float(r[0]), float(r[1])], **s.to_dict(alternatives)}
                         for r, s in zip(self.ranges, self.segments)],
            "constant": float(self.constant),
            "terms": [t.to_dict() for t in self.terms],
            "quality": None if self.quality is None else self.quality.to_dict(),
            "lead": self.lead(),
        }
        if self.status != "ok":
            d["needed"] = int(self.needed)
        return self._extras(d, upper=False)

    @classmethod
    def from_dict(cls, d: Mapping) -> "SegmentedModel":
        try:
            if d.get("kind") != "segmented":
                raise PerfcastError("not a segmented model (kind is not 'segmented')", where="kind")
            segs = d["segments"]
            if len(segs) != 2:
                raise PerfcastError(f"a segmented model has 2 segments, not {len(segs)}", where="segments")
            models = tuple(Model.from_dict({**s, "quality": _nan_quality(s.get("quality"))}) for s in segs)
            ranges = tuple((float(s["range"][0]), float(s["range"][1])) for s in segs)
            ch = d["change"]
            status = d.get("status", "ok")
            if status not in STATUSES:
                raise PerfcastError(f"unknown model status {status!r}", where="status")
            q = d.get("quality")
            single = d.get("single")
            q = _nan_quality(q)
            return cls(tuple(d["parameters"]), models, (float(ch["lower"]), float(ch["upper"])),
                       float(ch["cut"]), ranges, None if q is None else Quality.from_dict(q), status,
                       int(d.get("needed", 0)), tuple(d.get("notes", ())),
                       None if single is None else Model.from_dict({**single, "quality": _nan_quality(single.get("quality"))}))
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise PerfcastError(f"malformed segmented model ({type(e).__name__}: {e})") from None


def model_from_dict(d: Mapping):
    """A :class:`Model`, :class:`SegmentedModel`, :class:`perfcast.fit.grid.GridModel` or
    :class:`perfcast.fit.sums.SumModel` from its ``to_dict``."""
    if d.get("kind") == "grid":
        from .grid import GridModel

        return GridModel.from_dict(d)
    if d.get("kind") == "sum":
        from .sums import SumModel

        return SumModel.from_dict(d)
    return SegmentedModel.from_dict(d) if d.get("kind") == "segmented" else Model.from_dict(d)


def _nan_quality(q):
    """A quality dict with the None of non-finite rss/adj_r2/smape back as NaN (to_dict writes NaN
    as None, which Quality.from_dict does not take)."""
    if q is None:
        return None
    return {k: (float("nan") if v is None and k in ("rss", "adj_r2", "smape") else v) for k, v in q.items()}


def _loc(v: float) -> str:
    return f"{float(v):g}"


# ---------------------------------------------------------------------------------------------
# fitting
# ---------------------------------------------------------------------------------------------
def fit_segmented(x, values, parameter: str = "p", options: FitOptions | None = None,
                  single: Model | None = None) -> Model | SegmentedModel:
    """Model one single-parameter series, with one change point when the data call for it.

    ``x``: n values of the parameter; ``values``: n values or n lists of repetitions (as
    :func:`perfcast.fit.fit_series`).  Returns the single PMNF :class:`Model` when it is preferred
    (or when there are too few points for two regimes: ``MIN_POINTS + MIN_LAST``), else a
    :class:`SegmentedModel`.  ``single``: the single model when already fitted (saves a fit).
    """
    x = _one_param(x)
    reps = [np.atleast_1d(np.asarray(v, dtype=float)) for v in values]
    if len(reps) != len(x):
        raise PerfcastError(f"{len(reps)} value lists for {len(x)} points")
    if any(r.size == 0 for r in reps):
        raise PerfcastError("a point without values")
    mean = np.array([r.mean() for r in reps])
    count = np.array([float(len(r)) for r in reps])
    ssd = np.array([float(((r - r.mean()) ** 2).sum()) for r in reps])
    return fit_segmented_stats(x, mean, count, ssd, parameter, options, single)


def fit_segmented_stats(x, mean, count, ssd, parameter: str = "p", options: FitOptions | None = None,
                        single: Model | None = None) -> Model | SegmentedModel:
    """:func:`fit_segmented` on per-point summaries: ``mean``, ``count`` (repetitions) and ``ssd``
    (sum of squared deviations from the mean), as :func:`perfcast.fit.series_statistics` gives."""
    return _segmented_many([(x, mean, count, ssd, parameter, options, single)])[0]


def _segmented_many(jobs: Sequence[tuple]) -> list:
    """:func:`fit_segmented_stats` of each job ``(x, mean, count, ssd, parameter, options,
    single)``, the pieces of all jobs' candidate segmentations fitted together: one
    :func:`perfcast.fit.core.fit_group` call per set of points and options (``pooled=False``: each
    row's model is the one a call of its own makes), not one per piece (~5 ms each: 2,000 poor fits
    of a 3,000-series file took 40 s)."""
    values: dict = {}    # the hypotheses' values at one set of points, made once for all the jobs
    plans = [_plan(*job, values=values) for job in jobs]
    # (options, parameter, piece points) -> [(job, build, piece, first, last point)]; the options
    # by identity (hashing one hashes its hypothesis space, Fractions: 0.25 ms)
    wanted: dict = {}
    for k, plan in enumerate(plans):
        if isinstance(plan, _Plan):
            for b, (i, j, _) in enumerate(plan.builds):
                for side, (a, z) in enumerate(((0, i), (j, len(plan.data.x) - 1))):
                    key = (id(plan.opt), plan.params, plan.data.x[a:z + 1].tobytes())
                    wanted.setdefault(key, []).append((k, b, side, a, z))
    pieces: dict = {}
    for reqs in wanted.values():
        k0, _, _, a0, z0 = reqs[0]
        x, params, opt = plans[k0].data.x[a0:z0 + 1], plans[k0].params, plans[k0].opt
        rows = [(plans[k].data, slice(a, z + 1)) for k, _, _, a, z in reqs]
        M, C, Q = (np.array([getattr(d, f)[sl] for d, sl in rows]) for f in ("mean", "count", "ssd"))
        # a piece from p = 1 on gets the p = 1 rules as every fit of a series (zero_rule_sets)
        for at, cols, rule in zero_rule_sets(x[:, None], M, C, Q, params, opt):
            g = apply_zero_rule(fit_group(x[cols], M[np.ix_(at, cols)], C[np.ix_(at, cols)], Q[np.ix_(at, cols)],
                                          params, opt, pooled=False), rule)
            for r, i in enumerate(at.tolist()):
                k, b, side, _, _ = reqs[i]
                pieces[k, b, side] = g.model(r)
    out = []
    for k, plan in enumerate(plans):
        if not isinstance(plan, _Plan):
            out.append(plan)
            continue
        best_model, best_crit = plan.single, plan.single_crit
        for b, (i, j, modelled) in enumerate(plan.builds):
            m, crit = _build(plan.data, plan.params, plan.opt, i, j, modelled, plan.pen_c, plan.H, plan.single,
                             pieces[k, b, 0], pieces[k, b, 1])
            if m is not None and crit < best_crit:
                best_model, best_crit = m, crit
        out.append(best_model)
    return out


@dataclass(frozen=True)
class _Plan:
    """A series whose segmentation is decided by fitting the pieces of ``builds``, its candidates
    (last index of the first regime, first of the last, last regime modelled) in order."""
    data: "_Data"
    params: tuple
    opt: FitOptions
    H: int
    pen_c: float
    single: Model
    single_crit: float
    builds: tuple


def _plan(x, mean, count, ssd, parameter: str = "p", options: FitOptions | None = None,
          single: Model | None = None, values: dict | None = None) -> Model | _Plan:
    """The single model when no segmentation can beat it; else the :class:`_Plan` of the
    candidates worth fitting (the best :data:`REFIT` by their closed-form one-term pieces, while
    within :data:`MARGIN` of the single model).  ``values``: a cache of the hypotheses' values at
    the points, shared by the jobs of a batch."""
    x = _one_param(x)
    mean, count, ssd = (np.asarray(a, dtype=float).ravel() for a in (mean, count, ssd))
    if not (len(mean) == len(count) == len(ssd) == len(x)):
        raise PerfcastError(f"mean/count/ssd must have one value per point ({len(x)})")
    keep = count > 0
    x, mean, count, ssd = _pool(x[keep], mean[keep], count[keep], ssd[keep])
    opt = options or FitOptions()
    params = (str(parameter),)
    if single is None:
        # the p = 1 rules as every fit of a series applies them (perfcast.fit.series.fit_one)
        from .series import fit_one

        single = fit_one(x, mean, count, ssd, params, opt, fall=False).model(0)
    n = len(x)
    if (n < MIN_POINTS + MIN_LAST or single.status != "ok" or not np.all(np.isfinite(mean))
            or single.zero_below or single.zero_from):
        # a routine that does not run at p = 1 (or runs there only) has its regimes already: 0
        # there, its law beyond (perfcast.fit.core.zero_rule_sets); a piece through that 0 is no law
        return single
    data = _Data(x, mean, count, ssd)
    blocks = opt.blocks()
    H = len(blocks)
    cands = _candidates(n)
    if not cands:
        return single
    pen_c = 2 * math.log(len(cands))
    # fast pass: closed-form one-term fits of every segment
    key = (id(blocks), x.tobytes())       # (the hypothesis space by identity: FitOptions.blocks keeps it)
    made = values.get(key) if values is not None else None
    T = made[1] if made is not None and made[0] is blocks else None
    if T is None:
        T = block_values(blocks, x)
        if values is not None:
            values[key] = (blocks, T)
    seg_cache: dict[tuple[int, int], tuple] = {}

    def seg_opts(a, b, modelled):
        key = (a, b, modelled)
        if key not in seg_cache:
            seg_cache[key] = _segment_options(data, T, a, b, modelled, H)
        return seg_cache[key]

    scored = []
    for c in cands:
        i, j, modelled = c
        best = math.inf
        for ra, ka, pa in seg_opts(0, i, True):
            for rb, kb, pb in seg_opts(j, n - 1, modelled):
                if _saturated(n, i == j, ka + (ka - 1), kb + (kb - 1)):
                    continue
                k = ka + kb + (0 if i == j else 1)
                crit = data.crit(ra + rb, k, pa + pb + pen_c)
                best = min(best, crit)
        scored.append((best, c))
    scored.sort(key=lambda t: t[0])
    # the best candidates are refitted with the modeller and scored on the fitted pieces
    single_crit = data.crit(data.rss(single.predict(x)), 1 + len(single.terms), _search_pen(single, H))
    builds = []
    for fast, c in scored[:REFIT]:
        if fast > single_crit + MARGIN:
            break   # the fitted pieces score no better than the closed-form ones: cannot win
        builds.append(c)
    if not builds:
        return single
    return _Plan(data, params, opt, H, pen_c, single, single_crit, tuple(builds))


def _one_param(x) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 1:
        raise PerfcastError("segmented models take one parameter: x must be n values, not an array of shape "
                            f"{x.shape} (multi-parameter segmentation is not supported)", where="x")
    return x


def _pool(x, mean, count, ssd):
    """Sort by x and merge points with the same x (pooled mean and within-point squares)."""
    order = np.argsort(x, kind="stable")
    x, mean, count, ssd = x[order], mean[order], count[order], ssd[order]
    ux, inv = np.unique(x, return_inverse=True)
    if len(ux) == len(x):
        return x, mean, count, ssd
    c = np.bincount(inv, count)
    m = np.bincount(inv, count * mean) / c
    s = np.bincount(inv, ssd + count * (mean - m[inv]) ** 2)
    return ux, m, c, s


class _Data:
    """The series normalised as in fit.core: relative weights, pure error, N observations."""

    def __init__(self, x, mean, count, ssd):
        self.x = x
        self.scale = float(np.max(np.abs(mean))) or 1.0
        self.y = mean / self.scale
        x = np.asarray(x, dtype=float)
        f = self.f = noise_scale(self.y[None, :], x[:, None], [[np.arange(len(x))]])[0]
        self.w = count / f ** 2
        self.pe = float(np.sum(ssd / (self.scale ** 2 * f ** 2)))
        self.N = float(np.sum(count))
        self.count, self.mean, self.ssd = count, mean, ssd

    def rss(self, pred) -> float:
        r = self.y - np.asarray(pred, dtype=float) / self.scale
        return float(np.sum(self.w * r * r))

    def crit(self, rss: float, k: int, pen: float) -> float:
        N = self.N
        v = N * math.log((self.pe + rss) / N + NOISE_FLOOR ** 2) + k * math.log(N) + pen
        return v if math.isfinite(v) else math.inf


def _candidates(n: int) -> list[tuple[int, int, bool]]:
    """(last index of the first regime, first index of the last regime, last regime modelled)."""
    out = []
    for i in range(MIN_POINTS - 1, n):
        for j in (i, i + 1):   # shared point, or a change between x_i and x_(i+1)
            last = n - j
            if last >= MIN_POINTS:
                out.append((i, j, True))
            elif last >= MIN_LAST and j == i + 1:
                out.append((i, j, False))
    return out


def _segment_options(data: _Data, T: np.ndarray, a: int, b: int, modelled: bool, H: int):
    """(rss, coefficients, search penalty) of the constant and of the best one-term fit of points
    a..b (the constant only for an unmodelled regime)."""
    y, w = data.y[a:b + 1], data.w[a:b + 1]
    sw = w.sum()
    c = float(np.sum(w * y) / sw)
    out = [(float(np.sum(w * (y - c) ** 2)), 1, 0.0)]
    if not modelled or b - a + 1 < MIN_POINTS:
        return out
    Ts = T[a:b + 1]
    valid = np.all(np.isfinite(Ts), axis=0)
    sc = np.max(np.abs(np.where(np.isfinite(Ts), Ts, 0.0)), axis=0)
    valid &= sc > 0
    Tn = np.where(valid, Ts / np.where(sc > 0, sc, 1.0), 0.0)
    A01 = w @ Tn
    A11 = w @ (Tn * Tn)
    b0 = float(np.sum(w * y))
    b1 = (w * y) @ Tn
    det = sw * A11 - A01 * A01
    ok = valid & (det > 1e-11 * sw * A11)
    r = 1.0 / np.where(ok, det, 1.0)
    beta0 = (A11 * b0 - A01 * b1) * r
    beta1 = (sw * b1 - A01 * b0) * r
    resid = y[:, None] - beta0[None, :] - beta1[None, :] * Tn
    err = np.where(ok, w @ (resid * resid), np.inf)
    if np.isfinite(err).any():
        out.append((float(err.min()), 2, 2 * math.log(H)))
    return out


def _saturated(n: int, shared: bool, eff_a: int, eff_b: int) -> bool:
    """A segmentation must leave at least one residual degree of freedom, counting the searched
    exponent of every term as a parameter (a 3-point piece with a free exponent passes through its
    points whatever they are) and the shared point once (continuity)."""
    return eff_a + eff_b - (1 if shared else 0) >= n


def _search_pen(m: Model, H: int) -> float:
    k = len(m.terms)
    if k == 0:
        return 0.0
    if k == 1:
        return 2 * math.log(H)
    return 2 * math.log(max(H * (H - 1) / 2, 1))


def _build(data: _Data, params, opt: FitOptions, i: int, j: int, modelled: bool, pen_c: float, H: int,
           single: Model, A: Model, B: Model) -> tuple[SegmentedModel | None, float]:
    """The segmented model of candidate (i, j, modelled) from its pieces' models ``A`` (points
    0..i) and ``B`` (j..n-1), and its criterion; (None, inf) when it cannot be one."""
    x = data.x
    if A.status != "ok":
        return None, math.inf
    law = None
    if not modelled:
        # the last regime is scored by its level (the repetition-weighted mean: one coefficient),
        # and extrapolated by the one-term law through its two points (fit_group's two-point
        # model, with its wide interval), never by that mean
        law = B if B.status == "ok" else None
        B = _insufficient(B, data, j)
    elif B.status != "ok":
        return None, math.inf
    pred = np.empty(len(x))
    pred[:i + 1] = A.predict(x[:i + 1])
    pred[j:] = B.predict(x[j:])
    if i == j:
        pred[i] = 0.5 * (float(A.predict(x[i])) + float(B.predict(x[i])))
    kA = 1 + len(A.terms)
    kB = 1 + len(B.terms) if modelled else 1
    if _saturated(len(x), i == j, kA + len(A.terms), kB + len(B.terms)):
        return None, math.inf
    k = kA + kB + (0 if i == j else 1)
    pen = _search_pen(A, H) + (_search_pen(B, H) if modelled else 0.0) + pen_c
    rss = data.rss(pred)
    crit = data.crit(rss, k, pen)
    lo, hi = float(x[i]), float(x[j])
    quality = _quality(data, pred, k, crit, (A, B))
    if law is not None:
        B = law
    cut = lo if i == j else _crossing(A, B, lo, hi)
    notes = []
    p = params[0]
    if i == j:
        notes.append(f"regime change at {p} = {lo:g} (a measured value both regimes are fitted to)")
    else:
        notes.append(f"regime change between {p} = {lo:g} and {p} = {hi:g}")
    status, needed = "ok", 0
    if not modelled:
        nb = len(x) - j
        pts = f"{nb} measured point{'s' if nb != 1 else ''}"
        if law is None:
            status, needed = "insufficient", MIN_POINTS
            notes.append(f"the last regime ({p} >= {hi:g}) has {pts}; a model needs {MIN_POINTS}: measure "
                         f"more scales beyond {p} = {float(x[-1]):g} to model it (extrapolation shows the mean "
                         f"of its points)")
        else:
            notes.append(f"the last regime ({p} >= {hi:g}) has {pts}: extrapolated by the one-term law "
                         f"through them, whose form they cannot check (wide interval); measure more scales "
                         f"beyond {p} = {float(x[-1]):g} to model it")
    notes.append("beyond the measured data the last regime is extrapolated")
    ranges = ((float(x[0]), lo), (hi, float(x[-1])))
    return SegmentedModel(params, (A, B), (lo, hi), cut, ranges, quality, status, needed, tuple(notes),
                          single), crit


def _insufficient(B: Model, data: _Data, j: int) -> Model:
    """The unmodelled last regime: the repetition-weighted mean of its points, with its quality
    (finite numbers: Quality.from_dict does not take the None that NaN becomes in JSON)."""
    c, y = data.count[j:], data.mean[j:]
    mean = float(np.sum(c * y) / np.sum(c))
    resid = y - mean
    smape = float(smape_percent(np.full(len(y), mean), y))
    N, n = float(np.sum(c)), len(y)
    noise = None
    if N > n:
        f = data.f[j:] * data.scale
        noise = 100 * math.sqrt(float(np.sum(data.ssd[j:] / f ** 2)) / (N - n))
    q = Quality(float(np.sum(resid ** 2)), 0.0, smape, None, noise, n, int(N), None)
    return Model(B.parameters, mean, (), q, None, 0.0, 0, (), "insufficient", MIN_POINTS, B.notes)


def _crossing(A: Model, B: Model, lo: float, hi: float) -> float:
    """Where the two pieces cross between lo and hi (bisection), else the geometric midpoint (the
    arithmetic one when lo <= 0)."""
    mid = math.sqrt(lo * hi) if lo > 0 else 0.5 * (lo + hi)
    try:
        d = lambda v: float(A.predict(v)) - float(B.predict(v))  # noqa: E731
        a, b = lo, hi
        da, db = d(a), d(b)
        if not (math.isfinite(da) and math.isfinite(db)) or da * db > 0:
            return mid
        if da == 0:
            return a
        for _ in range(60):
            m = 0.5 * (a + b)
            dm = d(m)
            if da * dm <= 0:
                b = m
            else:
                a, da = m, dm
        return 0.5 * (a + b)
    except (ValueError, ArithmeticError):
        return mid


def _quality(data: _Data, pred: np.ndarray, k: int, crit: float, segs) -> Quality:
    y, f = data.mean, pred
    resid = y - f
    n = len(y)
    rss = float(np.sum(resid ** 2))
    tss = float(np.sum((y - y.mean()) ** 2))
    if tss > 0:
        adj = 1 - (rss / (n - k)) / (tss / max(n - 1, 1)) if n > k else float("nan")
    else:
        adj = 1.0 if rss <= 1e-24 * data.scale ** 2 else 0.0
    smape = float(smape_percent(f, y))
    cvs = [(s.quality.cv, s.quality.n_points) for s in segs if s.quality is not None]
    cv = None
    if len(cvs) == len(segs) and all(c is not None for c, _ in cvs):
        cv = math.sqrt(sum(c * c * m for c, m in cvs) / max(sum(m for _, m in cvs), 1))
    N = data.N
    noise = 100 * math.sqrt(data.pe / max(N - n, 1)) if N > n else None
    return Quality(rss, float(adj), smape, cv, noise, n, int(N), crit)


# ---------------------------------------------------------------------------------------------
# experiments
# ---------------------------------------------------------------------------------------------
#: single runs (no repetitions) show a plateau only from this value on (exact equality of two
#: larger numbers -- instruction counts, bytes, nanoseconds -- is not chance)
PLATEAU_SINGLE_RUNS = 1e4


def plateau(x, mean, count, ssd, single: Model, parameter: str,
            options: FitOptions | None = None) -> SegmentedModel | None:
    """A deterministic plateau at the largest scales, or None.

    When the means at the largest two or more values of the parameter are exactly equal, none of
    the points has measurement noise (``ssd`` 0: deterministic counts, or single runs), the
    equality is evidence (repetitions at the plateau agree exactly, or single runs of a value of
    at least :data:`PLATEAU_SINGLE_RUNS` -- small single-run counts, 2 and 2 cache misses, can be
    equal by chance) and an earlier mean differs, the quantity stopped depending on the parameter there: a halo exchange
    that has all its neighbours (messages per rank 51, 102, 102 at p = 2, 4, 8 -- and 102 at 16),
    a buffer at its cap.  Two floats from a growing law or from a timer are never exactly equal.
    Below the plateau the points before it are modelled on their own (their mean when fewer than
    :data:`MIN_POINTS`); from its first point on the plateau's value holds, and beyond the data
    its interval carries the two-point exponent doubt (the plateau may end).  ``single`` (the
    model of all points) is kept as the model the plateau was preferred to."""
    from .core import TWO_POINT_DRIFT_DOF, TWO_POINT_EXPONENT_SD

    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="stable")
    x, y, s = x[order], np.asarray(mean, dtype=float)[order], np.asarray(ssd, dtype=float)[order]
    c = np.asarray(count, dtype=float)[order]
    n = len(x)
    if n < 3 or np.any(s != 0) or not np.all(np.isfinite(y)) or y[-1] == 0 or len(np.unique(x)) != n:
        return None
    j = n - 1
    while j > 0 and y[j - 1] == y[-1]:
        j -= 1
    if n - j < 2 or j == 0:
        return None
    level = float(y[-1])
    if not (np.all(c[j:] >= 2) or abs(level) >= PLATEAU_SINGLE_RUNS):
        return None   # small values of single runs can be equal by chance (counts of 2 and 2)
    if j >= MIN_POINTS:
        from .series import fit_one

        first = fit_one(x[:j], y[:j], c[:j], s[:j], (parameter,), options or FitOptions(), fall=False).model(0)
    else:
        mean0 = float(np.sum(c[:j] * y[:j]) / np.sum(c[:j]))
        first = Model((parameter,), mean0, (), Quality(float(np.sum((y[:j] - mean0) ** 2)), float("nan"),
                                                        float(smape_percent(np.full(j, mean0), y[:j])), None,
                                                        None, j, int(np.sum(c[:j])), None),
                      ((0.0,),), 0.0, max(j - 1, 0), (), "ok", 0, (), 0.0, (float(x[j - 1]),))
    pred = np.where(np.arange(n) < j, np.asarray(first.predict(x), dtype=float), level)
    smape = float(smape_percent(pred, y))
    q_last = Quality(0.0, 1.0, 0.0, 0.0, None, n - j, n - j, None)
    last = Model((parameter,), level, (), q_last, ((0.0,),), 0.0, n - j - 1, (), "ok", 0, (),
                 TWO_POINT_EXPONENT_SD * math.log(2), (float(x[-1]),), 1.0, TWO_POINT_DRIFT_DOF)
    note = (f"the last {n - j} measured values are equal ({level:.6g}, {parameter} = {x[j]:g}..{x[-1]:g}): "
            f"a plateau; beyond the data the value stays there")
    q = Quality(float(np.sum((pred - y) ** 2)), float("nan"), smape, None, None, n, n, None)
    cut = math.sqrt(x[j - 1] * x[j]) if x[j - 1] > 0 else (x[j - 1] + x[j]) / 2
    return SegmentedModel((parameter,), (first, last), (float(x[j - 1]), float(x[j])), cut,
                          ((float(x[0]), float(x[j - 1])), (float(x[j]), float(x[-1]))), q, "ok", 0,
                          (note,), single)


def _series_arrays(st, parameter: str | tuple):
    """The statistics frame cut into series without pandas per-series work: ``(index, bounds,
    x, mean, count, ssd)`` with ``index`` mapping (callpath, metric) to its series number ``k``,
    whose rows are ``[bounds[k], bounds[k + 1])`` of the arrays (in the frame's order); ``x`` the
    values of ``parameter``, or (rows x parameters) for a tuple of them."""
    from .series import factorize_names

    cc, cps = factorize_names(st["callpath"])
    mc, mts = factorize_names(st["metric"])
    rows = np.nonzero((cc >= 0) & (mc >= 0))[0]   # a missing callpath or metric is no series (as in groupby)
    key = cc[rows].astype(np.int64) * max(len(mts), 1) + mc[rows]
    if np.all(key[1:] >= key[:-1]):
        # the rows already by series (a reader's order: a series' points together): what the
        # sort below gives, from where the key changes
        start = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if len(key) else np.zeros(0, np.int64)
        codes, order, bounds = key[start], rows, np.append(start, len(key))
    else:
        codes, sid = np.unique(key, return_inverse=True)
        sid = np.asarray(sid).ravel()
        order = rows[np.argsort(sid, kind="stable")]
        bounds = np.concatenate([[0], np.cumsum(np.bincount(sid, minlength=len(codes)))])
    x = (np.asarray(st[parameter], dtype=float)[order] if isinstance(parameter, str)
         else np.column_stack([np.asarray(st[q], dtype=float)[order] for q in parameter]))
    cols = (np.asarray(st[c], dtype=float)[order] for c in ("mean", "count", "ssd"))
    return _SeriesIndex(cps, mts, codes), bounds, x, *cols


class _SeriesIndex(Mapping):
    """(callpath, metric) -> series number of :func:`_series_arrays`: a mapping (its dict built
    on first use), and :meth:`find` for a list of keys at once (no dict of every series)."""

    def __init__(self, cps: list, mts: list, codes: np.ndarray):
        self.cps, self.mts, self.codes = cps, mts, codes
        self._cp = self._mt = self._d = None

    def _map(self) -> dict:
        if self._d is None:
            nm = max(len(self.mts), 1)
            self._d = {(self.cps[c // nm], self.mts[c % nm]): k for k, c in enumerate(self.codes.tolist())}
        return self._d

    def __getitem__(self, key):
        return self._map()[key]

    def __iter__(self):
        return iter(self._map())

    def __len__(self) -> int:
        return len(self.codes)

    def find(self, keys: Sequence[tuple]) -> list:
        """The series number of each (callpath, metric) of ``keys``, None where there is none."""
        if not keys:
            return []
        if self._cp is None:    # the names are distinct (factorize's uniques): a position each
            self._cp = {c: i for i, c in enumerate(self.cps)}
            self._mt = {m: i for i, m in enumerate(self.mts)}
        nm = max(len(self.mts), 1)
        ci = np.fromiter((self._cp.get(k[0], -1) for k in keys), dtype=np.int64, count=len(keys))
        mi = np.fromiter((self._mt.get(k[1], -1) for k in keys), dtype=np.int64, count=len(keys))
        code = ci * nm + mi
        pos = np.minimum(np.searchsorted(self.codes, code), max(len(self.codes) - 1, 0))
        ok = (ci >= 0) & (mi >= 0) & (len(self.codes) > 0)
        ok &= self.codes[pos] == code if len(self.codes) else ok
        return [int(p) if o else None for p, o in zip(pos.tolist(), ok.tolist())]


def plateau_screen(bounds: np.ndarray, ssd: np.ndarray) -> np.ndarray:
    """Per series (rows ``[bounds[k], bounds[k + 1])``): can :func:`plateau` find one at all?  Its
    necessary conditions, for all series at once: at least 3 points, none with measurement noise
    (``ssd`` 0).  Series that fail it get no per-series work."""
    n = np.diff(bounds)
    noisy = np.concatenate([[0], np.cumsum(ssd != 0)])   # noisy points before each row
    return (n >= 3) & (noisy[bounds[1:]] == noisy[bounds[:-1]])


def segment_models(exp, series_models: Sequence, options: FitOptions | None = None, locations: str = "auto",
                   select=None, statistics=None) -> list:
    """Refit the series of ``series_models`` (fit.SeriesModel of ``exp``, e.g. from
    :func:`perfcast.fit.model_experiment` with the same ``locations``) with :func:`fit_segmented`
    where ``select(model)`` holds (default: the poor fits of
    :func:`perfcast.analysis.fitcheck.fit_warnings`); a series keeps its model unless the
    segmentation is preferred.  Experiments with other than one parameter are returned unchanged.
    ``statistics``: ``series_statistics(exp, locations)`` when already computed."""
    from .series import SeriesModel, statistics_columns

    items = list(series_models)
    if len(exp.parameters) != 1:
        return items
    default = select is None
    if default:
        from ..analysis.fitcheck import fit_warnings, pending_warned

        select = lambda m: bool(fit_warnings(m))  # noqa: E731
    st = statistics if statistics is not None else statistics_columns(exp, locations)
    p = exp.parameters[0]
    index, bounds, X, M, C, S = _series_arrays(st, p)
    screen = plateau_screen(bounds, S)
    base = options or FitOptions()
    kind_opts: dict = {}

    def opts(metric):
        if metric not in kind_opts:
            met = exp.metrics.get(metric)
            kind_opts[metric] = base.for_kind(met.kind, met.exact) if met is not None else base.for_kind(None)
        return kind_opts[metric]

    def rows(k):
        sl = slice(bounds[k], bounds[k + 1])
        return X[sl], M[sl], C[sl], S[sl]

    ks = index.find([(sm.callpath, sm.metric) for sm in items]) if screen.any() else ()
    for i, k in enumerate(ks):     # no series passes the screen: none looked at
        sm = items[i]
        if k is None or not screen[k] or not (isinstance(sm.model, Model) and sm.model.status == "ok"):
            continue
        m = plateau(*rows(k), sm.model, p, opts(sm.metric))
        if m is not None:
            items[i] = SeriesModel(sm.callpath, sm.metric, m)
    # series whose model is not built yet are plain models: the fit's arrays say which are poor fits
    pending, poor = pending_warned(items) if default else (np.zeros(len(items), dtype=bool),) * 2
    todo = sorted(np.flatnonzero(poor).tolist()
                  + [i for i in np.flatnonzero(~pending).tolist() if isinstance(items[i].model, Model)
                     and select(items[i].model)])
    jobs = []
    for i, k in zip(todo, index.find([(items[i].callpath, items[i].metric) for i in todo])):
        sm = items[i]
        if k is None:
            continue
        jobs.append((i, (*rows(k), p, opts(sm.metric), sm.model)))
    for (i, _), m in zip(jobs, _segmented_many([job for _, job in jobs])):
        sm = items[i]
        # adopted only when the regimes explain the data (a segmentation that is itself a poor fit
        # would only split noise)
        if m is not sm.model and not (getattr(m, "status", "ok") == "ok" and select(m)):
            items[i] = SeriesModel(sm.callpath, sm.metric, m)
    return items


__all__ = ["SegmentedModel", "fit_segmented", "fit_segmented_stats", "segment_models", "model_from_dict", "plateau", "plateau_screen",
           "MIN_POINTS", "MIN_LAST"]
