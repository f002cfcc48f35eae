"""A quantity that cannot be negative is never modelled below zero beyond the data either (issue 16,
item 3: "non-negative quantities are never predicted negative").

Ground truth: times are >= 0 at every parameter value, so a model of a time must be >= 0 from the
smallest measured values on, checked here on dense grids out to 2^40.  The laws are the ones an
unconstrained fit picks for strong-scaling data that fall almost linearly towards zero: a term such
as ``x^(-1/4) log2(x)^2`` rises until log2(x) = 2 / (ln 2 / 4), x = 2980, and decays after, so
``2347 - 180.7 x^(-1/4) log2(x)^2`` keeps a positive constant and decays to it, yet is -910 at
x = 2980 (by hand: 2980^(-1/4) = 0.1353, log2(2980)^2 = 133.2, 180.7 * 18.03 = 3257)."""

import itertools
import math
from fractions import Fraction as F

import numpy as np
import pytest

from perfcast.fit import FitOptions, fit_series
from perfcast.fit.terms import factor_range

X = [20, 30, 40, 50, 60]


def turning(x):
    return 2347 - 180.7 * np.power(x, -0.25) * np.log2(x) ** 2


def grid(lo, top=40.0, num=4001):
    return np.exp2(np.linspace(math.log2(lo), top, num))


@pytest.mark.parametrize("block", [(F(-1, 4), 2), (F(1, 4), -2), (F(1), 0), (F(-1), 0), (F(0), 2),
                                   (F(-1), -1), (F(1, 2), 1), (F(0), -1), (F(-3, 2), 1)])
@pytest.mark.parametrize("x_lo", [0.5, 2.0, 20.0, 5000.0])
def test_a_factor_range_is_its_inf_and_sup_from_the_smallest_value_on(block, x_lo):
    i, j = block
    if j < 0 and x_lo <= 1:
        assert all(math.isnan(v) for v in factor_range(x_lo, i, j)[:2])
        return
    x = np.concatenate([[x_lo, max(x_lo, 1.0)], np.exp2(np.linspace(math.log2(x_lo), 300, 300001))])
    v = x ** float(i) * np.log2(x) ** j
    # decaying factors approach 0 without reaching it (1 / log2(x) is still 1/300 at 2^300)
    inf = min(v.min(), 0.0) if i < 0 or (i == 0 and j < 0) else v.min()
    lo, hi, _ = factor_range(x_lo, i, j)
    assert lo == pytest.approx(inf, rel=1e-6, abs=1e-9)
    if i > 0 or (i == 0 and j > 0):
        assert hi == math.inf
    else:
        assert hi == pytest.approx(v.max(), rel=1e-6)


def test_the_peak_of_the_turning_factor_is_where_the_hand_calculation_puts_it():
    lo, hi, turns = factor_range(20.0, F(-1, 4), 2)
    x = 2 ** (2 / (math.log(2) / 4))
    assert turns and lo == 0.0 and hi == pytest.approx(x ** -0.25 * math.log2(x) ** 2)
    assert turning(x) == pytest.approx(-910, abs=1)


def test_one_parameter_time_is_never_negative_beyond_the_data():
    values = [[turning(x) * (1 + d)] for x, d in zip(X, (0.001, -0.002, 0.0, 0.002, -0.001))]
    free = fit_series(X, values, "x", FitOptions(negative=True, nonnegative=False))
    assert np.min(free.predict(grid(20))) < 0, free.formula()       # what the rule is for
    m = fit_series(X, values, "x", FitOptions(negative=True, nonnegative="asymptotic"))
    assert np.min(m.predict(grid(20))) >= 0, m.formula()
    assert float(m.predict(60.0)) < float(m.predict(20.0))


def test_two_terms_in_one_parameter_are_never_negative_beyond_the_data():
    values = [[turning(x) + 0.3 * x] for x in X]
    free = fit_series(X, values, "x", FitOptions(negative=True, nonnegative=False, max_terms=2))
    assert np.min(free.predict(grid(20))) < 0, free.formula()
    m = fit_series(X, values, "x", FitOptions(negative=True, nonnegative="asymptotic", max_terms=2))
    assert np.min(m.predict(grid(20))) >= 0, m.formula()


def test_two_parameter_time_is_never_negative_beyond_the_data():
    """Falling in x and growing in y (3 y): a negative constant under the growing y term is not
    enough -- as x grows the law tends to c + 3 y, below zero at the smallest y when c < -6."""
    Y = [2, 4, 8, 16, 32]
    P = np.array(list(itertools.product(X, Y)), dtype=float)
    rng = np.random.default_rng(1)
    values = [turning(x) + 3 * y + 0.5 * rng.standard_normal(3) for x, y in P]
    gx, gy = np.meshgrid(grid(20, 30, 301), grid(2, 30, 51))
    at = {"x": gx.ravel(), "y": gy.ravel()}
    free = fit_series(P, values, ("x", "y"), FitOptions(negative=True, nonnegative=False))
    assert np.min(free.predict(at)) < 0, free.formula()
    m = fit_series(P, values, ("x", "y"), FitOptions(negative=True, nonnegative="asymptotic"))
    assert np.min(m.predict(at)) >= 0, m.formula()
