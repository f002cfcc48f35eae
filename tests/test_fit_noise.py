"""The "mixed" noise model (FitOptions(noise="mixed"), fit.core.absolute_noise): per series a
repetition variance ``a^2 + b^2 mu^2`` estimated from the within-point variances, checked against
series generated with known absolute and relative noise parts at fixed seeds."""
import numpy as np
import pytest

from perfcast.errors import PerfcastError
from perfcast.fit import FitOptions, fit_group
from perfcast.fit.core import absolute_noise

X = 2.0 ** np.arange(8)          # 1 .. 128
REPS = 5
A_SD, B_SD = 5.0, 0.02           # absolute sd (units of the value) and relative sd


def _series(rng, S, a, b, slope):
    """S linear series ``slope * x`` (slope per series), REPS normal repetitions per point with
    variance a^2 + b^2 mu^2; returns (truth function values at X, mean, ssd)."""
    mu = slope[:, None] * X[None, :]
    sd = np.sqrt(a ** 2 + (b * mu) ** 2)
    y = mu[:, :, None] + sd[:, :, None] * rng.standard_normal((S, len(X), REPS))
    mean = y.mean(axis=2)
    ssd = ((y - mean[:, :, None]) ** 2).sum(axis=2)
    return mu, mean, ssd


def _c2(mean, ssd):
    scale = np.max(np.abs(mean), axis=1)
    f = np.maximum(np.abs(mean) / scale[:, None], 1e-3)
    return absolute_noise(f, np.full(mean.shape, float(REPS)), ssd / scale[:, None] ** 2), scale


def test_absolute_part_is_recovered():
    """a = 5, b = 2%: the absolute part dominates below a value of 250 (the smallest means, ~10, are
    50% noise; the largest, ~1280, 2%).  Nearly every series shows it (32 degrees of freedom each), and the median estimated a/b is
    within 15% of the generating 250."""
    rng = np.random.default_rng(20261126)
    slope = rng.uniform(8.0, 12.0, 300)
    _, mean, ssd = _series(rng, 300, A_SD, B_SD, slope)
    c2, scale = _c2(mean, ssd)
    assert np.mean(c2 > 0) > 0.85
    ratio = np.sqrt(c2[np.isfinite(c2) & (c2 > 0)]) * scale[np.isfinite(c2) & (c2 > 0)]
    assert abs(np.median(ratio) / (A_SD / B_SD) - 1) < 0.15, np.median(ratio)


def test_relative_noise_keeps_relative_weights():
    """Purely relative noise (a = 0): the absolute part passes the likelihood-ratio test on few
    series (chi-square 5% level on the boundary: ~2.5% expected), and where it does not the
    models are exactly those of the relative weights."""
    rng = np.random.default_rng(7)
    slope = rng.uniform(8.0, 12.0, 300)
    _, mean, ssd = _series(rng, 300, 0.0, 0.05, slope)
    c2, _ = _c2(mean, ssd)
    assert np.mean(c2 > 0) < 0.06
    count = np.full(mean.shape, float(REPS))
    rel = fit_group(X[:, None], mean, count, ssd, ("x",), FitOptions(noise="relative"))
    mix = fit_group(X[:, None], mean, count, ssd, ("x",), FitOptions(noise="mixed"))
    same = np.nonzero(c2 == 0)[0]
    for s in same[:100]:
        assert rel.model(s).predict(512.0) == mix.model(s).predict(512.0)


def test_mixed_weights_extrapolate_better_under_absolute_noise():
    """Under a + b mu noise the relative weights trust the small, noisy means most; the mixed
    weights extrapolate a linear truth to 4x the largest x with a clearly smaller error."""
    rng = np.random.default_rng(16)
    slope = rng.uniform(8.0, 12.0, 300)
    _, mean, ssd = _series(rng, 300, A_SD, B_SD, slope)
    count = np.full(mean.shape, float(REPS))
    truth = slope * 512.0
    err = {}
    for noise in ("relative", "mixed"):
        g = fit_group(X[:, None], mean, count, ssd, ("x",), FitOptions(noise=noise))
        pred = np.array([g.model(s).predict(512.0) for s in range(len(slope))])
        err[noise] = np.abs(pred - truth) / truth
    assert np.median(err["mixed"]) < 0.75 * np.median(err["relative"]), err
    assert np.quantile(err["mixed"], 0.9) < np.quantile(err["relative"], 0.9)


def test_noise_option_is_checked():
    with pytest.raises(PerfcastError, match="noise"):
        FitOptions(noise="poisson")


def test_single_runs_take_equal_parts_at_the_median():
    """Without repetitions the split cannot be estimated: a series' weights are 1 / (y^2 + m^2)
    with m its median |value| (absolute and relative parts equal there).  A flat series of small
    counts (single runs, the shape of CUBE's PAPI_L3_TCM, without its dips) is a constant; the
    weights of its own value are equal at every point, so its value is the plain mean -- not the
    purely relative sum(1/y) / sum(1/y^2) nor sum(w y) / sum(w), which the smallest counts pull
    down.  The weights (which rank the hypotheses) are 1 / (y^2 + m^2), by hand."""
    y = np.array([12.0, 8.0, 15.0, 10.0, 11.0, 7.0, 9.0, 6.0])    # no dip (noise_scale)
    xs = np.array([1.0, 10, 25, 50, 100, 250, 500, 1000])
    one = np.ones((1, len(y)))
    g = fit_group(xs[:, None], y[None, :], one, np.zeros((1, len(y))), ("x",), FitOptions())
    m = g.model(0)
    assert not m.terms                  # flat data: a constant
    assert m.constant == pytest.approx(y.mean(), rel=1e-12)
    rel = fit_group(xs[:, None], y[None, :], one, np.zeros((1, len(y))), ("x",), FitOptions(noise="relative"))
    assert not rel.model(0).terms
    assert rel.model(0).constant == pytest.approx(y.mean(), rel=1e-12)
    _weights_by_hand(xs, y, one, np.zeros((1, len(y))))


def _weights_by_hand(xs, y, count, ssd):
    """The fit's weights of the means ``y`` are ``count / (y^2 + m^2)`` (m the median |value|),
    up to a common factor."""
    from perfcast.fit.core import _Chunk

    ch = _Chunk(y[None, :], count, ssd, 1, 1, 1, xs[:, None], None, "mixed", False)
    ratio = ch.w[0] / (count[0] / (y ** 2 + np.median(y) ** 2))
    assert np.allclose(ratio, ratio[0], rtol=1e-12)


def test_too_few_repetitions_count_as_single_runs():
    """One point repeated twice (1 degree of freedom of pure error, below ABS_MIN_DOF): the split
    cannot be estimated either, so the weights are count / (y^2 + m^2), by hand as above, and the
    constant is the mean of all runs."""
    y = np.array([12.0, 8.0, 15.0, 10.0, 11.0, 7.0, 9.0, 6.0])
    xs = np.array([1.0, 10, 25, 50, 100, 250, 500, 1000])
    count = np.ones((1, len(y)))
    count[0, 0] = 2.0
    ssd = np.zeros((1, len(y)))
    ssd[0, 0] = 0.5                       # two runs 11.5 and 12.5
    m = fit_group(xs[:, None], y[None, :], count, ssd, ("x",), FitOptions()).model(0)
    assert not m.terms
    assert m.constant == pytest.approx(np.sum(count[0] * y) / np.sum(count[0]), rel=1e-12)   # all 9 runs' mean
    _weights_by_hand(xs, y, count, ssd)
