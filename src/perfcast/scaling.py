"""Scaling rules shared by every analysis: the log-log slope of a series and how an exponent is printed.

A log-log slope is the exponent ``b`` of the power law ``y ~ x^b`` that fits the points best in the
least-squares sense on log scales.  It is computed centred (``x`` about its mean, ``y`` about its
first value), so that an exactly constant series gives exactly 0 on every BLAS and numpy build: an
uncentred ``np.polyfit`` returns round-off such as ``-6e-16`` there, whose sign then shows up in
printed text as ``p^-0.00``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["loglog_slope", "loglog_slopes", "decreasing", "DECREASING_SLOPE", "format_exponent", "scaling_mode",
           "MIN_STRONG_EFFICIENCY", "PROC_NAMES"]

#: parameter names that count processes (lower case): the process parameter of an experiment when
#: exactly one parameter has one (perfcast.analysis.scaling_loss, perfcast.modelset)
PROC_NAMES = ("p", "procs", "processes", "ranks", "np", "nprocs", "jobsize", "mpi.world.size", "cores", "nodes")

#: a series whose log-log slope along some parameter is below this falls with it (the tolerance
#: kernels use for "flat", analysis/kernels.py)
DECREASING_SLOPE = -0.1


def loglog_slope(x, y) -> float:
    """Least-squares slope of ``log y`` against ``log x`` over the points where both are finite and
    positive; ``nan`` when fewer than two distinct ``x`` remain.  Exactly ``0.0`` for a constant
    ``y`` (and exactly ``1.0`` for ``y`` proportional to ``x`` up to the rounding of the logs)."""
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length ({x.size} and {y.size})")
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    x, y = x[ok], y[ok]
    if np.unique(x).size < 2:
        return float("nan")
    lx = np.log(x)
    lx = lx - lx.mean()
    ly = np.log(y)
    ly = ly - ly[0]          # exact zeros for a constant series (a mean would round)
    if not ly.any():
        return 0.0
    return float(np.dot(lx, ly) / np.dot(lx, lx))


def loglog_slopes(x, Y) -> np.ndarray:
    """:func:`loglog_slope` of every row of ``Y`` (S, n) against ``x`` (n,) at once; ``nan`` for
    rows with a value that is not finite and positive (and for all rows when ``x`` has fewer
    than two distinct positive values)."""
    x = np.asarray(x, dtype=float).ravel()
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    out = np.full(Y.shape[0], np.nan)
    if not np.all(np.isfinite(x) & (x > 0)) or np.unique(x).size < 2:
        return out
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = np.all(np.isfinite(Y) & (Y > 0), axis=1)
        lx = np.log(x)
        lx = lx - lx.mean()
        ly = np.log(np.where(ok[:, None], Y, 1.0))
        ly = ly - ly[:, :1]
    out[ok] = (ly[ok] @ lx) / np.dot(lx, lx)
    return out


def row_nanmedian(a: np.ndarray) -> np.ndarray:
    """``np.nanmedian(a, axis=1)`` of a 2-d array with a number in every row, the same floats
    (the middle value, or the mean of the two middle values, of each row's numbers) from one sort
    of the rows: numpy's nanmedian of a narrow array goes through masked arrays (30k rows of one
    column: ~25 ms, this ~1 ms)."""
    a = np.asarray(a, dtype=float)
    if a.shape[1] == 1:
        return a[:, 0].copy()
    s = np.sort(a, axis=1)                      # NaN last
    c = a.shape[1] - np.isnan(a).sum(axis=1)
    r = np.arange(len(a))
    lo, hi = s[r, (c - 1) // 2], s[r, c // 2]
    return np.where(c % 2 == 1, lo, (lo + hi) / 2)


def decreasing(X, Y, lines) -> np.ndarray:
    """(S,) rows of ``Y`` (S, n; values at the points ``X`` (n, m)) that fall along some parameter:
    the median over that parameter's lines (``lines[p]``: index arrays of points with the other
    parameters fixed) of the log-log slope is below :data:`DECREASING_SLOPE`, over the whole lines
    and again without each line's smallest value (a fall that is only a first point's start-up
    cost is not a trend)."""
    X = np.asarray(X, dtype=float)
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    dec = np.zeros(Y.shape[0], dtype=bool)
    for p, idxs in enumerate(lines):
        if not len(idxs):
            continue
        falls = np.ones(Y.shape[0], dtype=bool)
        for drop_first in (False, True):
            sl = []
            for idx in idxs:
                idx = np.asarray(idx)[np.argsort(X[idx, p])][int(drop_first):]
                sl.append(loglog_slopes(X[idx, p], Y[:, idx]))
            sl = np.column_stack(sl)
            with np.errstate(invalid="ignore"):
                med = row_nanmedian(np.where(np.isnan(sl).all(axis=1, keepdims=True), 0.0, sl))
            falls &= med < DECREASING_SLOPE
        dec |= falls
    return dec


def format_exponent(e: float, digits: int = 2) -> str:
    """``e`` with ``digits`` decimals, never ``-0.00``: a value that rounds to zero prints unsigned."""
    r = round(float(e), digits)
    return f"{r + 0.0:.{digits}f}"   # + 0.0 turns -0.0 into 0.0


#: a strong-scaling reading of runs whose cost per rank does not fall is still plausible while the
#: parallel efficiency it implies (smallest-run cost x ranks over the larger run's) is at least this
MIN_STRONG_EFFICIENCY = 0.5


def scaling_mode(slope: float, span: float, work: bool) -> tuple[str, str]:
    """The one rule telling strong from weak scaling: ``(strong | weak | undetermined, why)`` from
    ``slope``, the log-log slope of the application's total work (cost per rank x ranks) against the
    process count over a ``span`` (largest / smallest process count); ``work``: the cost counts work
    done (instructions), not time (which includes waiting).

    * the cost per rank falls (per-rank slope ``slope - 1`` at most :data:`DECREASING_SLOPE`):
      **strong** -- weak scaling keeps the same work on every rank, and communication only adds;
    * it does not fall, measured in instructions: **weak** (the same work per rank);
    * it does not fall, measured in time: **weak** unless strong scaling with a parallel efficiency
      of at least :data:`MIN_STRONG_EFFICIENCY` explains it as well (the total over the span grew
      at most 1 / that: over one doubling, p = 1 to 2 where the first messages appear), then
      **undetermined**: the runs cannot tell; ``--scaling`` says."""
    if slope - 1.0 <= DECREASING_SLOPE:
        return "strong", "the cost per rank falls as the process count grows: the work is divided"
    if work:
        return "weak", "the cost per rank does not fall: the same work per rank"
    if span > 1 and slope * np.log(span) <= -np.log(MIN_STRONG_EFFICIENCY) + 1e-12:
        return "undetermined", (f"the time per rank does not fall, which weak scaling and strong scaling at "
                                f"{MIN_STRONG_EFFICIENCY:.0%} or more parallel efficiency both explain over "
                                f"{span:g}x the processes")
    return "weak", "the cost per rank does not fall: the same work per rank"
