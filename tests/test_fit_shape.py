"""Noise-shape estimate and the generalised normal (L_beta) fits (perfcast.fit.shape)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfcast import fit, io
from perfcast.fit.model import Model
from perfcast.fit.shape import (estimate_shape, gn_beta, gn_efficiency, gn_kurtosis, lbeta_fit)


def _reps(kind: str, S: int = 1000, n: int = 5, R: int = 5, seed: int = 3) -> np.ndarray:
    """Multiplicative noise of unit-free shape ``kind`` around random values, noise level per
    series between 0.5% and 10%."""
    rng = np.random.default_rng(seed)
    draw = {"normal": lambda s: rng.normal(size=s),
            "laplace": lambda s: rng.laplace(size=s) / math.sqrt(2),
            "uniform": lambda s: rng.uniform(-math.sqrt(3), math.sqrt(3), size=s)}[kind]
    level = np.exp(rng.uniform(math.log(0.005), math.log(0.1), size=(S, 1, 1)))
    value = np.exp(rng.uniform(0, 8, size=(S, n, 1)))
    return value * (1 + level * draw((S, n, R)))


def test_gn_family_reference_values():
    # excess kurtosis: normal 0, Laplace 3, uniform limit -1.2
    assert gn_kurtosis(2.0) == pytest.approx(0.0, abs=1e-12)
    assert gn_kurtosis(1.0) == pytest.approx(3.0)
    assert gn_kurtosis(math.inf) == -1.2
    assert gn_beta(0.0) == pytest.approx(2.0, rel=1e-6)
    assert gn_beta(3.0) == pytest.approx(1.0)
    # efficiency of the maximum-likelihood fit vs least squares: 1 (normal), 1/2 (Laplace, the
    # median's asymptotic variance 1/(4 f(0)^2) over the variance 2 of the unit Laplace)
    assert gn_efficiency(2.0) == pytest.approx(1.0)
    assert gn_efficiency(1.0) == pytest.approx(0.5)


def test_shape_normal_keeps_normal_path():
    sh = estimate_shape(_reps("normal"))
    assert not sh.adaptive and sh.beta == 2.0
    assert abs(sh.kurtosis) < 3 * sh.se


def test_shape_laplace():
    sh = estimate_shape(_reps("laplace"))
    assert sh.adaptive
    assert sh.kurtosis == pytest.approx(3.0, abs=0.6)
    assert 1.0 <= sh.beta <= 1.3


def test_shape_uniform():
    sh = estimate_shape(_reps("uniform"))
    assert sh.adaptive
    assert sh.kurtosis == pytest.approx(-1.2, abs=0.1)
    assert sh.beta >= 8


@pytest.mark.parametrize("kind", ["laplace", "uniform"])
def test_shape_the_same_whatever_the_block_of_series(kind, monkeypatch):
    """The per-point sums are taken a block of series at a time: blocks of 7 series (some with
    padded repetitions, some without) give the estimate of one block."""
    from perfcast.fit import shape

    reps = _reps(kind, S=100)
    reps[3:9, 1, 3:] = np.nan          # uneven repetition counts in the first blocks only
    monkeypatch.setattr(shape, "_BLOCK", 10 ** 9)
    whole = estimate_shape(reps)
    monkeypatch.setattr(shape, "_BLOCK", 7 * 5 * 5)
    assert estimate_shape(reps) == whole
    assert whole.adaptive


def test_shape_few_data_is_normal():
    sh = estimate_shape(_reps("uniform", S=3, n=3, R=2))
    assert not sh.adaptive and sh.beta == 2.0


def test_lbeta_least_absolute_is_the_median():
    # constant model on 5 single observations: the L1 solution is the median (3), not the mean
    D = np.ones((1, 5, 1))
    y = np.array([[[1.0], [2.0], [3.0], [10.0], [50.0]]])
    c, _ = lbeta_fit(D, y, np.ones((1, 5)), 1.0, np.array([[y.mean()]]), iters=50)
    assert c[0, 0] == pytest.approx(3.0, abs=1e-3)


def test_lbeta_approaches_minimax():
    # line through (0, 0), (1, 1), (2, 0): the minimax line is y = 1/2 (errors -1/2, 1/2, -1/2);
    # the L16 solution is y = c with 2 c^15 = (1 - c)^15 by hand: c = 1 / (1 + 2^(1/15))
    D = np.stack([np.ones((1, 3)), np.array([[0.0, 1.0, 2.0]])], axis=2)
    y = np.array([[[0.0], [1.0], [0.0]]])
    c, logobj = lbeta_fit(D, y, np.ones((1, 3)), 16.0, np.array([[1 / 3, 0.0]]), iters=20)
    exact = 1 / (1 + 2 ** (1 / 15))
    assert c[0, 0] == pytest.approx(exact, abs=1e-6)
    assert c[0, 1] == pytest.approx(0.0, abs=1e-6)
    assert abs(c[0, 0] - 0.5) < 0.02
    assert logobj[0] == pytest.approx(math.log(2 * exact ** 16 + (1 - exact) ** 16))


def test_fit_group_adapts_to_uniform_noise():
    rng = np.random.default_rng(11)
    x = np.array([4.0, 8, 16, 32, 64])
    S, R = 400, 5
    f = 10 + 0.5 * x ** 1.5
    reps = f[None, :, None] * (1 + rng.uniform(-0.025, 0.025, size=(S, 5, R)))
    mean = reps.mean(axis=2)
    count = np.full((S, 5), float(R))
    ssd = ((reps - mean[:, :, None]) ** 2).sum(axis=2)
    g = fit.fit_group(x[:, None], mean, count, ssd, ["p"], reps=reps)
    assert g.shape.adaptive and g.shape.beta >= 8
    gn = fit.fit_group(x[:, None], mean, count, ssd, ["p"], fit.FitOptions(likelihood="normal"), reps=reps)
    assert not gn.shape.adaptive
    exact = np.mean([g.model(s).lead_order()["p"] == (1.5, 0) for s in range(S)])
    exact_n = np.mean([gn.model(s).lead_order()["p"] == (1.5, 0) for s in range(S)])
    assert exact >= exact_n
    err = np.median([abs(g.model(s).predict(256.0) - (10 + 0.5 * 256 ** 1.5)) for s in range(S)])
    err_n = np.median([abs(gn.model(s).predict(256.0) - (10 + 0.5 * 256 ** 1.5)) for s in range(S)])
    assert err <= err_n
    m = g.model(0)
    assert m.noise_shape == g.shape.beta
    assert Model.from_dict(m.to_dict()).noise_shape == pytest.approx(m.noise_shape)


def test_no_repetitions_no_shape():
    x = np.array([4.0, 8, 16, 32, 64])
    g = fit.fit_group(x[:, None], (x ** 2)[None], np.ones((1, 5)), np.zeros((1, 5)), ["p"])
    assert not g.shape.adaptive and g.model(0).noise_shape == 2.0


def test_shared_extrap_files_terms_unchanged(data_dir):
    # the Extra-P files whose noise is estimated as light-tailed (adaptive path): recovered terms
    # are those of the normal likelihood
    for name in ("two_parameter_3.txt", "three_parameter_3.txt"):
        exp = io.load([data_dir / "extrap/text" / name])
        groups, _ = fit.fit_experiment(exp)
        assert any(g.shape.adaptive for g in groups)
        a = {(r.callpath, r.metric): r.model for r in fit.model_experiment(exp)}
        b = {(r.callpath, r.metric): r.model
             for r in fit.model_experiment(exp, options=fit.FitOptions(likelihood="normal"))}
        for k in a:
            assert [t.factors for t in a[k].terms] == [t.factors for t in b[k].terms], (name, k)


def test_relearn_two_repetitions_keeps_normal_path(data_dir):
    # heavy tails (kurtosis ~ 11) but two repetitions per point: symmetry cannot be tested, so the
    # robust fit (which would move from the mean towards the median) is not used
    exp = io.load([data_dir / "extrap/text/mpa/relearn_data.txt"])
    groups, _ = fit.fit_experiment(exp)
    (g,) = groups
    assert g.shape.kurtosis > 2 * g.shape.se and g.shape.beta_kurtosis < 2
    assert not g.shape.adaptive


def test_exact_series_keeps_a_model_on_the_adaptive_path():
    # an exactly constant series among uniform-noise ones: the generalised-normal criterion of a
    # perfect fit must stay finite (it was -inf -> dropped: no quality, NaN point counts)
    import numpy as np
    from perfcast.fit import fit_group

    rng = np.random.default_rng(0)
    x = np.array([[2.0], [4.0], [8.0], [16.0], [32.0]])
    reps = (3 + 0.5 * x[:, 0])[None, :, None] * (1 + rng.uniform(-0.05, 0.05, (300, 5, 5)))
    reps[0] = 0.001
    mean = reps.mean(axis=2)
    ssd = ((reps - mean[:, :, None]) ** 2).sum(axis=2)
    g = fit_group(x, mean, np.full((300, 5), 5), ssd, ("p",), None, reps=reps)
    assert g.shape.adaptive
    m = g.model(0)
    assert m.formula() == "0.001" and m.quality.n_points == 5 and m.quality.n_obs == 25
    assert m.predict({"p": 1024.0}) == pytest.approx(0.001)


def test_shape_ratio_equals_scipy_stats_gennorm():
    """The interval's non-normal quantile ratio (computed from scipy.special so that scipy.stats is
    not imported on the CLI's path) equals scipy.stats' generalised normal."""
    import math

    from scipy import stats

    from perfcast.fit.model import _shape_ratio

    for beta in (0.7, 1.0, 1.5, 2.5, 4.0, 10.0):
        for level in (0.5, 0.8, 0.9, 0.99):
            p = 0.5 + level / 2
            want = stats.gennorm.ppf(p, beta) / math.sqrt(stats.gennorm.var(beta)) / stats.norm.ppf(p)
            assert _shape_ratio.__wrapped__(beta, level) == pytest.approx(want, rel=1e-10)
