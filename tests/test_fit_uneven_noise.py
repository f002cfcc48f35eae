"""FitOptions.hetero (off by default): points whose repetitions are far noisier than the others'
(a shared machine's p = 2 runs) weigh by their own relative variance, shrunk toward the pooled one,
where Bartlett's test rejects equal relative variances.  Truth: the generating formulas below;
bench/README.md "Uneven noise between points"."""

import numpy as np

from perfcast.fit import FitOptions, fit_series
from perfcast.fit.core import point_variance_ratio

SEEDS = range(20)


def _one_noisy_point(seed):
    """1 + 0.01 p^2 at p = 4..64, 5 repetitions, 3% relative noise, 30% at p = 32."""
    rng = np.random.default_rng(seed)
    ps = np.array([4, 8, 16, 32, 64.0])
    sd = np.where(ps == 32, 0.3, 0.03)
    return ps, [(1 + 0.01 * p ** 2) * (1 + s * rng.standard_normal(5)) for p, s in zip(ps, sd)]


def _noisy_level(seed):
    """0.02 + 1e-5 n^3 p at p = 1, 2 x n = 12..28, 4 repetitions, 3% relative noise at p = 1, 30% at p = 2."""
    rng = np.random.default_rng(seed)
    X = np.array([[p, n] for p in (1.0, 2.0) for n in (12.0, 16, 20, 24, 28)])
    return X, [(0.02 + 1e-5 * n ** 3 * p) * (1 + (0.3 if p == 2 else 0.03) * rng.standard_normal(4)) for p, n in X]


def _median_error(make, params, target, truth, **options):
    errs = []
    for seed in SEEDS:
        x, vals = make(seed)
        m = fit_series(x, vals, params, FitOptions(nonnegative="asymptotic", **options))
        errs.append(abs(float(np.atleast_1d(m.predict(np.array([target])))[0]) / truth - 1))
    return float(np.median(errs))


def test_one_noisy_point_extrapolates_to_the_generating_law():
    # pooled weights (default): median |error| 3.2% at p = 256; per-point weights 0.9%
    assert _median_error(_one_noisy_point, "p", [256.0], 1 + 0.01 * 256 ** 2, hetero=True) < 0.02


def test_a_noisy_level_of_a_two_level_parameter_does_not_hide_the_other_law():
    # pooled weights (default): median |error| 15.2% at p = 1, n = 40; per-point weights 4.5%
    assert _median_error(_noisy_level, ("p", "n"), [1.0, 40.0], 0.02 + 1e-5 * 40 ** 3, hetero=True) < 0.09


def test_even_noise_keeps_the_pooled_weights():
    rng = np.random.default_rng(3)
    mean = np.array([[1.0, 2.0, 4.0, 8.0, 16.0]])
    count = np.full((1, 5), 5.0)
    reps = mean[..., None] * (1 + 0.03 * rng.standard_normal((1, 5, 5)))
    m = reps.mean(axis=2)
    ssd = ((reps - m[..., None]) ** 2).sum(axis=2)
    assert np.array_equal(point_variance_ratio(m, count, ssd), np.ones((1, 5)))


def test_ratio_of_a_point_ten_times_noisier():
    # relative standard deviations 3% at four points, 30% at the third, 8 repetitions each
    rng = np.random.default_rng(0)
    sd = np.array([0.03, 0.03, 0.3, 0.03, 0.03])
    reps = 10.0 * (1 + sd[:, None] * rng.standard_normal((5, 8)))
    m = reps.mean(axis=1)[None]
    ssd = ((reps - m[0][:, None]) ** 2).sum(axis=1)[None]
    r = point_variance_ratio(m, np.full((1, 5), 8.0), ssd)[0]
    s2 = ssd[0] / 7 / m[0] ** 2
    pooled = s2.mean()
    # shrunk between the point's own variance and the pooled one
    assert r[2] > 1 and np.all(r[[0, 1, 3, 4]] < 1)
    assert np.all(np.minimum(s2, pooled) / pooled - 1e-12 <= r) and np.all(r <= np.maximum(s2, pooled) / pooled + 1e-12)
