"""Extra-P's own modelling test functions, rebuilt as data: does perfcast recover them?

Ground truth: the generating functions and points of Extra-P 4.2.5's test suite
(github.com/extra-p/extrap, commit 291ac81):

- tests/test_multi_param_modeler.py, lines 341-420: ``test_modeling_3p`` (10*x*y*z + 200),
  ``test_modeling_3p_plus`` (10*x + 20*y + 30*z + 200) and ``test_modeling_3p_mul_plus``
  (100*x + 2*y*z + 200), each factor ``CompoundTerm.create(a, b, c) = v^(a/b) * log2(v)^c`` taken
  from consecutive entries of the 42-entry exponent list below (40 functions per test), at the
  points {2, 4, 8, 16, 32}^3;
- tests/test_basic_modeler.py, lines 134-154: ``test_modeling_negative_exponents``,
  1000 * x^(a/b) * log2(x)^c + coeff for the 24 exponents below and coeff in 2, 30, 400, 5000
  (96 functions) at x = 2, 4, 8, 16, 32, searched with negative exponents.

The data are the functions' exact values (one repetition, no noise, as in Extra-P's tests).
Recovered: the model has exactly the generating terms (same parameters, exponents and log
exponents per term; Extra-P's ``assertApproxFunction`` also requires this), its coefficients
agree to 1e-6 relative, and its prediction at 4x the largest point (128) is within 1 %.
"""

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest

from perfcast.fit import FitOptions, make_blocks
from perfcast.fit.core import fit_group
from perfcast.fit.model import Model
from perfcast.fit.terms import block_str

from conftest import cli_items

# tests/test_multi_param_modeler.py lines 342-347 (the same list in each of the three tests)
EXPONENTS = [(0, 1, 1), (0, 1, 2), (1, 4, 0), (1, 3, 0), (1, 4, 1), (1, 3, 1), (1, 4, 2), (1, 3, 2),
             (1, 2, 0), (1, 2, 1), (1, 2, 2), (2, 3, 0), (3, 4, 0), (2, 3, 1), (3, 4, 1), (4, 5, 0),
             (2, 3, 2), (3, 4, 2), (1, 1, 0), (1, 1, 1), (1, 1, 2), (5, 4, 0), (5, 4, 1), (4, 3, 0),
             (4, 3, 1), (3, 2, 0), (3, 2, 1), (3, 2, 2), (5, 3, 0), (7, 4, 0), (2, 1, 0), (2, 1, 1),
             (2, 1, 2), (9, 4, 0), (7, 3, 0), (5, 2, 0), (5, 2, 1), (5, 2, 2), (8, 3, 0), (11, 4, 0),
             (3, 1, 0), (3, 1, 1)]
# tests/test_basic_modeler.py lines 135-140
NEGATIVE = [(0, 1, -1), (0, 1, -2), (-1, 4, 0), (-1, 2, 0), (-1, 2, -1), (-1, 2, -2), (-2, 3, 0), (-1, 1, 0),
            (-1, 1, -1), (-1, 1, -2), (-5, 4, 0), (-4, 3, 0), (-3, 2, 0), (-5, 3, 0), (-7, 4, 0), (-2, 1, 0),
            (-9, 4, 0), (-7, 3, 0), (-5, 2, 0), (-5, 2, -2), (-8, 3, 0), (-11, 4, 0), (-3, 1, 0), (-3, 1, -1)]
PARAMS = ("x", "y", "z")


def block(e):
    return Fraction(e[0], e[1]), e[2]


def value(v, b):
    """v^i * log2(v)^j by the math module (independent of perfcast's evaluation)."""
    i, j = b
    return v ** float(i) * math.log2(v) ** j


def evaluate(terms, const, point):
    return const + sum(c * math.prod(value(point[p], b) for p, b in fac.items()) for c, fac in terms)


def recovered(model, terms, const, far):
    want = sorted(tuple(sorted((PARAMS[p], b[0], b[1]) for p, b in fac.items())) for _, fac in terms)
    got = sorted(tuple(sorted(t.factors)) for t in model.terms)
    if want != got:
        return False
    coef = {tuple(sorted(t.factors)): t.coefficient for t in model.terms}
    for c, fac in terms:
        if coef[tuple(sorted((PARAMS[p], b[0], b[1]) for p, b in fac.items()))] != pytest.approx(c, rel=1e-6):
            return False
    if model.constant != pytest.approx(const, rel=1e-6):
        return False
    truth = evaluate(terms, const, far)
    args = {PARAMS[p]: far[p] for p in range(len(far))}
    return abs(model.predict(args if len(far) > 1 else far[0]) - truth) <= 0.01 * abs(truth)


def fit_all(points, truths, const_of, options):
    X = np.array(points, dtype=float)
    mean = np.array([[evaluate(t, const_of(s), pt) for pt in points] for s, t in enumerate(truths)])
    names = PARAMS[:X.shape[1]]
    return fit_group(X, mean, np.ones_like(mean), np.zeros_like(mean), names, options)


THREE_P = {
    # test_modeling_3p: one product term 10 * x*y*z
    "product": lambda b: [(10, {0: b[0], 1: b[1], 2: b[2]})],
    # test_modeling_3p_plus: 10 x + 20 y + 30 z -- one monomial per parameter
    "sum": lambda b: [(10, {0: b[0]}), (20, {1: b[1]}), (30, {2: b[2]})],
    # test_modeling_3p_mul_plus: 100 x + 2 y*z
    "mul_plus": lambda b: [(100, {0: b[0]}), (2, {1: b[1], 2: b[2]})],
}


@pytest.mark.parametrize("form", sorted(THREE_P))
def test_three_parameter_functions_of_extrap(form):
    points = list(itertools.product([2, 4, 8, 16, 32], repeat=3))
    truths = [THREE_P[form]([block(e1), block(e2), block(e3)])
              for e1, e2, e3 in zip(EXPONENTS, EXPONENTS[1:], EXPONENTS[2:])]
    assert len(truths) == 40
    g = fit_all(points, truths, lambda s: 200.0, FitOptions())
    missed = [g.model(s).formula() for s, t in enumerate(truths)
              if not recovered(g.model(s), t, 200.0, (128.0, 128.0, 128.0))]
    assert missed == [], f"{len(missed)} of 40 missed"


def test_negative_exponent_functions_of_extrap():
    truths, consts = [], []
    for e in NEGATIVE:
        for c in (2, 30, 400, 5000):
            truths.append([(1000, {0: block(e)})])
            consts.append(float(c))
    assert len(truths) == 96
    g = fit_all([(x,) for x in (2, 4, 8, 16, 32)], truths, lambda s: consts[s], FitOptions(negative=True))
    missed = [(NEGATIVE[s // 4], consts[s], g.model(s).formula()) for s, t in enumerate(truths)
              if not recovered(g.model(s), t, consts[s], (128.0,))]
    assert missed == [], f"{len(missed)} of 96 missed"


def test_negative_log_blocks_and_their_formulas():
    blocks = make_blocks(negative=True)
    # Extra-P's negative blocks are the mirrors of the growing ones
    assert (Fraction(-1), -1) in blocks and (Fraction(0), -2) in blocks and (Fraction(-5, 2), -2) in blocks
    assert (Fraction(1), -1) not in blocks        # no growing block with a negative log
    assert make_blocks([0, 1], [-1, 0]) == ((Fraction(0), -1), (Fraction(1), -1), (Fraction(1), 0))
    b = (Fraction(-1, 2), -1)
    assert block_str("p", b) == "p^(-1/2) * log2(p)^(-1)"
    code = block_str("p", b, "python")
    assert eval(code, {"log2": math.log2, "p": 8.0}) == pytest.approx(8 ** -0.5 / 3)   # 1 / (sqrt(8) * 3)
    assert block_str("p", (Fraction(0), -2), "latex") == "\\log_2^{-2}{p}"


def test_negative_log_model_is_undefined_at_one_and_round_trips():
    x = [2.0, 4.0, 8.0, 16.0, 32.0]
    y = [[5 + 1000 / (v * math.log2(v))] for v in x]          # 5 + 1000 * p^-1 * log2(p)^-1
    g = fit_group(np.array(x), np.array([[r[0] for r in y]]), np.ones((1, 5)), np.zeros((1, 5)), ["p"],
                  FitOptions(negative=True))
    m = g.model(0)
    assert [t.factors for t in m.terms] == [(("p", Fraction(-1), -1),)]
    assert m.predict(64.0) == pytest.approx(5 + 1000 / (64 * 6), rel=1e-6)
    # the pole of log2(p)^-1 at p = 1: undefined there (NaN), not inf or a number
    assert math.isnan(m.predict(1.0)) and math.isnan(m.predict(0.5))
    back = Model.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back.terms[0].factors == (("p", Fraction(-1), -1),)
    assert back.predict(64.0) == pytest.approx(m.predict(64.0), rel=1e-12)


def test_strong_scaling_measured_at_one_never_uses_undefined_blocks():
    # p = 1 is common in strong scaling: log2(1)^-j is undefined, so those blocks are left out,
    # and the fit is the exact 1/p law, finite everywhere
    P = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    mean = np.array([[3 + 1000 / p for p in P], [7 + 50 / p ** 0.5 for p in P]])
    g = fit_group(np.array(P), mean, np.ones_like(mean), np.zeros_like(mean), ["p"], FitOptions(negative=True))
    for s, (i, f) in enumerate([(Fraction(-1), lambda p: 3 + 1000 / p), (Fraction(-1, 2), lambda p: 7 + 50 / p ** 0.5)]):
        m = g.model(s)
        assert [t.factors for t in m.terms] == [(("p", i, 0),)]
        assert m.predict(128.0) == pytest.approx(f(128.0), rel=1e-6)
        assert all(j >= 0 for _, fac in m.alternatives for t in fac.terms for _, _, j in t.factors)
        lo, hi = m.interval(128.0)
        assert math.isfinite(lo) and math.isfinite(hi)
    # two parameters, p = 1 measured: the multi-parameter search skips them as well
    X = np.array(list(itertools.product([1, 2, 4, 8, 16], [10, 20, 40, 80, 160])), dtype=float)
    y = 5 + 400 / X[:, 0] + 0.5 * X[:, 1]
    g = fit_group(X, y[None], np.ones((1, len(X))), np.zeros((1, len(X))), ["p", "n"], FitOptions(negative=True))
    m = g.model(0)
    assert sorted(t.factors for t in m.terms) == [(("n", Fraction(1), 0),), (("p", Fraction(-1), 0),)]
    assert m.predict({"p": 64.0, "n": 640.0}) == pytest.approx(5 + 400 / 64 + 320, rel=1e-6)


def test_cli_refuses_points_where_the_model_is_undefined(tmp_path, capsys):
    from conftest import cli, one_error

    # Extra-P text file: 5 + 1000 / (p log2 p) at p = 2..32, three repetitions within +-0.1 %
    lines = ["PARAMETER p", ""] + [f"POINTS ( {p} )" for p in (2, 4, 8, 16, 32)] + ["", "REGION work", "METRIC time"]
    for p in (2, 4, 8, 16, 32):
        v = 5 + 1000 / (p * math.log2(p))
        lines.append("DATA " + " ".join(repr(v * (1 + e)) for e in (-0.001, 0.0, 0.001)))
    path = tmp_path / "neglog.txt"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = cli(capsys, "predict", path, "--negative", "--at", "p=64", "--json")
    assert code == 0
    (row,) = cli_items(out, "predictions")
    assert row["value"] == pytest.approx(5 + 1000 / (64 * 6), rel=1e-3)
    assert "log2(p)^(-1)" in row["formula"]
    for args in (("predict", path, "--negative", "--at", "p=1", "--json"),
                 ("model", path, "--negative", "--target", "p=1", "--json")):
        code, out, err = cli(capsys, *args)
        line = one_error(code, err)
        assert "undefined" in line and "p=1" in line and "work" in line
        assert out == ""
