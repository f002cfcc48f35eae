"""The batched paths a large model set takes (perfcast.fit.model.formulas / to_dicts /
predict_many with the fit's lazy alternatives, analysis.ranking.growth_keys): against formulas
written by hand and against the averaging rule evaluated by hand from each hypothesis."""

import math
from fractions import Fraction

import numpy as np
import pytest

from perfcast.analysis.ranking import growth_key, growth_keys
from perfcast.fit import FitOptions, Model, fit_group
from perfcast.fit.model import Term, formulas, predict_many, to_dicts

F = Fraction


def _m(constant, terms, params=("p",), upper=(128.0,)):
    return Model(tuple(params), constant, tuple(Term(c, f) for c, f in terms), upper=upper)


def test_formulas_by_hand():
    models = [
        _m(901.0, [(0.001079, (("p", F(3), 1),))]),
        _m(-4.996e-16, [(0.001, (("p", F(1), 0),))]),            # solver round-off: not printed
        _m(2.5, [(-3.0, (("p", F(1, 2), 0),)), (1.25e-7, (("p", F(2), 2),))]),
        _m(0.0, [(-2.0, (("p", F(-1), 0),))]),
        _m(7.0, []),
        _m(1.0, [(2.0, (("p", F(1), 0), ("n", F(1), 1)))], params=("p", "n"), upper=(64.0, 256.0)),
        _m(-4.996e-16, [(0.001, (("p", F(1), 0),))], upper=None),  # no measured range: printed
    ]
    want = ["901 + 0.001079 * p^3 * log2(p)",
            "0.001 * p",
            "2.5 - 3 * p^(1/2) + 1.25e-7 * p^2 * log2(p)^2",
            "-2 * p^(-1)",
            "7",
            "1 + 2 * p * n * log2(n)",
            "-4.996e-16 + 0.001 * p"]
    assert formulas(models) == want
    assert formulas(models, "python")[2] == "2.5 - 3 * p**(1/2) + 1.25e-7 * p**2 * log2(p)**2"
    assert formulas(models, "latex")[0] == "901 + 0.001079 \\cdot p^{3} \\cdot \\log_2{p}"
    # the same rule one model at a time
    assert [m.formula() for m in models] == want
    # numbers: 4 significant digits, rounding up into the next power, exponents unpadded, zero
    # (either sign) as 0, a NaN coefficient written as such
    edge = [_m(99999.0, [(-1.0e-300, (("p", F(1), 0),))]), _m(-0.0, [(-0.0, (("p", F(1), 0),))]),
            _m(1e16, [(123456.0, (("p", F(1), 0),)), (float("nan"), (("p", F(2), 0),))]),
            _m(-0.00012345, [(9.99949e-5, (("p", F(1), 0),))])]
    # (a zero term is not printed: -0 + -0 * p is the function 0)
    want = ["1e5 - 1e-300 * p", "0", "1e16 + 1.235e5 * p + nan * p^2", "-0.0001234 + 9.999e-5 * p"]
    assert formulas(edge) == want and [m.formula() for m in edge] == want
    assert formulas(edge, "latex")[0] == "1 \\times 10^{5} - 1 \\times 10^{-300} \\cdot p"


def _group(seed=3, S=40):
    rng = np.random.default_rng(seed)
    X = np.array([[4.0], [8.0], [16.0], [32.0], [64.0]])
    p = X[:, 0]
    laws = [lambda p: 5 + 0.3 * p, lambda p: 2 + 0.01 * p ** 2, lambda p: 50 + 4 * np.log2(p) ** 2,
            lambda p: 9 + 0.2 * p * np.log2(p)]
    reps = np.stack([np.stack([laws[s % 4](p) * (1 + rng.uniform(-0.1, 0.1, len(p))) for _ in range(5)], axis=1)
                     for s in range(S)])                                  # (S, points, repetitions)
    mean = reps.mean(axis=2)
    count = np.full(mean.shape, 5.0)
    ssd = ((reps - mean[:, :, None]) ** 2).sum(axis=2)
    return fit_group(X, mean, count, ssd, ["p"], FitOptions(), reps=reps)


def test_lazy_alternatives_give_the_hand_averaged_values_and_intervals():
    g = _group()
    lazy = g.models()
    built = g.models()
    assert any(len(m.alternatives) for m in lazy)
    for m in built:                       # the same models with their alternatives built
        list(m.alternatives)
    cols = {"p": np.array([16.0, 256.0, 4096.0])}
    for averaged in (False, True):
        a = predict_many(lazy, cols, 0.9, averaged)
        b = predict_many(built, cols, 0.9, averaged)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    # the average by hand: w0 * selected + sum(w * alternative), each hypothesis evaluated alone
    v, _, _ = predict_many(lazy, cols, 0.9, True)
    for s, m in enumerate(built):
        w0 = 1 - sum(w for w, _ in m.alternatives)
        for k, x in enumerate(cols["p"]):
            by_hand = w0 * m.predict(x) + sum(w * a.predict(x) for w, a in m.alternatives)
            assert v[s, k] == pytest.approx(by_hand, rel=1e-12)


def test_to_dicts_and_growth_keys_equal_the_one_model_rules():
    g = _group(seed=5)
    models = g.models()
    assert to_dicts(models) == [m.to_dict(False) for m in models]
    assert growth_keys(models) == [growth_key(m) for m in models]
    recs = to_dicts(models)
    same = [i for i, r in enumerate(recs) if r["lead"] == recs[0]["lead"]]
    assert len(same) > 1
    recs[0]["lead"]["p"]["exponent"] = "99"    # records with the same terms share no dicts
    assert recs[same[1]]["lead"]["p"]["exponent"] != "99"
    # the hand-chosen law 50 + 4 log2(p)^2 is found with its lead order
    assert growth_keys(models)[2] == ((F(0), 2),)
    assert math.isclose(models[2].predict(64.0), 50 + 4 * 36, rel_tol=0.15)


def test_group_formulas_of_mixed_terms_by_hand(tmp_path):
    """The formulas of one fitted group whose rows select different terms (a constant, a round-off
    constant, logarithms, a cube) -- perfcast.fit.columns.formulas from the group's arrays, all
    patterns at once -- against the generating formulas written by hand."""
    from perfcast import io
    from perfcast.fit import columns
    from perfcast.modelset import model

    laws = {"a": lambda p: 5 + 0.3 * p, "b": lambda p: 2 + 0.01 * p ** 2, "c": lambda p: 50 + 4 * math.log2(p) ** 2,
            "d": lambda p: 0.001 * p, "e": lambda p: 7.0, "f": lambda p: 9 + 0.2 * p * math.log2(p),
            "g": lambda p: 1000 + 2.5e-7 * p ** 3}
    pts = [4, 8, 16, 32, 64, 128]
    text = ["PARAMETER p", "", "POINTS " + " ".join(f"( {v} )" for v in pts), "", "METRIC time", ""]
    for name, f in laws.items():
        text += [f"REGION {name}"] + ["DATA " + " ".join(repr(f(float(v)) * (1 + e)) for e in (-2e-9, 0.0, 2e-9))
                                      for v in pts] + [""]
    path = tmp_path / "laws.txt"
    path.write_text("\n".join(text) + "\n")
    series = list(model(io.load([path])).series)
    groups, others = columns.split(series)
    assert others == [] and len(groups) == 1          # one group, every row pending: the array path
    names = [sm.callpath for sm in series]
    want = {"a": "5 + 0.3 * p", "b": "2 + 0.01 * p^2", "c": "50 + 4 * log2(p)^2", "d": "0.001 * p", "e": "7",
            "f": "9 + 0.2 * p * log2(p)", "g": "1000 + 2.5e-7 * p^3"}
    assert dict(zip(names, columns.formulas(series))) == want
    latex = dict(zip(names, columns.formulas(series, "latex")))
    assert latex["c"] == "50 + 4 \\cdot \\log_2^{2}{p}" and latex["e"] == "7"
    assert latex["g"] == "1000 + 2.5 \\times 10^{-7} \\cdot p^{3}"
    assert dict(zip(names, columns.formulas(series, "python")))["b"] == "2 + 0.01 * p**2"
    # the same texts one built model at a time
    assert [sm.model.formula() for sm in series] == [want[n] for n in names]


def test_line_test_is_numpys_isclose():
    """perfcast.fit.lines: a point is on a line when its other coordinates are np.isclose(rtol=1e-12,
    atol=0) to the line's -- the paths for one or a few points (predictions, rankings) test floats
    as numpy does."""
    from perfcast.fit.lines import _on, line_at

    rng = np.random.default_rng(5)
    x = rng.normal(size=2000) * 10.0 ** rng.integers(-5, 6, 2000)
    y = x * (1 + rng.normal(size=2000) * 1e-12)
    special = [0.0, -0.0, 1.0, 1.0 + 2e-12, math.inf, -math.inf, math.nan, 256.0, 256.0 * (1 + 9e-13)]
    pairs = list(zip(x.tolist(), y.tolist())) + [(a, b) for a in special for b in special]
    for a, b in pairs:
        want = bool(np.isclose(a, b, rtol=1e-12, atol=0.0))
        assert bool(_on([(1, (b,), 0.5)], [np.array([a]), np.array([3.0])])[0, 0]) is want
        hit = line_at([(1, (b,), 0.5)], ("n", "p"), {"n": a, "p": 3.0})
        assert (hit is not None) is want
        if want:
            assert hit["factor"] == math.exp(0.5)
    # several points at once (a ranking's three; twenty: one array per test), two lines along p
    # and one along n, against np.isclose of each coordinate
    for n in (3, 20):
        sel = rng.integers(len(pairs), size=n)
        a = np.array([pairs[i][0] for i in sel])
        b = float(pairs[sel[0]][1])
        lines = [(1, (b,), 0.1), (1, (a[-1],), 0.2), (0, (2.0,), 0.3)]
        pcol = np.where(np.arange(n) % 2 == 0, 2.0, 2.0 * (1 + 3e-12))
        want = np.stack([np.isclose(a, b, rtol=1e-12, atol=0.0), np.isclose(a, a[-1], rtol=1e-12, atol=0.0),
                         np.isclose(pcol, 2.0, rtol=1e-12, atol=0.0)])
        assert (_on(lines, [a, pcol]) == want).all()


def test_unique_rows_is_numpys_row_unique():
    # ground truth: np.unique(axis=0); block numbers (-1: no term) of 1-3 parameters, and a
    # range too wide for one integer key (numpy's own path)
    import numpy as np

    from perfcast.fit.core import _unique_rows

    rng = np.random.default_rng(5)
    for a in [rng.integers(-1, 45, (3000, m)).astype(np.int16) for m in (1, 2, 3)] + [
            np.array([[2**40, -2**40, 7], [0, 0, 0], [2**40, -2**40, 7]]), np.full((4, 2), -1)]:
        want, inv = np.unique(a, axis=0, return_inverse=True)
        got, ginv = _unique_rows(a)
        assert got.tolist() == want.tolist()
        assert ginv.tolist() == np.asarray(inv).ravel().tolist()
