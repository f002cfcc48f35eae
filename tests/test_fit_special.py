"""perfcast.fit.special: the quantiles and tail probabilities of the fit and its intervals, computed
without scipy.special, against scipy's (the ground truth): Student t quantiles over degrees of
freedom 0.1 .. 1e8 and levels 0.55 .. 1 - 1e-6, F and chi-square tails, the inverse incomplete gamma
function; and the intervals of a fitted model set, made with them, equal to those made with scipy's
quantile."""

import numpy as np
import pytest
from scipy import special

from perfcast.fit.special import beta_inc, f_sf, f_sf_decided, gamma_p_inv, t_quantile

PROBS = [0.55, 0.75, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9995, 0.999999]


@pytest.mark.parametrize("lo, hi, tol", [(0.1, 2, 1e-13), (2, 1000, 1e-11), (1000, 3000, 5e-11), (3000, 1e8, 1e-14)])
def test_t_quantile_equals_scipy(lo, hi, tol):
    rng = np.random.default_rng(3)
    dof = np.concatenate([np.geomspace(lo, hi, 400, endpoint=False), rng.uniform(lo, min(hi, max(lo, 200)), 600)])
    if lo <= 1 < hi:
        dof = np.concatenate([dof, np.arange(1, 2, 0.25)])
    for p in PROBS:
        got, want = t_quantile(dof, p), special.stdtrit(dof, p)
        assert np.max(np.abs(got / want - 1)) < tol, p


def test_t_quantile_edges_and_shapes():
    """Any array shape; NaN for non-positive or NaN degrees of freedom (as scipy); the normal
    quantile at inf; Cauchy's closed form at 1 degree of freedom, tan(pi (p - 1/2))."""
    dof = np.array([[1.0, 2.0, np.inf], [0.0, -3.0, np.nan]])
    q = t_quantile(dof, 0.95)
    assert q.shape == (2, 3)
    assert q[0, 0] == pytest.approx(np.tan(np.pi * 0.45), rel=1e-14)
    # 2 degrees of freedom: t = (2p - 1) sqrt(2 / (4 p (1 - p)))
    assert q[0, 1] == pytest.approx(0.9 * np.sqrt(2 / (4 * 0.95 * 0.05)), rel=1e-14)
    assert q[0, 2] == pytest.approx(float(special.ndtri(0.95)), rel=1e-15)
    assert np.isnan(q[1]).all()
    with pytest.raises(ValueError):
        t_quantile([3.0], 0.5)


def test_f_and_beta_tails_equal_scipy():
    rng = np.random.default_rng(11)
    d1 = rng.integers(1, 60, 4000).astype(float)
    d2 = rng.integers(1, 600, 4000).astype(float)
    f = rng.lognormal(0.0, 1.5, 4000)
    want = special.fdtrc(d1, d2, f)
    got = f_sf(d1, d2, f)
    assert np.max(np.abs(got - want) / want) < 1e-10
    assert f_sf(3.0, 7.0, 0.0) == 1.0 and f_sf(3.0, 7.0, np.inf) == 0.0 and np.isnan(f_sf(0.0, 7.0, 1.0))
    a, b, x = rng.uniform(0.1, 300, 3000), rng.uniform(0.1, 300, 3000), rng.uniform(0, 1, 3000)
    assert np.max(np.abs(beta_inc(a, b, x) - special.betainc(a, b, x))) < 1e-12
    # a decision at the level is scipy's: an F value whose p-value is the level (to rounding)
    f0 = float(special.fdtri(4, 20, 1 - 0.05))
    assert (f_sf_decided(4, 20, f0, 0.05) < 0.05) == (float(special.fdtrc(4, 20, f0)) < 0.05)


@pytest.mark.parametrize("a", [0.01, 0.0625, 0.1, 0.5, 1.0, 2.0, 10.0, 300.0])
def test_gamma_p_inv_equals_scipy(a):
    for y in [1e-6, 0.1, 0.5, 0.9, 0.99]:
        assert gamma_p_inv(a, y) == pytest.approx(float(special.gammaincinv(a, y)), rel=1e-12)


def _noisy_two_parameter_experiment():
    """40 callpaths c * p^a * n^b (exponents 0 .. 1.5) on a 5 x 5 grid, 3 repetitions, 10-30%
    log-normal noise: models with drift and Welch-Satterthwaite degrees of freedom."""
    import pandas as pd

    from perfcast import Experiment

    rng = np.random.default_rng(5)
    rows = []
    for s in range(40):
        c, a, b, sd = rng.uniform(1, 100), rng.choice([0, 0.5, 1, 1.5]), rng.choice([0, 0.5, 1]), rng.uniform(0.1, 0.3)
        for p in [4.0, 8, 16, 32, 64]:
            for n in [10.0, 20, 40, 80, 160]:
                for r in range(3):
                    rows.append({"callpath": f"k{s}", "metric": "time", "p": p, "n": n, "rep": r,
                                 "value": c * p ** a * n ** b * rng.lognormal(0.0, sd)})
    return Experiment.from_pandas(pd.DataFrame(rows), parameters=["p", "n"])


def test_intervals_equal_those_with_scipys_quantile(monkeypatch):
    """The model set's 90% intervals on a noisy two-parameter campaign (many distinct degrees of
    freedom) equal those made with scipy's stdtrit in t_quantile's place."""
    import perfcast
    import perfcast.fit.model as fm

    exp = _noisy_two_parameter_experiment()
    at = [{"p": 512.0, "n": 160.0}, {"p": 64.0, "n": 1e4}]
    ours = perfcast.model(exp).predict(at, level=0.9)
    monkeypatch.setattr(fm, "t_quantile", lambda dof, p: special.stdtrit(dof, p))
    theirs = perfcast.model(exp).predict(at, level=0.9)
    assert len(ours) == len(theirs) == 80
    got = np.array([[r["value"], r["lower"], r["upper"]] for r in ours], dtype=float)
    want = np.array([[r["value"], r["lower"], r["upper"]] for r in theirs], dtype=float)
    assert np.isfinite(got).all() and (got[:, 2] > got[:, 0]).all()
    np.testing.assert_allclose(got, want, rtol=1e-9)
