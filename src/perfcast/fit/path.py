"""Measured paths: designs in which the parameters were varied together.

A multi-parameter experiment measured only at points like (4, 10), (8, 20), (16, 30), (32, 40),
(64, 50) has no line of points along any parameter with the others held fixed: the data cannot
separate the parameters' effects.  Each parameter is strictly monotone along the points, though,
so each gives a usable one-parameter series.  The rule:

* :func:`measured_path`: the points form a path when at least two parameters vary and, sorted by
  the first varying one, every varying parameter is strictly monotone (the fit uses it only when
  no parameter has a line of >= 3 points, :func:`perfcast.fit.core.fit_group`);
* the fit is the best one-parameter law in any of the varying parameters, chosen by the search's
  own criterion over the laws in each (the laws in the other parameters stay as the model's
  competing hypotheses, so their disagreement widens intervals); two points give the two-point
  law in the first varying parameter;
* a prediction at a point where the varying parameters are not in the path's relation is *off
  the path* (:func:`equivalents`): where the path is continued in the coordinates in which it is
  straightest (each parameter against the first, linear or logarithmic, :func:`_scales`), the
  point's coordinates name different positions on it.  Its interval is widened to hold the
  model's intervals at each of those positions (the value if only that parameter mattered),
  its confidence is low and a note says why (:meth:`perfcast.modelset.ModelSet.predict`).
"""

from __future__ import annotations

import math

import numpy as np

#: a point whose coordinates name positions on the path farther apart than this (relative, in
#: the first varying parameter) is off the path
OFF_PATH = 0.05


def measured_path(X: np.ndarray) -> np.ndarray | None:
    """The distinct points of ``X`` (n, m) sorted along the path, or None when they are no path
    (module docstring)."""
    X = np.unique(np.asarray(X, dtype=float), axis=0)
    if X.ndim != 2 or len(X) < 2 or not np.all(np.isfinite(X)):
        return None
    varying = varying_parameters(X)
    if len(varying) < 2:
        return None
    P = X[np.argsort(X[:, varying[0]], kind="stable")]
    for p in varying:
        d = np.diff(P[:, p])
        if not (np.all(d > 0) or np.all(d < 0)):
            return None
    return P


def varying_parameters(X: np.ndarray) -> list[int]:
    return [p for p in range(X.shape[1]) if len(np.unique(X[:, p])) > 1]


def note(parameters, varying, n: int) -> str:
    """The models' note on a path of ``n`` points in the parameters ``varying`` (indices)."""
    names = ", ".join(str(parameters[p]) for p in varying)
    return (f"parameters {names} were varied together along one path of {n} points: their effects cannot "
            f"be separated; the model is the best law in one of them along the path, and a value off the "
            f"path (the parameters not in the path's relation) has a wide interval and low confidence")


def _scales(path: np.ndarray, ref: int, q: int) -> tuple[bool, bool]:
    """(log of ``ref``, log of ``q``): the coordinates in which ``q`` against ``ref`` along the path
    is closest to a straight line (least squares, residual relative to the spread of ``q``);
    log-log first on ties (two points)."""
    best, out = math.inf, (True, True)
    for lr, lq in ((True, True), (True, False), (False, True), (False, False)):
        u, v = path[:, ref], path[:, q]
        if (lr and np.any(u <= 0)) or (lq and np.any(v <= 0)):
            continue
        u, v = (np.log(u) if lr else u), (np.log(v) if lq else v)
        A = np.stack([np.ones_like(u), u], axis=1)
        r = v - A @ np.linalg.lstsq(A, v, rcond=None)[0]
        spread = float(np.ptp(v)) or 1.0
        err = float(np.sqrt(np.mean(r ** 2))) / spread
        if err < best - 1e-9:
            best, out = err, (lr, lq)
    return out


def _map(u: np.ndarray, v: np.ndarray, x: float) -> float:
    """``v`` at ``x`` on the piecewise-linear curve through (u, v) (u increasing), continued by its
    end segments."""
    if len(u) == 1:
        return float(v[0])
    k = int(np.clip(np.searchsorted(u, x) - 1, 0, len(u) - 2))
    return float(v[k] + (v[k + 1] - v[k]) * (x - u[k]) / (u[k + 1] - u[k]))


def position(path: np.ndarray, q: int, value: float) -> np.ndarray | None:
    """The point of the path (continued) where parameter ``q`` has ``value``; None where that is
    not defined (a logarithmic coordinate at a value <= 0)."""
    varying = varying_parameters(path)
    ref = varying[0]
    lr_q, lq = _scales(path, ref, q) if q != ref else (True, True)
    if q != ref:
        if lq and value <= 0:
            return None
        v = np.log(path[:, q]) if lq else path[:, q]
        u = np.log(path[:, ref]) if lr_q else path[:, ref]
        o = np.argsort(v)
        r = _map(v[o], u[o], math.log(value) if lq else value)
        r = math.exp(r) if lr_q else r
    else:
        r = value
    out = path[0].copy()
    out[ref] = r
    for c in varying:
        if c == ref:
            continue
        lr, lc = _scales(path, ref, c)
        if lr and r <= 0:
            return None
        u = np.log(path[:, ref]) if lr else path[:, ref]
        w = np.log(path[:, c]) if lc else path[:, c]
        y = _map(u, w, math.log(r) if lr else r)
        out[c] = math.exp(y) if lc else y
    return out


def equivalents(path: np.ndarray, point) -> list[np.ndarray]:
    """For a ``point`` (coordinates in the parameters' order) off the path, the positions on the
    path its varying coordinates name (one per varying parameter, other parameters at the
    point's values); empty when the point is on the path (they agree within :data:`OFF_PATH`) or
    a position is not defined."""
    point = np.asarray(point, dtype=float)
    varying = varying_parameters(path)
    ref = varying[0]
    out = []
    for q in varying:
        e = position(path, q, float(point[q]))
        if e is None:
            return []
        fixed = [c for c in range(len(point)) if c not in varying]
        e[fixed] = point[fixed]
        out.append(e)
    r = np.array([e[ref] for e in out])
    if np.all(r > 0):
        spread = float(np.max(np.abs(np.log(r / point[ref])))) if point[ref] > 0 else math.inf
        off = spread > math.log1p(OFF_PATH)
    else:
        off = float(np.max(np.abs(r - point[ref]))) > OFF_PATH * max(abs(point[ref]), 1e-300)
    return out if off else []
