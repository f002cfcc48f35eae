"""A series' fit does not depend on the chunk it is fitted in (``FitOptions.chunk``): the same
series give bit-for-bit the same hypotheses, weights, coefficients, covariances, quality, noise,
drift, formulas and intervals whether the group is fitted in one chunk, one series at a time or in
chunks of 7 (a last chunk of 1 series).  Ground truth: the same inputs.  The series range from
exact laws to heavy noise, near-ties between hypotheses, dips, zeros and absolute noise; rows of 9
points (numpy and BLAS sum rows of 8 or more values in other orders than short rows) and a
two-parameter grid whose lines have 9 points."""

import numpy as np
import pytest

from perfcast.fit import FitOptions, fit_group

FIELDS = ("status", "needed", "hyp", "weight", "coef", "cov", "quality", "noise", "dof", "drift")


def _single(seed=5):
    """(X, mean, count, ssd, reps) of 48 one-parameter series at p = 4..1024 (9 points), 5
    repetitions, the noise of each series laplace (heavy tails: the adaptive likelihood runs)."""
    rng = np.random.default_rng(seed)
    p = 2.0 ** np.arange(2, 11)
    laws = [
        lambda p: 3 + 0.5 * p,                                     # clean shapes ...
        lambda p: 10 + 0.01 * p ** 2,
        lambda p: 2 + 0.3 * p * np.log2(p),
        lambda p: 40 + 5 * np.log2(p),
        lambda p: 1 + 0.2 * p ** 1.25,                             # between grid exponents
        lambda p: 5 + 0.5 * p + 0.5 * p ** 2 / 1024,               # near-tie: p vs p^2 vs both
        lambda p: 7 + 0 * p,                                       # constant
        lambda p: 1e-3 * p ** 1.5 + 1e-4,                          # tiny values
    ]
    noise = [0.0, 0.01, 0.1, 0.4, 0.02, 0.05]
    means, counts, ssds, reps = [], [], [], []
    for s in range(48):
        mu = laws[s % len(laws)](p)
        sd = noise[(s // len(laws)) % len(noise)]
        r = mu[:, None] * (1 + rng.laplace(0, sd / np.sqrt(2), (len(p), 5)))
        if s % 11 == 3:
            r += rng.normal(0, 0.5, r.shape)                       # an absolute part of the noise
        if s % 13 == 4:
            r[4] = 0.0                                             # a dip to zero
        if s == 47:
            r[:] = 0.0                                             # all zero
        reps.append(r)
    reps = np.array(reps)
    mean = reps.mean(axis=2)
    return p[:, None], mean, np.full(mean.shape, 5.0), ((reps - mean[:, :, None]) ** 2).sum(axis=2), reps


def _multi(seed=6):
    """(X, mean, count, ssd) of 24 two-parameter series on a 6 x 9 grid (lines along n: 9 points),
    3 repetitions with normal noise of 0 to 20 %."""
    rng = np.random.default_rng(seed)
    P, N = np.meshgrid(2.0 ** np.arange(1, 7), 10.0 * np.arange(1, 10), indexing="ij")
    X = np.column_stack([P.ravel(), N.ravel()])
    p, n = X[:, 0], X[:, 1]
    laws = [lambda: 2 + 0.1 * p * n, lambda: 5 + 0.3 * p + 0.02 * n ** 2, lambda: 1 + 0.05 * p * np.log2(p) * n,
            lambda: 3 + 0.2 * p ** 1.5 + 0.1 * n]
    noise = [0.0, 0.02, 0.08, 0.2, 0.05, 0.01]
    reps = np.array([laws[s % 4]()[:, None] * (1 + rng.normal(0, noise[s // 4], (len(X), 3))) for s in range(24)])
    mean = reps.mean(axis=2)
    return X, mean, np.full(mean.shape, 3.0), ((reps - mean[:, :, None]) ** 2).sum(axis=2)


def _same(a, b):
    """Bit-for-bit equal arrays (NaN equal to NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _assert_chunk_free(X, mean, count, ssd, params, reps=None, **options):
    fits = {c: fit_group(X, mean, count, ssd, params, FitOptions(chunk=c, **options), reps=reps) for c in (4096, 1, 7)}
    one = fits[4096]
    far = {q: np.array([X[:, k].max() * 4, X[:, k].max()]) for k, q in enumerate(params)}
    for c, g in fits.items():
        for f in FIELDS:
            assert _same(getattr(g, f), getattr(one, f)), (c, f)
        assert (g.growth, g.shape, np.ndim(g.drift_dof) or int(g.drift_dof)) == \
            (one.growth, one.shape, np.ndim(one.drift_dof) or int(one.drift_dof)), c
        if np.ndim(one.drift_dof):
            assert _same(g.drift_dof, one.drift_dof), c
        for s in range(len(mean)):
            m, m1 = g.model(s), one.model(s)
            assert m.formula() == m1.formula(), (c, s)
            assert all(_same(u, v) for u, v in zip(m.interval(far), m1.interval(far))), (c, s)
    return one


def test_single_parameter_fit_does_not_depend_on_the_chunk():
    X, mean, count, ssd, reps = _single()
    one = _assert_chunk_free(X, mean, count, ssd, ["p"], reps=reps)
    # not vacuous: the adaptive likelihood ran, there are near-ties, and an exact law is found
    assert one.shape.adaptive
    assert np.sum(one.weight[:, 1] > 0.2) >= 3
    m = one.model(0)                                               # 3 + 0.5 p, no noise
    assert m.formula() == "3 + 0.5 * p"
    assert m.constant == pytest.approx(3.0, rel=1e-9) and m.terms[0].coefficient == pytest.approx(0.5, rel=1e-9)


@pytest.mark.parametrize("options", [dict(max_terms=2, noise="relative"), dict(selection="cv", nonnegative=True)])
def test_single_parameter_options_do_not_depend_on_the_chunk(options):
    X, mean, count, ssd, _ = _single(seed=8)
    _assert_chunk_free(X, mean, count, ssd, ["p"], **options)


def test_two_parameter_fit_does_not_depend_on_the_chunk():
    X, mean, count, ssd = _multi()
    one = _assert_chunk_free(X, mean, count, ssd, ["p", "n"])
    m = one.model(0)                                               # 2 + 0.1 p n, no noise
    assert m.formula() == "2 + 0.1 * p * n"
