"""Noise shape from the repetitions, and fits under a generalised normal likelihood (no file I/O).

The generalised normal (exponential power) family has density ``exp(-|e / a|^beta)`` up to a
constant: ``beta = 2`` is the normal, ``beta = 1`` the Laplace, ``beta -> inf`` the uniform
distribution.  Its excess kurtosis ``Gamma(5/b) Gamma(1/b) / Gamma(3/b)^2 - 3`` falls
monotonically from +inf (b -> 0) through 3 (Laplace) and 0 (normal) to -1.2 (uniform), so the
shape follows from the kurtosis of the noise.

The noise itself is not observed: the repetitions of a point only reveal their deviations from
the point's mean, and the relative noise level differs from series to series.  Per series the
scale-free statistic ``Q = sum d^4 / (sum d^2)^2`` of the relative deviations ``d = (y - mean) /
mean`` is used; its expectation (to first order, ratio of expectations) is linear-fractional in
the noise's excess kurtosis ``k`` given the repetition counts, exactly including the loss from
subtracting the means, so ``k`` is solved from the sum of ``Q`` over the series of a group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: the shape is used only in [BETA_MIN, BETA_MAX]: below 1 the L_beta fit is not convex; above
#: BETA_MAX the objective is numerically the minimax one (the kurtosis of beta = 16 is within
#: 0.01 of the uniform's -1.2, below what thousands of deviations can resolve)
BETA_MIN, BETA_MAX = 1.0, 16.0


def gn_kurtosis(beta: float) -> float:
    """Excess kurtosis of the generalised normal distribution with shape ``beta``."""
    if beta == math.inf:
        return -1.2
    lg = math.lgamma
    return math.exp(lg(5 / beta) + lg(1 / beta) - 2 * lg(3 / beta)) - 3.0


def gn_beta(kurt: float) -> float:
    """Shape ``beta`` whose excess kurtosis is ``kurt`` (clipped to [BETA_MIN, BETA_MAX])."""
    if kurt >= gn_kurtosis(BETA_MIN):
        return BETA_MIN
    if kurt <= gn_kurtosis(BETA_MAX):
        return BETA_MAX
    lo, hi = math.log(BETA_MIN), math.log(BETA_MAX)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if gn_kurtosis(math.exp(mid)) > kurt:
            lo = mid
        else:
            hi = mid
    return math.exp(0.5 * (lo + hi))


def gn_efficiency(beta: float) -> float:
    """Asymptotic variance of the L_beta (maximum likelihood) coefficients under generalised normal
    noise of shape ``beta``, relative to least squares: ``E psi^2 / (E psi')^2 / sigma^2`` with
    ``psi = |e|^(beta-1) sign e``, i.e. ``Gamma(1/b)^2 / (b^2 Gamma(2 - 1/b) Gamma(3/b))``
    (1 at beta = 2, 1/2 for the Laplace, -> 0 towards the uniform)."""
    lg = math.lgamma
    b = beta
    return math.exp(2 * lg(1 / b) - 2 * math.log(b) - lg(2 - 1 / b) - lg(3 / b))


@dataclass(frozen=True)
class NoiseShape:
    """Shape estimate of a group's relative repetition noise."""

    beta: float          # generalised normal shape used (2.0 = normal path)
    kurtosis: float      # estimated excess kurtosis of one observation's noise
    se: float            # its standard error (jackknife, at least the normal-theory one)
    deviations: int      # degrees of freedom of the pooled deviations (observations - points)
    adaptive: bool       # True when the likelihood departs from the normal one
    skewness: float = 0.0      # estimated skewness of the noise
    skewness_se: float = math.inf
    #: beta of the kurtosis alone (reported also when the normal path is kept)
    beta_kurtosis: float = 2.0

    def to_dict(self) -> dict:
        return {"beta": self.beta, "beta_kurtosis": self.beta_kurtosis, "kurtosis": self.kurtosis,
                "se": self.se, "skewness": self.skewness, "skewness_se": self.skewness_se,
                "deviations": self.deviations, "adaptive": self.adaptive}


NORMAL = NoiseShape(2.0, 0.0, math.inf, 0, False)


#: elements of the (R, S, n) arrays of a block of series in :func:`estimate_shape` (512 kB each)
_BLOCK = 1 << 16


def _point_sums(reps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per series and point of ``reps`` (S, n, R), NaN-padded: the number of repetitions and the
    sums over them of the relative deviations from the point's mean to the powers 2, 3 and 4."""
    from .core import _rowsum
    S, n, R = reps.shape
    # the work in (repetition, series, point) layout: long inner loops where an (S, n, R) array
    # runs one per point; the sums over the repetitions are numpy's floats (:func:`_rowsum`)
    rt = np.ascontiguousarray(np.moveaxis(reps, 2, 0))

    def over_reps(x):
        return _rowsum(x.reshape(R, S * n).T).reshape(S, n)

    ok = np.isfinite(rt)
    full = bool(ok.all())
    if full:
        r = np.full((S, n), float(R))
        mean = over_reps(rt) / R
        d = rt - mean
    else:
        r = ok.sum(axis=0).astype(float)                     # (S, n) repetitions
        mean = np.where(r > 0, over_reps(np.where(np.isnan(rt), 0.0, rt)) / np.maximum(r, 1), np.nan)
        d = np.where(ok, rt - mean, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        d /= np.abs(mean)
    d[~np.isfinite(d)] = 0.0
    d2 = d * d
    p2 = over_reps(d2)                                       # (S, n) per point
    p3 = over_reps(d2 * d)
    d2 *= d2
    return r, p2, p3, over_reps(d2)


def estimate_shape(reps: np.ndarray) -> NoiseShape:
    """Noise shape of a group from its raw repetitions ``reps`` (S, n, R), NaN-padded.

    Returns the normal shape (``adaptive=False``) unless the estimated excess kurtosis differs
    from 0 by more than two standard errors (a test at about 95% under normal noise: few
    deviations always give the normal path)."""
    return shape_from_sums(*shape_sums(reps))


def shape_sums(reps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What :func:`shape_from_sums` needs of the series ``reps`` (S, n, R), per series: the
    repetitions per point (S, n), the sums over them of the relative deviations to the powers 2
    (S, n) and 3 (summed over the points, (S,)) and 4 (S, n).  Every number is per series: the
    sums of a group's series taken in parts and concatenated are those of the whole group (the
    streamed model run, :mod:`perfcast.pipeline`)."""
    S, n, R = reps.shape
    # the per-point sums a block of series at a time: every operation is per (series, point), so
    # the floats are those of the whole array at once, without its (R, S, n) temporaries (a million
    # series: 240 MB each, 1 GB at the peak) and with each block's in cache
    step = max(1, _BLOCK // max(n * R, 1))
    r, p2, p3, p4 = (np.concatenate(parts) for parts in
                     zip(*(_point_sums(reps[i:i + step]) for i in range(0, max(S, 1), step))))
    return r, p2, p3.sum(axis=1), p4


def shape_from_sums(r: np.ndarray, p2: np.ndarray, p3: np.ndarray, p4: np.ndarray) -> NoiseShape:
    """:func:`estimate_shape` from :func:`shape_sums` of the group's series (``r`` may be any
    numeric type holding the repetition counts)."""
    r = np.asarray(r, dtype=float)
    n = p2.shape[1]
    nu_p = np.maximum(r - 1, 0)
    # points with repetitions: the jackknife below leaves out one point at a time
    multi = np.nonzero(np.any(nu_p > 0, axis=0))[0]
    good = np.all(np.isfinite(p2) & np.isfinite(p4), axis=1)
    dof = int(nu_p[good].sum())
    if good.sum() < 2 or dof < 8 or len(multi) < 2:
        return NORMAL
    if not good.all():      # (no copies of the whole arrays when every series is usable)
        p2, p3, p4, r = p2[good], p3[good], p4[good], r[good]
    if np.all(r == r[:1]):
        upat, pat = r[:1], np.zeros(len(r), dtype=np.intp)
    else:
        upat, pat = np.unique(r, axis=0, return_inverse=True)
        pat = np.asarray(pat).ravel()
    s2, s4 = p2 @ np.ones(n), p4 @ np.ones(n)
    k_all = _solve_kurtosis(s2, s4, pat, upat)
    if k_all is None:
        return NORMAL
    # the ratio statistic is biased by O(1 / points per series): leave-one-point-out jackknife
    ks = []
    for i in multi:
        keep = np.ones(n, dtype=bool)
        keep[i] = False
        ki = _solve_kurtosis(s2 - p2[:, i], s4 - p4[:, i], pat, upat[:, keep])
        if ki is None:
            break
        ks.append(ki)
    g = len(multi)
    se = math.sqrt(24.0 / dof)
    if len(ks) == g:
        ks = np.array(ks)
        k = g * k_all - (g - 1) * float(np.mean(ks))
        # the jackknife's own standard error when it is larger than the normal-theory one
        se = max(se, math.sqrt((g - 1) / g * float(np.sum((ks - ks.mean()) ** 2))))
    else:
        k = k_all
    # skewness: T = sum d^3 / (sum d^2 / nu)^(3/2) per series has expectation exactly 0 under any
    # symmetric noise, and gamma * sum (r - 1)(r - 2) / r to first order otherwise
    gp2, gp3, gr = p2, p3, r
    nu_s = np.sum(np.maximum(gr - 1, 0), axis=1)
    s2 = gp2.sum(axis=1)
    use = s2 > 0
    T = gp3[use] / (s2[use] / nu_s[use]) ** 1.5
    cs = np.sum(np.where(gr > 2, (gr - 1) * (gr - 2) / np.maximum(gr, 1), 0.0), axis=1)[use]
    skew, skew_se = 0.0, math.inf
    if cs.sum() > 0 and len(T) >= 2:
        skew = float(T.sum() / cs.sum())
        # the spread across series, at least the normal-theory sqrt(6 / dof) (series need not be
        # independent: some files repeat one noise draw across metrics)
        skew_se = max(float(T.std(ddof=1) * math.sqrt(len(T)) / cs.sum()), math.sqrt(6.0 / dof))
    beta_k = gn_beta(k)
    # the generalised normal family is symmetric: its location is the mean only for symmetric
    # noise.  Heavy tails (beta < 2) make the fit follow the bulk and ignore the tail, which for
    # skewed noise (as real timings often are) moves it from the mean towards the median: there
    # the normal likelihood of the means is kept unless symmetry is tested and not rejected
    # (>= 3 repetitions somewhere).  Light tails (beta > 2) bound the noise, and the fit follows
    # the band's edges: a skew moves it by a fraction of the noise level only, and the
    # skewness estimate is itself slightly biased by the division by the point means.
    if abs(k) <= 2 * se or (k > 0 and not (math.isfinite(skew_se) and abs(skew) <= 2 * skew_se)):
        return NoiseShape(2.0, k, se, dof, False, skew, skew_se, beta_k)
    return NoiseShape(beta_k, k, se, dof, abs(beta_k - 2.0) > 1e-6, skew, skew_se, beta_k)


def _pattern_coefficients(r: np.ndarray) -> np.ndarray:
    """Per repetition-count pattern ``r`` (U, n): (A, B, C, D) with E sum d^4 = k A + B and
    E (sum d^2)^2 = k C + D for unit-variance noise of excess kurtosis k.  Per point of r reps:
    E sum_j d^4 = r [k c4 + 3 (1 - 1/r)^2], c4 = (1 - 1/r)^4 + (r - 1) / r^4; E SSD = r - 1 and
    Var SSD = (r - 1)^2 [(k + 3) / r - (r - 3) / (r (r - 1))]; points are independent."""
    m = r > 1
    inv = 1.0 / np.maximum(r, 1)
    c4 = (1 - inv) ** 4 + (r - 1) * inv ** 4
    A = np.sum(np.where(m, r * c4, 0.0), axis=1)
    B = np.sum(np.where(m, 3 * r * (1 - inv) ** 2, 0.0), axis=1)
    C = np.sum(np.where(m, (r - 1) ** 2 * inv, 0.0), axis=1)
    D = np.sum(np.where(m, (r - 1) ** 2 * (3 * inv - (r - 3) / (r * np.maximum(r - 1, 1))), 0.0),
               axis=1) + np.sum(np.maximum(r - 1, 0), axis=1) ** 2
    return np.column_stack([A, B, C, D])


def _solve_kurtosis(s2: np.ndarray, s4: np.ndarray, pat: np.ndarray, upat: np.ndarray) -> float | None:
    """Excess kurtosis k matching the summed per-series ratio sum d^4 / (sum d^2)^2 (from the
    per-series sums ``s2``, ``s4``) to its expectation (ratio of expectations), series grouped by
    repetition pattern ``pat`` (index into the patterns ``upat``)."""
    use = (s2 > 0) & (np.sum(np.maximum(upat - 1, 0), axis=1) >= 2)[pat]
    if use.sum() < 2:
        return None
    Q = float(np.sum(s4[use] / (s2[use] * s2[use])))
    cnt = np.bincount(pat[use], minlength=len(upat)).astype(float)
    A, B, C, D = _pattern_coefficients(upat).T
    sel = cnt > 0
    A, B, C, D, cnt = A[sel], B[sel], C[sel], D[sel], cnt[sel]
    if len(cnt) == 1:
        # one pattern: Q / S = (k A + B) / (k C + D), linear-fractional
        q = Q / cnt[0]
        den = A[0] - q * C[0]
        return float(min(max((q * D[0] - B[0]) / den, -2.0), 1000.0)) if den > 0 else 1000.0

    def expected(k):
        return float(np.sum(cnt * (k * A + B) / (k * C + D)))

    lo, hi = -2.0, 1000.0      # expected(k) increases with k
    if Q <= expected(lo):
        return lo
    if Q >= expected(hi):
        return hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if expected(mid) < Q:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _pow(x: np.ndarray, e: float, inplace: bool = False) -> np.ndarray:
    """x ** e for x >= 0, by repeated squaring when e is a small integer (several times faster
    than ``np.power``); ``inplace``: ``x`` may be overwritten (and returned)."""
    if e == int(e) and 0 <= e <= 64:
        e = int(e)
        if e == 0:
            return np.ones_like(x)
        out = None
        sq = x if inplace else x.copy()
        while True:
            if e & 1:
                if e == 1 and out is None:
                    return sq
                if out is None:
                    out = sq.copy()
                else:
                    out *= sq
            e >>= 1
            if not e:
                return out
            np.multiply(sq, sq, out=sq)
    return np.power(x, e, out=x if inplace else None)


def fast_wls(cols: list, y: np.ndarray, w: np.ndarray, with_inverse: bool = False) -> tuple:
    """Weighted least squares of y (S, n) on per-series design columns ``cols`` (k arrays (S, n)):
    (coefficients (S, k), usable mask (S,), weighted residual sum of squares (S,)[, inverse
    normal matrices (S, k, k)]).  Sums over the points by :func:`perfcast.fit.core._rowsum` (faster
    than numpy's reductions over a short axis, and, unlike products with a vector of ones, the same
    floats for a series whatever other series share the batch)."""
    from .core import _inv_small, _rowsum
    S, n = y.shape
    k = len(cols)
    wc = [w * c for c in cols]
    A = np.empty((S, k, k))
    for i in range(k):
        for j in range(i, k):
            A[:, i, j] = A[:, j, i] = _rowsum(wc[i] * cols[j])
    b = [_rowsum(wc[i] * y) for i in range(k)]
    ainv, ok = _inv_small(A)
    beta = np.empty((S, k))
    fitted = np.zeros((S, n))
    for i in range(k):
        beta[:, i] = sum(ainv[:, i, j] * b[j] for j in range(k))
        fitted += beta[:, i:i + 1] * cols[i]
    resid = y - fitted
    rss = _rowsum(w * resid * resid)
    if with_inverse:
        return beta, ok, np.where(ok, rss, np.inf), ainv
    return beta, ok, np.where(ok, rss, np.inf)


def lbeta_fit(D: np.ndarray, y: np.ndarray, f: np.ndarray, beta: float, coef0: np.ndarray,
              iters: int = 1, prescaled: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients minimising ``sum |(y - D c) / f|^beta`` over the raw repetitions, per series.

    ``D`` (S, n, k) designs, ``y`` (S, n, R) repetitions (NaN = missing; ``prescaled``: already
    divided by ``f``), ``f`` (S, n) relative scale of each point, ``coef0`` (S, k) start (least
    squares).  Batched iteratively reweighted
    least squares: for beta < 2 the majorise-minimise step (weights ``|r|^(beta-2)``, residuals
    floored), for beta > 2 Newton steps (the reweighted solution's step divided by ``b - 1``)
    along the continuation ``b = 8, 32, ...`` capped at beta.  Starting from least squares, two
    steps already select as well as forty (bench/README.md).  Returns (coefficients (S, k), log
    of the objective ``sum |r|^beta`` (S,))."""
    from .core import _rowsum
    S, n, R = y.shape
    ok = np.isfinite(y)
    full = bool(ok.all())
    fi = f[:, :, None]
    # the (S, n, R) work in single precision (residuals relative to the noise level; the
    # reweighted fits themselves stay in double precision); sums over a series' values by
    # :func:`perfcast.fit.core._rowsum` (the same floats whatever other series share the batch)
    if prescaled:
        yf = (y if full else np.where(ok, y, 0.0)).astype(np.float32, copy=False)
    else:
        yf = ((y if full else np.where(ok, y, 0.0)) / fi).astype(np.float32)
    Df = D / fi
    cols = [np.ascontiguousarray(Df[:, :, i]) for i in range(Df.shape[2])]
    c = coef0.copy()
    mask = None if full else ok

    def resid(cc):
        fitted = cc[:, :1] * cols[0]
        for i in range(1, len(cols)):
            fitted += cc[:, i:i + 1] * cols[i]
        r = yf - fitted.astype(np.float32)[:, :, None]
        if mask is not None:
            r[~mask] = 0.0
        return r

    def scaled(r):
        """|r| / max |r| per series, computed in place of ``r``."""
        a = np.abs(r, out=r)
        m = a.reshape(S, n * R).max(axis=1)
        m = np.where(m > 0, m, 1.0).astype(np.float32)
        a /= m[:, None, None]
        return a, m.astype(np.float64)

    r = resid(c)
    floor = None
    if beta < 2:
        rms = np.sqrt(_rowsum((r * r).reshape(S, n * R)) / np.maximum(ok.sum(axis=(1, 2)), 1))
        floor = (1e-6 * rms)[:, None, None].astype(np.float32)
    for t in range(iters):
        b = min(beta, 2.0 * 4.0 ** (t + 1)) if beta > 2 else beta
        a, m = scaled(r if floor is None else np.maximum(np.abs(r), floor))
        om = _pow(a, b - 2, inplace=True)                         # (S, n, R) relative weights
        if mask is not None:
            om[~mask] = 0.0
        W = _rowsum(om.reshape(S * n, R)).reshape(S, n).astype(np.float64)
        om *= yf
        num = _rowsum(om.reshape(S * n, R)).reshape(S, n).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            ym = np.where(W > 0, num / np.where(W > 0, W, 1.0), 0.0)
        new, fok, _ = fast_wls(cols, ym, W)
        if b > 2:
            new = c + (new - c) / (b - 1)
        good = fok & np.all(np.isfinite(new), axis=1)
        c = np.where(good[:, None], new, c)
        r = resid(c)
    a, m = scaled(r)
    tot = _rowsum(_pow(a, beta, inplace=True).reshape(S, n * R))
    with np.errstate(divide="ignore"):
        return c, np.log(tot.astype(np.float64)) + beta * np.log(m)
