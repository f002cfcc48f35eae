"""The special functions the fit and its intervals need, without importing scipy.special.

scipy.special costs ~0.15-0.19 s of a command's start (its array-API layer); an interval needs only
Student t quantiles, a drift pooling a chi-square tail, a lack-of-fit or line test an F tail, and a
non-normal noise model one generalised-normal quantile.  Here they come from two regularised
incomplete functions:

- ``gamma_q(a, x)``: Q(a, x) = Gamma(a, x) / Gamma(a), by the power series of P below x = a + 1 and
  the continued fraction of Q above (Numerical Recipes, 3rd ed., section 6.2);
- ``beta_inc(a, b, x)``: I_x(a, b), by the continued fraction of the incomplete beta function
  (ibid., section 6.4), with the symmetry I_x(a, b) = 1 - I_(1-x)(b, a) where it converges slowly,
  vectorised over its arguments.

Then (T with ``dof`` degrees of freedom, F with (d1, d2), chi2 with ``df``):

    P(T > t) = I_x(dof/2, 1/2) / 2,  x = dof / (dof + t^2)      (t > 0)
    P(F > f) = I_x(d2/2, d1/2),       x = d2 / (d2 + d1 f)
    P(chi2 > x) = Q(df/2, x/2)

The t quantile solves the first by Newton's method in log t (where the tail is nearly linear for
few degrees of freedom and smooth for many), from the Cornish-Fisher expansion (Abramowitz and
Stegun 26.7.5).  A test decided here against a level asks scipy only when its p-value is within
:data:`SF_MARGIN` (relative) of the level, so decisions are scipy's; the quantiles agree with
scipy's to ~1e-13 relative (tests/test_fit_special.py, scipy as the ground truth).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

#: a test decided here asks scipy when its own p-value is this close (relative) to the level
SF_MARGIN = 1e-6
_TINY = 1e-300
_EPS = 1e-15
#: the t quantile of this many degrees of freedom or more is the Cornish-Fisher expansion's (its
#: first omitted term ~dof^-5 is below 3e-15 relative there up to p = 1 - 1e-6; the incomplete beta
#: function's log-gamma prefactor would lose digits beyond)
T_EXPANSION_DOF = 3000.0


def gamma_pq(a: float, x: float) -> tuple[float, float] | None:
    """(P(a, x), Q(a, x)), the regularised lower and upper incomplete gamma functions for a, x > 0,
    each to relative error ~1e-11 at a = 15,000 (the log prefactor's rounding; better for small
    a); the one computed directly is the smaller (P below x = a + 1, Q above); None when the series
    or fraction does not converge."""
    lp = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        ap = a
        for _ in range(1_000_000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-16:
                p = total * math.exp(lp)
                return p, 1.0 - p
        return None
    b = x + 1.0 - a
    c = 1.0 / _TINY
    d = 1.0 / b
    h = d
    for i in range(1, 1_000_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = _TINY if abs(d) < _TINY else d
        c = b + an / c
        c = _TINY if abs(c) < _TINY else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            q = math.exp(lp) * h
            return 1.0 - q, q
    return None


def gamma_q(a: float, x: float) -> float | None:
    """Q(a, x) of :func:`gamma_pq`."""
    pq = gamma_pq(a, x)
    return None if pq is None else pq[1]


def chi2_sf_below(df: int, x: float, level: float) -> bool:
    """Whether the chi-square survival function with ``df`` degrees of freedom at ``x`` (scipy's
    ``special.chdtrc``) is below ``level``: decided by :func:`gamma_q` where its p-value is more
    than :data:`SF_MARGIN` (relative) from ``level`` -- both are accurate to far better, so the
    answer is scipy's -- else (and for x <= 0 or df < 1) by scipy."""
    if df >= 1 and x > 0:
        q = gamma_q(df / 2.0, x / 2.0)
        if q is not None and math.isfinite(q) and abs(q - level) > SF_MARGIN * level:
            return q < level
    from scipy import special

    return float(special.chdtrc(df, x)) < level


def gamma_p_inv(a: float, y: float) -> float:
    """The x with P(a, x) = y (scipy's ``special.gammaincinv``) for a > 0, 0 < y < 1: Newton's
    method in log x on P = 1 - Q, kept inside a bracket that bisection shrinks when a step
    leaves it (x can be ~1e-100 for small a)."""
    lo, hi = math.log(1e-300), math.log(max(1.0, 2 * a))
    while gamma_pq(a, math.exp(hi))[0] < y:
        lo, hi = hi, hi + 1.0
    # the start: P(a, x) ~ x^a / Gamma(a + 1) for small x
    u = min(max((math.log(y) + math.lgamma(a + 1)) / a, lo), hi)
    for _ in range(400):
        x = math.exp(u)
        p = gamma_pq(a, x)[0] if x > 0 else 0.0
        if p < y:
            lo = u
        else:
            hi = u
        slope = math.exp(a * u - x - math.lgamma(a))     # dP / d(log x)
        nxt = u - (p - y) / slope if slope > 0 else math.nan
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
        if abs(nxt - u) <= 4 * _EPS * max(1.0, abs(u)):
            return math.exp(nxt)
        u = nxt
    return math.exp(u)


def _lgamma(v: np.ndarray) -> np.ndarray:
    return np.fromiter(map(math.lgamma, v.tolist()), dtype=float, count=v.size)


def _betacf(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The continued fraction of I_x(a, b) (modified Lentz), element-wise; each element iterates
    until its own factor is within 1e-15 of 1."""
    out = np.empty(x.shape)
    pos = np.arange(x.size)
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones(x.shape)
    d = 1.0 - qab * x / qap
    d = 1.0 / np.where(np.abs(d) < _TINY, _TINY, d)
    h = d.copy()
    for m in range(1, 100_000):
        m2 = 2.0 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / np.where(np.abs(d) < _TINY, _TINY, d)
        c = 1.0 + aa / c
        c = np.where(np.abs(c) < _TINY, _TINY, c)
        h = h * d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / np.where(np.abs(d) < _TINY, _TINY, d)
        c = 1.0 + aa / c
        c = np.where(np.abs(c) < _TINY, _TINY, c)
        delta = d * c
        h = h * delta
        done = np.abs(delta - 1.0) < _EPS
        if done.all():
            out[pos] = h
            return out
        if done.any():
            out[pos[done]] = h[done]
            keep = ~done
            pos, a, b, x, qab, qap, qam, c, d, h = (v[keep] for v in (pos, a, b, x, qab, qap, qam, c, d, h))
    out[pos] = h
    return out


def beta_inc(a, b, x, log_x=None, log_1mx=None, log_beta=None) -> np.ndarray:
    """I_x(a, b), the regularised incomplete beta function, element-wise for a, b > 0 and
    0 <= x <= 1 (broadcast).  ``log_x``/``log_1mx``: log(x) and log(1 - x) when the caller has them
    more accurately than from ``x`` (1 - x of an x near 1); ``log_beta``: -log B(a, b) when known."""
    a, b, x = (np.asarray(v, dtype=float) for v in np.broadcast_arrays(a, b, x))
    shape = x.shape
    a, b, x = a.ravel(), b.ravel(), x.ravel()
    lx = np.log(x) if log_x is None else np.broadcast_to(log_x, shape).ravel()
    l1 = np.log1p(-x) if log_1mx is None else np.broadcast_to(log_1mx, shape).ravel()
    out = np.where(x <= 0, 0.0, 1.0)
    inner = np.flatnonzero((x > 0) & (x < 1))
    if inner.size:
        a, b, x, lx, l1 = a[inner], b[inner], x[inner], lx[inner], l1[inner]
        lb = (_lgamma(a + b) - _lgamma(a) - _lgamma(b) if log_beta is None
              else np.broadcast_to(log_beta, shape).ravel()[inner])
        with np.errstate(over="ignore", under="ignore"):
            front = np.exp(a * lx + b * l1 + lb)
        direct = x < (a + 1.0) / (a + b + 2.0)
        val = np.empty(x.shape)
        i = np.flatnonzero(direct)
        if i.size:
            val[i] = front[i] * _betacf(a[i], b[i], x[i]) / a[i]
        j = np.flatnonzero(~direct)
        if j.size:
            val[j] = 1.0 - front[j] * _betacf(b[j], a[j], np.exp(l1[j])) / b[j]
        out[inner] = val
    return out.reshape(shape)


def f_sf(d1, d2, f) -> np.ndarray:
    """P(F > f) of the F distribution with (d1, d2) degrees of freedom (scipy's
    ``special.fdtrc``), element-wise; 1 at f <= 0, 0 at f = inf."""
    d1, d2, f = (np.asarray(v, dtype=float) for v in np.broadcast_arrays(d1, d2, f))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        den = d2 + d1 * f
        lx = np.log(d2) - np.log(den)
        l1 = np.log(d1 * f) - np.log(den)
        x = d2 / den
    out = np.full(f.shape, np.nan)
    ok = (d1 > 0) & (d2 > 0) & ~np.isnan(f)
    out[ok & (f <= 0)] = 1.0
    out[ok & np.isposinf(f)] = 0.0
    mid = ok & (f > 0) & np.isfinite(f)
    if mid.any():
        out[mid] = beta_inc(d2[mid] / 2, d1[mid] / 2, x[mid], lx[mid], l1[mid])
    return out


def f_sf_decided(d1, d2, f, level: float) -> np.ndarray:
    """:func:`f_sf`, with scipy's value where it is within :data:`SF_MARGIN` (relative) of
    ``level``: a comparison of the result with ``level`` is scipy's."""
    p = f_sf(d1, d2, f)
    near = ~(np.abs(p - level) > SF_MARGIN * level)
    if near.any():
        from scipy import special

        d1, d2, f = np.broadcast_arrays(d1, d2, f)
        p = np.where(near, special.fdtrc(d1, d2, f), p)
    return p


def _t_tail(dof: np.ndarray, t: np.ndarray, half_lnorm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(T > t) for t > 0 and t times the density there (``half_lnorm``: the log of the density's
    normalising constant, -log B(dof/2, 1/2) - log(dof)/2)."""
    den = dof + t * t
    lx = np.log(dof) - np.log(den)
    l1 = 2.0 * np.log(t) - np.log(den)
    tail = 0.5 * beta_inc(dof / 2, 0.5, np.exp(lx), lx, l1, half_lnorm + 0.5 * np.log(dof))
    tdens = t * np.exp(half_lnorm + (dof + 1) / 2 * lx)
    return tail, tdens


def t_quantile(dof, p: float) -> np.ndarray:
    """Quantile ``p`` (0.5 < p < 1) of Student's t with ``dof`` degrees of freedom (scipy's
    ``special.stdtrit(dof, p)``), element-wise; NaN where ``dof`` is not positive or is NaN, the
    normal quantile at inf."""
    if not 0.5 < p < 1:
        raise ValueError(f"t_quantile: p={p} outside (0.5, 1)")
    dof = np.asarray(dof, dtype=float)
    out = np.full(dof.shape, np.nan)
    z = NormalDist().inv_cdf(p)
    out[np.isposinf(dof)] = z
    fin = np.isfinite(dof) & (dof > 0)
    if not fin.any():
        return out
    v, inv = np.unique(dof[fin], return_inverse=True)
    # Cornish-Fisher: the start everywhere, the answer beyond T_EXPANSION_DOF degrees of freedom
    z2 = z * z
    g = [z * (z2 + 1) / 4, z * ((5 * z2 + 16) * z2 + 3) / 96, z * (((3 * z2 + 19) * z2 + 17) * z2 - 15) / 384,
         z * ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) / 92160]
    t = z + sum(gk / v ** (k + 1) for k, gk in enumerate(g))
    t = np.maximum(t, z)
    rows = np.flatnonzero(v < T_EXPANSION_DOF)
    if rows.size:
        vv = v[rows]
        half_lnorm = _lgamma((vv + 1) / 2) - _lgamma(vv / 2) - 0.5 * np.log(vv * math.pi)
        # few degrees of freedom: the start from the power-law tail, P(T > t) ~ k dof^((dof-1)/2) t^-dof
        # (the expansion's terms grow like dof^-4 there)
        few = vv < 2.0
        if few.any():
            w = vv[few]
            t[rows[few]] = np.maximum(np.exp((half_lnorm[few] + (w - 1) / 2 * np.log(w) - math.log1p(-p)) / w), z)
        target = math.log1p(-p)
        s = np.log(t[rows])
        for _ in range(100):
            tail, tdens = _t_tail(vv, np.exp(s), half_lnorm)
            # d log(tail) / d log(t) = -t f(t) / tail
            step = (np.log(tail) - target) * tail / tdens
            s = s + step
            # Newton's error after a step of 1e-9 is ~1e-18: done
            moved = np.abs(step) > 1e-9
            if not moved.any():
                break
            # the converged ones leave the iteration
            t[rows[~moved]] = np.exp(s[~moved])
            rows, vv, half_lnorm, s = rows[moved], vv[moved], half_lnorm[moved], s[moved]
        t[rows] = np.exp(s)
    out[fin] = t[inv.ravel()]
    return out
