"""Fitted scaling models: small immutable objects with prediction, intervals, formulas and JSON.

A :class:`Model` is ``constant + sum(term)``, each :class:`Term` a coefficient times a product
of factors ``p^i * log2(p)^j``.  Besides the point estimate it keeps what a calibrated
prediction interval needs:

* ``cov`` -- covariance of (constant, coefficients) in the units of the values (of a series
  free of noise, the jackknife's: :func:`perfcast.fit.core._jackknife_cov`);
* ``noise`` -- the relative standard deviation of one observation (from repetitions);
* ``alternatives`` -- the runner-up hypotheses with their posterior-like weights, whose spread
  stands for model-selection uncertainty when extrapolating;
* ``drift`` and ``upper`` -- a calibrated misspecification term: the search and averaging
  redone without the largest point(s) missed them by more than noise, coefficient uncertainty
  and hypothesis spread explain; ``drift`` is that excess (relative standard deviation) at one
  doubling beyond the data.  Intervals beyond the data add ``(drift * doublings^growth * value)^2``
  to the variance, ``doublings`` the distance to the nearest measured point that does not lie
  below it (:func:`frontier_doublings`: the measured points no other dominates, ``frontier``; on a
  full grid the one corner of the largest measured values, ``upper``); ``growth`` (>= 2) is
  estimated per fitted group from a second rerun without the two largest values.  The drift is
  estimated from ``drift_dof`` held-out points only (a series' own, or a group's pooled over its
  effective number of independent series, :func:`perfcast.fit.core._pool_drift`), so its
  uncertainty enters the quantile: the t quantile uses the Welch-Satterthwaite degrees of freedom
  of the sum of the variances.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from statistics import NormalDist
from typing import Mapping, Sequence

import numpy as np

from ..errors import PerfcastError
from .terms import block_str, factor_values, fraction_str, parse_fraction
from .lines import line_at, line_dicts, line_log_factors, lines_from_dicts
from .special import gamma_p_inv, t_quantile

STATUSES = ("ok", "insufficient")


@dataclass(frozen=True)
class Term:
    """``coefficient * prod(param^exponent * log2(param)^log_exponent)``."""

    coefficient: float
    #: (param, exponent, log_exponent), one per parameter, in the model's parameter order
    factors: tuple[tuple[str, Fraction, int], ...]

    def evaluate(self, cols: Mapping[str, np.ndarray]) -> np.ndarray:
        v = None
        for p, i, j in self.factors:
            x = np.asarray(cols[p], dtype=float)
            if j < 0:  # the pole of log2(x)^j at x = 1: undefined for x <= 1 (the search's rule)
                f = factor_values(x, i, j)
            else:
                with np.errstate(invalid="ignore", divide="ignore"):
                    f = np.power(x, float(i)) if i != 0 else np.ones_like(x)
                    if j:
                        f = f * np.log2(x) ** j
            with np.errstate(invalid="ignore"):   # 0 * inf (p^0.5 * log2(p)^2 at p = 0): NaN, refused by callers
                v = f if v is None else v * f
        if v is None:
            raise PerfcastError("a term without factors")
        return v

    def basis_str(self, style: str = "plain") -> str:
        sep = " \\cdot " if style == "latex" else " * "
        return sep.join(block_str(p, (i, j), style) for p, i, j in self.factors)

    def to_dict(self) -> dict:
        return {"coefficient": float(self.coefficient),
                "factors": {p: {"exponent": fraction_str(i), "log_exponent": int(j)} for p, i, j in self.factors}}

    @classmethod
    def from_dict(cls, d: Mapping, parameters: Sequence[str]) -> "Term":
        try:
            fac = d["factors"]
            factors = tuple((p, parse_fraction(fac[p]["exponent"]), int(fac[p].get("log_exponent", 0)))
                            for p in parameters if p in fac)
            unknown = set(fac) - set(parameters)
            if unknown:
                raise PerfcastError(f"term names unknown parameter(s) {', '.join(sorted(unknown))}", where="factors")
            return cls(float(d["coefficient"]), factors)
        except (KeyError, TypeError, ValueError) as e:
            raise PerfcastError(f"malformed term ({e})", where="terms") from None


@dataclass(frozen=True)
class Quality:
    """Goodness of fit, on the per-point means.

    ``rss``: residual sum of squares of the means; ``adj_r2``: adjusted R²; ``smape``: symmetric
    mean absolute percentage error (%); ``cv``: leave-one-point-out relative RMS prediction error
    (%, closed form); ``noise``: relative standard deviation of one repetition (%, None without
    repetitions); ``criterion``: the selection score (lower is better).
    """

    rss: float
    adj_r2: float
    smape: float
    cv: float | None
    noise: float | None
    n_points: int
    n_obs: int
    criterion: float | None = None

    def to_dict(self) -> dict:
        c = _clean
        return {"rss": c(self.rss), "adj_r2": c(self.adj_r2), "smape": c(self.smape), "cv": c(self.cv),
                "noise": c(self.noise), "n_points": c(self.n_points), "n_obs": c(self.n_obs),
                "criterion": c(self.criterion)}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Quality":
        g = lambda k: (None if d.get(k) is None else float(d[k]))  # noqa: E731
        # to_dict writes non-finite numbers as null: read them back as NaN
        f = lambda k: (float("nan") if d.get(k, 0.0) is None else float(d.get(k, 0.0)))  # noqa: E731
        return cls(f("rss"), f("adj_r2"), f("smape"),
                   g("cv"), g("noise"), int(d.get("n_points", 0)), int(d.get("n_obs", 0)), g("criterion"))


def _clean(v):
    if type(v) is float:   # the common case first: the isinstance checks below against numpy's
        return v if math.isfinite(v) else None    # abstract types cost microseconds each
    if v is None:
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    v = float(v)
    return v if math.isfinite(v) else None



def _per_parameter(d: Mapping, key: str, params: Sequence[str], cast, what: str) -> tuple | None:
    """A model dict's per-parameter field ``key`` (``{parameter: value}``, one per parameter of the
    model) as a tuple in parameter order, or None when absent."""
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, Mapping) or set(v) != set(params):
        raise PerfcastError(f"{key} must give {what} for every parameter of the model", where=key)
    return tuple(cast(v[p]) for p in params)

@dataclass(frozen=True)
class Model:
    parameters: tuple[str, ...]
    constant: float
    terms: tuple[Term, ...] = ()
    quality: Quality | None = None
    #: covariance of (constant, *coefficients), value units squared; None = unknown
    cov: tuple[tuple[float, ...], ...] | None = None
    #: relative standard deviation of one observation
    noise: float = 0.0
    #: degrees of freedom of the noise estimate (t quantiles); 0 = no interval possible
    dof: int = 0
    #: (weight, model) of competing hypotheses; weights of all alternatives sum to < 1
    alternatives: tuple[tuple[float, "Model"], ...] = ()
    #: "ok" or "insufficient" (then ``needed`` says how many points a scaling model needs)
    status: str = "ok"
    needed: int = 0
    notes: tuple[str, ...] = ()
    #: relative extrapolation misspecification at one doubling beyond ``upper`` (leave-largest-out)
    drift: float = 0.0
    #: largest measured value of each parameter (None: unknown, no extrapolation term)
    upper: tuple[float, ...] | None = None
    #: exponent of the drift's growth with the distance beyond the data (sd ~ doublings^growth)
    growth: float = 2.0
    #: degrees of freedom of the drift: its held-out points, k * S_eff when pooled over a group
    #: (0 = taken as exact)
    drift_dof: int = 0
    #: generalised normal shape of the repetition noise (2 = normal; estimated per fit group from
    #: the repetitions, :mod:`perfcast.fit.shape`): the noise part of intervals uses its quantile
    noise_shape: float = 2.0
    #: measured lines whose level differs from the function's: ``(j, other coordinates, log
    #: factor)``; a value on such a line is the function's times the factor
    #: (:mod:`perfcast.fit.lines`; multi-parameter models only)
    lines: tuple = ()
    #: (parameter, start, bound): the routine does not run below ``start`` of the process count
    #: ``parameter`` (p = 1: :func:`perfcast.fit.core.not_running_first`): the model is 0 there, its
    #: interval [0, bound x the law's upper bound] (bound 0: 0 in every run), and its terms are the
    #: law from ``start`` on; the formula says so (:func:`zero_below_text`).  A fourth element True
    #: (:func:`through_zero`): from ``start`` on the law is its value there times ``(p - 1) / (start
    #: - 1)``, a line through the 0 at p = 1 (a sum over ranks measured at one process count beyond
    #: p = 1: :func:`perfcast.fit.core.zero_rule_sets`)
    zero_below: tuple | None = None
    #: (parameter, start): the routine runs only below ``start`` of the process count ``parameter``
    #: (at p = 1 alone, 0 in every run from ``start`` on: :func:`perfcast.fit.core.runs_only_first`):
    #: the model is 0 [0, 0] from ``start`` on, its terms the law below it; the formula says so
    #: (``(p < 2) * (...)``, :func:`zero_below_text`)
    zero_from: tuple | None = None
    #: the drift along each parameter (in ``parameters`` order), where it differs between them: a
    #: law through every mean of a grid with three values of some parameter carries beyond the
    #: data along each parameter the doubt that parameter's own measurements support
    #: (:func:`perfcast.fit.core._own_three_point_doubt`); ``drift`` is then the largest.  None:
    #: ``drift`` along every parameter.  Beyond the data the relative drift is the largest over
    #: the parameters of ``drift_along[k] * doublings_k^growth`` (:func:`drift_reach`)
    drift_along: tuple[float, ...] | None = None
    #: the number of measured values of each parameter (in ``parameters`` order) when no measured
    #: point could be held out to check the law: ``drift`` is then the exponent doubt
    #: :func:`perfcast.fit.core.fit_group` gives such laws, not a measured miss (a prediction
    #: beyond the data says so: :func:`perfcast.fit.core.exponent_doubt_note`); None otherwise
    unchecked_on: tuple[int, ...] | None = None
    #: the measured points no other measured point dominates (each a tuple in ``parameters``
    #: order), where there is more than one: a sparse design (a cross, a diagonal) whose corner of
    #: the largest values (``upper``) was never run.  The distance beyond the data is counted from
    #: the nearest of them (:func:`frontier_doublings`).  None: ``upper`` is a measured point (a
    #: full grid) or the points are unknown
    frontier: tuple[tuple[float, ...], ...] | None = None

    # -- evaluation -----------------------------------------------------------------------------
    def _columns(self, X) -> tuple[dict[str, np.ndarray], tuple[int, ...]]:
        return point_columns(self.parameters, X)

    def _design(self, cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        D = np.empty((n, 1 + len(self.terms)))
        D[:, 0] = 1.0
        for k, t in enumerate(self.terms):
            D[:, k + 1] = t.evaluate(cols)
        return D

    def predict(self, X, averaged: bool = False) -> np.ndarray | float:
        """Model value at ``X``: a mapping {param: values}, an array of points, or scalars for one
        parameter.  Returns a float for one point, else an array.

        ``averaged=True`` averages over this hypothesis and its ``alternatives`` with their
        weights (Bayesian model averaging; smaller extrapolation errors when the data cannot tell
        the hypotheses apart)."""
        cols, shape = self._columns(X)
        y = self._raw(cols, shape)
        if averaged and self.alternatives:
            y = self._averaged(cols, shape, y)
        if self.lines or self.zero_below or self.zero_from:
            y = scaled(y, self._line_log(cols))
        return float(y[0]) if shape == () else y.reshape(shape)

    def _line_log(self, cols) -> np.ndarray:
        """Log factors of :attr:`lines` at the points ``cols`` (:func:`perfcast.fit.lines.line_log_factors`),
        -inf where the routine does not run (:attr:`zero_below`, :attr:`zero_from`), the log of
        ``(p - 1) / (start - 1)`` from ``start`` on for a law through the 0 at p = 1 (:func:`through_zero`)."""
        out = line_log_factors(self.lines, [cols[p] for p in self.parameters]) if self.lines else None
        if self.zero_below:
            q, start = self.zero_below[:2]
            x = np.asarray(cols[q], dtype=float)
            up = 0.0
            if through_zero(self.zero_below):
                with np.errstate(divide="ignore", invalid="ignore"):
                    up = np.log(np.maximum(x - 1.0, 0.0) / (start - 1.0))
            out = (np.zeros(len(x)) if out is None else out) + np.where(x < start, -np.inf, up)
        if self.zero_from:
            q, start = self.zero_from[:2]
            x = np.asarray(cols[q], dtype=float)
            out = (np.zeros(len(x)) if out is None else out) + np.where(x >= start, -np.inf, 0.0)
        return out

    def line_at(self, point: Mapping[str, float]) -> dict | None:
        """The measured lines a value at ``point`` lies on and its factor on the formula's value
        (:func:`perfcast.fit.lines.line_at`); None when the value is the formula's."""
        return line_at(self.lines, self.parameters, point) if self.lines else None

    def _raw(self, cols, shape) -> np.ndarray:
        n = int(np.prod(shape)) if shape else 1
        coef = np.array([self.constant, *(t.coefficient for t in self.terms)])
        return values_of(self._design(cols, n), coef)

    def _alt_values(self, cols, shape):
        for w, alt in self.alternatives:
            yield w, alt._raw({p: cols[p] for p in alt.parameters}, shape)

    def _averaged(self, cols, shape, y) -> np.ndarray:
        w0 = 1.0 - sum(w for w, _ in self.alternatives)
        out = w0 * y
        for w, ya in self._alt_values(cols, shape):
            out = out + w * ya
        return out

    def doublings(self, X) -> np.ndarray | float:
        """Distance of ``X`` beyond the measured data: the fewest doublings, over the measured
        points ``q`` of the :attr:`frontier`, of ``max_k log2(x_k / q_k)`` (0 along a parameter
        where ``x_k <= q_k``); on a full grid ``max_k log2(x_k / upper_k)``.  0 inside the data (or
        without ``upper``)."""
        cols, shape = self._columns(X)
        d = self._doublings(cols, int(np.prod(shape)) if shape else 1)
        return float(d[0]) if shape == () else d.reshape(shape)

    def _doublings(self, cols, n) -> np.ndarray:
        return _doublings_many([self], cols, n)[0]

    def interval(self, X, level: float = 0.9, averaged: bool = False) -> tuple:
        """(lower, upper) prediction interval for a *new observation* at ``X``.

        Combines repetition noise (relative), coefficient uncertainty, the spread of competing
        hypotheses (their weighted squared distance to the centre) and, beyond the measured data,
        the calibrated extrapolation drift (``drift * doublings^growth * value``); centred on
        ``predict(X, averaged)``.  The quantile is Student's t with the Welch-Satterthwaite degrees
        of freedom ``(v + v_drift)^2 / (v^2 / dof + v_drift^2 / drift_dof)`` (``dof`` when there
        is no drift).  NaN when the data cannot support an interval.
        """
        cols, shape = self._columns(X)
        _, lo, hi = predict_many([self], cols, level, averaged)
        if shape == ():
            return float(lo[0, 0]), float(hi[0, 0])
        return lo[0].reshape(shape), hi[0].reshape(shape)

    # -- description ----------------------------------------------------------------------------
    def lead(self) -> dict[str, dict]:
        """Lead-order factor per parameter: {param: {"exponent": "3/2", "log_exponent": 1}}."""
        return {p: {"exponent": fraction_str(i), "log_exponent": int(j)} for p, (i, j) in self.lead_order().items()}

    def lead_order(self) -> dict[str, tuple[Fraction, int]]:
        """Lead-order factor per parameter as (exponent, log exponent); (0, 0) for a constant."""
        out = {p: (Fraction(0), 0) for p in self.parameters}
        for t in self.terms:
            for q, i, j in t.factors:
                if q in out and (i, j) > out[q]:
                    out[q] = (i, j)
        return out

    def formula(self, style: str = "plain", digits: int = 4) -> str:
        """``plain`` (``3.1 + 0.2 * p^(3/2) * log2(p)``), ``python`` (uses ``log2`` from math) or
        ``latex``; ``(p >= 2) * (...)`` for a routine that does not run below p = 2 (:attr:`zero_below`),
        ``(p < 2) * (...)`` for one that runs at p = 1 only (:attr:`zero_from`)."""
        if style not in ("plain", "python", "latex"):
            raise PerfcastError(f"unknown formula style {style!r} (plain, python, latex)", where="style")
        return zero_below_text(_render(self.constant, [t.coefficient for t in self.terms],
                                       [t.basis_str(style) for t in self.terms], self.constant_is_roundoff(), digits,
                                       style), self.zero_below, style, self.zero_from)

    def constant_is_roundoff(self) -> bool:
        """A constant below 1e-12 of the terms' size over the measured range is the least-squares
        solver's round-off (e.g. ``-4.996e-16 + 0.001 * p``): not printed."""
        if not self.terms or self.upper is None:
            return False
        return bool(_roundoff([self], self.parameters, tuple(t.factors for t in self.terms))[0])

    def __str__(self) -> str:
        return self.formula()

    # -- JSON -----------------------------------------------------------------------------------
    def to_dict(self, alternatives: bool = True, formula: str | None = None, lead: dict | None = None) -> dict:
        """The model as JSON-ready data; ``formula`` and ``lead`` when already computed
        (:func:`to_dicts` renders many models at once)."""
        d = {
            "parameters": list(self.parameters),
            "status": self.status,
            "formula": self.formula() if formula is None else formula,
            "constant": float(self.constant),
            "terms": [t.to_dict() for t in self.terms],
            "quality": None if self.quality is None else self.quality.to_dict(),
            "lead": self.lead() if lead is None else lead,
            "noise": _clean(self.noise),
            "dof": int(self.dof),
            "cov": None if self.cov is None else [[_clean(v) for v in row] for row in self.cov],
        }
        if self.status != "ok":
            d["needed"] = int(self.needed)
        if self.notes:
            d["notes"] = list(self.notes)
        if self.drift:
            d["drift"] = _clean(self.drift)
            d["growth"] = _clean(self.growth)
            d["drift_dof"] = int(self.drift_dof)
        if self.drift and self.drift_along is not None:
            d["drift_along"] = {p: _clean(v) for p, v in zip(self.parameters, self.drift_along)}
        if self.drift and self.unchecked_on is not None:
            d["unchecked_on"] = {p: int(v) for p, v in zip(self.parameters, self.unchecked_on)}
        if self.upper is not None:
            # the largest measured value of each parameter ("upper" elsewhere is an interval bound)
            d["largest_measured"] = [_clean(v) for v in self.upper]
        if self.frontier is not None:
            d["measured_frontier"] = [[_clean(v) for v in q] for q in self.frontier]
        if self.noise_shape != 2.0:
            d["noise_shape"] = _clean(self.noise_shape)
        if self.lines:
            d["lines"] = line_dicts(self.lines, self.parameters)
        if self.zero_below:
            d["zero_below"] = {"parameter": self.zero_below[0], "start": float(self.zero_below[1]),
                               "bound": float(self.zero_below[2])}
            if through_zero(self.zero_below):
                d["zero_below"]["through_zero"] = True
        if self.zero_from:
            d["zero_from"] = {"parameter": self.zero_from[0], "start": float(self.zero_from[1])}
        if alternatives and self.alternatives:
            d["alternatives"] = [{"weight": float(w), **m.to_dict(alternatives=False)} for w, m in self.alternatives]
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "Model":
        try:
            params = tuple(d["parameters"])
            terms = tuple(Term.from_dict(t, params) for t in d.get("terms", []))
            cov = d.get("cov")
            if cov is not None:
                cov = tuple(tuple(float("nan") if v is None else float(v) for v in row) for row in cov)
                if len(cov) != 1 + len(terms) or any(len(r) != 1 + len(terms) for r in cov):
                    raise PerfcastError("covariance does not match the number of terms", where="cov")
            alts = tuple((float(a["weight"]), cls.from_dict(a)) for a in d.get("alternatives", []))
            status = d.get("status", "ok")
            if status not in STATUSES:
                raise PerfcastError(f"unknown model status {status!r}", where="status")
            q = d.get("quality")
            largest = d.get("largest_measured", d.get("upper"))   # "upper" before output schema 1
            zb = d.get("zero_below")
            if zb is not None:
                zb = (str(zb["parameter"]), float(zb["start"]), float(zb["bound"]))
                if zb[0] not in params:
                    raise PerfcastError(f"zero_below names {zb[0]!r}, not a parameter of the model", where="zero_below")
                if d["zero_below"].get("through_zero") is True:
                    zb = (*zb, True)
            zf = d.get("zero_from")
            if zf is not None:
                zf = (str(zf["parameter"]), float(zf["start"]))
                if zf[0] not in params:
                    raise PerfcastError(f"zero_from names {zf[0]!r}, not a parameter of the model", where="zero_from")
            da = _per_parameter(d, "drift_along", params, float, "a number")
            uo = _per_parameter(d, "unchecked_on", params, int, "a count")
            fr = d.get("measured_frontier")
            if fr is not None:
                fr = tuple(tuple(float(v) for v in q) for q in fr)
                if len(fr) < 2 or any(len(q) != len(params) for q in fr):
                    raise PerfcastError("measured_frontier must list two or more points, each with a value for "
                                        "every parameter of the model", where="measured_frontier")
            return cls(params, float(d["constant"]), terms, None if q is None else Quality.from_dict(q), cov,
                       float(d.get("noise") or 0.0), int(d.get("dof", 0)), alts, status,
                       int(d.get("needed", 0)), tuple(d.get("notes", ())), float(d.get("drift") or 0.0),
                       None if largest is None else tuple(float(v) for v in largest),
                       float(d.get("growth") or 2.0), int(d.get("drift_dof") or 0),
                       float(d.get("noise_shape") or 2.0), lines_from_dicts(d.get("lines") or (), params), zb, zf,
                       da, uo, fr)
        except (KeyError, TypeError, ValueError) as e:
            raise PerfcastError(f"malformed model ({type(e).__name__}: {e})") from None


def point_columns(parameters: Sequence[str], X) -> tuple[dict[str, np.ndarray], tuple[int, ...]]:
    """Points ``X`` -- a mapping {param: values}, an array of points, or scalars for one parameter --
    as one flat column per parameter of ``parameters``, and the points' shape."""
    if isinstance(X, Mapping):
        missing = [p for p in parameters if p not in X]
        if missing:
            raise PerfcastError(f"no value for parameter(s) {', '.join(missing)}", where="at")
        arrs = [np.asarray(X[p], dtype=float) for p in parameters]
        shape = np.broadcast_shapes(*(a.shape for a in arrs)) if arrs else ()
        return {p: np.broadcast_to(a, shape).ravel() for p, a in zip(parameters, arrs)}, shape
    a = np.asarray(X, dtype=float)
    m = len(parameters)
    if m == 0:
        return {}, a.shape if a.ndim else ()
    if m == 1 and (a.ndim <= 1):
        return {parameters[0]: a.ravel()}, a.shape
    if a.ndim == 1 and a.shape[0] == m:
        a = a[None, :]
        shape = ()
    elif a.ndim == 2 and a.shape[1] == m:
        shape = (a.shape[0],)
    else:
        raise PerfcastError(f"expected points with {m} coordinate(s) ({', '.join(parameters)}), "
                            f"got an array of shape {a.shape}", where="at")
    return {p: a[:, k] for k, p in enumerate(parameters)}, shape


class Composite:
    """What a model made of PMNF models shows as its own: the constant, terms, noise and degrees of
    freedom of its ``inner`` model (each subclass says which: the one that continues beyond the
    data), no alternatives; and the JSON fields they share (:meth:`_extras`)."""

    @property
    def constant(self) -> float:
        return self.inner.constant

    @property
    def terms(self):
        return self.inner.terms

    @property
    def noise(self) -> float:
        return self.inner.noise

    @property
    def dof(self) -> int:
        return self.inner.dof

    @property
    def alternatives(self) -> tuple:
        return ()

    def doublings(self, X) -> np.ndarray | float:
        """Distance of ``X`` beyond the measured data: max over parameters of ``log2(x / largest
        measured)`` (``upper``; a process grid's own process count, not its covariate), 0 inside."""
        cols, shape = point_columns(self.parameters, X)
        out = np.zeros(int(np.prod(shape)) if shape else 1)
        for q, u in zip(self.parameters, self.upper or ()):
            with np.errstate(divide="ignore", invalid="ignore"):
                out = np.maximum(out, np.nan_to_num(np.log2(cols[q] / u)))
        return float(out[0]) if shape == () else out.reshape(shape)

    def _extras(self, d: dict, upper: bool = True) -> dict:
        """``d`` with the largest measured values (``upper``), notes and the single model kept."""
        if upper and self.upper is not None:
            d["largest_measured"] = [float(v) for v in self.upper]
        if self.notes:
            d["notes"] = list(self.notes)
        if self.single is not None:
            d["single"] = self.single.to_dict(alternatives=False)
        return d


def through_zero(zero_below: tuple | None) -> bool:
    """Is the law of a model 0 below ``zero_below`` (:attr:`Model.zero_below`) a line through its 0
    at p = 1 from ``start`` on (its value there times ``(p - 1) / (start - 1)``)?"""
    return bool(zero_below) and len(zero_below) > 3 and bool(zero_below[3])


def zero_below_text(text: str, zero_below: tuple | None, style: str, zero_from: tuple | None = None) -> str:
    """A formula's ``text`` for a model 0 below ``zero_below`` (:attr:`Model.zero_below`; None: the
    text itself): ``(p >= 2) * (text)`` in plain and python (True is 1), the Iverson bracket in
    LaTeX -- the function that gives the model's values; ``(p >= 2) * (p - 1) * (text)`` (``(p - 1)
    / 3`` from p = 4 on) for a law through the 0 at p = 1 (:func:`through_zero`); ``(p < 2) *
    (text)`` for a model 0 from ``zero_from`` on (:attr:`Model.zero_from`)."""
    if zero_from:
        q, start = zero_from[:2]
        v = f"{start:g}"
        text = f"[{q} < {v}] \\cdot \\left({text}\\right)" if style == "latex" else f"({q} < {v}) * ({text})"
    if not zero_below:
        return text
    q, start = zero_below[:2]
    v = f"{start:g}"
    if through_zero(zero_below):
        d = f"{start - 1:g}"
        if style == "latex":
            line = f"({q} - 1)" if start == 2 else f"\\frac{{{q} - 1}}{{{d}}}"
            return f"[{q} \\geq {v}] \\cdot {line} \\cdot \\left({text}\\right)"
        line = f"({q} - 1)" if start == 2 else f"({q} - 1) / {d}"
        return f"({q} >= {v}) * {line} * ({text})"
    if style == "latex":
        return f"[{q} \\geq {v}] \\cdot \\left({text}\\right)"
    return f"({q} >= {v}) * ({text})"


def scaled(y: np.ndarray, log_factor: np.ndarray) -> np.ndarray:
    """``y * exp(log_factor)``, 0 where the factor is 0 (-inf: a routine that does not run there,
    :attr:`Model.zero_below`) whatever ``y`` is there (a term undefined at p = 1, log2(p)^-1)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(np.isneginf(log_factor), 0.0, y * np.exp(log_factor))


def _render(constant: float, coefficients: Sequence[float], bases: Sequence[str], roundoff: bool, digits: int,
            style: str) -> str:
    """The formula text (:meth:`Model.formula`) from the constant, the coefficients and the terms'
    basis texts; ``roundoff``: the constant is the solver's round-off, not printed."""
    return render_rows([constant], [list(coefficients)] if len(bases) else np.zeros((1, 0)), bases, [roundoff],
                       digits, style)[0]


def render_rows(constants, coefficients, bases: Sequence, roundoff, digits, style: str,
                nterms: np.ndarray | None = None) -> list[str]:
    """:func:`_render` of many models with the same terms (basis texts ``bases``) at once: the
    constants (n,), their coefficients (n, len(bases)), whether each constant is round-off (n,);
    the numbers a column at a time (:func:`_nums`), each text's pieces joined in one pass.
    ``nterms``: models with different terms (rows of a group's patterns) -- per row its number of
    terms, ``bases[t]`` the rows' basis texts of their t-th term (n,).  ``digits``: significant
    digits, one for all rows or one per row (:func:`faithful_digits`)."""
    const = np.asarray(constants, dtype=float).reshape(-1)
    n = len(const)
    if not len(bases):
        return _nums(const, digits, style)
    coef = np.asarray(coefficients, dtype=float).reshape(n, len(bases))
    mul = " \\cdot " if style == "latex" else " * "
    shown = (const != 0) & ~np.asarray(roundoff, dtype=bool)
    cnum = _nums(const, digits, style)
    pieces = [np.where(shown, np.asarray(cnum, dtype=object), "").tolist()]
    first = ~shown                     # the term starts the text: its sign without spaces
    for t, b in enumerate(bases):
        # a term whose coefficient is exactly 0 adds nothing: not printed (`-1`, not `-1 + 0 * p`);
        # a nonzero one never prints as 0 (significant digits), so the text stays the function
        on = coef[:, t] != 0
        neg = coef[:, t] < 0
        sign = np.where(first, np.where(neg, "-", ""), np.where(neg, " - ", " + "))
        if nterms is not None:
            on &= nterms > t           # rows of fewer terms: nothing from this column
        nums = _nums(np.abs(coef[:, t]), digits, style)
        if nterms is None:
            pieces += [np.where(on, sign, "").tolist(), np.where(on, np.asarray(nums, dtype=object), "").tolist(),
                       np.where(on, mul + b, "").tolist()]
        else:
            pieces.append([sg + num + mul + bt if h else "" for sg, num, bt, h in
                           zip(sign.tolist(), nums, b, on.tolist())])
        first = first & ~on
        shown = shown | on
    out = list(map("".join, zip(*pieces)))
    if nterms is not None:
        for i in np.flatnonzero(nterms == 0).tolist():     # no terms: the constant, as it is
            out[i] = cnum[i]
            shown[i] = True
    # nothing left (a zero constant, every coefficient 0): the function is 0
    for i in np.flatnonzero(~shown).tolist():
        out[i] = "0"
    return out


def term_signature(m: "Model") -> tuple:
    """What the text of a model's terms and its lead order depend on: its parameters and its terms'
    factors (kept on the model: hashing its fractions is the cost of the batch functions)."""
    sig = m.__dict__.get("_term_signature")
    if sig is None:
        # exponents as (numerator, denominator): integers hash in C, Fractions in Python
        sig = (m.parameters, tuple(tuple((p, i.numerator, i.denominator, j) for p, i, j in t.factors)
                                   for t in m.terms))
        object.__setattr__(m, "_term_signature", sig)
    return sig


def formulas(models: Sequence[Model], style: str = "plain", digits=4) -> list[str]:
    """:meth:`Model.formula` of many models at once: the terms' texts are built once per distinct
    set of terms, and the round-off test of the constants is one array operation per set.
    ``digits``: one for all, or one per model."""
    if style not in ("plain", "python", "latex"):
        raise PerfcastError(f"unknown formula style {style!r} (plain, python, latex)", where="style")
    out: list = [None] * len(models)
    dg = np.broadcast_to(np.asarray(digits, dtype=np.int64), (len(models),))
    by_sig: dict = {}
    for s, m in enumerate(models):
        if type(m) is Model:
            by_sig.setdefault(term_signature(m), []).append(s)
        else:
            out[s] = m.formula(style, int(dg[s]))
    for (params, _), rows in by_sig.items():
        sig = tuple(t.factors for t in models[rows[0]].terms)
        const = [models[s].constant for s in rows]
        if not sig:
            texts = render_rows(const, (), (), False, dg[rows], style)
        else:
            bases = [Term(0.0, f).basis_str(style) for f in sig]
            coef = [[t.coefficient for t in models[s].terms] for s in rows]
            texts = render_rows(const, coef, bases, _roundoff([models[s] for s in rows], params, sig), dg[rows],
                                style)
        for s, text in zip(rows, texts):
            out[s] = zero_below_text(text, models[s].zero_below, style, models[s].zero_from)
    return out


def _roundoff(models: Sequence[Model], params: tuple, sig: tuple) -> np.ndarray:
    """:meth:`Model.constant_is_roundoff` of models with the same terms (``sig``), vectorised."""
    up = np.array([m.upper if m.upper is not None else (np.nan,) * len(params) for m in models],
                  dtype=float).reshape(len(models), len(params))
    coef = np.array([[t.coefficient for t in m.terms] for m in models], dtype=float)
    const = np.array([m.constant for m in models], dtype=float)
    return roundoff_rows(up, coef, const, params, sig)


def factors_at(up: np.ndarray, params: tuple, sig: tuple) -> tuple[np.ndarray, list[list[np.ndarray]]]:
    """The terms ``sig``'s factors at the rows' largest measured coordinates ``up`` (n,
    len(params)), as :func:`roundoff_rows` takes them: (where every factor is defined (n,), per
    term its factors' values (n,) in order)."""
    ok = np.ones(len(up), dtype=bool)
    col = {p: k for k, p in enumerate(params)}
    out = []
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for factors in sig:
            fs = []
            for p, i, j in factors:
                u = up[:, col[p]]
                ok &= ~((u <= 0) | ((j < 0) & (u <= 1)))      # undefined there: not round-off
                f = np.power(u, float(i))
                if j:
                    f = f * np.log2(u) ** j
                fs.append(f)
            out.append(fs)
    return ok, out


def roundoff_rows(up: np.ndarray, coef: np.ndarray, const: np.ndarray, params: tuple, sig: tuple,
                  factors: tuple | None = None) -> np.ndarray:
    """The rule of :meth:`Model.constant_is_roundoff` on arrays: rows of the largest measured
    coordinates ``up`` (n, len(params)), the coefficients ``coef`` (n, len(sig)) of the terms
    ``sig`` and the constants ``const`` (n,).  ``factors``: :func:`factors_at` of the rows when
    already computed (rows of different terms: ``sig`` unused, a term's factors 1.0 and its
    coefficient 0 on the rows without it)."""
    coef = np.abs(np.asarray(coef, dtype=float))
    defined, fac = factors if factors is not None else factors_at(up, params, sig)
    ok = ~np.isnan(up).any(axis=1) & (const != 0) & defined
    size = np.zeros(len(const))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for k, fs in enumerate(fac):
            v = coef[:, k].copy()
            for f in fs:
                v = v * f
            size = np.maximum(size, v)
        return ok & np.isfinite(size) & (np.abs(const) < 1e-12 * size)


def to_dicts(models: Sequence[Model], alternatives: bool = False, digits=4) -> list[dict]:
    """:meth:`Model.to_dict` of many models, the formulas (:func:`formulas`, ``digits`` as there)
    and lead orders computed once per distinct set of terms."""
    texts = formulas(models, digits=digits)
    leads: dict = {}
    out = []
    for m, text in zip(models, texts):
        if type(m) is not Model:
            out.append(m.to_dict(alternatives) if alternatives else m.to_dict(False))
            continue
        sig = term_signature(m)
        lead = leads.get(sig)
        if lead is None:
            lead = leads[sig] = m.lead()
        out.append(m.to_dict(alternatives, text, {p: dict(v) for p, v in lead.items()}))
    return out


def predict_many(models: Sequence[Model], cols: Mapping[str, np.ndarray], level: float = 0.9,
                 averaged: bool = False, intervals: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Values and prediction intervals of many models at the same points, in one batch: (value,
    lower, upper), each (len(models), n) for ``cols`` = {parameter: n values} (every parameter the
    models use).  The rule is :meth:`Model.interval`'s (which calls this with one model); the
    value is the selected hypothesis', or the average over the alternatives with ``averaged``.
    Factor and term values are computed once per distinct factor, so thousands of models cost
    little more than their coefficients.  ``intervals=False``: the values only (bounds NaN).
    Series whose models are not built give the same arrays from their groups
    (:func:`perfcast.fit.columns.predict`): both fill a :class:`PredictBatch`."""
    check_level(level)
    n = len(next(iter(cols.values()))) if cols else 1
    b = PredictBatch(len(models), n, 1 + max((len(m.terms) for m in models), default=0), cols)
    b.add_models(np.arange(len(models)), models, averaged or intervals)
    return b.predict(level, averaged, intervals)


def check_level(level: float) -> None:
    if not 0 < level < 1:
        raise PerfcastError(f"interval level must be between 0 and 1, not {level}", where="level")


class PredictBatch:
    """What :func:`predict_many` reads of S series at n points, as arrays: the design ``D`` (S, n,
    k: column 0 the constant, then the terms in order, zero-padded to the batch's width k), the
    coefficients, covariances, noise, degrees of freedom, drift, the doublings beyond the data,
    the competing hypotheses and the measured lines' log factors.  Filled from Model objects
    (:meth:`add_models`) or from a fit group's arrays (:func:`perfcast.fit.columns.predict`); the
    interval rule (:meth:`predict`) is the same for both, so are the floats."""

    def __init__(self, S: int, n: int, k: int, cols: Mapping[str, np.ndarray]):
        self.S, self.n, self.k, self.cols = S, n, k, cols
        self.term_values = term_cache(cols)
        self.D = np.zeros((S, n, k))
        self.D[:, :, 0] = 1.0
        self.coef = np.zeros((S, k))
        self.cov = np.zeros((S, k, k))
        self.ok = np.zeros(S, dtype=bool)       # cov known, dof > 0, status ok
        self.noise = np.zeros(S)
        self.dof = np.zeros(S)
        self.drift = np.zeros(S)
        self.growth = np.full(S, 2.0)
        self.drift_dof = np.zeros(S)
        self.noise_shape = np.full(S, 2.0)
        self.doublings = np.zeros((S, n))
        #: the competing hypotheses: built (owner, weight, Model) and, per fit group, pending
        #: (group, owners, rows, hypothesis indices) read from the group's arrays
        self.alt_pairs: list = []
        self.alt_lazy: dict = {}
        #: owner -> log factors of its measured lines at the points (-inf where the routine does not
        #: run: Model.zero_below)
        self.line_log: dict = {}
        #: owner -> the bound of a model with ``zero_below``: its upper bound where it does not run is
        #: the law's there times the bound
        self.zero_cap: dict = {}
        #: owner -> the relative drift at the points of a model with ``drift_along`` (:func:`drift_reach`),
        #: in place of ``drift * doublings^growth``
        self.drift_rel: dict = {}

    def design(self, ms: Sequence[Model]) -> tuple[np.ndarray, np.ndarray]:
        """(D, coef) of models ``ms``, as wide as their most terms + 1."""
        n, term_values = self.n, self.term_values
        k = max((len(m.terms) for m in ms), default=0) + 1
        D = np.zeros((len(ms), n, k))
        coef = np.zeros((len(ms), k))
        D[:, :, 0] = 1.0
        for s, m in enumerate(ms):
            coef[s, 0] = m.constant
            for j, t in enumerate(m.terms):
                D[s, :, j + 1] = term_values(t.factors)
                coef[s, j + 1] = t.coefficient
        return D, coef

    def add_models(self, at: np.ndarray, models: Sequence[Model], alternatives: bool = True) -> None:
        """Rows ``at`` of the batch from ``models``."""
        if not len(models):
            return
        D, coef = self.design(models)
        kk = D.shape[2]
        self.D[at, :, :kk] = D
        self.coef[at, :kk] = coef
        at_l = at.tolist()
        by_params: dict = {}
        by_frontier: dict = {}
        for s, m in zip(at_l, models):
            if m.cov is not None and m.dof > 0 and m.status == "ok":
                self.ok[s] = True
                c = np.asarray(m.cov, dtype=float)
                self.cov[s, :c.shape[0], :c.shape[1]] = c
            self.noise[s], self.dof[s], self.drift[s] = m.noise, float(m.dof), m.drift
            self.growth[s], self.drift_dof[s], self.noise_shape[s] = m.growth, float(m.drift_dof), m.noise_shape
            if m.upper is not None and m.frontier is not None:
                by_frontier.setdefault((m.parameters, m.frontier), []).append(s)
            elif m.upper is not None:
                by_params.setdefault(m.parameters, ([], []))
                by_params[m.parameters][0].append(s)
                by_params[m.parameters][1].append(m.upper)
            if m.lines or m.zero_below or m.zero_from:
                self.line_log[s] = m._line_log(self.cols)
            if m.zero_below:
                self.zero_cap[s] = m.zero_below[2]
            if m.drift and m.drift_along is not None and m.upper is not None:
                self.drift_rel[s] = drift_reach(m.parameters, m.upper, m.drift_along, m.growth, self.cols, self.n,
                                                m.frontier)
            if alternatives:
                pend = getattr(m.alternatives, "pending", None)
                src = pend() if pend is not None else None
                if src is None:
                    self.alt_pairs.extend((s, w, a) for w, a in m.alternatives)
                else:
                    group, row, idx = src
                    self.add_lazy(group, [s] * len(idx), [row] * len(idx), idx)
        for params, (rows, up) in by_params.items():
            self.doublings[rows] = doublings_rows(params, np.array(up, dtype=float).reshape(len(rows), len(params)),
                                                  self.cols, self.n)
        for (params, fr), rows in by_frontier.items():
            self.doublings[rows] = frontier_doublings(params, fr, self.cols, self.n)[None, :]

    def add_lazy(self, group, owners, rows, hyps) -> None:
        """Competing hypotheses ``hyps`` of rows ``rows`` of fit group ``group``, owned by batch
        rows ``owners`` (each owner's in their order)."""
        entry = self.alt_lazy.setdefault(id(group), (group, [], [], []))
        entry[1].extend(owners)
        entry[2].extend(rows)
        entry[3].extend(hyps)

    def alternatives(self) -> tuple:
        """The competing hypotheses, flattened: (owner of each, weights, values (A, n)); built ones
        first, then the pending ones group by group (each owner's keep their order)."""
        pairs = self.alt_pairs
        owner = [s for s, _, _ in pairs]
        parts = []
        if pairs:
            D, coef = self.design([a for _, _, a in pairs])
            parts.append((np.array([w for _, w, _ in pairs], dtype=float), D, coef))
        for group, own, rows, hyps in self.alt_lazy.values():
            owner.extend(own)
            parts.append(group.hypotheses_design(np.asarray(rows), np.asarray(hyps), self.n, self.term_values))
        if not parts:
            return [], np.zeros(0), None
        k = max(p[1].shape[2] for p in parts)
        wts = np.concatenate([p[0] for p in parts])
        D = np.concatenate([np.pad(p[1], ((0, 0), (0, 0), (0, k - p[1].shape[2]))) for p in parts])
        coef = np.concatenate([np.pad(p[2], ((0, 0), (0, k - p[2].shape[1]))) for p in parts])
        return owner, wts, values_of(D, coef)

    def predict(self, level: float, averaged: bool, intervals: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(value, lower, upper) of every row: the rule of :meth:`Model.interval` (module docstring).
        A model undefined at a point (log2(p) at p <= 0) gives NaN there, silently: the callers
        refuse it with one error naming the series and the point (``ModelSet.predict``)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self._predict(level, averaged, intervals)

    def variance_parts(self, level: float, averaged: bool, intervals: bool = True) -> dict:
        """The parts of every row's interval (the rule of :meth:`Model.interval`), each (S, n):
        ``value`` (the selected hypothesis'), ``centre`` (the value shown: the average with
        ``averaged``), the variances ``coef`` (coefficient covariance), ``noise`` (one new
        observation, as its quantile scales it: ``rn^2`` times ``noise_raw``), ``alternatives``
        (the competing hypotheses' spread about the centre), ``drift`` (the extrapolation drift),
        ``dof`` (the Welch-Satterthwaite degrees of freedom of their sum) and ``q`` (its t
        quantile); the half-width is ``q * sqrt(coef + noise + alternatives + drift)``.  ``ok``
        (S,): rows with an interval (the variances are 0, ``q`` NaN, elsewhere)."""
        S, n = self.S, self.n
        D = skip_zero_terms(self.D, self.coef)
        y = values_of(D, self.coef)
        # the competing hypotheses, flattened: owner series, weight, value (built lazily by the fit:
        # not touched when neither the average nor the intervals need them)
        owner, wts, ya = self.alternatives() if (averaged or intervals) else ([], [], None)
        alts = len(owner) > 0
        w0 = 1.0 - np.bincount(owner, weights=wts, minlength=S) if alts else np.ones(S)
        if alts:
            own = np.asarray(owner)
            avg = w0[:, None] * y
            np.add.at(avg, own, wts[:, None] * ya)
        else:
            avg = y
        centre = avg if averaged else y
        ok = self.ok & intervals
        zero = np.zeros((S, n))
        out = {"value": y, "centre": centre, "ok": ok, "coef": zero, "noise_raw": zero, "noise": zero,
               "alternatives": zero, "drift": zero, "dof": np.full((S, n), np.nan), "q": np.full((S, n), np.nan)}
        if not ok.any():
            return out
        C = np.where(ok[:, None, None], self.cov, 0.0)
        noise = self.noise[:, None]
        vn = (noise * y) ** 2
        vc = np.maximum(np.einsum("sni,sij,snj->sn", D, C, D), 0.0)
        # the sum in the order the bounds have always been computed in (their floats), the
        # alternatives' part on its own for the parts
        var = vc + vn + w0[:, None] * (y - centre) ** 2
        va = w0[:, None] * (y - centre) ** 2
        if alts:
            dev = wts[:, None] * (ya - centre[own]) ** 2
            np.add.at(var, own, dev)
            np.add.at(va, own, dev)
        d = self.doublings
        drift = self.drift[:, None]
        growth = self.growth[:, None]
        rel = drift * d ** growth
        if self.drift_rel:
            rel = rel.copy()
            for s, r in self.drift_rel.items():
                rel[s] = r
        vd = (rel * centre) ** 2
        # non-normal noise: its part of the variance enters scaled by the squared ratio of its
        # quantile to the normal one (1 for normal noise; < 1 for light-tailed noise, whose
        # 90% range is narrower than a normal one of the same variance)
        rn = np.array([_shape_ratio(b, level) for b in self.noise_shape.tolist()], dtype=float)[:, None]
        dof = np.broadcast_to(self.dof[:, None], (S, n))
        ddof = self.drift_dof[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            ws = (var + vd) ** 2 / (var ** 2 / dof + vd ** 2 / ddof)
        dof = np.where((ddof > 0) & (vd > 0) & np.isfinite(ws), ws, dof)
        out.update(coef=vc, noise_raw=vn, noise=vn + (rn * rn - 1) * vn, alternatives=va, drift=vd, dof=dof,
                   q=t_quantile(dof, 0.5 + level / 2), var=var, rn=rn)
        return out

    def _predict(self, level: float, averaged: bool, intervals: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        S, n = self.S, self.n
        p = self.variance_parts(level, averaged, intervals)
        centre, ok = p["centre"], p["ok"]
        lo = np.full((S, n), np.nan)
        hi = np.full((S, n), np.nan)
        if ok.any():
            vn, rn = p["noise_raw"], p["rn"]
            half = p["q"] * np.sqrt(np.maximum(p["var"] + p["drift"] + (rn * rn - 1) * vn, 0.0))
            lo = np.where(ok[:, None], centre - half, np.nan)
            hi = np.where(ok[:, None], centre + half, np.nan)
        for s, ll in self.line_log.items():
            # on a measured line with its own level: value and interval times its factor (0 where
            # the routine does not run: Model.zero_below)
            h = hi[s].copy()
            centre[s] = scaled(centre[s], ll)
            lo[s] = scaled(lo[s], ll)
            hi[s] = scaled(h, ll)
            cap = self.zero_cap.get(s)
            if cap is not None:
                # where it does not run: 0 in [0, what the rule calls not running] -- the values
                # there were below that share of the law's from start on (not_running_first)
                off = np.isneginf(ll)
                hi[s] = np.where(off, np.where(np.isnan(h), 0.0, np.maximum(h, 0.0) * cap), hi[s])
        return centre, lo, hi


def skip_zero_terms(D: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """The design ``D`` (..., n, k: column 0 the constant, then the terms) with the columns of the
    terms whose coefficient (``coef`` (..., k)) is exactly 0 set to 0: such a term is not part of
    the function (the formula does not print it, :func:`render_rows`), so it adds nothing to a
    value or its variance, also where it is undefined (``0 * log2(p)^-1`` at p = 1)."""
    zero = np.asarray(coef)[..., None, 1:] == 0
    if not zero.any():
        return D
    D = D.copy()
    D[..., 1:] = np.where(zero, 0.0, D[..., 1:])
    return D


def values_of(D: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """Model values from a design ``D`` ((S,) n, k) and coefficients ``coef`` ((S,) k), the terms
    of coefficient 0 skipped (:func:`skip_zero_terms`): ((S,) n).  Every path that evaluates a
    model (:meth:`Model.predict`, :class:`PredictBatch`, the fit's values at the measured points)
    goes through here."""
    D = skip_zero_terms(D, coef)
    return D @ coef if D.ndim == 2 else np.einsum("snk,sk->sn", D, coef)


def doublings_rows(params: Sequence[str], up: np.ndarray, cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    """:meth:`Model.doublings` of rows with parameters ``params`` and largest measured values
    ``up`` (rows, len(params)) at the points ``cols``: (rows, n)."""
    sub = np.zeros((up.shape[0], n))
    for k, p in enumerate(params):
        u = up[:, k][:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            dp = np.log2(np.asarray(cols[p], dtype=float)[None, :] / u)
        dp = np.nan_to_num(dp, nan=0.0, neginf=0.0)
        sub = np.where(u > 0, np.maximum(sub, dp), sub)
    return sub


def _beyond_each(params: Sequence[str], points: np.ndarray, cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    """Doublings of the points ``cols`` beyond each of the measured ``points`` (r, len(params))
    along each parameter: (r, len(params), n), ``log2(x_k / q_k)``, 0 where ``x_k <= q_k`` and
    along a parameter whose measured value is not > 0 (:func:`doublings_rows`'s rule)."""
    out = np.zeros((points.shape[0], len(params), n))
    for k, p in enumerate(params):
        out[:, k, :] = doublings_rows((p,), points[:, k:k + 1], cols, n)
    return out


def frontier_doublings(params: Sequence[str], frontier, cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    """:meth:`Model.doublings` of a model whose measured points' frontier is ``frontier`` (r,
    len(params)) at the points ``cols``: ``min_q max_k log2(x_k / q_k)^+``, the doublings from the
    nearest measured point that does not lie below x, (n,).  With one point (a full grid's corner,
    ``upper``) it is :func:`doublings_rows`."""
    pts = np.asarray(frontier, dtype=float).reshape(-1, len(params))
    return _beyond_each(params, pts, cols, n).max(axis=1).min(axis=0)


def measured_frontier(X) -> tuple[tuple[float, ...], ...] | None:
    """The measured points ``X`` (n, m) that no other measured point dominates (is at least as
    large along every parameter), in descending order (``Model.frontier``); None when one point
    dominates all of them -- the corner of the largest values was measured (a full grid), where
    the distance beyond the data is counted from ``upper`` alone -- or there are none."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    X = X[~np.isnan(X).any(axis=1)]
    if not len(X):
        return None
    X = np.unique(X, axis=0)[::-1]          # lexicographically descending: a dominating point comes first
    kept = np.empty((0, X.shape[1]))
    for x in X:
        if not (kept >= x[None, :]).all(axis=1).any():
            kept = np.vstack([kept, x])
    if len(kept) < 2:
        return None
    return tuple(tuple(float(v) for v in q) for q in kept)


def reach_after(upper, frontier, points) -> tuple:
    """A model's largest measured values and frontier (``Model.upper``, ``Model.frontier``) once
    the ``points`` (r, len(upper)) are measured too: (upper, frontier), as the fit would find them
    (:func:`measured_frontier`); (None, None) without a measured range."""
    if upper is None:
        return None, None
    old = np.asarray(frontier if frontier is not None else (upper,), dtype=float)
    pts = np.vstack([old, np.asarray(points, dtype=float).reshape(-1, old.shape[1])])
    return tuple(float(v) for v in pts.max(axis=0)), measured_frontier(pts)


def drift_reach(params: Sequence[str], upper: Sequence[float], along: Sequence[float], growth: float,
                cols: Mapping[str, np.ndarray], n: int, frontier=None) -> np.ndarray:
    """The relative drift (standard deviation over the value) at the points ``cols`` of a model
    with a drift per parameter (``Model.drift_along``): the largest over the parameters of
    ``along[k] * doublings_k^growth``, each parameter's doublings beyond its own largest measured
    value (``upper[k]``; 0 inside the data), (n,).  With equal drifts it is the usual ``drift *
    doublings^growth`` (:meth:`Model.doublings` is the largest of the parameters' doublings).
    ``frontier`` (``Model.frontier``, a sparse design): the doublings are counted from each of its
    points, and the smallest of their drifts holds (the nearest measured point's)."""
    if frontier is not None:
        d = _beyond_each(params, np.asarray(frontier, dtype=float).reshape(-1, len(params)), cols, n)
        a = np.asarray(along, dtype=float)[None, :, None]
        return (a * d ** growth).max(axis=1).min(axis=0)
    up = np.asarray(upper, dtype=float)[None, :]
    out = np.zeros(n)
    for k, p in enumerate(params):
        dk = doublings_rows((p,), up[:, k:k + 1], cols, n)[0]
        out = np.maximum(out, float(along[k]) * dk ** growth)
    return out


def _doublings_many(models: Sequence[Model], cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    """:meth:`Model.doublings` of many models at the same points, (len(models), n): one array
    operation per parameter (per distinct frontier of a sparse design)."""
    d = np.zeros((len(models), n))
    by_params: dict = {}
    for s, m in enumerate(models):
        if m.upper is not None and m.frontier is not None:
            d[s] = frontier_doublings(m.parameters, m.frontier, cols, n)
        elif m.upper is not None:
            by_params.setdefault(m.parameters, []).append(s)
    for params, rows in by_params.items():
        up = np.array([models[s].upper for s in rows], dtype=float).reshape(len(rows), len(params))
        d[rows] = doublings_rows(params, up, cols, n)
    return d


def term_cache(cols: Mapping[str, np.ndarray]):
    """factors -> the values of a unit-coefficient term with those factors at ``cols``, each
    distinct factor tuple evaluated once (what :func:`GroupFit.hypotheses_design` reads)."""
    cache: dict = {}

    def term_values(factors: tuple) -> np.ndarray:
        v = cache.get(factors)
        if v is None:
            v = cache[factors] = Term(1.0, factors).evaluate(cols)
        return v

    return term_values


def values_at(models: Sequence, points: Sequence[Mapping[str, float]], averaged: bool = False) -> np.ndarray:
    """Values of many models (anything with ``predict``; plain :class:`Model` objects in one batch,
    :func:`predict_many`) at the same points: (len(models), len(points)), NaN where a model has a
    parameter the point lacks."""
    S, P = len(models), len(points)
    out = np.full((S, P), np.nan)
    if not P:
        return out
    keys = set.intersection(*(set(t) for t in points))
    plain = [s for s, m in enumerate(models) if type(m) is Model and set(m.parameters) <= keys]
    if plain:
        cols = {p: np.array([float(t[p]) for t in points]) for p in keys}
        out[plain] = predict_many([models[s] for s in plain], cols, 0.9, averaged, intervals=False)[0]
    done = set(plain)
    for s, m in enumerate(models):
        if s in done:
            continue
        for j, t in enumerate(points):
            if all(p in t for p in m.parameters):
                out[s, j] = float(m.predict({p: t[p] for p in m.parameters}, averaged=averaged))
    return out


@functools.lru_cache(maxsize=64)
def _shape_ratio(beta: float, level: float) -> float:
    """Quantile ``0.5 + level / 2`` of the unit-variance generalised normal of shape ``beta``
    over the normal one."""
    if beta == 2.0:
        return 1.0
    # the generalised normal's quantile from the regularised incomplete gamma function
    # (F(x) = 1/2 + gammainc(1/beta, x^beta) / 2 for x > 0), its variance Gamma(3/b) / Gamma(1/b)
    p = 0.5 + level / 2
    q = gamma_p_inv(1 / beta, 2 * p - 1) ** (1 / beta)
    var = math.exp(math.lgamma(3 / beta) - math.lgamma(1 / beta))
    return q / math.sqrt(var) / NormalDist().inv_cdf(p)


def _nums(values, digits, style: str) -> list[str]:
    """The numbers of a formula: ``digits`` significant digits (one for all, or one per value),
    "0" for zero, exponents without padding or "+" (``4.271e-7``; LaTeX ``4.271 \\times 10^{-7}``)."""
    v = np.asarray(values, dtype=float).reshape(-1)
    dg = np.broadcast_to(np.asarray(digits, dtype=np.int64), v.shape)
    if not len(v) or (dg == dg[0]).all():
        out = list(map(("{:.%dg}" % (int(dg[0]) if len(v) else 4)).format, v.tolist()))
    else:
        out = [("{:.%dg}" % d).format(x) for x, d in zip(v.tolist(), dg.tolist())]
    for i in np.flatnonzero(v == 0).tolist():
        out[i] = "0"
    # "g" writes an exponent where the value rounded to ``digits`` is below 1e-4 or at least
    # 10^digits: only values below 1e-4 or above 0.9 * 10^digits (and NaN) can have one
    mag = np.abs(v)
    with np.errstate(invalid="ignore"):
        maybe = np.flatnonzero(~((mag >= 1e-4) & (mag < 0.9 * 10.0 ** np.maximum(dg, 1))))
    for i in [i for i in maybe.tolist() if "e" in out[i]]:
        m, e = out[i].split("e")
        out[i] = f"{m} \\times 10^{{{int(e)}}}" if style == "latex" else f"{m}e{int(e)}"
    return out


def _num(v: float, digits: int, style: str) -> str:
    return _nums([v], digits, style)[0]
