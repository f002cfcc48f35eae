"""Batched hypothesis search: fit every series measured on one point set at once.

Statistical model.  One observation is ``y = f(x) * (1 + e)`` with relative noise ``e`` of
variance ``s2`` (performance noise is multiplicative).  A series is summarised per point by the
mean, the repetition count ``r`` and the within-point sum of squared deviations.  Coefficients
come from weighted least squares on the means with weights ``r / f^2`` (``f`` = the observed mean,
floored at 1e-3 of the series' largest value, dips lifted: :func:`noise_scale`), i.e. least
squares in relative terms using every repetition (the constant hypothesis's value is the mean of
all repetitions, its own weights: :func:`_constant_level`); where a series' repetitions show an absolute
part of the noise, ``f^2`` becomes ``a^2 + b^2 mean^2`` up to a constant (:func:`absolute_noise`);
exact series (no measurement noise: :func:`exact_series`) take :func:`exact_scale`, and so do
series whose best hypothesis misses them far beyond their repetitions' noise (:func:`_model_error`).
The same ``f`` scales the pure-error sum, and it does not depend on the hypothesis, so the
criterion below stays a profile likelihood.  For a hypothesis ``h`` the cross-validated deviance of the individual observations is

    SS_pe + PRESS_w(h)       (pure-error sum of squares + weighted leave-one-point-out residuals,
                              the latter in closed form from the hat matrix)

and the selection criterion is ``N log(deviance / N) + 2 log |class(h)|`` -- a profile
log-likelihood of the N observations under leave-one-point-out prediction, plus the log of the
number of hypotheses of the same shape (a uniform prior over shapes, then over hypotheses of a
shape; this is what stops a 3-coefficient model with 1,700 candidate pairs from winning by search
alone).  ``selection="bic"`` uses in-sample RSS with ``k log N`` instead.

Multi-parameter search (no cartesian explosion): per parameter, every line of points (the other
coordinates fixed, >= 3 distinct values) scores the single-parameter hypotheses with a free
constant and slope per line (valid for additive and multiplicative combinations and for sparse
point sets); the best ``shortlist`` blocks per parameter are then combined into sums and
products of monomials (a*b, a+b, a*b+a, a*b+b, a+b+a*b, ...; with three or more parameters also
disjoint sums such as a+b+c and a*b+c+d, :func:`_forms`) and refitted on all points.

Everything is vectorised over series (chunks of ``FitOptions.chunk``); models are built lazily.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Sequence
from collections.abc import Sequence as _Seq  # noqa: F401

import numpy as np

from ..errors import PerfcastError
from .model import Model, Quality, Term, measured_frontier
from .shape import NORMAL, NoiseShape, estimate_shape, fast_wls, gn_efficiency, lbeta_fit
from .special import chi2_sf_below, f_sf_decided
from .path import measured_path, note as path_note, varying_parameters
from .terms import (DEFAULT_EXPONENTS, DEFAULT_LOG_EXPONENTS, DEFAULT_SPACE, Block, block_values, factor_range,
                    make_blocks, parse_fraction, with_negative)

#: FitOptions.nonnegative value: reject only fits that become negative as the parameters grow
ASYMPTOTIC = "asymptotic"
#: FitOptions.nonnegative value: the asymptotic rule for the terms, and a constant that comes out
#: negative refitted through the origin (the strict rule's treatment of the constant): the rule of
#: series that fall with a parameter (perfcast.fit.series)
CLAMPED = "clamped"
#: FitOptions.nonnegative default: ASYMPTOTIC for quantities that cannot be negative, else none
AUTO = "auto"
#: metric kinds (perfcast.experiment.KINDS) whose values cannot be negative
NONNEGATIVE_KINDS = ("time", "count", "bytes")
TINY = 1e-12          # relative variance floor (relative precision 1e-6)
FLOOR = 1e-3          # weights: |mean| floored at FLOOR * max |mean| of the series ...
#: ... and a mean below this share of what its neighbours say is a dip, weighted as that
#: reference (noise_scale; chosen on real data with the synthetic sets, bench/README.md "Weights")
DIP = 0.5
MIN_WEIGHT = 0.02     # alternatives lighter than this are dropped
SCREEN = 10.0         # adaptive likelihood: re-rank hypotheses within this criterion distance of the best
_ROW_BLOCK = 4096     # rows converted to Python lists at once when models are built
DRIFT_SHORTLIST = 3   # per-parameter candidates in the leave-largest-out rerun (multi-parameter)
GROWTH = (2.0, 4.0)   # bounds of the drift's growth exponent (standard deviation ~ doublings^growth)
GROWTH_SAMPLE = 500   # series of a group used to estimate the growth exponent (single-parameter groups)


@dataclass(frozen=True)
class FitOptions:
    """Options of the hypothesis search."""

    exponents: tuple = DEFAULT_EXPONENTS
    log_exponents: tuple = DEFAULT_LOG_EXPONENTS
    #: (exponent, log exponent) building blocks; None = the grid exponents x log_exponents
    space: tuple | None = DEFAULT_SPACE
    #: add negative exponents (strong scaling: time per rank falling with p): the mirror
    #: ``p^-i * log2(p)^-j`` of every growing block (:func:`perfcast.fit.terms.with_negative`)
    negative: bool = False
    #: terms of a single-parameter model (1 or 2); not used by multi-parameter searches, whose models
    #: have <= 2 monomials (a*b, a+b, a*b+a, ...) or one per parameter (a+b+c, a*b+c+d, ...)
    max_terms: int = 1
    #: "bic" (in-sample deviance + k log N, default) or "cv" (leave-one-point-out deviance)
    selection: str = "bic"
    #: per-parameter candidates carried into the multi-parameter combination
    shortlist: int = 5
    #: competing hypotheses kept in each model for the model-uncertainty part of intervals
    alternatives: int = 8
    #: True: constrain to non-negative coefficients (a negative constant is replaced by a fit
    #: through the origin, a negative term rejects the hypothesis; excludes real shapes such as
    #: log2(p) - 9).  "asymptotic": reject only hypotheses that fall below zero as the parameters
    #: grow (a growing term with a negative coefficient -- unless a positive term outgrows it and the
    #: series is noise-free and fitted exactly, or weighed for the model's error: :func:`_outgrow_rows`
    #: -- or a negative constant under decaying terms only) or that are below zero at a measured
    #: point (LULESH's MPI_Waitall summed over ranks, ``-928 + 194 log2(jobsize)``: -5.5 s at
    #: jobsize 27; no real-data or synthetic benchmark prediction moved, bench/README.md "Negative
    #: where measured").  "auto" (default): "asymptotic" for metrics that cannot be negative (times,
    #: counts, bytes: :meth:`for_kind`; "clamped" for those of their series that fall with a
    #: parameter, :func:`perfcast.fit.series.model_experiment`), no constraint otherwise -- chosen on real data
    #: (bench/realdata.py: no negative predictions, LULESH median error 21.6 % -> 4.1 %) with the
    #: synthetic sets unchanged (bench/vs_extrap.py).  False: no constraint.
    nonnegative: bool | str = AUTO
    #: series fitted at once (memory vs. speed; also the unit of work of ``workers``).  A series'
    #: results do not depend on it, nor on the other series of its chunk: every sum over a
    #: series' points is taken row by row (:func:`_rowdot`, :func:`_rowsum`; tests/test_fit_chunk.py)
    chunk: int = 4096
    #: processes fitting chunks of a group in parallel (forked; 1 = in this process).  Results are
    #: identical to one process: the chunks are the same and group-level estimates are made once
    workers: int = 1
    #: address of an existing Dask cluster (e.g. "tcp://host:8786") fitting the chunks instead
    #: (:mod:`perfcast.fit.cluster`; the optional extra ``perfcast[dask]``); None = not used.
    #: Results are identical to one process, as with ``workers``
    dask: str | None = None
    #: "auto": when raw repetitions are given, estimate the noise shape from them and re-rank and
    #: refit the top hypotheses under the matching generalised normal likelihood (normal noise:
    #: unchanged); "normal": always the normal likelihood of the means
    likelihood: str = "auto"
    #: weights of the means: "mixed" (default) -- per series a repetition variance
    #: ``a^2 + b^2 mu^2`` where the repetitions show an absolute part (:func:`absolute_noise`),
    #: else noise proportional to the value; a series whose repetitions cannot tell the parts apart
    #: (fewer than ``ABS_MIN_DOF`` degrees of freedom of pure error; single runs) takes both parts
    #: equal at its median value (``NOREP_ABS``) -- or "relative":
    #: always proportional to the value.  Both lift dips (:func:`noise_scale`).  Chosen on real
    #: data with the synthetic sets (bench/README.md "Weights").
    noise: str = "mixed"
    #: the metric's values carry no measurement noise (:attr:`perfcast.experiment.Metric.exact`:
    #: a cache simulator's counts; set per metric by :meth:`for_kind`).  With the
    #: "mixed" noise model an exact series -- one so marked whose repetitions, if any, agree
    #: (:func:`exact_series`) -- is weighed for the
    #: model's error alone (:func:`exact_scale`: a growing series weighs its means alike, a falling
    #: one relative to their values; bench/README.md "Exact measurements")
    exact: bool = False
    #: uneven noise between points (off by default; bench/README.md "Uneven noise between points"):
    #: where Bartlett's test of equal relative variances across a series' points rejects at
    #: :data:`HETERO_LEVEL`, each mean is weighed by its own relative pure-error variance shrunk
    #: toward the pooled one (:func:`point_variance_ratio`)
    hetero: bool = False

    def __post_init__(self):
        if self.max_terms not in (1, 2):
            raise PerfcastError(f"max_terms must be 1 or 2, not {self.max_terms}", where="max_terms")
        if self.selection not in ("cv", "bic"):
            raise PerfcastError(f"selection must be 'cv' or 'bic', not {self.selection!r}", where="selection")
        if self.likelihood not in ("auto", "normal"):
            raise PerfcastError(f"likelihood must be 'auto' or 'normal', not {self.likelihood!r}",
                                where="likelihood")
        if self.noise not in ("relative", "mixed"):
            raise PerfcastError(f"noise must be 'relative' or 'mixed', not {self.noise!r}", where="noise")
        if self.shortlist < 1:
            raise PerfcastError("shortlist must be >= 1", where="shortlist")
        if not isinstance(self.workers, int) or self.workers < 1:
            raise PerfcastError(f"workers must be a whole number >= 1, not {self.workers!r}", where="workers")
        if self.dask is not None and (not isinstance(self.dask, str) or not self.dask.strip()):
            raise PerfcastError(f"dask must be a scheduler address such as 'tcp://host:8786', not {self.dask!r}",
                                where="dask")
        if self.dask is not None and self.workers > 1:
            raise PerfcastError("give either a Dask cluster or several local workers, not both", where="dask")
        if not isinstance(self.chunk, int) or self.chunk < 1:
            raise PerfcastError(f"chunk must be a whole number >= 1, not {self.chunk!r}", where="chunk")
        if self.nonnegative not in (False, True, ASYMPTOTIC, CLAMPED, AUTO):
            raise PerfcastError(f"nonnegative must be False, True, {ASYMPTOTIC!r}, {CLAMPED!r} or {AUTO!r}, not "
                                f"{self.nonnegative!r}", where="nonnegative")

    def for_kind(self, kind: str | None, exact: bool = False) -> "FitOptions":
        """These options for a metric of ``kind``: "auto" non-negativity resolved (asymptotic for
        times, counts and bytes; none for other or unknown kinds); ``exact``: the metric's values
        carry no measurement noise (:attr:`exact`)."""
        opt = dataclasses.replace(self, exact=True) if exact and not self.exact else self
        if opt.nonnegative != AUTO:
            return opt
        return dataclasses.replace(opt, nonnegative=ASYMPTOTIC if kind in NONNEGATIVE_KINDS else False)

    def blocks(self) -> tuple[Block, ...]:
        """The hypothesis space's blocks, made once and kept on the (frozen) options (~0.5 ms of
        Fraction arithmetic each time: a segmented model's pieces asked for them thousands of times)."""
        made = self.__dict__.get("_blocks")
        if made is None:
            if self.space is not None:
                blocks = sorted({(parse_fraction(i), int(j)) for i, j in self.space} - {(Fraction(0), 0)})
                if not blocks:
                    raise PerfcastError("the hypothesis space is empty", where="space")
                made = tuple(with_negative(blocks)) if self.negative else tuple(blocks)
            else:
                made = tuple(make_blocks(self.exponents, self.log_exponents, self.negative))
            object.__setattr__(self, "_blocks", made)
        return made


# ---------------------------------------------------------------------------------------------
# weighted least squares, batched
# ---------------------------------------------------------------------------------------------
def _inv_small(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of a stack of small symmetric PSD matrices (..., k, k) and a mask of usable ones."""
    k = A.shape[-1]
    if k == 1:
        a = A[..., 0, 0]
        ok = a > 0
        inv = (1.0 / np.where(ok, a, 1.0))[..., None, None]
        return np.where(ok[..., None, None], inv, 0.0), ok
    if k == 2:
        a, b, d = A[..., 0, 0], A[..., 0, 1], A[..., 1, 1]
        det = a * d - b * b
        ok = det > 1e-11 * a * d
        r = 1.0 / np.where(ok, det, 1.0)
        inv = np.empty_like(A)
        inv[..., 0, 0] = d * r
        inv[..., 1, 1] = a * r
        inv[..., 0, 1] = inv[..., 1, 0] = -b * r
        return np.where(ok[..., None, None], inv, 0.0), ok
    if k == 3:
        a, b, c = A[..., 0, 0], A[..., 0, 1], A[..., 0, 2]
        d, e, f = A[..., 1, 1], A[..., 1, 2], A[..., 2, 2]
        c00 = d * f - e * e
        c01 = c * e - b * f
        c02 = b * e - c * d
        c11 = a * f - c * c
        c12 = b * c - a * e
        c22 = a * d - b * b
        det = a * c00 + b * c01 + c * c02
        ok = det > 1e-11 * a * d * f
        r = 1.0 / np.where(ok, det, 1.0)
        inv = np.empty_like(A)
        inv[..., 0, 0], inv[..., 1, 1], inv[..., 2, 2] = c00 * r, c11 * r, c22 * r
        inv[..., 0, 1] = inv[..., 1, 0] = c01 * r
        inv[..., 0, 2] = inv[..., 2, 0] = c02 * r
        inv[..., 1, 2] = inv[..., 2, 1] = c12 * r
        return np.where(ok[..., None, None], inv, 0.0), ok
    # larger: eigen-decomposition based pseudo-inverse with a rank check
    vals, vecs = np.linalg.eigh(A)
    top = vals[..., -1:]
    ok = vals[..., 0] > 1e-11 * top[..., 0]
    rinv = np.where(vals > 1e-11 * top, 1.0 / np.where(vals > 0, vals, 1.0), 0.0)
    inv = np.einsum("...ik,...k,...jk->...ij", vecs, rinv, vecs)
    return inv, ok


@dataclass
class _WLS:
    beta: np.ndarray     # (S, k) in scaled-column units
    rss: np.ndarray      # (S,) weighted
    press: np.ndarray    # (S,) weighted leave-one-out, inf when a point has leverage 1
    ainv: np.ndarray     # (S, k, k)
    ok: np.ndarray       # (S,)
    resid: np.ndarray    # (S, n)
    hat: np.ndarray      # (S, n)


def _wls(D: np.ndarray, y: np.ndarray, w: np.ndarray, leverage: bool = True, const: tuple | None = None) -> _WLS:
    """Weighted least squares of y (S, n) on design D ((n, k) shared or (S, n, k) per series).
    ``leverage=False`` (per-series designs only) skips the hat diagonal: PRESS is then inf and
    ``hat`` zero -- for searches that rank by in-sample deviance.  ``const`` (per-series designs
    whose column 0 is the constant 1): the rows' ``A[0, 0]`` and ``b[0]`` as :func:`_const_sums`
    gives them -- the same floats, computed once per series for all its hypotheses."""
    S, n = y.shape
    if D.ndim == 2:
        k = D.shape[1]
        P = (D[:, :, None] * D[:, None, :]).reshape(n, k * k)
        A = _rowdot(w, P).reshape(S, k, k)
        b = _rowdot(w * y, D)
        ainv, ok = _inv_small(A)
        beta = np.einsum("sij,sj->si", ainv, b)
        fitted = _rowdot(beta, D.T)
        hat = w * _rowdot(ainv.reshape(S, k * k), P.T)
    else:
        k = D.shape[2]
        cols, wc, beta, ainv, ok = _normal(D, y, w, const)
        # the same operations as the shared-design path, into reused buffers (the weighted columns
        # are dead once A and b are formed): fresh (S, n) temporaries cost more than the arithmetic
        tmp = wc[0] if const is None else np.empty((S, n))
        fitted = beta[:, :1] * cols[0]
        for i in range(1, k):
            fitted += np.multiply(beta[:, i:i + 1], cols[i], out=tmp)
        if leverage:
            hsum = np.zeros((S, n))
            for i in range(k):
                for j in range(i, k):
                    hsum += (ainv[:, i, j] * (1 if i == j else 2))[:, None] * cols[i] * cols[j]
            hat = w * hsum
        else:
            hat = np.zeros((S, n))
        resid = np.subtract(y, fitted, out=fitted)
        np.multiply(w, resid, out=tmp)
        rss = np.sum(np.multiply(tmp, resid, out=tmp), axis=1)
    if D.ndim == 2:
        resid = y - fitted
        rss = np.sum(w * resid * resid, axis=1)
    if leverage or D.ndim == 2:
        lev_ok = np.all(hat < 1 - 1e-9, axis=1)
        denom = np.where(hat < 1 - 1e-9, 1 - hat, 1.0)
        press = np.sum(w * (resid / denom) ** 2, axis=1)
        press = np.where(lev_ok & ok, press, np.inf)
    else:
        press = np.full(S, np.inf)
    rss = np.where(ok, rss, np.inf)
    return _WLS(beta, rss, press, ainv, ok, resid, hat)


def _normal(D: np.ndarray, y: np.ndarray, w: np.ndarray, const: tuple | None = None) -> tuple:
    """The normal equations of :func:`_wls` with per-series designs D (S, n, k), solved: its
    columns (k contiguous (S, n)), weighted columns, coefficients (S, k), inverse normal matrices
    (S, k, k) and usable mask (S,) -- for refits that need no residuals (``const`` as there)."""
    S = len(y)
    # column by column (batched matmul of tiny matrices is slow)
    k = D.shape[2]
    cols = [np.ascontiguousarray(D[:, :, i]) for i in range(k)]
    # the constant's weighted column ``w * 1`` is ``w`` itself
    wc = [w if const is not None and i == 0 else w * c for i, c in enumerate(cols)]
    A = np.empty((S, k, k))
    for i in range(k):
        for j in range(i, k):
            A[:, i, j] = A[:, j, i] = (const[0] if const is not None and i == j == 0
                                       else np.einsum("sn,sn->s", wc[i], cols[j]))
    b = np.stack([const[1] if const is not None and i == 0 else np.einsum("sn,sn->s", wc[i], y)
                  for i in range(k)], axis=1)
    ainv, ok = _inv_small(A)
    beta = np.einsum("sij,sj->si", ainv, b)
    return cols, wc, beta, ainv, ok


def _rowdot(x: np.ndarray, M: np.ndarray) -> np.ndarray:
    """``x @ M`` for rows ``x`` (S, n) and a matrix ``M`` (n, c) shared by them, each row's floats
    independent of the other rows.  Every product or sum over a series' points goes through this
    or :func:`_rowsum`, never through BLAS (numpy's ``@``): OpenBLAS sums in an order that depends
    on the number of rows and on their alignment in memory (its kernels take remainder rows, and a
    single row, separately), so a series' fit depended on the chunk it was fitted in and on the
    other series there (``FitOptions.chunk``; bench/README.md "Results independent of the chunk
    size").  numpy's einsum adds each output's products in one order whatever the number of rows,
    given operands of one memory layout (its order follows the strides: the fit's arrays are
    row-major)."""
    return np.einsum("sn,nh->sh", x, M)


def _const_sums(y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``y``/``w`` (S, n) the constant column's entries of the normal equations of
    :func:`_wls` with a per-series design: ``A[0, 0]`` and ``b[0]``, the same floats."""
    wc = w * np.ones(w.shape[1])
    return np.einsum("sn,sn->s", wc, np.ones(w.shape)), np.einsum("sn,sn->s", wc, y)


def _fit(D: np.ndarray, y: np.ndarray, w: np.ndarray, nonneg, clamp: _WLS | None = None,
         leverage: bool = True, growing: np.ndarray | None = None, const: tuple | None = None,
         outgrow: tuple | None = None, below=None) -> _WLS:
    """:func:`_wls` with the non-negativity constraint: rows whose constant comes out negative are
    refitted without the constant (the constrained optimum lies on that boundary when the terms
    are kept), rows with a negative term coefficient are rejected (criterion inf).  With
    ``nonneg == "asymptotic"`` only fits that fall below zero as the parameters grow, or are below
    zero at a measured point (weight > 0), are rejected (``growing``: which columns after the
    constant grow, (k,) or (S, k)); a negative constant under a growing term is kept where the fit
    stays non-negative at the points (``-73 + 3e-4 * log2(p)^2 * n``).  ``const``: as :func:`_wls`.
    ``outgrow`` = (rows (S,) bool, hypotheses (S, K, m), growing blocks): on those rows a fit the
    asymptotic rule rejects is kept when :func:`_outgrown` says its negative terms are outgrown.
    ``nonneg == "clamped"``: the constant as the strict rule treats it (refitted through the
    origin where it comes out negative), the terms as the asymptotic rule does; without
    ``growing`` (a refit of admitted hypotheses) only the constant's refit.
    ``below``: (rows, their coefficients) -> which of those laws are below zero somewhere from
    the smallest measured values on (:meth:`_Space.below_zero`): they are rejected too, unless
    :func:`_outgrown` kept them (their growing terms are shown non-negative beyond the data, which
    the bound does not see).  Only fits with a negative coefficient can be; only they are asked."""
    if nonneg in (ASYMPTOTIC, CLAMPED):
        fit = _wls(D, y, w, leverage or nonneg == CLAMPED, const)
        if nonneg == CLAMPED and D.shape[-1] >= 2:
            _through_origin(fit, D, y, w, np.nonzero(fit.ok & (fit.beta[:, 0] < 0))[0])
        if growing is None:         # a refit of hypotheses the rule already admitted
            return fit
        bad = fit.ok & _asymptotically_negative(fit.beta, growing)
        kept = np.zeros(len(bad), dtype=bool)
        if outgrow is not None and bad.any():
            rows, hyp, grow = outgrow
            cand = np.nonzero(bad & rows)[0]
            if len(cand):
                bad[cand] = ~_outgrown(fit.beta[cand], D[cand], hyp[cand], grow)
                kept[cand] = ~bad[cand]
        # and below zero where the quantity was measured (``-928 + 194 log2(p)`` at p = 27)
        bad |= fit.ok & np.any(((y - fit.resid) < -NEGATIVE_TOL) & (w > 0), axis=1)
        if below is not None:
            # or anywhere beyond the smallest measured values (``-1197 + 3316 x^(-2/3) log2(x) + 3
            # y``, falling in x to -1197 + 3 y)
            rows = np.nonzero(fit.ok & ~bad & ~kept & np.any(fit.beta < 0, axis=1))[0]
            if len(rows):
                bad[rows] = below(rows, fit.beta[rows])
        fit.rss = np.where(bad, np.inf, fit.rss)
        fit.press = np.where(bad, np.inf, fit.press)
        return fit
    fit = _wls(D, y, w, leverage or nonneg, const)
    if not nonneg or (D.shape[-1] < 2):
        return fit
    _through_origin(fit, D, y, w, np.nonzero(fit.ok & (fit.beta[:, 0] < 0))[0])
    bad = np.any(fit.beta[:, 1:] < 0, axis=1)
    if clamp is not None:
        # the constrained optimum with a negative slope is the slope 0: the constant model's fit
        fit.rss = np.where(bad, clamp.rss, fit.rss)
        fit.press = np.where(bad, clamp.press, fit.press)
    else:
        fit.rss = np.where(bad, np.inf, fit.rss)
        fit.press = np.where(bad, np.inf, fit.press)
    return fit


def _wls_designs(Dp: np.ndarray, y: np.ndarray, w: np.ndarray) -> _WLS:
    """:func:`_wls` of y (S, n) on each of B shared designs ``Dp`` (B, n, k) at once: the fields
    with a design axis after the series', beta (S, B, k), rss and press (S, B), ainv (S, B, k, k),
    ok (S, B), resid and hat (S, B, n).  The same floats as B calls of :func:`_wls` (the sums over
    a series' points in the same order: :func:`_rowdot`'s einsum over more columns, the products
    over k with the operands' strides of that path, the sums of squares row by row over (S * B, n));
    tests/test_fit_designs.py compares them bit for bit."""
    B, n, k = Dp.shape
    S = len(y)
    P = Dp[:, :, :, None] * Dp[:, :, None, :]                                 # (B, n, k, k)
    A = _rowdot(w, np.ascontiguousarray(P.transpose(1, 0, 2, 3)).reshape(n, B * k * k)).reshape(S, B, k, k)
    b = _rowdot(w * y, np.ascontiguousarray(Dp.transpose(1, 0, 2)).reshape(n, B * k)).reshape(S, B, k)
    ainv, ok = _inv_small(A)
    beta = np.einsum("sbij,sbj->sbi", ainv, b)
    fitted = np.einsum("sbk,bkn->sbn", beta, Dp.transpose(0, 2, 1))
    wb = w[:, None, :]
    hat = wb * np.einsum("sbq,bqn->sbn", ainv.reshape(S, B, k * k), P.reshape(B, n, k * k).transpose(0, 2, 1))
    resid = y[:, None, :] - fitted
    rss = np.sum((wb * resid * resid).reshape(S * B, n), axis=1).reshape(S, B)
    lev_ok = np.all(hat < 1 - 1e-9, axis=2)
    denom = np.where(hat < 1 - 1e-9, 1 - hat, 1.0)
    press = np.sum((wb * (resid / denom) ** 2).reshape(S * B, n), axis=1).reshape(S, B)
    press = np.where(lev_ok & ok, press, np.inf)
    rss = np.where(ok, rss, np.inf)
    return _WLS(beta, rss, press, ainv, ok, resid, hat)


def _fit_designs(Dp: np.ndarray, y: np.ndarray, w: np.ndarray, nonneg, growing: np.ndarray) -> _WLS:
    """:func:`_fit` (no ``clamp``, ``const``, ``outgrow`` or ``below``; ``growing`` (B, k - 1), or
    (S, B, k - 1) per series) for each of B shared designs ``Dp`` (B, n, k) at once, fields as
    :func:`_wls_designs` gives them: the fits of a search over many hypotheses without a Python
    call per hypothesis."""
    fit = _wls_designs(Dp, y, w)
    k = Dp.shape[2]
    asym = nonneg in (ASYMPTOTIC, CLAMPED)
    if k >= 2 and (nonneg == CLAMPED or (nonneg and not asym)):
        rows, cols = np.nonzero(fit.ok & (fit.beta[:, :, 0] < 0))
        for c in np.unique(cols):
            # design c's fields are views into the batch's arrays: refitted there in place
            view = _WLS(*(getattr(fit, f)[:, c] for f in ("beta", "rss", "press", "ainv", "ok", "resid", "hat")))
            _through_origin(view, Dp[c], y, w, rows[cols == c])
    if asym:
        bad = fit.ok & _asymptotically_negative(fit.beta, growing)
        bad |= fit.ok & np.any(((y[:, None, :] - fit.resid) < -NEGATIVE_TOL) & (w[:, None, :] > 0), axis=2)
    elif nonneg and k >= 2:
        bad = np.any(fit.beta[:, :, 1:] < 0, axis=2)
    else:
        return fit
    fit.rss = np.where(bad, np.inf, fit.rss)
    fit.press = np.where(bad, np.inf, fit.press)
    return fit


def _through_origin(fit: _WLS, D: np.ndarray, y: np.ndarray, w: np.ndarray, rows: np.ndarray) -> None:
    """Refit ``rows`` of ``fit`` without the constant (it is 0 there), in place: the constrained
    optimum of a fit whose constant came out negative lies on that boundary when its terms are
    kept."""
    if not len(rows):
        return
    D0 = D[:, 1:] if D.ndim == 2 else D[rows][:, :, 1:]
    sub = _wls(D0, y[rows], w[rows])
    fit.beta[rows, 0] = 0.0
    fit.beta[rows, 1:] = sub.beta
    fit.rss[rows], fit.press[rows] = sub.rss, sub.press
    fit.resid[rows], fit.hat[rows] = sub.resid, sub.hat
    k = D.shape[-1]
    a = np.zeros((len(rows), k, k))
    a[:, 1:, 1:] = sub.ainv
    fit.ainv[rows] = a
    fit.ok[rows] = sub.ok


def _one_block_err(T: np.ndarray, valid: np.ndarray, y: np.ndarray, w: np.ndarray, cv: bool,
                   growing: np.ndarray | None = None, turns: tuple | None = None,
                   clamped: bool = False) -> np.ndarray:
    """Deviance (weighted RSS, or PRESS when ``cv``) of ``c0 + c1 * T[:, h]`` for every block h at
    once: ``T`` (n, H) scaled columns, ``y``/``w`` (S, n) -> (S, H); inf where not identifiable.
    ``growing`` (H,): the asymptotic sign constraint (:func:`_asymptotically_negative`) -- inf
    where the fit would fall below zero as the parameter grows.  ``turns`` = (blocks (H,) bool,
    their ranges lo, hi (H,) in T's units beyond the smallest point, :meth:`_Space.ranges`): inf
    where such a block's fit dips below zero beyond the data (``2347 - 180.7 x^(-1/4) log2(x)^2``,
    fitted to a strong-scaling series at x = 20..60, is -910 at x = 2980).  ``clamped``: a
    constant that comes out negative is 0, the slope refitted through the origin (the "clamped"
    rule of :func:`_fit`).

    Closed-form 2x2 weighted least squares (the same numbers as :func:`_wls` column by column,
    without a Python loop over blocks); residuals are formed explicitly, not from the normal
    equations, so exact fits stay exact."""
    A00 = np.sum(w, axis=1)[:, None]
    A01 = _rowdot(w, T)
    TT = T * T
    A11 = _rowdot(w, TT)
    wy = w * y
    b0 = np.sum(wy, axis=1)[:, None]
    b1 = _rowdot(wy, T)
    det = A00 * A11 - A01 * A01
    ok = (det > 1e-11 * A00 * A11) & valid[None, :]
    r = 1.0 / np.where(ok, det, 1.0)
    beta0 = (A11 * b0 - A01 * b1) * r
    beta1 = (A00 * b1 - A01 * b0) * r
    origin = None
    if clamped:
        origin = ok & (beta0 < 0)
        if origin.any():
            beta1 = np.where(origin, b1 / np.where(A11 > 0, A11, 1.0), beta1)
            beta0 = np.where(origin, 0.0, beta0)
        else:
            origin = None
    # the residuals (S, n, H) in blocks of rows that stay in the CPU cache, in two reused buffers
    # (passes over a whole chunk's (S, n, H) arrays ran at memory speed: 13 -> 7.5 ms per 4096
    # series in isolation, -20% in the fit); row by row the same operations, so the same floats
    S, n = y.shape
    H = T.shape[1]
    rows = max(1, _CACHE_BLOCK // max(n * H, 1))
    buf, tmp = np.empty((min(rows, S), n, H)), np.empty((min(rows, S), n, H))
    err = np.empty((S, H))
    for a in range(0, S, rows):
        s = slice(a, min(S, a + rows))
        resid = np.subtract(y[s, :, None], beta0[s, None, :], out=buf[:s.stop - a])
        resid -= np.multiply(beta1[s, None, :], T[None, :, :], out=tmp[:s.stop - a])
        if cv:
            hat = w[s, :, None] * (A11[s, None, :] - 2 * A01[s, None, :] * T[None] + A00[s, None, :] * TT[None]) \
                * r[s, None, :]
            if origin is not None:
                hat = np.where(origin[s, None, :], w[s, :, None] * TT[None] / np.where(A11 > 0, A11, 1.0)[s, None, :],
                               hat)
            ok[s] &= np.all(hat < 1 - 1e-9, axis=1)
            resid = resid / np.where(hat < 1 - 1e-9, 1 - hat, 1.0)
        np.einsum("sn,snh->sh", w[s], np.multiply(resid, resid, out=resid), out=err[s])
    if growing is not None:
        ok &= ~np.where(growing[None, :], beta1 < 0, beta0 < 0)
        ok &= ~_below_zero_at_points(beta0, beta1, T, w)
    if turns is not None:
        blocks, lo, hi = turns
        ok &= ~(blocks & (_law_floor(beta0[..., None], beta1[..., None], lo[:, None], hi[:, None]) < -NEGATIVE_TOL))
    return np.where(ok, err, np.inf)


#: a law whose negative term a positive one outgrows must fit a noise-free series' measurements to
#: this (relative to its largest mean) to be taken (:func:`_outgrow_rows`, :func:`_misses`) ...
OUTGROWN_FIT = 1e-6
#: ... on at least this many measured points: three coefficients and two points more.  On four,
#: small counts meet some cancelling pair by coincidence (cg's mca_pml_ob1_send_fin DLmw at p =
#: 2..16, 2, 6, 15, 34: ``-2 + 2.5 p - log2(p)``; 6 of cg-p's 947 cachegrind series, each absent at
#: p = 1)
OUTGROWN_POINTS = 5
#: a fitted value below this (in units of the series' largest |mean|) is negative
NEGATIVE_TOL = 1e-9
#: refinements of :meth:`_Space.below_zero`'s grid around a law's lowest point (each 16x finer in
#: one parameter, 4x in two)
ZOOMS = 3


def _below_zero_at_points(beta0: np.ndarray, beta1: np.ndarray, T: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(S, H): is ``beta0 + beta1 * T[:, h]`` negative at a measured point (weight > 0) of the series?
    A line in ``T`` is lowest at the smallest or the largest value of the column over the series'
    measured points, so each set of measured points (every point; the kept points of the
    leave-largest-out rerun: one set for a whole group) needs those two values only.  The same
    decisions as point by point: rounding is monotone, so ``beta0 + beta1 * t`` is lowest (as a
    float) at an extreme ``t``.  Series with few of the points' sets (a pattern per handful of
    rows) are evaluated point by point."""
    meas = w > 0
    S = len(meas)
    with np.errstate(invalid="ignore"):
        full = np.all(meas, axis=1)
        pats, inv = _patterns_of(meas)
        if len(pats) * _PATTERN_ROWS > S:
            # many patterns for few rows: point by point (extremes of the whole columns where all measured)
            lo, hi = np.min(T, axis=0), np.max(T, axis=0)
            below = beta0 + np.minimum(beta1 * lo, beta1 * hi) < -NEGATIVE_TOL
            part = np.nonzero(~full)[0]
            if len(part):
                fitted = beta0[part, None, :] + beta1[part, None, :] * T[None, :, :]
                below[part] = np.any((fitted < -NEGATIVE_TOL) & meas[part, :, None], axis=1)
            return below
        below = np.zeros(beta0.shape, dtype=bool)
        for u, pat in enumerate(pats):
            if not pat.any():
                continue                        # nothing measured: nowhere below zero
            Tp = T[pat]
            lo, hi = np.min(Tp, axis=0), np.max(Tp, axis=0)
            # a NaN product (an infinite slope times 0) is no point below zero, as point by point
            low = np.minimum if pat.all() else np.fmin
            if len(pats) == 1:
                below = beta0 + low(beta1 * lo, beta1 * hi) < -NEGATIVE_TOL
            else:
                rows = np.nonzero(inv == u)[0]
                below[rows] = beta0[rows] + low(beta1[rows] * lo, beta1[rows] * hi) < -NEGATIVE_TOL
    return below


def _patterns_of(meas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a boolean (S, n) array (sorted as ``np.unique(axis=0)`` sorts them) and
    each row's index among them (S,): one row when all are alike (checked first: the common
    case), else by integer keys of the rows' bits.  For 4096 rows of 6 points ``np.unique`` along
    an axis took 3.5-6.5 ms, the keys 0.4 ms, the check for one pattern 0.02 ms."""
    S, n = meas.shape
    if S == 0 or bool(np.all(meas == meas[:1])):
        return meas[:1], np.zeros(S, dtype=np.intp)
    if n > 62:
        pats, inv = np.unique(meas, axis=0, return_inverse=True)
        return pats, np.asarray(inv).ravel()
    # the first column the most significant bit: keys sort as the rows do (False < True)
    keys = np.sum(meas.astype(np.int64) << np.arange(n - 1, -1, -1, dtype=np.int64), axis=1)
    _, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    return meas[first], np.asarray(inv).ravel()


#: :func:`_below_zero_at_points` takes a set of measured points' column extremes when it has at
#: least this many rows on average, else goes point by point
_PATTERN_ROWS = 8


def _law_floor(c: np.ndarray, beta: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """A lower bound of ``c + sum_t beta_t term_t`` where every term ranges over [lo_t, hi_t]
    (hi may be inf): each term at the end of its range its coefficient's sign makes lowest.
    Exact for one term; for several a bound (their lowest values may lie at different points).
    ``c`` (..., 1), ``beta``/``lo``/``hi`` (..., k) -> (...)."""
    with np.errstate(invalid="ignore", over="ignore"):
        low = np.where(beta < 0, beta * hi, beta * np.where(beta > 0, lo, 0.0))
    return c[..., 0] + np.sum(low, axis=-1)


#: values per temporary of :func:`_one_block_err`'s blocks of rows (512 kB: two of them stay in the
#: 1 MB L2 cache of the machine measured on; larger blocks were slower, smaller ones no faster)
_CACHE_BLOCK = 2 ** 16


def _growing_blocks(blocks: Sequence[Block]) -> np.ndarray:
    """Per block: does ``x^i log2(x)^j`` grow without bound as x grows?"""
    return np.array([i > 0 or (i == 0 and j > 0) for i, j in blocks], dtype=bool)


def _leading_growth(blocks: Sequence[Block], pairs: np.ndarray) -> np.ndarray:
    """(B, 2) for pairs of block indices (B, 2) of one parameter: which growing term of ``c + a
    x^i1 log2(x)^j1 + b x^i2 log2(x)^j2`` decides its sign as x grows -- the growing one that grows
    faster (the larger (i, j)); the other is outgrown.  ``a x^2 - b x``, ``a x - b x^(1/2)``, ``a x
    log2(x) - b x`` are positive beyond some x whatever b when a > 0: pairs of messages in an
    all-to-all (p^2 - p), faces of a square process grid (4p - 4 p^(1/2)).  Whether such a law
    stays non-negative from the smallest measured x on is :meth:`_Space.below_zero`'s to say."""
    grow = _growing_blocks(blocks)
    rank = np.empty(len(blocks), dtype=np.int64)
    rank[sorted(range(len(blocks)), key=lambda h: blocks[h])] = np.arange(len(blocks))
    a, b = pairs[:, 0], pairs[:, 1]
    first = rank[a] > rank[b]
    return grow[pairs] & np.stack([first | ~grow[b], ~first | ~grow[a]], axis=1)


def _growing_terms(hyp: np.ndarray, grow: np.ndarray, k: int) -> np.ndarray:
    """(S, k): does each used monomial slot of ``hyp`` (S, K, m) grow (some factor grows)?"""
    h = hyp[:, :k, :]
    return np.any((h >= 0) & grow[np.maximum(h, 0)], axis=2)


def _outgrow_rows(ch: "_Chunk", rows) -> tuple[np.ndarray, np.ndarray]:
    """Which series ``rows`` of ``ch`` may take a law whose negative growing term a positive one
    outgrows (:func:`_leading_growth` in one parameter, :func:`_outgrown` in several): those weighed
    for the model's error, and noise-free ones (:attr:`_Chunk.free`) measured at ``OUTGROWN_POINTS``
    points or more -- these only where the law reproduces their measurements (:func:`_misses`).
    -> (allowed, noise-free only), (len(rows),) each."""
    free = ch.free[rows] & ~ch.relax[rows] & (np.sum(ch.count[rows] > 0, axis=1) >= OUTGROWN_POINTS)
    return free | ch.relax[rows], free


def _misses(resid: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(r,) laws whose residuals ``resid`` (r, n) at the measured points (``w`` > 0) exceed
    ``OUTGROWN_FIT`` of the series' largest mean (the units of the chunk's normalised means): a count
    that follows a law with a cancelling pair does so exactly; one the law misses (cache misses
    that step with p) it would bend through (cg's xpby D1mr, 4.0e5 +- 1%: ``4.09e5 + 221 p^(8/3) -
    96 p^2 log2(p)^2``)."""
    return np.max(np.abs(resid) * (w > 0), axis=1) > OUTGROWN_FIT


def _asymptotically_negative(beta: np.ndarray, growing: np.ndarray) -> np.ndarray:
    """(S,) fits that fall below zero as the parameters grow: a growing term with a negative
    coefficient, or only decaying terms (or none) and a negative constant.  ``beta`` (S, 1 + k) in
    scaled units (positive scales: signs are those of the model); ``growing`` (k,) or (S, k) --
    or any leading axes, e.g. ``beta`` (S, B, 1 + k) and ``growing`` (B, k) (:func:`_fit_designs`)."""
    g = np.broadcast_to(growing, beta[..., 1:].shape)
    return np.any(g & (beta[..., 1:] < 0), axis=-1) | (~np.any(g, axis=-1) & (beta[..., 0] < 0))


def _outgrown(beta: np.ndarray, D: np.ndarray, hyp: np.ndarray, grow: np.ndarray) -> np.ndarray:
    """(S,) fits that never fall below zero as the parameters grow although a growing term has a
    negative coefficient: every such term ``b h`` stands under a positive term ``a g h`` that
    contains it times a growing factor ``g`` and outweighs it at every point of ``D``: then ``(a g
    + b) h`` is non-negative there and, ``g`` growing, beyond.  ``c + a log2(p) n + b n`` with ``b
    < 0`` is ``c + a n log2(p / p0)``, ``p0`` below the data: a law that the per-term rule of
    :func:`_asymptotically_negative` rejects although it is positive wherever it is evaluated.
    Also: a negative constant needs a growing term (as there).  ``beta`` (S, 1 + k) scaled units,
    ``D`` (S, n, 1 + k) the unit-max design (positive scales: signs are the model's), ``hyp`` (S,
    K, m), ``grow`` per block."""
    S, k1 = beta.shape
    k = k1 - 1
    ok = np.ones(S, dtype=bool)
    h = hyp[:, :k, :]
    present = h >= 0
    g = np.any(present & grow[np.maximum(h, 0)], axis=2)         # (S, k) growing terms
    for t in range(k):
        neg = g[:, t] & (beta[:, 1 + t] < 0)
        if not neg.any():
            continue
        covered = np.zeros(S, dtype=bool)
        for u in range(k):
            if u == t:
                continue
            # u contains every factor of t ...
            sub = np.all(~present[:, t, :] | (h[:, u, :] == h[:, t, :]), axis=1)
            # ... and at least one growing factor more
            extra = np.any(present[:, u, :] & ~present[:, t, :] & grow[np.maximum(h[:, u, :], 0)], axis=1)
            pos = beta[:, 1 + u] > 0
            total = beta[:, 1 + u, None] * D[:, :, 1 + u] + beta[:, 1 + t, None] * D[:, :, 1 + t]
            covered |= sub & extra & pos & np.all(total >= 0, axis=1)
        ok &= ~neg | covered
    return ok & (np.any(g, axis=1) | (beta[:, 0] >= 0))


# ---------------------------------------------------------------------------------------------
# hypotheses as monomial matrices
# ---------------------------------------------------------------------------------------------
# A hypothesis is an int array (K, m): K monomial slots, each with a block index per parameter
# (-1: the parameter is absent from the monomial).  A slot with all -1 is unused.  The constant
# is always part of the model.


class _Space:
    """Per-parameter block tables evaluated at the points, with a column of ones appended."""

    def __init__(self, X: np.ndarray, blocks: Sequence[Block]):
        self.blocks = tuple(blocks)
        self.X = X
        self.m = X.shape[1]
        self.n = X.shape[0]
        self.H = len(self.blocks)
        tabs = []
        for p in range(self.m):
            t = block_values(self.blocks, X[:, p])
            tabs.append(np.concatenate([t, np.ones((self.n, 1))], axis=1))  # index -1 -> ones
        self.tabs = tabs  # each (n, H + 1)
        self.tabs_t = [np.ascontiguousarray(t.T) for t in tabs]  # each (H + 1, n)
        self._grid = None   # :meth:`_grid_table`, built on first use
        self._ranges = {}   # :meth:`ranges`, per parameter on first use
        self._ij = None     # :meth:`_law_at`'s exponents and log exponents as arrays, on first use

    def ranges(self, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per block of parameter p and the absent factor (index -1): its range (inf, sup) from the
        smallest measured value on (:func:`perfcast.fit.terms.factor_range`), (H + 1,) each, and
        (H + 1,) whether it turns there -- its inf or sup is neither its value at the smallest
        point nor its limit, so the sign rules at the points and as p grows do not bound it."""
        if p not in self._ranges:
            x_lo = float(np.min(self.X[:, p]))
            lo, hi, turn = np.ones(self.H + 1), np.ones(self.H + 1), np.zeros(self.H + 1, dtype=bool)
            for h, (i, j) in enumerate(self.blocks):
                lo[h], hi[h], turn[h] = factor_range(x_lo, i, j)
            self._ranges[p] = (lo, hi, turn)
        return self._ranges[p]

    def term_ranges(self, hyp: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For hypotheses ``hyp`` (S, K, m) whose k used slots come first and their design scales
        (S, 1 + k): each term's range lo, hi (S, k) in the design's units over the box of parameter
        values from the smallest measured ones, the product of its factors' ranges."""
        S, K, m = hyp.shape
        k = scale.shape[1] - 1
        rng = [self.ranges(p) for p in range(m)]
        h = np.where(hyp[:, :k, :] < 0, self.H, hyp[:, :k, :])
        lo, hi = rng[0][0][h[:, :, 0]], rng[0][1][h[:, :, 0]]
        with np.errstate(invalid="ignore"):
            for p in range(1, m):
                a, b = rng[p][0][h[:, :, p]], rng[p][1][h[:, :, p]]
                prods = np.nan_to_num(np.stack([lo * a, lo * b, hi * a, hi * b]), nan=0.0, posinf=np.inf,
                                      neginf=-np.inf)
                lo, hi = prods.min(axis=0), prods.max(axis=0)
        return lo / scale[:, 1:], hi / scale[:, 1:]

    def below_zero(self, hyp: np.ndarray, scale: np.ndarray, beta: np.ndarray) -> np.ndarray:
        """(S,) laws ``beta`` (S, 1 + k) of hypotheses ``hyp`` (S, K, m) (used slots first; design
        scales ``scale`` (S, 1 + k)) below zero somewhere from the smallest measured values on.
        :func:`_law_floor` over :meth:`term_ranges` decides, exactly for one term; when it says
        below zero for several terms -- a bound: their lowest values may lie at different points
        (``264 - 428 / p + 0.625 n^2 / p`` has the bound 264 - 428 < 0 but is >= 2396 everywhere)
        -- the law's minimum is searched: on a grid of log2 values from the smallest measured ones
        to 2^40 times them, then :data:`ZOOMS` times on a finer grid around the lowest point."""
        k = scale.shape[1] - 1
        lo, hi = self.term_ranges(hyp, scale)
        out = _law_floor(beta[:, :1], beta[:, 1:], lo, hi) < -NEGATIVE_TOL
        rows = np.nonzero(out)[0]
        if k < 2 or not len(rows):
            return out
        h = np.where(hyp[rows, :k, :] < 0, self.H, hyp[rows, :k, :])
        b, sc = beta[rows], scale[rows, 1:]
        # the smallest positive measured value per parameter (a process-grid covariate is 0 at p = 1:
        # log2(0) would start the search at -inf)
        pos = np.where(self.X > 0, self.X, np.inf).min(axis=0)
        base = np.log2(np.where(np.isfinite(pos), pos, 1.0))          # (m,)
        num = {1: 81, 2: 21, 3: 11}.get(self.m, 6)
        step = 40.0 / (num - 1)
        axes = [base[p] + np.linspace(0.0, 40.0, num) for p in range(self.m)]
        L = np.stack([a.ravel() for a in np.meshgrid(*axes, indexing="ij")], axis=1)   # (g, m): all rows'
        low = np.full(len(rows), np.inf)
        for zoom in range(ZOOMS + 1):
            law = self._law_at(h, sc, b, L)
            at = np.nanargmin(np.where(np.isnan(law), np.inf, law), axis=1)
            low = np.minimum(low, law[np.arange(len(rows)), at])
            if zoom == ZOOMS:
                break
            # a finer grid over the cells around each row's lowest point
            q = {1: 33, 2: 9}.get(self.m, 5)
            centre = L[at] if L.ndim == 2 else L[np.arange(len(rows)), at]   # (r, m)
            offs = np.linspace(-step, step, q)
            grid = np.stack([g.ravel() for g in np.meshgrid(*([offs] * self.m), indexing="ij")], axis=1)
            L = np.maximum(centre[:, None, :] + grid[None], base)
            step = 2 * step / (q - 1)
        out[rows] = low < -NEGATIVE_TOL
        return out

    def _law_at(self, h: np.ndarray, sc: np.ndarray, beta: np.ndarray, L: np.ndarray) -> np.ndarray:
        """Laws ``beta`` (r, 1 + k) with block indices ``h`` (r, k, m) (H: the parameter absent)
        and term scales ``sc`` (r, k) at points of log2 values ``L`` (r, g, m), or (g, m) for every
        row -- then each block's factor is evaluated once and gathered (the same floats) -> (r, g)."""
        if self._ij is None:
            self._ij = (np.array([float(b[0]) for b in self.blocks] + [0.0]),
                        np.array([b[1] for b in self.blocks] + [0]))
        i, j = self._ij
        vals = np.ones(h.shape[:2] + (L.shape[-2],))
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            for p in range(self.m):
                if L.ndim == 2:
                    lp, ip, jp = L[None, :, p], i[:, None], j[:, None]           # blocks x points
                    vals *= (np.exp2(ip * lp) * np.where(jp == 0, 1.0, lp ** jp))[h[:, :, p]]
                    continue
                lp = L[:, None, :, p]                                     # (r, 1, g)
                ip, jp = i[h[:, :, p]][..., None], j[h[:, :, p]][..., None]
                vals *= np.exp2(ip * lp) * np.where(jp == 0, 1.0, lp ** jp)
            return beta[:, :1] + np.einsum("rk,rkg->rg", beta[:, 1:], vals / sc[:, :, None])

    #: :meth:`design` gathers the columns from a table of every monomial when it has at most this
    #: many values ((H + 1)^m * n: two parameters; three are evaluated per hypothesis)
    GRID_MAX = 2_000_000

    def _grid_table(self):
        """Every monomial of the space evaluated at the points and scaled to unit max as
        :meth:`design` scales it, with its scale and whether it is finite everywhere: ((H + 1)^m,
        n), ((H + 1)^m,), ((H + 1)^m,) with the flat index ``sum_p h_p (H + 1)^(m - 1 - p)`` (h_p
        = H for an absent parameter) -- or None when that table would exceed :attr:`GRID_MAX`.
        The same products, in the same order, and the same divisions as the per-hypothesis path,
        so the columns are identical."""
        if self._grid is None:
            size = (self.H + 1) ** self.m * self.n
            if size > self.GRID_MAX:
                self._grid = False
            else:
                col = self.tabs_t[0]
                for p in range(1, self.m):
                    col = (col[:, None, :] * self.tabs_t[p][None, :, :]).reshape(-1, self.n)
                sc = np.max(np.abs(col), axis=1)
                sc = np.where(np.isfinite(sc) & (sc > 0), sc, 1.0)
                col = col / sc[:, None]
                self._grid = (col, sc, np.all(np.isfinite(col), axis=1))
        return self._grid or None

    def design(self, hyp: np.ndarray, finite: bool = False):
        """Per-series design (S, n, 1 + k) with unit-max columns, column scales (S, 1 + k), k;
        with ``finite``, also (S,) whether each design is finite everywhere.

        All hypotheses in ``hyp`` (S, K, m) must use the same number k of monomial slots, stored
        first.
        """
        S, K, m = hyp.shape
        used = np.any(hyp >= 0, axis=2)  # (S, K)
        k = int(used[0].sum()) if S else 0
        Dt = np.empty((1 + k, S, self.n))  # column-major storage: D[:, :, i] is contiguous
        Dt[0] = 1.0                         # the constant; every term column is written below
        scale = np.ones((S, 1 + k))
        grid = self._grid_table()
        if grid is not None:
            cols, scs, fin = grid
            ok = np.ones(S, dtype=bool)
            for t in range(k):
                h = hyp[:, t, :].astype(np.intp)
                idx = np.where(h[:, 0] < 0, self.H, h[:, 0])
                for p in range(1, m):
                    idx = idx * (self.H + 1) + np.where(h[:, p] < 0, self.H, h[:, p])
                np.take(cols, idx, axis=0, out=Dt[1 + t])
                scale[:, 1 + t] = scs[idx]
                ok &= fin[idx]
            D = Dt.transpose(1, 2, 0)
            return (D, scale, k, ok) if finite else (D, scale, k)
        for t in range(k):
            col = None
            for p in range(m):
                v = self.tabs_t[p][hyp[:, t, p]]  # (S, n)
                col = v if col is None else col * v
            sc = np.max(np.abs(col), axis=1)
            sc = np.where(np.isfinite(sc) & (sc > 0), sc, 1.0)
            np.divide(col, sc[:, None], out=Dt[1 + t])
            scale[:, 1 + t] = sc
        D = Dt.transpose(1, 2, 0)
        return (D, scale, k, np.all(np.isfinite(D), axis=(1, 2))) if finite else (D, scale, k)


def _terms_of(hyp: np.ndarray) -> int:
    return int(np.any(hyp >= 0, axis=1).sum())


# ---------------------------------------------------------------------------------------------
# per-chunk state
# ---------------------------------------------------------------------------------------------
def noise_scale(y: np.ndarray, X: np.ndarray | None = None, lines: Sequence | None = None) -> np.ndarray:
    """The noise scale of each mean in ``y`` ((S, n), rows normalised by their largest |mean|):
    every fit weighs a mean by ``count / scale^2``.

    Noise is relative to the value (timer and counter noise grow with the quantity), except for a
    dip: a mean below ``DIP`` times what its two nearest neighbours on a line of ``X`` (``lines``:
    per parameter, index arrays of points with the other parameters fixed) say by log-log
    interpolation -- or extrapolation at the ends, bounded by the neighbours' level -- gets the
    scale of that reference plus its shortfall (``2 ref - |y|``: a zero weighs a quarter of its
    neighbours).  Without this a zero byte count at one scale or a 0.018 s wait
    among seconds carries up to 1e6 times the weight of the other points and pins the model to
    itself (issue 16).  Smooth series, however steep, are unchanged.  ``FLOOR`` (relative to the
    largest |mean|) remains for series that are all near zero."""
    a = np.abs(y)
    ref = np.zeros_like(a)
    if X is not None and lines is not None:
        ref = np.full(a.shape, np.inf)
        for p, plines in enumerate(lines):
            for idx in plines:
                x = X[idx, p]
                order = np.argsort(x, kind="stable")
                idx, x = idx[order], x[order]
                if len(idx) < 3 or np.any(np.diff(x) <= 0):
                    continue
                lx = np.log(x) if np.all(x > 0) else x
                k = len(idx)
                for j in range(k):
                    u, v = (1, 2) if j == 0 else ((k - 2, k - 3) if j == k - 1 else (j - 1, j + 1))
                    ya, yb = a[:, idx[u]], a[:, idx[v]]
                    pos = (ya > 0) & (yb > 0)
                    la, lb = np.log(np.where(pos, ya, 1.0)), np.log(np.where(pos, yb, 1.0))
                    t = (lx[j] - lx[u]) / (lx[v] - lx[u])
                    with np.errstate(over="ignore"):
                        r = np.where(pos, np.exp(np.clip(la + t * (lb - la), -700, 700)), 0.0)
                    r = np.minimum(r, np.maximum(ya, yb))
                    ref[:, idx[j]] = np.minimum(ref[:, idx[j]], r)
        ref = np.where(np.isfinite(ref), ref, 0.0)
    return np.maximum(np.where(a < DIP * ref, 2 * ref - a, a), FLOOR)


#: noise model "mixed": the absolute part of the repetition variance ``a^2 + b^2 mu^2`` is used only
#: when the likelihood ratio against the purely relative model ``b^2 mu^2`` (gamma likelihood of the
#: within-point variances) exceeds this (the 5% point of chi-square with 1 degree of freedom; on the
#: boundary a = 0 about 2.5% of purely relative series pass by chance; 6.63 changed no real-data
#: prediction, 2.71 cost the synthetic sets a little: bench/README.md "Weights") ...
ABS_LR = 3.84
#: ... and the series has at least this many degrees of freedom of pure error
ABS_MIN_DOF = 4
#: noise model "mixed", series with fewer than ``ABS_MIN_DOF`` degrees of freedom of pure error
#: (single runs, or one size repeated): the absolute part's variance is this times the relative
#: part's at the series' median |mean| (equal parts there).  Nothing in the data tells the parts
#: apart; measured on real data (single-run LULESH, CUBE and MPI splits: overall median 5.9% ->
#: 5.4%, p90 50.9% -> 48.3%; RAJAPerf, one size run twice: median 1.0% -> 0.9%) and on synthetic
#: single-run sets (purely relative noise by construction: sp-1rep median 7.2% -> 7.5%),
#: bench/README.md "Weights"
NOREP_ABS = 1.0
_ABS_ITER = 8         # iterations of the variance-model fit (iteratively reweighted least squares)


def absolute_noise(f: np.ndarray, count: np.ndarray, ssd: np.ndarray) -> np.ndarray:
    """Per series, the absolute part of the repetition noise relative to the relative part:
    ``c2 = a^2 / b^2`` of the variance model ``var_i = a^2 + b^2 mu_i^2`` fitted to the
    within-point variances ``ssd_i / (count_i - 1)`` (maximum likelihood: each is ``var_i / d_i``
    times a chi-square with ``d_i = count_i - 1`` degrees of freedom), with ``mu_i`` the noise scale
    ``f`` of the point (the normalised mean, dips lifted: :func:`noise_scale`).  0 where the series
    has no repetitions, fewer than ``ABS_MIN_DOF`` degrees of freedom, or the absolute part does not
    improve the likelihood by ``ABS_LR`` (purely relative noise keeps exactly today's weights);
    ``inf`` for purely absolute noise.  ``f``, ``ssd`` in the same normalised units, (S, n).
    With ``c2 > 0`` the fit's noise (``Model.noise``) is the relative standard deviation at the
    series' largest mean; intervals scale it with the value, which beyond the data (larger values)
    overstates the variance ``b^2 (c2 + mu^2)`` slightly rather than understating it."""
    d = np.maximum(count - 1.0, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        s2 = np.where(d > 0, ssd / np.where(d > 0, d, 1.0), 0.0)
    mu2 = f * f
    D = _rowsum(d)
    pos = _rowsum(d * s2) > 0
    c2 = np.zeros(len(f))
    rows = np.nonzero(pos & (D >= ABS_MIN_DOF))[0]
    if len(rows) == 0:
        return c2
    # the fit below in (point, series) layout: every operation runs along the series (an (S, n)
    # broadcast of per-series values runs one short inner loop per series); the same floats
    d, s2, mu2, D = d[rows].T.copy(), s2[rows].T.copy(), mu2[rows].T.copy(), D[rows]
    # relative only: b^2 = mean of s2 / mu2 (closed form)
    b0 = _rowsum((d * s2 / mu2).T) / D
    A, B = np.zeros(len(rows)), b0.copy()
    for _ in range(_ABS_ITER):
        v = np.maximum(A + B * mu2, 1e-300)
        # a variance model near 0 (repetitions that agree to ~1e-150) squares to 0: its weights
        # and sums go inf/NaN and the rows take the boundary below (``bad``), silently
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            w = d / (v * v)
            # weighted least squares of s2 on (1, mu2)
            wm = w * mu2
            s00, s01, s11 = _rowsum(w.T), _rowsum(wm.T), _rowsum((wm * mu2).T)
            t0, t1 = _rowsum((w * s2).T), _rowsum((wm * s2).T)
            det = s00 * s11 - s01 * s01
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            An = (s11 * t0 - s01 * t1) / det
            Bn = (s00 * t1 - s01 * t0) / det
            # on the boundary: one part only
            Aonly = t0 / s00
            Bonly = t1 / s11
        bad = ~(np.isfinite(An) & np.isfinite(Bn)) | (An < 0) | (Bn < 0)
        use_b = bad & (Bn >= 0) | (An < 0)
        A = np.where(bad, np.where(use_b, 0.0, np.maximum(Aonly, 0.0)), An)
        B = np.where(bad, np.where(use_b, np.maximum(Bonly, 0.0), 0.0), Bn)
    def nll(v):
        v = np.maximum(v, 1e-300)
        return _rowsum((d * (np.log(v) + s2 / v)).T)
    lr = nll(b0 * mu2) - nll(A + B * mu2)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(B > 0, A / np.where(B > 0, B, 1.0), np.inf)
    c2[rows] = np.where((lr > ABS_LR) & (A > 0), r, 0.0)
    return c2


#: :attr:`FitOptions.hetero`: level of Bartlett's test of equal relative variances across points
HETERO_LEVEL = 1e-3


def point_variance_ratio(mean: np.ndarray, count: np.ndarray, ssd: np.ndarray) -> np.ndarray:
    """Per series and point ((S, n) arrays), the ratio of the point's relative noise variance to the
    series' pooled one (1 where the noise is taken as even).  Points with >= 2 repetitions give
    ``s_i^2 = ssd_i / (d_i mean_i^2)`` (``d_i = count_i - 1``); where Bartlett's test of equal
    variances over those points (>= 3 of them) rejects at :data:`HETERO_LEVEL`, each is shrunk toward
    the pooled ``s^2`` by its degrees of freedom (empirical Bayes, Smyth 2004: ``(d_i s_i^2 + d0 s^2)
    / (d_i + d0)``, ``d0`` from the excess spread of ``log s_i^2`` over its chi-square sampling
    spread); points without repetitions keep the pooled variance."""
    from scipy.special import digamma, polygamma
    from scipy.stats import chi2
    S, n = mean.shape
    r = np.ones((S, n))
    d = np.maximum(count - 1.0, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        s2 = np.where((d > 0) & (mean != 0), ssd / np.where(d > 0, d, 1.0) / np.where(mean != 0, mean, 1.0) ** 2, np.nan)
    for s in range(S):
        ok = np.isfinite(s2[s]) & (s2[s] > 0)
        k = int(ok.sum())
        if k < 3:
            continue
        di, si = d[s, ok], s2[s, ok]
        D = di.sum()
        sp = float(np.sum(di * si) / D)
        B = (D * math.log(sp) - np.sum(di * np.log(si))) / (1 + (np.sum(1 / di) - 1 / D) / (3 * (k - 1)))
        if not chi2.sf(B, k - 1) < HETERO_LEVEL:
            continue
        e = np.log(si) - digamma(di / 2) + np.log(di / 2)
        excess = float(np.var(e, ddof=1) - np.mean(polygamma(1, di / 2)))
        if excess <= 0:
            continue
        # trigamma(d0 / 2) = excess (Newton on y = d0 / 2, Smyth's starting point)
        y = 0.5 + 1 / excess
        for _ in range(50):
            step = float((polygamma(1, y) - excess) / polygamma(2, y))
            y = max(y - step, 1e-6)
            if abs(step) < 1e-8 * y:
                break
        d0 = 2 * float(y)
        # prior variance: the pooled one (Smyth's exp(mean e + digamma - log) is its log-scale analogue)
        v = (di * si + d0 * sp) / (di + d0)
        r[s, ok] = v / sp
    return r


#: :func:`_rowsum` adds up to this many values per row one by one (as numpy's sum does; from 8
#: values on numpy sums pairwise)
_FOLD_MAX = 7


def _rowsum(x: np.ndarray) -> np.ndarray:
    """``np.sum(x, axis=1)`` of a float64 or float32 (S, n) array: the floats numpy's sum gives for
    the array in C order, faster for short rows (numpy reduces each short row in its own inner
    loop): for n <= :data:`_FOLD_MAX` numpy adds a row's values in order starting from +0.0 (-0.0
    sums to +0.0), which adding the columns in order reproduces (tests/test_fit_models.py checks
    it); longer rows are summed by numpy.  Either way a row's sum does not depend on the other
    rows (unlike ``x @ ones``: :func:`_rowdot`)."""
    n = x.shape[1]
    if n > _FOLD_MAX or n == 0 or x.dtype not in (np.float64, np.float32):
        return np.sum(np.ascontiguousarray(x), axis=1)
    out = x[:, 0] + 0.0
    for j in range(1, n):
        out += x[:, j]
    return out


#: repetitions agree when their relative standard deviation is below this (identical values up to
#: the rounding of their mean and sum of squares)
EXACT_RSD = 1e-9


def exact_series(mean: np.ndarray, count: np.ndarray, ssd: np.ndarray, marked: bool) -> np.ndarray:
    """Per series ((S, n) arrays; points with count 0 are not measured), whether its values are
    exact -- free of measurement noise: ``marked`` (the metric's provenance, :attr:`FitOptions.exact`)
    and no measured point whose repetitions differ (repetitions that vary overrule the mark).
    Repetitions that agree do not make a series exact on their own: PMPI's neighbour-exchange call
    counts (identical repetitions, a step function of the process grid) extrapolate worse under
    these weights (bench/README.md "Exact measurements")."""
    measured = count > 0
    agree = ssd <= count * (EXACT_RSD * np.abs(mean)) ** 2
    return marked & ~np.any(measured & ~agree, axis=1)


def noise_free(mean: np.ndarray, count: np.ndarray, ssd: np.ndarray, marked: bool) -> np.ndarray:
    """Per series ((S, n) arrays), whether its measurements carry no noise at all: exact
    (:func:`exact_series`, the metric's provenance) or measured at least twice at every measured
    point with repetitions that agree (PMPI's call and byte counts).  Whatever the model misses of
    such a series is the model's own error, not noise: its coefficients' uncertainty comes from the
    jackknife (:func:`_jackknife_cov`); its weights follow :func:`exact_series` alone."""
    measured = count > 0
    repeated = np.all(~measured | (count >= 2), axis=1) & np.any(measured, axis=1)
    return exact_series(mean, count, ssd, marked | repeated)


def exact_scale(f: np.ndarray, count: np.ndarray, X: np.ndarray | None) -> np.ndarray:
    """The noise scale of the means of exact series (:func:`exact_series`; ``f`` (S, n) their
    relative scales, :func:`noise_scale`): no measurement noise is left, only the model's error, and
    what an extrapolation needs is the model right where it goes, at the largest parameter values.
    So a mean's scale is its own value or, when larger, the value at the measured point nearest the
    largest parameter values (the corner of the design: the largest sum of per-parameter ranks): a
    growing series weighs its means alike (its largest values, nearest the target, lead in absolute
    terms), a falling one keeps relative weights (equal weights would lean on its largest values, at
    the smallest parameter values, farthest from the target).  Without coordinates: equal weights."""
    measured = count > 0
    if X is None:
        near = np.argmax(np.where(measured, f, -np.inf), axis=1)
    else:
        rank = sum(np.unique(X[:, p], return_inverse=True)[1].reshape(-1) for p in range(X.shape[1]))
        near = np.argmax(np.where(measured, rank[None, :].astype(float), -np.inf), axis=1)
    return np.maximum(f, f[np.arange(len(f)), near][:, None])


class _Chunk:
    """Normalised data of a chunk of series and the running top-M hypotheses.  ``model_error``
    (S,) bool: series weighed for the model's error as exact series are, whose searches take the
    sign rule of :func:`_outgrown` (:func:`_model_error`)."""

    def __init__(self, mean, count, ssd, K, m, M, X=None, lines=None, noise="relative", exact=False,
                 model_error=None, hetero=False):
        S, n = mean.shape
        self.n = n
        scale = np.max(np.abs(mean), axis=1)
        self.zero = scale == 0
        self.scale = np.where(self.zero, 1.0, scale)
        self.y = mean / self.scale[:, None]
        self.f = noise_scale(self.y, X, lines)
        #: (S, n) the means whose noise scale is lifted above their own value (dips, the floor)
        self.lifted = self.f > np.abs(self.y)
        #: (S,) series weighed for relative noise (not exact, not for the model's error)
        self.noisy = np.ones(S, dtype=bool)
        self.c2 = np.zeros(S)
        if noise == "mixed":
            # var_i ~ a^2 + b^2 f_i^2, normalised so that f stays 1 at the largest mean
            self.c2 = absolute_noise(self.f, count, ssd / self.scale[:, None] ** 2)
            # (absolute_noise returned 0 for these: too few degrees of freedom to estimate)
            norep = (np.sum(np.maximum(count - 1, 0), axis=1) < ABS_MIN_DOF) & np.any(count > 0, axis=1)
            if norep.any():
                # the median of the measured points (held-out ones have count 0: _rerun)
                med = np.nanmedian(np.where(count[norep] > 0, self.f[norep], np.nan), axis=1)
                self.c2[norep] = NOREP_ABS * med * med
            ex = exact_series(mean, count, ssd, exact)
            if model_error is not None:
                ex = ex | model_error
            if ex.any():
                self.f[ex] = exact_scale(self.f[ex], count[ex], X)
                self.c2[ex] = 0.0
            self.noisy = ~ex
            fin = np.isfinite(self.c2)[:, None]
            c2 = np.where(fin, self.c2[:, None], 0.0)
            self.f = np.where(fin, np.sqrt((self.f ** 2 + c2) / (1 + c2)), 1.0)
        if hetero:
            # each point's own relative noise, shrunk toward the series' pooled one
            r = point_variance_ratio(mean, count, ssd)
            self.f = self.f * np.sqrt(np.where(self.noisy[:, None], r, 1.0))
        self.count = count.astype(float)
        self.free = noise_free(mean, count, ssd, exact)
        self.w = self.count / self.f ** 2
        self.pe_point = ssd / (self.scale[:, None] ** 2 * self.f ** 2)
        self.ss_pe = np.sum(self.pe_point, axis=1)
        self.N = np.sum(self.count, axis=1)
        self.best_crit = np.full((S, M), np.inf)
        self.best_hyp = np.full((S, M, K, m), -1, dtype=np.int32)
        #: (S,) series whose negative growing terms may stand under a product that outgrows them
        #: (:func:`_outgrown`)
        self.relax = np.zeros(S, dtype=bool) if model_error is None else np.asarray(model_error, dtype=bool)

    def criterion(self, fit: _WLS, k: int, pen: float, selection: str) -> np.ndarray:
        return self.criterion_err(fit.press if selection == "cv" else fit.rss, k, pen, selection)

    def criterion_err(self, err: np.ndarray, k: int, pen: float, selection: str) -> np.ndarray:
        """Criterion from a deviance ``err`` of shape (S,) or (S, B)."""
        N, pe = (self.N, self.ss_pe) if err.ndim == 1 else (self.N[:, None], self.ss_pe[:, None])
        with np.errstate(divide="ignore", invalid="ignore"):
            crit = N * np.log((pe + err) / N + TINY) + pen
        if selection == "bic":
            crit = crit + (k + 1) * np.log(N)
        return np.where(np.isfinite(crit), crit, np.inf)

    def merge_constant(self, selection: str):
        """Offer the constant model to every series."""
        fit = _wls(np.ones((self.n, 1)), self.y, self.w)
        K, m = self.best_hyp.shape[2:]
        self.merge(slice(None), self.criterion(fit, 0, 0.0, selection)[:, None], np.full((1, K, m), -1, dtype=np.int32))

    def merge(self, rows, crit: np.ndarray, hyp: np.ndarray):
        """Offer (R, B) criteria of hypotheses ``hyp`` ((B, K, m) shared or (R, B, K, m)) to the
        series ``rows`` (R of them: an index array or a slice)."""
        M = self.best_crit.shape[1]
        allc = np.concatenate([self.best_crit[rows], crit], axis=1)
        R = len(allc)
        if hyp.ndim == 3:
            hyp = np.broadcast_to(hyp[None], (R, *hyp.shape))
        allh = np.concatenate([self.best_hyp[rows], hyp], axis=1)
        idx = _stable_top(allc, M)
        self.best_crit[rows] = _take2(allc, _rows_of(idx), idx)
        self.best_hyp[rows] = _take2(allh, _rows_of(idx), idx)


def _stable_top(a: np.ndarray, M: int) -> np.ndarray:
    """``np.argsort(a, axis=1, kind="stable")[:, :M]`` of a float64 (S, W) array, the same indices
    faster for wide rows: numpy's stable sort runs a merge sort per row; here each value's
    order-preserving 64-bit integer, its low ``ceil(log2 W)`` bits replaced by its column, goes
    through numpy's vectorised integer sort.  Those keys are distinct and ordered by (value,
    column) -- the stable order -- except within a class of values that share a key once the low
    bits are dropped (equal values, or a relative difference below ~1e-14).  Rows where two of the
    first M + 1 share a class (other than +inf's, which holds equal values only), and rows with a
    NaN, are sorted by argsort instead.  Narrow rows are sorted by argsort (faster there)."""
    S, W = a.shape
    M = min(M, W)
    if W < _TOP_MIN_WIDTH:
        return np.argsort(a, axis=1, kind="stable")[:, :M]
    bits = (W - 1).bit_length()
    low = np.int64((1 << bits) - 1)
    k = (a + 0.0).view(np.int64)                      # + 0.0: -0.0 becomes +0.0 (equal values)
    k ^= (k >> 63) & np.int64(0x7FFF_FFFF_FFFF_FFFF)   # negative floats: order reversed
    k &= ~low
    k |= np.arange(W, dtype=np.int64)
    k.sort(axis=1)
    top = k[:, :M + 1]
    pre = top >> bits
    same = (pre[:, 1:] == pre[:, :-1]) & (pre[:, 1:] != np.float64(np.inf).view(np.int64) >> bits)
    bad = np.nonzero(np.any(same, axis=1))[0]
    if np.isnan(a).any():
        bad = np.union1d(bad, np.nonzero(np.isnan(a).any(axis=1))[0])
    idx = top[:, :M] & low
    if len(bad):
        idx[bad] = np.argsort(a[bad], axis=1, kind="stable")[:, :M]
    return idx


#: :func:`_stable_top` sorts rows at least this wide by integer keys (measured at 51 values per row,
#: the single-parameter search's merges: half the time of argsort; slower below ~25 values)
_TOP_MIN_WIDTH = 32


def _take2(a: np.ndarray, i, j) -> np.ndarray:
    """``a[i, j]`` for ``a`` (S, W, ...) and broadcastable index arrays ``i``, ``j`` (non-negative):
    the same elements by one ``take`` along the flattened first two axes (numpy's fancy indexing
    copies each trailing block separately: ~20 times slower for (S, W, 2, 2))."""
    S, W = a.shape[:2]
    flat = np.asarray(i) * W + j
    return a.reshape(S * W, *a.shape[2:]).take(flat.ravel(), axis=0).reshape(flat.shape + a.shape[2:])


def _put2(a: np.ndarray, i: np.ndarray, j: np.ndarray, v: np.ndarray):
    """``a[i, j, :v.shape[1], :v.shape[2], ...] = v`` for index arrays ``i``, ``j`` (R,) (non-negative)
    and ``v`` (R, ...) of ``a``'s trailing rank into a C-contiguous ``a``: the same elements written
    through flat element indices (numpy's fancy assignment of each trailing block is several times
    slower)."""
    S, W = a.shape[:2]
    tail, sub = a.shape[2:], v.shape[1:]
    assert len(sub) == len(tail)
    cell = np.ravel_multi_index(np.indices(sub).reshape(len(sub), -1), tail) if sub else np.zeros(1, dtype=np.intp)
    flat = ((np.asarray(i) * W + j) * math.prod(tail))[:, None] + cell
    np.put(a, flat.ravel(), v.ravel())     # in place (``reshape(copy=False)`` needs numpy 2.1)


def _rows_of(idx: np.ndarray) -> np.ndarray:
    """Row numbers (S, 1) to pair with column indices ``idx`` (S, M) in :func:`_take2`."""
    return np.arange(len(idx))[:, None]


def _used_first(hyp: np.ndarray) -> np.ndarray:
    """Hypotheses (R, K, m) with their used monomial slots first (order kept), as
    :meth:`_Space.design` needs them."""
    if hyp.shape[1] == 1:
        return hyp
    order = np.argsort(~np.any(hyp >= 0, axis=2), axis=1, kind="stable")
    return np.take_along_axis(hyp, order[:, :, None], axis=1)


# ---------------------------------------------------------------------------------------------
# the search
# ---------------------------------------------------------------------------------------------
class _LazyAlternatives(Sequence):
    """(weight, Model) pairs of a series' competing hypotheses, built on first use (most models
    are only printed, and building thousands of small objects costs more than fitting)."""

    __slots__ = ("_group", "_s", "_idx", "_items")

    def __init__(self, group: "GroupFit", s: int, idx: list[int]):
        self._group, self._s, self._idx, self._items = group, s, idx, None

    def _get(self) -> tuple:
        if self._items is None:
            g = self._group
            self._items = tuple((float(g.weight[self._s, a]), g._one(self._s, a, None)) for a in self._idx)
            self._group = None
        return self._items

    def __len__(self) -> int:
        return len(self._idx)

    def pending(self) -> tuple | None:
        """(group, row, hypothesis indices) while not built, else None: batch consumers
        (:func:`perfcast.fit.model.predict_many`) read the group's arrays instead of building
        models."""
        return None if self._items is not None else (self._group, self._s, self._idx)

    def __getitem__(self, i):
        return self._get()[i]

    def __iter__(self):
        return iter(self._get())

    def __eq__(self, other) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, (tuple, Sequence)) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._get())

    def __repr__(self) -> str:
        return repr(self._get())


def _unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct rows of ``a`` (n, m) -- small integers >= -1, e.g. block numbers -- in
    lexicographic order, each row's number among them): ``np.unique(a, axis=0,
    return_inverse=True)`` from one integer key per row (numpy's row-wise unique sorts a
    structured view, ~10x slower)."""
    a = np.asarray(a, dtype=np.int64)
    if a.shape[1] == 0 or not len(a):
        pats, inv = np.unique(a, axis=0, return_inverse=True)
        return pats, np.asarray(inv).ravel()
    lo = int(a.min())
    base = int(a.max()) - lo + 1
    if base ** a.shape[1] >= 2 ** 62:
        pats, inv = np.unique(a, axis=0, return_inverse=True)
        return pats, np.asarray(inv).ravel()
    key = np.zeros(len(a), dtype=np.int64)
    for j in range(a.shape[1]):          # the first column most significant: lexicographic order
        key = key * base + (a[:, j] - lo)
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return a[first], np.asarray(inv).ravel()


@dataclass
class GroupFit:
    """Array results for S series on one point set (models are built on demand)."""

    parameters: tuple[str, ...]
    blocks: tuple[Block, ...]
    n_points: int
    status: np.ndarray          # (S,) 0 ok, 1 insufficient
    needed: np.ndarray          # (S,)
    hyp: np.ndarray             # (S, M, K, m) best first
    weight: np.ndarray          # (S, M) model weights (0 = unused slot)
    coef: np.ndarray            # (S, M, 1 + K) constant first, absolute units
    cov: np.ndarray             # (S, M, 1 + K, 1 + K)
    quality: np.ndarray         # (S, 8): rss, adj_r2, smape, cv, noise, n_points, n_obs, criterion
    noise: np.ndarray           # (S,) relative std of one observation
    dof: np.ndarray             # (S,)
    notes: tuple[str, ...] = ()
    drift: np.ndarray | None = None   # (S,) relative misspecification per doubling (leave-largest-out)
    upper: tuple[float, ...] | None = None  # largest measured value per parameter
    growth: float = 2.0         # drift's growth exponent (sd ~ doublings^growth), one per group
    #: degrees of freedom of the drift: one per series (:func:`_pool_drift`) or one for the group
    drift_dof: int | np.ndarray = 0
    shape: NoiseShape = NORMAL  # noise shape estimated from the repetitions (beta 2: normal path)
    #: per series, the measured lines with their own level (:mod:`perfcast.fit.lines`, the
    #: models' ``lines``); None = none in the group
    lines: tuple | None = None
    #: (parameter, start, bound): the group's series do not run below ``start`` of the process count
    #: (0 there; :func:`not_running_first`), their law holds from ``start`` on; None = everywhere.
    #: A fourth element True: a line through that 0 from ``start`` on (``Model.zero_below``)
    zero_below: tuple | None = None
    #: (parameter, start): the group's series run only below ``start`` (0 from there on:
    #: :func:`runs_only_first`), their law holds below it; None = everywhere
    zero_from: tuple | None = None
    #: (S, m) per series the drift along each parameter (``Model.drift_along``): a law through
    #: every mean of a grid with three values of some parameter (:func:`_own_three_point_doubt`);
    #: NaN rows (and None: every row) carry ``drift`` along every parameter
    drift_along: np.ndarray | None = None
    #: the number of measured values of each parameter when no point could be held out to check
    #: the laws (:func:`fit_group`'s three-point case): their drift is then the exponent doubt of
    #: :func:`_three_point_doubt`, not a measured miss (``Model.unchecked_on``,
    #: :func:`exponent_doubt_note`); None otherwise
    unchecked_on: tuple[int, ...] | None = None
    #: the measured points no other dominates, where the largest values' corner was not measured
    #: (``Model.frontier``, :func:`perfcast.fit.model.measured_frontier`); None: a full grid
    frontier: tuple[tuple[float, ...], ...] | None = None

    def __len__(self) -> int:
        return len(self.status)

    def _rows(self, s: int) -> tuple:
        """Flat Python lists of the best hypothesis' arrays for rows from ``s`` on (one
        ``tolist`` per block is much cheaper than per-row conversions when models are built in
        order; flat lists of numbers create no containers, so they do not trigger the garbage
        collector).  Blocks of ``_ROW_BLOCK`` rows for sequential access, one row otherwise."""
        c = self.__dict__.get("_row_cache")
        if c is not None and c[1] <= s < c[0]:
            self.__dict__["_row_last"] = s
            return c
        seq = self.__dict__.get("_row_last", -2) == s - 1
        lo, hi = s, min(len(self.status), s + (_ROW_BLOCK if seq else 1))
        drift = self.drift[lo:hi].tolist() if self.drift is not None else [0.0] * (hi - lo)
        c = (hi, lo, self.hyp[lo:hi, 0].ravel().tolist(), self.coef[lo:hi, 0].ravel().tolist(),
             self.cov[lo:hi, 0].ravel().tolist(), self.noise[lo:hi].tolist(), self.dof[lo:hi].tolist(),
             drift, self.weight[lo:hi].ravel().tolist(), self.quality[lo:hi].ravel().tolist(),
             self.status[lo:hi].tolist())
        self.__dict__["_row_cache"] = c
        self.__dict__["_row_last"] = s
        return c

    def model(self, s: int) -> Model:
        c = self._rows(s)
        j = s - c[1]
        q = c[9][8 * j:8 * j + 8]
        fin = math.isfinite
        quality = Quality(q[0], q[1], q[2], q[3] if fin(q[3]) else None, q[4] if fin(q[4]) else None,
                          int(q[5]), int(q[6]), q[7] if fin(q[7]) else None)
        if c[10][j] != 0:
            return Model(self.parameters, float(self.coef[s, 0, 0]), (), quality, None, 0.0, 0, (),
                         "insufficient", int(self.needed[s]), self.notes, zero_below=self.zero_below,
                         zero_from=self.zero_from)
        _, M, K, m = self.hyp.shape
        wts = c[8][M * j:M * j + M]
        idx = [a for a in range(1, M) if wts[a] >= MIN_WEIGHT]
        k1 = self.coef.shape[2]
        mdl = self._build(c[2][K * m * j:K * m * (j + 1)], K, m, c[3][k1 * j:k1 * (j + 1)],
                          c[4][k1 * k1 * j:k1 * k1 * (j + 1)], k1, quality, c[5][j], c[6][j], c[7][j],
                          _LazyAlternatives(self, s, idx) if idx else (), self._drift_dof(s))
        if self.lines is not None and self.lines[s]:
            mdl = dataclasses.replace(mdl, lines=self.lines[s])
        if self.zero_below is not None or self.zero_from is not None:
            mdl = dataclasses.replace(mdl, zero_below=self.zero_below, zero_from=self.zero_from)
        along = self.along(s)
        if along is not None:
            mdl = dataclasses.replace(mdl, drift_along=along)
        if self.unchecked_on is not None and mdl.drift:
            mdl = dataclasses.replace(mdl, unchecked_on=self.unchecked_on)
        return mdl

    def along(self, s: int) -> tuple[float, ...] | None:
        """Series ``s``'s drift along each parameter (``Model.drift_along``), None when ``drift``
        holds along every one."""
        a = self.drift_along
        if a is None or np.isnan(a[s]).all():
            return None
        return tuple(float(v) for v in a[s])

    def _drift_dof(self, s: int) -> int:
        d = self.drift_dof
        return int(d) if np.ndim(d) == 0 else int(d[s])

    def _build(self, h, K, m, coef, cv, k1, quality, noise, dof, drift, alternatives, drift_dof) -> Model:
        terms = []
        params, blocks = self.parameters, self.blocks
        if m == 1:
            for b in h:
                if b >= 0:
                    blk = blocks[b]
                    terms.append(Term(coef[1 + len(terms)], ((params[0], blk[0], blk[1]),)))
        else:
            for t in range(K):
                factors = tuple((params[p], blocks[b][0], blocks[b][1])
                                for p, b in enumerate(h[t * m:(t + 1) * m]) if b >= 0)
                if factors:
                    terms.append(Term(coef[1 + len(terms)], factors))
        k = 1 + len(terms)
        cov = tuple([tuple(cv[i * k1:i * k1 + k]) for i in range(k)])
        return Model(self.parameters, coef[0], tuple(terms), quality, cov, noise, dof, alternatives,
                     "ok", 0, self.notes, drift, self.upper, self.growth, drift_dof, self.shape.beta,
                     frontier=self.frontier)

    def _one(self, s: int, a: int, quality) -> Model:
        _, K, m = self.hyp.shape[1:]
        k1 = self.coef.shape[2]
        drift = 0.0 if (self.drift is None or a) else float(self.drift[s])
        return self._build(self.hyp[s, a].ravel().tolist(), K, m, self.coef[s, a].tolist(), self.cov[s, a].ravel().tolist(),
                           k1, quality, float(self.noise[s]), int(self.dof[s]), drift, (), self._drift_dof(s))

    def models(self) -> list[Model]:
        return [self.model(s) for s in range(len(self))]

    def hypotheses_design(self, rows: np.ndarray, hyps: np.ndarray, n: int, term_values) -> tuple:
        """(weights, D, coef) of hypotheses ``hyps`` of series ``rows`` (equal-length arrays) at
        ``n`` points, laid out as :func:`perfcast.fit.model.predict_many` lays out models (column
        0 the constant, then the terms in order): what the models :meth:`_one` builds would give,
        without building them.  ``term_values(factors)``: a term's values at the points."""
        A = len(rows)
        H = self.hyp[rows, hyps]                      # (A, K, m)
        C = self.coef[rows, hyps]                     # (A, 1 + K)
        used = (H >= 0).any(axis=2)                   # (A, K)
        col = np.cumsum(used, axis=1)                 # the column of each used term
        D = np.zeros((A, n, C.shape[1]))
        D[:, :, 0] = 1.0
        coef = np.zeros((A, C.shape[1]))
        coef[:, 0] = C[:, 0]
        params, blocks = self.parameters, self.blocks
        for t in range(H.shape[1]):
            sel = np.nonzero(used[:, t])[0]
            if not len(sel):
                continue
            pats, inv = _unique_rows(H[sel, t, :])
            for u, pat in enumerate(pats.tolist()):
                rows_u = sel[inv == u]
                factors = tuple((params[p], blocks[b][0], blocks[b][1]) for p, b in enumerate(pat) if b >= 0)
                D[rows_u, :, col[rows_u, t]] = term_values(factors)
            coef[sel, col[sel, t]] = C[sel, col[sel, t]]
        return self.weight[rows, hyps].astype(float), D, coef


#: a series' best hypothesis misses its measured means by more than this many times the variance of
#: their repetitions (lack-of-fit mean square over pure-error mean square: the misfit's standard
#: deviation 10x the noise's) -- model error, not measurement noise, is then what the residuals
#: are, and the series is searched again weighed for the model's error (:func:`_model_error`).
#: Relearn's big timers: 756-1565; every other real series with repetitions <= 7.3; no series of
#: the synthetic sets (bench/README.md "Model error beyond the noise")
MODEL_ERROR = 100.0
#: ... and that search's model is kept unless, with the line levels of each model taken out, it
#: describes the measurements significantly worse under the noise weights (F test at this level)
MODEL_ERROR_LEVEL = 0.05


def _fitted(space: _Space, y: np.ndarray, w: np.ndarray, hyp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values at the points (R, n) of hypotheses ``hyp`` (R, K, m) fitted to ``y`` with weights
    ``w`` (R, n), and their coefficient counts (R,)."""
    R, n = y.shape
    out = np.full((R, n), np.nan)
    kk = np.ones(R, dtype=int)
    nt = np.sum(np.any(hyp >= 0, axis=2), axis=1)
    for k in np.unique(nt):
        sel = np.nonzero(nt == k)[0]
        if k == 0:
            fit = _wls(np.ones((n, 1)), y[sel], w[sel])
        else:
            D, _, _ = space.design(_used_first(hyp[sel]))
            fit = _wls(D, y[sel], w[sel], leverage=False)
        out[sel] = y[sel] - fit.resid
        kk[sel] = k + 1
    return out, kk


def _lined_misfit(X: np.ndarray, y: np.ndarray, w: np.ndarray, fitted: np.ndarray, kk: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Weighted residual sum of squares (weights ``w``, (R, n)) of what the user gets from a fit at
    its measured points ``X``: ``fitted`` times the levels of its measured lines
    (:func:`perfcast.fit.lines.line_effects`, applied as :func:`~perfcast.fit.lines.line_log_factors`
    applies them), and its degrees of freedom (points - coefficients ``kk`` - line levels)."""
    from .lines import line_effects, line_log_factors

    n = X.shape[0]
    cols = [X[:, p] for p in range(X.shape[1])]
    eff = line_effects(X, y, fitted)
    lf = np.stack([line_log_factors(e, cols) if e else np.zeros(n) for e in eff])
    r = y - fitted * np.exp(lf)
    return _rowsum(w * r * r), n - kk - np.array([len(e) for e in eff], dtype=int)


def _model_error(space: _Space, ch: _Chunk, opt: FitOptions, K: int, m: int, M: int, mean, count, ssd,
                 X, chunk_lines, search_lines, usable) -> np.ndarray:
    """Series whose measurements are far more precise than any hypothesis fits them: weighed for
    the model's error, as exact series are.

    The noise weights rank the points by how precisely each was measured; that is right while
    the residuals are noise.  When the best hypothesis misses the means by more than
    ``MODEL_ERROR`` times their repetitions' variance (lack-of-fit over pure-error mean square,
    with >= ``ABS_MIN_DOF`` degrees of freedom of pure error: the repetitions must tell how large
    the noise is), the residuals are the model's error, and what an extrapolation needs is the
    model right where it goes: such a series is searched again with :func:`exact_scale`'s
    weights (a growing series weighs its means alike) and with the sign rule of :func:`_outgrown`
    (``n (a log2(p) + b)``, b < 0: a law whose negative term its product outgrows).  Relearn's
    main() (repetitions 0.31% apart, misfit ~10%) then takes ``c + a log2(p) n + b n``.

    A misfit can also be a step -- one line of points at its own level (:mod:`perfcast.fit.lines`)
    -- which equal weights would chase with the function, bending it away from the small values
    until the line rule no longer sees the step.  So the new model is kept only if, the line
    levels of each model taken out (what the user gets: formula x line factor), it describes the
    measurements under the noise weights not significantly worse than the old one (F test of the
    two weighted residual mean squares, ``MODEL_ERROR_LEVEL``); else the series keeps its search.

    Replaces the kept series' weights, pure error and hypotheses in ``ch``; returns them (S,)."""
    S = len(ch.y)
    out = np.zeros(S, dtype=bool)
    if opt.noise != "mixed":        # "relative": the user's choice of weights, as for exact series
        return out
    meas = ch.count > 0
    npts = meas.sum(axis=1)
    dof_pe = ch.N - npts
    cand = np.nonzero((dof_pe >= ABS_MIN_DOF) & (ch.ss_pe > 0) & ~ch.zero & np.isfinite(ch.best_crit[:, 0]))[0]
    if not len(cand):
        return out
    fit0, kk = _fitted(space, ch.y[cand], ch.w[cand], ch.best_hyp[cand, 0])
    rss = _rowsum(ch.w[cand] * (ch.y[cand] - fit0) ** 2)
    dof = npts[cand] - kk
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (rss / np.maximum(dof, 1)) / (ch.ss_pe[cand] / dof_pe[cand])
    pick = (ratio > MODEL_ERROR) & (dof > 0)
    flag = cand[pick]
    if not len(flag):
        return out
    fit0, kk = fit0[pick], kk[pick]
    ch2 = _Chunk(mean[flag], count[flag], ssd[flag], K, m, M, X, chunk_lines, opt.noise, opt.exact, hetero=opt.hetero,
                 model_error=np.ones(len(flag), dtype=bool))
    ch2.merge_constant(opt.selection)
    if m == 1:
        _search_single(space, ch2, opt, K)
    else:
        _search_multi(space, ch2, opt, K, search_lines, usable)
    new, k_new = _fitted(space, ch.y[flag], ch2.w, ch2.best_hyp[:, 0])
    keep = np.isfinite(ch2.best_crit[:, 0])
    # series by series (grouped by their measured points): each one's result is its own
    pats, inv = np.unique(meas[flag], axis=0, return_inverse=True)
    for u, pat in enumerate(pats):
        rows = np.nonzero(np.asarray(inv).ravel() == u)[0]
        y, w = ch.y[flag[rows]][:, pat], ch.w[flag[rows]][:, pat]
        r_old, d_old = _lined_misfit(X[pat], y, w, fit0[rows][:, pat], kk[rows])
        r_new, d_new = _lined_misfit(X[pat], y, w, new[rows][:, pat], k_new[rows])
        ok = (d_old > 0) & (d_new > 0) & (r_old > 0)
        d_old, d_new = np.maximum(d_old, 1), np.maximum(d_new, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            F = (r_new / d_new) / np.where(ok, r_old / d_old, 1.0)
        p_value = f_sf_decided(d_new, d_old, np.where(np.isfinite(F), F, np.inf), MODEL_ERROR_LEVEL)
        keep[rows] &= ok & (p_value >= MODEL_ERROR_LEVEL)
    sel = flag[keep]
    for name in ("f", "c2", "w", "pe_point", "ss_pe", "best_crit", "best_hyp", "relax", "lifted", "noisy"):
        getattr(ch, name)[sel] = getattr(ch2, name)[keep]
    out[sel] = True
    return out


def _fit_chunk(state: tuple, lo: int, hi: int) -> tuple:
    """Search, fit and leave-largest-out check of the series ``lo:hi`` of a group (``state``: what
    :func:`fit_group` fixed for the whole group); the chunk's rows of the group's outputs."""
    space, mean, count, ssd, opt, K, m, M, X, lines, usable, hold, growth, shape, reps = state
    n = X.shape[0]
    c = hi - lo
    out = (np.full((c, M, K, m), -1, dtype=np.int32), np.full((c, M), np.inf), np.zeros((c, M, 1 + K)),
           np.zeros((c, M, 1 + K, 1 + K)), np.full((c, 8), np.nan), np.zeros(c), np.zeros(c, dtype=np.int64))
    ch = _Chunk(mean[lo:hi], count[lo:hi], ssd[lo:hi], K, m, M, X, lines, opt.noise, opt.exact, hetero=opt.hetero)
    ch.merge_constant(opt.selection)
    if usable and n >= 3:
        if m == 1:
            _search_single(space, ch, opt, K)
        else:
            _search_multi(space, ch, opt, K, lines, usable)
        _model_error(space, ch, opt, K, m, M, mean[lo:hi], count[lo:hi], ssd[lo:hi], X, lines, lines, usable)
    coef_over = ls = None
    if shape.adaptive:
        coef_over, ls = _adaptive(space, ch, reps[lo:hi], shape.beta, opt.nonnegative)
    _finish(space, ch, opt, 0, c, *out, coef_over, gn_efficiency(shape.beta) if shape.adaptive else 1.0, ls)
    check = (None, None, None)
    if hold is not None and usable and n >= 3:
        check = _drift(space, mean[lo:hi], count[lo:hi], ssd[lo:hi], opt, K, M, usable, hold, out[5] ** 2, growth)
    return (*out, *check)


#: the group being fitted by forked workers (:func:`_chunks`): set in the parent before the fork,
#: inherited by the children, so the arrays are not pickled
_FORKED: tuple | None = None


def _forked_chunk(bounds: tuple[int, int]) -> tuple:
    return _fit_chunk(_FORKED, *bounds)


def _balanced(S: int, pieces: int, workers: int) -> list[tuple[int, int]]:
    """``S`` series cut for ``workers`` processes: ``pieces`` (at least) rounded up to a multiple of
    ``workers``, of equal size (within one), so that every worker fits as many series (4,096-series
    chunks of 30,000 series gave one of two workers 16,384, the other 13,616, and the group waited
    for the first).  No piece is larger than the ``FitOptions.chunk`` the ``pieces`` came from; a
    series' results do not depend on how the group is cut (``FitOptions.chunk``)."""
    n = -(-pieces // workers) * workers
    edges = [S * i // n for i in range(n + 1)]
    return [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]


def _chunks(state: tuple, S: int):
    """(lo, hi, outputs) of every chunk of ``FitOptions.chunk`` series, in order; with
    ``FitOptions.workers`` > 1 and several chunks, computed by this process and ``workers - 1``
    forked ones (where the platform forks; else here) in equal chunks, as many for each
    (:func:`_balanced`); with
    ``FitOptions.dask``, on that Dask cluster."""
    global _FORKED
    opt = state[4]
    bounds = [(lo, min(S, lo + opt.chunk)) for lo in range(0, S, opt.chunk)]
    if opt.dask is not None and S:
        from .cluster import map_chunks

        yield from map_chunks(opt.dask, _fit_chunk, state, bounds)
        return
    workers = min(opt.workers, len(bounds))
    if workers > 1:
        bounds = _balanced(S, len(bounds), workers)
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        if "fork" in mp.get_all_start_methods():
            # this process fits the first share itself while ``workers - 1`` forked ones fit the
            # rest (submitted first): one fork, and one share of results through a pipe, fewer
            own = len(bounds) // workers
            _FORKED = state
            try:
                with ProcessPoolExecutor(workers - 1, mp_context=mp.get_context("fork")) as pool:
                    rest = pool.map(_forked_chunk, bounds[own:])
                    for lo, hi in bounds[:own]:
                        yield lo, hi, _fit_chunk(state, lo, hi)
                    for b, res in zip(bounds[own:], rest):
                        yield (*b, res)
                return
            finally:
                _FORKED = None
    for lo, hi in bounds:
        yield lo, hi, _fit_chunk(state, lo, hi)


def fit_group(X: np.ndarray, mean: np.ndarray, count: np.ndarray, ssd: np.ndarray,
              parameters: Sequence[str], options: FitOptions | None = None, progress=None,
              reps: np.ndarray | None = None, *, shape: NoiseShape | None = None,
              check: bool = True, pooled: bool = True) -> GroupFit:
    """Fit all series measured on one point set.

    ``X`` (n, m) coordinates; ``mean``/``count``/``ssd`` (S, n): per point mean, number of
    repetitions (>= 1) and sum of squared deviations from the mean.  ``reps`` (S, n, R), optional:
    the raw repetitions (NaN-padded); with them the noise shape is estimated and, when it is not
    normal, the top hypotheses are re-ranked and refitted under the matching likelihood
    (:mod:`perfcast.fit.shape`).

    A group fitted in parts (:mod:`perfcast.pipeline`: a file too large for memory, fitted a block
    of series at a time) gives each part the group's noise ``shape`` (:func:`estimate_shape` of
    the whole group's repetitions, from :func:`perfcast.fit.shape.shape_sums` of every part); each
    series' fit depends on nothing else of the group but the drift.  ``check=False`` skips the
    leave-largest-out check, whose only product is the drift of the intervals (``drift`` NaN: intervals from such models are NaN): for
    outputs without intervals, the same models otherwise.

    ``pooled=False``: the rows are unrelated series fitted together for speed (the pieces of many
    segmented models, :mod:`perfcast.fit.segmented`): what a group estimates from all its series
    (the growth of the drift, the pooled drift, the three-point doubt) is what each series gives
    alone, so every row's model is the one a call with that row alone makes.
    """
    opt = (options or FitOptions()).for_kind(None)   # no metric kind known here: "auto" = no constraint
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    n, m = X.shape
    # row-major (a copy only when given otherwise): numpy reduces a row-major and a column-major
    # array's rows in different orders, and a chunk's fits must not depend on how it was cut
    mean = np.ascontiguousarray(np.atleast_2d(np.asarray(mean, dtype=float)))
    count = np.ascontiguousarray(np.atleast_2d(np.asarray(count, dtype=float)))
    ssd = np.ascontiguousarray(np.atleast_2d(np.asarray(ssd, dtype=float)))
    S = mean.shape[0]
    if mean.shape != (S, n) or count.shape != (S, n) or ssd.shape != (S, n):
        raise PerfcastError(f"series arrays must be (series, {n} points)")
    if len(parameters) != m:
        raise PerfcastError(f"{len(parameters)} parameter names for {m} coordinate columns")
    blocks = opt.blocks()
    space = _Space(X, blocks)
    # parameters that cannot be modelled: fewer than 3 distinct values on some line
    lines = [parameter_lines(X, p) for p in range(m)]
    usable = [p for p in range(m) if lines[p]]
    # parameters varied together along one path (no line in any): a law in one of them
    # (:mod:`perfcast.fit.path`), not "no effect" and not the mean
    path = measured_path(X) if (not usable and n >= 2) else None
    if path is not None and len(path) == n and n >= 3:
        return _path_fit(X, mean, count, ssd, parameters, options, progress, reps, shape, check)
    # one parameter at two values, the others on lines: a law in it through the two levels, not
    # "no effect" (:func:`_two_level_fit`)
    two_level = _two_level_axis(X, lines) if path is None else None
    if two_level is not None:
        return _two_level_fit(X, two_level, mean, count, ssd, parameters, options, progress, shape, check, pooled)
    # two points that differ in one parameter: a law in it (:func:`_two_points`), not "no effect";
    # two points of a path: a law in its first varying parameter
    two = _two_point_axis(X) if (n == 2 and not usable) else None
    if two is None and path is not None and n == 2:
        two = varying_parameters(X)[0]
    notes = tuple(no_line_note(parameters[p]) for p in range(m)
                  if path is None and not lines[p] and p != two and len(np.unique(X[:, p])) > 1)
    if path is not None and n == 2:
        notes = (path_note(parameters, varying_parameters(X), n),)
    # multi-parameter: two monomials, or one per usable parameter (a+b+c, :func:`_forms`)
    K = (opt.max_terms if m == 1 else min(max(2, len(usable)), 2 ** len(usable) - 1)) if usable else 1
    K = max(K, 1)
    M = max(1, opt.alternatives + 1)

    out_hyp = np.full((S, M, K, m), -1, dtype=np.int32)
    out_crit = np.full((S, M), np.inf)
    out_coef = np.zeros((S, M, 1 + K))
    out_cov = np.zeros((S, M, 1 + K, 1 + K))
    out_q = np.full((S, 8), np.nan)
    out_noise = np.zeros(S)
    out_dof = np.zeros(S, dtype=np.int64)
    out_drift = np.zeros(S)
    miss = np.full(S, np.nan)      # leave-largest-out: squared misses and what intervals allowed
    allowed = np.full(S, np.nan)
    hold = _holdout(X, usable) if check else None
    signed = None if hold is None else np.full((S, int((~hold[0]).sum())), np.nan)
    growth = GROWTH[0]
    if hold is not None and m == 1 and n >= 3 and pooled:
        # single-parameter groups only: on 5x5 multi-parameter sets the second rerun cost 15-30% of
        # the modelling time and estimated no growth beyond the quadratic floor (bench/README.md)
        growth = _growth(space, mean, count, ssd, opt, K, M, usable)
    status = np.zeros(S, dtype=np.int8)
    needed = np.zeros(S, dtype=np.int64)
    given, shape = shape, NORMAL
    if reps is not None and opt.likelihood == "auto" and usable and n >= 3:
        reps = np.ascontiguousarray(reps, dtype=float)
        if reps.ndim != 3 or reps.shape[:2] != (S, n):
            raise PerfcastError(f"repetitions must be (series, {n} points, repetitions)")
        shape = estimate_shape(reps) if given is None else given

    state = (space, mean, count, ssd, opt, K, m, M, X, lines, usable, hold, growth, shape, reps)
    outs = (out_hyp, out_crit, out_coef, out_cov, out_q, out_noise, out_dof, miss, allowed, signed)
    for lo, hi, res in _chunks(state, S):
        for out, r in zip(outs, res):
            if out is not None and r is not None:
                out[lo:hi] = r
        if progress is not None:
            progress(hi, S)
    drift_dof = 0
    drift_along = None
    unchecked_on = None
    if hold is not None and usable and n >= 3:
        out_drift[:], drift_dof = _pool_drift(miss, allowed, signed, pool=pooled)
    if two is not None:
        # two points: a one-term law through them (never their mean), with a wide interval
        blocks, growth = _two_points(X, two, mean, count, ssd, blocks, out_hyp, out_coef, out_cov, out_q,
                                     out_noise, out_dof, out_drift, out_crit)
    elif n < 3 or not usable:
        # no scaling model can be chosen: report the repetition-weighted mean as the value
        status[:] = 1
        needed[:] = 2 if n < 2 else 3   # 2 points give a law when they differ in one parameter
        out_hyp[:] = -1
        out_crit[:, 1:] = np.inf
        out_coef[:] = 0.0
        out_coef[:, 0, 0] = np.sum(mean * count, axis=1) / np.sum(count, axis=1)
        out_cov[:] = 0.0
        Ntot = np.sum(count, axis=1)
        out_q[:] = np.nan
        out_q[:, 5], out_q[:, 6] = n, Ntot
    unchecked = check and two is None and hold is None and usable and n >= 3
    if unchecked:
        # too few points to hold the largest out and check the chosen form against it (3 values of
        # a parameter): beyond the data the interval carries the two-point exponent doubt instead
        # of collapsing to the (possibly zero) noise of deterministic counts
        doubt = _three_point_doubt(X, mean) if pooled else TWO_POINT_EXPONENT_SD
        out_drift[:] = doubt * math.log(2)
        # a law through every measured mean (to round-off) at four or more values of some parameter
        # (there, a law through the first three that also meets the fourth: a check passed) is not
        # given the group's doubt where its own measurements bend less: their own three-point
        # doubt, never above the group's.  Three values of every parameter keep the group's doubt:
        # three deterministic points alone do not narrow an extrapolation (issue 16)
        # Per parameter: the doubt along a parameter is what its own lines support (a parameter
        # at three values keeps the group's: :func:`_own_three_point_doubt`), so a law
        # extrapolated along its three-value parameter is not narrowed by its four-value one's
        # straight lines (``drift_along``; ``drift`` the largest of them)
        through = np.nan_to_num(out_q[:, 2], nan=np.inf) <= EXACT_FIT_SMAPE
        through &= any(len(np.unique(X[:, p])) >= 4 for p in usable)
        if through.any():
            own = _own_three_point_doubt(X, mean[through], usable)
            along = np.where(np.isnan(own), doubt, np.fmin(own, doubt)) * math.log(2)
            out_drift[through] = along.max(axis=1)
            if m > 1:
                drift_along = np.full((S, m), np.nan)
                drift_along[through] = along
        growth = 1.0
        unchecked_on = tuple(len(np.unique(X[:, p])) for p in range(m))
    # an all-zero series is exactly the constant 0, however few points
    allzero = np.all(mean == 0, axis=1)
    status[allzero & (n >= 1)] = 0
    out_drift[status != 0] = 0.0
    if drift_along is not None:
        drift_along[status != 0] = np.nan
    with np.errstate(invalid="ignore", over="ignore"):
        w = np.exp(-(out_crit - out_crit[:, :1]) / 2)
    w = np.where(np.isfinite(out_crit) & np.isfinite(w), w, 0.0)
    w[:, 0] = np.where(np.isfinite(out_crit[:, 0]), w[:, 0], 1.0)
    w = w / np.maximum(w.sum(axis=1, keepdims=True), 1e-300)
    upper = tuple(float(v) for v in np.max(X, axis=0)) if n else None
    if two is not None or unchecked:
        drift_dof = TWO_POINT_DRIFT_DOF
    if not check:
        # no check, no drift: unknown, so an interval made from these models is NaN, never one
        # that silently leaves the extrapolation drift out
        out_drift[:] = np.nan
        drift_along = None
        unchecked_on = None
    return GroupFit(tuple(parameters), blocks, n, status, needed, out_hyp, w, out_coef, out_cov, out_q,
                    out_noise, out_dof, notes, out_drift, upper, growth, drift_dof, shape,
                    drift_along=drift_along, unchecked_on=unchecked_on, frontier=measured_frontier(X) if n else None)


def _path_fit(X, mean, count, ssd, parameters, options, progress, reps, shape, check) -> GroupFit:
    """:func:`fit_group` of points along one path (:mod:`perfcast.fit.path`, >= 3 points): the
    series fitted in each varying parameter alone, the laws of all of them ranked by the search's
    criterion; per series the best is the model, the next ones (in any parameter) its competing
    hypotheses; noise, quality and drift are those of the best law's fit."""
    n, m = X.shape
    varying = varying_parameters(X)
    def part(i):      # progress over the fits in every parameter
        return None if progress is None else (lambda done, total: progress(
            (i * total + done) // len(varying), total))

    subs = [fit_group(X[:, [p]], mean, count, ssd, [parameters[p]], options, part(i), reps, shape=shape,
                      check=check) for i, p in enumerate(varying)]
    S, M = subs[0].weight.shape
    K = max(g.hyp.shape[2] for g in subs)
    blocks = subs[0].blocks
    if any(g.blocks != blocks for g in subs):
        raise PerfcastError("internal: the fits along a path have different term blocks")
    P = len(subs)
    crit = np.full((S, P * M), np.inf)
    hyp = np.full((S, P * M, K, m), -1, dtype=np.int32)
    coef = np.zeros((S, P * M, 1 + K))
    cov = np.zeros((S, P * M, 1 + K, 1 + K))
    for i, (g, p) in enumerate(zip(subs, varying)):
        k = g.hyp.shape[2]
        c0 = g.quality[:, 7]
        with np.errstate(divide="ignore", invalid="ignore"):
            c = c0[:, None] - 2 * np.log(g.weight / g.weight[:, :1])
        c = np.where((g.weight > 0) & np.isfinite(c), c, np.inf)
        # a series without a criterion (the constant 0 of an all-zero series): the first fit's
        c[:, 0] = np.where(np.isfinite(c0), c[:, 0], 0.0 if i == 0 else np.inf)
        crit[:, i * M:(i + 1) * M] = c
        hyp[:, i * M:(i + 1) * M, :k, p] = g.hyp[..., 0]
        coef[:, i * M:(i + 1) * M, :1 + k] = g.coef
        cov[:, i * M:(i + 1) * M, :1 + k, :1 + k] = g.cov
    order = np.argsort(crit, axis=1, kind="stable")[:, :M]
    crit = np.take_along_axis(crit, order, axis=1)
    hyp = np.take_along_axis(hyp, order[:, :, None, None], axis=1)
    coef = np.take_along_axis(coef, order[:, :, None], axis=1)
    cov = np.take_along_axis(cov, order[:, :, None, None], axis=1)
    with np.errstate(invalid="ignore", over="ignore"):
        w = np.exp(-(crit - crit[:, :1]) / 2)
    w = np.where(np.isfinite(crit) & np.isfinite(w), w, 0.0)
    w[:, 0] = 1.0
    w = w / w.sum(axis=1, keepdims=True)
    win = order[:, 0] // M
    rows = np.arange(S)

    def pick(attr):
        return np.stack([getattr(g, attr) for g in subs])[win, rows]

    drift = None if subs[0].drift is None else pick("drift")
    drift_dof = np.array([g._drift_dof(s) for g, s in zip((subs[i] for i in win.tolist()), range(S))],
                         dtype=np.int64) if S else 0
    # no point of the path could be held out to check the laws (three points: every fit along it is
    # fit_group's three-point case): their drift is the exponent doubt, counted per parameter as
    # fit_group counts it (Model.unchecked_on, exponent_doubt_note)
    unchecked_on = (tuple(len(np.unique(X[:, p])) for p in range(m))
                    if all(g.unchecked_on is not None for g in subs) else None)
    return GroupFit(tuple(parameters), blocks, n, pick("status"), pick("needed"), hyp, w, coef, cov,
                    pick("quality"), pick("noise"), pick("dof"), (path_note(parameters, varying, n),), drift,
                    tuple(float(v) for v in np.max(X, axis=0)), max(g.growth for g in subs), drift_dof,
                    subs[0].shape, unchecked_on=unchecked_on, frontier=measured_frontier(X))


#: two-point models: standard deviation of the exponent (a quarter power: the spacing of the
#: PMNF grid; two points cannot tell the form, so the interval carries this much doubt per
#: doubling beyond the data) and the degrees of freedom of that doubt
TWO_POINT_EXPONENT_SD = 0.25
TWO_POINT_DRIFT_DOF = 2
#: exponents within this distance of a fraction with denominator <= 4 are printed as that fraction
_SNAP = 0.02


#: a group's own three-point doubt is estimated only from this many series (else the default)
THREE_POINT_SAMPLE = 20
#: and never below this (exponent standard deviation): the doubt may shrink, not vanish
THREE_POINT_MIN_SD = 0.02
#: the share of the measured change of exponent (second interval against first) taken as the
#: doubt of the fitted exponent beyond the data.  Below 1 for two reasons: with independent local
#: exponents the fitted one (from both intervals) misses the next interval's by sqrt(3)/2 = 0.87
#: of the change's standard deviation, and the change also holds the noise of the three means,
#: which the interval already carries (noise and coefficient variance).  ln 2 = 0.69: the size
#: the intervals had since the three-point doubt was introduced (then by a slip of units: the
#: change was measured in log units per doubling, then multiplied by ln 2 as an exponent); on
#: rajaperf-n, the one real split it reaches, 0.69 covers 59 of 63 held-out means (93.7 %), 0.87
#: and 1 cover 60 (95.2 %, above the 80-95 % kept by bench/README.md's rule)
THREE_POINT_SHARE = math.log(2)


def _three_point_doubt(X: np.ndarray, mean: np.ndarray) -> float:
    """Exponent doubt (standard deviation of the exponent, as :data:`TWO_POINT_EXPONENT_SD`) of a
    single-parameter group measured at three values, where no fit can be checked against a
    held-out point: pooled over the group's series, how far the exponent from the second mean to
    the third differs from the exponent through the first two (RMS, each series' miss clipped at
    the group's 95 % quantile, as in :func:`_growth`), times :data:`THREE_POINT_SHARE`.  Beyond
    the data the interval carries a relative drift of ``doubt * ln 2`` per doubling (an exponent
    off by ``doubt`` misses by a factor ``2^doubt`` per doubling): a third mean 10 % off the law
    through the first two, one doubling on, changes the exponent by log2 1.1, the doubt is
    ``0.69 * log2 1.1`` and the drift ``0.69 * ln 1.1`` per doubling.  RAJAPerf's kernels at 1M,
    2M, 4M elements miss by ~1 %, a noisy group by tens of percent.  Groups of fewer than
    :data:`THREE_POINT_SAMPLE` usable series, or with more parameters, keep
    :data:`TWO_POINT_EXPONENT_SD`."""
    if X.shape[1] != 1 or X.shape[0] != 3:
        return TWO_POINT_EXPONENT_SD
    x = X[:, 0]
    order = np.argsort(x)
    x, y = x[order], mean[:, order]
    if not np.all(x > 0) or len(np.unique(x)) != 3:
        return TWO_POINT_EXPONENT_SD
    ok = np.all(y > 0, axis=1)
    if ok.sum() < THREE_POINT_SAMPLE:
        return TWO_POINT_EXPONENT_SD
    ly = np.log(y[ok])
    e = (ly[:, 1] - ly[:, 0]) / math.log(x[1] / x[0])
    # the third point's own exponent from the second less the first two's (exponent units)
    miss = (ly[:, 2] - ly[:, 1]) / math.log(x[2] / x[1]) - e
    miss = np.minimum(np.abs(miss), np.quantile(np.abs(miss), 0.95))
    return float(max(THREE_POINT_SHARE * math.sqrt(float(np.mean(miss ** 2))), THREE_POINT_MIN_SD))


def exponent_doubt_note(parameter: str, values: int, drift: float, exact: bool) -> str:
    """The note of a prediction beyond the largest measured ``parameter`` by a law fitted where no
    measured point could be held out to check it (``Model.unchecked_on``: ``values`` measured
    values of ``parameter``): its interval there is the exponent doubt :func:`fit_group` gives
    such laws (``drift``, relative standard deviation per doubling along ``parameter``), not the
    noise; ``exact``: the law goes through every measured mean (:data:`EXACT_FIT_SMAPE`)."""
    head = "exact at every measured point; " if exact else ""
    return (f"{head}beyond the measured {parameter} the interval is the doubt of an exponent fitted on {values} "
            f"values of {parameter} ({100 * drift:.0f}% per doubling), not noise: no measured point could be "
            f"held out to check the law")


#: a law whose sMAPE at the measured means is at most this (percent: a relative miss ~1e-9 per
#: point, round-off) goes through every measurement (:func:`_own_three_point_doubt`)
EXACT_FIT_SMAPE = 100 * EXACT_RSD


def _own_three_point_doubt(X: np.ndarray, mean: np.ndarray, usable: Sequence[int]) -> np.ndarray:
    """Per series (``mean`` (S, n)) and parameter, (S, m): the exponent doubt of
    :func:`_three_point_doubt` from the series' own measurements along that parameter, for series
    whose law goes through every measured mean (where a group's doubt would come from other
    series' misses): on every line of the parameter (the others fixed, :func:`parameter_lines`)
    the exponent from the second-largest value to the largest less the one from the third-largest
    to the second (positive values only), RMS over its lines, times :data:`THREE_POINT_SHARE`,
    never below :data:`THREE_POINT_MIN_SD` (the doubt may shrink, not vanish: three deterministic
    points do not make an extrapolation certain).  Only a usable parameter measured at four or more
    values has a doubt of its own (there a law through the first three that also meets the fourth
    passed a check); NaN for the others (three values: their extrapolation keeps the group's doubt,
    issue 16) and where no line has three positive values."""
    S = mean.shape[0]
    out = np.full((S, X.shape[1]), np.nan)
    for p in usable:
        if len(np.unique(X[:, p])) < 4:
            continue
        tot = np.zeros(S)
        cnt = np.zeros(S)
        for ix in parameter_lines(X, p):
            x = X[ix, p]
            top = np.unique(x)[-3:]
            if top[0] <= 0:
                continue
            pick = [ix[np.flatnonzero(x == v)[0]] for v in top]
            y = mean[:, pick]
            ok = np.all(y > 0, axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                ly = np.log(np.where(ok[:, None], y, 1.0))
                e1 = (ly[:, 1] - ly[:, 0]) / math.log(top[1] / top[0])
                e2 = (ly[:, 2] - ly[:, 1]) / math.log(top[2] / top[1])
            tot += np.where(ok, (e2 - e1) ** 2, 0.0)
            cnt += ok
        with np.errstate(invalid="ignore", divide="ignore"):
            rms = np.sqrt(tot / cnt)
        out[:, p] = np.where(cnt > 0, np.maximum(THREE_POINT_SHARE * rms, THREE_POINT_MIN_SD), np.nan)
    return out


def _two_point_axis(X: np.ndarray) -> int | None:
    """The one parameter whose value differs between the two points of ``X`` (others equal), or None."""
    differ = [p for p in range(X.shape[1]) if X[0, p] != X[1, p]]
    return differ[0] if len(differ) == 1 else None


def _exponent(e: float) -> Fraction:
    """A readable exponent near ``e``: a fraction of denominator <= 4 when within ``_SNAP``, else the
    nearest of denominator <= 12 (at most half the gap between its neighbours: 1/176 between 4/11
    and 3/8, 1/24 near 0; small against the exponent's doubt, TWO_POINT_EXPONENT_SD)."""
    simple = Fraction(e).limit_denominator(4)
    if abs(float(simple) - e) <= _SNAP:
        return simple
    return Fraction(e).limit_denominator(12)


def _two_points(X, p, mean, count, ssd, blocks, out_hyp, out_coef, out_cov, out_q, out_noise, out_dof,
                out_drift, out_crit):
    """Models of series measured at two points that differ in parameter ``p``: ``c * x^e`` through
    both means when they are positive (e from their log ratio), else the straight line through
    them.  Coefficients fit the means in relative terms (weights r / mean^2, as every fit here);
    the noise comes from the repetitions.  Beyond the data the interval grows like an exponent
    uncertain by :data:`TWO_POINT_EXPONENT_SD` (the drift, ``sd * ln 2`` per doubling, linear
    growth, :data:`TWO_POINT_DRIFT_DOF` degrees of freedom).  Returns (blocks, growth) of the group:
    the exponents found are added to its blocks."""
    x = X[:, p]
    S = mean.shape[0]
    blocks = list(blocks)
    index = {b: i for i, b in enumerate(blocks)}

    def block(e):
        return _block_of(blocks, index, e)

    N = count.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = np.all(mean > 0, axis=1) & np.all(x > 0)
        rel_pe = np.where(mean != 0, ssd / np.where(mean != 0, mean, 1.0) ** 2, 0.0).sum(axis=1)
    s2 = np.where(N > 2, rel_pe / np.maximum(N - 2, 1), 0.0)
    for s in range(S):
        y, r = mean[s], count[s]
        if not np.any(y != 0):
            continue                                   # all zero: the constant 0 (set by the caller)
        if pos[s]:
            e = _exponent(math.log(y[1] / y[0]) / math.log(x[1] / x[0]))
            if e == 0:
                const, coef, hyp = float(np.sum(r * y) / np.sum(r)), 0.0, -1
            else:
                b = x ** float(e)
                w = r / y ** 2
                const, coef, hyp = 0.0, float(np.sum(w * b * y) / np.sum(w * b * b)), block(e)
        else:
            slope = (y[1] - y[0]) / (x[1] - x[0])
            const, coef, hyp = float(y[0] - slope * x[0]), float(slope), block(Fraction(1))
        out_hyp[s] = -1
        if hyp >= 0:
            out_hyp[s, 0, 0, p] = hyp
        out_crit[s, 0], out_crit[s, 1:] = 0.0, np.inf
        out_coef[s] = 0.0
        out_coef[s, 0, 0] = const
        if hyp >= 0:
            out_coef[s, 0, 1] = coef
        out_cov[s] = 0.0
        fitted = const + (coef * x ** float(blocks[hyp][0]) if hyp >= 0 else 0.0)
        smape = smape_percent(fitted, y)
        noise = 100 * math.sqrt(s2[s]) if N[s] > 2 else np.nan
        out_q[s] = [float(np.sum((fitted - y) ** 2)), np.nan, smape, np.nan, noise, 2, N[s], np.nan]
        out_noise[s] = math.sqrt(s2[s])
        out_dof[s] = max(int(N[s]) - 2, 1)
        out_drift[s] = TWO_POINT_EXPONENT_SD * math.log(2)
    return tuple(blocks), 1.0


def _holdout(X: np.ndarray, usable: Sequence[int], drop: int = 1):
    """Points for the leave-largest-out check: (keep mask (n,), doublings (h,) of each held-out point
    beyond the kept ones), or None.  Held out: the points at one of the ``drop`` largest values of
    some usable parameter; kept points must still span >= 3 distinct values of every usable
    parameter."""
    if not usable or np.any(X[:, usable] <= 0):
        return None
    held = np.zeros(len(X), dtype=bool)
    for p in usable:
        vals = np.unique(X[:, p])
        if len(vals) <= drop:
            return None
        held |= X[:, p] > vals[-1 - drop]
    keep = ~held
    if keep.sum() < 3 or any(len(np.unique(X[keep, p])) < 3 for p in usable):
        return None
    top = np.array([X[keep, p].max() for p in usable])
    dist = np.max(np.log2(X[held][:, usable] / top), axis=1)
    if np.any(dist <= 0):
        return None
    return keep, dist



def two_level_note(parameter: str, lo: float, hi: float) -> str:
    """The note (and warning, :func:`perfcast.analysis.fitcheck.fit_warnings`) of a model whose law
    in ``parameter`` rests on its two measured values (``lo``, ``hi``; :func:`_two_level_fit`): a
    one-term power law, not "no effect"."""
    return (f"2 values of {parameter} only ({lo:g}, {hi:g}): its law is one power of {parameter} through the "
            f"two levels of the lines along it; its form cannot be checked, and its interval assumes an exponent "
            f"uncertain by {TWO_POINT_EXPONENT_SD:g}; measure a third value of {parameter} to choose the form")


#: a series whose values at p = 1 are on average below (1 / 2)^NOT_RUNNING_EXPONENT of its values at
#: p = 2 (the same other coordinates; (x1 / x2)^4 for other second process counts) does not run at
#: p = 1 (:func:`not_running_first`): a law through both would be steeper than p^4, which no
#: scaling law of a routine that runs at both is (the search's exponents of p go to 3; measured,
#: the laws from p = 1 to 2 of MPI counts summed over ranks are p^1 to p^3: MPI calls of miniFE and
#: examples/jacobi 2.96, Barrier time 2.72) while routines without work at p = 1 give p^4.4 to
#: p^11 and exact zeros (halo exchange time of examples/jacobi 7.3, its Allreduce time 5.8,
#: miniFE's bytes 9.6, Allreduce time 9.9, Reduce time 4.9; MPI_Bcast bytes received 0 at p = 1).
#: Not the kernels' near-zero share (:data:`perfcast.analysis.kernels.NEAR_ZERO`, 1/100), and not meant
#: to be: that one cuts a leading run of near-zero values from a kernel's log-log slope along any
#: parameter, against the power law of the points after them; this one decides whether p = 1 alone
#: is a regime of its own, against the raw values at the next process count x2 (a two-level design
#: has no law to extrapolate back), so its bound is an exponent -- the steepest growth a scaling law
#: between the two counts may have -- and the share it gives depends on x2 (1/16 at 2, 1/256 at 4)
NOT_RUNNING_EXPONENT = 4
#: a law fitted through a series' zeros at p = 1 whose values there are within this share of the
#: values at the next process count passes through them: the zeros are points of the law
#: (:func:`not_running_first`; round-off of an exact fit is ~1e-15)
ON_LAW = 1e-6


def not_running_first(X: np.ndarray, mean: np.ndarray, parameters: Sequence[str], count: np.ndarray | None = None,
                      ssd: np.ndarray | None = None, options: "FitOptions | None" = None) -> tuple | None:
    """The series of ``mean`` (S, n; at the points ``X``) that do not run at p = 1: (which (S,),
    exact (S,): 0 at every point at p = 1, the process count's index, the next measured value x2),
    or None.

    p = 1 is a regime of its own, not a point on a scaling law: a routine that exchanges data
    with neighbours has none there (miniFE's MPI_Irecv: never called; examples/jacobi's halo
    exchange: ~0 s), and a power law through its ~0 there and its value at p = 2 is p^6 to p^10
    (:data:`NOT_RUNNING_EXPONENT`).  The process count is the one parameter named as one
    (:data:`perfcast.scaling.PROC_NAMES`) whose smallest value is 1; every point at p = 1 has a
    point at x2 with the same other coordinates.  A series does not run at p = 1 when its values
    there are >= 0, its values at x2 > 0 and the mean ratio of the pairs (p = 1 over x2) is below
    ``(1 / x2)^NOT_RUNNING_EXPONENT`` (an exact 0 at every point at p = 1 included).  Its law is
    then fitted from x2 on, and its model is 0 below x2 (:func:`zero_below`).

    Except a 0 that is a point of the law: with >= 2 process counts from x2 on (and ``count``,
    ``ssd`` given), a series 0 at every point at p = 1 is fitted on all its points, and when that
    law follows its points (SMAPE within 3x their noise, at least 1%) and passes through the zeros
    (within :data:`ON_LAW` of the values at x2: MPI_Bcast's bytes
    received summed over ranks, 56 (p - 1), measured at p = 1, 2, 4: 0, 56, 168) it keeps p = 1 --
    fitted from p = 2 on, two points gave 18.7 p^(19/12) (502 at p = 8, not 392).  Passing near
    them is not enough: a log2(p) term is 0 at p = 1, so miniFE's MPI_Irecv calls (0, 110-326,
    ... at p = 1, 2, 4) got 1.04 + 13.8 p^(2/3) log2(p)^2 + ..., 1.04 at p = 1, no law of them; a
    step 0, 200, 200, 200 at p = 1, 2, 4, 8 got 85.7 log2(p), through the 0 but not the rest.  A
    series free of noise (:func:`noise_free`) must pass through its points from x2 on too:
    CloverLeaf's MPI_Isend bytes summed over ranks (0, 12800 (n + 5), 25600 n + 256000 at p = 1,
    2, 4 on its 2x1 and 2x2 grids) got 1.307e4 log2(p) n, through the zeros, 0.5% off the rest
    (25% low at p = 8); from p = 2 on, 6400 p n + 96000 p - 128000 is exact."""
    X = np.asarray(X, dtype=float)
    n, m = X.shape
    q = _process_count(X, parameters)
    if q is None:
        return None
    vals = np.unique(X[:, q])
    x2 = float(vals[1])
    others = [k for k in range(m) if k != q]
    at2 = {tuple(X[i, others]): i for i in np.flatnonzero(X[:, q] == x2)}
    lo = np.flatnonzero(X[:, q] == 1)
    hi = [at2.get(tuple(X[i, others]), -1) for i in lo]
    if min(hi) < 0:
        return None
    y1, y2 = mean[:, lo], mean[:, np.array(hi)]
    ok = np.all(y1 >= 0, axis=1) & np.all(y2 > 0, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.mean(np.where(ok[:, None], y1 / np.where(ok[:, None], y2, 1.0), 1.0), axis=1)
    share = x2 ** -float(NOT_RUNNING_EXPONENT)
    which = ok & (ratio < share)
    exact = which & np.all(y1 == 0, axis=1)
    if exact.any() and count is not None and ssd is not None and len(vals) >= 3:
        e = np.flatnonzero(exact)
        g = fit_group(X, mean[e], count[e], ssd[e], parameters, options, check=False)
        good = np.flatnonzero(g.status == 0)
        if len(good):
            cols = {p: X[:, k] for k, p in enumerate(g.parameters)}
            from .model import term_cache, values_of

            with np.errstate(all="ignore"):
                _, D, coef = g.hypotheses_design(good, np.zeros(len(good), dtype=np.int64), n, term_cache(cols))
                f = values_of(D, coef)
                y = mean[e[good]]
                rest = X[:, q] >= x2
                # the law follows its points from x2 on (SMAPE within 3x their noise, >= 1%) ...
                smape = smape_percent(f[:, rest], y[:, rest])
                follows = smape <= np.maximum(1.0, 3.0 * np.nan_to_num(g.quality[good, 4]))
                # ... exactly, for a series free of noise: missing its own exact counts is the law's
                # error, and the law from x2 on (fitted without the zeros) may pass through them
                free = noise_free(y, count[e[good]], ssd[e[good]], bool(getattr(options, "exact", False)))
                off_law = np.any(np.abs(f[:, rest] - y[:, rest]) > ON_LAW * np.abs(y[:, rest]), axis=1)
                follows &= ~(free & off_law)
                # ... and passes through the zeros
                on = follows & np.all(np.abs(f[:, lo]) <= ON_LAW * np.abs(y[:, np.array(hi)]), axis=1)
            which[e[good[on]]] = False
            exact[e[good[on]]] = False
    return (which, exact, q, x2) if which.any() else None


def not_running_note(parameter: str, start: float, bound: float, one_left: bool, line: bool = False) -> str:
    """The note of the models of :func:`not_running_first`'s series (fitted from ``start`` on; their
    model is 0 below it: ``Model.zero_below``).  With one value of ``parameter`` left it begins as
    :func:`two_level_note` does (``2 values of p only (1, 2)``): a warning, its interval carries the
    two-point exponent doubt, and the law beyond ``start`` is a guess: flat in ``parameter``, or
    (``line``: a sum over ranks, :func:`zero_rule_sets`) the line through the 0 at p = 1."""
    why = ("0 in every run there" if bound == 0 else
           f"0 taken: its values there are below 1/{start ** NOT_RUNNING_EXPONENT:g} of those at {parameter} = {start:g}, "
           "its interval up to that share of the law")
    head = f"does not run at {parameter} = 1 ({why}); law from {parameter} = {start:g} on"
    if not one_left:
        return head
    form = (f"flat in {parameter} beyond it" if not line else
            f"a sum over ranks, its value there times ({parameter} - 1){'' if start == 2 else f' / {start - 1:g}'} "
            f"beyond it (the line through "
            f"the 0 at {parameter} = 1)")
    return (f"2 values of {parameter} only (1, {start:g}): {head}, where one value of {parameter} is left: {form}, "
            f"a guess; its interval assumes an exponent uncertain by {TWO_POINT_EXPONENT_SD:g}; "
            f"measure a third value of {parameter} to choose the form")


def zero_below(gf: "GroupFit", parameter: str, start: float, bound: float, line: bool = False) -> "GroupFit":
    """``gf`` (fitted on the points from ``start`` of the process count ``parameter`` on) as the
    group of :func:`not_running_first`'s series: 0 below ``start`` (``zero_below``; ``bound`` the
    upper bound of the interval there as a share of the law's: 0 for series 0 in every run there,
    ``start^-NOT_RUNNING_EXPONENT`` for those whose values there were below it) and the note;
    with one value of ``parameter`` left, the two-point exponent's doubt beyond the data (as
    :func:`_two_level_fit`'s) and, with ``line`` (:func:`zero_rule_sets`), the law times ``(p - 1)
    / (start - 1)`` from ``start`` on (``Model.zero_below``'s fourth element)."""
    k = list(gf.parameters).index(parameter)
    one_left = gf.upper is not None and gf.upper[k] == start
    line = bool(line and one_left)
    zb = (parameter, float(start), float(bound)) + ((True,) if line else ())
    gf = dataclasses.replace(gf, zero_below=zb,
                             notes=tuple(gf.notes) + (not_running_note(parameter, start, bound, one_left, line),))
    if one_left and gf.drift is not None:
        drift = np.where(gf.status == 0, np.maximum(gf.drift, TWO_POINT_EXPONENT_SD * math.log(2)), 0.0)
        # the two-point doubt is the largest any parameter's is (:func:`_own_three_point_doubt`
        # never exceeds it on a multi-parameter grid): one drift along every parameter again
        gf = dataclasses.replace(gf, drift=drift, growth=1.0, drift_dof=TWO_POINT_DRIFT_DOF, drift_along=None)
    return gf


def _process_count(X: np.ndarray, parameters: Sequence[str]) -> int | None:
    """The index of the process count among ``parameters`` -- the one parameter named as one
    (:data:`perfcast.scaling.PROC_NAMES`) -- when its smallest value at the points ``X`` is 1 and it
    has another; None otherwise (the p = 1 rules do not apply)."""
    from ..scaling import PROC_NAMES

    named = [k for k, p in enumerate(parameters) if str(p).lower() in PROC_NAMES]
    if len(named) != 1 or len(X) < 2:
        return None
    vals = np.unique(X[:, named[0]])
    return named[0] if len(vals) >= 2 and vals[0] == 1 else None


def runs_only_first(X: np.ndarray, mean: np.ndarray, parameters: Sequence[str]) -> tuple | None:
    """The series of ``mean`` (S, n; at the points ``X``) that run at p = 1 only: (which (S,), the
    process count's index, the next measured value x2), or None.  Such a series is > 0 at every
    point at p = 1 and exactly 0 at every other point -- measured so, or absent from a profile
    whose absence means "did not run" (:func:`perfcast.experiment.fill_absent_points`): Open MPI's
    ``mca_coll_self_allreduce_intra``, 714 Ir at p = 1 in CoMD's cachegrind profiles, runs on the
    self communicator of a single rank.  Its law is fitted on the points at p = 1 and its model is
    0 [0, 0] from x2 on (``Model.zero_from``); fitted on all points, a PMNF law has no step to 0."""
    X = np.asarray(X, dtype=float)
    q = _process_count(X, parameters)
    if q is None:
        return None
    lo = X[:, q] == 1
    which = np.all(mean[:, lo] > 0, axis=1) & np.all(mean[:, ~lo] == 0, axis=1)
    return (which, q, float(np.unique(X[:, q])[1])) if which.any() else None


def zero_rule_sets(X: np.ndarray, mean: np.ndarray, count: np.ndarray, ssd: np.ndarray, parameters: Sequence[str],
                   options: "FitOptions | None" = None, summed: bool = False) -> list[tuple]:
    """The one place the p = 1 rules split a group of series (``mean``, ``count``, ``ssd`` (S, n)
    at the points ``X``) for fitting: ``[(rows, cols, rule)]`` -- the series (indices into S), the
    points they are fitted on (indices into n) and the rule :func:`apply_zero_rule` puts on their
    fit (``()``: none); sets without series left out, the plain one first.

    * series that do not run at p = 1 (:func:`not_running_first`): fitted from the next process
      count x2 on, 0 below it (``("below", parameter, x2, bound, line)``).  With one process count
      left beyond p = 1 the law in p is a guess; ``summed`` (the metric is a sum over ranks,
      :func:`perfcast.experiment.aggregate_labels`) makes it the line through the 0 at p = 1
      (``line``: its value at x2 times ``(p - 1) / (x2 - 1)``), otherwise it is flat.  Measured at p
      = 1, 2, 4 (bench/data/jacobi-p, examples/jacobi's 2-D halo exchange, 50 iterations), the
      MPI_Isend calls summed over ranks are 0, 100, 400: from p = 1, 2 alone the line gives 300 at
      p = 4 (truth 400; 2 (p - 1) messages per iteration on a 1-D grid, exact there: miniFE, HPCCG,
      MPI_Bcast's bytes received 56 (p - 1)), flat 100; per rank (a mean over ranks, a rank-0
      timer) the count of neighbours does not grow with p, so flat stays;
    * series that run at p = 1 only (:func:`runs_only_first`): fitted on the points at p = 1, 0
      from x2 on (``("from", parameter, x2)``).

    Every path that fits series applies them through this function and :func:`apply_zero_rule`
    (:func:`perfcast.fit.series.fit_one`, the experiment's groups)."""
    X = np.asarray(X, dtype=float)
    S, n = mean.shape
    rows, cols = np.arange(S), np.arange(n)
    rest = np.ones(S, dtype=bool)
    sets = []
    off = not_running_first(X, mean, parameters, count, ssd, options)
    if off is not None:
        which, exact, q, x2 = off
        on = cols[X[:, q] >= x2]
        line = bool(summed) and len(np.unique(X[on, q])) == 1
        p = str(tuple(parameters)[q])
        sets += [(rows[exact], on, ("below", p, x2, 0.0, line)),
                 (rows[which & ~exact], on, ("below", p, x2, x2 ** -float(NOT_RUNNING_EXPONENT), line))]
        rest &= ~which
    first = runs_only_first(X, mean, parameters)
    if first is not None:
        which, q, x2 = first
        which = which & rest
        sets.append((rows[which], cols[X[:, q] < x2], ("from", str(tuple(parameters)[q]), x2)))
        rest &= ~which
    return [s for s in [(rows[rest], cols, ()), *sets] if len(s[0])]


def apply_zero_rule(gf: "GroupFit", rule: tuple) -> "GroupFit":
    """``gf`` (fitted on the points :func:`zero_rule_sets` gave with ``rule``) with that rule: 0
    below the next process count (:func:`zero_below`) or from it on (``zero_from``, a note);
    ``gf`` itself for ``()``."""
    if not rule:
        return gf
    if rule[0] == "below":
        return zero_below(gf, *rule[1:])
    _, parameter, start = rule
    note = (f"runs at {parameter} = 1 only (0 in every run from {parameter} = {start:g} on): its law is that of "
            f"the points at {parameter} = 1, 0 from {parameter} = {start:g} on")
    return dataclasses.replace(gf, zero_from=(parameter, float(start)), notes=tuple(gf.notes) + (note,))


def two_level_parameter(note: str) -> str | None:
    """The parameter a :func:`two_level_note` is about; None for any other note."""
    head, sep, _ = note.partition(" only (")
    if not sep or not head.startswith("2 values of "):
        return None
    return head[len("2 values of "):]


def _two_level_axis(X: np.ndarray, lines: Sequence) -> int | None:
    """The parameter of a multi-parameter point set measured at exactly two (positive) values, with
    pairs of points that differ only in it, while every other varying parameter has lines of >= 3
    points once it is set aside (:func:`_two_level_fit`); None otherwise."""
    n, m = X.shape
    if m < 2 or n < 4:
        return None
    values = [len(np.unique(X[:, p])) for p in range(m)]
    unlined = [p for p in range(m) if not lines[p] and values[p] > 1]
    if len(unlined) != 1 or values[unlined[0]] != 2 or np.any(X[:, unlined[0]] <= 0):
        return None
    q = unlined[0]
    others = [p for p in range(m) if p != q]
    uniq, inv = np.unique(X[:, others], axis=0, return_inverse=True)
    if len(uniq) == n or not any(parameter_lines(uniq, p) for p in range(len(others))):
        return None     # no pair of points differing in q alone, or no line of the others
    return q


def _merged(inv: np.ndarray, R: int, y: np.ndarray, count: np.ndarray, ssd: np.ndarray, r: np.ndarray | None = None):
    """Means, counts and sums of squared deviations of the repetitions of the points sharing a
    reduced point (``inv``: each point's reduced index): the pooled repetitions.  ``r`` (S, n): the
    points' noise variances relative to the series' pooled one (:attr:`FitOptions.hetero`): each
    point's repetitions weigh ``1 / r``, the sums of squares are in units of the pooled variance."""
    S = y.shape[0]
    if r is not None:
        ce = count / r
        N = np.zeros((S, R))
        Ne = np.zeros((S, R))
        T = np.zeros((S, R))
        np.add.at(N.T, inv, count.T)
        np.add.at(Ne.T, inv, ce.T)
        np.add.at(T.T, inv, (ce * y).T)
        mr = T / Ne
        dev = (ssd + count * (y - mr[:, inv]) ** 2) / r
        Q = np.zeros((S, R))
        np.add.at(Q.T, inv, dev.T)
        return mr, N, Q * N / Ne
    N = np.zeros((S, R))
    T = np.zeros((S, R))
    np.add.at(N.T, inv, count.T)
    np.add.at(T.T, inv, (count * y).T)
    mr = T / N
    dev = ssd + count * (y - mr[:, inv]) ** 2
    Q = np.zeros((S, R))
    np.add.at(Q.T, inv, dev.T)
    return mr, N, Q


def _term_values(blocks, hyp_row: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Values (n,) of one term (hyp_row (m,) block indices, -1 = no factor) at the points X."""
    v = np.ones(len(X))
    for p, b in enumerate(hyp_row):
        if b >= 0:
            i, j = blocks[b]
            v = v * X[:, p] ** float(i) * (np.log2(X[:, p]) ** j if j else 1.0)
    return v


#: a level of a two-level law below this share of the series' largest measured mean is a level of 0
#: (round-off of a fit through zeros): no power law goes through it, the straight line does
LEVEL_ZERO = 1e-9


def _two_level_fit(X, q, mean, count, ssd, parameters, options, progress, shape, check, pooled) -> GroupFit:
    """:func:`fit_group` of a point set whose parameter ``q`` was measured at two values only, the
    others on lines (p = 1, 2 x five sizes): a law in ``q`` through the two levels, never the mean.

    Three forms, each a one-term power law in ``q`` joined to a model of the other parameters:

    * product ``f(others) * (q / q1)^a``: ``a`` from the count-weighted mean log ratio of the
      pairs of points that differ in ``q`` alone (``log(y2 / y1) / log(q2 / q1)``, printed as
      :func:`_exponent`); ``f`` the search's model of the means divided by ``(q / q1)^a``;
    * sum ``f(others) + c q^b``: ``d`` the mean difference of the pairs, ``f`` the search's model of
      the means less ``d`` at ``q2``; the law ``c q^b`` goes through ``f``'s constant at ``q1`` and
      that plus ``d`` at ``q2`` (``c * x^b`` through two levels, as :func:`_two_points`; the
      straight line when a level is <= 0);
    * the product with a constant of its own, ``c0 + f(others) * (q / q1)^a`` (``5 + 2 p n^2``): the
      product's terms refitted with a constant on all the means.

    The search's criterion ranks the forms on all the measurements: ``N log((pe + rss) / N) + 2 k``
    (relative pure error and weighted residual sum of squares of the means; ``k`` the model of the
    others' coefficients, one more for a law in ``q``, one more for the product's own constant, so
    a series flat in ``q`` keeps no law in it); the earlier form wins ties.  As with two points
    (:func:`_two_points`) the exponent is not bounded -- beyond p = 2 a guess, said so; a series
    whose level at p = 1 is 0 or negligible (miniFE's bytes summed over ranks got p^9.8) is not fitted
    here but from p = 2 on, 0 at p = 1 (:func:`not_running_first`).  Noise, fit check and alternatives are
    those of the model of the other parameters; beyond the data the interval carries the two-point
    exponent doubt (:data:`TWO_POINT_EXPONENT_SD`, linear growth, :data:`TWO_POINT_DRIFT_DOF`; one
    drift for the group, so also beyond the others' measured range, where the check's drift is
    used when larger), and the model says so (:func:`two_level_note`, a warning)."""
    n, m = X.shape
    S = mean.shape[0]
    x = X[:, q]
    x1, x2 = (float(v) for v in np.unique(x))
    hi = x == x2
    others = [p for p in range(m) if p != q]
    uniq, inv = np.unique(X[:, others], axis=0, return_inverse=True)
    inv = np.asarray(inv).ravel()
    R = len(uniq)
    at1, at2 = np.full(R, -1), np.full(R, -1)
    at1[inv[~hi]], at2[inv[hi]] = np.flatnonzero(~hi), np.flatnonzero(hi)
    pair = (at1 >= 0) & (at2 >= 0)
    i1, i2 = at1[pair], at2[pair]
    y1, y2 = mean[:, i1], mean[:, i2]
    rv = point_variance_ratio(mean, count, ssd) if (options or FitOptions()).hetero else None
    if rv is None:
        wp = 1.0 / (1.0 / count[:, i1] + 1.0 / count[:, i2])
    else:
        wp = 1.0 / (rv[:, i1] / count[:, i1] + rv[:, i2] / count[:, i2])
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = np.all(y1 > 0, axis=1) & np.all(y2 > 0, axis=1)
        ratio = np.where(pos, np.sum(wp * np.log(np.where(pos[:, None], y2 / y1, 1.0)), axis=1)
                         / np.sum(wp, axis=1) / math.log(x2 / x1), 0.0)
    a = [_exponent(float(e)) if pos[s] else Fraction(0) for s, e in enumerate(ratio)]
    d = np.sum(wp * (y2 - y1), axis=1) / np.sum(wp, axis=1)
    fac = np.array([(x / x1) ** float(e) for e in a])                   # (S, n)
    red = [parameters[p] for p in others]
    mM = _merged(inv, R, mean / fac, count, ssd / fac ** 2, rv)
    mA = _merged(inv, R, mean - d[:, None] * hi, count, ssd, rv)
    gM = fit_group(uniq, *mM, red, options, progress, shape=shape, check=check, pooled=pooled)
    gA = fit_group(uniq, *mA, red, options, None, shape=shape, check=check, pooled=pooled)
    if gM.blocks != gA.blocks:
        raise PerfcastError("internal: the two forms of a two-level fit have different term blocks")
    blocks = list(gM.blocks)
    index = {b: i for i, b in enumerate(blocks)}

    def block(e):
        return _block_of(blocks, index, e)

    _, M, K, _ = gM.hyp.shape
    hyp = np.full((S, M, K + 1, m), -1, dtype=np.int32)
    coef = np.zeros((S, M, K + 2))
    cov = np.zeros((S, M, K + 2, K + 2))
    quality = gM.quality.copy()
    status, needed = gM.status.copy(), gM.needed.copy()
    noise, dof = gM.noise.copy(), gM.dof.copy()
    drift = None if gM.drift is None else gM.drift.copy()
    weight = gM.weight.copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        wfit = np.where(mean != 0, count / np.where(mean != 0, mean, 1.0) ** 2, count)
        pe = np.sum(np.where(mean != 0, ssd / np.where(mean != 0, mean, 1.0) ** 2, ssd), axis=1)
        if rv is not None:
            wfit = wfit / rv
            pe = np.sum(np.where(mean != 0, ssd / np.where(mean != 0, mean, 1.0) ** 2, ssd) / rv, axis=1)
    Ns = count.sum(axis=1)

    def mapped(g, s, alt, form):
        """(hyp (K+1, m), coef (K+2,), cov) of hypothesis ``alt`` of series ``s`` of the reduced fit ``g``."""
        h = np.full((K + 1, m), -1, dtype=np.int32)
        hr = g.hyp[s, alt]
        terms = [t for t in range(K) if np.any(hr[t] >= 0)]
        k = len(terms)
        for t, src in enumerate(terms):
            h[t, others] = hr[src]
        c = g.coef[s, alt, :1 + k]
        J = np.zeros((K + 2, 1 + k))          # new coefficients = J @ the reduced ones
        if form in ("product", "product+constant"):
            e = a[s]
            if e == 0:
                J[0, 0] = 1.0
                J[1:1 + k, 1:] = np.eye(k)
            else:
                sc = x1 ** -float(e)
                bq = block(e)
                h[:k, q] = bq
                h[k, q] = bq
                J[1 + k, 0] = sc                   # the constant becomes c * (q / q1)^a
                J[1:1 + k, 1:] = sc * np.eye(k)
            v = J @ c
        else:
            J[1:1 + k, 1:] = np.eye(k)
            I1 = float(c[0])
            I2 = I1 + float(d[s])
            # a level at round-off of the data's scale is a level of 0 (a fit's constant through
            # zeros comes out as 1.96e-17, and the power through it as p^(302/11))
            zero = LEVEL_ZERO * float(np.max(np.abs(mean[s])))
            if I1 > zero and I2 > zero and (e := _exponent(math.log(I2 / I1) / math.log(x2 / x1))) != 0:
                h[k, q] = block(e)
                J[1 + k, 0] = x1 ** -float(e)      # c = I1 / q1^b
                v = J @ c
            elif d[s] == 0 or (I1 > zero and I2 > zero):
                J[0, 0] = 1.0                      # no change between the levels: no law in q
                v = J @ c
            else:                                  # a level <= 0: the straight line through them
                h[k, q] = block(Fraction(1))
                J[0, 0] = 1.0
                v = J @ c
                slope = float(d[s]) / (x2 - x1)
                v[0] -= slope * x1
                v[1 + k] = slope
        C = J @ g.cov[s, alt, :1 + k, :1 + k] @ J.T
        # free coefficients: the reduced model's, and one more for a law in q (the exponent of
        # the product, the difference of the sum's levels)
        free = 1 + k + int(np.any(h[:, q] >= 0))
        if form == "product+constant":
            if a[s] == 0:
                return None
            # c0 + (q / q1)^a f(others): the constant refitted with the terms on all the means
            used = [t for t in range(K + 1) if np.any(h[t] >= 0)]
            W = wfit[s]
            for _ in range(2):
                D = np.column_stack([np.ones(n)] + [_term_values(blocks, h[t], X) for t in used])
                A = D.T @ (W[:, None] * D)
                try:
                    Ai = np.linalg.inv(A)
                except np.linalg.LinAlgError:
                    return None
                beta = Ai @ (D.T @ (W * mean[s]))
                # a term the refit leaves at round-off (5 + 2 p n^2: the product's p) is dropped
                size = np.abs(beta[1:]) * np.max(np.abs(D[:, 1:]), axis=0)
                keep = size > 1e-9 * np.max(np.abs(mean[s]))
                if keep.all() or not keep.any():
                    break
                used = [t for t, kk in zip(used, keep) if kk]
            rows = h[used].copy()
            h[:] = -1
            h[:len(used)] = rows
            r = mean[s] - D @ beta
            dofr = max(Ns[s] - len(beta), 1)
            s2r = (pe[s] + float(np.sum(W * r ** 2))) / dofr
            v = np.zeros(K + 2)
            v[0] = beta[0]
            v[1:1 + len(used)] = beta[1:]
            C = np.zeros((K + 2, K + 2))
            C[:len(beta), :len(beta)] = s2r * Ai
            free += 1
        return h, v, C, free

    for s in range(S):
        best = None
        for form, g in (("product", gM), ("sum", gA), ("product+constant", gM)):
            if form != "sum" and not pos[s] and np.any(mean[s] != 0):
                continue
            if g.status[s] != 0:
                continue
            got = mapped(g, s, 0, form)
            if got is None:
                continue
            h, v, C, k = got
            fitted = v[0] + sum(v[1 + t] * _term_values(blocks, h[t], X) for t in range(K + 1) if np.any(h[t] >= 0))
            rss = float(np.sum(wfit[s] * (fitted - mean[s]) ** 2))
            crit = Ns[s] * math.log((pe[s] + rss) / Ns[s] + TINY) + 2 * k
            if best is None or crit < best[0] - 1e-9:
                best = (crit, form, g, fitted)
        if best is None:
            continue                               # the reduced fit is insufficient: its mean
        _, form, g, fitted = best
        for alt in range(M):
            if g.weight[s, alt] > 0 or alt == 0:
                got = mapped(g, s, alt, form)
                if got is None:
                    got = mapped(g, s, alt, "product")
                hyp[s, alt], coef[s, alt], cov[s, alt], _ = got
        weight[s] = g.weight[s]
        quality[s] = g.quality[s]
        status[s], needed[s], noise[s], dof[s] = g.status[s], g.needed[s], g.noise[s], g.dof[s]
        if drift is not None and g.drift is not None:
            drift[s] = g.drift[s]
        y = mean[s]
        quality[s, 0] = float(np.sum((fitted - y) ** 2))
        quality[s, 2] = smape_percent(fitted, y)
        quality[s, 5], quality[s, 6] = n, count[s].sum()
    for s in range(S):
        if status[s] != 0:
            # no model of the others: the mean, as fit_group reports it
            hyp[s] = -1
            coef[s] = 0.0
            coef[s, 0, 0] = np.sum(mean[s] * count[s]) / np.sum(count[s])
    if drift is not None:
        drift = np.where(status == 0, np.maximum(drift, TWO_POINT_EXPONENT_SD * math.log(2)), 0.0)
    notes = tuple(gM.notes) + (two_level_note(parameters[q], x1, x2),)
    return GroupFit(tuple(parameters), tuple(blocks), n, status, needed, hyp, weight, coef, cov, quality,
                    noise, dof, notes, drift, tuple(float(v) for v in np.max(X, axis=0)), 1.0,
                    TWO_POINT_DRIFT_DOF, gM.shape, frontier=measured_frontier(X))


def _block_of(blocks: list, index: dict, e) -> int:
    """The index in ``blocks`` of the term block of exponent ``e`` (a power, no log), added to
    ``blocks`` and ``index`` when new: the blocks of a group grow as two-point laws find exponents."""
    if (e, 0) not in index:
        index[(e, 0)] = len(blocks)
        blocks.append((e, 0))
    return index[(e, 0)]


def no_line_note(parameter: str) -> str:
    """The note of a model fitted as flat in ``parameter`` because the data hold no line of >= 3
    points along it (the other parameters fixed): the data, not the fit, left it out."""
    return f"parameter {parameter!r}: no line of >= 3 points with the other parameters fixed; treated as having no effect"


def parameter_lines(X: np.ndarray, p: int) -> list[np.ndarray]:
    """Index arrays of the lines along parameter p (others fixed) with >= 3 distinct values."""
    others = [q for q in range(X.shape[1]) if q != p]
    if not others:
        return [np.arange(len(X))] if len(np.unique(X[:, p])) >= 3 else []
    keys = {}
    for i, row in enumerate(X[:, others]):
        keys.setdefault(tuple(row), []).append(i)
    out = [np.array(ix) for ix in keys.values() if len(np.unique(X[ix, p])) >= 3]
    return out


def _single_table(space: _Space, p: int, idx: np.ndarray):
    """Scaled single-block design columns of parameter p restricted to points idx."""
    T = space.tabs[p][idx, :-1]
    valid = np.all(np.isfinite(T), axis=0)
    sc = np.max(np.abs(np.where(np.isfinite(T), T, 0)), axis=0)
    valid &= sc > 0
    Tn = np.where(valid, T / np.where(sc > 0, sc, 1.0), 0.0)
    return Tn, valid, sc


def _block_ranges(space: _Space, p: int, sc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parameter p's blocks (H,) in the units of :func:`_single_table` (scales ``sc``): whether each
    turns beyond the smallest point, and its range lo, hi there (:meth:`_Space.ranges`)."""
    lo, hi, turn = space.ranges(p)
    unit = np.where(sc > 0, sc, 1.0)
    return turn[:space.H], lo[:space.H] / unit, hi[:space.H] / unit


def _search_single(space: _Space, ch: _Chunk, opt: FitOptions, K: int):
    n, H = space.n, space.H
    Tn, valid, sc = _single_table(space, 0, np.arange(n))
    S = len(ch.y)
    pen1 = 2 * math.log(H)
    crit1 = np.full((S, H), np.inf)
    ones = np.ones(n)
    asym = opt.nonnegative in (ASYMPTOTIC, CLAMPED)
    grow = _growing_blocks(space.blocks)
    ranges = _block_ranges(space, 0, sc)
    turns = ranges if asym and ranges[0].any() else None
    if not opt.nonnegative or asym:
        err = _one_block_err(Tn, valid, ch.y, ch.w, opt.selection == "cv", grow if asym else None, turns,
                             clamped=opt.nonnegative == CLAMPED)
        crit1 = ch.criterion_err(err, 1, pen1, opt.selection)
    else:
        for h in range(H):
            if not valid[h] or n < 3:
                continue
            fit = _fit(np.column_stack([ones, Tn[:, h]]), ch.y, ch.w, opt.nonnegative)
            crit1[:, h] = ch.criterion(fit, 1, pen1, opt.selection)
    hyp1 = np.full((H, K, 1), -1, dtype=np.int32)
    hyp1[:, 0, 0] = np.arange(H)
    ch.merge(slice(None), crit1, hyp1)
    if opt.max_terms < 2 or n < 4:
        return
    # two terms: only where a 3-coefficient model could still win (its deviance >= SS_pe)
    pairs = [(a, b) for a in range(H) for b in range(a) if valid[a] and valid[b]]
    if not pairs:
        return
    pen2 = 2 * math.log(len(pairs))
    bound = ch.N * np.log(ch.ss_pe / ch.N + TINY) + pen2
    if opt.selection == "bic":
        bound = bound + 3 * np.log(ch.N)
    need = np.nonzero(ch.best_crit[:, 0] > bound)[0]
    if len(need) == 0:
        return
    sub = _SubChunk(ch, need)
    # the pairs in batches fitted at once (:func:`_fit_designs`), a batch's (series, pair, point)
    # arrays kept to ~32 MB each
    B = int(min(256, max(1, 2 ** 22 // (len(need) * n))))
    # the asymptotic rule of noise-free series (counts) and of those weighed for the model's error
    # looks at the faster-growing term of a pair: an outgrown one may be negative.  Not for noisy
    # series: with a few points such laws bend to the noise (LULESH's timers with --terms 2: median
    # error 4.2% -> 30%, bench/README.md "Outgrown terms")
    relaxed, exact_only = _outgrow_rows(ch, need)
    lead = _leading_growth(space.blocks, np.array(pairs)) if relaxed.any() else None
    for start in range(0, len(pairs), B):
        ab = np.array(pairs[start:start + B])
        hyp = np.full((len(ab), K, 1), -1, dtype=np.int32)
        hyp[:, :2, 0] = ab
        D = np.empty((len(ab), n, 3))
        D[:, :, 0] = 1.0
        D[:, :, 1], D[:, :, 2] = Tn[:, ab[:, 0]].T, Tn[:, ab[:, 1]].T
        g = grow[ab]
        if lead is not None:
            g = np.where(relaxed[:, None, None], lead[start:start + B], g)
        fit = _fit_designs(D, sub.y, sub.w, opt.nonnegative, g)
        crit = sub.criterion_err(fit.press if opt.selection == "cv" else fit.rss, 2, pen2, opt.selection)
        if lead is not None and exact_only.any():
            rows, cs = np.nonzero(exact_only[:, None] & fit.ok & _asymptotically_negative(fit.beta, grow[ab]))
            if len(rows):
                miss = _misses(fit.resid[rows, cs], sub.w[rows])
                crit[rows[miss], cs[miss]] = np.inf
        if asym:
            # the asymptotic rule's last test, as :func:`_fit` makes it with ``below``: the fits it
            # admitted that have a negative coefficient, below zero beyond the data?
            rows, cs = np.nonzero(fit.ok & np.isfinite(fit.rss) & np.any(fit.beta < 0, axis=2))
            if len(rows):
                h = np.full((len(cs), K, 1), -1, dtype=np.int32)
                h[:, :2, 0] = ab[cs]
                scale = np.concatenate([np.ones((len(cs), 1)), sc[ab[cs]]], axis=1)
                below = space.below_zero(h, scale, fit.beta[rows, cs])
                crit[rows[below], cs[below]] = np.inf
        ch.merge(need, crit, hyp)


class _SubChunk:
    """Rows ``rows`` (an index array or a slice) of a chunk (same normalisation), for stages run on
    a subset."""

    def __init__(self, ch: _Chunk, rows):
        self.y, self.w = ch.y[rows], ch.w[rows]
        self.ss_pe, self.N = ch.ss_pe[rows], ch.N[rows]

    criterion = _Chunk.criterion
    criterion_err = _Chunk.criterion_err


def _forms(usable: Sequence[int], K: int) -> list[tuple[frozenset, ...]]:
    """Sets of monomials (non-empty subsets of usable parameters), at most K of them: every set of
    one or two monomials (a*b, a+b, a*b+a, a*b+c, ...), and sets of three or more only when they
    are disjoint -- each parameter in at most one monomial (a+b+c, a*b+c+d, a+b+c+d, ...).

    Extra-P's multi-parameter modeler (extrap/modelers/multi_parameter/multi_parameter_modeler.py,
    ``create_model``) tries, with one building block per parameter, the full product, the full
    sum and, for three parameters, 21 mixes such as x*y*z + x*y + z or x*y + y + z.  Here the
    one- and two-monomial forms are all kept (a superset of its two-parameter forms) and larger
    forms are limited to the disjoint ones: they are the additive laws f(x) + g(y) + h(z) of its
    tests (each parameter keeps one factor, as in a single-parameter model), and they grow slowly
    with the number of parameters (3 parameters: 28 forms + 1, 4: 120 + 11, 5: 496 + 81), where
    all sets of 3 monomials with one overlap would add 22 / 338 / 3,856 forms."""
    monos = [frozenset(c) for r in range(1, len(usable) + 1) for c in itertools.combinations(usable, r)]
    out = []
    for size in range(1, min(K, 2) + 1):
        for combo in itertools.combinations(monos, size):
            out.append(combo)

    def disjoint(start: int, used: frozenset, chosen: tuple):
        if len(chosen) >= 3:
            yield chosen
        if len(chosen) == K:
            return
        for i in range(start, len(monos)):
            if not (monos[i] & used):
                yield from disjoint(i + 1, used | monos[i], chosen + (monos[i],))

    extra = [f for f in disjoint(0, frozenset(), ()) if len(f) >= 3]
    out += sorted(extra, key=len)
    return out


def _search_multi(space: _Space, ch: _Chunk, opt: FitOptions, K: int, lines, usable):
    n, H, m = space.n, space.H, space.m
    S = len(ch.y)
    L = min(opt.shortlist, H)
    shortlist = {}
    asym = opt.nonnegative in (ASYMPTOTIC, CLAMPED)
    grow = _growing_blocks(space.blocks)
    # stage 1: per-parameter scores summed over lines (free constant and slope per line)
    for p in usable:
        score = np.zeros((S, H))
        for idx in lines[p]:
            Tn, valid, sc = _single_table(space, p, idx)
            # the line's columns row-major (``a[:, idx]`` is column-major: :func:`_rowsum`)
            sub_y, sub_w = ch.y.take(idx, axis=1), ch.w.take(idx, axis=1)
            pe = _rowsum(ch.pe_point.take(idx, axis=1))
            Nl = np.sum(ch.count[:, idx], axis=1)
            ones = np.ones(len(idx))
            if not opt.nonnegative or asym:
                # screening only: one line's noise may tilt a growing block down there, so the
                # asymptotic constraint waits for the combinations fitted on all points -- but a
                # block whose line dips below zero beyond the data (it turns there) is no candidate
                ranges = _block_ranges(space, p, sc)
                turns = ranges if asym and ranges[0].any() else None
                err = _one_block_err(Tn, valid, sub_y, sub_w, opt.selection == "cv", None, turns)
                with np.errstate(divide="ignore", invalid="ignore"):
                    score += Nl[:, None] * np.log((pe[:, None] + err) / Nl[:, None] + TINY)
                continue
            flat = _wls(ones[:, None], sub_y, sub_w)
            for h in range(H):
                if not valid[h]:
                    score[:, h] = np.inf
                    continue
                fit = _fit(np.column_stack([ones, Tn[:, h]]), sub_y, sub_w, opt.nonnegative, flat)
                err = fit.press if opt.selection == "cv" else fit.rss
                with np.errstate(divide="ignore", invalid="ignore"):
                    score[:, h] += Nl * np.log((pe + err) / Nl + TINY)
        score = np.where(np.isfinite(score), score, np.inf)
        shortlist[p] = np.argsort(score, axis=1, kind="stable")[:, :L].astype(np.int32)  # (S, L)
    # stage 2: combinations of shortlisted blocks into sums/products of monomials
    forms = _forms(usable, K)
    csum = None     # the constant's sums, shared by every hypothesis of a series
    for form in forms:
        params_in = sorted(set().union(*form))
        count = len(params_in) * math.log(H) + math.log(sum(1 for f in forms if len(f) == len(form)
                                                           and set().union(*f) == set(params_in)))
        pen = 2 * count
        k = len(form)
        if k + 1 >= n:
            continue
        # every shortlist choice of this form in one batched fit: (S, C) hypotheses
        choices = list(itertools.product(range(L), repeat=len(params_in)))
        C = len(choices)
        hyp = np.full((S, C, K, m), -1, dtype=np.int32)
        for t, mono in enumerate(form):
            for p in mono:
                sel = np.array([c[params_in.index(p)] for c in choices])
                hyp[:, :, t, p] = shortlist[p][:, sel]
        step = max(1, 50000 // max(C, 1))  # bound the (rows x C, n, k) temporaries
        if csum is None:
            csum = _const_sums(ch.y, ch.w)
        for a in range(0, S, step):
            b = min(S, a + step)
            h = hyp[a:b]
            D, scale, _, defined = space.design(h.reshape((b - a) * C, K, m), finite=True)
            # a shortlisted block undefined at some point (x <= 0 under a log, x <= 1 under a
            # negative log exponent, :func:`perfcast.fit.terms.factor_values`): never selected
            undefined = ~defined
            if undefined.any():
                D[undefined] = 0.0
            hflat = h.reshape((b - a) * C, K, m)
            relax, exact_only = _outgrow_rows(ch, slice(a, b))
            wrep = np.repeat(ch.w[a:b], C, axis=0)
            growing = _growing_terms(hflat, grow, k) if asym else None
            fit = _fit(D, np.repeat(ch.y[a:b], C, axis=0), wrep, opt.nonnegative,
                       leverage=opt.selection == "cv", growing=growing,
                       const=(np.repeat(csum[0][a:b], C), np.repeat(csum[1][a:b], C)),
                       outgrow=(np.repeat(relax, C), hflat, grow) if asym and relax.any() else None,
                       below=(lambda rows, c: space.below_zero(hflat[rows], scale[rows], c)) if asym else None)
            if asym and exact_only.any():
                rows = np.nonzero(np.repeat(exact_only, C) & fit.ok & np.isfinite(fit.rss)
                                  & _asymptotically_negative(fit.beta, growing))[0]
                miss = rows[_misses(fit.resid[rows], wrep[rows])]
                fit.rss[miss], fit.press[miss] = np.inf, np.inf
            err = np.where(undefined, np.inf, fit.press if opt.selection == "cv" else fit.rss).reshape(b - a, C)
            sub = _SubChunk(ch, slice(a, b))
            ch.merge(slice(a, b), sub.criterion_err(err, k, pen, opt.selection), h)


def _adaptive(space: _Space, ch: _Chunk, reps: np.ndarray, beta: float, nonneg=False) -> np.ndarray:
    """Re-rank the chunk's top-M hypotheses under the generalised normal likelihood of shape
    ``beta`` of the raw repetitions (relative residuals, as the weights of the means' fit).

    Per hypothesis the coefficients minimise ``sum |r|^beta`` (:func:`lbeta_fit`) and the
    criterion's deviance ``N log(RSS / N)`` becomes the profile deviance ``(2N / beta)
    log(sum |r|^beta / N)``, the penalties unchanged.  Reorders ``ch.best_crit``/``best_hyp``;
    returns the coefficients (S, M, 1 + K) in absolute units in the new order and the
    least-squares pieces (inverse normal matrices, weighted RSS, column scales) in that order.

    ``nonneg``: the sign rule the search applied (:attr:`FitOptions.nonnegative`).  The
    least-squares start is fitted under it (the strict rule's constant refitted through the origin
    where it came out negative), and coefficients the reweighting moves across the rule -- a
    negative constant or term under the strict rule, a law below zero at a point or beyond the
    data under the asymptotic one (:func:`_law_floor`) -- are not used: the hypothesis keeps its
    least-squares coefficients and is ranked by their generalised-normal deviance.  (1e9 / p with
    uniform noise, 5 repetitions: 143 of 300 such laws had a negative constant, negative beyond
    p ~ 1700.)"""
    S, M = ch.best_crit.shape
    K = ch.best_hyp.shape[2]
    crit = np.full((S, M), np.inf)
    coef = np.zeros((S, M, 1 + K))
    N = ch.N
    # the least-squares pieces of every pair, for the intervals (:func:`_finish`)
    ls_ainv = np.zeros((S, M, 1 + K, 1 + K))
    ls_rss = np.full((S, M), np.inf)
    ls_scale = np.ones((S, M, 1 + K))
    # repetitions relative to the point scale f, once per chunk
    yr = (reps / (ch.scale[:, None, None] * ch.f[:, :, None])).astype(np.float32)
    nterms = np.sum(np.any(ch.best_hyp >= 0, axis=3), axis=2)
    # all (series, alternative) pairs with the same number of terms in one batch
    # the screen: hypotheses whose normal-likelihood criterion is more than SCREEN above the best
    # ("very strong" evidence against them, 2 ln B > 10 on Kass & Raftery's scale) keep weight 0
    for k in np.unique(nterms):
        si, ai = np.nonzero((nterms == k) & np.isfinite(ch.best_crit) & (ch.best_crit - ch.best_crit[:, :1] <= SCREEN))
        if len(si) == 0:
            continue
        hyp = _take2(ch.best_hyp, si, ai)
        if K > 1:       # used slots first, as the refits of _finish read them
            hyp = _used_first(hyp)
            ch.best_hyp[si, ai] = hyp
        D, scale, k = space.design(hyp)
        if nonneg in (True, CLAMPED):
            ls = _fit(D, ch.y[si], ch.w[si], nonneg, leverage=False)
            c0, fok, rss, ainv = ls.beta, ls.ok, ls.rss, ls.ainv
        else:
            c0, fok, rss, ainv = fast_wls([D[:, :, i] for i in range(k + 1)], ch.y[si], ch.w[si], True)
        _put2(ls_ainv, si, ai, ainv)
        ls_rss[si, ai] = rss
        _put2(ls_scale, si, ai, scale)
        Nr = N[si]
        with np.errstate(divide="ignore", invalid="ignore"):
            pen = ch.best_crit[si, ai] - Nr * np.log((ch.ss_pe[si] + rss) / Nr + TINY)
            c, logobj = lbeta_fit(D, yr[si], ch.f[si], beta, c0, prescaled=True)
            if nonneg:
                back = np.nonzero(_crosses_rule(c, D, ch.w[si], hyp, scale, space, nonneg) & fok)[0]
                if len(back):
                    c[back] = c0[back]
                    logobj[back] = lbeta_fit(D[back], yr[si[back]], ch.f[si[back]], beta, c0[back], iters=0,
                                             prescaled=True)[1]
            # the same relative precision floor as the normal criterion (TINY on the variance scale):
            # an exact fit keeps a finite criterion
            cr = (2 * Nr / beta) * np.logaddexp(logobj - np.log(Nr), 0.5 * beta * np.log(TINY)) + pen
        crit[si, ai] = np.where(np.isfinite(cr) & fok, cr, np.inf)
        _put2(coef, si, ai, c / scale * ch.scale[si, None])
    order = _stable_top(crit, M)
    r = _rows_of(order)
    ch.best_crit = _take2(crit, r, order)
    ch.best_hyp = _take2(ch.best_hyp, r, order)
    return _take2(coef, r, order), (_take2(ls_ainv, r, order), _take2(ls_rss, r, order), _take2(ls_scale, r, order))


def _crosses_rule(c: np.ndarray, D: np.ndarray, w: np.ndarray, hyp: np.ndarray, scale: np.ndarray,
                  space: _Space, nonneg) -> np.ndarray:
    """(S,) coefficients ``c`` (S, 1 + k) of designs ``D`` (S, n, 1 + k) that break the sign rule
    ``nonneg``: strict (True) a negative constant or term; asymptotic a law below zero at a measured
    point (``w`` > 0) or beyond the smallest measured values (:func:`_law_floor`)."""
    tol = NEGATIVE_TOL
    if nonneg is True:
        return np.any(c < -tol, axis=1)
    fitted = np.einsum("snk,sk->sn", D, c)
    bad = np.any((fitted < -tol) & (w > 0), axis=1)
    if nonneg == CLAMPED:
        bad |= c[:, 0] < -tol
    rows = np.nonzero(~bad & np.any(c < 0, axis=1))[0]
    if len(rows):
        bad[rows] = space.below_zero(hyp[rows], scale[rows], c[rows])
    return bad


def _constant_level(ch: _Chunk, rows, weights: bool = False):
    """The value of the constant hypothesis of the series ``rows`` of ``ch`` (normalised units).

    Under relative noise a constant's weights are its own value's, ``r / c^2`` -- the same ``c``
    at every point -- so its least-squares value is the mean of all repetitions.  The observed
    means' weights (:func:`noise_scale`) would pull it toward the points that came out low
    (1,000 single-run constants with uniform noise of +-25%: 1.6% low; LULESH's slowest rank in ``main`` at 4
    jobsizes, ``47.2, 55.1, 56.3, 42.8``: 49.8 instead of their mean, 50.4).  A dip keeps its
    lifted scale (a zero among 3.4e7 stays a quarter of a point) and the absolute part of the
    noise its share (``ch.c2``); series weighed as exact or for the model's error keep their
    weights (no noise to be relative to: :func:`exact_scale`).  A mean lifted only to the floor (a
    0 whose neighbours are 0 too: no dip) weighs as the level's: with the floor's weight (10^6 times
    the others') four such zeros of CloverLeaf's Tile_Halo_Exchange timer (0 or 0.0001 s in every
    run) made its constant 2.4e-10 s, not their mean 3.9e-5 s.  ``weights``: also the weights of the
    constant's residuals and variance (:func:`_finish`): the observed means', but a lifted mean's
    where it weighs less as the level's (the floor's weight made that timer's noise 43000%, its
    interval [0, 0.03] s)."""
    y, r, w, lifted = ch.y[rows], ch.count[rows], ch.w[rows], ch.lifted[rows]
    c2 = np.where(np.isfinite(ch.c2[rows]), ch.c2[rows], 0.0)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        reg = np.where(lifted, 0.0, r)
        level = np.sum(reg * y, axis=1) / np.sum(reg, axis=1)
        for _ in range(3):      # the dips' share of the weight depends on the level
            g2 = (level[:, None] ** 2 + c2) / (1 + c2)
            # a dip keeps its lifted scale; a mean lifted only to the floor (a 0 whose neighbours
            # are 0 too: no dip rule applies) weighs as the level's, not as the floor's
            own = np.where(lifted, r / np.maximum(r / np.where(w > 0, w, np.inf), g2), r / g2)
            level = np.sum(own * y, axis=1) / np.sum(own, axis=1)
        wls = np.sum(w * y, axis=1) / np.sum(w, axis=1)
    use = ch.noisy[rows] & np.isfinite(level)
    out = np.where(use, level, wls)
    if not weights:
        return out
    # the residuals keep the observed means' weights but where a lifted mean weighs less as the level's
    return out, np.where(use[:, None] & lifted & np.isfinite(own), np.minimum(own, w), w)


def _finish(space: _Space, ch: _Chunk, opt: FitOptions, lo: int, hi: int,
            out_hyp, out_crit, out_coef, out_cov, out_q, out_noise, out_dof, coef_over=None, eff=1.0,
            ls=None):
    S, M = ch.best_crit.shape
    n = space.n
    out_hyp[lo:hi] = ch.best_hyp
    out_crit[lo:hi] = ch.best_crit
    nterms = np.sum(np.any(ch.best_hyp >= 0, axis=3), axis=2)  # (S, M)
    # the strict constraint refits every alternative under it; the asymptotic one only ruled
    # hypotheses out during the search (the kept ones' unconstrained fits are their fits)
    strict = opt.nonnegative in (True, CLAMPED)
    for a in range(M if strict else 1):
        for k in np.unique(nterms[:, a]):
            rows = np.nonzero((nterms[:, a] == k) & np.isfinite(ch.best_crit[:, a]))[0]
            if len(rows) == 0:
                continue
            hyp = _used_first(_take2(ch.best_hyp, rows, a))
            D, scale, k = space.design(hyp)
            y, w = ch.y[rows], ch.w[rows]
            fit = _fit(D, y, w, opt.nonnegative if strict else False, leverage=a == 0)  # leverages: the best's quality
            sc = ch.scale[rows]
            beta = fit.beta / scale * sc[:, None]
            kk = k + 1
            if coef_over is not None:
                beta = coef_over[rows, a, :kk]
            elif k == 0:
                lvl, wc = _constant_level(ch, rows, weights=True)
                lvl = np.maximum(lvl, 0.0) if strict else lvl
                beta = lvl[:, None] * sc[:, None]
                # its residuals, noise and quality are the shown constant's, under its own weights
                resid = y - lvl[:, None]
                with np.errstate(divide="ignore", invalid="ignore"):
                    ainv = np.where(fit.ainv.shape[1:] == (1, 1), 1.0 / _rowsum(wc)[:, None, None], fit.ainv)
                fit = dataclasses.replace(fit, resid=resid, rss=_rowsum(wc * resid * resid),
                                          ainv=np.where(np.isfinite(ainv), ainv, fit.ainv))
            N = ch.N[rows]
            pooled = (ch.ss_pe[rows] + fit.rss) / np.maximum(N - kk, 1)
            lof = fit.rss / max(n - kk, 1)
            s2 = np.maximum(pooled, lof)
            s2 = np.where(np.isfinite(s2), s2, 0.0)
            cov = fit.ainv * (s2 * eff)[:, None, None] * (sc[:, None, None] ** 2) / (scale[:, :, None] * scale[:, None, :])
            free = ch.free[rows]
            if a == 0 and free.any():
                # no noise: the misfit is the model's error, not noise (:func:`_jackknife_cov`)
                jc = _jackknife_cov(D[free], y[free], w[free])
                fin = np.all(np.isfinite(jc), axis=(1, 2))
                cf = cov[free]
                cf[fin] = jc[fin] * (sc[free][fin, None, None] ** 2) / (scale[free][fin, :, None] * scale[free][fin, None, :])
                cov[free] = cf
            out_hyp[lo + rows, a] = hyp
            out_coef[lo + rows, a, :kk] = beta
            out_cov[lo + rows, a, :kk, :kk] = cov
            if a == 0:
                out_noise[lo + rows] = np.sqrt(s2)
                out_dof[lo + rows] = np.where(pooled >= lof, N - kk, n - kk)
                out_q[lo + rows] = _quality(ch, rows, fit, D, kk, n)
    if not strict and M > 1:
        # the alternatives: coefficients and covariances only, all (series, alternative) pairs of
        # a term count in one batch
        for k in np.unique(nterms[:, 1:]):
            si, ai = np.nonzero((nterms[:, 1:] == k) & np.isfinite(ch.best_crit[:, 1:]))
            if len(si) == 0:
                continue
            ai = ai + 1
            kk = k + 1
            if ls is not None:
                # already fitted (and slots ordered) by the adaptive stage
                hyp = _take2(ch.best_hyp, si, ai)
                ainv, rss, scale = _take2(ls[0], si, ai)[:, :kk, :kk], ls[1][si, ai], _take2(ls[2], si, ai)[:, :kk]
                b = None
            else:
                hyp = _used_first(_take2(ch.best_hyp, si, ai))
                D, scale, _ = space.design(hyp)
                b, _, rss, ainv = fast_wls([D[:, :, i] for i in range(kk)], ch.y[si], ch.w[si], True)
            sc = ch.scale[si]
            if coef_over is not None:
                beta = _take2(coef_over, si, ai)[:, :kk]
            elif k == 0:
                lvl = _constant_level(ch, si)
                beta = lvl[:, None] * sc[:, None]
                rss = _rowsum(ch.w[si] * (ch.y[si] - lvl[:, None]) ** 2)
            else:
                beta = b / scale * sc[:, None]
            N = ch.N[si]
            s2 = np.maximum((ch.ss_pe[si] + rss) / np.maximum(N - kk, 1), rss / max(n - kk, 1))
            s2 = np.where(np.isfinite(s2), s2, 0.0)
            _put2(out_hyp, lo + si, ai, hyp)
            _put2(out_coef, lo + si, ai, beta)
            _put2(out_cov, lo + si, ai, ainv * (s2 * eff)[:, None, None] * (sc[:, None, None] ** 2) / (
                scale[:, :, None] * scale[:, None, :]))
    # all-zero series: exactly the constant 0
    z = np.nonzero(ch.zero)[0]
    if len(z):
        out_hyp[lo + z] = -1
        out_coef[lo + z] = 0.0
        out_cov[lo + z] = 0.0
        out_crit[lo + z, 1:] = np.inf
        out_crit[lo + z, 0] = 0.0
        out_noise[lo + z] = 0.0
        out_dof[lo + z] = np.maximum(ch.N[z] - 1, 0)
        q = np.zeros((len(z), 8))
        q[:, 1] = 1.0
        q[:, 4] = np.where(ch.N[z] > n, 0.0, np.nan)
        q[:, 5], q[:, 6], q[:, 7] = n, ch.N[z], np.nan
        out_q[lo + z] = q


def _jackknife_cov(D: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Delete-one jackknife covariance of the weighted least-squares coefficients (Tukey; Efron &
    Stein): per series the spread of the coefficients refitted with each measured point left out
    in turn, ``(n - 1) / n * sum_i (b_(i) - mean b)(b_(i) - mean b)^T`` over its ``n`` measured
    points (``w > 0``); ``D`` (S, n, k) the designs, ``y``, ``w`` (S, n).  NaN where some
    refit is not determined (fewer points left than coefficients).

    For series free of noise (:func:`noise_free`) it replaces ``s^2 (D^T W D)^-1``: that formula
    reads the misfit as independent noise of one size at every point, but a model that misses exact
    measurements misses them systematically -- a form the data do not follow (PMPI's bytes per rank
    at p = 2, 4, 8: 102400, 102400, 128000, steps of the process grid) -- and its extrapolation
    hangs on the points it misses most.  The jackknife measures just that: how far the prediction
    moves when one measurement is left out (``c + a p^(5/2) log2(p)^2`` through 102400, 102400,
    128000 says 368000 at p = 16; without the point at p = 8, 102400), with no noise model.
    A model through every point (an exact law) moves nowhere: its interval stays as narrow as the
    data are exact.  It is close to the model-robust (sandwich, HC3) covariance of a misspecified
    regression (White 1980; MacKinnon & White 1985).  The prediction is not moved, only its
    interval (bench/README.md "Noise-free series the model does not follow")."""
    S, n, k = D.shape
    measured = w > 0
    betas = np.full((S, n, k), np.nan)
    # the normal equations summed a point at a time and solved in closed form (:func:`_inv_small`):
    # elementwise operations only, so each series' floats do not depend on the other rows or on
    # where numpy placed the arrays (a fit must not depend on its chunk; tests/test_fit_chunk.py)
    wd = w[:, :, None] * D
    for i in range(n):
        A = np.zeros((S, k, k))
        b = np.zeros((S, k))
        for p in range(n):
            if p != i:
                A += wd[:, p, :, None] * D[:, p, None, :]
                b += wd[:, p, :] * y[:, p, None]
        ainv, ok = _inv_small(A)
        beta = np.zeros((S, k))
        for j in range(k):
            beta += ainv[:, :, j] * b[:, j, None]
        # a refit must be determined by the points left: as many measured ones as coefficients
        det = ok & (np.sum(measured, axis=1) - measured[:, i] >= k)
        betas[:, i] = np.where(det[:, None], beta, np.nan)
    m = measured[:, :, None]
    cnt = measured.sum(axis=1)
    # sums over the points one point at a time: each series' floats independent of the other
    # rows (:func:`_rowdot`; a fit must not depend on its chunk)
    total = np.zeros((S, k))
    for i in range(n):
        total += np.where(m[:, i], betas[:, i], 0.0)
    cov = np.zeros((S, k, k))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / cnt[:, None]
        for i in range(n):
            dev = np.where(m[:, i], betas[:, i] - mean, 0.0)
            cov += dev[:, :, None] * dev[:, None, :]
        cov *= ((cnt - 1) / cnt)[:, None, None]
    bad = np.any(m & ~np.isfinite(betas), axis=(1, 2)) | (cnt < 2)
    cov[bad] = np.nan
    return cov


def _drift(space: _Space, mean, count, ssd, opt: FitOptions, K: int, M: int, usable, hold, s2,
           growth: float = 2.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Leave-largest-out check of the whole procedure: search and average again without the
    held-out (largest) points, extrapolate to them and compare.

    Returns per series (``miss``, ``allowed``, ``z``): ``sum_h miss_h^2 / f_h^2`` and ``sum_h
    expected_h^2 / f_h^2`` over the held-out points ``h``, each divided by ``sum_h
    doublings_h^(2 growth)``, where ``expected^2`` is what the interval would allow at that point
    (variance of the held-out mean with the series' noise ``s2``, coefficient variance and the
    spread of the re-selected hypotheses) and ``f`` the held-out mean; NaN where the rerun found
    nothing; ``z`` (S, H): the signed misses in standard deviations of what was allowed.  The
    series' own drift is ``sqrt(max(miss - allowed, 0))`` (the misspecification is taken to grow as
    a power >= 2 of the distance beyond the data: linear growth under-covered two-term and
    small-term truths, bench/README.md); :func:`_pool_drift` turns the pair into the drift of the
    intervals.

    With ``E[miss_h^2 / f_h^2] = allowed_h + drift^2 doublings_h^(2 growth)`` the ratio of the sums
    is an unbiased estimate of ``drift^2`` whatever the distances; held-out points at different
    distances (a grid whose parameters step unevenly: Relearn's n = 9000 is 0.17 doublings beyond
    8000, its p = 256 one doubling beyond 128) are weighed by how much drift they can show.  The
    mean of the per-point ratios (before branch cal21) divided a near point's noise by
    0.17^4 = 1/1200 and let it cancel the misses one doubling out (bench/README.md "Intervals on
    partial grids").  Equal distances (every point one doubling out) give the same value either
    way."""
    miss2, allowed, z = _rerun(space, mean, count, ssd, opt, K, M, usable, hold, s2)
    scale = float(np.sum(hold[1] ** (2 * growth)))
    # sums over the held-out points as row-major sums (the layout of ``miss2``/``allowed`` follows
    # numpy's choices for mixed-layout operands, which change with the number of rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _rowsum(miss2) / scale, _rowsum(allowed) / scale, z


#: a group pools its drift (:func:`_pool_drift`) from this many series with a usable check, else
#: every series keeps its own
DRIFT_POOL_MIN = 8
#: ... and only when Bartlett's test does not reject equal miss ratios at this level
DRIFT_POOL_LEVEL = 0.05


def _pool_drift(miss: np.ndarray, allowed: np.ndarray, z: np.ndarray, pool: bool = True
                ) -> tuple[np.ndarray, np.ndarray]:
    """The drift of every series of a group and its degrees of freedom, from the leave-largest-out
    check (:func:`_drift`: per series the mean squared relative miss ``miss`` at the ``k`` held-out
    points and what the interval allowed there, ``allowed``, both per doubling^(2 growth); ``z``
    (S, k) the signed misses in standard deviations of what was allowed).

    Alone, a series' drift ``sqrt(max(miss - allowed, 0))`` rests on its ``k`` held-out points: at
    one point the t quantile of the interval is enormous, and the floor at 0 turns the noise of
    that one point into drift half the time.  A group pools instead when its series miss alike:
    with ``u = miss / allowed`` (how many times the allowed variance the misses took; 1 = no
    drift) taken as ``lambda_s * chi2_k / k``, Bartlett's test of equal variances does not reject
    a common ``lambda`` at :data:`DRIFT_POOL_LEVEL` (the limit of an empirical-Bayes shrinkage of
    the ``lambda_s`` with infinite prior degrees of freedom, as limma's for variances, Smyth 2004).
    Then every series takes the group's ``lambda = mean(u)``:

        drift^2 = max(lambda - 1, 0) * allowed,     dof = k * S_eff,

    ``S_eff = S / (1 + (S - 1) rho)`` the effective number of independent series, ``rho``
    (clipped to [0, 1]) the mean correlation of the signed misses ``z`` across series: the
    callpaths of one run share its noise, and misses that move together are one draw, not S.
    Each series keeps its own drift with ``k`` degrees of freedom when

    * fewer than :data:`DRIFT_POOL_MIN` series have a usable check (exact counts, nothing allowed,
      always keep their own), or ``S_eff`` is below :data:`DRIFT_POOL_MIN` (LULESH: its callpaths'
      misses at the held-out run correlate 0.4-0.97, ``S_eff`` 1-2.2; pooling them gave one
      draw's drift to every series, intervals wider than their own);
    * the test rejects (the synthetic sets: misselected series next to exact ones; a partial
      shrinkage there, limma's prior dof ~ 4-7, widened their intervals to 97-99 % coverage,
      bench/README.md "Intervals").

    ``pool=False``: every series keeps its own (unrelated series fitted together).

    Returns (drift (S,), dof (S,) int)."""
    k = z.shape[1]
    with np.errstate(invalid="ignore"):
        own = np.sqrt(np.maximum(miss - allowed, 0.0))
    drift = np.where(np.isfinite(own), own, 0.0)
    dof = np.full(len(miss), k, dtype=np.int64)
    ok = np.isfinite(miss) & np.isfinite(allowed) & (allowed > 0) & (miss > 0) & np.all(np.isfinite(z), axis=1)
    S = int(ok.sum())
    if S < DRIFT_POOL_MIN or k < 1 or not pool:
        return drift, dof
    u = miss[ok] / allowed[ok]
    lam = float(np.mean(u))
    # Bartlett's test of equal variances, each u a variance estimate with k degrees of freedom
    nu = k * S
    bartlett = (nu * math.log(lam) - k * float(np.sum(np.log(u)))) / (1 + (S / k - 1 / nu) / (3 * (S - 1)))
    if not math.isfinite(bartlett) or chi2_sf_below(S - 1, bartlett, DRIFT_POOL_LEVEL):
        return drift, dof
    zo = z[ok]
    z2 = np.sum(zo * zo, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = float(np.mean((np.sum(zo, axis=0) ** 2 - z2) / ((S - 1) * z2)))
    rho = min(max(rho, 0.0), 1.0) if math.isfinite(rho) else 1.0
    s_eff = S / (1 + (S - 1) * rho)
    if s_eff < DRIFT_POOL_MIN:
        return drift, dof
    drift[ok] = np.sqrt(max(lam - 1.0, 0.0) * allowed[ok])
    dof[ok] = int(round(k * s_eff))
    return drift, dof


def _growth(space: _Space, mean, count, ssd, opt: FitOptions, K: int, M: int, usable) -> float:
    """Growth exponent of the extrapolation misspecification, estimated once per group: the search
    is rerun without the two largest values of every parameter and its excess misses (as in
    :func:`_drift`) at the nearest and the farthest held-out points are compared across series
    (sd ~ doublings^growth).  Pooled over (a sample of) the group's series, because one series'
    misses are far too noisy to tell a growth rate; clipped to ``GROWTH`` (the quadratic growth
    of the drift is the floor)."""
    lo, hi = GROWTH
    hold = _holdout(space.X, usable, drop=2)
    S = len(mean)
    if hold is None or S < 20:
        return lo
    keep, dist = hold
    near, far = dist.min(), dist.max()
    if far < 1.5 * near:
        return lo
    idx = np.unique(np.linspace(0, S - 1, min(S, GROWTH_SAMPLE)).astype(int))
    idx = idx[np.any(mean[idx] != 0, axis=1)]
    if len(idx) < 20:
        return lo
    m, c, d = mean[idx], count[idx], ssd[idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.sum(np.where(m != 0, d / (m * m), 0.0), axis=1) / np.maximum(c.sum(axis=1) - c.shape[1], 1)
    miss2, allowed, _ = _rerun(space, m, c, d, opt, K, M, usable, hold, np.nan_to_num(rel))
    excess = miss2 - allowed
    e_near = np.mean(excess[:, dist == near], axis=1)
    e_far = np.mean(excess[:, dist == far], axis=1)
    ok = np.isfinite(e_near) & np.isfinite(e_far)
    if ok.sum() < 20:
        return lo
    # heavy tails: clip each at its 95% quantile across series before averaging
    e_near = np.mean(np.minimum(e_near[ok], np.quantile(e_near[ok], 0.95)))
    e_far = np.mean(np.minimum(e_far[ok], np.quantile(e_far[ok], 0.95)))
    if e_near <= 0 or e_far <= 0:
        return lo
    g = 0.5 * math.log(e_far / e_near) / math.log(far / near)
    return float(min(max(g, lo), hi))


def _rerun(space: _Space, mean, count, ssd, opt: FitOptions, K: int, M: int, usable, hold, s2
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Search and average without the held-out points of ``hold``; per series and held-out point
    the squared relative miss of the averaged extrapolation and what the interval allows there
    (variance of the held-out mean with the noise ``s2``, coefficient variance, spread of the
    re-selected hypotheses), both relative to the held-out mean: two (S, H) arrays, NaN where the
    rerun found nothing.  Their difference is the excess miss.  Third: the signed miss in
    standard deviations of what was allowed ((S, H), NaN where nothing was allowed)."""
    keep, dist = hold
    X = space.X
    m = X.shape[1]
    kept = [[i[keep[i]] for i in parameter_lines(X, p)] for p in range(m)]
    ckeep, skeep = count * keep[None, :], ssd * keep[None, :]
    ch = _Chunk(mean, ckeep, skeep, K, m, M, X, kept, opt.noise, opt.exact, hetero=opt.hetero)
    ch.merge_constant(opt.selection)
    if m == 1:
        _search_single(space, ch, opt, K)
        _model_error(space, ch, opt, K, m, M, mean, ckeep, skeep, X, kept, None, usable)
    else:
        kidx = np.nonzero(keep)[0]
        lines = [[kidx[ix] for ix in parameter_lines(X[keep], p)] for p in range(m)]
        # a shorter shortlist: the check calibrates a variance, it need not find the best model
        # (3 of 5: 9 instead of 25 choices per two-parameter form)
        sub = dataclasses.replace(opt, shortlist=min(opt.shortlist, DRIFT_SHORTLIST))
        use = [p for p in usable if lines[p]]
        _search_multi(space, ch, sub, K, lines, use)
        # the whole procedure, as the fit runs it
        _model_error(space, ch, sub, K, m, M, mean, ckeep, skeep, X, kept, lines, use)
    with np.errstate(invalid="ignore", over="ignore"):
        wt = np.exp(-(ch.best_crit - ch.best_crit[:, :1]) / 2)
    wt = np.where(np.isfinite(ch.best_crit) & np.isfinite(wt), wt, 0.0)
    wt = wt / np.maximum(wt.sum(axis=1, keepdims=True), 1e-300)
    held = ~keep
    H = int(held.sum())
    S = len(ch.y)
    preds = np.zeros((S, M, H))
    cvar = np.zeros((S, M, H))
    nterms = np.sum(np.any(ch.best_hyp >= 0, axis=3), axis=2)
    # the constant's entries of the normal equations, once per series for all its alternatives
    a00, b0 = _const_sums(ch.y, ch.w)
    # all (series, alternative) pairs with the same number of terms in one batch (row by row the
    # same floats as one fit per alternative); coefficients and their inverse normal matrices only
    # (:func:`_wls`'s, without its residuals)
    for k in np.unique(nterms):
        si, ai = np.nonzero((nterms == k) & (wt > 0))
        if len(si) == 0:
            continue
        D, _, _ = space.design(_used_first(_take2(ch.best_hyp, si, ai)))
        _, _, beta, ainv, fok = _normal(D, ch.y[si], ch.w[si], (a00[si], b0[si]))
        # row-major: the design's storage (and so the layout of ``D[:, held]``) changes with the
        # number of rows, and einsum's order of summation with the layout (:func:`_rowdot`)
        Dh = np.ascontiguousarray(D[:, held, :])
        if k == 0:
            beta = _constant_level(ch, si)[:, None]
        _put2(preds, si, ai, np.einsum("shi,si->sh", Dh, beta))
        _put2(cvar, si, ai, np.maximum(np.einsum("shi,sij,shj->sh", Dh, ainv, Dh), 0.0) * s2[si, None])
        wt[si, ai] = np.where(fok, wt[si, ai], 0.0)
    wt = wt / np.maximum(wt.sum(axis=1, keepdims=True), 1e-300)
    avg = np.einsum("sa,sah->sh", wt, preds)
    spread = np.einsum("sa,sah->sh", wt, cvar + (preds - avg[:, None, :]) ** 2)
    yh = mean[:, held] / ch.scale[:, None]
    fh = np.maximum(np.abs(yh), FLOOR)
    fin = np.isfinite(ch.c2)[:, None]
    c2 = np.where(fin, ch.c2[:, None], 0.0)
    fh = np.where(fin, np.sqrt((fh * fh + c2) / (1 + c2)), 1.0)   # the absolute part, as the weights
    with np.errstate(divide="ignore", invalid="ignore"):
        v = s2[:, None] * fh * fh / np.maximum(count[:, held], 1) + spread
        miss2 = (yh - avg) ** 2 / (fh * fh)
        z = (yh - avg) / np.sqrt(v)
        allowed = v / (fh * fh)
    ok = np.all(np.isfinite(miss2) & np.isfinite(allowed), axis=1) & (wt.sum(axis=1) > 0)
    nan = lambda a: np.where(ok[:, None], a, np.nan)  # noqa: E731
    return nan(miss2), nan(allowed), nan(z)


def smape_percent(fitted, y):
    """The symmetric mean absolute percentage error (%) of ``fitted`` against the measured ``y``
    along the last axis (one series a row): the mean of ``2 |f - y| / (|f| + |y|)``, that sum
    floored at :data:`FLOOR` x the series' largest ``|y|`` -- as the weights do, a value below that
    share of the series is measured in absolute terms: a measured 0 against a law's 4.6e-6 (a
    routine that does not run at p = 1, its law 432 at p = 27) is a miss of 1e-8 of the series, not
    the 200 % any nonzero value against 0 would count.  Points where both are 0 count 0."""
    fitted, y = np.asarray(fitted, dtype=float), np.asarray(y, dtype=float)
    top = np.max(np.abs(y), axis=-1, keepdims=True) if y.size else np.zeros(y.shape[:-1] + (1,))
    den = np.maximum(np.abs(fitted) + np.abs(y), FLOOR * top)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 100 * np.mean(np.where(den > 0, 2 * np.abs(fitted - y) / np.where(den > 0, den, 1.0), 0.0), axis=-1)


def _quality(ch: _Chunk, rows, fit: _WLS, D, kk: int, n: int) -> np.ndarray:
    sc = ch.scale[rows]
    y = ch.y[rows]
    fitted = y - fit.resid
    rss = np.sum(fit.resid ** 2, axis=1) * sc ** 2
    tss = np.sum((y - y.mean(axis=1, keepdims=True)) ** 2, axis=1) * sc ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        if n > kk:
            adj = 1 - (rss / (n - kk)) / (tss / max(n - 1, 1))
        else:
            adj = np.full(len(rows), np.nan)
        adj = np.where(tss > 0, adj, np.where(rss <= 1e-24 * np.maximum(sc ** 2, 1e-300), 1.0, 0.0))
        smape = smape_percent(fitted, y)
        f = ch.f[rows]
        lev_ok = np.all(fit.hat < 1 - 1e-9, axis=1)
        loo = fit.resid / np.where(fit.hat < 1 - 1e-9, 1 - fit.hat, 1.0) / f
        cv = np.where(lev_ok, 100 * np.sqrt(np.mean(loo ** 2, axis=1)), np.nan)
        N = ch.N[rows]
        noise = np.where(N > n, 100 * np.sqrt(ch.ss_pe[rows] / np.maximum(N - n, 1)), np.nan)
    crit = ch.best_crit[rows, 0]
    return np.column_stack([rss, adj, smape, cv, noise, np.full(len(rows), n), N, crit])
