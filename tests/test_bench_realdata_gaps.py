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


def test_clusters_merge_series_of_one_metric_that_agree_everywhere():
    means = {("main", "time"): [100.0, 200.0, 400.0],
             ("main->loop", "time"): [99.5, 199.0, 398.0],       # within 1% of main everywhere
             ("main->loop->a", "time"): [98.6, 197.5, 395.0],    # within 1% of main->loop, 1.4% of main
             ("main->b", "time"): [100.0, 200.0, 450.0],         # 11% off at one point
             ("main", "bytes"): [100.0, 200.0, 400.0]}           # equal values, another metric
    c = g.clusters(means)
    # transitive: a joins main through main->loop
    assert c[("main", "time")] == c[("main->loop", "time")] == c[("main->loop->a", "time")] == 0
    assert c[("main->b", "time")] == 1
    assert c[("main", "bytes")] == 2
    assert g.clusters(means, tol=0.0)[("main->loop", "time")] != 0


def test_needed_by_hand():
    e = [0.01, 0.02, 0.05, 0.15, 0.16, 0.20, 0.50]
    # median = 4th of 7 = 0.15; to reach 0.12 one prediction (0.15 -> 0.12) suffices
    assert g.needed(e, 0.12, 0.5) == (1, 1)
    # to reach 0.04: 0.05 and 0.15 must drop (median then 0.04)
    assert g.needed(e, 0.04, 0.5) == (2, 2)
    # already there
    assert g.needed(e, 0.15, 0.5) == (0, 0)
    # p90 of 7 (numpy linear): position 0.9 * 6 = 5.4 -> 0.20 + 0.4 * 0.30 = 0.32; to reach 0.30
    # the 0.20 stays, 0.50 must drop to 0.30 (then 0.20 + 0.4 * 0.10 = 0.24)
    assert math.isclose(float(np.quantile(e, 0.9)), 0.32)
    assert g.needed(e, 0.30, 0.9) == (1, 1)
    # p90 to 0.10: 0.15, 0.16 and 0.20 become 0.10, the 0.50 stays: 0.10 + 0.4 * 0.40 = 0.26 > 0.10,
    # so all four above 0.10 must drop
    assert g.needed(e, 0.10, 0.9) == (4, 4)
    # groups: predictions 3 and 4 (0.15, 0.16) from one cluster
    assert g.needed(e, 0.10, 0.9, group=[0, 1, 2, 3, 3, 4, 5]) == (4, 3)


def test_cluster_bootstrap_resamples_whole_clusters():
    # two clusters: perfcast better by 0.1 on cluster 0 (3 predictions), worse by 0.1 on cluster 1
    pc = np.array([0.1, 0.1, 0.1, 0.5])
    ex = np.array([0.2, 0.2, 0.2, 0.4])
    b = g.cluster_bootstrap(pc, ex, [0, 0, 0, 1], draws=200, seed=1)
    # a draw holds {0, 0}, {1, 1} or {0, 1}: median differences -0.1, +0.1 or -0.1 only
    assert set(np.round(b[:, 0], 12)) <= {-0.1, 0.1}
    assert np.any(np.isclose(b[:, 0], 0.1)) and np.any(np.isclose(b[:, 0], -0.1))
