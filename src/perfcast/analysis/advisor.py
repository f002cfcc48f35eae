"""Which run next: candidate measurements ranked by the uncertainty they remove at a target, per cost.

``perfcast advise EXP --target p=4096`` (issue 21, item 1).  The question is where one more run
buys the most certainty about the prediction at the target, for the kernels that matter there.

**Uncertainty at the target.**  For every series of the metric whose model predicts at least
:data:`MIN_SHARE` of the root's value at the target (the kernels that matter there), the variance
of its predicted value has three parts, all read from the model the fit left
(:class:`perfcast.fit.model.Model`):

* *coefficients* -- ``c^T Cov c`` with ``c`` the selected hypothesis' design row at the target;
* *hypotheses* -- the weighted spread ``sum_h w_h (y_h(t) - ybar(t))^2`` of the selected hypothesis
  and its ``alternatives`` (weights: the alternatives', the rest the selected one's);
* *extrapolation* -- the calibrated drift term of the interval, ``(drift * doublings^growth *
  y(t))^2``, with ``doublings`` the distance from the nearest measured point to the target.  From a
  point x the target is ``d_q = log2(target_q / x_q)`` doublings away along each parameter q (0 at
  or beyond the target's value); the doublings along different parameters add, ``sum_q d_q``
  (:func:`distances`: the path from x to the target in doublings, one parameter after the other;
  what a model learns about how p scales at a small n says nothing of how it scales at the
  target's n when the parameters interact).  Where one parameter is extrapolated, as from a full
  grid, this is the interval's own count (:meth:`perfcast.fit.model.Model.doublings`: from the
  nearest measured point, the largest of the ``d_q``); where several are it is larger: from
  p = 1024 at a small n, p = 2048 at n = 8 times that is 1 + 3 doublings away here, 3 for the
  interval.  (Combining
  the ``d_q`` as independent errors, ``(sum_q d_q^(2 growth))^(1/(2 growth))``, valued a run 1
  doubling of p and 3 of n from the target like one 3 doublings away on the target's line, and
  cheap runs at small n won: on bench/advisor.py's two-parameter scenarios the advisor crept along
  the diagonal (64,100), (128,100), (128,200), (256,200) and its median error at 30% of the full
  grid's cost was 18.5% and 28.0% (2d-log-comm, 2d-plogp; 6 seeds); with the sum 2.6% and 18.1%.
  On Relearn the sum picks p = 256 at n = 8000 and 9000 first and the fit there is 85% off until
  n = 5000 is run too: 84.6% at 30% (the independent count: 18.0%), 10.9% at 40% (17.9%), and it
  reaches the full grid's 9.2% at 80% of its cost (the independent count never does).)

The noise of one new run at the target is left out: no measurement elsewhere reduces it.  The
series' variances are summed and divided by the sum of their squared values at the target, so a
kernel's variance counts in proportion to its squared share of the total and the figure is one
relative variance (for one series: its squared relative standard deviation); shown as ``±sd``.

**What one run at x removes** (per series, in closed form or by exact quadrature):

* coefficients: a new observation at ``x`` with variance ``s2(x) = (noise * f(x))^2`` (the fit's
  statistical model: relative noise, :mod:`perfcast.fit.core`) updates the coefficient covariance by
  Sherman-Morrison, and the variance at the target falls by ``(c^T Cov d)^2 / (s2(x) + d^T Cov d)``
  (``d`` the design row at x) -- the c-optimal design criterion.  ``f(x)`` is the measured mean at a
  measured point (an extra repetition), else the model's prediction.  A series free of noise takes
  its leave-one-out misfit (``quality.cv``) as the noise of a new value: what a new value tells
  it is limited by the model's own error, not by the timer's.
* hypotheses: the value measured at x, ``y ~ sum_h w_h N(y_h(x), s2(x) + d^T Cov d)``, reweights the
  hypotheses by their likelihoods; the expected posterior spread at the target is the prior spread
  minus ``Var_y(E[y(t) | y])`` (law of total variance).  That variance is computed exactly by
  Gauss-Hermite quadrature over y for each hypothesis (:data:`QUADRATURE_NODES` nodes).  Where the
  hypotheses agree at x (relative to the noise there) it is zero: such a point cannot separate them.
* extrapolation: a new point closer to the target than every measured one shrinks the drift term to
  its value at the new distance; an extra repetition leaves the distance where it is.  The drift
  itself is held as fitted, and that is what the fit's own model expects of it: the drift is
  ``max(m^2 - a, 0) / d^(2 growth)`` from the one held-out point's squared relative miss ``m^2`` and
  what the interval allowed there, ``a`` (:func:`perfcast.fit.core._drift`).  A run makes a part
  ``g`` of ``a`` known (a repetition at the held-out point: ``noise^2 / (k (k + 1))`` with k runs
  there; a run at a kept point: the kept fit's variance at the held-out point it removes), and
  given the miss ``m' ~ N(m (1 - g/V), g (1 - g/V))``, ``a' = a - g`` (``V = m^2``), so
  ``E[m'^2 - a'] = m^2 - a``: no run changes the expected drift but through its floor at 0, which
  raises it (a new point beyond the largest, the check's new held-out point, likewise).  Valuing
  runs by that expected drift was measured and not kept (bench/README.md, "Valuing a run for the
  drift": lower coverage on the synthetic one-parameter oracles).  (Counting
  from each parameter's largest value instead, as the interval does, made a run at p = 1024 and the
  smallest n look as good as one at the target's n: on bench/advisor.py's two-parameter scenarios
  the advisor then ran everything at the smallest n: median error 21.5% vs 7.1% with this count.)

Candidates are scored by the sum of these reductions over the series (relative to the same
denominator as the uncertainty) per core-hour.

**Cost.**  A new point costs the predicted run time there -- the model of the root series of the
time metric (the whole run: the sum of the topmost callpaths of an inclusive metric with a call
tree, of all callpaths of an exclusive metric, else the one callpath that is the largest at every
measured point -- a whole-run timer holds the others --, else the sum of all callpaths; a sum over
ranks divided by the process count) -- times the number of processes (the process-count
parameter, :attr:`perfcast.modelset.ModelSet.procs`; without one, the ranks every measured run had
(:func:`ranks_per_run`: an MPI code run at a fixed process count), else each run counts as one process);
an extra repetition of a measured point costs its measured mean time times the
processes.  So the cost of new points is predicted, the cost of repetitions measured.  (A run time
that is mostly start-up at the small points hides the solver's growth from the root's model:
jacobi, n = 16..64 -> 512, priced 0.36 s, measured 1.72 s.  A floor from the largest child's model
plus the measured rest priced it 0.82 s, but made the advisor worse on bench/advisor.py's hpccg-n,
the one oracle with a call tree: 20 seeds, at 30% of the full grid's cost 51.4% median error
against 33.0%, since dearer new points lose to repetitions; not kept, bench/README.md.)  A campaign
that also runs other collectors at each new point (a cachegrind run, a perf run) gives each one's
time as a function of the plain run's (:attr:`Request.collector_runs`), and a new point costs its
plain run plus those; repetitions run the plain command only.

**With a budget** the plan is greedy: the best gain per cost among the affordable candidates, then
the others rescored as if it had been run -- the coefficient covariances updated by the same rank-one
formula, the distance to the target updated; the hypotheses' part of a later point counts only beyond the largest
such part already planned (the expected reduction of several points is at least that of the best of
them: a lower bound, so the plan never promises more than its points give).  A candidate may be
chosen again (another repetition).  The plan stops when the budget buys nothing more or no
affordable run removes :data:`MIN_STEP` of the variance left that runs can remove: the variance
above the *floor*, the extrapolation term at the nearest distance any new candidate reaches
(:attr:`Advice.floor`; :attr:`Advice.worth` is the gain a run must exceed).  Counting the share of
all of the variance instead stopped bench/advisor.py's Relearn campaigns after three runs at
p = 256 (n = 5000, 7000, 9000: the drift 1 doubling from p = 512 is then most of the variance and
no grid point is closer), at 30% of the full grid's cost and 15.8% error (2 seeds), short of the
full grid's 9.2%.

**The uncertainty the advice states** is the interval the user gets: the half-width of ``perfcast
predict``'s :data:`LEVEL` interval of the total (the root callpaths, their half-widths combined as
independent errors: :func:`total_interval`, the interval ``perfcast collect --adaptive --until``
stops by) relative to its value, now and after each candidate (:attr:`Choice.after`) or plan step:
each root model with its coefficient covariance updated by the runs (the rank-one update above) and
its measured points joined by theirs (the largest measured values and the frontier the interval
counts the distance beyond the data from: :func:`perfcast.fit.model.reach_after`), through predict's own rule
(:func:`perfcast.fit.model.predict_many`; so the Welch-Satterthwaite quantile follows the new mix of
coefficient and drift variance).  Its degrees of freedom, drift and hypotheses' weights are left as
fitted.  The ranking is still by the variance above (:attr:`Advice.sd`, :attr:`Choice.sd_after`):
the change of the quantile a run brings (a repetition's pure-error degree of freedom, a new point's
held-out point for the drift) is not counted in the gain (ranked by ``q^2`` times the variance,
Welch-Satterthwaite as the interval, the advisor spent its runs on the cheapest small points -- a
lower coefficient variance moves the dof toward the drift's and raises ``q`` -- and coverage fell:
bench/README.md, "Valuing a run for the drift").  (On the bundled jacobi-p experiment at
p = 64 the kernels' sd is ±613% and predict's interval ±1990%: the interval's quantile is
several times the sd, because the drift term has few degrees of freedom.)

**Candidates inside the measured range.**  A candidate that is not a measured point is scored
whether or not it lies beyond the measured range (a grid's gaps -- Relearn's n = 6000 at p = 256
when 5000 and 7000 were run -- are runs one can make); only a candidate set with no new point at
all is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from ..errors import PerfcastError

#: the kernels that matter at the target: predicted at least this share of the root's value there
MIN_SHARE = 0.01
#: steps of each parameter's own progression proposed beyond its largest measured value
STEPS = 2
#: Gauss-Hermite nodes per hypothesis for the expected reweighting of the hypotheses
QUADRATURE_NODES = 100
#: relative noise floor of one new value (1e-6: the fit's relative precision, fit.core.TINY)
NOISE_FLOOR = 1e-6
#: the greedy plan stops after this many runs ...
MAX_PLAN = 100
#: ... or when no affordable run removes this share of the variance left at the target
MIN_STEP = 0.05
#: seconds per unit of a time metric (no unit: seconds, as everywhere in perfcast)
_TIME_FACTORS = {"": 1.0, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0, "ms": 1e-3,
                 "msec": 1e-3, "us": 1e-6, "usec": 1e-6, "µs": 1e-6, "ns": 1e-9, "nsec": 1e-9}
PARTS = ("coefficients", "hypotheses", "extrapolation")
#: the level of the interval the advice states its uncertainty in: ``perfcast predict``'s default,
#: the interval ``perfcast collect --adaptive --until`` stops by
LEVEL = 0.9


# -- the request: target and candidates, checked against the measured points before any fit -------
@dataclass(frozen=True)
class Request:
    """A checked request: the full ``target`` point, the candidate points (new ones and the
    measured ones, for extra repetitions) and the measured values of each parameter."""

    parameters: tuple[str, ...]
    target: dict
    new: tuple[tuple[float, ...], ...]
    repeat: tuple[tuple[float, ...], ...]
    measured: dict            # parameter -> sorted distinct measured values
    budget: float | None = None
    #: the other runs a new point takes: a campaign runs each of its other collectors there once
    #: (cachegrind, perf), each here a function of the plain run's seconds (array) -> its seconds
    #: (:meth:`perfcast.collect.campaign.ModeCost.seconds`)
    collector_runs: tuple = ()


def _fmt(point: Mapping[str, float]) -> str:
    return ",".join(f"{k}={v:g}" for k, v in point.items())


def progression(values: Sequence[float], steps: int = STEPS) -> list[float]:
    """The next ``steps`` values of a parameter's measured values continued by their own
    progression: constant ratio (doubling: 64, 128 -> 256), constant difference (5000, 6000 ->
    7000), squares or cubes of an arithmetic progression (LULESH's 27, 64, ..., 343 -> 512, 729),
    else the ratio of the last two.  Whole numbers stay whole."""
    v = sorted(set(float(x) for x in values))
    if len(v) < 2:
        return []
    a = np.array(v)
    close = lambda x: bool(np.allclose(x, x[0], rtol=1e-6, atol=0))  # noqa: E731
    out: list[float] = []
    if a[0] > 0 and close(a[1:] / a[:-1]):
        r = a[-1] / a[-2]
        out = [a[-1] * r ** k for k in range(1, steps + 1)]
    elif close(np.diff(a)):
        d = a[-1] - a[-2]
        out = [a[-1] + d * k for k in range(1, steps + 1)]
    else:
        for e in (2, 3):
            root = np.round(np.abs(a) ** (1 / e))
            if a[0] > 0 and np.array_equal(root ** e, a) and len(set(np.diff(root))) == 1:
                d = root[-1] - root[-2]
                out = [(root[-1] + d * k) ** e for k in range(1, steps + 1)]
                break
        else:
            if a[-2] > 0:
                r = a[-1] / a[-2]
                out = [a[-1] * r ** k for k in range(1, steps + 1)]
    if all(float(x).is_integer() for x in v):
        out = [float(round(x)) for x in out]
    return out


def request(parameters: Sequence[str], points: Sequence[Mapping[str, float]], target: Mapping[str, float],
            candidates: Sequence[Mapping[str, Sequence[float]]] = (), budget: float | None = None) -> Request:
    """Check ``target`` and the candidate grid against the measured ``points`` (one mapping per
    distinct measured point) and build the candidates.  Bad input raises a one-line
    :class:`PerfcastError` naming the option: an unknown parameter, a parameter measured at one
    value only given another value (the campaign did not vary it: no model says how it scales), a
    target inside the measured range, no new candidate (every candidate a measured point), a budget not above 0.

    ``target`` may leave parameters out: they stay at their largest measured value.  Without
    ``candidates`` each parameter's measured values continue by their own progression
    (:func:`progression`, :data:`STEPS` steps; a step past the target is the target's value),
    combined with the other parameters' measured combinations.  ``candidates``: mappings
    {parameter: values} -- the grid of the named values, the other parameters at their measured
    combinations.  Every measured point is also a candidate for one more repetition."""
    params = tuple(parameters)
    if not params or not points:
        raise PerfcastError("the experiment has no parameters (one run): nothing to advise on", where="EXP")
    pts = sorted({tuple(float(p[q]) for q in params) for p in points})
    measured = {q: sorted({t[k] for t in pts}) for k, q in enumerate(params)}
    upper = {q: measured[q][-1] for q in params}

    def check_names(given: Mapping, what: str) -> None:
        unknown = [k for k in given if k not in params]
        if unknown:
            raise PerfcastError(f"{what}: unknown parameter {unknown[0]!r}; the experiment's parameters are "
                                f"{', '.join(params)}", where=what)

    check_names(target, "--target")
    # a value at or below 0 is no run and no model predicts there (p=0 was "inside the measured range",
    # n=0 beside p=2048 "the models predict nan for the whole run")
    from ..modelset import check_positive
    check_positive(target, "--target")
    tgt = {q: float(target.get(q, upper[q])) for q in params}
    for q in params:
        if len(measured[q]) == 1 and tgt[q] != measured[q][0]:
            raise PerfcastError(f"{_fmt(target)}: the campaign measured {q} at {measured[q][0]:g} only, so no model "
                                f"says how it scales; keep {q}={measured[q][0]:g}", where="--target")
    if not any(tgt[q] > upper[q] for q in params):
        # below the smallest measured value of a parameter is not "inside" the range: no larger run helps there
        inside = all(tgt[q] >= measured[q][0] for q in params)
        raise PerfcastError(f"{_fmt(tgt)} is {'inside' if inside else 'not beyond'} the measured range ({_fmt(upper)} "
                            f"measured{'' if inside else ' at the largest'}): "
                            + ("a prediction there needs no extrapolation; give a target beyond it" if inside else
                               "the advice is for a target beyond the largest runs; give one there"), where="--target")
    if budget is not None and not budget > 0:
        raise PerfcastError(f"{budget:g} core-hours: a budget must be above 0", where="--budget")
    new: set = set()
    if candidates:
        for grid in candidates:
            check_names(grid, "--candidates")
            for q, vals in grid.items():
                if len(measured[q]) == 1 and any(float(v) != measured[q][0] for v in vals):
                    raise PerfcastError(f"{q}={','.join(f'{v:g}' for v in vals)}: the campaign measured {q} at "
                                        f"{measured[q][0]:g} only, so no model says how it scales",
                                        where="--candidates")
                if any(not float(v) > 0 for v in vals):
                    raise PerfcastError(f"{q}={','.join(f'{v:g}' for v in vals)}: parameter values of a run must be "
                                        f"above 0", where="--candidates")
            new |= _grid(params, pts, {q: [float(v) for v in vals] for q, vals in grid.items()})
    else:
        for q in params:
            steps = []
            for v in progression(measured[q]):
                if v > tgt[q] > upper[q] or v > upper[q] >= tgt[q]:
                    v = tgt[q]                    # no further than the target
                if v > upper[q]:
                    steps.append(v)
            new |= _grid(params, pts, {q: sorted(set(steps))})
    measured_set = set(pts)
    repeat = tuple(pts)
    new_pts = tuple(sorted(new - measured_set))
    if not new_pts:
        raise PerfcastError(f"no candidate beyond the measured range ({_fmt(upper)} measured) nor between its "
                            f"points: every candidate is a measured point; give values beyond it, e.g. --candidates "
                            f"{params[0]}={upper[params[0]] * 2:g}", where="--candidates")
    return Request(params, tgt, new_pts, repeat, measured, budget)


def _grid(params: tuple, pts: list, named: Mapping[str, list]) -> set:
    """Points of the grid of ``named`` values, the other parameters at their measured combinations."""
    import itertools

    if not named or any(not v for v in named.values()):
        return set()
    others = [k for k, q in enumerate(params) if q not in named]
    combos = sorted({tuple(t[k] for k in others) for t in pts})
    out = set()
    for vals in itertools.product(*(named[q] for q in params if q in named)):
        it = iter(vals)
        fixed = {k: next(it) for k, q in enumerate(params) if q in named}
        for c in combos:
            rest = dict(zip(others, c))
            out.add(tuple(fixed[k] if k in fixed else rest[k] for k in range(len(params))))
    return out


# -- the series: what each model says about the target and the candidates --------------------------
@dataclass
class _Series:
    callpath: str
    model: object
    value: float                 # selected hypothesis at the target
    c: np.ndarray                # design row at the target
    cov: np.ndarray
    noise: float
    hyps: list                   # (weight, Model): the selected one first
    yt: np.ndarray               # hypotheses at the target
    share: float = 0.0
    var: dict = field(default_factory=dict)


def _cols(m, pts: np.ndarray) -> tuple[dict, int]:
    return {q: pts[:, k] for k, q in enumerate(m.parameters)}, len(pts)


def _fitted_region(m, pts: np.ndarray) -> np.ndarray:
    """Per point of ``pts``, whether ``m`` is fitted there: a routine that does not run below the
    next process count (:attr:`Model.zero_below`) or runs at p = 1 only (:attr:`Model.zero_from`) is
    0 by rule outside its law's points, so a run there changes neither its coefficients nor its
    hypotheses (CloverLeaf's MPI_Waitall time, fitted from p = 2 on, was said to be pinned down from
    +-20.3% to +-0.4% by a repetition at p = 1)."""
    cols, n = _cols(m, pts)
    live = np.ones(n, dtype=bool)
    zb, zf = getattr(m, "zero_below", None), getattr(m, "zero_from", None)
    if zb:
        live &= np.asarray(cols[zb[0]], dtype=float) >= float(zb[1])
    if zf:
        live &= np.asarray(cols[zf[0]], dtype=float) < float(zf[1])
    return live


def _design(m, cols: dict, n: int) -> np.ndarray:
    return m._design(cols, n)


def _raw(m, cols: dict, n: int) -> np.ndarray:
    return m._raw(cols, (n,))


def distances(target: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Doublings from each of ``pts`` (n, P) up to ``target`` (P,), added over the parameters:
    ``sum_q d_q`` with ``d_q = log2(target_q / x_q)`` (0 at or beyond the target) -- the one
    nonzero ``d_q`` where only one parameter is extrapolated, as on a full grid."""
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.log2(target[None, :] / pts)
    # a value <= 0 has no doublings to count: skipped, as the interval does (fit.model.doublings_rows)
    d = np.where(np.isfinite(d) & (pts > 0), np.maximum(d, 0.0), 0.0)
    return d.sum(axis=1)


def _drift_var(m, value: float, d: float) -> float:
    """The interval's extrapolation term ``(drift * d^growth * value)^2`` at ``d`` doublings from
    the data (:meth:`perfcast.fit.model.Model.interval`)."""
    if not m.drift or not d > 0:
        return 0.0
    return float((m.drift * d ** m.growth * value) ** 2)


def _selection_reduction(w: np.ndarray, yt: np.ndarray, yx: np.ndarray, sx: np.ndarray) -> np.ndarray:
    """Expected reduction of the hypotheses' spread at the target, ``Var_y(E[y(t) | y])``, by one
    value ``y`` at each of n candidates: ``w`` (H,) weights, ``yt`` (H,) values at the target,
    ``yx`` (H, n) values at the candidates, ``sx`` (n,) standard deviation of the value there.
    Gauss-Hermite quadrature per hypothesis of the mixture the value comes from."""
    z, g = np.polynomial.hermite.hermgauss(QUADRATURE_NODES)
    g = g / math.sqrt(math.pi)
    ybar = float(w @ yt)
    # y at the nodes: (K source hypotheses, J nodes, n)
    y = yx[:, None, :] + math.sqrt(2.0) * sx[None, None, :] * z[None, :, None]
    # log likelihood of every hypothesis h for each y: (H, K, J, n)
    ll = -0.5 * ((y[None] - yx[:, None, None, :]) / sx[None, None, None, :]) ** 2 + np.log(w)[:, None, None, None]
    ll -= ll.max(axis=0, keepdims=True)
    post = np.exp(ll)
    post /= post.sum(axis=0, keepdims=True)
    mean = np.einsum("hkjn,h->kjn", post, yt)
    return np.einsum("k,j,kjn->n", w, g, (mean - ybar) ** 2)


# -- the interval the user gets: perfcast predict's, of the total at the target --------------------
def _finite(v):
    return float(v) if v is not None and math.isfinite(v) else None


def combine_roots(values: Sequence[float], lowers: Sequence, uppers: Sequence) -> tuple[float, float, float]:
    """The total of the root rows (value, lower, upper) and its interval: the half-widths combined
    as independent errors (root sum of squares), each side on its own; a missing bound is NaN."""
    bound = lambda b: math.nan if b is None else float(b)  # noqa: E731
    value = float(sum(float(v) for v in values))
    lo = [float(v) - bound(b) for v, b in zip(values, lowers)]
    hi = [bound(b) - float(v) for v, b in zip(values, uppers)]
    return value, value - math.sqrt(sum(x * x for x in lo)), value + math.sqrt(sum(x * x for x in hi))


def total_interval(ms, metric: str, root: Sequence[str], target: Mapping[str, float],
                   level: float = LEVEL) -> tuple[float, float, float]:
    """The predicted total of ``metric`` (the sum of the ``root`` callpaths) at ``target`` and its
    ``level`` interval, from ``ms.predict`` (``perfcast predict``): :func:`combine_roots`."""
    rows = [r for r in ms.predict(dict(target), level) if r["metric"] == metric and r["callpath"] in set(root)]
    return combine_roots([r["value"] for r in rows], [r["lower"] for r in rows], [r["upper"] for r in rows])


def subtree_total(ms, metric: str, paths: Sequence[str], target: Mapping[str, float], level: float = LEVEL,
                  root: str = "") -> dict | None:
    """The whole time under a root of an exclusive metric (CUBE's ``time``: each callpath's own) at
    ``target``: the sum of the predictions of the root and every callpath below it (``paths``),
    with :func:`combine_roots`' interval -- the total ``advise`` takes as the run's -- as a predict
    row (``at, value, lower, upper, level, clipped, confidence, formula``, and the parts' ``notes``;
    a lower bound below 0 clipped, the confidence from the combined interval's width).  None when none of ``paths`` has
    a model."""
    from ..modelset import clip_interval, confidences

    rows = [r for r in ms.predict(dict(target), level) if r["metric"] == metric and r["callpath"] in set(paths)]
    if not rows:
        return None
    v, lo, hi = combine_roots([r["value"] for r in rows], [r["lower"] for r in rows], [r["upper"] for r in rows])
    lo_c, hi_c, clipped = clip_interval(np.array([v]), np.array([lo]), np.array([hi]), True)
    conf = "low" if clipped[0] else str(confidences(np.array([v]), lo_c, hi_c, np.array([False]))[0])
    return {"at": dict(rows[0]["at"]), "value": v, "lower": _finite(lo_c[0]), "upper": _finite(hi_c[0]),
            "level": level, "clipped": bool(clipped[0]), "confidence": conf,
            "formula": f"the sum of the {len(rows)} exclusive models under {root or 'the root'}",
            "notes": [n for r in rows for n in r["notes"]]}


def half_width(value: float, lower: float, upper: float) -> float:
    """The interval's half-width relative to the value, ``(upper - lower) / 2 / |value|`` (inf
    without an interval or a value)."""
    w = upper - lower
    return w / 2 / abs(value) if value and math.isfinite(w) else math.inf


class _RootInterval:
    """:func:`total_interval` now, and after planned runs: each root model with the covariance of
    its coefficients updated by the runs (the rank-one update of the ranking) and its measured
    points joined by theirs (:func:`perfcast.fit.model.reach_after`), through the interval rule of
    ``perfcast predict`` (:func:`perfcast.fit.model.predict_many`, :func:`perfcast.modelset.clip_interval`).  Its
    degrees of freedom and drift are left as fitted.  Roots the advisor does not model (not a
    single fitted function, or below MIN_SHARE) keep their interval."""

    def __init__(self, ms, metric: str, root: Sequence[str], target: Mapping[str, float], per: list,
                 cand: np.ndarray):
        self.target, self.cand = dict(target), cand
        self.averaged = bool(getattr(ms, "averaged", False))
        self.nonneg = ms.nonnegative(metric)
        rows = {r["callpath"]: r for r in ms.predict(dict(target), LEVEL) if r["metric"] == metric
                and r["callpath"] in set(root)}
        self.value, self.lower, self.upper = combine_roots([r["value"] for r in rows.values()],
                                                           [r["lower"] for r in rows.values()],
                                                           [r["upper"] for r in rows.values()])
        self.now = half_width(self.value, self.lower, self.upper)
        mine = {s.callpath: (s, ex) for s, _, ex in per}
        self.fixed = [r for cp, r in rows.items() if cp not in mine or mine[cp][0].model.cov is None]
        self.moved = [mine[cp] for cp in rows if cp in mine and mine[cp][0].model.cov is not None]

    def after(self, runs: Sequence[Sequence[int]]) -> np.ndarray:
        """The relative half-width after each list of candidate indices in ``runs`` is run."""
        from dataclasses import replace

        from ..fit.model import predict_many, reach_after
        from ..modelset import clip_interval
        out = np.full(len(runs), self.now)
        if not self.moved or not runs:
            return out
        vals, los, his = [], [], []
        for s, ex in self.moved:
            m = s.model
            models = []
            for idx in runs:
                cov = s.cov.copy()
                for i in idx:
                    x = ex["D"][i]
                    u = cov @ x
                    den = float(ex["s2"][i] + x @ u)
                    if den > 0:
                        cov = cov - np.outer(u, u) / den
                upper, frontier = m.upper, m.frontier
                if upper is not None and len(idx):
                    # the measured points with the runs': the interval's distance beyond the data
                    upper, frontier = reach_after(upper, frontier, self.cand[list(idx)])
                models.append(replace(m, cov=tuple(map(tuple, cov.tolist())), upper=upper, frontier=frontier))
            cols = {q: np.array([float(self.target[q])]) for q in m.parameters}
            v, lo, hi = predict_many(models, cols, LEVEL, self.averaged)
            lo, hi, _ = clip_interval(v[:, 0], lo[:, 0], hi[:, 0], np.full(len(runs), self.nonneg))
            vals.append(v[:, 0]), los.append(lo), his.append(hi)
        for j in range(len(runs)):
            value, lower, upper = combine_roots([v[j] for v in vals] + [r["value"] for r in self.fixed],
                                                [lo[j] for lo in los] + [r["lower"] for r in self.fixed],
                                                [hi[j] for hi in his] + [r["upper"] for r in self.fixed])
            out[j] = half_width(value, lower, upper)
        return out


# -- the advice -------------------------------------------------------------------------------------
@dataclass
class Choice:
    """One candidate measurement, scored."""

    at: dict
    kind: str                    # "new" or "repeat"
    repetitions: int             # measured repetitions there so far
    run_seconds: float
    processes: float
    cost: float                  # core-hours
    cost_predicted: bool
    parts: dict                  # part -> reduction of the relative variance at the target
    gain: float
    before: float                # relative half-width of the LEVEL interval of the total at the target, now
    after: float                 # ... after this run (its coefficients and reach; the ranking's own variance: sd_*)
    series: str | None = None    # the series gaining most
    part: str | None = None      # its part gaining most
    hypotheses: list = field(default_factory=list)
    reason: str = ""
    sd_before: float = 0.0       # relative sd of the kernels at the target (the ranking's variance), now
    sd_after: float = 0.0        # ... after this run

    @property
    def per_cost(self) -> float:
        return self.gain / self.cost if self.cost > 0 else math.inf

    def to_dict(self, rank: int) -> dict:
        return {"rank": rank, "at": dict(self.at), "kind": self.kind, "repetitions": self.repetitions,
                "cost": self.cost, "run_seconds": self.run_seconds, "processes": self.processes,
                "cost_predicted": self.cost_predicted, "gain": self.gain,
                "gain_per_cost": None if not math.isfinite(self.per_cost) else self.per_cost,
                "parts": dict(self.parts), "uncertainty_before": _finite(self.before),
                "uncertainty_after": _finite(self.after), "sd_before": self.sd_before, "sd_after": self.sd_after,
                "series": self.series, "part": self.part, "hypotheses": list(self.hypotheses),
                "reason": self.reason}


@dataclass
class Advice:
    target: dict
    metric: str
    cost_metric: str
    root: list                   # the callpaths summed for the whole run's value of the metric
    cost_root: list              # ... and of the time metric runs are costed by
    procs: str | None
    uncertainty: float           # relative half-width of the LEVEL interval of the total at the target (predict's)
    parts: dict                  # part -> relative variance at the target
    kernels: list                # per series: callpath, share, value, relative sd per part
    choices: list                # Choice, best gain per cost first
    plan: list = field(default_factory=list)
    budget: float | None = None
    spent: float = 0.0
    notes: list = field(default_factory=list)
    floor: float = 0.0           # relative variance at the target no candidate removes (drift at the nearest reach)
    sd: float = 0.0              # relative sd of the kernels at the target: the variance the candidates are ranked by
    value: float | None = None   # the predicted total at the target and its LEVEL interval (perfcast predict's)
    lower: float | None = None
    upper: float | None = None

    @property
    def worth(self) -> float:
        """The gain a run must exceed to be worth making: :data:`MIN_STEP` of the variance left that
        runs can remove (the variance of :attr:`sd` above :attr:`floor`)."""
        return MIN_STEP * max(self.sd ** 2 - self.floor, 0.0)

    def summary(self) -> dict:
        return {"target": dict(self.target), "metric": self.metric, "cost_metric": self.cost_metric,
                "root": list(self.root), "cost_root": list(self.cost_root), "procs": self.procs,
                "uncertainty": _finite(self.uncertainty), "level": LEVEL, "value": self.value,
                "lower": self.lower, "upper": self.upper, "sd": self.sd,
                "parts": dict(self.parts), "kernels": self.kernels, "budget": self.budget,
                "plan": self.plan, "spent": self.spent, "notes": list(self.notes)}

    def items(self) -> list[dict]:
        return [c.to_dict(i + 1) for i, c in enumerate(self.choices)]


def metrics_needed(exp, metric: str | None) -> list[str]:
    """The metrics to fit for :func:`advise`: ``metric`` and the time metrics (the cost of a run)."""
    if metric is not None and metric not in exp.metrics:
        raise PerfcastError(f"no metric {metric!r}; the experiment has {', '.join(exp.metrics)}", where="--metric")
    times = [name for name, m in exp.metrics.items() if m.kind == "time"]
    if not times:
        raise PerfcastError("no time metric: the cost of a run (time x processes) needs one", where="EXP")
    return ([metric] if metric is not None and metric not in times else []) + times


def _time_metric(ms, metric: str | None) -> str:
    """The time metric runs cost: ``metric`` when it is one, else the first time metric whose value
    is a mean over ranks, else the first time metric."""
    times = [m for m in ms.kinds if ms.kinds[m] == "time" and any(sm.metric == m for sm in ms.series)]
    if metric is not None and ms.kinds.get(metric) == "time":
        return metric
    means = [m for m in times if (ms.aggregates.get(m) or "").startswith("mean over")]
    if means or times:
        return (means or times)[0]
    raise PerfcastError("no time metric: the cost of a run (time x processes) needs one", where="EXP")


def _root(ms, metric: str, stats, exclusive: bool = False) -> list:
    """The callpaths whose sum is the whole run's value of ``metric`` (module docstring);
    ``exclusive``: the metric's values are exclusive (each callpath's own), so they add up."""
    series = [sm for sm in ms.series if sm.metric == metric]
    cps = [sm.callpath for sm in series]
    if metric in ms.inclusive and ms.parents:
        have = set(cps)

        def topmost(cp):
            seen, par = set(), ms.parents.get(cp)
            while par is not None and par not in seen:
                if par in have:
                    return False
                seen.add(par)
                par = ms.parents.get(par)
            return True

        return [cp for cp in cps if topmost(cp)]
    if exclusive:
        return cps
    from .views import whole_run_timer

    d = stats[stats["metric"] == metric]
    wide = d.pivot_table(index=list(ms.parameters), columns="callpath", values="mean", observed=True)
    whole = whole_run_timer(wide[[c for c in wide.columns if c in set(cps)]])
    return [whole] if whole is not None else cps


def ranks_per_run(exp) -> int | None:
    """The processes of every run of ``exp`` without a process-count parameter: the ranks holding
    values in a run (point and repetition; any metric), when every run has the same number; None
    without per-rank values or when runs differ."""
    if "rank" not in exp.data.columns or exp.data.empty:
        return None
    run = [c for c in (*exp.parameters, "rep") if c in exp.data.columns]
    if not run:
        return int(exp.data["rank"].nunique())
    n = exp.data.groupby(run, observed=True)["rank"].nunique().to_numpy()
    return int(n[0]) if len(n) and bool((n == n[0]).all()) else None


#: the largest predicted whole-run value at a target the advisor plans for (its variances are squares
#: of values and their products: 1e100 leaves them inside the range of floats, 1.8e308)
HUGE = 1e100


def advise(ms, exp, req: Request, metric: str | None = None, locations: str = "auto",
           progress: Callable[[int, int, str], None] | None = None) -> Advice:
    """Rank ``req``'s candidates (module docstring).  ``ms``: the ModelSet of the experiment
    ``exp`` (its measured means, the locations reduced as the models were fitted: ``locations``)."""
    from ..fit import series_statistics
    from ..fit.model import Model
    from ..analysis.ranking import is_sum_over_ranks

    stats = series_statistics(exp, locations)
    exclusive = {name for name, m in exp.metrics.items() if m.scope == "exclusive"}

    params = ms.parameters
    cost_metric = _time_metric(ms, metric)
    if metric is None:
        metric = cost_metric
    if not any(sm.metric == metric for sm in ms.series):
        raise PerfcastError(f"no model of metric {metric!r}; the experiment has "
                            f"{', '.join(sorted({sm.metric for sm in ms.series}))}", where="--metric")
    tgt = np.array([req.target[q] for q in params], dtype=float)[None, :]
    new = np.array(req.new, dtype=float).reshape(-1, len(params))
    rep = np.array(req.repeat, dtype=float).reshape(-1, len(params))
    cand = np.vstack([new, rep])
    C = len(cand)
    notes: list = []
    over = getattr(ms, "oversubscribed", None)
    if over is not None:
        # the time models ranking and pricing the runs are fitted on runs whose ranks shared the cores
        # (model/predict say so; advise did not: the jacobi campaign, 2 cores, p = 4 .. 16)
        from .oversubscription import AFFECTED_KINDS

        timed = [m for m in {metric or cost_metric, cost_metric} if ms.kinds.get(m) in AFFECTED_KINDS]
        if timed:
            above = [v for v in sorted({float(c[params.index(over.parameter)]) for c in cand})
                     if v > over.cores] if over.parameter in params else []
            notes.append(f"{over.note()}; the {' and '.join(timed)} models the advice rests on are fitted on them"
                         + (f", and runs advised at {over.parameter} = {', '.join(f'{v:g}' for v in above)} would "
                            f"share the {over.cores} cores too" if above else ""))

    def means_at(m_metric: str, cps: Sequence[str], pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Summed measured means of ``cps`` at ``pts`` (NaN where one is missing) and repetitions."""
        d = stats[(stats["metric"] == m_metric) & stats["callpath"].isin(list(cps))]
        key = {tuple(float(r[q]) for q in params): i for i, r in enumerate(pts_as_dicts(pts))}
        tot = np.zeros(len(pts))
        seen = np.zeros(len(pts), dtype=int)
        reps = np.zeros(len(pts), dtype=int)
        cols = [d[q].to_numpy(float) for q in params]
        for row, (mean, count) in enumerate(zip(d["mean"].to_numpy(float), d["count"].to_numpy(int))):
            i = key.get(tuple(c[row] for c in cols))
            if i is not None:
                tot[i] += mean
                seen[i] += 1
                reps[i] = max(reps[i], count)
        tot[seen < len(cps)] = np.nan
        return tot, reps

    def pts_as_dicts(pts):
        return [{q: float(v) for q, v in zip(params, row)} for row in pts]

    # -- cost: the root of the time metric at every candidate ---------------------------------------
    cost_root = _root(ms, cost_metric, stats, cost_metric in exclusive)
    factor = _TIME_FACTORS.get((ms.units.get(cost_metric) or "").strip().lower())
    if factor is None:
        raise PerfcastError(f"metric {cost_metric!r} has unit {ms.units.get(cost_metric)!r}, not a time unit",
                            where="--metric")
    root_models = [ms[(cp, cost_metric)] for cp in cost_root]
    pred = np.zeros(C)
    for m in root_models:
        pred += np.asarray(m.predict({q: cand[:, k] for k, q in enumerate(params)}), dtype=float).reshape(C)
    meas, reps = means_at(cost_metric, cost_root, cand)
    is_rep = np.arange(C) >= len(new)
    run = np.where(is_rep & np.isfinite(meas), meas, pred)
    floor = float(np.nanmin(meas[is_rep])) if is_rep.any() and np.isfinite(meas[is_rep]).any() else 0.0
    floored = ~is_rep & ~(run >= floor)
    if floored.any():
        notes.append(f"{int(floored.sum())} new point(s) where the run-time model predicts less than the "
                     f"smallest measured run ({floor:.3g}): costed as that run")
        run = np.where(floored, floor, run)
    procs_of = np.ones(C)
    fixed = None if ms.procs is not None and ms.procs in params else ranks_per_run(exp)
    if ms.procs is not None and ms.procs in params:
        procs_of = cand[:, params.index(ms.procs)]
    elif fixed is not None:
        procs_of = np.full(C, float(fixed))
        notes.append(f"no process-count parameter: every measured run had {fixed} process(es) (the ranks "
                     "holding values), and so will the runs advised")
    else:
        notes.append("no process-count parameter: every run counts as one process (cost in run-hours)")
    if (ms.procs in params or fixed is not None) and is_sum_over_ranks(ms.aggregates.get(cost_metric)):
        run = run / procs_of
    seconds = run * factor
    cost = seconds * procs_of / 3600.0
    if req.collector_runs:
        extra = sum(np.asarray(f(seconds), dtype=float) for f in req.collector_runs)
        cost = np.where(is_rep, cost, cost + extra * procs_of / 3600.0)
        notes.append(f"a new point also runs the campaign's {len(req.collector_runs)} other collector(s) once, "
                     f"priced from their measured times next to plain runs")

    # -- the series that matter at the target --------------------------------------------------------
    root = _root(ms, metric, stats, metric in exclusive)
    with np.errstate(over="ignore", invalid="ignore"):   # beyond the range of floats: refused below
        R = sum(float(ms[(cp, metric)].predict(req.target)) for cp in root)
    if not R > 0 or not math.isfinite(R):
        raise PerfcastError(f"the models of {metric!r} predict {R:.3g} for the whole run at {_fmt(req.target)}: "
                            f"nothing to advise on", where="--target")
    if R > HUGE:     # the variances (squares of values) would leave the range of floats
        raise PerfcastError(f"the models of {metric!r} predict {R:.3g} for the whole run at {_fmt(req.target)}, "
                            f"beyond {HUGE:g}: no run plan is computed for such a target", where="--target")
    chosen: list[_Series] = []
    skipped = 0
    S_all = [sm for sm in ms.series if sm.metric == metric]
    for i, sm in enumerate(S_all):
        if progress is not None:
            progress(i, len(S_all), sm.callpath)
        m = sm.model
        if type(m) is not Model or m.status != "ok":
            skipped += 1
            continue
        cols, _ = _cols(m, tgt)
        value = float(_raw(m, cols, 1)[0])
        share = value / R
        if not share >= MIN_SHARE:
            continue
        c = _design(m, cols, 1)[0]
        cov = np.asarray(m.cov, dtype=float) if m.cov is not None else np.zeros((len(c), len(c)))
        cov = np.where(np.isfinite(cov), cov, 0.0)
        noise = float(m.noise) if m.noise and m.noise > 0 else 0.0
        if noise <= 0 and m.quality is not None and m.quality.cv:
            noise = float(m.quality.cv) / 100.0
        noise = max(noise, NOISE_FLOOR)
        w0 = 1.0 - sum(w for w, _ in m.alternatives)
        hyps = [(w0, m)] + [(w, a) for w, a in m.alternatives if w > 0]
        yt = np.array([float(_raw(h, _cols(h, tgt)[0], 1)[0]) for _, h in hyps])
        chosen.append(_Series(sm.callpath, m, value, c, cov, noise, hyps, yt, share))
    if skipped:
        notes.append(f"{skipped} series without a single fitted function (segmented or insufficient) not "
                     f"counted")
    if (len(chosen) > 1 and exp.metrics[metric].scope == "unknown" and len(root) == 1
            and len([sm for sm in ms.series if sm.metric == metric]) > 1):
        # flat timers with a whole-run timer (views.whole_run_timer): their names do not say which
        # nest in which, so the kernels listed may hold one another
        notes.append(f"{metric!r} is a flat timer list whose {root[0]} holds every other timer at every measured "
                     f"point: the run is {root[0]}, not their sum; the kernels listed may nest in one another "
                     f"(their names do not say), so each counts in full beside the timers it holds")
    if exp.metrics[metric].scope == "inclusive" and len(chosen) > 1:
        # an inclusive value holds its callees': a kernel predicted above a caller listed beside it is
        # two models disagreeing at the target, not a share (hpccg-n at n=64: MPI->MPI_Allreduce 42% under
        # MPI 33%, said by nothing)
        val = {s.callpath: s.value for s in chosen}
        above = [(s.callpath, a) for s in chosen for a in (exp.tree.ancestors(s.callpath)
                                                           if s.callpath in exp.tree else ())
                 if a in val and s.value > val[a]]
        if above:
            cp, a = max(above, key=lambda t: val[t[0]] / val[t[1]])
            notes.append(f"at {_fmt(req.target)} {len(above)} kernel(s) are predicted above a caller that holds "
                         f"them, e.g. {cp} {val[cp]:.4g} above {a} {val[a]:.4g} ({metric}, inclusive): their "
                         f"models disagree there, so those shares do not nest")
        # a caller listed beside its callees: each share is of the whole run, so together they count
        # the callees twice (CloverLeaf's MPI 96% beside its routines: 198% in all)
        held: dict = {}
        for s in chosen:
            for a in (exp.tree.ancestors(s.callpath) if s.callpath in exp.tree else ()):
                if a in val:
                    held.setdefault(a, []).append(s.callpath)
        for a, parts in held.items():
            notes.append(f"{a} holds {', '.join(parts)} ({metric}, inclusive): they are listed beside it with "
                         f"each share of the whole run, so the shares add to more than the run's")
    if not chosen:
        raise PerfcastError(f"no series of {metric!r} with a fitted model predicts {MIN_SHARE:.0%} or more of the "
                            f"whole run at {_fmt(req.target)}", where="--metric")
    big = [s for s in chosen if not abs(s.value) <= HUGE]
    if big:      # a kernel's value beyond what the variances (squares) can hold, though the run's is not
        raise PerfcastError(f"{big[0].callpath}: its model predicts {big[0].value:.3g} {metric} at {_fmt(req.target)}, "
                            f"beyond {HUGE:g}: no run plan is computed for such a target", where="--target")
    denom = sum(s.value ** 2 for s in chosen)
    # doublings from the data to the target: from the nearest measured point (the interval's own
    # count, from the largest value of each parameter, on a full grid); a new point at x brings the
    # data to distances(target, x)

    # -- per series: variance now and each candidate's reduction -------------------------------------
    per = []   # (series, gains (3, C), extras for the explanations)
    for s in chosen:
        m = s.model
        cols, n = _cols(m, cand)
        live = _fitted_region(m, cand)
        D = _design(m, cols, n) * live[:, None]      # a run outside the law's points informs nothing
        f = _raw(m, cols, n)
        own, _ = means_at(metric, [s.callpath], cand)
        f = np.where(is_rep & np.isfinite(own), own, f)
        s2 = (s.noise * np.abs(f)) ** 2
        cc = float(s.c @ s.cov @ s.c)
        cd = D @ s.cov @ s.c
        dd = np.maximum(np.einsum("ni,ij,nj->n", D, s.cov, D), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            g_coef = np.where(s2 + dd > 0, cd ** 2 / (s2 + dd), 0.0)
        g_coef = np.minimum(g_coef, cc)
        w = np.array([h[0] for h in s.hyps])
        ybar = float(w @ s.yt)
        v_sel = float(w @ (s.yt - ybar) ** 2)
        if len(s.hyps) > 1 and v_sel > 0:
            yx = np.vstack([_raw(h, _cols(h, cand)[0], n) for _, h in s.hyps])
            sx = np.sqrt(s2 + dd)
            sx = np.maximum(sx, NOISE_FLOOR * np.max(np.abs(yx), axis=0) + 1e-300)
            g_sel = np.where(live, np.clip(_selection_reduction(w, s.yt, yx, sx), 0.0, v_sel), 0.0)
        else:
            yx, g_sel = None, np.zeros(C)
        d_now = float(distances(tgt[0], rep).min())
        d_cand = np.where(is_rep, d_now, np.minimum(distances(tgt[0], cand), d_now))
        v_drift = _drift_var(m, s.value, d_now)
        g_drift = np.array([v_drift - _drift_var(m, s.value, float(d)) for d in d_cand])
        # what no candidate removes: the drift term at the nearest distance any new point reaches
        s.var["floor"] = _drift_var(m, s.value, float(d_cand[~is_rep].min()) if (~is_rep).any() else d_now)
        s.var.update({"coefficients": cc, "hypotheses": v_sel, "extrapolation": v_drift})
        per.append((s, np.vstack([g_coef, g_sel, g_drift]), dict(D=D, s2=s2, f=f, yx=yx, d_now=d_now, d_cand=d_cand,
                                                                   ybar=ybar)))
    if progress is not None:
        progress(len(S_all), len(S_all), "")
    total = {p: sum(s.var[p] for s in chosen) / denom for p in PARTS}
    U0 = sum(total.values())
    floor = min(sum(s.var["floor"] for s in chosen) / denom, U0)
    G = sum(g for _, g, _ in per) / denom            # (3, C)
    gain = G.sum(axis=0)
    ri = _RootInterval(ms, metric, root, req.target, per, cand)
    after = ri.after([[i] for i in range(C)])
    choices = []
    for i in range(C):
        at = {q: float(cand[i, k]) for k, q in enumerate(params)}
        ch = Choice(at, "repeat" if is_rep[i] else "new", int(reps[i]) if is_rep[i] else 0, float(seconds[i]),
                    float(procs_of[i]), float(cost[i]), not bool(is_rep[i]),
                    {p: float(G[k, i]) for k, p in enumerate(PARTS)}, float(gain[i]), ri.now, float(after[i]),
                    sd_before=math.sqrt(max(U0, 0.0)), sd_after=math.sqrt(max(U0 - gain[i], 0.0)))
        _explain(ch, i, per, denom, req, params)
        choices.append(ch)
    order = sorted(range(C), key=lambda i: (-choices[i].per_cost if choices[i].gain > 0 else math.inf,
                                            choices[i].cost, tuple(cand[i])))
    choices = [choices[i] for i in order]
    advice = Advice(dict(req.target), metric, cost_metric, root, cost_root, ms.procs, ri.now, total,
                    [{"callpath": s.callpath, "share": s.share, "value": s.value,
                      "sd": {p: math.sqrt(s.var[p]) / abs(s.value) for p in PARTS}} for s in chosen],
                    choices, budget=req.budget, notes=notes, floor=floor, sd=math.sqrt(max(U0, 0.0)),
                    value=_finite(ri.value), lower=_finite(ri.lower), upper=_finite(ri.upper))
    if req.budget is not None:
        cheapest = min(choices, key=lambda c: c.cost)
        if cheapest.cost > req.budget:
            raise PerfcastError(f"{req.budget:g} core-hours buys no run: the cheapest candidate, "
                                f"{_fmt(cheapest.at)}, costs ~{cheapest.cost:.3g} core-hours", where="--budget")
        advice.plan, advice.spent, idx = _plan(per, cand, cost, is_rep, denom, U0, req.budget, params, floor)
        for st, a in zip(advice.plan, ri.after([idx[:k + 1] for k in range(len(idx))])):
            st["uncertainty_after"] = _finite(float(a))
    return advice


def _doublings(d: float) -> str:
    text = f"{d:.2g}"
    return f"{text} doubling" + ("" if text == "1" else "s")


def core_hours(v: float) -> str:
    """A cost as people write it: 0.35, 7.2, 435, 1,529."""
    return f"{v:,.0f}" if v >= 100 else f"{v:.2g}"


def _explain(ch: Choice, i: int, per: list, denom: float, req: Request, params: tuple) -> None:
    """The one line saying why: the series and part that gain most at candidate ``i``."""
    best, bk, bv = None, 0, -1.0
    for s, g, ex in per:
        for k in range(3):
            if g[k, i] > bv:
                best, bk, bv = (s, ex), k, float(g[k, i])
    where = _fmt(ch.at) + (f" again ({ch.repetitions} run{'s' if ch.repetitions != 1 else ''} so far)"
                           if ch.kind == "repeat" else "")
    cost = f"~{core_hours(ch.cost)} core-h" + ("" if ch.cost_predicted else " (measured)")
    pm = lambda v: f"±{v:.1%}" if math.isfinite(v) else "none"  # noqa: E731
    # the figure the candidates are ranked by (per core-hour) beside predict's interval: the interval counts
    # the distance to the target from each parameter's largest value, so on a grid it can stay the same
    # for runs the ranking tells apart (Relearn p=1024 at n=6000 .. 9000: all ±65.3% -> ±17.8%, while
    # the kernels' sd falls to ±23.8% .. ±9.7%); without the sd the order looked arbitrary
    overall = (f"sd of the kernels ±{ch.sd_before:.1%} -> ±{ch.sd_after:.1%} (ranked by), {LEVEL:.0%} interval "
               f"of the total {pm(ch.before)} -> {pm(ch.after)} at the target")
    if best is None or bv <= 0:
        ch.reason = f"{where}: removes no uncertainty the models know of at the target; {cost}"
        return
    s, ex = best
    ch.series, ch.part = s.callpath, PARTS[bk]
    rel = lambda v: math.sqrt(max(v, 0.0)) / abs(s.value)  # noqa: E731
    if bk == 1:
        w = np.array([h[0] for h in s.hyps])
        a, b = np.argsort(-w, kind="stable")[:2].tolist()
        fa, fb = s.hyps[a][1].formula(), s.hyps[b][1].formula()
        ch.hypotheses = [fa, fb]
        centre_t = abs(s.value)
        centre_x = abs(float(ex["f"][i])) or 1e-300
        dt = abs(s.yt[a] - s.yt[b]) / centre_t
        dx = abs(ex["yx"][a, i] - ex["yx"][b, i]) / centre_x
        noise = math.sqrt(float(ex["s2"][i])) / centre_x
        verb = "separates them" if dx > noise else "narrows them down"
        ch.reason = (f"{where}: the two leading hypotheses for {s.callpath} ({fa} vs {fb}) differ by {dt:.0%} at "
                     f"the target and by {dx:.0%} here (noise ±{noise:.0%}); this point {verb}; {overall}; {cost}")
    elif bk == 0:
        v = s.var["coefficients"]
        ch.reason = (f"{where}: pins down the coefficients of {s.callpath} ({s.model.formula()}): ±{rel(v):.1%} -> "
                     f"±{rel(v - bv):.1%} at the target; {overall}; {cost}")
    else:
        v = s.var["extrapolation"]
        ch.reason = (f"{where}: brings the measurements to {_doublings(ex['d_cand'][i])} of the target (now "
                     f"{_doublings(ex['d_now'])}), so the extrapolation term of {s.callpath} falls from "
                     f"±{rel(v):.1%} to ±{rel(v - bv):.1%}; {overall}; {cost}")


def _plan(per: list, cand: np.ndarray, cost: np.ndarray, is_rep: np.ndarray, denom: float, U0: float,
          budget: float, params: tuple, floor: float = 0.0) -> tuple[list, float, list]:
    """The greedy plan within ``budget`` (module docstring): a list of steps, the cost spent and
    the candidates' indices, in order (a step's ``sd_after``: the relative sd the ranking leaves)."""
    covs = [s.cov.copy() for s, _, _ in per]
    sel_done = [0.0] * len(per)
    dist = [ex["d_now"] for _, _, ex in per]
    left, spent, U = budget, 0.0, U0
    steps: list = []
    idx: list = []
    for _ in range(MAX_PLAN):
        gains = np.zeros(len(cand))
        for k, (s, g, ex) in enumerate(per):
            d, d_after = dist[k], np.minimum(ex["d_cand"], dist[k])
            D, s2, cov = ex["D"], ex["s2"], covs[k]
            cd = D @ cov @ s.c
            dd = np.maximum(np.einsum("ni,ij,nj->n", D, cov, D), 0.0)
            cc = float(s.c @ cov @ s.c)
            with np.errstate(divide="ignore", invalid="ignore"):
                gains += np.minimum(np.where(s2 + dd > 0, cd ** 2 / (s2 + dd), 0.0), max(cc, 0.0))
            gains += np.maximum(g[1] - sel_done[k], 0.0)
            vd = _drift_var(s.model, s.value, d)
            if vd > 0:
                gains += np.array([vd - _drift_var(s.model, s.value, float(x)) for x in d_after])
        gains /= denom
        ok = (cost <= left) & (gains > MIN_STEP * max(U - floor, 0.0))
        if not ok.any():
            break
        i = int(np.argmax(np.where(ok, gains / np.maximum(cost, 1e-300), -np.inf)))
        for k, (s, g, ex) in enumerate(per):
            x = ex["D"][i]
            u = covs[k] @ x
            den = float(ex["s2"][i] + x @ u)
            if den > 0:
                covs[k] = covs[k] - np.outer(u, u) / den
            sel_done[k] = max(sel_done[k], float(g[1][i]))
            dist[k] = min(dist[k], float(ex["d_cand"][i]))
        U = max(U - float(gains[i]), 0.0)
        left -= float(cost[i])
        spent += float(cost[i])
        steps.append({"step": len(steps) + 1, "at": {q: float(cand[i, k]) for k, q in enumerate(params)},
                      "kind": "repeat" if is_rep[i] else "new", "cost": float(cost[i]), "gain": float(gains[i]),
                      "spent": spent, "sd_after": math.sqrt(U)})
        idx.append(i)
    return steps, spent, idx


__all__ = ["advise", "metrics_needed", "request", "progression", "Advice", "Choice", "Request", "MIN_SHARE", "STEPS",
           "LEVEL", "total_interval", "combine_roots", "half_width"]
