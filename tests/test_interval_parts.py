"""The parts of a prediction interval (PredictBatch.variance_parts), against a hand calculation:
a one-term model with a known covariance, noise, one competing hypothesis and a drift."""

import math
from fractions import Fraction

import numpy as np
from scipy import stats

from perfcast.fit.model import Model, PredictBatch, Term


def _batch(m, p):
    cols = {"p": np.array([float(p)])}
    b = PredictBatch(1, 1, len(m.terms) + 1, cols)
    b.add_models(np.array([0]), [m])
    return b


def test_parts_are_the_hand_calculated_variances_and_welch_quantile():
    # y = 2 + 3 p, cov of (c, a) given; noise 10% with 4 dof; drift 0.2 per doubling, growth 2,
    # pooled over 9 held-out points; one competing hypothesis 5 p with weight 0.25
    term = Term(3.0, (("p", Fraction(1), 0),))
    alt = Model(("p",), 0.0, (Term(5.0, (("p", Fraction(1), 0),)),))
    cov = ((0.5, -0.02), (-0.02, 0.004))
    m = Model(("p",), 2.0, (term,), cov=cov, noise=0.1, dof=4, alternatives=((0.25, alt),), drift=0.2,
              upper=(8.0,), growth=2.0, drift_dof=9)
    p = 32.0                                   # two doublings beyond 8
    y, ya = 2 + 3 * p, 5 * p
    parts = _batch(m, p).variance_parts(0.9, averaged=False)
    d = np.array([1.0, p])
    coef = d @ np.array(cov) @ d
    noise = (0.1 * y) ** 2
    alts = 0.25 * (ya - y) ** 2                # about the selected value (the centre)
    drift = (0.2 * 2 ** 2 * y) ** 2
    assert math.isclose(parts["coef"][0, 0], coef, rel_tol=1e-12)
    assert math.isclose(parts["noise"][0, 0], noise, rel_tol=1e-12)
    assert math.isclose(parts["alternatives"][0, 0], alts, rel_tol=1e-12)
    assert math.isclose(parts["drift"][0, 0], drift, rel_tol=1e-12)
    v = coef + noise + alts
    dof = (v + drift) ** 2 / (v ** 2 / 4 + drift ** 2 / 9)
    assert math.isclose(parts["dof"][0, 0], dof, rel_tol=1e-12)
    assert math.isclose(parts["q"][0, 0], stats.t.ppf(0.95, dof), rel_tol=1e-6)
    # and the interval every output shows is q times the root of their sum
    lo, hi = m.interval({"p": p}, 0.9)
    half = stats.t.ppf(0.95, dof) * math.sqrt(v + drift)
    assert math.isclose((hi - lo) / 2, half, rel_tol=1e-6)


def test_averaged_parts_spread_about_the_average():
    term = Term(3.0, (("p", Fraction(1), 0),))
    alt = Model(("p",), 0.0, (Term(5.0, (("p", Fraction(1), 0),)),))
    m = Model(("p",), 2.0, (term,), cov=((0.0, 0.0), (0.0, 0.0)), noise=0.0, dof=4,
              alternatives=((0.25, alt),), upper=(8.0,))
    p = 8.0                                    # within the data: no drift
    y, ya = 2 + 3 * p, 5 * p
    avg = 0.75 * y + 0.25 * ya
    parts = _batch(m, p).variance_parts(0.9, averaged=True)
    assert math.isclose(parts["centre"][0, 0], avg, rel_tol=1e-12)
    assert math.isclose(parts["alternatives"][0, 0], 0.75 * (y - avg) ** 2 + 0.25 * (ya - avg) ** 2, rel_tol=1e-12)
    assert parts["drift"][0, 0] == 0
    assert math.isclose(parts["q"][0, 0], stats.t.ppf(0.95, 4), rel_tol=1e-6)
