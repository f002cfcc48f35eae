"""Scaling rules shared by every analysis: the log-log slope of a series and how an exponent is printed.

A log-log slope is the exponent ``b`` of the power law ``y ~ x^b`` that fits the points best in the
least-squares sense on log scales.  It is computed centred (``x`` about its mean, ``y`` about its
first value), so that an exactly constant series gives exactly 0 on every BLAS and numpy build: an
uncentred ``np.polyfit`` returns round-off such as ``-6e-16`` there, whose sign then shows up in
printed text as ``p^-0.00``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["loglog_slope", "format_exponent"]


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


def format_exponent(e: float, digits: int = 2) -> str:
    """``e`` with ``digits`` decimals, never ``-0.00``: a value that rounds to zero prints unsigned."""
    r = round(float(e), digits)
    return f"{r + 0.0:.{digits}f}"   # + 0.0 turns -0.0 into 0.0
