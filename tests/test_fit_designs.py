"""The two-term single-parameter search fits its pairs of blocks in batches
(perfcast.fit.core._fit_designs) instead of one _fit call per pair: the same floats as the per-pair
path under every sign rule, and the same least-squares solution numpy's lstsq gives."""

import numpy as np
import pytest

from perfcast.fit import FitOptions, fit_series
from perfcast.fit.core import ASYMPTOTIC, CLAMPED, _fit, _fit_designs

FIELDS = ("beta", "rss", "press", "ainv", "ok", "resid", "hat")


def _case(seed):
    rng = np.random.default_rng(seed)
    S, n, B = int(rng.integers(1, 30)), int(rng.integers(4, 40)), int(rng.integers(1, 40))
    x = np.sort(rng.uniform(1, 1000, n))
    # columns like the search's: powers and logs of x (some falling), scaled to unit max
    T = np.column_stack([x ** e * np.log2(x + 1) ** j for e in (-1, -0.5, 0.5, 1, 2) for j in (0, 1, 2)])
    T /= np.max(np.abs(T), axis=0)
    # series that fall, grow, dip below zero and sit at zero, so that every rule rejects some fits
    y = (rng.normal(0, 1, (S, 1)) + rng.normal(0, 1, (S, 1)) * T[:, rng.integers(0, T.shape[1], S)].T
         + rng.normal(0, 0.1, (S, n)))
    y[0] = 0.0
    w = rng.uniform(0.1, 2, (S, n))
    ab = rng.integers(0, T.shape[1], (B, 2))
    D = np.ones((B, n, 3))
    D[:, :, 1], D[:, :, 2] = T[:, ab[:, 0]].T, T[:, ab[:, 1]].T
    grow = rng.random((B, 2)) < 0.5
    return D, y, w, grow


@pytest.mark.parametrize("nonneg", [False, True, ASYMPTOTIC, CLAMPED])
@pytest.mark.parametrize("seed", range(12))
def test_batched_fits_are_the_per_design_fits_bit_for_bit(nonneg, seed):
    D, y, w, grow = _case(seed)
    got = _fit_designs(D, y, w, nonneg, grow)
    rejected = 0
    for c in range(len(D)):
        want = _fit(D[c], y, w, nonneg, growing=grow[c])
        for f in FIELDS:
            assert np.array_equal(getattr(got, f)[:, c], getattr(want, f), equal_nan=True), (f, c)
        rejected += int(np.sum(want.ok & ~np.isfinite(want.rss)))
    if nonneg:
        assert rejected > 0      # the sign rules were exercised


def test_the_solution_is_least_squares():
    D, y, w, _ = _case(3)
    got = _fit_designs(D, y, w, False, np.zeros((len(D), 2), dtype=bool))
    for c in range(len(D)):
        for s in range(len(y)):
            if not got.ok[s, c]:
                continue
            sw = np.sqrt(w[s])
            beta, *_ = np.linalg.lstsq(D[c] * sw[:, None], y[s] * sw, rcond=None)
            assert got.beta[s, c] == pytest.approx(beta, rel=1e-6, abs=1e-6 * np.max(np.abs(beta)))
            assert got.rss[s, c] == pytest.approx(np.sum(w[s] * (y[s] - D[c] @ beta) ** 2), rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("negative", [False, True])
def test_two_term_laws_are_recovered(negative):
    """c + a x^e1 + b x^e2 from exact values: the search finds the generating terms."""
    x = np.array([2.0, 4, 8, 16, 32, 64, 128])
    law = (lambda x: 5 + 40 / x + 0.5 * x) if negative else (lambda x: 3 + 2 * x + 0.01 * x ** 2 * np.log2(x))
    want = {(-1.0, 0), (1.0, 0)} if negative else {(1.0, 0), (2.0, 1)}
    m = fit_series(x, law(x), "x", FitOptions(max_terms=2, negative=negative))
    assert {(float(t.factors[0][1]), t.factors[0][2]) for t in m.terms} == want
    assert m.predict({"x": 1024.0}) == pytest.approx(law(1024.0), rel=1e-6)
