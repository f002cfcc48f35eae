"""Line levels: the measured level of a line of points that a multi-parameter prediction lies on.

A PMNF function of several parameters is smooth in each; measured series are not always: Relearn's
microsecond timers step up 10x between p = 64 and p = 128 at every n, "Update local trees" runs 1.5-2x
slower at p = 256 than at p = 128 or 512 at n >= 6000.  A prediction whose coordinates other than
one parameter ``j`` were measured together lies on a *line* of the measurements (the points
sharing those coordinates), and that line's own level is then better information than the function.

The rule (a one-way random-effects model of the log residuals, per series and per parameter):

* ``r = log(mean / fitted)`` at every training point (the selected hypothesis' values; a series
  with a value <= 0 in either is left alone: no relative level);
* the lines along parameter ``j`` are the groups of points equal in every other coordinate
  (>= :data:`MIN_LINES` lines of >= :data:`MIN_POINTS` points; ``G`` lines, ``N`` points);
* the null hypothesis is the function's level on every line: with the within-line mean square
  ``s2`` (``N - G`` degrees of freedom) and ``Q = sum n_g rbar_g^2`` (the lines' squared mean
  residuals), ``F = (Q / G) / s2`` against F(G, N - G); below the ``1 - LEVEL`` quantile
  (:data:`LEVEL` = 0.05) nothing changes; a scatter of ``s2 <= TINY`` (round-off of exact data)
  is no scale to test against: exact data whose lines sit apart (``Q / N > TINY``: each line an
  exact multiple of the function, as miniFE's MPI_Init calls summed over ranks, p, measured at
  p = 1, 2 only) keep each line's level unshrunk, and exact data the function follows keep none;
* otherwise each line's effect is its *median* residual shrunk towards 0 by the best linear
  unbiased predictor's factor ``tau2 / (tau2 + s2 / n_g)``, ``tau2 = (Q - G s2) / N`` the moment
  estimate of the variance of the line levels around the function (``E[Q] = N tau2 + G s2``).  The
  test and the shrinkage are the classical ones (means); the level itself is the median, so one
  point of a line measured with an outlying run (a 10x repetition of a microsecond timer: its mean
  5.5x the others' with two repetitions) does not set the level of every prediction on the line.
  With two points the median is the mean;
* the value of the model at a point on such a line (its coordinates other than ``j`` equal the
  line's; where lines along two parameters cross, at a measured point, the mean of their effects)
  is the function's times ``exp(effect)``, its interval scaled alike (:class:`Model` ``lines``,
  applied by ``Model.predict``, ``Model.interval`` and ``predict_many``, and for series whose
  models are not built by :func:`perfcast.fit.columns.values` from ``GroupFit.lines``, all through
  :func:`line_log_factors`, so every view agrees).  The formula printed stays the PMNF function;
  such a value says so next to it: ``value = formula(point) x line factor`` (the prediction's
  ``line``, :func:`line_at`, and a note, :func:`line_note`; the model's ``lines`` in its JSON).

When a smooth function describes the series, F exceeds its quantile about 5% of the time and the
shrinkage keeps those effects at the noise level: 2,000 generated series ``a p^e n`` (2.5%
noise, 2 repetitions, 5 x 5 points) got lines in 136 cases and their prediction errors at the next
p or n on every measured line moved from 0.096% / 0.244% median / p90 to 0.099% / 0.264%.
Single-parameter models have no lines.  On bench/realdata.py (bench/README.md) this moves only
relearn-n, from 5.1% / 39.3% median / p90 to 3.3% / 34.5% with the lines' mean residuals and to
3.3% / 20.7% with their medians (Extra-P 9.0% / 32.8%).  Generated stepped series with one 10x
repetition at an interior point (2 repetitions, 5 x 5 points, 300 series, seeds 1-3): on the
outlier's line the error at the next n is 31-32% median with the lines' means and 3-4% with their
medians; on 2,000 smooth series ``a p^e n`` (e in 0..2 by halves, no step, no outlier; errors at
the next p and n of every line; seeds 1-3) the median error is unchanged
and p90 moves by +0.003 to +0.011 points (1.06-1.18% -> 1.06-1.19%).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

#: significance level of the F test that the lines of a parameter differ in level
LEVEL = 0.05
#: lines needed along a parameter (a between-line variance needs two) and points per line
MIN_LINES = 2
MIN_POINTS = 2


def line_effects(X: np.ndarray, mean: np.ndarray, fitted: np.ndarray) -> list[tuple]:
    """Line effects of S series measured at the same points ``X`` (n, parameters): ``mean`` and
    ``fitted`` (S, n) the measured means and the model's values there.  Per series a tuple of
    ``(j, other coordinates, log factor)`` (the line along parameter index ``j`` through the other
    coordinates, in the parameters' order without ``j``); empty without effects (module
    docstring)."""
    from .core import TINY
    from .special import f_sf_decided

    X = np.asarray(X, dtype=float)
    mean = np.atleast_2d(np.asarray(mean, dtype=float))
    fitted = np.atleast_2d(np.asarray(fitted, dtype=float))
    S = mean.shape[0]
    out: list[list] = [[] for _ in range(S)]
    if X.ndim != 2 or X.shape[1] < 2 or X.shape[0] == 0 or S == 0:
        return [tuple(o) for o in out]
    with np.errstate(all="ignore"):
        usable = np.all((mean > 0) & (fitted > 0) & np.isfinite(mean) & np.isfinite(fitted), axis=1)
        r = np.where(usable[:, None], np.log(np.where(usable[:, None], mean / fitted, 1.0)), 0.0)
    for j in range(X.shape[1]):
        keys, inv = np.unique(np.delete(X, j, axis=1), axis=0, return_inverse=True)
        inv = np.asarray(inv).ravel()
        sizes = np.bincount(inv, minlength=len(keys))
        g = np.flatnonzero(sizes >= MIN_POINTS)
        if len(g) < MIN_LINES:
            continue
        sel = np.flatnonzero(np.isin(inv, g))
        ind = (inv[sel][:, None] == g[None, :]).astype(float)      # (points used, lines)
        ng = sizes[g].astype(float)
        N, G = float(ng.sum()), len(g)
        if N <= G:
            continue
        rs = r[:, sel]
        means = rs @ ind / ng                                        # (S, lines)
        within = np.sum((rs - means @ ind.T) ** 2, axis=1)
        level = (means ** 2) @ ng                                    # squared levels against the model's
        # the level of each line: its median residual (the test and the shrinkage use the means)
        medians = np.stack([np.median(rs[:, inv[sel] == k], axis=1) for k in g], axis=1)
        s2 = within / (N - G)
        s2 = np.where(s2 > TINY, s2, 0.0)     # round-off of exact data is no scatter to test against
        with np.errstate(all="ignore"):
            F = level / G / s2
            # exact data (no scatter within the lines) whose lines sit apart beyond round-off: each
            # line is an exact multiple of the function, its level known without a test
            exact = (s2 == 0) & (level / N > TINY)
            test = usable & (((s2 > 0) & (f_sf_decided(G, N - G, np.where(s2 > 0, F, 0.0), LEVEL) < LEVEL))
                             | exact)
            tau2 = np.maximum(level - G * s2, 0.0) / N
            eff = tau2[:, None] / (tau2[:, None] + s2[:, None] / ng[None, :]) * medians
        for s_ in np.flatnonzero(test):
            for k, e in zip(g.tolist(), eff[s_].tolist()):
                if e != 0.0 and math.isfinite(e):
                    out[s_].append((j, tuple(float(v) for v in keys[k]), float(e)))
    return [tuple(o) for o in out]


def function_only(model):
    """``model`` without its measured lines' levels: its PMNF function alone.  Whether that function
    passes through the data is what the process-grid and children's-sum rules ask
    (:mod:`perfcast.fit.grid`, :mod:`perfcast.fit.sums`); a line's level passes through its own
    points by construction (exact data whose lines sit apart get one)."""
    import dataclasses

    if getattr(model, "lines", ()) and dataclasses.is_dataclass(model):
        return dataclasses.replace(model, lines=())
    return model


def _on(lines: Sequence[tuple], cols: Sequence[np.ndarray]) -> np.ndarray:
    """(len(lines), points): the point lies on the line (its coordinates other than the line's
    parameter equal the line's)."""
    n = len(np.atleast_1d(cols[0])) if len(cols) else 0
    xs = [np.atleast_1d(np.asarray(c, dtype=float)) for c in cols]
    if n <= 16 and all(len(x) == n for x in xs):
        # a few points (a prediction's, a ranking's three): the coordinates as floats, no array
        # per test
        xs = [x.tolist() for x in xs]
        on = [_on_point(lines, [x[t] for x in xs]) for t in range(n)]
        return np.array(on, dtype=bool).reshape(n, len(lines)).T.copy()
    out = np.ones((len(lines), n), dtype=bool)
    for k, (j, key, _) in enumerate(lines):
        for c, v in zip((c for i, c in enumerate(cols) if i != j), key):
            out[k] &= np.isclose(np.atleast_1d(np.asarray(c, dtype=float)), v, rtol=1e-12, atol=0.0)
    return out


def _on_point(lines: Sequence[tuple], x: Sequence[float]) -> list[bool]:
    """:func:`_on` at one point ``x`` (its coordinates, in the parameters' order), per line: the
    same test (``np.isclose(c, v, rtol=1e-12, atol=0)``) on floats."""
    return [all((abs(c - v) <= 1e-12 * abs(v) and math.isfinite(v)) or c == v
                for c, v in zip((c for i, c in enumerate(x) if i != j), key)) for j, key, _ in lines]


def line_log_factors(lines: Sequence[tuple], cols: Sequence[np.ndarray]) -> np.ndarray:
    """Log factors at points ``cols`` (one array per parameter, in the parameters' order) of a
    model with ``lines`` (:func:`line_effects`): a point whose coordinates other than ``j`` are a
    line along ``j`` takes that line's effect (the mean of them on a measured point where lines
    along two parameters cross); 0 elsewhere.  The one rule every value of a model applies."""
    on = _on(lines, cols)
    e = np.array([x for _, _, x in lines], dtype=float)
    total = e @ on if len(lines) else np.zeros(on.shape[1])
    hits = on.sum(axis=0)
    return np.divide(total, hits, out=np.zeros(on.shape[1]), where=hits > 0)


def line_dicts(lines: Sequence[tuple], parameters: Sequence[str]) -> list[dict]:
    """The JSON form of ``lines`` (``Model.to_dict``'s ``lines``, a prediction's ``line``):
    ``{"along": parameter, "at": {other parameter: value}, "factor": exp(effect)}``."""
    params = list(parameters)
    return [{"along": params[j], "at": dict(zip([q for q in params if q != params[j]], key)),
             "factor": math.exp(e)} for j, key, e in lines]


def lines_from_dicts(items, parameters: Sequence[str]) -> tuple:
    """:func:`line_dicts` back to ``(j, other coordinates, log factor)``."""
    params = list(parameters)
    out = []
    for it in items:
        j = params.index(it["along"])
        key = tuple(float(it["at"][q]) for q in params if q != it["along"])
        f = float(it["factor"])
        if not (f > 0 and math.isfinite(f)):
            raise ValueError(f"line factor {f!r} is not a positive number")
        out.append((j, key, math.log(f)))
    return tuple(out)


def line_at(lines: Sequence[tuple], parameters: Sequence[str], point) -> dict | None:
    """What a prediction at ``point`` ({parameter: value}) says of the lines it lies on: ``{"factor":
    the factor on the formula's value, "lines": their :func:`line_dicts`}``; None on no line."""
    if not lines:
        return None
    on = _on_point(lines, [float(point[p]) for p in parameters])
    hit = [ln for ln, o in zip(lines, on) if o]
    if not hit:
        return None
    return {"factor": math.exp(sum(e for _, _, e in hit) / len(hit)), "lines": line_dicts(hit, parameters)}


def line_note(line: dict) -> str:
    """The note of a prediction on measured lines (:func:`line_at`): ``x1.55: measured line p=256
    (n varies)``."""
    where = " and ".join(",".join(f"{q}={v:g}" for q, v in d["at"].items()) + f" ({d['along']} varies)"
                         for d in line["lines"])
    return (f"x{line['factor']:.3g}: measured line {where}: the value is the formula's times the "
            "line's measured level, which the formula does not follow")
