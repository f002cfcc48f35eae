"""Building blocks of the performance model normal form (PMNF).

A *factor* is ``p^i * log2(p)^j`` of one parameter ``p`` with a rational exponent ``i`` and an
integer log exponent ``j``; a *term* is a coefficient times a product of factors of distinct
parameters; a model is a constant plus terms.

Negative exponents (strong scaling) mirror the growing blocks: ``(i, j) -> (-i, -j)``, e.g.
``p^(-1) * log2(p)^(-1)``, as Extra-P's negative-exponent search does (its 19 ``p^-i`` and 23
``p^-i log2(p)^-j`` blocks are exactly the mirrors of its 42 default ones); ``(-i, j)`` is
searched as well (:func:`with_negative`).  A negative log exponent
has a pole at ``p = 1`` (``log2(1) = 0``) and changes sign below it, so such a factor is *undefined*
(NaN) for ``p <= 1``: the search drops a block that is undefined at a measured point (a strong-
scaling series measured at p = 1 is fitted without the ``log2(p)^-j`` blocks; Extra-P drops every
log block then), and a model using one evaluates to NaN there rather than to an arbitrary number.

Exponents are :class:`fractions.Fraction` so formulas print exactly (``p^(3/2)``) and compare
exactly (lead-order terms, expectations).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Iterable, Sequence

import numpy as np

from ..errors import PerfcastError

#: The exponents of the notes (methods.md §2) plus 4/5, which Extra-P also uses.
DEFAULT_EXPONENTS: tuple[Fraction, ...] = tuple(Fraction(s) for s in (
    "0", "1/4", "1/3", "1/2", "2/3", "3/4", "4/5", "1", "5/4", "4/3", "3/2", "5/3", "7/4", "2",
    "9/4", "7/3", "5/2", "8/3", "11/4", "3"))
DEFAULT_LOG_EXPONENTS: tuple[int, ...] = (0, 1, 2)

#: The default hypothesis space: 42 blocks -- every exponent above with log^0, and the smaller /
#: commoner ones with log^1 and log^2 (the same building blocks Extra-P uses by default).  On
#: synthetic truths from this set, the full 20 x 3 grid (59 blocks) identified the lead term
#: 5-7 points less often (bench/README.md), so the grid is opt-in (``FitOptions(space=None)``).
DEFAULT_SPACE: tuple[tuple[Fraction, int], ...] = tuple(sorted(
    [(e, 0) for e in DEFAULT_EXPONENTS if e != 0]
    + [(Fraction(s), 1) for s in ("0", "1/4", "1/3", "1/2", "2/3", "3/4", "1", "5/4", "4/3", "3/2", "2", "5/2", "3")]
    + [(Fraction(s), 2) for s in ("0", "1/4", "1/3", "1/2", "2/3", "3/4", "1", "3/2", "2", "5/2")]))

#: A single-parameter factor: (exponent, log exponent).
Block = tuple[Fraction, int]


def parse_fraction(text: str | float | int | Fraction, what: str = "exponent") -> Fraction:
    """``"3/2"``, ``"1.5"``, ``1.5`` -> Fraction(3, 2) (floats are limited to denominators <= 12)."""
    if isinstance(text, Fraction):
        return text
    try:
        if isinstance(text, float):
            return Fraction(text).limit_denominator(12)
        return Fraction(str(text).strip())
    except (ValueError, ZeroDivisionError):
        raise PerfcastError(f"not a number or fraction: {text!r}", where=what) from None


def fraction_str(f: Fraction) -> str:
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


def make_blocks(exponents: Iterable = DEFAULT_EXPONENTS, log_exponents: Iterable[int] = DEFAULT_LOG_EXPONENTS,
                negative: bool = False) -> tuple[Block, ...]:
    """All (i, j) pairs except the constant (0, 0), sorted by growth order; ``negative`` adds the
    mirror ``(-i, -j)`` of each (:func:`with_negative`)."""
    ex = sorted({parse_fraction(e) for e in exponents})
    try:
        logs = sorted({int(j) for j in log_exponents})
    except (TypeError, ValueError):
        raise PerfcastError(f"log exponents must be whole numbers: {tuple(log_exponents)!r}",
                            where="log_exponents") from None
    blocks = [(i, j) for i in ex for j in logs if (i, j) != (0, 0)]
    if not blocks:
        raise PerfcastError("the hypothesis space is empty (no exponent other than the constant)",
                            where="exponents")
    return with_negative(blocks) if negative else tuple(sorted(set(blocks)))


def with_negative(blocks: Iterable[Block]) -> tuple[Block, ...]:
    """``blocks`` plus, for every block that grows (``i > 0``, or ``i == 0`` and ``j > 0``), its
    decaying mirror ``(-i, -j)`` (Extra-P's negative blocks) and, for ``i > 0``, ``(-i, j)``,
    sorted: ``p^(1/2) * log2(p)`` adds ``p^(-1/2) * log2(p)^(-1)`` and ``p^(-1/2) * log2(p)``.
    The ``(-i, j)`` blocks were perfcast's whole negative space before the mirrors; they are
    kept because they describe falling-then-flattening series the mirrors do not (Extra-P's
    strong_scaling/one_parameter_1.txt: SMAPE 2.2% with ``p^(-1/4) * log2(p)^2``, 26% without),
    and the mirrors still recover Extra-P's 96 negative-exponent test functions
    (tests/test_fit_peer_functions.py)."""
    blocks = set(blocks)
    grow = [(i, j) for i, j in blocks if i > 0 or (i == 0 and j > 0)]
    blocks |= {(-i, -j) for i, j in grow} | {(-i, j) for i, j in grow if i > 0}
    return tuple(sorted(blocks))


def factor_values(x: np.ndarray, i: Fraction, j: int) -> np.ndarray:
    """``x^i * log2(x)^j`` where defined, NaN elsewhere: x < 0; x = 0 unless the factor is ``x^i``
    with i > 0 (then 0); x <= 1 when ``j < 0`` (the pole of ``log2(x)^j`` at 1)."""
    x = np.asarray(x, dtype=float)
    out = np.full(x.shape, np.nan)
    pos = x > 1 if j < 0 else x > 0
    xp = x[pos]
    v = np.power(xp, float(i)) if i != 0 else np.ones_like(xp)
    if j:
        v = v * np.log2(xp) ** j
    out[pos] = v
    if i > 0 and j == 0:  # 0^i = 0; log2(0) stays undefined
        out[x == 0] = 0.0
    return out


def factor_range(x_lo: float, i: Fraction, j: int) -> tuple[float, float, bool]:
    """(inf, sup, turns) of ``x^i * log2(x)^j`` over ``x >= x_lo``: sup may be inf; NaN, NaN where
    the factor is undefined at ``x_lo``.  Besides ``x_lo`` and the limit as x grows, the
    candidates are the factor's turning points beyond ``x_lo``: ``x = 1`` (``log2(x) = 0``) and
    ``log2(x) = -j / (i ln 2)``, where a rising log outruns a decaying power (``x^(-1/4)
    log2(x)^2`` peaks at x = 2980) or a growing power a decaying log (``x^(1/4) / log2(x)^2``
    has its trough there).  ``turns``: the inf or sup is at such a point (neither at ``x_lo`` nor
    in the limit), so the factor's values at the points and its limit do not bound it."""
    start = float(factor_values(np.array([x_lo]), i, j)[0])
    if not np.isfinite(start):
        return float("nan"), float("nan"), False
    if i > 0 or (i == 0 and j > 0):
        limit = float("inf")
    else:
        limit = 1.0 if i == 0 and j == 0 else 0.0
    turning = []
    if j and x_lo < 1:
        turning.append(0.0)
    if i != 0 and j != 0:
        L = -j / (float(i) * np.log(2.0))      # log2 of the turning point
        if x_lo <= 0 or L > np.log2(x_lo):
            turning.append(float(np.exp2(float(i) * L) * L ** j))
    lo, hi = min(start, limit, *turning), max(start, limit, *turning)
    return lo, hi, lo < min(start, limit) or hi > max(start, limit)


def block_values(blocks: Sequence[Block], x: np.ndarray) -> np.ndarray:
    """Matrix [len(x), len(blocks)] of x^i * log2(x)^j (NaN where undefined, :func:`factor_values`)."""
    x = np.asarray(x, dtype=float)
    out = np.full((len(x), len(blocks)), np.nan)
    for c, (i, j) in enumerate(blocks):
        out[:, c] = factor_values(x, i, j)
    return out


def block_str(param: str, block: Block, style: str = "plain") -> str:
    i, j = block
    parts = []
    if i != 0:
        fs = fraction_str(i)
        if style == "python":
            parts.append(f"{param}**({fs})" if i.denominator != 1 or i < 0 else (f"{param}**{fs}" if i != 1 else param))
        elif style == "latex":
            parts.append(f"{param}^{{{fs}}}" if i != 1 else param)
        else:
            parts.append(f"{param}^({fs})" if i.denominator != 1 or i < 0 else (f"{param}^{fs}" if i != 1 else param))
    if j:
        if style == "python":
            parts.append(f"log2({param})" + ((f"**({j})" if j < 0 else f"**{j}") if j != 1 else ""))
        elif style == "latex":
            parts.append(f"\\log_2^{{{j}}}{{{param}}}" if j != 1 else f"\\log_2{{{param}}}")
        else:
            parts.append(f"log2({param})" + ((f"^({j})" if j < 0 else f"^{j}") if j != 1 else ""))
    sep = " \\cdot " if style == "latex" else " * "
    return sep.join(parts) if parts else "1"


def order_key(block: Block) -> tuple[Fraction, int]:
    """Asymptotic growth order of a block (lexicographic: polynomial exponent, then log exponent)."""
    return (block[0], block[1])
