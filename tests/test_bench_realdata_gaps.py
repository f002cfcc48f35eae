"""The pure helpers of bench/realdata_gaps.py: reading Extra-P's formula terms, and the refit of a
model's terms under weights |mean|^(-2 theta), against hand calculations."""

import math
import sys
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from perfcast.fit.model import Term

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import realdata_gaps as g  # noqa: E402


def test_extrap_terms_of_its_formula_strings():
    # formulas as Extra-P 4.2.5 prints them (bench/out/realdata/*.extrap.json)
    assert g.extrap_terms("6997260.59 + 6448.34 * n^(5/2) * log2(n)^(2)") == {(Fraction(5, 2), 2)}
    assert g.extrap_terms("-28.02 + 14.68 * log2(Ranks)^(1)") == {(Fraction(0), 1)}
    assert g.extrap_terms("12218.0 + 1788.0 * n^(3)") == {(Fraction(3), 0)}
    assert g.extrap_terms("8.527 + -0.045 * x^(1/4) * log2(x)^(1)") == {(Fraction(1, 4), 1)}
    assert g.extrap_terms("12.75") == frozenset()


def test_perfcast_terms_match_the_same_form():
    m = SimpleNamespace(terms=(Term(2.0, (("n", Fraction(5, 2), 2),)),))
    assert g.perfcast_terms(m) == g.extrap_terms("1.0 + 2.0 * n^(5/2) * log2(n)^(2)")


def test_refit_recovers_an_exact_law_under_any_weights():
    # y = 3 + 2 x^2 exactly: every weighting returns the law's value at x0 = 10
    m = SimpleNamespace(terms=(Term(1.0, (("x", Fraction(2), 0),)),))
    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = 3 + 2 * x ** 2
    for theta in (0.0, 0.5, 1.0):
        assert math.isclose(g.refit(m, "x", x, y, 10.0, theta), 203.0, rel_tol=1e-10)


def test_refit_misspecified_by_hand():
    # a line c + a x through y = x^2 at x = 1, 2, 3
    m = SimpleNamespace(terms=(Term(1.0, (("x", Fraction(1), 0),)),))
    x = np.array([1.0, 2.0, 3.0])
    y = x ** 2
    # unweighted: slope = Sxy / Sxx = 8 / 2 = 4, intercept = 14/3 - 4 * 2 = -10/3; at 4: 16 - 10/3
    assert math.isclose(g.refit(m, "x", x, y, 4.0, 0.0), 16 - 10 / 3, rel_tol=1e-12)
    # theta = 1: weights (y / 9)^-2 = 81, 81/16, 1, i.e. proportional to 16, 1, 16/81; weighted
    # means xbar = (16 + 2 + 48/81) / S, ybar = (16 + 4 + 144/81) / S with S = 17 + 16/81
    w = np.array([16.0, 1.0, 16 / 81])
    xb, yb = (w @ x) / w.sum(), (w @ y) / w.sum()
    slope = (w @ ((x - xb) * (y - yb))) / (w @ ((x - xb) ** 2))
    assert math.isclose(g.refit(m, "x", x, y, 4.0, 1.0), yb + slope * (4.0 - xb), rel_tol=1e-12)
    # the relative fit leans on the small values: it extrapolates lower than the unweighted one
    assert g.refit(m, "x", x, y, 4.0, 1.0) < g.refit(m, "x", x, y, 4.0, 0.0)
